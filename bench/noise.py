"""Noise sampler throughput: hardened (exact discrete) vs float, on 2e7 values each.

Prints values per second for each sampler and the hardened/float time ratio (target: <= 3x),
measured in the same run with paired, interleaved repeats (medians). Both go through
:mod:`tsdp.mechanisms.noise` with its chunking and thread pool, as a release does.

    PYTHONPATH=. python bench/noise.py [N] [REPEATS]
"""

from __future__ import annotations

import os
import statistics
import sys
import time

import numpy as np

from tsdp.accounting.discrete import choose_granularity
from tsdp.mechanisms.noise import gaussian_noise, laplace_noise


def main() -> None:
    n = int(float(sys.argv[1])) if len(sys.argv) > 1 else 20_000_000
    repeats = int(sys.argv[2]) if len(sys.argv) > 2 else 5
    sigma = scale = 4.22
    g_gauss = choose_granularity(sigma, 1.0, 1, "l2")
    g_lap = choose_granularity(scale, 1.0, 1, "l1")
    rng = np.random.default_rng(0)
    runs = {
        "gaussian float": lambda: gaussian_noise(rng, sigma, n),
        "gaussian hardened": lambda: gaussian_noise(rng, sigma, n, granularity=g_gauss),
        "laplace float": lambda: laplace_noise(rng, scale, n),
        "laplace hardened": lambda: laplace_noise(rng, scale, n, granularity=g_lap),
    }
    times: dict[str, list[float]] = {k: [] for k in runs}
    print(f"load average before: {os.getloadavg()[0]:.2f}; {n:,} values, {repeats} interleaved repeats")
    for _ in range(repeats):
        for name, run in runs.items():
            start = time.perf_counter()
            run()
            times[name].append(time.perf_counter() - start)
    med = {k: statistics.median(v) for k, v in times.items()}
    for name, t in med.items():
        print(f"{name:18s} {n / t / 1e6:8.1f} M values/s  ({t:.3f} s)")
    for kind in ("gaussian", "laplace"):
        ratio = statistics.median(h / f for h, f in zip(times[f"{kind} hardened"], times[f"{kind} float"]))
        print(f"{kind}: hardened / float time = {ratio:.2f}x (target <= 3x) -> {'met' if ratio <= 3 else 'NOT met'}")
    print(f"load average after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()

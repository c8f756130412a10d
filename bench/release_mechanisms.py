"""Speed of the time-series mechanisms, each against a reference timed in the same run.

1. filter-subsample (Koga et al.) on one series of length 10^6 (I = 10^5, p = 0.1, Gaussian
   kernel sigma_g = 10), conditional and paper accounting. Target: under 2 s.
   Reference: the plain Gaussian baseline on the same series.
2. FAST (Fan and Xiong) on 10,000 series x 2,000 steps (adaptive, Laplace noise).
   Reference: LPA, Laplace noise at every step of the same panel (the paper's baseline).

Prints each time and its ratio to the reference; exit status 1 if the 2 s target is missed.
"""

from __future__ import annotations

import argparse
import sys

import numpy as np

from tsdp.accounting.sensitivity import ContributionBounds
from tsdp.mechanisms.baseline import Panel
from tsdp.mechanisms.gaussian import release_gaussian
from tsdp.mechanisms.laplace import release_laplace
from tsdp.mechanisms.fast import release_fast
from tsdp.mechanisms.subsample import release_filter_subsample
from timing import best_of  # noqa: E402  (bench/timing.py, beside this script)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--length", type=int, default=1_000_000)
    parser.add_argument("--series", type=int, default=10_000)
    parser.add_argument("--steps", type=int, default=2_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    rng = np.random.default_rng(0)

    T = args.length
    t = np.arange(T)
    x = (200 + 80 * np.sin(2 * np.pi * t / 24) + rng.normal(0, 5, T)).clip(0)[None, :]
    panel = Panel(1, T, ContributionBounds("user", 1.0, max_steps=T // 10))
    ref = best_of(args.repeat, lambda: release_gaussian(x, panel, 0.5, 1e-4, rng))
    print(f"1. one series of length {T:,} (I = {T // 10:,}, p = 0.1, Gaussian kernel sigma_g = 10)")
    print(f"   reference: plain Gaussian baseline          {ref:7.3f} s")
    ok = True
    for accounting in ("conditional", "paper"):
        took = best_of(args.repeat, lambda: release_filter_subsample(x, panel, 0.5, 1e-4, rng, 0.1, "gaussian",
                                                                     accounting))
        print(f"   filter-subsample, {accounting:<11} accounting  {took:7.3f} s   ({took / ref:5.1f}x reference; target < 2 s)")
        ok &= took < 2.0

    S, n = args.series, args.steps
    panel_values = rng.poisson(100, (S, n)).astype(float)
    fast_panel = Panel(S, n, ContributionBounds("user", 1.0, max_steps=n, series_per_unit=1))
    lpa_panel = Panel(S, n, ContributionBounds("user", 1.0, max_steps=n, series_per_unit=1))
    ref = best_of(args.repeat, lambda: release_laplace(panel_values, lpa_panel, 1.0, rng))
    took = best_of(args.repeat, lambda: release_fast(panel_values, fast_panel, 1.0, rng))
    print(f"\n2. FAST on {S:,} series x {n:,} steps (adaptive, Laplace)")
    print(f"   reference: LPA (Laplace at every step)      {ref:7.3f} s")
    print(f"   FAST                                        {took:7.3f} s   ({took / ref:5.1f}x reference)")
    print("\nall targets met" if ok else "\nTARGET MISSED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

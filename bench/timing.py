"""Shared timing helpers of the bench scripts (imported from the scripts' own folder).

Compared commands run interleaved (A B C A B C ...), so that machine load hits each of them
alike, and the benches print medians and the spread of the ratios of each round (A_i / B_i):
a best-of-N of unpaired runs lets pass/fail flip with the load of the moment.
"""

from __future__ import annotations

import statistics
import subprocess
import time
from dataclasses import dataclass


def timed(fn, repeat: int = 3):
    """(best wall time over ``repeat`` calls of ``fn``, the last call's return value)."""
    best, value = float("inf"), None
    for _ in range(repeat):
        start = time.perf_counter()
        value = fn()
        best = min(best, time.perf_counter() - start)
    return best, value


def best_of(repeat: int, fn) -> float:
    """Best wall time over ``repeat`` calls of ``fn``."""
    return timed(fn, repeat)[0]


@dataclass
class Paired:
    """Wall times of several callables run interleaved, round by round."""

    names: list[str]
    times: dict[str, list[float]]
    values: dict[str, object]

    def median(self, name: str) -> float:
        return statistics.median(self.times[name])

    def ratios(self, name: str, reference: str) -> list[float]:
        return [a / b for a, b in zip(self.times[name], self.times[reference])]

    def ratio(self, name: str, reference: str) -> float:
        """Median of the per-round ratios name / reference."""
        return statistics.median(self.ratios(name, reference))

    def spread(self, name: str, reference: str) -> str:
        """The per-round ratios' range and interquartile range, as text."""
        r = sorted(self.ratios(name, reference))
        if len(r) < 4:
            return f"range {r[0]:.2f}-{r[-1]:.2f}"
        q1, _, q3 = statistics.quantiles(r, n=4)
        return f"range {r[0]:.2f}-{r[-1]:.2f}, IQR {q1:.2f}-{q3:.2f}"


def paired(functions: dict[str, object], rounds: int, warmup: int = 1) -> Paired:
    """Run every callable once per round, in turn (the order rotates each round)."""
    names = list(functions)
    times: dict[str, list[float]] = {n: [] for n in names}
    values: dict[str, object] = {}
    for r in range(warmup + rounds):
        order = names[r % len(names):] + names[:r % len(names)]
        for name in order:
            start = time.perf_counter()
            values[name] = functions[name]()
            elapsed = time.perf_counter() - start
            if r >= warmup:
                times[name].append(elapsed)
    return Paired(names, times, values)


def command(args: list[str], env: dict | None = None, cwd: str | None = None, ok=(0,)):
    """A callable that runs ``args`` as a subprocess (output discarded) and checks its exit code."""

    def run() -> int:
        done = subprocess.run(args, env=env, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        if done.returncode not in ok:
            raise SystemExit(f"{' '.join(args)} exited {done.returncode}: {done.stderr.decode()[-500:]}")
        return done.returncode

    return run


def verdict(passed: bool) -> str:
    return "PASS" if passed else "FAIL"


def load_average() -> str:
    """The machine's load average (1, 5, 15 min) as text: the benches run on shared cores, and the
    figures are read against it."""
    import os

    return "load average (1, 5, 15 min): " + ", ".join(f"{v:.2f}" for v in os.getloadavg())

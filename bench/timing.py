"""Shared timing helper of the bench scripts (imported from the scripts' own folder)."""

from __future__ import annotations

import time


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

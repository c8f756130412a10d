"""Utility metrics of a release against the true series (internal diagnostics, never released).

MAE = mean |r - x|;  MRE = mean |r - x| / max(x, s) with sanitary bound s (1 by default, as in
Fan and Xiong 2012 and Koga et al. 2022), which keeps zero counts from dividing by zero.
"""

from __future__ import annotations

import numpy as np


def mae(released: np.ndarray, truth: np.ndarray) -> float:
    return float(np.mean(np.abs(released - truth)))


def mre(released: np.ndarray, truth: np.ndarray, sanitary_bound: float = 1.0) -> float:
    return float(np.mean(np.abs(released - truth) / np.maximum(truth, sanitary_bound)))


def mae_over_runs(runs, truth: np.ndarray) -> np.ndarray:
    """Elementwise mean of |estimate - truth| over an iterable of estimate arrays (e.g. per group)."""
    total, count = np.zeros_like(truth, dtype=float), 0
    for estimate in runs:
        total += np.abs(np.asarray(estimate, dtype=float) - truth)
        count += 1
    return total / max(count, 1)


def summarize(values: list[float]) -> dict[str, float]:
    """Mean, standard deviation and range of repeated measurements."""
    arr = np.asarray(values, dtype=float)
    return {"mean": float(arr.mean()), "sd": float(arr.std(ddof=1)) if arr.size > 1 else 0.0,
            "min": float(arr.min()), "max": float(arr.max())}

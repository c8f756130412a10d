"""The law of the sampled changed cells of one unit under subsampling in time, and the checks of
the sampling parameters (Koga, Meehan and Chaudhuri 2022, arXiv:2201.04762; the conditioning on
non-empty samples and the spread over several series are tsdp's, not the paper's).

Empty samples are redrawn (J is data-independent, so redrawing is still private). Conditioning on
``J != {}`` multiplies every failure probability and every k >= 1 weight by
``r = 1 / (1 - (1 - p)^T)`` (spec section 4.2); all functions below take ``n_steps`` for that.

A unit's changed cells across series (tsdp, not in the paper). The series are sampled
independently with the same sigma, so given every J the touched series together are one Gaussian
mechanism with sensitivity ``M sqrt(k)``, k the sampled changed cells over all of them: every
accounting here treats the unit's ``C`` changed cells jointly (``I`` above becomes C), not series by
series. Only the redraw depends on how the cells are spread: each touched series is conditioned on
its own non-empty J. For a pattern of C cells in at most n series, the law of k is dominated by

    Pr[k >= j] <= min(1, sum_{i >= j} Bin(i; C, p) r^min(i, n))          (j >= 1)

Proof: condition series by series; a touched series whose changed cells were sampled carries the
factor r (its J is non-empty anyway), one whose changed cells were not carries
``r (1 - (1 - p)^(T - c)) <= 1`` after summing over its other cells; at most min(k, n) series are
hit. The bound is increasing in C and n, and equals the exact conditioned law for n = 1. Every
profile here is an expectation of a non-decreasing function of k (deltaGauss in M sqrt(k), the
failure indicator of k > I'), so the dominating law bounds it for every spread of the cells
(:func:`unit_sample_law`; the filter's failure event, per series, takes a union over the n series).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import stats

from tsdp.accounting.calibrate import smallest_integer_meeting
from tsdp.errors import UsageError


def check_rate(p: float, option: str = "--sampling-rate") -> None:
    if not (isinstance(p, (int, float, np.floating)) and math.isfinite(p) and 0 < p <= 1):
        raise UsageError(f"{option} must be in (0, 1], got {p}")


def check_split(split: float, option: str = "--delta-split") -> None:
    if not (isinstance(split, (int, float, np.floating)) and math.isfinite(split) and 0 < split < 1):
        raise UsageError(f"{option} must be in (0, 1), got {split}")


def check_participation(I: int, n_steps: int | None = None, option: str = "--max-steps") -> None:
    if isinstance(I, bool) or not isinstance(I, (int, np.integer)) or I < 1:
        raise UsageError(f"{option} (participation bound I) must be an integer >= 1, got {I}")
    if n_steps is not None and I > n_steps:
        raise UsageError(f"{option} {I} exceeds the series length T={n_steps}: one individual "
                         "cannot participate in more steps than there are; use --max-steps "
                         f"{n_steps} (no participation assumption)")


def empty_probability(n_steps: int, p: float) -> float:
    """``Pr[J = {}] = (1 - p)^T`` for Bernoulli(p) sampling of T steps."""
    if p >= 1:
        return 0.0
    return math.exp(n_steps * math.log1p(-p))


def redraw_inflation(n_steps: int | None, p: float) -> float:
    """``1 / (1 - (1 - p)^T)``: the factor by which redrawing an empty J inflates failure
    probabilities and the k >= 1 mixture weights (1 when ``n_steps`` is None)."""
    if n_steps is None:
        return 1.0
    return 1.0 / -math.expm1(n_steps * math.log1p(-p)) if p < 1 else 1.0


def log_failure_inflation(n_steps: int | None, p: float, series: int = 1) -> float:
    """``log(n r)``: a per-series failure probability, conditioned on that series' non-empty J,
    summed over the ``series`` n a unit can touch (union bound)."""
    return math.log(series) + math.log(redraw_inflation(n_steps, p))


def unit_sample_law(cells: int, p: float, n_steps: int | None = None, series: int = 1) -> np.ndarray:
    """``pmf[k]``, k = 0..C, of the law that dominates the sampled changed cells k of a unit whose
    ``cells`` C changed cells lie in at most ``series`` n series of ``n_steps`` T steps, each series'
    J conditioned non-empty: tails ``min(1, sum_{i >= j} w_i)``, ``w_i = Bin(i; C, p) r^min(i, n)``,
    for j >= 1 (module docstring). n = 1 (or T None) is the exactly conditioned Bin(C, p). The whole
    law (C + 1 numbers); :func:`subsample_mixture` evaluates only the part it keeps."""
    _check_law(cells, p, series)
    tail = np.minimum(1.0, np.exp(_log_weight_tail(np.arange(cells + 2), cells, p, n_steps, series)))
    tail[0] = 1.0
    return tail[:-1] - tail[1:]


def _check_law(cells: int, p: float, series: int) -> None:
    check_participation(cells, option="cells")
    check_rate(p)
    if not (isinstance(series, (int, np.integer)) and series >= 1):
        raise ValueError("series must be an integer >= 1")


def _log_weight(k, cells: int, p: float, n_steps: int | None, series: int):
    """``log w_k = log Bin(k; C, p) + min(k, n) log r`` (vectorised over k)."""
    k = np.asarray(k)
    return stats.binom.logpmf(k, cells, p) + np.minimum(k, series) * math.log(redraw_inflation(n_steps, p))


def _log_weight_tail(j, cells: int, p: float, n_steps: int | None, series: int):
    """``log sum_{k >= j} w_k`` (not capped at 0), vectorised over the integers ``j``: for j >= n it
    is ``n log r + log Pr[Bin(C, p) >= j]``; below n the terms k < n are summed one by one (n is at
    most the number of series, so no array of C entries is made)."""
    j = np.asarray(j, dtype=np.int64)
    log_r = math.log(redraw_inflation(n_steps, p))
    with np.errstate(divide="ignore"):
        out = np.asarray(series * log_r + stats.binom.logsf(j - 1, cells, p), dtype=float)
        low = j < series
        if np.any(low):
            k = np.arange(min(series, cells + 1))
            below = np.logaddexp.accumulate(_log_weight(k, cells, p, n_steps, series)[::-1])[::-1]
            rest = series * log_r + float(stats.binom.logsf(series - 1, cells, p))  # k >= n
            idx = j[low]
            part = np.where(idx < k.size, below[np.minimum(idx, k.size - 1)], -np.inf)
            out[low] = np.logaddexp(part, rest)
    return out if out.ndim else float(out)


def log_unit_tail(i, cells: int, p: float, n_steps: int | None = None, series: int = 1):
    """``log Pr[k > i]`` under :func:`unit_sample_law` (vectorised over ``i``; ``-inf`` for i >= C).
    For n = 1: ``log(r Pr[Bin(C, p) > i])``, capped at 0."""
    i = np.asarray(i)
    out = np.minimum(0.0, _log_weight_tail(np.floor(i).astype(np.int64) + 1, cells, p, n_steps, series))
    return out if np.ndim(out) else float(out)


def binomial_tail(i, n: int, p: float):
    """``Pr[Bin(n, p) > i]`` (scipy's survival function; no float binomial coefficients)."""
    return stats.binom.sf(i, n, p)


def log_binomial_tail(i, n: int, p: float):
    """``log Pr[Bin(n, p) > i]`` in log space (``-inf`` for i >= n)."""
    return stats.binom.logsf(i, n, p)


@dataclass(frozen=True)
class Mixture:
    """Weights over k = |J cap j_i| and the sensitivities M sqrt(k) of the exact profile."""

    weights: np.ndarray
    sensitivities: np.ndarray
    counts: np.ndarray  # the k of each component

    def pairs(self) -> tuple[tuple[float, float], ...]:
        return tuple(zip(self.weights.tolist(), self.sensitivities.tolist()))


def subsample_mixture(I: int, p: float, M: float = 1.0, n_steps: int | None = None,
                      truncation: float = 0.0, series: int = 1) -> Mixture:
    """Components ``(w_k, M sqrt(k))``, w the law of the sampled changed cells k of a unit with ``I``
    changed cells in at most ``series`` series of ``n_steps`` steps, each J conditioned non-empty
    (:func:`unit_sample_law`; for one series ``Bin(k; I, p)`` with the k >= 1 weights divided by
    ``1 - (1 - p)^T``, the k = 0 weight taking the rest).

    With ``truncation > 0`` the mass of the k whose lower tail is at most ``truncation`` is merged
    into the lowest kept k, and the mass above the upper ``truncation`` quantile into k = I (the
    largest sensitivity): both only increase the profile (deltaGauss is increasing in the
    sensitivity), so it stays an upper bound. Only the kept k are evaluated: the ends are found by
    bisection on the tails, the kept weights are the w_k themselves (the law is uncapped there), the
    top mass is the tail above the window and the lowest kept k takes the rest.
    """
    check_participation(I)
    _check_law(I, p, series)
    if truncation <= 0:  # the whole law
        counts = np.arange(I + 1)
        return Mixture(unit_sample_law(I, p, n_steps, series), M * np.sqrt(counts.astype(float)), counts)

    def tail(j: int) -> float:  # Pr[k >= j], capped
        return 1.0 if j <= 0 else min(1.0, math.exp(_log_weight_tail(j, I, p, n_steps, series)))

    # the lowest k whose cdf exceeds the truncation, and the lowest whose upper tail is within it
    lo = smallest_integer_meeting(lambda k: 1.0 - tail(k + 1) > truncation, 0, I)
    hi = max(smallest_integer_meeting(lambda k: tail(k + 1) <= truncation, 0, I), lo)
    kept = np.arange(lo + 1, hi + 1)
    with np.errstate(under="ignore"):
        inner = np.exp(_log_weight(kept, I, p, n_steps, series))  # tail(lo + 1) < 1: w_k is the law here
    top = tail(hi + 1)
    counts = np.concatenate(([lo], kept, [I] if hi < I else []))
    weights = np.concatenate(([max(0.0, 1.0 - inner.sum() - top)], inner, [top] if hi < I else []))
    weights = weights / weights.sum()
    return Mixture(weights, M * np.sqrt(counts.astype(float)), counts.astype(np.int64))

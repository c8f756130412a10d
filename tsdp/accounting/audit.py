"""Empirical privacy auditing: LOWER bounds on epsilon from a distinguishing test.

An audit runs a mechanism many times on two neighbouring inputs D and D' and tries to tell the
outputs apart (``specs/audit.md`` section 2). It cannot prove a claim, but it can refute one: every
number this module returns is a **lower bound** on the epsilon of the mechanism (at the given
delta), valid with the stated confidence. A claimed (epsilon, delta) is refuted when the lower
bound exceeds the claimed epsilon.

The test (spec audit.md section 2). Given N i.i.d. draws of a scalar statistic under D and N under
D' (in a data-independent order), each side is split in two halves:

1. on the *first* halves choose the event ``E = {stat > t}`` or ``E = {stat < t}`` and which side
   plays D (the privacy definition is symmetric in the neighbours, so both orders are tests) that
   maximise the Clopper-Pearson objective ``ln((p_lo - delta) / q_hi)`` computed on the first
   halves. This guards against q = 0 without a pseudo-count (few counts give wide bounds); the
   bounds of this step are taken at the simultaneous (Bonferroni) level ``1 - (1 - confidence) / C``
   over the C candidate events, so that the best of thousands of candidates is not a lucky tail
   count (winner's curse) that the second halves then fail to confirm;
2. on the *second* halves count ``p = P[E | D]`` and ``q = P[E | D']`` and return

       eps_lo = ln((p_lo - delta) / q_hi),

   ``p_lo`` the one-sided Clopper-Pearson lower bound on p and ``q_hi`` the one-sided upper bound
   on q, each at level ``confidence`` (95 % by default). eps_lo is reported as 0 when
   ``p_lo <= delta`` or the ratio is below 1 (epsilon >= 0 is always true).

Why it is a lower bound: an (epsilon, delta)-DP mechanism satisfies ``P[E | D] <= e^epsilon
P[E | D'] + delta`` for every event E that is fixed before the counted samples are seen (the
threshold comes from the other half; never reuse it, spec section 3). With probability at least
``1 - 2 (1 - confidence)`` (union bound over the two one-sided bounds; 90 % for the default) both
``p >= p_lo`` and ``q <= q_hi``, and then ``epsilon >= ln((p - delta)/q) >= eps_lo``.

The best statistic is the log-likelihood ratio of the whole release under (D, D') (Neyman-Pearson:
its threshold tests are the most powerful); :func:`gaussian_llr` and :func:`laplace_llr` give it
exactly for additive Gaussian and Laplace noise between two known mean vectors.

Pure numpy/scipy; vectorised (sorting and ``searchsorted``, no loop over samples).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import stats

DIRECTIONS = (">", "<")
SIDES = ("D", "D'")
MAX_CANDIDATES = 6000  # thresholds tried on the first halves (all of them when there are fewer)


@dataclass(frozen=True)
class EpsilonLowerBound:
    """The outcome of one distinguishing test: a LOWER bound on epsilon at ``delta``.

    ``eps_lower`` is valid with probability at least ``1 - 2 (1 - confidence)`` (both one-sided
    Clopper-Pearson bounds hold). The event tested is ``stat {direction} threshold``; ``numerator``
    says which side plays D in ``P[E | D] <= e^eps P[E | D'] + delta`` (``"D"``: the first sample
    given to :func:`epsilon_lower_bound`, ``"D'"``: the second). ``p_hat`` and ``q_hat`` are the
    frequencies of the event on the counting halves of the numerator and denominator sides,
    ``p_lo`` and ``q_hi`` their one-sided Clopper-Pearson bounds, ``n`` the draws per side
    (half of them were used to count).
    """

    eps_lower: float
    threshold: float
    direction: str
    p_hat: float
    q_hat: float
    n: int
    confidence: float
    delta: float = 0.0
    numerator: str = "D"
    p_lo: float = 0.0
    q_hi: float = 1.0
    bound: str = "lower"

    def refutes(self, epsilon: float) -> bool:
        """True when this lower bound exceeds a claimed ``epsilon`` (at the same delta)."""
        return self.eps_lower > epsilon

    def describe(self) -> str:
        other = SIDES[1 - SIDES.index(self.numerator)]
        return (f"eps >= {self.eps_lower:.4g} (LOWER bound, delta {self.delta:g}, each CP bound at "
                f"{self.confidence:.0%}): P[stat {self.direction} {self.threshold:.6g} | {self.numerator}] = "
                f"{self.p_hat:.4g} (>= {self.p_lo:.4g}), | {other}] = {self.q_hat:.4g} (<= {self.q_hi:.4g}), "
                f"N = {self.n} per side")


# ---------------------------------------------------------------------------------------------
# Clopper-Pearson bounds
# ---------------------------------------------------------------------------------------------


def clopper_pearson_lower(k, n, confidence: float = 0.95):
    """One-sided Clopper-Pearson lower bound on a binomial proportion (``k`` successes of ``n``).

    ``p_lo = Beta.ppf(1 - confidence; k, n - k + 1)``, and 0 when ``k = 0``
    (Clopper and Pearson 1934; spec audit.md section 2). ``P[p >= p_lo] >= confidence``.
    Vectorised over ``k`` and ``n``.
    """
    k, n = _check_counts(k, n, confidence)
    safe = np.where(k > 0, k, 1)
    out = np.where(k > 0, stats.beta.ppf(1.0 - confidence, safe, n - safe + 1), 0.0)
    return out if out.ndim else float(out)


def clopper_pearson_upper(k, n, confidence: float = 0.95):
    """One-sided Clopper-Pearson upper bound on a binomial proportion (``k`` successes of ``n``).

    ``q_hi = Beta.ppf(confidence; k + 1, n - k)``, and 1 when ``k = n``
    (Clopper and Pearson 1934; spec audit.md section 2). ``P[q <= q_hi] >= confidence``.
    Vectorised over ``k`` and ``n``.
    """
    k, n = _check_counts(k, n, confidence)
    safe = np.where(k < n, k, n - 1)
    out = np.where(k < n, stats.beta.ppf(confidence, safe + 1, n - safe), 1.0)
    return out if out.ndim else float(out)


def _check_counts(k, n, confidence: float) -> tuple[np.ndarray, np.ndarray]:
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    k = np.asarray(k)
    n = np.asarray(n)
    if np.any(n < 1) or np.any(k < 0) or np.any(k > n):
        raise ValueError("need 0 <= k <= n and n >= 1")
    return k.astype(float), n.astype(float)


def lower_bound_from_counts(k_num: int, k_den: int, n: int, delta: float = 0.0,
                            confidence: float = 0.95) -> float:
    """``eps_lo = ln((p_lo - delta) / q_hi)`` for an event seen ``k_num`` times in ``n`` draws under
    the numerator side and ``k_den`` times in ``n`` under the other; 0 when ``p_lo <= delta`` or the
    ratio is below 1. The event must not have been chosen on these draws (spec audit.md section 2).
    """
    return float(_objective(np.asarray([k_num]), np.asarray([k_den]), n, n, delta, confidence)[0].clip(0.0))


def _objective(k_num: np.ndarray, k_den: np.ndarray, n_num: int, n_den: int, delta: float,
               confidence: float) -> np.ndarray:
    """``ln((p_lo - delta) / q_hi)`` elementwise (-inf where ``p_lo <= delta``); the bounds are
    evaluated once per distinct count."""
    k_num_u, num_inv = np.unique(k_num, return_inverse=True)
    k_den_u, den_inv = np.unique(k_den, return_inverse=True)
    p_lo = np.atleast_1d(clopper_pearson_lower(k_num_u, n_num, confidence))[num_inv]
    q_hi = np.atleast_1d(clopper_pearson_upper(k_den_u, n_den, confidence))[den_inv]
    gap = p_lo - delta
    safe = np.where(gap > 0, gap, 1.0)
    return np.where(gap > 0, np.log(safe) - np.log(q_hi), -np.inf)


# ---------------------------------------------------------------------------------------------
# the distinguishing test
# ---------------------------------------------------------------------------------------------


def epsilon_lower_bound(stat_d, stat_d_prime, delta: float = 0.0, confidence: float = 0.95,
                        max_candidates: int = MAX_CANDIDATES) -> EpsilonLowerBound:
    """Split-sample threshold test on a scalar statistic: a LOWER bound on epsilon at ``delta``.

    ``stat_d`` and ``stat_d_prime``: 1-D arrays of the same length N, i.i.d. draws of the statistic
    under D and under D' (in a data-independent order: the first ``N // 2`` of each side choose the
    test, the rest count). See the module docstring for the formulas (spec audit.md section 2).

    Thresholds tried: the midpoints between consecutive distinct values of the pooled first halves
    (so atoms of the statistic are never split), thinned to ``max_candidates`` ranks, dense at both
    ends and log-spaced in between, when there are more.
    """
    a = _as_sample(stat_d, "stat_d")
    b = _as_sample(stat_d_prime, "stat_d_prime")
    if a.size != b.size:
        raise ValueError(f"need the same number of draws on both sides, got {a.size} and {b.size}")
    if a.size < 4:
        raise ValueError(f"need at least 4 draws per side, got {a.size}")
    if not 0.0 <= delta < 1.0:
        raise ValueError(f"delta must be in [0, 1), got {delta}")
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    n = a.size
    half = n // 2
    a1, a2 = np.sort(a[:half]), np.sort(a[half:])
    b1, b2 = np.sort(b[:half]), np.sort(b[half:])

    values = np.unique(np.concatenate([a1, b1]))
    if values.size < 2:  # the first halves are one constant: no event separates anything
        return EpsilonLowerBound(0.0, math.nan, ">", 0.0, 0.0, n, confidence, delta)
    thresholds = values[:-1] + (values[1:] - values[:-1]) / 2.0
    thresholds = thresholds[_candidate_ranks(thresholds.size, max_candidates)]

    # A simultaneous (Bonferroni) level over the 4 x thresholds candidates: the best of thousands
    # of first-half lower bounds at 95 % each is optimistic in the tails (winner's curse).
    select_conf = 1.0 - (1.0 - confidence) / (4 * thresholds.size)
    best = None
    for direction in DIRECTIONS:
        count_a = _count(a1, thresholds, direction)
        count_b = _count(b1, thresholds, direction)
        for numerator, (k_num, k_den) in zip(SIDES, ((count_a, count_b), (count_b, count_a))):
            score = _objective(k_num, k_den, half, half, delta, select_conf)
            i = int(np.argmax(score))
            if best is None or score[i] > best[0]:
                best = (score[i], float(thresholds[i]), direction, numerator)
    _, threshold, direction, numerator = best

    m = n - half
    t = np.asarray([threshold])
    count_a2 = int(_count(a2, t, direction)[0])
    count_b2 = int(_count(b2, t, direction)[0])
    k_num, k_den = (count_a2, count_b2) if numerator == "D" else (count_b2, count_a2)
    p_lo = clopper_pearson_lower(k_num, m, confidence)
    q_hi = clopper_pearson_upper(k_den, m, confidence)
    eps = math.log((p_lo - delta) / q_hi) if p_lo > delta else 0.0
    return EpsilonLowerBound(max(eps, 0.0), threshold, direction, k_num / m, k_den / m, n, confidence,
                             float(delta), numerator, float(p_lo), float(q_hi))


def _as_sample(x, name: str) -> np.ndarray:
    arr = np.asarray(x, dtype=np.float64)
    if arr.ndim != 1:
        raise ValueError(f"{name} must be a 1-D array of a scalar statistic, got shape {arr.shape}")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} must be finite (no NaN or infinity)")
    return arr


def _count(sorted_x: np.ndarray, thresholds: np.ndarray, direction: str) -> np.ndarray:
    """How many of ``sorted_x`` satisfy ``x > t`` (``direction`` ">") or ``x < t``, per threshold."""
    if direction == ">":
        return sorted_x.size - np.searchsorted(sorted_x, thresholds, side="right")
    return np.searchsorted(sorted_x, thresholds, side="left")


def _candidate_ranks(size: int, max_candidates: int) -> np.ndarray:
    """All ranks when there are at most ``max_candidates``; else every rank near both ends and
    log-spaced ranks from each end (plus a linear grid through the bulk)."""
    if size <= max_candidates:
        return np.arange(size)
    g = max(max_candidates // 3, 2)
    from_end = np.unique(np.round(np.geomspace(1, size, g)).astype(np.int64)) - 1
    grid = np.concatenate([from_end, size - 1 - from_end,
                           np.round(np.linspace(0, size - 1, g)).astype(np.int64)])
    return np.unique(grid)


# ---------------------------------------------------------------------------------------------
# exact log-likelihood ratios of additive noise
# ---------------------------------------------------------------------------------------------


def gaussian_llr(x, mean_d, mean_d_prime, sigma) -> np.ndarray:
    """Exact ``ln p_D(x) / p_D'(x)`` of releases ``x = mean + N(0, sigma^2)`` per coordinate.

    ``x``: (N, d) releases (or (d,)); ``mean_d``, ``mean_d_prime``: the (d,) true values under D and
    D'; ``sigma``: a scalar or anything broadcastable to ``x`` (per coordinate or per release).
    Coordinates where ``x`` is NaN were not released and contribute 0; coordinates where the means
    agree contribute 0 exactly. Per coordinate

        ln p_D / p_D' = (a - b) (x - (a + b)/2) / sigma^2,   a = mean_d, b = mean_d_prime.
    """
    x, a, b, diff, scale = _llr_inputs(x, mean_d, mean_d_prime, sigma, "sigma")
    changed = np.flatnonzero(diff != 0)
    x, a, b, diff = x[..., changed], a[changed], b[changed], diff[changed]
    scale = scale[..., changed] if scale.ndim and scale.shape[-1] > 1 else scale
    terms = diff * (x - (a + b) / 2.0) / (scale * scale)
    return np.nansum(terms, axis=-1)


def laplace_llr(x, mean_d, mean_d_prime, scale) -> np.ndarray:
    """Exact ``ln p_D(x) / p_D'(x)`` of releases ``x = mean + Laplace(0, scale)`` per coordinate.

    Same shapes and NaN rule as :func:`gaussian_llr`. Per coordinate
    ``(|x - b| - |x - a|) / scale = 2 clip(s (x - m), -h, h) / scale`` with ``m = (a + b)/2``,
    ``h = |a - b|/2`` and ``s = sign(a - b)``; the clipped form makes the two atoms at
    ``+-|a - b| / scale`` exact (no rounding spreads them).
    """
    x, a, b, diff, scale = _llr_inputs(x, mean_d, mean_d_prime, scale, "scale")
    changed = np.flatnonzero(diff != 0)
    x, a, b, diff = x[..., changed], a[changed], b[changed], diff[changed]
    scale = scale[..., changed] if scale.ndim and scale.shape[-1] > 1 else scale
    h = np.abs(diff) / 2.0
    terms = 2.0 * np.clip(np.sign(diff) * (x - (a + b) / 2.0), -h, h) / scale
    return np.nansum(terms, axis=-1)


def _llr_inputs(x, mean_d, mean_d_prime, noise, name: str):
    x = np.asarray(x, dtype=np.float64)
    a = np.asarray(mean_d, dtype=np.float64).ravel()
    b = np.asarray(mean_d_prime, dtype=np.float64).ravel()
    if a.shape != b.shape or x.shape[-1:] != a.shape:
        raise ValueError(f"x of shape {x.shape} and means of shapes {a.shape}, {b.shape} do not match")
    noise = np.asarray(noise, dtype=np.float64)
    if np.any(~(noise > 0)):
        raise ValueError(f"{name} must be positive")
    if noise.ndim:
        noise = np.broadcast_to(noise, np.broadcast_shapes(noise.shape, x.shape[:-1] + (1,)))
    return x, a, b, a - b, noise

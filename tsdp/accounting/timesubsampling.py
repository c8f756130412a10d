"""Accounting of privacy amplification by subsampling in time (Koga, Meehan and Chaudhuri 2022).

Koga, Meehan and Chaudhuri, "Privacy Amplification by Subsampling in Time Domain" (AISTATS 2022,
arXiv:2201.04762). One individual participates in at most I steps of a length-T count series
(Assumption 1), at most M per step (spec pitfall 11: ``Delta_2 = M sqrt(I)``). Each step is kept
independently with probability p (J ~ Bernoulli(p)^T), Gaussian noise is added to the kept
(optionally filtered) values and the series is interpolated back (post-processing given J).

Write ``c(delta) = sqrt(2 ln(1.25 / delta))`` (Theorem 1, classical Gaussian mechanism) and
``B_{I,p}(i) = Pr[Bin(I, p) > i]``. ``I`` below is the *effective* count ``I_eff`` of cells of one
series in which two neighbouring datasets differ (I under add/remove, min(2I, T) under substitution).

Paper accounting (delta split ``delta = delta_noise + delta_fail``, the code's 50/50 by default):

* Theorem 2: with probability ``1 - delta'``, ``delta' = B_{I,p}(I')``, the subsampled count has
  L2 sensitivity ``M sqrt(I')``. Corollary 1 (Hoeffding) bounds it by
  ``I' <= I p + sqrt((I/2) log(1/delta'))``.
* Corollary 3 (no filter; the paper's exponent ``sqrt(I'/I)`` is a typo for ``sqrt(I/I')``):
  ``sigma = c(delta_noise) M sqrt(I') / epsilon`` is
  ``(epsilon, delta_noise + B_{I,p}(I') (exp(epsilon sqrt(I/I')) - exp(epsilon)))``-DP; I' is the
  smallest i in 1..I with ``B_{I,p}(i) (e^{epsilon sqrt(I/i)} - e^epsilon) < delta_fail``
  (authors' ``find_Ip``).
* Theorem 4 (filter A with sigma_max(A) = 1, row norm ``L = sum h^2`` and ``srank = T L``): with
  ``r = alpha^2 / p > 1``, ``log delta'(alpha) = log(2 srank) + (p/L) ((r - 1) - r ln r)`` bounds
  ``Pr[sigma_max(A_J) > alpha]`` (Tropp 2015's matrix Chernoff bound, Theorem 3); Corollary 2:
  ``sigma = c(delta_noise) M alpha sqrt(I) / epsilon`` is
  ``(epsilon, delta_noise + delta'(alpha) (exp(epsilon/alpha) - exp(epsilon)))``-DP; alpha solves
  ``g(alpha) = log delta'(alpha) + log(e^{epsilon/alpha} - e^epsilon) - log delta_fail = 0`` on
  ``(floor, 1)`` with ``floor = max(sqrt(p), sqrt(p + L))`` (validity of Theorem 3 and Tropp's side
  condition ``alpha^2 >= p + L``, spec pitfall 5).
* Proposition 1: if the true participation bound is cI, the filtered mechanism is
  ``(sqrt(c) epsilon, delta_noise + delta' (exp(sqrt(c) epsilon / alpha) - exp(sqrt(c) epsilon)))``-DP;
  without filter ``delta'`` becomes ``B_{floor(cI),p}(floor(cI'))`` (spec section 1.4).

The exact accounting of the released pair (J, noisy samples) lives in
:mod:`tsdp.accounting.timesubsampling_exact`, the law of a unit's sampled changed cells (with the
redraw of empty samples) in :mod:`tsdp.accounting.timesubsampling_law`; this module re-exports the
names its callers use.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from tsdp.accounting import gaussian as gauss
from tsdp.accounting.budget import check_delta, check_epsilon
from tsdp.accounting.calibrate import bisect, brent, certify, smallest_integer_meeting
from tsdp.accounting.timesubsampling_exact import (  # noqa: F401  (re-exported: callers use ts.NAME)
    DEGRADATION_FACTORS, MIXTURE_TRUNCATION, exact_degradation, exact_subsample, gaussian_degradation,
    mixture_delta, mixture_epsilon)
from tsdp.accounting.timesubsampling_law import (  # noqa: F401  (re-exported: callers use ts.NAME)
    binomial_tail, check_participation, check_rate, check_split, empty_probability, log_failure_inflation,
    log_unit_tail, redraw_inflation, subsample_mixture, unit_sample_law)
from tsdp.errors import NumericalError, UsageError

PAPER = "Koga, Meehan and Chaudhuri 2022 (arXiv:2201.04762)"


# ---------------------------------------------------------------------------------------------
# small building blocks of the paper's bounds
# ---------------------------------------------------------------------------------------------


def classical_c(delta):
    """``c(delta) = sqrt(2 ln(1.25 / delta))`` (Koga et al. 2022, Theorem 1; Dwork and Roth)."""
    return np.sqrt(2.0 * np.log(1.25 / np.asarray(delta, dtype=float)))


def log_exp_gap(eps_low, eps_high):
    """``log(exp(eps_high) - exp(eps_low))`` for eps_high >= eps_low (``-inf`` when equal)."""
    eps_low = np.asarray(eps_low, dtype=float)
    eps_high = np.asarray(eps_high, dtype=float)
    with np.errstate(divide="ignore"):  # (as eps_high + log(1 - e^(eps_low - eps_high)): no overflow)
        return eps_high + np.log(-np.expm1(eps_low - eps_high))


# ---------------------------------------------------------------------------------------------
# no filter: Theorem 2, Corollary 1, Corollary 3
# ---------------------------------------------------------------------------------------------


def hoeffding_i_prime(I: int, p: float, delta_prime: float) -> float:
    """Corollary 1: ``I' <= I p + sqrt((I/2) log(1/delta'))`` (the squared sensitivity bound)."""
    return I * p + math.sqrt(0.5 * I * math.log(1.0 / delta_prime))


def corollary3_failure_term(I: int, i_prime, epsilon: float, p: float, n_steps: int | None = None,
                            series: int = 1):
    """``B_{I,p}(I') (exp(epsilon sqrt(I/I')) - exp(epsilon))`` (Corollary 3, corrected exponent),
    with the tail of the redraw-conditioned law of the unit's I cells over ``series`` series
    (:func:`log_unit_tail`); vectorised over ``i_prime``."""
    i = np.asarray(i_prime, dtype=float)
    return np.exp(log_unit_tail(i, I, p, n_steps, series) + log_exp_gap(epsilon, epsilon * np.sqrt(I / i)))


def solve_i_prime(I: int, epsilon: float, delta_fail: float, p: float,
                  n_steps: int | None = None, series: int = 1) -> int:
    """Smallest ``i in {1, ..., I}`` with ``B_{I,p}(i) (e^{epsilon sqrt(I/i)} - e^epsilon) < delta_fail``.

    The authors' ``find_Ip`` (spec section 2.2), in log space, with the tail of :func:`log_unit_tail`.
    Both factors decrease in i, so the first i that qualifies is found by bisection (I may be the
    cells of a unit over thousands of series). ``i = I`` always qualifies (the tail is 0), so the
    answer is at most I.
    """
    check_participation(I)
    check_epsilon(epsilon)
    check_delta(delta_fail, "delta_fail")
    check_rate(p)
    target = math.log(delta_fail)

    def qualifies(i: int) -> bool:
        return float(log_unit_tail(i, I, p, n_steps, series) + log_exp_gap(epsilon, epsilon * math.sqrt(I / i))) \
            < target

    return smallest_integer_meeting(qualifies, 1, I)


# ---------------------------------------------------------------------------------------------
# filter: Theorems 3 and 4, Corollary 2
# ---------------------------------------------------------------------------------------------


def log_delta_prime(alpha, p: float, L: float, srank: float):
    """Theorem 4: ``log delta'(alpha) = log(2 srank) + (p/L) ((r - 1) - r ln r)``, ``r = alpha^2/p``.

    Valid only for ``r > 1``; ``nan`` is returned where ``alpha^2 <= p`` (spec pitfall 5).
    """
    alpha = np.asarray(alpha, dtype=float)
    r = alpha**2 / p
    with np.errstate(divide="ignore", invalid="ignore"):
        out = math.log(2.0 * srank) + (p / L) * ((r - 1.0) - r * np.log(r))
    out = np.where(r > 1.0, out, np.nan)
    return out if out.ndim else float(out)


def delta_prime(alpha, p: float, L: float, srank: float, cap: bool = True):
    """``delta'(alpha) = 2 srank (e^{r-1} / r^r)^{p/L}`` (Theorem 4), capped at 1 when ``cap``;
    ``nan`` where ``alpha^2 <= p``."""
    out = np.exp(log_delta_prime(alpha, p, L, srank))
    if cap:
        out = np.minimum(out, 1.0)
    return out if np.ndim(out) else float(out)


def alpha_floor(p: float, L: float) -> float:
    """Smallest alpha at which Theorem 4 is used: ``max(sqrt(p) (1 + 1e-9), sqrt(p + L))``, at most 1.

    ``alpha > sqrt(p)`` is needed for epsilon_T >= 0 in Theorem 3, and Tropp's intrinsic-dimension
    Chernoff bound also needs ``alpha^2 >= p + L`` (spec section 2.3 and pitfall 5).
    """
    return min(1.0, max(math.sqrt(p) * (1 + 1e-9), math.sqrt(p + L)))


def tropp_condition(alpha: float, p: float, L: float) -> bool:
    """Tropp's side condition ``alpha^2 >= p + L`` (with a relative slack of 1e-12)."""
    return alpha * alpha >= (p + L) * (1 - 1e-12)


def corollary2_failure_term(alpha: float, epsilon: float, p: float, L: float, srank: float,
                            n_steps: int | None = None, series: int = 1) -> float:
    """``n r delta'(alpha) (exp(epsilon/alpha) - exp(epsilon))`` (Corollary 2), with the redraw
    inflation r and the union over the ``series`` n a unit can touch (:func:`log_failure_inflation`)."""
    if alpha >= 1:
        return 0.0
    log_term = (log_delta_prime(alpha, p, L, srank) + float(log_exp_gap(epsilon, epsilon / alpha))
                + log_failure_inflation(n_steps, p, series))
    return math.exp(log_term)


def rounding_share(scale: np.ndarray, kept: np.ndarray, cells: int, series: int, g: float) -> float:
    """``g sqrt(n) rho / sqrt(I)``, ``rho = max_s sqrt(n_s) / scale_s``: the conditional filter
    accounting's sensitivities ``scale_s sqrt(I)``, ``scale_s = M s_J(s)``, grow by this share to cover
    the rounding of the kept values of up to n touched series: the joint mu of the exact change is
    then at most ``mu* sqrt(I) / (sqrt(I) + g sqrt(n) rho)`` and that of the rounding (``g sqrt(n_s)``
    per series) at most the rest of mu* (:func:`tsdp.mechanisms.subsample.release_filter_subsample`)."""
    rho = float(np.max(np.sqrt(np.asarray(kept, dtype=float)) / np.asarray(scale, dtype=float)))
    return g * math.sqrt(series) * rho / math.sqrt(cells)


@dataclass(frozen=True)
class AlphaSolution:
    alpha: float
    delta_prime: float  # Theorem 4's bound at alpha (uncapped, times n r: redraw and the n series)
    failure_term: float  # delta'(alpha) (e^{epsilon/alpha} - e^epsilon)
    at_floor: bool  # the budget was already met at the validity floor
    residual: float  # g(alpha) (0 up to floating point unless at_floor)


def solve_alpha(epsilon: float, delta_fail: float, p: float, L: float, srank: float,
                n_steps: int | None = None, series: int = 1) -> AlphaSolution:
    """Root of ``g(alpha) = log delta'(alpha) + log(e^{epsilon/alpha} - e^epsilon) - log delta_fail``.

    Brent's method on ``(floor, 1)`` (:func:`tsdp.accounting.calibrate.brent`; spec section 2.3, step 3; g is strictly decreasing there and
    tends to -inf at alpha = 1). If ``g(floor) <= 0`` the budget is already met where Theorem 3
    starts to apply: alpha = floor, and the (smaller) failure term is reported (spec 4.2). The
    returned alpha is nudged upwards until the failure term is at most ``delta_fail``.
    """
    check_epsilon(epsilon)
    check_delta(delta_fail, "delta_fail")
    check_rate(p)
    log_infl = log_failure_inflation(n_steps, p, series)

    def g(a: float) -> float:
        if a >= 1.0:
            return -math.inf
        return (log_delta_prime(a, p, L, srank) + float(log_exp_gap(epsilon, epsilon / a))
                + log_infl - math.log(delta_fail))

    lo = alpha_floor(p, L)
    if lo >= 1.0:
        return AlphaSolution(1.0, 0.0, 0.0, True, -math.inf)
    g_lo = g(lo)
    if not math.isfinite(g_lo) and g_lo != -math.inf:
        raise NumericalError(f"the alpha equation is not finite at its lower end alpha={lo:g}")
    if g_lo <= 0:
        alpha, at_floor = lo, True
    else:
        hi = 1.0 - 1e-12
        if g(hi) > 0:
            alpha = 1.0
        else:
            alpha = brent(g, lo, hi, xtol=1e-15, rtol=4 * np.finfo(float).eps)
            # g <= 0 in logs does not make the term itself <= delta_fail (exp and the sum's rounding
            # differ by a few ulps): nudge until the term that is reported and claimed fits
            alpha = certify(alpha, lambda a: a < 1 and (
                g(a) > 0 or corollary2_failure_term(a, epsilon, p, L, srank, n_steps, series) > delta_fail))
        at_floor = False
    dp = math.exp(log_delta_prime(alpha, p, L, srank) + log_infl) if alpha < 1 else 0.0
    term = corollary2_failure_term(alpha, epsilon, p, L, srank, n_steps, series)
    return AlphaSolution(float(alpha), dp, term, at_floor, g(alpha) if alpha < 1 else -math.inf)


def alpha_for_delta_prime(target: float, p: float, L: float, srank: float) -> float:
    """Smallest alpha in (sqrt(p), 1] with ``delta'(alpha) <= target`` (bisection, spec 2.6).

    :func:`tsdp.accounting.calibrate.bisect` to a width of 1e-15; the upper end (which meets the
    target) is returned. Returns 1.0 when even alpha = 1 does not reach the target (the bound is then not useful).
    """
    lo, hi = math.sqrt(p) * (1 + 1e-12), 1.0
    log_target = math.log(target)
    if log_delta_prime(hi, p, L, srank) > log_target:
        return 1.0
    return bisect(lambda a: not log_delta_prime(a, p, L, srank) > log_target, lo, hi, atol=1e-15, iterations=200)[1]


# ---------------------------------------------------------------------------------------------
# paper calibrations (Corollaries 2 and 3) and Proposition 1
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PaperCalibration:
    """Noise and guarantee of the paper's calibration for one series at (epsilon, delta)."""

    sigma: float
    delta_noise: float
    delta_fail: float
    epsilon_failure_branch: float
    delta_prime: float
    failure_term: float
    delta_total: float  # delta_noise + failure_term <= delta
    sensitivity_high_prob: float  # M sqrt(I') or M alpha sqrt(I)
    sensitivity_worst_case: float  # M sqrt(I)
    i_prime: int | None = None
    alpha: float | None = None
    alpha_at_floor: bool = False
    exact_branch_deltas: tuple[float, float] = (0.0, 0.0)  # exact Gaussian profile on both branches


def _exact_branch_deltas(epsilon, eps_fail, sigma, sens_success, sens_fail) -> tuple[float, float]:
    return (float(gauss.delta_for_epsilon(epsilon, sens_success / sigma)),
            float(gauss.delta_for_epsilon(eps_fail, sens_fail / sigma)) if eps_fail > epsilon else 0.0)


def paper_subsample(epsilon: float, delta: float, I: int, p: float, M: float = 1.0,
                    delta_split: float = 0.5, n_steps: int | None = None, series: int = 1) -> PaperCalibration:
    """Corollary 3 as the authors' code calibrates it (``ss_gaussian`` + ``find_Ip``).

    ``delta_noise = s delta``, ``delta_fail = (1 - s) delta``, I' from :func:`solve_i_prime`,
    ``sigma = c(delta_noise) M sqrt(I') / epsilon``; guarantee
    ``(epsilon, delta_noise + B_{I,p}(I') (e^{epsilon sqrt(I/I')} - e^epsilon))``. ``I`` is the
    unit's changed cells over all the ``series`` it can touch (module docstring).
    """
    check_epsilon(epsilon)
    check_delta(delta)
    check_split(delta_split)
    d_noise, d_fail = delta_split * delta, (1 - delta_split) * delta
    i_prime = solve_i_prime(I, epsilon, d_fail, p, n_steps, series)
    sigma = float(classical_c(d_noise)) * M * math.sqrt(i_prime) / epsilon
    tail = math.exp(log_unit_tail(i_prime, I, p, n_steps, series))
    term = float(corollary3_failure_term(I, i_prime, epsilon, p, n_steps, series)) if i_prime < I else 0.0
    eps_fail = epsilon * math.sqrt(I / i_prime)
    return PaperCalibration(
        sigma=sigma, delta_noise=d_noise, delta_fail=d_fail, epsilon_failure_branch=eps_fail,
        delta_prime=tail, failure_term=term, delta_total=d_noise + term,
        sensitivity_high_prob=M * math.sqrt(i_prime), sensitivity_worst_case=M * math.sqrt(I),
        i_prime=i_prime, alpha=math.sqrt(i_prime / I),
        exact_branch_deltas=_exact_branch_deltas(epsilon, eps_fail, sigma, M * math.sqrt(i_prime),
                                                 M * math.sqrt(I)),
    )


def paper_filter(epsilon: float, delta: float, I: int, p: float, L: float, srank: float,
                 M: float = 1.0, delta_split: float = 0.5, n_steps: int | None = None,
                 alpha: float | None = None, series: int = 1) -> PaperCalibration:
    """Corollary 2 as the authors' code calibrates it (``ssf_gaussian`` + ``find_alpha_log``).

    alpha from :func:`solve_alpha` (or given: it must satisfy ``sqrt(p) < alpha <= 1`` and
    ``alpha^2 >= p + L``), ``sigma = c(delta_noise) M alpha sqrt(I) / epsilon``; guarantee
    ``(epsilon, delta_noise + delta'(alpha) (e^{epsilon/alpha} - e^epsilon))``. ``I`` is the unit's
    changed cells over all the ``series`` n it can touch; given ``sigma_max(A_J) <= alpha`` in every
    touched series their joint change is at most ``M alpha sqrt(I)``, and delta' is summed over the n
    series (module docstring).
    """
    check_epsilon(epsilon)
    check_delta(delta)
    check_split(delta_split)
    d_noise, d_fail = delta_split * delta, (1 - delta_split) * delta
    if alpha is None:
        sol = solve_alpha(epsilon, d_fail, p, L, srank, n_steps, series)
    else:
        floor = alpha_floor(p, L)
        if not (isinstance(alpha, (int, float, np.floating)) and math.isfinite(alpha)
                and math.sqrt(p) < alpha <= 1):
            raise UsageError(f"--filter-alpha must satisfy sqrt(p) = {math.sqrt(p):.6g} < alpha <= 1, got {alpha}")
        if not tropp_condition(alpha, p, L):
            raise UsageError(f"--filter-alpha {alpha:g} is below the validity floor sqrt(p + L) = {floor:.6g} "
                             "(Tropp's side condition alpha^2 >= p + L of Theorem 3)")
        log_infl = log_failure_inflation(n_steps, p, series)
        dp = math.exp(log_delta_prime(alpha, p, L, srank) + log_infl) if alpha < 1 else 0.0
        term = corollary2_failure_term(alpha, epsilon, p, L, srank, n_steps, series)
        sol = AlphaSolution(float(alpha), dp, term, False, math.nan)
    a = sol.alpha
    sigma = float(classical_c(d_noise)) * M * a * math.sqrt(I) / epsilon
    eps_fail = epsilon / a
    return PaperCalibration(
        sigma=sigma, delta_noise=d_noise, delta_fail=d_fail, epsilon_failure_branch=eps_fail,
        delta_prime=sol.delta_prime, failure_term=sol.failure_term,
        delta_total=d_noise + sol.failure_term,
        sensitivity_high_prob=M * a * math.sqrt(I), sensitivity_worst_case=M * math.sqrt(I),
        alpha=a, alpha_at_floor=sol.at_floor,
        exact_branch_deltas=_exact_branch_deltas(epsilon, eps_fail, sigma, M * a * math.sqrt(I),
                                                 M * math.sqrt(I)),
    )


def degradation_filter(epsilon: float, delta_noise: float, alpha: float, delta_prime_value: float,
                       factors=DEGRADATION_FACTORS) -> list[dict]:
    """Proposition 1: true bound cI gives
    ``(sqrt(c) eps, delta_noise + delta' (exp(sqrt(c) eps / alpha) - exp(sqrt(c) eps)))``."""
    out = []
    for c in factors:
        e = math.sqrt(c) * epsilon
        term = delta_prime_value * math.exp(float(log_exp_gap(e, e / alpha))) if alpha < 1 else 0.0
        out.append({"c": c, "epsilon": e, "delta": delta_noise + term})
    return out


def degradation_subsample(epsilon: float, delta_noise: float, I: int, i_prime: int, p: float,
                          n_steps: int | None = None, factors=DEGRADATION_FACTORS, series: int = 1) -> list[dict]:
    """No-filter analogue of Proposition 1 (spec section 1.4, tsdp's derivation): true bound cI gives
    ``(sqrt(c) eps, delta_noise + B_{floor(cI),p}(floor(cI')) (e^{sqrt(c) eps sqrt(I/I')} - e^{sqrt(c) eps}))``
    (at most T cells in each of the ``series``)."""
    out = []
    for c in factors:
        e = math.sqrt(c) * epsilon
        n, k = int(math.floor(c * I)), int(math.floor(c * i_prime))
        if n_steps is not None:
            n = min(n, series * n_steps)
        tail = math.exp(log_unit_tail(k, n, p, n_steps, series))
        term = tail * math.exp(float(log_exp_gap(e, e * math.sqrt(I / i_prime)))) if i_prime < I else 0.0
        out.append({"c": c, "epsilon": e, "delta": delta_noise + term})
    return out

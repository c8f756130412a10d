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

Exact accounting (tsdp, not in the paper): conditionally on J the release is a Gaussian mechanism
with sensitivity ``M sqrt(k)``, ``k = |J cap j_i| ~ Bin(I, p)``; the released pair (J, noisy
samples) therefore has the privacy profile

    delta(epsilon) = sum_k Bin(k; I, p) deltaGauss(epsilon; M sqrt(k) / sigma)

(Balle and Wang 2018, Theorem 8 for deltaGauss; a mixture over the public k of symmetric Gaussian
pairs is symmetric, and Bin(n, p) for n < I is a binomial thinning of Bin(I, p), a post-processing,
so n = I dominates even under composition).

Empty samples are redrawn (J is data-independent, so redrawing is still private). Conditioning on
``J != {}`` multiplies every failure probability and every k >= 1 weight by
``1 / (1 - (1 - p)^T)`` (spec section 4.2); all functions below take ``n_steps`` for that.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import optimize, stats

from tsdp.accounting import gaussian as gauss
from tsdp.accounting.budget import check_delta, check_epsilon
from tsdp.errors import NumericalError, UsageError

PAPER = "Koga, Meehan and Chaudhuri 2022 (arXiv:2201.04762)"
DEGRADATION_FACTORS = (1.5, 2.0, 4.0)
MIXTURE_TRUNCATION = 1e-10  # binomial mass (relative to delta) merged away from each tail
SIGMA_RTOL = 1e-12  # relative precision of the single-series exact calibration
PLD_SIGMA_RTOL = 1e-4  # relative precision of the PLD-composed calibration


# ---------------------------------------------------------------------------------------------
# validation and small building blocks
# ---------------------------------------------------------------------------------------------


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


def classical_c(delta):
    """``c(delta) = sqrt(2 ln(1.25 / delta))`` (Koga et al. 2022, Theorem 1; Dwork and Roth)."""
    return np.sqrt(2.0 * np.log(1.25 / np.asarray(delta, dtype=float)))


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


def binomial_tail(i, n: int, p: float):
    """``Pr[Bin(n, p) > i]`` (scipy's survival function; no float binomial coefficients)."""
    return stats.binom.sf(i, n, p)


def log_binomial_tail(i, n: int, p: float):
    """``log Pr[Bin(n, p) > i]`` in log space (``-inf`` for i >= n)."""
    return stats.binom.logsf(i, n, p)


def log_exp_gap(eps_low, eps_high):
    """``log(exp(eps_high) - exp(eps_low))`` for eps_high >= eps_low (``-inf`` when equal)."""
    eps_low = np.asarray(eps_low, dtype=float)
    eps_high = np.asarray(eps_high, dtype=float)
    with np.errstate(divide="ignore"):
        return eps_low + np.log(np.expm1(eps_high - eps_low))


# ---------------------------------------------------------------------------------------------
# no filter: Theorem 2, Corollary 1, Corollary 3
# ---------------------------------------------------------------------------------------------


def hoeffding_i_prime(I: int, p: float, delta_prime: float) -> float:
    """Corollary 1: ``I' <= I p + sqrt((I/2) log(1/delta'))`` (the squared sensitivity bound)."""
    return I * p + math.sqrt(0.5 * I * math.log(1.0 / delta_prime))


def corollary3_failure_term(I: int, i_prime, epsilon: float, p: float, n_steps: int | None = None):
    """``B_{I,p}(I') (exp(epsilon sqrt(I/I')) - exp(epsilon))`` (Corollary 3, corrected exponent),
    times the empty-redraw inflation; vectorised over ``i_prime``."""
    i = np.asarray(i_prime, dtype=float)
    log_term = log_binomial_tail(i, I, p) + log_exp_gap(epsilon, epsilon * np.sqrt(I / i))
    return np.exp(log_term) * redraw_inflation(n_steps, p)


def solve_i_prime(I: int, epsilon: float, delta_fail: float, p: float,
                  n_steps: int | None = None) -> int:
    """Smallest ``i in {1, ..., I}`` with ``B_{I,p}(i) (e^{epsilon sqrt(I/i)} - e^epsilon) < delta_fail``.

    The authors' ``find_Ip`` (spec section 2.2), evaluated for all i at once in log space.
    ``i = I`` always qualifies (the tail is 0), so the answer is at most I.
    """
    check_participation(I)
    check_epsilon(epsilon)
    check_delta(delta_fail, "delta_fail")
    check_rate(p)
    i = np.arange(1, I + 1, dtype=float)
    log_term = (log_binomial_tail(i, I, p) + log_exp_gap(epsilon, epsilon * np.sqrt(I / i))
                + math.log(redraw_inflation(n_steps, p)))
    ok = np.flatnonzero(log_term < math.log(delta_fail))
    return int(i[ok[0]]) if ok.size else I


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
                            n_steps: int | None = None) -> float:
    """``delta'(alpha) (exp(epsilon/alpha) - exp(epsilon))`` (Corollary 2), with the redraw inflation."""
    if alpha >= 1:
        return 0.0
    log_term = (log_delta_prime(alpha, p, L, srank) + float(log_exp_gap(epsilon, epsilon / alpha))
                + math.log(redraw_inflation(n_steps, p)))
    return math.exp(log_term)


@dataclass(frozen=True)
class AlphaSolution:
    alpha: float
    delta_prime: float  # Theorem 4's bound at alpha (uncapped, times the redraw inflation)
    failure_term: float  # delta'(alpha) (e^{epsilon/alpha} - e^epsilon)
    at_floor: bool  # the budget was already met at the validity floor
    residual: float  # g(alpha) (0 up to floating point unless at_floor)


def solve_alpha(epsilon: float, delta_fail: float, p: float, L: float, srank: float,
                n_steps: int | None = None) -> AlphaSolution:
    """Root of ``g(alpha) = log delta'(alpha) + log(e^{epsilon/alpha} - e^epsilon) - log delta_fail``.

    Brent's method on ``(floor, 1)`` (spec section 2.3, step 3; g is strictly decreasing there and
    tends to -inf at alpha = 1). If ``g(floor) <= 0`` the budget is already met where Theorem 3
    starts to apply: alpha = floor, and the (smaller) failure term is reported (spec 4.2). The
    returned alpha is nudged upwards until the failure term is at most ``delta_fail``.
    """
    check_epsilon(epsilon)
    check_delta(delta_fail, "delta_fail")
    check_rate(p)
    log_infl = math.log(redraw_inflation(n_steps, p))

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
            alpha = optimize.brentq(g, lo, hi, xtol=1e-15, rtol=4 * np.finfo(float).eps, maxiter=500)
            # g <= 0 in logs does not make the term itself <= delta_fail (exp and the sum's rounding
            # differ by a few ulps): nudge until the term that is reported and claimed fits
            while alpha < 1 and (g(alpha) > 0
                                 or corollary2_failure_term(alpha, epsilon, p, L, srank, n_steps) > delta_fail):
                alpha = float(np.nextafter(alpha, 2.0))
        at_floor = False
    dp = math.exp(log_delta_prime(alpha, p, L, srank) + log_infl) if alpha < 1 else 0.0
    term = corollary2_failure_term(alpha, epsilon, p, L, srank, n_steps)
    return AlphaSolution(float(alpha), dp, term, at_floor, g(alpha) if alpha < 1 else -math.inf)


def alpha_for_delta_prime(target: float, p: float, L: float, srank: float) -> float:
    """Smallest alpha in (sqrt(p), 1] with ``delta'(alpha) <= target`` (bisection, spec 2.6).

    Returns 1.0 when even alpha = 1 does not reach the target (the bound is then not useful).
    """
    lo, hi = math.sqrt(p) * (1 + 1e-12), 1.0
    log_target = math.log(target)
    if log_delta_prime(hi, p, L, srank) > log_target:
        return 1.0
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if log_delta_prime(mid, p, L, srank) > log_target:
            lo = mid
        else:
            hi = mid
        if hi - lo <= 1e-15:
            break
    return hi


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
                    delta_split: float = 0.5, n_steps: int | None = None) -> PaperCalibration:
    """Corollary 3 as the authors' code calibrates it (``ss_gaussian`` + ``find_Ip``).

    ``delta_noise = s delta``, ``delta_fail = (1 - s) delta``, I' from :func:`solve_i_prime`,
    ``sigma = c(delta_noise) M sqrt(I') / epsilon``; guarantee
    ``(epsilon, delta_noise + B_{I,p}(I') (e^{epsilon sqrt(I/I')} - e^epsilon))``.
    """
    check_epsilon(epsilon)
    check_delta(delta)
    check_split(delta_split)
    d_noise, d_fail = delta_split * delta, (1 - delta_split) * delta
    i_prime = solve_i_prime(I, epsilon, d_fail, p, n_steps)
    sigma = float(classical_c(d_noise)) * M * math.sqrt(i_prime) / epsilon
    tail = float(binomial_tail(i_prime, I, p)) * redraw_inflation(n_steps, p)
    term = float(corollary3_failure_term(I, i_prime, epsilon, p, n_steps)) if i_prime < I else 0.0
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
                 alpha: float | None = None) -> PaperCalibration:
    """Corollary 2 as the authors' code calibrates it (``ssf_gaussian`` + ``find_alpha_log``).

    alpha from :func:`solve_alpha` (or given: it must satisfy ``sqrt(p) < alpha <= 1`` and
    ``alpha^2 >= p + L``), ``sigma = c(delta_noise) M alpha sqrt(I) / epsilon``; guarantee
    ``(epsilon, delta_noise + delta'(alpha) (e^{epsilon/alpha} - e^epsilon))``.
    """
    check_epsilon(epsilon)
    check_delta(delta)
    check_split(delta_split)
    d_noise, d_fail = delta_split * delta, (1 - delta_split) * delta
    if alpha is None:
        sol = solve_alpha(epsilon, d_fail, p, L, srank, n_steps)
    else:
        floor = alpha_floor(p, L)
        if not (isinstance(alpha, (int, float, np.floating)) and math.isfinite(alpha)
                and math.sqrt(p) < alpha <= 1):
            raise UsageError(f"--filter-alpha must satisfy sqrt(p) = {math.sqrt(p):.6g} < alpha <= 1, got {alpha}")
        if not tropp_condition(alpha, p, L):
            raise UsageError(f"--filter-alpha {alpha:g} is below the validity floor sqrt(p + L) = {floor:.6g} "
                             "(Tropp's side condition alpha^2 >= p + L of Theorem 3)")
        log_infl = math.log(redraw_inflation(n_steps, p))
        dp = math.exp(log_delta_prime(alpha, p, L, srank) + log_infl) if alpha < 1 else 0.0
        term = corollary2_failure_term(alpha, epsilon, p, L, srank, n_steps)
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
                          n_steps: int | None = None, factors=DEGRADATION_FACTORS) -> list[dict]:
    """No-filter analogue of Proposition 1 (spec section 1.4, tsdp's derivation): true bound cI gives
    ``(sqrt(c) eps, delta_noise + B_{floor(cI),p}(floor(cI')) (e^{sqrt(c) eps sqrt(I/I')} - e^{sqrt(c) eps}))``."""
    out = []
    for c in factors:
        e = math.sqrt(c) * epsilon
        n, k = int(math.floor(c * I)), int(math.floor(c * i_prime))
        if n_steps is not None:
            n = min(n, n_steps)
        tail = float(binomial_tail(k, n, p)) * redraw_inflation(n_steps, p)
        term = tail * math.exp(float(log_exp_gap(e, e * math.sqrt(I / i_prime)))) if i_prime < I else 0.0
        out.append({"c": c, "epsilon": e, "delta": delta_noise + term})
    return out


# ---------------------------------------------------------------------------------------------
# exact accounting of the released pair (J, noisy samples)
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Mixture:
    """Weights over k = |J cap j_i| and the sensitivities M sqrt(k) of the exact profile."""

    weights: np.ndarray
    sensitivities: np.ndarray
    counts: np.ndarray  # the k of each component

    def pairs(self) -> tuple[tuple[float, float], ...]:
        return tuple(zip(self.weights.tolist(), self.sensitivities.tolist()))


def subsample_mixture(I: int, p: float, M: float = 1.0, n_steps: int | None = None,
                      truncation: float = 0.0) -> Mixture:
    """Components ``(Bin(k; I, p), M sqrt(k))`` conditioned on a non-empty J of ``n_steps`` steps.

    Conditioning on ``J != {}`` divides the k >= 1 weights by ``1 - (1 - p)^T`` (the k = 0 weight
    takes the rest). With ``truncation > 0`` the mass of the k whose lower tail is at most
    ``truncation`` is merged into the lowest kept k, and the mass above the upper ``truncation``
    quantile into k = I (the largest sensitivity): both only increase the profile (deltaGauss is
    increasing in the sensitivity), so it stays an upper bound.
    """
    check_participation(I)
    check_rate(p)
    k = np.arange(I + 1)
    pmf = stats.binom.pmf(k, I, p)
    if n_steps is not None and p < 1:
        pmf[1:] *= redraw_inflation(n_steps, p)
        pmf[0] = max(0.0, 1.0 - pmf[1:].sum())
    lo, hi = 0, I
    if truncation > 0 and I > 1:
        cdf = np.cumsum(pmf)
        sf = np.cumsum(pmf[::-1])[::-1] - pmf  # sf[k] = mass above k
        lo = int(np.argmax(cdf > truncation))
        hi = max(int(np.argmax(sf <= truncation)), lo)
    keep_k = np.arange(lo, hi + 1)
    weights = pmf[lo:hi + 1].copy()
    weights[0] = pmf[:lo + 1].sum()
    if hi < I:
        keep_k = np.append(keep_k, I)
        weights = np.append(weights, pmf[hi + 1:].sum())
    weights = weights / weights.sum()
    return Mixture(weights, M * np.sqrt(keep_k.astype(float)), keep_k)


def mixture_delta(epsilon, sigma: float, mixture: Mixture):
    """``delta(eps) = sum_k w_k deltaGauss(eps; M sqrt(k) / sigma)`` (vectorised over the components,
    and over ``epsilon`` when it is an array)."""
    eps = np.atleast_1d(np.asarray(epsilon, dtype=float))
    live = mixture.sensitivities > 0
    mus = mixture.sensitivities[live] / sigma
    d = gauss.delta_for_epsilon(eps[:, None], mus[None, :])
    out = np.atleast_2d(d) @ mixture.weights[live]
    return out if np.ndim(epsilon) else float(out[0])


def mixture_epsilon(delta: float, sigma: float, mixture: Mixture) -> float:
    """Smallest epsilon >= 0 with ``mixture_delta(epsilon) <= delta`` (an upper bound)."""
    if mixture_delta(0.0, sigma, mixture) <= delta:
        return 0.0
    hi = 1.0
    while mixture_delta(hi, sigma, mixture) > delta:
        hi *= 2.0
        if hi > 1e6:
            raise NumericalError(f"epsilon for delta={delta:g} exceeds 1e6")
    eps = optimize.brentq(lambda e: gauss._log_ratio(mixture_delta(e, sigma, mixture), delta),
                          0.0, hi, xtol=1e-14, rtol=4 * np.finfo(float).eps, maxiter=500)
    while mixture_delta(eps, sigma, mixture) > delta:
        eps = float(np.nextafter(eps, math.inf)) if eps > 0 else 5e-324
        eps = eps * (1 + 1e-14)
    return float(eps)


@dataclass(frozen=True)
class ExactCalibration:
    sigma: float
    mixture: Mixture
    series: int  # K: series of the panel one unit can touch (composed K times)
    delta_at_sigma: float  # single-series mixture delta at epsilon (K = 1)
    epsilon_at_sigma: float  # epsilon at the target delta (PLD-composed when K > 1)
    method: str


def exact_sigma_single(epsilon: float, delta: float, mixture: Mixture) -> float:
    """Smallest sigma (up to ``SIGMA_RTOL``) with ``mixture_delta(epsilon; sigma) <= delta``.

    The profile decreases in sigma. Upper bracket: the analytic Gaussian sigma for the largest
    sensitivity (the mixture is never worse); Brent's method on log sigma; then sigma is moved up
    until the profile is at most the target, so the result is always on the safe side.
    """
    top = float(mixture.sensitivities.max())
    hi = gauss.analytic_sigma(epsilon, delta, top)

    def excess(log_sigma: float) -> float:
        return gauss._log_ratio(mixture_delta(epsilon, math.exp(log_sigma), mixture), delta)

    while excess(math.log(hi)) > 0:  # the mixture's own arithmetic may round the other way at the Gaussian's sigma
        hi *= 1 + SIGMA_RTOL
    lo = hi / 2.0
    while excess(math.log(lo)) <= 0:
        lo /= 2.0
        if lo < hi * 1e-12:
            return lo  # (degenerate: Pr[k >= 1] <= delta, any noise level works)
    log_sigma = optimize.brentq(excess, math.log(lo), math.log(hi), xtol=SIGMA_RTOL / 4,
                                rtol=4 * np.finfo(float).eps, maxiter=500)
    sigma = math.exp(log_sigma)
    while mixture_delta(epsilon, sigma, mixture) > delta:
        sigma *= 1 + SIGMA_RTOL
    return sigma


def composed_epsilon(sigma: float, mixture: Mixture, times: int, delta: float,
                     discretization: float = 1e-3) -> float:
    """epsilon(delta) of the ``times``-fold composition of the mixture (pessimistic PLD)."""
    from tsdp.accounting.pld import pld_from_profile, tail_mass_for
    from tsdp.accounting.profiles import GaussianMixtureProfile

    profile = GaussianMixtureProfile(tuple(mixture.weights.tolist()),
                                     tuple((mixture.sensitivities / sigma).tolist()))
    pld = pld_from_profile(profile, discretization)
    return pld.self_compose(times, tail_mass_for(delta)).epsilon(delta)


def exact_subsample(epsilon: float, delta: float, I: int, p: float, M: float = 1.0,
                    n_steps: int | None = None, series: int = 1,
                    discretization: float = 1e-3) -> ExactCalibration:
    """Calibrate sigma on the exact profile of the released pair (J, noisy samples).

    ``series = K = 1``: smallest sigma with ``sum_k w_k deltaGauss(epsilon; M sqrt(k)/sigma) <= delta``
    (:func:`exact_sigma_single`). ``K > 1`` (a unit touches K series, each sampled independently):
    the K-fold composition of that mixture, by a pessimistic privacy-loss distribution
    (connect-the-dots, composed by dp-accounting), must satisfy ``epsilon(delta) <= epsilon``;
    bisection on sigma between the single-series sigma (a lower bound) and the sigma of basic
    composition at (epsilon/K, delta/K) (always valid), to a relative width of 1e-4, keeping the
    verified side.
    """
    check_epsilon(epsilon)
    check_delta(delta)
    if not (isinstance(series, (int, np.integer)) and series >= 1):
        raise ValueError("series must be an integer >= 1")
    mixture = subsample_mixture(I, p, M, n_steps, truncation=MIXTURE_TRUNCATION * delta)
    single = exact_sigma_single(epsilon, delta, mixture)
    if series == 1:
        return ExactCalibration(single, mixture, 1, float(mixture_delta(epsilon, single, mixture)),
                                mixture_epsilon(delta, single, mixture),
                                "exact mixture profile, Brent's method on sigma")
    hi = exact_sigma_single(epsilon / series, delta / series, mixture)
    eps_hi = composed_epsilon(hi, mixture, series, delta, discretization)
    while eps_hi > epsilon:
        hi *= 1.25
        eps_hi = composed_epsilon(hi, mixture, series, delta, discretization)
    lo = single
    while hi / lo - 1 > PLD_SIGMA_RTOL:
        mid = math.sqrt(lo * hi)
        eps_mid = composed_epsilon(mid, mixture, series, delta, discretization)
        if eps_mid <= epsilon:
            hi, eps_hi = mid, eps_mid
        else:
            lo = mid
    return ExactCalibration(hi, mixture, series, float(mixture_delta(epsilon, hi, mixture)), eps_hi,
                            f"{series}-fold composition of the exact mixture profile "
                            f"(pessimistic PLD, discretization {discretization:g}), bisection on sigma")


def exact_degradation(sigma: float, delta: float, I: int, p: float, M: float, n_steps: int | None,
                      series: int = 1, factors=DEGRADATION_FACTORS,
                      discretization: float = 1e-3) -> list[dict]:
    """Epsilon at the same delta and sigma if the true participation bound is cI (not I)."""
    out = []
    for c in factors:
        n = int(math.floor(c * I))
        if n_steps is not None:
            n = min(n, n_steps)
        mix = subsample_mixture(n, p, M, n_steps, truncation=MIXTURE_TRUNCATION * delta)
        if series == 1:
            e = mixture_epsilon(delta, sigma, mix)
        else:
            e = composed_epsilon(sigma, mix, series, delta, discretization)
        out.append({"c": c, "epsilon": e, "delta": delta})
    return out


def gaussian_degradation(mu: float, delta: float, factors=DEGRADATION_FACTORS) -> list[dict]:
    """A Gaussian mechanism with ``mu = sensitivity / sigma``: a bound cI scales mu by sqrt(c)."""
    return [{"c": c, "epsilon": gauss.epsilon_for_delta(delta, math.sqrt(c) * mu), "delta": delta}
            for c in factors]

"""The Gaussian mechanism's exact privacy profile and its calibration.

For a Gaussian mechanism with L2 sensitivity ``Delta`` and noise standard deviation ``sigma``,
write ``mu = Delta / sigma``. Balle and Wang (2018, "Improving the Gaussian mechanism for
differential privacy", Theorem 8) show that it is (epsilon, delta)-DP if and only if

    delta >= Phi(mu/2 - epsilon/mu) - exp(epsilon) * Phi(-mu/2 - epsilon/mu).

The right-hand side is the exact privacy profile delta(epsilon). The *analytic* calibration is the
smallest sigma whose profile meets the target. The classical calibration
``sigma = sqrt(2 ln(1.25/delta)) * Delta / epsilon`` (Dwork and Roth 2014, Theorem A.1) is proven
only for epsilon < 1; it is kept for reproducing papers.
"""

from __future__ import annotations

import math

import numpy as np
from scipy import special

from tsdp.accounting.budget import check_delta, check_epsilon
from tsdp.errors import NumericalError, UsageError

ANALYTIC_THEOREM = "Balle and Wang 2018, Theorem 8 (exact Gaussian privacy profile)"
CLASSIC_THEOREM = "Dwork and Roth 2014, Theorem A.1 (classical Gaussian mechanism, epsilon < 1)"


def delta_for_epsilon(epsilon, mu):
    """Exact delta(epsilon) of the Gaussian mechanism with ``mu = sensitivity / sigma``.

    Vectorised over ``epsilon`` and ``mu``. Evaluated as
    ``Phi(a) * (1 - exp(epsilon + log Phi(b) - log Phi(a)))`` with ``a = mu/2 - epsilon/mu`` and
    ``b = -mu/2 - epsilon/mu``, which stays accurate for tiny deltas and large epsilons
    (no overflow of ``exp(epsilon)``, no cancellation between two nearly equal terms).
    """
    epsilon = np.asarray(epsilon, dtype=float)
    mu = np.asarray(mu, dtype=float)
    a = mu / 2.0 - epsilon / mu
    b = -mu / 2.0 - epsilon / mu
    log_pa = special.log_ndtr(a)
    ratio = epsilon + special.log_ndtr(b) - log_pa
    delta = np.exp(log_pa) * -np.expm1(np.minimum(ratio, 0.0))
    return delta if delta.ndim else float(delta)


def epsilon_for_delta(delta: float, mu: float) -> float:
    """Smallest epsilon >= 0 with delta(epsilon) <= ``delta`` for ``mu = sensitivity / sigma``.

    Solved by bracketing and bisection on the monotone profile, then nudged upwards until the
    profile at the returned epsilon is at most ``delta`` (so the answer is an upper bound).
    """
    if delta_for_epsilon(0.0, mu) <= delta:
        return 0.0
    hi = max(1.0, mu * mu)
    while delta_for_epsilon(hi, mu) > delta:
        hi *= 2.0
        if hi > 1e6:
            raise NumericalError(f"epsilon for delta={delta:g} at mu={mu:g} exceeds 1e6")
    eps = bisect(lambda e: -_log_ratio(delta_for_epsilon(e, mu), delta), 0.0, hi)[1]
    while delta_for_epsilon(eps, mu) > delta:
        eps = np.nextafter(eps, np.inf)
    return float(eps)


def analytic_sigma(epsilon: float, delta: float, sensitivity: float) -> float:
    """Smallest sigma (up to floating point) with delta(epsilon; sensitivity/sigma) <= ``delta``.

    Solves ``log delta(epsilon; mu) = log delta`` for ``mu`` by bisection (the profile is
    increasing in ``mu``), returns ``sigma = sensitivity / mu`` and then moves sigma up by single
    ulps until the exact profile is at most the target: the result never undershoots the budget.
    """
    _check_budget(epsilon, delta)
    if not (sensitivity > 0 and math.isfinite(sensitivity)):
        raise UsageError(f"sensitivity must be positive and finite, got {sensitivity}")

    def excess(mu: float) -> float:
        return _log_ratio(delta_for_epsilon(epsilon, mu), delta)

    lo, hi = 1e-3, 1.0
    while excess(hi) < 0:
        lo, hi = hi, hi * 2.0
        if hi > 1e8:
            raise NumericalError(f"could not calibrate sigma for epsilon={epsilon:g}, delta={delta:g}")
    while excess(lo) > 0:
        lo /= 2.0
        if lo < 1e-12:
            raise NumericalError(f"could not calibrate sigma for epsilon={epsilon:g}, delta={delta:g}")
    mu = bisect(excess, lo, hi)[0]
    sigma = sensitivity / mu
    while delta_for_epsilon(epsilon, sensitivity / sigma) > delta:
        sigma = np.nextafter(sigma, np.inf)
    return float(sigma)


def classic_sigma(epsilon: float, delta: float, sensitivity: float) -> float:
    """The classical ``sqrt(2 ln(1.25/delta)) * sensitivity / epsilon`` (Dwork and Roth, Thm A.1)."""
    _check_budget(epsilon, delta)
    return math.sqrt(2.0 * math.log(1.25 / delta)) * sensitivity / epsilon


def bisect(fun, lo: float, hi: float) -> tuple[float, float]:
    """Root of an increasing ``fun`` on ``[lo, hi]`` (``fun(lo) <= 0 < fun(hi)``) by bisection down
    to adjacent floats: returns the final ``(lo, hi)``, and the callers take the side that is safe
    and check it.

    Plain bisection instead of scipy's Brent: importing scipy.optimize costs 0.15-0.3 s, more than
    a small release takes, and a hundred scalar profile evaluations cost under 10 ms.
    """
    for _ in range(2200):  # enough to split any finite interval down to adjacent floats
        mid = 0.5 * (lo + hi)
        if not lo < mid < hi:
            break
        if fun(mid) > 0:
            hi = mid
        else:
            lo = mid
    return lo, hi


def _log_ratio(value: float, target: float) -> float:
    """log(value / target), with an underflowed ``value`` treated as the smallest subnormal.

    A NaN profile (an input far outside the range the formula is accurate in) is a numerical
    failure, never a value for the root finder to wander on."""
    if math.isnan(value):
        raise NumericalError("the Gaussian privacy profile is not a number at these parameters; "
                             "check --epsilon and --delta")
    return math.log(max(value, 5e-324)) - math.log(target)


def _check_budget(epsilon: float, delta: float) -> None:
    check_epsilon(epsilon)
    check_delta(delta)

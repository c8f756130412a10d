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
from tsdp.accounting.calibrate import bisect, certify, expand
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

    The certified calibrator (:mod:`tsdp.accounting.calibrate`) on the profile, decreasing in
    epsilon: bracket by doubling from ``max(1, mu^2)``, bisection to adjacent floats, and the upper
    end moved up by ulps until the profile at it is at most ``delta`` (so the answer is an upper bound).
    """
    if delta_for_epsilon(0.0, mu) <= delta:
        return 0.0
    hi = expand(lambda e: delta_for_epsilon(e, mu) > delta, max(1.0, mu * mu), 2.0, 1e6)
    if not hi.found:
        raise NumericalError(f"epsilon for delta={delta:g} at mu={mu:g} exceeds 1e6")
    eps = bisect(lambda e: -_log_ratio(delta_for_epsilon(e, mu), delta) > 0, 0.0, hi.point)[1]
    return float(certify(eps, lambda e: delta_for_epsilon(e, mu) > delta))


def analytic_sigma(epsilon: float, delta: float, sensitivity: float) -> float:
    """Smallest sigma (up to floating point) with delta(epsilon; sensitivity/sigma) <= ``delta``.

    Solves ``log delta(epsilon; mu) = log delta`` for ``mu`` with the certified calibrator
    (:mod:`tsdp.accounting.calibrate`; the profile is increasing in ``mu``): bracket by doubling
    from 1 and halving from 1e-3, bisection to adjacent floats, ``sigma = sensitivity / mu`` from
    the lower end, then sigma moved up by single ulps until the exact profile is at most the
    target: the result never undershoots the budget.
    """
    _check_budget(epsilon, delta)
    if not (sensitivity > 0 and math.isfinite(sensitivity)):
        raise UsageError(f"sensitivity must be positive and finite, got {sensitivity}")

    def excess(mu: float) -> float:
        return _log_ratio(delta_for_epsilon(epsilon, mu), delta)

    grown = expand(lambda mu: excess(mu) < 0, 1.0, 2.0, 1e8)
    if not grown.found:
        raise NumericalError(f"could not calibrate sigma for epsilon={epsilon:g}, delta={delta:g}")
    shrunk = expand(lambda mu: excess(mu) > 0, 1e-3 if grown.previous is None else grown.previous, 0.5, 1e-12)
    if not shrunk.found:
        raise NumericalError(f"could not calibrate sigma for epsilon={epsilon:g}, delta={delta:g}")
    mu = bisect(lambda mu: excess(mu) > 0, shrunk.point, grown.point)[0]
    sigma = certify(sensitivity / mu, lambda s: delta_for_epsilon(epsilon, sensitivity / s) > delta)
    return float(sigma)


def classic_sigma(epsilon: float, delta: float, sensitivity: float) -> float:
    """The classical ``sqrt(2 ln(1.25/delta)) * sensitivity / epsilon`` (Dwork and Roth, Thm A.1)."""
    _check_budget(epsilon, delta)
    return math.sqrt(2.0 * math.log(1.25 / delta)) * sensitivity / epsilon


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

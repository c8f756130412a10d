"""Exact accounting of subsampling in time: the privacy profile of the released pair
(J, noisy samples), its calibration and its degradation (tsdp, not in Koga, Meehan and Chaudhuri
2022).

Exact accounting (tsdp, not in the paper): conditionally on J the release is a Gaussian mechanism
with sensitivity ``M sqrt(k)``, ``k = |J cap j_i| ~ Bin(I, p)``; the released pair (J, noisy
samples) therefore has the privacy profile

    delta(epsilon) = sum_k Bin(k; I, p) deltaGauss(epsilon; M sqrt(k) / sigma)

(Balle and Wang 2018, Theorem 8 for deltaGauss; a mixture over the public k of symmetric Gaussian
pairs is symmetric, and Bin(n, p) for n < I is a binomial thinning of Bin(I, p), a post-processing,
so n = I dominates even under composition).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from tsdp.accounting import gaussian as gauss
from tsdp.accounting.budget import check_delta, check_epsilon
from tsdp.accounting.calibrate import brent, certify, expand, next_up
from tsdp.accounting.timesubsampling_law import Mixture, subsample_mixture
from tsdp.errors import NumericalError

DEGRADATION_FACTORS = (1.5, 2.0, 4.0)
MIXTURE_TRUNCATION = 1e-10  # binomial mass (relative to delta) merged away from each tail
SIGMA_RTOL = 1e-12  # relative precision of the single-series exact calibration


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
    """Smallest epsilon >= 0 with ``mixture_delta(epsilon) <= delta`` (an upper bound): the
    certified calibrator (:mod:`tsdp.accounting.calibrate`) with bracket doubling from 1, Brent's
    method on the log profile, then epsilon moved up until the profile at it is within ``delta``."""
    if mixture_delta(0.0, sigma, mixture) <= delta:
        return 0.0
    hi = expand(lambda e: mixture_delta(e, sigma, mixture) > delta, 1.0, 2.0, 1e6)
    if not hi.found:
        raise NumericalError(f"epsilon for delta={delta:g} exceeds 1e6")
    eps = brent(lambda e: gauss._log_ratio(mixture_delta(e, sigma, mixture), delta),
                0.0, hi.point, xtol=1e-14, rtol=4 * np.finfo(float).eps)
    eps = certify(eps, lambda e: mixture_delta(e, sigma, mixture) > delta,
                  lambda e: (next_up(e) if e > 0 else 5e-324) * (1 + 1e-14))
    return float(eps)


@dataclass(frozen=True)
class ExactCalibration:
    sigma: float
    mixture: Mixture
    series: int  # n: series the unit's changed cells can lie in (the mixture covers them jointly)
    delta_at_sigma: float  # the mixture's delta at epsilon
    epsilon_at_sigma: float  # epsilon at the target delta
    method: str


def exact_sigma_single(epsilon: float, delta: float, mixture: Mixture) -> float:
    """Smallest sigma (up to ``SIGMA_RTOL``) with ``mixture_delta(epsilon; sigma) <= delta``.

    The profile decreases in sigma. Upper bracket: the analytic Gaussian sigma for the largest
    sensitivity (the mixture is never worse); the certified calibrator
    (:mod:`tsdp.accounting.calibrate`): Brent's method on log sigma, then sigma moved up by factors
    ``1 + SIGMA_RTOL`` until the profile is at most the target, so the result is always on the safe side.
    """
    top = float(mixture.sensitivities.max())
    hi = gauss.analytic_sigma(epsilon, delta, top)

    def excess(log_sigma: float) -> float:
        return gauss._log_ratio(mixture_delta(epsilon, math.exp(log_sigma), mixture), delta)

    # the mixture's own arithmetic may round the other way at the Gaussian's sigma
    hi = expand(lambda s: excess(math.log(s)) > 0, hi, 1 + SIGMA_RTOL).point
    lo = expand(lambda s: excess(math.log(s)) <= 0, hi / 2.0, 0.5, hi * 1e-12)
    if not lo.found:
        return lo.point  # (degenerate: Pr[k >= 1] <= delta, any noise level works)
    log_sigma = brent(excess, math.log(lo.point), math.log(hi), xtol=SIGMA_RTOL / 4, rtol=4 * np.finfo(float).eps)
    return certify(math.exp(log_sigma), lambda s: mixture_delta(epsilon, s, mixture) > delta,
                   lambda s: s * (1 + SIGMA_RTOL))


def exact_subsample(epsilon: float, delta: float, I: int, p: float, M: float = 1.0,
                    n_steps: int | None = None, series: int = 1) -> ExactCalibration:
    """Calibrate sigma on the exact profile of the released pair (J, noisy samples).

    ``I``: the unit's changed cells over all of the ``series`` n it can touch. Given every J the
    touched series are one Gaussian mechanism with sensitivity ``M sqrt(k)``, so sigma is the
    smallest with ``sum_k w_k deltaGauss(epsilon; M sqrt(k)/sigma) <= delta`` for the dominating
    law w of :func:`subsample_mixture` (exact for n = 1; for n > 1 an upper bound that holds for
    every spread of the cells over the series, module docstring).
    """
    check_epsilon(epsilon)
    check_delta(delta)
    mixture = subsample_mixture(I, p, M, n_steps, truncation=MIXTURE_TRUNCATION * delta, series=series)
    sigma = exact_sigma_single(epsilon, delta, mixture)
    how = "exact mixture profile" if series == 1 else \
        f"mixture profile of the unit's cells over up to {series} series, jointly"
    return ExactCalibration(sigma, mixture, series, float(mixture_delta(epsilon, sigma, mixture)),
                            mixture_epsilon(delta, sigma, mixture), f"{how}, Brent's method on sigma")


def exact_degradation(sigma: float, delta: float, I: int, p: float, M: float, n_steps: int | None,
                      series: int = 1, factors=DEGRADATION_FACTORS) -> list[dict]:
    """Epsilon at the same delta and sigma if the true participation bound is cI (not I): the unit's
    changed cells scale by c, at most T in each of the ``series``."""
    out = []
    for c in factors:
        n = int(math.floor(c * I))
        if n_steps is not None:
            n = min(n, series * n_steps)
        mix = subsample_mixture(n, p, M, n_steps, truncation=MIXTURE_TRUNCATION * delta, series=series)
        out.append({"c": c, "epsilon": mixture_epsilon(delta, sigma, mix), "delta": delta})
    return out


def gaussian_degradation(mu: float, delta: float, factors=DEGRADATION_FACTORS) -> list[dict]:
    """A Gaussian mechanism with ``mu = sensitivity / sigma``: a bound cI scales mu by sqrt(c)."""
    return [{"c": c, "epsilon": gauss.epsilon_for_delta(delta, math.sqrt(c) * mu), "delta": delta}
            for c in factors]

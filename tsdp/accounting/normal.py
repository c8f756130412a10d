"""The Gaussian mechanism's privacy profile for one (epsilon, mu), in pure Python (no numpy/scipy).

``tsdp account verify`` of a Gaussian release needs one value of the exact profile (Balle and
Wang 2018, Theorem 8); importing scipy.special for it cost more than the rest of the check. The
arithmetic is that of :func:`tsdp.accounting.gaussian.delta_for_epsilon` (which works on arrays):
``Phi(a) * (1 - exp(epsilon + log Phi(b) - log Phi(a)))`` with ``a = mu/2 - epsilon/mu`` and
``b = -mu/2 - epsilon/mu``, with ``log Phi`` accurate far into the lower tail.
"""

from __future__ import annotations

import math

_SQRT_HALF = math.sqrt(0.5)
_LOG_SQRT_2PI = 0.5 * math.log(2 * math.pi)


def log_ndtr(x: float) -> float:
    """log Phi(x), the log of the standard normal CDF, to about 1e-14 relative."""
    if x > -20.0:
        return math.log(0.5 * math.erfc(-x * _SQRT_HALF)) if x < 1.0 else math.log1p(-0.5 * math.erfc(x * _SQRT_HALF))
    # Mills-ratio series: Phi(x) = phi(x)/|x| (1 - 1/x^2 + 3/x^4 - 15/x^6 + ...); at |x| >= 20 the
    # terms kept leave an error below 1e-17.
    inv = 1.0 / (x * x)
    series = 1.0 + inv * (-1.0 + inv * (3.0 + inv * (-15.0 + inv * (105.0 + inv * (-945.0 + inv * 10395.0)))))
    return -0.5 * x * x - math.log(-x) - _LOG_SQRT_2PI + math.log(series)


def gaussian_delta(epsilon: float, mu: float) -> float:
    """Exact delta(epsilon) of the Gaussian mechanism with ``mu = sensitivity / sigma`` (mu >= 0)."""
    if mu == 0:
        return 0.0  # nothing to distinguish
    a = mu / 2.0 - epsilon / mu
    b = -mu / 2.0 - epsilon / mu
    log_pa = log_ndtr(a)
    ratio = epsilon + log_ndtr(b) - log_pa
    return math.exp(log_pa) * -math.expm1(min(ratio, 0.0))

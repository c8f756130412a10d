"""Linear Incremental Privacy (McElroy, Roy & Hore 2022, section 2.2) and the attack diagnostics of
spec flip.md section 7.

LIP measures how much the released value at the same date improves the best linear prediction of
X_t by an attacker who knows the whole auxiliary series Z (eq. (5)):

    LIP = 1 - Cov(X_t, Xhat_t | Z)^2 / [Var(Xhat_t | Z) Var(X_t | Z)].

For a linear filter ``Xhat = Psi(B) X`` this is Def. 4 evaluated on ``f = f_{X|Z}`` (Prop. 3):

- ideal filter ``Psi = e^{i theta}`` (Remark 5, eq. (7)): ``LIP = 1 - (int_0^pi cos(theta) f / int_0^pi f)^2``;
- any FIR filter, exactly (the "applied" LIP of the actual taps):
  ``LIP = 1 - (sum_j psi_j gamma(j))^2 / ((sum_{j,k} psi_j psi_k gamma(j-k)) gamma(0))``, gamma the ACVF of f.

It is a second-order, model-based, same-date measure; it is not differential privacy.
"""

from __future__ import annotations

import numpy as np

from tsdp.flip.spectral import acvf


def _trapezoid(f: np.ndarray) -> float:
    return float(f.sum() - 0.5 * (f[0] + f[-1]))


def ideal_lip(theta: np.ndarray, f: np.ndarray) -> float:
    """1 - (int_0^pi cos(theta) f / int_0^pi f)^2 on an equally spaced grid over [0, pi] (eq. (7))."""
    ratio = _trapezoid(np.cos(theta) * f) / _trapezoid(f)
    return float(1.0 - ratio ** 2)


def ideal_lip_on_cdf(F: np.ndarray, alpha: float, r, points: int = 8193) -> float:
    """The same LIP of the ideal filter theta = pi R((1 - alpha) F + alpha lambda / pi), integrated in the
    coordinate x = F(lambda) (the substitution of Thm 6's proof):

        int_0^pi cos(theta) f / int_0^pi f = int_0^1 cos(pi R((1 - alpha) x + alpha lambda(x) / pi)) dx,

    with lambda(x) the inverse of the grid CDF. Accurate however concentrated f is; at alpha = 0 the
    integrand is antisymmetric about 1/2 (R(1 - x) = 1 - R(x)) and the LIP is 1 to rounding.
    """
    x = np.linspace(0.0, 1.0, points)
    lam_over_pi = np.interp(x, F, np.linspace(0.0, 1.0, F.shape[-1]))
    values = np.cos(np.pi * r((1.0 - alpha) * x + alpha * lam_over_pi))
    ratio = (values.sum() - 0.5 * (values[0] + values[-1])) / (points - 1)
    return float(1.0 - ratio ** 2)


def _symmetric(gamma: np.ndarray, lags: np.ndarray) -> np.ndarray:
    return gamma[np.abs(lags)]


def taps_lip(taps: np.ndarray, gamma: np.ndarray) -> float:
    """Def. 4 for the FIR filter psi_{-M..M} against autocovariances gamma(0..2M)."""
    return float(1.0 - lagged_correlations(taps, gamma, 0)[0])


def lagged_correlations(taps: np.ndarray, gamma: np.ndarray, max_lag: int) -> np.ndarray:
    """corr^2(X_t, Xhat_{t+l} | Z) for l = -max_lag..max_lag (index l + max_lag).

    ``Cov(X_t, Xhat_{t+l}) = sum_j psi_j gamma(l - j)``; ``Var(Xhat) = sum_{j,k} psi_j psi_k gamma(j - k)``.
    """
    M = (taps.size - 1) // 2
    auto = np.correlate(taps, taps, mode="full")  # lags -2M..2M
    var_hat = float(auto @ _symmetric(gamma, np.arange(-2 * M, 2 * M + 1)))
    ell = np.arange(-max_lag, max_lag + 1)
    j = np.arange(-M, M + 1)
    cov = _symmetric(gamma, ell[:, None] - j[None, :]) @ taps
    return cov ** 2 / (var_hat * gamma[0])


def lagged_lip(taps: np.ndarray, gamma: np.ndarray, max_lag: int) -> tuple[float, int]:
    """1 - max_{|l| <= L} corr^2(X_t, Xhat_{t+l} | Z) and the maximising lag l (tsdp's diagnostic:
    LIP (5) only looks at the same date, an attacker need not)."""
    corr = lagged_correlations(taps, gamma, max_lag)
    best = int(np.argmax(corr))
    return float(1.0 - corr[best]), best - max_lag


def composed_taps(first: np.ndarray, second: np.ndarray) -> np.ndarray:
    """Taps of applying ``first`` and then ``second`` (both centred): their convolution."""
    return np.convolve(first, second)


def inversion_lip(released_taps: np.ndarray, attacker_taps: np.ndarray, gamma: np.ndarray) -> float:
    """LIP after an attacker filters the release with the inverse of ``attacker_taps``.

    The attacker's estimate is ``Psi_a(B^{-1}) Xhat = Psi_a(B^{-1}) Psi(B) X``; its LIP is Def. 4 for the
    composed filter. With the true taps it is near 0 (the release is invertible); with a guessed
    filter it measures how much the guess recovers.
    """
    composite = composed_taps(released_taps, attacker_taps[::-1])
    return taps_lip(composite, gamma)


def noise_lip(conditional_variance: float, noise_variance: float) -> float:
    """LIP of adding independent white noise, X + N (spec A11): sigma_N^2 / (sigma_{X|Z}^2 + sigma_N^2).

    Not 1, whatever the paper's section 2.2 suggests: the released value does carry information.
    """
    return noise_variance / (conditional_variance + noise_variance)


def covariance_lip(cov: float, var_release: float, var_x: float) -> float:
    """Eq. (5) from the three conditional moments."""
    return 1.0 - cov ** 2 / (var_release * var_x)


def acvf_for_lags(f: np.ndarray, lags: int) -> np.ndarray:
    """gamma(0..lags) of the spectrum f on the grid (needs lags <= N)."""
    if lags > f.shape[-1] - 1:
        raise ValueError(f"the frequency grid ({f.shape[-1] - 1}) is too coarse for lag {lags}")
    return acvf(f, lags)

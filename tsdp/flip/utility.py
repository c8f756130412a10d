"""Utility figures of a FLIP release (McElroy, Roy & Hore 2022, Example 1; spec flip.md 1.2, 4.5).

All are functions of the original data: they are for the custodian's review, not for publication.

- ``D_path = [T^{-1} sum_t (X_t - Xhat_t)^2] / gamma(0)``, gamma(0) the sample variance of the detrended
  sensitive series (pitfall P16). Larger means more pathwise distortion.
- ``D_ACF = H^{-1} sum_{h=0}^{H} (rho_h - rhohat_h)^2`` (H + 1 terms over H, exactly as the paper).
- ``var_ratio`` = var(Xhat) / var(X) of the residuals; ``pgram_median_abs_log_ratio`` = median over the
  Fourier frequencies of |log(I_Xhat / I_X)|.
"""

from __future__ import annotations

import numpy as np


def sample_acf(x: np.ndarray, lags: int) -> np.ndarray:
    """rho_h = sum_t (x_t - m)(x_{t+h} - m) / sum_t (x_t - m)^2, h = 0..lags."""
    d = np.asarray(x, dtype=float) - np.mean(x)
    T = d.size
    spec = np.abs(np.fft.rfft(d, 2 * T)) ** 2
    auto = np.fft.irfft(spec, 2 * T)[: lags + 1]
    return auto / auto[0]


def d_path(x: np.ndarray, released: np.ndarray) -> float:
    return float(np.mean((x - released) ** 2) / np.var(x))


def d_acf(x: np.ndarray, released: np.ndarray, lags: int) -> float:
    H = min(lags, x.size - 1)
    diff = sample_acf(x, H) - sample_acf(released, H)
    return float(np.sum(diff ** 2) / H)


def periodogram(x: np.ndarray) -> np.ndarray:
    """I(lambda_k) at the Fourier frequencies k = 0..T//2."""
    return np.abs(np.fft.rfft(x)) ** 2 / x.size


def pgram_median_abs_log_ratio(x: np.ndarray, released: np.ndarray) -> float:
    T = x.size
    k = np.arange(1, (T - 1) // 2 + 1)
    ix, ir = periodogram(x - np.mean(x))[k], periodogram(released - np.mean(released))[k]
    ok = (ix > 0) & (ir > 0)
    if not ok.any():
        return 0.0
    return float(np.median(np.abs(np.log(ir[ok] / ix[ok]))))


def utility_figures(x: np.ndarray, released: np.ndarray, lags: int) -> dict[str, float]:
    """D_ACF, D_path, the variance ratio and the periodogram log ratio of residual series."""
    return {
        "D_ACF": d_acf(x, released, lags),
        "acf_lags": int(min(lags, x.size - 1)),
        "D_path": d_path(x, released),
        "var_ratio": float(np.var(released) / np.var(x)),
        "pgram_median_abs_log_ratio": pgram_median_abs_log_ratio(x, released),
    }


# A periodogram ordinate this many times the median of its 20 neighbours is a seasonal peak. For a
# smooth spectrum the ratio is about Exp(1) / median of 20 Exp(1); on white noise of length 200 it
# exceeds 30 at some seasonal frequency in under 0.1% of series (quarterly and monthly periods).
SEASONAL_RATIO = 30.0
SEASONAL_PERIODS = {"1q": 4, "1mo": 12, "1d": 7, "1h": 24, "1w": 52}


def seasonal_peak(x: np.ndarray, period: int, window: int = 10) -> float:
    """Largest ratio of the periodogram at a seasonal frequency 2 pi k / period (k = 1..period/2)
    to the median of the ``window`` Fourier ordinates on each side (spec pitfall P8)."""
    T = x.size
    ordinates = periodogram(x - np.mean(x))
    best = 0.0
    for k in range(1, period // 2 + 1):
        idx = int(round(k * T / period))
        if idx < 1 or idx > T // 2:
            continue
        around = np.r_[ordinates[max(1, idx - window):idx], ordinates[idx + 1:idx + window + 1]]
        if around.size and np.median(around) > 0:
            best = max(best, float(ordinates[idx] / np.median(around)))
    return best

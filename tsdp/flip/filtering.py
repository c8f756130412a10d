"""Applying the FLIP filter to a finite series (McElroy, Roy & Hore 2022, section 3.1 end, section 3.3
steps 6-7).

``extend`` pads the residual series with M backcasts and M forecasts, each the best linear predictor
of X_t from the observed X_1..X_T under the estimated autocovariances (resolution A7: a univariate
projection on the sensitive residuals, ``X^E_t = c_t' Gamma_T^{-1} x`` by Levinson); the backcasts use
the same formula for t <= 0 (univariate second-order structure is time-reversible). ``apply_taps``
then computes ``Xhat_t = sum_{j=-M}^{M} psi_j X^E_{t-j}`` for t = 1..T.

``circular_filter`` is tsdp's optional frequency-domain mode: ``xhat = IFFT(e^{i theta(lambda_k)} FFT(x))``,
which keeps the periodogram exactly at every Fourier frequency (not the paper's method).
"""

from __future__ import annotations

import math

import numpy as np

# Beyond this many observations the projection uses the nearest PROJECTION_WINDOW observations
# (Levinson is O(T^2)); the predictor's weights on far observations are negligible then.
PROJECTION_WINDOW = 2000


def extend(x: np.ndarray, gamma: np.ndarray, M: int) -> tuple[np.ndarray, bool]:
    """(X^E_{-M+1..0}, X_1..X_T, X^E_{T+1..T+M}) and whether the projection was windowed.

    ``gamma`` holds the autocovariances gamma(0), gamma(1), ... up to at least lag min(T, window) + M.
    """
    from scipy.linalg import solve_toeplitz

    T = x.size
    if M == 0:
        return x.copy(), False
    W = min(T, PROJECTION_WINDOW)
    column = gamma[:W]
    s = np.arange(W)
    i = np.arange(1, M + 1)
    # forecast of t = T + i from the last W observations (times T-W+1..T): lag = W + i - 1 - s
    fore_weights = gamma[W + i[:, None] - 1 - s[None, :]]
    # backcast of t = 1 - i from the first W observations (times 1..W): lag = s + i
    back_weights = gamma[s[None, :] + i[:, None]]
    tail = solve_toeplitz(column, x[T - W:], check_finite=False)
    head = tail if W == T else solve_toeplitz(column, x[:W], check_finite=False)
    forecasts = fore_weights @ tail
    backcasts = back_weights @ head
    return np.concatenate((backcasts[::-1], x, forecasts)), W < T


def projection_rows(T: int, gamma: np.ndarray, M: int) -> tuple[np.ndarray, np.ndarray, int]:
    """The backcast and forecast weights of :func:`extend` as explicit rows: ``(back, fore, W)`` with
    ``back[i - 1] @ x[:W]`` the backcast of time 1 - i and ``fore[i - 1] @ x[T - W:]`` the forecast of
    time T + i (i = 1..M), i.e. ``c_i' Gamma_W^{-1}`` for the covariance vectors c_i of :func:`extend`."""
    from scipy.linalg import solve_toeplitz

    W = min(T, PROJECTION_WINDOW)
    column = gamma[:W]
    s = np.arange(W)
    i = np.arange(1, M + 1)
    fore = solve_toeplitz(column, gamma[W + i[:, None] - 1 - s[None, :]].T, check_finite=False).T
    back = solve_toeplitz(column, gamma[s[None, :] + i[:, None]].T, check_finite=False).T
    return back.reshape(M, W), fore.reshape(M, W), W


def apply_taps(extended: np.ndarray, taps: np.ndarray) -> np.ndarray:
    """Xhat_t = sum_j psi_j X^E_{t-j} for the T interior points of an M-extended series."""
    return np.convolve(extended, taps, mode="valid")


def inverse_taps(taps: np.ndarray) -> np.ndarray:
    """The inverse of an all-pass filter is Psi(z^{-1}): the taps reversed (psi_{-j})."""
    return taps[::-1].copy()


def circular_filter(x: np.ndarray, theta: np.ndarray) -> np.ndarray:
    """Frequency-domain filtering with the ideal response e^{i theta} at the Fourier frequencies.

    ``theta`` is given on lambda_n = pi n / N over [0, pi]; it is interpolated to 2 pi k / T and
    extended oddly. The output is real: for even T the response at pi is e^{i pi R(1)} = -1.
    """
    T = x.size
    n = theta.shape[-1] - 1
    lam = np.linspace(0.0, math.pi, n + 1)
    freqs = 2.0 * math.pi * np.fft.rfftfreq(T)
    response = np.exp(1j * np.interp(freqs, lam, theta))
    if T % 2 == 0:
        response[-1] = response[-1].real
    return np.fft.irfft(np.fft.rfft(x) * response, n=T)

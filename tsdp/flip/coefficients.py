"""Coefficients of the FLIP all-pass filter (McElroy, Roy & Hore 2022, section 3.1, eqs. (17)-(19)).

The target is ``Psi(e^{-i lambda}) = sum_j psi_j e^{-i lambda j} = e^{i theta(lambda)}`` with ``theta`` odd,
given on the grid ``lambda_n = pi n / N`` (sign convention A3: white noise with R(x) = x gives
``psi_{-1} = 1``, a one-step lead). Three routes to the 2M+1 taps ``psi_{-M..M}``:

- ``direct`` (default): the exact Fourier coefficients of the target,
  ``psi_j = pi^{-1} int_0^pi cos(theta(lambda) + j lambda) d lambda``, by the trapezoid rule on the grid
  (one FFT of length 2N).
- ``cepstral-paper``: the paper's route. Cepstral coefficients
  ``phi_k = pi^{-1} int_0^pi g(lambda) sin(k lambda) d lambda`` with ``g = -theta`` for k = 1..K (17); the
  filter ``Psi_K(z) = exp(phi_K^+(z) - phi_K^+(z^{-1}))`` is exactly all-pass, and its Laurent
  coefficients, which the paper obtains from the Wiener-Hopf factors (18)-(19)
  (:func:`wiener_hopf_taps`), are computed here as the Fourier coefficients of
  ``exp(i theta_K)``, ``theta_K = -2 sum_k phi_k sin(k lambda)`` (the same numbers, to rounding).
  Because theta winds once around the circle, g jumps at pi and phi_k ~ (-1)^k / k: the truncated
  filter is far from all-pass near pi (pitfall P1), so this route warns.
- ``cepstral-unwrapped``: the same on the winding-free phase ``theta_0 = theta - lambda``, then
  shifted by one step (``Psi = B^{-1} Psi_0``, so ``psi_j = psi^(0)_{j+1}``).
"""

from __future__ import annotations

import math

import numpy as np

METHODS = ("direct", "cepstral-unwrapped", "cepstral-paper")


def direct_taps(theta: np.ndarray, M: int) -> np.ndarray:
    """psi_{-M..M} (index j + M) = pi^{-1} int_0^pi cos(theta + j lambda), trapezoid on lambda_n = pi n / N."""
    n = theta.shape[-1] - 1
    weights = np.ones(n + 1)
    weights[0] = weights[-1] = 0.5
    c = np.zeros(2 * n, dtype=complex)
    c[: n + 1] = weights * np.exp(1j * theta)
    # sum_n c_n e^{i pi j n / N} = 2N ifft(c)[j mod 2N]; psi_j = Re(...) / N
    full = 2.0 * np.fft.ifft(c).real
    lags = np.arange(-M, M + 1)
    return full[lags % (2 * n)]


def cepstrum(phase: np.ndarray, K: int) -> np.ndarray:
    """phi_k = pi^{-1} int_0^pi g(lambda) sin(k lambda) d lambda with g = -phase, k = 1..K (eq. (17))."""
    n = phase.shape[-1] - 1
    lam = np.linspace(0.0, math.pi, n + 1)
    k = np.arange(1, K + 1)[:, None]
    # trapezoid: the integrand vanishes at both ends
    return -(np.sin(k * lam[None, 1:-1]) @ phase[1:-1]) / n


def cepstral_phase(phi: np.ndarray, n: int) -> np.ndarray:
    """theta_K(lambda) = -2 sum_k phi_k sin(k lambda): the phase of the all-pass exp(phi^+(z) - phi^+(1/z))."""
    lam = np.linspace(0.0, math.pi, n + 1)
    k = np.arange(1, phi.size + 1)
    return -2.0 * (phi @ np.sin(k[:, None] * lam[None, :]))


def filter_taps(theta: np.ndarray, M: int, method: str = "direct", K: int = 25) -> np.ndarray:
    """The 2M+1 taps psi_{-M..M} by ``method`` (see the module docstring)."""
    n = theta.shape[-1] - 1
    if method == "direct":
        return direct_taps(theta, M)
    if method == "cepstral-paper":
        return direct_taps(cepstral_phase(cepstrum(theta, K), n), M)
    if method == "cepstral-unwrapped":
        lam = np.linspace(0.0, math.pi, n + 1)
        shifted = direct_taps(cepstral_phase(cepstrum(theta - lam, K), n), M + 1)
        return shifted[2:]  # psi_j = psi0_{j+1}, j = -M..M
    raise ValueError(f"unknown coefficient method {method!r}")


def wiener_hopf_taps(phi: np.ndarray, M: int, terms: int) -> np.ndarray:
    """The paper's recursions (19) and combination: psi_j = sum_{b >= max(0,-j)} psi^+_{j+b} psi^-_b.

    ``psi^+ = exp(phi^+)`` and ``psi^- = exp(-phi^+)`` as power series (``terms`` coefficients each):
    ``(j+1) psi^+_{j+1} = sum_{k=0}^{j} (k+1) phi_{k+1} psi^+_{j-k}``, and the same with a minus sign
    for psi^-. A reference implementation: :func:`filter_taps` computes the same taps by FFT.
    """
    K = phi.size
    kphi = np.arange(1, K + 1) * phi
    plus = np.zeros(terms)
    minus = np.zeros(terms)
    plus[0] = minus[0] = 1.0
    for j in range(terms - 1):
        m = min(j + 1, K)
        s = kphi[:m] @ plus[j::-1][:m] if j >= 0 else 0.0
        plus[j + 1] = s / (j + 1)
        minus[j + 1] = -(kphi[:m] @ minus[j::-1][:m]) / (j + 1)
    out = np.empty(2 * M + 1)
    for idx, j in enumerate(range(-M, M + 1)):
        b = np.arange(max(0, -j), terms - max(j, 0))
        out[idx] = plus[j + b] @ minus[b]
    return out


def frequency_response(taps: np.ndarray, n: int) -> np.ndarray:
    """Psi_M(e^{-i lambda_n}) = sum_j psi_j e^{-i lambda_n j} at lambda_n = pi n / N, n = 0..N."""
    M = (taps.size - 1) // 2
    if taps.size > 2 * n:
        raise ValueError(f"a grid of {n} points cannot resolve {taps.size} taps")
    a = np.zeros(2 * n)
    a[np.arange(-M, M + 1) % (2 * n)] = taps
    return np.fft.rfft(a)


def allpass_defect(taps: np.ndarray, n: int = 8192) -> float:
    """max over the grid of | |Psi_M(e^{-i lambda})| - 1 |: how far the finite filter is from all-pass."""
    return float(np.max(np.abs(np.abs(frequency_response(taps, n)) - 1.0)))


def moments(taps: np.ndarray, order: int) -> np.ndarray:
    """sum_j j^k psi_j for k = 0..order (trend invariance needs 1, 0, ..., 0; section 2.4)."""
    M = (taps.size - 1) // 2
    j = np.arange(-M, M + 1, dtype=float)
    return np.array([np.sum(j ** k * taps) for k in range(order + 1)])

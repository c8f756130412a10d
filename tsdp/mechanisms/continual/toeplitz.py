"""Lower-triangular Toeplitz factorizations A = B C of the stream workloads.

A lower-triangular Toeplitz matrix (T x T) is given by its first column ``c`` (``C[t, s] = c[t - s]``).
These matrices commute and form an algebra: products are truncated convolutions of the columns and
the inverse of one with ``c[0] != 0`` is the power-series reciprocal. So for a Toeplitz strategy C
and a Toeplitz workload A the decoder ``B = A C^{-1}`` is Toeplitz too, and B y is computed online as
``A u`` with ``u = C^{-1} y`` (forward substitution; :mod:`.release`).

Strategies (first columns ``c``, all non-negative and non-increasing, ``c[0] = 1``):

* ``independent``: C = I, ``c = (1, 0, ...)``: independent noise on every step, B = A.
* ``toeplitz``: the square root of the prefix-sum matrix, ``c_k = binom(2k, k) / 4^k`` (the Taylor
  coefficients of ``(1 - z)^(-1/2)``; Henzinger, Upadhyay and Upadhyay 2023; Fichtenberger, Henzinger
  and Upadhyay 2023), so that ``C C = L``. Computed by the recurrence ``c_k = c_{k-1} (2k - 1) / (2k)``
  (no factorials, no overflow; every step multiplies by a number in (0, 1)).
* ``banded``: the square root's first ``b`` coefficients, zero beyond (the banded square root,
  Kalinin and Lampert 2024): encoding C x needs the last ``b - 1`` steps only, and decoding
  ``u = C^{-1} y`` the last ``b - 1`` decoded values, so the state per series is O(b), independent of
  the horizon. Its polynomial has positive non-increasing coefficients, so by the Enestrom-Kakeya
  theorem its zeros lie on or outside the unit circle and the recursion for C^{-1} does not blow up.
"""

from __future__ import annotations

import numpy as np

TOEPLITZ_STRATEGIES = ("independent", "toeplitz", "banded")
BAND_CANDIDATES = (2, 4, 8, 16, 32, 64)
DIRECT_LIMIT = 8192  # products of up to this many terms by direct convolution


def sqrt_coefficients(n: int) -> np.ndarray:
    """``c_k = binom(2k, k) / 4^k`` for k < n, by the stable ratio recurrence."""
    k = np.arange(1, n, dtype=np.float64)
    return np.concatenate(([1.0], np.cumprod((2.0 * k - 1.0) / (2.0 * k))))


def strategy_column(strategy: str, horizon: int, band: int | None = None) -> np.ndarray:
    """First column of C, trimmed after its last non-zero entry (length = the band)."""
    if strategy == "independent":
        return np.ones(1)
    if strategy == "toeplitz":
        return sqrt_coefficients(horizon)
    if strategy == "banded":
        return sqrt_coefficients(min(band, horizon))
    raise ValueError(f"{strategy!r} is not a Toeplitz strategy")


def inverse_sqrt_coefficients(n: int) -> np.ndarray:
    """First column of the square root's inverse: the Taylor coefficients of ``(1 - z)^(1/2)``,
    ``d_0 = 1``, ``d_k = d_{k-1} (2k - 3) / (2k)`` (``C^{-1} = (L^{-1})^{1/2}``; closed form, O(n))."""
    k = np.arange(1, n, dtype=np.float64)
    return np.concatenate(([1.0], np.cumprod((2.0 * k - 3.0) / (2.0 * k))))


def strategy_inverse(strategy: str, horizon: int, c: np.ndarray) -> np.ndarray:
    """First column (length T) of C^{-1} for a strategy of first column ``c``."""
    if strategy == "toeplitz":
        return inverse_sqrt_coefficients(horizon)
    return inverse(c, horizon)


def padded(c: np.ndarray, n: int) -> np.ndarray:
    out = np.zeros(n)
    m = min(n, c.size)
    out[:m] = c[:m]
    return out


def product(a: np.ndarray, b: np.ndarray, n: int) -> np.ndarray:
    """First column (length n) of the product of two lower-triangular Toeplitz matrices (the
    convolution truncated to n; by FFT beyond :data:`DIRECT_LIMIT` terms)."""
    a, b = np.trim_zeros(a[:n], "b"), np.trim_zeros(b[:n], "b")
    if a.size * b.size <= DIRECT_LIMIT ** 2:
        return padded(np.convolve(a, b)[:n], n)
    size = 1 << int(a.size + b.size - 2).bit_length()
    return padded(np.fft.irfft(np.fft.rfft(a, size) * np.fft.rfft(b, size), size)[:n], n)


def inverse(c: np.ndarray, n: int) -> np.ndarray:
    """First column (length n) of C^{-1}: ``d_0 = 1 / c_0``, ``d_m = -(sum_{k=1..m} c_k d_{m-k}) / c_0``
    (forward substitution, O(n len(c)); scipy.signal's lfilter would do it but costs seconds to import)."""
    c = np.trim_zeros(np.asarray(c[:n], dtype=np.float64), "b")
    lag = c[1:]
    d = np.zeros(n)
    d[0] = 1.0 / c[0]
    for m in range(1, n):
        k = min(m, lag.size)
        d[m] = -np.dot(lag[:k], d[m - 1::-1][:k]) / c[0]
    return d


def decoder_column(a: np.ndarray, c_inverse: np.ndarray, n: int) -> np.ndarray:
    """First column of B = A C^{-1} (length n), from the first column of C^{-1}."""
    return product(a, c_inverse, n)


def matrix(c: np.ndarray, n: int) -> np.ndarray:
    """The dense n x n lower-triangular Toeplitz matrix of first column ``c`` (tests, small n)."""
    c = padded(c, n)
    idx = np.arange(n)
    diff = idx[:, None] - idx[None, :]
    return np.where(diff >= 0, c[np.clip(diff, 0, None)], 0.0)

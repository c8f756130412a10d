"""The same-date LIP of every released date (McElroy, Roy & Hore 2022, eq. (5)), for the release tsdp
actually applies rather than the stationary filter of Def. 4.

Given its secret filter, FLIP's release is a linear map of the series: on the standardised scale
``Xhat = P X + L (I - P) X``, where ``P = Q Q'`` projects on the polynomial trend of order d (``Q`` an
orthonormal basis of {1, t, ..., t^d}) and ``L`` is the residual filter: the 2M+1 taps run over M
backcasts, the series and M forecasts (``--boundary extend``), or the circular filter (``--boundary
circular``). Under the estimated model ``X = trend + e``, with ``e`` stationary given the auxiliary series
Z and ``Cov(e_s, e_t | Z) = gamma(s - t)``, the autocovariances of f_{X|Z} (Prop. 3); ``G = toeplitz(gamma)``.

The fitted trend ``P X`` is released essentially exactly (the release keeps it by construction), so the
attacker is given it: LIP_t is eq. (5) for X_t and the residual release ``r_t = (L (I - P) e)_t``, both
conditioned on Z and on the trend coordinates ``U = Q' e`` (Gaussian conditioning, Schur complements):

    LIP_t = 1 - c_t^2 / (v_t g_t),  with  S = Q' G Q,
    c_t = Cov(e_t, r_t) - (G Q)_t S^{-1} Cov(U, r_t),  v_t = Var(r_t) - Cov(r_t, U) S^{-1} Cov(U, r_t),
    g_t = gamma(0) - (G Q)_t S^{-1} (G Q)_t'.

(Leaving the trend's sampling noise to hide X_t instead would flatter the ends: one such figure was 0.94
where this one is 0.14.) With ``LQ = L Q``: ``Cov(e_t, r_t) = (L G)_{tt} - LQ_t . (G Q)_t``,
``Var(r_t) = (L G L')_{tt} - 2 LQ_t . (L G Q)_t + LQ_t S LQ_t'`` and ``Cov(U, r_t) = (L G Q)_t - S LQ_t``
(d + 1 applications of the release map to vectors), and ``(L G)_{tt}``, ``(L G L')_{tt}``:

* extend: interior rows in closed form; the 2M edge rows explicitly (the taps times the unit, backcast
  and forecast rows of :func:`tsdp.flip.filtering.projection_rows`), in blocks, G applied by FFT;
* circular: ``L[t, s] = h[(t - s) mod T]`` with h the circular impulse response. Splitting the sums by
  whether the index wraps, ``(L G)_{tt} = sum_{k <= t} h_k gamma(k) + sum_{k > t} h_k gamma(T - k)`` and
  ``(L G L')_{tt} = A_t + B_t + 2 C_t`` with A (B) the quadratic form of gamma on h_0..h_t (h_{t+1}..),
  and ``C_t = sum_{k' <= t < k} h_k h_k' gamma(T - k + k')``: prefix sums and FFT convolutions, O(T log T).

Away from the ends (at least M dates in, extend mode) the map is the stationary FIR, and without the
trend terms LIP_t is Def. 4's figure of the taps exactly. The trend terms are not small for a persistent
series: the d + 1 trend coordinates then explain a large share of g_t's reduction (24-61 % of
Var(X_t | Z) on statsmodels' macrodata at d = 3), and LIP_t falls far below Def. 4 (0.73 where Def. 4
is 0.99999; tsdp.flip.withholding has the measurements). Near the ends the taps also run over forecasts
and backcasts, projections on the observed series (and, with Z, not orthogonal to X_t given Z), or over
the wrapped-around other end; the red-team audit found LIP_T of 0.06-0.39 where the stationary figure
was 1. tsdp.flip.withholding withholds every date below the floor the claim states.

Autocovariances beyond the frequency grid's lags (n >= 4 (min(T, 2000) + 4M), so only for series longer
than the grid) are taken as 0.
"""

from __future__ import annotations

import numpy as np

from tsdp.flip import filtering

BLOCK_FLOATS = 1 << 24  # edge rows formed at once hold at most this many floats (128 MB)
QUIET = 1e-12  # a residual release whose conditional variance is below QUIET gamma(0) is taken as 0


def lags(gamma: np.ndarray, T: int) -> np.ndarray:
    """gamma(0..T-1), zero beyond the lags given."""
    out = np.zeros(T)
    n = min(T, gamma.size)
    out[:n] = gamma[:n]
    return out


def _toeplitz_times(gamma_T: np.ndarray, x: np.ndarray) -> np.ndarray:
    """toeplitz(gamma_T) @ x, x of shape (T,) or (T, k)."""
    from scipy.linalg import matmul_toeplitz

    return matmul_toeplitz(gamma_T, x, check_finite=False)


def _extend_diagonals(gamma_x: np.ndarray, gamma_T: np.ndarray, taps: np.ndarray, M: int) -> tuple[np.ndarray, np.ndarray]:
    """(L G)_{tt} and (L G L')_{tt} of the extend-mode residual filter."""
    T = gamma_T.size
    c = taps[::-1]  # np.convolve(extended, taps, "valid")[t] = sum_m c[m] extended[t + m]
    offsets = np.arange(2 * M + 1)
    lag = np.abs(offsets - M)
    cov = np.full(T, float(c @ lags(gamma_T, 2 * M + 1)[lag]))
    gram = lags(gamma_T, 2 * M + 1)[np.abs(offsets[:, None] - offsets[None, :])]
    var = np.full(T, float(c @ gram @ c))
    if M == 0:
        return cov, var
    back, fore, W = filtering.projection_rows(T, gamma_x, M)
    edge = np.unique(np.concatenate([np.arange(min(M, T)), np.arange(max(T - M, 0), T)]))
    block = max(1, BLOCK_FLOATS // T)
    for start in range(0, edge.size, block):
        dates = edge[start:start + block]
        rows = np.zeros((dates.size, T))
        for m in range(2 * M + 1):
            position = dates + m - M  # the time of extended[t + m]; < 0: backcast, >= T: forecast
            inside = (position >= 0) & (position < T)
            rows[np.flatnonzero(inside), position[inside]] += c[m]
            before = np.flatnonzero(position < 0)
            if before.size:
                rows[before, :W] += c[m] * back[-position[before] - 1]
            after = np.flatnonzero(position >= T)
            if after.size:
                rows[after, T - W:] += c[m] * fore[position[after] - T]
        cov[dates] = np.einsum("ij,ij->i", rows, gamma_T[np.abs(np.arange(T)[None, :] - dates[:, None])])
        var[dates] = np.einsum("ij,ji->i", rows, _toeplitz_times(gamma_T, rows.T))
    return cov, var


def _causal(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """out[t] = sum_{j < t} a[j] b[t - j], t = 0..T-1 (b[0] unused)."""
    from scipy.signal import fftconvolve

    T = a.size
    b = b.copy()
    b[0] = 0.0
    return fftconvolve(a, b)[:T]


def _circular_diagonals(h: np.ndarray, gamma_T: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(L G)_{tt} and (L G L')_{tt} of the circulant map L[t, s] = h[(t - s) mod T] (module docstring)."""
    T = h.size
    k = np.arange(T)
    wrapped = np.zeros(T)  # g(m) = gamma(T - m) for m = 1..T-1
    wrapped[1:] = gamma_T[T - k[1:]]
    direct = np.cumsum(h * gamma_T)
    tail = np.concatenate([np.cumsum((h * wrapped)[::-1])[::-1][1:], [0.0]])  # sum_{k > t} h_k gamma(T - k)
    cov = direct + tail

    def prefix_form(v: np.ndarray) -> np.ndarray:  # sum_{j, j' <= t} v_j v_j' gamma(|j - j'|)
        return np.cumsum(v * v * gamma_T[0] + 2.0 * v * _causal(v, gamma_T))

    A = prefix_form(h)
    B = np.concatenate([prefix_form(h[::-1])[::-1][1:], [0.0]])
    # C_t - C_{t-1} = h_t (sum_{k > t} h_k g(k - t) - sum_{k' < t} h_k' g(t - k'))
    ahead = _causal(h[::-1], wrapped)[::-1]
    behind = _causal(h, wrapped)
    C = np.cumsum(h * (ahead - behind))
    return cov, A + B + 2.0 * C


def lip_by_date(apply, gamma: np.ndarray, basis: np.ndarray, *, taps: np.ndarray | None = None,
                gamma_x: np.ndarray | None = None, M: int = 0, impulse: np.ndarray | None = None) -> np.ndarray:
    """LIP_t for t = 1..T (module docstring) of the release ``P X + L (I - P) X``.

    ``apply`` computes ``L v`` for a vector v; ``gamma``: autocovariances of f_{X|Z}; ``basis``: (T, d+1)
    spanning the trend. Extend mode: ``taps``, ``gamma_x`` (the projection's autocovariances) and M;
    circular mode: ``impulse`` = ``apply`` of the first unit vector.
    """
    T = basis.shape[0]
    gamma_T = lags(gamma, T)
    if impulse is not None:
        cov, var = _circular_diagonals(impulse, gamma_T)
    else:
        cov, var = _extend_diagonals(gamma_x, gamma_T, taps, M)
    Q, _ = np.linalg.qr(basis)
    GQ = _toeplitz_times(gamma_T, Q)
    LQ = np.column_stack([apply(Q[:, j]) for j in range(Q.shape[1])])
    LGQ = np.column_stack([apply(GQ[:, j]) for j in range(Q.shape[1])])
    S = Q.T @ GQ
    # the residual release r = L (I - P) e, and what it shares with the trend coordinates U = Q' e
    cov = cov - np.einsum("ij,ij->i", LQ, GQ)
    var = var - 2.0 * np.einsum("ij,ij->i", LQ, LGQ) + np.einsum("ij,jk,ik->i", LQ, S, LQ)
    shared = LGQ - LQ @ S  # Cov(U, r_t), one row per date
    S_inv = np.linalg.inv(S)
    cov = cov - np.einsum("ij,jk,ik->i", GQ, S_inv, shared)
    var = var - np.einsum("ij,jk,ik->i", shared, S_inv, shared)
    own = gamma_T[0] - np.einsum("ij,jk,ik->i", GQ, S_inv, GQ)
    # a released value that is (to rounding) a function of Z and the trend alone, e.g. a forecast of
    # white noise, carries nothing about X_t: LIP 1 (cov^2 <= var own by Cauchy-Schwarz)
    informative = var > QUIET * gamma_T[0]
    corr2 = np.divide(cov ** 2, var * own, out=np.zeros(T), where=informative)
    return 1.0 - np.clip(corr2, 0.0, 1.0)

"""Circular smoothing filters for the filter-subsample mechanism (Koga, Meehan and Chaudhuri 2022).

A filter is a circulant matrix A built from a kernel h in R^T (Koga et al. 2022, Section 2):

    y = A x,    y_t = sum_k x_k h_{(t - k) mod T},    A_{ij} = h_{(i - j) mod T},

computed as ``y = IFFT(FFT(h) * FFT(x))`` (real FFTs, O(T log T), vectorised over the series of
a panel). The dense T x T matrix is never built.

For a non-negative kernel with sum 1 every row of A has L1 norm 1 and (spec section 2.0)

    sigma_max(A) = max_k |FFT(h)_k| = 1                       (the DC coefficient),
    L            = max_t ||A_t||_2^2 = sum_t h_t^2,
    srank(A)     = ||A||_F^2 / ||A||_2^2 = T L / sigma_max(A)^2,

the quantities of Koga et al. 2022, Theorems 3 and 4 (matrix Chernoff bound of Tropp 2015).

Kernels:

* ``gaussian``: the paper's zero-phase circular kernel (App. 2.1),
  ``h_t proportional to exp(-((T/2 - |t - T/2|)/sigma_g)^2 / 2) = exp(-min(t, T - t)^2 / (2 sigma_g^2))``;
* ``triangle``: the 3-tap moving average [1/4, 1/2, 1/4] (authors' code, ``get_h('triangle')``);
* ``boxcar``: a centred moving average of odd width w (h = 1/w on lags -(w-1)/2 ... (w-1)/2);
* ``identity``: h = e_0 (no filtering);
* ``custom``: any non-negative taps with positive sum, normalised to sum 1 and centred like
  ``numpy.convolve(x, taps, mode="same")``: tap j applies at lag ``j - (m - 1) // 2``.

The conditional accounting of the filter-subsample mechanism needs, for the sampled rows J of A,

    s_J = sigma_max(A_J) = sqrt(lambda_max(A_J A_J^T)),   (A_J A_J^T)_{ab} = r_{(j_a - j_b) mod T},

with ``r_d = sum_u h_u h_{(u + d) mod T}`` the circular autocorrelation of h
(:func:`sampled_sigma_max`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import scipy.fft as sfft

from tsdp.errors import NumericalError, UsageError

KERNELS = ("gaussian", "triangle", "boxcar", "identity", "custom")
DENSE_MAX = 400  # |J| up to which s_J comes from a dense eigenvalue problem
LANCZOS_TOL = 1e-10  # relative tolerance of the Lanczos iteration for s_J
SAFETY = 1e-9  # relative margin added to lambda_max(A_J A_J^T): s_J is reported as an upper bound
TAIL = 1e-13  # autocorrelation mass (relative to r_0) dropped from the banded Gram matrix


@dataclass(frozen=True)
class KernelStats:
    """Public statistics of a circular kernel (Koga et al. 2022, Theorem 3 and Section 3.2.2)."""

    L: float  # max_t ||A_t||_2^2 = sum h^2
    srank: float  # T L / sigma_max^2
    sigma_max: float  # max |FFT(h)|


def kernel_stats(h: np.ndarray) -> KernelStats:
    """``L = sum h^2``, ``sigma_max = max_k |FFT(h)_k|`` and ``srank = T L / sigma_max^2``."""
    h = np.asarray(h, dtype=float)
    L = float(np.dot(h, h))
    sigma_max = float(np.abs(sfft.rfft(h)).max())
    return KernelStats(L=L, srank=h.size * L / sigma_max**2, sigma_max=sigma_max)


def _check_length(n_steps: int) -> None:
    if not (isinstance(n_steps, (int, np.integer)) and n_steps >= 2):
        raise UsageError(f"a filtered series needs at least 2 steps, got {n_steps}")


def gaussian_kernel(n_steps: int, sigma_g: float) -> np.ndarray:
    """The paper's circular Gaussian kernel (App. 2.1), zero-phase, normalised to sum 1.

    ``h_t = exp(-d_t^2 / (2 sigma_g^2)) / Z`` with ``d_t = min(t, T - t) = T/2 - |t - T/2|`` the
    circular distance to 0. It is symmetric (h_t = h_{T-t}), so circular convolution and the
    authors' circular correlation coincide (spec pitfall 10).
    """
    _check_length(n_steps)
    if not (isinstance(sigma_g, (int, float, np.floating)) and math.isfinite(sigma_g) and sigma_g > 0):
        raise UsageError(f"--filter-sigma must be finite and > 0, got {sigma_g}")
    t = np.arange(n_steps)
    d = np.minimum(t, n_steps - t)
    h = np.exp(-0.5 * (d / float(sigma_g)) ** 2)
    return h / h.sum()


def place_taps(n_steps: int, taps, option: str = "--filter-kernel") -> np.ndarray:
    """Centre ``m <= T`` non-negative taps on the circle and normalise them to sum 1.

    Tap j goes to lag ``j - (m - 1) // 2`` (index ``(j - (m - 1) // 2) mod T``), the centring of
    ``numpy.convolve(x, taps, mode="same")``. Negative, non-finite or all-zero taps, or more taps
    than steps, are refused with a :class:`UsageError` naming ``option``.
    """
    _check_length(n_steps)
    taps = np.asarray(taps, dtype=float).ravel()
    m = taps.size
    if m == 0:
        raise UsageError(f"{option}: the kernel has no taps")
    if m > n_steps:
        raise UsageError(f"{option}: the kernel has {m} taps, more than the series length {n_steps}")
    if not np.all(np.isfinite(taps)):
        raise UsageError(f"{option}: kernel taps must be finite")
    if np.any(taps < 0):
        raise UsageError(
            f"{option}: kernel taps must be non-negative (got {taps.min():g}); the privacy analysis "
            "needs sigma_max(A) = 1, which signed kernels break"
        )
    total = taps.sum()
    if not total > 0:
        raise UsageError(f"{option}: kernel taps must have a positive sum")
    h = np.zeros(n_steps)
    np.add.at(h, (np.arange(m) - (m - 1) // 2) % n_steps, taps / total)
    return h


def triangle_kernel(n_steps: int) -> np.ndarray:
    """The 3-tap moving average [1/4, 1/2, 1/4] (h_0 = 1/2, h_1 = h_{T-1} = 1/4)."""
    if n_steps < 3:
        raise UsageError(f"--filter triangle needs series of at least 3 steps, got {n_steps}")
    return place_taps(n_steps, [0.25, 0.5, 0.25], "--filter triangle")


def boxcar_kernel(n_steps: int, width: int) -> np.ndarray:
    """Centred moving average of odd width w: h = 1/w on lags -(w-1)/2 ... (w-1)/2 (L = 1/w)."""
    _check_length(n_steps)
    if not (isinstance(width, (int, np.integer)) and width >= 1 and width % 2 == 1):
        raise UsageError(f"--filter-width must be an odd integer >= 1, got {width}")
    if width > n_steps:
        raise UsageError(f"--filter-width {width} exceeds the series length {n_steps}")
    return place_taps(n_steps, np.ones(width), "--filter-width")


def identity_kernel(n_steps: int) -> np.ndarray:
    """h = e_0: A is the identity."""
    _check_length(n_steps)
    h = np.zeros(n_steps)
    h[0] = 1.0
    return h


def make_kernel(kind: str, n_steps: int, sigma: float = 10.0, width: int | None = None,
                taps=None) -> np.ndarray:
    """The length-T circular kernel of a named filter (see the module docstring)."""
    if kind == "gaussian":
        return gaussian_kernel(n_steps, sigma)
    if kind == "triangle":
        return triangle_kernel(n_steps)
    if kind == "boxcar":
        if width is None:
            raise UsageError("--filter boxcar needs --filter-width (an odd integer)")
        return boxcar_kernel(n_steps, width)
    if kind == "identity":
        return identity_kernel(n_steps)
    if kind == "custom":
        if taps is None:
            raise UsageError("--filter custom needs --filter-kernel (non-negative taps)")
        return place_taps(n_steps, taps)
    raise UsageError(f"--filter must be one of {', '.join(KERNELS)}, got {kind!r}")


def circular_filter(values: np.ndarray, h: np.ndarray) -> np.ndarray:
    """``y = A x`` for every series (last axis): ``y_t = sum_k x_k h_{(t - k) mod T}``, by real FFTs."""
    values = np.asarray(values, dtype=float)
    n = values.shape[-1]
    if h.shape != (n,):
        raise ValueError(f"kernel of length {h.shape} for series of length {n}")
    spectrum = sfft.rfft(h)
    return sfft.irfft(sfft.rfft(values, axis=-1, workers=-1) * spectrum, n=n, axis=-1, workers=-1)


def autocorrelation(h: np.ndarray) -> np.ndarray:
    """Circular autocorrelation ``r_d = sum_u h_u h_{(u + d) mod T}`` (r = IFFT(|FFT(h)|^2))."""
    r = sfft.irfft(np.abs(sfft.rfft(h)) ** 2, n=h.size)
    return np.maximum(r, 0.0) if np.all(h >= 0) else r


def _compact_autocorrelation(h: np.ndarray) -> tuple[np.ndarray, float] | None:
    """For a non-negative kernel of short circular support: ``(r_0..r_D, tail)``.

    ``r`` is computed directly (no FFT round-off floor) from the support window; D is the smallest
    lag with ``sum_{D < |d| <= T/2} r_d <= TAIL * r_0`` and ``tail`` is that dropped sum (counted
    on both sides). Returns None when the support is not short compared with T.
    """
    T = h.size
    if np.any(h < 0):
        return None
    nz = np.flatnonzero(h > 0)
    # circular support: the shortest arc covering the non-zero taps
    gaps = np.diff(np.concatenate([nz, [nz[0] + T]]))
    start = nz[(np.argmax(gaps) + 1) % nz.size]
    span = T - gaps.max() + 1
    if span > min(4096, T // 8):
        return None
    window = h[(start + np.arange(span)) % T]
    r = np.correlate(window, window, mode="full")[span - 1:]  # lags 0 .. span-1 (linear: no wrap)
    r = np.maximum(r, 0.0)
    tail_from = np.cumsum(r[::-1])[::-1]  # tail_from[d] = sum_{e >= d} r_e
    ok = np.flatnonzero(tail_from <= TAIL * r[0])
    D = int(ok[0]) - 1 if ok.size else span - 1
    D = max(D, 0)
    tail = 2.0 * float(tail_from[D + 1]) if D + 1 < span else 0.0
    if 2 * D + 1 > T // 4:
        return None
    return r[:D + 1], tail


def _banded_gram(J: np.ndarray, T: int, r: np.ndarray):
    """Sparse Gram matrix (A_J A_J^T) restricted to circular lags |d| <= D = len(r) - 1."""
    from scipy import sparse

    m = J.size
    D = r.size - 1
    ext = np.concatenate([J, J + T])
    # forward neighbours (in circular order) within lag D, never wrapping onto the point itself
    upto = np.minimum(np.searchsorted(ext, J + D, side="right"), np.arange(m) + m)
    counts = upto - np.arange(m) - 1
    src = np.repeat(np.arange(m), counts)
    first = np.repeat(np.cumsum(counts) - counts, counts)
    dst_ext = src + 1 + (np.arange(src.size) - first)
    lag = ext[dst_ext] - J[src]
    dst = dst_ext % m
    vals = r[lag]
    diag = np.arange(m)
    rows = np.concatenate([src, dst, diag])
    cols = np.concatenate([dst, src, diag])
    data = np.concatenate([vals, vals, np.full(m, r[0])])
    return sparse.csr_matrix((data, (rows, cols)), shape=(m, m))


def lanczos_top(apply, n: int, steps: int = 40, tol: float = LANCZOS_TOL,
                max_restarts: int = 200) -> tuple[float, float]:
    """Largest eigenvalue of a symmetric operator by explicitly restarted Lanczos.

    Each cycle builds ``steps`` Lanczos vectors from the current start (first the normalised
    all-ones vector), with full re-orthogonalisation (twice, classical Gram-Schmidt), takes the
    top Ritz pair of the tridiagonal matrix and restarts from its Ritz vector, until the Ritz
    residual estimate ``|beta_k s_k|`` is at most ``tol * theta``. Returns ``(theta, ||A v - theta v||)``
    with the residual recomputed explicitly (Weyl: an eigenvalue lies within it of theta).
    """
    from scipy.linalg import eigh_tridiagonal

    k = min(steps, n)
    v = np.full(n, 1.0 / math.sqrt(n))
    basis = np.empty((k + 1, n))
    for _ in range(max_restarts):
        basis[0] = v
        diag, off = np.empty(k), np.empty(k)
        used = k
        for j in range(k):
            w = apply(basis[j])
            diag[j] = _dot(basis[j], w)
            for _ in range(2):  # einsum: single-threaded, predictable on a busy machine
                block = basis[:j + 1]
                w -= np.einsum("ij,i->j", block, np.einsum("ij,j->i", block, w))
            off[j] = math.sqrt(_dot(w, w))
            if off[j] <= 1e-14 * max(abs(diag[j]), 1e-300):  # invariant subspace: exact
                used = j + 1
                break
            basis[j + 1] = w / off[j]
        theta_all, vecs = eigh_tridiagonal(diag[:used], off[:used - 1])
        theta, s = float(theta_all[-1]), vecs[:, -1]
        v = np.einsum("i,ij->j", s, basis[:used])
        v /= math.sqrt(_dot(v, v))
        if used < k or abs(off[used - 1] * s[-1]) <= tol * abs(theta):
            break
    else:
        raise NumericalError("the Lanczos iteration for sigma_max of the sampled filter rows did "
                             f"not converge in {max_restarts} restarts")
    res = apply(v) - theta * v
    return theta, math.sqrt(_dot(res, res))


def _dot(a: np.ndarray, b: np.ndarray) -> float:
    # einsum instead of BLAS: these vector sizes gain nothing from threads, and a threaded BLAS
    # competing for cores with other processes can be many times slower
    return float(np.einsum("i,i->", a, b))


def sampled_sigma_max(h: np.ndarray, J: np.ndarray, stats: KernelStats | None = None) -> float:
    """Upper bound on ``s_J = sigma_max(A_J)``, the largest singular value of the rows J of A.

    ``s_J^2 = lambda_max(G)`` with the |J| x |J| Gram matrix ``G_ab = r_{(j_a - j_b) mod T}``
    (``r`` = circular autocorrelation of h). Small |J| (<= 400): dense symmetric eigensolver (LAPACK's
    MRRR for the top eigenvalue, all eigenvalues by divide and conquer where MRRR reports a failure).
    Larger |J|: Lanczos (:func:`lanczos_top`) started from the all-ones vector, which
    for the entry-wise non-negative G of a non-negative kernel overlaps the Perron eigenvector,
    so the iteration converges to the largest eigenvalue. The operator is the banded sparse G when
    the kernel's autocorrelation is short (lags beyond D carry at most ``TAIL * r_0``; by
    Gershgorin the dropped part has spectral norm at most that mass, which is added back), and
    otherwise applies r by FFT (scatter onto the circle, multiply by |FFT(h)|^2, gather at J).

    The returned value is ``sqrt((theta + ||G v - theta v|| + tail) (1 + 1e-9))`` for the Ritz pair
    (theta, v), capped at ``sigma_max(A)``, which bounds every row-submatrix of A. The residual
    bounds the distance from theta to an eigenvalue of G (Weyl); that this eigenvalue is the
    largest rests, as for any Lanczos computation, on the start vector (which has a positive
    component along the Perron vector) and the convergence test. The tests check the bound
    against numpy's SVD of the dense sampled rows on both paths.
    """
    h = np.asarray(h, dtype=float)
    T = h.size
    J = np.unique(np.asarray(J, dtype=np.int64))
    if J.size == 0:
        return 0.0
    if J[0] < 0 or J[-1] >= T:
        raise ValueError("sampled indices must lie in [0, T)")
    cap = (stats or kernel_stats(h)).sigma_max
    m = J.size
    if m <= DENSE_MAX:
        from scipy import linalg

        r = autocorrelation(h)
        gram = r[(J[:, None] - J[None, :]) % T]
        try:
            lam = float(linalg.eigh(gram, eigvals_only=True, subset_by_index=[m - 1, m - 1])[0])
        except linalg.LinAlgError:  # LAPACK's MRRR (syevr) fails on rare inputs: divide and conquer instead
            lam = float(np.linalg.eigvalsh(gram)[-1])
        bound = lam + 4 * m * np.finfo(float).eps * abs(lam)
    else:
        compact = _compact_autocorrelation(h)
        if compact is not None:
            r, tail = compact
            apply = _banded_gram(J, T, r).dot
        else:
            tail = 0.0
            power = np.abs(sfft.rfft(h)) ** 2

            def apply(v):
                u = np.zeros(T)
                u[J] = v
                return sfft.irfft(sfft.rfft(u, workers=-1) * power, n=T, workers=-1)[J]

        theta, residual = lanczos_top(apply, m)
        bound = theta + residual + tail
    bound *= 1 + SAFETY
    return float(min(math.sqrt(max(bound, 0.0)), cap))

"""Spectral estimation for FLIP (McElroy, Roy & Hore 2022, sections 2.2 and 3.2).

Convention (spec flip.md section 0): ``gamma(h) = <z^h, f>``, so ``f(lambda) = sum_h gamma(h) e^{-i lambda h}``
with no 1/(2 pi), and for a VAR(p) with ``A(z) = I - sum_k Phi_k z^k``,
``f(lambda) = A(e^{-i lambda})^{-1} Sigma A(e^{-i lambda})^{-*}``. Everything FLIP derives (F, H, the
filter, LIP) is invariant to rescaling f.

Frequencies live on the equally spaced grid ``lambda_n = pi n / N``, n = 0..N. Integrals over [0, pi]
use the trapezoid rule, which is spectrally accurate for the smooth, even, 2 pi-periodic spectra here.

- :func:`fit_var`: VAR(p) by least squares, order by AIC, stability check, Yule-Walker fallback.
- :func:`flattop_spectrum`: Politis' flat-top lag-window estimator (Option 2; the taper and the
  bandwidth rule are tsdp's resolution of ambiguity A6).
- :func:`conditional_spectrum`: ``f_{X|Z} = f_X - f_XZ f_Z^{-1} f_ZX`` (Prop. 3, eq. (6)).
- :func:`acvf`: autocovariances from a spectrum, ``gamma(h) = pi^{-1} int_0^pi cos(h lambda) f``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from tsdp.errors import DataError, NumericalError

# A conditional spectrum whose mean is below this share of f_X's means Z predicts X perfectly.
DEGENERATE_SHARE = 1e-8
FLOOR_SHARE = 1e-10


def frequency_grid(n: int) -> np.ndarray:
    """lambda_n = pi n / N for n = 0..N."""
    return np.linspace(0.0, math.pi, n + 1)


@dataclass
class VarFit:
    """A fitted VAR(p): ``coefs[k-1] = Phi_k`` (each q x q) and the innovation covariance."""

    coefs: np.ndarray
    sigma: np.ndarray
    method: str
    stable: bool
    notes: list[str] = field(default_factory=list)

    @property
    def order(self) -> int:
        return self.coefs.shape[0]

    @property
    def dimension(self) -> int:
        return self.sigma.shape[0]

    def transfer(self, lam: np.ndarray) -> np.ndarray:
        """A(e^{-i lambda}) = I - sum_k Phi_k e^{-i lambda k} as a (q, q, len(lam)) array."""
        q = self.dimension
        z = np.exp(-1j * lam)
        out = np.empty((q, q, lam.size), dtype=complex)
        for i in range(q):
            for j in range(q):
                poly = np.concatenate(([float(i == j)], -self.coefs[:, i, j]))
                out[i, j] = np.polynomial.polynomial.polyval(z, poly)
        return out

    def marginal_and_conditional(self, lam: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(f_X, f_X - f_XZ f_Z^{-1} f_ZX) without forming the spectral matrix.

        ``f^{-1} = A^* Sigma^{-1} A``, and by the Schur complement ``(f^{-1})_{XX} = 1 / f_{X|Z}``, so
        ``f_{X|Z} = 1 / (a^* Sigma^{-1} a)`` with ``a`` the first column of A; ``f_X = u Sigma u^*`` with
        ``u`` the first row of A^{-1}.
        """
        A = self.transfer(lam)
        q = self.dimension
        if q == 1:
            f = self.sigma[0, 0] / np.abs(A[0, 0]) ** 2
            return f, f.copy()
        inv_sigma = np.linalg.inv(self.sigma)
        col = A[:, 0, :]
        quad = np.einsum("in,ij,jn->n", np.conj(col), inv_sigma, col).real
        if q == 2:
            det = A[0, 0] * A[1, 1] - A[0, 1] * A[1, 0]
            u = np.stack([A[1, 1], -A[0, 1]]) / det
        else:
            e0 = np.zeros((lam.size, q, 1))
            e0[:, 0, 0] = 1.0
            u = np.linalg.solve(np.moveaxis(A, -1, 0).transpose(0, 2, 1), e0)[:, :, 0].T
        f_x = np.einsum("in,ij,jn->n", u, self.sigma, np.conj(u)).real
        return f_x, 1.0 / quad

    def spectrum(self, lam: np.ndarray) -> np.ndarray:
        """f(lambda) = A(e^{-i lambda})^{-1} Sigma A(e^{-i lambda})^{-*}, shape (len(lam), q, q)."""
        q = self.dimension
        z = np.exp(-1j * lam)
        if q == 1:
            a = 1.0 - np.polynomial.polynomial.polyval(z, np.concatenate(([0.0], self.coefs[:, 0, 0])))
            return (self.sigma[0, 0] / np.abs(a) ** 2).reshape(-1, 1, 1).astype(complex)
        A = np.broadcast_to(np.eye(q, dtype=complex), (lam.size, q, q)).copy()
        for k in range(self.order):
            A -= self.coefs[k][None, :, :] * (z ** (k + 1))[:, None, None]
        inv = np.linalg.inv(A)
        return inv @ self.sigma[None, :, :] @ np.conj(np.swapaxes(inv, 1, 2))


def companion_radius(coefs: np.ndarray) -> float:
    """Spectral radius of the VAR's companion matrix (< 1 means stable)."""
    p, q, _ = coefs.shape
    if p == 0:
        return 0.0
    companion = np.zeros((p * q, p * q))
    companion[:q, :] = np.hstack(list(coefs))
    companion[q:, :-q] = np.eye((p - 1) * q)
    return float(np.max(np.abs(np.linalg.eigvals(companion))))


def max_var_order(T: int, q: int, trend_order: int, cap: int = 8) -> int:
    """The largest order AIC may pick: min(cap, T // 10), keeping T >= q p + d + 10 (spec 4.3)."""
    by_length = T // 10
    by_parameters = (T - trend_order - 10) // q
    return max(0, min(cap, by_length, by_parameters))


def fit_var(w: np.ndarray, order: int | str = "aic", trend_order: int = 0) -> VarFit:
    """Fit a VAR(p) to the (T, q) residual series ``w`` (already detrended, so no intercept).

    ``order="aic"``: every p in 0..max_var_order is fitted by least squares on the same sample
    (t > p_max) and the smallest ``log det Sigma_p + 2 p q^2 / n`` wins; the chosen order is then
    refitted on all of its observations. An unstable least-squares fit (companion radius >= 1) is
    replaced by the Yule-Walker fit, which is stable for the biased autocovariance estimator.
    """
    w = np.asarray(w, dtype=float)
    if w.ndim == 1:
        w = w[:, None]
    T, q = w.shape
    notes: list[str] = []
    if order == "aic":
        p_max = max_var_order(T, q, trend_order)
        p = _aic_order(w, p_max)
        notes.append(f"order {p} chosen by AIC over 0..{p_max}")
    else:
        p = int(order)
    coefs, sigma = _least_squares(w, p, start=p)
    method = "var-ols"
    stable = companion_radius(coefs) < 1.0
    if not stable:
        coefs, sigma = _yule_walker(w, p)
        method = "var-yule-walker"
        stable = companion_radius(coefs) < 1.0
        notes.append("least-squares VAR was not stable; refitted by Yule-Walker")
        if not stable:
            raise NumericalError(f"the VAR({p}) fit is not stable even by Yule-Walker; try --spectral flattop")
    return VarFit(coefs, sigma, method, stable, notes)


def _lagged(w: np.ndarray, p: int, start: int) -> tuple[np.ndarray, np.ndarray]:
    T = w.shape[0]
    y = w[start:]
    x = np.hstack([w[start - k:T - k] for k in range(1, p + 1)]) if p else np.empty((T - start, 0))
    return y, x


def _least_squares(w: np.ndarray, p: int, start: int) -> tuple[np.ndarray, np.ndarray]:
    q = w.shape[1]
    y, x = _lagged(w, p, start)
    if p:
        beta, *_ = np.linalg.lstsq(x, y, rcond=None)
        resid = y - x @ beta
        coefs = beta.T.reshape(q, p, q).transpose(1, 0, 2)
    else:
        resid = y
        coefs = np.zeros((0, q, q))
    sigma = resid.T @ resid / resid.shape[0]
    return coefs, sigma


def _aic_order(w: np.ndarray, p_max: int) -> int:
    q = w.shape[1]
    n = w.shape[0] - p_max
    best, best_aic = 0, math.inf
    for p in range(p_max + 1):
        _, sigma = _least_squares(w, p, start=p_max)
        sign, logdet = np.linalg.slogdet(sigma)
        if sign <= 0:
            continue
        aic = logdet + 2.0 * p * q * q / n
        if aic < best_aic - 1e-12:
            best, best_aic = p, aic
    return best


def sample_autocovariances(w: np.ndarray, max_lag: int) -> np.ndarray:
    """Gamma_k = T^{-1} sum_{t=1}^{T-k} W_{t+k} W_t' for k = 0..max_lag (biased; W is centred)."""
    T, q = w.shape
    out = np.empty((max_lag + 1, q, q))
    for k in range(max_lag + 1):
        out[k] = w[k:].T @ w[:T - k] / T
    return out


def _yule_walker(w: np.ndarray, p: int) -> tuple[np.ndarray, np.ndarray]:
    """Solve Gamma_k = sum_j Phi_j Gamma_{k-j} (k = 1..p) with Gamma_{-k} = Gamma_k'."""
    q = w.shape[1]
    gam = sample_autocovariances(w, p)
    if p == 0:
        return np.zeros((0, q, q)), gam[0]

    def block(k: int) -> np.ndarray:
        return gam[k] if k >= 0 else gam[-k].T

    big = np.block([[block(i - j) for i in range(p)] for j in range(p)])  # (pq, pq): rows j, cols i
    rhs = np.hstack([gam[k] for k in range(1, p + 1)])  # (q, pq)
    phi = np.linalg.solve(big.T, rhs.T).T  # [Phi_1 ... Phi_p] with rhs = Phi big
    coefs = phi.reshape(q, p, q).transpose(1, 0, 2)
    sigma = gam[0] - sum(coefs[j] @ block(j + 1).T for j in range(p))
    return coefs, 0.5 * (sigma + sigma.T)


def flattop_spectrum(w: np.ndarray, lam: np.ndarray, c: float = 2.0) -> tuple[np.ndarray, int, list[str]]:
    """Politis' flat-top lag-window estimate of the spectral matrix of ``w`` (T, q).

    ``f(lambda) = sum_{|k|<b} Lambda(k/b) Gamma_k e^{-i lambda k}`` with the trapezoid taper
    ``Lambda(x) = 1`` for |x| <= 1/2, ``2(1-|x|)`` for 1/2 < |x| <= 1, and ``b = 2 m`` where m is the
    smallest lag after which K_T = max(5, ceil(sqrt(log10 T))) consecutive correlations (largest
    absolute entry) stay below ``c sqrt(log10 T / T)``. Frequencies where the estimate is not
    positive semi-definite are repaired by clipping eigenvalues at 0. Returns (f, b, notes).
    """
    w = np.asarray(w, dtype=float)
    if w.ndim == 1:
        w = w[:, None]
    T, q = w.shape
    gam = sample_autocovariances(w, T - 1)
    scale = np.sqrt(np.outer(np.diag(gam[0]), np.diag(gam[0])))
    rho = np.max(np.abs(gam / scale[None]), axis=(1, 2))
    threshold = c * math.sqrt(math.log10(T) / T)
    run = max(5, math.ceil(math.sqrt(math.log10(T))))
    small = rho < threshold
    m = T - 1
    for cand in range(0, T - run):
        if small[cand + 1:cand + 1 + run].all():
            m = cand
            break
    b = 2 * m
    spec = np.broadcast_to(gam[0].astype(complex), (lam.size, q, q)).copy()
    for k in range(1, min(b, T)):
        weight = 1.0 if k <= b / 2 else 2.0 * (1.0 - k / b)
        phase = np.exp(-1j * lam * k)[:, None, None]
        spec += weight * (gam[k][None] * phase + gam[k].T[None] * np.conj(phase))
    notes = [f"flat-top bandwidth b = {b} (Politis' rule, c = {c:g}); the paper's 'threshold C = 1/T' "
             "could not be interpreted"]
    spec = 0.5 * (spec + np.conj(np.swapaxes(spec, 1, 2)))
    vals, vecs = np.linalg.eigh(spec)
    if (vals < 0).any():
        notes.append("negative spectral eigenvalues clipped at 0")
        vals = np.clip(vals, 0.0, None)
        spec = (vecs * vals[:, None, :]) @ np.conj(np.swapaxes(vecs, 1, 2))
    return spec, b, notes


def conditional_spectrum(fmat: np.ndarray) -> tuple[np.ndarray, float]:
    """f_{X|Z} = f_X - f_XZ f_Z^{-1} f_ZX (Prop. 3; X is component 0), and <f_{X|Z}>/<f_X>.

    Raises DataError when Z predicts X (almost) perfectly: LIP is then undefined (Prop. 3).
    The result is floored at 1e-10 <f_X> so that F is a proper CDF.
    """
    fx = fmat[:, 0, 0].real
    if fmat.shape[1] == 1:
        cond = fx.copy()
    else:
        fxz = fmat[:, 0:1, 1:]
        fz = fmat[:, 1:, 1:]
        # A pseudo-inverse: where eigenvalue clipping left f_Z singular, positive semi-definiteness forces
        # f_XZ into f_Z's range, and the pseudo-inverse gives the same Schur complement there.
        solved = np.linalg.pinv(fz, rcond=1e-12, hermitian=True) @ np.conj(np.swapaxes(fxz, 1, 2))
        cond = fx - (fxz @ solved)[:, 0, 0].real
    return checked_conditional(fx, cond)


def checked_conditional(fx: np.ndarray, cond: np.ndarray) -> tuple[np.ndarray, float]:
    """Refuse a degenerate f_{X|Z} and floor it (see :func:`conditional_spectrum`)."""
    mean_x = _grid_mean(fx)
    if not mean_x > 0:
        raise DataError("the series has no variance left after detrending; FLIP needs a non-constant series")
    share = _grid_mean(np.clip(cond, 0.0, None)) / mean_x
    if not share >= DEGENERATE_SHARE:
        raise DataError("the auxiliary series predict the sensitive series (almost) perfectly "
                        f"(conditional variance share {share:.2e}); LIP is undefined (paper Prop. 3)")
    return np.maximum(cond, FLOOR_SHARE * mean_x), share


def _grid_mean(f: np.ndarray) -> float:
    n = f.shape[-1] - 1
    return float((f.sum() - 0.5 * (f[0] + f[-1])) / n)


def spectral_cdf(f: np.ndarray) -> np.ndarray:
    """F(lambda) = int_0^lambda p with p = f / int_0^pi f (the CDF reading A1), F(0) = 0, F(pi) = 1."""
    increments = 0.5 * (f[1:] + f[:-1])
    F = np.concatenate(([0.0], np.cumsum(increments)))
    return F / F[-1]


def acvf(f: np.ndarray, max_lag: int | None = None) -> np.ndarray:
    """gamma(h) = pi^{-1} int_0^pi cos(h lambda) f(lambda) d lambda for h = 0..N (trapezoid, by DCT-I)."""
    from scipy.fft import dct

    n = f.shape[-1] - 1
    gam = dct(np.asarray(f, dtype=float), type=1) / (2.0 * n)
    return gam if max_lag is None else gam[: max_lag + 1]

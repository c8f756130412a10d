"""The paper's Example-1 bivariate VAR(1) (spec flip.md section 3.1, ambiguity A8), shared by the FLIP tests.

(X_t, Z_t)' = Phi (X_{t-1}, Z_{t-1})' + e_t, e_t ~ N_2(0, sigma^2 I), sigma^2 = 0.5, with stationary covariance
Gamma0 = v [[1, rho], [rho, 1]], v = sigma^2 / (1 - rho) + 1 and Phi = (Gamma0 - Sigma)^{1/2} Gamma0^{-1/2}
(symmetric square roots).
"""

from __future__ import annotations

import math

import numpy as np

from tsdp.flip import spectral
from tsdp.flip.examples import example1_model, stationary_covariance

SIGMA2 = 0.5
RHOS = (0.1, 0.7)


def variance(rho: float) -> float:
    """v = sigma^2 / (1 - rho) + 1."""
    return SIGMA2 / (1.0 - rho) + 1.0


def gamma0(rho: float) -> np.ndarray:
    return stationary_covariance(rho, SIGMA2)


def sigma() -> np.ndarray:
    return SIGMA2 * np.eye(2)


def phi(rho: float) -> np.ndarray:
    """Phi = (Gamma0 - Sigma)^{1/2} Gamma0^{-1/2} (A8), as built by tsdp.flip.examples."""
    return example1_model(rho, SIGMA2).coefs[0]


def true_fit(rho: float) -> spectral.VarFit:
    """The true model as a VarFit, so ``.spectrum`` gives the population spectral matrix."""
    return spectral.VarFit(phi(rho)[None, :, :], sigma(), "true", True)


def true_spectra(rho: float, n: int = 8192) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(lambda grid, f_X, f_{X|Z}) of the true model on the grid lambda_k = pi k / n."""
    lam = spectral.frequency_grid(n)
    fmat = true_fit(rho).spectrum(lam)
    f_cond, _ = spectral.conditional_spectrum(fmat)
    return lam, fmat[:, 0, 0].real, f_cond


def simulate(rho: float, T: int, rng: np.random.Generator, reps: int | None = None,
             burn: int = 300) -> np.ndarray:
    """A path (T, 2) of (X, Z), or a batch (reps, T, 2), kept after ``burn`` burn-in steps from 0.

    Phi is symmetric, Phi = V diag(d) V', and Sigma = sigma^2 I, so Y = V'W is a pair of independent
    AR(1)s driven by iid N(0, sigma^2) shocks; each is run by ``scipy.signal.lfilter``.
    """
    from scipy.signal import lfilter

    p = phi(rho)
    assert np.allclose(p, p.T)
    d, v = np.linalg.eigh(p)
    batch = 1 if reps is None else reps
    shocks = math.sqrt(SIGMA2) * rng.standard_normal((batch, burn + T, 2))
    y = np.stack([lfilter([1.0], [1.0, -d[i]], shocks[:, :, i], axis=1) for i in range(2)], axis=-1)
    w = (y @ v.T)[:, burn:, :]
    return w[0] if reps is None else w

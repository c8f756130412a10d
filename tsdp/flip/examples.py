"""The paper's Example 1 model (McElroy, Roy & Hore 2022, section 4), for benchmarks and tests.

A bivariate VAR(1) ``(X_t, Z_t)' = Phi (X_{t-1}, Z_{t-1})' + (eps_t, zeta_t)'`` with i.i.d.
N(0, sigma^2 I) innovations, sigma^2 = 0.5, stationary covariance ``Gamma_0 = v [[1, rho], [rho, 1]]``,
``v = sigma^2 / (1 - rho) + 1``. The paper prints ``Phi = (Gamma_0 - Sigma) Gamma_0^{-1/2}``, which does
not reproduce Gamma_0 (ambiguity A8); the consistent choice, used here, is
``Phi = (Gamma_0 - Sigma)^{1/2} Gamma_0^{-1/2}`` with symmetric square roots.
"""

from __future__ import annotations

import numpy as np

from tsdp.flip.spectral import VarFit

SIGMA2 = 0.5


def _sym_sqrt(a: np.ndarray) -> np.ndarray:
    vals, vecs = np.linalg.eigh(a)
    return (vecs * np.sqrt(vals)) @ vecs.T


def example1_model(rho: float, sigma2: float = SIGMA2) -> VarFit:
    """The true VAR(1) of Example 1 as a :class:`VarFit` (its spectrum is the population one)."""
    v = sigma2 / (1.0 - rho) + 1.0
    gamma0 = v * np.array([[1.0, rho], [rho, 1.0]])
    sigma = sigma2 * np.eye(2)
    phi = _sym_sqrt(gamma0 - sigma) @ np.linalg.inv(_sym_sqrt(gamma0))
    return VarFit(phi[None], sigma, "true model", True)


def stationary_covariance(rho: float, sigma2: float = SIGMA2) -> np.ndarray:
    v = sigma2 / (1.0 - rho) + 1.0
    return v * np.array([[1.0, rho], [rho, 1.0]])


def simulate_example1(rho: float, T: int, rng: np.random.Generator, reps: int = 1,
                      sigma2: float = SIGMA2) -> np.ndarray:
    """``reps`` independent paths of length T, shape (reps, T, 2), started in the stationary law."""
    model = example1_model(rho, sigma2)
    phi = model.coefs[0]
    chol = np.linalg.cholesky(stationary_covariance(rho, sigma2))
    state = rng.standard_normal((reps, 2)) @ chol.T
    shocks = rng.normal(0.0, np.sqrt(sigma2), (T, reps, 2))
    out = np.empty((reps, T, 2))
    for t in range(T):  # a loop over time, vectorised over the replicates
        if t:
            state = state @ phi.T + shocks[t]
        out[:, t] = state
    return out

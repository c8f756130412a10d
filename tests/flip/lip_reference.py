"""A dense reference for the same-date LIP of every released date (independent of tsdp.flip.datewise)."""

from __future__ import annotations

import numpy as np


def conditional_same_date_lip(residual_release: np.ndarray, basis: np.ndarray, G: np.ndarray) -> np.ndarray:
    """LIP_t for t = 1..T: eq. (5) for e_t and the residual release r_t = (R e)_t, both conditioned on the
    trend coordinates U = Q' e (``basis`` Q orthonormal), by a Schur complement of the joint covariance
    of (e_t, r_t, U) under Cov(e) = G."""
    T = G.shape[0]
    out = np.empty(T)
    for t in range(T):
        A = np.vstack([np.eye(T)[t], residual_release[t], basis.T])
        C = A @ G @ A.T
        cond = C[:2, :2] - C[:2, 2:] @ np.linalg.solve(C[2:, 2:], C[2:, :2])
        out[t] = 1.0 - cond[0, 1] ** 2 / (cond[0, 0] * cond[1, 1])
    return out

"""A dense reference for the same-date LIP of every released date (independent of tsdp.flip.datewise),
and the release map it is computed for, rebuilt from what the pipeline called."""

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


class ReleaseMap:
    """Records what ``tsdp.flip.mechanism.flip_series`` hands to the filtering and to the ACVF (through
    ``monkeypatch``) and rebuilds from it the T x T map residual -> released residual, by applying the
    very filtering functions to unit vectors: independent of ``tsdp.flip.datewise``."""

    def __init__(self, monkeypatch) -> None:
        from tsdp.flip import mechanism

        self.calls: dict[str, list] = {"extend": [], "taps": [], "circular": [], "acvf": []}
        for module, name in ((mechanism.filtering, "extend"), (mechanism.filtering, "apply_taps"),
                             (mechanism.filtering, "circular_filter"), (mechanism.spectral, "acvf")):
            key = {"apply_taps": "taps", "circular_filter": "circular"}.get(name, name)
            monkeypatch.setattr(module, name, self._wrap(getattr(module, name), key))

    def _wrap(self, function, key):
        def spied(*args, **kwargs):
            self.calls[key].append(args)
            return function(*args, **kwargs)
        return spied

    def operator(self, T: int, boundary: str) -> np.ndarray:
        from tsdp.flip import filtering

        eye = np.eye(T)
        if boundary == "extend":
            _, gamma_x, M = self.calls["extend"][-1]
            taps = self.calls["taps"][-1][1]
            columns = [filtering.apply_taps(filtering.extend(eye[:, s], gamma_x, M)[0], taps) for s in range(T)]
        else:
            theta = self.calls["circular"][-1][1]
            columns = [filtering.circular_filter(eye[:, s], theta) for s in range(T)]
        return np.column_stack(columns)

    def lip_by_date(self, T: int, trend_order: int, boundary: str) -> np.ndarray:
        """LIP_t of every date for an attacker given Z and the released trend: the residual release
        ``L (I - P)`` with P the projection on {1, t, ..., t^d} (a monomial basis, not tsdp's Legendre
        one), by :func:`conditional_same_date_lip` under the ACVF of the estimated f_{X|Z} (the last
        ACVF the pipeline computed)."""
        from scipy.linalg import toeplitz

        from tsdp.flip.spectral import acvf

        basis, _ = np.linalg.qr(np.vander(np.linspace(-1.0, 1.0, T), trend_order + 1))
        residual_release = self.operator(T, boundary) @ (np.eye(T) - basis @ basis.T)
        gamma = acvf(self.calls["acvf"][-1][0])
        return conditional_same_date_lip(residual_release, basis, toeplitz(gamma[:T]))

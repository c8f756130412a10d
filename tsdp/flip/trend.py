"""Polynomial trend removal and restoration (McElroy, Roy & Hore 2022, section 2.4, Examples 2-3).

FLIP filters the residuals of an OLS fit of each series on {1, t, ..., t^d} and adds the fitted
trend back, so a polynomial trend of order d is kept exactly even though a finite filter is only
approximately trend-invariant (spec pitfall P6). Time is rescaled to [-1, 1] and the basis is
Legendre, which keeps the least-squares problem well conditioned for any T and d.
"""

from __future__ import annotations

import numpy as np


def trend_basis(T: int, order: int) -> np.ndarray:
    """(T, order+1) Legendre basis on t rescaled to [-1, 1]; it spans {1, t, ..., t^order}."""
    t = np.linspace(-1.0, 1.0, T) if T > 1 else np.zeros(1)
    return np.polynomial.legendre.legvander(t, order)


def detrend(y: np.ndarray, order: int) -> tuple[np.ndarray, np.ndarray]:
    """OLS fit of each column of ``y`` (T,) or (T, q) on the trend basis: (residuals, fitted trend)."""
    y = np.asarray(y, dtype=float)
    basis = trend_basis(y.shape[0], order)
    coef, *_ = np.linalg.lstsq(basis, y, rcond=None)
    trend = basis @ coef
    return y - trend, trend

"""tsdp.flip.datewise: the same-date LIP of every released date, against a dense computation.

The dense reference forms the T x T release map column by column (the filter applied to unit vectors)
and conditions (e_t, r_t) on the trend coordinates U = Q' e by a Schur complement of their joint
covariance; the module computes the same without forming the map (closed-form interior rows, explicit
edge rows, FFT recurrences in circular mode, low-rank trend terms).
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy.linalg import toeplitz

from tests.flip.lip_reference import conditional_same_date_lip
from tsdp.flip import datewise, filtering, trend

AR = 0.7 ** np.arange(6000) / (1 - 0.49)  # AR(1) 0.7 autocovariances


def dense_lip(apply, T: int, d: int, gamma: np.ndarray) -> np.ndarray:
    L = np.column_stack([apply(e) for e in np.eye(T)])
    Q, _ = np.linalg.qr(trend.trend_basis(T, d))
    return conditional_same_date_lip(L @ (np.eye(T) - Q @ Q.T), Q, toeplitz(gamma[:T]))


CASES = [(60, 7, 0), (61, 20, 2), (45, 30, 1), (160, 45, 3), (30, 25, 0)]


@pytest.mark.parametrize("T, M, d", CASES)
def test_extend_mode_matches_the_dense_map(T, M, d):
    """Edge rows through backcasts and forecasts (M > T/2 too: rows using both), interior rows, trend."""
    taps = np.random.default_rng(T + M).standard_normal(2 * M + 1) * 0.3

    def apply(v):
        return filtering.apply_taps(filtering.extend(v, AR, M)[0], taps)

    fast = datewise.lip_by_date(apply, AR, trend.trend_basis(T, d), taps=taps, gamma_x=AR, M=M)
    np.testing.assert_allclose(fast, dense_lip(apply, T, d, AR), atol=1e-12)


def test_edge_rows_in_small_blocks(monkeypatch):
    """Long series form their edge rows a few at a time (memory); the blocks join up exactly."""
    T, M = 160, 45
    taps = np.random.default_rng(5).standard_normal(2 * M + 1) * 0.3

    def apply(v):
        return filtering.apply_taps(filtering.extend(v, AR, M)[0], taps)

    whole = datewise.lip_by_date(apply, AR, trend.trend_basis(T, 1), taps=taps, gamma_x=AR, M=M)
    monkeypatch.setattr(datewise, "BLOCK_FLOATS", 7 * T)
    np.testing.assert_array_equal(
        datewise.lip_by_date(apply, AR, trend.trend_basis(T, 1), taps=taps, gamma_x=AR, M=M), whole)


@pytest.mark.parametrize("T, M, d", CASES)
def test_circular_mode_matches_the_dense_map(T, M, d):
    """The O(T log T) recurrences (direct, wrapped and cross terms) against the dense circulant."""
    theta = np.pi * np.linspace(0.0, 1.0, 4097) ** (1.0 + M / 50.0)

    def apply(v):
        return filtering.circular_filter(v, theta)

    fast = datewise.lip_by_date(apply, AR, trend.trend_basis(T, d), impulse=apply(np.eye(T)[0]))
    np.testing.assert_allclose(fast, dense_lip(apply, T, d, AR), atol=1e-12)


def test_projection_rows_reproduce_extend():
    x = np.random.default_rng(0).standard_normal(150)
    extended, _ = filtering.extend(x, AR, 10)
    back, fore, W = filtering.projection_rows(150, AR, 10)
    np.testing.assert_allclose(back @ x[:W], extended[:10][::-1], atol=1e-13)
    np.testing.assert_allclose(fore @ x[150 - W:], extended[-10:], atol=1e-13)


def test_the_ends_fall_below_the_interior_and_a_pure_shift_is_exact():
    """White noise filtered by the pure shift Xhat_t = X_{t+1} (taps e_{-1}): every interior date has
    LIP 1 (X_{t+1} is independent of X_t); the last date's released value is the forecast of X_{T+1},
    which is 0 for white noise, so no information either; with AR(1) the forecast phi X_T makes the last
    date reveal X_T completely up to the mean (LIP near 0)."""
    T, M = 40, 1
    shift = np.array([1.0, 0.0, 0.0])  # np.convolve(extended, taps, "valid")[t] = extended[t + 2]: X_{t+1}
    white = np.zeros(6000)
    white[0] = 1.0
    for gamma, last in ((white, 1.0), (AR, 0.0)):
        def apply(v, gamma=gamma):
            return filtering.apply_taps(filtering.extend(v, gamma, M)[0], shift)

        lip = datewise.lip_by_date(apply, gamma, trend.trend_basis(T, 0), taps=shift, gamma_x=gamma, M=M)
        assert abs(lip[-1] - last) < 0.05, lip[-1]
    assert np.all(lip[:-1] > 1 - 0.7 ** 2 - 0.05)  # AR(1) 0.7 interior: 1 - corr(X_t, X_{t+1})^2 = 0.51

"""Forecast metrics (tsdp.forecast.metrics): wQL / mean wQL (CRPS), seasonal naive, MASE.

Spec: /work/shared/specs/schuchardt.md sections 3.3 and 3.5 (GluonTS definitions). All checks are
exact up to floating-point rounding (rtol 1e-12), against direct loop implementations and small
cases computed by hand.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from tsdp.errors import UsageError
from tsdp.forecast.metrics import QUANTILE_LEVELS, mase, mean_wql, seasonal_naive, weighted_quantile_loss

RTOL = 1e-12


def wql_loop(y, q, levels):
    out = []
    for k, kappa in enumerate(levels):
        num = 0.0
        den = 0.0
        for i in range(y.shape[0]):
            for t in range(y.shape[1]):
                pred = q[i, t, k]
                indicator = 1.0 if y[i, t] <= pred else 0.0
                num += abs((y[i, t] - pred) * (indicator - kappa))
                den += abs(y[i, t])
        out.append(2 * num / den)
    return np.array(out)


def mase_loop(y, median, history, m):
    ratios = []
    for i in range(y.shape[0]):
        h = history[i]
        scale = sum(abs(h[t] - h[t - m]) for t in range(m, len(h))) / (len(h) - m)
        if scale == 0:
            continue
        err = sum(abs(y[i, t] - median[i, t]) for t in range(y.shape[1])) / y.shape[1]
        ratios.append(err / scale)
    return float(np.mean(ratios)) if ratios else math.nan


def test_quantile_levels():
    assert QUANTILE_LEVELS == (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9)


def test_wql_matches_loop():
    rng = np.random.default_rng(0)
    y = rng.gamma(2.0, 3.0, size=(7, 5)) - 1.0  # some negative targets too
    q = np.sort(rng.normal(5.0, 3.0, size=(7, 5, 9)), axis=-1)
    q[0, 0, :] = y[0, 0]  # ties: y <= q counts as covered
    np.testing.assert_allclose(weighted_quantile_loss(y, q), wql_loop(y, q, QUANTILE_LEVELS), rtol=RTOL)
    assert mean_wql(y, q) == pytest.approx(np.mean(wql_loop(y, q, QUANTILE_LEVELS)), rel=RTOL)
    levels = (0.05, 0.5, 0.95)
    q3 = q[..., [0, 4, 8]]
    np.testing.assert_allclose(weighted_quantile_loss(y, q3, levels), wql_loop(y, q3, levels), rtol=RTOL)


def test_wql_by_hand():
    y = np.array([[1.0, 2.0]])
    # kappa 0.5, q = (2, 2): 2 (|-1| * 0.5 + 0) / 3 = 1/3
    assert weighted_quantile_loss(y, np.array([[[2.0], [2.0]]]), (0.5,))[0] == pytest.approx(1 / 3, rel=RTOL)
    # kappa 0.1, q = (0, 3): 2 (|1 * (0 - 0.1)| + |-1 * (1 - 0.1)|) / 3 = 2/3
    assert weighted_quantile_loss(y, np.array([[[0.0], [3.0]]]), (0.1,))[0] == pytest.approx(2 / 3, rel=RTOL)
    # a point forecast with levels symmetric about 0.5: mean wQL = sum |y - y_hat| / sum |y|
    y_hat = np.array([[0.0, 3.5]])
    assert mean_wql(y, y_hat) == pytest.approx(2.5 / 3, rel=RTOL)
    np.testing.assert_allclose(weighted_quantile_loss(y, y_hat),
                               weighted_quantile_loss(y, np.repeat(y_hat[..., None], 9, axis=-1)), rtol=RTOL)


def test_perfect_forecast_has_zero_loss_and_zero_target_is_nan():
    rng = np.random.default_rng(1)
    y = rng.normal(size=(4, 6))
    assert np.all(weighted_quantile_loss(y, np.repeat(y[..., None], 9, axis=-1)) == 0)
    assert mean_wql(y, y) == 0
    assert np.all(np.isnan(weighted_quantile_loss(np.zeros((2, 3)), np.ones((2, 3)))))


def test_wql_shape_refusals():
    y = np.ones((3, 4))
    with pytest.raises(UsageError, match="do not match"):
        weighted_quantile_loss(y, np.ones((3, 4, 5)))
    with pytest.raises(UsageError, match="--quantiles"):
        weighted_quantile_loss(y, np.ones((3, 4, 2)), (0.0, 0.5))


def test_seasonal_naive_repeats_the_last_season():
    history = np.arange(10.0)[None, :]
    np.testing.assert_array_equal(seasonal_naive(history, 7, 3), [[7, 8, 9, 7, 8, 9, 7]])
    np.testing.assert_array_equal(seasonal_naive(history, 2, 1), [[9, 9]])
    np.testing.assert_array_equal(seasonal_naive(np.arange(5.0), 3, 5), [0, 1, 2])
    with pytest.raises(UsageError, match="--season 6"):
        seasonal_naive(np.arange(5.0), 3, 6)
    with pytest.raises(UsageError, match="--season"):
        seasonal_naive(history, 3, 0)


@pytest.mark.parametrize("n_hist", [24, 27, 31])  # history not a whole number of seasons too
def test_seasonal_naive_on_a_periodic_series_is_perfect(n_hist):
    rng = np.random.default_rng(2)
    season, horizon = 6, 14
    pattern = rng.uniform(1, 10, size=(5, season))
    full = np.tile(pattern, (1, (n_hist + horizon) // season + 1))[:, :n_hist + horizon]
    history, y = full[:, :n_hist], full[:, n_hist:]
    forecast = seasonal_naive(history, horizon, season)
    np.testing.assert_array_equal(forecast, y)
    assert mase(y, forecast, history, 1) == 0  # season 1 has a non-zero scale: a genuine 0
    assert mean_wql(y, forecast) == 0
    assert np.all(weighted_quantile_loss(y, np.repeat(forecast[..., None], 9, axis=-1)) == 0)


def test_mase_matches_loop_and_hand_case():
    rng = np.random.default_rng(3)
    history = rng.normal(10, 3, size=(6, 40))
    y = rng.normal(10, 3, size=(6, 8))
    median = rng.normal(10, 3, size=(6, 8))
    for m in (1, 4, 24):
        assert mase(y, median, history, m) == pytest.approx(mase_loop(y, median, history, m), rel=RTOL)
    # history 1, 2, 3, 4 (m = 1): scale 1; errors 0 and 2: MASE 1
    assert mase(np.array([[5.0, 6.0]]), np.array([[5.0, 8.0]]), np.array([[1.0, 2, 3, 4]]), 1) == 1.0
    # scale (|3-1| + |4-2|) / 2 = 2 with m = 2; mean error 1: MASE 0.5
    assert mase(np.array([5.0, 6.0]), np.array([5.0, 8.0]), np.array([1.0, 2, 3, 4]), 2) == 0.5


def test_mase_skips_zero_scale_series():
    history = np.array([[1.0, 2, 3, 4], [7.0, 7, 7, 7]])
    y = np.array([[5.0, 6.0], [7.0, 9.0]])
    median = np.array([[5.0, 8.0], [7.0, 7.0]])
    assert mase(y, median, history, 1) == 1.0  # the constant series (scale 0) is skipped
    assert mase(y, median, history, 1) == mase_loop(y, median, history, 1)
    assert math.isnan(mase(y[1:], median[1:], history[1:], 1))  # all skipped
    with pytest.raises(UsageError, match="--season 4"):
        mase(y, median, history, 4)  # needs at least m + 1 history values

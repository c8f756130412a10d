"""Forecast accuracy metrics: weighted quantile loss (the paper's CRPS), MASE, seasonal naive.

Schuchardt et al. (2025, App. B.3; spec section 3.5) report CRPS approximated as in GluonTS by the
mean weighted quantile loss over the levels 0.1, ..., 0.9:

    wQL_kappa = 2 sum_{i,t} |(y_it - q_it^kappa) (1[y_it <= q_it^kappa] - kappa)| / sum_{i,t} |y_it|

and log MASE (GluonTS / M4): per series, the mean absolute error of the median forecast divided by
the in-sample mean absolute error of the seasonal naive forecast with season m on the history,
averaged over series. Metrics are evaluated on held-out data and cost no privacy only if that data
is not private (spec 6.3 item 15). NaN inputs propagate into the results.
"""

from __future__ import annotations

import numpy as np

from tsdp.errors import UsageError

__all__ = ["QUANTILE_LEVELS", "weighted_quantile_loss", "mean_wql", "seasonal_naive", "mase"]

QUANTILE_LEVELS = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9)


def _quantile_forecast(y: np.ndarray, q: np.ndarray, levels) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    y = np.asarray(y, dtype=np.float64)
    q = np.asarray(q, dtype=np.float64)
    kappa = np.asarray(levels, dtype=np.float64).ravel()
    if kappa.size == 0 or np.any(~((kappa > 0) & (kappa < 1))):
        raise UsageError(f"--quantiles must be levels strictly between 0 and 1, got {list(kappa)}")
    if q.shape == y.shape:  # a point forecast: the same value at every level
        q = np.broadcast_to(q[..., None], y.shape + (kappa.size,))
    if q.shape != y.shape + (kappa.size,):
        raise UsageError(f"quantile forecasts of shape {q.shape} do not match targets {y.shape} "
                         f"with {kappa.size} quantile levels (expected {y.shape + (kappa.size,)})")
    return y, q, kappa


def weighted_quantile_loss(y: np.ndarray, q: np.ndarray, levels=QUANTILE_LEVELS) -> np.ndarray:
    """wQL at every level: shape (K,) for targets ``y`` (n, L_F) and quantiles ``q`` (n, L_F, K).

    ``q`` may also have the shape of ``y`` (a point forecast, used at every level). When
    sum |y| = 0 the loss is undefined and every entry is NaN.
    """
    y, q, kappa = _quantile_forecast(y, q, levels)
    target = y[..., None]
    loss = 2.0 * np.abs((target - q) * ((target <= q) - kappa))
    loss = loss.reshape(-1, kappa.size).sum(axis=0)
    scale = np.abs(y).sum()
    if scale == 0:
        return np.full(kappa.size, np.nan)
    return loss / scale


def mean_wql(y: np.ndarray, q: np.ndarray, levels=QUANTILE_LEVELS) -> float:
    """Mean of :func:`weighted_quantile_loss` over the levels (GluonTS ``mean_wQuantileLoss``, ~CRPS).

    For a point forecast with levels symmetric about 0.5 this is sum |y - y_hat| / sum |y|.
    """
    return float(np.mean(weighted_quantile_loss(y, q, levels)))


def _check_season(season: int, n_hist: int, extra: int) -> None:
    """``season`` must be a positive integer and the history at least ``season + extra`` long."""
    if not isinstance(season, (int, np.integer)) or isinstance(season, bool) or season < 1:
        raise UsageError(f"--season must be an integer >= 1, got {season!r}")
    needed = season + extra
    if n_hist < needed:
        raise UsageError(f"--season {season} needs a history of at least {needed} values, got {n_hist}; "
                         "use a shorter season or a longer history")


def seasonal_naive(history: np.ndarray, horizon: int, season: int) -> np.ndarray:
    """Repeat the last season of each history row: y_hat[t] = history[-season + (t mod season)].

    ``history`` is (n, L_hist) (or 1-D for one series); returns (n, horizon).
    """
    history = np.asarray(history, dtype=np.float64)
    if not isinstance(horizon, (int, np.integer)) or isinstance(horizon, bool) or horizon < 1:
        raise UsageError(f"--forecast-length must be an integer >= 1, got {horizon!r}")
    n_hist = history.shape[-1] if history.ndim else 0
    _check_season(season, n_hist, 0)
    idx = n_hist - season + np.arange(horizon) % season
    return history[..., idx]


def mase(y: np.ndarray, median: np.ndarray, history: np.ndarray, season: int) -> float:
    """Mean over series of the per-series MASE (GluonTS / M4 definition).

    For each series: mean_t |y_t - median_t| divided by (1 / (n_h - m)) sum_{t > m} |h_t - h_{t-m}|,
    the in-sample seasonal naive MAE of its history h (n_h values, season m). Series whose history
    has a zero denominator (e.g. constant with period m) are skipped; if every series is skipped the
    result is NaN. ``y`` and ``median`` are (n, L_F), ``history`` (n, L_hist); 1-D means one series.
    """
    y = np.atleast_2d(np.asarray(y, dtype=np.float64))
    median = np.atleast_2d(np.asarray(median, dtype=np.float64))
    history = np.atleast_2d(np.asarray(history, dtype=np.float64))
    if y.shape != median.shape:
        raise UsageError(f"median forecast of shape {median.shape} does not match targets {y.shape}")
    if history.ndim != 2 or history.shape[0] != y.shape[0]:
        raise UsageError(f"history of shape {history.shape} does not match {y.shape[0]} target series")
    _check_season(season, history.shape[1], 1)
    scale = np.mean(np.abs(history[:, season:] - history[:, :-season]), axis=1)
    error = np.mean(np.abs(y - median), axis=1)
    keep = scale != 0  # NaN scales are kept so that NaN propagates
    if not keep.any():
        return float("nan")
    return float(np.mean(error[keep] / scale[keep]))

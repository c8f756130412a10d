"""A traffic-like panel of hourly counts for benchmarks and tests (not real data).

Each sensor has its own level (log-uniform), a weekday profile with morning and evening peaks of
sensor-specific weights, a lower weekend profile, a slowly varying day-to-day factor (AR(1) in logs)
and gamma-Poisson (negative binomial) counts. The panel therefore has daily and weekly seasonality,
the structure of the PeMS traffic data that Schuchardt et al. (2025) train on.
"""

from __future__ import annotations

import numpy as np


def _bump(x: np.ndarray, centre: float, width: float) -> np.ndarray:
    return np.exp(-0.5 * ((x - centre) / width) ** 2)


def traffic_panel(n_series: int, n_steps: int, seed: int = 0, dispersion: float = 30.0,
                  day_to_day: float = 0.05) -> np.ndarray:
    """(n_series, n_steps) hourly counts starting on a Monday at 00:00."""
    rng = np.random.default_rng(seed)
    hours = np.arange(n_steps)
    hod = (hours % 24)[None, :] + 0.5
    day = hours // 24
    weekend = ((day % 7) >= 5)[None, :]
    level = np.exp(rng.uniform(np.log(20), np.log(400), n_series))[:, None]
    w_morning = rng.uniform(0.6, 1.4, n_series)[:, None]
    w_evening = 2.0 - w_morning + rng.uniform(-0.2, 0.2, n_series)[:, None]
    weekend_factor = rng.uniform(0.5, 0.8, n_series)[:, None]
    daytime = 1.0 / (1.0 + np.exp(-(hod - 6.0))) / (1.0 + np.exp(hod - 21.0))
    weekday = 0.12 + 0.55 * daytime + w_morning * _bump(hod, 8.0, 1.3) + w_evening * _bump(hod, 17.5, 1.6)
    weekday = weekday / weekday[:, :24].mean(axis=1, keepdims=True)
    weekend_profile = 0.15 + 2.0 * _bump(hod, 13.5, 3.5)
    weekend_profile = weekend_profile / weekend_profile[:, :24].mean(axis=1, keepdims=True)
    profile = np.where(weekend, weekend_factor * weekend_profile, weekday)
    n_days = int(day[-1]) + 1
    shocks = rng.normal(0.0, day_to_day, (n_series, n_days))
    log_factor = np.zeros((n_series, n_days))
    for d in range(1, n_days):  # AR(1) over days, vectorised over series
        log_factor[:, d] = 0.8 * log_factor[:, d - 1] + shocks[:, d]
    mean = level * profile * np.exp(log_factor[:, day])
    return rng.poisson(rng.gamma(dispersion, mean / dispersion)).astype(float)

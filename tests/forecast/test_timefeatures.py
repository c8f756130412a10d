"""Public covariates of the deep forecasters (tsdp.forecast.timefeatures): GluonTS's time features and
default lags for a grid step, the lag syntax, and the calendar's window rows (numpy only; no JAX)."""

from __future__ import annotations

import numpy as np
import pytest

from tsdp.errors import UsageError
from tsdp.forecast.timefeatures import (
    LAG_REACH,
    Calendar,
    default_lags,
    default_time_features,
    headline_season,
    natural_seasons,
    parse_lags,
)

HOUR_US = 3_600_000_000
PAPER_TRAFFIC = (1, 2, 3, 4, 5, 6, 7, 23, 24, 25, 47, 48, 49, 71, 72, 73, 95, 96, 97, 119, 120, 121, 143, 144,
                 145, 167, 168, 169)


def test_default_lags_for_hourly_data_are_gluontss_forty_up_to_721():
    lags = default_lags(HOUR_US)
    assert len(lags) == 40 and max(lags) == 721  # spec deep.md: "40 default hourly lags up to 721"
    assert set(PAPER_TRAFFIC) <= set(lags)
    assert {335, 336, 337, 503, 504, 505, 671, 672, 673, 719, 720, 721} <= set(lags)
    assert lags == tuple(sorted(set(lags)))


def test_default_lags_for_other_steps():
    daily = default_lags(24 * HOUR_US)
    assert daily[:7] == tuple(range(1, 8))
    assert {8, 13, 14, 15, 29, 30, 31, 363, 364, 365, 28, 56, 84} <= set(daily) and max(daily) <= 1200
    assert set(default_lags(step_months=1)) == set(range(1, 8)) | {11, 12, 13, 23, 24, 25, 35, 36, 37}
    ten_minutes = default_lags(HOUR_US // 6)
    assert {8, 10, 12, 14, 16, 18, 20, 143, 144, 145, 1007, 1008, 1009} <= set(ten_minutes)
    assert default_lags() == tuple(range(1, 8))  # integer time: no season known


def test_default_time_features_follow_the_step():
    assert default_time_features(HOUR_US) == ("hour_of_day", "day_of_week", "day_of_month", "day_of_year", "age")
    assert default_time_features(24 * HOUR_US) == ("day_of_week", "day_of_month", "day_of_year", "age")
    assert default_time_features(HOUR_US // 4)[:2] == ("minute_of_hour", "hour_of_day")
    assert default_time_features(7 * 24 * HOUR_US) == ("day_of_month", "week_of_year", "age")
    assert default_time_features(step_months=3) == ("month_of_year", "age")
    assert default_time_features(step_months=12) == ("age",)
    assert default_time_features() == ("age",)


def test_parse_lags():
    assert parse_lags("1-7,23-25,47-49,71-73,95-97,119-121,143-145,167-169") == PAPER_TRAFFIC
    assert parse_lags(" 24, 1,24 ,168") == (1, 24, 168)
    for bad in ("", "0", "3-1", "a", "1-b", "-2"):
        with pytest.raises(UsageError, match="--lags"):
            parse_lags(bad)


def test_hourly_features_on_a_known_calendar():
    # 2024-01-01 00:00 is a Monday; position 24 * 31 + 13 is 2024-02-01 13:00 (a Thursday)
    cal = Calendar(np.datetime64("2024-01-01T00:00"), step_us=HOUR_US)
    names = ("hour_of_day", "day_of_week", "day_of_month", "day_of_year", "age")
    f = cal.features(names, [0, 24 * 31 + 13, -1])
    np.testing.assert_allclose(f[0], [-0.5, -0.5, -0.5, -0.5, np.log10(2.0)])
    np.testing.assert_allclose(f[1], [13 / 23 - 0.5, 3 / 6 - 0.5, 0 / 30 - 0.5, 31 / 365 - 0.5, np.log10(2 + 757)])
    np.testing.assert_array_equal(f[2], 0.0)  # before the first value: padding, as GluonTS pads


def test_week_and_month_features():
    weekly = Calendar(np.datetime64("2021-01-04"), step_us=7 * 24 * HOUR_US)  # ISO week 1 of 2021
    np.testing.assert_allclose(weekly.features(["week_of_year"], [0, 1, 52])[:, 0],
                               [0 / 52 - 0.5, 1 / 52 - 0.5, 0 / 52 - 0.5])  # 2022-01-03 is week 1 again
    monthly = Calendar(np.datetime64("2023-11-01"), step_months=1)
    np.testing.assert_allclose(monthly.features(["month_of_year"], [0, 1, 2])[:, 0],
                               [10 / 11 - 0.5, 11 / 11 - 0.5, 0 / 11 - 0.5])
    with pytest.raises(UsageError, match="hour_of_day"):
        monthly.features(["hour_of_day"], [0])
    with pytest.raises(UsageError, match="integer time"):
        Calendar().features(["hour_of_day"], [0])


def test_window_features_cover_context_and_forecast():
    cal = Calendar(np.datetime64("2024-01-01T00:00"), step_us=HOUR_US)
    names = ("hour_of_day", "age")
    rows = cal.window_features(names, np.array([5, 100, 2]), 4, 3)
    assert rows.shape == (3, 7, 2)
    for i, p in enumerate([5, 100, 2]):
        np.testing.assert_array_equal(rows[i], cal.features(names, np.arange(p - 4, p + 3)))
    later = cal.window_features(names, np.array([500]), 4, 3)  # the cached table grows on demand
    np.testing.assert_array_equal(later[0], cal.features(names, np.arange(496, 503)))


def test_calendar_from_a_saved_models_grid_label():
    hourly = Calendar.from_label("2024-01-01 00:00:00", "1h")
    assert hourly.step_us == HOUR_US and hourly.origin == np.datetime64("2024-01-01T00:00")
    assert Calendar.from_label("2024-01-01", "15m").step_us == HOUR_US // 4
    assert Calendar.from_label("2023-11-01", "1q").step_months == 3
    assert Calendar.from_label("2024-01-01", "500ms").step_us == 500_000
    assert Calendar.from_label("5", "1").origin is None
    with pytest.raises(UsageError, match="2x"):
        Calendar.from_label("2024-01-01", "2x")


# ------------------------------------------------------------------ lags bounded by the context (issue 31)


@pytest.mark.parametrize("step_us, months, context, expected", [
    (HOUR_US, None, 48, PAPER_TRAFFIC),  # hourly: exactly the paper's traffic lags (a week, +-1)
    (24 * HOUR_US, None, 28, tuple(range(1, 9)) + (13, 14, 15, 20, 21, 22, 27, 28, 29, 30, 31, 56, 84)),
    (7 * 24 * HOUR_US, None, 12, tuple(range(1, 9)) + (12,)),
    (None, 1, 24, tuple(range(1, 8)) + (11, 12, 13, 23, 24, 25, 35, 36, 37)),
    (None, 3, 8, tuple(range(1, 10)) + (11, 12, 13)),
])
def test_default_lags_reach_back_at_most_four_contexts(step_us, months, context, expected):
    """GluonTS's lags for hourly, daily, weekly, monthly and quarterly steps, those up to 4 L: the
    receptive field L + max lag - 1 (the accountant's L_C) stays below 5 L."""
    lags = default_lags(step_us, months, context=context)
    assert lags == expected
    assert set(lags) <= set(default_lags(step_us, months)) and max(lags) <= LAG_REACH * context
    assert context + max(lags) - 1 < (LAG_REACH + 1) * context


def test_default_lags_of_a_tiny_context_keep_lag_one():
    assert default_lags(HOUR_US, context=1) == (1, 2, 3, 4)
    assert default_lags(context=1) == (1, 2, 3, 4)


@pytest.mark.parametrize("step_us, months, seasons", [
    (HOUR_US, None, (24, 168)), (24 * HOUR_US, None, (7, 365)), (7 * 24 * HOUR_US, None, (52,)),
    (None, 1, (12,)), (None, 3, (4,)), (HOUR_US // 4, None, (4, 96, 672)), (None, 12, ()), (None, None, ()),
])
def test_natural_seasons_of_the_step(step_us, months, seasons):
    assert natural_seasons(step_us, months) == seasons


def test_headline_season_is_the_longest_the_receptive_field_covers():
    assert headline_season((24, 168), 216) == 168  # DeepAR with lags up to 169
    assert headline_season((24, 168), 48) == 24
    assert headline_season((24, 168), 12) == 24  # none covered: the shortest
    assert headline_season((), 100) == 1

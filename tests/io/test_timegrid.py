"""Regular time grids: --freq parsing, step inference, gaps, positions (tsdp.io.timegrid)."""

from __future__ import annotations

from datetime import date, datetime, timedelta

import numpy as np
import polars as pl
import pytest

from tsdp.errors import DataError, UsageError
from tsdp.io.timegrid import Step, TimeGrid, build_grid, fixed_grid, parse_freq, parse_instant
from tsdp.io.timeparse import parse_time_column

US = {"s": 1_000_000, "m": 60_000_000, "h": 3_600_000_000, "d": 86_400_000_000}
T0 = datetime(2024, 1, 1)


# ---------------------------------------------------------------------------------------------
# parse_freq
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("text, step, label", [
    ("15min", Step(15 * US["m"], "us"), "15m"),
    ("15m", Step(15 * US["m"], "us"), "15m"),
    ("15T", Step(15 * US["m"], "us"), "15m"),
    ("30s", Step(30 * US["s"], "us"), "30s"),
    ("1h", Step(US["h"], "us"), "1h"),
    ("h", Step(US["h"], "us"), "1h"),
    ("6H", Step(6 * US["h"], "us"), "6h"),
    (" 2 hours ", Step(2 * US["h"], "us"), "2h"),
    ("24h", Step(US["d"], "us"), "1d"),
    ("1d", Step(US["d"], "us"), "1d"),
    ("1D", Step(US["d"], "us"), "1d"),
    ("1w", Step(7 * US["d"], "us"), "1w"),
    ("2weeks", Step(14 * US["d"], "us"), "2w"),
    ("1000ns", Step(1, "us"), "1us"),
    ("1mo", Step(1, "mo"), "1mo"),
    ("1month", Step(1, "mo"), "1mo"),
    ("2mo", Step(2, "mo"), "2mo"),
    ("3mo", Step(3, "mo"), "1q"),
    ("1q", Step(3, "mo"), "1q"),
    ("1Q", Step(3, "mo"), "1q"),
    ("2q", Step(6, "mo"), "2q"),
    ("1y", Step(12, "mo"), "1y"),
    ("1year", Step(12, "mo"), "1y"),
])
def test_parse_freq_aliases(text, step, label):
    parsed = parse_freq(text, integer_time=False)
    assert parsed == step
    assert parsed.label == label
    assert parse_freq(parsed.label, integer_time=False) == parsed  # the label reads back


@pytest.mark.parametrize("text", ["", "abc", "0h", "00min", "-1h", "1.5h", "h1", "1 fortnight", "1hh",
                                  "15 min 2", "1ns"])
def test_parse_freq_rejects_bad_strings(text):
    with pytest.raises(UsageError, match="--freq") as info:
        parse_freq(text, integer_time=False)
    assert repr(text) in str(info.value)


@pytest.mark.parametrize("text, amount", [("1", 1), ("7", 7), (" 12 ", 12)])
def test_parse_freq_integer_time(text, amount):
    assert parse_freq(text, integer_time=True) == Step(amount, "int")
    assert Step(amount, "int").label == str(amount)


@pytest.mark.parametrize("text", ["0", "-2", "1h", "1.5", "x"])
def test_parse_freq_integer_time_rejects(text):
    with pytest.raises(UsageError, match="positive integer"):
        parse_freq(text, integer_time=True)


# ---------------------------------------------------------------------------------------------
# parse_time_column
# ---------------------------------------------------------------------------------------------


def test_parse_time_column_dates_and_datetimes():
    dates = parse_time_column(pl.DataFrame({"t": ["2024-01-01", " 2024-02-01 "]}), "t")
    assert dates.schema["t"] == pl.Date
    assert dates["t"].to_list() == [date(2024, 1, 1), date(2024, 2, 1)]
    stamps = parse_time_column(pl.DataFrame({"t": ["2024-01-01 00:00:00", "2024-01-01T01:30:00"]}), "t")
    assert stamps.schema["t"] == pl.Datetime("us")
    assert stamps["t"].to_list() == [T0, T0 + timedelta(hours=1, minutes=30)]


def test_parse_time_column_keeps_native_types():
    df = pl.DataFrame({"t": [T0], "d": [date(2024, 1, 1)], "i": pl.Series([3], dtype=pl.Int32)})
    assert parse_time_column(df, "t").schema["t"] == pl.Datetime("us")
    assert parse_time_column(df, "d").schema["d"] == pl.Date
    assert parse_time_column(df, "i").schema["i"] == pl.Int64


@pytest.mark.parametrize("values, bad, row", [
    (["2024-01-01 00:00:00", "noon"], "noon", 2),
    (["never", "2024-01-01 00:00:00"], "never", 1),
    (["soon", "later"], "soon", 1),
])
def test_parse_time_column_unparseable(values, bad, row):
    with pytest.raises(DataError, match="cannot parse") as info:
        parse_time_column(pl.DataFrame({"t": values}), "t")
    assert f"{bad!r} at row {row}" in str(info.value) and "'t'" in str(info.value)


def test_parse_time_column_null_and_wrong_type():
    with pytest.raises(DataError, match="missing timestamp at row 2"):
        parse_time_column(pl.DataFrame({"t": [T0, None]}), "t")
    with pytest.raises(DataError, match="not a time or integer column"):
        parse_time_column(pl.DataFrame({"t": [1.5, 2.5]}), "t")


# ---------------------------------------------------------------------------------------------
# build_grid: inference
# ---------------------------------------------------------------------------------------------


def hours(*h) -> pl.Series:
    return pl.Series("t", [T0 + timedelta(hours=x) for x in h])


def test_infers_fixed_step_from_unsorted_times_with_duplicates():
    grid = build_grid(hours(3, 0, 2, 1, 2, 0), "t", None, False)
    assert grid.step == Step(US["h"], "us") and grid.freq == "1h"
    assert grid.points.to_list() == [T0 + timedelta(hours=h) for h in range(4)]


def test_fifteen_minute_grid():
    times = pl.Series("t", [T0 + timedelta(minutes=15 * k) for k in range(6)])
    grid = build_grid(times, "t", None, False)
    assert grid.freq == "15m" and grid.n_steps == 6


def test_infers_monthly_grid():
    times = pl.Series("t", [date(2023, m, 1) for m in range(1, 13)] + [date(2024, 1, 1)])
    grid = build_grid(times, "t", None, False)
    assert grid.step == Step(1, "mo") and grid.freq == "1mo" and grid.n_steps == 13
    assert grid.points.dtype == pl.Date


def test_infers_monthly_grid_mid_month():
    """Same day and time in every month: still a monthly grid (not a 28-31 day mixture)."""
    times = pl.Series("t", [datetime(2024, m, 15, 6) for m in (1, 2, 3, 4)])
    grid = build_grid(times, "t", None, False)
    assert grid.freq == "1mo"
    assert grid.points.to_list() == [datetime(2024, m, 15, 6) for m in (1, 2, 3, 4)]


def test_monthly_grid_needs_the_same_time_of_day():
    times = pl.Series("t", [datetime(2024, 1, 1), datetime(2024, 2, 1, 5), datetime(2024, 3, 1)])
    with pytest.raises(DataError, match="irregular"):
        build_grid(times, "t", None, False)
    with pytest.raises(DataError, match="2024-02-01 05:00:00 is not on the grid with step 1mo"):
        build_grid(times, "t", "1mo", False)


def test_infers_quarterly_grid_from_dates():
    times = pl.Series("t", [date(y, m, 1) for y in (2019, 2020) for m in (1, 4, 7, 10)])
    grid = build_grid(times.sample(fraction=1.0, shuffle=True, seed=1), "t", None, False)
    assert grid.step == Step(3, "mo") and grid.freq == "1q" and grid.n_steps == 8
    assert grid.points.to_list() == times.to_list()


def test_infers_yearly_grid():
    times = pl.Series("t", [date(y, 1, 1) for y in range(2000, 2005)])
    assert build_grid(times, "t", None, False).freq == "1y"


def test_daily_dates():
    times = pl.Series("t", [date(2024, 2, d) for d in range(27, 30)] + [date(2024, 3, 1)])
    grid = build_grid(times, "t", None, False)
    assert grid.freq == "1d" and grid.n_steps == 4 and grid.points.dtype == pl.Date


def test_weekly_dates_with_freq():
    times = pl.Series("t", [date(2024, 1, 1) + timedelta(weeks=k) for k in range(4)])
    assert build_grid(times, "t", "1w", False).n_steps == 4


def test_freq_finer_than_dates_is_a_usage_error():
    times = pl.Series("t", [date(2024, 1, d) for d in (1, 2, 3)])
    with pytest.raises(UsageError, match="finer than a day"):
        build_grid(times, "t", "1h", False)


def test_integer_time_column():
    grid = build_grid(pl.Series("t", [4, 0, 2, 6]), "t", None, False)
    assert grid.step == Step(2, "int") and grid.freq == "2"
    assert grid.points.to_list() == [0, 2, 4, 6]


def test_integer_time_gap_and_fill():
    times = pl.Series("t", [0, 2, 6])
    with pytest.raises(DataError, match=r"1 missing step\(s\).*first missing: 4"):
        build_grid(times, "t", None, False)
    assert build_grid(times, "t", None, True).points.to_list() == [0, 2, 4, 6]
    assert build_grid(times, "t", "1", True).points.to_list() == list(range(7))


def test_single_time_point():
    grid = build_grid(hours(5, 5), "t", None, False)
    assert grid.n_steps == 1 and grid.step is None and grid.freq is None
    assert grid.positions(hours(5)).tolist() == [0]


def test_empty_input():
    with pytest.raises(DataError, match="no rows"):
        build_grid(pl.Series("t", [], dtype=pl.Datetime("us")), "t", None, False)


def test_irregular_steps_are_an_error():
    with pytest.raises(DataError, match="irregular") as info:
        build_grid(pl.Series("t", [T0, T0 + timedelta(hours=1), T0 + timedelta(hours=2.5)]), "t", None, False)
    assert "2024-01-01 02:30:00" in str(info.value)


def test_month_end_dates_are_irregular():
    times = pl.Series("t", [date(2024, 1, 31), date(2024, 2, 29), date(2024, 3, 31)])
    with pytest.raises(DataError, match="irregular"):
        build_grid(times, "t", None, False)


def test_gap_error_names_the_first_missing_time():
    with pytest.raises(DataError) as info:
        build_grid(hours(0, 1, 4, 2), "t", None, False)
    assert "1 missing step(s)" in str(info.value)
    assert "first missing: 2024-01-01 03:00:00" in str(info.value)
    assert "--fill-missing zero" in str(info.value)


def test_gap_filled():
    grid = build_grid(hours(0, 1, 4), "t", None, True)
    assert grid.points.to_list() == [T0 + timedelta(hours=h) for h in range(5)]


def test_monthly_gap():
    times = pl.Series("t", [date(2024, 1, 1), date(2024, 2, 1), date(2024, 4, 1)])
    with pytest.raises(DataError, match="first missing: 2024-03-01"):
        build_grid(times, "t", None, False)
    assert build_grid(times, "t", None, True).n_steps == 4


def test_times_off_the_given_freq():
    with pytest.raises(DataError, match="not on the grid") as info:
        build_grid(hours(0, 1, 2), "t", "2h", False)
    assert "2024-01-01 01:00:00" in str(info.value)
    with pytest.raises(DataError, match="not on the grid"):
        build_grid(pl.Series("t", [date(2024, 1, 1), date(2024, 2, 1)]), "t", "1q", False)
    with pytest.raises(DataError, match="not on the grid"):
        build_grid(pl.Series("t", [date(2024, 1, 1), date(2024, 2, 15)]), "t", "1mo", False)


def test_given_coarser_freq():
    grid = build_grid(hours(0, 6, 12), "t", "6h", False)
    assert grid.n_steps == 3 and grid.freq == "6h"


def test_nanosecond_and_timezone_columns():
    ns = pl.Series("t", [T0 + timedelta(minutes=30 * k) for k in range(3)]).cast(pl.Datetime("ns"))
    grid = build_grid(ns, "t", None, False)
    assert grid.freq == "30m" and grid.points.dtype == pl.Datetime("ns")
    assert grid.positions(ns.reverse()).tolist() == [2, 1, 0]
    tz = hours(0, 1, 2).dt.replace_time_zone("Europe/Paris")
    grid = build_grid(tz, "t", None, False)
    assert grid.points.dtype == pl.Datetime("us", "Europe/Paris") and grid.n_steps == 3


# ---------------------------------------------------------------------------------------------
# positions
# ---------------------------------------------------------------------------------------------


def test_positions_fixed():
    grid = build_grid(hours(0, 1, 2, 3), "t", None, False)
    assert grid.positions(hours(3, 0, 2, 2)).tolist() == [3, 0, 2, 2]
    assert grid.positions(hours(-1, 4)).tolist() == [-1, 4]  # outside: out of range, never wrapped


def test_positions_monthly_and_quarterly():
    times = pl.Series("t", [date(2024, m, 1) for m in (1, 4, 7, 10)])
    grid = build_grid(times, "t", None, False)
    assert grid.positions(times.reverse()).tolist() == [3, 2, 1, 0]
    inside = pl.Series("t", [date(2024, 5, 20), date(2025, 1, 1)])
    assert grid.positions(inside).tolist() == [1, 4]


def test_positions_integer():
    grid = build_grid(pl.Series("t", [10, 15, 20]), "t", None, False)
    assert grid.positions(pl.Series("t", [20, 10, 15])).tolist() == [2, 0, 1]


def test_positions_dates_daily():
    times = pl.Series("t", [date(2024, 1, d) for d in (1, 2, 3)])
    grid = build_grid(times, "t", None, False)
    assert isinstance(grid, TimeGrid)
    assert grid.positions(times.reverse()).tolist() == [2, 1, 0]
    assert grid.positions(times).dtype == np.int64


# ---------------------------------------------------------------------------------------------
# parse_instant / fixed_grid (the public grid of event input)
# ---------------------------------------------------------------------------------------------


def test_parse_instant():
    assert parse_instant("2024-01-02", "--start", pl.Datetime("us")) == datetime(2024, 1, 2)
    assert parse_instant("2024-01-02 06:00:00", "--end", pl.Datetime("us")) == datetime(2024, 1, 2, 6)
    assert parse_instant("2024-01-02", "--start", pl.Date) == date(2024, 1, 2)
    assert parse_instant("17", "--start", pl.Int64) == 17
    with pytest.raises(UsageError, match="--start: cannot parse 'tomorrow'"):
        parse_instant("tomorrow", "--start", pl.Datetime("us"))
    with pytest.raises(UsageError, match="--end must be an integer.*'x'"):
        parse_instant("x", "--end", pl.Int64)


def test_fixed_grid_end_is_exclusive():
    grid = fixed_grid(T0, T0 + timedelta(hours=3), "1h", "t", pl.Datetime("us"))
    assert grid.points.to_list() == [T0 + timedelta(hours=h) for h in range(3)]
    assert grid.points.name == "t"
    grid = fixed_grid(T0, T0 + timedelta(hours=2, minutes=30), "1h", "t", pl.Datetime("us"))
    assert grid.n_steps == 3


def test_fixed_grid_checks():
    with pytest.raises(UsageError, match="--end .* must be after --start"):
        fixed_grid(T0, T0, "1h", "t", pl.Datetime("us"))
    with pytest.raises(UsageError, match="--start 2024-01-15.*first instant of a month"):
        fixed_grid(datetime(2024, 1, 15), datetime(2024, 6, 1), "1mo", "t", pl.Datetime("us"))
    with pytest.raises(UsageError, match="first instant of a month"):
        fixed_grid(datetime(2024, 1, 1, 1), datetime(2024, 6, 1), "1q", "t", pl.Datetime("us"))
    grid = fixed_grid(date(2024, 1, 1), date(2025, 1, 1), "1q", "t", pl.Date)
    assert grid.points.to_list() == [date(2024, m, 1) for m in (1, 4, 7, 10)]
    assert fixed_grid(0, 10, "3", "t", pl.Int64).points.to_list() == [0, 3, 6, 9]


def test_huge_grids_are_refused_before_they_are_built():
    """A 1-second grid over a century would need gigabytes: exit 5 (NumericalError), at once."""
    from tsdp.errors import NumericalError
    from tsdp.io.timegrid import MAX_STEPS

    far = pl.Series("t", [T0, datetime(2124, 1, 1)])
    with pytest.raises(NumericalError, match=r"--freq 1s would have 3,155,673,601 steps"):
        build_grid(far, "t", "1s", True)
    with pytest.raises(NumericalError, match="more than"):
        fixed_grid(T0, datetime(2124, 1, 1), "1s", "t", pl.Datetime("us"))
    with pytest.raises(NumericalError):
        build_grid(pl.Series("t", [0, 10 * MAX_STEPS]), "t", "1", True)
    assert build_grid(pl.Series("t", [0, MAX_STEPS - 1]), "t", "1", True).n_steps == MAX_STEPS


@pytest.mark.parametrize("text", ["1/2/2024", "02/01/2024 10:00", "2024/01/02", "Jan 2 2024"])
def test_non_iso_timestamps_are_refused_not_guessed(text):
    with pytest.raises(DataError, match="ISO 8601"):
        parse_time_column(pl.DataFrame({"t": ["2024-01-01", text]}), "t")


@pytest.mark.parametrize("freq,start,needs", [("12h", "2024-03-01", True), ("1d", "2024-03-01", False),
                                              ("1d", "2024-03-01 06:00", True), ("1mo", "2024-03-01", False)])
def test_dates_become_times_when_the_public_grid_needs_them(freq, start, needs):
    """A column of dates is read as midnight timestamps when --freq or --start/--end need times of
    day, whatever the rows hold (red-team audit: one row with a time of day decided between a
    release and an error); with --timezone the midnights are local to that zone."""
    from tsdp.io.timeparse import dates_as_times

    df = parse_time_column(pl.DataFrame({"t": ["2024-03-01", "2024-03-02"]}), "t")
    assert df.schema["t"] == pl.Date
    out = dates_as_times(df, "t", None, freq, start, "2024-03-05")
    assert (out.schema["t"] == pl.Datetime("us")) == needs
    if needs:
        assert out["t"].dt.hour().to_list() == [0, 0]
        zoned = dates_as_times(df, "t", "Europe/Berlin", freq, start, "2024-03-05")
        assert zoned.schema["t"] == pl.Datetime("us", "Europe/Berlin")
        assert zoned["t"].dt.hour().to_list() == [0, 0]

"""Time zones (:mod:`tsdp.io.timezones`, :mod:`tsdp.io.timegrid`): UTC offsets in text, --timezone for
local clock times, zone-aware Parquet, grids across daylight-saving changes, offsets written back.

Each layout is exercised from CSV (timestamps with offsets, or local times with --timezone) and
from Parquet (a zone-aware column). Berlin changes its clocks on 2024-03-31 at 02:00 (to 03:00)
and on 2024-10-27 at 03:00 (back to 02:00).
"""

from __future__ import annotations

from datetime import date, datetime, timedelta, timezone
from pathlib import Path

import polars as pl
import pytest

from tsdp.errors import DataError, UsageError
from tsdp.engine.events import EventCaps, aggregate_events
from tsdp.io.files import read_table, serialise_table
from tsdp.io.layouts import load_long, load_wide
from tsdp.io.records import RecordSpec, load_records
from tsdp.io.timegrid import build_grid, fixed_grid, following_points, parse_instant
from tsdp.io.timeparse import parse_time_column

BERLIN = "Europe/Berlin"
ISO = "%Y-%m-%dT%H:%M:%S%:z"


def berlin_hours(start: datetime, end: datetime) -> pl.Series:
    """Every hour from ``start`` to ``end`` (local Berlin times, inclusive) as Berlin instants."""
    return pl.datetime_range(start, end, "1h", time_zone=BERLIN, eager=True).alias("time")


def utc(*args) -> datetime:
    return datetime(*args, tzinfo=timezone.utc)


def as_input(frame: pl.DataFrame, fmt: str, tmp_path: Path, text_format: str = ISO) -> pl.DataFrame:
    """``frame`` written as CSV (zone-aware columns as text in ``text_format``) or Parquet, read back
    as tsdp reads its input."""
    if fmt == "csv":
        frame = frame.with_columns(pl.col(c).dt.to_string(text_format) for c, t in frame.schema.items()
                                   if isinstance(t, pl.Datetime))
        path = tmp_path / "input.csv"
        frame.write_csv(path)
    else:
        path = tmp_path / "input.parquet"
        frame.write_parquet(path)
    return read_table(path)


def zone_of(fmt: str) -> dict:
    """CSV holds Berlin times with offsets (``--timezone`` names their zone); Parquet holds a
    Berlin zone-aware column, which needs no option."""
    return {"timezone": BERLIN} if fmt == "csv" else {}


def parse(values: list, timezone: str | None = None) -> pl.Series:
    """The column as ``parse_time_column`` reads it (with ``--timezone`` when given)."""
    options = {"timezone": timezone} if timezone else {}
    return parse_time_column(pl.DataFrame({"time": values}), "time", **options)["time"]


# ----------------------------------------------------------------------------- parsing offsets


@pytest.mark.parametrize("text", [
    "2024-03-30T01:00:00+01:00", "2024-03-30T01:00:00+0100", "2024-03-30T01:00:00+01",
    "2024-03-30 01:00:00+01:00", "2024-03-30T00:00:00Z", "2024-03-30 00:00:00Z",
    "2024-03-30T01:00+01:00", "2024-03-29T19:00:00-05:00", "2024-03-30T05:30:00+05:30",
])
def test_iso_offsets_and_z_are_instants(text):
    times = parse([text])
    assert times.dtype == pl.Datetime("us", "UTC")
    assert times[0] == utc(2024, 3, 30, 0, 0)


def test_fractional_seconds_with_offsets():
    times = parse(["2024-03-30T01:00:00.250+01:00", "2024-03-30T00:00:00.5Z"])
    assert times.to_list() == [utc(2024, 3, 30, 0, 0, 0, 250_000), utc(2024, 3, 30, 0, 0, 0, 500_000)]


def test_mixed_offsets_are_converted_to_utc_instants():
    """A Berlin day across the spring change: +01:00 before, +02:00 after, one hour apart each."""
    times = parse(["2024-03-31T01:00:00+01:00", "2024-03-31T03:00:00+02:00", "2024-03-31T04:00:00+02:00"])
    assert times.to_list() == [utc(2024, 3, 31, 0), utc(2024, 3, 31, 1), utc(2024, 3, 31, 2)]


@pytest.mark.parametrize("values, row, needle", [
    (["2024-03-30T01:00:00+01:00", "2024-03-30 02:00:00"], 2, "has no UTC offset"),
    (["2024-03-30 01:00:00", "2024-03-30T02:00:00+01:00"], 2, "has a UTC offset"),
])
def test_a_column_mixing_offsets_and_local_times_is_refused(values, row, needle):
    with pytest.raises(DataError, match=needle) as info:
        parse(values)
    assert f"at row {row}" in str(info.value) and repr(values[1]) in str(info.value)


def test_an_unparseable_offset_is_refused_naming_the_row():
    with pytest.raises(DataError, match=r"cannot parse timestamp '2024-03-30T02:00:00\+1' at row 2"):
        parse(["2024-03-30T01:00:00+01:00", "2024-03-30T02:00:00+1"])


# --------------------------------------------------------------------------------- --timezone


def test_local_times_are_read_in_the_zone():
    times = parse(["2024-03-31 01:00:00", "2024-03-31 03:00:00"], BERLIN)
    assert times.dtype == pl.Datetime("us", BERLIN)
    assert times.dt.convert_time_zone("UTC").to_list() == [utc(2024, 3, 31, 0), utc(2024, 3, 31, 1)]


def test_a_local_time_skipped_by_the_clocks_is_an_error_naming_it():
    with pytest.raises(DataError) as info:
        parse(["2024-03-31 01:00:00", "2024-03-31 02:30:00", "2024-03-31 03:00:00"], BERLIN)
    message = str(info.value)
    assert "'2024-03-31 02:30:00'" in message and "at row 2" in message
    assert "--timezone Europe/Berlin" in message and "does not exist" in message


def test_a_repeated_local_time_is_an_error_naming_it():
    with pytest.raises(DataError) as info:
        parse(["2024-10-27 01:00:00", "2024-10-27 02:00:00", "2024-10-27 03:00:00"], BERLIN)
    message = str(info.value)
    assert "'2024-10-27 02:00:00'" in message and "at row 2" in message
    assert "--timezone Europe/Berlin" in message and "ambiguous" in message


def test_an_unknown_zone_is_a_usage_error():
    with pytest.raises(UsageError, match="--timezone 'Europe/Berlni'"):
        parse(["2024-03-31 01:00:00"], "Europe/Berlni")


def test_offsets_that_agree_with_the_zone_keep_it():
    times = parse(["2024-10-27T02:00:00+02:00", "2024-10-27T02:00:00+01:00"], BERLIN)
    assert times.dtype == pl.Datetime("us", BERLIN)
    assert times.dt.to_string(ISO).to_list() == ["2024-10-27T02:00:00+02:00", "2024-10-27T02:00:00+01:00"]


def test_an_offset_the_zone_never_has_then_is_an_error():
    with pytest.raises(DataError) as info:
        parse(["2024-10-27T01:00:00+02:00", "2024-10-27T04:00:00+02:00"], BERLIN)
    message = str(info.value)
    assert "'2024-10-27T04:00:00+02:00' at row 2" in message and "+01:00" in message
    assert "--timezone" in message


def test_a_zone_aware_column_keeps_its_zone_and_refuses_another():
    frame = pl.DataFrame({"time": berlin_hours(datetime(2024, 10, 27), datetime(2024, 10, 27, 4))})
    assert parse_time_column(frame, "time")["time"].dtype == pl.Datetime("us", BERLIN)
    assert parse_time_column(frame, "time", BERLIN)["time"].equals(frame["time"])
    with pytest.raises(UsageError, match="--timezone America/New_York: column 'time' already carries the time "
                                         "zone Europe/Berlin"):
        parse_time_column(frame, "time", "America/New_York")


def test_naive_datetime_columns_are_localized():
    frame = pl.DataFrame({"time": [datetime(2024, 3, 31, 1), datetime(2024, 3, 31, 2, 30)]})
    with pytest.raises(DataError, match="'2024-03-31 02:30:00' at row 2 does not exist in Europe/Berlin"):
        parse_time_column(frame, "time", BERLIN)


def test_timezone_on_integer_times_is_refused_and_dates_stay_dates():
    with pytest.raises(UsageError, match="--timezone Europe/Berlin: column 'time' holds integers"):
        parse([1, 2, 3], BERLIN)
    assert parse(["2024-03-31", "2024-04-01"], BERLIN).dtype == pl.Date


# ------------------------------------------------------------------------------ --start/--end


ZONED = pl.Datetime("us", BERLIN)


def instant(text: str, like: pl.DataType = ZONED, option: str = "--start") -> float:
    """The POSIX time of ``parse_instant`` (Python's == ignores ``fold`` within one zone)."""
    return parse_instant(text, option, like).timestamp()


def test_start_without_offset_is_a_local_time_of_the_column_zone():
    assert instant("2024-10-27") == utc(2024, 10, 26, 22).timestamp()
    assert instant("2024-10-28 00:00", option="--end") == utc(2024, 10, 27, 23).timestamp()


def test_start_with_offset_is_an_exact_instant():
    assert instant("2024-10-27T02:00:00+02:00") == utc(2024, 10, 27, 0).timestamp()
    assert instant("2024-10-27T02:00:00+01:00") == utc(2024, 10, 27, 1).timestamp()
    assert instant("2024-10-27T01:00:00Z", pl.Datetime("us", "UTC")) == utc(2024, 10, 27, 1).timestamp()


def test_start_and_end_in_the_repeated_hour_are_ordered_by_instant():
    start = parse_instant("2024-10-27T02:00:00+02:00", "--start", ZONED)
    end = parse_instant("2024-10-27T02:00:00+01:00", "--end", ZONED)
    grid = fixed_grid(start, end, "15min", "time", ZONED)
    assert grid.n_steps == 4


def test_an_ambiguous_or_skipped_start_is_a_usage_error():
    with pytest.raises(UsageError, match="--start '2024-10-27 02:30' is ambiguous in Europe/Berlin"):
        parse_instant("2024-10-27 02:30", "--start", ZONED)
    with pytest.raises(UsageError, match="--end '2024-03-31 02:30' does not exist in Europe/Berlin"):
        parse_instant("2024-03-31 02:30", "--end", ZONED)


def test_an_offset_on_a_column_without_zone_is_a_usage_error():
    with pytest.raises(UsageError, match="--start '2024-10-27T02:00:00\\+01:00' has a UTC offset"):
        parse_instant("2024-10-27T02:00:00+01:00", "--start", pl.Datetime("us"))


# ------------------------------------------------------------------- grids across clock changes


def test_hourly_zoned_grid_has_25_hours_on_the_fall_back_day_and_23_in_spring():
    autumn = berlin_hours(datetime(2024, 10, 27), datetime(2024, 10, 27, 23))
    spring = berlin_hours(datetime(2024, 3, 31), datetime(2024, 3, 31, 23))
    assert build_grid(autumn, "time", None, fill_missing=False).n_steps == 25
    assert build_grid(spring, "time", "1h", fill_missing=False).n_steps == 23


def test_daily_zoned_grid_follows_local_midnight():
    days = pl.datetime_range(datetime(2024, 10, 25), datetime(2024, 10, 29), "1d", time_zone=BERLIN,
                             eager=True)
    grid = build_grid(days, "time", None, fill_missing=False)  # 24, 24, 25, 24 hours apart
    assert grid.freq == "1d" and grid.n_steps == 5
    assert build_grid(days, "time", "1d", fill_missing=False).points.equals(days)
    assert list(grid.positions(days)) == [0, 1, 2, 3, 4]
    after = following_points(grid, 2)
    assert after.dt.to_string(ISO).to_list() == ["2024-10-30T00:00:00+01:00", "2024-10-31T00:00:00+01:00"]


def test_daily_zoned_grid_with_a_missing_day_is_still_an_error():
    days = pl.datetime_range(datetime(2024, 3, 29), datetime(2024, 4, 2), "1d", time_zone=BERLIN, eager=True)
    with pytest.raises(DataError, match="1 missing step"):
        build_grid(days.filter(days.dt.day() != 31), "time", "1d", fill_missing=False)


def test_daily_steps_of_24_elapsed_hours_are_not_calendar_days():
    """UTC midnights shown in Berlin are 01:00 in winter and 02:00 in summer: not one local grid."""
    utc_days = pl.datetime_range(datetime(2024, 3, 29), datetime(2024, 4, 2), "1d", time_zone="UTC", eager=True)
    with pytest.raises(DataError, match="calendar days of Europe/Berlin"):
        build_grid(utc_days.dt.convert_time_zone(BERLIN), "time", None, fill_missing=False)
    assert build_grid(utc_days, "time", None, fill_missing=False).n_steps == 5


def test_fixed_daily_grid_for_events_spans_local_days():
    start = parse_instant("2024-10-26", "--start", ZONED)
    end = parse_instant("2024-10-29", "--end", ZONED)
    grid = fixed_grid(start, end, "1d", "time", ZONED)
    assert grid.points.dt.to_string(ISO).to_list() == [
        "2024-10-26T00:00:00+02:00", "2024-10-27T00:00:00+02:00", "2024-10-28T00:00:00+01:00"]


def test_a_gap_in_local_times_hints_at_timezone():
    times = parse(["2024-03-31 01:00:00", "2024-03-31 03:00:00"])
    with pytest.raises(DataError, match="pass --timezone"):
        build_grid(times, "time", "1h", fill_missing=False)


# ------------------------------------------------------------------------ layouts, CSV/Parquet


def fall_back_day(values: bool = True) -> pl.DataFrame:
    hours = berlin_hours(datetime(2024, 10, 26, 22), datetime(2024, 10, 28, 2))
    return pl.DataFrame({"time": hours, "count": [float(i) for i in range(hours.len())]})


@pytest.mark.parametrize("fmt", ["csv", "parquet"])
def test_long_layout_across_fall_back_fills_no_hour(fmt, tmp_path):
    frame = as_input(fall_back_day(), fmt, tmp_path)
    table = load_long(frame, "time", "count", fill_missing=True,
                      **zone_of(fmt))
    assert table.filled_cells == 0
    local_day = table.frame["time"].dt.date() == date(2024, 10, 27)
    assert int(local_day.sum()) == 25
    assert table.frame["count"].to_list() == fall_back_day()["count"].to_list()


@pytest.mark.parametrize("fmt", ["csv", "parquet"])
def test_wide_layout_across_spring_forward_fills_no_hour(fmt, tmp_path):
    hours = berlin_hours(datetime(2024, 3, 30, 22), datetime(2024, 4, 1, 2))
    frame = pl.DataFrame({"time": hours, "a": [1.0] * hours.len(), "b": [2.0] * hours.len()})
    table = load_wide(as_input(frame, fmt, tmp_path), "time", fill_missing=True)  # CSV: UTC instants
    assert table.filled_cells == 0 and table.n_steps == hours.len()
    local_day = table.frame["time"].dt.convert_time_zone(BERLIN).dt.date() == date(2024, 3, 31)
    assert int(local_day.sum()) == 23


def test_local_csv_times_with_timezone_fill_no_hour(tmp_path):
    """Local clock times across the spring change: without a zone 02:00 looks missing (and
    --fill-missing zero would invent it); with --timezone there is no gap."""
    hours = berlin_hours(datetime(2024, 3, 31), datetime(2024, 3, 31, 6))
    frame = as_input(pl.DataFrame({"time": hours, "count": [1.0] * hours.len()}), "csv", tmp_path,
                     "%Y-%m-%d %H:%M:%S")
    assert load_long(frame, "time", "count", fill_missing=True).filled_cells == 1
    table = load_long(frame, "time", "count", fill_missing=True, timezone=BERLIN)
    assert table.filled_cells == 0 and table.n_steps == 6


def berlin_events() -> pl.DataFrame:
    """One event per local hour from 2024-10-26 00:00 to 2024-10-28 23:00 (24 + 25 + 24 events)."""
    hours = berlin_hours(datetime(2024, 10, 26), datetime(2024, 10, 28, 23))
    return pl.DataFrame({"user": [f"u{i % 7}" for i in range(hours.len())], "time": hours})


@pytest.mark.parametrize("fmt", ["csv", "parquet"])
def test_events_are_bucketed_by_local_day(fmt, tmp_path):
    frame = as_input(berlin_events(), fmt, tmp_path)
    agg = aggregate_events(frame, "user", "time", "1d", "2024-10-26", "2024-10-29", EventCaps(level="event"),
                           **zone_of(fmt))
    out = agg.table.frame
    assert out["count"].to_list() == [24.0, 25.0, 24.0]
    assert out["time"].dt.to_string(ISO).to_list() == [
        "2024-10-26T00:00:00+02:00", "2024-10-27T00:00:00+02:00", "2024-10-28T00:00:00+01:00"]
    assert agg.diagnostics["dropped_outside_grid"] == 0


@pytest.mark.parametrize("fmt", ["csv", "parquet"])
def test_events_plain_start_end_are_local_hours(fmt, tmp_path):
    """Hourly buckets of the fall-back day: 25 buckets, one event each, none dropped."""
    frame = as_input(berlin_events(), fmt, tmp_path)
    agg = aggregate_events(frame, "user", "time", "1h", "2024-10-27", "2024-10-28", EventCaps(level="event"),
                           **zone_of(fmt))
    assert agg.table.n_steps == 25
    assert agg.table.frame["count"].to_list() == [1.0] * 25
    assert agg.diagnostics["dropped_outside_grid"] == 24 + 24


def test_events_with_offsets_and_no_zone_use_utc_for_plain_start(tmp_path):
    """The zone is never read off the values (it would move the public grid): offsets without
    --timezone give UTC buckets, and an offset in --start is an exact instant."""
    frame = as_input(berlin_events(), "csv", tmp_path)
    agg = aggregate_events(frame, "user", "time", "1d", "2024-10-26", "2024-10-29", EventCaps(level="event"))
    assert agg.table.frame["time"].dtype == pl.Datetime("us", "UTC")
    # UTC days: the events run from 2024-10-25 22:00 to 2024-10-28 22:00 UTC
    assert agg.table.frame["count"].to_list() == [24.0, 24.0, 23.0]
    assert agg.diagnostics["dropped_outside_grid"] == 2
    exact = aggregate_events(frame, "user", "time", "1h", "2024-10-27T00:00:00+02:00",
                             "2024-10-28T00:00:00+01:00", EventCaps(level="event"))
    assert exact.table.n_steps == 25 and exact.table.frame["count"].sum() == 25


@pytest.mark.parametrize("fmt", ["csv", "parquet"])
def test_records_slots_follow_the_zone(fmt, tmp_path):
    hours = berlin_hours(datetime(2024, 10, 26, 12), datetime(2024, 10, 28, 12))
    frame = as_input(pl.DataFrame({"user": [f"u{i % 5}" for i in range(hours.len())], "time": hours,
                                   "v": [1.0] * hours.len()}), fmt, tmp_path)
    zone = zone_of(fmt)
    days = load_records(frame, RecordSpec(user_col="user", value_col="v", lower=0, upper=2, time_col="time",
                                          slot_length="1d", group_by=("slot",), **zone))
    assert days.groups["slot"].dt.to_string(ISO).to_list() == [
        "2024-10-26T00:00:00+02:00", "2024-10-27T00:00:00+02:00", "2024-10-28T00:00:00+01:00"]
    assert list(days.user_starts[days.group_starts][1:] - days.user_starts[days.group_starts][:-1]) == [12, 25, 13]
    one = load_records(frame, RecordSpec(user_col="user", value_col="v", lower=0, upper=2, time_col="time",
                                         slot_length="1h", slot="2024-10-27T02:00:00+01:00", **zone))
    assert one.values.size == 1
    with pytest.raises(UsageError, match="--slot '2024-10-27 02:00' is ambiguous"):
        load_records(frame, RecordSpec(user_col="user", value_col="v", lower=0, upper=2, time_col="time",
                                       slot_length="1h", slot="2024-10-27 02:00", **zone))


def test_records_timezone_needs_a_time_column():
    frame = pl.DataFrame({"user": ["a"], "v": [1.0]})
    with pytest.raises(UsageError, match="--timezone needs --time-col"):
        load_records(frame, RecordSpec(user_col="user", value_col="v", lower=0, upper=2, timezone=BERLIN))


# ------------------------------------------------------------------------------------- output


def test_csv_output_writes_offsets_and_keeps_both_fall_back_hours():
    hours = berlin_hours(datetime(2024, 10, 27, 1), datetime(2024, 10, 27, 3))
    text = serialise_table(pl.DataFrame({"time": hours, "x": [1, 2, 3, 4]}), "csv").decode()
    assert text.splitlines()[1:] == ["2024-10-27T01:00:00+02:00,1", "2024-10-27T02:00:00+02:00,2",
                                     "2024-10-27T02:00:00+01:00,3", "2024-10-27T03:00:00+01:00,4"]


def test_csv_output_writes_z_for_utc_and_leaves_naive_times():
    from tsdp.io.timezones import csv_ready

    frame = pl.DataFrame({"u": [utc(2024, 1, 1, 0, 0, 0, 500)], "n": [datetime(2024, 1, 1, 1)]})
    text = serialise_table(frame, "csv").decode()
    assert text.splitlines()[1] == "2024-01-01T00:00:00.000500Z,2024-01-01 01:00:00"
    assert csv_ready(frame.select("n")).schema["n"] == pl.Datetime("us")


def test_parquet_output_keeps_the_zone(tmp_path):
    hours = berlin_hours(datetime(2024, 10, 27, 1), datetime(2024, 10, 27, 3))
    path = tmp_path / "out.parquet"
    path.write_bytes(serialise_table(pl.DataFrame({"time": hours}), "parquet"))
    assert pl.read_parquet(path)["time"].equals(hours)


def test_csv_round_trip_of_offsets_is_exact(tmp_path):
    hours = berlin_hours(datetime(2024, 10, 26, 22), datetime(2024, 10, 27, 5)) + timedelta(milliseconds=250)
    path = tmp_path / "round.csv"
    path.write_bytes(serialise_table(pl.DataFrame({"time": hours}), "csv"))
    again = parse_time_column(read_table(path), "time", BERLIN)["time"]
    assert again.equals(hours)


def test_a_repeated_local_hour_hints_at_offsets():
    frame = pl.DataFrame({"time": ["2024-10-27 01:00:00", "2024-10-27 02:00:00", "2024-10-27 02:00:00",
                                   "2024-10-27 03:00:00"], "count": [1.0, 2.0, 3.0, 4.0]})
    with pytest.raises(DataError, match="duplicate timestamp 2024-10-27 02:00:00 .*write the times with UTC offsets"):
        load_long(frame, "time", "count")

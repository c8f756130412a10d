"""Time zones end to end: offsets and ``Z`` accepted, ``--timezone`` for local clock times on every
command that reads time, zone-aware Parquet written back with its offsets, ``--start/--end`` in the
data's zone, and no hour invented or lost across a daylight-saving change (Europe/Berlin: clocks
go forward on 2024-03-31 at 02:00, back on 2024-10-27 at 03:00).
"""

from __future__ import annotations

import json
from collections import Counter
from datetime import datetime
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from tests.conftest import custodian_diagnostics

BERLIN = "Europe/Berlin"
ISO = "%Y-%m-%dT%H:%M:%S%:z"
GAUSS = ["--epsilon", "1", "--delta", "1e-6", "--unit", "event", "--seed", "1", "--quiet"]


def berlin_hours(start: datetime, end: datetime) -> pl.Series:
    return pl.datetime_range(start, end, "1h", time_zone=BERLIN, eager=True).alias("time")


def write(frame: pl.DataFrame, path: Path, text_format: str | None = ISO) -> Path:
    """CSV (zone-aware columns as text in ``text_format``) or Parquet, by the extension."""
    if path.suffix == ".csv":
        frame.with_columns(pl.col(c).dt.to_string(text_format) for c, t in frame.schema.items()
                           if isinstance(t, pl.Datetime)).write_csv(path)
    else:
        frame.write_parquet(path)
    return path


def ok(tsdp_cli, *args):
    result = tsdp_cli(*args)
    assert result.code == 0, result.err
    return result


def time_texts(path: Path, column: str = "time") -> list[str]:
    return pl.read_csv(path, infer_schema=False)[column].to_list()


def fall_back_series() -> pl.DataFrame:
    hours = berlin_hours(datetime(2024, 10, 26, 22), datetime(2024, 10, 28, 1))
    return pl.DataFrame({"time": hours, "count": np.arange(hours.len(), dtype=float)})


# ---------------------------------------------------------------------- release: long and wide


def test_berlin_parquet_released_to_csv_keeps_both_fall_back_hours(tsdp_cli, tmp_path):
    source = write(fall_back_series(), tmp_path / "berlin.parquet")
    ok(tsdp_cli, "release", source, "--value-col", "count", *GAUSS, "-o", "out.csv")
    texts = time_texts(tmp_path / "out.csv")
    assert len(texts) == len(set(texts)) == 2 + 25 + 2
    assert "2024-10-27T02:00:00+02:00" in texts and "2024-10-27T02:00:00+01:00" in texts
    assert texts == fall_back_series()["time"].dt.to_string(ISO).to_list()


def test_berlin_parquet_released_to_parquet_keeps_the_zone(tsdp_cli, tmp_path):
    source = write(fall_back_series(), tmp_path / "berlin.parquet")
    ok(tsdp_cli, "release", source, "--value-col", "count", *GAUSS, "-o", "out.parquet")
    assert pl.read_parquet(tmp_path / "out.parquet")["time"].equals(fall_back_series()["time"])


BERLIN_SPRING = ["2024-03-31T01:00:00+01:00", "2024-03-31T03:00:00+02:00", "2024-03-31T04:00:00+02:00"]


@pytest.mark.parametrize("texts, zone, expected", [
    (BERLIN_SPRING[:2] + ["2024-03-31T02:00:00Z"], None,
     ["2024-03-31T00:00:00Z", "2024-03-31T01:00:00Z", "2024-03-31T02:00:00Z"]),
    (BERLIN_SPRING, BERLIN, BERLIN_SPRING),
])
def test_csv_offsets_are_accepted_and_written_back(tsdp_cli, tmp_path, texts, zone, expected):
    """Mixed offsets are UTC instants, written back in UTC; with the zone they were written in
    (--timezone), they are written back in that zone."""
    source = tmp_path / "offsets.csv"
    source.write_text("time,count\n" + "".join(f"{t},{k}\n" for k, t in enumerate(texts)))
    ok(tsdp_cli, "release", source, "--value-col", "count", *GAUSS, "-o", "out.csv",
       *(["--timezone", zone] if zone else []))
    assert time_texts(tmp_path / "out.csv") == expected


def test_offsets_disagreeing_with_timezone_are_refused(refuse, tmp_path):
    source = tmp_path / "offsets.csv"
    source.write_text("time,count\n2024-03-31T01:00:00+01:00,1\n2024-03-31T02:00:00Z,2\n")
    refuse(["release", source, "--value-col", "count", *GAUSS, "--timezone", BERLIN, "-o", "out.csv"], 4,
           "'2024-03-31T02:00:00Z' at row 2", "+02:00", "--timezone")


@pytest.mark.parametrize("suffix", [".csv", ".parquet"])
def test_wide_release_across_spring_forward_fills_no_hour(tsdp_cli, tmp_path, suffix):
    hours = berlin_hours(datetime(2024, 3, 30, 22), datetime(2024, 4, 1, 1))
    frame = pl.DataFrame({"time": hours, "a": [3.0] * hours.len(), "b": [4.0] * hours.len()})
    source = write(frame, tmp_path / f"wide{suffix}")
    result = ok(tsdp_cli, "release", source, *GAUSS, "--fill-missing", "zero", "--json",
                "--timezone", BERLIN, "-o", "out.csv")
    summary = json.loads(result.out)
    assert summary["steps"] == hours.len()
    assert "filled_cells" not in json.dumps(summary)
    assert time_texts(tmp_path / "out.csv") == hours.dt.to_string(ISO).to_list()
    day = [t for t in time_texts(tmp_path / "out.csv") if t.startswith("2024-03-31")]
    assert len(day) == 23


def test_local_times_with_timezone_fill_no_hour(tsdp_cli, tmp_path):
    """The error's advice (--fill-missing zero) on local times across the spring change would
    invent 02:00; with --timezone the series has no gap at all."""
    hours = berlin_hours(datetime(2024, 3, 31), datetime(2024, 3, 31, 5))
    source = write(pl.DataFrame({"time": hours, "count": [5.0] * hours.len()}), tmp_path / "local.csv",
                   "%Y-%m-%d %H:%M:%S")
    result = ok(tsdp_cli, "release", source, "--value-col", "count", *GAUSS, "--fill-missing", "zero",
                "--timezone", BERLIN, "--json", "-o", "out.csv")
    assert json.loads(result.out)["steps"] == 5
    assert "filled_cells" not in result.out
    assert time_texts(tmp_path / "out.csv") == hours.dt.to_string(ISO).to_list()


@pytest.mark.parametrize("text, problem", [
    ("2024-03-31 02:30:00", "does not exist in Europe/Berlin"),
    ("2024-10-27 02:30:00", "is ambiguous in Europe/Berlin"),
])
def test_skipped_or_repeated_local_time_is_a_data_error(refuse, tmp_path, text, problem):
    source = tmp_path / "local.csv"
    source.write_text(f"time,count\n2024-01-01 00:00:00,1\n{text},2\n")
    refuse(["release", source, "--value-col", "count", *GAUSS, "--freq", "30min", "--fill-missing", "zero",
            "--timezone", BERLIN, "-o", "out.csv"], 4, repr(text), "at row 2", problem, "--timezone")


def test_mixed_offsets_and_local_times_are_refused(refuse, tmp_path):
    source = tmp_path / "mixed.csv"
    source.write_text("time,count\n2024-03-30T01:00:00+01:00,1\n2024-03-30 02:00:00,2\n")
    refuse(["release", source, "--value-col", "count", *GAUSS, "-o", "out.csv"], 4,
           "'2024-03-30 02:00:00' at row 2", "UTC offset")


def test_timezone_conflicting_with_a_zone_aware_column_is_a_usage_error(refuse, tmp_path):
    source = write(fall_back_series(), tmp_path / "berlin.parquet")
    refuse(["release", source, "--value-col", "count", *GAUSS, "--timezone", "Europe/London", "-o", "out.csv"],
           2, "--timezone Europe/London", "Europe/Berlin")


# ------------------------------------------------------------------------------ release: events


def berlin_events() -> pl.DataFrame:
    """One event per local hour from 2024-10-26 00:00 to 2024-10-28 23:00 (24 + 25 + 24)."""
    hours = berlin_hours(datetime(2024, 10, 26), datetime(2024, 10, 28, 23))
    return pl.DataFrame({"user": [f"u{i % 7}" for i in range(hours.len())], "time": hours})


EVENTS = ["--layout", "events", "--user-col", "user", "--mechanism", "laplace", "--epsilon", "1",
          "--unit", "event", "--seed", "1", "--quiet", "--json"]


@pytest.mark.parametrize("suffix", [".csv", ".parquet"])
def test_events_plain_start_end_are_local_days(tsdp_cli, tmp_path, suffix):
    source = write(berlin_events(), tmp_path / f"events{suffix}")
    zone = ["--timezone", BERLIN] if suffix == ".csv" else []
    result = ok(tsdp_cli, "release", source, *EVENTS, *zone, "--freq", "1d", "--start", "2024-10-26",
                "--end", "2024-10-29", "-o", "out.csv")
    diagnostics = custodian_diagnostics(json.loads(result.out))
    assert diagnostics["dropped_outside_grid"] == 0 and diagnostics["rows_kept"] == 73
    assert time_texts(tmp_path / "out.csv") == [
        "2024-10-26T00:00:00+02:00", "2024-10-27T00:00:00+02:00", "2024-10-28T00:00:00+01:00"]


@pytest.mark.parametrize("suffix", [".csv", ".parquet"])
def test_events_hourly_fall_back_day_has_25_buckets(tsdp_cli, tmp_path, suffix):
    source = write(berlin_events(), tmp_path / f"events{suffix}")
    zone = ["--timezone", BERLIN] if suffix == ".csv" else []
    result = ok(tsdp_cli, "release", source, *EVENTS, *zone, "--freq", "1h", "--start", "2024-10-27",
                "--end", "2024-10-28", "--fill-missing", "zero", "-o", "out.csv")
    summary = json.loads(result.out)
    assert summary["steps"] == 25
    assert custodian_diagnostics(summary)["rows_kept"] == 25
    texts = time_texts(tmp_path / "out.csv")
    assert len(set(texts)) == 25 and Counter(t[:13] for t in texts)["2024-10-27T02"] == 2


def test_events_start_with_offset_is_an_exact_instant(tsdp_cli, tmp_path):
    source = write(berlin_events(), tmp_path / "events.csv")
    result = ok(tsdp_cli, "release", source, *EVENTS, "--freq", "1h", "--start", "2024-10-27T00:00:00+02:00",
                "--end", "2024-10-28T00:00:00+01:00", "-o", "out.csv")
    assert json.loads(result.out)["steps"] == 25
    assert time_texts(tmp_path / "out.csv")[0] == "2024-10-26T22:00:00Z"


def test_events_ambiguous_start_is_a_usage_error(refuse, tmp_path):
    source = write(berlin_events(), tmp_path / "events.parquet")
    refuse(["release", source, *EVENTS, "--freq", "1h", "--start", "2024-10-27 02:00", "--end", "2024-10-28",
            "-o", "out.csv"], 2, "--start '2024-10-27 02:00'", "ambiguous in Europe/Berlin")


def clock_change_events(tmp_path: Path, odd: str, suffix: str = ".csv") -> Path:
    """Three events on 2024-10-26 and one at the local time ``odd`` (row 2): CSV text, or Parquet
    with a zone-less Datetime column (read with --timezone either way)."""
    times = ["2024-10-26 10:00:00", odd, "2024-10-26 11:00:00", "2024-10-26 12:00:00"]
    frame = pl.DataFrame({"user": ["a", "b", "c", "d"], "time": times})
    if suffix == ".parquet":
        frame = frame.with_columns(pl.col("time").str.to_datetime("%Y-%m-%d %H:%M:%S"))
        frame.write_parquet(tmp_path / "odd.parquet")
    else:
        frame.write_csv(tmp_path / "odd.csv")
    return tmp_path / f"odd{suffix}"


@pytest.mark.parametrize("suffix", [".csv", ".parquet"])
@pytest.mark.parametrize("odd, start, end", [
    ("2024-10-27 02:30:00", "2024-10-26", "2024-10-27"),  # repeated, after the grid
    ("2024-10-27 02:30:00", "2024-10-27T03:00:00+01:00", "2024-10-28"),  # repeated, before it
    ("2024-03-31 02:30:00", "2024-10-26", "2024-10-27"),  # skipped, long before it
    # between the grid's ends: 00:30Z is before 00:45Z, 01:30Z at or after 01:30Z
    ("2024-10-27 02:30:00", "2024-10-27T02:45:00+02:00", "2024-10-27T02:30:00+01:00"),
])
def test_events_clock_change_outside_the_grid_is_dropped(tsdp_cli, tmp_path, suffix, odd, start, end):
    """A local time the clocks repeat or skip, outside the public grid under both readings, is
    dropped like any other row outside it: one user's row does not decide between release and error."""
    source = clock_change_events(tmp_path, odd, suffix)
    result = ok(tsdp_cli, "release", source, *EVENTS, "--timezone", BERLIN, "--freq", "15min",
                "--start", start, "--end", end, "--fill-missing", "zero", "-o", "out.csv")
    diagnostics = custodian_diagnostics(json.loads(result.out))
    inside = 3 if start == "2024-10-26" else 0
    assert diagnostics["dropped_outside_grid"] == 4 - inside and diagnostics["rows_kept"] == inside


@pytest.mark.parametrize("suffix", [".csv", ".parquet"])
@pytest.mark.parametrize("odd, end, problem", [
    ("2024-10-27 02:30:00", "2024-10-27T02:45:00+02:00", "is ambiguous in Europe/Berlin"),  # first reading inside
    ("2024-10-27 02:30:00", "2024-10-28", "is ambiguous in Europe/Berlin"),  # both inside
    ("2024-10-27 02:30:00", "2024-10-27T02:45:00+01:00", "is ambiguous in Europe/Berlin"),
    ("2024-03-31 02:30:00", "2024-03-31T01:45:00+01:00", "does not exist in Europe/Berlin"),
])
def test_events_clock_change_that_could_lie_inside_is_a_data_error(refuse, tmp_path, suffix, odd, end, problem):
    """Which bucket such a row belongs to only its writer knows: the error names the column, the
    value, its row and --timezone (write the offsets instead)."""
    source = clock_change_events(tmp_path, odd, suffix)
    refuse(["release", source, *EVENTS, "--timezone", BERLIN, "--freq", "1h", "--start", "2024-03-01",
            "--end", end, "-o", "out.csv"], 4, "column 'time'", repr(odd) if suffix == ".csv" else odd[:16],
           "at row 2", problem, "--timezone", "UTC offset")
    assert not (tmp_path / "out.csv").exists()


def test_events_skipped_midnight_of_a_date_column_outside_the_grid_is_dropped(tsdp_cli, refuse, tmp_path):
    """Dates on a sub-day grid are local midnights; Santiago skips 2024-09-08 00:00."""
    source = tmp_path / "dates.csv"
    source.write_text("user,time\na,2024-09-01\nb,2024-09-08\nc,2024-09-02\n")
    args = [source, *EVENTS, "--timezone", "America/Santiago", "--freq", "12h", "--start", "2024-09-01"]
    result = ok(tsdp_cli, "release", *args, "--end", "2024-09-03", "--fill-missing", "zero", "-o", "out.csv")
    assert custodian_diagnostics(json.loads(result.out))["dropped_outside_grid"] == 1
    refuse(["release", *args, "--end", "2024-09-10", "--fill-missing", "zero", "-o", "in.csv"], 4,
           "at row 2", "does not exist in America/Santiago")


# ------------------------------------------------------------------------------- other commands


MEAN = ["--user-col", "user", "--value-col", "v", "--upper", "10", "--epsilon", "1", "--time-col", "time",
        "--seed", "1", "--quiet"]


@pytest.mark.parametrize("suffix", [".csv", ".parquet"])
def test_mean_estimate_slots_follow_the_zone(tsdp_cli, tmp_path, suffix):
    hours = berlin_hours(datetime(2024, 10, 26, 12), datetime(2024, 10, 28, 12))
    frame = pl.DataFrame({"user": [f"u{i % 9}" for i in range(hours.len())], "time": hours,
                          "v": [5.0] * hours.len()})
    source = write(frame, tmp_path / f"records{suffix}")
    zone = ["--timezone", BERLIN] if suffix == ".csv" else []
    ok(tsdp_cli, "mean-estimate", source, *MEAN, *zone, "--slot-length", "1d", "--group-by", "slot",
       "--epsilon-per-group-ok", "-o", "out.csv")
    assert time_texts(tmp_path / "out.csv", "slot") == [
        "2024-10-26T00:00:00+02:00", "2024-10-27T00:00:00+02:00", "2024-10-28T00:00:00+01:00"]


def test_mean_estimate_ambiguous_local_time_names_the_row(refuse, tmp_path):
    source = tmp_path / "records.csv"
    source.write_text("user,time,v\na,2024-10-27 01:30:00,1\nb,2024-10-27 02:30:00,2\n")
    refuse(["mean-estimate", source, *MEAN, "--timezone", BERLIN, "-o", "out.csv"], 4,
           "'2024-10-27 02:30:00' at row 2", "ambiguous", "--timezone")


RECORDS = "user,cell,time,v\n" + "".join(f"u{u},c1,2024-10-26 10:{k * 10:02d}:00,{(u + k) % 9}\n"
                                             for u in range(12) for k in range(3))


@pytest.mark.parametrize("clock, selection", [
    ("2024-10-27 02:30:00", ["--slot", "2024-10-26 10:00"]),  # repeated: both readings in another slot
    ("2024-03-31 02:30:00", ["--slot", "2024-10-26 10:00"]),  # skipped
    ("2024-10-27 02:30:00", ["--cell-col", "cell", "--cell", "c1"]),  # another cell
])
def test_mean_estimate_clock_change_outside_the_selection_is_dropped(tsdp_cli, tmp_path, clock, selection):
    """A record whose local time the zone repeats or skips, outside the --slot or --cell selection under
    every reading, is dropped with the other unselected records: the estimate is the one without it (same
    seed). It was an error, so one user's record outside the selection decided between an estimate and none."""
    cell = "c2" if "--cell" in selection else "c1"
    (tmp_path / "with.csv").write_text(RECORDS + f"zz,{cell},{clock},4\n")
    (tmp_path / "without.csv").write_text(RECORDS)
    args = [*MEAN, "--timezone", BERLIN, *selection]
    ok(tsdp_cli, "mean-estimate", tmp_path / "with.csv", *args, "-o", "a.csv")
    ok(tsdp_cli, "mean-estimate", tmp_path / "without.csv", *args, "-o", "b.csv")
    assert (tmp_path / "a.csv").read_text() == (tmp_path / "b.csv").read_text()


def test_mean_estimate_clock_change_the_selection_may_hold_is_an_error(refuse, tmp_path):
    """The slot 02:00-03:00 +02:00 holds one reading of the repeated 02:30: its slot is unknown, an error."""
    (tmp_path / "records.csv").write_text(RECORDS + "zz,c1,2024-10-27 02:30:00,4\n")
    refuse(["mean-estimate", tmp_path / "records.csv", *MEAN, "--timezone", BERLIN, "--slot",
            "2024-10-27T02:00:00+02:00", "-o", "out.csv"], 4, "'2024-10-27 02:30:00' at row 37", "ambiguous",
           "--timezone")


def test_flip_local_times_across_spring_forward(tsdp_cli, refuse, tmp_path):
    hours = berlin_hours(datetime(2024, 3, 27), datetime(2024, 4, 4))
    rng = np.random.default_rng(0)
    frame = pl.DataFrame({"time": hours, "v": 100 + np.cumsum(rng.normal(size=hours.len())) * 0.1})
    source = write(frame, tmp_path / "local.csv", "%Y-%m-%d %H:%M:%S")
    refuse(["flip", source, "--time-col", "time", "--value-cols", "v", "--seed", "1", "-o", "out.csv"], 4,
           "gap", "2024-03-31 02:00:00")
    ok(tsdp_cli, "flip", source, "--time-col", "time", "--value-cols", "v", "--seed", "1", "--quiet",
       "--timezone", BERLIN, "--lip-floor", "0", "-o", "out.csv")  # (a random walk: every date released)
    assert pl.read_csv(tmp_path / "out.csv").height == hours.len()


FORECAST = ["--time-col", "time", "--value-col", "v", "--series-col", "id", "--context-length", "4",
            "--forecast-length", "2", "--batch-size", "2", "--model", "linear", "--delta", "1e-5",
            "--noise-multiplier", "1", "--steps", "5", "--quiet", "--seed", "1"]


def test_forecast_train_continues_in_instants_after_fall_back(tsdp_cli, tmp_path):
    hours = berlin_hours(datetime(2024, 10, 24, 3), datetime(2024, 10, 27, 1))
    frame = pl.concat([pl.DataFrame({"id": [s] * hours.len(), "time": hours,
                                     "v": [10.0 + (7 * t + k) % 13 for t in range(hours.len())]})
                       for k, s in enumerate("abc")])
    source = write(frame, tmp_path / "panel.parquet")
    ok(tsdp_cli, "forecast-train", source, *FORECAST, "-o", "fc.csv")
    forecast = pl.read_csv(tmp_path / "fc.csv", infer_schema=False).filter(pl.col("id") == "a")
    assert forecast["time"].to_list() == ["2024-10-27T02:00:00+02:00", "2024-10-27T02:00:00+01:00"]


@pytest.mark.parametrize("command, args", [
    ("release", ["--value-col", "count", *GAUSS]),
    ("mean-estimate", ["--user-col", "user", "--value-col", "count", "--upper", "10", "--epsilon", "1",
                       "--time-col", "time"]),
    ("flip", ["--time-col", "time", "--value-cols", "count"]),
    ("forecast-train", ["--time-col", "time", "--value-col", "count", "--context-length", "4",
                        "--forecast-length", "2"]),
])
def test_unknown_zone_is_a_usage_error_on_every_command(refuse, tmp_path, command, args):
    source = tmp_path / "in.csv"
    source.write_text("user,time,count\na,2024-01-01 00:00:00,1\n")
    refuse([command, source, *args, "--timezone", "Europe/Berlni", "-o", "out.csv"], 2,
           "--timezone 'Europe/Berlni'", "unknown time zone")


def test_timezone_from_a_config_file(tsdp_cli, tmp_path):
    hours = berlin_hours(datetime(2024, 3, 31), datetime(2024, 3, 31, 5))
    source = write(pl.DataFrame({"time": hours, "count": [5.0] * hours.len()}), tmp_path / "local.csv",
                   "%Y-%m-%d %H:%M:%S")
    (tmp_path / "job.toml").write_text(f'[release]\ntimezone = "{BERLIN}"\nvalue-col = "count"\n')
    ok(tsdp_cli, "release", source, "--config", tmp_path / "job.toml", *GAUSS, "-o", "out.csv")
    assert time_texts(tmp_path / "out.csv") == hours.dt.to_string(ISO).to_list()
    report = json.loads((tmp_path / "out.report.json").read_text())
    assert report["command"]["parameters"]["timezone"] == BERLIN

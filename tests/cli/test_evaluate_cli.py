"""``tsdp release --evaluate``: the error against the RAW input, split into bounding, approximation,
noise and post-processing (issue 33, section 3), and where its private figures go.

The README's events example caps each user at 2 events per station-day and 1 station: the caps drop
18,556 of the 35,668 rows, so the released counts are about 265 below the raw ones on a median of
413.5; the noise alone is about ±62. Before issue 33 ``--evaluate`` compared with the capped panel
and reported an MAE of 25.
"""

from __future__ import annotations

import json
import math
import os
import stat
from pathlib import Path

import numpy as np
import polars as pl
import pytest

ROOT = Path(__file__).resolve().parents[2]
EVENTS = [str(ROOT / "sample_data/events.csv"), "--layout", "events", "--user-col", "user_id", "--time-col",
          "timestamp", "--series-col", "station", "--series-keys", "st1,st2,st3,st4,st5", "--start",
          "2024-03-04", "--end", "2024-03-18", "--freq", "1d", "--epsilon", "1", "--delta", "1e-6",
          "--unit", "user", "--max-per-step", "2", "--max-steps", "14", "--series-per-user", "1"]
TRAFFIC = [str(ROOT / "sample_data/traffic_hourly.parquet"), "--series-col", "sensor", "--time-col", "time",
           "--value-col", "count"]
SUBSAMPLE = [*TRAFFIC, "--mechanism", "subsample", "--sampling-rate", "0.1", "--epsilon", "0.5", "--delta", "1e-4",
             "--unit", "user", "--max-steps", "180", "--series-per-user", "1"]
DFT = [*TRAFFIC, "--mechanism", "dft", "--dft-k", "170", "--epsilon", "1", "--delta", "1e-6", "--unit", "user",
       "--max-per-step", "1", "--max-steps", "24", "--series-per-user", "2"]
PUBLIC_KEYS = {"schema", "runs", "mechanism", "epsilon", "delta", "release_written", "custodian", "warnings"}


def evaluated(tsdp_cli, tmp_path, *args, runs: int = 4) -> tuple[dict, dict]:
    """(the --json summary, the custodian file's figures) of ``--evaluate runs``."""
    custodian = tmp_path / "ev.custodian.NOT-FOR-PUBLICATION.json"
    run = tsdp_cli("release", *args, "--evaluate", runs, "--seed", "3", "--json", "--custodian", custodian)
    assert run.code == 0, run.err
    return json.loads(run.out), json.loads(custodian.read_text())["figures"]


def raw_daily_counts() -> np.ndarray:
    df = pl.read_csv(ROOT / "sample_data/events.csv", try_parse_dates=True)
    counts = df.group_by("station", pl.col("timestamp").dt.truncate("1d")).len()
    return counts.sort("station", "timestamp")["len"].to_numpy().reshape(5, 14).astype(float)


def test_readme_events_example_reports_the_capping_bias_apart_from_the_noise(tsdp_cli, tmp_path):
    runs = 6
    summary, figures = evaluated(tsdp_cli, tmp_path, *EVENTS, runs=runs)
    diagnostics, ev = figures["diagnostics"], figures["evaluation"]
    dropped = sum(diagnostics[k] for k in ("dropped_series_cap", "dropped_step_cap", "dropped_per_step_cap"))
    assert (diagnostics["rows_in"], dropped) == (35_668, 18_556)
    raw = raw_daily_counts()  # independent of tsdp: every event counted in its station-day
    assert ev["signal"]["median"] == np.median(raw) == 413.5 and ev["signal"]["cells"] == 70
    # the caps' bias is deterministic: every dropped row is one count below the raw panel
    bounding = ev["error"]["bounding"]
    assert bounding["mean"]["mean"] == pytest.approx(-dropped / 70, abs=1e-9) and bounding["mean"]["sd"] < 1e-9
    assert bounding["mae"]["mean"] == pytest.approx(dropped / 70, abs=1e-9)  # no cell is above its raw count
    # the noise, apart: N(0, sigma^2) on each cell, sigma from the claim (dry run: public)
    dry = tsdp_cli("release", *EVENTS, "--dry-run", "--json")
    sigma = json.loads(dry.out)["noise"]["sigma"]
    noise = ev["error"]["noise"]
    assert abs(noise["mean"]["mean"]) <= 5 * sigma / math.sqrt(70 * runs)
    assert noise["mae"]["mean"] == pytest.approx(sigma * math.sqrt(2 / math.pi),
                                                 abs=5 * sigma * math.sqrt(1 - 2 / math.pi) / math.sqrt(70 * runs))
    assert ev["error"]["approximation"]["mae"]["max"] == 0 and ev["error"]["postprocessing"]["mae"]["max"] == 0
    # the total: the bias plus the noise, within the noise's sampling error
    total = ev["error"]["total"]["mean"]["mean"]
    assert total == pytest.approx(-dropped / 70, abs=5 * sigma / math.sqrt(70 * runs))
    assert ev["error"]["total"]["mae"]["mean"] > 10 * noise["mae"]["mean"]
    assert ev["error_exceeds_spread"] and ev["r2"] < 0
    assert set(summary) == PUBLIC_KEYS and summary["release_written"] is False


@pytest.mark.parametrize("args, approximation", [(SUBSAMPLE, "interpolation"), (DFT, "truncation")])
def test_readme_subsample_and_dft_examples_show_the_approximation(tsdp_cli, tmp_path, args, approximation):
    _, figures = evaluated(tsdp_cli, tmp_path, *args, runs=2)
    ev = figures["evaluation"]
    parts = ev["error"]
    assert parts["bounding"]["mae"]["max"] == 0  # pre-aggregated, complete: nothing capped or filled
    assert parts["approximation"]["mae"]["mean"] > 2 * parts["noise"]["mae"]["mean"] > 0
    if approximation == "truncation":  # deterministic: the first 170 rfft terms of each series
        values = pl.read_parquet(ROOT / "sample_data/traffic_hourly.parquet").sort("sensor", "time")
        x = values["count"].to_numpy().reshape(20, -1).astype(float)
        spectrum = np.fft.rfft(x, axis=1)
        spectrum[:, 170:] = 0
        expected = np.abs(np.fft.irfft(spectrum, n=x.shape[1], axis=1) - x).mean()
        assert parts["approximation"]["mae"]["mean"] == pytest.approx(expected, rel=1e-6)
        assert parts["approximation"]["mae"]["sd"] < 1e-6 * expected


def test_parts_add_up_and_post_processing_is_its_own_part(tsdp_cli, tmp_path):
    _, figures = evaluated(tsdp_cli, tmp_path, *DFT, "--clip-min", "0", "--round", runs=2)
    parts = figures["evaluation"]["error"]
    assert parts["postprocessing"]["mae"]["mean"] > 0
    assert sum(parts[p]["mean"]["mean"] for p in ("bounding", "approximation", "noise", "postprocessing")) == \
        pytest.approx(parts["total"]["mean"]["mean"], abs=1e-9)


def test_clipped_values_are_measured_against_the_unclipped_events(tsdp_cli, tmp_path):
    rows = pl.DataFrame({"user": ["a", "a", "b", "c"], "time": ["2024-01-01 01:00", "2024-01-01 02:00",
                                                                 "2024-01-01 03:00", "2024-01-02 01:00"],
                         "kwh": [5.0, 30.0, 2.0, 50.0]})
    rows.write_csv(tmp_path / "ev.csv")
    _, figures = evaluated(tsdp_cli, tmp_path, tmp_path / "ev.csv", "--user-col", "user", "--value-col", "kwh",
                           "--value-bound", "10", "--start", "2024-01-01", "--end", "2024-01-03", "--freq", "1d",
                           "--epsilon", "1", "--delta", "1e-6", "--unit", "user", "--max-per-step", "2",
                           "--max-steps", "2", runs=2)
    assert figures["diagnostics"]["values_clipped"] == 2
    # raw days 37 and 50, bounded 5 + 10 + 2 = 17 and 10: bias -20 and -40
    assert figures["evaluation"]["error"]["bounding"]["mean"]["mean"] == pytest.approx(-30.0)
    assert figures["evaluation"]["signal"]["median"] == pytest.approx(43.5)


def test_filled_cells_are_counted_and_left_out(tsdp_cli, tmp_path):
    wide = pl.DataFrame({"time": [f"2024-01-{d:02d}" for d in (1, 2, 3, 5, 6)], "a": [1.0, 2.0, 3.0, 5.0, 6.0],
                         "b": [1.0, None, 3.0, 4.0, 2.0]})
    wide.write_csv(tmp_path / "w.csv")
    _, figures = evaluated(tsdp_cli, tmp_path, tmp_path / "w.csv", "--freq", "1d", "--fill-missing", "zero",
                           "--epsilon", "1", "--delta", "1e-6", "--unit", "event", runs=2)
    assert figures["diagnostics"]["filled_cells"] == 3  # the missing day in both series and b's null
    assert figures["evaluation"]["signal"]["cells"] == 12 - 3
    assert figures["evaluation"]["error"]["bounding"]["mae"]["max"] == 0  # no filled cell is compared


def test_json_carries_no_figure_of_the_data_and_the_custodian_file_is_private(tsdp_cli, tmp_path):
    """Two inputs of one public shape give the same --json stdout and stderr; the figures go to a 0600 file."""
    outs = []
    for k, scale in enumerate((1.0, 7.0)):
        wide = pl.read_csv(ROOT / "sample_data/traffic_hourly_wide.csv")
        wide = wide.with_columns([pl.col(c) * scale for c in wide.columns if c != "time"])
        wide.write_csv(tmp_path / f"in{k}.csv")
        run = tsdp_cli("release", tmp_path / f"in{k}.csv", "--epsilon", "1", "--delta", "1e-6", "--unit", "event",
                       "--evaluate", "2", "--json", "--custodian", tmp_path / "c.json", "--force")
        assert run.code == 0, run.err
        custodian = tmp_path / "c.json"
        assert stat.S_IMODE(os.stat(custodian).st_mode) == 0o600
        assert json.loads(custodian.read_text())["publish"] is False
        outs.append((run.out, run.err))
    assert outs[0] == outs[1]
    assert set(json.loads(outs[0][0])) == PUBLIC_KEYS


def test_default_custodian_file_under_json_and_none_without(tsdp_cli, tmp_path):
    wide = str(ROOT / "sample_data/traffic_hourly_wide.csv")
    args = ["release", wide, "--epsilon", "1", "--delta", "1e-6", "--unit", "event", "--evaluate", "2"]
    run = tsdp_cli(*args)
    assert run.code == 0 and "NOT PRIVATE" in run.out and "bounding" in run.out
    assert list(tmp_path.iterdir()) == []  # the human tables only: nothing written
    run = tsdp_cli(*args, "--json")
    assert run.code == 0
    default = tmp_path / "traffic_hourly_wide.evaluate.custodian.NOT-FOR-PUBLICATION.json"
    assert json.loads(run.out)["custodian"] == default.name and default.exists()
    again = tsdp_cli(*args, "--json")
    assert again.code == 2 and "--custodian" in again.error_line and "--force" in again.error_line


def test_stdin_events_are_refused(tsdp_cli, monkeypatch):
    run = tsdp_cli("release", "-", *EVENTS[1:], "--evaluate", "2")
    assert run.code == 2 and "--evaluate" in run.error_line and "stdin" in run.error_line

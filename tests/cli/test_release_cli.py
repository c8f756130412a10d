"""``tsdp release`` happy paths: layouts, formats, stdin/stdout, summaries, randomness, config files."""

from __future__ import annotations

import csv
import hashlib
import io
import json
import subprocess
import sys
import textwrap
from datetime import datetime, timedelta
from pathlib import Path

import polars as pl
import pytest

from tsdp.rng import SEEDED_WARNING
from tests.conftest import custodian_diagnostics

TSDP = [sys.executable, "-m", "tsdp"]
GAUSS = ["--epsilon", "1", "--delta", "1e-6", "--unit", "event"]
T0 = datetime(2024, 1, 1)
HOURS = [T0 + timedelta(hours=h) for h in range(5)]


def write(path: Path, text: str) -> Path:
    path.write_text(textwrap.dedent(text).lstrip("\n"))
    return path


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def read_any(path: Path) -> pl.DataFrame:
    return pl.read_parquet(path) if path.suffix == ".parquet" else pl.read_csv(path, try_parse_dates=True)


def report_of(path: Path) -> dict:
    return json.loads(path.with_name(path.stem + ".report.json").read_text())


@pytest.fixture
def long_frame() -> pl.DataFrame:
    """Two sensors x 5 hours, rows in a shuffled order."""
    rows = [(s, t, 10 * i + k) for i, s in enumerate(["s1", "s2"]) for k, t in enumerate(HOURS)]
    order = [7, 2, 9, 0, 4, 1, 8, 3, 6, 5]
    return pl.DataFrame([rows[i] for i in order], schema=["sensor", "time", "count"], orient="row")


def save(df: pl.DataFrame, path: Path) -> Path:
    if path.suffix == ".parquet":
        df.write_parquet(path)
    else:
        df.write_csv(path)
    return path


# ---------------------------------------------------------------------------------------------
# Layouts and formats
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("fmt_in", ["csv", "parquet"])
@pytest.mark.parametrize("fmt_out", ["csv", "parquet"])
def test_long_layout_in_and_out(tsdp_cli, tmp_path, long_frame, fmt_in, fmt_out):
    src = save(long_frame, tmp_path / f"in.{fmt_in}")
    out = tmp_path / f"out.{fmt_out}"
    run = tsdp_cli("release", src.name, *GAUSS, "--series-col", "sensor", "--value-col", "count",
                   "-o", out.name, "-q")
    assert run.code == 0, run.err
    got = read_any(out)
    assert got.columns == ["sensor", "time", "count"]
    assert got.height == 10
    assert got["count"].dtype == pl.Float64
    assert got.select("sensor", "time").sort("sensor", "time").rows() == \
        long_frame.select("sensor", "time").sort("sensor", "time").rows()
    report = report_of(out)
    assert report["output"] == {"file": out.name, "sha256": sha256(out), "format": fmt_out, "layout": "long"}
    assert report["grid"]["n_series"] == 2 and report["grid"]["n_steps"] == 5 and report["grid"]["freq"] == "1h"


@pytest.mark.parametrize("fmt_in", ["csv", "parquet"])
def test_wide_layout(tsdp_cli, tmp_path, long_frame, fmt_in):
    wide = long_frame.pivot(on="sensor", index="time", values="count").sort("time", descending=True)
    src = save(wide.select("time", "s1", "s2"), tmp_path / f"wide.{fmt_in}")
    run = tsdp_cli("release", src.name, *GAUSS, "-o", "out.csv", "-q")
    assert run.code == 0, run.err
    got = pl.read_csv(tmp_path / "out.csv", try_parse_dates=True)
    assert got.columns == ["time", "s1", "s2"] and got.height == 5
    assert sorted(got["time"].to_list()) == HOURS
    report = report_of(tmp_path / "out.csv")
    assert report["output"]["layout"] == "wide" and report["grid"]["n_series"] == 2


def test_wide_layout_with_selected_series_and_date_column(tsdp_cli, tmp_path):
    write(tmp_path / "q.csv", """
        quarter,x,y,label
        2020-01-01,1,2,a
        2020-04-01,1,2,b
        2020-07-01,1,2,c
        2020-10-01,1,2,d
        2021-01-01,1,2,e
    """)
    run = tsdp_cli("release", "q.csv", *GAUSS, "--time-col", "quarter", "--series-cols", "y,x",
                   "-o", "out.csv", "-q")
    assert run.code == 0, run.err
    got = pl.read_csv(tmp_path / "out.csv")
    assert got.columns == ["quarter", "y", "x"] and got.height == 5
    assert got["quarter"].to_list() == ["2020-01-01", "2020-04-01", "2020-07-01", "2020-10-01", "2021-01-01"]
    assert report_of(tmp_path / "out.csv")["grid"]["freq"] == "1q"


def test_event_layout(tsdp_cli, tmp_path):
    write(tmp_path / "events.csv", """
        user,ts,station
        u1,2024-01-01 00:10:00,st1
        u1,2024-01-01 00:20:00,st1
        u2,2024-01-01 01:30:00,st2
        u3,2024-01-01 02:59:59,st1
        u3,2024-01-01 03:00:00,st1
        u4,2024-01-01 01:00:00,st9
    """)
    run = tsdp_cli("release", "events.csv", "--mechanism", "laplace", "--epsilon", "1e4", "--unit", "user",
                   "--max-steps", "2", "--max-per-step", "1", "--user-col", "user", "--time-col", "ts",
                   "--series-col", "station", "--series-keys", "st1,st2,st3",
                   "--start", "2024-01-01", "--end", "2024-01-01 03:00:00", "--freq", "1h",
                   "-o", "counts.parquet", "--seed", "3", "--json")
    assert run.code == 0, run.err
    got = pl.read_parquet(tmp_path / "counts.parquet")
    assert got.columns == ["station", "ts", "count"]
    assert got.height == 3 * 3
    assert got.select("station", "ts").rows() == [
        (s, T0 + timedelta(hours=h)) for s in ("st1", "st2", "st3") for h in range(3)
    ]
    # u1 keeps one event per hour; u3's 03:00 event is outside [start, end); st9 is undeclared.
    assert got["count"].to_list() == pytest.approx([1, 0, 1, 0, 1, 0, 0, 0, 0], abs=0.05)
    summary = json.loads(run.out)
    assert "diagnostics_not_private" not in summary and "dropped" not in run.out + run.err
    diag = custodian_diagnostics(summary)
    assert summary["custodian"] == "counts.custodian.NOT-FOR-PUBLICATION.json"
    assert diag["dropped_outside_grid"] == 1 and diag["dropped_undeclared_series"] == 1
    assert diag["dropped_per_step_cap"] == 1 and diag["rows_kept"] == 3
    report = report_of(tmp_path / "counts.parquet")
    assert report["claim"]["unit"]["enforced"] is True
    assert report["claim"]["unit"]["id_column"] == "user"
    assert "dropped" not in json.dumps(report)  # the diagnostics are not private


def test_default_output_and_report_names(tsdp_cli, tmp_path, long_frame):
    save(long_frame, tmp_path / "traffic.csv")
    run = tsdp_cli("release", "traffic.csv", *GAUSS, "--series-col", "sensor", "--value-col", "count", "-q")
    assert run.code == 0, run.err
    assert (tmp_path / "traffic.released.csv").exists()
    assert (tmp_path / "traffic.released.report.json").exists()


def test_a_complete_panel_writes_a_custodian_file_too(tsdp_cli, tmp_path, long_frame):
    """Nothing was dropped, clipped or filled, but the custodian file is written all the same: whether it
    exists must not tell anything about the input (issue 33); it holds the data-dependent checks."""
    save(long_frame, tmp_path / "traffic.csv")
    run = tsdp_cli("release", "traffic.csv", *GAUSS, "--series-col", "sensor", "--value-col", "count", "--json")
    assert run.code == 0, run.err
    summary = json.loads(run.out)
    assert summary["custodian"] == "traffic.released.custodian.NOT-FOR-PUBLICATION.json"
    assert summary["custodian_checks"] == ["noisy"]
    custodian = json.loads((tmp_path / summary["custodian"]).read_text())
    assert custodian["publish"] is False and custodian["figures"] == {"diagnostics": {}}
    assert (tmp_path / summary["custodian"]).stat().st_mode & 0o077 == 0


def test_custodian_file_path_is_checked_before_any_work(tsdp_cli, tmp_path, dir_snapshot):
    """--custodian must be a .json file other than stdout and the report; an existing one is kept without
    --force."""
    (tmp_path / "ev.csv").write_text("user,ts\nu1,2024-01-01 00:10\nu2,2024-01-01 09:00\n")
    args = ["release", "ev.csv", "--user-col", "user", "--time-col", "ts", "--start", "2024-01-01",
            "--end", "2024-01-01 03:00", "--freq", "1h", "--unit", "event", "--epsilon", "1", "--delta", "1e-6",
            "-o", "out.csv", "--report", "out.report.json", "--json"]
    for path, words in (("-", "never to stdout"), ("out.csv", "use one of .json"), ("out.report.json", "must differ")):
        run = tsdp_cli(*args, "--custodian", path)
        assert run.code == 2 and words in run.error_line
    (tmp_path / "mine.json").write_text("{}")
    before = dir_snapshot(tmp_path)
    run = tsdp_cli(*args, "--custodian", "mine.json")
    assert run.code == 2 and "mine.json" in run.error_line
    assert dir_snapshot(tmp_path) == before
    run = tsdp_cli(*args, "--custodian", "mine.json", "--force")
    assert run.code == 0, run.err
    assert custodian_diagnostics(json.loads(run.out))["dropped_outside_grid"] == 1


def test_csv_output_time_format(tsdp_cli, tmp_path, long_frame):
    save(long_frame, tmp_path / "in.parquet")
    assert tsdp_cli("release", "in.parquet", *GAUSS, "--series-col", "sensor", "--value-col", "count",
                    "-o", "out.csv", "-q").code == 0
    rows = list(csv.DictReader(io.StringIO((tmp_path / "out.csv").read_text())))
    assert {r["time"] for r in rows} == {t.strftime("%Y-%m-%d %H:%M:%S") for t in HOURS}


def test_post_processing(tsdp_cli, tmp_path, long_frame):
    save(long_frame, tmp_path / "in.csv")
    run = tsdp_cli("release", "in.csv", *GAUSS, "--series-col", "sensor", "--value-col", "count",
                   "-o", "out.csv", "-q", "--clip-min", "0", "--clip-max", "12", "--round")
    assert run.code == 0, run.err
    values = pl.read_csv(tmp_path / "out.csv")["count"].to_list()
    assert all(0 <= v <= 12 and v == int(v) for v in values)


# ---------------------------------------------------------------------------------------------
# stdin / stdout, summaries, quiet
# ---------------------------------------------------------------------------------------------


def test_stdin_to_stdout_end_to_end(tmp_path, long_frame):
    data = long_frame.write_csv().encode()
    proc = subprocess.run(
        TSDP + ["release", "-", *GAUSS, "--series-col", "sensor", "--value-col", "count",
                "-o", "-", "--report", "r.json"],
        input=data, cwd=tmp_path, capture_output=True, timeout=60,
    )
    assert proc.returncode == 0, proc.stderr.decode()
    assert b"Traceback" not in proc.stderr and b"error:" not in proc.stderr
    got = pl.read_csv(io.BytesIO(proc.stdout))  # stdout holds the CSV and nothing else
    assert got.columns == ["sensor", "time", "count"] and got.height == 10
    assert b"tsdp release" in proc.stderr  # the human summary went to stderr
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["output"]["file"] == "<stdout>"
    assert report["output"]["sha256"] == hashlib.sha256(proc.stdout).hexdigest()
    assert report["command"]["parameters"]["input"] == "<stdin>"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.custodian.NOT-FOR-PUBLICATION.json", "r.json"]


def test_report_to_stdout(tsdp_cli, tmp_path, long_frame):
    save(long_frame, tmp_path / "in.csv")
    run = tsdp_cli("release", "in.csv", *GAUSS, "--series-col", "sensor", "--value-col", "count",
                   "-o", "out.csv", "--report", "-")
    assert run.code == 0, run.err
    report = json.loads(run.out)  # the report alone: the human summary went to stderr
    assert report["output"]["sha256"] == sha256(tmp_path / "out.csv")
    assert "tsdp release" in run.err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.csv", "out.csv", "out.custodian.NOT-FOR-PUBLICATION.json"]


def test_stdin_in_process(tsdp_cli, tmp_path, monkeypatch, long_frame):
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(long_frame.write_csv().encode())))
    run = tsdp_cli("release", "-", *GAUSS, "--series-col", "sensor", "--value-col", "count",
                   "-o", "out.parquet", "-q")
    assert run.code == 0, run.err
    assert pl.read_parquet(tmp_path / "out.parquet").height == 10


def large(frame: pl.DataFrame) -> pl.DataFrame:
    """Counts well above the noise (sigma about 4 at epsilon 1), so that the steward's noisy-release
    warning (tests/cli/test_accuracy_cli.py) stays silent in tests about other output."""
    return frame.with_columns(pl.col("count") * 100)


def test_json_summary(tsdp_cli, tmp_path, long_frame):
    save(large(long_frame), tmp_path / "in.csv")
    run = tsdp_cli("release", "in.csv", *GAUSS, "--series-col", "sensor", "--value-col", "count",
                   "-o", "out.csv", "--json")
    assert run.code == 0, run.err
    assert run.err == ""
    summary = json.loads(run.out)
    assert summary["output"] == "out.csv" and summary["report"] == "out.report.json"
    assert summary["mechanism"] == "gaussian" and summary["epsilon"] == 1.0 and summary["delta"] == 1e-6
    assert summary["series"] == 2 and summary["steps"] == 5 and summary["freq"] == "1h"
    assert summary["noise"]["sigma"] > 0


def test_human_summary_goes_to_stdout_when_it_is_free(tsdp_cli, tmp_path, long_frame):
    save(large(long_frame), tmp_path / "in.csv")
    run = tsdp_cli("release", "in.csv", *GAUSS, "--series-col", "sensor", "--value-col", "count", "-o", "out.csv")
    assert run.code == 0 and "tsdp release" in run.out and "sigma" in run.out
    assert run.err == ""


def test_quiet_prints_nothing(tsdp_cli, tmp_path, long_frame):
    save(long_frame, tmp_path / "in.csv")
    run = tsdp_cli("release", "in.csv", *GAUSS, "--series-col", "sensor", "--value-col", "count",
                   "-o", "out.csv", "--quiet", "--seed", "7")  # a seeded run would warn
    assert run.code == 0
    assert run.out == "" and run.err == ""


def test_seeded_warning_is_shown_without_quiet(tsdp_cli, tmp_path, long_frame):
    save(large(long_frame), tmp_path / "in.csv")
    run = tsdp_cli("release", "in.csv", *GAUSS, "--series-col", "sensor", "--value-col", "count",
                   "-o", "out.csv", "--json", "--seed", "7")
    assert run.code == 0
    assert run.err_lines == [f"warning: {SEEDED_WARNING}"]
    json.loads(run.out)


def test_version(tsdp_cli):
    from tsdp import __version__

    run = tsdp_cli("--version")
    assert run.code == 0 and run.out.strip() == f"tsdp {__version__}"


# ---------------------------------------------------------------------------------------------
# Randomness and the report
# ---------------------------------------------------------------------------------------------

SEED = 918273645


def test_seed_makes_runs_identical_and_is_never_reported(tsdp_cli, tmp_path, long_frame):
    save(long_frame, tmp_path / "in.csv")
    args = ["release", "in.csv", *GAUSS, "--series-col", "sensor", "--value-col", "count", "-q",
            "--seed", str(SEED)]
    assert tsdp_cli(*args, "-o", "a.csv").code == 0
    assert tsdp_cli(*args, "-o", "b.csv").code == 0
    assert (tmp_path / "a.csv").read_bytes() == (tmp_path / "b.csv").read_bytes()
    for name in ("a", "b"):
        text = (tmp_path / f"{name}.report.json").read_text()
        report = json.loads(text)
        assert report["randomness"] == "seeded"
        assert SEEDED_WARNING in report["warnings"]
        assert str(SEED) not in text
        assert "seed" not in report["command"]["parameters"]
        assert report["output"]["sha256"] == sha256(tmp_path / f"{name}.csv")


def test_unseeded_runs_differ(tsdp_cli, tmp_path, long_frame):
    save(long_frame, tmp_path / "in.csv")
    args = ["release", "in.csv", *GAUSS, "--series-col", "sensor", "--value-col", "count", "-q"]
    assert tsdp_cli(*args, "-o", "a.parquet").code == 0
    assert tsdp_cli(*args, "-o", "b.parquet").code == 0
    a, b = pl.read_parquet(tmp_path / "a.parquet"), pl.read_parquet(tmp_path / "b.parquet")
    assert a.select("sensor", "time").equals(b.select("sensor", "time"))
    assert not a["count"].equals(b["count"])
    for name in ("a", "b"):
        report = report_of(tmp_path / f"{name}.parquet")
        assert report["randomness"] == "os-entropy"
        assert SEEDED_WARNING not in report["warnings"]
        assert report["output"]["sha256"] == sha256(tmp_path / f"{name}.parquet")


def test_report_is_valid_and_names_no_private_paths(tsdp_cli, tmp_path, long_frame):
    import jsonschema

    from tsdp.report import schema

    (tmp_path / "private").mkdir()
    save(long_frame, tmp_path / "private" / "in.csv")
    run = tsdp_cli("release", str(tmp_path / "private" / "in.csv"), *GAUSS, "--series-col", "sensor",
                   "--value-col", "count", "-o", str(tmp_path / "out.csv"), "-q")
    assert run.code == 0, run.err
    text = (tmp_path / "out.report.json").read_text()
    report = json.loads(text)
    jsonschema.validate(report, schema())
    assert report["command"]["parameters"]["input"] == "in.csv"
    assert str(tmp_path) not in text


# ---------------------------------------------------------------------------------------------
# Config files
# ---------------------------------------------------------------------------------------------


@pytest.fixture
def job(tmp_path, long_frame):
    """A config in jobs/, the data in data/, the run started from elsewhere/."""
    (tmp_path / "data").mkdir()
    (tmp_path / "jobs" / "out").mkdir(parents=True)
    (tmp_path / "elsewhere").mkdir()
    save(long_frame, tmp_path / "data" / "in.csv")
    return write(tmp_path / "jobs" / "job.toml", """
        # a release job
        [release]
        input = "../data/in.csv"
        output = "out/released.csv"
        series-col = "sensor"
        value_col = "count"
        mechanism = "gaussian"
        epsilon = 1.0
        delta = 1e-6
        unit = "user"
        max-steps = 2
        round = true
        clip-min = 0
    """)


def test_config_paths_are_relative_to_the_config_file(tsdp_cli, tmp_path, job, monkeypatch):
    monkeypatch.chdir(tmp_path / "elsewhere")
    run = tsdp_cli("release", "--config", str(job), "-q")
    assert run.code == 0, run.err
    out = tmp_path / "jobs" / "out" / "released.csv"
    got = pl.read_csv(out)
    assert got.height == 10
    assert all(v >= 0 and v == int(v) for v in got["count"].to_list())  # round and clip-min applied
    report = report_of(out)
    assert report["claim"]["epsilon"] == 1.0 and report["claim"]["unit"]["max_steps"] == 2
    assert report["command"]["parameters"]["round_values"] is True
    assert list((tmp_path / "elsewhere").iterdir()) == []


def test_command_line_flags_override_the_config(tsdp_cli, tmp_path, job, monkeypatch):
    monkeypatch.chdir(tmp_path / "elsewhere")
    run = tsdp_cli("release", "--config", str(job), "--epsilon", "2.5", "--max-steps", "3",
                   "-o", "mine.csv", "-q")
    assert run.code == 0, run.err
    report = report_of(tmp_path / "elsewhere" / "mine.csv")  # CLI paths stay relative to the cwd
    assert report["claim"]["epsilon"] == 2.5
    assert report["claim"]["unit"]["max_steps"] == 3
    assert report["claim"]["delta"] == 1e-6  # not overridden: from the config
    assert not (tmp_path / "jobs" / "out" / "released.csv").exists()


def test_config_order_does_not_matter(tsdp_cli, tmp_path, job, monkeypatch):
    """Flags before --config still win (the config only supplies defaults)."""
    monkeypatch.chdir(tmp_path / "elsewhere")
    run = tsdp_cli("release", "--epsilon", "3", "--config", str(job), "-o", "x.csv", "-q")
    assert run.code == 0, run.err
    assert report_of(tmp_path / "elsewhere" / "x.csv")["claim"]["epsilon"] == 3.0


def test_config_top_level_keys_and_lists(tsdp_cli, tmp_path):
    write(tmp_path / "events.csv", """
        user,ts,station
        u1,2024-01-01 00:10:00,st1
        u2,2024-01-01 01:30:00,st2
    """)
    write(tmp_path / "job.toml", """
        input = "events.csv"
        layout = "events"
        user-col = "user"
        time-col = "ts"
        series-col = "station"
        series-keys = ["st1", "st2"]
        start = "2024-01-01 00:00:00"
        end = "2024-01-01 02:00:00"
        freq = "1h"
        mechanism = "laplace"
        epsilon = 1.0
        unit = "event"
    """)
    run = tsdp_cli("release", "--config", "job.toml", "-o", "out.csv", "-q")
    assert run.code == 0, run.err
    got = pl.read_csv(tmp_path / "out.csv")
    assert got["station"].to_list() == ["st1", "st1", "st2", "st2"]

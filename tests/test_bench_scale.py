"""bench/scale.py at a tiny size: its generators (streamed chunks, cached files, ties, skew) and
the DuckDB SQL version of tsdp's caps against tsdp's own aggregation of the same rows."""

from __future__ import annotations

import sys
from pathlib import Path

import polars as pl
import pytest

from tests.conftest import REPO_ROOT, load_script

N = 30_000


@pytest.fixture(scope="module")
def scale():
    return load_script(REPO_ROOT / "bench" / "scale.py", "bench_scale")


@pytest.fixture(scope="module")
def events(scale, tmp_path_factory) -> dict[str, Path]:
    workdir = tmp_path_factory.mktemp("scale")
    return scale.dataset("events", N, workdir, ["parquet", "csv"], quiet=True)


def test_events_generator(scale, events):
    df = pl.read_parquet(events["parquet"])
    assert df.columns == ["user_id", "ts", "station", "value"] and df.height == N
    assert pl.read_csv(events["csv"], try_parse_dates=True).equals(df), "CSV and Parquet hold the same rows"
    assert df["ts"].is_sorted(), "events are written in time order, as logs are"
    start, end = (pl.Series([t]).str.to_datetime(scale.DATETIME_FORMAT)[0] for t in (scale.EV_START, scale.EV_END))
    assert df["ts"].min() >= start and df["ts"].max() < end
    assert set(df["station"].unique()) <= set(scale.STATIONS)
    # ties in time, within a user and across stations of one user
    assert df.height - df.unique(["user_id", "ts"]).height > 0.05 * N
    assert df.group_by("user_id", "ts").agg(pl.col("station").n_unique()).filter(pl.col("station") > 1).height > 0
    # skew: many users, a few heavy ones
    per_user = df.group_by("user_id").len()["len"]
    assert per_user.len() > N / 100 and per_user.max() > 20 * per_user.median()


def test_cached_and_atomic(scale, events):
    stamps = {fmt: p.stat().st_mtime_ns for fmt, p in events.items()}
    again = scale.dataset("events", N, events["parquet"].parent, ["parquet", "csv"], quiet=True)
    assert again == events and {fmt: p.stat().st_mtime_ns for fmt, p in again.items()} == stamps
    assert not list(events["parquet"].parent.glob("*.partial"))


def test_streamed_in_chunks(scale, tmp_path, monkeypatch):
    monkeypatch.setattr(scale, "CHUNK_ROWS", 500)
    chunks = list(scale.event_chunks(20_000))
    assert len(chunks) == 40 and sum(c.height for c in chunks) == 20_000
    assert max(c.height for c in chunks) < 2 * 500
    rows = scale.write_chunks(iter(chunks), {"parquet": tmp_path / "e.parquet", "csv": tmp_path / "e.csv"})
    written = pl.read_parquet(tmp_path / "e.parquet")
    assert rows == written.height == 20_000 and written["ts"].is_sorted()
    assert pl.read_csv(tmp_path / "e.csv", try_parse_dates=True).equals(written)


def test_records_generator(scale, tmp_path):
    path = scale.dataset("records", 20_000, tmp_path, ["parquet"], quiet=True)["parquet"]
    df = pl.read_parquet(path)
    assert df.columns == ["bus_id", "ts", "cell", "speed"] and df.height == 20_000
    assert df["speed"].min() >= 0 and df["speed"].max() <= scale.UPPER
    groups = df.select("cell", pl.col("ts").dt.truncate("1h")).unique().height
    assert 0.5 * scale.N_CELLS * scale.N_SLOTS < groups <= scale.N_CELLS * scale.N_SLOTS


def test_itms_records_generator(scale, tmp_path):
    """The ITMS shape: few buses, tens of records per (cell, hour, bus) run (the sparse shape has
    about 1.4), so the two shapes bracket the per-run reduction's cost."""
    path = scale.dataset("itms", 1_000_000, tmp_path, ["parquet"], quiet=True)["parquet"]
    df = pl.read_parquet(path)
    assert df.columns == ["bus_id", "ts", "cell", "speed"] and df.height == 1_000_000
    assert df["speed"].min() >= 0 and df["speed"].max() <= scale.UPPER and df["ts"].is_sorted()
    assert df["bus_id"].n_unique() == 20
    runs = df.group_by("cell", pl.col("ts").dt.truncate("1h"), "bus_id").len()
    assert 20 < runs["len"].mean() < 100
    sparse = pl.read_parquet(scale.dataset("records", 200_000, tmp_path, ["parquet"], quiet=True)["parquet"])
    assert sparse.group_by("cell", pl.col("ts").dt.truncate("1h"), "bus_id").len()["len"].mean() < 3


@pytest.mark.parametrize("fmt", ["parquet", "csv"])
def test_duckdb_caps_equal_tsdp_aggregation(scale, events, fmt):
    pytest.importorskip("duckdb", reason="duckdb is a bench-only reference, not installed")
    check = scale.cross_check(events[fmt])
    assert check["equal"], check
    assert check["cells"] == scale.N_STATIONS * scale.EV_HOURS
    assert check["kept"] == check["tsdp_kept"] < N, "the caps drop rows at this size"


def test_cross_check_detects_other_caps(scale, events):
    """Negative control: the comparison is sharp enough to see a different K, I or M."""
    pytest.importorskip("duckdb", reason="duckdb is a bench-only reference, not installed")
    ours, _ = scale.tsdp_cells(events["parquet"])
    total = int(ours["count"].sum())
    for caps in ({"k": scale.K_SERIES - 1}, {"i": scale.I_STEPS - 1}, {"m": scale.M_PER_STEP - 1}):
        assert int(scale.duckdb_cells(events["parquet"], **caps)["n"].sum()) < total, caps


def test_measure_reports_the_child_peak(scale):
    run = scale.measure([sys.executable, "-c", "b = bytearray(300 * 2**20); b[::4096] = b'x' * len(b[::4096])"])
    assert run.code == 0 and run.peak >= 300 * 2**20
    small = scale.measure([sys.executable, "-c", "pass"])
    assert small.peak < 300 * 2**20, "a later, smaller child is not charged the earlier peak"


@pytest.mark.parametrize("fmt", ["parquet", "csv"])
def test_duckdb_mean_runs_equal_tsdp_record_path(scale, tmp_path_factory, fmt):
    """Issue 30: DuckDB's window cap (earliest m_UB records by time, then row) and per-run count and
    sum give mean-estimate's runs; on the ITMS shape (tens of records per run) the cap bites."""
    pytest.importorskip("duckdb", reason="duckdb is a bench-only reference, not installed")
    path = scale.dataset("itms", 200_000, tmp_path_factory.mktemp("itms"), ["parquet", "csv"], quiet=True)[fmt]
    check = scale.mean_cross_check(path)
    assert check["equal"], check
    assert check["kept"] < 200_000, "the cap m_UB drops records at this size"


def test_mean_cross_check_detects_another_cap_or_order(scale, tmp_path_factory, monkeypatch):
    """Negative control: one record fewer per run, or the latest records instead of the earliest."""
    pytest.importorskip("duckdb", reason="duckdb is a bench-only reference, not installed")
    path = scale.dataset("itms", 200_000, tmp_path_factory.mktemp("itms2"), ["parquet"], quiet=True)["parquet"]
    sql = scale.duckdb_mean_sql
    for edit in (lambda p, m_ub=scale.MEAN_M_UB: sql(p, m_ub - 1),
                 lambda p, m_ub=scale.MEAN_M_UB: sql(p, m_ub).replace("ORDER BY ts, row_id", "ORDER BY ts DESC, row_id")):
        monkeypatch.setattr(scale, "duckdb_mean_sql", edit)
        assert not scale.mean_cross_check(path)["equal"]

"""``--engine local``: sharding by user changes nothing (identical panels and row counts to the
in-memory route), errors in a shard name the input row, shards never outlive the run, and the
engine options are checked before any data is read."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from tsdp.cli.app import main
from tsdp.engine import local
from tsdp.errors import DataError, UsageError
from tsdp.engine.events import EventCaps, EventJob, aggregate_events
from tsdp.io.files import read_table

KEYS = ["a", "b", "c"]
START, END = "2024-01-01 00:00:00", "2024-01-02 00:00:00"
TINY = 1  # a memory limit of 1 byte: every input is sharded


def make_events(n_rows: int = 4000, n_users: int = 60, seed: int = 0, values: bool = False) -> pl.DataFrame:
    """Events with a skewed user (a third of all rows), ties in time with different values, many users."""
    rng = np.random.default_rng(seed)
    users = np.where(rng.random(n_rows) < 0.33, 0, rng.integers(1, n_users, n_rows))
    minutes = rng.integers(0, 24 * 60, n_rows) // 7 * 7  # coarse minutes: many exact ties
    times = (np.datetime64("2024-01-01T00:00") + minutes.astype("timedelta64[m]")).astype("datetime64[s]")
    frame = {
        "user": [f"u{u:03d}" for u in users],
        "time": [str(t).replace("T", " ") for t in times],
        "station": rng.choice(["a", "b", "c", "zz"], n_rows, p=[0.4, 0.3, 0.25, 0.05]),
    }
    if values:
        frame["amount"] = np.round(rng.exponential(3.0, n_rows), 3)
    return pl.DataFrame(frame)


def job(caps: EventCaps, values: bool = False) -> EventJob:
    return EventJob("user", "time", "1h", START, END, caps, "station", KEYS,
                    "amount" if values else None)


CAPS = {
    "none": EventCaps(),
    "event": EventCaps(level="event"),
    "w-event": EventCaps(max_per_step=2, series_per_unit=1, level="w-event"),
    "user": EventCaps(max_per_step=2, max_steps=5, series_per_unit=2, level="user"),
    "user-values": EventCaps(max_per_step=3, max_steps=4, series_per_unit=1, value_bound=5.0, level="user"),
}


def write(df: pl.DataFrame, path: Path) -> str:
    if path.suffix == ".csv":
        df.write_csv(path)
    else:
        df.write_parquet(path, row_group_size=500)
    return str(path)


@pytest.mark.parametrize("suffix", [".csv", ".parquet"])
@pytest.mark.parametrize("name", list(CAPS))
def test_sharded_equals_in_memory(tmp_path, suffix, name):
    values = name == "user-values"
    path = write(make_events(values=values), tmp_path / f"events{suffix}")
    j = job(CAPS[name], values)
    whole = aggregate_events(read_table(path), "user", "time", "1h", START, END, CAPS[name], "station", KEYS,
                             "amount" if values else None)
    sharded = local.aggregate_events_local(path, j, memory_limit=TINY, work_dir=str(tmp_path))
    a, b = whole.table.values_matrix(), sharded.table.values_matrix()
    if values:
        np.testing.assert_allclose(b, a, rtol=0, atol=1e-9)
    else:
        np.testing.assert_array_equal(b, a)
    assert sharded.diagnostics == whole.diagnostics
    assert sharded.table.frame.columns == whole.table.frame.columns
    assert sharded.table.frame.drop("count" if not values else "amount").equals(
        whole.table.frame.drop("count" if not values else "amount"))


def test_more_shards_than_users_and_every_shard_count(tmp_path, monkeypatch):
    path = write(make_events(n_rows=300, n_users=3), tmp_path / "few.parquet")
    j = job(CAPS["user"])
    expected = local.aggregate_events_local(path, j, memory_limit=1 << 40).table.values_matrix()
    for shards in (4, 7, 64):
        monkeypatch.setattr(local, "shard_count", lambda p, m, n=shards: n)
        got = local.aggregate_events_local(path, j, memory_limit=TINY, work_dir=str(tmp_path))
        np.testing.assert_array_equal(got.table.values_matrix(), expected)


def test_tie_break_is_the_input_row_not_the_shard(tmp_path):
    """Two events of one user at the same instant with different values, M = 1: the first in the input
    is kept, sharded or not."""
    df = pl.DataFrame({"user": ["u1", "u1", "u2"], "time": ["2024-01-01 00:10:00"] * 3,
                       "station": ["a", "a", "a"], "amount": [1.0, 4.0, 2.0]})
    caps = EventCaps(max_per_step=1, value_bound=5.0, level="user")
    for order, expected in ((df, 3.0), (df.reverse(), 6.0)):
        path = write(order, tmp_path / "ties.csv")
        got = local.aggregate_events_local(path, job(caps, values=True), memory_limit=TINY, work_dir=str(tmp_path))
        assert got.table.values_matrix()[0, 0] == expected


def test_error_in_a_shard_names_the_input_row(tmp_path):
    df = make_events(n_rows=500)
    bad = df.with_columns(pl.when(pl.int_range(pl.len()) == 321).then(pl.lit("not a time"))
                          .otherwise(pl.col("time")).alias("time"))
    path = write(bad, tmp_path / "bad.csv")
    with pytest.raises(DataError, match=r"'not a time' at row 322"):
        local.aggregate_events_local(path, job(CAPS["user"]), memory_limit=TINY, work_dir=str(tmp_path))
    with pytest.raises(DataError, match=r"at row 322"):  # the in-memory route says the same
        aggregate_events(read_table(path), "user", "time", "1h", START, END, CAPS["user"], "station", KEYS)


def test_sharded_clock_change_rows_are_dropped_or_named_by_input_row(tmp_path):
    """A local time Berlin repeats (2024-10-27 02:30) outside the grid is dropped in a shard as in
    memory; inside it, the error names the row of the input."""
    df = make_events(n_rows=500).with_columns(
        pl.when(pl.int_range(pl.len()) == 321).then(pl.lit("2024-10-27 02:30:00")).otherwise(pl.col("time"))
        .alias("time"))
    path = write(df, tmp_path / "berlin.csv")
    berlin = EventJob("user", "time", "1h", START, END, CAPS["user"], "station", KEYS, timezone="Europe/Berlin")
    sharded = local.aggregate_events_local(path, berlin, memory_limit=TINY, work_dir=str(tmp_path))
    in_memory = aggregate_events(read_table(path), "user", "time", "1h", START, END, CAPS["user"], "station",
                                 KEYS, timezone="Europe/Berlin")
    assert np.array_equal(sharded.table.values_matrix(), in_memory.table.values_matrix())
    assert sharded.diagnostics == in_memory.diagnostics and sharded.diagnostics["dropped_outside_grid"] == 1
    wide = EventJob("user", "time", "1h", START, "2024-10-28", CAPS["user"], "station", KEYS,
                    timezone="Europe/Berlin")
    with pytest.raises(DataError, match=r"'2024-10-27 02:30:00' at row 322 is ambiguous"):
        local.aggregate_events_local(path, wide, memory_limit=TINY, work_dir=str(tmp_path))


def test_shards_are_removed_after_success_and_failure(tmp_path):
    good = write(make_events(n_rows=200), tmp_path / "good.csv")
    bad = write(make_events(n_rows=200).with_columns(pl.lit(None, dtype=pl.String).alias("user")),
                tmp_path / "bad.csv")
    work = tmp_path / "work"
    work.mkdir()
    local.aggregate_events_local(good, job(CAPS["user"]), memory_limit=TINY, work_dir=str(work))
    with pytest.raises(DataError, match="missing user id"):
        local.aggregate_events_local(bad, job(CAPS["user"]), memory_limit=TINY, work_dir=str(work))
    assert list(work.iterdir()) == []


def test_small_inputs_stay_in_memory(tmp_path):
    path = write(make_events(n_rows=100), tmp_path / "small.csv")
    assert local.shard_count(path, local.default_memory_limit()) == 1
    assert local.shard_count(path, TINY) >= 4
    assert local.shard_count("-", TINY) == 1  # stdin cannot be scanned twice


@pytest.mark.parametrize("text, expected", [("2GiB", 2 << 30), ("500MB", 500 * 10**6), ("1.5g", int(1.5 * (1 << 30))),
                                            ("104857600", 100 << 20)])
def test_parse_memory(text, expected):
    assert local.parse_memory(text) == expected


@pytest.mark.parametrize("text", ["lots", "2XB", "-1GiB", "1MB", "nan", "inf"])
def test_parse_memory_refuses(text):
    with pytest.raises(UsageError, match="--memory-limit"):
        local.parse_memory(text)


def test_estimated_rows(tmp_path):
    df = make_events(n_rows=3000)
    assert local.estimated_rows(write(df, tmp_path / "e.parquet")) == 3000
    assert abs(local.estimated_rows(write(df, tmp_path / "e.csv")) - 3000) <= 30  # from the mean line length


def test_default_memory_limit_is_a_safe_share():
    assert 0 < local.default_memory_limit() <= min(local.DEFAULT_CAP, local.physical_memory() // 4)


# ------------------------------------------------------------------------------------------- CLI

EVENTS_ARGS = ["--layout", "events", "--user-col", "user_id", "--time-col", "timestamp", "--series-col", "station",
               "--series-keys", "st1,st2,st3,st4,st5", "--start", "2024-03-04 00:00:00", "--end",
               "2024-03-18 00:00:00", "--freq", "1h", "--epsilon", "1", "--delta", "1e-6", "--unit", "user",
               "--max-per-step", "2", "--max-steps", "24", "--series-per-user", "1", "--seed", "5", "--quiet"]


def test_cli_sharded_release_equals_in_memory(tmp_path, repo_root, monkeypatch):
    source = str(repo_root / "sample_data/events.csv")
    assert main(["release", source, *EVENTS_ARGS, "-o", str(tmp_path / "memory.csv")]) == 0
    monkeypatch.setattr(local, "BYTES_PER_ROW", 10**6)  # the sample now exceeds any limit: sharded
    assert main(["release", source, *EVENTS_ARGS, "--memory-limit", "64MiB", "--work-dir", str(tmp_path),
                 "-o", str(tmp_path / "sharded.csv")]) == 0
    assert (tmp_path / "memory.csv").read_bytes() == (tmp_path / "sharded.csv").read_bytes()
    a = json.loads((tmp_path / "memory.report.json").read_text())["claim"]
    b = json.loads((tmp_path / "sharded.report.json").read_text())["claim"]
    assert a == b
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".tsdp-shards-")]


@pytest.mark.parametrize("args, needle", [
    (["--engine", "spark"], "--engine spark applies to --layout events"),
    (["--memory-limit", "1GiB"], "--memory-limit applies to --layout events"),
])
def test_engine_options_need_event_input(tmp_path, repo_root, capsys, args, needle):
    code = main(["release", str(repo_root / "sample_data/traffic_hourly_wide.csv"), "--epsilon", "1", "--delta", "1e-6",
                 "--unit", "event", *args, "-o", str(tmp_path / "x.csv")])
    assert code == 2 and needle in capsys.readouterr().err
    assert not (tmp_path / "x.csv").exists()


@pytest.mark.parametrize("args, needle", [
    (["--spark-master", "local[2]"], "--spark-master and --spark-conf apply to --engine spark"),
    (["--engine", "spark", "--memory-limit", "1GiB"], "--memory-limit and --work-dir apply to --engine local"),
    (["--engine", "spark", "--spark-conf", "novalue"], "--spark-conf 'novalue'"),
    (["--memory-limit", "lots"], "--memory-limit 'lots'"),
])
def test_engine_option_errors(tmp_path, repo_root, capsys, args, needle):
    code = main(["release", str(repo_root / "sample_data/events.csv"), *EVENTS_ARGS, *args, "-o", str(tmp_path / "x.csv")])
    err = capsys.readouterr().err
    assert code == 2 and needle in err and err.startswith("error:")
    assert not (tmp_path / "x.csv").exists()


def test_out_of_memory_is_one_error_line_with_exit_5(tmp_path, repo_root, capsys, monkeypatch):
    def exhausted(*args, **kwargs):
        raise MemoryError

    monkeypatch.setattr(local, "aggregate_events_local", exhausted)
    code = main(["release", str(repo_root / "sample_data/events.csv"), *EVENTS_ARGS, "-o", str(tmp_path / "x.csv")])
    err = capsys.readouterr().err
    assert code == 5 and err.count("\n") == 1 and "out of memory" in err and "--memory-limit" in err
    assert not (tmp_path / "x.csv").exists()


@pytest.mark.parametrize("fallback", ["hash-collision", "many-series"])
def test_kernel_fallbacks_give_the_same_cells(tmp_path, monkeypatch, fallback):
    """Every user hashing alike (a collision), or too many series for the packed key: the runs
    are keyed by exact user codes instead, and the cells are the same."""
    from tsdp.engine import kernel

    path = write(make_events(values=True), tmp_path / "events.parquet")
    j = job(CAPS["user-values"], values=True)
    want = local.aggregate_events_local(path, j, memory_limit=1 << 40).table.values_matrix()
    calls = []
    keyed = kernel._keyed
    monkeypatch.setattr(kernel, "_keyed", lambda *a: calls.append(1) or keyed(*a))
    if fallback == "hash-collision":
        monkeypatch.setattr(kernel, "_hash_code", lambda: pl.lit(0, dtype=pl.UInt64))
    else:
        monkeypatch.setattr(kernel, "_SERIES_BITS", 0)
    got = local.aggregate_events_local(path, j, memory_limit=1 << 40).table.values_matrix()
    assert calls == ([1, 1] if fallback == "hash-collision" else [])
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)  # sums in another order

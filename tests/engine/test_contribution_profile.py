"""The users' contribution histograms that --max-per-step/--max-steps auto choose from
(tsdp.engine.kernel.contribution_profile): against a brute-force count, identical when the local
engine shards the input by user, and moved by exactly one user between neighbours."""

from __future__ import annotations

from collections import defaultdict

import numpy as np
import polars as pl
import pytest

from tests.engine.test_local_engine import END, KEYS, START, TINY, make_events, write
from tsdp.engine import local
from tsdp.engine.events import EventCaps, EventJob, assemble, partial_cell_sums, profile_histograms
from tsdp.mechanisms import bounds

GRIDS = {"max_per_step": bounds.PER_STEP_GRID, "max_steps": bounds.steps_grid(24)}


def profiling(caps: EventCaps) -> EventJob:
    return EventJob("user", "time", "1h", START, END, caps, "station", KEYS).profiling(GRIDS)


def histograms(df: pl.DataFrame, caps: EventCaps) -> dict:
    job = profiling(caps)
    return profile_histograms(assemble(job, [partial_cell_sums(df, job)]).diagnostics, GRIDS)


def brute_force(df: pl.DataFrame, series_per_user: int | None, max_steps: int | None) -> dict:
    """Per user, in plain Python: keep the first K series (by first event time, then key), the first I
    buckets of each, then the most events in a cell and the most buckets in a series."""
    rows = sorted(((r["user"], r["time"], r["station"], i) for i, r in enumerate(df.iter_rows(named=True))
                   if r["station"] in KEYS), key=lambda t: (t[0], t[1], t[2], t[3]))
    per_user: dict = defaultdict(list)
    for user, time, station, _ in rows:
        per_user[user].append((time, station))
    stats = {"max_per_step": [], "max_steps": []}
    for events in per_user.values():
        firsts = {}
        for time, station in events:
            firsts.setdefault(station, time)
        kept = sorted(firsts, key=lambda s: (firsts[s], s))[:series_per_user]
        cells: dict = defaultdict(int)
        buckets: dict = defaultdict(list)
        for time, station in events:
            if station in kept:
                hour = time[:13]
                if hour not in buckets[station]:
                    buckets[station].append(hour)
                if max_steps is None or buckets[station].index(hour) < max_steps:
                    cells[(station, hour)] += 1
        stats["max_per_step"].append(max(cells.values()))
        stats["max_steps"].append(max(len({h for (s, h) in cells if s == st}) for st in kept))
    return {cap: np.bincount(np.searchsorted(GRIDS[cap], stats[cap]), minlength=len(GRIDS[cap]) + 1)
            for cap in GRIDS}


@pytest.mark.parametrize("series_per_user, max_steps", [(None, None), (1, None), (2, 3)])
def test_histograms_match_a_brute_force_count(series_per_user, max_steps):
    df = make_events(1500, 40, seed=4)
    got = histograms(df, EventCaps(series_per_unit=series_per_user, max_steps=max_steps, level="user"))
    want = brute_force(df, series_per_user, max_steps)
    for cap in GRIDS:
        np.testing.assert_array_equal(got[cap], want[cap])
        assert got[cap].sum() == df.filter(pl.col("station").is_in(KEYS))["user"].n_unique()


@pytest.mark.parametrize("suffix", [".csv", ".parquet"])
def test_sharded_histograms_equal_in_memory(tmp_path, suffix):
    df = make_events()
    path = write(df, tmp_path / f"events{suffix}")
    caps = EventCaps(series_per_unit=2, level="user")
    sharded = local.aggregate_events_local(path, profiling(caps), memory_limit=TINY, work_dir=str(tmp_path))
    whole = histograms(df, caps)
    got = profile_histograms(sharded.diagnostics, GRIDS)
    for cap in GRIDS:
        np.testing.assert_array_equal(got[cap], whole[cap])
    assert sharded.table.values_matrix().sum() == 0  # a profiling job counts no cell


def test_a_neighbour_moves_one_user_in_each_histogram():
    """Adding a user with a huge contribution (every hour, 500 events in one) adds exactly one user,
    in the top bin of the per-step histogram."""
    df = make_events(1500, 40, seed=5)
    huge = pl.DataFrame({"user": ["giant"] * 523, "time": [f"2024-01-01 {h:02d}:30:00" for h in range(23)]
                         + ["2024-01-01 23:10:00"] * 500, "station": ["a"] * 523})
    before = histograms(df, EventCaps(series_per_unit=1, level="user"))
    after = histograms(pl.concat([df, huge]), EventCaps(series_per_unit=1, level="user"))
    for cap in GRIDS:
        diff = after[cap] - before[cap]
        assert diff.sum() == 1 and diff.min() == 0
    assert np.flatnonzero(after["max_per_step"] - before["max_per_step"])[0] == 9  # (256, 512]
    assert np.flatnonzero(after["max_steps"] - before["max_steps"])[0] == len(GRIDS["max_steps"]) - 1  # all 24


@pytest.mark.slow
def test_spark_histograms_equal_in_memory(tmp_path):
    """The histograms ride in the diagnostics, which every engine sums: Spark's equal the in-memory ones."""
    import os
    import shutil

    pytest.importorskip("pyspark")
    pytest.importorskip("pandas")
    if not (shutil.which("java") or os.environ.get("JAVA_HOME")):
        pytest.skip("Java (17 or newer) is not installed: the Spark engine needs it")
    from tsdp.engine.spark import aggregate_events_spark

    df = make_events(seed=9)
    path = write(df, tmp_path / "events.parquet")
    caps = EventCaps(series_per_unit=1, max_steps=6, level="user")
    got = aggregate_events_spark(path, profiling(caps), "local[2]", {"spark.sql.shuffle.partitions": "5"})
    whole = histograms(df, caps)
    for cap, counts in profile_histograms(got.diagnostics, GRIDS).items():
        np.testing.assert_array_equal(counts, whole[cap])

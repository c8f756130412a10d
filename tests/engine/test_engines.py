"""The Engine interface: every engine name the options accept has an engine, and the local one is the
in-memory/shard route (the Spark engine's equality with it is tests/engine/test_spark_engine.py's)."""

from __future__ import annotations

import polars as pl

from tsdp.engine.engines import ENGINE_CLASSES, LocalEngine, SparkEngine, engine_for
from tsdp.engine.events import EventCaps, EventJob, aggregate_events
from tsdp.engine.options import ENGINES, EngineOptions


def test_every_engine_name_has_an_engine():
    assert set(ENGINE_CLASSES) == set(ENGINES)
    for name in ENGINES:
        engine = engine_for(EngineOptions(engine=name))
        assert engine.options.engine == name
    assert isinstance(engine_for(EngineOptions()), LocalEngine)
    assert isinstance(engine_for(EngineOptions(engine="spark")), SparkEngine)
    assert LocalEngine.streams_series and not SparkEngine.streams_series


def test_local_engine_aggregates_like_memory(tmp_path):
    df = pl.DataFrame({"user": ["a", "a", "a", "b", "b"],
                       "time": ["2024-01-01 00:10", "2024-01-01 00:20", "2024-01-01 01:05", "2024-01-01 00:30",
                                "2024-01-01 02:00"]})
    path = tmp_path / "events.csv"
    df.write_csv(path)
    caps = EventCaps(max_per_step=1, max_steps=2)
    job = EventJob("user", "time", "1h", "2024-01-01 00:00", "2024-01-01 03:00", caps)
    got = engine_for(EngineOptions()).aggregate(str(path), job).table.frame
    want = aggregate_events(df, "user", "time", "1h", "2024-01-01 00:00", "2024-01-01 03:00", caps).table.frame
    assert got.equals(want)
    assert got["count"].to_list() == [2.0, 1.0, 1.0]  # user a's second event of 00:00 is capped

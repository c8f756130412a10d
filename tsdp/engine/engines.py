"""The engines that run the data-dependent work, behind one interface (:class:`Engine`).

An engine aggregates raw events into the bounded panel (:class:`tsdp.engine.events.EventJob`: the
same caps, kept rows and panel on every engine) and reduces the records of ``mean-estimate`` to runs
(:class:`tsdp.engine.records.RecordChunks`). ``local`` runs in memory or on user-hash shards within a
memory limit; ``spark`` runs the same kernels on a Spark cluster. A new engine is one class here and
one entry of :data:`ENGINE_CLASSES` (its name in :data:`tsdp.engine.options.ENGINES`).

The heavy libraries (polars, pyspark) load inside the methods: choosing an engine costs nothing.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Protocol

from tsdp.engine.options import EngineOptions

if TYPE_CHECKING:  # the engines' modules load polars; they are imported where the work runs
    from tsdp.engine.events import EventAggregation, EventJob
    from tsdp.engine.records import RecordChunks
    from tsdp.io.records import RecordSpec

Stage = Callable[[str], None] | None


class Engine(Protocol):
    """Where the data-dependent work runs."""

    options: EngineOptions
    streams_series: bool  # a long input may be released in chunks of series, read from the file in turn

    def aggregate(self, path: str, job: "EventJob", stage: Stage = None) -> "EventAggregation":
        """``job`` run on the events of ``path``."""

    def record_chunks(self, path: str, spec: "RecordSpec", stage: Stage = None
                      ) -> contextlib.AbstractContextManager["RecordChunks"]:
        """The records of ``path`` reduced to runs, as chunks of whole groups in group order (a
        context: shards live until its end)."""


class LocalEngine:
    """In memory, or user-hash shards within ``options.memory_limit`` bytes under ``options.work_dir``."""

    streams_series = True

    def __init__(self, options: EngineOptions) -> None:
        self.options = options

    def aggregate(self, path, job, stage=None):
        from tsdp.engine.local import aggregate_events_local

        return aggregate_events_local(path, job, self.options.memory_limit, self.options.work_dir, stage)

    @contextlib.contextmanager
    def record_chunks(self, path, spec, stage=None) -> Iterator:
        from tsdp.engine.records import record_chunks

        with record_chunks(path, spec, self.options.memory_limit, self.options.work_dir, stage) as chunks:
            yield chunks


class SparkEngine:
    """A Spark session on ``options.spark_master`` with the extra configuration ``options.spark_conf``."""

    streams_series = False

    def __init__(self, options: EngineOptions) -> None:
        self.options = options

    def aggregate(self, path, job, stage=None):
        from tsdp.engine.spark import aggregate_events_spark

        if stage is not None:
            stage("bounding and aggregating on Spark")
        return aggregate_events_spark(path, job, self.options.spark_master, dict(self.options.spark_conf))

    @contextlib.contextmanager
    def record_chunks(self, path, spec, stage=None) -> Iterator:
        from tsdp.engine.spark_records import spark_record_chunks

        with spark_record_chunks(path, spec, self.options.spark_master, dict(self.options.spark_conf),
                                 stage=stage) as chunks:
            yield chunks


ENGINE_CLASSES: dict[str, type] = {"local": LocalEngine, "spark": SparkEngine}


def engine_for(options: EngineOptions) -> Engine:
    """The engine ``options`` names (:class:`EngineOptions` has checked the name)."""
    return ENGINE_CLASSES[options.engine](options)

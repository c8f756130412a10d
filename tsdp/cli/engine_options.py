"""The engine options shared by the commands that aggregate raw rows (``release --layout events``
and ``mean-estimate``): the typer options and their validation before any data is read."""

from __future__ import annotations

from enum import Enum

import typer

from tsdp.engine.options import EngineOptions
from tsdp.errors import UsageError


class Engine(str, Enum):
    local = "local"
    spark = "spark"


EngineOption = typer.Option(Engine.local, "--engine", help="Where rows are bounded and aggregated: local (in memory, or user-hash shards within --memory-limit) or spark (a cluster; needs tsdp[spark]).")
MemoryLimitOption = typer.Option(None, "--memory-limit", help="--engine local: memory the aggregation may use, e.g. 2GiB; larger inputs are sharded by user [default: a quarter of the machine, at most 2GiB].")
WorkDirOption = typer.Option(None, "--work-dir", help="--engine local: directory for the temporary shards [default: the system temp directory].")
SparkMasterOption = typer.Option(None, "--spark-master", help="--engine spark: Spark master URL, e.g. spark://host:7077 [default: local[*]].")
SparkConfOption = typer.Option(None, "--spark-conf", help="--engine spark: extra Spark configuration KEY=VALUE (repeatable).")


def given_engine_flags(engine: Engine, memory_limit, work_dir, spark_master, spark_conf) -> list[str]:
    """The engine flags set on the command line (for commands or layouts that take none)."""
    return [flag for flag, value in (("--engine spark", engine is Engine.spark or None),
                                     ("--memory-limit", memory_limit), ("--work-dir", work_dir),
                                     ("--spark-master", spark_master), ("--spark-conf", spark_conf))
            if value is not None]


def engine_options(engine: Engine, memory_limit: str | None, work_dir: str | None,
                   spark_master: str | None, spark_conf: list[str] | None) -> EngineOptions:
    """Validate the engine options up front (before any data is read)."""
    if engine is not Engine.spark and (spark_master is not None or spark_conf):
        raise UsageError("--spark-master and --spark-conf apply to --engine spark")
    if engine is Engine.spark and (memory_limit is not None or work_dir is not None):
        raise UsageError("--memory-limit and --work-dir apply to --engine local; size Spark with --spark-conf")
    conf = []
    for item in spark_conf or []:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise UsageError(f"--spark-conf {item!r}: give KEY=VALUE, e.g. spark.executor.memory=4g")
        conf.append((key.strip(), value.strip()))
    from tsdp.engine.local import parse_memory

    return EngineOptions(engine.value, parse_memory(memory_limit) if memory_limit is not None else None, work_dir,
                         spark_master or "local[*]", tuple(conf))

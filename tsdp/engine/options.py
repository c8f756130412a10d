"""Where the data-dependent work runs (no heavy imports: the CLI validates these up front)."""

from __future__ import annotations

from dataclasses import dataclass

from tsdp.errors import UsageError

ENGINES = ("local", "spark")


@dataclass(frozen=True)
class EngineOptions:
    """``local`` (in memory, or user-hash shards within ``memory_limit`` bytes under ``work_dir``)
    or ``spark`` (``spark_master``, extra Spark configuration ``spark_conf``)."""

    engine: str = "local"
    memory_limit: int | None = None
    work_dir: str | None = None
    spark_master: str = "local[*]"
    spark_conf: tuple[tuple[str, str], ...] = ()

    def __post_init__(self) -> None:
        if self.engine not in ENGINES:
            raise UsageError(f"--engine must be one of {', '.join(ENGINES)}, got {self.engine!r}")

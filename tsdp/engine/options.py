"""Where the data-dependent work runs (no heavy imports: the CLI validates these up front)."""

from __future__ import annotations

import os
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
        # checked even when the input fits in memory: a cron job must not learn of a typo only on
        # the day its input grows past --memory-limit
        if self.work_dir is not None and not os.path.isdir(self.work_dir):
            raise UsageError(f"--work-dir {self.work_dir!r}: not an existing directory; create it or give another")
        if self.work_dir is not None and not os.access(self.work_dir, os.W_OK | os.X_OK):  # root passes this
            raise UsageError(f"--work-dir {self.work_dir!r}: not writable; choose a directory you can write to")

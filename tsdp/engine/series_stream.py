"""Long panels larger than memory, released in streamed chunks of series (``--engine local``).

A cellwise mechanism (Gaussian, Laplace) adds to every cell noise whose scale depends only on
public parameters: the declared bounds, the number of series and the grid. So once those are
known the panel can be released a chunk of series at a time, and written chunk by chunk as
Parquet row groups (or CSV blocks), in bounded memory:

1. **plan** (polars, streaming): the distinct series ids and the distinct times of the input,
   from which the grid of the whole input is built exactly as in memory
   (:func:`tsdp.io.timegrid.build_grid`); series are cut into chunks of consecutive ids (in the
   sorted order the in-memory table uses) sized to the memory limit;
2. **partition** (polars, streaming): every row goes to its chunk's Parquet partition, with the
   input's row number (:data:`tsdp.engine.kernel.ORDER`);
3. **release** (one chunk at a time): the chunk is checked and completed by the same
   :func:`tsdp.io.layouts.load_long` against the global grid, its rows put back in input order,
   and the mechanism draws the chunk's noise from a :class:`tsdp.mechanisms.noise.NoiseStream`:
   the same numbers, cell for cell, as the in-memory release of an input sorted by series.

Errors name the input's row. Polars does the streaming and the partitioned write.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import polars as pl

from tsdp.engine.kernel import ORDER
from tsdp.engine.local import (HEADROOM, default_memory_limit, estimated_rows, scratch_dir, shard_count,
                               write_partitions)
from tsdp.errors import DataError
from tsdp.io.events import input_rows
from tsdp.io.files import table_format, text_separator
from tsdp.io.layouts import SeriesTable, load_long, require_columns
from tsdp.io.load import InputSpec
from tsdp.io.timegrid import TimeGrid, build_grid
from tsdp.io.timeparse import parse_time_column

CHUNK = "__chunk"
MAX_PARTITIONS = 16
# Peak memory of the in-memory long release per input row (read frame, checked table, values,
# noise, output frame): 55 bytes measured on 10^7 rows (553 MB), rounded up. Beyond the limit the
# input is released in chunks, whose route holds more per row (the input row number, the chunk as
# read and as checked): 143 bytes measured on chunks of 2 x 10^7 rows, with a margin for the
# allocator keeping what the planning queries used.
BYTES_PER_ROW = 64
CHUNK_BYTES_PER_ROW = 200


@dataclass
class SeriesChunks:
    """The plan of a streamed long release: the whole input's series count and grid, and the
    partitions holding consecutive series, in series order."""

    n_series: int
    grid: TimeGrid
    parts: list[tuple[Path, int]]  # (partition directory, chunk number) of every chunk, in series order
    spec: InputSpec

    @property
    def n_chunks(self) -> int:
        return len(self.parts)

    layout = "long"

    @property
    def n_steps(self) -> int:
        return self.grid.n_steps

    @property
    def n_cells(self) -> int:
        return self.n_series * self.grid.n_steps

    def tables(self) -> Iterator[SeriesTable]:
        """Each chunk checked and completed against the global grid, rows in input order."""
        for directory, chunk in self.parts:
            yield load_chunk(directory, chunk, self.spec, self.grid)


def streamable(path: str, spec: InputSpec, memory_limit: int | None) -> bool:
    """Whether ``path`` is a long-layout file too large to release in memory."""
    return (spec.resolved_layout == "long" and spec.series_col is not None
            and shard_count(path, memory_limit or default_memory_limit(), BYTES_PER_ROW) > 1)


@contextmanager
def series_chunks(path: str, spec: InputSpec, memory_limit: int | None = None, work_dir: str | None = None,
                  stage: Callable[[str], None] | None = None) -> Iterator[SeriesChunks]:
    """Plan and partition ``path`` (see the module docstring); the partitions live until the end."""
    note = stage or (lambda name: None)
    limit = memory_limit or default_memory_limit()
    with scratch_dir(work_dir, "series") as tmp:
        note("planning: series ids and time grid")
        scan = _scan(path, spec)
        keys, grid = _plan(scan, spec, path)
        rows = estimated_rows(path)
        n_chunks = max(1, math.ceil(rows * CHUNK_BYTES_PER_ROW * HEADROOM / limit))
        per_chunk = max(1, math.ceil(keys.len() / n_chunks))
        chunk_of = pl.int_range(keys.len(), eager=True, dtype=pl.Int64) // per_chunk
        n_chunks = int(chunk_of[-1]) + 1 if keys.len() else 0
        # Consecutive chunks share a partition: polars holds about 4 MB per open partition while
        # it writes, so their number is capped; a chunk is read back by its chunk number, which
        # row-group statistics make cheap when the input is sorted by series.
        per_partition = max(1, math.ceil(n_chunks / MAX_PARTITIONS))
        note(f"partitioning {keys.len()} series into {n_chunks} chunks")
        # a join with the small key table streams (replace_strict with many keys held 7 GB at 10^8 rows)
        chunks = pl.DataFrame({spec.series_col: keys, CHUNK: chunk_of}).lazy()
        directories = write_partitions(scan.join(chunks, on=spec.series_col, how="left", maintain_order="left"),
                                       pl.col(CHUNK) // per_partition, tmp, path)
        by_key = {int(d.name.rpartition("=")[2]): d for d in directories}
        parts = [(by_key[c // per_partition], c) for c in range(n_chunks)]
        yield SeriesChunks(keys.len(), grid, parts, spec)


def _scan(path: str, spec: InputSpec) -> pl.LazyFrame:
    if table_format(path) == "parquet":
        scan = pl.scan_parquet(path)
    else:
        scan = pl.scan_csv(path, schema_overrides={spec.value_col: pl.String}, infer_schema_length=10_000,
                           separator=text_separator(table_format(path)))
    names = scan.collect_schema().names()
    require_columns(pl.DataFrame({c: [] for c in names}),
                    {"--time-col": spec.time_col, "--value-col": spec.value_col, "--series-col": spec.series_col})
    return scan.select(spec.series_col, spec.time_col, spec.value_col).with_row_index(ORDER)


def _plan(scan: pl.LazyFrame, spec: InputSpec, path: str) -> tuple[pl.Series, TimeGrid]:
    """(the sorted distinct series ids, the grid of every time in the input)."""
    series, time = spec.series_col, spec.time_col
    try:  # two queries: collect_all of both held the whole input (2.4 GB at 10^8 rows)
        ids = scan.select(pl.col(series).unique()).collect(engine="streaming")
        times = scan.select(pl.col(time).unique()).collect(engine="streaming")
    except (pl.exceptions.PolarsError, OSError) as exc:
        raise DataError(f"INPUT: cannot parse {path!r}: {str(exc).strip().splitlines()[0]}") from None
    ids = ids.to_series()
    if ids.null_count():
        row = scan.filter(pl.col(series).is_null()).select(pl.col(ORDER).min()).collect(engine="streaming").item()
        raise DataError(f"column {series!r}: missing series id at row {row + 1}")
    parsed = parse_time_column(times, time, spec.timezone)[time]
    if parsed.null_count():
        raise DataError(f"column {time!r}: missing timestamp; every row needs a time")
    return ids.sort(), build_grid(parsed, time, spec.freq, spec.fill_missing)


def load_chunk(directory: Path, chunk: int, spec: InputSpec, grid: TimeGrid) -> SeriesTable:
    """One chunk of series, checked and completed against the whole input's grid."""
    # streaming: the partition is decoded row group by row group and filtered, never held whole
    df = (pl.scan_parquet(directory / "*.parquet").filter(pl.col(CHUNK) == chunk).drop(CHUNK)
          .collect(engine="streaming"))
    if not df[ORDER].is_sorted():
        df = df.sort(ORDER)
    try:
        return load_long(df, spec.time_col, spec.value_col, spec.series_col, spec.freq, spec.fill_missing,
                         spec.allow_negative, timezone=spec.timezone, grid=grid)
    except DataError as exc:
        raise DataError(input_rows(str(exc), df[ORDER])) from None

"""``mean-estimate --engine spark``: the records reduced to runs on a Spark cluster (or
``local[*]``), DataFrame API only, delivered to the driver as chunks of whole groups in the
canonical group order (:class:`tsdp.engine.records.RecordChunks`), like the local engine's group
ranges: the driver never holds more than one chunk, so the input's size is bounded by the cluster,
not by the driver (Spark's ``spark.driver.maxResultSize`` applies to one chunk).

Which stage runs where:

1. **read** (executors), as in :mod:`tsdp.engine.spark`: CSV with every column as text, Parquet
   with its types; every row gets its row number in the input (:data:`tsdp.engine.kernel.ORDER`),
   the local engine's tie-break key. For CSV one first pass decides, over the whole file, the
   type polars gives the time and key columns (:class:`tsdp.engine.spark.TimeHint`); Parquet
   columns get the file's own polars types. Every partition applies these, so it parses and
   groups as the local engine does on the whole file.
2. **check and sort** (executors): ``repartition`` by the user column (every record of a user in
   one partition); ``mapInArrow`` runs :func:`tsdp.io.records.load_records` on each partition
   (ties broken by the input row) and emits its runs as Arrow IPC blobs (group keys as
   order-preserving physical values: integers for dates and times, text for categories; the user
   id as text; the record count; the values in time order), one small row per group with its
   records, and the partition's statistics (max groups per user, records outside the declared
   groups) or its data error naming the input row. Values outside the public bounds are counted
   over all partitions and the earliest input row is named, as in memory. The result is persisted
   on disk; the statistics and errors come to the driver first, so errors surface before anything
   is estimated.
3. **chunks of groups** (Spark, the driver, then executors): Spark sums each group's records; the
   driver (one row per group) puts the groups in the canonical order and cuts them into chunks by
   where each group starts (every ``chunk_records`` records, a constant: the chunks depend on the
   records alone, not on the cluster). A second ``mapInArrow`` re-cuts every blob by chunk with the
   driver's group table (broadcast as IPC; persisted), and the driver fetches one chunk's blobs at
   a time (one action each, so ``spark.driver.maxResultSize`` bounds a chunk, not the input), puts
   them in the canonical order with the local engine's :func:`tsdp.engine.records.merge_runs`,
   checks it holds the groups it cut, and sums the plan's pieces from the chunk's values with
   :func:`run_piece_sums`, the in-memory route's function (so the sums are bit for bit the local
   engine's).

Nothing random happens here: the estimators add their noise on the driver.
"""

from __future__ import annotations

import io
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from functools import partial

import numpy as np
import polars as pl

from tsdp.engine.kernel import ORDER
from tsdp.engine.records import COUNT, USER, RecordChunks, merge_runs, record_columns, run_table
from tsdp.engine.runs import RecordRuns, concat_runs
from tsdp.engine.spark import (SparkJobError, TimeHint, _align_time, _col, _frame, _parquet_time_type, _quiet,
                               _spark_errors, check_input, failure, raise_failure, ordered_rows, read_input,
                               spark_session, text_hint)
from tsdp.errors import TsdpError
from tsdp.io.layouts import require_columns
from tsdp.io.records import OutOfBounds, Records, RecordSpec, load_records
from tsdp.mean.algorithms import run_piece_sums

# What a partition of stage 2 emits: its statistics, out-of-bounds count or data error (the first
# six fields), the records of each of its groups (its keys, records in ``count``), and its runs as
# Arrow IPC blobs (``data``: keys, user, count, values).
META_FIELDS = (("kind", "string"), ("name", "string"), ("row", "long"), ("count", "long"), ("value", "double"),
               ("text", "string"))
RUNS, GROUP, STATS, OUT_OF_BOUNDS, ERROR = "runs", "group", "stats", "out_of_bounds", "error"
RUN_USER, RUN_COUNT, RUN_VALUES = "__user", "__n", "__values"
PACKED_SCHEMA = "__range long, data binary"
# Records per chunk on the driver: a constant, not the driver's memory, so that the chunks (and so a
# seeded run's noise, drawn chunk by chunk) are the same on every cluster. About BYTES_PER_ROW of
# tsdp.engine.records each while a chunk is planned: some 0.7 GiB, plus the largest group.
CHUNK_RECORDS = 1 << 22
RANGE = "__range"
# Records per IPC blob (2 MiB of values: small next to an executor's heap).
BLOB_RECORDS = 1 << 18
SPARK_TYPES = {pl.Int64: "long", pl.Float64: "double", pl.Boolean: "boolean", pl.String: "string"}


@dataclass(frozen=True)
class KeyCodec:
    """The group keys as Spark carries them: every key column renamed ``__k<i>`` (any name is
    safe) and shipped as an order-preserving physical type (integers as Int64, dates and times as
    their integer count, floats as Float64, anything else as text: polars sorts categories by
    their text), and restored to the input's polars type on the driver."""

    names: tuple[str, ...]
    types: tuple  # the polars types of the keys (as load_records gives them)

    @classmethod
    def of(cls, runs: pl.DataFrame, keys: list[str]) -> "KeyCodec":
        return cls(tuple(keys), tuple(runs.schema[k] for k in keys))

    @property
    def shipped(self) -> list[str]:
        return [f"__k{i}" for i in range(len(self.names))]

    def ship_type(self, dtype) -> pl.DataType:
        if dtype.is_integer() or dtype.is_temporal():
            return pl.Int64
        if dtype.is_float():
            return pl.Float64
        return pl.Boolean if dtype == pl.Boolean else pl.String

    def ship(self) -> list[pl.Expr]:
        return [(pl.col(k).to_physical() if t.is_temporal() else pl.col(k)).cast(self.ship_type(t)).alias(name)
                for k, t, name in zip(self.names, self.types, self.shipped)]

    def restore(self, df: pl.DataFrame) -> pl.DataFrame:
        return df.with_columns(pl.col(name).cast(t).alias(k)
                               for k, t, name in zip(self.names, self.types, self.shipped)).drop(self.shipped)

    def fields(self) -> list[tuple[str, str]]:
        """Stage 2's columns: META_FIELDS, the shipped keys (of a group's row) and a blob of runs."""
        return [*META_FIELDS, *((n, SPARK_TYPES[self.ship_type(t)]) for n, t in zip(self.shipped, self.types)),
                ("data", "binary")]

    def spark_schema(self) -> str:
        return ", ".join(f"{name} {kind}" for name, kind in self.fields())


@contextmanager
def spark_record_chunks(path: str, spec: RecordSpec, master: str = "local[*]", conf: dict | None = None,
                        spark=None, stage: Callable[[str], None] | None = None,
                        chunk_records: int | None = None) -> Iterator[RecordChunks]:
    """The runs of ``path`` (CSV or Parquet) reduced on Spark, as chunks of whole groups in the
    canonical group order (the groups starting within each ``chunk_records`` records, by default
    CHUNK_RECORDS; see :func:`_cut`); usable until the block ends.
    ``spark``: a running SparkSession to use (left running); otherwise one is started for
    ``master`` with ``conf`` and stopped at the end."""
    note = stage or (lambda name: None)
    fmt = check_input(path)
    session = spark if spark is not None else spark_session(master, conf)
    try:
        from pyspark import StorageLevel
        from pyspark.sql import functions as F

        note("reading input on Spark")
        with _spark_errors(path, fmt):
            rows, hints, empty = _record_rows(session, path, fmt, spec)
        # Columns and options checked on the driver, against all the input's columns (as in memory).
        shape = load_records(empty, spec, shard=True)
        keys = list(shape.key_columns)
        codec = KeyCodec.of(run_table(shape), keys)
        note("checking and sorting records on Spark")
        task = partial(_partition_runs, spec, hints, codec)
        out = _quiet(lambda: rows.mapInArrow(task, codec.spark_schema())).persist(StorageLevel.DISK_ONLY)
        try:
            with _spark_errors(path, fmt):
                meta = pl.from_arrow(out.filter(F.col("kind").isin(STATS, ERROR, OUT_OF_BOUNDS))
                                     .select(*(n for n, _ in META_FIELDS))
                                     .toArrow())
            totals = _statistics(meta, spec)
            with _spark_errors(path, fmt):
                ranges, table = _cut(out, codec, chunk_records or CHUNK_RECORDS)
            shared = session.sparkContext.broadcast(_ipc(table))
            packed = None
            try:
                with _spark_errors(path, fmt):
                    task = partial(_reslice, shared, codec.shipped)
                    packed = _quiet(lambda: out.filter(F.col("kind") == RUNS).select("data")
                                    .mapInArrow(task, PACKED_SCHEMA)).persist(StorageLevel.DISK_ONLY)
                    packed.count()  # the blobs cut by chunk once; the partitions' blobs are no longer needed
                out.unpersist()
                chunks = _driver_chunks(packed, ranges, codec, spec, shape, totals, (path, fmt), note)
                yield RecordChunks(chunks, single=False, max_groups=lambda: totals["max_groups"],
                                   dropped=lambda: totals["dropped"])
            finally:
                if packed is not None:
                    packed.unpersist()
                shared.destroy()
        finally:
            out.unpersist()
    finally:
        if spark is None:
            session.stop()


@contextmanager
def spark_record_runs(path: str, spec: RecordSpec, master: str = "local[*]", conf: dict | None = None,
                      spark=None, stage: Callable[[str], None] | None = None,
                      chunk_records: int | None = None) -> Iterator[RecordRuns]:
    """:func:`spark_record_chunks` as one :class:`RecordRuns` (all chunks on the driver at once:
    for inputs whose runs fit in the driver's memory)."""
    with spark_record_chunks(path, spec, master, conf, spark, stage, chunk_records) as chunks:
        yield concat_runs(list(chunks), chunks.max_groups_per_user, chunks.dropped)


def _statistics(meta: pl.DataFrame, spec: RecordSpec) -> dict:
    """The partitions' statistics summed, or the error the input has: a data error (the one at the
    earliest input row), else the out-of-bounds values of all partitions (counted, the earliest named)."""
    failures = meta.filter(pl.col("kind") == ERROR).sort(["row", "text"], nulls_last=False)
    if failures.height:
        raise_failure(failures["name"][0], failures["text"][0])
    out = meta.filter(pl.col("kind") == OUT_OF_BOUNDS)
    if out.height:
        raise OutOfBounds.combined([OutOfBounds(spec, int(c), int(r), float(v), t or "")
                                    for c, r, v, t in out.select("count", "row", "value", "text").iter_rows()])
    stats = meta.filter(pl.col("kind") == STATS)
    return {"max_groups": int(stats["count"].max() or 0), "dropped": int(stats["row"].sum())}


def _cut(out, codec: KeyCodec, chunk_records: int) -> tuple[np.ndarray, pl.DataFrame]:
    """(the number of groups of every chunk, each group's shipped keys with its chunk number RANGE).
    The groups' records are summed over the partitions on Spark; on the driver (one row per group)
    the groups are put in the canonical order (polars' sort of the keys) and cut by where each
    starts, ``start // chunk_records`` with ``start`` the records of the groups before it: a chunk
    holds whole groups, fewer than ``chunk_records`` records plus its last group, and depends on
    the records alone, never on how Spark partitions them."""
    from pyspark.sql import functions as F

    rows = out.filter(F.col("kind") == GROUP).groupBy(*codec.shipped).agg(F.sum("count").alias("__rows"))
    groups = pl.from_arrow(rows.toArrow())
    if not codec.names:  # one group, if there are records
        return np.array([int(bool(groups["__rows"][0]))]), pl.DataFrame({RANGE: [0]})
    if groups.height == 0:
        return np.zeros(0, dtype=np.int64), groups.select(codec.shipped).with_columns(pl.lit(0).alias(RANGE))
    order = codec.restore(groups).with_row_index("__at").sort(list(codec.names))["__at"].to_numpy()
    records = groups["__rows"].to_numpy().astype(np.int64)[order]
    chunk = np.empty(order.size, dtype=np.int64)
    chunk[order] = (np.cumsum(records) - records) // max(1, int(chunk_records))
    return np.bincount(chunk), groups.select(codec.shipped).with_columns(pl.Series(RANGE, chunk, dtype=pl.Int64))


def _driver_chunks(packed, ranges: np.ndarray, codec: KeyCodec, spec: RecordSpec, shape: Records, totals: dict,
                   source, note) -> Iterator[RecordRuns]:
    """Every chunk of ``packed`` in turn (one action each, bringing only its blobs to the driver),
    in the canonical order; SparkJobError if a chunk does not hold the groups the driver cut. No
    runs at all: the declared groups as one chunk without runs (DataError when nothing is declared)."""
    from pyspark.sql import functions as F

    keys = list(codec.names)
    for k, n_groups in enumerate(ranges.tolist()):
        if n_groups == 0:
            continue
        with _spark_errors(*source):
            blobs = _quiet(lambda: packed.filter(F.col(RANGE) == k).select("data").toArrow()).column("data")
        df = pl.concat([pl.read_ipc_stream(io.BytesIO(b.as_py())) for b in blobs], how="vertical")
        df = codec.restore(df).rename({RUN_USER: USER, RUN_COUNT: COUNT})
        runs, group_starts, groups = merge_runs([df], keys, spec, shape.declared)
        if group_starts.size - 1 != n_groups:
            raise SparkJobError(f"Spark returned {group_starts.size - 1:,} groups for a chunk of {n_groups:,}; "
                                "nothing was estimated")
        note(f"estimating {n_groups:,} groups from Spark ({k + 1} of {ranges.size} chunks)")
        values = runs[RUN_VALUES].list.explode().to_numpy().astype(np.float64, copy=False)
        yield _runs(runs.drop(RUN_VALUES), group_starts, groups, values, shape, totals)
    if ranges.sum() == 0:
        runs, group_starts, groups = merge_runs([], keys, spec, shape.declared)
        yield _runs(runs, group_starts, groups, np.zeros(0), shape, totals)


def _runs(runs: pl.DataFrame, group_starts: np.ndarray, groups: pl.DataFrame, values: np.ndarray, shape: Records,
          totals: dict) -> RecordRuns:
    counts = runs[COUNT].to_numpy().astype(np.int64)
    user_starts = np.concatenate(([0], np.cumsum(counts))).astype(np.int64)

    def piece_sums(cut1, cut2):
        return run_piece_sums(values, user_starts, cut1, cut2)

    return RecordRuns(counts, group_starts, groups, list(shape.key_columns), totals["max_groups"], piece_sums,
                      shape.clipped, list(shape.notes), runs[USER], shape.declared, None)


def _record_rows(spark, path: str, fmt: str, spec: RecordSpec):
    """(the record columns with ORDER, repartitioned by user; the hints every
    partition applies; the input's columns with no rows, as a partition would see them)."""
    frame = read_input(spark, path, fmt)
    present = list(dict.fromkeys(frame.columns))
    columns = {"--user-col": spec.user_col, "--value-col": spec.value_col, "--time-col": spec.time_col}
    if spec.cell_col is not None:
        columns["--cell-col"] = spec.cell_col
    require_columns(pl.DataFrame({c: [] for c in present}), columns)
    wanted = record_columns(spec, present)
    typed = [c for c in wanted if c not in (spec.user_col, spec.value_col)]
    if fmt == "csv":
        texts = typed  # polars infers their types from the whole file
    else:
        texts = [c for c in typed if c == spec.time_col and frame.schema[c].dataType.typeName() == "string"]
    rows, splits = ordered_rows(spark, frame, fmt, wanted, texts)
    hints = {}
    for index, name in enumerate(texts):
        hint = text_hint(splits, index, csv=fmt == "csv")
        hints[name] = hint if name == spec.time_col else replace(hint, as_datetime=False)
    if fmt == "parquet":
        for name in wanted:
            target = None if name in hints else _parquet_time_type(path, name)
            if target is not None:
                hints[name] = TimeHint(target=target)
    empty = _aligned(pl.from_arrow(frame.limit(0).toArrow()), hints)
    return rows.repartition(_col(spec.user_col)), hints, empty


# ------------------------------------------------------------------------------------------
# what runs in the Python workers
# ------------------------------------------------------------------------------------------


def _aligned(df: pl.DataFrame, hints: dict) -> pl.DataFrame:
    for name, hint in hints.items():
        df = _align_time(df, name, hint)
    return df


def _records(df: pl.DataFrame, spec: RecordSpec, hints: dict) -> Records:
    """load_records on one partition, its rows in input order (so an error names its earliest)."""
    return load_records(_aligned(df.sort(ORDER), hints), spec, order_col=ORDER, shard=True)


def _partition_runs(spec: RecordSpec, hints: dict, codec: KeyCodec, batches):
    """Stage 2 on one partition: its statistics, the records of each of its groups and its runs
    (keys, user, count, values in time order) as IPC blobs of at most BLOB_RECORDS records; or its
    error."""
    import pyarrow as pa

    df = _frame(batches)
    if df is None:
        return
    schema = _arrow_schema(codec)
    meta = dict.fromkeys(schema.names)
    try:
        records = _records(df, spec, hints)
    except OutOfBounds as exc:
        meta.update(kind=OUT_OF_BOUNDS, row=exc.row, count=exc.count, value=exc.value, text=exc.group)
    except TsdpError as exc:
        name, row, message = failure(exc)
        meta.update(kind=ERROR, name=name, row=row, text=message)
    else:
        meta.update(kind=STATS, count=records.max_groups_per_user, row=records.dropped)
    yield pa.RecordBatch.from_pylist([meta], schema=schema)
    if meta["kind"] != STATS or records.counts.size == 0:
        return
    per_group = np.add.reduceat(records.counts, records.group_starts[:-1])
    keys = run_table(records).select(*codec.ship())[records.group_starts[:-1]] if codec.names else pl.DataFrame()
    n = per_group.size
    columns = {"kind": pa.array([GROUP] * n, pa.string()), "count": pa.array(per_group, pa.int64()),
               **{name: keys[name].to_arrow() for name in codec.shipped}}
    yield pa.RecordBatch.from_arrays([columns[f.name].cast(f.type) if f.name in columns else pa.nulls(n, f.type)
                                      for f in schema], schema=schema)
    runs = run_table(records).select(*codec.ship(), pl.col(USER).alias(RUN_USER), pl.col(COUNT).alias(RUN_COUNT))
    starts = records.user_starts
    blobs = []
    for lo, hi in _slices(starts, BLOB_RECORDS):
        offsets = pa.array(starts[lo:hi + 1] - starts[lo], pa.int32())
        values = pa.ListArray.from_arrays(offsets, pa.array(records.values[starts[lo]:starts[hi]], pa.float64()))
        blobs.append(_ipc(runs.slice(lo, hi - lo).with_columns(pl.from_arrow(values).alias(RUN_VALUES))))
    n = len(blobs)
    columns = {"kind": pa.array([RUNS] * n, pa.string()), "data": pa.array(blobs, pa.binary())}
    yield pa.RecordBatch.from_arrays([columns[f.name] if f.name in columns else pa.nulls(n, f.type) for f in schema],
                                     schema=schema)


def _slices(starts: np.ndarray, most: int) -> Iterator[tuple[int, int]]:
    """Consecutive run ranges [lo, hi) of at most ``most`` records each (a longer run alone)."""
    n = starts.size - 1
    lo = 0
    while lo < n:
        hi = int(np.searchsorted(starts, starts[lo] + most, side="right")) - 1
        hi = min(n, max(hi, lo + 1))
        yield lo, hi
        lo = hi


def _arrow_schema(codec: KeyCodec):
    import pyarrow as pa

    arrow = {"string": pa.string(), "long": pa.int64(), "double": pa.float64(), "boolean": pa.bool_(),
             "binary": pa.binary()}
    return pa.schema([(name, arrow[kind]) for name, kind in codec.fields()])


def _reslice(shared, shipped: tuple[str, ...], batches):
    """Stage 3 on one partition: its blobs of runs cut by chunk (RANGE, from the driver's table of
    groups), re-packed as blobs tagged with their chunk."""
    import pyarrow as pa

    table = pl.read_ipc_stream(io.BytesIO(shared.value))
    chunk, blobs = [], []
    for batch in batches:
        for blob in batch.column(0).to_pylist():
            runs = pl.read_ipc_stream(io.BytesIO(blob))
            runs = runs.join(table, on=list(shipped), how="left") if shipped else runs.with_columns(
                pl.lit(0, dtype=pl.Int64).alias(RANGE))
            for (k,), part in runs.partition_by(RANGE, as_dict=True).items():
                chunk.append(k)
                blobs.append(_ipc(part.drop(RANGE)))
    if blobs:
        yield pa.RecordBatch.from_arrays([pa.array(chunk, pa.int64()), pa.array(blobs, pa.binary())],
                                         names=[RANGE, "data"])


def _ipc(df: pl.DataFrame) -> bytes:
    buffer = io.BytesIO()
    df.write_ipc_stream(buffer)
    return buffer.getvalue()

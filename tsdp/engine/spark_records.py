"""``mean-estimate --engine spark``: the records reduced to runs on a Spark cluster (or
``local[*]``), DataFrame API only. The result is the :class:`tsdp.engine.runs.RecordRuns` of
the local engine: the same counts, groups and piece sums.

Which stage runs where:

1. **read** (executors), as in :mod:`tsdp.engine.spark`: CSV with every column as text, Parquet
   with its types; every row gets its row number in the input (:data:`tsdp.engine.kernel.ORDER`),
   the local engine's tie-break key. For CSV one first pass decides, over the whole file, the
   type polars gives the time and key columns (:class:`tsdp.engine.spark.TimeHint`); Parquet
   columns get the file's own polars types. Every partition applies these, so it parses and
   groups as the local engine does on the whole file.
2. **check and sort** (executors): ``repartition`` by the user column (every record of a user in
   one partition), persisted for the two passes. ``mapInArrow`` runs
   :func:`tsdp.io.records.load_records` on each partition (ties broken by the input row) and emits
   its runs (group keys, user id as text, record count) as Arrow IPC, or its data error naming
   the input row. Values outside the public bounds are counted over all partitions and the
   earliest input row is named, as in memory.
3. **merge** (driver): the runs come with ``toArrow()`` and are put in the canonical order by
   :func:`tsdp.engine.records.merge_runs`, the local engine's merge.
4. **piece sums** (executors): the plan's two cuts per run are public (they come from the
   counts); they are broadcast as Arrow IPC (split by a hash bucket of the user, so a partition
   reads only its users' part), each partition runs ``load_records`` again and returns the two
   piece sums of its runs by their canonical index.

Nothing random happens here: the estimators add their noise on the driver.
"""

from __future__ import annotations

import io
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from functools import partial

import numpy as np
import polars as pl

from tsdp.engine.kernel import ORDER
from tsdp.engine.records import COUNT, USER, merge_runs, record_columns, run_table
from tsdp.engine.runs import RecordRuns
from tsdp.engine.spark import (SparkJobError, TimeHint, _align_time, _col, _frame, _parquet_time_type, _quiet,
                               _spark_errors, check_input, failure, ordered_rows, raise_failure, read_input,
                               spark_session, text_hint)
from tsdp.errors import TsdpError
from tsdp.io.layouts import require_columns
from tsdp.io.records import OutOfBounds, Records, RecordSpec, load_records
from tsdp.mean.algorithms import run_piece_sums

BUCKET, RUN, CUT1, CUT2 = "__bucket", "__run", "__cut1", "__cut2"
# What a partition returns in the first pass: chunks of its runs (Arrow IPC in ``data``), its
# out-of-bounds count with the earliest row, or its data error.
RUNS_SCHEMA = "kind string, name string, row long, count long, value double, text string, data binary"
RUNS, OUT_OF_BOUNDS, ERROR = "runs", "out_of_bounds", "error"
PIECES_SCHEMA = "run long, first double, second double"
CHUNK_ROWS = 1 << 18  # runs per IPC chunk (keeps every binary value far below Spark's row limits)


@contextmanager
def spark_record_runs(path: str, spec: RecordSpec, master: str = "local[*]", conf: dict | None = None,
                      spark=None, stage: Callable[[str], None] | None = None) -> Iterator[RecordRuns]:
    """The runs of ``path`` (CSV or Parquet) reduced on Spark; usable until the block ends (the
    piece sums run on the persisted partitions). ``spark``: a running SparkSession to use (left
    running); otherwise one is started for ``master`` with ``conf`` and stopped at the end."""
    note = stage or (lambda name: None)
    fmt = check_input(path)
    session = spark if spark is not None else spark_session(master, conf)
    try:
        from pyspark import StorageLevel

        note("reading input on Spark")
        with _spark_errors(path, fmt):
            rows, hints, empty = _record_rows(session, path, fmt, spec)
        # Columns and options checked on the driver, against all the input's columns (as in memory).
        shape = load_records(empty, spec, shard=True)
        data = rows.persist(StorageLevel.MEMORY_AND_DISK)
        try:
            note("checking and sorting records on Spark")
            task = partial(_partition_runs, spec, hints)
            with _spark_errors(path, fmt):
                result = pl.from_arrow(_quiet(lambda: data.mapInArrow(task, RUNS_SCHEMA)).toArrow())
            runs, group_starts, groups = merge_runs(_run_tables(result, spec), shape.key_columns, spec,
                                                    shape.declared)
            pieces = partial(_piece_sums, session, data, spec, hints, runs, shape.key_columns, (path, fmt))
            yield RecordRuns(runs[COUNT].to_numpy().astype(np.int64), group_starts, groups, shape.key_columns,
                             int(runs[USER].value_counts()["count"].max()) if runs.height else 0, pieces,
                             shape.clipped, list(shape.notes), runs[USER], shape.declared, None)
        finally:
            data.unpersist()
    finally:
        if spark is None:
            session.stop()


def _record_rows(spark, path: str, fmt: str, spec: RecordSpec):
    """(the record columns with ORDER and BUCKET, repartitioned by user; the hints every
    partition applies; the input's columns with no rows, as a partition would see them)."""
    from pyspark.sql import functions as F

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
    buckets = _buckets(spark)
    rows = rows.withColumn(BUCKET, F.pmod(F.hash(_col(spec.user_col)), F.lit(buckets)))
    empty = _aligned(pl.from_arrow(frame.limit(0).toArrow()), hints)
    return rows.repartition(_col(spec.user_col)), hints, empty


def _buckets(spark) -> int:
    """Hash buckets of the users: the shuffle partitions, so a bucket is (a part of) a partition."""
    try:
        return max(1, int(spark.conf.get("spark.sql.shuffle.partitions")))
    except (TypeError, ValueError):
        return 200


def _run_tables(result: pl.DataFrame, spec: RecordSpec) -> list[pl.DataFrame]:
    """The partitions' runs, or the error the input has: a data error (the one at the earliest
    input row), else the out-of-bounds values of all partitions (counted, the earliest named)."""
    failures = result.filter(pl.col("kind") == ERROR).sort(["row", "text"], nulls_last=False)
    if failures.height:
        raise_failure(failures["name"][0], failures["text"][0])
    out = result.filter(pl.col("kind") == OUT_OF_BOUNDS)
    if out.height:
        raise OutOfBounds.combined([OutOfBounds(spec, int(c), int(r), float(v), t or "")
                                    for c, r, v, t in out.select("count", "row", "value", "text").iter_rows()])
    tables = [pl.read_ipc_stream(io.BytesIO(blob)) for blob in result.filter(pl.col("kind") == RUNS)["data"]]
    schemas = {tuple(t.schema.items()) for t in tables}
    if len(schemas) > 1:
        raise SparkJobError("the partitions' group keys were read as different types: "
                            + "; ".join(", ".join(f"{k} {v}" for k, v in s) for s in sorted(schemas, key=str)))
    return tables


def _piece_sums(spark, data, spec: RecordSpec, hints: dict, runs: pl.DataFrame, keys: list[str], source,
                cut1: np.ndarray, cut2: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The two piece sums of every run (canonical order), summed on the partitions holding them."""
    cut1 = np.asarray(cut1, dtype=np.int64)
    cut2 = np.asarray(cut2, dtype=np.int64)
    first, second = np.zeros(runs.height), np.zeros(runs.height)
    needed = np.flatnonzero((cut1 > 0) | (cut2 > 0))
    if needed.size == 0:
        return first, second
    cuts = runs[needed].select(*keys, USER, BUCKET).with_columns(
        pl.Series(RUN, needed, dtype=pl.Int64), pl.Series(CUT1, cut1[needed]), pl.Series(CUT2, cut2[needed]))
    shared = spark.sparkContext.broadcast(
        {int(bucket): _ipc(part.drop(BUCKET)) for (bucket,), part in cuts.partition_by(BUCKET, as_dict=True).items()})
    try:
        task = partial(_partition_pieces, spec, hints, shared)
        with _spark_errors(*source):
            out = pl.from_arrow(_quiet(lambda: data.mapInArrow(task, PIECES_SCHEMA)).toArrow())
    finally:
        shared.destroy()
    index = out["run"].to_numpy()
    if index.size != needed.size or not np.array_equal(np.sort(index), needed):
        raise SparkJobError(f"the Spark job summed {index.size} pieces of runs for the {needed.size} runs "
                            "planned; nothing was estimated")
    first[index] = out["first"].to_numpy()
    second[index] = out["second"].to_numpy()
    return first, second


def _ipc(df: pl.DataFrame) -> bytes:
    buffer = io.BytesIO()
    df.write_ipc_stream(buffer)
    return buffer.getvalue()


# ------------------------------------------------------------------------------------------
# what runs in the Python workers
# ------------------------------------------------------------------------------------------


def _aligned(df: pl.DataFrame, hints: dict) -> pl.DataFrame:
    for name, hint in hints.items():
        df = _align_time(df, name, hint)
    return df


def _records(df: pl.DataFrame, spec: RecordSpec, hints: dict) -> Records:
    """load_records on one partition, its rows in input order (so an error names its earliest)."""
    return load_records(_aligned(df.sort(ORDER), hints).drop(BUCKET), spec, order_col=ORDER, shard=True)


def _partition_runs(spec: RecordSpec, hints: dict, batches):
    """Pass 1 on one partition: its runs with their user's bucket, or its error."""
    import pyarrow as pa

    df = _frame(batches)
    if df is None:
        return
    try:
        records = _records(df, spec, hints)
    except OutOfBounds as exc:
        out = [{"kind": OUT_OF_BOUNDS, "row": exc.row, "count": exc.count, "value": exc.value, "text": exc.group}]
    except TsdpError as exc:
        name, row, message = failure(exc)
        out = [{"kind": ERROR, "name": name, "row": row, "text": message}]
    else:
        if records.n_groups == 0:
            return
        buckets = df.select(pl.col(spec.user_col).cast(pl.String).alias(USER), pl.col(BUCKET)).unique(USER)
        runs = run_table(records).join(buckets, on=USER, how="left")
        out = [{"kind": RUNS, "data": _ipc(runs.slice(at, CHUNK_ROWS))} for at in range(0, runs.height, CHUNK_ROWS)]
    schema = pa.schema([("kind", pa.string()), ("name", pa.string()), ("row", pa.int64()), ("count", pa.int64()),
                        ("value", pa.float64()), ("text", pa.string()), ("data", pa.binary())])
    yield pa.RecordBatch.from_pylist(out, schema=schema)


def _partition_pieces(spec: RecordSpec, hints: dict, shared, batches):
    """Pass 2 on one partition: the piece sums of its runs that the plan cuts, by canonical index."""
    import pyarrow as pa

    df = _frame(batches)
    if df is None:
        return
    blobs = shared.value
    parts = [pl.read_ipc_stream(io.BytesIO(blobs[b])) for b in df[BUCKET].unique().to_list() if b in blobs]
    if not parts:
        return
    records = _records(df, spec, hints)
    local = run_table(records).drop(COUNT).with_row_index("__local")
    hit = local.join(pl.concat(parts), on=[*records.key_columns, USER], how="inner")
    at = hit["__local"].to_numpy().astype(np.int64)
    cut1 = np.zeros(records.counts.size, dtype=np.int64)
    cut2 = np.zeros(records.counts.size, dtype=np.int64)
    cut1[at], cut2[at] = hit[CUT1].to_numpy(), hit[CUT2].to_numpy()
    first, second = run_piece_sums(records.values, records.user_starts, cut1, cut2)
    table = pa.table({"run": pa.array(hit[RUN].to_numpy(), pa.int64()), "first": pa.array(first[at], pa.float64()),
                      "second": pa.array(second[at], pa.float64())})
    yield from table.to_batches()

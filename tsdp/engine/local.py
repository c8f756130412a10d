"""``--engine local``: event aggregation on one machine, in bounded memory.

When the input fits the memory limit it is read whole and aggregated in memory. Otherwise polars
streams it once into Parquet shards partitioned by a hash of the user id (every row of a user lands
in the same shard), with the input's row number attached as the tie-break key
(:data:`tsdp.engine.kernel.ORDER`); then the kernel runs on one shard at a time
(:func:`tsdp.engine.events.partial_cell_sums`) and the partial panels add up
(:func:`tsdp.engine.events.assemble`). The caps look only at one user's rows, so sharding changes no
kept row; the tie-break key is the row number of the input, so no choice depends on the shards
either. The shards live in a temporary directory that is removed whatever happens.

Polars does the streaming, the partitioned write and the spill; tsdp writes no scheduler or spill.
"""

from __future__ import annotations

import contextlib
import math
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import polars as pl

from tsdp.engine.kernel import ORDER
from tsdp.errors import MEMORY_HINT, DataError, ResourceError, TsdpError, UsageError
from tsdp.engine.events import EventAggregation, EventJob, assemble, partial_cell_sums
from tsdp.io.files import STDIO, read_table, table_format, text_separator

GIB = 1 << 30
DEFAULT_CAP = 2 * GIB
# Peak memory of the in-memory route per event row (the read frame, the prepared rows, the sorted
# runs and the polars working copies): about 300 bytes measured on bench/scale.py's events
# (10^7 rows: 3.0 GB from CSV and from Parquet alike), rounded up.
BYTES_PER_ROW = 360
HEADROOM = 1.5  # a shard is sized to use at most 1/HEADROOM of the limit
SHARD = "__shard"
_UNITS = {"": 1, "b": 1, "k": 1 << 10, "kb": 10**3, "kib": 1 << 10, "m": 1 << 20, "mb": 10**6,
          "mib": 1 << 20, "g": GIB, "gb": 10**9, "gib": GIB, "t": 1 << 40, "tb": 10**12, "tib": 1 << 40}


def physical_memory() -> int:
    """Bytes of memory of this machine (or of its container's cgroup limit, when lower)."""
    total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    try:
        limit = int(Path("/sys/fs/cgroup/memory.max").read_text().strip())
        return min(total, limit)
    except (OSError, ValueError):
        return total


def default_memory_limit() -> int:
    """A safe share of the machine: a quarter of its memory, at most 2 GiB."""
    return min(DEFAULT_CAP, physical_memory() // 4)


def parse_memory(text: str | int | None) -> int:
    """``--memory-limit``: bytes from ``2GiB``, ``500MB``, ``1.5g`` or a plain number of bytes."""
    if text is None:
        return default_memory_limit()
    raw = str(text).strip().lower().replace(" ", "")
    number = raw.rstrip("abcdefghijklmnopqrstuvwxyz")
    unit = raw[len(number):]
    try:
        value = float(number) * _UNITS[unit]
    except (ValueError, KeyError):
        raise UsageError(f"--memory-limit {text!r}: give a size such as 2GiB, 500MB or 1.5g") from None
    if not (math.isfinite(value) and value >= 64 * (1 << 20)):
        raise UsageError(f"--memory-limit {text!r}: must be at least 64MiB")
    return int(value)


def estimated_rows(path: str) -> int:
    """Rows of the input: exact for Parquet (its metadata), estimated for CSV from the mean length of
    its first lines."""
    if table_format(path) == "parquet":
        import pyarrow.parquet as pq

        try:
            return pq.ParquetFile(path).metadata.num_rows
        except (OSError, ValueError) as exc:
            raise DataError(f"INPUT: cannot read {path!r} as Parquet: {exc}") from None
    size = Path(path).stat().st_size
    if table_format(path).endswith(".gz"):
        with open(path, "rb") as fh:  # gzip's trailer holds the text's size modulo 4 GiB
            fh.seek(max(0, size - 4))
            isize = int.from_bytes(fh.read(4), "little")
        size = isize if isize >= size else 10 * size  # wrapped: assume 10x compression
        head = _gunzipped_head(path, 1 << 20)
    else:
        with open(path, "rb") as fh:
            head = fh.read(1 << 20)
    lines = max(1, head.count(b"\n") - 1)  # the header line is not a row
    return math.ceil(size / (len(head) / lines)) if head else 0


def _gunzipped_head(path: str, size: int) -> bytes:
    """Up to ``size`` decompressed bytes from the start of a gzipped file; DataError naming the file
    when its stream ends before its end marker (a truncated copy)."""
    import gzip
    import zlib

    try:
        with gzip.open(path, "rb") as fh:
            return fh.read(size)
    except EOFError:
        from tsdp.io.inputs import truncated_gzip

        raise truncated_gzip(path) from None
    except (OSError, zlib.error) as exc:
        raise DataError(f"INPUT: cannot read {path!r} as gzip: {exc}") from None


def shard_count(path: str, memory_limit: int, bytes_per_row: int = BYTES_PER_ROW) -> int:
    """1 when the input fits in ``memory_limit`` with the in-memory route (``bytes_per_row`` of it
    per input row), else enough shards that one shard uses at most 1/HEADROOM of it (never fewer
    than 4 once sharding)."""
    if path == STDIO or not Path(path).is_file():
        return 1  # stdin is read whole; a missing file is reported by the reader
    need = estimated_rows(path) * bytes_per_row
    if need <= memory_limit:
        return 1
    return max(4, math.ceil(need * HEADROOM / memory_limit))


def scan_events(path: str, job: EventJob) -> pl.LazyFrame:
    """The input as a lazy scan of the columns the job reads, with the input's row number (ORDER).

    CSV: user, series and value columns are read as text (the aggregation parses and checks them
    cell by cell, naming the input row); the time column keeps polars' type inference.
    """
    if table_format(path) == "parquet":
        scan = pl.scan_parquet(path)
    else:
        text = {c: pl.String for c in (job.user_col, job.series_col, job.value_col) if c is not None}
        scan = pl.scan_csv(path, schema_overrides=text, infer_schema_length=10_000,
                           separator=text_separator(table_format(path)))
    return scan.select(job.columns).with_row_index(ORDER)


def aggregate_events_local(path: str, job: EventJob, memory_limit: int | None = None,
                           work_dir: str | None = None,
                           stage: Callable[[str], None] | None = None) -> EventAggregation:
    """Aggregate the events of ``path`` within ``memory_limit`` bytes (default: a safe share)."""
    limit = memory_limit or default_memory_limit()
    shards = shard_count(path, limit)
    note = stage or (lambda name: None)
    if shards == 1:
        note("reading input")
        df = read_table(path, {job.time_col: "time", **{c: "text" for c in (job.user_col, job.series_col) if c},
                               **({job.value_col: "number"} if job.value_col else {})})
        note("bounding and aggregating")
        return assemble(job, [partial_cell_sums(df, job)])
    with scratch_dir(work_dir, "shards") as tmp:
        note(f"sharding input by user into {shards} shards")
        directories = write_user_shards(scan_events(path, job), job.user_col, shards, tmp, path)
        parts, rows, started = [], 0, time.monotonic()
        for k, directory in enumerate(directories, 1):
            rate = f", {rows / max(time.monotonic() - started, 1e-9):,.0f} rows/s" if rows else ""
            note(f"bounding and aggregating shard {k}/{len(directories)}{rate}")
            parts.append(partial_cell_sums(pl.read_parquet(directory / "*.parquet"), job, order_col=ORDER))
            rows += parts[-1].diagnostics["rows_in"]
        if not parts:
            raise DataError(f"INPUT: {path!r} holds no rows")
        return assemble(job, parts)


@contextlib.contextmanager
def scratch_dir(work_dir: str | None, kind: str) -> Iterator[Path]:
    """A hidden temporary directory in ``--work-dir`` (default: the system's), removed at the end
    of the block whatever happens."""
    base = Path(work_dir or tempfile.gettempdir())
    if not base.is_dir():
        raise UsageError(f"--work-dir: {str(base)!r} is not a directory")
    try:
        tmp = Path(tempfile.mkdtemp(prefix=f"{SCRATCH_PREFIX}{kind}-", dir=base))
    except OSError as exc:
        raise scratch_error(exc, base) from None
    try:
        yield tmp
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


SCRATCH_PREFIX = ".tsdp-"


def scratch_error(exc: BaseException, where: Path) -> TsdpError:
    """The error for an OS failure writing scratch files under ``where`` (a scratch directory or the
    --work-dir holding it): the work directory is named, never the input. A full disk is a resource
    error (exit 5); a directory tsdp may not write, a usage error (exit 2), like --output's."""
    from tsdp.io.publish import DISK_FULL, os_errno

    base = next((d.parent for d in (where, *where.parents) if d.name.startswith(SCRATCH_PREFIX)), where)
    reason = getattr(exc, "strerror", None) or str(exc).strip().splitlines()[0] or type(exc).__name__
    if os_errno(exc) in DISK_FULL:
        return ResourceError(f"--work-dir {str(base)!r}: cannot write the scratch shards ({reason}); free space "
                             "there or pass --work-dir with room for about the input's size; nothing was published")
    return UsageError(f"--work-dir {str(base)!r}: cannot write the scratch shards ({reason}); choose a directory "
                      "you can write to; nothing was published")


def write_user_shards(scan: pl.LazyFrame, user_col: str, shards: int, directory: Path,
                      path: str) -> list[Path]:
    """Stream ``scan`` into ``shards`` Parquet partitions of ``directory`` by a hash of the user id
    (every row of a user in one partition); return the partitions' directories."""
    return write_partitions(scan, pl.col(user_col).hash(seed=0) % shards, directory, path)


def write_partitions(scan: pl.LazyFrame, key: pl.Expr, directory: Path, path: str) -> list[Path]:
    """Stream ``scan`` into Parquet partitions of ``directory``, one per value of the integer
    ``key``; return the partitions' directories in the order of their key."""
    try:
        # scratch files: lz4 writes and reads them about twice as fast as the default zstd
        scan.with_columns(key.alias(SHARD)).sink_parquet(pl.PartitionBy(str(directory), key=SHARD, include_key=False),
                                            mkdir=True, compression="lz4")
    except pl.exceptions.ColumnNotFoundError as exc:
        raise DataError(f"INPUT: {str(exc).strip().splitlines()[0]}") from None
    except (pl.exceptions.PolarsError, OSError) as exc:
        if _writing_failed(exc, path):
            raise scratch_error(exc, directory) from None
        raise _read_error(path, exc) from None
    if not directory.is_dir():
        return []
    return sorted(directory.iterdir(), key=lambda d: int(d.name.rpartition("=")[2]))


def _writing_failed(exc: BaseException, path: str) -> bool:
    """Whether an OS error in a read-and-shard pass came from writing the shards, not from reading
    ``path``: an error number that writing gives (no space, no permission, a read-only file system);
    a missing or unreadable input is reported as the input's."""
    import errno

    from tsdp.io.publish import DISK_FULL, os_errno

    number = os_errno(exc)
    if number in DISK_FULL or number == errno.EROFS:
        return True
    return number in (errno.EACCES, errno.EPERM) and os.access(path, os.R_OK)


def _read_error(path: str, exc: Exception) -> TsdpError:
    from tsdp.io.inputs import is_truncation, truncated_gzip

    message = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    if "memory" in message.lower() or isinstance(exc, MemoryError):
        return ResourceError(f"out of memory while sharding {path!r}: {MEMORY_HINT}")
    if table_format(path).endswith(".gz") and is_truncation(message):
        return truncated_gzip(path)
    return DataError(f"INPUT: cannot parse {path!r}: {message}")


def read_shards(directories, note, doing: str):
    """Each shard's rows (a polars DataFrame), read in turn, with a progress ``note`` naming what
    is ``doing`` on it and the rows per second so far."""
    import time

    rows, started = 0, time.monotonic()
    for k, directory in enumerate(directories):
        rate = f", {rows / max(time.monotonic() - started, 1e-9):,.0f} rows/s" if rows else ""
        note(f"{doing} of shard {k + 1}/{len(directories)}{rate}")
        df = pl.read_parquet(Path(directory) / "*.parquet")
        rows += df.height
        yield df


def loaded_shards(directories, spec, note, doing: str, **options):
    """``(k, records)`` for each record shard, checked and sorted by
    :func:`tsdp.io.records.load_records` (``options`` go to it). Values outside the public bounds
    are collected over every shard and raised together at the end, naming the earliest input row
    as in memory; once one shard has such values the later ones are only checked.

    The next shard is checked and sorted in a second thread while the caller works on the current
    one (estimates it, writes its rows: mostly numpy on one core, beside polars' sort of the next;
    both release the GIL). The shards come in order and are loaded exactly as one after the other."""
    from concurrent.futures import ThreadPoolExecutor

    from tsdp.io.records import OutOfBounds, load_records

    out_of_bounds: list = []
    shards = enumerate(read_shards(directories, note, doing))
    with ThreadPoolExecutor(1) as pool:

        def submit():
            item = next(shards, None)
            if item is None:
                return None
            return item[0], pool.submit(load_records, item[1], spec, order_col=ORDER, shard=True, **options)

        pending = submit()
        try:
            while pending is not None:
                k, loading = pending
                pending = submit()
                try:
                    records = loading.result()
                except OutOfBounds as exc:
                    out_of_bounds.append(exc)
                    continue
                if not out_of_bounds:
                    yield k, records
                del records
        finally:
            if pending is not None:
                pending[1].cancel()
    if out_of_bounds:
        raise OutOfBounds.combined(out_of_bounds)

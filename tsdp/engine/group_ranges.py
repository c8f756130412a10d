"""``mean-estimate`` over inputs larger than memory: shards of whole groups, in group order.

Every estimate of :mod:`tsdp.mean` is a function of one group's records and the public
parameters alone (spec ``mean.md`` 2.0-2.7: the per-user cap m_UB, the user order, the arrays and
the private selection steps are per group). No bound couples groups: a user's number of groups is
reported to the custodian, never capped. So the records can be cut into shards of whole groups and
each shard estimated on its own, with exactly the runs, caps and kept rows of the in-memory route.

* Polars derives the group keys lazily, exactly as :func:`tsdp.io.records.load_records` does (the
  key columns as read, the slot of a Datetime time column by the same ``dt.truncate``), as far as
  it can: the longest prefix of the keys in their sort order (:func:`lazy_group_keys`).
* A streaming ``group_by`` counts the rows of each prefix value; sorted in the canonical group
  order, consecutive values are cut into ranges of at most ``budget`` rows (:func:`range_table`).
* One streaming pass joins each row to its range and writes Parquet partitions by range
  (``sink_parquet`` with ``PartitionBy``), carrying the input's row number (ORDER) as the
  tie-break key, so each shard is checked and sorted by the same ``load_records`` and its runs are
  the in-memory runs of its groups (:func:`group_range_chunks`).
* When every group is declared and polars derives every key (the common case), the sharding pass's
  join to the ranges also gives each row its declared group's index, which the shards carry
  instead of the key columns (:func:`shard_coding`), so no shard matches keys to the declared
  groups again.
* Each shard ranks its own users' ids as text (the order of users within a group), as in memory.
  (Ranking them once for the whole input, a streaming ``unique`` and a join of every row to its
  id's rank, measured slower than ranking each shard's ids: the join costs more than the ranks.)
* The one figure that spans groups, the largest number of groups of one user (custodian only), is
  a streaming ``group_by`` over the shards' per-user run counts, users named by a 64-bit hash of
  their id (:func:`max_groups_per_user`).

Shards come in group order, so their estimates are written one after the other and the output
rows are in the in-memory order. Polars does the streaming, partitioning and spilling.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import polars as pl

from tsdp.engine.kernel import ORDER
from tsdp.engine.local import SHARD, _read_error, loaded_shards, scratch_error, write_partitions
from tsdp.engine.runs import runs_from_records
from tsdp.errors import DataError
from tsdp.io.record_groups import DECLARED, _declares_all, _selection, declared_groups, group_keys, slot_of
from tsdp.io.record_spec import DEFAULT_SLOT_LENGTH, SLOT, RecordSpec
from tsdp.io.records import Coded

RANGE, ROWS, USER, RUNS = "__range", "__rows", "__user", "__runs"
# Peak memory of one shard per row, from reading it to estimating its groups (the frame, sort keys,
# the per-run plan: on the bench's records a run is about one record), plus what the allocator
# keeps from shard to shard: about 280-340 bytes measured at 3M-row shards, rounded up.
BYTES_PER_ROW = 400


def lazy_group_keys(spec: RecordSpec, schema: pl.Schema) -> list[pl.Expr]:
    """The longest prefix of the group keys (in their sort order) that polars derives lazily from
    columns of ``schema`` exactly as ``load_records`` derives them, as expressions named
    ``__gkey0``, ``__gkey1``, ... Empty when the first key cannot be derived (no keys, or the slot
    of a text or integer time column, or of times read in a ``--timezone``)."""
    keys, slot_derived = group_keys(list(schema.names()), spec)
    out = []
    for i, key in enumerate(keys):
        if key == SLOT and slot_derived:
            time_col = spec.time_col
            if (time_col is None or spec.timezone is not None or time_col not in schema
                    or not isinstance(schema[time_col], pl.Datetime)):
                break
            expr = slot_of(pl.col(time_col), spec.slot_length or DEFAULT_SLOT_LENGTH, integer=False)
        elif key in schema:
            expr = pl.col(key)
        else:
            break
        out.append(expr.alias(f"__gkey{i}"))
    return out


def range_table(scan: pl.LazyFrame, keys: list[pl.Expr], budget: int, path: str) -> pl.DataFrame | None:
    """The distinct values of ``keys`` in the canonical group order, each with its range number
    (RANGE): consecutive values whose rows add up to at most ``budget``. None when one value alone
    holds more than half the budget (whole groups would not fit a shard)."""
    names = [k.meta.output_name() for k in keys]
    try:
        counts = scan.group_by(keys).agg(pl.len().alias(ROWS)).collect(engine="streaming")
    except (pl.exceptions.PolarsError, OSError) as exc:
        raise _read_error(path, exc) from None
    if counts.height == 0:
        return counts.with_columns(pl.lit(0, dtype=pl.Int64).alias(RANGE)).drop(ROWS)
    counts = counts.sort(names, nulls_last=True)
    rows = counts[ROWS].to_numpy().astype(np.int64)
    largest = int(rows.max())
    step = budget - largest  # a range starting before k * step + step ends before k * step + budget
    if step < budget // 2:
        return None
    start = np.cumsum(rows) - rows
    return counts.select(names).with_columns(pl.Series(RANGE, start // step, dtype=pl.Int64))


def shard_coding(scan: pl.LazyFrame, keys: list[pl.Expr], table: pl.DataFrame,
                 spec: RecordSpec) -> tuple[Coded, pl.DataFrame] | None:
    """What coded shards carry (:class:`tsdp.io.records.Coded`) and ``table`` with each key value's
    declared group index (DECLARED, null outside the declared groups). None when the shards must
    carry the keys for :func:`tsdp.io.records.load_records` to check: a key polars does not derive,
    a group not declared, a missing key value, a missing column."""
    schema = scan.collect_schema()
    names = list(schema.names())
    all_keys, slot_derived = group_keys(names, spec)
    if (len(keys) != len(all_keys) or not _declares_all(all_keys, slot_derived, spec)
            or any(c is not None and c not in schema for c in (spec.cell_col, spec.user_col, spec.value_col))):
        return None
    gkeys = [k.meta.output_name() for k in keys]
    key_frame = table.select(gkeys).rename(dict(zip(gkeys, all_keys)))
    if any(key_frame[k].null_count() for k in all_keys):
        return None
    declared = declared_groups(key_frame.schema, all_keys, slot_derived, spec)
    if declared is None:
        return None
    table = table.with_columns(key_frame.select(declared.index(key_frame)).to_series())
    return Coded(declared, tuple(names)), table


def write_group_shards(scan: pl.LazyFrame, keys: list[pl.Expr], table: pl.DataFrame, directory: Path,
                       path: str, coded: Coded | None = None, spec: RecordSpec | None = None) -> list[Path]:
    """Stream ``scan`` into one Parquet partition per range of ``table``; the partitions'
    directories in range order (an empty range has none). ``coded`` (with the ``spec``): the rows
    carry their declared group (DECLARED of ``table``) instead of their keys."""
    names = [k.meta.output_name() for k in keys]
    joined = scan.with_columns(keys).join(table.lazy(), on=names, how="left", nulls_equal=True)
    if coded is not None:
        kept = [c for c in (ORDER, spec.user_col, spec.value_col, spec.time_col) if c is not None]
        joined = joined.select(*kept, DECLARED, RANGE)
    joined = joined.drop(names, strict=False).rename({RANGE: SHARD})
    return write_partitions(joined, pl.col(SHARD).fill_null(0), directory, path)


def group_range_chunks(directories: list[Path], spec: RecordSpec, tmp: Path,
                       note: Callable[[str], None], dropped: dict | None = None,
                       coded: Coded | None = None) -> Iterator:
    """The runs of each shard (:class:`tsdp.engine.runs.RecordRuns`), shard by shard in group
    order (shards without records in the selection or declared groups yield nothing, unless no
    shard has any: then the last, empty, carries the declared groups). Each shard's per-user run
    counts go to ``tmp`` for :func:`max_groups_per_user`; ``dropped["records"]`` adds up the
    records outside the declared groups. ``coded``: the shards are coded (:func:`shard_coding`).

    Values outside the public bounds are counted over every shard and the earliest input row is
    named, as in memory (shards after the first such one are only checked); other data errors
    name a bad row of the first shard holding one."""
    groups = 0
    last = None
    for k, records in loaded_shards(directories, spec, note, "checking, sorting and estimating the groups",
                                    coded=coded):
        last = records
        if dropped is not None:
            dropped["records"] += records.dropped
        if records.n_groups == 0:
            continue
        try:
            user_runs(records).write_parquet(tmp / f"users_{k}.parquet")
        except (OSError, pl.exceptions.PolarsError) as exc:
            raise scratch_error(exc, tmp) from None
        groups += records.n_groups
        yield runs_from_records(records)
    if groups == 0:
        if last is not None and last.declared is not None:
            yield runs_from_records(last)  # no records in any declared group: every group is empty
            return
        raise DataError(f"no records in the selection {_selection(spec)}; check the value(s) against the data")


def user_runs(records) -> pl.DataFrame:
    """The runs (groups) of each user of a shard's records (RUNS), the user named by a 64-bit hash
    of its id as text (USER). Two ids with one hash would count as one user, which can only raise
    the largest count (about n^2 / 2^65 for n users: 10^-7 at two million)."""
    counts = np.bincount(records.run_codes)
    present = np.flatnonzero(counts)
    any_run = np.empty(counts.size, dtype=np.int64)
    any_run[records.run_codes] = np.arange(records.run_codes.size)
    ids = records.run_users.gather(any_run[present]).hash(seed=0)
    return pl.DataFrame({USER: ids, RUNS: pl.Series(counts[present], dtype=pl.Int64)})


def max_groups_per_user(tmp: Path) -> int:
    """The largest number of groups of one user over all shards (a user's groups may lie in
    several shards), by a streaming group-by over the shards' per-user run counts (by user code)."""
    files = sorted(tmp.glob("users_*.parquet"))
    if not files:
        return 0
    total = (pl.scan_parquet(files).group_by(USER).agg(pl.col(RUNS).sum())
             .select(pl.col(RUNS).max()).collect(engine="streaming"))
    return int(total.item())

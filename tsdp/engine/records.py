"""The records of ``mean-estimate`` reduced to runs, on one machine in bounded memory.

The estimators of :mod:`tsdp.mean.algorithms` need, per run (one user's records in one group),
only its record count and the sums of two pieces of its records in time order, whose lengths the
public plan decides from the counts (:func:`tsdp.mean.algorithms.plan_runs`). So every engine
delivers a :class:`tsdp.engine.runs.RecordRuns`: the counts in the canonical order (group keys, then user id as
text), the group keys, and a ``piece_sums(cut1, cut2)`` that sums the pieces.

* In memory (:func:`runs_from_records`): the records of :func:`tsdp.io.records.load_records`.
* ``--engine local`` over the memory limit (:func:`sharded_runs`): polars streams the input once
  into Parquet shards by a hash of the user id, with the input's row number as the tie-break key
  (:data:`tsdp.engine.kernel.ORDER`); each shard is checked and sorted by the same
  ``load_records`` (every run of a user is in one shard, ties broken by the input row, so a
  shard's runs are exactly the in-memory runs), its sorted values are kept on disk, and the
  counts of all shards are merged in the canonical order. ``piece_sums`` then sums pieces shard by
  shard from the memory-mapped values. Two passes over the shards, no scheduler or spill of ours.
  Its merged runs are O(records) when users have a record or two per group, so
* ``--engine local`` prefers shards of whole groups (:func:`record_chunks`,
  :mod:`tsdp.engine.group_ranges`): a :class:`RecordChunks` yields one :class:`RecordRuns` per
  shard, in group order, and nothing spans shards but the custodian's max groups per user.

Errors name the input's row. Values outside the public bounds are counted over every shard and
the earliest input row is named, as in memory; other data errors name a bad row of the first
shard holding one.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import polars as pl

from tsdp.engine import group_ranges as gr
from tsdp.engine.kernel import ORDER
from tsdp.engine.local import (HEADROOM, default_memory_limit, loaded_shards, scratch_dir, shard_count,
                               write_user_shards)
from tsdp.errors import DataError, ResourceError
from tsdp.io.files import read_table, table_format, text_separator
from tsdp.engine.runs import RecordRuns, runs_from_records
from tsdp.io.records import RecordSpec, Records, load_records
from tsdp.mean.algorithms import run_piece_sums

# Peak memory of the in-memory route per record row (the read frame, consumed by load_records;
# codes and the sort key; the key and values sorted; the plan of the runs, up to one per record on
# the scale bench's records): 1.40-1.45 GiB measured at 10^7 records (bench/scale.py,
# bench/mean_scale.py), about 155 bytes, rounded up.
BYTES_PER_ROW = 180
# Memory per (group, user) run held by the merge and the plan (keys, user id, counts, cut points,
# array ids and the BESTFIT packing's lists): an estimate, rounded up.
RUN_BYTES = 256
USER, COUNT, SHARD, RUN = "__user", "__count", "__shard_k", "__run"

DECLARED_INDEX = "__declared"


def declared_positions(runs: RecordRuns) -> np.ndarray:
    """The position in ``runs.declared`` of each of ``runs``' groups (increasing: both are in the
    canonical group order)."""
    if runs.n_groups == 0:
        return np.zeros(0, dtype=np.int64)
    if runs.declared_index is not None:
        return runs.declared_index
    if not runs.key_columns:
        return np.zeros(1, dtype=np.int64)
    keys = runs.key_columns
    table = runs.declared.with_row_index(DECLARED_INDEX)
    found = runs.groups.select(keys).join(table, on=keys, how="left", maintain_order="left", nulls_equal=True)
    index = found[DECLARED_INDEX]
    if index.null_count():  # load_records keeps only records of declared groups
        raise AssertionError("a group outside the declared groups")
    positions = index.to_numpy().astype(np.int64)
    if positions.size > 1 and not np.all(positions[1:] > positions[:-1]):
        raise AssertionError("the runs' groups are not in the declared groups' order")
    return positions


def expand_declared(runs: RecordRuns, positions: np.ndarray, start: int, stop: int) -> RecordRuns:
    """``runs`` (whose groups lie at ``positions`` of the declared groups, all within
    ``[start, stop)``) as the declared groups ``start .. stop - 1``: the groups without records
    get no runs. The runs themselves, their order and sums are unchanged."""
    per_group = np.zeros(stop - start, dtype=np.int64)
    per_group[positions - start] = np.diff(runs.group_starts)
    group_starts = np.concatenate(([0], np.cumsum(per_group))).astype(np.int64)
    groups = runs.declared.slice(start, stop - start) if runs.key_columns else runs.declared
    return RecordRuns(runs.counts, group_starts, groups, runs.key_columns, runs.max_groups_per_user,
                      runs.piece_sums, runs.clipped, runs.notes, runs.run_users, runs.declared, runs.dropped)


def empty_declared(runs: RecordRuns, start: int, stop: int) -> RecordRuns:
    """The declared groups ``start .. stop - 1`` of ``runs.declared``, none with records."""
    def no_sums(cut1, cut2):
        return np.zeros(0), np.zeros(0)

    groups = runs.declared.slice(start, stop - start) if runs.key_columns else runs.declared
    return RecordRuns(np.zeros(0, dtype=np.int64), np.zeros(stop - start + 1, dtype=np.int64), groups,
                      runs.key_columns, 0, no_sums, runs.clipped, runs.notes, pl.Series(USER, [], dtype=pl.String),
                      runs.declared, 0)


def n_declared(runs: RecordRuns) -> int:
    """The number of declared groups (one when there are no keys)."""
    return runs.declared.height if runs.key_columns else 1


@contextmanager
def record_runs(path: str, spec: RecordSpec, memory_limit: int | None = None, work_dir: str | None = None,
                stage: Callable[[str], None] | None = None) -> Iterator[RecordRuns]:
    """The runs of ``path`` within ``memory_limit`` bytes; shards (if any) live until the block ends."""
    note = stage or (lambda name: None)
    shards = shard_count(path, memory_limit or default_memory_limit(), BYTES_PER_ROW)
    if shards == 1:
        note("reading input")
        df = read_table(path)
        note("checking and sorting records")
        records = load_records(df, spec, consume=True)
        del df
        yield runs_from_records(records)
        return
    with scratch_dir(work_dir, "records") as tmp:
        note(f"sharding input by user into {shards} shards")
        directories = write_user_shards(scan_records(path, spec), spec.user_col, shards, tmp / "shards", path)
        yield sharded_runs(directories, spec, tmp, note, memory_limit)


class RecordChunks:
    """The runs of an input as chunks of whole groups (:class:`RecordRuns`), in the canonical
    group order; iterate once. The totals (``n_groups``, ``max_groups_per_user``) and the chunks'
    common fields (key columns, clipping, notes) are known once the iteration has ended."""

    def __init__(self, chunks, single: bool, max_groups: Callable[[], int] | None = None,
                 dropped: Callable[[], int] | None = None) -> None:
        self._chunks, self.single, self._max_groups, self._dropped = chunks, single, max_groups, dropped
        self.n_groups, self.max_groups_per_user = 0, 0
        self.key_columns: list[str] = []
        self.clipped, self.notes = False, []
        self.declared: pl.DataFrame | None = None
        self.dropped: int | None = 0

    @classmethod
    def of(cls, runs: RecordRuns) -> "RecordChunks":
        return cls(iter([runs]), single=True)

    def __iter__(self) -> Iterator[RecordRuns]:
        for runs in self._chunks:
            self.n_groups += runs.n_groups
            self.key_columns, self.clipped, self.notes = runs.key_columns, runs.clipped, runs.notes
            self.declared = runs.declared
            self.dropped = None if self.dropped is None or runs.dropped is None else self.dropped + runs.dropped
            if self._max_groups is None:
                self.max_groups_per_user = max(self.max_groups_per_user, runs.max_groups_per_user)
            yield runs
        if self._max_groups is not None:
            self.max_groups_per_user = self._max_groups()
        if self._dropped is not None:
            self.dropped = self._dropped()


@contextmanager
def record_chunks(path: str, spec: RecordSpec, memory_limit: int | None = None, work_dir: str | None = None,
                  stage: Callable[[str], None] | None = None) -> Iterator[RecordChunks]:
    """The runs of ``path`` within ``memory_limit`` bytes, as chunks of whole groups.

    In memory when the input fits; else shards of whole groups by group range
    (:mod:`tsdp.engine.group_ranges`) when polars can derive the leading group key and no key
    value holds more than half a shard; else one chunk from user-hash shards (:func:`sharded_runs`)."""
    note = stage or (lambda name: None)
    limit = memory_limit or default_memory_limit()
    if shard_count(path, limit, BYTES_PER_ROW) == 1:
        with record_runs(path, spec, limit, work_dir, stage) as runs:
            yield RecordChunks.of(runs)
        return
    with scratch_dir(work_dir, "records") as tmp:
        scan = scan_records(path, spec)
        keys = gr.lazy_group_keys(spec, scan.collect_schema())
        budget = max(1, int(limit / HEADROOM / gr.BYTES_PER_ROW))
        note("counting the records of each group")
        table = gr.range_table(scan, keys, budget, path) if keys else None
        if table is None:
            shards = shard_count(path, limit, BYTES_PER_ROW)
            note(f"sharding input by user into {shards} shards")
            directories = write_user_shards(scan, spec.user_col, shards, tmp / "shards", path)
            yield RecordChunks.of(sharded_runs(directories, spec, tmp, note, memory_limit))
            return
        n_ranges = int(table[gr.RANGE].max()) + 1 if table.height else 1
        coded = None
        coding = gr.shard_coding(scan, keys, table, spec) if table.height else None
        if coding is not None:
            coded, table = coding
        note(f"sharding input by group range into {n_ranges} shards")
        directories = gr.write_group_shards(scan, keys, table, tmp / "shards", path, coded, spec)
        dropped = {"records": 0}
        yield RecordChunks(gr.group_range_chunks(directories, spec, tmp, note, dropped, coded), single=False,
                           max_groups=lambda: gr.max_groups_per_user(tmp), dropped=lambda: dropped["records"])


def scan_records(path: str, spec: RecordSpec) -> pl.LazyFrame:
    """The columns the records can need, lazily, with the input's row number (ORDER). CSV user and
    value columns are read as text (load_records parses and checks them cell by cell)."""
    if table_format(path) == "parquet":
        scan = pl.scan_parquet(path)
    else:
        text = {spec.user_col: pl.String, spec.value_col: pl.String}
        scan = pl.scan_csv(path, schema_overrides=text, infer_schema_length=10_000,
                           separator=text_separator(table_format(path)))
    return scan.select(record_columns(spec, scan.collect_schema().names())).with_row_index(ORDER)


def record_columns(spec: RecordSpec, present: list[str]) -> list[str]:
    """The columns of an input with columns ``present`` that the records can need."""
    wanted = [spec.user_col, spec.value_col, spec.time_col, spec.cell_col, *spec.group_by, "cell"]
    return list(dict.fromkeys(c for c in wanted if c is not None and c in set(present)))


def run_table(records: Records) -> pl.DataFrame:
    """One row per run of ``records``, in their order: its group keys, user id as text (USER)
    and record count (COUNT)."""
    runs = [records.run_users.alias(USER), pl.Series(COUNT, records.counts, dtype=pl.Int64)]
    if not records.key_columns:
        return pl.DataFrame(runs)
    group_of_run = np.repeat(np.arange(records.n_groups), np.diff(records.group_starts))
    return records.groups[group_of_run].with_columns(runs)


def merge_runs(tables: list[pl.DataFrame], keys: list[str], spec: RecordSpec, declared: pl.DataFrame | None = None
               ) -> tuple[pl.DataFrame, np.ndarray, pl.DataFrame]:
    """The runs of several parts of the input (tables of :func:`run_table`, plus any columns of
    the engine's; every user's runs in one part) in the canonical order (group keys, then user
    id as text), the offsets of each group's first run (n_groups + 1), and the groups' keys.
    DataError when there are no runs at all (the selection is empty) and no groups are ``declared``."""
    if not tables:
        if declared is not None:  # declared groups, none with records: every group is empty
            empty = pl.DataFrame({USER: pl.Series([], dtype=pl.String), COUNT: pl.Series([], dtype=pl.Int64)})
            return empty, np.zeros(1, dtype=np.int64), declared.clear()
        from tsdp.io.record_groups import _selection

        raise DataError(f"no records in the selection {_selection(spec)}; check the value(s) against the data")
    runs = pl.concat(tables, how="vertical").sort([*keys, USER])
    if keys:
        new_group = pl.any_horizontal([pl.col(k) != pl.col(k).shift(1) for k in keys]).fill_null(True)
        flags = runs.select(new_group).to_series().to_numpy()
    else:
        flags = np.zeros(runs.height, dtype=bool)
        flags[0] = True
    group_runs = np.flatnonzero(flags)
    group_starts = np.append(group_runs, runs.height).astype(np.int64)
    return runs, group_starts, runs.select(keys)[group_runs] if keys else pl.DataFrame()


def sharded_runs(directories: list[Path], spec: RecordSpec, tmp: Path,
                 note: Callable[[str], None], memory_limit: int | None = None) -> RecordRuns:
    """Pass 1: every shard checked and sorted by load_records; its sorted values and run starts go
    to ``tmp`` and its runs (keys, user, count) are merged in the canonical order.

    The merged runs and the plan built on them stay in memory (about RUN_BYTES each): when users
    contribute only a record or two per group, there are almost as many runs as records, and a
    ResourceError (exit 5) says so before memory runs out."""
    limit = memory_limit or default_memory_limit()
    n_runs = 0
    tables, stores = [], []
    max_groups = 0
    records = None
    dropped = 0
    for k, records in loaded_shards(directories, spec, note, "checking and sorting the records"):
        dropped += records.dropped
        if records.n_groups == 0:
            continue
        values, starts = tmp / f"values_{k}.npy", tmp / f"starts_{k}.npy"
        np.save(values, records.values)
        np.save(starts, records.user_starts)
        stores.append((values, starts))
        n_runs += records.counts.size
        if n_runs * RUN_BYTES > limit:
            raise ResourceError(
                f"mean-estimate: more than {n_runs:,} (group, user) runs after {k + 1} of {len(directories)} "
                f"shards, about {n_runs * RUN_BYTES / 2**30:.1f} GiB of per-run state, over --memory-limit "
                f"{limit / 2**30:.1f} GiB; raise --memory-limit, group more coarsely (fewer, larger groups), "
                "or use --engine spark")
        tables.append(run_table(records).with_columns(
            pl.lit(len(stores) - 1, dtype=pl.Int64).alias(SHARD),
            pl.int_range(records.counts.size, dtype=pl.Int64, eager=True).alias(RUN)))
        max_groups = max(max_groups, records.max_groups_per_user)
    keys = records.key_columns
    runs, group_starts, groups = merge_runs(tables, keys, spec, records.declared)
    empty = np.zeros(0, dtype=np.int64)
    shard_of = runs[SHARD].to_numpy() if SHARD in runs.columns else empty  # (no runs: declared groups only)
    run_of = runs[RUN].to_numpy() if RUN in runs.columns else empty

    def piece_sums(cut1: np.ndarray, cut2: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        first = np.zeros(runs.height)
        second = np.zeros(runs.height)
        for s, (values, starts) in enumerate(stores):
            at = np.flatnonzero(shard_of == s)
            local = np.argsort(run_of[at])  # this shard's runs in its own order
            where = at[local]
            a, b = run_piece_sums(np.load(values, mmap_mode="r"), np.load(starts), cut1[where], cut2[where])
            first[where], second[where] = a, b
        return first, second

    return RecordRuns(runs[COUNT].to_numpy().astype(np.int64), group_starts, groups, keys, max_groups,
                      piece_sums, records.clipped, list(records.notes), runs[USER], records.declared, dropped)

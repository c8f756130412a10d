"""What every engine delivers to the mean estimators: the runs of the records (one user's records in
one group), their counts in the canonical order and a function summing pieces of them
(:mod:`tsdp.engine.records` for the routes that build them)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import polars as pl

from tsdp.io.records import Records
from tsdp.mean.algorithms import run_piece_sums

PieceSums = Callable[[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]


@dataclass
class RecordRuns:
    """Runs in the canonical order (group keys ascending, then user id as text) and their sums."""

    counts: np.ndarray           # records of every run
    group_starts: np.ndarray     # offsets of each group's first run, n_groups + 1
    groups: pl.DataFrame         # one row per group, the key columns only
    key_columns: list[str]
    max_groups_per_user: int
    piece_sums: PieceSums        # (cut1, cut2) per run -> the two piece sums per run
    clipped: bool = False
    notes: list[str] = field(default_factory=list)
    run_users: pl.Series | None = None      # the user id (as text) of every run
    declared: pl.DataFrame | None = None    # every declared group (tsdp.io.record_groups.Declared.table), or None
    dropped: int | None = 0                 # records outside the declared groups (a figure of the data; None: not counted)
    declared_index: np.ndarray | None = None  # each group's position among the declared ones (None: found by a join)

    @property
    def n_groups(self) -> int:
        return int(self.group_starts.size - 1)

    def user_hashes(self) -> np.ndarray:
        """A 64-bit hash of every run's user id as text (polars' hash, seed 0): a function of the
        id alone, which places a user in the same array whatever the other users are."""
        return self.run_users.hash(seed=0).to_numpy()

    def group_label(self, index: int) -> str:
        """The group's keys in words, e.g. ``cell_id='c00_01', slot=2024-05-06 09:00:00``."""
        if not self.key_columns:
            return "the selection"
        row = self.groups.row(index, named=True)
        return ", ".join(f"{k}={v!r}" if isinstance(v, str) else f"{k}={v}" for k, v in row.items())

    def true_means(self) -> np.ndarray:
        """The exact per-group sample means (NOT private: for ``--evaluate`` diagnostics only; NaN
        for a group without records)."""
        sums, _ = self.piece_sums(self.counts, self.counts)
        gid = np.repeat(np.arange(self.n_groups), np.diff(self.group_starts))
        total = np.bincount(gid, weights=sums, minlength=self.n_groups)
        count = np.bincount(gid, weights=self.counts, minlength=self.n_groups)
        return np.divide(total, count, out=np.full(self.n_groups, np.nan), where=count > 0)  # NaN: no records


def runs_from_records(records: Records) -> RecordRuns:
    """The in-memory records as runs."""
    def piece_sums(cut1, cut2):
        return run_piece_sums(records.values, records.user_starts, cut1, cut2)

    return RecordRuns(records.counts, records.group_starts, records.groups, records.key_columns,
                      records.max_groups_per_user, piece_sums, records.clipped, list(records.notes),
                      records.run_users, records.declared, records.dropped, records.declared_index)


def concat_runs(chunks: list[RecordRuns], max_groups_per_user: int, dropped: int | None) -> RecordRuns:
    """Chunks of whole groups (in the canonical group order, as an engine's
    :class:`tsdp.engine.records.RecordChunks` yields them) as one :class:`RecordRuns`; its
    ``piece_sums`` asks each chunk for its runs' sums."""
    if len(chunks) == 1:
        one = chunks[0]
        return RecordRuns(one.counts, one.group_starts, one.groups, one.key_columns, max_groups_per_user,
                          one.piece_sums, one.clipped, one.notes, one.run_users, one.declared, dropped)
    first = chunks[0]
    bounds = np.cumsum([0] + [c.counts.size for c in chunks])
    group_starts = np.concatenate([[0]] + [c.group_starts[1:] + b for c, b in zip(chunks, bounds)]).astype(np.int64)

    def piece_sums(cut1, cut2):
        parts = [c.piece_sums(cut1[lo:hi], cut2[lo:hi]) for c, lo, hi in zip(chunks, bounds[:-1], bounds[1:])]
        return np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts])

    return RecordRuns(np.concatenate([c.counts for c in chunks]).astype(np.int64), group_starts,
                      pl.concat([c.groups for c in chunks], how="vertical"), first.key_columns, max_groups_per_user,
                      piece_sums, first.clipped, first.notes, pl.concat([c.run_users for c in chunks]),
                      first.declared, dropped)

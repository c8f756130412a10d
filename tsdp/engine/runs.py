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

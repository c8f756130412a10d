"""What ``tsdp mean-estimate`` reads from its records (:class:`RecordSpec`: which columns hold what,
which records to keep, how to group them), and the error for values outside the public bounds."""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

from tsdp.errors import DataError

SLOT = "slot"  # name of the derived time-slot column
DEFAULT_SLOT_LENGTH = "1h"  # the paper's 1-hour time slots
OUT_OF_RANGE = ("error", "clip")


@dataclass(frozen=True)
class RecordSpec:
    """Which columns hold what, which records to keep, and how to group them."""

    user_col: str
    value_col: str
    lower: float
    upper: float
    time_col: str | None = None
    cell_col: str | None = None
    slot_length: str | None = None
    cell: str | None = None
    slot: str | None = None
    group_by: tuple[str, ...] = ()
    out_of_range: str = "error"
    timezone: str | None = None  # --timezone: the zone of timestamps written without an offset
    group_keys: tuple[str, ...] | None = None  # --group-keys: the declared values of the one non-slot key
    group_keys_table: pl.DataFrame | None = None  # --group-keys-file: declared combinations (text columns)
    start: str | None = None  # --start/--end: the declared slot grid [start, end) of --slot-length slots
    end: str | None = None

    def declares(self) -> bool:
        """Whether a declaration of groups was given (beyond selecting one cell or slot)."""
        return self.group_keys is not None or self.group_keys_table is not None or self.start is not None


class OutOfBounds(DataError):
    """Values outside the public bounds (``--value-out-of-range error``): how many, and the one at
    the earliest input row (``row``, 0-based; ``value``; ``group``: its group keys in words)."""

    def __init__(self, spec: "RecordSpec", count: int, row: int, value: float, group: str) -> None:
        self.spec, self.count, self.row, self.value, self.group = spec, count, row, value, group
        super().__init__(
            f"--value-col: column {spec.value_col!r} has {count} value(s) outside the public bounds "
            f"[{spec.lower:g}, {spec.upper:g}], the first {value:g} at row {row + 1}"
            + (f" in group {group}" if group else "")
            + "; fix the data, raise the public --upper/--lower, or pass --value-out-of-range clip")

    @classmethod
    def combined(cls, parts: list["OutOfBounds"]) -> "OutOfBounds":
        """One error for several shards: the counts add up, the earliest row is named."""
        first = min(parts, key=lambda e: e.row)
        return cls(first.spec, sum(e.count for e in parts), first.row, first.value, first.group)

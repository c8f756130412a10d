"""The ledger file's layout and the values it stores: the SQLite tables (and the running totals
and change counter added to them, :mod:`tsdp.accounting.ledger`'s docstring), the row types, the
checks of a dataset name and an amount, and the exact decimal arithmetic of amounts."""

from __future__ import annotations

import math
import numbers
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from fractions import Fraction
from typing import Any

from tsdp.errors import UsageError

SCHEMA = "tsdp-ledger/1"

CREATE_TABLES = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE budgets (
    dataset TEXT PRIMARY KEY,
    epsilon_total REAL NOT NULL,
    delta_total REAL NOT NULL,
    created TEXT NOT NULL
);
CREATE TABLE entries (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    dataset TEXT NOT NULL REFERENCES budgets (dataset),
    created TEXT NOT NULL,
    epsilon REAL NOT NULL,
    delta REAL NOT NULL,
    state TEXT NOT NULL CHECK (state IN ('pending', 'spent')),
    description TEXT NOT NULL,
    output_name TEXT,
    output_sha256 TEXT,
    confirmed TEXT
);
CREATE INDEX entries_by_dataset ON entries (dataset);
"""

# The running totals and the change counter (module docstring), in every new file; a file made
# before them gets them with its first write. Statements one by one: a trigger's body holds
# semicolons, and executescript() would commit the open transaction.
GUARDED_TABLES = ("entries", "budgets", "totals")
CREATE_TOTALS_AND_GUARD = [
    "CREATE TABLE totals (dataset TEXT PRIMARY KEY REFERENCES budgets (dataset), epsilon_spent TEXT NOT NULL, "
    "delta_spent TEXT NOT NULL, epsilon_pending TEXT NOT NULL, delta_pending TEXT NOT NULL)",
    "CREATE TABLE guard (id INTEGER PRIMARY KEY CHECK (id = 0), seen INTEGER NOT NULL, made INTEGER NOT NULL)",
    "INSERT INTO guard VALUES (0, 0, 0)",
    "CREATE INDEX IF NOT EXISTS entries_by_output ON entries (dataset, output_sha256)",
    *(f"CREATE TRIGGER IF NOT EXISTS guard_{table}_{op.lower()} AFTER {op} ON {table} "
      "BEGIN UPDATE guard SET seen = seen + 1 WHERE id = 0; END"
      for table in GUARDED_TABLES for op in ("INSERT", "UPDATE", "DELETE")),
]


@dataclass(frozen=True)
class LedgerEntry:
    """One reservation (``pending``) or release (``spent``); times are UTC ISO 8601."""

    id: int
    dataset: str
    time: str
    epsilon: float
    delta: float
    state: str
    description: str
    output_name: str | None = None
    output_sha256: str | None = None
    confirmed: str | None = None


@dataclass(frozen=True)
class DatasetStatus:
    """A dataset's budget: total, spent, pending (reserved), remaining, and its entries."""

    dataset: str
    created: str
    epsilon_total: float
    delta_total: float
    epsilon_spent: float
    delta_spent: float
    epsilon_pending: float
    delta_pending: float
    epsilon_remaining: float
    delta_remaining: float
    entries: tuple[LedgerEntry, ...] = field(default_factory=tuple)

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["entries"] = [asdict(e) for e in self.entries]
        return out


def check_dataset(dataset: str) -> None:
    if not (isinstance(dataset, str) and dataset.strip() and dataset == dataset.strip()
            and dataset.isprintable()):
        raise UsageError(f"--dataset must be a non-empty name without surrounding spaces or control "
                         f"characters, got {dataset!r}")


def check_amount(epsilon: float, delta: float) -> None:
    if not (is_real(epsilon) and math.isfinite(epsilon) and epsilon >= 0):
        raise UsageError(f"--epsilon must be finite and >= 0, got {epsilon}")
    if not (is_real(delta) and math.isfinite(delta) and 0 <= delta < 1):
        raise UsageError(f"--delta must be in [0, 1), got {delta}")


def is_real(x: object) -> bool:
    return isinstance(x, numbers.Real) and not isinstance(x, bool)


def exact_amount(x: float) -> Fraction:
    """The decimal number a float is written as, exactly (``0.1`` is 1/10, not 0.1000...0555)."""
    return Fraction(repr(float(x)))


def written(x: Fraction | float) -> str:
    return repr(float(x))


def utc_now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")

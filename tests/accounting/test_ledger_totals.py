"""The ledger's running totals: a spend reads no entry while only tsdp writes the file, the totals
stay the entries' exact sums, and any other write makes the next one re-read every entry."""

from __future__ import annotations

import sqlite3
from fractions import Fraction
from pathlib import Path

import pytest

from tsdp.accounting import ledger
from tsdp.errors import BudgetError, DataError


@pytest.fixture
def db(tmp_path) -> Path:
    path = tmp_path / "budget.db"
    ledger.init_ledger(path, "d", 1.0, 1e-5)
    ledger.init_ledger(path, "other", 5.0, 1e-3)
    return path


def totals(path: Path, dataset: str = "d") -> tuple[Fraction, ...]:
    con = sqlite3.connect(path)
    row = con.execute("SELECT epsilon_spent, delta_spent, epsilon_pending, delta_pending FROM totals "
                      "WHERE dataset = ?", (dataset,)).fetchone()
    con.close()
    return tuple(Fraction(v) for v in row)


def summed(path: Path, dataset: str = "d") -> tuple[Fraction, ...]:
    (s,) = ledger.status(path, dataset)
    out = []
    for state in ("spent", "pending"):
        chosen = [e for e in s.entries if e.state == state]
        out += [sum((Fraction(repr(e.epsilon)) for e in chosen), Fraction(0)),
                sum((Fraction(repr(e.delta)) for e in chosen), Fraction(0))]
    return tuple(out)


def hand_edit(path: Path, sql: str, *args) -> None:
    con = sqlite3.connect(path)
    con.execute(sql, args)
    con.commit()
    con.close()


def no_entry_reads(monkeypatch):
    """Make re-reading the entries fail: the operations that follow must not need it."""
    def refuse(*args):
        raise AssertionError("the entries were re-read")
    monkeypatch.setattr(ledger, "_sums", refuse)


def test_every_operation_keeps_the_totals_the_exact_sums_without_reading_the_entries(db, monkeypatch):
    for _ in range(30):
        ledger.spend(db, "d", 0.01, 1e-7)
    no_entry_reads(monkeypatch)
    ledger.spend(db, "d", 0.1, 0.0, output_sha256="a" * 64)
    kept = ledger.reserve(db, "d", 0.2, 1e-6)
    dropped = ledger.reserve(db, "d", 0.3, 0.0)
    ledger.spend(db, "other", 4.0, 0.0)
    ledger.cancel(db, dropped)
    ledger.confirm(db, kept, "out.csv", "b" * 64)
    ledger.reopen(db, kept, "b" * 64)
    with pytest.raises(BudgetError):  # 0.3 + 0.1 + 0.2 reserved, 0.4 + epsilon would exceed 1.0
        ledger.spend(db, "d", 0.4 + 1e-9, 0.0)
    ledger.spend(db, "d", 0.4, 0.0)  # exactly the rest
    monkeypatch.undo()
    assert totals(db) == summed(db) == (Fraction(8, 10), Fraction(3, 10**6), Fraction(2, 10), Fraction(1, 10**6))
    assert totals(db, "other") == summed(db, "other")


def test_a_write_by_anything_else_makes_the_next_spend_re_read_every_entry(db, monkeypatch):
    ledger.spend(db, "d", 0.9, 0.0)
    hand_edit(db, "UPDATE entries SET description = 'renamed' WHERE id = 1")  # harmless, but not tsdp's
    calls = []
    sums = ledger._sums
    monkeypatch.setattr(ledger, "_sums", lambda *a: calls.append(a) or sums(*a))
    ledger.spend(db, "d", 0.05, 0.0)
    assert len(calls) == 2  # both datasets, once
    ledger.spend(db, "d", 0.05, 0.0)  # back in step: no re-read
    assert len(calls) == 2


def test_a_hand_edited_running_total_cannot_free_budget(db):
    """Lowering the stored total by hand is noticed: the totals are re-summed from the entries."""
    ledger.spend(db, "d", 0.9, 0.0)
    hand_edit(db, "UPDATE totals SET epsilon_spent = '0' WHERE dataset = 'd'")
    with pytest.raises(BudgetError, match="only epsilon 0.1"):
        ledger.spend(db, "d", 0.5, 0.0)
    ledger.spend(db, "d", 0.1, 0.0)
    assert totals(db) == summed(db)


def test_a_hand_edited_entry_is_refused_by_the_next_confirm_or_cancel_too(db):
    held = ledger.reserve(db, "d", 0.2, 0.0)
    hand_edit(db, "UPDATE entries SET epsilon = -3.0 WHERE id = ?", held)
    for operation in (lambda: ledger.confirm(db, held), lambda: ledger.cancel(db, held)):
        with pytest.raises(DataError, match="damaged.*epsilon -3.0"):
            operation()


def test_a_ledger_made_without_running_totals_gets_them_from_its_entries(tmp_path, monkeypatch):
    """A file written before the totals existed: read as it is, given totals by its first write."""
    path = tmp_path / "old.db"
    con = sqlite3.connect(path)
    for statement in ledger._CREATE.split(";"):
        if statement.strip():
            con.execute(statement)
    con.execute("INSERT INTO meta VALUES ('schema', ?)", (ledger.SCHEMA,))
    con.execute("INSERT INTO budgets VALUES ('d', 1.0, 1e-5, '2024-01-01T00:00:00+00:00')")
    con.executemany("INSERT INTO entries (dataset, created, epsilon, delta, state, description) "
                    "VALUES ('d', '2024-01-01T00:00:00+00:00', ?, 0.0, ?, '')", [(0.3, "spent"), (0.4, "pending")])
    con.commit()
    con.close()
    (s,) = ledger.status(path, "d")
    assert s.epsilon_remaining == pytest.approx(0.3)
    with pytest.raises(BudgetError):
        ledger.spend(path, "d", 0.31, 0.0)
    ledger.spend(path, "d", 0.3, 0.0)
    assert totals(path) == summed(path) == (Fraction(6, 10), 0, Fraction(4, 10), 0)
    no_entry_reads(monkeypatch)
    ledger.cancel(path, 2)  # in step again: no re-read
    monkeypatch.undo()
    assert totals(path) == summed(path) == (Fraction(6, 10), 0, 0, 0)


def test_a_damaged_entry_in_a_ledger_without_totals_is_refused_when_they_are_added(tmp_path):
    path = tmp_path / "old.db"
    ledger.init_ledger(path, "d", 1.0, 1e-5)
    ledger.spend(path, "d", 0.5, 0.0)
    con = sqlite3.connect(path)
    for (name,) in con.execute("SELECT name FROM sqlite_master WHERE type = 'trigger'").fetchall():
        con.execute(f"DROP TRIGGER {name}")
    con.execute("DROP TABLE totals")
    con.execute("DROP TABLE guard")
    con.execute("UPDATE entries SET epsilon = -1.0")
    con.commit()
    con.close()
    before = path.read_bytes()
    with pytest.raises(DataError, match="damaged.*epsilon -1.0"):
        ledger.spend(path, "d", 0.1, 0.0)
    assert path.read_bytes() == before

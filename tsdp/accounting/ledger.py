"""The privacy budget ledger: a total (epsilon, delta) per dataset, and every spend against it.

The ledger is one SQLite file (stdlib ``sqlite3``) that any number of processes may share. It
holds, per dataset name, a total budget ``(epsilon_total, delta_total)`` and a list of entries,
each ``pending`` (reserved by a command that has not published yet) or ``spent`` (released).

Composition rule
    Entries are combined by **basic composition**: the epsilons add up and the deltas add up.
    This is valid for any mix of mechanisms and definitions ((epsilon, delta)-DP and pure DP, with
    or without adaptivity), so the ledger never needs to know what was released. It is also loose:
    a tight accountant (``tsdp account compose``) can certify several Gaussian releases for less,
    and that smaller total may then be recorded with :func:`spend`.

Exact arithmetic
    Every amount is taken as the decimal number it is written as (the shortest ``repr`` of the
    float) and the sums are computed exactly with :class:`fractions.Fraction`. Ten spends of 0.1
    therefore reach a budget of 1.0 exactly, and a request that exceeds what remains by any
    representable amount, even one unit in the last place, is refused. No tolerance is needed; the
    difference between a float and its shortest decimal is below 2**-53 relative, far inside the
    1e-12 that float sums of budgets would otherwise call for.

Concurrency guarantee
    Every change runs in its own ``BEGIN IMMEDIATE`` transaction, which takes SQLite's write lock
    before reading, so "check what remains, then insert the reservation" is atomic: however many
    processes reserve at once, spent + pending never exceeds the total. A process that finds the
    ledger locked waits up to :data:`BUSY_TIMEOUT` seconds. Readers (:func:`status`) see a
    consistent snapshot. A command reserves before it touches the data, confirms after its output
    is published, and cancels if it fails in between; a process that is killed leaves its
    reservation pending, which keeps counting against the budget (the safe side) until a steward
    cancels it with ``tsdp ledger cancel``. A spent entry can never be cancelled.

Signals
    A Ctrl-C or SIGTERM must never leave a reservation pending behind a run that published
    nothing. Every write of a :func:`reservation` (reserve, confirm, reopen, cancel) runs inside
    :func:`tsdp.signals.held`, so such a signal is raised only once the transaction has ended and
    its result is known to the holder (the reservation's id is recorded as soon as its row is
    inserted, before the commit that may wait on another process's read transaction). The block
    then cancels what it holds. If the cancel itself fails (the ledger stayed locked for
    :data:`BUSY_TIMEOUT` seconds), the error that ends the run carries a note naming the entry to
    cancel by hand.

Running totals (why a spend costs the same with 10 or 10^6 entries)
    Each dataset has a row in ``totals`` with its exact spent and pending sums (fractions written
    as text), updated in the same transaction as every entry tsdp inserts, confirms, reopens or
    cancels. A spend reads that row, the budget and (through an index) any entry with the same
    output digest: O(log n), where it used to re-read and re-validate every entry.

    Why the totals are the entries' sums: they are made from the validated entries (when the
    file is created, or when a file made without them gets them on its first write), and every
    tsdp transaction changes an entry and its total together, under the write lock. So they can
    differ only after a change that was not tsdp's, and such changes are caught: SQLite triggers,
    which are part of the file and fire for every connection (the ``sqlite3`` shell, or an older
    tsdp, included), count each INSERT, UPDATE or DELETE on ``entries``, ``budgets`` and
    ``totals`` in ``guard.seen``. Each tsdp write transaction first checks ``seen == made`` and
    ends by setting ``made = seen``; holding the write lock throughout, every change in between
    is its own. Any other change leaves ``seen > made``, and the next write re-reads every entry
    exactly as every spend used to: an amount tsdp never writes (negative, text, infinite, delta
    outside [0, 1), unknown state) is refused as damaged (exit 4) with the same message, and
    otherwise the totals are set to the entries' exact sums again. The damaged-ledger detection
    is therefore the old one (``tsdp ledger show`` still re-sums every entry), at O(1) per spend
    while nothing else writes the file. A file whose triggers were dropped and guard rewritten
    is a deliberate forgery, which no check inside the file can stop. The budget row is checked
    on every spend, as before.

The file stores its layout version (:data:`SCHEMA`) in a ``meta`` table; a file without it is not
a tsdp ledger (:class:`~tsdp.errors.DataError`, exit 4). A missing ledger file or an unknown
dataset is a :class:`~tsdp.errors.UsageError` (exit 2); an exceeded budget a
:class:`~tsdp.errors.BudgetError` (exit 3).
"""

from __future__ import annotations

import contextlib
import math
import sqlite3
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Iterator

from tsdp import signals
from tsdp.accounting.ledger_layout import (  # noqa: F401  (SCHEMA, DatasetStatus: the callers' names)
    CREATE_TABLES as _CREATE, CREATE_TOTALS_AND_GUARD, SCHEMA, DatasetStatus, LedgerEntry,
    check_amount, check_dataset, exact_amount, is_real, utc_now, written)
from tsdp.errors import BudgetError, DataError, ResourceError, TsdpError, UsageError

BUSY_TIMEOUT = 30.0  # seconds a process waits for another one's transaction to finish


# ---------------------------------------------------------------------------------------------
# Public API
# ---------------------------------------------------------------------------------------------


def init_ledger(path: str | Path, dataset: str, epsilon: float, delta: float) -> None:
    """Create the ledger file if needed and register ``dataset`` with a total budget.

    A dataset that is already registered is refused: a budget never changes silently.
    """
    check_dataset(dataset)
    check_amount(epsilon, delta)
    with _transaction(path, create=True) as db:
        if _budget_row(db, dataset) is not None:
            raise UsageError(f"dataset {dataset!r} already has a budget in ledger {_name(path)!r}; "
                             "budgets are never changed: register the data under a new name")
        db.execute("INSERT INTO budgets VALUES (?, ?, ?, ?)", (dataset, float(epsilon), float(delta), utc_now()))
        db.execute("INSERT INTO totals VALUES (?, '0', '0', '0', '0')", (dataset,))


def reserve(path: str | Path, dataset: str, epsilon: float, delta: float, description: str = "") -> int:
    """Atomically check that the budget allows ``(epsilon, delta)`` and hold it as pending.

    Returns the reservation id, for :func:`confirm` or :func:`cancel`. Raises ``BudgetError`` when
    spent + pending + requested would exceed the total in epsilon or in delta.
    """
    return _add_entry(path, dataset, epsilon, delta, description, spent=False)


def confirm(path: str | Path, reservation_id: int, output_name: str | None = None,
            output_sha256: str | None = None) -> None:
    """Mark a pending reservation as spent, recording what was released."""
    with _transaction(path) as db:
        entry = _pending_row(db, path, reservation_id, "confirm")
        db.execute("UPDATE entries SET state = 'spent', output_name = ?, output_sha256 = ?, confirmed = ? "
                   "WHERE id = ?", (output_name, output_sha256, utc_now(), int(reservation_id)))
        _move(db, path, entry, "pending", "spent")


def reopen(path: str | Path, reservation_id: int, output_sha256: str | None) -> None:
    """Make an entry this process just confirmed pending again: its output could not be published
    after all (another process won the race for the name). Only the entry confirmed for exactly
    ``output_sha256`` is reopened; a steward's ``cancel`` of a spent entry stays impossible."""
    with _transaction(path) as db:
        row = db.execute(f"SELECT {_ENTRY_COLUMNS} FROM entries WHERE id = ? AND state = 'spent' "
                         "AND output_sha256 IS ?", (int(reservation_id), output_sha256)).fetchone()
        if row is None:
            return
        db.execute("UPDATE entries SET state = 'pending', output_name = NULL, output_sha256 = NULL, confirmed = NULL "
                   "WHERE id = ?", (int(reservation_id),))
        _move(db, path, LedgerEntry(*row), "spent", "pending")


def cancel(path: str | Path, reservation_id: int, missing_ok: bool = False) -> LedgerEntry | None:
    """Remove a pending reservation (nothing was published) and return it.

    Spent entries cannot be cancelled (``UsageError``); an unknown id is one too, unless
    ``missing_ok`` (a reservation whose transaction never committed: None is returned).
    """
    with _transaction(path) as db:
        if missing_ok and db.execute("SELECT 1 FROM entries WHERE id = ?", (int(reservation_id),)).fetchone() is None:
            return None
        entry = _pending_row(db, path, reservation_id, "cancel")
        db.execute("DELETE FROM entries WHERE id = ?", (entry.id,))
        _move(db, path, entry, "pending", None)
        return entry


def spend(path: str | Path, dataset: str, epsilon: float, delta: float, description: str = "",
          output_name: str | None = None, output_sha256: str | None = None) -> int:
    """Reserve and confirm in one transaction (a release made elsewhere, or a tsdp report).

    Returns the entry id. An output whose sha256 is already recorded for this dataset is refused:
    publishing the same bytes twice costs nothing more, and counting it twice would waste budget.
    """
    return _add_entry(path, dataset, epsilon, delta, description, spent=True,
                      output_name=output_name, output_sha256=output_sha256)


def status(path: str | Path, dataset: str | None = None) -> list[DatasetStatus]:
    """Every dataset's budget (or only ``dataset``'s), with its entries in the order made."""
    if dataset is not None:
        check_dataset(dataset)
    with _transaction(path, write=False) as db:
        names = [r[0] for r in db.execute("SELECT dataset FROM budgets ORDER BY dataset")]
        if dataset is not None:
            if dataset not in names:
                raise _unknown(path, dataset, names)
            names = [dataset]
        return [_status(db, name, path) for name in names]


@contextlib.contextmanager
def reservation(path: str | Path, dataset: str, epsilon: float, delta: float,
                description: str = "") -> Iterator["Reservation"]:
    """Hold ``(epsilon, delta)`` for the block; cancelled if the block fails before confirming.

    ``with reservation(...) as held: ...; publish(...); held.confirm(name, sha)``. A block that
    ends without confirming also cancels: nothing was published. A signal during the reservation
    is raised once its id is known, and cancels it like any failure (module docstring, Signals).
    """
    held = Reservation(path, None)
    try:
        with signals.held():
            _add_entry(path, dataset, epsilon, delta, description, spent=False, inserted=held.inserted)
        yield held
    except BaseException as exc:
        if held.id is not None and not held.confirmed:
            try:
                held.cancel()
            except TsdpError as failure:  # keep the original error; say what is left pending
                exc.add_note(f"ledger entry {held.id} of {_name(path)!r} is still pending ({failure}); free it "
                             f"with 'tsdp ledger cancel {_name(path)} {held.id}' once no other run holds it")
        raise
    if not held.confirmed:
        held.cancel()


@dataclass
class Reservation:
    """A pending reservation made by :func:`reservation` (``id`` None until its row is inserted)."""

    path: str | Path
    id: int | None
    confirmed: bool = False
    output_sha256: str | None = None

    def inserted(self, entry_id: int) -> None:
        """Record the id as soon as the row exists, before its transaction commits: a signal raised
        once the commit returns must find it here, to cancel it."""
        self.id = entry_id

    def confirm(self, output_name: str | None = None, output_sha256: str | None = None) -> None:
        # Marked before the database is written: a signal landing between the commit and these
        # assignments would otherwise leave a spent entry that unconfirm() does not reopen (the
        # output unpublished but charged). unconfirm() reopens only an entry spent with this digest.
        self.confirmed = True
        self.output_sha256 = output_sha256
        with signals.held():
            confirm(self.path, self.id, output_name, output_sha256)

    def unconfirm(self) -> None:
        """Undo :meth:`confirm` when the output could not be published after all (the block then
        cancels the reservation as if it had never been confirmed)."""
        with signals.held():
            reopen(self.path, self.id, self.output_sha256)
        self.confirmed = False

    def cancel(self) -> None:
        """Remove the pending entry (nothing was published); nothing to do if its reserving
        transaction was rolled back before it committed."""
        with signals.held():
            cancel(self.path, self.id, missing_ok=True)


# ---------------------------------------------------------------------------------------------
# Validation and arithmetic
# ---------------------------------------------------------------------------------------------


def _name(path: str | Path) -> str:
    return str(path)


# ---------------------------------------------------------------------------------------------
# SQLite
# ---------------------------------------------------------------------------------------------


@contextlib.contextmanager
def _transaction(path: str | Path, create: bool = False, write: bool = True) -> Iterator[sqlite3.Connection]:
    """A connection inside one transaction: ``BEGIN IMMEDIATE`` for writers, committed on success.

    ``create`` makes the file and its tables if needed; otherwise a missing file is a usage error.
    SQLite errors become tsdp errors with one-line messages naming the ledger.
    """
    p = Path(path)
    if p.is_dir():
        raise UsageError(f"ledger {_name(path)!r} is a directory, not a ledger file")
    if not create and not p.exists():
        raise UsageError(f"ledger file {_name(path)!r} does not exist; create it with "
                         "'tsdp ledger init LEDGER --dataset NAME --epsilon E --delta D'")
    if create and not p.parent.is_dir():
        raise UsageError(f"cannot create ledger {_name(path)!r}: directory {str(p.parent)!r} does not exist")
    uri = p.resolve().as_uri() + ("?mode=rwc" if create else "?mode=rw")
    try:
        db = sqlite3.connect(uri, uri=True, timeout=BUSY_TIMEOUT, isolation_level=None)
    except sqlite3.Error as exc:
        raise UsageError(f"cannot open ledger {_name(path)!r}: {exc}") from exc
    try:
        db.execute("BEGIN IMMEDIATE" if write else "BEGIN")
        try:
            _check_schema(db, path, create, write)
            if write:
                _check_guard(db, path)
            yield db
            if write:  # every change since the check was this transaction's own
                db.execute("UPDATE guard SET made = seen WHERE id = 0")
        except BaseException:
            if db.in_transaction:
                db.execute("ROLLBACK")
            raise
        db.execute("COMMIT")
    except sqlite3.OperationalError as exc:
        message = str(exc)
        if "locked" in message or "busy" in message:
            raise ResourceError(f"ledger {_name(path)!r} stayed locked by another process for "
                                f"{BUSY_TIMEOUT:g} s (a long transaction, e.g. an open 'sqlite3' shell); "
                                "try again once it ends") from exc
        if "full" in message:
            raise ResourceError(f"ledger {_name(path)!r}: {message}; free space on its disk") from exc
        if "readonly" in message:
            raise UsageError(f"ledger {_name(path)!r} is read-only; tsdp must be able to write it") from exc
        raise TsdpError(f"ledger {_name(path)!r}: {message}") from exc
    except sqlite3.DatabaseError as exc:  # not a database, or a damaged one
        raise _not_a_ledger(path, exc) from exc
    finally:
        db.close()


def _not_a_ledger(path: str | Path, exc: Exception) -> DataError:
    return DataError(f"{_name(path)!r} is not a readable tsdp ledger ({exc}); "
                     "give the file made by 'tsdp ledger init'")


def _check_schema(db: sqlite3.Connection, path: str | Path, create: bool, write: bool = False) -> None:
    tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    if not tables and create:
        for statement in _CREATE.split(";"):  # not executescript(), which would commit first
            if statement.strip():
                db.execute(statement)
        for statement in CREATE_TOTALS_AND_GUARD:
            db.execute(statement)
        db.execute("INSERT INTO meta VALUES ('schema', ?)", (SCHEMA,))
        return
    found = None
    if {"meta", "budgets", "entries"} <= tables:
        row = db.execute("SELECT value FROM meta WHERE key = 'schema'").fetchone()
        found = row[0] if row else None
    if found == SCHEMA and not {"totals", "guard"} & tables:
        if write:  # a file made before the running totals: they are added by its first write
            _upgrade(db, path)
        return
    if found == SCHEMA and not {"totals", "guard"} <= tables:
        raise _damaged(path, "half of its running-total tables are missing")
    if found != SCHEMA:
        what = f"its layout is {found!r}, this tsdp reads {SCHEMA!r}" if found else "it has no tsdp ledger tables"
        raise DataError(f"{_name(path)!r} is not a tsdp ledger ({what}); give the file made by 'tsdp ledger init'")


def _upgrade(db: sqlite3.Connection, path: str | Path) -> None:
    """Add the running totals to a file made without them, summed from validated entries."""
    for statement in CREATE_TOTALS_AND_GUARD:
        db.execute(statement)
    for (dataset,) in db.execute("SELECT dataset FROM budgets").fetchall():
        _budget_row(db, dataset, path)
        db.execute("INSERT INTO totals VALUES (?, '0', '0', '0', '0')", (dataset,))
        _store_totals(db, dataset, _sums(db, dataset, path))
    db.execute("UPDATE guard SET made = seen WHERE id = 0")


def _check_guard(db: sqlite3.Connection, path: str | Path) -> None:
    """Re-read every entry when something other than tsdp wrote the file since tsdp last did: an
    amount tsdp never writes is refused, and the running totals become the entries' exact sums
    again (the module docstring says why this keeps the old detection); O(1) otherwise."""
    row = db.execute("SELECT seen, made FROM guard WHERE id = 0").fetchone()
    if row is None or not all(isinstance(v, int) for v in row):
        raise _damaged(path, f"its change counter reads {row!r}")
    if row[0] == row[1]:
        return
    for (dataset,) in db.execute("SELECT dataset FROM budgets").fetchall():
        _budget_row(db, dataset, path)
        sums = _sums(db, dataset, path)
        if db.execute("SELECT 1 FROM totals WHERE dataset = ?", (dataset,)).fetchone() is None:
            db.execute("INSERT INTO totals VALUES (?, '0', '0', '0', '0')", (dataset,))
        _store_totals(db, dataset, sums)
    known = {r[0] for r in db.execute("SELECT dataset FROM budgets")}
    strays = [r[0] for r in db.execute("SELECT DISTINCT dataset FROM entries") if r[0] not in known]
    if strays:
        raise _damaged(path, f"entries of dataset {strays[0]!r}, which has no budget")


_TOTAL_COLUMNS = "epsilon_spent, delta_spent, epsilon_pending, delta_pending"


def _totals(db: sqlite3.Connection, dataset: str, path: str | Path) -> dict[str, tuple[Fraction, Fraction]]:
    """The running (epsilon, delta) totals per state of a dataset, exact."""
    row = db.execute(f"SELECT {_TOTAL_COLUMNS} FROM totals WHERE dataset = ?", (dataset,)).fetchone()
    if row is None:
        raise _damaged(path, f"dataset {dataset!r} has no running totals")
    try:
        values = [Fraction(v) for v in row]
    except (TypeError, ValueError, ZeroDivisionError):
        raise _damaged(path, f"the running totals of dataset {dataset!r} read {row!r}") from None
    if min(values) < 0:
        raise _damaged(path, f"the running totals of dataset {dataset!r} read {row!r}")
    return {"spent": (values[0], values[1]), "pending": (values[2], values[3])}


def _store_totals(db: sqlite3.Connection, dataset: str, sums: dict[str, tuple[Fraction, Fraction]]) -> None:
    values = [str(v) for state in ("spent", "pending") for v in sums[state]]
    db.execute("UPDATE totals SET epsilon_spent = ?, delta_spent = ?, epsilon_pending = ?, delta_pending = ? "
               "WHERE dataset = ?", (*values, dataset))


def _move(db: sqlite3.Connection, path: str | Path, entry: LedgerEntry, source: str, target: str | None) -> None:
    """Move ``entry``'s amounts from the ``source`` running total to ``target`` (None: removed)."""
    _check_stored(path, f"entry {entry.id} of dataset {entry.dataset!r}", entry.epsilon, entry.delta)
    sums = _totals(db, entry.dataset, path)
    amount = (exact_amount(entry.epsilon), exact_amount(entry.delta))
    left = tuple(sums[source][i] - amount[i] for i in (0, 1))
    if min(left) < 0:
        raise _damaged(path, f"entry {entry.id} of dataset {entry.dataset!r} is larger than the running "
                             f"{source} total it belongs to")
    sums[source] = left
    if target is not None:
        sums[target] = tuple(sums[target][i] + amount[i] for i in (0, 1))
    _store_totals(db, entry.dataset, sums)


def _budget_row(db: sqlite3.Connection, dataset: str, path: str | Path | None = None):
    """The dataset's (epsilon_total, delta_total, created), or None; totals checked when ``path`` is given."""
    row = db.execute("SELECT epsilon_total, delta_total, created FROM budgets WHERE dataset = ?",
                     (dataset,)).fetchone()
    if row is not None and path is not None:
        _check_stored(path, f"the budget of dataset {dataset!r}", row[0], row[1])
    return row


def _unknown(path: str | Path, dataset: str, names: list[str]) -> UsageError:
    known = ", ".join(repr(n) for n in names) if names else "none"
    return UsageError(f"dataset {dataset!r} is not in ledger {_name(path)!r} (known: {known}); "
                      "register it with 'tsdp ledger init'")


_ENTRY_COLUMNS = ("id, dataset, created, epsilon, delta, state, description, output_name, output_sha256, "
                  "confirmed")


def _pending_row(db: sqlite3.Connection, path: str | Path, reservation_id: int, action: str) -> LedgerEntry:
    in_range = -2**63 <= int(reservation_id) < 2**63  # SQLite's INTEGER: no entry can have another id
    row = db.execute(f"SELECT {_ENTRY_COLUMNS} FROM entries WHERE id = ?", (int(reservation_id),)).fetchone() \
        if in_range else None
    if row is None:
        raise UsageError(f"ledger {_name(path)!r} has no entry {reservation_id}")
    entry = LedgerEntry(*row)
    if entry.state != "pending":
        raise UsageError(f"entry {reservation_id} of ledger {_name(path)!r} is already spent; "
                         f"a spent entry cannot be {'cancelled' if action == 'cancel' else 'confirmed again'}")
    return entry


def _sums(db: sqlite3.Connection, dataset: str, path: str | Path) -> dict[str, tuple[Fraction, Fraction]]:
    """Exact (epsilon, delta) sums per state for a dataset; a stored amount tsdp could not have
    written (a hand edit) is refused, never summed: a negative one would free budget."""
    sums = {"pending": (Fraction(0), Fraction(0)), "spent": (Fraction(0), Fraction(0))}
    for entry, eps, delta, state in db.execute("SELECT id, epsilon, delta, state FROM entries WHERE dataset = ?",
                                               (dataset,)):
        where = f"entry {entry} of dataset {dataset!r}"
        _check_stored(path, where, eps, delta)
        if state not in sums:
            raise _damaged(path, f"{where} has state {state!r}, not 'pending' or 'spent'")
        e, d = sums[state]
        sums[state] = (e + exact_amount(eps), d + exact_amount(delta))
    return sums


def _check_stored(path: str | Path, where: str, epsilon: object, delta: object) -> None:
    """Refuse amounts read back from the file that no tsdp call stores (see :func:`_check_amount`)."""
    if not (is_real(epsilon) and math.isfinite(epsilon) and epsilon >= 0):
        raise _damaged(path, f"{where} has epsilon {epsilon!r}, not a finite number >= 0")
    if not (is_real(delta) and math.isfinite(delta) and 0 <= delta < 1):
        raise _damaged(path, f"{where} has delta {delta!r}, not a number in [0, 1)")


def _damaged(path: str | Path, what: str) -> DataError:
    return DataError(f"ledger {_name(path)!r} is damaged: {what} (tsdp never writes this; the file was edited by "
                     "hand or corrupted); restore it from a backup")


def _add_entry(path: str | Path, dataset: str, epsilon: float, delta: float, description: str,
               spent: bool, output_name: str | None = None, output_sha256: str | None = None,
               inserted=None) -> int:
    """Insert an entry after checking the budget, in one write transaction; ``inserted(id)`` is
    called as soon as the row exists (before the commit)."""
    check_dataset(dataset)
    check_amount(epsilon, delta)
    with _transaction(path) as db:
        budget = _budget_row(db, dataset, path)
        if budget is None:
            raise _unknown(path, dataset, [r[0] for r in db.execute("SELECT dataset FROM budgets ORDER BY dataset")])
        if output_sha256:
            same = db.execute("SELECT id FROM entries WHERE dataset = ? AND output_sha256 = ?",
                              (dataset, output_sha256)).fetchone()
            if same is not None:
                raise UsageError(f"output {output_name or output_sha256!r} is already recorded for dataset "
                                 f"{dataset!r} as entry {same[0]} of ledger {_name(path)!r}; it is charged already")
        sums = _totals(db, dataset, path)
        used = [sums["spent"][i] + sums["pending"][i] for i in (0, 1)]
        remaining = [exact_amount(budget[i]) - used[i] for i in (0, 1)]
        if exact_amount(epsilon) > remaining[0] or exact_amount(delta) > remaining[1]:
            pending = sums["pending"]
            raise BudgetError(
                f"privacy budget of dataset {dataset!r} exceeded: requested epsilon {written(epsilon)}, "
                f"delta {written(delta)} but only epsilon {written(remaining[0])}, delta {written(remaining[1])} "
                f"remain of epsilon {written(budget[0])}, delta {written(budget[1])}"
                + (f" (epsilon {written(pending[0])}, delta {written(pending[1])} of it reserved by commands "
                   "still running)" if any(pending) else "")
                + f" in ledger {_name(path)!r}; see 'tsdp ledger show'")
        now = utc_now()
        cursor = db.execute(
            "INSERT INTO entries (dataset, created, epsilon, delta, state, description, output_name, "
            "output_sha256, confirmed) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (dataset, now, float(epsilon), float(delta), "spent" if spent else "pending", description or "",
             output_name, output_sha256, now if spent else None))
        if inserted is not None:
            inserted(int(cursor.lastrowid))
        state = "spent" if spent else "pending"
        sums[state] = (sums[state][0] + exact_amount(epsilon), sums[state][1] + exact_amount(delta))
        _store_totals(db, dataset, sums)
        return int(cursor.lastrowid)


def _status(db: sqlite3.Connection, dataset: str, path: str | Path) -> DatasetStatus:
    eps_total, delta_total, created = _budget_row(db, dataset, path)
    sums = _sums(db, dataset, path)
    (es, ds), (ep, dp) = sums["spent"], sums["pending"]
    entries = tuple(LedgerEntry(*row) for row in db.execute(
        f"SELECT {_ENTRY_COLUMNS} FROM entries WHERE dataset = ? ORDER BY id", (dataset,)))
    return DatasetStatus(
        dataset=dataset, created=created, epsilon_total=eps_total, delta_total=delta_total,
        epsilon_spent=float(es), delta_spent=float(ds), epsilon_pending=float(ep), delta_pending=float(dp),
        epsilon_remaining=float(exact_amount(eps_total) - es - ep), delta_remaining=float(exact_amount(delta_total) - ds - dp),
        entries=entries,
    )

"""The budget ledger: validation, exact budget arithmetic, reservations, and concurrent processes."""

from __future__ import annotations

import math
import multiprocessing
import queue
import sqlite3
import tempfile
import time
import warnings
from datetime import datetime, timezone
from fractions import Fraction
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tsdp.accounting import ledger
from tsdp.errors import BudgetError, DataError, UsageError


@pytest.fixture
def db(tmp_path) -> Path:
    """A ledger with dataset 'd': epsilon 1.0, delta 1e-5."""
    path = tmp_path / "budget.db"
    ledger.init_ledger(path, "d", 1.0, 1e-5)
    return path


def one(path, dataset="d") -> ledger.DatasetStatus:
    (s,) = ledger.status(path, dataset)
    return s


# ---------------------------------------------------------------------------------------------
# Validation
# ---------------------------------------------------------------------------------------------

BAD_NAMES = ["", "   ", " d", "d ", "a\nb", "tab\there", None, 3]
BAD_AMOUNTS = [  # (epsilon, delta, needle)
    (math.nan, 0.0, "--epsilon"), (math.inf, 0.0, "--epsilon"), (-0.1, 0.0, "--epsilon"),
    ("0.1", 0.0, "--epsilon"), (0.1, -1e-9, "--delta"), (0.1, 1.0, "--delta"), (0.1, 1.5, "--delta"),
    (0.1, math.nan, "--delta"), (0.1, None, "--delta"),
]


@pytest.mark.parametrize("name", BAD_NAMES)
def test_init_refuses_bad_dataset_names_and_creates_nothing(tmp_path, name):
    with pytest.raises(UsageError, match="--dataset"):
        ledger.init_ledger(tmp_path / "l.db", name, 1.0, 0.0)
    assert not (tmp_path / "l.db").exists()


@pytest.mark.parametrize("eps, delta, needle", BAD_AMOUNTS)
def test_init_refuses_bad_budgets_and_creates_nothing(tmp_path, eps, delta, needle):
    with pytest.raises(UsageError, match=needle):
        ledger.init_ledger(tmp_path / "l.db", "d", eps, delta)
    assert not (tmp_path / "l.db").exists()


@pytest.mark.parametrize("op", ["reserve", "spend"])
@pytest.mark.parametrize("eps, delta, needle", BAD_AMOUNTS)
def test_spends_refuse_bad_amounts(db, op, eps, delta, needle):
    with pytest.raises(UsageError, match=needle):
        getattr(ledger, op)(db, "d", eps, delta, "x")
    assert one(db).entries == ()


@pytest.mark.parametrize("op", ["reserve", "spend"])
@pytest.mark.parametrize("name", BAD_NAMES)
def test_spends_refuse_bad_dataset_names(db, op, name):
    with pytest.raises(UsageError, match="--dataset"):
        getattr(ledger, op)(db, name, 0.1, 0.0, "x")


def test_zero_budget_and_zero_spends_are_valid(tmp_path):
    path = tmp_path / "l.db"
    ledger.init_ledger(path, "nothing", 0.0, 0.0)
    ledger.spend(path, "nothing", 0.0, 0.0, "a release that reveals nothing")
    with pytest.raises(BudgetError):
        ledger.reserve(path, "nothing", 5e-324, 0.0)


@pytest.mark.parametrize("call", [
    lambda p: ledger.reserve(p, "d", 0.1, 0.0),
    lambda p: ledger.spend(p, "d", 0.1, 0.0),
    lambda p: ledger.confirm(p, 1),
    lambda p: ledger.cancel(p, 1),
    lambda p: ledger.status(p),
])
def test_missing_ledger_file_is_a_usage_error_and_is_not_created(tmp_path, call):
    path = tmp_path / "nope.db"
    with pytest.raises(UsageError, match=r"ledger file '.*nope\.db' does not exist.*tsdp ledger init"):
        call(path)
    assert not path.exists()


def test_a_directory_is_not_a_ledger(tmp_path):
    for call in (lambda: ledger.status(tmp_path), lambda: ledger.init_ledger(tmp_path, "d", 1, 0)):
        with pytest.raises(UsageError, match="is a directory"):
            call()


def test_init_in_a_missing_directory(tmp_path):
    with pytest.raises(UsageError, match="does not exist"):
        ledger.init_ledger(tmp_path / "no" / "l.db", "d", 1.0, 0.0)


def test_unknown_dataset_is_a_usage_error_naming_it(db):
    ledger.init_ledger(db, "other", 1.0, 0.0)
    for call in (lambda: ledger.reserve(db, "nope", 0.1, 0), lambda: ledger.spend(db, "nope", 0.1, 0),
                 lambda: ledger.status(db, "nope")):
        with pytest.raises(UsageError, match=r"dataset 'nope' is not in ledger .*known: 'd', 'other'"):
            call()


@pytest.mark.parametrize("content", [b"time,value\n2024-01-01,3\n", b"\x00" * 4096])
def test_a_file_that_is_not_a_database_is_a_data_error(tmp_path, content):
    path = tmp_path / "l.db"
    path.write_bytes(content)
    for call in (lambda: ledger.status(path), lambda: ledger.reserve(path, "d", 0.1, 0),
                 lambda: ledger.init_ledger(path, "d", 1, 0)):
        with pytest.raises(DataError, match="not a"):
            call()
    assert path.read_bytes() == content


def test_another_sqlite_database_is_not_a_ledger(tmp_path):
    path = tmp_path / "other.db"
    with sqlite3.connect(path) as con:
        con.execute("CREATE TABLE t (x)")
    con.close()
    before = path.read_bytes()
    for call in (lambda: ledger.status(path), lambda: ledger.init_ledger(path, "d", 1, 0)):
        with pytest.raises(DataError, match="is not a tsdp ledger.*no tsdp ledger tables"):
            call()
    assert path.read_bytes() == before


def test_an_empty_file_is_not_a_ledger_until_init(tmp_path):
    path = tmp_path / "l.db"
    path.touch()
    with pytest.raises(DataError, match="not a tsdp ledger"):
        ledger.status(path)
    ledger.init_ledger(path, "d", 1.0, 0.0)
    assert one(path).epsilon_total == 1.0


def test_the_schema_version_is_stored_and_checked(db):
    with sqlite3.connect(db) as con:
        assert con.execute("SELECT value FROM meta WHERE key = 'schema'").fetchone() == (ledger.SCHEMA,)
        con.execute("UPDATE meta SET value = 'tsdp-ledger/99' WHERE key = 'schema'")
    con.close()
    with pytest.raises(DataError, match="tsdp-ledger/99"):
        ledger.status(db)


def test_a_budget_never_changes(db):
    with pytest.raises(UsageError, match="'d' already has a budget"):
        ledger.init_ledger(db, "d", 100.0, 0.5)
    assert (one(db).epsilon_total, one(db).delta_total) == (1.0, 1e-5)


def test_several_datasets_have_separate_budgets(db):
    ledger.init_ledger(db, "e", 2.0, 0.0)
    ledger.spend(db, "d", 1.0, 1e-5)
    ledger.spend(db, "e", 2.0, 0.0)
    assert [s.dataset for s in ledger.status(db)] == ["d", "e"]
    assert one(db, "e").epsilon_remaining == 0.0


# ---------------------------------------------------------------------------------------------
# Budget arithmetic
# ---------------------------------------------------------------------------------------------


def test_ten_tenths_reach_the_total_exactly_and_nothing_more_fits(db):
    for _ in range(10):
        ledger.spend(db, "d", 0.1, 1e-6)
    s = one(db)
    assert (s.epsilon_spent, s.delta_spent) == (1.0, 1e-5)
    assert (s.epsilon_remaining, s.delta_remaining) == (0.0, 0.0)
    for eps, delta in ((5e-324, 0.0), (0.0, 5e-324), (1e-12, 0.0)):
        with pytest.raises(BudgetError):
            ledger.reserve(db, "d", eps, delta)
    ledger.spend(db, "d", 0.0, 0.0)  # a zero spend still fits


@pytest.mark.parametrize("spent, total", [(0.3, 1.0), (0.7, 1.0), (1.0, 3.0), (0.1, 0.30000000000000004)])
def test_exactly_the_remainder_fits_and_one_ulp_more_does_not(tmp_path, spent, total):
    path = tmp_path / "l.db"
    ledger.init_ledger(path, "d", total, 0.0)
    ledger.spend(path, "d", spent, 0.0)
    rest = float(Fraction(repr(total)) - Fraction(repr(spent)))
    with pytest.raises(BudgetError):
        ledger.reserve(path, "d", math.nextafter(rest, math.inf), 0.0)
    ledger.reserve(path, "d", rest, 0.0)
    assert one(path).epsilon_remaining == 0.0


def test_delta_is_checked_on_its_own(db):
    ledger.spend(db, "d", 0.1, 3e-6)
    with pytest.raises(BudgetError, match="delta"):
        ledger.reserve(db, "d", 0.1, math.nextafter(7e-6, 1.0))
    ledger.reserve(db, "d", 0.1, 7e-6)
    assert one(db).delta_remaining == 0.0


def test_budget_error_names_dataset_request_and_remainder(db):
    ledger.spend(db, "d", 0.75, 2e-6)
    ledger.reserve(db, "d", 0.125, 0.0)
    with pytest.raises(BudgetError) as info:
        ledger.reserve(db, "d", 0.25, 1e-6)
    message = str(info.value)
    assert "\n" not in message
    for needle in ("dataset 'd'", "requested epsilon 0.25, delta 1e-06", "only epsilon 0.125, delta 8e-06",
                   "of epsilon 1.0, delta 1e-05", "epsilon 0.125, delta 0.0 of it reserved", "budget.db"):
        assert needle in message, needle
    assert info.value.exit_code == 3


@settings(max_examples=25, deadline=None)
@given(total=st.integers(0, 200), requests=st.lists(st.integers(0, 80), max_size=8))
def test_accepted_spends_never_exceed_the_total(total, requests):
    """Amounts k/100 as floats: a request is accepted exactly when the decimal sum still fits."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "l.db"
        ledger.init_ledger(path, "d", total / 100, 0.0)
        used = 0
        for k in requests:
            if used + k <= total:
                ledger.spend(path, "d", k / 100, 0.0)
                used += k
            else:
                with pytest.raises(BudgetError):
                    ledger.spend(path, "d", k / 100, 0.0)
        s = one(path)
        assert Fraction(repr(s.epsilon_spent)) == Fraction(used, 100)
        assert Fraction(repr(s.epsilon_remaining)) == Fraction(total - used, 100)


# ---------------------------------------------------------------------------------------------
# Reservations
# ---------------------------------------------------------------------------------------------


def test_reservations_count_against_the_budget_and_cancel_frees_them(db):
    first = ledger.reserve(db, "d", 0.6, 0.0, "running")
    with pytest.raises(BudgetError, match="reserved by commands still running"):
        ledger.reserve(db, "d", 0.5, 0.0)
    s = one(db)
    assert (s.epsilon_pending, s.epsilon_spent, s.epsilon_remaining) == (0.6, 0.0, 0.4)
    cancelled = ledger.cancel(db, first)
    assert (cancelled.id, cancelled.state, cancelled.epsilon) == (first, "pending", 0.6)
    assert one(db).entries == ()
    ledger.reserve(db, "d", 0.5, 0.0)


def test_confirm_marks_spent_with_the_output_and_cannot_be_cancelled(db):
    rid = ledger.reserve(db, "d", 0.25, 1e-6, "release x")
    ledger.confirm(db, rid, "out.csv", "ab" * 32)
    (entry,) = one(db).entries
    assert (entry.state, entry.output_name, entry.output_sha256, entry.description) == \
        ("spent", "out.csv", "ab" * 32, "release x")
    assert one(db).epsilon_spent == 0.25
    with pytest.raises(UsageError, match="already spent.*cannot be cancelled"):
        ledger.cancel(db, rid)
    with pytest.raises(UsageError, match="already spent"):
        ledger.confirm(db, rid)
    spent = ledger.spend(db, "d", 0.25, 0.0)
    with pytest.raises(UsageError, match="cannot be cancelled"):
        ledger.cancel(db, spent)
    assert one(db).epsilon_spent == 0.5


def test_unknown_or_cancelled_ids(db):
    rid = ledger.reserve(db, "d", 0.1, 0.0)
    ledger.cancel(db, rid)
    for call in (lambda: ledger.cancel(db, rid), lambda: ledger.confirm(db, rid), lambda: ledger.cancel(db, 999)):
        with pytest.raises(UsageError, match="has no entry"):
            call()
    assert ledger.reserve(db, "d", 0.1, 0.0) != rid  # ids are never reused


def test_the_same_output_is_not_charged_twice_to_one_dataset(db):
    ledger.init_ledger(db, "e", 1.0, 0.0)
    ledger.spend(db, "d", 0.1, 0.0, output_name="o.csv", output_sha256="c" * 64)
    with pytest.raises(UsageError, match="'o.csv' is already recorded for dataset 'd' as entry 1"):
        ledger.spend(db, "d", 0.1, 0.0, output_name="o.csv", output_sha256="c" * 64)
    ledger.spend(db, "e", 0.1, 0.0, output_name="o.csv", output_sha256="c" * 64)


def test_status_lists_entries_with_utc_times(db):
    a = ledger.spend(db, "d", 0.1, 0.0, "outside release")
    b = ledger.reserve(db, "d", 0.2, 1e-6, "running")
    s = one(db)
    assert [(e.id, e.state, e.description) for e in s.entries] == [(a, "spent", "outside release"),
                                                                   (b, "pending", "running")]
    t = datetime.fromisoformat(s.entries[0].time)
    assert t.tzinfo is not None and t.utcoffset().total_seconds() == 0
    assert abs((datetime.now(timezone.utc) - t).total_seconds()) < 60
    d = s.to_dict()
    assert d["entries"][1]["state"] == "pending" and d["epsilon_pending"] == 0.2


class Boom(Exception):
    pass


def test_reservation_block_cancels_on_failure_and_keeps_a_confirmed_spend(db):
    with pytest.raises(Boom):
        with ledger.reservation(db, "d", 0.5, 0.0, "fails") as held:
            assert one(db).epsilon_pending == 0.5
            raise Boom
    assert one(db).entries == ()
    with ledger.reservation(db, "d", 0.5, 0.0, "unconfirmed"):
        pass
    assert one(db).entries == ()  # nothing was confirmed, so nothing was published
    with pytest.raises(Boom):
        with ledger.reservation(db, "d", 0.5, 0.0, "published") as held:
            held.confirm("o.csv", "f" * 64)
            raise Boom  # after publishing: the spend stays
    assert one(db).epsilon_spent == 0.5 and one(db).epsilon_pending == 0.0
    with pytest.raises(KeyboardInterrupt):
        with ledger.reservation(db, "d", 0.25, 0.0, "interrupted"):
            raise KeyboardInterrupt
    assert len(one(db).entries) == 1
    with pytest.raises(BudgetError):
        with ledger.reservation(db, "d", 0.75, 0.0):
            pytest.fail("the block must not run when the budget is refused")


def test_signal_right_after_the_confirm_commit_leaves_no_spend(db, monkeypatch):
    """A signal (SIGTERM unwinds as an exception) landing after confirm() committed but before it
    returned: the publisher's revert must still find the reservation confirmed and reopen it, so
    the block cancels it; a spent entry with no published output would be charged for nothing."""
    real = ledger.confirm

    def confirm_then_signal(*args, **kwargs):
        real(*args, **kwargs)
        raise KeyboardInterrupt

    monkeypatch.setattr(ledger, "confirm", confirm_then_signal)
    with pytest.raises(KeyboardInterrupt):
        with ledger.reservation(db, "d", 0.5, 0.0, "signalled") as held:
            try:
                held.confirm("o.csv", "a" * 64)  # as tsdp.cli.common.publish's before_commit hook
            except BaseException:
                if held.confirmed:  # as the hook's revert()
                    held.unconfirm()
                raise
    assert one(db).entries == ()


# ---------------------------------------------------------------------------------------------
# Concurrency: many processes at once
# ---------------------------------------------------------------------------------------------

N_PROCESSES = 16
MODES = ("reserve", "spend", "reserve+confirm", "reserve")


def _contend(path, barrier, results, worker):
    """One process: in each round, wait for all the others, then try to take 0.1 of 1.0."""
    for round_, mode in enumerate(MODES):
        barrier.wait(timeout=60)
        dataset = f"round{round_}"
        try:
            if mode == "spend":
                rid = ledger.spend(path, dataset, 0.1, 1e-7, f"worker {worker}")
            else:
                rid = ledger.reserve(path, dataset, 0.1, 1e-7, f"worker {worker}")
                if mode == "reserve+confirm":
                    ledger.confirm(path, rid, f"out{worker}.csv", None)
            results.put((round_, "ok", rid))
        except BudgetError:
            results.put((round_, "budget", None))
        except Exception as exc:  # reported, so that the test fails with the reason
            results.put((round_, "error", repr(exc)))


@pytest.mark.skipif("fork" not in multiprocessing.get_all_start_methods(), reason="needs fork")
def test_concurrent_processes_never_overspend(tmp_path):
    path = tmp_path / "budget.db"
    for round_ in range(len(MODES)):
        ledger.init_ledger(path, f"round{round_}", 1.0, 1e-6)
    ctx = multiprocessing.get_context("fork")
    barrier, results = ctx.Barrier(N_PROCESSES), ctx.Queue()
    with warnings.catch_warnings():  # Python 3.12+ warns about fork() in a threaded process
        warnings.simplefilter("ignore", DeprecationWarning)
        procs = [ctx.Process(target=_contend, args=(path, barrier, results, i)) for i in range(N_PROCESSES)]
        for p in procs:
            p.start()
    got, deadline = [], time.monotonic() + 120
    while len(got) < N_PROCESSES * len(MODES) and time.monotonic() < deadline:
        for s in ledger.status(path):  # a reader watching while the writers race
            used = Fraction(repr(s.epsilon_spent)) + Fraction(repr(s.epsilon_pending))
            assert used <= 1 and s.epsilon_remaining >= 0 and s.delta_remaining >= 0
        try:
            got.append(results.get(timeout=0.05))
        except queue.Empty:
            pass
    for p in procs:
        p.join(timeout=30)
    assert all(p.exitcode == 0 for p in procs)
    assert [g for g in got if g[1] == "error"] == []
    for round_, mode in enumerate(MODES):
        outcomes = [g for g in got if g[0] == round_]
        assert len(outcomes) == N_PROCESSES
        ids = [rid for _, outcome, rid in outcomes if outcome == "ok"]
        assert len(ids) == 10 and len(set(ids)) == 10, (mode, outcomes)
        s = one(path, f"round{round_}")
        assert s.epsilon_spent + s.epsilon_pending == 1.0 and s.epsilon_remaining == 0.0
        assert s.delta_remaining == 0.0
        assert sorted(e.id for e in s.entries) == sorted(ids)
        assert {e.state for e in s.entries} == {"pending" if mode == "reserve" else "spent"}

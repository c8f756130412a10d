"""Holding off Ctrl-C and SIGTERM over a short critical section (a budget ledger transaction).

A signal handler that raises (``KeyboardInterrupt`` for Ctrl-C, ``Terminated`` for SIGTERM in the
``tsdp`` executable) can interrupt any Python line. Around a ledger transaction that is unsafe: a
reservation committed just before the exception is raised never reaches the code that would cancel
it, and a cancel interrupted half-way is rolled back, so the budget stays reserved although nothing
was published. Code that must not be cut in two runs inside :func:`held`; the handlers the
executable installs (:mod:`tsdp.cli.termination`) call :func:`defer` first, and a signal that
arrives inside the block is raised as the block ends instead.

The state is the process's (signals are handled in the main thread); nested blocks raise at the
outermost end. Without such handlers (tsdp used as a library) the block changes nothing.

The commit window: a command that publishes calls :func:`begin_commit` just before the ledger
confirms its spend and its files are moved into place (:func:`tsdp.io.outputs.publish`, the stream's
append), and :func:`abandon_commit` if that fails. From the commit point a SIGTERM is remembered
(:func:`defer_past_commit`), not raised, so that the exit code and the message never say "nothing
was published" about a published set.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

_state: dict = {"depth": 0, "pending": None, "committing": False, "deferred": False}


@contextlib.contextmanager
def held() -> Iterator[None]:
    """Run the block without interruption by a handler that calls :func:`defer`; a signal that
    arrived meanwhile is raised when the outermost block ends (from the block's own exception, if
    it failed)."""
    _state["depth"] += 1
    try:
        yield
    finally:
        _state["depth"] -= 1
        pending = _state["pending"] if _state["depth"] == 0 else None
        if pending is not None:
            _state["pending"] = None
            raise pending()


def defer(exception: type[BaseException]) -> bool:
    """For a signal handler: inside :func:`held`, remember ``exception`` (the first one wins) and
    return True; outside, return False (the handler then raises it itself)."""
    if _state["depth"] == 0:
        return False
    if _state["pending"] is None:
        _state["pending"] = exception
    return True


def begin_commit() -> None:
    """The commit point: called just before the ledger confirms the spend and the files are moved
    into place. From here a SIGTERM is remembered, not raised (see the module docstring)."""
    _state["committing"] = True


def abandon_commit() -> None:
    """The commit failed and its files were taken back: a SIGTERM stops the run again."""
    _state["committing"] = False


def committed() -> bool:
    """Whether the run has passed the commit point (its files are published or being published)."""
    return _state["committing"]


def deferred_sigterm() -> bool:
    """Whether a SIGTERM arrived after the commit point (the run completed regardless)."""
    return _state["deferred"]


def defer_past_commit() -> bool:
    """For the SIGTERM handler: past the commit point, remember the signal and return True (the run
    completes); before it, return False."""
    if _state["committing"]:
        _state["deferred"] = True
    return _state["committing"]


def reset_commit(installed: bool) -> None:
    """A fresh commit window when the handlers are installed (``installed``) or removed."""
    _state["committing"] = False
    if installed:
        _state["deferred"] = False

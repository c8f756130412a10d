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
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

_state: dict = {"depth": 0, "pending": None}


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

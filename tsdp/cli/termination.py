"""SIGTERM handling for the ``tsdp`` executable (cron, systemd and ``timeout`` send it).

Before the commit point a SIGTERM unwinds the run like Ctrl-C (:class:`Terminated`): every ``with``
block cleans up, so temporary files are removed and a ledger reservation is cancelled, and the
exit code is 143. From the commit point on (the ledger confirms the spend and the files are moved
into place) the run is no longer stopped: a SIGTERM there is remembered, not raised, so that the
exit code and the message never say "nothing was published" about a published pair. If the
commit itself fails, the run unwinds with that failure's own error as before.

Both SIGTERM and Ctrl-C (SIGINT) wait for a budget ledger transaction in progress to end
(:func:`tsdp.signals.held`): raised in the middle of one, they could leave a reservation pending
that nothing cancels.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator

from tsdp import signals


class Terminated(BaseException):
    """SIGTERM arrived before the commit point: unwinds like KeyboardInterrupt; exit 143."""


INTERRUPTED = 130  # the exit code of a run stopped by Ctrl-C


class Interrupted(BaseException):
    """Ctrl-C inside a command, once the command has unwound (its clean-up done): carried past Typer,
    which would turn the ``KeyboardInterrupt`` into a silent exit 130, to the one ``error:`` line of
    :func:`tsdp.cli.app.main` (with the exception's notes, e.g. a ledger entry left pending)."""

    @classmethod
    def of(cls, interrupt: KeyboardInterrupt) -> "Interrupted":
        carried = cls()
        for note in getattr(interrupt, "__notes__", ()):
            carried.add_note(note)
        return carried


@contextlib.contextmanager
def terminate_on_sigterm() -> Iterator[None]:
    """Raise :class:`Terminated` on the first SIGTERM before the commit point (:func:`tsdp.signals.begin_commit`), ignore further ones;
    raise ``KeyboardInterrupt`` on Ctrl-C as Python does. Either waits for a ledger transaction in
    progress to end (:func:`tsdp.signals.held`).

    Installed only in the main thread (where Python runs signal handlers); the previous handlers
    are restored afterwards, so embedding ``main()`` leaves no trace.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def on_sigterm(signum, frame):
        signal.signal(signal.SIGTERM, signal.SIG_IGN)  # a second SIGTERM must not interrupt the clean-up
        if signals.defer_past_commit():
            return
        if not signals.defer(Terminated):
            raise Terminated()

    def on_sigint(signum, frame):
        if not signals.defer(KeyboardInterrupt):
            raise KeyboardInterrupt()

    previous = signal.signal(signal.SIGTERM, on_sigterm)
    previous_int = signal.getsignal(signal.SIGINT)
    if previous_int is signal.default_int_handler:  # not where Ctrl-C is ignored (a background job)
        signal.signal(signal.SIGINT, on_sigint)
    signals.reset_commit(installed=True)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
        if previous_int is signal.default_int_handler:
            signal.signal(signal.SIGINT, previous_int)
        signals.reset_commit(installed=False)

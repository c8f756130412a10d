"""SIGTERM handling for the ``tsdp`` executable (cron, systemd and ``timeout`` send it).

Before the commit point a SIGTERM unwinds the run like Ctrl-C (:class:`Terminated`): every ``with``
block cleans up, so temporary files are removed and a ledger reservation is cancelled, and the
exit code is 143. From the commit point on (the ledger confirms the spend and the files are moved
into place) the run is no longer stopped: a SIGTERM there is remembered, not raised, so that the
exit code and the message never say "nothing was published" about a published pair. If the
commit itself fails, the run unwinds with that failure's own error as before.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator


class Terminated(BaseException):
    """SIGTERM arrived before the commit point: unwinds like KeyboardInterrupt; exit 143."""


_state = {"installed": False, "committing": False, "deferred": False}


@contextlib.contextmanager
def terminate_on_sigterm() -> Iterator[None]:
    """Raise :class:`Terminated` on the first SIGTERM before :func:`commit_point`, ignore further ones.

    Installed only in the main thread (where Python runs signal handlers); the previous handler is
    restored afterwards, so embedding ``main()`` leaves no trace.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum, frame):
        signal.signal(signal.SIGTERM, signal.SIG_IGN)  # a second SIGTERM must not interrupt the clean-up
        if _state["committing"]:
            _state["deferred"] = True
            return
        raise Terminated()

    previous = signal.signal(signal.SIGTERM, handler)
    _state.update(installed=True, committing=False, deferred=False)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
        _state.update(installed=False, committing=False)


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

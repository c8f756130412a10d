"""A private state file that is replaced whole or not at all, and a lock against a second writer.

Used by ``tsdp stream`` for its custodian state (:mod:`tsdp.api.stream`), but knows nothing about
privacy: :func:`stage_private` writes the new contents to a hidden temporary file beside the
target (mode 0600) and flushes it to disk; :func:`install` renames it over the target and flushes
the directory. A rename is atomic on POSIX file systems, so a reader (or a run killed at any
instant) sees the old file or the new one, never a mix; a disk that fills up fails while the
temporary file is written, before the target is touched.

:func:`locked` takes an exclusive ``flock`` on ``PATH.lock`` (created with mode 0600 and left in
place, so that two processes always lock the same inode). A second process is refused at once
rather than queued: a cron job that finds the previous run still going should fail loudly.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path
from typing import Iterator

from tsdp.errors import UsageError
from tsdp.io.publish import writing


def stage_private(data: bytes, target: str | Path, option: str | None = None) -> Path:
    """Write ``data`` to a hidden temporary file beside ``target`` (mode 0600, fsynced); return its path.

    An OS error (a full disk: exit 5; a directory that cannot be written: exit 2) removes the
    temporary file and is raised as :func:`tsdp.io.publish.write_error`.
    """
    target = Path(target)
    with writing(target, option):
        fd, name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    tmp = Path(name)
    try:
        with writing(target, option):
            os.fchmod(fd, 0o600)
            view, done = memoryview(data), 0
            while done < len(view):
                done += os.write(fd, view[done:])
            os.fsync(fd)
    except BaseException:
        os.close(fd)
        tmp.unlink(missing_ok=True)
        raise
    os.close(fd)
    return tmp


def install(tmp: Path, target: str | Path, option: str | None = None) -> None:
    """Rename the staged ``tmp`` over ``target`` (atomic) and flush the directory entry."""
    target = Path(target)
    with writing(target, option):
        os.replace(tmp, target)
    with contextlib.suppress(OSError):  # not every file system can sync a directory
        fd = os.open(target.parent, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def replace_private(data: bytes, target: str | Path, option: str | None = None) -> None:
    """:func:`stage_private` then :func:`install`: ``target`` holds the old bytes or ``data``."""
    tmp = stage_private(data, target, option)
    try:
        install(tmp, target, option)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def lock_path(target: str | Path) -> Path:
    return Path(str(target) + ".lock")


@contextlib.contextmanager
def locked(target: str | Path, option: str = "STATE") -> Iterator[None]:
    """Hold an exclusive lock on ``target`` (through ``target.lock``) for the block; UsageError
    (exit 2) at once if another process holds it."""
    import fcntl

    path = lock_path(target)
    with writing(path, option):
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise UsageError(f"{option}: {str(target)!r} is locked by another tsdp process (an append still "
                             f"running?); nothing was done; retry when it has finished") from None
        yield
    finally:
        os.close(fd)  # closing releases the lock

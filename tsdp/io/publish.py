"""Publishing staged output files as one set: every file appears, or none does.

:class:`tsdp.io.files.AtomicOutputs` writes each output to a hidden temporary file beside its
target; :func:`publish_all` then moves the set into place:

* every temporary file is flushed to disk (``fsync``) before it gets its public name, and each
  target directory after, so a power cut cannot leave a named but empty output;
* the target directories are locked (``flock``) while the set is checked and moved, so two tsdp
  processes writing the same output cannot both pass the check;
* without ``replace``, a target that exists at that point (another process published it while this
  one was working) refuses the whole set before anything is moved or charged, and each file is
  published by ``link`` (which fails if the name appeared meanwhile, even from a program that takes
  no lock) rather than by ``rename`` (which would silently replace it); on a file system without
  hard links (FAT, some network shares) by ``rename`` after one more check under the lock;
* if moving one file fails, the files already moved are taken back (with ``replace``, the files
  they replaced are restored), so a reader never sees an output without its report;
* what goes to stdout (``-o -`` or ``--report -``) is written first, once the set is known to be
  publishable and before any file is moved: if the reader has closed the pipe, no file is
  published and the error says whether any of it reached the reader (:class:`StdoutClosed`).

OS errors become one-line tsdp errors naming the option and the path (:func:`write_error`).
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator

from tsdp.errors import ResourceError, UsageError

DISK_FULL = {errno.ENOSPC, errno.EDQUOT, errno.EFBIG}
NO_HARD_LINKS = {errno.EPERM, errno.EOPNOTSUPP, errno.ENOTSUP, errno.ENOSYS, errno.EMLINK, errno.EXDEV}


@dataclass
class Staged:
    """One staged file: its temporary name, its target, the option that named it, its mode."""

    tmp: Path
    target: Path
    option: str | None = None
    private: bool = False

    def label(self) -> str:
        return f"{self.option}: " if self.option else ""


class OutputRaced(UsageError):
    """A target appeared after the up-front check: another process published it (exit 2)."""


class StdoutClosed(ResourceError):
    """Writing to stdout failed (its reader closed the pipe); ``delivered`` bytes had gone out (exit 5).

    With none delivered nothing was published; with some, part of the release reached the reader,
    and a budget charged for it must stand (the caller keeps it)."""

    def __init__(self, message: str, delivered: int) -> None:
        super().__init__(message)
        self.delivered = delivered


def write_stdout(payload: bytes) -> None:
    """Write ``payload`` to stdout's file descriptor, counting what was accepted; StdoutClosed if the
    write fails (a reader that closed the pipe gives EPIPE, since Python ignores SIGPIPE; a file on a
    full disk, ENOSPC)."""
    import sys

    with contextlib.suppress(OSError, ValueError):
        sys.stdout.flush()  # nothing of tsdp's own should be pending there, but keep the order
    view, written = memoryview(payload), 0
    try:
        fd = sys.stdout.fileno()
    except (OSError, ValueError, AttributeError):  # stdout replaced in-process (a notebook, a test's capture)
        fd = None
    try:
        if fd is None:
            target = getattr(sys.stdout, "buffer", None)
            if target is not None:
                target.write(payload)
            else:
                sys.stdout.write(payload.decode())
            sys.stdout.flush()
            return
        while written < len(view):
            written += os.write(fd, view[written:])
    except OSError as exc:
        if fd is None:
            written = len(view)  # how much got through is unknown: count it as delivered (the charge stands)
        why = "its reader closed the pipe" if exc.errno == errno.EPIPE else (exc.strerror or type(exc).__name__)
        if written == 0:
            raise StdoutClosed(f"stdout (-): cannot write to it ({why}); nothing was published and nothing was "
                               "charged", 0) from None
        raise StdoutClosed(f"stdout (-): writing stopped after {written:,} of {len(view):,} bytes ({why}): part "
                           "of the release went out, so a ledger charge for it stands; the report and other "
                           "files were not published", written) from None


_OS_ERROR = re.compile(r"\(os error (\d+)\)")


def os_errno(exc: BaseException) -> int | None:
    """The OS error number behind ``exc``: its ``errno``, or the ``(os error N)`` that polars' Rust
    writers put in their message (an ``OSError`` without errno, or a ``ComputeError`` for Parquet);
    None when there is none."""
    number = getattr(exc, "errno", None)
    if isinstance(number, int):
        return number
    match = _OS_ERROR.search(str(exc))
    return int(match.group(1)) if match else None


def write_error(exc: BaseException, path: str | Path, option: str | None = None) -> UsageError | ResourceError:
    """The tsdp error for an OS error while writing ``path`` (named by ``option``).

    A full disk or quota is a resource error (exit 5); anything else (a read-only directory, a
    missing permission, a file system that refuses the name) is a usage error (exit 2): the user
    chose a path tsdp cannot write.
    """
    where = f"{option}: " if option else ""
    reason = getattr(exc, "strerror", None) or str(exc) or type(exc).__name__
    if os_errno(exc) in DISK_FULL:
        return ResourceError(f"{where}cannot write {str(path)!r}: {reason}; free space or write elsewhere; "
                             "nothing was published")
    return UsageError(f"{where}cannot write {str(path)!r}: {reason}; choose a directory you can write to; "
                      "nothing was published")


@contextlib.contextmanager
def writing(path: str | Path, option: str | None = None) -> Iterator[None]:
    """Turn an ``OSError`` raised in the block (or a polars error wrapping one) into
    :func:`write_error` for ``path``."""
    try:
        yield
    except OSError as exc:
        raise write_error(exc, path, option) from None
    except Exception as exc:
        if os_errno(exc) is None:
            raise
        raise write_error(exc, path, option) from None


def publish_all(staged: list[Staged], replace: bool, before_publish: Callable[[], None] | None = None,
                stdout: bytes | None = None) -> None:
    """Move every staged file to its target (see the module docstring); ``before_publish`` runs
    once the set is known to be publishable, just before the first file is moved (a budget
    ledger confirms its spend there); ``stdout`` is written then, before any file is moved.
    Raises :class:`OutputRaced` without ``replace`` when a target exists, :class:`StdoutClosed`
    when stdout cannot take ``stdout``."""
    if not staged:
        if before_publish is not None:
            before_publish()
        if stdout is not None:
            write_stdout(stdout)
        return
    umask = os.umask(0)
    os.umask(umask)
    for item in staged:
        with writing(item.target, item.option):
            os.chmod(item.tmp, 0o600 if item.private else 0o666 & ~umask)
            _fsync(item.tmp)
    ordered = sorted(staged, key=lambda s: str(s.target.absolute()))  # one global order: no two losers
    directories = sorted({str(s.target.absolute().parent) for s in staged})
    with _locked(directories):
        if not replace:
            for item in ordered:
                if os.path.lexists(item.target):
                    raise _raced(item)
        if before_publish is not None:
            before_publish()
        if stdout is not None:
            write_stdout(stdout)  # nothing is moved yet: a closed pipe leaves no file published
        moved: list[tuple[Staged, Path | None]] = []
        try:
            for item in ordered:
                moved.append((item, _move(item, replace)))
        except BaseException:
            _take_back(moved)
            raise
        for _, backup in moved:
            if backup is not None:
                backup.unlink(missing_ok=True)
        for directory in directories:
            with contextlib.suppress(OSError):  # not every file system can sync a directory
                _fsync(Path(directory))


def _raced(item: Staged) -> OutputRaced:
    return OutputRaced(f"{item.label()}{str(item.target)!r} appeared while this run was working (another process "
                       "wrote it); nothing was published and nothing was charged; pass --force to overwrite it")


def _move(item: Staged, replace: bool) -> Path | None:
    """Give ``item`` its public name; return the hidden backup of the file it replaced, if any."""
    with writing(item.target, item.option):
        if not replace:
            try:
                os.link(item.tmp, item.target)
            except FileExistsError:
                raise _raced(item) from None
            except OSError as exc:
                if exc.errno not in NO_HARD_LINKS:
                    raise
                # FAT, exFAT and some network shares have no hard links: rename under the lock,
                # after checking once more (only a writer that takes no lock can still race us).
                if os.path.lexists(item.target):
                    raise _raced(item) from None
                os.rename(item.tmp, item.target)
                return None
            item.tmp.unlink()
            return None
        backup = None
        if os.path.lexists(item.target):
            backup = item.tmp.with_name(item.tmp.name + ".previous")
            os.link(item.target, backup)
        try:
            os.replace(item.tmp, item.target)
        except BaseException:
            if backup is not None:
                backup.unlink(missing_ok=True)
            raise
        return backup


def _take_back(moved: list[tuple[Staged, Path | None]]) -> None:
    """Undo the moves made so far, newest first (best effort: the original error is what counts)."""
    for item, backup in reversed(moved):
        with contextlib.suppress(OSError):
            if backup is not None:
                os.replace(backup, item.target)
            else:
                item.target.unlink()


def _fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


@contextlib.contextmanager
def _locked(directories: list[str]) -> Iterator[None]:
    """Exclusive ``flock`` on each directory, taken in sorted order (no deadlock between writers)."""
    import fcntl

    fds: list[int] = []
    try:
        for directory in directories:
            try:
                fd = os.open(directory, os.O_RDONLY)
            except OSError as exc:
                raise write_error(exc, directory) from None
            fds.append(fd)
            with contextlib.suppress(OSError):  # a file system without locks still gets link()'s check
                fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        for fd in reversed(fds):
            os.close(fd)  # closing releases the lock

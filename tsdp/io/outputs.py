"""Where a command's outputs go and how they are published: default names, the checks made before any
work, the atomic publication of an output with its report (and the budget ledger's confirmation at
the commit point), and what a report records about files and the ledger.

Every command that writes a release uses these, from the command line (:mod:`tsdp.cli`) or the Python
API (:mod:`tsdp.api`); the files themselves are written by :class:`tsdp.io.files.AtomicOutputs`.
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from tsdp.errors import UsageError
from tsdp.io.files import INPUT_FORMATS, AtomicOutputs, check_output_path, table_format
from tsdp.signals import abandon_commit, begin_commit

if TYPE_CHECKING:
    from tsdp.report import Report


def default_output(input_path: str, suffix: str = ".released") -> str:
    if input_path == "-":
        return "-"
    p = Path(input_path)
    fmt = table_format(input_path, "INPUT")
    if fmt in ("csv", "parquet"):
        return str(Path(p.name).with_name(p.stem + suffix + p.suffix))
    stem = p.name[: -len(next(e for e, f in INPUT_FORMATS.items() if f == fmt))]
    return stem + suffix + ".csv"  # gzipped or tab-separated input: a plain CSV output


def default_report(output_path: str) -> str:
    if output_path == "-":
        raise UsageError("--report is required when the output goes to stdout (-o -)")
    p = Path(output_path)
    return str(p.with_name(p.stem + ".report.json"))


class Deferred:
    """An iterable made when it is first iterated: files known only once a streamed output has been
    written (:func:`publish` iterates ``private_files`` after staging the output)."""

    def __init__(self, make) -> None:
        self.make = make

    def __iter__(self):
        return iter(self.make())


def resolve_outputs(input_path: str, output: str | None, report: str | None, force: bool,
                    json_summary: bool) -> tuple[str, str]:
    """Default, check and return the (output, report) paths before any work is done.

    Refuses unknown extensions, existing files without ``--force``, the input as an output, the
    same path twice, and two things on stdout at once.
    """
    for path, option in ((output, "--output"), (report, "--report")):
        if path is not None and not path.strip():  # "" must not silently mean the default name
            raise UsageError(f"{option} '': empty path; give a file name or leave {option} out for the default")
    table_format(input_path, "INPUT")  # before the default output name is derived from it
    output = output or default_output(input_path)
    table_format(output, "--output")
    if json_summary and output == "-":
        raise UsageError("--json cannot be combined with -o -: stdout holds the released data; "
                         "write the output to a file or drop --json")
    report = report or default_report(output)
    if report == "-" and (output == "-" or json_summary):
        raise UsageError("--report -: stdout already holds the "
                         + ("released data (-o -)" if output == "-" else "--json summary")
                         + "; write the report to a file")
    table_format(report, "--report", allowed=("json",))
    for path, option in ((output, "--output"), (report, "--report")):
        check_output_path(path, force, (input_path,), option)
    if output != "-" and Path(output).resolve() == Path(report).resolve():
        raise UsageError("--report must differ from --output")
    return output, report


def publish(frame, output: str, report_path: str, make_report: Callable[[dict], Report],
            before_commit: Callable[[dict], None] | None = None,
            private_files: tuple[tuple, ...] = (),
            extra_files: tuple[tuple, ...] = (), force: bool = False) -> dict:
    """Write the output table and its report atomically: both appear, or neither does.

    ``make_report`` receives the output's description (file name, format, sha256), which is also
    returned. ``before_commit(description)`` runs once every file is staged and known to be
    publishable, just before they are moved into place: a budget ledger records the spend there, so
    that no failure can leave a published output whose spend is not recorded; if publishing then
    fails, ``before_commit.revert()`` (when it has one) undoes it. ``extra_files`` (bytes, path[,
    option]) are published with the others; ``private_files`` likewise, but readable by the owner
    only (mode 0600). Without ``force`` no file is replaced, not even one that another process
    wrote after :func:`resolve_outputs` checked the paths (exit 2, nothing published or charged).
    """
    from tsdp.io.magnitudes import require_finite_output

    frame = require_finite_output(frame) or frame  # a stream of frames is checked as it is written
    with AtomicOutputs(replace=force) as outputs:
        digest = outputs.stage_table(frame, output, "--output")
        described = {"file": "<stdout>" if output == "-" else Path(output).name,
                     "format": table_format(output, "--output"), "sha256": digest}
        outputs.stage_bytes(make_report(described).to_json(), report_path, option="--report")
        for data, path, *option in extra_files:
            outputs.stage_bytes(data, path, option=option[0] if option else None)
        for data, path, *option in private_files:
            outputs.stage_bytes(data, path, private=True, option=option[0] if option else None)

        def hook():
            begin_commit()  # from here a SIGTERM no longer stops the run (tsdp.signals)
            if before_commit is not None:
                before_commit(described)

        try:
            outputs.commit(before_publish=hook)
        except BaseException as exc:
            abandon_commit()
            revert = getattr(before_commit, "revert", None)
            if getattr(exc, "delivered", 0):  # part of the release reached stdout's reader: it stays charged
                revert = None
            if revert is not None:
                with contextlib.suppress(Exception):  # keep the original error; a spend left recorded is the safe side
                    revert()
            raise
    return described


def ledger_reservation(ledger: str | None, dataset: str | None, epsilon: float, delta: float,
                       description: str) -> contextlib.AbstractContextManager:
    """``--ledger``/``--dataset``: hold ``(epsilon, delta)`` of the dataset's budget for a run.

    A context manager yielding a :class:`tsdp.accounting.ledger.Reservation` (``None`` without a
    ledger). Enter it before the data is read: a refused budget (exit 3) then leaves no output. The
    reservation is cancelled if the block fails before ``confirm``; pass
    :func:`confirm_reservation` as ``publish(before_commit=...)`` to confirm it.
    """
    if (ledger is None) != (dataset is None):
        given, missing = ("--ledger", "--dataset") if dataset is None else ("--dataset", "--ledger")
        raise UsageError(f"{given} needs {missing}: give both to charge this run to a dataset's "
                         "budget in the ledger, or neither")
    if ledger is None:
        return contextlib.nullcontext(None)
    from tsdp.accounting.ledger import reservation

    return reservation(ledger, dataset, epsilon, delta, description)


def confirm_reservation(held) -> Callable[[dict], None] | None:
    """``publish(before_commit=...)`` hook that marks ``held`` spent on the staged output; its
    ``revert()`` makes the entry pending again if publishing fails after it ran."""
    if held is None:
        return None
    return _Confirmation(held)


class _Confirmation:
    def __init__(self, held) -> None:
        self.held = held

    def __call__(self, described: dict) -> None:
        self.held.confirm(described["file"], described["sha256"])

    def revert(self) -> None:
        if self.held.confirmed:
            self.held.unconfirm()


def ledger_parameters(ledger: str | None, held) -> dict[str, Any]:
    """What a report records about the ledger: its file name and the entry id (never its directory)."""
    if held is None:
        return {}
    return {"ledger": display_name(ledger), "ledger_entry": held.id}


def display_name(path: str) -> str:
    """What the report records for a file: its name only, or <stdin>/<stdout> for ``-``."""
    return "<stdin>" if path == "-" else Path(path).name

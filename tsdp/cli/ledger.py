"""``tsdp ledger``: the privacy budget ledger of a set of datasets (thin: parse, call, print).

``init`` registers a dataset's total budget, ``spend`` records a release (given as epsilon and
delta, or read from a tsdp report), ``show`` prints budgets and entries, ``cancel`` frees a pending
reservation left by a command that was killed. ``tsdp release --ledger FILE --dataset NAME``
reserves and confirms its own spend. Spends add up by basic composition; see
:mod:`tsdp.accounting.ledger` for the rule and the concurrency guarantee.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, Optional

import typer

from tsdp.accounting import ledger as core
from tsdp.accounting.claim import PrivacyClaim
from tsdp.cli import common
from tsdp.io import outputs
from tsdp.cli.vocabulary import VocabularyCommand
from tsdp.errors import DataError, UsageError
from tsdp.report import SCHEMA_ID

ledger_app = typer.Typer(
    name="ledger",
    help="Privacy budget ledger: a total (epsilon, delta) per dataset and every release charged to it.",
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
    context_settings={"help_option_names": ["-h", "--help"]},
)

LedgerArgument = typer.Argument(..., help="Ledger file (SQLite, made by 'tsdp ledger init').")


@ledger_app.command("init", cls=VocabularyCommand)
def init(
    ledger: str = typer.Argument(..., help="Ledger file to create, or to add the dataset to."),
    dataset: str = typer.Option(..., help="Name of the dataset whose budget this is."),
    epsilon: float = typer.Option(..., help="Total epsilon budget of the dataset (finite, >= 0)."),
    delta: float = typer.Option(..., help="Total delta budget of the dataset, in [0, 1)."),
    json_summary: bool = common.JsonOption,
    quiet: bool = common.QuietOption,
    config: Optional[str] = common.ConfigOption,
) -> None:
    """Register a dataset and its total budget (creating the ledger file if needed); never changes one."""
    core.init_ledger(ledger, dataset, epsilon, delta)
    _summary(ledger, dataset, quiet, json_summary, "tsdp ledger init")


@ledger_app.command("spend", cls=VocabularyCommand)
def spend(
    ledger: str = LedgerArgument,
    dataset: str = typer.Option(..., help="Dataset the release was made from."),
    epsilon: Optional[float] = typer.Option(None, help="Epsilon of the release (with --delta)."),
    delta: Optional[float] = typer.Option(None, help="Delta of the release (with --epsilon; 0 for pure DP)."),
    from_report: Optional[str] = typer.Option(None, "--from-report", help="Read epsilon and delta from this tsdp report (an input) instead.", metavar="REPORT.json"),
    description: Optional[str] = typer.Option(None, help="What was released [default: from the report, else empty]."),
    json_summary: bool = common.JsonOption,
    quiet: bool = common.QuietOption,
    config: Optional[str] = common.ConfigOption,
) -> None:
    """Record a release against a dataset's budget (refused, exit 3, if it does not fit)."""
    if from_report is not None:
        if epsilon is not None or delta is not None:
            raise UsageError("--from-report gives epsilon and delta: drop --epsilon/--delta, or drop --from-report")
        epsilon, delta, described, output_name, sha = _read_report(from_report)
        description = description if description is not None else described
    elif epsilon is None or delta is None:
        raise UsageError("give --epsilon and --delta (use --delta 0 for pure DP), or --from-report REPORT.json")
    else:
        output_name = sha = None
    entry = core.spend(ledger, dataset, epsilon, delta, description or "", output_name, sha)
    _summary(ledger, dataset, quiet, json_summary, "tsdp ledger spend", entry)


@ledger_app.command("show", cls=VocabularyCommand)
def show(
    ledger: str = LedgerArgument,
    dataset: Optional[str] = typer.Option(None, help="Only this dataset [default: all]."),
    json_summary: bool = common.JsonOption,
    quiet: bool = common.QuietOption,
    config: Optional[str] = common.ConfigOption,
) -> None:
    """Print each dataset's total, spent, pending and remaining budget, and its entries."""
    statuses = core.status(ledger, dataset)
    if json_summary:
        console = common.Console(quiet, json_summary, stdout_taken=False)
        print(console.json_document({"ledger": outputs.display_name(ledger), "ledger_schema": core.SCHEMA,
                                     "datasets": [s.to_dict() for s in statuses]}, "tsdp ledger show"))
        return
    from rich.console import Console

    console = Console(width=None if sys.stdout.isatty() else 200)  # piped: do not wrap at 80 columns
    if not statuses:
        console.print(f"ledger {ledger} holds no datasets yet")
    for s in statuses:
        console.print(_budget_table(s))
        if s.entries:
            console.print(_entries_table(s))


@ledger_app.command("cancel", cls=VocabularyCommand)
def cancel(
    ledger: str = LedgerArgument,
    entry: int = typer.Argument(..., help="Id of a pending reservation (see 'tsdp ledger show')."),
    json_summary: bool = common.JsonOption,
    quiet: bool = common.QuietOption,
    config: Optional[str] = common.ConfigOption,
) -> None:
    """Free a pending reservation left by a command that stopped before publishing (never a spend)."""
    cancelled = core.cancel(ledger, entry)
    _summary(ledger, cancelled.dataset, quiet, json_summary, "tsdp ledger cancel", cancelled.id,
             "cancelled")


# ---------------------------------------------------------------------------------------------


def _read_report(path: str) -> tuple[float, float, str, str | None, str | None]:
    """(epsilon, delta, description, output name, output sha256) from a tsdp report's claim.

    Only an upper bound under a DP definition can be charged: a LIP claim, or a lower bound
    (an attack's estimate), guarantees nothing in (epsilon, delta).
    """
    from tsdp.jsonfile import read_json

    report = read_json(path, "--from-report")
    if not isinstance(report, dict) or report.get("schema") != SCHEMA_ID:
        raise DataError(f"--from-report: {path!r} is not a tsdp report (no \"schema\": \"{SCHEMA_ID}\")")
    try:
        claim = PrivacyClaim.from_dict(report["claim"])
    except (KeyError, TypeError, ValueError) as exc:
        raise DataError(f"--from-report: {path!r} has no valid privacy claim ({exc})") from exc
    if claim.definition == "lip":
        raise UsageError(f"--from-report: {path!r} claims LIP, which is not an (epsilon, delta) guarantee "
                         "and cannot be charged to a DP budget")
    if claim.bound == "lower":
        raise UsageError(f"--from-report: {path!r} states a lower bound on epsilon, not a guarantee; "
                         "charge the release's upper bound instead")
    from tsdp.verify.stream import is_append_report

    if is_append_report(report):  # a stream is one spend (issue 32)
        raise UsageError(f"--from-report: {path!r} is an append report, part of its stream's one spend; charge the "
                         "stream report of 'tsdp stream init' once instead (or pass --ledger to 'stream init')")
    _check_claim(path, report)
    output = report.get("output") if isinstance(report.get("output"), dict) else {}
    command = report.get("command") if isinstance(report.get("command"), dict) else {}
    params = command.get("parameters") if isinstance(command.get("parameters"), dict) else {}
    description = " ".join(str(x) for x in (
        f"tsdp {command.get('name', '?')}", params.get("input"), "->" if output.get("file") else None,
        output.get("file"), f"(report {Path(path).name})") if x)
    return claim.epsilon, claim.delta or 0.0, description, output.get("file"), output.get("sha256")


def _check_claim(path: str, report: dict) -> None:
    """Charge only a claim that passes the claim checks of 'tsdp account verify' (as compose does):
    a report whose epsilon was lowered by hand would otherwise be charged for less than it spent."""
    from tsdp.verify import claim_checks
    from tsdp.errors import BudgetError

    failed = [c for c in claim_checks(report) if not c.passed]
    if failed:
        raise BudgetError(f"--from-report: {path!r} does not verify, so its epsilon and delta cannot be charged: "
                          f"{failed[0].name}: {failed[0].detail} (see 'tsdp account verify {path}')")


def _summary(ledger: str, dataset: str, quiet: bool, json_mode: bool, title: str,
             entry: int | None = None, action: str | None = None) -> None:
    """One dataset's budget after a change: JSON with --json, a short table otherwise."""
    (s,) = core.status(ledger, dataset)
    data: dict[str, Any] = {"ledger": ledger, "dataset": dataset}
    if entry is not None:
        data["entry"] = entry
    if action is not None:
        data["action"] = action
    data.update({"epsilon_total": s.epsilon_total, "delta_total": s.delta_total,
                 "epsilon_spent": s.epsilon_spent, "delta_spent": s.delta_spent,
                 "epsilon_pending": s.epsilon_pending, "delta_pending": s.delta_pending,
                 "epsilon_remaining": s.epsilon_remaining, "delta_remaining": s.delta_remaining})
    common.Console(quiet, json_mode, stdout_taken=False).summary(
        {k: (repr(v) if isinstance(v, float) and not json_mode else v) for k, v in data.items()}, title)


def _budget_table(s: core.DatasetStatus):
    from rich.table import Table

    table = Table(title=f"dataset {s.dataset!r}", title_justify="left")
    table.add_column("")
    table.add_column("epsilon", justify="right")
    table.add_column("delta", justify="right")
    for row in ("total", "spent", "pending", "remaining"):
        table.add_row(row, repr(getattr(s, f"epsilon_{row}")), repr(getattr(s, f"delta_{row}")))
    return table


def _entries_table(s: core.DatasetStatus):
    from rich.table import Table

    table = Table(title=f"entries of {s.dataset!r} (times UTC)", title_justify="left")
    for column in ("id", "time", "state", "epsilon", "delta", "description", "output (sha256)"):
        table.add_column(column, justify="right" if column in ("id", "epsilon", "delta") else "left")
    for e in s.entries:
        output = f"{e.output_name or ''} ({e.output_sha256[:12]})" if e.output_sha256 else (e.output_name or "")
        time = e.time.replace("T", " ").removesuffix("+00:00")
        table.add_row(str(e.id), time, e.state, repr(e.epsilon), repr(e.delta), e.description, output)
    return table

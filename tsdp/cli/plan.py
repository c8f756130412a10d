"""``tsdp plan``: accuracy against budget, before any data is touched (issue 15).

``tsdp plan release INPUT [release options] --epsilon 0.1,0.5,1,2,4`` runs the command's own
``--dry-run`` once per epsilon (so the options, their checks and the public shape are exactly the
release's) and tabulates the noise scale and the (1 - alpha) half-width of each. Nothing is
written and no budget is charged; only the public shape of the input is read.

``tsdp plan stream [stream init options] --horizon 30,365,3650`` tabulates, per horizon, each
output's expected error under every candidate strategy of ``tsdp stream init`` (from public
parameters only), and which one ``--strategy auto`` chooses.

``tsdp plan forecast INPUT [forecast-train options] --epsilon 0.5,1,2`` tabulates forecast-train's
training plan at each budget (:mod:`tsdp.forecast.plan`): the noise multiplier, the noise per
coordinate sigma C / B, the signal-to-noise ratios of a step and of the run, and the wall time
estimated from a few timed steps, for several step counts and batch sizes, with the recommended one.
"""

from __future__ import annotations

from typing import Any, Optional

import typer

from tsdp.cli import accuracy_options as acc_opts
from tsdp.cli import common
from tsdp.api.parsing import split_list
from tsdp.errors import UsageError

app = typer.Typer(help="Accuracy against budget before touching data: a command's dry run at several epsilons.",
                  no_args_is_help=True)

PASS_THROUGH = {"allow_extra_args": True, "ignore_unknown_options": True, "help_option_names": ["--help"]}
EpsilonsOption = typer.Option(..., "--epsilon", help="Comma-separated budgets to compare, e.g. 0.1,0.5,1,2,4.")
PlanPlotOption = typer.Option(None, "--plot", help="PNG of the half-width against epsilon (needs tsdp[plot]).", metavar="FILE.png")


@app.command("release", context_settings=PASS_THROUGH)
def plan_release(ctx: typer.Context, epsilon: str = EpsilonsOption, plot: Optional[str] = PlanPlotOption,
                 json_summary: bool = common.JsonOption, quiet: bool = common.QuietOption) -> None:
    """Noise and accuracy of `tsdp release` at each epsilon (give INPUT and the release options)."""
    _sweep("release", ctx, epsilon, plot, json_summary, quiet)


@app.command("mean-estimate", context_settings=PASS_THROUGH)
def plan_mean(ctx: typer.Context, epsilon: str = EpsilonsOption, plot: Optional[str] = PlanPlotOption,
              json_summary: bool = common.JsonOption, quiet: bool = common.QuietOption) -> None:
    """Accuracy of `tsdp mean-estimate` at each epsilon per group (give INPUT and its options)."""
    _sweep("mean-estimate", ctx, epsilon, plot, json_summary, quiet)


@app.command("forecast", context_settings=PASS_THROUGH)
def plan_forecast(ctx: typer.Context, epsilon: str = EpsilonsOption, json_summary: bool = common.JsonOption,
                  quiet: bool = common.QuietOption) -> None:
    """Training plan of `tsdp forecast-train` at each epsilon: noise, signal-to-noise and estimated time per step
    count and batch size, and the recommended length (give INPUT and the forecast-train options)."""
    args = ctx.args
    budgets = epsilons(epsilon)
    for flag in ("--dry-run", "--epsilon", "-o", "--output", "--report", "--evaluate-only"):
        if any(a == flag or a.startswith(flag + "=") for a in args):
            raise UsageError(f"{flag} does not apply to tsdp plan forecast: it runs the dry run of each --epsilon and "
                             "writes nothing")
    from tsdp.cli.app import _SETTINGS
    from tsdp.cli.lazy import load_subcommand

    command = load_subcommand("forecast-train", _SETTINGS)
    plans = []
    with acc_opts.plan_mode():
        for value in budgets:
            with command.make_context("forecast-train", [*args, "--epsilon", repr(value), "--dry-run"],
                                      parent=ctx.find_root()) as sub:
                summary = command.invoke(sub)
            plans.append({"epsilon": value, "delta": summary["delta"], "series": summary["series"],
                          "receptive_field": summary["receptive_field"], "batch_size": summary["batch_size"],
                          "steps": summary["steps"], "noise_multiplier": summary["noise_multiplier"],
                          "training_plan": summary["training_plan"]})
    if json_summary:
        from tsdp.cli.summary import document

        print(document({"command": "forecast-train", "plans": plans}, "tsdp plan forecast", []))
    elif not quiet:
        from tsdp.cli.forecast import print_plan

        for plan in plans:
            print_plan(plan["training_plan"])


@app.command("stream", context_settings=PASS_THROUGH)
def plan_stream(ctx: typer.Context,
                horizon: str = typer.Option(..., "--horizon", help="Comma-separated horizons to compare, e.g. 30,365,3650."),
                json_summary: bool = common.JsonOption, quiet: bool = common.QuietOption) -> None:
    """Each output's expected error per strategy at each horizon of `tsdp stream init` (give its options, no STATE):
    why auto chose what it chose."""
    from tsdp.cli.app import _SETTINGS
    from tsdp.cli.lazy import load_subcommand

    args = ctx.args
    for flag in ("--dry-run", "--horizon", "--report", "--ledger", "--dataset", "--seed"):
        if any(a == flag or a.startswith(flag + "=") for a in args):
            raise UsageError(f"{flag} does not apply to tsdp plan stream: it runs the dry run of 'tsdp stream init' "
                             "at each --horizon and writes nothing")
    horizons = []
    for part in split_list(horizon) or []:
        if not part.isdigit() or int(part) < 1:
            raise UsageError(f"--horizon must be comma-separated integers >= 1 such as 30,365,3650, got {horizon!r}")
        horizons.append(int(part))
    if not horizons:
        raise UsageError(f"--horizon names no horizon, got {horizon!r}")
    command = load_subcommand("stream", _SETTINGS).commands["init"]
    plans = []
    with acc_opts.plan_mode():
        for value in horizons:
            with command.make_context("stream init", ["<plan>", *args, "--horizon", str(value), "--dry-run"],
                                      parent=ctx.find_root()) as sub:
                summary = command.invoke(sub)
            plans.append({"horizon": value, "strategy": summary["strategy"], "epsilon": summary["epsilon"],
                          "delta": summary["delta"], "comparison": summary["comparison"]})
    if json_summary:
        from tsdp.cli.summary import document

        print(document({"command": "stream init", "plans": plans}, "tsdp plan stream", []))
    elif not quiet:
        from tsdp.cli.stream import print_comparison

        for plan in plans:
            print_comparison(plan["comparison"], f"tsdp plan stream: horizon {plan['horizon']}, "
                                                 f"epsilon {plan['epsilon']:g} (auto: {plan['strategy']})")


def epsilons(text: str) -> list[float]:
    """The budgets of ``--epsilon``: positive, finite, in the order given."""
    values = []
    for part in split_list(text) or []:
        try:
            value = float(part)
        except ValueError:
            raise UsageError(f"--epsilon must be comma-separated numbers such as 0.1,0.5,1, got {text!r}") from None
        if not (0 < value < float("inf")):
            raise UsageError(f"--epsilon values must be finite and > 0, got {part!r}")
        values.append(value)
    if not values:
        raise UsageError(f"--epsilon names no budget, got {text!r}")
    return values


def _sweep(name: str, ctx: typer.Context, epsilon: str, plot: str | None, json_summary: bool, quiet: bool) -> None:
    args = ctx.args
    budgets = epsilons(epsilon)
    for flag in ("--dry-run", "--epsilon", "-o", "--output", "--report", "--ledger", "--fail-on-noisy"):
        if any(a == flag or a.startswith(flag + "=") for a in args):
            raise UsageError(f"{flag} does not apply to tsdp plan {name}: it runs the dry run of each --epsilon "
                             "and writes nothing")
    if plot is not None:
        from tsdp.cli import plots

        plots.check_plot_path(plot, ())
    from tsdp.cli.app import _SETTINGS
    from tsdp.cli.lazy import load_subcommand

    command = load_subcommand(name, _SETTINGS)
    rows, summaries = [], []
    with acc_opts.plan_mode():
        for value in budgets:
            # under the root context, so that errors point to 'tsdp release --help', not 'release --help'
            with command.make_context(name, [*args, "--epsilon", repr(value), "--dry-run"],
                                      parent=ctx.find_root()) as sub:
                summaries.append(command.invoke(sub))
                rows.append(_row(value, summaries[-1]))
    console = common.Console(quiet, json_summary, stdout_taken=False)
    gaps = summaries[0].get("gaps_warning") if summaries else None
    if gaps:  # the dry run's missing steps: said once, not once per epsilon
        console.warn(gaps)
    if plot is not None:
        from tsdp.cli import plots

        plots.plot_plan(rows, plot, name)
    if json_summary:
        from tsdp.cli.summary import document

        print(document({"command": name, "rows": rows}, f"tsdp plan {name}", console.warnings))
    elif not quiet:
        _table(name, rows)


def _row(value: float, summary: dict[str, Any]) -> dict[str, Any]:
    accuracy = summary["accuracy"]
    row = {"epsilon": value, "delta": summary.get("delta"), "noise": summary.get("noise"),
           "half_width": accuracy["half_width"], "alpha": accuracy["alpha"], "scope": accuracy["scope"],
           "exact": accuracy.get("exact", True)}
    if accuracy["half_width"] is None:
        row["statement"] = accuracy.get("statement")
    return row


def _table(name: str, rows: list[dict[str, Any]]) -> None:
    from rich.console import Console as RichConsole
    from rich.table import Table

    alpha = rows[0]["alpha"]
    table = Table(title=f"tsdp plan {name}: {rows[0]['scope']}, {100 * (1 - alpha):.4g}% interval of the noise "
                        "(noise only; nothing read but the public shape, nothing written)", title_justify="left")
    for column in ("epsilon", "delta", "noise", "half-width"):
        table.add_column(column, justify="right" if column != "noise" else "left")
    for row in rows:
        noise = ", ".join(f"{k}={v:.4g}" for k, v in (row["noise"] or {}).items())
        width = f"±{row['half_width']:.4g}" if row["half_width"] is not None else row.get("statement", "")
        table.add_row(f"{row['epsilon']:g}", "" if row["delta"] is None else f"{row['delta']:g}", noise, width)
    RichConsole(soft_wrap=True).print(table)

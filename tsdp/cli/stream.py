"""``tsdp stream init|append|status``: continual release for cron jobs (thin over :mod:`tsdp.api.stream`)."""

from __future__ import annotations

from enum import Enum
from typing import Optional

import typer

from tsdp.cli import common
from tsdp.api.parsing import split_list
from tsdp.cli.vocabulary import VocabularyCommand

app = typer.Typer(
    name="stream",
    help="Continual release: fix a stream once (budget charged once), then append each new step from cron.",
    add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False, rich_markup_mode=None,
    context_settings={"help_option_names": ["-h", "--help"]},
)


class Unit(str, Enum):
    event = "event"
    w_event = "w-event"
    user = "user"


class Layout(str, Enum):
    long = "long"
    wide = "wide"
    events = "events"


class Strategy(str, Enum):
    auto = "auto"
    independent = "independent"
    tree = "tree"
    toeplitz = "toeplitz"
    banded = "banded"


StateArgument = typer.Argument(..., help="The stream's custodian state file (mode 0600; holds the noise secret: "
                                         "NOT for publication).")


@app.command("init", cls=VocabularyCommand)
def init(
    state: str = typer.Argument(..., help="State file to create (custodian only, mode 0600: the noise secret, the "
                                          "position, running sums; NOT for publication)."),
    freq: str = typer.Option(..., help="Time step of the stream, e.g. 1h, 1d, 1mo."),
    start: str = typer.Option(..., help="Time of the first step; without a UTC offset, a time of the data's zone."),
    horizon: int = typer.Option(..., help="T: the number of steps the stream will ever release (the claim and the "
                                          "ledger charge cover all of them).", min=1),
    epsilon: float = typer.Option(..., help="Privacy budget epsilon (> 0) of the whole stream."),
    delta: Optional[float] = typer.Option(None, help="Privacy budget delta in (0, 1) [default: 1e-6]."),
    unit: Unit = typer.Option(..., help="What is protected: one event, a user's w-event window, or a whole user."),
    w: Optional[int] = typer.Option(None, help="Window length for --unit w-event.", min=1),
    max_per_step: float = typer.Option(1.0, help="M: largest contribution of one unit to one cell per step, in the "
                                                 "values' unit (events kept per user, series and step, for event input)."),
    max_steps: Optional[int] = typer.Option(None, help="I: steps of a series in which one user may take part over the "
                                                       "whole horizon (--unit user).", min=1),
    min_separation: Optional[int] = typer.Option(None, help="--unit user: at least this many steps between two "
                                                            "participations of one user (declared).", min=1),
    series_per_user: Optional[int] = typer.Option(None, help="Series one user may contribute to [default: all].",
                                                  min=1),
    series_keys: Optional[str] = typer.Option(None, help="Comma-separated public series keys (long or event layout)."),
    layout: Optional[Layout] = typer.Option(None, help="Layout of the appended inputs [default: events with "
                                                       "--user-col, long with --value-col, else wide]."),
    time_col: str = typer.Option("time", help="Time column."),
    value_col: Optional[str] = typer.Option(None, help="Value column (long layout, or a value per event)."),
    series_col: Optional[str] = typer.Option(None, help="Series id column (long or event layout)."),
    series_cols: Optional[str] = typer.Option(None, help="Comma-separated series columns (wide layout): the "
                                                         "series keys."),
    user_col: Optional[str] = typer.Option(None, help="User id column (event layout)."),
    timezone: Optional[str] = common.TimezoneOption,
    value_bound: Optional[float] = typer.Option(None, help="Clip each event's value to [0, V] (event layout with "
                                                           "--value-col)."),
    outputs: str = typer.Option("daily,cumulative", help="Released outputs per step, comma-separated: daily (the "
                                                         "step's value), cumulative (running total), window:K "
                                                         "(sum of the last K steps)."),
    strategy: Strategy = typer.Option(Strategy.auto, help="Noise factorization: auto picks the smallest expected "
                                                          "error for --outputs and the unit (independent included)."),
    weights: Optional[str] = typer.Option(None, help="Weight of each output in auto's objective (sum of weight x "
                                                     "RMSE^2), e.g. daily=1,cumulative=4 [default: 1 each]."),
    band: Optional[int] = typer.Option(None, help="--strategy banded: the number of diagonals of C kept (O(band) "
                                                  "state per series) [default: chosen like auto].", min=1),
    alpha: float = typer.Option(0.05, "--alpha", help="Accuracy: intervals of the noise hold with probability "
                                                      "1 - alpha."),
    ledger: Optional[str] = typer.Option(None, help="Budget ledger charged ONCE, now, for the whole horizon (with "
                                                    "--dataset); refused with exit 3 if it does not fit."),
    dataset: Optional[str] = typer.Option(None, help="Dataset name in --ledger whose budget pays for the stream."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Print each output's expected error per strategy (why auto "
                                                          "chose what it chose); write nothing, charge nothing."),
    report: Optional[str] = typer.Option(None, "--report", help="The stream's report [default: STATE without its "
                                                                "extension + .stream.report.json]; its accuracy "
                                                                "table is written beside it (.accuracy.csv)."),
    seed: Optional[int] = common.SeedOption,
    sampler: Optional[str] = common.SamplerOption,
    force: bool = common.ForceOption,
    json_summary: bool = common.JsonOption,
    quiet: bool = common.QuietOption,
    config: Optional[str] = common.ConfigOption,
) -> Optional[dict]:
    """Fix a stream's public parameters, choose its noise factorization and charge the budget once."""
    params = common.public_parameters(locals())
    params.pop("state", None)  # a custodian path: the report names no private file
    from tsdp.accounting.samplers import sampler_of
    from tsdp.api import stream
    from tsdp.errors import UsageError

    sampler_of(sampler)  # a known --sampler name (None: hardened), before anything is read
    keys = split_list(series_keys) or split_list(series_cols)
    if series_keys and series_cols:
        raise UsageError("--series-keys and --series-cols both name the series: give --series-cols for a wide "
                         "layout, --series-keys otherwise")
    layout_options = {"layout": layout.value if layout else None, "time_col": time_col, "value_col": value_col,
                      "series_col": series_col, "series_cols": split_list(series_cols), "user_col": user_col,
                      "timezone": timezone, "value_bound": value_bound}
    console = common.Console(quiet, json_summary, stdout_taken=False)
    summary = stream.init(state, start=start, freq=freq, horizon=horizon, epsilon=epsilon, delta=delta,
                          unit=unit.value, w=w, max_per_step=max_per_step, max_steps=max_steps,
                          min_separation=min_separation, series_per_user=series_per_user, series_keys=keys or [],
                          outputs=outputs, strategy=strategy.value, band=band, weights=weights, sampler=sampler, layout=layout_options,
                          alpha=alpha, report=report, seed=seed, ledger=ledger, dataset=dataset, force=force,
                          dry_run=dry_run, parameters=params)
    if dry_run:
        from tsdp.cli import accuracy_options as acc_opts

        if acc_opts.planning():  # tsdp plan stream: the summary goes to its table
            return summary
        if not json_summary and not quiet:
            print_comparison(summary["comparison"], f"tsdp stream init --dry-run: {horizon} steps, epsilon {epsilon:g}")
            summary = {k: v for k, v in summary.items() if k not in ("comparison", "expected_error")}
    elif seed is not None:
        from tsdp.rng import SEEDED_WARNING

        console.warn(SEEDED_WARNING)
    console.summary(summary, "tsdp stream init --dry-run" if dry_run else "tsdp stream init")


def print_comparison(rows: list[dict], title: str) -> None:
    """The strategies' expected error, one row per candidate (stderr): why auto chose what it chose."""
    from rich.console import Console as RichConsole
    from rich.table import Table

    outputs = [entry["output"] for entry in rows[0]["outputs"]] if rows else []
    table = Table(title=title, title_justify="left")
    for column in ("strategy", "sigma", "score", *(f"{o} RMSE" for o in outputs),
                   *(f"{o} s.d. at T" for o in outputs), "chosen"):
        table.add_column(column, justify="left" if column in ("strategy", "chosen") else "right")
    for row in rows:
        figures = {entry["output"]: entry for entry in row["outputs"]}
        name = row["strategy"] + (f" (band {row['band']})" if row.get("band") else "")
        table.add_row(name, f"{row['sigma']:.4g}", f"{row['score']:.3g}",
                      *(f"{figures[o]['rmse']:.4g}" for o in outputs),
                      *(f"{figures[o]['final_sd']:.4g}" for o in outputs), "<- chosen" if row["chosen"] else "")
    RichConsole(stderr=True, soft_wrap=True).print(table)


@app.command("append", cls=VocabularyCommand)
def append(
    state: str = StateArgument,
    input: str = typer.Argument(..., help="The next step(s): panel rows of the stream's grid (CSV or Parquet), or "
                                          "raw events (--layout events at init)."),
    output: Optional[str] = common.OutputOption,
    report: Optional[str] = common.ReportOption,
    steps: Optional[int] = typer.Option(None, help="Event input: the number of steps this file covers, from the "
                                                   "next one on [default: 1]; panel input: checked against its "
                                                   "rows.", min=1),
    force: bool = common.ForceOption,
    json_summary: bool = common.JsonOption,
    quiet: bool = common.QuietOption,
    config: Optional[str] = common.ConfigOption,
) -> None:
    """Release the next step(s) of a stream and advance its state (all or nothing)."""
    from tsdp.api import stream
    from tsdp.errors import UsageError

    if output is None:
        raise UsageError("-o/--output is required: each append writes its own file (e.g. day-$(date +%F).csv)")
    summary = stream.append(state, input, output, report, steps, force)
    console = common.Console(quiet, json_summary, stdout_taken=False)
    if summary["seeded"]:
        from tsdp.rng import SEEDED_WARNING

        console.warn(SEEDED_WARNING)
    console.summary(summary, "tsdp stream append")


@app.command("status", cls=VocabularyCommand)
def status(
    state: str = StateArgument,
    json_summary: bool = common.JsonOption,
    quiet: bool = common.QuietOption,
) -> None:
    """Position, horizon, budget and the expected error of each output (public figures only)."""
    from tsdp.api import stream

    common.Console(quiet, json_summary, stdout_taken=False).summary(stream.status(state), "tsdp stream status")

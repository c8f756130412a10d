"""``tsdp forecast-train``: DP-SGD training of forecasting models, accounted with structured subsampling.

Thin: parse the options into :class:`tsdp.api.forecast.ForecastOptions` (validated before the data is
read), read the table, run the plan (:mod:`tsdp.api.forecast`: load the panel, plan the run with the
accountant, train) and publish the forecasts, the model (weights + metadata), the privacy report and
the custodian file (held-out metrics and the validation history: figures of the private data, NOT for
publication) atomically. ``--evaluate-only clipped|unclipped`` trains a NON-private reference instead
and writes nothing; ``--dry-run`` prints the training plan from the public shape alone.
"""

from __future__ import annotations

from enum import Enum
from pathlib import Path
from typing import Any, Optional

import typer

from tsdp.api.forecast import ForecastOptions
from tsdp.caveats import Caveat
from tsdp.cli import accuracy_options as acc_opts
from tsdp.cli import common
from tsdp.io import outputs
from tsdp.cli.account import Bottom, Top
from tsdp.cli.options import options_from
from tsdp.errors import UsageError
from tsdp.io.files import check_output_path, read_table


class Model(str, Enum):
    simple_ff = "simple-ff"
    linear = "linear"
    dlinear = "dlinear"
    deepar = "deepar"
    itransformer = "itransformer"


DEEP = (Model.deepar, Model.itransformer)


class Device(str, Enum):
    auto = "auto"
    cpu = "cpu"
    gpu = "gpu"


class Dtype(str, Enum):
    float32 = "float32"
    float64 = "float64"


class Layout(str, Enum):
    long = "long"
    wide = "wide"


class Checkpoint(str, Enum):
    last = "last"
    best_validation = "best-validation"


class Distribution(str, Enum):
    studentt = "studentt"
    negbin = "negbin"
    poisson = "poisson"


class EvaluateOnly(str, Enum):
    clipped = "clipped"
    unclipped = "unclipped"


class FillMissing(str, Enum):
    error = "error"
    null = "null"


def forecast_train(
    input: str = typer.Argument(..., help="CSV (.csv, .csv.gz, .tsv) or Parquet file (- for stdin) of regular, complete series."),
    time_col: str = typer.Option("time", help="Time column."),
    value_col: Optional[str] = typer.Option(None, help="Value column (long layout)."),
    series_col: Optional[str] = typer.Option(None, help="Series id column (long layout) [default: one series]."),
    layout: Layout = typer.Option(Layout.long, help="long: series, time, value rows; wide: time + one column per series."),
    series_cols: Optional[str] = typer.Option(None, help="Wide layout: series columns, comma-separated [default: all but time]."),
    freq: Optional[str] = typer.Option(None, help="Time step, e.g. 1h [default: inferred]."),
    timezone: Optional[str] = common.TimezoneOption,
    fill_missing: FillMissing = typer.Option(FillMissing.error, help="Missing steps and values: an error, or null: kept missing, and no training window touches one (the accountant takes the fewest windows a series has left; the last context and held-out steps must be complete)."),
    context_length: int = typer.Option(..., help="L_C: context window fed to the model (its whole receptive field); for deepar the unrolled context, to which its largest lag - 1 is added."),
    forecast_length: int = typer.Option(..., help="L_F: forecast horizon."),
    model: Model = typer.Option(Model.simple_ff, help="Model: SimpleFeedForward (2 x 64 ReLU), linear autoregressive, DLinear (numpy), or DeepAR / iTransformer (JAX, extra tsdp[deep])."),
    lags: Optional[str] = typer.Option(None, help="deepar: lags such as 1-7,23-25,47-49 [default: GluonTS's for the time step up to 4 x --context-length, e.g. 1-7,23-25,...,167-169 for 1h and context 48]."),
    distribution: Distribution = typer.Option(Distribution.studentt, help="deepar: output distribution: studentt, or negbin / poisson for counts (forecasts are non-negative integers; values must be >= 0)."),
    nonnegative: bool = typer.Option(False, "--nonnegative", help="Forecast max(Y, 0) (quantiles clipped at 0, the mean of the clipped distribution) for data that cannot be negative; values must be >= 0."),
    num_samples: int = typer.Option(100, help="deepar: sample paths per forecast."),
    device: Device = typer.Option(Device.auto, help="deepar/itransformer: JAX device (gpu needs a CUDA build of jax; auto: a GPU when JAX sees one)."),
    dtype: Dtype = typer.Option(Dtype.float32, help="deepar/itransformer: floating-point precision of the JAX computation."),
    batch_size: Optional[int] = typer.Option(None, help="B: windows per batch (expected size for Poisson schemes) [default: min(256, series x --instances)]."),
    instances: int = typer.Option(1, help="lambda: windows per selected series (1 is optimal, Thm 4.1)."),
    top: Top = typer.Option(Top.wor, help="Top level: series without replacement / Poisson per step, or iterated per epoch."),
    bottom: Bottom = typer.Option(Bottom.wr, help="Bottom level: windows with replacement, or Poisson."),
    clip_norm: float = typer.Option(1e-4, help="C: per-window gradient clipping norm (the paper's 1e-4; tune it)."),
    noise_multiplier: str = typer.Option("auto", help="sigma: noise std / C, or 'auto' to calibrate for the length at --epsilon: --steps/--epochs, or without them the training plan's recommendation (see --dry-run)."),
    epsilon: Optional[float] = typer.Option(None, help="Privacy budget epsilon: training stops before exceeding it."),
    delta: Optional[float] = typer.Option(None, help="Privacy parameter delta (the paper uses 1e-7; below 1/N)."),
    epochs: Optional[int] = typer.Option(None, help="Epochs to train (steps per epoch = floor(N lambda / B))."),
    steps: Optional[int] = typer.Option(None, "--steps", help="Steps to train (instead of --epochs) [default with --noise-multiplier auto: the training plan's]."),
    time_budget: Optional[str] = typer.Option(None, help="Wall time for training, e.g. 15m or 2h: the plan times a few steps on synthetic windows and trains for the step count with the best signal-to-noise ratio that fits (instead of --steps/--epochs; needs --epsilon and --noise-multiplier auto)."),
    lr: float = typer.Option(1e-3, help="Adam learning rate."),
    weight_decay: float = typer.Option(1e-8, help="Adam (L2) weight decay."),
    val_windows: int = typer.Option(5, help="Validation windows of L_F steps held out before the test windows of each series."),
    test_windows: int = typer.Option(7, help="Forecast origins scored on the held-out tail: the last test-windows x L_F steps, one origin every L_F steps (rolling windows).", min=1),
    val_every: Optional[int] = typer.Option(None, help="Validate every this many steps [default: 25 times per run]."),
    checkpoint: Checkpoint = typer.Option(Checkpoint.last, help="Released weights: the last iterate (covered by the guarantee), or the best on private validation windows (NOT covered; marked so in the report and the model file)."),
    unit: str = typer.Option("w-event", metavar="[w-event|w-user|event]", help="Protect --w contiguous steps (w-event) or any --w steps (w-user) of one series; event: one step (--w 1)."),
    w: int = typer.Option(1, help="w: number of protected time steps."),
    label_noise: float = typer.Option(0.0, help="sigma_F: Gaussian noise on forecast windows, in units of --value-bound."),
    context_noise: float = typer.Option(0.0, help="sigma_C: Gaussian noise on context windows, in units of --value-bound."),
    value_bound: Optional[float] = typer.Option(None, help="v: largest change of one value under the (w, v) relation (needed with label/context noise)."),
    season: Optional[int] = typer.Option(None, help="Season of the headline seasonal naive baseline and MASE [default: the longest natural season of the step that the model's receptive field covers, e.g. 168 for 1h with --lags up to 169]; every natural season's naive is scored too.", min=1),
    min_scale: float = typer.Option(1e-3, help="PUBLIC floor of the mean scale of a window."),
    discretization: float = typer.Option(1e-3, help="Privacy-loss grid step of the accountant's PLD."),
    evaluate_only: Optional[EvaluateOnly] = typer.Option(None, help="Train a NON-private reference instead and write nothing: clipped (the same DP-SGD steps without noise) or unclipped (plain minibatch Adam); print its metrics next to the seasonal naive baselines."),
    alpha: float = acc_opts.AlphaOption,
    dry_run: bool = acc_opts.DryRunOption,
    model_out: Optional[str] = typer.Option(None, help="Model files prefix: PREFIX.npz and PREFIX.json [default: OUTPUT stem + .model]."),
    custodian: Optional[str] = common.CustodianOption,
    output: Optional[str] = common.OutputOption,
    report: Optional[str] = common.ReportOption,
    seed: Optional[int] = common.SeedOption,
    sampler: Optional[str] = typer.Option(None, "--sampler", help="Noise sampler: hardened (default: the gradient sum rounded to a power-of-two lattice and exact discrete Gaussian noise, label/context noise likewise; accounted exactly) or float (numpy's floating-point Gaussian, for experiments only; such weights must not be published)."),
    force: bool = common.ForceOption,
    json_summary: bool = common.JsonOption,
    quiet: bool = common.QuietOption,
    config: Optional[str] = common.ConfigOption,
) -> None:
    """Train a probabilistic forecasting model with DP-SGD (Schuchardt et al. 2025) and forecast every series."""
    params = common.public_parameters(locals())  # before any import adds a local name
    plan = options_from(ForecastOptions, locals()).plan(evaluate_only)  # every option checked before the data
    if dry_run:
        if evaluate_only is not None:
            raise UsageError("--dry-run reads no values, --evaluate-only trains on them: give one of them")
        return _dry_run(input, plan, common.Console(quiet, json_summary, stdout_taken=False))
    if evaluate_only is None:
        output, report = outputs.resolve_outputs(input, output, report, force, json_summary)
        custodian = common.resolve_custodian(custodian, input, output, report, force)
        extra = _extra_paths(output, model_out, custodian, input, report, force)
    randomness = plan.start(seed)
    console = common.Console(quiet, json_summary, stdout_taken=evaluate_only is None and "-" in (output, report))

    prepared = plan.prepare(plan.load(read_table(input, *plan.column_kinds())))
    if evaluate_only is not None:
        summary = plan.reference(prepared, randomness.generator)
        console.warn(Caveat("not_private_diagnostic", "--evaluate-only trains a NON-private reference on the data: "
                            "the figures are not private, are for comparison only, and nothing was written"))
        return console.summary(summary, "tsdp forecast-train --evaluate-only")

    accountant = prepared.accountant
    for message in accountant.warnings:
        console.warn(message)
    with _training_progress(console, accountant.steps) as progress:
        trained = plan.train(prepared, randomness.generator, progress, seeded=randomness.seeded)
    weights = trained.weights()
    model_meta = trained.metadata(weights, Path(extra["weights"]).name)
    files = {"model_files": [Path(extra["weights"]).name, Path(extra["meta"]).name],
             "custodian_file": Path(custodian).name}
    outputs.publish(trained.forecasts, output, report, lambda described: trained.report(
        described, {**params, "input": outputs.display_name(input), "output": described["file"]}, files,
        randomness.label,
    ), extra_files=((weights, extra["weights"], "--model-out"), (model_meta, extra["meta"], "--model-out")),
        private_files=((common.custodian_document("forecast-train", trained.custodian()), custodian, "--custodian"),),
        force=force)
    for message in trained.warnings:
        console.warn(message)
    result, config = trained.result, prepared.config
    console.summary({
        "output": output, "report": report, "model": extra["meta"], "custodian": custodian,
        "epsilon": result.epsilon, "delta": delta, "steps": result.steps, "compositions": result.compositions,
        "stopped_by": accountant.stopped_by, "noise_multiplier": accountant.noise_multiplier,
        "theorem": trained.claim.theorem, "batch_size": config.batch_size, "checkpoint": config.checkpoint,
        "accuracy": acc_opts.shown(_accuracy(plan), json_summary),
        # the held-out scores are figures of the private series: in the custodian file only, never on stdout
    }, "tsdp forecast-train")


def _accuracy(plan):
    from tsdp.accuracy.estimators import forecast_model

    return forecast_model(plan.options.alpha)


def _dry_run(input: str, plan, console) -> dict | None:
    """The accountant's plan and, with a budget, the training plan, from the public shape alone
    (:meth:`tsdp.api.forecast.ForecastPlan.dry_run`); nothing is trained on the data or written."""
    summary, accountant = plan.dry_run(input, console.warn)
    accuracy = summary["accuracy"]
    summary["accuracy"] = accuracy.to_dict() if console.json_mode else accuracy.statement
    for message in accountant.warnings:
        console.warn(message)
    if acc_opts.planning():
        return {**summary, "accuracy": accuracy.to_dict()}
    training_plan = summary.get("training_plan")
    console.summary(summary if console.json_mode else {k: v for k, v in summary.items() if k != "training_plan"},
                    "tsdp forecast-train --dry-run")
    if training_plan and not console.json_mode and not console.quiet:
        print_plan(training_plan)
    return None


def print_plan(training_plan: dict[str, Any]) -> None:
    """The training plan as a rich table on stdout (also for `tsdp plan forecast`)."""
    from rich.console import Console as RichConsole
    from rich.table import Table

    best = training_plan["recommended"]
    table = Table(title=f"training plan at epsilon {training_plan['epsilon']:g}, delta {training_plan['delta']:g} "
                        f"(public parameters; times measured on this machine; * = recommended)",
                  title_justify="left")
    for column in ("batch", "steps", "sigma", "noise s.d. sigma C/B", "step SNR", "run SNR", "est. time"):
        table.add_column(column, justify="right")
    for row in training_plan["rows"]:
        mark = "*" if (row["batch_size"], row["steps"]) == (best["batch_size"], best["steps"]) else ""
        table.add_row(f"{row['batch_size']}", f"{row['steps']}{mark}", f"{row['noise_multiplier']:.4g}",
                      f"{row['noise_sd']:.3g}", f"{row['step_snr']:.3g}", f"{row['run_snr']:.3g}",
                      "" if row["seconds"] is None else _duration(row["seconds"]))
    RichConsole(soft_wrap=True).print(table)


def _duration(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def _extra_paths(output: str, model_out: str | None, custodian: str, input: str, report: str,
                 force: bool) -> dict[str, str]:
    if output == "-" and model_out is None:
        raise UsageError("with -o - give --model-out explicitly")
    prefix = model_out or f"{Path(output).with_suffix('')}.model"
    paths = {"weights": f"{prefix}.npz", "meta": f"{prefix}.json"}
    taken = {str(Path(p).resolve()) for p in (output, report, custodian) if p != "-"}
    for path in paths.values():
        if str(Path(path).resolve()) in taken:
            raise UsageError(f"--model-out {path!r} collides with another output")
        taken.add(str(Path(path).resolve()))
        check_output_path(path, force, (input,), "--model-out")
    return paths


class _training_progress:
    """A rich progress bar with step and epsilon spent (stderr, terminal only, not with --quiet). No loss: a
    batch's loss is a figure of its private windows, not privacy-protected (the history is custodian-only)."""

    def __init__(self, console: common.Console, total: int) -> None:
        self.console, self.total, self.bar = console, total, None

    def __enter__(self):
        import sys

        if self.console.quiet or not sys.stderr.isatty():
            return None
        from rich.console import Console as RichConsole
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

        self.bar = Progress(TextColumn("training"), BarColumn(), MofNCompleteColumn(),
                            TextColumn("eps {task.fields[eps]}"), TimeRemainingColumn(),
                            console=RichConsole(stderr=True), transient=True)
        self.bar.__enter__()
        task = self.bar.add_task("train", total=self.total, eps="-")
        every = max(1, self.total // 200)

        def update(step: int, total: int, loss: float, eps) -> None:
            if step % every == 0 or step == total:
                self.bar.update(task, completed=step, eps="-" if eps is None else f"{eps:.3g}")

        return update

    def __exit__(self, *exc):
        if self.bar is not None:
            self.bar.__exit__(*exc)
        return False

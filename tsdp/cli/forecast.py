"""``tsdp forecast-train``: DP-SGD training of forecasting models, accounted with structured subsampling.

Thin: parse and validate the options (:class:`tsdp.forecast.trainer.TrainConfig`), load the panel, plan
the run with the accountant, train (:func:`tsdp.forecast.trainer.train`) and publish the forecasts,
the model (weights + metadata), the privacy report and the custodian file (held-out metrics and the
validation history: figures of the private data, NOT for publication) atomically.
``--evaluate-only clipped|unclipped`` trains a NON-private reference instead and writes nothing.
With a budget, ``--dry-run`` prints the training plan (:mod:`tsdp.forecast.plan`: noise, signal-to-
noise and timed wall time per step count and batch size), and without ``--steps``/``--epochs`` (and
``--noise-multiplier auto``, or with ``--time-budget``) the run trains for the plan's recommendation.
The held-out tail is scored at ``--test-windows`` origins against seasonal naive forecasts at the
natural seasons of the step (custodian file).

``--model deepar|itransformer`` (JAX, extra ``tsdp[deep]``) plug into the same trainer: for DeepAR the
window the sampler draws and the accountant charges is its receptive field, ``--context-length``
plus its largest lag minus one; its time features and default lags come from the grid step.
"""

from __future__ import annotations

from dataclasses import replace
from enum import Enum
from pathlib import Path
from typing import Any, Optional

import numpy as np
import polars as pl
import typer

from tsdp.caveats import Caveat
from tsdp.cli import accuracy_options as acc_opts
from tsdp.cli import common
from tsdp.api.accounting import SERIES_UNITS, series_unit
from tsdp.cli.account import Bottom, Top
from tsdp.accounting.discrete import check_sampler
from tsdp.errors import DataError, UsageError
from tsdp.forecast.claim import dpsgd_claim, unaccounted
from tsdp.io.files import check_output_path, read_table
from tsdp.io.layouts import load_long, load_wide
from tsdp.io.timegrid import MISSING_STEPS_HINT, following_points
from tsdp.accuracy.estimators import forecast_model
from tsdp.report import Report
from tsdp.mechanisms.noise import FLOAT_WARNING
from tsdp.rng import SEEDED_WARNING, make_random_source


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


MISSING_HINT = ("forecast-train needs complete series, or --fill-missing null to train only on windows without a "
                "missing step")
COUNTS = ("negbin", "poisson")  # DeepAR's count heads (tsdp.forecast.deep.COUNT_DISTRIBUTIONS; no JAX import here)
DEFAULT_BATCH = 256
BATCH_RULE = "min(256, series x --instances)"
PLAN_RULE = ("the step count of the plan's grid with the highest signal-to-noise ratio of the whole run, sqrt(T) B / "
             "(sigma sqrt(P)), among those whose estimated time fits the budget")
BEST_CHECKPOINT_CAVEAT = Caveat(
    "not_covered_by_guarantee",
    "--checkpoint best-validation: the released weights are the iterate with the lowest loss on validation windows "
    "cut from the same private series; that choice reads private data the accountant does not charge, so the "
    "claimed (epsilon, delta) does NOT cover these weights (it covers every iterate, not a data-dependent choice "
    "among them). Use --checkpoint last (the default) for a release the guarantee covers",
)
FORECAST_NOTE = Caveat(
    "not_covered_by_guarantee",
    "the model weights are the differentially private release. The forecasts are the model applied to each series' "
    "own last context-length values, which the DP-SGD guarantee does not cover (Schuchardt et al. 2025, App. H): "
    "publish them only if those recent values may be disclosed",
)
METRICS_NOTE = ("metrics are computed on the held-out tail and validation windows of the private series: they are "
                "for the custodian, not privacy-protected, and never go into the report")


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
    from tsdp.forecast import trainer

    sigma = _noise_multiplier(noise_multiplier)
    if unit not in SERIES_UNITS + ("user",):
        raise UsageError(f"--unit {unit!r}: must be one of w-event, w-user or event")
    accounted_unit = series_unit(unit, w)
    sampler = check_sampler(sampler or "hardened")
    if lags is not None and model is not Model.deepar:
        raise UsageError(f"--lags is an option of --model deepar, not of --model {model.value}")
    if num_samples != 100 and model is not Model.deepar:
        raise UsageError(f"--num-samples {num_samples}: only --model deepar forecasts by sample paths")
    if distribution is not Distribution.studentt and model is not Model.deepar:
        raise UsageError(f"--distribution {distribution.value} is an option of --model deepar; the other models have "
                         "a Student-t output: use --nonnegative for data that cannot be negative")
    if model not in DEEP and (device is not Device.auto or dtype is not Dtype.float32):
        raise UsageError(f"--device {device.value} / --dtype {dtype.value}: options of the JAX models (deepar, "
                         f"itransformer); --model {model.value} computes in numpy float64 on the CPU")
    budget_seconds = None
    if time_budget is not None:
        from tsdp.forecast.plan import parse_duration

        budget_seconds = parse_duration(time_budget)
        if steps is not None or epochs is not None:
            raise UsageError("--time-budget picks the number of steps: give it or --steps/--epochs, not both")
        if epsilon is None or sigma is not None:
            raise UsageError("--time-budget picks the step count with the best signal-to-noise ratio for the budget and "
                             "calibrates the noise for it: it needs --epsilon and --noise-multiplier auto")
    # --noise-multiplier auto with a budget but no length: the training plan's recommended step count
    from_plan = budget_seconds is not None or (sigma is None and epsilon is not None and steps is None
                                               and epochs is None)
    if model in DEEP:
        from tsdp.forecast.deep import require

        require(model.value)
    lag_list = None if lags is None else _lags(lags)
    train_config = trainer.TrainConfig(  # context: the model's receptive field, set once the model is built
        context=context_length, horizon=forecast_length, model=model.value,
        batch_size=batch_size if batch_size is not None else DEFAULT_BATCH, instances=instances, top=top.value,
        bottom=bottom.value, clip_norm=clip_norm, noise_multiplier=sigma, epsilon=epsilon, delta=delta,
        steps=1 if from_plan else steps,  # from the plan: set below, once the shape is known
        epochs=epochs, lr=lr, weight_decay=weight_decay,
        val_windows=val_windows, val_every=val_every, unit=accounted_unit, w=w, label_noise=label_noise,
        context_noise=context_noise, value_bound=value_bound, discretization=discretization,
        checkpoint=checkpoint.value, sampler=sampler,
        # --evaluate-only without a length trains the reference for as long as the private run would
        private=evaluate_only is None or (epochs is None and steps is None),
    )
    acc_opts.check_level(alpha)
    options = dict(min_scale=min_scale, lags=lag_list, num_samples=num_samples, device=device, dtype=dtype,
                   distribution=distribution, nonnegative=nonnegative)
    if dry_run:
        if evaluate_only is not None:
            raise UsageError("--dry-run reads no values, --evaluate-only trains on them: give one of them")
        return _dry_run(input, layout, time_col, value_col, series_col, series_cols, freq, timezone, train_config,
                        model, context_length, forecast_length, val_windows, test_windows, options, batch_size,
                        budget_seconds, from_plan, alpha, common.Console(quiet, json_summary, stdout_taken=False),
                        fill_missing)
    if evaluate_only is None:
        output, report = common.resolve_outputs(input, output, report, force, json_summary)
        custodian = common.resolve_custodian(custodian, input, output, report, force)
        extra = _extra_paths(output, model_out, custodian, input, report, force)
    if not (min_scale > 0):
        raise UsageError(f"--min-scale must be > 0, got {min_scale}")
    randomness = make_random_source(seed)
    rng = randomness.generator
    console = common.Console(quiet, json_summary, stdout_taken=evaluate_only is None and "-" in (output, report))

    table = _load(input, layout, time_col, value_col, series_col, series_cols, freq, timezone, fill_missing,
                  nonnegative=_nonnegative_reason(distribution, nonnegative))
    values = table.values_matrix()  # 0 where a step is missing: no window that touches one is ever sampled
    names = table.series_names
    n_series = values.shape[0]
    calendar = _calendar(table.grid)
    net = _make_net(model, context_length, forecast_length, calendar, options)
    window = trainer.model_context(net)
    train_config = _sized(trainer.with_model(replace(train_config, context=window), net), batch_size, n_series)
    if window != context_length:
        _check_receptive_field(values.shape[1], window, context_length, forecast_length, val_windows, test_windows)
    split = trainer.split_panel(values, window, forecast_length, val_windows, calendar=calendar,
                                test_windows=test_windows)
    split = _skip_gaps(split, table, window, forecast_length, val_windows + test_windows)
    seasons = _seasons(calendar, split, season, window)
    training_plan = None
    if from_plan:  # timed only when a time budget is to be met
        training_plan = _training_plan(net, train_config, n_series, split.accounted_length, calendar, budget_seconds,
                                       timed=budget_seconds is not None)
        train_config = replace(train_config, steps=training_plan["recommended"]["steps"])
    plan = trainer.plan_training(train_config, n_series, split.accounted_length)

    if evaluate_only is not None:
        return _evaluate_only(net, split, train_config, plan, rng, seasons, evaluate_only, console)

    for message in plan.warnings:
        console.warn(message)
    with _training_progress(console, plan.steps) as progress:
        result = trainer.train(net, split, train_config, rng, progress, plan)
    scores = {"model (DP-SGD)": trainer.evaluate(net, result.theta, split, seasons["headline"]),
              **trainer.seasonal_baselines(split, seasons["baselines"], seasons["headline"])}
    claim = dpsgd_claim(train_config, plan, result)
    covered = train_config.checkpoint == Checkpoint.last.value
    forecasts = _forecast_table(net, result.theta, split, table, names, rng)
    noise_caveats = [FLOAT_WARNING] if train_config.sampler == "float" else []
    warnings = [*plan.warnings, FORECAST_NOTE, *noise_caveats] + ([] if covered else [BEST_CHECKPOINT_CAVEAT]) + (
        [SEEDED_WARNING] if randomness.seeded else [])
    training = _training_summary(train_config, plan, result, n_series, split, seasons, net, batch_size is None)
    from tsdp.forecast import persist

    weights = persist.weights_bytes(net, result.theta)
    model_meta = persist.metadata_bytes(net, weights, Path(extra["weights"]).name, {
        "training": training,
        "privacy": {"definition": "approx-dp", "epsilon": claim.epsilon, "delta": claim.delta,
                    "theorem": claim.theorem, "unit": claim.unit.neighbouring,
                    "checkpoint": train_config.checkpoint, "guarantee_covers_these_weights": covered,
                    "caveats": [FORECAST_NOTE, *noise_caveats, "not privacy-accounted: " + "; ".join(unaccounted(train_config.checkpoint))]
                    + ([] if covered else [BEST_CHECKPOINT_CAVEAT])},
        "input": {"time_col": time_col, "series": names, "freq": table.grid.freq,
                  "start": None if calendar.origin is None else str(calendar.origin)},
    })
    figures = {"note": METRICS_NOTE, "season": seasons["headline"], "seasons": list(seasons["baselines"]),
               "test_origins": len(split.test_origins), "scores": scores, "history": result.history,
               "best_step": result.best_step, "best_val_loss": result.best_val_loss,
               "released_checkpoint": train_config.checkpoint}
    common.publish(forecasts, output, report, lambda described: Report(
        command="forecast-train",
        parameters={**params, "input": common.display_name(input), "output": described["file"],
                    "noise_multiplier": plan.noise_multiplier, "batch_size": train_config.batch_size,
                    **({"steps": train_config.steps} if from_plan else {}), "model_files": [Path(extra["weights"]).name, Path(extra["meta"]).name],
                    "custodian_file": Path(custodian).name, "training": training,
                    **({"training_plan": training_plan} if training_plan else {})},
        claim=claim,
        output={**described, "columns": forecasts.columns},
        randomness=randomness.label,
        grid={"freq": table.grid.freq, "series": n_series, "train_length": split.accounted_length,
              **({} if split.admissible is None else {"train_steps_with_gaps": split.train.shape[1]})},
        notes=_notes(train_config, plan, result, net, split, seasons, batch_size is None, training_plan)
              + _gap_notes(split, table),
        warnings=warnings,
        accuracy=forecast_model(alpha).to_dict(),
    ), extra_files=((weights, extra["weights"], "--model-out"), (model_meta, extra["meta"], "--model-out")),
        private_files=((common.custodian_document("forecast-train", figures), custodian, "--custodian"),),
        force=force)
    for message in warnings:
        console.warn(message)
    console.summary({
        "output": output, "report": report, "model": extra["meta"], "custodian": custodian,
        "epsilon": result.epsilon, "delta": delta, "steps": result.steps, "compositions": result.compositions,
        "stopped_by": plan.stopped_by, "noise_multiplier": plan.noise_multiplier, "theorem": claim.theorem,
        "batch_size": train_config.batch_size, "checkpoint": train_config.checkpoint,
        "accuracy": acc_opts.shown(forecast_model(alpha), json_summary),
        # the held-out scores are figures of the private series: in the custodian file only, never on stdout
    }, "tsdp forecast-train")

def _dry_run(input, layout, time_col, value_col, series_col, series_cols, freq, timezone, train_config, model,
             context_length, forecast_length, val_windows, test_windows, options, batch_size, budget_seconds,
             from_plan: bool, alpha: float, console, fill_missing: FillMissing = FillMissing.error) -> dict | None:
    """The accountant's plan (noise multiplier, steps, budget) from the public shape (series ids and the
    time column; no value is read), and with a budget the training plan (:mod:`tsdp.forecast.plan`):
    noise, signal-to-noise and timed wall time for several step counts and batch sizes; nothing is
    trained on the data or written. Steps absent from a series are refused as training would refuse
    them, or under --fill-missing null set the accountant's length as in training (empty values in
    rows that exist are found by training only)."""
    from tsdp.forecast import trainer
    from tsdp.io.load import InputSpec
    from tsdp.engine.public_shape import public_panel

    keep = fill_missing is FillMissing.null
    spec = InputSpec(layout=layout.value, time_col=time_col, value_col=value_col, series_col=series_col,
                     series_cols=common.split_list(series_cols), freq=freq, timezone=timezone, fill_missing=keep)
    try:
        shape = public_panel(input, spec, absent=keep)
    except DataError as exc:
        raise DataError(str(exc).replace(f"; {MISSING_STEPS_HINT}", f"; {MISSING_HINT}")) from None
    n_series, length, read = shape.n_series, shape.n_steps, shape.read
    calendar = _public_calendar(input, spec)
    net = _make_net(model, context_length, forecast_length, calendar, options)
    window = trainer.model_context(net)
    config = _sized(trainer.with_model(replace(train_config, context=window), net), batch_size, n_series)
    train_length = length - forecast_length * (test_windows + val_windows)
    if train_length < window + forecast_length:
        raise DataError(f"series of {length} steps are too short: {train_length} remain for training after "
                        f"{test_windows} test windows and {val_windows} validation windows of {forecast_length}, fewer "
                        f"than the window {window} + --forecast-length {forecast_length}")
    accounted = train_length
    if shape.missing:
        from tsdp.forecast import sampling

        if shape.absent[:, max(0, train_length - window):].any():
            raise DataError(f"a series misses a step among its last {length - max(0, train_length - window)}, which "
                            "every series needs complete (the last context and the held-out windows)")
        accounted = sampling.accounted_length(
            sampling.admissible_starts(shape.absent[:, :train_length], window, forecast_length), forecast_length)
        from tsdp.caveats import Caveat

        console.warn(Caveat("missing_cells", f"the input misses {shape.missing} step(s) (rows absent; first: series "
                            f"{shape.first_series!r} at {shape.first_time}); --fill-missing null: no training window "
                            "touches one, and the accountant takes the fewest windows a series has left (length "
                            f"{accounted} of {train_length})"))
    training_plan = None
    if config.epsilon is not None:
        training_plan = _training_plan(net, config, n_series, accounted, calendar, budget_seconds)
        if from_plan:
            config = replace(config, steps=training_plan["recommended"]["steps"])
    plan = trainer.plan_training(config, n_series, accounted)
    accuracy = forecast_model(alpha)
    summary = {
        "dry_run": f"read {read}; nothing trained on the data or written",
        "series": n_series, "train_length": accounted, "receptive_field": window, "missing_steps": shape.missing,
        "batch_size": config.batch_size, "batch_size_rule": BATCH_RULE if batch_size is None else "given",
        **_model_inputs(net),
        "epsilon_budget": train_config.epsilon, "delta": train_config.delta,
        "noise_multiplier": plan.noise_multiplier, "steps": plan.steps, "stopped_by": plan.stopped_by,
        "theorem": plan.derivation.theorem if plan.derivation else None,
        **({"training_plan": training_plan} if training_plan else {}),
        "accuracy": accuracy.to_dict() if console.json_mode else accuracy.statement,
    }
    for message in plan.warnings:
        console.warn(message)
    if acc_opts.planning():
        return {**summary, "accuracy": accuracy.to_dict()}
    console.summary(summary if console.json_mode else {k: v for k, v in summary.items() if k != "training_plan"},
                    "tsdp forecast-train --dry-run")
    if training_plan and not console.json_mode and not console.quiet:
        _print_plan(training_plan)
    return None


def _training_plan(net, config, n_series: int, train_length: int, calendar, budget_seconds,
                   timed: bool = True) -> dict[str, Any]:
    """The training plan of :mod:`tsdp.forecast.plan` (public parameters and this machine's timing only);
    every batch size of the grid when ``timed`` (the dry run, --time-budget), else the run's alone."""
    from tsdp.forecast import plan as training
    from tsdp.forecast.trainer import make_setting

    batches = training.batch_grid(n_series, config.instances, config.batch_size) if timed else (config.batch_size,)
    seconds = {}
    for batch in batches if timed else ():
        sized = replace(config, batch_size=batch)
        setting = make_setting(sized, n_series, train_length, config.noise_multiplier or 1.0)
        seconds[batch] = training.time_step(net, sized, batch, calendar, setting=setting)
    rows = training.training_grid(config, n_series, train_length, batches, seconds_per_step=seconds or None)
    best = training.recommend(rows, config.batch_size, budget_seconds)
    return {"epsilon": config.epsilon, "delta": config.delta, "clip_norm": config.clip_norm,
            "parameters": config.parameters, "step_times": [{"batch_size": b, "seconds": t} for b, t in seconds.items()],
            "time_budget_seconds": budget_seconds, "rows": [r.to_dict() for r in rows],
            "recommended": best.to_dict(), "rule": PLAN_RULE}


def _print_plan(training_plan: dict[str, Any]) -> None:
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


def _sized(config, batch_size: int | None, n_series: int):
    """The run's batch size: as given (checked against the panel), or min(256, N lambda)."""
    from tsdp.forecast.plan import default_batch_size

    if batch_size is None:
        return replace(config, batch_size=default_batch_size(n_series, config.instances))
    if batch_size // config.instances > n_series:
        raise DataError(f"--batch-size {batch_size} with --instances {config.instances} takes "
                        f"{batch_size // config.instances} series per step, but the input has only {n_series}; lower "
                        f"--batch-size (the default is {BATCH_RULE})")
    return config


def _seasons(calendar, split, season: int | None, window: int) -> dict[str, Any]:
    """The headline season (``--season``, or the longest natural season the receptive field covers) and the
    seasons of every naive baseline (1 and the natural seasons of the step, with the headline)."""
    from tsdp.forecast.timefeatures import headline_season, natural_seasons

    natural = natural_seasons(calendar.step_us, calendar.step_months) if calendar.origin is not None else ()
    headline = season if season is not None else headline_season(natural, window)
    history = split.history.shape[1]
    if headline >= history:
        raise UsageError(f"--season {headline} needs a history longer than {history} values before the first test "
                         "window; give a shorter --season")
    return {"headline": headline, "baselines": tuple(sorted({1, headline, *(m for m in natural if m < history)}))}


def _lags(text: str) -> tuple[int, ...]:
    from tsdp.forecast.timefeatures import parse_lags

    return parse_lags(text)


def _calendar(grid):
    """The public time features' calendar of the panel's grid (integer time: positions only)."""
    from tsdp.forecast.timefeatures import Calendar

    step = grid.step
    if step is None or step.unit == "int":
        return Calendar()
    first = grid.points[0]
    if getattr(first, "tzinfo", None) is not None:
        first = first.replace(tzinfo=None)  # calendar features in the series' own wall-clock time
    origin = np.datetime64(first.isoformat(), "us")
    if step.unit == "mo":
        return Calendar(origin, step_months=step.amount)
    return Calendar(origin, step_us=step.amount)


def _public_calendar(input, spec):
    """DeepAR's default lags and the natural seasons depend on the time step: the calendar of the public grid."""
    from tsdp.io.files import read_table
    from tsdp.io.timegrid import build_grid
    from tsdp.io.timeparse import parse_time_column

    df = read_table(input, {spec.time_col: "time"}, None)
    times = parse_time_column(df.select(spec.time_col), spec.time_col, spec.timezone)[spec.time_col]
    return _calendar(build_grid(times, spec.time_col, spec.freq, True))


def _make_net(model: Model, context: int, horizon: int, calendar, options: dict[str, Any]):
    """The model for the options; DeepAR's lags default to GluonTS's for the step up to 4 contexts
    (:func:`tsdp.forecast.timefeatures.default_lags`) and its time features to GluonTS's for the step."""
    from tsdp.forecast.models import make_model
    from tsdp.forecast.timefeatures import default_lags

    common_options = dict(min_scale=options["min_scale"], nonnegative=options["nonnegative"])
    if model not in DEEP:
        return make_model(model.value, context, horizon, **common_options)
    deep = dict(common_options, device=options["device"].value, dtype=options["dtype"].value)
    if model is Model.deepar:
        lags = options["lags"]
        if lags is None:
            lags = default_lags(calendar.step_us, calendar.step_months, context=context) \
                if calendar.origin is not None else default_lags(context=context)
        deep.update(lags=lags, time_features=calendar.default_features(), num_samples=options["num_samples"],
                    distribution=options["distribution"].value)
    net = make_model(model.value, context, horizon, **deep)
    _ = net.device  # resolve --device now: a missing GPU is a usage error before any work
    return net


def _model_inputs(net) -> dict[str, Any]:
    """What the model reads (public): DeepAR's lags, time features and output distribution."""
    out: dict[str, Any] = {"model_context": net.context, "nonnegative": bool(getattr(net, "nonnegative", False))}
    if net.name == Model.deepar.value:
        out.update(lags=list(net.lags), time_features=list(net.time_features), distribution=net.distribution)
    return out


def _check_receptive_field(length: int, window: int, context: int, horizon: int, val_windows: int,
                           test_windows: int) -> None:
    train_length = length - horizon * (test_windows + val_windows)
    if train_length < window + horizon:
        raise DataError(
            f"series of {length} steps are too short for --model deepar: a window reads --context-length {context} "
            f"plus the largest of --lags minus 1, {window} values, and --forecast-length {horizon}, {window + horizon} "
            f"in all, but {train_length} remain for training after {test_windows} test windows and {val_windows} "
            "validation windows; use smaller --lags or --context-length, or fewer --test-windows"
        )


def _nonnegative_reason(distribution, nonnegative: bool) -> str | None:
    """Which option makes negative values an input error (None: they are allowed)."""
    if distribution.value in COUNTS:
        return f"--distribution {distribution.value} models counts"
    return "--nonnegative forecasts a quantity that cannot be negative" if nonnegative else None


def _noise_multiplier(text: str) -> float | None:
    if str(text).strip().lower() == "auto":
        return None
    try:
        value = float(text)
    except ValueError:
        raise UsageError(f"--noise-multiplier {text!r}: must be a number > 0 or 'auto'") from None
    if not value > 0 or not np.isfinite(value):
        raise UsageError(f"--noise-multiplier {text!r}: must be a number > 0 or 'auto'")
    return value


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


GAPS_NOTE = ("--fill-missing null: {count} step(s) of the input are missing; no training window touches one (nothing is "
             "imputed), and the accountant is given the fewest admissible windows of a series, T = {windows} (length "
             "{length}), as for the shortest series (Schuchardt et al. 2025, App. I.1: the WR bounds grow with "
             "min(k, T) / T). The pattern of missing steps is treated as public and the same in neighbouring "
             "datasets: the guarantee covers the values present, not which steps are missing")


def _skip_gaps(split, table, window: int, horizon: int, held_out_windows: int):
    """``split`` with the training windows that touch a missing step marked inadmissible (and the
    accountant's length with them); DataError if a step is missing where every series needs one: the
    last context and the held-out validation and test steps."""
    if getattr(table, "filled_mask", None) is None or table.filled_cells == 0:
        return split
    from dataclasses import replace

    from tsdp.forecast import sampling

    mask = ~table.observed_matrix()
    train_length = split.train.shape[1]
    tail = mask[:, max(0, train_length - window):]
    if tail.any():
        i = int(np.flatnonzero(tail.any(axis=1))[0])
        first = table.grid.points[max(0, train_length - window) + int(np.flatnonzero(tail[i])[0])]
        raise DataError(f"series {table.series_names[i]!r} misses the step {first} among its last {tail.shape[1]} "
                        f"(the model's context of {window} before the validation and test windows, and those "
                        f"{horizon * held_out_windows} held-out steps), which every series needs complete: fill it or "
                        "end the series before it")
    admissible = sampling.admissible_starts(mask[:, :train_length], window, horizon)
    sampling.accounted_length(admissible, horizon, table.series_names)  # a series without any window is refused
    return replace(split, admissible=admissible)


def _gap_notes(split, table) -> list[str]:
    if split.admissible is None:
        return []
    return [GAPS_NOTE.format(count=table.filled_cells, windows=int(split.admissible.sum(axis=1).min()),
                             length=split.accounted_length)]


def _load(input, layout, time_col, value_col, series_col, series_cols, freq, timezone=None,
          fill_missing: "FillMissing | None" = None, nonnegative=None):
    """The panel; ``nonnegative`` (the option that requires it) makes a negative value an input error."""
    allow_negative = nonnegative is None
    if layout is Layout.wide:
        named = common.split_list(series_cols)
        df = read_table(input, {time_col: "time", **{c: "number" for c in named or ()}},
                        rest=None if named else "number")
    else:
        df = read_table(input, {time_col: "time", **({value_col: "number"} if value_col else {}),
                                **({series_col: "text"} if series_col else {})})
    keep = fill_missing is FillMissing.null  # missing cells become 0, marked in table.missing
    try:
        if layout is Layout.wide:
            if value_col or series_col:
                raise UsageError("--value-col/--series-col are for --layout long; use --series-cols with wide")
            return load_wide(df, time_col, common.split_list(series_cols), freq, keep, allow_negative=allow_negative,
                             null_hint=MISSING_HINT, timezone=timezone)
        if value_col is None:
            raise UsageError("--value-col is required with --layout long")
        return load_long(df, time_col, value_col, series_col, freq, keep, allow_negative=allow_negative,
                         null_hint=MISSING_HINT, timezone=timezone)
    except DataError as exc:
        message = str(exc).replace(f"; {MISSING_STEPS_HINT}", f"; {MISSING_HINT}")
        message = message.replace("counts must be >= 0 (pass --allow-negative for series that may be negative)",
                                  f"values must be >= 0: {nonnegative}")
        raise DataError(message) from None


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


def _training_summary(config, plan, result, n_series, split, seasons, net, default_batch: bool) -> dict[str, Any]:
    return {"model": config.model, "steps": result.steps, "compositions": result.compositions,
            "stopped_by": plan.stopped_by, "noise_multiplier": plan.noise_multiplier, "clip_norm": config.clip_norm,
            "batch_size": config.batch_size, "batch_size_rule": BATCH_RULE if default_batch else "given",
            "lr": config.lr, "weight_decay": config.weight_decay,
            "context": config.context, "horizon": config.horizon, "series": n_series,
            "train_length": split.train.shape[1], "checkpoint": config.checkpoint,
            "test_windows": len(split.test_origins), "season": seasons["headline"],
            "baseline_seasons": list(seasons["baselines"]), **_engine(net)}


def _engine(net) -> dict[str, Any]:
    """How the model computed: numpy float64, or JAX with its precision and device (public)."""
    if Model(net.name) not in DEEP:
        return {"engine": "numpy", "dtype": "float64", **_model_inputs(net)}
    out = {"engine": "jax", "dtype": net.dtype, "device": net.device.platform, **_model_inputs(net)}
    if net.name == Model.deepar.value:
        out.update(receptive_field=net.receptive_field)
    return out


def _forecast_table(net, theta, split, table, names, rng) -> pl.DataFrame:
    from tsdp.forecast.metrics import QUANTILE_LEVELS
    from tsdp.forecast.trainer import window_features

    horizon = split.test_target.shape[1]
    n, context = split.future_context.shape
    extra = window_features(net, split, np.full(n, split.future_position), context)
    if net.name == Model.deepar.value:
        extra["rng"] = rng  # sample paths keyed from the run's generator
    loc, quantiles = net.forecast(theta, split.future_context, QUANTILE_LEVELS, **extra)
    times = following_points(table.grid, horizon)
    series_name = table.series_col or "series"
    frame = {
        series_name: pl.Series(np.repeat(np.array(names, dtype=object), horizon).tolist(),
                               dtype=table.frame.schema[table.series_col] if table.series_col else pl.String),
        table.time_col: pl.concat([times] * len(names)),
        "mean": loc.ravel(),
    }
    for k, level in enumerate(QUANTILE_LEVELS):
        frame[f"q{level:g}"] = quantiles[:, :, k].ravel()
    return pl.DataFrame(frame)


def _notes(config, plan, result, net, split, seasons, default_batch: bool, training_plan) -> list[str]:
    notes = [
        f"(epsilon, delta) = ({result.epsilon:.6g}, {config.delta:g}) after {result.compositions} "
        f"{plan.derivation.accounting_unit}-level compositions, by {plan.derivation.theorem}; the same as "
        "'tsdp account dpsgd' for this setting and count",
        FORECAST_NOTE,
        "not privacy-accounted, as in the paper: " + "; ".join(unaccounted(config.checkpoint)),
        "the guarantee covers every intermediate model; the released weights are "
        + ("the last iterate, chosen without looking at the data (no early stopping: a validation-based choice of "
           "the step is a data-dependent selection the accountant does not cover)"
           if config.checkpoint == Checkpoint.last.value else "NOT covered: " + BEST_CHECKPOINT_CAVEAT),
        "held-out metrics and the validation history are figures of the private data: they are in the custodian "
        f"file, not in this report; they score {len(split.test_origins)} forecast origins (rolling windows of "
        f"{config.horizon} steps over the held-out tail) against the seasonal naive forecasts of seasons "
        f"{', '.join(str(m) for m in seasons['baselines'])} (headline and MASE scale: {seasons['headline']})",
        f"batch size {config.batch_size}" + (f" (the default, {BATCH_RULE})" if default_batch else ""),
    ]
    if plan.stopped_by == "budget":
        notes.append(f"training stopped before the budget epsilon {config.epsilon:g} would be exceeded")
    if training_plan:
        best = training_plan["recommended"]
        budget = training_plan["time_budget_seconds"]
        notes.append(f"{best['steps']} steps from the training plan: {PLAN_RULE}"
                     + ("" if budget is None else f" of {budget:g} s (estimated {best['seconds']:.0f} s on this machine)"))
    if getattr(net, "nonnegative", False):
        notes.append("--nonnegative: the forecasts are those of max(Y, 0) (post-processing of the model's output)")
    engine = _engine(net)
    if engine["engine"] == "jax":
        notes.append(f"the model computed in {engine['dtype']} with JAX on {engine['device']}; per-window gradients "
                     "were computed by JAX and clipped by jax-privacy (clipping.clipped_fun), and the noise "
                     "drawn on the host by tsdp")
    if "receptive_field" in engine:
        notes.append(f"DeepAR reads --context-length {engine['model_context']} values plus its largest lag minus 1 "
                     f"(lags {_ranges(engine['lags'])}; time features {', '.join(engine['time_features'])}; output "
                     f"{engine['distribution']}): the accountant's context length is this receptive field, "
                     f"L_C = {engine['receptive_field']}")
    return notes


def _ranges(values) -> str:
    """1,2,3,7 -> '1-3,7'."""
    out, run = [], [values[0]] if values else []
    for v in list(values[1:]):
        if v == run[-1] + 1:
            run.append(v)
        else:
            out.append(run)
            run = [v]
    if run:
        out.append(run)
    return ",".join(f"{r[0]}-{r[-1]}" if len(r) > 1 else f"{r[0]}" for r in out)


def _evaluate_only(net, split, config, plan, rng, seasons, mode, console) -> None:
    """NON-private references: the seasonal naive forecasts, and the model trained without noise, with
    clipping (``clipped``: DP-SGD's step without its noise) or without (``unclipped``)."""
    from tsdp.forecast import trainer

    steps = plan.steps
    clipped = mode is EvaluateOnly.clipped
    reference = trainer.TrainConfig(**{**config.__dict__, "private": False, "clipped": clipped, "steps": steps,
                                       "epochs": None})
    result = trainer.train(net, split, reference, rng)
    label = "clipped, without noise" if clipped else "without clipping or noise"
    model_scores = trainer.evaluate(net, result.theta, split, seasons["headline"])
    naive = trainer.seasonal_baselines(split, seasons["baselines"], seasons["headline"])
    console.warn(Caveat("not_private_diagnostic", "--evaluate-only trains a NON-private reference on the data: the "
                        "figures are not private, are for comparison only, and nothing was written"))
    headline = naive[f"seasonal naive (season {seasons['headline']})"]
    console.summary({"steps": steps, "season": seasons["headline"], "model": config.model, "reference": label,
                     "test_origins": model_scores["origins"],
                     "crps_seasonal_naive": headline["crps"], "crps_model_reference": model_scores["crps"],
                     "mase_seasonal_naive": headline["mase"], "mase_model_reference": model_scores["mase"],
                     **{f"crps_seasonal_naive_{m}": naive[f"seasonal naive (season {m})"]["crps"]
                        for m in seasons["baselines"]},
                     "release_written": False}, "tsdp forecast-train --evaluate-only")

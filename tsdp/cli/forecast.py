"""``tsdp forecast-train``: DP-SGD training of forecasting models, accounted with structured subsampling.

Thin: parse and validate the options (:class:`tsdp.forecast.trainer.TrainConfig`), load the panel, plan
the run with the accountant, train (:func:`tsdp.forecast.trainer.train`) and publish the forecasts,
the model (weights + metadata), the privacy report and the custodian file (held-out metrics and the
validation history: figures of the private data, NOT for publication) atomically.
``--evaluate-only`` trains the NON-private baselines instead and writes nothing.

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


SEASONS = {"1h": 24, "1d": 7, "1w": 52, "1mo": 12, "1q": 4, "30m": 48, "15m": 96, "10m": 144}
MISSING_HINT = ("forecast-train needs complete series, or --fill-missing null to train only on windows without a "
                "missing step")
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
    lags: Optional[str] = typer.Option(None, help="deepar: lags such as 1-7,23-25,47-49 [default: GluonTS's for the time step, e.g. 40 lags up to 721 for 1h]."),
    num_samples: int = typer.Option(100, help="deepar: sample paths per forecast."),
    device: Device = typer.Option(Device.auto, help="deepar/itransformer: JAX device (gpu needs a CUDA build of jax; auto: a GPU when JAX sees one)."),
    dtype: Dtype = typer.Option(Dtype.float32, help="deepar/itransformer: floating-point precision of the JAX computation."),
    batch_size: int = typer.Option(256, help="B: windows per batch (expected size for Poisson schemes)."),
    instances: int = typer.Option(1, help="lambda: windows per selected series (1 is optimal, Thm 4.1)."),
    top: Top = typer.Option(Top.wor, help="Top level: series without replacement / Poisson per step, or iterated per epoch."),
    bottom: Bottom = typer.Option(Bottom.wr, help="Bottom level: windows with replacement, or Poisson."),
    clip_norm: float = typer.Option(1e-4, help="C: per-window gradient clipping norm (the paper's 1e-4; tune it)."),
    noise_multiplier: str = typer.Option("auto", help="sigma: noise std / C, or 'auto' to calibrate for --epochs at --epsilon."),
    epsilon: Optional[float] = typer.Option(None, help="Privacy budget epsilon: training stops before exceeding it."),
    delta: Optional[float] = typer.Option(None, help="Privacy parameter delta (the paper uses 1e-7; below 1/N)."),
    epochs: Optional[int] = typer.Option(None, help="Epochs to train (steps per epoch = floor(N lambda / B))."),
    steps: Optional[int] = typer.Option(None, "--steps", help="Steps to train (instead of --epochs)."),
    lr: float = typer.Option(1e-3, help="Adam learning rate."),
    weight_decay: float = typer.Option(1e-8, help="Adam (L2) weight decay."),
    val_windows: int = typer.Option(5, help="Validation windows of L_F steps held out at the end of each series."),
    val_every: Optional[int] = typer.Option(None, help="Validate every this many steps [default: 25 times per run]."),
    checkpoint: Checkpoint = typer.Option(Checkpoint.last, help="Released weights: the last iterate (covered by the guarantee), or the best on private validation windows (NOT covered; marked so in the report and the model file)."),
    unit: str = typer.Option("w-event", metavar="[w-event|w-user|event]", help="Protect --w contiguous steps (w-event) or any --w steps (w-user) of one series; event: one step (--w 1)."),
    w: int = typer.Option(1, help="w: number of protected time steps."),
    label_noise: float = typer.Option(0.0, help="sigma_F: Gaussian noise on forecast windows, in units of --value-bound."),
    context_noise: float = typer.Option(0.0, help="sigma_C: Gaussian noise on context windows, in units of --value-bound."),
    value_bound: Optional[float] = typer.Option(None, help="v: largest change of one value under the (w, v) relation (needed with label/context noise)."),
    season: Optional[int] = typer.Option(None, help="Season length of the seasonal naive baseline and MASE [default: from the step, e.g. 24 for 1h].", min=1),
    min_scale: float = typer.Option(1e-3, help="PUBLIC floor of the mean scale of a window."),
    discretization: float = typer.Option(1e-3, help="Privacy-loss grid step of the accountant's PLD."),
    evaluate_only: bool = typer.Option(False, help="Train NON-private baselines (seasonal naive and the model without noise), print their metrics, write nothing."),
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
    if model not in DEEP and (device is not Device.auto or dtype is not Dtype.float32):
        raise UsageError(f"--device {device.value} / --dtype {dtype.value}: options of the JAX models (deepar, "
                         f"itransformer); --model {model.value} computes in numpy float64 on the CPU")
    if model in DEEP:
        from tsdp.forecast.deep import require

        require(model.value)
    lag_list = None if lags is None else _lags(lags)
    train_config = trainer.TrainConfig(  # context: the model's receptive field, set once the model is built
        context=context_length, horizon=forecast_length, model=model.value, batch_size=batch_size,
        instances=instances, top=top.value, bottom=bottom.value, clip_norm=clip_norm, noise_multiplier=sigma,
        epsilon=epsilon, delta=delta, steps=steps, epochs=epochs, lr=lr, weight_decay=weight_decay,
        val_windows=val_windows, val_every=val_every, unit=accounted_unit, w=w, label_noise=label_noise,
        context_noise=context_noise, value_bound=value_bound, discretization=discretization,
        checkpoint=checkpoint.value, sampler=sampler,
        # --evaluate-only without a length trains the baselines for as long as the private run would
        private=not evaluate_only or (epochs is None and steps is None),
    )
    acc_opts.check_level(alpha)
    if dry_run:
        if evaluate_only:
            raise UsageError("--dry-run reads no values, --evaluate-only trains on them: give one of them")
        return _dry_run(input, layout, time_col, value_col, series_col, series_cols, freq, timezone, train_config,
                        model, context_length, forecast_length, val_windows, min_scale, lag_list, num_samples,
                        device, dtype, alpha, common.Console(quiet, json_summary, stdout_taken=False), fill_missing)
    if not evaluate_only:
        output, report = common.resolve_outputs(input, output, report, force, json_summary)
        custodian = common.resolve_custodian(custodian, input, output, report, force)
        extra = _extra_paths(output, model_out, custodian, input, report, force)
    if not (min_scale > 0):
        raise UsageError(f"--min-scale must be > 0, got {min_scale}")
    randomness = make_random_source(seed)
    rng = randomness.generator
    console = common.Console(quiet, json_summary, stdout_taken=not evaluate_only and "-" in (output, report))

    table = _load(input, layout, time_col, value_col, series_col, series_cols, freq, timezone, fill_missing)
    values = table.values_matrix()  # 0 where a step is missing: no window that touches one is ever sampled
    names = table.series_names
    n_series = values.shape[0]
    calendar = _calendar(table.grid)
    net = _make_net(model, context_length, forecast_length, min_scale, lag_list, calendar, num_samples, device,
                    dtype)
    window = trainer.model_context(net)
    train_config = trainer.with_model(replace(train_config, context=window), net)
    if window != context_length:
        _check_receptive_field(values.shape[1], window, context_length, forecast_length, val_windows)
    split = trainer.split_panel(values, window, forecast_length, val_windows, calendar=calendar)
    split = _skip_gaps(split, table, window, forecast_length, val_windows)
    if batch_size // instances > n_series:
        raise DataError(f"--batch-size {batch_size} with --instances {instances} takes {batch_size // instances} series "
                        f"per step, but the input has only {n_series}; lower --batch-size")
    season_length = season if season is not None else SEASONS.get(table.grid.freq or "", 1)
    plan = trainer.plan_training(train_config, n_series, split.accounted_length)

    if evaluate_only:
        return _evaluate_only(net, split, train_config, plan, rng, season_length, console)

    for message in plan.warnings:
        console.warn(message)
    with _training_progress(console, plan.steps) as progress:
        result = trainer.train(net, split, train_config, rng, progress, plan)
    scores = {"model (DP-SGD)": trainer.evaluate(net, result.theta, split, season_length),
              "seasonal naive (not private)": trainer.evaluate_seasonal_naive(split, season_length)}
    claim = dpsgd_claim(train_config, plan, result)
    covered = train_config.checkpoint == Checkpoint.last.value
    forecasts = _forecast_table(net, result.theta, split, table, names, rng)
    noise_caveats = [FLOAT_WARNING] if train_config.sampler == "float" else []
    warnings = [*plan.warnings, FORECAST_NOTE, *noise_caveats] + ([] if covered else [BEST_CHECKPOINT_CAVEAT]) + (
        [SEEDED_WARNING] if randomness.seeded else [])
    training = _training_summary(train_config, plan, result, n_series, split, season_length, net)
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
    figures = {"note": METRICS_NOTE, "season": season_length, "scores": scores, "history": result.history,
               "best_step": result.best_step, "best_val_loss": result.best_val_loss,
               "released_checkpoint": train_config.checkpoint}
    common.publish(forecasts, output, report, lambda described: Report(
        command="forecast-train",
        parameters={**params, "input": common.display_name(input), "output": described["file"],
                    "noise_multiplier": plan.noise_multiplier, "model_files": [Path(extra["weights"]).name,
                                                                               Path(extra["meta"]).name],
                    "custodian_file": Path(custodian).name},
        claim=claim,
        output={**described, "columns": forecasts.columns},
        randomness=randomness.label,
        grid={"freq": table.grid.freq, "series": n_series, "train_length": split.accounted_length,
              **({} if split.admissible is None else {"train_steps_with_gaps": split.train.shape[1]})},
        notes=_notes(train_config, plan, result, net) + _gap_notes(split, table),
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
        "checkpoint": train_config.checkpoint,
        "accuracy": acc_opts.shown(forecast_model(alpha), json_summary),
        # the held-out scores are figures of the private series: in the custodian file only, never on stdout
    }, "tsdp forecast-train")


def _dry_run(input, layout, time_col, value_col, series_col, series_cols, freq, timezone, train_config, model,
             context_length, forecast_length, val_windows, min_scale, lag_list, num_samples, device, dtype,
             alpha: float, console, fill_missing: FillMissing = FillMissing.error) -> dict | None:
    """The accountant's plan (noise multiplier, steps, budget) from the public shape (series ids and the
    time column; no value is read); nothing is trained or written. Steps absent from a series are
    refused as training would refuse them, or under --fill-missing null set the accountant's length
    as in training (empty values in rows that exist are found by training only)."""
    from tsdp.forecast import trainer
    from tsdp.io.load import InputSpec
    from tsdp.io.public_shape import public_panel

    keep = fill_missing is FillMissing.null
    spec = InputSpec(layout=layout.value, time_col=time_col, value_col=value_col, series_col=series_col,
                     series_cols=common.split_list(series_cols), freq=freq, timezone=timezone, fill_missing=keep)
    try:
        shape = public_panel(input, spec, absent=keep)
    except DataError as exc:
        raise DataError(str(exc).replace(f"; {MISSING_STEPS_HINT}", f"; {MISSING_HINT}")) from None
    n_series, length, read = shape.n_series, shape.n_steps, shape.read
    net = _make_net(model, context_length, forecast_length, min_scale, lag_list, _public_calendar(input, spec),
                    num_samples, device, dtype)
    window = trainer.model_context(net)
    config = trainer.with_model(replace(train_config, context=window), net)
    train_length = length - forecast_length * (1 + val_windows)
    if train_length < window + forecast_length:
        raise DataError(f"series of {length} steps are too short: {train_length} remain for training after the test "
                        f"tail and {val_windows} validation windows, fewer than the window {window} + "
                        f"--forecast-length {forecast_length}")
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
    plan = trainer.plan_training(config, n_series, accounted)
    accuracy = forecast_model(alpha)
    summary = {
        "dry_run": f"read {read}; nothing trained or written",
        "series": n_series, "train_length": accounted, "receptive_field": window, "missing_steps": shape.missing,
        "epsilon_budget": train_config.epsilon, "delta": train_config.delta,
        "noise_multiplier": plan.noise_multiplier, "steps": plan.steps, "stopped_by": plan.stopped_by,
        "theorem": plan.derivation.theorem if plan.derivation else None,
        "accuracy": accuracy.to_dict() if console.json_mode else accuracy.statement,
    }
    for message in plan.warnings:
        console.warn(message)
    if acc_opts.planning():
        return {**summary, "accuracy": accuracy.to_dict()}
    console.summary(summary, "tsdp forecast-train --dry-run")
    return None


def _public_calendar(input, spec):
    """DeepAR's default lags depend on the time step: the calendar of the public grid."""
    from tsdp.io.files import read_table
    from tsdp.io.timegrid import build_grid, parse_time_column

    df = read_table(input, {spec.time_col: "time"}, None)
    times = parse_time_column(df.select(spec.time_col), spec.time_col, spec.timezone)[spec.time_col]
    return _calendar(build_grid(times, spec.time_col, spec.freq, True))


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


def _make_net(model: Model, context: int, horizon: int, min_scale: float, lags, calendar, num_samples: int,
              device, dtype):
    from tsdp.forecast.models import make_model
    from tsdp.forecast.timefeatures import default_lags

    if model not in DEEP:
        return make_model(model.value, context, horizon, min_scale=min_scale)
    options = dict(min_scale=min_scale, device=device.value, dtype=dtype.value)
    if model is Model.deepar:
        if lags is None:
            lags = default_lags(calendar.step_us, calendar.step_months) if calendar.origin is not None \
                else default_lags()
        options.update(lags=lags, time_features=calendar.default_features(), num_samples=num_samples)
    net = make_model(model.value, context, horizon, **options)
    _ = net.device  # resolve --device now: a missing GPU is a usage error before any work
    return net


def _check_receptive_field(length: int, window: int, context: int, horizon: int, val_windows: int) -> None:
    train_length = length - horizon * (1 + val_windows)
    if train_length < window + horizon:
        raise DataError(
            f"series of {length} steps are too short for --model deepar: a window reads --context-length {context} "
            f"plus the largest of --lags minus 1, {window} values, and --forecast-length {horizon}, {window + horizon} "
            f"in all, but {train_length} remain for training after the test tail and {val_windows} validation "
            "windows; use smaller --lags or --context-length"
        )


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


def _skip_gaps(split, table, window: int, horizon: int, val_windows: int):
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
                        f"{horizon * (1 + val_windows)} held-out steps), which every series needs complete: fill it or "
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
          fill_missing: "FillMissing | None" = None):
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
            return load_wide(df, time_col, common.split_list(series_cols), freq, keep, allow_negative=True,
                             null_hint=MISSING_HINT, timezone=timezone)
        if value_col is None:
            raise UsageError("--value-col is required with --layout long")
        return load_long(df, time_col, value_col, series_col, freq, keep, allow_negative=True,
                         null_hint=MISSING_HINT, timezone=timezone)
    except DataError as exc:
        message = str(exc).replace(f"; {MISSING_STEPS_HINT}", f"; {MISSING_HINT}")
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


def _training_summary(config, plan, result, n_series, split, season, net) -> dict[str, Any]:
    return {"model": config.model, "steps": result.steps, "compositions": result.compositions,
            "stopped_by": plan.stopped_by, "noise_multiplier": plan.noise_multiplier, "clip_norm": config.clip_norm,
            "batch_size": config.batch_size, "lr": config.lr, "weight_decay": config.weight_decay,
            "context": config.context, "horizon": config.horizon, "series": n_series,
            "train_length": split.train.shape[1], "checkpoint": config.checkpoint, "season": season,
            **_engine(net)}


def _engine(net) -> dict[str, Any]:
    """How the model computed: numpy float64, or JAX with its precision and device (public)."""
    if Model(net.name) not in DEEP:
        return {"engine": "numpy", "dtype": "float64"}
    out = {"engine": "jax", "dtype": net.dtype, "device": net.device.platform, "model_context": net.context}
    if net.name == Model.deepar.value:
        out.update(lags=list(net.lags), time_features=list(net.time_features), receptive_field=net.receptive_field)
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


def _notes(config, plan, result, net) -> list[str]:
    notes = [
        f"(epsilon, delta) = ({result.epsilon:.6g}, {config.delta:g}) after {result.compositions} "
        f"{plan.derivation.accounting_unit}-level compositions, by {plan.derivation.theorem}; the same as "
        "'tsdp account dpsgd' for this setting and count",
        FORECAST_NOTE,
        "not privacy-accounted, as in the paper: " + "; ".join(unaccounted(config.checkpoint)),
        "the guarantee covers every intermediate model; the released weights are "
        + ("the last iterate, chosen without looking at the data" if config.checkpoint == Checkpoint.last.value
           else "NOT covered: " + BEST_CHECKPOINT_CAVEAT),
        "held-out metrics and the validation history are figures of the private data: they are in the custodian "
        "file, not in this report",
    ]
    if plan.stopped_by == "budget":
        notes.append(f"training stopped before the budget epsilon {config.epsilon:g} would be exceeded")
    engine = _engine(net)
    if engine["engine"] == "jax":
        notes.append(f"the model computed in {engine['dtype']} with JAX on {engine['device']}; per-window gradients "
                     "were computed by JAX and clipped by jax-privacy (clipping.clipped_fun), and the noise "
                     "drawn on the host by tsdp")
    if "receptive_field" in engine:
        notes.append(f"DeepAR reads --context-length {engine['model_context']} values plus its largest lag minus 1: "
                     f"the accountant's context length is this receptive field, L_C = {engine['receptive_field']}")
    return notes


def _evaluate_only(net, split, config, plan, rng, season, console) -> None:
    """NON-private baselines: seasonal naive, and the model trained without clipping or noise."""
    from tsdp.forecast import trainer

    steps = plan.steps
    baseline = trainer.TrainConfig(**{**config.__dict__, "private": False, "steps": steps, "epochs": None})
    result = trainer.train(net, split, baseline, rng)
    scores = {"seasonal naive (NOT private)": trainer.evaluate_seasonal_naive(split, season),
              f"{config.model} without noise (NOT private)": trainer.evaluate(net, result.theta, split, season)}
    console.warn(Caveat("not_private_diagnostic", "--evaluate-only trains NON-private baselines on the data: the "
                        "figures are not private, are for comparison only, and nothing was written"))
    naive, plain = scores.values()
    console.summary({"steps": steps, "season": season, "model": config.model,
                     "crps_seasonal_naive": naive["crps"], "crps_model_without_noise": plain["crps"],
                     "mase_seasonal_naive": naive["mase"], "mase_model_without_noise": plain["mase"],
                     "release_written": False}, "tsdp forecast-train --evaluate-only")

"""``tsdp release``: private release of aggregate series (thin: parse, load, call core, write)."""

from __future__ import annotations

import contextlib
from enum import Enum
from typing import Optional

import typer

from tsdp.api.series import Loaded, ReleaseOptions, ReleasePlan, auto_option, load_frame, release_loaded, report_for
from tsdp.caveats import Caveat
from tsdp.cli import accuracy_options as acc_opts
from tsdp.cli import common
from tsdp.io import outputs
from tsdp.cli.engine_options import (Engine, EngineOption, MemoryLimitOption, SparkConfOption, SparkMasterOption,
                                     WorkDirOption, engine_options, given_engine_flags)
from tsdp.engine import series_stream
from tsdp.engine.engines import engine_for
from tsdp.engine.options import EngineOptions
from tsdp.engine.panel import load_event_panel, panel_of
from tsdp.errors import UsageError
from tsdp.io.files import read_table
from tsdp.io.load import SERIES_NOTE, InputSpec
from tsdp.mechanisms.noise import NoiseStream
from tsdp.mechanisms.registry import MECHANISMS, NAMES
from tsdp.rng import SEEDED_WARNING, make_random_source


Mechanism = Enum("Mechanism", {name.replace("-", "_"): name for name in NAMES}, type=str)  # the registry's


# the parameters of release() that are ReleaseOptions fields: each option is spelled once here and once there
RELEASE_OPTIONS = frozenset(ReleaseOptions.__dataclass_fields__)


class Accounting(str, Enum):
    exact = "exact"
    paper = "paper"
    conditional = "conditional"


class Filter(str, Enum):
    gaussian = "gaussian"
    triangle = "triangle"
    boxcar = "boxcar"
    custom = "custom"


class Noise(str, Enum):
    gaussian = "gaussian"
    laplace = "laplace"


class Layout(str, Enum):
    long = "long"
    wide = "wide"
    events = "events"


class Unit(str, Enum):
    event = "event"
    w_event = "w-event"
    user = "user"


class Neighbouring(str, Enum):
    add_remove = "add-remove"
    substitute = "substitute"


class Calibration(str, Enum):
    analytic = "analytic"
    classic = "classic"


class FillMissing(str, Enum):
    error = "error"
    zero = "zero"
    null = "null"


def release(
    input: str = typer.Argument(..., help="CSV (.csv, .csv.gz, .tsv) or Parquet file; - reads stdin (Parquet when it starts with PAR1, else CSV)."),
    mechanism: Mechanism = typer.Option(Mechanism.gaussian, help="Noise mechanism."),
    epsilon: float = typer.Option(..., help="Privacy budget epsilon (> 0)."),
    delta: Optional[float] = typer.Option(None, help="Privacy budget delta in (0, 1); Gaussian only."),
    unit: Unit = typer.Option(..., help="What is protected: one event, a user's w-event window, or a whole user."),
    max_per_step: Optional[str] = typer.Option(None, help="M: largest contribution of one unit to one cell, in the values' unit (events kept per user and bucket, for event input), or auto (event input: chosen privately, see --bound-selection-share) [default: 1, for counts; required for series whose values are not whole numbers]."),
    max_steps: Optional[str] = typer.Option(None, help="I: steps of a series in which one user may contribute (--unit user), or auto (event input: chosen privately)."),
    max_norm: Optional[str] = typer.Option(None, help="C: scale each user's cell totals down to L2 norm at most C, or auto (chosen privately where the bias it removes balances the noise it adds). Event input, --unit user, --mechanism gaussian; the L2 sensitivity is min(M sqrt(cells), C). Without --max-per-step/--max-steps it alone bounds a cell and I = T."),
    bound_selection_share: Optional[float] = typer.Option(None, help="With --max-per-step/--max-steps/--max-norm auto: the share of --epsilon spent choosing the caps (exponential mechanism on a quantile of the users' contributions; the release gets the rest, composed exactly with a Gaussian release, which then keeps more than --epsilon minus the share) [default: 0.1 per cap, 0.15 for --max-norm]."),
    bound_quantile: Optional[float] = typer.Option(None, help="With --max-per-step/--max-steps auto: the quantile of the users' contributions the caps aim at [default: 0.9]."),
    w: Optional[int] = typer.Option(None, help="Window length for --unit w-event.", min=1),
    series_per_user: Optional[int] = typer.Option(None, help="Series one user may contribute to [default: all].", min=1),
    neighbouring: Neighbouring = typer.Option(Neighbouring.add_remove, help="Neighbouring relation."),
    calibration: Calibration = typer.Option(Calibration.analytic, help="Gaussian calibration; classic only to reproduce papers."),
    noise: Optional[Noise] = typer.Option(None, help="Noise of --mechanism dft (default gaussian) or fast (default laplace, the paper's): gaussian gives approximate DP, laplace pure DP."),
    dft_k: Optional[int] = typer.Option(None, help="--mechanism dft: Fourier coefficients kept (the DC term and k-1 lowest frequencies) [default: 30]."),
    sampling_rate: Optional[float] = typer.Option(None, help="--mechanism subsample/filter-subsample: Bernoulli rate p of the sampled time steps [default: 0.1]."),
    accounting: Optional[Accounting] = typer.Option(None, help="subsample: exact (default) or paper; filter-subsample: conditional (default) or paper (Koga et al.'s own calibration)."),
    delta_split: Optional[float] = typer.Option(None, help="--accounting paper: share of delta for the noise, the rest covers the failure event [default: 0.5]."),
    filter_alpha: Optional[float] = typer.Option(None, help="filter-subsample --accounting paper: fix Koga et al.'s alpha instead of solving for it."),
    filter: Optional[Filter] = typer.Option(None, "--filter", help="filter-subsample: kernel [default: gaussian]."),
    filter_sigma: Optional[float] = typer.Option(None, help="Gaussian kernel width in steps [default: 10]."),
    filter_width: Optional[int] = typer.Option(None, help="Boxcar kernel width (odd)."),
    filter_kernel: Optional[str] = typer.Option(None, help="Custom kernel: file of non-negative taps (normalised to sum 1)."),
    assume_none: bool = typer.Option(False, help="No participation bound: a user may appear in every step (I = T)."),
    fast_preset: Optional[str] = typer.Option(None, help="--mechanism fast: parameter preset (cikm2012 or streamdp)."),
    fast_max_samples: Optional[int] = typer.Option(None, help="--mechanism fast: M, the most samples per series (each costs epsilon/M)."),
    fast_fixed_interval: Optional[int] = typer.Option(None, help="--mechanism fast: sample every I steps instead of adaptively."),
    fast_gains: Optional[str] = typer.Option(None, help="--mechanism fast: PID gains Cp,Ci,Cd (summing to 1)."),
    fast_theta: Optional[float] = typer.Option(None, help="--mechanism fast: interval adjustment scale theta."),
    fast_xi: Optional[float] = typer.Option(None, help="--mechanism fast: PID error threshold xi."),
    fast_q: Optional[float] = typer.Option(None, help="--mechanism fast: process noise variance Q of the Kalman filter."),
    fast_r: Optional[float] = typer.Option(None, help="--mechanism fast: measurement noise variance R (default: the noise variance)."),
    evaluate: Optional[int] = typer.Option(None, help="Run the mechanism N times and split its error against the raw input (before caps, clipping, fill) into bounding, approximation, noise and post-processing: a NOT private diagnostic, as tables on stdout (with --json or --custodian: in the custodian file); writes no release.", min=1),
    layout: Optional[Layout] = typer.Option(None, help="Input layout [default: events with --user-col, long with --value-col, else wide]."),
    time_col: str = typer.Option("time", help="Time column."),
    value_col: Optional[str] = typer.Option(None, help="Value column (long layout, or a value per event)."),
    series_col: Optional[str] = typer.Option(None, help="Series id column (long or event layout)."),
    series_cols: Optional[str] = typer.Option(None, help="Comma-separated series columns (wide layout) [default: all but time]."),
    user_col: Optional[str] = typer.Option(None, help="User id column (event layout)."),
    series_keys: Optional[str] = typer.Option(None, help="Comma-separated public series keys (event layout with --series-col)."),
    start: Optional[str] = typer.Option(None, help="First bucket of the public grid (event layout); without a UTC offset, a time of the data's zone."),
    end: Optional[str] = typer.Option(None, help="End of the public grid, exclusive (event layout); without a UTC offset, a time of the data's zone."),
    freq: Optional[str] = typer.Option(None, help="Time step, e.g. 15min, 1h, 1d, 1mo, 1q [default: inferred]."),
    timezone: Optional[str] = common.TimezoneOption,
    fill_missing: FillMissing = typer.Option(FillMissing.error, help="Missing steps and values (long or wide input): an error; zero (counts: a missing step is 0); or null (levels: released as missing; the missing pattern is published as given, gaussian and laplace only)."),
    interpolate_released: bool = typer.Option(False, "--interpolate-released", help="With --fill-missing null: fill each series' interior missing steps by linear interpolation of its released values (post-processing, no privacy cost)."),
    allow_negative: bool = typer.Option(False, help="Accept negative values in the input series (not with --neighbouring substitute: a signed contribution replaced in the same cell moves it by 2 M)."),
    value_bound: Optional[float] = typer.Option(None, help="Clip each event's value to [0, V] (event layout with --value-col)."),
    clip_min: Optional[float] = typer.Option(None, help="Post-process: clip released values below."),
    clip_max: Optional[float] = typer.Option(None, help="Post-process: clip released values above."),
    round_values: bool = typer.Option(False, "--round", help="Post-process: round released values to integers."),
    ledger: Optional[str] = typer.Option(None, help="Budget ledger to charge this release to (with --dataset); refused with exit 3 if it does not fit."),
    dataset: Optional[str] = typer.Option(None, help="Dataset name in --ledger whose budget pays for this release."),
    alpha: Optional[float] = acc_opts.ReleaseAlphaOption,
    accuracy_for: acc_opts.AccuracyFor = acc_opts.AccuracyForOption,
    dry_run: bool = acc_opts.DryRunOption,
    fail_on_noisy: bool = acc_opts.FailOnNoisyOption,
    plot: Optional[str] = acc_opts.PlotOption,
    engine: Engine = EngineOption,
    memory_limit: Optional[str] = MemoryLimitOption,
    work_dir: Optional[str] = WorkDirOption,
    spark_master: Optional[str] = SparkMasterOption,
    spark_conf: Optional[list[str]] = SparkConfOption,
    output: Optional[str] = common.OutputOption,
    report: Optional[str] = common.ReportOption,
    custodian: Optional[str] = common.CustodianOption,
    seed: Optional[int] = common.SeedOption,
    sampler: Optional[str] = common.SamplerOption,
    granularity: Optional[float] = common.GranularityOption,
    force: bool = common.ForceOption,
    json_summary: bool = typer.Option(False, "--json", help="Print a machine-readable summary on stdout."),
    quiet: bool = common.QuietOption,
    config: Optional[str] = common.ConfigOption,
) -> None:
    """Release a series or a panel of series with calibrated Gaussian or Laplace noise."""
    params = common.public_parameters(locals())
    given = {name: value for name, value in locals().items() if name in RELEASE_OPTIONS}
    given["alpha"] = acc_opts.DEFAULT_ALPHA if alpha is None else alpha
    plan = ReleaseOptions(**given).plan()  # every option checked, the budget too, before the data is read
    requested = plan.auto.options if plan.auto is not None else plan.options
    params.update(max_per_step=requested.max_per_step, max_steps=requested.max_steps)  # parsed: 14, not "14"
    params.pop("max_norm")  # recorded only when given (reports without it read as before)
    if requested.max_norm is not None:
        params["max_norm"] = requested.max_norm
    spec = plan.spec
    engine_options = _engine_options(spec, engine, memory_limit, work_dir, spark_master, spark_conf)
    if plan.auto is not None and (dry_run or input == "-"):
        raise UsageError(f"{auto_option(plan.auto.caps)} auto reads the "
                         "events twice (to choose the cap, then to release)" + (
                             ": give a file, not - (stdin)" if input == "-" else
                             "; --dry-run reads none of them: give a number to see the accuracy at that cap"))
    if dry_run:
        if evaluate is not None or plot:
            raise UsageError(f"--dry-run reads no values, {'--evaluate' if evaluate is not None else '--plot'} needs them: "
                             "give one of them")
        return _dry_run(input, plan, common.Console(quiet, json_summary, stdout_taken=False))
    randomness = make_random_source(seed)
    if evaluate is not None:
        from tsdp.cli.evaluation import custodian_path

        if input == "-" and spec.resolved_layout == "events":
            raise UsageError("--evaluate reads event input twice (with and without the caps): give a file, "
                             "not - (stdin)")
        return _evaluate(input, plan, engine_options, randomness, evaluate,
                         common.Console(quiet, json_summary, stdout_taken=False),
                         custodian_path(custodian, input, json_summary, force), force)
    output, report = outputs.resolve_outputs(input, output, report, force, json_summary)
    custodian = common.resolve_custodian(custodian, input, output, report, force)
    if plot is not None:
        from tsdp.cli import plots

        plots.check_plot_path(plot, (output, report), force)
    console = common.Console(quiet, json_summary, stdout_taken="-" in (output, report))
    for caveat in getattr(MECHANISMS[plan.mechanism], "caveats", lambda options, alpha_given: [])(
            plan.options, alpha is not None):
        console.warn(caveat)
    charge = outputs.ledger_reservation(  # reserved before the data is read or any noise is drawn
        ledger, dataset, epsilon, delta or 0.0,
        f"tsdp release {outputs.display_name(input)} -> {outputs.display_name(output)} ({mechanism.value})")

    streamed = plan.cellwise and engine_for(engine_options).streams_series and input != "-" \
        and series_stream.streamable(input, spec, engine_options.memory_limit)
    if streamed and (fail_on_noisy or plot):
        raise UsageError(f"{'--fail-on-noisy' if fail_on_noisy else '--plot'} needs the panel in memory, but this "
                         "input is released in chunks of series (see --memory-limit); raise --memory-limit or drop it")
    findings: list = []  # about the private data (the noisy check): for the custodian file only
    with charge as held, console.progress(4) as stage, _chunks(streamed, input, spec, engine_options, stage) as chunks:
        if chunks is None:
            if plan.auto is not None:  # the caps first, with their share of the budget (tsdp.mechanisms.bounds)
                plan = _resolve(input, plan, engine_options, stage, randomness.generator)
            loaded = _read(input, plan, engine_options, stage, randomness.generator)
            table, diagnostics = loaded.loaded.table, loaded.loaded.diagnostics

            stage("adding noise")
            released, result, notes = release_loaded(plan, loaded, randomness.generator)
            results = [result]
            findings = acc_opts.noisy_check(plan.accuracy(result), _robust_scale(table, plan.accuracy_for),
                                            _SCALE_OF[plan.accuracy_for], MECHANISMS[plan.mechanism].remedy, fail_on_noisy)
        else:
            table, diagnostics = chunks, {}
            panel, notes = panel_of(chunks.n_series, chunks.n_steps, spec, plan.declared, None, False, [SERIES_NOTE])
            released, results = _release_chunks(chunks, panel, plan, randomness.generator, diagnostics, stage)
            notes.extend(plan.postprocess_notes())

        stage("writing output")

        def warnings_now() -> list[str]:  # known once the (possibly streamed) release has run
            return (list(results[-1].warnings)
                    + ([SEEDED_WARNING] if randomness.seeded else []))

        def private_files():  # the input's counts (rows kept, clipped, dropped, filled), known once written,
            # and the findings: written whatever they are, so that the file's presence tells nothing
            figures = {"diagnostics": diagnostics}
            if streamed:  # (whether the input is streamed follows from its size in bytes)
                figures["checks_not_run"] = {acc_opts.NOISY_CODE: "the input was released in chunks of series; "
                                                                  "the check needs the panel in memory"}
            return ((common.custodian_document("release", figures, findings), custodian, "--custodian"),)

        outputs.publish(released, output, report, lambda described: report_for(
            plan, table, results[-1], randomness, described, notes, warnings_now(),
            {**params, "input": outputs.display_name(input), "output": described["file"],
             **outputs.ledger_parameters(ledger, held)}, missing=diagnostics.get("filled_cells", 0),
        ), before_commit=outputs.confirm_reservation(held), private_files=outputs.Deferred(private_files),
            force=force)
        result, warnings = results[-1], warnings_now()

    for message in warnings:
        console.warn(message)
    claim = result.claim
    if plot is not None:
        from tsdp.cli import plots

        plots.plot_release(table.values_matrix(), _released_matrix(plan, result, table),
                           plan.accuracy(result, "cell").half_width, getattr(table, "series_names", None), plot,
                           f"{claim.mechanism}, epsilon {claim.epsilon:g}", force)
    summary = {
        "output": output, "report": report, "mechanism": claim.mechanism,
        "epsilon": claim.epsilon, "delta": claim.delta,
        "noise": {k: claim.parameters[k] for k in ("sigma", "scale") if k in claim.parameters},
        "series": table.n_series, "steps": table.n_steps, "freq": table.grid.freq,
        "unit": claim.unit.level, "neighbouring": claim.unit.neighbouring, "theorem": claim.theorem,
        "accuracy": acc_opts.shown(plan.accuracy(result), json_summary),
    }
    if held is not None:
        summary["ledger"] = {"dataset": dataset, "entry": held.id}
    # the input's counts and the data-dependent checks: not for publication, and nothing public says what they found
    summary["custodian"] = custodian
    summary["custodian_checks"] = [acc_opts.NOISY_CODE]
    console.summary(summary, "tsdp release")


_SCALE_OF = {"cell": "the input's cells", "sum": "the input series' sums"}


def _released_matrix(plan: ReleasePlan, result, table):
    """The released values (before post-processing) as an (n_series, n_steps) matrix."""
    return table.flat_to_matrix(result.values) if plan.cellwise else result.values


def _robust_scale(table, target: str) -> float:
    """Median absolute value of the PRIVATE input's cells (or series sums): for the steward only."""
    return table.median_abs("sum" if target == "sum" else "cell")


class _Zeros:
    """A panel of zeros of the public shape: the dry run's mechanism sees no value of the input."""

    def __init__(self, n_series: int, n_steps: int) -> None:
        import numpy as np

        self.matrix = np.zeros((n_series, n_steps))

    def value_chunks(self):
        return [self.matrix.ravel()]

    def values_matrix(self):
        return self.matrix

    flat_to_matrix = with_values_flat = with_values_matrix = None  # nothing is written


def _dry_run(input, plan: ReleasePlan, console) -> dict | None:
    """Noise scale, accuracy and epsilon from the public shape only; writes nothing, charges nothing.

    The mechanism runs on zeros of the public shape with a fixed seed (its claim depends on public
    parameters only; for filter-subsample the sampled steps, drawn at release, set sigma: the dry
    run shows one fixed draw)."""
    import numpy as np

    from tsdp.engine.public_shape import public_panel

    spec = plan.spec
    shape = public_panel(input, spec)  # missing steps are refused here under --fill-missing error, as at release
    n_series, n_steps, read = shape.n_series, shape.n_steps, shape.read
    panel, _ = panel_of(n_series, n_steps, spec, plan.declared, plan.caps, spec.resolved_layout == "events", [])
    result, _, _ = plan.run(_Zeros(n_series, n_steps), panel, np.random.default_rng(0), None)
    claim = result.claim
    accuracy = plan.accuracy(result, pattern=False)  # the zeros' sampling pattern is not the release's
    summary = {
        "dry_run": f"read {read}; nothing written, no budget charged",
        "mechanism": claim.mechanism, "epsilon": claim.epsilon, "delta": claim.delta,
        "noise": {k: claim.parameters[k] for k in ("sigma", "scale") if k in claim.parameters},
        "series": n_series, "steps": n_steps, "unit": claim.unit.level, "neighbouring": claim.unit.neighbouring,
        "accuracy": acc_opts.shown(accuracy, console.json_mode),
        "missing_cells": shape.missing, "fill_missing": getattr(plan.options.fill_missing, "value",
                                                                plan.options.fill_missing),
    }
    if shape.missing and not acc_opts.planning():
        console.warn(gaps_warning(plan, shape))
    if MECHANISMS[plan.mechanism].dry_run_caveat:
        console.warn(Caveat("dry_run_one_draw", MECHANISMS[plan.mechanism].dry_run_caveat))
    if plan.assumption_warning:
        console.warn(plan.assumption_warning)
    if acc_opts.planning():
        return {**summary, "accuracy": accuracy.to_dict(),
                "gaps_warning": gaps_warning(plan, shape) if shape.missing else None}
    console.summary(summary, "tsdp release --dry-run")
    return None


def gaps_warning(plan: ReleasePlan, shape) -> str:
    """What the release will do with the missing steps a dry run found (the policy is zero or null:
    under error the dry run refuses them as the release would), as a ``missing_cells`` caveat."""
    from tsdp.caveats import Caveat

    return Caveat("missing_cells", _gaps_text(plan, shape))


def _gaps_text(plan: ReleasePlan, shape) -> str:
    where = f"series {shape.first_series!r} " if shape.first_series is not None else ""
    found = (f"the input misses {shape.missing} cell(s) of its {shape.n_series} x {shape.n_steps} grid (rows absent; "
             f"first: {where}at {shape.first_time}); ")
    if plan.spec.keep_missing:
        then = ("filled by interpolating the released values" if plan.options.interpolate_released
                else "left empty")
        return found + (f"--fill-missing null: the release adds noise to the cells present and publishes these as "
                        f"missing ({then}); the missing pattern is published as given")
    return found + "--fill-missing zero: the release treats them as 0 and adds noise to them like any cell"


def _engine_options(spec: InputSpec, engine: Engine, memory_limit: str | None, work_dir: str | None,
                    spark_master: str | None, spark_conf: list[str] | None) -> EngineOptions:
    """Validate the engine options up front (before any data is read): every engine for events;
    --memory-limit/--work-dir also for long input (released in chunks of series when larger)."""
    if spec.resolved_layout != "events":
        given = given_engine_flags(engine, *((None, None) if spec.resolved_layout == "long" else
                                             (memory_limit, work_dir)), spark_master, spark_conf)
        if given:
            raise UsageError(f"{given[0]} applies to --layout events (raw events that tsdp aggregates)"
                             + ("" if spec.resolved_layout == "long" else " and --layout long")
                             + f"; this input is --layout {spec.resolved_layout}")
    return engine_options(engine, memory_limit, work_dir, spark_master, spark_conf)


def _chunks(streamed: bool, input: str, spec: InputSpec, options: EngineOptions, stage):
    """The long input's chunks of series when it is released streamed (see
    :mod:`tsdp.engine.series_stream`), else None; the chunks live until the block ends."""
    if not streamed:
        return contextlib.nullcontext(None)
    return series_stream.series_chunks(input, spec, options.memory_limit, options.work_dir, stage)


def _release_chunks(chunks, panel, plan: ReleasePlan, rng, diagnostics: dict, stage):
    """(the released frames, produced lazily chunk by chunk, and the list their releases are
    appended to). Every chunk's noise comes from one stream over the whole panel's cells."""
    stream = NoiseStream(rng, chunks.n_cells)
    results = []

    def frames():
        for k, table in enumerate(chunks.tables(), 1):
            stage(f"adding noise: chunk {k}/{chunks.n_chunks} ({table.n_series} series)")
            plan.require_counts(table)
            result, _, rebuild = plan.run(table, panel, rng, None, stream)
            results[:] = [result]  # the claim and warnings; earlier chunks' values are let go
            if table.filled_cells:
                diagnostics["filled_cells"] = diagnostics.get("filled_cells", 0) + table.filled_cells
            yield plan.typed(plan.finish(table, rebuild(plan.postprocess(result.values))))
        if stream.taken != chunks.n_cells:  # every cell of the panel got its noise, once
            raise RuntimeError(f"streamed release drew {stream.taken} of {chunks.n_cells} noise values")

    return frames(), results


def _resolve(input: str, plan: ReleasePlan, options: EngineOptions, stage, generator) -> ReleasePlan:
    """The plan at the caps chosen privately from the events of ``input`` (one pass over them)."""
    from tsdp.engine.panel import aggregate_job
    from tsdp.engine.events import profile_histograms

    job, grids = plan.profile_job()
    stage("choosing the caps privately")
    histograms = profile_histograms(aggregate_job(input, job, options, stage).diagnostics, grids)
    return plan.resolve(histograms, grids, generator)


def _read(input: str, plan: ReleasePlan, options: EngineOptions, stage, generator) -> Loaded:
    """The input loaded for release: events through the engine, series read and checked in memory."""
    spec = plan.spec
    if spec.resolved_layout == "events":
        return Loaded(*load_event_panel(input, spec, plan.declared, options, plan.caps.value_bound, stage), None)
    stage("reading input")
    return load_frame(read_table(input, *spec.read_schema()), plan, generator, stage)


def _evaluate(input, plan: ReleasePlan, engine_options, randomness, repeats: int, console, custodian: str | None,
              force: bool) -> None:
    """Run the mechanism ``repeats`` times and split its error against the raw input (NOT private:
    :mod:`tsdp.cli.evaluation` says where the figures go); writes no release and no report."""
    from tsdp.api.evaluation import evaluate_auto, evaluate_loaded
    from tsdp.cli import evaluation as shown
    from tsdp.engine.panel import aggregate_job
    from tsdp.engine.events import profile_histograms

    with console.progress(3) as stage:
        loaded = None if plan.auto is not None else _read(input, plan, engine_options, stage, None)
        raw, observed = _raw(input, plan, engine_options, loaded, stage)
        stage("releasing and comparing")
        if plan.auto is None:
            evaluation, result = evaluate_loaded(plan, loaded, raw, observed, randomness.generator, repeats)
        else:  # every run chooses its caps anew; a panel is aggregated once per distinct choice
            job, grids = plan.profile_job()
            histograms = profile_histograms(aggregate_job(input, job, engine_options, stage).diagnostics, grids)
            panels: dict = {}

            def load(resolved):
                key = (resolved.options.max_per_step, resolved.options.max_steps, resolved.options.max_norm)
                if key not in panels:
                    panels[key] = _read(input, resolved, engine_options, stage, None)
                return panels[key]

            evaluation, result = evaluate_auto(plan, histograms, grids, load, raw, observed, randomness.generator,
                                               repeats)
            loaded = next(iter(panels.values()))
    claim = result.claim
    public = {"runs": repeats, "mechanism": claim.mechanism, "epsilon": claim.epsilon, "delta": claim.delta,
              "release_written": False}
    diagnostics = dict(loaded.loaded.diagnostics)  # (with auto caps: the first choice's)
    figures = {"evaluation": evaluation.to_dict(), "diagnostics": diagnostics, "parameters": public}
    if custodian is not None:
        shown.write_custodian(custodian, figures, force)
    console.warn(shown.DIAGNOSTIC_WARNING)
    if console.json_mode:
        console.summary({**public, "custodian": custodian}, "tsdp release --evaluate")
    elif not console.quiet:
        shown.print_tables(figures["evaluation"], diagnostics, {**public, "custodian": custodian})


def _raw(input: str, plan: ReleasePlan, options: EngineOptions, loaded: Loaded, stage):
    """(the raw input as an (n_series, n_steps) panel, the cells it observes): events aggregated
    again without caps or value clipping on the same public grid, series as read (filled cells
    unobserved)."""
    import numpy as np

    from tsdp.engine.panel import raw_event_panel

    if plan.spec.resolved_layout != "events":
        table = loaded.loaded.table
        return table.values_matrix(), table.observed_matrix()
    stage("aggregating the raw events (no caps)")
    raw = raw_event_panel(input, plan.spec, plan.declared, options, plan.caps.value_bound).values_matrix()
    return raw, np.ones(raw.shape, dtype=bool)

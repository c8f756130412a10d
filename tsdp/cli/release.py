"""``tsdp release``: private release of aggregate series (thin: parse, load, call core, write)."""

from __future__ import annotations

import contextlib
from enum import Enum
from typing import Optional

import polars as pl
import typer

from tsdp.accounting.budget import check_delta, check_epsilon
from tsdp.accounting.sensitivity import ContributionBounds
from tsdp.cli import accuracy_options as acc_opts
from tsdp.cli import common
from tsdp.cli.engine_options import (Engine, EngineOption, MemoryLimitOption, SparkConfOption, SparkMasterOption,
                                     WorkDirOption, engine_options, given_engine_flags)
from tsdp.engine import series_stream
from tsdp.engine.panel import ALL_STEPS, EngineOptions, event_caps, load_event_panel, load_panel, panel_of
from tsdp.errors import UsageError
from tsdp.io.files import read_numbers, read_table
from tsdp.io.load import SERIES_NOTE, InputSpec
from tsdp.mechanisms import postprocess as post
from tsdp.mechanisms.baseline import Panel, release_gaussian, release_laplace
from tsdp.mechanisms.noise import NoiseStream, PrefetchedNormals
from tsdp.report import Report
from tsdp.rng import SEEDED_WARNING, make_random_source


class Mechanism(str, Enum):
    gaussian = "gaussian"
    laplace = "laplace"
    dft = "dft"
    fast = "fast"
    subsample = "subsample"
    filter_subsample = "filter-subsample"


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


# Mechanisms that treat cells independently work on the flat values in file order (no sorting);
# the others need each series in time order.
CELLWISE = {Mechanism.gaussian, Mechanism.laplace}
HARDENED = (Mechanism.gaussian, Mechanism.laplace, Mechanism.dft, Mechanism.fast)  # the others draw float noise


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


def release(
    input: str = typer.Argument(..., help="CSV (.csv, .csv.gz, .tsv) or Parquet file; - reads stdin (Parquet when it starts with PAR1, else CSV)."),
    mechanism: Mechanism = typer.Option(Mechanism.gaussian, help="Noise mechanism."),
    epsilon: float = typer.Option(..., help="Privacy budget epsilon (> 0)."),
    delta: Optional[float] = typer.Option(None, help="Privacy budget delta in (0, 1); Gaussian only."),
    unit: Unit = typer.Option(..., help="What is protected: one event, a user's w-event window, or a whole user."),
    max_per_step: float = typer.Option(1.0, help="M: largest contribution of one unit to one cell (events kept per user and bucket, for event input)."),
    max_steps: Optional[int] = typer.Option(None, help="I: steps of a series in which one user may contribute (--unit user).", min=1),
    w: Optional[int] = typer.Option(None, help="Window length for --unit w-event.", min=1),
    series_per_user: Optional[int] = typer.Option(None, help="Series one user may contribute to [default: all].", min=1),
    neighbouring: Neighbouring = typer.Option(Neighbouring.add_remove, help="Neighbouring relation."),
    calibration: Calibration = typer.Option(Calibration.analytic, help="Gaussian calibration; classic only to reproduce papers."),
    noise: Optional[Noise] = typer.Option(None, help="Noise of --mechanism dft (default gaussian) or fast (default laplace, the paper's): gaussian gives approximate DP, laplace pure DP."),
    dft_k: int = typer.Option(30, help="--mechanism dft: Fourier coefficients kept (the DC term and k-1 lowest frequencies)."),
    sampling_rate: Optional[float] = typer.Option(None, help="--mechanism subsample/filter-subsample: Bernoulli rate p of the sampled time steps [default: 0.1]."),
    accounting: Optional[Accounting] = typer.Option(None, help="subsample: exact (default) or paper; filter-subsample: conditional (default) or paper (Koga et al.'s own calibration)."),
    delta_split: Optional[float] = typer.Option(None, help="--accounting paper: share of delta for the noise, the rest covers the failure event [default: 0.5]."),
    alpha: Optional[float] = typer.Option(None, help="filter-subsample --accounting paper: fix alpha instead of solving for it."),
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
    evaluate: int = typer.Option(0, help="Run the mechanism N times and print MAE and MRE against the input: an internal, NOT private diagnostic; writes no release.", min=0),
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
    fill_missing: FillMissing = typer.Option(FillMissing.error, help="Treat missing steps and values as an error or as 0."),
    allow_negative: bool = typer.Option(False, help="Accept negative values in the input series."),
    value_bound: Optional[float] = typer.Option(None, help="Clip each event's value to [0, V] (event layout with --value-col)."),
    clip_min: Optional[float] = typer.Option(None, help="Post-process: clip released values below."),
    clip_max: Optional[float] = typer.Option(None, help="Post-process: clip released values above."),
    round_values: bool = typer.Option(False, "--round", help="Post-process: round released values to integers."),
    ledger: Optional[str] = typer.Option(None, help="Budget ledger to charge this release to (with --dataset); refused with exit 3 if it does not fit."),
    dataset: Optional[str] = typer.Option(None, help="Dataset name in --ledger whose budget pays for this release."),
    accuracy_alpha: float = acc_opts.AccuracyAlphaOption,
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
    post.check_clip(clip_min, clip_max)  # before the data is read
    sampling = _sampling(mechanism, sampler, granularity)
    sampler = sampling["sampler"]
    if noise is not None and mechanism in CELLWISE:
        raise UsageError(f"--noise applies to --mechanism dft and fast; --mechanism {mechanism.value} "
                         "is the noise itself")
    noise = noise or (Noise.laplace if mechanism is Mechanism.fast else Noise.gaussian)
    fast = {"preset": fast_preset, "max_samples": fast_max_samples, "interval": fast_fixed_interval,
            "gains": _gains(fast_gains), "theta": fast_theta, "xi": fast_xi, "q": fast_q, "r": fast_r}
    if mechanism is not Mechanism.fast and any(v is not None for v in fast.values()):
        given = next(k for k, v in fast.items() if v is not None)
        raise UsageError(f"--fast-{given.replace('_', '-')} applies only to --mechanism fast")
    koga = {"p": sampling_rate, "accounting": accounting.value if accounting else None, "delta_split": delta_split,
            "alpha": alpha, "kernel": filter.value if filter else None, "filter_sigma": filter_sigma,
            "filter_width": filter_width, "filter_kernel": filter_kernel}
    subsampling = mechanism in (Mechanism.subsample, Mechanism.filter_subsample)
    if not subsampling and any(v is not None for v in koga.values()):
        first = next(k for k, v in koga.items() if v is not None)
        flag = {"p": "sampling-rate", "kernel": "filter"}.get(first, first.replace("_", "-"))
        raise UsageError(f"--{flag} applies only to --mechanism subsample or filter-subsample")
    if mechanism is Mechanism.subsample and any(koga[k] is not None for k in ("alpha", "kernel", "filter_sigma",
                                                                              "filter_width", "filter_kernel")):
        raise UsageError("the --filter options and --alpha apply only to --mechanism filter-subsample")
    if assume_none and (unit is not Unit.user or max_steps is not None):
        raise UsageError("--assume-none needs --unit user and no --max-steps (it sets I = T)")
    pure = mechanism is Mechanism.laplace or (mechanism in (Mechanism.dft, Mechanism.fast) and noise is Noise.laplace)
    if not pure and delta is None:
        raise UsageError(f"--delta is required for --mechanism {mechanism.value}")
    if pure and delta is not None:
        raise UsageError(f"--delta does not apply to --mechanism {mechanism.value} with Laplace noise "
                         "(pure epsilon-DP); remove it")
    declared = ContributionBounds(
        level=unit.value, max_per_step=max_per_step,
        max_steps=ALL_STEPS if assume_none else max_steps, w=w,
        series_per_unit=series_per_user, neighbouring=neighbouring.value,
    )
    spec = InputSpec(
        layout=layout.value if layout else None, time_col=time_col, value_col=value_col,
        series_col=series_col, series_cols=common.split_list(series_cols), user_col=user_col,
        series_keys=common.split_list(series_keys), start=start, end=end, freq=freq,
        fill_missing=fill_missing is FillMissing.zero, allow_negative=allow_negative, timezone=timezone,
    )
    caps = event_caps(declared, value_bound) if spec.resolved_layout == "events" else None
    engine_options = _engine_options(spec, engine, memory_limit, work_dir, spark_master, spark_conf)
    run = _mechanism(mechanism, epsilon, delta, calibration, noise, dft_k, fast, koga, sampling)  # budget checked before the data
    level, target = acc_opts.check_level(accuracy_alpha, "--accuracy-alpha"), accuracy_for.value
    if target == "sum" and mechanism not in SUMMABLE:
        raise UsageError(f"--accuracy-for sum is available for --mechanism gaussian, laplace and dft, not "
                         f"{mechanism.value}: its per-series sums depend on the released sampling pattern")
    if dry_run:
        if evaluate or plot:
            raise UsageError(f"--dry-run reads no values, {'--evaluate' if evaluate else '--plot'} needs them: "
                             "give one of them")
        return _dry_run(input, spec, declared, caps, run, level, target, mechanism,
                        common.Console(quiet, json_summary, stdout_taken=False))
    randomness = make_random_source(seed)
    if evaluate:
        return _evaluate(input, spec, caps, declared, engine_options, run, randomness, evaluate,
                         common.Console(quiet, json_summary, stdout_taken=False))
    output, report = common.resolve_outputs(input, output, report, force, json_summary)
    if plot is not None:
        from tsdp.cli import plots

        plots.check_plot_path(plot, (output, report), force)
    console = common.Console(quiet, json_summary, stdout_taken="-" in (output, report))
    charge = common.ledger_reservation(  # reserved before the data is read or any noise is drawn
        ledger, dataset, epsilon, delta or 0.0,
        f"tsdp release {common.display_name(input)} -> {common.display_name(output)} ({mechanism.value})")

    streamed = mechanism in CELLWISE and engine_options.engine == "local" and input != "-" \
        and series_stream.streamable(input, spec, engine_options.memory_limit)
    if streamed and (fail_on_noisy or plot):
        raise UsageError(f"{'--fail-on-noisy' if fail_on_noisy else '--plot'} needs the panel in memory, but this "
                         "input is released in chunks of series (see --memory-limit); raise --memory-limit or drop it")
    swamped: list[str] = []  # the steward's noisy warning, printed once the release is published
    with charge as held, console.progress(4) as stage, _chunks(streamed, input, spec, engine_options, stage) as chunks:
        post_notes = [f"post-processing: {s}" for s in post.describe(clip_min, clip_max, round_values)]
        if chunks is None:
            loaded, panel, notes, prefetched = _read(input, spec, declared, caps, engine_options, stage,
                                                     randomness.generator if mechanism is Mechanism.gaussian
                                                     and sampler == "float" else None)
            table, diagnostics = loaded.table, loaded.diagnostics

            stage("adding noise")
            result, as_matrix, rebuild = run(table, panel, randomness.generator, prefetched)
            released = rebuild(post.postprocess(result.values, clip_min, clip_max, round_values))
            results = [result]
            swamped = acc_opts.noisy_check(_accuracy(result, level, target), _robust_scale(table, target),
                                           _SCALE_OF[target], _remedy(mechanism), fail_on_noisy)
        else:
            table, diagnostics = chunks, {}
            panel, notes = panel_of(chunks.n_series, chunks.n_steps, spec, declared, None, False, [SERIES_NOTE])
            released, results = _release_chunks(chunks, panel, run, randomness.generator, diagnostics, stage,
                                                clip_min, clip_max, round_values)
        notes.extend(post_notes)

        stage("writing output")

        def warnings_now() -> list[str]:  # known once the (possibly streamed) release has run
            hardened = (results[-1].claim.parameters or {}).get("sampler") == "hardened"
            return (list(results[-1].warnings) + ([] if hardened else sampling["warnings"])
                    + ([SEEDED_WARNING] if randomness.seeded else []))

        common.publish(released, output, report, lambda described: Report(
            command="release",
            parameters={**params, "input": common.display_name(input),
                        "output": described["file"], "layout": spec.resolved_layout,
                        **common.ledger_parameters(ledger, held)},
            claim=_stated_sampler(results[-1].claim, sampling),
            output={**described, "layout": table.layout},
            randomness=randomness.label,
            grid={"n_series": table.n_series, "n_steps": table.n_steps, "freq": table.grid.freq,
                  "start": table.grid.points[0], "end": table.grid.points[-1]},
            notes=notes, warnings=warnings_now(),
            accuracy=_accuracy(results[-1], level, target).to_dict(),
        ), before_commit=common.confirm_reservation(held), force=force)
        result, warnings = results[-1], warnings_now()

    for message in warnings + swamped:
        console.warn(message)
    claim = result.claim
    if plot is not None:
        from tsdp.cli import plots

        plots.plot_release(table.values_matrix(), as_matrix(), _accuracy(result, level, "cell").half_width,
                           getattr(table, "series_names", None), plot,
                           f"{claim.mechanism}, epsilon {claim.epsilon:g}", force)
    summary = {
        "output": output, "report": report, "mechanism": claim.mechanism,
        "epsilon": claim.epsilon, "delta": claim.delta,
        "noise": {k: claim.parameters[k] for k in ("sigma", "scale") if k in claim.parameters},
        "series": table.n_series, "steps": table.n_steps, "freq": table.grid.freq,
        "unit": claim.unit.neighbouring, "theorem": claim.theorem,
        "accuracy": acc_opts.shown(_accuracy(result, level, target), json_summary),
    }
    if swamped and json_summary:
        summary["warning_codes"] = [acc_opts.NOISY_CODE]
    if held is not None:
        summary["ledger"] = {"dataset": dataset, "entry": held.id}
    if diagnostics:
        summary["diagnostics (not private, do not publish)"] = diagnostics
    console.summary(summary, "tsdp release")


SUMMABLE = {Mechanism.gaussian, Mechanism.laplace, Mechanism.dft}
_SCALE_OF = {"cell": "the input's cells", "sum": "the input series' sums"}


_COMPUTED: dict = {}  # (id of a release, alpha, target) -> Accuracy: a DFT-Laplace simulation runs once


def _accuracy(result, alpha: float, target: str, pattern: bool = True):
    """The release's accuracy; with ``pattern``, FAST's also given its released sampling pattern."""
    from tsdp.accuracy import for_claim

    key = (id(result), alpha, target, pattern)
    if key not in _COMPUTED or _COMPUTED[key][0] is not result:
        _COMPUTED.clear()
        sampled = getattr(result, "sampled", None) if pattern else None
        _COMPUTED[key] = (result, acc_opts.accuracy_or_usage(lambda: for_claim(result.claim, alpha, target, sampled)))
    return _COMPUTED[key][1]


def _robust_scale(table, target: str) -> float:
    """Median absolute value of the PRIVATE input's cells (or series sums): for the steward only."""
    import numpy as np

    matrix = table.values_matrix()
    return float(np.median(np.abs(matrix.sum(axis=1) if target == "sum" else matrix)))


def _remedy(mechanism: Mechanism) -> str:
    """The options that would shrink the noise relative to the signal."""
    common_part = "a larger --epsilon, tighter caps (--max-per-step, --max-steps, --series-per-user)"
    return {
        Mechanism.gaussian: f"{common_part}, a coarser grid (--freq, fewer steps per user) or a mechanism that "
                            "smooths (--mechanism dft or filter-subsample)",
        Mechanism.laplace: f"{common_part}, --mechanism gaussian (L2 rather than L1 sensitivity) or a mechanism "
                           "that smooths (--mechanism dft)",
        Mechanism.dft: f"{common_part} or fewer coefficients (--dft-k)",
        Mechanism.fast: f"{common_part} or fewer samples per series (--fast-max-samples)",
        Mechanism.subsample: f"{common_part} or --mechanism filter-subsample",
        Mechanism.filter_subsample: f"{common_part} or a wider filter (--filter-sigma)",
    }[mechanism]


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


def _dry_run(input, spec: InputSpec, declared, caps, run, alpha: float, target: str, mechanism: Mechanism,
             console) -> dict | None:
    """Noise scale, accuracy and epsilon from the public shape only; writes nothing, charges nothing.

    The mechanism runs on zeros of the public shape with a fixed seed (its claim depends on public
    parameters only; for filter-subsample the sampled steps, drawn at release, set sigma: the dry
    run shows one fixed draw)."""
    import numpy as np

    from tsdp.io.public_shape import public_shape

    n_series, n_steps, read = public_shape(input, spec)
    panel, _ = panel_of(n_series, n_steps, spec, declared, caps, spec.resolved_layout == "events", [])
    result, _, _ = run(_Zeros(n_series, n_steps), panel, np.random.default_rng(0), None)
    claim = result.claim
    accuracy = _accuracy(result, alpha, target, pattern=False)  # the zeros' sampling pattern is not the release's
    summary = {
        "dry run": f"read {read}; nothing written, no budget charged",
        "mechanism": claim.mechanism, "epsilon": claim.epsilon, "delta": claim.delta,
        "noise": {k: claim.parameters[k] for k in ("sigma", "scale") if k in claim.parameters},
        "series": n_series, "steps": n_steps, "unit": claim.unit.neighbouring,
        "accuracy": acc_opts.shown(accuracy, console.json_mode),
    }
    if mechanism is Mechanism.filter_subsample:
        summary["note"] = "sigma depends on the sampled steps drawn at release; shown for one fixed draw"
    if acc_opts.planning():
        return {**summary, "accuracy": accuracy.to_dict()}
    console.summary(summary, "tsdp release --dry-run")
    return None


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


def _release_chunks(chunks, panel, run, rng, diagnostics: dict, stage, clip_min, clip_max, round_values):
    """(the released frames, produced lazily chunk by chunk, and the list their releases are
    appended to). Every chunk's noise comes from one stream over the whole panel's cells."""
    stream = NoiseStream(rng, chunks.n_cells)
    results = []

    def frames():
        for k, table in enumerate(chunks.tables(), 1):
            stage(f"adding noise: chunk {k}/{chunks.n_chunks} ({table.n_series} series)")
            result, _, rebuild = run(table, panel, rng, None, stream)
            results[:] = [result]  # the claim and warnings; earlier chunks' values are let go
            if table.filled_cells:
                diagnostics["filled_cells"] = diagnostics.get("filled_cells", 0) + table.filled_cells
            yield rebuild(post.postprocess(result.values, clip_min, clip_max, round_values))
        if stream.taken != chunks.n_cells:  # every cell of the panel got its noise, once
            raise RuntimeError(f"streamed release drew {stream.taken} of {chunks.n_cells} noise values")

    return frames(), results


def _read(input: str, spec: InputSpec, declared, caps, options: EngineOptions, stage, generator):
    """(loaded input, panel, notes, prefetched normals): events through the engine, series in memory."""
    if spec.resolved_layout == "events":
        return (*load_event_panel(input, spec, declared, options, caps.value_bound, stage), None)
    stage("reading input")
    df = read_table(input, *spec.read_schema())
    # Noise draws do not depend on the data: start them while the data is checked.
    prefetched = (PrefetchedNormals(generator, df.height)
                  if generator is not None and spec.resolved_layout == "long" else None)
    stage("checking")
    return (*load_panel(df, spec, declared, caps), prefetched)


def _gains(text: str | None) -> tuple[float, float, float] | None:
    parts = common.split_list(text)
    if parts is None:
        return None
    try:
        values = tuple(float(x) for x in parts)
    except ValueError:
        raise UsageError(f"--fast-gains must be three numbers Cp,Ci,Cd, got {text!r}") from None
    if len(values) != 3:
        raise UsageError(f"--fast-gains must be three numbers Cp,Ci,Cd, got {text!r}")
    return values


def _stated_sampler(claim, sampling: dict):
    """The claim of a float-only mechanism with its sampler and the reason stated in its parameters."""
    from dataclasses import replace

    from tsdp.accounting.discrete import float_parameters

    if not sampling.get("float_only") or "sampler" in (claim.parameters or {}):
        return claim  # --sampling-rate 1 released the plain Gaussian mechanism, hardened: its claim says so
    return replace(claim, parameters={**(claim.parameters or {}), **float_parameters(sampling["float_only"])})


def _sampling(mechanism: Mechanism, sampler: str | None, granularity: float | None) -> dict:
    """Check --sampler/--granularity up front. The cellwise mechanisms, dft and fast take them
    (hardened by default; they warn themselves about float noise); subsample and filter-subsample,
    whose subsampling accounting is for continuous Gaussian noise, draw floating-point noise only:
    ``--sampler hardened`` is refused, and the default says so in a warning and in the claim."""
    from tsdp.accounting import discrete as disc
    from tsdp.accounting.discrete import check_granularity, check_sampler

    if sampler is None:
        sampler = "hardened" if mechanism in HARDENED else "float"
    check_sampler(sampler)
    if mechanism not in HARDENED and sampler == "hardened":
        raise disc.refuse_hardened(mechanism.value)
    if granularity is not None:
        if sampler != "hardened":
            raise UsageError("--granularity applies to --sampler hardened only")
        check_granularity(granularity)
    if mechanism in HARDENED:
        return {"sampler": sampler, "granularity": granularity, "warnings": []}
    if granularity is not None:
        raise UsageError(f"--granularity applies to --mechanism {', '.join(m.value for m in HARDENED)}; "
                         f"--mechanism {mechanism.value} has no hardened sampler yet")
    return {"sampler": "float", "granularity": None, "float_only": mechanism.value,
            "warnings": [disc.float_only_warning(mechanism.value) + "; so this output must not be published"]}


def _mechanism(mechanism: Mechanism, epsilon: float, delta: float | None, calibration: Calibration,
               noise: Noise, dft_k: int, fast: dict, koga: dict, sampling: dict | None = None):
    """Validate the budget up front and return ``run(table, panel, rng, prefetched)``, which gives
    the release and a function rebuilding the output frame from the released values."""
    check_epsilon(epsilon)
    if delta is not None:
        check_delta(delta)

    def run(table, panel, rng, prefetched, stream=None):
        """(release, its values as an (n_series, n_steps) matrix, the output frame builder);
        ``stream``: the noise of a panel released in chunks of series (cellwise mechanisms)."""
        how = {"sampler": "hardened", "granularity": None, **(sampling or {})}
        if mechanism in CELLWISE:
            values = table.value_chunks()
            if mechanism is Mechanism.gaussian:
                result = release_gaussian(values, panel, epsilon, delta, rng, calibration.value, prefetched, stream,
                                          how["sampler"], how["granularity"])
            else:
                result = release_laplace(values, panel, epsilon, rng, stream, how["sampler"], how["granularity"])
            return result, lambda: table.flat_to_matrix(result.values), table.with_values_flat
        matrix = table.values_matrix()
        if mechanism in (Mechanism.subsample, Mechanism.filter_subsample):
            from tsdp.mechanisms import subsample as ss

            p = 0.1 if koga["p"] is None else koga["p"]
            split = 0.5 if koga["delta_split"] is None else koga["delta_split"]
            if mechanism is Mechanism.subsample:
                result = ss.release_subsample(matrix, panel, epsilon, delta, rng, p, koga["accounting"] or "exact",
                                              delta_split=split)
            else:
                kernel = koga["kernel"] or "gaussian"
                if kernel == "custom":
                    if koga["filter_kernel"] is None:
                        raise UsageError("--filter custom needs --filter-kernel FILE")
                    kernel = read_numbers(koga["filter_kernel"], "--filter-kernel")
                elif koga["filter_kernel"] is not None:
                    raise UsageError("--filter-kernel needs --filter custom")
                result = ss.release_filter_subsample(
                    matrix, panel, epsilon, delta, rng, p, kernel, koga["accounting"] or "conditional",
                    filter_sigma=10.0 if koga["filter_sigma"] is None else koga["filter_sigma"],
                    filter_width=koga["filter_width"], delta_split=split, alpha=koga["alpha"])
        elif mechanism is Mechanism.fast:
            from tsdp.mechanisms.fast import release_fast

            options = {k: v for k, v in fast.items() if k not in ("interval",) and v is not None}
            fixed = fast["interval"]
            result = release_fast(matrix, panel, epsilon, rng, delta=delta, noise=noise.value,
                                  interval=fixed, adaptive=fixed is None, sampler=how["sampler"],
                                  granularity=how["granularity"], **options)
        else:
            from tsdp.mechanisms.dft import release_dft

            result = release_dft(matrix, panel, epsilon, delta, rng, dft_k, noise.value, how["sampler"],
                                 how["granularity"])
        return result, lambda: result.values, table.with_values_matrix

    return run


def _evaluate(input, spec, caps, declared, engine_options, run, randomness, repeats: int, console) -> None:
    """Run the mechanism ``repeats`` times and print MAE/MRE against the input; writes nothing."""
    from tsdp.mechanisms.metrics import mae, mre, summarize

    loaded, panel, _, _ = _read(input, spec, declared, caps, engine_options, lambda name: None, None)
    truth = loaded.table.values_matrix()
    maes, mres = [], []
    for _ in range(repeats):  # each run is a full release of the whole panel
        result, as_matrix, _ = run(loaded.table, panel, randomness.generator, None)
        values = as_matrix()
        maes.append(mae(values, truth))
        mres.append(mre(values, truth))
    console.warn("--evaluate compares releases with the true input: the figures are NOT private, "
                 "are for choosing parameters only, and no release was written")
    console.summary({"runs": repeats, "mechanism": result.claim.mechanism, "epsilon": result.claim.epsilon,
                     "delta": result.claim.delta, "mae": summarize(maes), "mre (sanitary bound 1)": summarize(mres),
                     "written": "nothing (diagnostic only)"}, "tsdp release --evaluate")

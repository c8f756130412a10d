"""``tsdp mean-estimate``: user-level private means per cell/time slot (Gupta et al. 2024).

Thin: parse the options, validate them through :class:`tsdp.mean.MeanSettings` before the data is
read, load the records (:mod:`tsdp.io.records`), call :func:`tsdp.mean.estimate_groups` and write
the estimates and the privacy report atomically.
"""

from __future__ import annotations

from enum import Enum
from typing import Optional

import numpy as np
import polars as pl
import typer

from tsdp.cli import accuracy_options as acc_opts
from tsdp.cli import common
from tsdp.cli.engine_options import (Engine, EngineOption, MemoryLimitOption, SparkConfOption, SparkMasterOption,
                                     WorkDirOption, engine_options)
from tsdp.errors import DataError, UsageError
from tsdp.engine.options import EngineOptions
from tsdp.engine.records import RecordRuns
from tsdp.io.records import RecordSpec
from tsdp.mean import (NEIGHBOURING, MeanSettings, claim_for, estimate_prepared, participation_epsilon,
                       prepare_from_runs, release_prepared)
from tsdp.mean.api import DEFAULT_GAMMA, DEFAULT_QUANTILES, selection_warning
from tsdp.mechanisms.noise import FLOAT_WARNING
from tsdp.mean.errors import GroupDataError, GroupUsageError
from tsdp.accuracy.estimators import mean_groups, mean_plan
from tsdp.report import Report
from tsdp.rng import SEEDED_WARNING, make_random_source


class Algorithm(str, Enum):
    baseline = "baseline"
    array_averaging = "array-averaging"
    levy = "levy"
    quantile = "quantile"


class Grouping(str, Enum):
    bestfit = "bestfit"
    wraparound = "wraparound"


class QuantileMode(str, Enum):
    fixed = "fixed"
    eps_dependent = "eps-dependent"


class TauK(str, Enum):
    kbar = "kbar"
    k = "k"


class OutOfRange(str, Enum):
    error = "error"
    clip = "clip"


RECOMMENDATION = ("the paper recommends --algorithm quantile (fixed quantiles, the default) when there "
                  "are many users, and --algorithm levy when each user contributes many samples")
OUTPUT_COLUMNS = ("estimate", "laplace_scale", "algorithm", "num_arrays", "m_ub", "users", "records_used")


def mean_estimate(
    input: str = typer.Argument(..., help="CSV or Parquet file of records (- for CSV on stdin)."),
    user_col: str = typer.Option(..., help="User id column: the privacy unit (the guarantee protects whatever it identifies)."),
    value_col: str = typer.Option(..., help="Value column (e.g. speed)."),
    upper: float = typer.Option(..., help="PUBLIC upper bound U of the values; never derived from the data."),
    lower: float = typer.Option(0.0, help="PUBLIC lower bound of the values."),
    epsilon: float = typer.Option(..., help="Privacy budget epsilon of each released estimate (> 0)."),
    time_col: Optional[str] = typer.Option(None, help="Timestamp column: orders each user's records and cuts time slots."),
    timezone: Optional[str] = common.TimezoneOption,
    cell_col: Optional[str] = typer.Option(None, help="Cell (location) id column, e.g. an H3 index."),
    slot_length: Optional[str] = typer.Option(None, help="Time slot length, e.g. 1h, 30min, 1d [default: 1h when slots are used]."),
    cell: Optional[str] = typer.Option(None, help="Select one cell (value of --cell-col)."),
    slot: Optional[str] = typer.Option(None, help="Select one time slot by its start, e.g. 2024-05-06T09:00."),
    group_by: Optional[str] = typer.Option(None, help="One estimate per group of these columns: cell, slot or any column names (comma-separated); needs --epsilon-per-group-ok."),
    epsilon_per_group_ok: bool = typer.Option(False, help="Acknowledge that --epsilon is spent per group: the total is epsilon x number of groups."),
    algorithm: Algorithm = typer.Option(Algorithm.quantile, help="Estimator (the paper's names)."),
    grouping: Optional[Grouping] = typer.Option(None, help="How users are packed into arrays [default: bestfit]."),
    m_ub: Optional[str] = typer.Option(None, help="Per-user cap: median, opt or an integer [default: median for array-averaging, opt for levy/quantile]."),
    quantile_mode: Optional[QuantileMode] = typer.Option(None, help="--algorithm quantile: fixed levels or eps-dependent [default: fixed]."),
    quantiles: Optional[str] = typer.Option(None, help="--algorithm quantile, fixed mode: levels q_lo,q_hi [default: 0.1,0.9]."),
    gamma: Optional[float] = typer.Option(None, help="--algorithm levy: concentration failure probability gamma in (0, 1) [default: 0.2]."),
    tau_k: Optional[TauK] = typer.Option(None, help="--algorithm levy: number of arrays in tau: kbar (arrays averaged) or k [default: kbar]."),
    value_out_of_range: OutOfRange = typer.Option(OutOfRange.error, help="Values outside [lower, upper]: an error, or clip each record (keeps the public counts)."),
    engine: Engine = EngineOption,
    memory_limit: Optional[str] = MemoryLimitOption,
    work_dir: Optional[str] = WorkDirOption,
    spark_master: Optional[str] = SparkMasterOption,
    spark_conf: Optional[list[str]] = SparkConfOption,
    evaluate: int = typer.Option(0, help="Run N times and print the MAE against the true per-group means: an internal, NOT private diagnostic; writes nothing.", min=0),
    alpha: float = acc_opts.AlphaOption,
    dry_run: bool = acc_opts.DryRunOption,
    fail_on_noisy: bool = acc_opts.FailOnNoisyOption,
    no_clip: bool = typer.Option(False, "--no-clip", help="Keep the raw noisy estimates; by default they are clipped to the public [--lower, --upper] (post-processing, no privacy cost)."),
    round_values: bool = typer.Option(False, "--round", help="Write the estimates as integers (post-processing)."),
    output: Optional[str] = common.OutputOption,
    report: Optional[str] = common.ReportOption,
    custodian: Optional[str] = common.CustodianOption,
    seed: Optional[int] = common.SeedOption,
    sampler: Optional[str] = common.SamplerOption,
    granularity: Optional[float] = common.GranularityOption,
    force: bool = common.ForceOption,
    json_summary: bool = common.JsonOption,
    quiet: bool = common.QuietOption,
    config: Optional[str] = common.ConfigOption,
) -> None:
    """User-level private mean of bounded values per cell and time slot (Gupta et al. 2024)."""
    params = common.public_parameters(locals())
    keys = tuple(common.split_list(group_by) or ())
    if group_by is not None and not keys:
        raise UsageError(f"--group-by {group_by!r} names no column; give e.g. cell,slot")
    if keys and not epsilon_per_group_ok:
        raise UsageError(f"--group-by {group_by} releases one estimate per group, each spending --epsilon "
                         f"{epsilon:g}, so the total is {epsilon:g} x the number of groups; pass "
                         "--epsilon-per-group-ok to confirm")
    settings = MeanSettings(  # validates every option (UsageError) before the data is read
        epsilon=epsilon, upper=upper, lower=lower, algorithm=algorithm.value,
        grouping=grouping.value if grouping else "bestfit", m_ub=m_ub if m_ub is not None else "auto",
        quantile_mode=quantile_mode.value if quantile_mode else "fixed",
        quantiles=_quantiles(quantiles), gamma=DEFAULT_GAMMA if gamma is None else gamma,
        tau_k=tau_k.value if tau_k else "kbar", sampler=sampler or "hardened", granularity=granularity,
    )
    _check_algorithm_flags(algorithm, quantiles, quantile_mode, gamma, tau_k)
    spec = RecordSpec(user_col=user_col, value_col=value_col, lower=settings.lower, upper=settings.upper,
                      time_col=time_col, cell_col=cell_col, slot_length=slot_length, cell=cell, slot=slot,
                      group_by=keys, out_of_range=value_out_of_range.value, timezone=timezone)
    options = engine_options(engine, memory_limit, work_dir, spark_master, spark_conf)
    acc_opts.check_level(alpha)
    if dry_run:
        if evaluate:
            raise UsageError("--dry-run reads no values, --evaluate runs on them: give one of them")
        return _dry_run(settings, alpha, keys, common.Console(quiet, json_summary, stdout_taken=False))
    randomness = make_random_source(seed)
    if evaluate:
        return _evaluate(input, spec, settings, options, randomness, evaluate,
                         common.Console(quiet, json_summary, stdout_taken=False))
    output, report = common.resolve_outputs(input, output, report, force, json_summary)
    custodian = common.resolve_custodian(custodian, input, output, report, force)
    console = common.Console(quiet, json_summary, stdout_taken="-" in (output, report))

    with console.progress(4) as stage:
        with _record_runs(input, spec, options, stage) as records:
            stage("estimating")
            estimates = _estimate(records, settings, randomness.generator)
            accuracy = mean_groups([e.laplace_scale for e in estimates], alpha,
                                   [e.granularity for e in estimates] if settings.sampler == "hardened" else None)
            swamped = acc_opts.noisy_check(accuracy, float(np.median(np.abs(records.true_means()))),
                                           "the true group means", _REMEDY, fail_on_noisy)
        claim = claim_for(settings, records.n_groups, user_col, estimates)
        participation = (participation_epsilon(settings, records.max_groups_per_user)
                         if records.max_groups_per_user is not None and records.n_groups > 1 else None)
        table = _output_table(records, estimates, settings, clip=not no_clip, round_values=round_values)
        warnings = (_warnings(records, estimates, settings) + _sampler_warnings(settings)
                    + ([SEEDED_WARNING] if randomness.seeded else []))
        notes = _notes(records, settings, user_col, claim, participation is not None)

        stage("writing output")
        common.publish(table, output, report, lambda described: Report(
            command="mean-estimate",
            parameters={**params, "input": common.display_name(input), "output": described["file"],
                        "slot_length": spec.slot_length or ("1h" if _uses_slots(spec) else None)},
            claim=claim,
            output={**described, "columns": table.columns},
            randomness=randomness.label,
            grid={"n_groups": records.n_groups, "key_columns": records.key_columns},
            notes=notes + _post_notes(settings, no_clip, round_values), warnings=warnings,
            accuracy=accuracy.to_dict(),
        ), private_files=((common.custodian_document("mean-estimate", {"participation": participation}),
                           custodian),) if participation is not None else (), force=force)

    for message in warnings + swamped:
        console.warn(message)
    summary = {
        "output": output, "report": report, "algorithm": settings.algorithm,
        "groups": records.n_groups, "epsilon_per_group": settings.epsilon,
        "epsilon_total_bound": claim.epsilon,
        "epsilon_total_if_participation_public (custodian only)":
            participation and participation["epsilon_total_if_participation_public"],
        "unit": f"user ({user_col})",
        "accuracy": acc_opts.shown(accuracy, json_summary),
    }
    if records.n_groups == 1:
        summary.update(estimate=table["estimate"][0], laplace_scale=estimates[0].laplace_scale)
    if swamped and json_summary:
        summary["warning_codes"] = [acc_opts.NOISY_CODE]
    console.summary(summary, "tsdp mean-estimate")


_REMEDY = ("a larger --epsilon, fewer and larger groups (a longer --slot-length, fewer --group-by columns), "
          "or tighter public bounds --lower/--upper")


def _sampler_warnings(settings: MeanSettings) -> list[str]:
    """--sampler float: do not publish; hardened LEVY/QUANTILE: what stays floating-point."""
    if settings.sampler == "float":
        return [FLOAT_WARNING]
    selection = selection_warning(settings.algorithm)
    return [selection] if selection else []


def _post_notes(settings: MeanSettings, no_clip: bool, round_values: bool) -> list[str]:
    notes = [] if no_clip else [
        f"post-processing: estimates clipped to the public bounds [{settings.lower:g}, {settings.upper:g}] "
        "(no privacy cost; a clipped estimate is never farther from the group's statistic than the raw one, "
        "so the accuracy interval still holds)"]
    if round_values:
        notes.append("post-processing: estimates rounded to integers (no privacy cost; adds up to 0.5, "
                     "which the accuracy interval does not include)")
    return notes


def _dry_run(settings: MeanSettings, alpha: float, keys, console) -> None:
    """What the public parameters alone say: the per-group noise bound and the budget; the input is
    not opened (the number of groups and of arrays per group depend on the records)."""
    accuracy = mean_plan(settings.algorithm, settings.grouping, settings.epsilon, settings.lower,
                         settings.upper, alpha, settings.sampler)
    summary = {
        "dry run": "read nothing but the options (public bounds, algorithm, epsilon); nothing written",
        "algorithm": settings.algorithm, "epsilon_per_group": settings.epsilon,
        "epsilon_total_bound": (f"{settings.epsilon:g} x the number of groups" if keys else settings.epsilon),
        "bounds": {"lower": settings.lower, "upper": settings.upper},
        "accuracy": accuracy.to_dict() if console.json_mode else accuracy.statement,
    }
    if acc_opts.planning():
        return {**summary, "accuracy": accuracy.to_dict()}
    console.summary(summary, "tsdp mean-estimate --dry-run")


def _quantiles(text: str | None) -> tuple[float, float] | tuple:
    return DEFAULT_QUANTILES if text is None else common.number_pair(text, "--quantiles", "0.1,0.9")


def _check_algorithm_flags(algorithm: Algorithm, quantiles, quantile_mode, gamma, tau_k) -> None:
    """Rule 8: a flag given explicitly to an algorithm that does not read it (even at its default)."""
    name = algorithm.value
    if algorithm is not Algorithm.quantile:
        for flag, value in (("--quantiles", quantiles), ("--quantile-mode", quantile_mode)):
            if value is not None:
                raise UsageError(f"{flag} is only used by --algorithm quantile, not {name}")
    elif quantiles is not None and quantile_mode is QuantileMode.eps_dependent:
        raise UsageError("--quantiles is only used with --quantile-mode fixed, not eps-dependent")
    if algorithm is not Algorithm.levy:
        for flag, value in (("--gamma", gamma), ("--tau-k", tau_k)):
            if value is not None:
                raise UsageError(f"{flag} is only used by --algorithm levy, not {name}")


def _uses_slots(spec: RecordSpec) -> bool:
    return spec.slot is not None or "slot" in spec.group_by


def _record_runs(input: str, spec: RecordSpec, options: EngineOptions, stage):
    """The records reduced to runs by the chosen engine (a context: shards live until its end)."""
    if options.engine == "spark":
        from tsdp.engine.spark_records import spark_record_runs

        return spark_record_runs(input, spec, options.spark_master, dict(options.spark_conf), stage=stage)
    from tsdp.engine.records import record_runs

    return record_runs(input, spec, options.memory_limit, options.work_dir, stage)


def _prepare(records: RecordRuns, settings: MeanSettings):
    with _named_groups(records):
        return prepare_from_runs(records.counts, records.group_starts, records.piece_sums, settings)


def _estimate(records: RecordRuns, settings: MeanSettings, rng: np.random.Generator):
    prep = _prepare(records, settings)
    with _named_groups(records):
        return estimate_prepared(prep, settings, rng)


class _named_groups:
    """Re-raise the algorithms' per-group errors naming the group by its keys, not its index."""

    def __init__(self, records: RecordRuns) -> None:
        self.records = records

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        if isinstance(exc, (GroupUsageError, GroupDataError)):
            cls = DataError if isinstance(exc, DataError) else UsageError
            raise cls(f"group {self.records.group_label(exc.group_index)}: {exc.detail}") from None
        return False


def _output_table(records: RecordRuns, estimates, settings: MeanSettings, clip: bool = True,
                  round_values: bool = False) -> pl.DataFrame:
    from tsdp.mechanisms.postprocess import postprocess

    raw = np.array([e.estimate for e in estimates], dtype=np.float64)
    values = postprocess(raw, settings.lower if clip else None, settings.upper if clip else None, round_values)
    columns = {
        "estimate": pl.Series(values, dtype=pl.Float64).cast(pl.Int64 if round_values else pl.Float64),
        "laplace_scale": pl.Series([e.laplace_scale for e in estimates], dtype=pl.Float64),
        "algorithm": pl.repeat(settings.algorithm, len(estimates), eager=True, dtype=pl.String),
        "num_arrays": pl.Series([e.num_arrays for e in estimates], dtype=pl.Int64),
        "m_ub": pl.Series([e.m_ub for e in estimates], dtype=pl.Int64),
        "users": pl.Series([e.users for e in estimates], dtype=pl.Int64),
        "records_used": pl.Series([e.records_used for e in estimates], dtype=pl.Int64),
    }
    frame = pl.DataFrame(columns)
    if records.key_columns:
        frame = pl.concat([records.groups, frame], how="horizontal")
    return frame


def _warnings(records: RecordRuns, estimates, settings: MeanSettings) -> list[str]:
    """The spec's warnings (K-bar < 10, L = 1, clipping), one line per kind, naming a group."""
    out: list[str] = []
    if len(estimates) == 1:
        out.extend(estimates[0].warnings)
    else:
        selection = settings.algorithm in ("levy", "quantile")
        few = [i for i, e in enumerate(estimates) if selection and e.num_arrays < 10]
        single = [i for i, e in enumerate(estimates) if e.users == 1]
        if few:
            out.append(f"{len(few)} of {len(estimates)} groups have fewer than 10 arrays (first: "
                       f"{records.group_label(few[0])}): their private "
                       f"{'median' if settings.algorithm == 'levy' else 'quantiles'} and hence the "
                       "clipping interval are unreliable")
        if single:
            out.append(f"{len(single)} of {len(estimates)} groups have a single user (first: "
                       f"{records.group_label(single[0])}): a user-level private mean of one user is "
                       "mostly noise")
        known = ("arrays (fewer than 10)", "a single user")
        extra = {w for e in estimates for w in e.warnings if not any(k in w for k in known)}
        out.extend(sorted(extra))
    if records.clipped:
        out.append(f"--value-out-of-range clip: values outside the public bounds [{settings.lower:g}, "
                   f"{settings.upper:g}] were clipped record by record; the estimates are of the "
                   "clipped data")
    return out


def _notes(records: RecordRuns, settings: MeanSettings, user_col: str, claim, custodian_figures: bool) -> list[str]:
    n = records.n_groups
    eps = settings.epsilon
    notes = [
        f"neighbouring relation: {NEIGHBOURING} (adding or removing users is not covered)",
        f"privacy unit: one value of column {user_col!r}; the guarantee protects whatever this column "
        "identifies (a plate protects a vehicle; a plate-day only one day of it)",
        f"each of the {n} estimate(s) is pure user-level {eps:g}-DP; releasing all of them is "
        f"{claim.epsilon:g}-DP by basic sequential composition (epsilon x {n} groups, data-independent)",
    ]
    if custodian_figures:
        notes.append("the smaller total that holds only if participation (which users appear in which groups) "
                      "is public depends on the data; it is in the custodian file, not in this report")
    notes.append("users, records_used, num_arrays and m_ub in the output are public by the paper's "
                 "assumption that the user set and per-user record counts are public")
    notes.extend(records.notes)
    notes.append(f"recommendation: {RECOMMENDATION}")
    return notes


def _evaluate(input, spec: RecordSpec, settings: MeanSettings, options: EngineOptions, randomness, repeats: int,
              console) -> None:
    """Release ``repeats`` times and print the MAE against the true means; writes nothing."""
    from tsdp.mechanisms.metrics import mae_over_runs, summarize

    with _record_runs(input, spec, options, None) as records:
        truth = records.true_means()
        prep = _prepare(records, settings)
    with _named_groups(records):
        mae = mae_over_runs((release_prepared(prep, settings, randomness.generator).estimate  # every group
                             for _ in range(repeats)), truth)
    console.warn("--evaluate compares the estimates with the true means: the figures are NOT private, "
                 "are for choosing parameters only, and nothing was written")
    console.summary({"runs": repeats, "algorithm": settings.algorithm, "epsilon_per_group": settings.epsilon,
                     "groups": records.n_groups, "mae per group": summarize(mae.tolist()),
                     "written": "nothing (diagnostic only, NOT private)"}, "tsdp mean-estimate --evaluate")

"""``tsdp mean-estimate``: user-level private means per cell/time slot (Gupta et al. 2024).

Thin: parse the options into :class:`tsdp.api.means.MeanOptions` (validated before the data is
read), load the records (:mod:`tsdp.io.records`), call :func:`tsdp.mean.estimate_groups` and write
the estimates and the privacy report atomically.
"""

from __future__ import annotations

import contextlib
from enum import Enum
from typing import Optional

import typer

import numpy as np

from tsdp.api.means import MeanOptions, MeanPlan
from tsdp.caveats import Caveat
from tsdp.cli import accuracy_options as acc_opts
from tsdp.cli import common
from tsdp.io import outputs
from tsdp.cli.options import options_from
from tsdp.cli.engine_options import (Engine, EngineOption, MemoryLimitOption, SparkConfOption, SparkMasterOption,
                                     WorkDirOption, engine_options)
from tsdp.engine.options import EngineOptions
from tsdp.errors import UsageError
from tsdp.io.records import RecordSpec
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


class Participation(str, Enum):
    private = "private"
    public = "public"


def mean_estimate(
    input: str = typer.Argument(..., help="CSV (.csv, .csv.gz, .tsv) or Parquet file of records; - reads stdin (Parquet when it starts with PAR1, else CSV)."),
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
    group_by: Optional[str] = typer.Option(None, help="One estimate per group of these columns: cell, slot or any column names (comma-separated); needs --epsilon-per-group-ok and, with --participation private, the declared groups."),
    group_keys: Optional[str] = typer.Option(None, help="The declared values of the --group-by column other than slot (comma-separated; PUBLIC, never read off the data): every one gets an output row, records of other values are dropped."),
    group_keys_file: Optional[str] = typer.Option(None, help="CSV or Parquet file of declared groups: one column per --group-by column other than slot, one row per group (instead of --group-keys)."),
    start: Optional[str] = typer.Option(None, help="--group-by slot: the first declared slot (a slot start); without a UTC offset, a time of the data's zone."),
    end: Optional[str] = typer.Option(None, help="--group-by slot: the end of the declared slots, exclusive: slots --start, --start + --slot-length, ... before --end."),
    epsilon_per_group_ok: bool = typer.Option(False, help="Acknowledge that --epsilon is spent per group: the total is epsilon x number of groups."),
    participation: Participation = typer.Option(Participation.private, help="Whether which users appear in which groups, with how many records, is private (the default: add/remove or replace one user; needs --arrays and an integer --m-ub, publishes no per-group counts) or public (the paper's assumption; publishes users, records_used and num_arrays per group)."),
    arrays: Optional[int] = typer.Option(None, help="--participation private: the public number K of arrays per group; users go to array hash(user id) mod K, and each estimate's noise scales as (upper - lower)/(K epsilon)."),
    algorithm: Algorithm = typer.Option(Algorithm.quantile, help="Estimator (the paper's names; baseline needs --participation public)."),
    grouping: Optional[Grouping] = typer.Option(None, help="--participation public: how users are packed into arrays by their record counts [default: bestfit]."),
    m_ub: Optional[str] = typer.Option(None, help="Per-user cap of records per group: an integer (required with --participation private), or with --participation public median or opt [default: median for array-averaging, opt for levy/quantile]."),
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
    evaluate: Optional[int] = typer.Option(None, help="Run N times and print the MAE against the true per-group means: an internal, NOT private diagnostic; writes nothing.", min=1),
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
    # every option checked before the data is read
    plan = options_from(MeanOptions, locals(), clip=not no_clip).plan()
    settings, spec = plan.settings, plan.spec
    options = engine_options(engine, memory_limit, work_dir, spark_master, spark_conf)
    if dry_run:
        if evaluate is not None:
            raise UsageError("--dry-run reads no values, --evaluate runs on them: give one of them")
        return _dry_run(plan, common.Console(quiet, json_summary, stdout_taken=False))
    randomness = make_random_source(seed)
    if evaluate is not None:
        return _evaluate(input, plan, options, randomness, evaluate,
                         common.Console(quiet, json_summary, stdout_taken=False))
    output, report = outputs.resolve_outputs(input, output, report, force, json_summary)
    custodian = common.resolve_custodian(custodian, input, output, report, force)
    console = common.Console(quiet, json_summary, stdout_taken="-" in (output, report))

    with console.progress(4) as stage:
        with _record_chunks(input, spec, options, stage) as chunks:
            chunked = plan.estimate_chunks(chunks, randomness.generator, stage)
            frames = chunked.frames()
            if chunks.single:  # one chunk: one table, written at once
                import polars as pl

                frames = pl.concat(list(frames), how="vertical")
                stage("writing output")
            done: dict = {}

            def finished():  # once every chunk is estimated (the output is staged by then)
                if not done:
                    estimated = chunked.estimated()
                    means = np.abs(chunked.true_means)
                    means = means[~np.isnan(means)]
                    findings = [] if estimated.accuracy is None or not means.size else acc_opts.noisy_check(
                        estimated.accuracy, float(np.median(means)), "the true group means", _REMEDY, fail_on_noisy)
                    done.update(estimated=estimated, findings=findings,
                                warnings=estimated.warnings + ([SEEDED_WARNING] if randomness.seeded else []))
                return done

            def private_files():  # written whatever the findings are: its presence tells nothing
                figures = finished()["estimated"].custodian or {}
                return ((common.custodian_document("mean-estimate", figures, finished()["findings"]), custodian,
                         "--custodian"),)

            outputs.publish(frames, output, report, lambda described: plan.report(
                chunks, finished()["estimated"], randomness, described, finished()["warnings"],
                {**params, "input": outputs.display_name(input), "output": described["file"]},
            ), private_files=outputs.Deferred(private_files), force=force)
        estimated, warnings = finished()["estimated"], finished()["warnings"]
        claim = estimated.claim

    for message in warnings:
        console.warn(message)
    summary = {
        "output": output, "report": report, "algorithm": settings.algorithm,
        "participation": settings.participation,
        "groups": estimated.n_groups, "epsilon_per_group": settings.epsilon,
        "epsilon_total_bound": claim.epsilon,
        "custodian": custodian, "custodian_checks": [acc_opts.NOISY_CODE],
        "unit": "user", "user_col": user_col,
        "accuracy": acc_opts.shown(estimated.accuracy, json_summary) if estimated.accuracy is not None else None,
    }
    if estimated.n_groups == 1 and estimated.first is not None:
        summary.update(estimate=estimated.first[0], laplace_scale=estimated.first[1])
    console.summary(summary, "tsdp mean-estimate")


_REMEDY = ("a larger --epsilon, fewer and larger groups (a longer --slot-length, fewer --group-by columns), "
          "or tighter public bounds --lower/--upper")


def _dry_run(plan: MeanPlan, console) -> dict | None:
    """What the public parameters alone say: the per-group noise bound and the budget; the input is
    not opened. With declared groups their number is public, and so is the total epsilon; under
    --participation private so is each group's number of arrays."""
    settings = plan.settings
    accuracy = plan.dry_run_accuracy()
    grouped = bool(plan.spec.group_by)
    n_groups = plan.declared_count() if grouped else 1
    summary = {
        "dry_run": "read nothing but the options (public bounds, algorithm, epsilon, declared groups); nothing written",
        "algorithm": settings.algorithm, "participation": settings.participation,
        "epsilon_per_group": settings.epsilon, "groups": n_groups,
        "epsilon_total_bound": None if n_groups is None else settings.epsilon * n_groups,
        "bounds": {"lower": settings.lower, "upper": settings.upper},
        "accuracy": accuracy.to_dict() if console.json_mode else accuracy.statement,
    }
    if n_groups is None:
        console.warn(Caveat("epsilon_per_group", f"--dry-run: the total epsilon is {settings.epsilon:g} x the number "
                            "of groups, which the records decide (declare them: --group-keys, --start/--end)"))
    if acc_opts.planning():
        return {**summary, "accuracy": accuracy.to_dict()}
    console.summary(summary, "tsdp mean-estimate --dry-run")
    return None


@contextlib.contextmanager
def _record_chunks(input: str, spec: RecordSpec, options: EngineOptions, stage):
    """The records reduced to runs by the chosen engine, as chunks of whole groups in group order
    (a context: shards live until its end)."""
    from tsdp.engine.engines import engine_for

    with engine_for(options).record_chunks(input, spec, stage) as chunks:
        yield chunks


def _evaluate(input, plan: MeanPlan, options: EngineOptions, randomness, repeats: int, console) -> None:
    """Release ``repeats`` times and print the MAE against the true means; writes nothing."""
    from tsdp.mechanisms.metrics import mae_over_runs, summarize

    parts = []
    groups = 0
    with _record_chunks(input, plan.spec, options, lambda name: None) as chunks:
        for records in chunks:  # chunk by chunk: groups are independent
            prep, present = plan.prepare(records)
            if prep is None:
                continue
            truth = records.true_means()
            truth = truth if present is None else truth[present]
            estimated = ~np.isnan(truth)  # (private participation: groups without records have no true mean)
            groups += int(estimated.sum())
            parts.append(mae_over_runs((plan.release(records, prep, present, randomness.generator).estimate[estimated]
                                        for _ in range(repeats)), truth[estimated]))
    mae = np.concatenate(parts) if parts else np.zeros(0)
    console.warn(Caveat("not_private_diagnostic", "--evaluate compares the estimates with the true means: the "
                        "figures are NOT private, are for choosing parameters only, and nothing was written"))
    console.summary({"runs": repeats, "algorithm": plan.settings.algorithm, "epsilon_per_group": plan.settings.epsilon,
                     "groups": groups, "mae_per_group": summarize(mae.tolist()),
                     "release_written": False}, "tsdp mean-estimate --evaluate")

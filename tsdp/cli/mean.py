"""``tsdp mean-estimate``: user-level private means per cell/time slot (Gupta et al. 2024).

Thin: parse the options, validate them through :class:`tsdp.mean.MeanSettings` before the data is
read, load the records (:mod:`tsdp.io.records`), call :func:`tsdp.mean.estimate_groups` and write
the estimates and the privacy report atomically.
"""

from __future__ import annotations

import contextlib
from enum import Enum
from typing import Optional

import typer

import numpy as np

from tsdp.api.means import MeanOptions, MeanPlan, named_groups
from tsdp.caveats import Caveat
from tsdp.cli import accuracy_options as acc_opts
from tsdp.cli import common
from tsdp.cli.engine_options import (Engine, EngineOption, MemoryLimitOption, SparkConfOption, SparkMasterOption,
                                     WorkDirOption, engine_options)
from tsdp.engine.options import EngineOptions
from tsdp.errors import UsageError
from tsdp.io.records import RecordSpec
from tsdp.mean import release_prepared
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
    plan = MeanOptions(  # validates every option (UsageError) before the data is read
        user_col=user_col, value_col=value_col, upper=upper, epsilon=epsilon, lower=lower, time_col=time_col,
        timezone=timezone, cell_col=cell_col, slot_length=slot_length, cell=cell, slot=slot, group_by=group_by,
        epsilon_per_group_ok=epsilon_per_group_ok, algorithm=algorithm, grouping=grouping, m_ub=m_ub,
        quantile_mode=quantile_mode, quantiles=quantiles, gamma=gamma, tau_k=tau_k,
        value_out_of_range=value_out_of_range, alpha=alpha, clip=not no_clip, round_values=round_values,
        sampler=sampler, granularity=granularity,
    ).plan()
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
    output, report = common.resolve_outputs(input, output, report, force, json_summary)
    custodian = common.resolve_custodian(custodian, input, output, report, force)
    console = common.Console(quiet, json_summary, stdout_taken="-" in (output, report))

    with console.progress(4) as stage:
        with _record_chunks(input, spec, options, stage) as chunks:
            chunked = plan.estimate_chunks(chunks, randomness.generator, stage)
            frames = chunked.frames()
            if chunks.single:  # one chunk: one table, written at once
                frames = next(iter(frames))
                stage("writing output")
            done: dict = {}

            def finished():  # once every chunk is estimated (the output is staged by then)
                if not done:
                    estimated = chunked.estimated()
                    findings = acc_opts.noisy_check(estimated.accuracy, float(np.median(np.abs(chunked.true_means))),
                                                    "the true group means", _REMEDY, fail_on_noisy)
                    done.update(estimated=estimated, findings=findings,
                                warnings=estimated.warnings + ([SEEDED_WARNING] if randomness.seeded else []))
                return done

            def private_files():  # written whatever the findings are: its presence tells nothing
                participation = finished()["estimated"].participation
                figures = {} if participation is None else {"participation": participation}
                return ((common.custodian_document("mean-estimate", figures, finished()["findings"]), custodian,
                         "--custodian"),)

            common.publish(frames, output, report, lambda described: plan.report(
                chunks, finished()["estimated"], randomness, described, finished()["warnings"],
                {**params, "input": common.display_name(input), "output": described["file"]},
            ), private_files=common.Deferred(private_files), force=force)
        estimated, warnings = finished()["estimated"], finished()["warnings"]
        claim, estimates = estimated.claim, estimated.estimates

    for message in warnings:
        console.warn(message)
    summary = {
        "output": output, "report": report, "algorithm": settings.algorithm,
        "groups": chunks.n_groups, "epsilon_per_group": settings.epsilon,
        "epsilon_total_bound": claim.epsilon,
        "custodian": custodian, "custodian_checks": [acc_opts.NOISY_CODE],
        "unit": "user", "user_col": user_col,
        "accuracy": acc_opts.shown(estimated.accuracy, json_summary),
    }
    if chunks.n_groups == 1 and chunks.single:
        summary.update(estimate=frames["estimate"][0], laplace_scale=estimates[0].laplace_scale)
    console.summary(summary, "tsdp mean-estimate")


_REMEDY = ("a larger --epsilon, fewer and larger groups (a longer --slot-length, fewer --group-by columns), "
          "or tighter public bounds --lower/--upper")


def _dry_run(plan: MeanPlan, console) -> dict | None:
    """What the public parameters alone say: the per-group noise bound and the budget; the input is
    not opened (the number of groups and of arrays per group depend on the records)."""
    settings = plan.settings
    accuracy = plan.dry_run_accuracy()
    grouped = bool(plan.spec.group_by)
    summary = {
        "dry_run": "read nothing but the options (public bounds, algorithm, epsilon); nothing written",
        "algorithm": settings.algorithm, "epsilon_per_group": settings.epsilon,
        "epsilon_total_bound": None if grouped else settings.epsilon,
        "bounds": {"lower": settings.lower, "upper": settings.upper},
        "accuracy": accuracy.to_dict() if console.json_mode else accuracy.statement,
    }
    if grouped:
        console.warn(Caveat("epsilon_per_group", f"--dry-run: the total epsilon is {settings.epsilon:g} x the "
                            "number of groups, which the records decide"))
    if acc_opts.planning():
        return {**summary, "accuracy": accuracy.to_dict()}
    console.summary(summary, "tsdp mean-estimate --dry-run")
    return None


@contextlib.contextmanager
def _record_chunks(input: str, spec: RecordSpec, options: EngineOptions, stage):
    """The records reduced to runs by the chosen engine, as chunks of whole groups in group order
    (a context: shards live until its end)."""
    if options.engine == "spark":
        from tsdp.engine.records import RecordChunks
        from tsdp.engine.spark_records import spark_record_runs

        with spark_record_runs(input, spec, options.spark_master, dict(options.spark_conf), stage=stage) as runs:
            yield RecordChunks.of(runs)
        return
    from tsdp.engine.records import record_chunks

    with record_chunks(input, spec, options.memory_limit, options.work_dir, stage) as chunks:
        yield chunks


def _evaluate(input, plan: MeanPlan, options: EngineOptions, randomness, repeats: int, console) -> None:
    """Release ``repeats`` times and print the MAE against the true means; writes nothing."""
    from tsdp.mechanisms.metrics import mae_over_runs, summarize

    parts = []
    with _record_chunks(input, plan.spec, options, lambda name: None) as chunks:
        for records in chunks:  # chunk by chunk: groups are independent
            truth = records.true_means()
            prep = plan.prepare(records)
            with named_groups(records):
                parts.append(mae_over_runs((release_prepared(prep, plan.settings, randomness.generator).estimate
                                            for _ in range(repeats)), truth))
    mae = np.concatenate(parts)
    console.warn(Caveat("not_private_diagnostic", "--evaluate compares the estimates with the true means: the "
                        "figures are NOT private, are for choosing parameters only, and nothing was written"))
    console.summary({"runs": repeats, "algorithm": plan.settings.algorithm, "epsilon_per_group": plan.settings.epsilon,
                     "groups": chunks.n_groups, "mae_per_group": summarize(mae.tolist()),
                     "release_written": False}, "tsdp mean-estimate --evaluate")

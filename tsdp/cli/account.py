"""``tsdp account``: privacy accounting from the command line (thin: parse, call accounting, print)."""

from __future__ import annotations

from enum import Enum
from typing import Optional

import typer

from tsdp.caveats import Caveat
from tsdp.cli import common
from tsdp.cli.vocabulary import VocabularyCommand
from tsdp.errors import UsageError

app = typer.Typer(help="Privacy accounting: DP-SGD with structured subsampling, calibration, composition, verification.",
                  no_args_is_help=True)
calibrate_app = typer.Typer(help="Calibrate noise or training length to a target epsilon.", no_args_is_help=True)
app.add_typer(calibrate_app, name="calibrate")


class Top(str, Enum):
    wor = "wor"
    poisson = "poisson"
    shuffle = "shuffle"
    deterministic = "deterministic"


class Bottom(str, Enum):
    wr = "wr"
    poisson = "poisson"


class Bound(str, Enum):
    upper = "upper"
    lower = "lower"




class Sampling(str, Enum):
    poisson = "poisson"
    fixed = "fixed"


class Relation(str, Enum):
    add_remove = "add-remove"
    substitution = "substitution"


# The series geometry is required for --unit event/user (checked in the command: --unit record
# needs none of it).
SeriesOpt = typer.Option(None, "--series", help="N: number of series in the training set (series units).")
LengthOpt = typer.Option(None, "--length", help="L: length of the shortest training series (worst case; series units).")
ContextOpt = typer.Option(None, "--context-length", help="L_C: context length, the model's whole receptive field (lags included; series units).")
HorizonOpt = typer.Option(None, "--forecast-length", help="L_F: forecast length (series units).")
BatchOpt = typer.Option(None, "--batch-size", help="B: windows per batch (lambda windows from each of B/lambda series); with --unit record, the (expected) records per batch, with --dataset-size.")
StepsOpt = typer.Option(None, "--steps", help="Training steps (give this or --epochs).")
EpochsOpt = typer.Option(None, "--epochs", help="Training epochs (steps per epoch = floor(N lambda / B)).")
DeltaOpt = typer.Option(..., "--delta", help="Target delta.")
TopOpt = typer.Option(Top.wor, "--top", help="Top level: series sampled without replacement / Poisson per step, or iterated per epoch.")
BottomOpt = typer.Option(Bottom.wr, "--bottom", help="Bottom level: windows sampled with replacement, or Poisson.")
InstancesOpt = typer.Option(1, "--instances", help="lambda: windows per selected series (1 is optimal, Thm 4.1).")
UnitOpt = typer.Option("w-event", "--unit", metavar="[w-event|w-user|event|record]",
                       help="Series units, with structured subsampling: w-event (--w contiguous steps of one series), w-user (any --w steps of one series), event (one step, --w 1); or record: standard DP-SGD on a flat dataset, protecting one record.")
SamplingRateOpt = typer.Option(None, "--sampling-rate", help="--unit record: q, the probability that a record is in a batch (or give --batch-size and --dataset-size).")
DatasetSizeOpt = typer.Option(None, "--dataset-size", help="--unit record: N, records in the training set (q = batch size / N; an epoch is ceil(N / batch size) steps).")
SamplingOpt = typer.Option(Sampling.poisson, "--sampling", help="--unit record: poisson (each record independently with rate q) or fixed (batches of exactly B of N records).")
RelationOpt = typer.Option(Relation.add_remove, "--relation", help="--unit record: add-remove (one record added or removed; with poisson) or substitution (one record replaced; with fixed).")
WOpt = typer.Option(1, "--w", help="w: number of protected time steps.")
LabelNoiseOpt = typer.Option(0.0, "--label-noise", help="sigma_F: Gaussian noise on forecast windows, in units of --value-bound.")
ContextNoiseOpt = typer.Option(0.0, "--context-noise", help="sigma_C: Gaussian noise on context windows, in units of --value-bound.")
ValueBoundOpt = typer.Option(None, "--value-bound", help="v: largest change of one value under the (w, v) relation.")
SamplerOpt = typer.Option("float", "--sampler", help="float: the continuous Gaussian mechanism; hardened: forecast-train's default lattice noise (needs --parameters and --clip-norm), to reproduce its report.")
ParametersOpt = typer.Option(None, "--parameters", help="The model's parameter count (--sampler hardened).")
ClipNormOpt = typer.Option(None, "--clip-norm", help="C, the clipping norm (--sampler hardened: the lattice is a power of two below sigma C 2^-28).")
DiscretizationOpt = typer.Option(1e-3, "--discretization", help="Privacy-loss grid step of the PLD.")


@app.command("dpsgd", cls=VocabularyCommand)
def dpsgd(
    ctx: typer.Context,
    series: Optional[int] = SeriesOpt, length: Optional[int] = LengthOpt, context_length: Optional[int] = ContextOpt,
    forecast_length: Optional[int] = HorizonOpt, batch_size: Optional[int] = BatchOpt,
    noise_multiplier: float = typer.Option(..., "--noise-multiplier", help="sigma: noise std / clipping norm."),
    steps: Optional[int] = StepsOpt, epochs: Optional[int] = EpochsOpt, delta: float = DeltaOpt,
    top: Top = TopOpt, bottom: Bottom = BottomOpt, instances: int = InstancesOpt, unit: str = UnitOpt,
    sampling_rate: Optional[float] = SamplingRateOpt, dataset_size: Optional[int] = DatasetSizeOpt,
    sampling: Sampling = SamplingOpt, relation: Relation = RelationOpt,
    w: int = WOpt, label_noise: float = LabelNoiseOpt, context_noise: float = ContextNoiseOpt,
    value_bound: Optional[float] = ValueBoundOpt,
    sampler: str = SamplerOpt, parameters: Optional[int] = ParametersOpt, clip_norm: Optional[float] = ClipNormOpt,
    bound: Bound = typer.Option(Bound.upper, "--bound", help="upper: the guarantee; lower: optimistic, never a guarantee."),
    checkpoints: int = typer.Option(0, "--checkpoints", help="Also print epsilon at this many points of training.", min=0),
    compare_standard: bool = typer.Option(False, "--compare-standard", help="Also print the flattened 'standard DP-SGD' epsilon (Prop. C.1; not valid at event level)."),
    discretization: float = DiscretizationOpt,
    json_summary: bool = common.JsonOption, quiet: bool = common.QuietOption,
    config: Optional[str] = common.ConfigOption,
) -> None:
    """Epsilon of DP-SGD training for forecasting with structured subsampling (Schuchardt et al. 2025).

    With --unit record: standard DP-SGD (Poisson sampling of records at rate q under add/remove,
    or fixed-size batches under substitution), the epsilon Opacus and TF-Privacy users know.
    """
    from tsdp.api import accounting

    summary = accounting.dpsgd(noise_multiplier=noise_multiplier, delta=delta, **_given(ctx))
    _print(summary, json_summary, quiet, "tsdp account dpsgd" + (" --unit record" if unit == "record" else ""))


@calibrate_app.command("dpsgd", cls=VocabularyCommand)
def calibrate_dpsgd(
    ctx: typer.Context,
    series: Optional[int] = SeriesOpt, length: Optional[int] = LengthOpt, context_length: Optional[int] = ContextOpt,
    forecast_length: Optional[int] = HorizonOpt, batch_size: Optional[int] = BatchOpt,
    epsilon: float = typer.Option(..., "--epsilon", help="Privacy budget epsilon the training may spend."),
    noise_multiplier: Optional[float] = typer.Option(None, "--noise-multiplier", help="Given sigma: find the largest number of steps (or epochs)."),
    steps: Optional[int] = StepsOpt, epochs: Optional[int] = EpochsOpt, delta: float = DeltaOpt,
    top: Top = TopOpt, bottom: Bottom = BottomOpt, instances: int = InstancesOpt, unit: str = UnitOpt,
    w: int = WOpt, label_noise: float = LabelNoiseOpt, context_noise: float = ContextNoiseOpt,
    value_bound: Optional[float] = ValueBoundOpt,
    sampler: str = SamplerOpt, parameters: Optional[int] = ParametersOpt, clip_norm: Optional[float] = ClipNormOpt,
    sampling_rate: Optional[float] = SamplingRateOpt, dataset_size: Optional[int] = DatasetSizeOpt,
    sampling: Sampling = SamplingOpt, relation: Relation = RelationOpt,
    discretization: float = DiscretizationOpt,
    json_summary: bool = common.JsonOption, quiet: bool = common.QuietOption,
    config: Optional[str] = common.ConfigOption,
) -> None:
    """Noise multiplier for a target epsilon and training length, or the longest training for a noise multiplier.

    Both answers are on the safe side: the noise multiplier is rounded up (relative 1e-3) and the
    training length down, and the epsilon printed is the upper bound at that answer.
    """
    from tsdp.api import accounting

    summary = accounting.calibrate_dpsgd(epsilon=epsilon, delta=delta, noise_multiplier=noise_multiplier,
                                         **_given(ctx))
    _print(summary, json_summary, quiet,
           "tsdp account calibrate dpsgd" + (" --unit record" if unit == "record" else ""))


def _given(ctx: typer.Context) -> dict:
    """The command's accounting options (not its run control), for :mod:`tsdp.api.accounting`."""
    skip = {"noise_multiplier", "delta", "epsilon", "json_summary", "quiet", "config"}
    return {k: v for k, v in ctx.params.items() if k not in skip}


def _print(summary: dict, json_summary: bool, quiet: bool, title: str) -> None:
    console = common.Console(quiet, json_summary, stdout_taken=False)
    for message in summary.pop("warnings"):
        console.warn(message)
    console.summary(summary, title)


@app.command("compose", cls=VocabularyCommand)
def compose(
    reports: list[str] = typer.Argument(..., help="tsdp report files (JSON) of releases about the same people."),
    delta: Optional[float] = typer.Option(None, "--delta", help="Total delta to read epsilon at [default: sum of the reports' deltas]."),
    discretization: float = DiscretizationOpt,
    json_summary: bool = common.JsonOption, quiet: bool = common.QuietOption,
    config: Optional[str] = common.ConfigOption,
) -> None:
    """Compose the privacy claims of several reports: tightly through their mechanism events where
    every report has them, otherwise by basic composition; says which.

    The reports must protect one unit: the same level, neighbouring relation and id column (exit 3
    otherwise), and each claim must pass the claim checks of 'tsdp account verify' (exit 3). The
    composed guarantee covers units within the strictest of the reports' bounds, stated as 'unit'.
    """
    from tsdp.api import accounting

    _print(accounting.compose(reports, delta, discretization), json_summary, quiet, "tsdp account compose")


@app.command("verify", cls=VocabularyCommand)
def verify(
    reports: list[str] = typer.Argument(..., help="tsdp report files (JSON); every one must pass."),
    max_epsilon: Optional[float] = typer.Option(None, "--max-epsilon", help="Fail if a claim's epsilon exceeds this (a finite number >= 0)."),
    max_delta: Optional[float] = typer.Option(None, "--max-delta", help="Fail if a claim's delta exceeds this (in [0, 1])."),
    released: Optional[list[str]] = typer.Option(None, "--released", metavar="FILE", help="Released file (an input) whose sha256 must match the report; once per report, in order [default: the file the report names, when it sits next to the report; without it the report fails]."),
    no_output_check: bool = typer.Option(False, "--no-output-check", help="Verify the claims alone when a released file is not at hand (the output_sha256 check then passes as 'not checked', and the summary says so): a claim verified without its file could cover any file."),
    json_summary: bool = common.JsonOption, quiet: bool = common.QuietOption,
    config: Optional[str] = common.ConfigOption,
) -> None:
    """Check reports for CI; exit 0 when every check of every report passes, 3 otherwise.

    A pass proves that each claim is consistent: its definition is one its mechanism can give
    (Gaussian noise is never pure DP; LIP is never DP), its unit, mechanism events and parameters
    agree with each other and with the released grid (sensitivities from M, I, K, w), epsilon and
    delta recomputed from the events or parameters (DP-SGD as 'tsdp account dpsgd') are no smaller
    than claimed, it is an upper bound within --max-epsilon/--max-delta, the run was not seeded,
    and the released file matches the report's sha256 (--released, or the file the report names next
    to it; without either the report fails, exit 3, unless --no-output-check asks for the claims
    alone). It does NOT prove who wrote the report (a
    report edited consistently everywhere passes), that the file was made with the stated noise,
    anything about the data, or that declared bounds held for pre-aggregated input.

    Exit 4 for a file that is not a strict JSON report (NaN, Infinity, duplicate keys, too deep),
    2 for a meaningless threshold.
    """
    from tsdp.api import accounting
    from tsdp.errors import BudgetError

    if no_output_check and released:
        raise UsageError("--no-output-check and --released contradict each other: give the released files to "
                         "check them, or --no-output-check to verify the claims alone")
    results = accounting.verify(reports, max_epsilon, max_delta, released, output_check=not no_output_check)
    passed = all(r.passed for _, r in results)
    console = common.Console(quiet, json_summary, stdout_taken=False)
    if no_output_check:
        console.warn(Caveat("output_not_checked", "--no-output-check: the released files were not compared with "
                            "the reports' sha256; a pass covers the claims alone, whatever file is published "
                            "with them"))
    if json_summary:
        print(console.json_document({"passed": passed, "output_checked": not no_output_check,
                                     "reports": [r.to_dict(path) for path, r in results]},
                                    "tsdp account verify"))
    else:
        for path, r in results:
            console.summary({c.name: ("ok: " if c.passed else "FAILED: ") + c.detail for c in r.checks},
                            f"tsdp account verify {path}: {'passed' if r.passed else 'FAILED'}")
    failing = [(path, r) for path, r in results if not r.passed]
    if failing:
        path, r = failing[0]
        first = headline(r.failures)
        more = len(r.failures) - 1
        others = f"; {len(failing) - 1} other report(s) failed too" if len(failing) > 1 else ""
        raise BudgetError(f"verification of {path!r} failed: {first.name}: {first.detail}"
                          + (f" (and {more} more failed check(s))" if more else "") + others)


# Checks that speak of the claim's epsilon and delta themselves: when one of them fails it heads the
# error line (a lowered epsilon also changes figures derived from it, such as the rounding slack,
# whose checks come first in the report but would name a by-product instead of the epsilon).
HEADLINE_CHECKS = ("budget", "privacy_loss", "command")


def headline(failures):
    """The failed check the one ``error:`` line names: the first of HEADLINE_CHECKS that failed,
    else the first failure in report order."""
    rank = {name: k for k, name in enumerate(HEADLINE_CHECKS)}
    return min(failures, key=lambda check: rank.get(check.name, len(rank)))

"""``tsdp account``: privacy accounting from the command line (thin: parse, call accounting, print)."""

from __future__ import annotations

from enum import Enum
from typing import Optional

import typer

from tsdp.cli import common
from tsdp.cli.vocabulary import VocabularyCommand, series_unit
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


class Unit(str, Enum):
    event = "event"
    user = "user"


class Bound(str, Enum):
    upper = "upper"
    lower = "lower"


SERIES_UNITS = ("event", "w-event", "w-user")  # and "user", refused by vocabulary.series_unit


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
RECORD_ONLY = {"sampling_rate": "--sampling-rate", "dataset_size": "--dataset-size", "sampling": "--sampling",
               "relation": "--relation"}
SERIES_ONLY = {"series": "--series", "length": "--length", "context_length": "--context-length",
               "forecast_length": "--forecast-length",
               "top": "--top", "bottom": "--bottom", "instances": "--instances", "w": "--w",
               "label_noise": "--label-noise", "context_noise": "--context-noise", "value_bound": "--value-bound",
               "bound": "--bound", "checkpoints": "--checkpoints", "compare_standard": "--compare-standard"}
SERIES_REQUIRED = {"series": "--series", "length": "--length", "context_length": "--context-length",
                   "forecast_length": "--forecast-length",
                   "batch_size": "--batch-size"}


def _check_unit_options(ctx: typer.Context, unit: str, w: int) -> str:
    """--unit record takes the record options and none of the series geometry, and vice versa
    (an option counts as given when its value differs from its default). Returns the unit as the
    accountant names it ("record", or "event"/"user" from :func:`series_unit`)."""
    if unit != "record" and unit not in SERIES_UNITS + ("user",):
        raise UsageError(f"--unit {unit!r}: must be one of w-event, w-user, event or record")
    defaults = {p.name: p.default for p in ctx.command.params}

    def given(name: str) -> bool:
        value, default = ctx.params.get(name), defaults.get(name)
        return (value.value if isinstance(value, Enum) else value) != (
            default.value if isinstance(default, Enum) else default)

    record = unit == "record"
    accounted = "record" if record else series_unit(unit, w)
    foreign = SERIES_ONLY if record else RECORD_ONLY
    for name, option in foreign.items():
        if name in ctx.params and given(name):
            other = "w-event/w-user/event" if record else "record"
            raise UsageError(f"{option} applies to --unit {other}, not --unit {unit}")
    if not record:
        for name, option in SERIES_REQUIRED.items():
            if ctx.params.get(name) is None:
                raise UsageError(f"missing option {option} (required with --unit {unit})")
    return accounted
WOpt = typer.Option(1, "--w", help="w: number of protected time steps.")
LabelNoiseOpt = typer.Option(0.0, "--label-noise", help="sigma_F: Gaussian noise on forecast windows, in units of --value-bound.")
ContextNoiseOpt = typer.Option(0.0, "--context-noise", help="sigma_C: Gaussian noise on context windows, in units of --value-bound.")
ValueBoundOpt = typer.Option(None, "--value-bound", help="v: largest change of one value under the (w, v) relation.")
DiscretizationOpt = typer.Option(1e-3, "--discretization", help="Privacy-loss grid step of the PLD.")


def _setting(series, length, context_length, forecast_length, batch_size, noise, top, bottom, instances, unit, w,
             label_noise, context_noise, value_bound):
    from tsdp.accounting.structured import DpSgdSetting

    return DpSgdSetting(
        n_series=series, length=length, context=context_length, horizon=forecast_length, batch_size=batch_size,
        noise_multiplier=noise, top=top.value, bottom=bottom.value, instances=instances, unit=unit,
        w=w, label_noise=label_noise, context_noise=context_noise, value_bound=value_bound,
    )


def _describe(setting, derivation) -> dict:
    g = setting.geometry()
    return {
        "theorem": derivation.theorem,
        "bound": "tight" if derivation.tight else derivation.bound,
        "is_privacy_guarantee": derivation.is_guarantee,
        "accounting_unit": derivation.accounting_unit,
        "relation": f"{setting.w}-{setting.unit} level (substitution of one series' values)",
        # T of the paper (windows per series) under a snake_case name, as every --json key
        "geometry": {("windows_per_series" if k == "T" else k): (round(v, 8) if isinstance(v, float) else v)
                     for k, v in g.items()},
    }


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
    unit = _check_unit_options(ctx, unit, w)
    if unit == "record":
        return _record_dpsgd(noise_multiplier, steps, epochs, delta, sampling_rate, batch_size, dataset_size,
                             sampling, relation, discretization, json_summary, quiet)
    from tsdp.accounting import structured as st

    setting = _setting(series, length, context_length, forecast_length, batch_size, noise_multiplier, top, bottom,
                       instances, unit, w, label_noise, context_noise, value_bound)
    result = st.account_dpsgd(setting, delta, steps, epochs, bound.value, discretization, checkpoints,
                              compare_standard)
    console = common.Console(quiet, json_summary, stdout_taken=False)
    for message in result.warnings:
        console.warn(message)
    label = "epsilon" if result.derivation.is_guarantee else "epsilon_lower_bound"
    if not result.derivation.is_guarantee:
        console.warn("--bound lower: the epsilon printed is an optimistic LOWER BOUND, never a privacy guarantee")
    summary = {label: result.epsilon, "delta": delta, "compositions": result.compositions,
               "steps": steps, "epochs": epochs, "noise_multiplier": noise_multiplier,
               **_describe(setting, result.derivation)}
    if result.checkpoints:
        summary["checkpoints"] = [{"compositions": count, "epsilon": eps} for count, eps in result.checkpoints]
    if result.standard_dpsgd_epsilon is not None:
        summary["standard_dpsgd_epsilon"] = result.standard_dpsgd_epsilon
        console.warn("standard_dpsgd_epsilon is the flattened 'standard DP-SGD' figure (Prop. C.1): record level "
                     "only, NOT valid for event-level privacy")
    console.summary(summary, "tsdp account dpsgd")


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
    unit = _check_unit_options(ctx, unit, w)
    if unit == "record":
        return _record_calibrate(epsilon, noise_multiplier, steps, epochs, delta, sampling_rate, batch_size,
                                 dataset_size, sampling, relation, discretization, json_summary, quiet)
    from tsdp.accounting import structured as st

    console = common.Console(quiet, json_summary, stdout_taken=False)
    if noise_multiplier is None:
        if steps is None and epochs is None:
            raise UsageError("give --steps or --epochs to calibrate the noise, or --noise-multiplier to find the training length")
        probe = _setting(series, length, context_length, forecast_length, batch_size, 1.0, top, bottom, instances, unit, w,
                         label_noise, context_noise, value_bound)
        sigma, eps = st.calibrate_noise(probe, epsilon, delta, steps, epochs, discretization)
        setting = _setting(series, length, context_length, forecast_length, batch_size, sigma, top, bottom, instances, unit, w,
                           label_noise, context_noise, value_bound)
        derivation = st.composition_profile(setting)[1]
        summary = {"noise_multiplier": sigma, "epsilon": eps, "target_epsilon": epsilon, "delta": delta,
                   "steps": steps, "epochs": epochs, "compositions": st.compositions(setting, steps, epochs),
                   **_describe(setting, derivation)}
    else:
        if steps is not None or epochs is not None:
            raise UsageError("with --noise-multiplier, leave out --steps/--epochs: they are what is calibrated")
        setting = _setting(series, length, context_length, forecast_length, batch_size, noise_multiplier, top, bottom,
                           instances, unit, w, label_noise, context_noise, value_bound)
        count, eps = st.max_compositions(setting, epsilon, delta, discretization)
        derivation = st.composition_profile(setting)[1]
        what = "steps" if setting.step_level else "epochs"
        summary = {what: count, "epsilon": eps, "target_epsilon": epsilon, "delta": delta,
                   "noise_multiplier": noise_multiplier, **_describe(setting, derivation)}
        if count == 0:
            console.warn(f"even one {derivation.accounting_unit} exceeds epsilon {epsilon:g}")
    for message in setting.warnings():
        console.warn(message)
    console.summary(summary, "tsdp account calibrate dpsgd")


def _record_setting(noise_multiplier, sampling_rate, batch_size, dataset_size, sampling, relation):
    from tsdp.accounting import sgd

    q = sgd.sampling_rate(sampling_rate, batch_size, dataset_size)
    return sgd.SgdSetting(q, noise_multiplier, sampling.value, relation.value)


def _record_description(setting, discretization: float) -> dict:
    from tsdp.accounting import sgd

    return {"unit": setting.relation_text, "sampling": setting.sampling, "sampling_rate": setting.sampling_rate,
            "steps_per_epoch": sgd.steps_per_epoch(setting.sampling_rate), "bound": "upper",
            "is_privacy_guarantee": True, "theorem": setting.theorem, "accountant": sgd.ACCOUNTANT,
            "discretization": discretization}


def _record_dpsgd(noise_multiplier, steps, epochs, delta, sampling_rate, batch_size, dataset_size, sampling,
                  relation, discretization, json_summary, quiet) -> None:
    from tsdp.accounting import sgd

    setting = _record_setting(noise_multiplier, sampling_rate, batch_size, dataset_size, sampling, relation)
    count = sgd.steps_for(steps, epochs, setting.sampling_rate)
    eps = sgd.epsilon(setting, count, delta, discretization)
    summary = {"epsilon": eps, "delta": delta, "steps": count, "epochs": epochs,
               "noise_multiplier": noise_multiplier, **_record_description(setting, discretization)}
    common.Console(quiet, json_summary, stdout_taken=False).summary(summary, "tsdp account dpsgd --unit record")


def _record_calibrate(target_epsilon, noise_multiplier, steps, epochs, delta, sampling_rate, batch_size,
                      dataset_size, sampling, relation, discretization, json_summary, quiet) -> None:
    from tsdp.accounting import sgd

    console = common.Console(quiet, json_summary, stdout_taken=False)
    if noise_multiplier is None:
        if steps is None and epochs is None:
            raise UsageError("give --steps or --epochs to calibrate the noise, or --noise-multiplier to find the "
                             "training length")
        probe = _record_setting(1.0, sampling_rate, batch_size, dataset_size, sampling, relation)
        count = sgd.steps_for(steps, epochs, probe.sampling_rate)
        sigma, eps = sgd.calibrate_noise(probe, target_epsilon, count, delta, discretization)
        setting = _record_setting(sigma, sampling_rate, batch_size, dataset_size, sampling, relation)
        summary = {"noise_multiplier": sigma, "epsilon": eps, "target_epsilon": target_epsilon, "delta": delta,
                   "steps": count, "epochs": epochs}
    else:
        if steps is not None or epochs is not None:
            raise UsageError("with --noise-multiplier, leave out --steps/--epochs: they are what is calibrated")
        setting = _record_setting(noise_multiplier, sampling_rate, batch_size, dataset_size, sampling, relation)
        count, eps = sgd.max_steps(setting, target_epsilon, delta, discretization)
        summary = {"steps": count, "epochs": count // sgd.steps_per_epoch(setting.sampling_rate),
                   "epsilon": eps, "target_epsilon": target_epsilon, "delta": delta,
                   "noise_multiplier": noise_multiplier}
        if count == 0:
            console.warn(f"even one step exceeds epsilon {target_epsilon:g}")
    console.summary({**summary, **_record_description(setting, discretization)},
                    "tsdp account calibrate dpsgd --unit record")


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
    from tsdp.accounting.budget import check_delta
    from tsdp.accounting.claim import PrivacyClaim
    from tsdp.accounting.compose import check_composable, compose_claims
    from tsdp.accounting.verify import claim_checks
    from tsdp.errors import BudgetError, DataError
    from tsdp.report import load_report

    if delta is not None:
        check_delta(delta)
    documents = [load_report(path) for path in reports]  # not a report: exit 4
    try:
        claims = [PrivacyClaim.from_dict(d["claim"]) for d in documents]
    except (TypeError, ValueError, OverflowError) as exc:
        raise DataError(f"REPORT: a claim cannot be read ({exc})") from None
    check_composable(claims)  # LIP or lower bounds: exit 2; different units: exit 3
    for path, document in zip(reports, documents):
        failed = [c for c in claim_checks(document) if not c.passed]
        if failed:
            raise BudgetError(f"{path!r} does not verify, so its claim cannot be composed: {failed[0].name}: "
                              f"{failed[0].detail} (see 'tsdp account verify {path}')")
    result = compose_claims(claims, delta, discretization)
    console = common.Console(quiet, json_summary, stdout_taken=False)
    for message in result.warnings:
        console.warn(message)
    console.summary({"epsilon": result.epsilon, "delta": result.delta, "method": result.method,
                     "reports": len(reports), "basic_composition_epsilon": result.basic_epsilon,
                     "pld_composition_epsilon": result.tight_epsilon, "unit": result.unit},
                    "tsdp account compose")


@app.command("verify", cls=VocabularyCommand)
def verify(
    reports: list[str] = typer.Argument(..., help="tsdp report files (JSON); every one must pass."),
    max_epsilon: Optional[float] = typer.Option(None, "--max-epsilon", help="Fail if a claim's epsilon exceeds this (a finite number >= 0)."),
    max_delta: Optional[float] = typer.Option(None, "--max-delta", help="Fail if a claim's delta exceeds this (in [0, 1])."),
    released: Optional[list[str]] = typer.Option(None, "--released", metavar="FILE", help="Released file (an input) whose sha256 must match the report; once per report, in order [default: the file the report names, when it sits next to the report]."),
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
    to it; otherwise that check says 'not checked'). It does NOT prove who wrote the report (a
    report edited consistently everywhere passes), that the file was made with the stated noise,
    anything about the data, or that declared bounds held for pre-aggregated input.

    Exit 4 for a file that is not a strict JSON report (NaN, Infinity, duplicate keys, too deep),
    2 for a meaningless threshold.
    """
    from pathlib import Path

    from tsdp.accounting.verify import check_thresholds, verify_report
    from tsdp.errors import BudgetError
    from tsdp.io.files import sha256_file
    from tsdp.report import load_report

    check_thresholds(max_epsilon, max_delta)
    if released and len(released) != len(reports):
        raise UsageError(f"--released was given {len(released)} times for {len(reports)} reports: give it once per "
                         "report, in the same order, or leave it out to check the files next to the reports")
    documents = [load_report(path) for path in reports]  # missing: exit 2; not a report: exit 4
    results = []
    for i, (path, data) in enumerate(zip(reports, documents)):
        digest, note = None, None
        if released:
            if not Path(released[i]).is_file():
                raise UsageError(f"--released: file {released[i]!r} does not exist")
            digest = sha256_file(released[i])
        else:
            named = str((data.get("output") or {}).get("file", ""))
            beside = Path(path).parent / named
            if named in ("", ".", "..", "<stdout>") or Path(named).name != named:
                note = f"the report names {named!r}, not a file next to it; pass --released"
            elif beside.is_file():
                digest = sha256_file(beside)
            else:
                note = f"{named!r} is not next to the report; pass --released to check the released file"
        results.append((path, verify_report(data, max_epsilon, max_delta, digest, note)))

    passed = all(r.passed for _, r in results)
    console = common.Console(quiet, json_summary, stdout_taken=False)
    if json_summary:
        print(console.json_document({"passed": passed, "reports": [r.to_dict(path) for path, r in results]},
                                    "tsdp account verify"))
    else:
        for path, r in results:
            console.summary({c.name: ("ok: " if c.passed else "FAILED: ") + c.detail for c in r.checks},
                            f"tsdp account verify {path}: {'passed' if r.passed else 'FAILED'}")
    failing = [(path, r) for path, r in results if not r.passed]
    if failing:
        path, r = failing[0]
        first = r.failures[0]
        more = len(r.failures) - 1
        others = f"; {len(failing) - 1} other report(s) failed too" if len(failing) > 1 else ""
        raise BudgetError(f"verification of {path!r} failed: {first.name}: {first.detail}"
                          + (f" (and {more} more failed check(s))" if more else "") + others)

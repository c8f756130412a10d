"""``tsdp account``: privacy accounting from the command line (thin: parse, call accounting, print)."""

from __future__ import annotations

from enum import Enum
from typing import Optional

import typer

from tsdp.cli import common
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


SeriesOpt = typer.Option(..., "--series", help="N: number of series in the training set.")
LengthOpt = typer.Option(..., "--length", help="L: length of the shortest training series (worst case).")
ContextOpt = typer.Option(..., "--context", help="L_C: context length, the model's whole receptive field (lags included).")
HorizonOpt = typer.Option(..., "--horizon", help="L_F: forecast length.")
BatchOpt = typer.Option(..., "--batch-size", help="B: windows per batch (lambda windows from each of B/lambda series).")
StepsOpt = typer.Option(None, "--steps", help="Training steps (give this or --epochs).")
EpochsOpt = typer.Option(None, "--epochs", help="Training epochs (steps per epoch = floor(N lambda / B)).")
DeltaOpt = typer.Option(..., "--delta", help="Target delta.")
TopOpt = typer.Option(Top.wor, "--top", help="Top level: series sampled without replacement / Poisson per step, or iterated per epoch.")
BottomOpt = typer.Option(Bottom.wr, "--bottom", help="Bottom level: windows sampled with replacement, or Poisson.")
InstancesOpt = typer.Option(1, "--instances", help="lambda: windows per selected series (1 is optimal, Thm 4.1).")
UnitOpt = typer.Option(Unit.event, "--unit", help="w-event (contiguous steps) or w-user (any steps) protection.")
WOpt = typer.Option(1, "--w", help="w: number of protected time steps.")
LabelNoiseOpt = typer.Option(0.0, "--label-noise", help="sigma_F: Gaussian noise on forecast windows, in units of --value-bound.")
ContextNoiseOpt = typer.Option(0.0, "--context-noise", help="sigma_C: Gaussian noise on context windows, in units of --value-bound.")
ValueBoundOpt = typer.Option(None, "--value-bound", help="v: largest change of one value under the (w, v) relation.")
DiscretizationOpt = typer.Option(1e-3, "--discretization", help="Privacy-loss grid step of the PLD.")


def _setting(series, length, context, horizon, batch_size, noise, top, bottom, instances, unit, w,
             label_noise, context_noise, value_bound):
    from tsdp.accounting.structured import DpSgdSetting

    return DpSgdSetting(
        n_series=series, length=length, context=context, horizon=horizon, batch_size=batch_size,
        noise_multiplier=noise, top=top.value, bottom=bottom.value, instances=instances, unit=unit.value,
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
        "geometry": {k: (round(v, 8) if isinstance(v, float) else v) for k, v in g.items()},
    }


@app.command("dpsgd")
def dpsgd(
    series: int = SeriesOpt, length: int = LengthOpt, context: int = ContextOpt, horizon: int = HorizonOpt,
    batch_size: int = BatchOpt,
    noise_multiplier: float = typer.Option(..., "--noise-multiplier", help="sigma: noise std / clipping norm."),
    steps: Optional[int] = StepsOpt, epochs: Optional[int] = EpochsOpt, delta: float = DeltaOpt,
    top: Top = TopOpt, bottom: Bottom = BottomOpt, instances: int = InstancesOpt, unit: Unit = UnitOpt,
    w: int = WOpt, label_noise: float = LabelNoiseOpt, context_noise: float = ContextNoiseOpt,
    value_bound: Optional[float] = ValueBoundOpt,
    bound: Bound = typer.Option(Bound.upper, "--bound", help="upper: the guarantee; lower: optimistic, never a guarantee."),
    checkpoints: int = typer.Option(0, "--checkpoints", help="Also print epsilon at this many points of training.", min=0),
    compare_standard: bool = typer.Option(False, "--compare-standard", help="Also print the flattened 'standard DP-SGD' epsilon (Prop. C.1; not valid at event level)."),
    discretization: float = DiscretizationOpt,
    json_summary: bool = common.JsonOption, quiet: bool = common.QuietOption,
    config: Optional[str] = common.ConfigOption,
) -> None:
    """Epsilon of DP-SGD training for forecasting with structured subsampling (Schuchardt et al. 2025)."""
    from tsdp.accounting import structured as st

    setting = _setting(series, length, context, horizon, batch_size, noise_multiplier, top, bottom,
                       instances, unit, w, label_noise, context_noise, value_bound)
    result = st.account_dpsgd(setting, delta, steps, epochs, bound.value, discretization, checkpoints,
                              compare_standard)
    console = common.Console(quiet, json_summary, stdout_taken=False)
    for message in result.warnings:
        console.warn(message)
    label = "epsilon" if result.derivation.is_guarantee else "epsilon (LOWER BOUND, not a guarantee)"
    summary = {label: result.epsilon, "delta": delta, "compositions": result.compositions,
               "steps": steps, "epochs": epochs, "noise_multiplier": noise_multiplier,
               **_describe(setting, result.derivation)}
    if result.checkpoints:
        summary["checkpoints"] = {str(count): eps for count, eps in result.checkpoints}
    if result.standard_dpsgd_epsilon is not None:
        summary["standard_dpsgd_epsilon (record level only, NOT valid for event-level privacy)"] = \
            result.standard_dpsgd_epsilon
    console.summary(summary, "tsdp account dpsgd")


@calibrate_app.command("dpsgd")
def calibrate_dpsgd(
    series: int = SeriesOpt, length: int = LengthOpt, context: int = ContextOpt, horizon: int = HorizonOpt,
    batch_size: int = BatchOpt,
    target_epsilon: float = typer.Option(..., "--target-epsilon", help="Epsilon the training may spend."),
    noise_multiplier: Optional[float] = typer.Option(None, "--noise-multiplier", help="Given sigma: find the largest number of steps (or epochs)."),
    steps: Optional[int] = StepsOpt, epochs: Optional[int] = EpochsOpt, delta: float = DeltaOpt,
    top: Top = TopOpt, bottom: Bottom = BottomOpt, instances: int = InstancesOpt, unit: Unit = UnitOpt,
    w: int = WOpt, label_noise: float = LabelNoiseOpt, context_noise: float = ContextNoiseOpt,
    value_bound: Optional[float] = ValueBoundOpt, discretization: float = DiscretizationOpt,
    json_summary: bool = common.JsonOption, quiet: bool = common.QuietOption,
    config: Optional[str] = common.ConfigOption,
) -> None:
    """Noise multiplier for a target epsilon and training length, or the longest training for a noise multiplier."""
    from tsdp.accounting import structured as st

    console = common.Console(quiet, json_summary, stdout_taken=False)
    if noise_multiplier is None:
        if steps is None and epochs is None:
            raise UsageError("give --steps or --epochs to calibrate the noise, or --noise-multiplier to find the training length")
        probe = _setting(series, length, context, horizon, batch_size, 1.0, top, bottom, instances, unit, w,
                         label_noise, context_noise, value_bound)
        sigma, eps = st.calibrate_noise(probe, target_epsilon, delta, steps, epochs, discretization)
        setting = _setting(series, length, context, horizon, batch_size, sigma, top, bottom, instances, unit, w,
                           label_noise, context_noise, value_bound)
        derivation = st.composition_profile(setting)[1]
        summary = {"noise_multiplier": sigma, "epsilon": eps, "target_epsilon": target_epsilon, "delta": delta,
                   "steps": steps, "epochs": epochs, "compositions": st.compositions(setting, steps, epochs),
                   **_describe(setting, derivation)}
    else:
        if steps is not None or epochs is not None:
            raise UsageError("with --noise-multiplier, leave out --steps/--epochs: they are what is calibrated")
        setting = _setting(series, length, context, horizon, batch_size, noise_multiplier, top, bottom,
                           instances, unit, w, label_noise, context_noise, value_bound)
        count, eps = st.max_compositions(setting, target_epsilon, delta, discretization)
        derivation = st.composition_profile(setting)[1]
        what = "max_steps" if setting.step_level else "max_epochs"
        summary = {what: count, "epsilon": eps, "target_epsilon": target_epsilon, "delta": delta,
                   "noise_multiplier": noise_multiplier, **_describe(setting, derivation)}
        if count == 0:
            console.warn(f"even one {derivation.accounting_unit} exceeds epsilon {target_epsilon:g}")
    for message in setting.warnings():
        console.warn(message)
    console.summary(summary, "tsdp account calibrate dpsgd")


@app.command("compose")
def compose(
    reports: list[str] = typer.Argument(..., help="tsdp report files (JSON) of releases about the same people."),
    delta: Optional[float] = typer.Option(None, "--delta", help="Total delta to read epsilon at [default: sum of the reports' deltas]."),
    discretization: float = DiscretizationOpt,
    json_summary: bool = common.JsonOption, quiet: bool = common.QuietOption,
    config: Optional[str] = common.ConfigOption,
) -> None:
    """Compose the privacy claims of several reports: tightly through their mechanism events where
    every report has them, otherwise by basic composition; says which."""
    from tsdp.accounting.budget import check_delta
    from tsdp.accounting.claim import PrivacyClaim
    from tsdp.accounting.compose import compose_claims
    from tsdp.report import load_report

    if delta is not None:
        check_delta(delta)
    claims = [PrivacyClaim.from_dict(load_report(path)["claim"]) for path in reports]
    result = compose_claims(claims, delta, discretization)
    console = common.Console(quiet, json_summary, stdout_taken=False)
    for message in result.warnings:
        console.warn(message)
    console.summary({"epsilon": result.epsilon, "delta": result.delta, "method": result.method,
                     "reports": len(reports), "basic_composition_epsilon": result.basic_epsilon,
                     "pld_composition_epsilon": result.tight_epsilon}, "tsdp account compose")


@app.command("verify")
def verify(
    report: str = typer.Argument(..., help="tsdp report file (JSON)."),
    max_epsilon: Optional[float] = typer.Option(None, "--max-epsilon", help="Fail if the claim's epsilon exceeds this."),
    max_delta: Optional[float] = typer.Option(None, "--max-delta", help="Fail if the claim's delta exceeds this."),
    output: Optional[str] = typer.Option(None, "--output", help="Released file whose sha256 must match the report."),
    json_summary: bool = common.JsonOption, quiet: bool = common.QuietOption,
    config: Optional[str] = common.ConfigOption,
) -> None:
    """Check a report for CI: well formed, an upper bound backed by its events, within the budget,
    and (with --output) about exactly this file. Exit 0 when every check passes, 3 otherwise."""
    from tsdp.accounting.claim import PrivacyClaim
    from tsdp.accounting.compose import claim_backed_by_events, within_budget
    from tsdp.errors import BudgetError
    from tsdp.io.files import sha256_file
    from tsdp.report import load_report

    data = load_report(report)  # schema errors: exit 4
    claim = PrivacyClaim.from_dict(data["claim"])
    checks = [("schema", True, f"valid {data['schema']} report from tsdp {data['tool']['version']}")]
    if claim.definition == "lip":
        checks.append(("definition", True, "LIP (FLIP), NOT differential privacy: LIP >= 1 - "
                       f"{claim.parameters.get('lip_budget_delta')} under the estimated model; no epsilon"))
    else:
        checks.append(("upper bound", claim.bound == "upper",
                       "the claim is an upper bound" if claim.bound == "upper" else "the claim is a LOWER bound"))
    backed, note = claim_backed_by_events(claim)
    checks.append(("backed by events", backed, note))
    problems = within_budget(claim, max_epsilon, max_delta)
    checks.append(("budget", not problems, "; ".join(problems) or "within the given budget"))
    if data["randomness"] == "seeded":
        checks.append(("randomness", False, "the release used a fixed --seed and must not be published"))
    if output is not None:
        from pathlib import Path

        if not Path(output).is_file():
            raise UsageError(f"--output: file {output!r} does not exist")
        digest = sha256_file(output)
        checks.append(("output sha256", digest == data["output"]["sha256"],
                       "matches" if digest == data["output"]["sha256"] else
                       f"file has {digest[:16]}..., report says {data['output']['sha256'][:16]}..."))
    console = common.Console(quiet, json_summary, stdout_taken=False)
    console.summary({name: ("ok: " if ok else "FAILED: ") + note for name, ok, note in checks},
                    f"tsdp account verify {report}")
    failed = [f"{name}: {note}" for name, ok, note in checks if not ok]
    if failed:
        raise BudgetError(f"verification of {report!r} failed: {failed[0]}"
                          + (f" (and {len(failed) - 1} more)" if len(failed) > 1 else ""))

"""What the report and the model file of ``tsdp forecast-train`` say of a training run: its notes,
caveats and training summary, from public parameters only (used by :mod:`tsdp.api.forecast`)."""

from __future__ import annotations

from typing import Any

from tsdp.caveats import Caveat
from tsdp.forecast.claim import unaccounted

DEEP = ("deepar", "itransformer")  # the JAX models (extra tsdp[deep])
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


GAPS_NOTE = ("--fill-missing null: {count} step(s) of the input are missing; no training window touches one (nothing is "
             "imputed), and the accountant is given the fewest admissible windows of a series, T = {windows} (length "
             "{length}), as for the shortest series (Schuchardt et al. 2025, App. I.1: the WR bounds grow with "
             "min(k, T) / T). The pattern of missing steps is treated as public and the same in neighbouring "
             "datasets: the guarantee covers the values present, not which steps are missing")


def gap_notes(split, table) -> list[str]:
    if split.admissible is None:
        return []
    return [GAPS_NOTE.format(count=table.filled_cells, windows=int(split.admissible.sum(axis=1).min()),
                             length=split.accounted_length)]


def training_summary(config, plan, result, n_series, split, seasons, net, default_batch: bool) -> dict[str, Any]:
    return {"model": config.model, "steps": result.steps, "compositions": result.compositions,
            "stopped_by": plan.stopped_by, "noise_multiplier": plan.noise_multiplier, "clip_norm": config.clip_norm,
            "batch_size": config.batch_size, "batch_size_rule": BATCH_RULE if default_batch else "given",
            "lr": config.lr, "weight_decay": config.weight_decay,
            "context": config.context, "horizon": config.horizon, "series": n_series,
            "train_length": split.train.shape[1], "checkpoint": config.checkpoint,
            "test_windows": len(split.test_origins), "season": seasons["headline"],
            "baseline_seasons": list(seasons["baselines"]), **engine_description(net)}


def model_inputs(net) -> dict[str, Any]:
    """What the model reads (public): DeepAR's lags, time features and output distribution."""
    out: dict[str, Any] = {"model_context": net.context, "nonnegative": bool(getattr(net, "nonnegative", False))}
    if net.name == "deepar":
        out.update(lags=list(net.lags), time_features=list(net.time_features), distribution=net.distribution)
    return out


def engine_description(net) -> dict[str, Any]:
    """How the model computed: numpy float64, or JAX with its precision and device (public)."""
    if net.name not in DEEP:
        return {"engine": "numpy", "dtype": "float64", **model_inputs(net)}
    out = {"engine": "jax", "dtype": net.dtype, "device": net.device.platform, **model_inputs(net)}
    if net.name == "deepar":
        out.update(receptive_field=net.receptive_field)
    return out


def notes(config, plan, result, net, split, seasons, default_batch: bool, training_plan) -> list[str]:
    notes = [
        f"(epsilon, delta) = ({result.epsilon:.6g}, {config.delta:g}) after {result.compositions} "
        f"{plan.derivation.accounting_unit}-level compositions, by {plan.derivation.theorem}; the same as "
        "'tsdp account dpsgd' for this setting and count",
        FORECAST_NOTE,
        "not privacy-accounted, as in the paper: " + "; ".join(unaccounted(config.checkpoint)),
        "the guarantee covers every intermediate model; the released weights are "
        + ("the last iterate, chosen without looking at the data (no early stopping: a validation-based choice of "
           "the step is a data-dependent selection the accountant does not cover)"
           if config.checkpoint == "last" else "NOT covered: " + BEST_CHECKPOINT_CAVEAT),
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
    engine = engine_description(net)
    if engine["engine"] == "jax":
        notes.append(f"the model computed in {engine['dtype']} with JAX on {engine['device']}; per-window gradients "
                     "were computed by JAX and clipped in float64 on the host (tsdp.forecast.deep.ghost), and the noise "
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


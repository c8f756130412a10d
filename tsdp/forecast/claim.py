"""The privacy claim of a DP-SGD forecasting run (Schuchardt et al. 2025), built from public figures.

The unit is the (w, v) substitution relation of the paper: the datasets differ in up to w values of
one series (contiguous for ``event``/``w-event``, anywhere for ``user``), by any amount, or by at most
``value_bound`` when one is given (``max_per_step`` is then v, else ``None``). Epsilon is the
accountant's figure for the compositions taken (:mod:`tsdp.accounting.structured`). The guarantee
covers every iterate; the released weights are covered when they are the last iterate, not when they
were chosen by a private validation loss (``checkpoint="best-validation"``).
"""

from __future__ import annotations

from tsdp.accounting.claim import PrivacyClaim
from tsdp.accounting.sensitivity import PrivacyUnit

MECHANISM = "DP-SGD with structured subsampling (Schuchardt et al. 2025)"
UNACCOUNTED = [
    "hyper-parameter choices (clipping norm, noise multiplier, batch size, context length, learning rate)",
]
CHECKPOINT_UNACCOUNTED = "the choice of the released checkpoint by validation loss on the same private series"


def unaccounted(checkpoint: str) -> list[str]:
    """What the claim does not account for, given how the released weights were chosen."""
    return list(UNACCOUNTED) if checkpoint == "last" else [*UNACCOUNTED, CHECKPOINT_UNACCOUNTED]


def dpsgd_claim(config, plan, result) -> PrivacyClaim:
    """The claim of a finished run: ``config`` a :class:`tsdp.forecast.trainer.TrainConfig`, ``plan``
    its :class:`~tsdp.forecast.trainer.Plan`, ``result`` the :class:`~tsdp.forecast.trainer.TrainResult`."""
    setting = plan.setting
    level = "user" if config.unit == "user" else ("w-event" if config.w > 1 else "event")
    return PrivacyClaim(
        definition="approx-dp",
        unit=PrivacyUnit(level=level, relation="substitute", neighbouring=neighbouring(level, config.w,
                                                                                        config.value_bound),
                         max_per_step=config.value_bound, w=config.w),
        epsilon=result.epsilon, delta=config.delta,
        mechanism=MECHANISM,
        theorem=plan.derivation.theorem,
        parameters={**{k: (round(v, 10) if isinstance(v, float) else v) for k, v in setting.geometry().items()},
                    "noise_multiplier": plan.noise_multiplier, "clip_norm": config.clip_norm,
                    "compositions": result.compositions, "accounting_unit": plan.derivation.accounting_unit,
                    "steps": result.steps, "stopped_by": plan.stopped_by, "top": config.top, "bottom": config.bottom,
                    "instances": config.instances, "batch_size": config.batch_size, "series": setting.n_series,
                    "train_length": setting.length, "context": config.context, "horizon": config.horizon,
                    "discretization": config.discretization, "unaccounted": unaccounted(config.checkpoint),
                    "checkpoint": config.checkpoint,
                    "guarantee_covers_released_weights": config.checkpoint == "last",
                    **sampler_parameters(setting, result.compositions)},
    )


def neighbouring(level: str, w: int, value_bound: float | None) -> str:
    """The (w, v) substitution relation in words, as the claim states it and ``tsdp account verify``
    recomputes it: ``level`` event, w-event or user (any ``w`` values of one series)."""
    relation = {"event": "one value of one series", "w-event": f"up to {w} contiguous values of one series",
                "user": f"up to {w} values (anywhere) of one series"}[level]
    return (f"substitution: the datasets differ in {relation}, "
            + (f"by at most {value_bound:g} per value" if value_bound else "by any amount")
            + "; the set of series and their lengths are public")


def sampler_parameters(setting, compositions: int) -> dict:
    """The report's statement of the noise sampler: the hardened lattice and what it cost
    (:mod:`tsdp.accounting.dpsgd_lattice`), or ``sampler: float`` (--sampler float)."""
    lattice = setting.lattice
    if lattice is None:
        return {"sampler": "float"}
    from tsdp.accounting.dpsgd_lattice import input_granularity

    slack, shift = setting.lattice_cost(compositions)
    out = {"sampler": "hardened", "granularity": lattice.granularity, "parameters": lattice.parameters,
           "rounded_clip_norm": lattice.rounded_clip, "accounted_noise_multiplier": lattice.accounted_multiplier,
           "rounding_slack": slack, "epsilon_shift": shift}
    for name, noise in (("label", setting.label_noise), ("context", setting.context_noise)):
        if noise > 0:
            out[f"{name}_granularity"] = input_granularity(noise, setting.value_bound)
    return out

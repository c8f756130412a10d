"""``--max-norm``: each user's cell totals scaled to an L2 norm C, for the Gaussian release of raw
events (:mod:`tsdp.engine.events` rule 4, :mod:`tsdp.accounting.sensitivity`), and the public constants
of choosing C privately (``--max-norm auto``, :class:`tsdp.mechanisms.bounds.Balance`)."""

from __future__ import annotations

from typing import Any

from tsdp.accounting.budget import check_delta, check_epsilon
from tsdp.api.options import choice
from tsdp.errors import UsageError
from tsdp.io.load import InputSpec
from tsdp.limits import MAX_MAGNITUDE


def auto_option(auto: tuple[str, ...]) -> str:
    """The first option given as auto, as on the command line (for messages)."""
    return "--" + auto[0].replace("_", "-")


def check_norm_options(options: Any, mechanism: Any, unit: str, noise: str) -> None:
    """UsageError unless the --max-norm of ``options`` (:class:`tsdp.api.series.ReleaseOptions`) applies:
    raw events, --unit user, a mechanism whose noise is calibrated to the L2 sensitivity alone
    (``norm_bounded``: the Gaussian mechanism, Gaussian noise)."""
    norm = options.max_norm
    if not 0 < norm <= MAX_MAGNITUDE:  # (a number: cap_value parsed it; NaN fails the comparison)
        raise UsageError(f"--max-norm must be positive and at most 2**53, got {norm!r}")
    layout = InputSpec(layout=getattr(options.layout, "value", options.layout), value_col=options.value_col,
                       user_col=options.user_col).resolved_layout
    if layout != "events":
        raise UsageError(f"--max-norm {options.max_norm!r} needs raw events (--layout events, --user-col): tsdp "
                         "enforces the norm only where it aggregates the events itself")
    if not mechanism.norm_bounded or mechanism.pure(noise):
        raise UsageError(f"--max-norm bounds the L2 sensitivity: it applies to --mechanism gaussian with Gaussian "
                         f"noise, not --mechanism {mechanism.name}" + (f" with --noise {noise}" if noise else ""))
    if unit != "user":
        raise UsageError(f"--max-norm bounds everything one user contributes: it applies to --unit user, not {unit}")


def balance_of(plan: Any):
    """The public constants of --max-norm auto's score for ``plan`` (a placeholder
    :class:`tsdp.api.series.ReleasePlan` with auto caps): the release's share of epsilon, its delta and
    relation, the declared grid and keys, the fixed caps."""
    from tsdp.engine.panel import ALL_STEPS
    from tsdp.mechanisms.bounds import Balance

    a, declared = plan.auto, plan.declared
    n_series = len(plan.spec.series_keys) if plan.spec.series_keys else 1
    fixed_steps = None if declared.max_steps == ALL_STEPS or "max_steps" in a.caps else declared.max_steps
    return Balance.for_release(a.split.release_epsilon, a.options.delta,
                               declared.neighbouring == "substitute", n_series, plan.n_steps(),
                               declared.series_per_unit, fixed_steps)


def selection_budget(options: Any, auto: tuple[str, ...]):
    """(share, quantile, exact) of a release whose caps ``auto`` are chosen privately:
    --bound-selection-share and --bound-quantile checked (UsageError naming them), --epsilon and --delta
    checked, and whether the release may compose exactly with the selections (a Gaussian release,
    :func:`tsdp.mechanisms.bounds.composes_exactly`)."""
    from tsdp.mechanisms import bounds
    from tsdp.mechanisms.registry import MECHANISMS, NAMES

    mechanism = MECHANISMS[choice("mechanism", options.mechanism, NAMES)]
    exact = bounds.composes_exactly(mechanism, choice("noise", options.noise, ("gaussian", "laplace")))
    share = bounds.default_share(auto, exact) if options.bound_selection_share is None else options.bound_selection_share
    if isinstance(share, bool) or not isinstance(share, (int, float)) or not 0.0 < share < 1.0:
        raise UsageError(f"--bound-selection-share must be in (0, 1), got {share!r}")
    try:
        quantile = bounds.quantile_fraction(bounds.DEFAULT_QUANTILE if options.bound_quantile is None
                                            else options.bound_quantile)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    check_epsilon(options.epsilon)
    if options.delta is not None:
        check_delta(options.delta)
    return share, quantile, exact


def selection_split(options: Any, share: float, caps: int, exact: bool, plan: Any):
    """The :class:`tsdp.mechanisms.bounds.Split` of --epsilon between ``caps`` selections and the release
    of ``plan`` (a placeholder :class:`tsdp.api.series.ReleasePlan`: its sampler and public grid bound the
    rounding slack for every cap, :func:`tsdp.mechanisms.bounds.lattice_slack_share`)."""
    from tsdp.mechanisms import bounds

    n_series = len(plan.spec.series_keys) if plan.spec.series_keys else 1
    return bounds.Split.for_release(options.epsilon, options.delta, share, caps, exact, plan.sampler.hardened,
                                    options.granularity, n_series * plan.n_steps())

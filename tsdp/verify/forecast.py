"""The rule of ``tsdp forecast-train``: DP-SGD, recomputed with :mod:`tsdp.accounting.structured`."""

from __future__ import annotations

from typing import Any

from tsdp.accounting.grid import MIN_DPSGD_DISCRETIZATION
from tsdp.accounting.sensitivity import UNIT_LEVELS
from tsdp.errors import NumericalError, TsdpError
from tsdp.verify.parts import _close, _command_name, _expect_events, _is_int, _is_real, _Outcome, _Report


def _dpsgd(r: _Report, out: _Outcome) -> None:
    from tsdp.accounting import structured as st
    from tsdp.accounting.pld import pld_from_profile

    out.definition = "approx-dp"
    unit, p, g = out.group("unit"), out.group("parameters"), out.group("privacy_loss")
    u, prm = r.claim.unit, r.params
    cmd = r.command
    w = u.w
    unit.equal("relation", u.relation, "substitute")
    unit.equal("enforced (forecast-train states its unit as declared, never as enforced)", u.enforced, False)
    for bound in ("id_column", "max_steps", "series_per_unit"):  # the (w, v) relation has none of them
        unit.equal(bound, getattr(u, bound), None)
    if not unit.expect(_is_int(w) and w >= 1, f"w is {w!r}, not an integer >= 1"):
        return
    whole_user = getattr(UNIT_LEVELS.get(u.level), "whole_user", False)  # DP-SGD's w-user unit, else w-event
    want_level = "user" if whole_user else ("w-event" if w > 1 else "event")
    unit.equal("level", u.level, want_level)
    value_bound = cmd.get("value_bound")
    if value_bound is None:
        unit.expect(u.max_per_step is None, f"max_per_step is {u.max_per_step!r}, but without --value-bound a "
                                            "value may change by any amount (it must be null)")
    else:
        unit.same("max_per_step (--value-bound)", u.max_per_step, value_bound)
    if not unit.problems:  # the relation in words: what compose and the ledger compare units by
        from tsdp.forecast.claim import neighbouring

        unit.equal("neighbouring (the relation the level, w and --value-bound give)", u.neighbouring,
                   neighbouring(u.level, w, value_bound))
    if not unit.problems:
        unit.ok(f"{u.neighbouring}")
    setting = st.DpSgdSetting(
        n_series=prm.get("series"), length=prm.get("train_length"), context=prm.get("context"),
        horizon=prm.get("horizon"), batch_size=prm.get("batch_size"), noise_multiplier=prm.get("noise_multiplier"),
        top=prm.get("top"), bottom=prm.get("bottom"), instances=prm.get("instances"),
        unit="user" if whole_user else "event", w=w, label_noise=cmd.get("label_noise") or 0.0,
        context_noise=cmd.get("context_noise") or 0.0, value_bound=value_bound,
        **_dpsgd_sampler(prm, out.group("parameters")))
    _expect_events(r, out, (), "DP-SGD is accounted from its parameters")
    c = _command_name(r, out, "forecast-train")
    window = _receptive_field(cmd, r.grid)
    if window is not None:
        c.equal("parameters.context (--context-length, plus DeepAR's largest lag minus 1)", prm.get("context"), window)
    for option, key in (("--forecast-length", "horizon"), ("--batch-size", "batch_size"),
                        ("--instances", "instances"), ("--top", "top"), ("--bottom", "bottom"),
                        ("--clip-norm", "clip_norm"), ("--noise-multiplier", "noise_multiplier"),
                        ("--discretization", "discretization"), ("--checkpoint", "checkpoint")):
        c.equal(f"parameters.{key} ({option})", prm.get(key), cmd.get(option[2:].replace("-", "_")))
    # --unit as recorded: w-event/w-user/event, or event/user in reports of versions before the renaming
    recorded = {"w-user": "user", "w-event": "event"}.get(cmd.get("unit"), cmd.get("unit"))
    c.equal("unit.level (--unit)", "user" if whole_user else "event", recorded)
    c.equal("unit.w (--w)", w, cmd.get("w"))
    c.same("claim delta (--delta)", r.claim.delta, cmd.get("delta"))
    _dpsgd_length(c, cmd, setting, prm, r.claim.delta)
    if not c.problems:
        c.ok("the claim is the one the recorded command line asks for")
    p.equal("grid.series", r.grid.get("series"), setting.n_series)
    p.equal("grid.train_length", r.grid.get("train_length"), setting.length)
    geometry = {k: (round(v, 10) if isinstance(v, float) else v) for k, v in setting.geometry().items()}
    stated = {k: prm.get(k) for k in geometry}
    extra = sorted(k for k in ("r_poisson", "tau_label", "tau_context") if k in prm and k not in geometry)
    p.expect(stated == geometry and not extra, "the stated geometry (T, k, r, rho, q, ...) is not the one the "
                                               f"setting gives: {_dict_diff(stated, geometry) or extra}")
    steps, count = prm.get("steps"), prm.get("compositions")
    if not p.expect(_is_int(steps) and steps >= 1, f"parameters.steps is {steps!r}"):
        return
    p.equal("parameters.compositions", count, st.compositions(setting, steps=steps))
    profile, derivation = st.composition_profile(setting, "upper")
    p.equal("parameters.accounting_unit", prm.get("accounting_unit"), derivation.accounting_unit)
    p.equal("theorem", r.claim.theorem, derivation.theorem)
    covered = prm.get("checkpoint") == "last" and prm.get("guarantee_covers_released_weights") is True
    g.expect(covered, f"the released weights are checkpoint {prm.get('checkpoint')!r}, chosen on the private series: "
                      "the DP-SGD guarantee does not cover them (only the last iterate is covered)")
    discretization = prm.get("discretization")
    if not g.expect(_is_real(discretization) and MIN_DPSGD_DISCRETIZATION <= discretization <= 1,
                    f"parameters.discretization {discretization!r} is outside [{MIN_DPSGD_DISCRETIZATION:g}, 1]"):
        return
    delta = r.claim.delta
    if not g.expect(_is_real(delta) and 0 < delta < 1, f"claim delta {delta!r} is not in (0, 1)"):
        return
    if not _is_int(count) or count < 1 or p.problems:
        g.fail("epsilon is not recomputed: the parameters are inconsistent (see parameters)")
        return
    lattice = setting.lattice
    if lattice is not None:
        rebuilt = _model_parameter_count(cmd, r.grid)
        if rebuilt is not None:
            p.equal(f"parameters.parameters (the parameter count of --model {cmd.get('model')} at the recorded "
                    "context and forecast lengths)", prm.get("parameters"), rebuilt)
        slack, shift = setting.lattice_cost(count)
        p.same("parameters.granularity", prm.get("granularity"), lattice.granularity)
        p.same("parameters.rounded_clip_norm", prm.get("rounded_clip_norm"), lattice.rounded_clip)
        p.same("parameters.accounted_noise_multiplier", prm.get("accounted_noise_multiplier"),
               lattice.accounted_multiplier)
        p.same("parameters.rounding_slack", prm.get("rounding_slack"), slack)
        p.same("parameters.epsilon_shift", prm.get("epsilon_shift"), shift)
        if p.problems:
            g.fail("epsilon is not recomputed: the parameters are inconsistent (see parameters)")
            return
    try:
        epsilon = st.epsilon_of(setting, pld_from_profile(profile, discretization), count, delta)
    except NumericalError as exc:
        g.fail(str(exc))
        return
    # the trainer reports exactly this figure (tsdp.forecast.trainer): it must be reproduced, not just bounded,
    # so that no parameter (noise multiplier, steps) can be edited alone
    if g.expect(_close(r.claim.epsilon, epsilon, 1e-6),
                f"{derivation.theorem} gives epsilon {epsilon:.6g} after {count} {derivation.accounting_unit}s at "
                f"delta {delta:g} with noise multiplier {setting.noise_multiplier:g}, not the claimed "
                f"{r.claim.epsilon:g}"):
        g.ok(f"{count} {derivation.accounting_unit}s at noise multiplier {setting.noise_multiplier:g} give epsilon "
             f"{epsilon:.6g} at delta {delta:g} ({derivation.theorem}; as tsdp account dpsgd)")


def _dpsgd_length(c, cmd: dict, setting, prm: dict, delta) -> None:
    """The training length the recorded command asked for, as forecast-train plans it: --steps or --epochs,
    cut short only where the --epsilon budget binds (the accountant's largest count), and without either
    the budget's count up to the step cap. Without this check, claim.parameters.steps and compositions
    could be lowered together with the epsilon (and the lattice's slack and shift) they give."""
    from tsdp.accounting import structured as st
    from tsdp.forecast.trainer import STEP_CAP

    steps, count, stopped = prm.get("steps"), prm.get("compositions"), prm.get("stopped_by")
    if not (_is_int(steps) and _is_int(count) and steps >= 1 and count >= 1):
        return  # reported by the parameters group
    want_steps, want_epochs, budget = cmd.get("steps"), cmd.get("epochs"), cmd.get("epsilon")
    try:
        requested = (st.compositions(setting, steps=want_steps) if want_steps is not None else
                     st.compositions(setting, epochs=want_epochs) if want_epochs is not None else None)
    except TsdpError as exc:
        c.fail(f"--steps {want_steps!r} / --epochs {want_epochs!r}: {exc}")
        return
    if stopped == "budget":
        if not c.expect(_is_real(budget), "stopped_by is 'budget', but the recorded command has no --epsilon"):
            return
        try:
            allowed, _ = st.max_compositions(setting, budget, delta, prm.get("discretization"))
        except TsdpError as exc:
            c.fail(f"--epsilon {budget!r}: {exc}")
            return
        c.equal("parameters.compositions (the most the --epsilon budget allows)", count, allowed)
        c.expect(requested is None or allowed < requested,
                 f"stopped_by is 'budget', but the budget allows the {requested} compositions asked for")
    elif stopped in ("steps", "epochs"):
        cap = STEP_CAP if setting.step_level else max(1, STEP_CAP // setting.steps_per_epoch)
        c.equal("parameters.compositions (--steps/--epochs, or the step cap without them)", count,
                cap if requested is None else requested)
    else:
        c.fail(f"parameters.stopped_by is {stopped!r}, not budget, steps or epochs")
    expected_steps = setting.noise_draws(count)
    if not setting.step_level and _is_int(want_steps):
        expected_steps = min(expected_steps, want_steps)
    c.equal("parameters.steps (the steps of those compositions)", steps, expected_steps)


def _dpsgd_sampler(prm: dict, group) -> dict:
    """The DpSgdSetting fields of a report's sampler: the hardened lattice needs the parameter count and
    the clipping norm; float (explicit --sampler float, or a report older than the hardened DP-SGD)
    is the continuous accounting."""
    if prm.get("sampler") != "hardened":
        return {}
    count, clip = prm.get("parameters"), prm.get("clip_norm")
    if not (_is_int(count) and count >= 1 and _is_real(clip) and clip > 0):
        group.fail(f"a hardened report must state parameters (got {count!r}) and clip_norm (got {clip!r})")
        return {}
    return {"sampler": "hardened", "parameters": count, "clip_norm": clip}


def _grid_step(grid: dict) -> tuple[int | None, int | None]:
    """(step in microseconds, step in months) of a report's grid; (None, None) for integer time."""
    from tsdp.io.timegrid import parse_freq

    freq = grid.get("freq")
    if freq is None or str(freq).strip().isdigit():
        return None, None
    step = parse_freq(freq, False)
    return (step.amount, None) if step.unit == "us" else (None, step.amount)


def _deepar_lags(cmd: dict, grid: dict) -> tuple[int, ...]:
    """DeepAR's lags as the run chose them: its --lags, or GluonTS's defaults for the grid's step up to
    4 x --context-length (reports without ``test_windows``, from before issue 31, took all of them)."""
    from tsdp.forecast.timefeatures import default_lags, parse_lags

    if cmd.get("lags") is not None:
        return parse_lags(cmd["lags"])
    bounded = "test_windows" in cmd and _is_int(cmd.get("context_length"))
    return default_lags(*_grid_step(grid), context=cmd["context_length"] if bounded else None)


def _receptive_field(cmd: dict, grid: dict) -> int | None:
    """The L_C a forecast-train run accounted: --context-length, plus for DeepAR its largest lag minus 1.
    None when the recorded command does not say (the command check then reports it)."""
    context = cmd.get("context_length")
    if cmd.get("model") != "deepar" or not _is_int(context):
        return context
    try:
        return context + max(_deepar_lags(cmd, grid)) - 1
    except TsdpError:
        return None


def _model_parameter_count(cmd: dict, grid: dict) -> int | None:
    """The parameter count of the recorded model, rebuilt from the command (the hardened lattice's cost
    depends on it): the numpy models always, the JAX models when the deep extra is installed (DeepAR
    with its lags and the grid step's time features). None when it cannot be rebuilt: the report's
    figure is then used, like every figure a consistent edit could change."""
    from tsdp.forecast.models import DEEP_MODELS, make_model

    name, context, horizon = cmd.get("model"), cmd.get("context_length"), cmd.get("forecast_length")
    if not (isinstance(name, str) and _is_int(context) and _is_int(horizon)):
        return None
    try:
        options: dict[str, Any] = {}
        if name in DEEP_MODELS:
            from tsdp.forecast.deep import missing_extra

            if missing_extra() is not None:
                return None
            if name == "deepar":
                from tsdp.forecast.timefeatures import default_time_features

                step_us, step_months = _grid_step(grid)
                features = default_time_features(step_us, step_months) if (step_us or step_months) else ()
                options = {"lags": _deepar_lags(cmd, grid), "time_features": features,
                           "distribution": cmd.get("distribution") or "studentt"}
        return int(make_model(name, context, horizon, **options).n_params)
    except (TsdpError, ValueError, TypeError):
        return None


def _dict_diff(a: dict, b: dict) -> str:
    return ", ".join(f"{k} {a.get(k)!r} vs {b.get(k)!r}" for k in b if a.get(k) != b.get(k))

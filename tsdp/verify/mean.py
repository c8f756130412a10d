"""The rule of ``tsdp mean-estimate``: user-level means, basic composition over the groups."""

from __future__ import annotations

import math
from typing import Any

from tsdp.verify.parts import (_command_name, _events_loss, _expect_events, _is_int, _is_real, _Outcome, REL_TOL,
    _Report)


def _mean(r: _Report, out: _Outcome) -> None:
    from tsdp.mean.estimation import RELATIONS, neighbouring

    out.definition = "pure-dp"
    unit, p, g = out.group("unit"), out.group("parameters"), out.group("privacy_loss")
    algorithm = r.claim.mechanism.split("/", 1)[1]
    u = r.claim.unit
    p.equal("parameters.algorithm", r.params.get("algorithm"), algorithm)
    upper, lower = r.params.get("U"), r.params.get("lower")
    participation = r.params.get("participation")
    unit.equal("level", u.level, "user")
    if p.expect(participation in RELATIONS, f"parameters.participation is {participation!r}, not private or public "
                                            "(a report must state whether per-group participation is public)"):
        # the relation is the one the run states for its --participation, word for word
        unit.equal("relation", u.relation, RELATIONS[participation])
        unit.equal("neighbouring (the relation --participation " + str(participation) + " states)", u.neighbouring,
                   neighbouring(participation))
    unit.expect(bool(u.id_column), "the unit names no user id column")
    unit.equal("enforced (mean-estimate states its bounds as declared, never as enforced)", u.enforced, False)
    if p.expect(_is_real(upper) and _is_real(lower) and upper > lower,
                f"parameters U {upper!r} and lower {lower!r} are not a value range"):
        unit.same("max_per_step (U - lower)", u.max_per_step, upper - lower)
    if not unit.problems:
        unit.ok(f"{u.neighbouring} (id column {u.id_column!r}), values in [{lower:g}, {upper:g}]")
    eps, groups = r.params.get("epsilon_per_group"), r.params.get("n_groups")
    if not p.expect(_is_real(eps) and eps > 0 and _is_int(groups) and groups >= 1,
                    f"parameters epsilon_per_group {eps!r} / n_groups {groups!r} are malformed"):
        return
    empty = r.params.get("groups_without_records", 0)
    if not p.expect(_is_int(empty) and 0 <= empty <= groups and (empty == 0 or participation == "public"),
                    f"parameters.groups_without_records {empty!r}: a count of the groups, and only under "
                    "--participation public (under private it would publish participation)"):
        return
    _mean_events(r, out, algorithm, float(eps), int(groups) - int(empty))
    p.equal("grid.n_groups", r.grid.get("n_groups"), groups)
    if participation in RELATIONS:
        _mean_participation(r, out, participation, algorithm, int(groups))
    split = r.params.get("budget_split")
    if p.expect(isinstance(split, dict) and split and all(_is_real(v) and v >= 0 for v in split.values()),
                f"parameters.budget_split is {split!r}"):
        p.expect(sum(split.values()) <= eps * (1 + REL_TOL),
                 f"the budget split {split} spends more than epsilon_per_group {eps:g}")
    total = eps * groups
    p.same("parameters.epsilon_total_bound", r.params.get("epsilon_total_bound"), total)
    c = _command_name(r, out, "mean-estimate")
    c.same("parameters.epsilon_per_group (--epsilon)", eps, r.command.get("epsilon"))
    c.same("parameters.U (--upper)", upper, r.command.get("upper"))
    c.same("parameters.lower (--lower)", lower, r.command.get("lower"))
    c.equal("algorithm (--algorithm)", algorithm, r.command.get("algorithm") or "quantile")
    c.equal("unit.id_column (--user-col)", u.id_column, r.command.get("user_col"))
    if "sampler" in r.params:
        c.equal("parameters.sampler (--sampler)", r.params.get("sampler"), r.command.get("sampler") or "hardened")
    if not c.problems:
        c.ok("the claim is the one the recorded command line asks for")
    if g.expect(r.claim.epsilon >= total * (1 - REL_TOL),
                f"{groups} groups at epsilon {eps:g} each compose to {total:g}, more than the claimed "
                f"{r.claim.epsilon:g}"):
        g.ok(f"basic composition: {groups} groups x epsilon {eps:g} = {total:g} (claimed {r.claim.epsilon:g})")


def _mean_participation(r: _Report, out: _Outcome, participation: str, algorithm: str, groups: int) -> None:
    """What --participation implies: under private, the public --arrays and integer --m-ub, the hash
    grouping, no per-group participation in the released columns, and declared groups whenever the
    run grouped; the declared groups (when stated) multiply to n_groups and are the command line's."""
    p, c = out.group("parameters"), out.group("command")
    params, cmd = r.params, r.command
    if "participation" in cmd:  # (reports of the command line and the Python API record it)
        c.equal("parameters.participation (--participation)", participation, cmd.get("participation"))
    columns = (r.data.get("output") or {}).get("columns") if isinstance(r.data.get("output"), dict) else None
    declared = params.get("declared_groups")
    if participation == "private":
        arrays, m_ub = params.get("arrays"), params.get("m_ub")
        p.expect(algorithm != "baseline", "BASELINE reads the per-user counts: it needs --participation public")
        if p.expect(_is_int(arrays) and arrays >= 1 and _is_int(m_ub) and m_ub >= 1,
                    f"parameters arrays {arrays!r} / m_ub {m_ub!r}: private participation needs public integers"):
            c.equal("parameters.arrays (--arrays)", arrays, _as_int(cmd.get("arrays")))
            c.equal("parameters.m_ub (--m-ub)", m_ub, _as_int(cmd.get("m_ub")))
        p.equal("parameters.grouping", params.get("grouping"), "hash")
        if isinstance(columns, list):
            leaked = sorted({"users", "records_used"} & set(map(str, columns)))
            p.expect(not leaked, f"the released columns {leaked} publish per-group participation, which "
                                 "--participation private keeps private")
        grouped = bool(cmd.get("group_by"))
        p.expect(declared is not None or not grouped,
                 "the run grouped its records (--group-by) but states no declared groups: under --participation "
                 "private the groups must be public parameters")
    elif params.get("arrays") is not None:
        p.fail("parameters.arrays is stated, but --participation public packs users by their counts (no --arrays)")
    if declared is None:
        return
    if not p.expect(isinstance(declared, dict), f"parameters.declared_groups is {declared!r}"):
        return
    keys, slots = declared.get("key_values"), declared.get("slots")
    if p.expect(_is_int(keys) and _is_int(slots) and keys >= 0 and slots >= 0,
                f"parameters.declared_groups key_values {keys!r} / slots {slots!r} are not counts"):
        p.equal("parameters.declared_groups: key_values x slots (n_groups)", keys * slots, groups)
    listed = cmd.get("group_keys")
    if isinstance(listed, str):
        listed = [v for v in listed.split(",") if v.strip()]
    if isinstance(listed, list) and _is_int(keys):
        c.equal("parameters.declared_groups.key_values (--group-keys)", keys, len(listed))
    for field, option in (("slot_start", "start"), ("slot_end", "end")):
        if field in declared and cmd.get(option) is not None:
            c.equal(f"parameters.declared_groups.{field} (--{option})", declared.get(field), cmd.get(option))


def _as_int(value: Any) -> Any:
    """An integer option as recorded (the command line records --m-ub as text)."""
    if isinstance(value, str) and value.strip().isdigit():
        return int(value)
    return value


def _mean_events(r: _Report, out: _Outcome, algorithm: str, eps: float, groups: int) -> None:
    """The Laplace events of a mean-estimate report.

    Reports without ``parameters.sampler`` predate the events: none. BASELINE and ARRAY-AVERAGING
    carry one event per distinct group scale, counts summing to the groups, each at the whole
    epsilon_per_group (laplace for --sampler float; discrete-laplace for hardened, whose sensitivity
    is a whole number of its granularity, a power of two spanning at least MIN_LATTICE_SCALE steps
    of the scale, and equal to --granularity when that was given). LEVY and QUANTILE carry none: their
    exponential-mechanism steps are no additive-noise events."""
    from tsdp.accounting import discrete as disc
    from tsdp.accounting.samplers import SAMPLER_CLASSES

    sampler = r.params.get("sampler")
    g = out.group("events")
    if sampler is None or algorithm not in ("baseline", "array-averaging"):
        _expect_events(r, out, (), "each group's estimate is accounted by its own epsilon")
        return
    known = SAMPLER_CLASSES.get(sampler) if isinstance(sampler, str) else None
    if not out.group("parameters").expect(known is not None,
                                          f"parameters.sampler is {sampler!r}, not hardened or float"):
        return
    kind = known.laplace_kind
    events = r.claim.events
    fixed = r.params.get("granularity")
    if not g.expect(bool(events), f"{r.claim.mechanism} must carry one {kind} event per group scale"):
        return
    for i, e in enumerate(events):
        if not g.equal(f"event {i} kind", e.kind, kind):
            continue
        g.same(f"event {i} epsilon (sensitivity / scale)", e.sensitivity / e.noise, eps)
        if known.hardened:
            step = e.granularity
            if g.expect(step > 0 and math.frexp(step)[0] == 0.5,
                        f"event {i} granularity {step!r} is not a power of two"):
                g.expect((e.sensitivity / step).is_integer(),
                         f"event {i} sensitivity {e.sensitivity:g} is not a whole number of its granularity {step:g}")
                g.expect(e.noise / step >= disc.MIN_LATTICE_SCALE,
                         f"event {i} scale spans {e.noise / step:.3g} lattice steps, fewer than "
                         f"{disc.MIN_LATTICE_SCALE:g}")
                if fixed is not None:
                    g.same(f"event {i} granularity (--granularity)", step, fixed)
    g.equal("events' total count (one per group with records)", sum(e.count for e in events), groups)
    if not g.problems:
        g.ok(f"{len(events)} {kind} event(s) covering the {groups} groups, each at epsilon {eps:g}")
        _events_loss(r, out)

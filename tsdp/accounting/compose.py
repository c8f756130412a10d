"""Composition of privacy claims, and checks that a claim is backed by its mechanism events.

Claims whose mechanism events tsdp can rebuild (``gaussian``, ``laplace``, ``gaussian-mixture``,
``discrete-gaussian``, ``discrete-laplace``, ``discrete-gaussian-mixture``) compose tightly; a claim
with ``exponential`` events (caps chosen privately, :mod:`tsdp.mechanisms.bounds`) composes basically,
since its release's noise was calibrated to the selected caps: each event becomes a dominating privacy-loss distribution and the PLDs are composed
(Schuchardt et al. 2025, Lemma D.13: dominating pairs of adaptively composed mechanisms compose as
products). Other claims compose by basic composition (Dwork and Roth 2014, Theorem 3.16): the epsilons
add and the deltas add. Both are upper bounds; the smaller epsilon at the same total delta is reported.

Composition is a statement about one neighbouring relation: the reports must protect the same kind
of unit (level), under the same relation, identified by the same column. The composed guarantee then
holds for units within every report's bounds, i.e. within the strictest ones (:func:`composed_unit`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from typing import TYPE_CHECKING

from tsdp.accounting import discrete as disc
from tsdp.accounting.claim import LATTICE_GAUSSIAN_KINDS, MIXTURE_KINDS, MechanismEvent, PrivacyClaim
from tsdp.accounting.grid import DEFAULT_DISCRETIZATION, MIN_COMPOSED_DELTA, TAIL_MASS, tail_mass_for
from tsdp.accounting.normal import gaussian_delta
from tsdp.accounting.sensitivity import describe_relation
from tsdp.caveats import Caveat
from tsdp.errors import BudgetError, NumericalError, UsageError

from tsdp.accounting.pld_backend import DP_ACCOUNTING  # numpy and scipy load only when a PLD is built

if TYPE_CHECKING:
    from tsdp.accounting.pld_backend import Pld

BASIC = "basic composition (Dwork and Roth 2014, Theorem 3.16): epsilons and deltas add"
TIGHT = ("PLD composition of the mechanism events (dominating pairs compose as products; "
         "Schuchardt et al. 2025, Lemma D.13), read off at the total delta")
STRONGER = "the claim states more privacy than its noise gives"
RECHECK_DISCRETIZATIONS = (DEFAULT_DISCRETIZATION, 1e-4)  # a finer grid only when the default one is too coarse


def event_pld(event: MechanismEvent, discretization: float = DEFAULT_DISCRETIZATION,
              tail_mass: float = TAIL_MASS) -> Pld:
    """The dominating PLD of one mechanism event (composed ``count`` times for Laplace)."""
    from tsdp.accounting.profiles import GaussianMixtureProfile, GaussianProfile, LaplaceProfile

    if event.kind == "exponential":  # composed basically: see events_privacy and compose_claims
        raise ValueError("an exponential (selection) event has no PLD here: it composes by basic composition")
    if event.kind == "discrete-laplace":
        return _discrete_laplace_pld(event, discretization, tail_mass)
    if event.kind in ("gaussian", "discrete-gaussian"):
        # discrete-gaussian: the continuous profile of the rounded sensitivity; the rounding slack (1 + e^eps) m TV
        # is added by the callers (slack_rate, tsdp.accounting.discrete)
        base = DP_ACCOUNTING.from_profile(GaussianProfile(event.sensitivity / event.noise), discretization)
    elif event.kind in MIXTURE_KINDS:  # discrete: the mixture of the bounding continuous profiles (claim.py)
        weights, sens = zip(*event.mixture)
        base = DP_ACCOUNTING.from_profile(GaussianMixtureProfile(weights, tuple(s / event.noise for s in sens)),
                                discretization)
    else:
        base = DP_ACCOUNTING.from_profile(LaplaceProfile(event.sensitivity / event.noise), discretization)
    return base.self_compose(event.count, tail_mass)


def _discrete_laplace_pld(event: MechanismEvent, discretization: float, tail_mass: float) -> Pld:
    """The PLD of the discrete Laplace pair on the granularity lattice, ``count`` times."""
    from tsdp.accounting.profiles import DiscreteLaplaceProfile

    steps = event.sensitivity / event.granularity
    if abs(steps - round(steps)) > 1e-9 * steps:
        raise NumericalError(f"discrete-laplace sensitivity {event.sensitivity:g} is not a multiple of its "
                             f"granularity {event.granularity:g}")
    profile = DiscreteLaplaceProfile(event.granularity / event.noise, int(round(steps)))
    return DP_ACCOUNTING.from_profile(profile, discretization).self_compose(event.count, tail_mass)


def slack_rate(events) -> float:
    """The discrete Gaussian events' rounding slack per unit of ``(1 + e^eps)``: the sum over events of
    ``count x lattice_coords x 0.025 (granularity / noise)^2`` (:mod:`tsdp.accounting.discrete`); their
    profile is the continuous one plus ``(1 + e^eps)`` times this."""
    return sum(e.count * disc.slack_rate(e.noise / e.granularity, e.lattice_coords) for e in events
               if e.kind in LATTICE_GAUSSIAN_KINDS)


def epsilon_with_slack(epsilon_at, delta: float, rate: float) -> float | None:
    """Smallest-found epsilon with ``epsilon_at(delta - (1 + e^eps) rate) <= eps`` (None if the slack
    leaves no delta), where ``epsilon_at`` is a continuous profile's epsilon at a delta."""
    eps = epsilon_at(delta)
    if rate == 0:
        return eps
    for _ in range(60):
        left = delta - disc.rounding_slack(eps, rate)
        if left <= 0:
            return None
        nxt = epsilon_at(left)
        if nxt <= eps:
            return eps
        eps = nxt * (1 + 1e-12) + 1e-15
    return None


@dataclass
class Composition:
    epsilon: float
    delta: float
    method: str
    basic_epsilon: float
    tight_epsilon: float | None
    warnings: list[str]
    unit: dict[str, Any] = field(default_factory=dict)


def check_composable(claims: list[PrivacyClaim]) -> None:
    """Refuse claims that do not compose: LIP or lower bounds (UsageError), or units of different
    levels, relations or id columns (BudgetError: the composed claim would hold for no unit)."""
    if not claims:
        raise UsageError("nothing to compose: give at least one report")
    for i, claim in enumerate(claims, 1):
        if claim.definition == "lip":
            raise UsageError(f"report {i} holds a LIP claim (FLIP), which is not differential privacy "
                             "and does not compose with DP claims")
        if claim.bound != "upper":
            raise UsageError(f"report {i} holds a lower bound, which is not a privacy guarantee")
    first = claims[0].unit
    for i, claim in enumerate(claims[1:], 2):
        u = claim.unit
        for attr, what in (("level", "level"), ("relation", "neighbouring relation"), ("id_column", "id column")):
            if getattr(u, attr) != getattr(first, attr):
                raise BudgetError(
                    f"report {i} protects a different unit than report 1: {what} {getattr(u, attr)!r} vs "
                    f"{getattr(first, attr)!r}; a composed guarantee needs one unit (same level, relation "
                    "and id column) in every report")
        if _relation_kind(u) != _relation_kind(first):
            raise BudgetError(
                f"report {i} protects a different unit than report 1: {u.neighbouring!r} vs {first.neighbouring!r} "
                "(the same level and relation name, but not the same neighbouring datasets); a composed "
                "guarantee needs one relation in every report")


def _relation_kind(unit) -> str:
    """What a unit's neighbouring datasets are, beyond its level and relation names: ``release``
    for the relations of ``tsdp release`` (whatever their w, which composes to the strictest), else
    the claim's own words. mean-estimate (values of one user replaced, users and counts public)
    and forecast-train (values of one series substituted) use the names ``user``/``substitute``
    for other relations, which must not compose with a release's."""

    try:
        if unit.neighbouring == describe_relation(unit.level, unit.relation, unit.w, unit.id_column):
            return "release"
    except (KeyError, TypeError):
        pass
    return unit.neighbouring


def composed_unit(claims: list[PrivacyClaim]) -> dict[str, Any]:
    """The unit the composition covers: the common level, relation and id column, and the strictest
    of every bound (a unit within all of them is a neighbouring unit of every report).

    ``None`` for a bound means "not bounded" (e.g. ``max_per_step`` of DP-SGD, ``series_per_unit``
    of a mean estimate) and does not restrict the minimum. ``enforced`` holds only when every
    report enforced its bounds.
    """
    check_composable(claims)
    units = [c.unit for c in claims]

    def strictest(attr: str):
        values = [getattr(u, attr) for u in units if getattr(u, attr) is not None]
        return min(values) if values else None

    out = {"level": units[0].level, "relation": units[0].relation, "id_column": units[0].id_column,
           "max_per_step": strictest("max_per_step"), "max_steps": strictest("max_steps"),
           "w": strictest("w"), "series_per_unit": strictest("series_per_unit"),
           "enforced": all(u.enforced for u in units)}
    if any(u.max_norm is not None for u in units):  # (reports without a norm bound read as before)
        out["max_norm"] = strictest("max_norm")
    differs = [k for k in ("max_per_step", "max_steps", "w", "series_per_unit", "max_norm")
               if len({getattr(u, k) for u in units}) > 1]
    out["covers"] = ("the bounds are the same in every report" if not differs else
                     f"the reports' bounds differ ({', '.join(differs)}): the composed guarantee holds only "
                     "for units within the strictest of them (the values above)")
    return out


def compose_claims(claims: list[PrivacyClaim], delta: float | None = None,
                   discretization: float = DEFAULT_DISCRETIZATION) -> Composition:
    """Compose DP claims of one unit; ``delta`` defaults to the sum of their deltas.

    Refuses (see :func:`check_composable`) LIP claims, lower bounds and claims about different units.
    """
    from tsdp.accounting.pld import check_discretization

    check_discretization(discretization)  # also when no PLD is built (pure claims): never ignored
    unit = composed_unit(claims)
    basic_eps = sum(c.epsilon for c in claims)
    basic_delta = sum(c.delta or 0.0 for c in claims)
    target = basic_delta if delta is None else delta
    warnings = []
    if unit["covers"].startswith("the reports' bounds differ"):
        warnings.append(Caveat("bounds_differ", unit["covers"]))
    tight = None
    events = [e for claim in claims for e in claim.events]
    below_floor = sum(e.count for e in events) > 1 and 0 < target < MIN_COMPOSED_DELTA
    if below_floor and all(c.events for c in claims):
        # (tsdp.accounting.grid): the FFT composition's rounding is of the order of such a delta
        warnings.append(Caveat("basic_composition_only", f"delta {target:g} is below {MIN_COMPOSED_DELTA:g}, the smallest delta tsdp reads off a "
                        "composed privacy-loss distribution (its FFT rounding is of that order): the reports are "
                        "composed by basic composition only"))
    adaptive = any(e.kind == "exponential" for e in events)
    if adaptive:  # (tsdp.mechanisms.bounds) the release's noise depends on the caps chosen before it
        warnings.append(Caveat("basic_composition_only", "a report's caps were chosen privately (exponential events): its "
                               "release was calibrated to the chosen caps, so its events give no dominating pair for "
                               "every choice, and the reports are composed by basic composition"))
    if all(c.events for c in claims) and target > 0 and not below_floor and not adaptive:
        total, tail = None, tail_mass_for(target)
        for event in events:
            pld = event_pld(event, discretization, tail)
            total = pld if total is None else total.compose(pld, tail)
        tight = epsilon_with_slack(total.epsilon, target, slack_rate(events))
    if delta is not None and delta < basic_delta and tight is None:
        if below_floor:
            raise UsageError(f"--delta {delta:g} is below the reports' total delta {basic_delta:g} and below "
                             f"{MIN_COMPOSED_DELTA:g}, the smallest delta tsdp reads off a composition; use --delta "
                             f"{max(MIN_COMPOSED_DELTA, basic_delta):g} or larger")
        raise UsageError(f"--delta {delta:g} is below the reports' total delta {basic_delta:g}, and not "
                         "every report carries mechanism events to recompose at another delta")
    use_tight = tight is not None and (delta is not None and delta < basic_delta or tight < basic_eps)
    if use_tight:
        return Composition(tight, target, TIGHT, basic_eps, tight, warnings, unit)
    return Composition(basic_eps, basic_delta, BASIC, basic_eps, tight, warnings, unit)


def events_privacy(events: tuple[MechanismEvent, ...], definition: str, epsilon: float | None,
                   delta: float | None, rel_tol: float = 1e-9) -> tuple[bool, str]:
    """Whether ``(epsilon, delta)`` under ``definition`` follows from the mechanism events.

    Laplace events alone: pure DP with ``epsilon >= sum count * sensitivity / scale`` (basic
    composition of Laplace mechanisms). Gaussian events alone: one Gaussian mechanism with
    ``mu^2 = sum count (sensitivity / sigma)^2`` (Gaussian mechanisms compose exactly), whose exact
    profile at epsilon must not exceed delta (Balle and Wang 2018, Theorem 8). One mixture event: its
    exact mixture profile. Anything else: a pessimistic PLD composition of the events read off at
    delta (dp-accounting). Gaussian and mixture events never give pure DP; an empty list gives nothing.
    """
    if not events:
        return False, "the claim carries no mechanism events to recompute its epsilon from"
    if epsilon is None or not math.isfinite(epsilon) or epsilon < 0:
        return False, f"the claim has no finite epsilon >= 0 (got {epsilon})"
    selection = [e for e in events if e.kind == "exponential"]
    if selection:
        # the caps chosen privately: pure 2 sensitivity / noise each (tsdp.mechanisms.bounds)
        spent = sum(e.count * 2.0 * e.sensitivity / e.noise for e in selection)
        rest = tuple(e for e in events if e.kind != "exponential")
        if not rest:
            ok = epsilon >= spent * (1 - rel_tol)
            return ok, f"exponential events give pure epsilon {spent:.6g} (claimed {epsilon:g})" + ("" if ok else f": {STRONGER}")
        if {e.kind for e in rest} <= {"gaussian", "discrete-gaussian"} and definition == "approx-dp" \
                and delta is not None and 0 < delta < 1:
            exact = _selections_with_gaussian(selection, rest, epsilon, delta, rel_tol)
            if exact[0]:
                return exact
        ok, detail = events_privacy(rest, definition, epsilon - spent, delta, rel_tol)
        return ok, f"the private choice of the caps spends {spent:.6g} (exponential events, basic composition); {detail}"
    kinds = {e.kind for e in events}
    if kinds <= {"laplace", "discrete-laplace"}:
        # discrete-laplace: the sensitivity is the rounded cell's lattice bound, so the same sum holds.
        needed = sum(e.count * e.sensitivity / e.noise for e in events)
        ok = epsilon >= needed * (1 - rel_tol)
        return ok, (f"Laplace events give pure epsilon {needed:.6g} (claimed {epsilon:g})"
                    + ("" if ok else f": {STRONGER}"))
    if definition == "pure-dp":
        return False, (f"{' and '.join(sorted(kinds))} events never give pure DP (delta 0); the claim must be "
                       "approx-dp with a delta > 0")
    if delta is None or not 0 < delta < 1:
        return False, f"{'/'.join(sorted(kinds))} events need a delta in (0, 1), the claim has {delta}"

    slack = disc.rounding_slack(epsilon, slack_rate(events))  # discrete Gaussian events (tsdp.accounting.discrete)
    if slack >= delta:
        return False, (f"the discrete Gaussian events' rounding slack {slack:.3g} at epsilon {epsilon:g} alone exceeds "
                       f"the claimed delta {delta:g}: {STRONGER}")
    plus = f" + rounding slack {slack:.3g}" if slack else ""
    budget = delta - slack
    if kinds <= {"gaussian", "discrete-gaussian"}:
        mu = math.sqrt(sum(e.count * (e.sensitivity / e.noise) ** 2 for e in events))
        exact = float(gaussian_delta(epsilon, mu))
        ok = exact <= budget * (1 + rel_tol)
        return ok, (f"Gaussian events (mu {mu:.6g}) give delta {exact:.6g}{plus} at epsilon {epsilon:g} "
                    f"(claimed delta {delta:g})" + ("" if ok else f": {STRONGER}"))
    if len(events) == 1 and events[0].kind in MIXTURE_KINDS and events[0].count == 1:
        from tsdp.accounting.profiles import GaussianMixtureProfile

        e = events[0]
        weights, sens = zip(*e.mixture)
        exact = float(GaussianMixtureProfile(weights, tuple(s / e.noise for s in sens)).delta([epsilon])[0])
        ok = exact <= budget * (1 + rel_tol)
        return ok, (f"the mixture profile gives delta {exact:.6g}{plus} at epsilon {epsilon:g} (claimed delta "
                    f"{delta:g})" + ("" if ok else f": {STRONGER}"))
    composed = None
    for discretization in RECHECK_DISCRETIZATIONS:
        try:
            total, tail = None, tail_mass_for(budget)
            for event in events:
                pld = event_pld(event, discretization, tail)
                total = pld if total is None else total.compose(pld, tail)
            composed = total.epsilon(budget)
        except NumericalError as exc:
            return False, f"the events' PLD cannot be built ({exc})"
        if composed <= epsilon * (1 + 1e-6) + 1e-12:
            return True, (f"PLD composition of the events (discretization {discretization:g}) gives epsilon "
                          f"{composed:.6g} at delta {budget:.6g}{' (the claimed delta minus the rounding slack)' if slack else ''} "
                          f"(claimed epsilon {epsilon:g})")
    return False, (f"PLD composition of the events gives epsilon {composed:.6g} at delta {budget:g}{plus and ' (after the rounding slack)'}, "
                   f"more than the claimed {epsilon:g}: {STRONGER}")


def _selections_with_gaussian(selection, rest, epsilon: float, delta: float, rel_tol: float) -> tuple[bool, str]:
    """Exponential (bounded-range) selections followed by a Gaussian release, composed exactly
    (:func:`tsdp.accounting.bounded_range.delta_bound`, plus the discrete Gaussian's rounding slack at
    epsilon). The caller falls back to basic composition when this does not give the claim."""
    from tsdp.accounting.bounded_range import delta_bound

    slack = disc.rounding_slack(epsilon, slack_rate(rest))
    mu = math.sqrt(sum(e.count * (e.sensitivity / e.noise) ** 2 for e in rest))
    selections = tuple(2.0 * e.sensitivity / e.noise for e in selection for _ in range(e.count))
    exact = delta_bound(epsilon, selections, mu) + slack
    ok = exact <= delta * (1 + rel_tol)
    return ok, (f"exponential selections (epsilon {', '.join(f'{s:.6g}' for s in selections)}, bounded-range) and "
                f"Gaussian events (mu {mu:.6g}) composed exactly give delta {exact:.6g} at epsilon {epsilon:g} "
                f"(claimed delta {delta:g})" + ("" if ok else f": {STRONGER}"))


def claim_backed_by_events(claim: PrivacyClaim, rel_tol: float = 1e-9) -> tuple[bool, str]:
    """Whether the claim's definition, epsilon and delta follow from its events (:func:`events_privacy`).

    A claim without events is not backed by them (False); :mod:`tsdp.verify` decides which
    mechanisms must carry events and rechecks the others from their parameters.
    """
    if claim.definition == "lip":
        return False, "a LIP claim has no epsilon and no mechanism events"
    return events_privacy(claim.events, claim.definition, claim.epsilon, claim.delta, rel_tol)


def within_budget(claim: PrivacyClaim, max_epsilon: float | None, max_delta: float | None) -> list[str]:
    """Reasons the claim exceeds the budget (empty when it is within)."""
    problems = []
    if claim.definition == "lip":
        if max_epsilon is not None or max_delta is not None:
            problems.append("the claim has no epsilon and no delta (LIP is not differential privacy), so it "
                            "cannot meet --max-epsilon/--max-delta")
        return problems
    if max_epsilon is not None:
        if claim.epsilon is None:
            problems.append("the claim has no epsilon")
        elif not claim.epsilon <= max_epsilon:
            problems.append(f"epsilon {claim.epsilon:g} exceeds --max-epsilon {max_epsilon:g}")
    if max_delta is not None:
        if claim.delta is None:
            problems.append("the claim has no delta")
        elif not claim.delta <= max_delta:
            problems.append(f"delta {claim.delta:g} exceeds --max-delta {max_delta:g}")
    return problems

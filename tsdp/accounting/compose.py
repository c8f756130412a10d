"""Composition of privacy claims, and checks that a claim is backed by its mechanism events.

Claims whose mechanism events tsdp can rebuild (``gaussian``, ``laplace``) compose tightly: each
event becomes a dominating privacy-loss distribution and the PLDs are composed (Schuchardt et al.
2025, Lemma D.13: dominating pairs of adaptively composed mechanisms compose as products). Other
claims compose by basic composition (Dwork and Roth 2014, Theorem 3.16): the epsilons add and the
deltas add. Both are upper bounds; the smaller epsilon at the same total delta is reported.
"""

from __future__ import annotations

from dataclasses import dataclass

from tsdp.accounting.claim import MechanismEvent, PrivacyClaim
from tsdp.accounting.gaussian import delta_for_epsilon as gaussian_delta
from tsdp.accounting.pld import DEFAULT_DISCRETIZATION, TAIL_MASS, DiscretePLD, pld_from_profile, tail_mass_for
from tsdp.accounting.profiles import GaussianMixtureProfile, GaussianProfile, LaplaceProfile
from tsdp.errors import UsageError

BASIC = "basic composition (Dwork and Roth 2014, Theorem 3.16): epsilons and deltas add"
TIGHT = ("PLD composition of the mechanism events (dominating pairs compose as products; "
         "Schuchardt et al. 2025, Lemma D.13), read off at the total delta")


def event_pld(event: MechanismEvent, discretization: float = DEFAULT_DISCRETIZATION,
              tail_mass: float = TAIL_MASS) -> DiscretePLD:
    """The dominating PLD of one mechanism event (composed ``count`` times for Laplace)."""
    if event.kind == "gaussian":
        base = pld_from_profile(GaussianProfile(event.sensitivity / event.noise), discretization)
    elif event.kind == "gaussian-mixture":
        weights, sens = zip(*event.mixture)
        base = pld_from_profile(GaussianMixtureProfile(weights, tuple(s / event.noise for s in sens)),
                                discretization)
    else:
        base = pld_from_profile(LaplaceProfile(event.sensitivity / event.noise), discretization)
    return base.self_compose(event.count, tail_mass)


@dataclass
class Composition:
    epsilon: float
    delta: float
    method: str
    basic_epsilon: float
    tight_epsilon: float | None
    warnings: list[str]


def compose_claims(claims: list[PrivacyClaim], delta: float | None = None,
                   discretization: float = DEFAULT_DISCRETIZATION) -> Composition:
    """Compose DP claims; ``delta`` defaults to the sum of their deltas."""
    if not claims:
        raise UsageError("nothing to compose: give at least one report")
    for i, claim in enumerate(claims, 1):
        if claim.definition == "lip":
            raise UsageError(f"report {i} holds a LIP claim (FLIP), which is not differential privacy "
                             "and does not compose with DP claims")
        if claim.bound != "upper":
            raise UsageError(f"report {i} holds a lower bound, which is not a privacy guarantee")
    basic_eps = sum(c.epsilon for c in claims)
    basic_delta = sum(c.delta or 0.0 for c in claims)
    target = basic_delta if delta is None else delta
    warnings = []
    relations = {(c.unit.level, c.unit.relation, c.unit.id_column) for c in claims}
    if len(relations) > 1:
        warnings.append("the reports protect different units; the composed guarantee covers only datasets "
                        "that are neighbours under every report's relation")
    tight = None
    if all(c.events for c in claims) and target > 0:
        total, tail = None, tail_mass_for(target)
        for claim in claims:
            for event in claim.events:
                pld = event_pld(event, discretization, tail)
                total = pld if total is None else total.compose(pld, tail)
        tight = total.epsilon(target)
    if delta is not None and delta < basic_delta and tight is None:
        raise UsageError(f"--delta {delta:g} is below the reports' total delta {basic_delta:g}, and not "
                         "every report carries mechanism events to recompose at another delta")
    use_tight = tight is not None and (delta is not None and delta < basic_delta or tight < basic_eps)
    if use_tight:
        return Composition(tight, target, TIGHT, basic_eps, tight, warnings)
    return Composition(basic_eps, basic_delta, BASIC, basic_eps, tight, warnings)


def claim_backed_by_events(claim: PrivacyClaim, rel_tol: float = 1e-9) -> tuple[bool, str]:
    """Whether the claim's (epsilon, delta) follows from its events by a closed form.

    A single Gaussian event: the exact profile at epsilon must not exceed delta (Balle and Wang,
    Thm 8). Laplace events: epsilon must be at least count * sensitivity / scale. Other claims
    cannot be rechecked this way and pass with a note.
    """
    events = claim.events
    if claim.definition == "lip" or not events:
        return True, "no mechanism events to recheck"
    if len(events) == 1 and events[0].kind == "gaussian-mixture" and events[0].count == 1:
        e = events[0]
        weights, sens = zip(*e.mixture)
        exact = float(GaussianMixtureProfile(weights, tuple(s / e.noise for s in sens)).delta([claim.epsilon])[0])
        ok = exact <= claim.delta * (1 + rel_tol)
        return ok, f"mixture profile gives delta {exact:.6g} at epsilon {claim.epsilon:g} (claimed {claim.delta:g})"
    if len(events) == 1 and events[0].kind == "gaussian":
        e = events[0]
        exact = gaussian_delta(claim.epsilon, e.sensitivity / e.noise)
        ok = exact <= claim.delta * (1 + rel_tol)
        return ok, f"Gaussian profile gives delta {exact:.6g} at epsilon {claim.epsilon:g} (claimed {claim.delta:g})"
    if all(e.kind == "laplace" for e in events):
        needed = sum(e.count * e.sensitivity / e.noise for e in events)
        ok = claim.epsilon >= needed * (1 - rel_tol)
        return ok, f"Laplace events need epsilon >= {needed:.6g} (claimed {claim.epsilon:g})"
    composed = compose_claims([claim], delta=claim.delta if claim.delta > 0 else None)
    ok = composed.tight_epsilon is None or composed.tight_epsilon <= claim.epsilon * (1 + 1e-6) + 1e-12
    return ok, f"composed events give epsilon {composed.tight_epsilon} (claimed {claim.epsilon:g})"


def within_budget(claim: PrivacyClaim, max_epsilon: float | None, max_delta: float | None) -> list[str]:
    """Reasons the claim exceeds the budget (empty when it is within)."""
    problems = []
    if max_epsilon is not None:
        if claim.epsilon is None:
            problems.append("the claim has no epsilon (LIP is not differential privacy)")
        elif not claim.epsilon <= max_epsilon:
            problems.append(f"epsilon {claim.epsilon:g} exceeds --max-epsilon {max_epsilon:g}")
    if max_delta is not None and claim.delta is not None and not claim.delta <= max_delta:
        problems.append(f"delta {claim.delta:g} exceeds --max-delta {max_delta:g}")
    if max_delta is not None and claim.delta is None and claim.definition != "lip":
        problems.append("the claim has no delta")
    return problems


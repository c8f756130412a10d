"""The rule of ``tsdp flip``: LIP only, never differential privacy."""

from __future__ import annotations

import math
from typing import Any

from tsdp.verify.parts import (_close, _command_name, _expect_events, _Group, _is_int, _is_real, _Outcome, REL_TOL,
    _Report)


def _flip(r: _Report, out: _Outcome) -> None:
    out.definition = "lip"
    c, unit, p, g = r.claim, out.group("unit"), out.group("parameters"), out.group("privacy_loss")
    unit.equal("level", c.unit.level, "value")
    unit.equal("relation", c.unit.relation, "none")
    from tsdp.flip.mechanism import NEIGHBOURING as LIP_RELATION

    unit.equal("neighbouring", c.unit.neighbouring, LIP_RELATION)
    if not unit.problems:
        unit.ok("no neighbouring relation (LIP is not differential privacy)")
    _expect_events(r, out, (), "LIP has no privacy-loss events")
    p.equal("parameters.differential_privacy", c.parameters.get("differential_privacy"), False)
    budget = c.parameters.get("lip_budget_delta")
    cmd = _command_name(r, out, "flip")
    cmd.same("parameters.lip_budget_delta (--lip-delta)", budget, r.command.get("lip_delta")
             if _is_real(r.command.get("lip_delta")) else math.nan)
    # the dates withheld at each end (reports written before --withhold-ends have neither: 0)
    cmd.equal("parameters.withhold_ends (--withhold-ends)", c.parameters.get("withhold_ends", 0),
              r.command.get("withhold_ends", 0))
    floor = c.parameters.get("lip_floor")
    given = r.command.get("lip_floor")
    _flip_floor_command(cmd, floor, given, r.command.get("lip_delta"))
    if not cmd.problems:
        cmd.ok("the claim is the one the recorded command line asks for")
    lip = r.data.get("lip")
    p.expect(isinstance(lip, dict) and isinstance(lip.get("statement"), str),
             "the report has no 'lip' block with the LIP statement")
    _flip_withheld(p, (r.data.get("output") or {}).get("withheld"))
    if g.expect(c.epsilon is None and c.delta is None, "a LIP claim must carry no epsilon and no delta") and \
            g.expect(_is_real(budget) and 0 <= budget < 1, f"parameters.lip_budget_delta is {budget!r}, not in [0, 1)") \
            and _flip_floor_statement(g, c.parameters, lip, floor, budget, given is not None):
        g.ok(f"every released date's same-date LIP >= lip_floor {floor:g} under the estimated model (the ideal "
             f"filter's: >= 1 - {budget:g}); NOT differential privacy, no epsilon")


def _flip_floor_command(cmd: _Group, floor: Any, given: Any, asked_delta: Any) -> None:
    """The floor the released dates were held to is the recorded ``--lip-floor``, or by default
    ``min(1 - --lip-delta, 0.99)`` (tsdp.flip.withholding); a claim stating more fails."""
    from tsdp.flip.withholding import default_floor

    if given is not None:
        want = given if _is_real(given) and 0 <= given <= 1 else math.nan
    else:
        want = default_floor(asked_delta) if _is_real(asked_delta) and 0 <= asked_delta < 1 else math.nan
    if not _is_real(want):
        cmd.fail(f"the recorded --lip-floor {given!r} / --lip-delta {asked_delta!r} give no floor in [0, 1]")
    elif _is_real(floor) and floor > want and not _close(floor, want, REL_TOL):
        cmd.fail(f"parameters.lip_floor {floor:.10g} exceeds {want:.10g}, the floor the released dates were held to "
                 "(--lip-floor, or min(1 - --lip-delta, 0.99)): the claim overstates the LIP of the released dates")
    else:
        cmd.same("parameters.lip_floor (the floor --lip-floor or --lip-delta give)", floor, want)


def _flip_floor_statement(g: _Group, params: dict[str, Any], lip: Any, floor: Any, budget: float,
                          given: bool) -> bool:
    """The claim states the floor of its released dates, in figures and in words (the guarantee sentence
    tsdp.flip.withholding writes for it, in the claim and in the report's 'lip' block)."""
    from tsdp.flip.withholding import guarantee

    if not g.expect(floor is not None, "the claim states no lip_floor: a report of a tsdp before the per-date floor "
                                       "claimed the ideal filter's bound for released dates that may miss it; rerun "
                                       "tsdp flip"):
        return False
    if not g.expect(_is_real(floor) and 0 <= floor <= 1, f"parameters.lip_floor is {floor!r}, not in [0, 1]"):
        return False
    want = guarantee(floor, budget, given)
    ok = g.expect(params.get("guarantee") == want, "parameters.guarantee is not the sentence tsdp writes for "
                                                    f"lip_floor {floor:g} (it was edited)")
    stated = lip.get("guarantee") if isinstance(lip, dict) else None
    return g.expect(stated in (None, want), "lip.guarantee is not the claim's guarantee (it was edited)") and ok


def _flip_withheld(p: _Group, withheld: Any) -> None:
    """output.withheld (the dates written empty, per series): every series releases at least one date
    (tsdp flip refuses a series it would withhold entirely). Reports of earlier versions have none."""
    if withheld is None:
        return
    entries = withheld if isinstance(withheld, list) else [None]
    for entry in entries:
        dates = entry.get("dates") if isinstance(entry, dict) else None
        released = entry.get("released") if isinstance(entry, dict) else None
        if not (_is_int(dates) and _is_int(released) and 1 <= released <= dates):
            p.fail(f"output.withheld has an entry {entry!r}: each series states its dates and the number released "
                   "(1 to dates)")
            return

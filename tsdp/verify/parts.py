"""The pieces every rule of :mod:`tsdp.verify` shares: the check and outcome records, the parsed report, the
unit, command and event checks of a release, and small number helpers."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from tsdp.accounting.claim import MechanismEvent, PrivacyClaim
from tsdp.accounting.sensitivity import LEVELS, UNIT_LEVELS
from tsdp.errors import DataError, TsdpError


@dataclass(frozen=True)
class ReportVerification:
    """The checks of one report; it passes when every check passes."""

    checks: tuple[Check, ...]

    @property
    def passed(self) -> bool:
        return all(c.passed for c in self.checks)

    @property
    def failures(self) -> tuple[Check, ...]:
        return tuple(c for c in self.checks if not c.passed)

    def to_dict(self, path: str | None = None) -> dict[str, Any]:
        out: dict[str, Any] = {} if path is None else {"path": path}
        out.update(passed=self.passed, checks=[c.to_dict() for c in self.checks])
        return out


@dataclass(frozen=True)
class Check:
    """One named check of a report, passed or failed, with a one-line detail."""

    name: str
    passed: bool
    detail: str

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "passed": self.passed, "detail": self.detail}


DP_RELATIONS = ("add-remove", "substitute")


DP_LEVELS = LEVELS  # the units of tsdp.accounting.sensitivity.UNIT_LEVELS


MEAN_ALGORITHMS = ("baseline", "array-averaging", "levy", "quantile")  # tsdp.mean.estimation.ALGORITHMS


FLIP_MECHANISM = "FLIP all-pass filtering (McElroy, Roy & Hore 2022)"  # tsdp.flip.mechanism.MECHANISM


REL_TOL = 1e-9  # recomputed figures must agree to this relative precision


@dataclass
class _Report:
    data: dict[str, Any]
    claim: PrivacyClaim
    params: dict[str, Any]
    grid: dict[str, Any]
    command: dict[str, Any]


def _parse(data: Any) -> _Report:
    if not isinstance(data, dict):
        raise DataError("REPORT is not a tsdp report: its top level is not a JSON object")
    bad = _first_non_finite(data)
    if bad is not None:
        raise DataError(f"REPORT holds a non-finite number at {bad}: a report never contains NaN or Infinity")
    try:
        claim = PrivacyClaim.from_dict(data["claim"])
    except (KeyError, TypeError, ValueError, AttributeError, OverflowError) as exc:
        raise DataError(f"REPORT: its claim cannot be read ({type(exc).__name__}: {exc})") from None
    grid = data.get("grid") if isinstance(data.get("grid"), dict) else {}
    command = data.get("command") if isinstance(data.get("command"), dict) else {}
    parameters = command.get("parameters") if isinstance(command.get("parameters"), dict) else {}
    return _Report(data, claim, claim.parameters, grid, parameters)


def _first_non_finite(data: Any) -> str | None:
    """Path of the first NaN or infinite float in ``data`` (iterative: no recursion limit)."""
    stack: list[tuple[str, Any]] = [("(top level)", data)]
    while stack:
        where, node = stack.pop()
        if isinstance(node, float) and not math.isfinite(node):
            return where
        if isinstance(node, dict):
            stack.extend((f"{where}/{k}" if where != "(top level)" else str(k), v) for k, v in node.items())
        elif isinstance(node, (list, tuple)):
            stack.extend((f"{where}/{i}", v) for i, v in enumerate(node))
    return None


class _Group:
    """Problems found for one check, and what was confirmed."""

    def __init__(self) -> None:
        self.problems: list[str] = []
        self.confirmed: list[str] = []

    def fail(self, message: str) -> None:
        self.problems.append(message)

    def ok(self, message: str) -> None:
        self.confirmed.append(message)

    def expect(self, condition: bool, problem: str) -> bool:
        if not condition:
            self.problems.append(problem)
        return bool(condition)

    def same(self, label: str, got: Any, want: float, rel: float = REL_TOL) -> bool:
        """``got`` is a number equal to ``want`` to ``rel`` (relative)."""
        if not _is_real(want):
            self.problems.append(f"{label} is {got!r}, but the report states no number to compare it with "
                                 f"(got {want!r})")
            return False
        if not _is_real(got):
            self.problems.append(f"{label} is {got!r}, not a number (expected {want:.10g})")
            return False
        if not _close(got, want, rel):
            self.problems.append(f"{label} is {got:.10g}, expected {want:.10g}")
            return False
        return True

    def equal(self, label: str, got: Any, want: Any) -> bool:
        if got != want or isinstance(got, bool) != isinstance(want, bool):
            self.problems.append(f"{label} is {got!r}, expected {want!r}")
            return False
        return True

    def result(self, name: str) -> Check:
        if self.problems:
            more = f" (and {len(self.problems) - 1} more)" if len(self.problems) > 1 else ""
            return Check(name, False, self.problems[0] + more)
        return Check(name, True, "; ".join(self.confirmed) or "consistent")


@dataclass
class _Outcome:
    definition: str | None = None
    groups: dict[str, _Group] = field(default_factory=dict)

    def group(self, name: str) -> _Group:
        return self.groups.setdefault(name, _Group())


@dataclass(frozen=True)
class _Rule:
    describes: str
    check: Callable[[_Report, _Outcome], None]


def _is_real(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _close(got: float, want: float, rel: float = REL_TOL) -> bool:
    return abs(got - want) <= rel * max(abs(got), abs(want)) + 1e-300


def _definition_text(claim: PrivacyClaim, want: str) -> str:
    if claim.definition == want:
        return {"approx-dp": "(epsilon, delta)-DP, as its noise gives",
                "pure-dp": "pure epsilon-DP, as its noise gives",
                "lip": "LIP (FLIP), NOT differential privacy: no epsilon, no delta"}[want]
    if claim.definition == "pure-dp" and want == "approx-dp":
        return f"the claim says pure-dp, but {claim.mechanism} with this noise gives only (epsilon, delta)-DP"
    if want == "lip":
        return f"the claim says {claim.definition}, but {claim.mechanism} is not differential privacy (LIP only)"
    return f"the claim says {claim.definition}, but {claim.mechanism} with this noise gives {want}"


def _budget_text(max_epsilon, max_delta) -> str:
    parts = ([f"epsilon <= {max_epsilon:g}"] if max_epsilon is not None else []) + \
            ([f"delta <= {max_delta:g}"] if max_delta is not None else [])
    return "within the given budget (" + ", ".join(parts) + ")"


def _grid(r: _Report, unit: _Group) -> tuple[int, int] | None:
    s, t = r.grid.get("n_series"), r.grid.get("n_steps")
    if not (_is_int(s) and s >= 1 and _is_int(t) and t >= 1):
        unit.fail(f"the report's grid does not state n_series and n_steps (got {s!r}, {t!r})")
        return None
    return s, t


def _release_unit(r: _Report, out: _Outcome):
    """The declared bounds of a ``tsdp release`` claim and the grid, or None when they are malformed."""
    from tsdp.accounting.sensitivity import ContributionBounds

    unit, params = out.group("unit"), out.group("parameters")
    u = r.claim.unit
    shape = _grid(r, unit)
    if not unit.expect(UNIT_LEVELS.get(u.level) is not None,
                       f"level {u.level!r} is not a DP unit ({', '.join(DP_LEVELS)})"):
        return None
    if not unit.expect(u.relation in DP_RELATIONS, f"relation {u.relation!r} is not one of {', '.join(DP_RELATIONS)}"):
        return None
    try:
        bounds = ContributionBounds(u.level, u.max_per_step, u.max_steps, u.w, u.series_per_unit, u.relation,
                                    u.max_norm)
    except (TsdpError, TypeError) as exc:
        unit.fail(f"the unit's bounds are malformed: {exc}")
        return None
    if shape is None:
        return None
    S, T = shape
    touched = bounds.series_touched(S)
    unit.expect(u.series_per_unit == touched,
                f"series_per_unit {u.series_per_unit!r}, but a {u.level} unit touches {touched} of the {S} series")
    wanted = bounds.describe(u.id_column)
    unit.expect(u.neighbouring == wanted, f"the neighbouring text {u.neighbouring!r} is not what the bounds give "
                                          f"({wanted!r})")
    if not unit.problems:
        unit.ok(f"{u.neighbouring}; M = {u.max_per_step:g}" + (f", I = {u.max_steps}" if u.max_steps else "")
                + (f", w = {u.w}" if u.w else "") + f", K = {touched} of {S} series x {T} steps"
                + ("" if u.enforced else " (declared bounds, not enforced by tsdp)"))
    params.equal("parameters.n_series", r.params.get("n_series"), S)
    params.equal("parameters.n_steps", r.params.get("n_steps"), T)
    _release_command(r, out, bounds, S, T)
    return bounds, S, T


def _command_name(r: _Report, out: _Outcome, name: str) -> _Group:
    g = out.group("command")
    command = r.data.get("command") if isinstance(r.data.get("command"), dict) else {}
    g.equal("command.name", command.get("name"), name)
    return g


def _release_command(r: _Report, out: _Outcome, bounds, S: int, T: int) -> None:
    """The claim (unit ``bounds`` on S series x T steps) is the one the recorded ``tsdp release`` command
    line asks for."""
    g = _command_name(r, out, "release")
    cmd, u, c = r.command, r.claim.unit, r.claim
    # --sampling-rate (the subsampling mechanisms' only) at 1 subsamples nothing: the plain Gaussian
    # mechanism is released instead (tsdp.mechanisms.subsample.release)
    released = "gaussian" if cmd.get("sampling_rate") == 1 else cmd.get("mechanism")
    g.equal("claim mechanism (--mechanism)", c.mechanism, released)
    g.equal("unit.level (--unit)", u.level, cmd.get("unit"))
    g.equal("unit.relation (--neighbouring)", u.relation, cmd.get("neighbouring"))
    g.equal("unit.w (--w)", u.w, cmd.get("w"))
    norm = cmd.get("max_norm")
    if norm is None:
        g.equal("unit.max_norm (--max-norm)", u.max_norm, None)
    else:
        g.same("unit.max_norm (--max-norm)", u.max_norm, norm)
    if cmd.get("assume_none") or (norm is not None and cmd.get("max_steps") is None):
        g.equal("unit.max_steps (--assume-none, or --max-norm without --max-steps, sets I = T)", u.max_steps, T)
    else:
        g.equal("unit.max_steps (--max-steps)", u.max_steps, cmd.get("max_steps"))
    enforced = cmd.get("layout") == "events"
    g.equal("unit.enforced (tsdp enforces the bounds of event input only)", u.enforced, enforced)
    value_bound = cmd.get("value_bound")
    if enforced:  # the enforced cell bound: at most M events (1 at event level) of value at most V
        per_cell = cmd.get("max_per_step") if bounds.unit.per_user_caps else 1  # (an event unit: one event)
        if norm is not None and per_cell is None:  # the norm alone bounds a cell
            per_cell = norm / (value_bound or 1.0)
        if g.expect(_is_real(per_cell) and (value_bound is None or _is_real(value_bound))
                    and (norm is None or _is_real(norm)),
                    f"--max-per-step {per_cell!r} / --value-bound {value_bound!r} / --max-norm {norm!r} are not numbers"):
            cell = per_cell * (value_bound or 1.0)
            g.same("unit.max_per_step (enforced cell bound)", u.max_per_step, cell if norm is None else min(cell, norm))
    else:
        g.same("unit.max_per_step (--max-per-step)", u.max_per_step, cmd.get("max_per_step"))
    g.equal("unit.id_column (--user-col)", u.id_column, cmd.get("user_col"))
    per_user = cmd.get("series_per_user")
    if g.expect(not _is_int(per_user) or per_user >= 1, f"--series-per-user {per_user!r} is not >= 1"):
        recorded = replace(bounds, series_per_unit=per_user if _is_int(per_user) else None)
        g.equal("unit.series_per_unit (--series-per-user)", u.series_per_unit, recorded.series_touched(S))
    if cmd.get("epsilon") is not None or not cmd.get("fast_preset"):
        g.same("claim epsilon (--epsilon)", c.epsilon, cmd.get("epsilon"))
    if c.definition == "pure-dp":
        g.equal("--delta (none for pure DP)", cmd.get("delta"), None)
    elif r.params.get("accounting") == "paper":
        g.expect(_is_real(cmd.get("delta")) and c.delta <= cmd.get("delta") * (1 + REL_TOL),
                 f"claim delta {c.delta} exceeds --delta {cmd.get('delta')!r}")
    else:
        g.same("claim delta (--delta)", c.delta, cmd.get("delta"))
    if not g.problems:
        g.ok("the claim is the one the recorded command line asks for")


def _expect_events(r: _Report, out: _Outcome, expected: tuple[MechanismEvent, ...], how: str) -> None:
    """The claim's events are exactly ``expected`` (figures to REL_TOL)."""
    g = out.group("events")
    got = r.claim.events
    if not expected:
        g.expect(not got, f"{r.claim.mechanism} emits no mechanism events here, but the claim carries {len(got)}")
        if not got:
            g.ok(f"none ({how})")
        return
    if not got:
        g.fail(f"{r.claim.mechanism} must carry its mechanism events, but the claim's events are missing; "
               "its epsilon cannot be recomputed")
        return
    if len(got) != len(expected):
        g.fail(f"the claim has {len(got)} mechanism events, {r.claim.mechanism} emits {len(expected)}")
        return
    for i, (e, want) in enumerate(zip(got, expected)):
        label = f"event {i}"
        if not g.equal(f"{label} kind", e.kind, want.kind):
            continue
        g.equal(f"{label} count", e.count, want.count)
        g.same(f"{label} sensitivity", e.sensitivity, want.sensitivity)
        g.same(f"{label} noise (the stated sigma or scale)", e.noise, want.noise)
        if want.granularity is not None or e.granularity is not None:
            g.same(f"{label} granularity", e.granularity, want.granularity)
        if want.lattice_coords is not None or e.lattice_coords is not None:
            g.equal(f"{label} lattice_coords (noisy values the unit changes)", e.lattice_coords, want.lattice_coords)
        if want.mixture is not None:
            if e.mixture is None or len(e.mixture) != len(want.mixture):
                g.fail(f"{label} mixture has {len(e.mixture or ())} components, the unit gives {len(want.mixture)}")
            elif not all(_close(a, c, 1e-7) and _close(b, d, REL_TOL)
                         for (a, b), (c, d) in zip(e.mixture, want.mixture)):
                g.fail(f"{label} mixture weights or sensitivities differ from the unit's binomial mixture")
    if not g.problems:
        g.ok(f"{len(got)} event(s), as the unit and the noise give ({how})")


def _events_loss(r: _Report, out: _Outcome) -> None:
    from tsdp.accounting.compose import events_privacy

    c = r.claim
    ok, detail = events_privacy(c.events, c.definition, c.epsilon, c.delta)
    g = out.group("privacy_loss")
    (g.ok if ok else g.fail)(detail)


def _param(r: _Report, *path: str) -> Any:
    node: Any = r.params
    for key in path:
        node = node.get(key) if isinstance(node, dict) else None
    return node


def _noise(r: _Report, key: str, out: _Outcome) -> float | None:
    value = _param(r, key)
    if not (_is_real(value) and math.isfinite(value) and value > 0):
        out.group("parameters").fail(f"parameters.{key} is {value!r}, not a positive number")
        return None
    return float(value)

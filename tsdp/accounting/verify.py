"""Verification of a privacy report: is its claim the one its own mechanism, unit and noise give?

``verify_report(data)`` rechecks a parsed, schema-valid ``tsdp-report/1`` document and returns a
:class:`ReportVerification`: a list of named checks, each passed or failed with a one-line detail.
Nothing is printed and no file is read; the caller passes the sha256 of the released file when it
has one (:func:`tsdp.io.files.sha256_file`).

What a passing verification proves. The claim is internally consistent and follows from public
figures by the mechanism's own theorem, recomputed here independently of the figures the report
states:

* the definition is the one the mechanism can give (Gaussian or mixture noise is never pure DP; a
  LIP claim (FLIP) carries no epsilon, no delta and no events, and nothing else is LIP);
* the unit is well formed for the mechanism, its description is the one its bounds give, and the
  sensitivities follow from it and the released grid (M, I, K, w, n_series, n_steps:
  :class:`tsdp.accounting.sensitivity.ContributionBounds`);
* the mechanism events are exactly those the unit and the stated noise give (kind, sensitivity,
  count, mixture), and the parameters (sigma, scale, sensitivities, samples) agree with them, so no
  single figure can be edited alone;
* epsilon and delta are recomputed: from the events (:func:`tsdp.accounting.compose.events_privacy`)
  for every mechanism that emits them, which must carry them; from the parameters otherwise
  (Laplace DFT, Koga et al.'s paper accounting, user-level means, DP-SGD through
  :mod:`tsdp.accounting.structured` exactly as the trainer accounts);
* a LIP claim states the same-date LIP floor its released dates were held to (``--lip-floor``, or by
  default min(1 - ``--lip-delta``, 0.99); a stated floor above it fails), in figures and in words;
* the bound is an upper bound, the numbers are within the given budget, the run was not seeded,
  and the released file is the one the report names (its sha256; a report whose released file is
  not given fails, unless the caller asks for the claim alone: ``output_check=False``).

What it cannot prove: who wrote the report (a report edited consistently in every figure, or
written by hand, verifies: sign or store reports where they cannot be altered); that the released
file was produced with the stated noise (only its hash is compared); anything about the private
data (FLIP's per-date LIP is such a figure: verify checks the floor the command held the dates to, not
the LIP values, which are in the custodian file); and whether declared contribution bounds held for pre-aggregated input (``enforced: false``).
For the conditional filter-subsample accounting the per-series spectral norms s_J, and for the
paper filter accounting the kernel statistics (L, srank), are taken from the report: they depend on
the released sampling pattern or the kernel, and are only checked for range and consistency.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from tsdp.accounting.claim import MechanismEvent, PrivacyClaim
from tsdp.accounting.grid import MIN_DPSGD_DISCRETIZATION  # (re-exported: verify's range)
from tsdp.errors import DataError, NumericalError, TsdpError, UsageError
from tsdp.forecast.claim import MECHANISM as DPSGD_MECHANISM

REL_TOL = 1e-9  # recomputed figures must agree to this relative precision
FLIP_MECHANISM = "FLIP all-pass filtering (McElroy, Roy & Hore 2022)"  # tsdp.flip.mechanism.MECHANISM
MEAN_ALGORITHMS = ("baseline", "array-averaging", "levy", "quantile")  # tsdp.mean.api.ALGORITHMS
DP_LEVELS = ("event", "w-event", "user")
DP_RELATIONS = ("add-remove", "substitute")


@dataclass(frozen=True)
class Check:
    """One named check of a report, passed or failed, with a one-line detail."""

    name: str
    passed: bool
    detail: str

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "passed": self.passed, "detail": self.detail}


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


# ------------------------------------------------------------------------------------------------
# entry points
# ------------------------------------------------------------------------------------------------


def check_thresholds(max_epsilon: float | None, max_delta: float | None) -> None:
    """Refuse (UsageError, exit 2) a budget that means nothing: NaN, negative, infinite, delta > 1."""
    if max_epsilon is not None and not (_is_real(max_epsilon) and math.isfinite(max_epsilon) and max_epsilon >= 0):
        raise UsageError(f"--max-epsilon must be a finite number >= 0, got {max_epsilon!r}")
    if max_delta is not None and not (_is_real(max_delta) and 0 <= max_delta <= 1):
        raise UsageError(f"--max-delta must be a number in [0, 1], got {max_delta!r}")


def verify_report(data: dict[str, Any], max_epsilon: float | None = None, max_delta: float | None = None,
                  output_sha256: str | None = None, output_note: str | None = None,
                  output_shape: dict[str, Any] | None = None, output_check: bool = True) -> ReportVerification:
    """Recheck a parsed report (validated against the schema by :func:`tsdp.report.load_report`).

    ``output_sha256`` is the digest of the released file when the caller found it (``--released``, or
    the file the report names next to it); otherwise ``output_note`` says why it was not hashed, and
    the ``output_sha256`` check fails: a report verified without its released file would pass with
    any file (or with figures edited to match another file), so leaving the output unchecked takes
    ``output_check=False`` (``--no-output-check``), which the check's detail then states.
    ``output_shape``: ``{"rows", "columns", "distinct": {column: count}}`` of that file (the first column
    and those of :func:`shape_columns`): a release's panel, mean-estimate's groups and forecast-train's
    forecasts anchor the grid, groups or series the claim is computed for.
    Raises DataError (exit 4) when ``data`` is not a report (non-finite numbers, a claim that cannot
    be parsed) and UsageError (exit 2) for a meaningless budget.
    """
    check_thresholds(max_epsilon, max_delta)
    report = _parse(data)
    claim = report.claim
    checks = [Check("schema", True, f"{data.get('schema')} report written by tsdp "
                                    f"{(data.get('tool') or {}).get('version', '?')}")]
    checks.extend(claim_checks(data, _parsed=report))
    from tsdp.accounting.compose import within_budget

    problems = within_budget(claim, max_epsilon, max_delta)
    if max_epsilon is None and max_delta is None:
        checks.append(Check("budget", True, "no --max-epsilon/--max-delta given"))
    else:
        checks.append(Check("budget", not problems, "; ".join(problems) or _budget_text(max_epsilon, max_delta)))
    checks.extend(publication_checks(data, claim))
    expected = (data.get("output") or {}).get("sha256")
    if output_sha256 is None:
        why = output_note or "no released file given"
        checks.append(Check("output_sha256", False, f"the released file is not checked: {why}; pass --released "
                                                    "FILE, or --no-output-check to verify the claim alone")
                      if output_check else
                      Check("output_sha256", True, f"not checked (--no-output-check): {why}; the claim is verified "
                                                   "without the file it covers, which could be any file"))
    else:
        same = output_sha256 == expected
        checks.append(Check("output_sha256", same, "the released file matches the report's sha256" if same else
                            f"the released file has sha256 {output_sha256[:16]}..., the report says "
                            f"{str(expected)[:16]}...: it is not the file this report covers"))
        if same and shape_columns(data) is not None:
            checks.append(_output_shape(data, claim, output_shape))
    return ReportVerification(tuple(checks))


def shape_columns(data: dict[str, Any]) -> list[str] | None:
    """The columns whose distinct values :func:`verify_report`'s ``output_shape`` check needs (besides
    the first), or None when it checks no shape. The released file fixes the panel, groups or series
    a claim is computed for (a release's series and steps, mean-estimate's groups, forecast-train's
    series and horizon), which could otherwise be rewritten together with the epsilon they give. A
    release's panel needs its rows and columns only (:func:`tsdp.api.accounting` counts them without
    numerical libraries for CSV)."""
    name = str((data.get("command") or {}).get("name"))
    if name in ("release", "mean-estimate", "forecast-train") or \
            str((data.get("claim") or {}).get("mechanism")) == DPSGD_MECHANISM:
        return []
    return None


def _output_shape(data: dict[str, Any], claim: PrivacyClaim, shape: dict[str, Any] | None) -> Check:
    """The released file's rows (and distinct keys) against the groups or series of the claim.

    ``shape``: ``{"rows", "columns", "distinct": {column: count}}`` of the released file, from the
    caller (the first column's and those of :func:`shape_columns`)."""
    if shape is None:
        return Check("output_shape", True, "not checked: the released file could not be read as a table")
    rows, columns, distinct = shape.get("rows"), list(shape.get("columns") or ()), shape.get("distinct") or {}
    grid = data.get("grid") or {}
    if str(claim.mechanism) == DPSGD_MECHANISM:
        series, horizon = claim.parameters.get("series"), claim.parameters.get("horizon")
        found = distinct.get(columns[0]) if columns else None
        ok = _is_int(series) and _is_int(horizon) and found == series and rows == series * horizon
        length = claim.parameters.get("train_length")
        return Check("output_shape", ok, f"the released forecasts hold {found} series x {horizon} steps, as the "
                                         f"claim is accounted for; the training length ({length} steps per series, "
                                         "public) is in no released file and is taken as the report states it" if ok
                     else f"the released forecasts hold {found} series in {rows} rows, but the claim is accounted "
                          f"for {series} series x {horizon} steps")
    if (data.get("command") or {}).get("name") == "mean-estimate":
        groups = grid.get("n_groups")
        ok = _is_int(groups) and rows == groups
        return Check("output_shape", ok, f"the released estimates hold the {groups} groups the claim composes" if ok
                     else f"the released estimates hold {rows} groups, but the claim composes {groups}")
    if (data.get("command") or {}).get("name") != "release":
        return Check("output_shape", True, "not checked for this command")
    S, T = grid.get("n_series"), grid.get("n_steps")
    layout = (data.get("output") or {}).get("layout")
    if not (_is_int(S) and _is_int(T)):
        return Check("output_shape", False, f"grid n_series {S!r} / n_steps {T!r} are not counts")
    if layout == "long":
        ok, seen = rows == S * T, f"{rows} rows"
    elif layout == "wide":
        ok, seen = rows == T and len(columns) == S + 1, f"{rows} steps x {len(columns) - 1} series"
    else:
        return Check("output_shape", True, f"not checked: output layout {layout!r}")
    return Check("output_shape", ok, f"the released panel holds the {S} series x {T} steps of the claim's grid" if ok
                 else f"the released panel holds {seen}, but the claim's grid is {S} series x {T} steps")


def publication_checks(data: dict[str, Any], claim: PrivacyClaim) -> list[Check]:
    """The randomness check (a seeded run) and the sampler check (floating-point noise): whether the
    release may be published at all, whatever its claim says."""
    checks = [_randomness_check(data)]
    sampler = _sampler_check(data, claim)
    return checks + ([sampler] if sampler is not None else [])


def _randomness_check(data: dict[str, Any]) -> Check:
    """Fails for a seeded run. A report states the seed's use three times: ``randomness``, the
    seeded-run warning, and ``command.parameters.seeded`` (the seed itself never); any of them saying
    "seeded", or a report without ``seeded``, fails. A report relabelled ``os-entropy`` must therefore
    be edited in all three places: verify cannot tell a report edited consistently everywhere from a
    genuine one (the released file does not show how its noise was seeded), so this check catches
    a partial edit, not a forger."""
    label = data.get("randomness")
    warned = any("fixed --seed" in str(w) for w in data.get("warnings") or ())
    command = data.get("command") if isinstance(data.get("command"), dict) else {}
    parameters = command.get("parameters") if isinstance(command.get("parameters"), dict) else {}
    recorded = parameters.get("seeded")
    if label == "seeded" or warned or recorded is True:
        said = [what for what, says in (("randomness 'seeded'", label == "seeded"),
                                        ("the seeded-run warning", warned),
                                        ("command.parameters.seeded true", recorded is True)) if says]
        edited = "" if len(said) == 3 else " (the report states it in " + ", ".join(said) + " only: it was edited)"
        return Check("randomness", False, f"the release used a fixed --seed and must not be published{edited}")
    if recorded is not False:
        return Check("randomness", False, f"command.parameters.seeded is {recorded!r}: every tsdp report records "
                                          "whether a --seed was used (true or false), so this one was edited")
    return Check("randomness", True, f"noise from {label} (no fixed --seed: the label, the warnings and "
                                     "command.parameters.seeded agree)")


def _sampler_check(data: dict[str, Any], claim: PrivacyClaim) -> Check | None:
    """Fails for ``--sampler float`` (output that must not be published, like a seeded run's);
    passes, naming the exposure, for a report of an earlier version whose mechanism had no hardened
    sampler yet (forecast-train: its claim states ``sampler: float`` and the ``float_noise_reason``
    of that version: the guarantee is that of the ideal continuous mechanism, and the
    floating-point exposure is stated, not hidden); passes for the
    hardened sampler, naming what (if anything) stays floating-point besides the noise
    (LEVY/QUANTILE's selection). None when the report states no sampler (commands without noise,
    and reports older than the hardened sampler)."""
    from tsdp.accounting.discrete import FLOAT_ONLY, FLOAT_ONLY_EARLIER
    from tsdp.forecast.claim import MECHANISM as DPSGD

    params = claim.parameters or {}
    stated = params.get("sampler")
    explicit = any("--sampler float" in str(w) for w in data.get("warnings") or ())
    reason = params.get("float_noise_reason")
    path = {DPSGD: "forecast-train"}.get(claim.mechanism)
    known = (*FLOAT_ONLY.get(path, ()), *FLOAT_ONLY_EARLIER.get(path, ())) if path is not None else ()
    if path is not None and reason is not None and (stated != "float" or reason not in known):
        # earlier versions drew floating-point noise only here and said why: a report that states
        # another reason, or that reason with another sampler, was edited
        return Check("sampler", False, f"{claim.mechanism} reports of earlier versions state sampler 'float' with "
                                       f"their float_noise_reason, but this report states sampler {stated!r} and "
                                       f"float_noise_reason {'as recorded' if reason in known else repr(reason)}")
    if explicit or (stated == "float" and reason is None):
        return Check("sampler", False, "the noise was drawn by floating-point samplers (--sampler float); their "
                                       "low-order bits can reveal the input (Mironov 2012), so the output must not "
                                       "be published")
    if stated == "float":
        return Check("sampler", True, f"not hardened: the mechanism has no hardened sampler yet, because {reason}; "
                                      "its floating-point noise is exposed to attacks on low-order bits (Mironov "
                                      "2012), which the report states")
    if stated == "hardened":
        detail = "exact discrete noise on a power-of-two lattice (hardened sampler)"
        selection = str(params.get("selection_sampler") or "")
        edited = _edited_selection(claim.mechanism, params)
        if edited:
            return Check("sampler", False, edited)
        if selection.startswith("float"):
            detail += f"; not hardened: the selection step, {selection}"
        elif selection:
            detail += f"; the selection step: {selection}"
        return Check("sampler", True, detail)
    return None


def _edited_selection(mechanism: str, params: dict) -> str | None:
    """What a hardened mean-estimate report states about its selection step that the run cannot have
    written: LEVY and QUANTILE sample it exactly (QUANTILE on the lattice its public bounds fix), the
    other algorithms have none. None when the statement is the one the run writes."""
    if not mechanism.startswith("user-level-mean/"):
        return None
    from tsdp.mean.api import EXACT_EM, EXACT_QUANTILE
    from tsdp.mean.lattice_quantile import selection_lattice

    algorithm = mechanism.split("/", 1)[1]
    want = {"levy": "exact: " + EXACT_EM, "quantile": "exact: " + EXACT_QUANTILE}.get(algorithm)
    if params.get("selection_sampler") != want:
        return (f"the report states selection_sampler {params.get('selection_sampler')!r}, but a hardened "
                f"{algorithm} run states {want!r}: the report was edited")
    if algorithm == "quantile":
        try:
            lattice = selection_lattice(float(params["lower"]), float(params["U"]))
        except (KeyError, TypeError, ValueError):
            lattice = None
        if params.get("selection_lattice") != lattice:
            return (f"the report states selection_lattice {params.get('selection_lattice')!r}, but the public "
                    f"bounds [lower, U] fix it at {lattice!r}: the report was edited")
    return None


def claim_checks(data: dict[str, Any], _parsed: "_Report | None" = None) -> list[Check]:
    """The checks of the claim alone (mechanism, definition, bound, unit, events, parameters,
    privacy loss): what ``tsdp account compose`` requires of every report it composes."""
    report = _parsed or _parse(data)
    selected = _bound_selection(report)
    if selected is not None:  # caps chosen privately: the release part is checked at its own epsilon
        report, selection = selected
        return [*_rule_checks(report), selection]
    return _rule_checks(report)


def _rule_checks(report: "_Report") -> list[Check]:
    """The mechanism rule's checks of a claim (:func:`claim_checks` without the caps' selection)."""
    claim = report.claim
    checks = []
    rule = _stream_rule(report) or _rule_for(claim.mechanism)
    if rule is None:
        known = ", ".join(sorted(k for k in RULES if not k.startswith("user-level-mean/")))
        known += ", user-level-mean/<algorithm>"
        checks.append(Check("mechanism", False, f"no rule rechecks claims of mechanism {claim.mechanism!r} "
                                                f"(known: {known})"))
        return checks
    checks.append(Check("mechanism", True, f"{claim.mechanism}: {rule.describes}"))
    checks.append(Check("bound", claim.bound == "upper",
                        "the claim is an upper bound" if claim.bound == "upper"
                        else "the claim is a LOWER bound, which is not a privacy guarantee"))
    out = _Outcome()
    try:
        rule.check(report, out)
    except Exception as exc:  # tampered figures of the wrong type or range: fail closed, never crash
        out.group("parameters").fail(f"cannot recheck the claim ({type(exc).__name__}: {exc})")
    if out.definition is not None:
        want = out.definition
        checks.append(Check("definition", claim.definition == want, _definition_text(claim, want)))
    for name in ("unit", "events", "parameters", "privacy_loss", "command"):
        checks.append(out.group(name).result(name))
    theorem = _theorem_check(claim, report.params)
    if theorem is not None:
        checks.append(theorem)
    return checks


def _bound_selection(r: "_Report") -> "tuple[_Report, Check] | None":
    """(the release part of a report whose caps were chosen privately, the check of the selection),
    or None for a report without ``--max-per-step auto``/``--max-steps auto``, selection events or
    a ``bound_selection`` record (:mod:`tsdp.mechanisms.bounds`).

    The release part is the claim at ``release_epsilon`` without the ``exponential`` events, for the
    command line with the chosen caps: every mechanism rule rechecks it as a release of its own. The
    selection must be what the recorded options give: the share and quantile, the epsilon split
    evenly over the caps chosen, the public candidate grids, one exponential event per cap with
    score sensitivity b and noise 2 b / epsilon, a chosen cap among the candidates, the total epsilon
    the release's plus the selection's (basic composition) and equal to --epsilon, and the theorem
    named."""
    from dataclasses import replace

    from tsdp.mechanisms import bounds

    c, cmd = r.claim, r.command
    record = r.params.get("bound_selection")
    auto = [cap for cap in bounds.CAPS if cmd.get(cap) == "auto"]
    has_events = any(e.kind == "exponential" for e in c.events)
    if record is None and not auto and not has_events:
        return None
    g = _Group()
    if not isinstance(record, dict) or not auto:
        g.fail("the claim records a private choice of the caps, but the command asked for none "
               "(--max-per-step/--max-steps auto)" if not auto else "the command asked for caps chosen "
               "privately (auto), but the claim records no bound_selection")
        return r, g.result("bound_selection")
    try:
        release_epsilon = float(record["release_epsilon"])
        share = cmd.get("bound_selection_share")
        share = bounds.DEFAULT_SHARE * len(auto) if share is None else float(share)
        q = bounds.quantile_fraction(bounds.DEFAULT_QUANTILE if cmd.get("bound_quantile") is None
                                     else cmd["bound_quantile"])
        epsilon = float(cmd["epsilon"])
        n_steps = int(r.grid["n_steps"])
        choices = {cap: record[cap] for cap in auto}
        chosen = {cap: int(choice["chosen"]) for cap, choice in choices.items()}
    except (KeyError, TypeError, ValueError) as exc:
        g.fail(f"the bound_selection record or the command is malformed ({type(exc).__name__}: {exc})")
        return r, g.result("bound_selection")
    spent = epsilon * share
    g.equal("command.layout (auto caps need raw events)", cmd.get("layout"), "events")
    g.equal("caps chosen (bound_selection)", sorted(k for k in record if k in bounds.CAPS), sorted(auto))
    g.same("bound_selection.share", record.get("share"), share)
    g.same("bound_selection.epsilon (share x --epsilon)", record.get("epsilon"), spent)
    g.same("bound_selection.release_epsilon (--epsilon minus the selection's)", release_epsilon, epsilon - spent)
    g.same("claim epsilon (release + selection, basic composition)", c.epsilon, release_epsilon + spent)
    for cap, choice in choices.items():
        grid = bounds.grid_for(cap, n_steps)
        g.equal(f"bound_selection.{cap}.candidates (the public grid)", choice.get("candidates"), list(grid))
        g.expect(chosen[cap] in grid, f"bound_selection.{cap}.chosen {chosen[cap]} is not a candidate")
        g.equal(f"bound_selection.{cap}.quantile_fraction", choice.get("quantile_fraction"),
                f"{q.numerator}/{q.denominator}")
        g.same(f"bound_selection.{cap}.epsilon", choice.get("epsilon"), spent / len(auto))
    want = [bounds.selection_event(spent / len(auto), q) for _ in auto]
    got = [e for e in c.events if e.kind == "exponential"]
    g.expect(len(got) == len(want) and all(
        (e.count, e.kind) == (w.count, w.kind) and _close(e.sensitivity, w.sensitivity)
        and _close(e.noise, w.noise) for e, w in zip(got, want)),
        f"the claim's exponential events {[(e.sensitivity, e.noise, e.count) for e in got]} are not the "
        f"selections' {[(w.sensitivity, w.noise, w.count) for w in want]}")
    g.expect(bounds.THEOREM in (c.theorem or ""), "the theorem does not name the private choice of the caps")
    if len(got) < len(c.events):  # the whole claim from all its events (tsdp.accounting.compose.events_privacy)
        from tsdp.accounting.compose import events_privacy

        ok, detail = events_privacy(c.events, c.definition, c.epsilon, c.delta)
        g.expect(ok, f"the events do not give the claim: {detail}")
    if not g.problems:
        g.ok(f"{', '.join(f'{cap} {chosen[cap]}' for cap in auto)} chosen with epsilon {spent:g} "
             f"(quantile {q}); total epsilon {c.epsilon:g} = release {release_epsilon:g} + selection {spent:g}")
    release = replace(c, epsilon=release_epsilon, events=tuple(e for e in c.events if e.kind != "exponential"),
                      parameters={k: v for k, v in c.parameters.items() if k != "bound_selection"})
    command = {**cmd, "epsilon": release_epsilon, **chosen, "bound_selection_share": None, "bound_quantile": None}
    data = {**r.data, "claim": release.to_dict(),
            "command": {**(r.data.get("command") or {}), "parameters": command}}
    return _Report(data, release, release.parameters, r.grid, command), g.result("bound_selection")


# The theorem each mechanism's claim rests on, as words every report of it has named (the subsampling
# and DP-SGD rules compare their theorem inside the rule): any one of each tuple must appear.
_THEOREM_WORDS: dict[str, tuple[tuple[str, ...], ...]] = {
    "gaussian": (("Balle and Wang 2018, Theorem 8", "Dwork and Roth 2014, Theorem A.1"),),
    "laplace": (("Dwork and Roth 2014, Theorem 3.6 (Laplace mechanism)", "discrete Laplace on the granularity lattice"),),
    "dft": (("Rastogi and Nath 2010, FPA_k",),),
    "fast": (("Fan and Xiong 2012, Theorem 2",),),
    "user-level-mean": (("Gupta et al. 2024 Thm. II.1",),),
    FLIP_MECHANISM: (("McElroy, Roy & Hore (2022)",),),
}
_HARDENED_GAUSSIAN_WORDS = "discrete Gaussian on the granularity lattice"


def _theorem_check(claim: PrivacyClaim, params: dict[str, Any]) -> Check | None:
    """Whether ``claim.theorem`` names the theorem its mechanism's figures were rechecked by (a
    report edited to name another, or none, fails); None for rules that compare it themselves."""
    words = _THEOREM_WORDS.get(claim.mechanism.split("/", 1)[0])
    if words is None:
        return None
    needed = list(words)
    if claim.mechanism in ("gaussian", "dft", "fast") and params.get("sampler") == "hardened" \
            and claim.definition == "approx-dp":
        needed.append((_HARDENED_GAUSSIAN_WORDS,))
    text = claim.theorem or ""
    missing = [" or ".join(repr(w) for w in options) for options in needed if not any(w in text for w in options)]
    if missing:
        return Check("theorem", False, f"the claim names {text!r}, not the theorem its figures rest on "
                                       f"(it must name {'; and '.join(missing)})")
    return Check("theorem", True, text)


# ------------------------------------------------------------------------------------------------
# parsing
# ------------------------------------------------------------------------------------------------


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


# ------------------------------------------------------------------------------------------------
# collecting the outcome of a rule
# ------------------------------------------------------------------------------------------------


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


# ------------------------------------------------------------------------------------------------
# shared pieces
# ------------------------------------------------------------------------------------------------


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
    if not unit.expect(u.level in DP_LEVELS, f"level {u.level!r} is not a DP unit ({', '.join(DP_LEVELS)})"):
        return None
    if not unit.expect(u.relation in DP_RELATIONS, f"relation {u.relation!r} is not one of {', '.join(DP_RELATIONS)}"):
        return None
    try:
        bounds = ContributionBounds(u.level, u.max_per_step, u.max_steps, u.w, u.series_per_unit, u.relation)
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
    _release_command(r, out, S, T)
    return bounds, S, T


def _command_name(r: _Report, out: _Outcome, name: str) -> _Group:
    g = out.group("command")
    command = r.data.get("command") if isinstance(r.data.get("command"), dict) else {}
    g.equal("command.name", command.get("name"), name)
    return g


def _release_command(r: _Report, out: _Outcome, S: int, T: int) -> None:
    """The claim is the one the recorded ``tsdp release`` command line asks for."""
    g = _command_name(r, out, "release")
    cmd, u, c = r.command, r.claim.unit, r.claim
    mechanism = cmd.get("mechanism")
    fallback = (mechanism in ("subsample", "filter-subsample") and c.mechanism == "gaussian"
                and cmd.get("sampling_rate") == 1)  # p = 1: the plain Gaussian mechanism is released
    if not fallback:
        g.equal("claim mechanism (--mechanism)", c.mechanism, mechanism)
    g.equal("unit.level (--unit)", u.level, cmd.get("unit"))
    g.equal("unit.relation (--neighbouring)", u.relation, cmd.get("neighbouring"))
    g.equal("unit.w (--w)", u.w, cmd.get("w"))
    if cmd.get("assume_none"):
        g.equal("unit.max_steps (--assume-none sets I = T)", u.max_steps, T)
    else:
        g.equal("unit.max_steps (--max-steps)", u.max_steps, cmd.get("max_steps"))
    enforced = cmd.get("layout") == "events"
    g.equal("unit.enforced (tsdp enforces the bounds of event input only)", u.enforced, enforced)
    value_bound = cmd.get("value_bound")
    if enforced:  # the enforced cell bound: at most M events (1 at event level) of value at most V
        per_cell = 1 if u.level == "event" else cmd.get("max_per_step")
        if g.expect(_is_real(per_cell) and (value_bound is None or _is_real(value_bound)),
                    f"--max-per-step {per_cell!r} / --value-bound {value_bound!r} are not numbers"):
            g.same("unit.max_per_step (enforced cell bound)", u.max_per_step, per_cell * (value_bound or 1.0))
    else:
        g.same("unit.max_per_step (--max-per-step)", u.max_per_step, cmd.get("max_per_step"))
    g.equal("unit.id_column (--user-col)", u.id_column, cmd.get("user_col"))
    per_user = cmd.get("series_per_user")
    want = 1 if u.level == "event" else (min(per_user, S) if _is_int(per_user) else S)
    g.equal("unit.series_per_unit (--series-per-user)", u.series_per_unit, want)
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


# ------------------------------------------------------------------------------------------------
# per-mechanism rules
# ------------------------------------------------------------------------------------------------


def _gaussian(r: _Report, out: _Outcome) -> None:
    _cellwise(r, out, "gaussian")


def _laplace(r: _Report, out: _Outcome) -> None:
    _cellwise(r, out, "laplace")


def _lattice(r: _Report, p, value: float) -> tuple[str, float | None] | None:
    """``(sampler, granularity or None)`` stated by the report, or None when malformed.

    A report without ``parameters.sampler`` predates the hardened sampler: float. For the hardened
    one the granularity must be a positive power of two and the noise ``value`` must span at least
    :data:`tsdp.accounting.discrete.MIN_LATTICE_SCALE` steps of it.
    """
    from tsdp.accounting import discrete as disc

    sampler = r.params.get("sampler", "float")
    if not p.expect(sampler in disc.SAMPLERS, f"parameters.sampler is {sampler!r}, not hardened or float"):
        return None
    if sampler == "float":
        return sampler, None
    g = r.params.get("granularity")
    if not p.expect(_is_real(g) and g > 0 and math.frexp(g)[0] == 0.5,
                    f"parameters.granularity is {g!r}, not a positive power of two"):
        return None
    g = float(g)
    p.expect(value / g >= disc.MIN_LATTICE_SCALE,
             f"the noise spans {value / g:.3g} lattice steps, fewer than {disc.MIN_LATTICE_SCALE:g}")
    return sampler, g


def _stated_slack(r: _Report, p, sigma: float, g: float, coords: int) -> None:
    """A hardened Gaussian report's ``rounding_slack`` must be the one its sigma, lattice and changed values
    give: ``(1 + e^eps) coords 0.025 (g / sigma)^2`` (:mod:`tsdp.accounting.discrete`)."""
    from tsdp.accounting.discrete import MIN_LATTICE_SCALE, rounding_slack, slack_rate

    if sigma / g >= MIN_LATTICE_SCALE:  # (a coarser lattice is reported by _lattice)
        p.same("parameters.rounding_slack", r.params.get("rounding_slack"),
               rounding_slack(r.claim.epsilon, slack_rate(sigma / g, coords)))


def _cellwise(r: _Report, out: _Outcome, noise: str) -> None:
    """The Gaussian or Laplace mechanism on every cell of the panel, float or hardened sampler.

    Hardened (``parameters.sampler`` is ``hardened``): the cells are rounded to multiples of the
    stated granularity (a power of two) and the sensitivity covers that rounding
    (:mod:`tsdp.accounting.discrete`): L2 + g sqrt(cells), or cells x (floor(M/g) + 1) g for L1.
    """
    from tsdp.accounting import discrete as disc

    gaussian = noise == "gaussian"
    out.definition = "approx-dp" if gaussian else "pure-dp"
    found = _release_unit(r, out)
    value = _noise(r, "sigma" if gaussian else "scale", out)
    if found is None or value is None:
        return
    bounds, S, T = found
    cells = bounds.cells(S, T)
    sens = bounds.l2(S, T) if gaussian else bounds.l1(S, T)
    norm = "l2" if gaussian else "l1"
    p = out.group("parameters")
    p.same(f"parameters.{norm}_sensitivity", r.params.get(f"{norm}_sensitivity"), sens)
    p.equal("parameters.cells_per_unit", r.params.get("cells_per_unit"), cells)
    lattice = _lattice(r, p, value)
    if lattice is None:
        return
    sampler, g = lattice
    if g is not None:
        if gaussian:
            step, sens = None, disc.rounded_l2(sens, cells, g)
            _stated_slack(r, p, value, g, cells)
        else:
            step = disc.rounded_step(bounds.max_per_step, g)
            sens = cells * step
        p.same(f"parameters.rounded_{norm}_sensitivity", r.params.get(f"rounded_{norm}_sensitivity"), sens)
    if not p.problems:
        lattice = f" rounded to multiples of {g:g}" if sampler == "hardened" else ""
        p.ok(f"{'sigma' if gaussian else 'scale'} {value:.6g} on an {norm.upper()} sensitivity of {sens:.6g} "
             f"({cells} cells{lattice}; {sampler} sampler)")
    if sampler == "hardened":
        event = (MechanismEvent("discrete-gaussian", sens, value, 1, granularity=g, lattice_coords=cells) if gaussian else
                 MechanismEvent("discrete-laplace", step, value, cells, granularity=g))
    else:
        event = (MechanismEvent("gaussian", sens, value, 1) if gaussian else
                 MechanismEvent("laplace", bounds.max_per_step, value, cells))
    _expect_events(r, out, (event,), "one Gaussian mechanism on the panel" if gaussian else "Laplace noise on every cell")
    _events_loss(r, out)


def _dft(r: _Report, out: _Outcome) -> None:
    from tsdp.mechanisms.dft import laplace_l1

    found = _release_unit(r, out)
    noise = r.params.get("noise")
    out.definition = {"gaussian": "approx-dp", "laplace": "pure-dp"}.get(noise, "approx-dp")
    p = out.group("parameters")
    if not p.expect(noise in ("gaussian", "laplace"), f"parameters.noise is {noise!r}, not gaussian or laplace"):
        return
    if found is None:
        return
    bounds, S, T = found
    k = r.params.get("k")
    if not p.expect(_is_int(k) and 1 <= k <= T // 2 + 1, f"parameters.k is {k!r}, not in [1, {T // 2 + 1}]"):
        return
    n_real = 2 * k - 1 - (1 if T % 2 == 0 and k == T // 2 + 1 else 0)  # DC (and Nyquist) are real
    series_l2, touched = bounds.l2(1, T), bounds.series_touched(S)
    changed = bounds.series_changed(S, T)
    p.equal("parameters.kept_real_coefficients", r.params.get("kept_real_coefficients"), n_real)
    p.same("parameters.series_l2_sensitivity", r.params.get("series_l2_sensitivity"), series_l2)
    p.equal("parameters.series_per_unit", r.params.get("series_per_unit"), touched)
    p.equal("parameters.series_changed", r.params.get("series_changed"), changed)
    coords = n_real * changed  # hardened: each rounded kept number adds at most g to the change
    if noise == "gaussian":
        sigma = _noise(r, "sigma", out)
        lattice = None if sigma is None else _lattice(r, p, sigma)
        if lattice is None:
            return
        l2 = series_l2 * math.sqrt(touched)
        p.same("parameters.l2_sensitivity", r.params.get("l2_sensitivity"), l2)
        gran = lattice[1]
        if gran is None:
            event = MechanismEvent("gaussian", l2, sigma, 1)
        else:
            covered = l2 + gran * math.sqrt(coords)
            p.same("parameters.rounded_l2_sensitivity", r.params.get("rounded_l2_sensitivity"), covered)
            _stated_slack(r, p, sigma, gran, coords)
            event = MechanismEvent("discrete-gaussian", covered, sigma, 1, granularity=gran, lattice_coords=coords)
        _expect_events(r, out, (event,), "Gaussian noise on the first k coefficients (Parseval)")
        _events_loss(r, out)
        return
    scale = _noise(r, "scale", out)
    lattice = None if scale is None else _lattice(r, p, scale)
    if lattice is None:
        return
    l1 = laplace_l1(bounds, S, T, n_real)
    p.same("parameters.l1_sensitivity", r.params.get("l1_sensitivity"), l1)
    if lattice[1] is not None:
        l1 += lattice[1] * coords
        p.same("parameters.rounded_l1_sensitivity", r.params.get("rounded_l1_sensitivity"), l1)
    _expect_events(r, out, (), "the Laplace DFT claims pure epsilon from its parameters")
    g = out.group("privacy_loss")
    needed = l1 / scale
    if g.expect(r.claim.epsilon >= needed * (1 - REL_TOL),
                f"Laplace scale {scale:.6g} on L1 sensitivity {l1:.6g} gives epsilon {needed:.6g}, more than the "
                f"claimed {r.claim.epsilon:g}") and \
            g.expect(r.claim.epsilon <= needed * (1 + REL_TOL),  # scale = L1 / epsilon exactly
                     f"Laplace scale {scale:.6g} on L1 sensitivity {l1:.6g} gives epsilon {needed:.6g}, not the "
                     f"claimed {r.claim.epsilon:g}: the scale is not the one the claim used"):
        rounding = "" if lattice[1] is None else f" + {lattice[1]:g} x {coords} (rounding)"
        g.ok(f"Laplace scale {scale:.6g} on L1 = sqrt({n_real}) x the L2 change of each of up to {changed} "
             f"series{rounding} = {l1:.6g} gives "
             f"epsilon {needed:.6g} (claimed {r.claim.epsilon:g})")


def _fast(r: _Report, out: _Outcome) -> None:
    from tsdp.accounting.discrete import rounded_step
    from tsdp.mechanisms.fast import changed_samples

    found = _release_unit(r, out)
    noise = r.params.get("noise")
    out.definition = {"gaussian": "approx-dp", "laplace": "pure-dp"}.get(noise, "approx-dp")
    p = out.group("parameters")
    if not p.expect(noise in ("gaussian", "laplace"), f"parameters.noise is {noise!r}, not gaussian or laplace"):
        return
    if found is None:
        return
    bounds, S, T = found
    u = r.claim.unit
    dq = u.max_per_step * (2.0 if u.relation == "substitute" else 1.0)
    m = r.params.get("max_samples_M")
    if not p.expect(_is_int(m) and 1 <= m <= T, f"parameters.max_samples_M is {m!r}, not in [1, T={T}]"):
        return
    if r.params.get("variant") == "fixed":
        interval = r.params.get("interval")
        if p.expect(_is_int(interval) and 1 <= interval <= T, f"parameters.interval is {interval!r}, not in [1, {T}]"):
            p.equal("parameters.max_samples_M (fixed sampling: ceil(T / interval))", m, -(-T // interval))
    else:
        p.equal("parameters.variant", r.params.get("variant"), "adaptive")
    c = min(m, bounds.steps_per_series(T))  # samples of one series that can fall on changed cells
    touched = bounds.series_reach(S, T)
    fixed = r.params.get("interval") if r.params.get("variant") == "fixed" else None
    n_hit = changed_samples(bounds, S, T, m, fixed if _is_int(fixed) and fixed >= 1 else None)
    most = max(min(m, cells) for _, cells in bounds.series_spread(S, T))
    p.equal("parameters.samples_per_unit", r.params.get("samples_per_unit"), c)
    p.equal("parameters.samples_on_changed_cells", r.params.get("samples_on_changed_cells"), n_hit)
    p.same("parameters.sensitivity_per_timestamp", r.params.get("sensitivity_per_timestamp"), dq)
    p.equal("parameters.series_length_T", r.params.get("series_length_T"), T)
    p.equal("parameters.composition.series_per_unit", _param(r, "composition", "series_per_unit"), touched)
    epsilon = r.claim.epsilon
    p.same("parameters.epsilon_per_series", r.params.get("epsilon_per_series"), epsilon * most / n_hit)
    scale = _noise(r, "scale" if noise == "laplace" else "sigma", out)
    lattice = None if scale is None else _lattice(r, p, scale)
    if lattice is None:
        return
    gran = lattice[1]
    # hardened: a rounded sample moves by at most (floor(Delta_q / g) + 1) g; under substitution
    # twice that (a cell both units change, or two cells), on up to 2 n samples
    factor = 2 if u.relation == "substitute" else 1
    step = dq if gran is None else factor * rounded_step(u.max_per_step, gran)
    coords = factor * n_hit
    if noise == "laplace":
        p.same("parameters.epsilon_per_sample", r.params.get("epsilon_per_sample"), epsilon / n_hit)
        variance = 2.0 * scale * scale
        if gran is None:
            events = (MechanismEvent("laplace", dq, scale, n_hit),)
        else:
            p.same("parameters.rounded_l1_sensitivity", r.params.get("rounded_l1_sensitivity"), step * n_hit)
            events = (MechanismEvent("discrete-laplace", step, scale, n_hit, granularity=gran),)
        how = (f"Laplace samples: at most {n_hit} on the cells one unit changes (c = min(M, steps) = {c} per "
               f"series, over up to {touched} series)")
    else:
        l2 = dq * math.sqrt(n_hit)
        p.same("parameters.l2_sensitivity", r.params.get("l2_sensitivity"), l2)
        variance = scale * scale
        if gran is None:
            events = (MechanismEvent("gaussian", l2, scale, 1),)
        else:
            covered = step * math.sqrt(n_hit)
            p.same("parameters.rounded_l2_sensitivity", r.params.get("rounded_l2_sensitivity"), covered)
            _stated_slack(r, p, scale, gran, coords)
            events = (MechanismEvent("discrete-gaussian", covered, scale, 1, granularity=gran,
                                     lattice_coords=coords),)
        how = f"Gaussian samples: Delta_q sqrt(n), n = {n_hit} samples on changed cells (c = {c}, up to {touched} series)"
    if gran is not None:
        how += f"; {lattice[0]} sampler, values rounded to multiples of {gran:g}"
    if str(r.params.get("R_mode", "")).startswith("auto"):
        p.same("parameters.R (auto: the variance of the DP noise)", r.params.get("R"), variance)
    _expect_events(r, out, events, how)
    _events_loss(r, out)


def _koga_geometry(r: _Report, out: _Outcome, mechanism: str):
    """``(bounds, S, T, I, M, n, p, sigma)`` of a subsampling claim, or None: I the unit's changed
    cells over the n series they can lie in (:meth:`ContributionBounds.changed_cells`)."""
    from tsdp.accounting import timesubsampling as ts

    found = _release_unit(r, out)
    p = out.group("parameters")
    p.equal("parameters.mechanism", r.params.get("mechanism"), mechanism)
    rate = _param(r, "subsampling", "p")
    sigma = _noise(r, "sigma", out)
    if found is None or sigma is None:
        return None
    if not p.expect(_is_real(rate) and 0 < rate < 1, f"parameters.subsampling.p is {rate!r}, not in (0, 1)"):
        return None
    bounds, S, T = found
    p.same("parameters.subsampling.probability_empty ((1 - p)^T)", _param(r, "subsampling", "probability_empty"),
           ts.empty_probability(T, float(rate)))
    u = r.claim.unit
    if u.level == "user":
        out.group("unit").expect(u.max_steps <= T, f"max_steps I = {u.max_steps} exceeds the series length T = {T} "
                                                   "(Assumption 1 needs I <= T)")
    n, I = bounds.changed_cells(S, T)
    M = float(u.max_per_step)
    assumption = r.params.get("assumption") if isinstance(r.params.get("assumption"), dict) else {}
    p.equal("parameters.assumption.I", assumption.get("I"), bounds.steps_per_series(T))
    p.equal("parameters.assumption.I_effective", assumption.get("I_effective"), I)
    p.equal("parameters.assumption.series", assumption.get("series"), n)
    p.same("parameters.assumption.M", assumption.get("M"), M)
    p.equal("parameters.assumption.T", assumption.get("T"), T)
    return bounds, S, T, I, M, n, float(rate), sigma


def _koga_lattice(r: _Report, p, sigma: float):
    """The granularity of a hardened subsampling release, None for the float sampler, False when
    the stated sampler is malformed (:func:`_lattice`); the hardened claim must name the theorem."""
    lattice = _lattice(r, p, sigma)
    if lattice is None:
        return False
    if lattice[1] is not None:
        from tsdp.accounting.discrete import GAUSSIAN_THEOREM

        p.expect(GAUSSIAN_THEOREM in (r.claim.theorem or ""), "a hardened subsampling claim must name the discrete "
                                                              "Gaussian theorem its rounded sensitivities rest on")
    return lattice[1]


def _subsample(r: _Report, out: _Outcome) -> None:
    from tsdp.accounting import timesubsampling as ts
    from tsdp.accounting.discrete import rounded_step, slack_rate

    out.definition = "approx-dp"
    geometry = _koga_geometry(r, out, "subsample")
    if geometry is None:
        return
    bounds, S, T, I, M, n, rate, sigma = geometry
    p = out.group("parameters")
    p.same("parameters.noise.sigma", _param(r, "noise", "sigma"), sigma)
    g = _koga_lattice(r, p, sigma)
    if g is False:
        return
    if g is not None:
        _stated_slack(r, p, sigma, g, I)
    M_noise = M if g is None else rounded_step(M, g)  # hardened: a kept cell's change after rounding
    if g is not None:
        p.same("parameters.sensitivity.rounded_per_step", _param(r, "sensitivity", "rounded_per_step"), M_noise)
    accounting = r.params.get("accounting")
    delta = r.claim.delta
    if accounting == "exact":
        if not p.expect(_is_real(delta) and 0 < delta < 1, f"claim delta {delta!r} is not in (0, 1)"):
            return
        mix = ts.subsample_mixture(I, rate, M_noise, T, truncation=ts.MIXTURE_TRUNCATION * delta, series=n)
        event = MechanismEvent("gaussian-mixture" if g is None else "discrete-gaussian-mixture",
                               float(mix.sensitivities.max()), sigma, 1, mixture=mix.pairs(), granularity=g,
                               lattice_coords=None if g is None else I)
        p.same("parameters.sensitivity.l2_worst_case", _param(r, "sensitivity", "l2_worst_case"), M * math.sqrt(I))
        rounded = "" if g is None else f" (M' = {M_noise:.12g}: M rounded to multiples of {g:g})"
        _expect_events(r, out, (event,), f"binomial mixture over the unit's I = {I} cells in up to {n} series "
                                         f"(p = {rate:g}, each series' redraw), M sqrt(k){rounded}")
        _events_loss(r, out)
    elif accounting == "paper":
        _expect_events(r, out, (), "the paper accounting states no events")
        i_prime = _param(r, "sensitivity", "I_prime")
        if not p.expect(_is_int(i_prime) and 1 <= i_prime <= I, f"parameters.sensitivity.I_prime is {i_prime!r}, "
                                                               f"not in [1, I = {I}]"):
            return
        eps = r.claim.epsilon
        term = float(ts.corollary3_failure_term(I, i_prime, eps, rate, T, n)) if i_prime < I else 0.0
        _paper_loss(r, out, eps, M_noise * math.sqrt(i_prime), eps * math.sqrt(I / i_prime),
                    M_noise * math.sqrt(I), sigma, term, f"Corollary 3 with I' = {i_prime} over {n} series",
                    0.0 if g is None else slack_rate(sigma / g, I))
    else:
        p.fail(f"parameters.accounting is {accounting!r}, not exact or paper")


def _filter_subsample(r: _Report, out: _Outcome) -> None:
    from tsdp.accounting import timesubsampling as ts
    from tsdp.accounting.discrete import slack_rate

    out.definition = "approx-dp"
    geometry = _koga_geometry(r, out, "filter-subsample")
    if geometry is None:
        return
    bounds, S, T, I, M, n, rate, sigma = geometry
    p = out.group("parameters")
    p.same("parameters.noise.sigma", _param(r, "noise", "sigma"), sigma)
    p.same("parameters.sensitivity.l2_worst_case", _param(r, "sensitivity", "l2_worst_case"), M * math.sqrt(I))
    accounting = r.params.get("accounting")
    sigmas = _param(r, "noise", "sigma_per_series")
    smallest = min(sigmas) if accounting == "conditional" and isinstance(sigmas, list) and sigmas and \
        all(_is_real(x) and x > 0 for x in sigmas) else sigma
    g = _koga_lattice(r, p, smallest)
    if g is False:
        return
    if g is not None:
        _stated_slack(r, p, smallest, g, T * n)
    if accounting == "conditional":
        s_j = _param(r, "sensitivity", "s_J")
        sens = _param(r, "sensitivity", "l2_conditional")
        sigmas = _param(r, "noise", "sigma_per_series")
        lists = (s_j, sens, sigmas)
        if not p.expect(all(isinstance(v, list) and len(v) == S and all(_is_real(x) for x in v) for v in lists),
                        f"parameters s_J, l2_conditional and sigma_per_series must list {S} numbers"):
            return
        p.expect(all(0 <= s <= 1 + 1e-9 for s in s_j), "an s_J (spectral norm of sampled rows of a unit-norm "
                                                        "filter) is outside [0, 1]")
        p.expect(all(_close(x, M * s * math.sqrt(I)) for x, s in zip(sens, s_j)),
                 "l2_conditional is not M s_J sqrt(I) for every series")
        p.expect(all(x > 0 for x in sigmas), "a sigma_per_series is not positive")
        if g is not None:  # the filter spreads a change over a series: g sqrt(kept steps) in each touched one
            kept = _param(r, "subsampling", "n_sampled")
            rounded = _param(r, "sensitivity", "rounded_l2_conditional")
            if p.expect(isinstance(kept, list) and len(kept) == S and all(_is_int(k) and 1 <= k <= T for k in kept),
                        f"parameters.subsampling.n_sampled must list {S} sample sizes in [1, T]") and \
                    p.expect(isinstance(rounded, list) and len(rounded) == S and all(_is_real(x) for x in rounded),
                             f"parameters.sensitivity.rounded_l2_conditional must list {S} numbers") and \
                    p.expect(all(s > 0 for s in s_j), "an s_J is zero"):
                share = ts.rounding_share([M * s for s in s_j], kept, I, n, g)
                p.expect(all(_close(x, s * (1 + share)) for x, s in zip(rounded, sens)),
                         "rounded_l2_conditional is not M s_J (sqrt(I) + g sqrt(n) max_s sqrt(n_s) / (M s_J)) for "
                         "every series")
                sens = rounded
        if p.problems:
            return
        p.same("parameters.sigma", sigma, sigmas[0] if S == 1 else max(sigmas))
        worst = max(range(S), key=lambda s: sens[s])
        kind = "gaussian" if g is None else "discrete-gaussian"
        mus = [x / s for x, s in zip(sens, sigmas)]
        worst = max(range(S), key=lambda s: mus[s])
        _expect_events(r, out, (MechanismEvent(kind, float(sens[worst]), float(sigmas[worst]), 1, granularity=g,
                                               lattice_coords=None if g is None else n * T),),
                       f"the series with the largest mu, for the unit's I = {I} cells in up to {n} series jointly")
        events = r.claim.events
        if events and events[0].kind == kind:
            mu_event = events[0].sensitivity / events[0].noise
            p.expect(mu_event >= max(mus) * (1 - REL_TOL),
                     f"the event's mu {mu_event:.6g} is below the largest series mu {max(mus):.6g}")
        _events_loss(r, out)
    elif accounting == "paper":
        _expect_events(r, out, (), "the paper accounting states no events")
        L, srank = _param(r, "filter", "L"), _param(r, "filter", "srank")
        alpha = _param(r, "sensitivity", "alpha")
        if not p.expect(_is_real(L) and L > 0 and _is_real(srank) and srank >= 1,
                        f"parameters.filter L {L!r} / srank {srank!r} are not a kernel's statistics"):
            return
        if not p.expect(_is_real(alpha) and math.sqrt(rate) < alpha <= 1 and ts.tropp_condition(alpha, rate, L),
                        f"parameters.sensitivity.alpha {alpha!r} is not in (sqrt(p), 1] with alpha^2 >= p + L"):
            return
        eps = r.claim.epsilon
        term = ts.corollary2_failure_term(alpha, eps, rate, L, srank, T, n)
        # hardened: M' = M + g sqrt(n T) / (alpha sqrt(I)) covers the rounding of up to T filtered values in each
        # of the n touched series on both branches
        M_noise = M if g is None else M + g * math.sqrt(n * T) / (alpha * math.sqrt(I))
        if g is not None:
            p.same("parameters.sensitivity.rounded_per_step", _param(r, "sensitivity", "rounded_per_step"), M_noise)
        rate = 0.0 if g is None else slack_rate(sigma / g, n * T)
        _paper_loss(r, out, eps, M_noise * alpha * math.sqrt(I), eps / alpha, M_noise * math.sqrt(I), sigma,
                    term, f"Corollary 2 with alpha = {alpha:.6g} over {n} series", rate)
    else:
        p.fail(f"parameters.accounting is {accounting!r}, not conditional or paper")


def _paper_loss(r: _Report, out: _Outcome, eps_s: float, sens_success: float, eps_fail: float,
                sens_fail: float, sigma: float, term: float, how: str, rate: float = 0.0) -> None:
    """Koga et al.'s corollaries on the unit's cells jointly: (eps_s, delta_noise + term) when both
    Gaussian branches meet delta_noise under the exact profile (plus, hardened, each branch's rounding
    slack ``(1 + e^eps) rate``, :mod:`tsdp.accounting.discrete`)."""
    from tsdp.accounting import gaussian as gauss
    from tsdp.accounting.discrete import rounding_slack

    g = out.group("privacy_loss")
    d_noise = _param(r, "privacy", "delta_noise")
    if not g.expect(_is_real(d_noise) and 0 < d_noise < 1, f"parameters.privacy.delta_noise is {d_noise!r}"):
        return
    success = float(gauss.delta_for_epsilon(eps_s, sens_success / sigma)) + rounding_slack(eps_s, rate)
    failure = (float(gauss.delta_for_epsilon(eps_fail, sens_fail / sigma)) + rounding_slack(eps_fail, rate)
               if eps_fail > eps_s else 0.0)
    g.expect(success <= d_noise * (1 + REL_TOL) and failure <= d_noise * (1 + REL_TOL),
             f"the Gaussian branches give deltas {success:.3g} and {failure:.3g} > delta_noise {d_noise:.3g} at "
             f"sigma {sigma:.6g}")
    needed = d_noise + term
    delta = r.claim.delta
    if g.expect(_is_real(delta) and delta >= needed * (1 - REL_TOL),
                f"{how} gives delta {needed:.6g} at epsilon {r.claim.epsilon:g}, more than the claimed {delta}"):
        # tsdp claims exactly this delta: a larger one means a stated figure (p, I', alpha, delta_noise) was changed
        g.expect(delta <= needed * (1 + 1e-6), f"{how} gives delta {needed:.6g} from the stated parameters, not "
                                               f"the claimed {delta:g}: the parameters are not the ones the claim used")
    if not g.problems:
        g.ok(f"{how}: epsilon {eps_s:.6g}, delta {d_noise:.3g} + {term:.3g} = {needed:.6g} "
             f"(claimed {delta:g}); both Gaussian branches checked on the exact profile")


def _mean(r: _Report, out: _Outcome) -> None:
    from tsdp.mean.api import RELATIONS, neighbouring

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

    sampler = r.params.get("sampler")
    g = out.group("events")
    if sampler is None or algorithm not in ("baseline", "array-averaging"):
        _expect_events(r, out, (), "each group's estimate is accounted by its own epsilon")
        return
    if not out.group("parameters").expect(sampler in disc.SAMPLERS,
                                          f"parameters.sampler is {sampler!r}, not hardened or float"):
        return
    kind = "discrete-laplace" if sampler == "hardened" else "laplace"
    events = r.claim.events
    fixed = r.params.get("granularity")
    if not g.expect(bool(events), f"{r.claim.mechanism} must carry one {kind} event per group scale"):
        return
    for i, e in enumerate(events):
        if not g.equal(f"event {i} kind", e.kind, kind):
            continue
        g.same(f"event {i} epsilon (sensitivity / scale)", e.sensitivity / e.noise, eps)
        if sampler == "hardened":
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
    want_level = "user" if u.level == "user" else ("w-event" if w > 1 else "event")
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
        unit="user" if u.level == "user" else "event", w=w, label_noise=cmd.get("label_noise") or 0.0,
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
    c.equal("unit.level (--unit)", "user" if u.level == "user" else "event", recorded)
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


RULES: dict[str, _Rule] = {
    "gaussian": _Rule("Gaussian mechanism on the panel (L2 sensitivity of the unit)", _gaussian),
    "laplace": _Rule("Laplace mechanism on the panel (L1 sensitivity of the unit)", _laplace),
    "dft": _Rule("first k Fourier coefficients with Gaussian or Laplace noise (Rastogi and Nath)", _dft),
    "fast": _Rule("FAST: at most c = min(M, steps the unit touches) noisy samples per series (Fan and Xiong)", _fast),
    "subsample": _Rule("time subsampling with Gaussian noise (Koga et al.; exact or paper accounting)", _subsample),
    "filter-subsample": _Rule("filtered time subsampling (Koga et al.; conditional or paper accounting)",
                              _filter_subsample),
    DPSGD_MECHANISM: _Rule("DP-SGD, recomputed with tsdp.accounting.structured", _dpsgd),
    FLIP_MECHANISM: _Rule("FLIP: LIP only, never differential privacy", _flip),
    **{f"user-level-mean/{a}": _Rule("user-level means, basic composition over the groups", _mean)
       for a in MEAN_ALGORITHMS},
}


def _rule_for(mechanism: str) -> _Rule | None:
    return RULES.get(mechanism)


def _stream_rule(report: _Report) -> _Rule | None:
    """tsdp stream's reports (issue 32): their rule lives in :mod:`tsdp.verify.stream`."""
    from tsdp.verify import stream

    return _Rule(stream.DESCRIBES, stream.check) if stream.is_stream_report(report.data) else None

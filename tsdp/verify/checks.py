"""The entry points of :mod:`tsdp.verify`: a report's checks (claim, budget, publication, output) and the
generic ones every report gets (schema, randomness, sampler, unit text, theorem words)."""

from __future__ import annotations

import math
from typing import Any

from tsdp.accounting.claim import PrivacyClaim
from tsdp.errors import DataError, UsageError
from tsdp.forecast.claim import MECHANISM as DPSGD_MECHANISM
from tsdp.verify.parts import (_budget_text, Check, _close, _definition_text, FLIP_MECHANISM, _Group, _is_int,
    _is_real, _Outcome, _parse, _Report, ReportVerification)
from tsdp.verify.rules import _rule_for, _stream_rule, RULES


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
    from tsdp.mean.estimation import EXACT_EM, EXACT_QUANTILE
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


def _norm_balance(r: "_Report", release_epsilon: float, n_steps: int):
    """The public constants of --max-norm auto's score for the recorded command (the release plan's,
    :func:`tsdp.api.norm_bound.balance_of`, from the same parameters)."""
    from tsdp.mechanisms.bounds import Balance

    cmd = r.command
    keys = cmd.get("series_keys")
    n_series = len(keys.split(",") if isinstance(keys, str) else keys) if keys else 1
    steps = cmd.get("max_steps")
    return Balance.for_release(release_epsilon, float(cmd["delta"]), cmd.get("neighbouring") == "substitute",
                               n_series, n_steps, cmd.get("series_per_user"),
                               None if steps in (None, "auto") else int(steps))


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
        rule = next((k for k, text in bounds.RULES.items() if record.get("composition") == text), None)
        from tsdp.mechanisms.registry import MECHANISMS  # (loads numpy: only for a report with auto caps)

        mechanism = MECHANISMS.get(str(cmd.get("mechanism") or "gaussian"))
        exact = mechanism is not None and bounds.composes_exactly(mechanism, cmd.get("noise"))
        share = bounds.default_share(tuple(auto), exact) if share is None else float(share)
        q = bounds.quantile_fraction(bounds.DEFAULT_QUANTILE if cmd.get("bound_quantile") is None
                                     else cmd["bound_quantile"])
        epsilon = float(cmd["epsilon"])
        n_steps = int(r.grid["n_steps"])
        choices = {cap: record[cap] for cap in auto}
        chosen = {cap: (float if cap == "max_norm" else int)(choice["chosen"]) for cap, choice in choices.items()}
    except (KeyError, TypeError, ValueError) as exc:
        g.fail(f"the bound_selection record or the command is malformed ({type(exc).__name__}: {exc})")
        return r, g.result("bound_selection")
    keys = cmd.get("series_keys")
    n_series = len(keys.split(",") if isinstance(keys, str) else keys) if keys else 1
    split = bounds.Split.for_release(epsilon, cmd.get("delta"), share, len(auto), rule == bounds.EXACT,
                                     cmd.get("sampler") != "float", cmd.get("granularity"), n_series * n_steps)
    spent = split.selection_epsilon
    g.expect(rule is not None, f"bound_selection.composition {record.get('composition')!r} is not a rule tsdp uses")
    g.expect(rule != bounds.EXACT or exact, f"bound_selection.composition: exact composition applies to a Gaussian "
             f"release only, not --mechanism {cmd.get('mechanism')} --noise {cmd.get('noise')}")
    g.expect(rule != bounds.EXACT or split.rule == bounds.EXACT, "bound_selection.composition: exact composition "
             "needs a bound on the rounding slack for every cap (the float sampler, or the default lattice)")
    g.equal("command.layout (auto caps need raw events)", cmd.get("layout"), "events")
    g.equal("caps chosen (bound_selection)", sorted(k for k in record if k in bounds.CAPS), sorted(auto))
    g.same("bound_selection.share", record.get("share"), share)
    g.same("bound_selection.epsilon (share x --epsilon)", record.get("epsilon"), spent)
    g.same(f"bound_selection.release_epsilon ({rule} composition with the selections)", release_epsilon,
           split.release_epsilon)
    g.same(f"claim epsilon ({rule} composition)", c.epsilon, split.claim_epsilon(release_epsilon, epsilon))
    want = []
    for cap, choice in choices.items():
        grid = bounds.grid_for(cap, n_steps, cmd.get("value_bound"))
        g.equal(f"bound_selection.{cap}.candidates (the public grid)", choice.get("candidates"), list(grid))
        g.expect(chosen[cap] in grid, f"bound_selection.{cap}.chosen {chosen[cap]} is not a candidate")
        g.same(f"bound_selection.{cap}.epsilon", choice.get("epsilon"), spent / len(auto))
        if cap == "max_norm":
            balance = _norm_balance(r, release_epsilon, n_steps)
            for key in ("target", "weight_bound"):
                g.equal(f"bound_selection.max_norm.{key} (from the public parameters)", choice.get(key),
                        getattr(balance, key))
            want.append(bounds.exponential_event(spent / len(auto), balance.weight_bound))
        else:
            g.equal(f"bound_selection.{cap}.quantile_fraction", choice.get("quantile_fraction"),
                    f"{q.numerator}/{q.denominator}")
            want.append(bounds.selection_event(spent / len(auto), q))
    got = [e for e in c.events if e.kind == "exponential"]
    g.expect(len(got) == len(want) and all(
        (e.count, e.kind) == (w.count, w.kind) and _close(e.sensitivity, w.sensitivity)
        and _close(e.noise, w.noise) for e, w in zip(got, want)),
        f"the claim's exponential events {[(e.sensitivity, e.noise, e.count) for e in got]} are not the "
        f"selections' {[(w.sensitivity, w.noise, w.count) for w in want]}")
    g.expect(bounds.THEOREM in (c.theorem or ""), "the theorem does not name the private choice of the caps")
    if rule == bounds.EXACT:  # (numpy loads for the exact composition only)
        from tsdp.accounting import bounded_range
    g.expect(rule != bounds.EXACT or bounded_range.THEOREM in (c.theorem or ""),
             "the theorem does not name the exact composition of the selections with the release")
    if len(got) < len(c.events):  # the whole claim from all its events (tsdp.accounting.compose.events_privacy)
        from tsdp.accounting.compose import events_privacy

        ok, detail = events_privacy(c.events, c.definition, c.epsilon, c.delta)
        g.expect(ok, f"the events do not give the claim: {detail}")
    if not g.problems:
        g.ok(f"{', '.join(f'{cap} {chosen[cap]}' for cap in auto)} chosen with epsilon {spent:g} "
             f"(quantile {q}); total epsilon {c.epsilon:g}: release {release_epsilon:g} and selection {spent:g}, "
             f"{rule} composition")
    release = replace(c, epsilon=release_epsilon, events=tuple(e for e in c.events if e.kind != "exponential"),
                      parameters={k: v for k, v in c.parameters.items() if k != "bound_selection"})
    command = {**cmd, "epsilon": release_epsilon, **chosen, "bound_selection_share": None, "bound_quantile": None}
    data = {**r.data, "claim": release.to_dict(),
            "command": {**(r.data.get("command") or {}), "parameters": command}}
    return _Report(data, release, release.parameters, r.grid, command), g.result("bound_selection")


# The theorem each mechanism's claim rests on, as words every report of it has named (the subsampling
# and DP-SGD rules compare their theorem inside the rule): any one of each tuple must appear.
_THEOREM_WORDS: dict[str, tuple[tuple[str, ...], ...]] = {
    # the release mechanisms' theorem_words (tsdp.mechanisms.registry), written here so that verify loads no
    # numerical library (tests/cli/test_startup_imports.py); tests/mechanisms/test_registry.py keeps them equal
    "gaussian": (("Balle and Wang 2018, Theorem 8", "Dwork and Roth 2014, Theorem A.1"),),
    "laplace": (("Dwork and Roth 2014, Theorem 3.6 (Laplace mechanism)", "discrete Laplace on the granularity lattice"),),
    "dft": (("Rastogi and Nath 2010, FPA_k",),),
    "fast": (("Fan and Xiong 2012, Theorem 2",),),
    "user-level-mean": (("Gupta et al. 2024 Thm. II.1",),),
    FLIP_MECHANISM: (("McElroy, Roy & Hore (2022)",),),
}


_HARDENED_GAUSSIAN_WORDS = "discrete Gaussian on the granularity lattice"
# the mechanisms whose hardened Gaussian claim adds the discrete Gaussian's theorem to the words above
_NAMES_DISCRETE_GAUSSIAN = dict.fromkeys(("gaussian", "dft", "fast"), ((_HARDENED_GAUSSIAN_WORDS,),))


def _theorem_check(claim: PrivacyClaim, params: dict[str, Any]) -> Check | None:
    """Whether ``claim.theorem`` names the theorem its mechanism's figures were rechecked by (a
    report edited to name another, or none, fails); None for rules that compare it themselves."""
    words = _THEOREM_WORDS.get(claim.mechanism.split("/", 1)[0])
    if words is None:
        return None
    needed = list(words)
    if params.get("sampler") == "hardened" and claim.definition == "approx-dp":
        needed.extend(_NAMES_DISCRETE_GAUSSIAN.get(claim.mechanism, ()))
    text = claim.theorem or ""
    missing = [" or ".join(repr(w) for w in options) for options in needed if not any(w in text for w in options)]
    if missing:
        return Check("theorem", False, f"the claim names {text!r}, not the theorem its figures rest on "
                                       f"(it must name {'; and '.join(missing)})")
    return Check("theorem", True, text)

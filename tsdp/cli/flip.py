"""``tsdp flip``: FLIP all-pass filtering (McElroy, Roy & Hore 2022) with its LIP measure.

Thin: parse and validate the options (:class:`tsdp.flip.FlipSettings`), load the entity panel
(:mod:`tsdp.io.entities`), filter every series (:func:`tsdp.flip.flip_many`), and publish the output,
the report and, only when asked, the secrets file, atomically. FLIP is not differential privacy; the
report's claim has definition ``lip`` and no epsilon.
"""

from __future__ import annotations

import json
import secrets as os_secrets
from enum import Enum
from pathlib import Path
from typing import Any, Optional

import typer

from tsdp.caveats import Caveat, PrivateCaveat, is_private
from tsdp.cli import common
from tsdp.errors import BudgetError, ResourceError, UsageError
from tsdp.flip import NOT_DP, BetaMixture, FlipSettings, claim_for, flip_many
from tsdp.flip import withholding
from tsdp.flip.mechanism import DEFAULT_K
from tsdp.flip.utility import SEASONAL_PERIODS
from tsdp.io.entities import EntityPanel, load_entity_panel
from tsdp.io.files import check_output_path, read_table
from tsdp.jsonfile import loads_strict
from tsdp.report import Report

SEEDED_FLIP_WARNING = Caveat("seeded_run", "this run used a fixed --seed: anyone who knows the seed and the "
                             "estimated spectra can rebuild the filter and invert the release, so its output must "
                             "not be published")
FIXED_R_WARNING = Caveat("fixed_filter", "this run fixed R with --r-params: the filter is then a function of R and the "
                         "estimated spectra (with --lip-delta 0 no randomness is used at all, and a rerun releases "
                         "the same file), so anyone who knows or guesses R can rebuild the filter and invert the "
                         "release; its output must not be published")
SECRETS_WARNING = Caveat("secrets_written", "the secrets file holds the master seed and every filter: anyone holding "
                         "it can invert the release exactly; keep it apart from the output")
DISCLAIMER = ("LIP is a model-based, second-order, same-date measure; it is not a differential-privacy guarantee. "
              "Each released value's same-date LIP, computed for the release actually applied under the ESTIMATED "
              "spectral model (for a linear attacker who knows the auxiliary series and the released trend), is at "
              "least the claim's lip_floor; the dates below it, and the first and last --withhold-ends dates, are "
              "written empty (output.withheld). The filter is invertible by anyone who learns it; an attacker who "
              "guesses R(x) = x recovers much of the series (lip_guess_inversion), and lagged released values can "
              "predict better than the same-date value (lip_lagged_min). Second-order features (mean, trend, "
              "variance, autocorrelation, spectrum) are released essentially exactly by design. Repeated releases "
              "of the same series are not analysed (no composition result).")
CEPSTRAL_PAPER_WARNING = Caveat("flip_model", "--coef-method cepstral-paper truncates a winding phase (pitfall P1): "
                                "the filters are not exactly all-pass (each series' defect is in the custodian file); "
                                "prefer direct")
# the codes of the findings about the private data that a run may write to the custodian file
CUSTODIAN_CHECKS = ("flip_model", "flip_dates_below_floor")
CUSTODIAN_NOTE = ("the per-series figures (the LIP values, among them the lowest same-date LIP of the released dates "
                  "and the dates below the floor, the attack diagnostics, D_path, D_ACF, var_ratio, S_sup, "
                  "cond_variance_ratio, the trend moments) and every per-series warning are functions of the original "
                  "data: they are written to the custodian file, never to this report, stderr or stdout")


class FillMissing(str, Enum):
    error = "error"
    null = "null"


class Spectral(str, Enum):
    var = "var"
    flattop = "flattop"


class CoefMethod(str, Enum):
    direct = "direct"
    cepstral_unwrapped = "cepstral-unwrapped"
    cepstral_paper = "cepstral-paper"


class Boundary(str, Enum):
    extend = "extend"
    circular = "circular"


class Bound(str, Enum):
    paper = "paper"
    ks = "ks"


def flip(
    input: str = typer.Argument(..., help="CSV (.csv, .csv.gz, .tsv) or Parquet file (- for stdin), long layout: [entity,] time, values, aux."),
    time_col: str = typer.Option("time", help="Time column: ISO dates/timestamps or integers on a regular grid."),
    value_cols: str = typer.Option(..., "--value-cols", help="Sensitive column(s), comma-separated; each is filtered with its own secret filter."),
    entity_col: Optional[str] = typer.Option(None, "--entity-col", help="Entity id column [default: the whole file is one entity]."),
    aux_cols: Optional[str] = typer.Option(None, "--aux-cols", help="Auxiliary column(s) Z the attacker is assumed to know (same rows); not part of the output."),
    aux_entity: Optional[str] = typer.Option(None, help="Use this entity's value series as Z for every other entity (its rows are not part of the output)."),
    freq: Optional[str] = typer.Option(None, help="Time step, e.g. 1q, 1mo, 1d, 1h [default: inferred]."),
    timezone: Optional[str] = common.TimezoneOption,
    lip_delta: float = typer.Option(0.0, "--lip-delta", help="LIP budget delta in [0, 1): guarantees LIP >= 1 - delta (NOT a DP delta)."),
    trend_order: int = typer.Option(0, help="Order d of the polynomial trend removed before filtering and added back (0 = mean)."),
    spectral: Spectral = typer.Option(Spectral.var, help="Spectral estimator: VAR(p) or flat-top lag window."),
    var_order: str = typer.Option("aic", help="VAR order: aic (up to min(8, T/10)) or an integer."),
    cepstral_terms: Optional[int] = typer.Option(None, "--cepstral-terms", help="K: cepstral truncation, the cepstral coefficients kept (cepstral coefficient methods only) [default: 25]."),
    filter_half_length: Optional[int] = typer.Option(None, "--filter-half-length", help="M: the all-pass filter's half-length, also the padding of each end [default: min(45, T/4)]."),
    coef_method: CoefMethod = typer.Option(CoefMethod.direct, help="Filter coefficients: exact Fourier (direct) or the paper's cepstral route."),
    boundary: Boundary = typer.Option(Boundary.extend, help="extend: backcast/forecast padding (paper); circular: frequency-domain filtering."),
    bound: Bound = typer.Option(Bound.paper, help="Shift bound: eq. (12) (paper) or the sharper KS-distance bound (ks)."),
    r_components: int = typer.Option(2, help="Components J of the symmetrised Beta mixture R."),
    r_range: Optional[str] = typer.Option(None, help="Beta parameters a, b ~ U[lo, hi] as lo,hi [default: d+1,d+4]."),
    r_params: Optional[str] = typer.Option(None, help='Fixed R as JSON {"alpha": [...], "a": [...], "b": [...]} (tests and reproduction; a secret).'),
    grid: int = typer.Option(8192, help="Frequencies on [0, pi]."),
    acf_lags: int = typer.Option(24, help="Lags H of the D_ACF utility figure."),
    fill_missing: FillMissing = typer.Option(FillMissing.error, help="Gaps (dates absent from the grid, empty values): an error, or null: each series is cut at its gaps and every stretch between them is released as a series of its own (nothing is imputed; the gaps stay empty, stretches too short for FLIP are written empty)."),
    lip_floor: Optional[float] = typer.Option(None, "--lip-floor", help="The same-date LIP every released date reaches, stated by the report's claim: each date whose LIP (for the release applied) is below it is withheld (written empty), and a series with no date left is refused (exit 3) [default: 1 - lip-delta, at most 0.99]. A value below 1 - lip-delta releases dates under the theorem's bound knowingly; 0 releases every date."),
    withhold_ends: int = typer.Option(0, "--withhold-ends", help="Also write the first and last N dates of each series empty, whatever their LIP: a public rule for the dates where the taps run over backcasts and forecasts (N = M, the filter half-length, covers every date whose taps reach past an end)."),
    min_lip: Optional[float] = typer.Option(None, help="Fail (exit 3, nothing written) if a released date's same-date LIP is below this (with --lip-floor 0: refuse instead of withholding)."),
    suffix: Optional[str] = typer.Option(None, help="Keep the original value columns and add the released ones with this suffix (internal QA only)."),
    secrets: Optional[str] = typer.Option(None, "--secrets", help="Write the master seed and every filter to this JSON file (mode 0600). Anyone holding it can invert the release."),
    custodian: Optional[str] = common.CustodianOption,
    delta: Optional[float] = typer.Option(None, "--delta", hidden=True),
    epsilon: Optional[float] = typer.Option(None, "--epsilon", hidden=True),
    output: Optional[str] = common.OutputOption,
    report: Optional[str] = common.ReportOption,
    seed: Optional[int] = common.SeedOption,
    force: bool = common.ForceOption,
    json_summary: bool = common.JsonOption,
    quiet: bool = common.QuietOption,
    config: Optional[str] = common.ConfigOption,
) -> None:
    """FLIP: filter each series with a secret random all-pass filter (McElroy, Roy & Hore 2022).

    It keeps the series' autocorrelation structure. Under the estimated time-series model, it ensures
    that the released value at the same date lowers the prediction-error variance of a linear attacker
    who already knows the auxiliary series by at most a fraction delta (LIP >= 1 - delta). Every date
    whose same-date LIP, for the release actually applied, is below the floor the report states
    (--lip-floor, by default min(1 - delta, 0.99)) is written empty. It provides no
    differential-privacy guarantee.
    """
    if delta is not None:
        raise UsageError(f"--delta {delta:g}: FLIP's budget is --lip-delta (LIP >= 1 - delta); --delta means the "
                         "differential-privacy delta in other commands and FLIP has none")
    if epsilon is not None:
        raise UsageError(f"--epsilon {epsilon:g}: FLIP is not differential privacy and has no epsilon; its budget "
                         "is --lip-delta")
    params = {k: v for k, v in common.public_parameters(locals()).items()
              if k not in ("r_params", "secrets", "delta", "epsilon")}
    if cepstral_terms is not None and coef_method is CoefMethod.direct:
        raise UsageError(f"--cepstral-terms {cepstral_terms}: K applies only to the cepstral --coef-method "
                         "(cepstral-unwrapped or cepstral-paper); --coef-method direct uses no cepstrum")
    if suffix is not None and not suffix.strip():  # "" would publish nothing but the release, as without it
        raise UsageError("--suffix '': empty; give the suffix of the released columns, e.g. _flip, or leave it out")
    settings = FlipSettings(
        lip_delta=lip_delta, trend_order=trend_order, spectral=spectral.value, var_order=_var_order(var_order),
        K=DEFAULT_K if cepstral_terms is None else cepstral_terms, M=filter_half_length, coef_method=coef_method.value, boundary=boundary.value, bound=bound.value,
        r_components=r_components, r_range=_pair(r_range), r_params=_r_params(r_params), grid=grid,
        acf_lags=acf_lags, withhold=withhold_ends, floor=lip_floor,
    )
    _check_grid_memory(settings)
    if min_lip is not None and not 0 <= min_lip <= 1:
        raise UsageError(f"--min-lip {min_lip:g}: must be in [0, 1]")
    if seed is not None and seed < 0:
        raise UsageError(f"--seed must be a non-negative integer, got {seed}")
    output, report = common.resolve_outputs(input, output, report, force, json_summary)
    custodian = common.resolve_custodian(custodian, input, output, report, force)
    if secrets is not None:
        _check_secrets_path(secrets, input, output, report, custodian, force)
    console = common.Console(quiet, json_summary, stdout_taken="-" in (output, report))
    master = seed if seed is not None else os_secrets.randbits(128)

    numbers = [*(common.split_list(value_cols) or []), *(common.split_list(aux_cols) or [])]
    df = read_table(input, {time_col: "time", **({entity_col: "text"} if entity_col else {}),
                            **{c: "number" for c in numbers}})
    aux_list = common.split_list(aux_cols)
    panel = load_entity_panel(df, time_col, common.split_list(value_cols) or [], entity_col, aux_list, aux_entity,
                              freq, timezone, fill_missing.value, _filterable(settings, 1 + len(aux_list or [])))
    items = list(panel.series())
    with console.progress(len(items) + 1) as stage:
        stage(f"filtering {len(items)} series")
        results = flip_many(items, settings, master, on_series=lambda: stage("filtering"),
                            period=SEASONAL_PERIODS.get(panel.freq or ""))
        stage("writing output")
        rows = _series_rows(panel, items, results)
        _check_released(items, results, settings)
        _check_min_lip(min_lip, rows)
        # the per-series findings about the estimated model quote figures of the data (and even their presence
        # is one): custodian file only; the public ones depend on the series' lengths and the options
        findings, series_warnings = _split_series_warnings([w for r in results for w in r.warnings])
        general = (([SEEDED_FLIP_WARNING] if seed is not None else [])
                   + ([FIXED_R_WARNING] if settings.r_params is not None else [])
                   + ([SECRETS_WARNING] if secrets else [])
                   + ([CEPSTRAL_PAPER_WARNING] if settings.coef_method == "cepstral-paper" else [])
                   + ([_suffix_warning(panel.value_cols, suffix)] if suffix is not None else []))
        warnings = series_warnings + general
        released = {(entity, column): r.released for (entity, column, _, _), r in zip(items, results)}
        table = panel.released_frame(released, suffix)
        private_files = ((common.custodian_document("flip", {"lip_series": rows}, findings), custodian,
                          "--custodian"),)
        if secrets is not None:
            private_files += ((_secrets_json(master, items, results), secrets, "--secrets"),)
        claim = claim_for(settings, entity_col)
        common.publish(table, output, report, lambda described: Report(
            command="flip",
            parameters={**params, "input": common.display_name(input), "output": described["file"],
                        "secrets_written": common.display_name(secrets) if secrets else False,
                        "custodian_file": Path(custodian).name},
            claim=claim,
            output={**described, "columns": table.columns, "withheld": _withheld_pattern(panel, items, results)},
            randomness="seeded" if seed is not None else "os-entropy",
            grid={"freq": panel.freq, "entities": panel.n_entities, "series": len(items)},
            notes=_notes(panel, settings, suffix),
            warnings=warnings,
            lip={"statement": NOT_DP, "guarantee": claim.parameters["guarantee"], "disclaimer": DISCLAIMER},
        ), private_files=private_files, force=force)

    for message in warnings:
        console.warn(message)
    # the achieved LIP, D_path, D_ACF and the attack diagnostics are figures of the original series: in the
    # custodian file only (DESIGN section 2), never on stdout where CI logs keep them
    console.summary({
        "output": output, "report": report, "custodian": custodian, "secrets": secrets,
        "definition": "lip", "differential_privacy": False, "lip_budget_delta": settings.lip_delta,
        "lip_floor": settings.lip_floor,
        "series": len(rows), "accuracy": _accuracy(json_summary),
        "custodian_checks": list(CUSTODIAN_CHECKS),
    }, "tsdp flip")


def _filterable(settings: FlipSettings, q: int):
    """Whether a stretch of n dates meets FLIP's length rules (:func:`tsdp.flip.mechanism.check_length`)
    with ``q`` series in its model: a shorter stretch between gaps is written empty."""
    from tsdp.errors import DataError
    from tsdp.flip.mechanism import check_length

    def usable(n: int) -> bool:
        try:
            check_length(n, settings, q, "a stretch")
        except DataError:
            return False
        return True

    return usable


def _accuracy(json_mode: bool):
    """FLIP's accuracy line: there is no noise interval (see :func:`tsdp.accuracy.estimators.flip_filter`)."""
    from tsdp.accuracy.estimators import flip_filter
    from tsdp.cli.accuracy_options import DEFAULT_ALPHA, shown

    return shown(flip_filter(DEFAULT_ALPHA), json_mode)


def _check_grid_memory(settings: FlipSettings) -> None:
    """ResourceError (exit 5) before any work when the frequency grid would not fit in half of the
    machine's memory (a --grid of 1e9 would otherwise allocate gigabytes and be killed)."""
    from tsdp.engine.local import GIB, physical_memory
    from tsdp.flip.mechanism import grid_memory

    need, have = grid_memory(settings), physical_memory()
    if need > have // 2:
        raise ResourceError(f"--grid {settings.grid}: FLIP would need about {need / GIB:.3g} GiB for the frequency "
                            f"grid, more than half of this machine's {have / GIB:.3g} GiB; use a smaller --grid "
                            "(the default 8192 is refined automatically where the spectrum needs it)")


def _var_order(text: str) -> int | str:
    if str(text).strip().lower() == "aic":
        return "aic"
    try:
        value = int(str(text))
    except ValueError:
        raise UsageError(f"--var-order {text!r}: must be 'aic' or an integer >= 0") from None
    if value < 0:
        raise UsageError(f"--var-order {text!r}: must be 'aic' or an integer >= 0")
    return value


def _pair(text: str | None) -> tuple[float, float] | None:
    return None if text is None else common.number_pair(text, "--r-range", "1,4")


def _r_params(text: str | None) -> BetaMixture | None:
    if text is None:
        return None
    try:
        data = loads_strict(text)  # no NaN, Infinity or repeated keys; deep nesting is a RecursionError
        return BetaMixture(tuple(data["alpha"]), tuple(data["a"]), tuple(data["b"]))
    except (KeyError, TypeError, ValueError, RecursionError):
        raise UsageError('--r-params: must be JSON {"alpha": [...], "a": [...], "b": [...]} with finite '
                         "numbers") from None


def _check_secrets_path(path: str, input: str, output: str, report: str, custodian: str, force: bool) -> None:
    if path == "-":
        raise UsageError("--secrets -: the secrets go to a file only, never to stdout")
    for other, option in ((output, "--output"), (report, "--report"), (custodian, "--custodian")):
        if other != "-" and Path(other).resolve() == Path(path).resolve():
            raise UsageError(f"--secrets must differ from {option}")
    check_output_path(path, force, (input,), "--secrets")


def _split_series_warnings(warnings: list[str]) -> tuple[list[PrivateCaveat], list[Caveat]]:
    """(findings for the custodian file, public warnings) among the series' warnings. Fail closed: only
    a public :class:`Caveat` (one about a series' length or the options) is printed and reported; any
    other text is taken for a finding about the data."""
    public = [w for w in warnings if isinstance(w, Caveat) and not is_private(w)]
    findings = [w if is_private(w) else PrivateCaveat("flip_model", w) for w in warnings
                if not (isinstance(w, Caveat) and not is_private(w))]
    return findings, public


def _series_rows(panel: EntityPanel, items, results) -> list[dict[str, Any]]:
    rows = []
    aux = ([str(panel.aux_entity)] if panel.aux_entity is not None else list(panel.aux_cols))
    for (entity, column, _, _), result in zip(items, results):
        rows.append({"entity": entity, "column": column, "aux": aux,
                     "aux_entity": panel.aux_entity, **result.diagnostics, "warnings": result.warnings})
    return rows


def _check_released(items, results, settings: FlipSettings) -> None:
    """BudgetError (exit 3, nothing written) when a series has no date whose same-date LIP reaches the
    floor: a release that withholds the whole series publishes nothing of it. The message names the
    series and the options, never a figure of the data."""
    for (entity, column, _, _), result in zip(items, results):
        if not result.released_dates.any():
            where = f"entity {entity!r}, column {column!r}" if entity is not None else f"column {column!r}"
            default = "" if settings.floor is not None else ", by default min(1 - --lip-delta, 0.99)"
            raise BudgetError(
                f"{where}: no date reaches the same-date LIP floor {settings.lip_floor:g} (--lip-floor{default}) "
                "outside the dates --withhold-ends withholds, so the whole series would be withheld; nothing was "
                "written. --lip-floor F releases the dates at or above a lower floor F knowingly (the claim then "
                "states F), and --lip-floor 0 releases every date, with the figures of each series in the custodian file; "
                f"the attacker is given the released trend (--trend-order {settings.trend_order}), and a trend order "
                "whose residual is closer to stationary, or a longer series, often raises the per-date LIP")


def _check_min_lip(min_lip: float | None, rows: list[dict[str, Any]]) -> None:
    if min_lip is None:
        return
    for row in rows:
        if row["lip_applied"] is not None and row["lip_applied"] < min_lip:
            where = f"entity {row['entity']!r}, " if row["entity"] is not None else ""
            # which date and how low are figures of the private data: the custodian file of a run without the
            # gate has them
            raise BudgetError(f"--min-lip {min_lip:g}: a released date of {where}column {row['column']!r} has a "
                              "same-date LIP below it; nothing was written (a run without --min-lip writes each "
                              "series' lowest, lip_applied, to the custodian file)")


def _withheld_pattern(panel: EntityPanel, items, results) -> list[dict[str, Any]]:
    """Per series, the dates written empty (``output.withheld``): the release's missing pattern, which
    the output shows anyway (tsdp.flip.withholding.pattern_note)."""
    out = []
    for (entity, column, _, _), result in zip(items, results):
        rows = panel.block_rows(entity)  # an entity, or a stretch between gaps (--fill-missing null)
        held = withholding.withheld_runs(result.released_dates)
        times = panel.times[rows]  # only the runs' first and last times are formatted
        labels = {k: _time_text(times[k]) for run in held for k in run}
        out.append(withholding.series_pattern(entity, column, labels, result.released_dates))
    return out


def _time_text(value: Any) -> Any:
    """A time as the report writes it: ISO 8601 for dates and timestamps, integers as they are."""
    return value.isoformat() if hasattr(value, "isoformat") else value


def _secrets_json(master: int, items, results) -> bytes:
    data = {
        "warning": SECRETS_WARNING,
        "master_seed": str(master),
        "series": [{"entity": entity, "column": column, **result.secrets}
                   for (entity, column, _, _), result in zip(items, results)],
    }
    return (json.dumps(data, indent=1, default=str) + "\n").encode()


def _suffix_warning(columns: list[str], suffix: str) -> str:
    """--suffix writes the original sensitive columns into the output: say so wherever the run is read."""
    names = ", ".join(repr(c) for c in columns)
    return Caveat("unprotected_columns", f"--suffix {suffix}: the output keeps the original sensitive column(s) "
                  f"{names} next to the released ones; it is for internal QA only and must not be published")


def _notes(panel: EntityPanel, settings: FlipSettings, suffix: str | None = None) -> list[str]:
    notes = [
        NOT_DP,
        CUSTODIAN_NOTE,
        ("the output holds the time column, the entity column (if any) and the released value columns only: no "
         "other input column is published") if suffix is None else
        (f"the output holds the time column, the entity column (if any), the original value columns and the released "
         f"ones (suffix {suffix}): it is an internal QA file, not a release"),
        "secrets (the seed, R's parameters, L_R, B, the shift and the filter taps) are never written to the report "
        "or the output; --secrets writes them to a separate file on request",
        "each series gets its own filter drawn from a generator derived from the master seed and its "
        "(entity, column) key: a rerun with the same secret reproduces the release, and no row order or other "
        "entity changes it",
        "series filtered independently do not keep their cross-covariances or sums (spec pitfall P9)",
    ]
    if panel.aux_entity is not None:
        notes.append(f"entity {panel.aux_entity!r} served as the auxiliary series Z; its rows are not part of the output")
    elif panel.aux_cols:
        notes.append(f"auxiliary columns {', '.join(panel.aux_cols)} define the attacker's knowledge Z and are "
                     "not part of the output")
    else:
        notes.append("no auxiliary series: LIP is computed against an attacker with no side information (f_X|Z = f_X)")
    if panel.blocks is not None:
        notes.append("--fill-missing null: each series is cut at its gaps (dates absent from the grid and rows with an "
                     "empty value or auxiliary cell), and every stretch of consecutive dates between them is filtered "
                     "as a series of its own, with its own estimated model, secret filter and two ends; nothing is "
                     f"imputed. {panel.gap_rows} row(s) are written empty (the gaps, and stretches too short for "
                     "FLIP's length rules); dates with no row stay absent. The positions of the gaps are published "
                     "as given (treated as public), and LIP is measured per stretch (the custodian file names them)")
    notes.append(f"every released date's same-date LIP is at least lip_floor = {settings.lip_floor:g}; "
                 + withholding.pattern_note())
    if settings.withhold:
        notes.append(f"the first and last {settings.withhold} dates of each series are withheld: their released "
                     "values are empty")
    if settings.boundary == "circular":
        notes.append("--boundary circular is tsdp's frequency-domain mode (not the paper's): it keeps the periodogram "
                     "exactly but wraps the two ends together, so the dates near either end reach a lower "
                     "same-date LIP than the ideal filter's (those below lip_floor are withheld)")
    return notes

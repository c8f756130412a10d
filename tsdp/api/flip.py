"""``tsdp.flip_filter``: FLIP all-pass filtering (McElroy, Roy & Hore 2022) with its LIP measure.

The pipeline ``tsdp flip`` runs, without files: :class:`FlipOptions` (the command line's options)
validates every option before the data is read and gives the :class:`FlipPlan`; the plan loads the
entity panel (:mod:`tsdp.io.entities`), filters every series (:func:`tsdp.flip.flip_many`) and gives
the :class:`FlipRelease`: the released table, the claim, the warnings, the report and the custodian's
figures. :func:`flip_filter` returns the released frame and its report (not ``tsdp.flip``: that name
is the core package :mod:`tsdp.flip`). FLIP is not differential privacy; the claim has definition
``lip`` and no epsilon.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from typing import Any, Callable, Sequence

from tsdp.api.parsing import enum_value, names, number_pair
from tsdp.caveats import Caveat, PrivateCaveat, is_private
from tsdp.errors import BudgetError, ResourceError, UsageError
from tsdp.flip import NOT_DP, BetaMixture, FlipSettings, claim_for, flip_many
from tsdp.flip import withholding
from tsdp.flip.mechanism import DEFAULT_K
from tsdp.flip.utility import SEASONAL_PERIODS
from tsdp.jsonfile import loads_strict

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


@dataclass(frozen=True)
class FlipOptions:
    """Every option of ``tsdp flip`` that shapes the release, named as on the command line; lists
    (``value_cols``, ``aux_cols``) as ``"a,b"`` or a sequence, choices as their names."""

    value_cols: str | Sequence[str]
    time_col: str = "time"
    entity_col: str | None = None
    aux_cols: str | Sequence[str] | None = None
    aux_entity: str | None = None
    freq: str | None = None
    timezone: str | None = None
    lip_delta: float = 0.0
    trend_order: int = 0
    spectral: str = "var"
    var_order: str | int = "aic"
    cepstral_terms: int | None = None
    filter_half_length: int | None = None
    coef_method: str = "direct"
    boundary: str = "extend"
    bound: str = "paper"
    r_components: int = 2
    r_range: str | Sequence[float] | None = None
    r_params: str | dict | None = None  # a secret: never among the report's parameters
    grid: int = 8192
    acf_lags: int = 24
    fill_missing: str = "error"
    lip_floor: float | None = None
    withhold_ends: int = 0
    min_lip: float | None = None
    suffix: str | None = None

    def parameters(self) -> dict[str, Any]:
        """The report's parameters as the command line records them (lists as ``"a,b"``), but the secret
        ``r_params``."""
        return {k: ",".join(str(x) for x in v) if isinstance(v, (list, tuple)) else enum_value(v)
                for k, v in asdict(self).items() if k != "r_params"}

    def plan(self) -> "FlipPlan":
        """Validate every option (UsageError naming it; ResourceError for a grid too large for this
        machine) before the data is read."""
        coef_method = enum_value(self.coef_method)
        if self.cepstral_terms is not None and coef_method == "direct":
            raise UsageError(f"--cepstral-terms {self.cepstral_terms}: K applies only to the cepstral --coef-method "
                             "(cepstral-unwrapped or cepstral-paper); --coef-method direct uses no cepstrum")
        if self.suffix is not None and not self.suffix.strip():  # "" would publish nothing but the release
            raise UsageError("--suffix '': empty; give the suffix of the released columns, e.g. _flip, or leave it out")
        settings = FlipSettings(
            lip_delta=self.lip_delta, trend_order=self.trend_order, spectral=enum_value(self.spectral),
            var_order=_var_order(self.var_order), K=DEFAULT_K if self.cepstral_terms is None else self.cepstral_terms,
            M=self.filter_half_length, coef_method=coef_method, boundary=enum_value(self.boundary),
            bound=enum_value(self.bound), r_components=self.r_components,
            r_range=None if self.r_range is None else number_pair(self.r_range, "--r-range", "1,4"),
            r_params=_r_params(self.r_params), grid=self.grid, acf_lags=self.acf_lags, withhold=self.withhold_ends,
            floor=self.lip_floor,
        )
        _check_grid_memory(settings)
        if self.min_lip is not None and not 0 <= self.min_lip <= 1:
            raise UsageError(f"--min-lip {self.min_lip:g}: must be in [0, 1]")
        return FlipPlan(self, settings)


@dataclass(frozen=True)
class FlipPlan:
    """Validated options: :meth:`load` the panel, then :meth:`release` it."""

    options: FlipOptions
    settings: FlipSettings

    @property
    def value_cols(self) -> list[str]:
        return names(self.options.value_cols) or []

    @property
    def aux_cols(self) -> list[str] | None:
        return names(self.options.aux_cols)

    def column_kinds(self) -> dict[str, str]:
        """The columns to read and their kinds (:func:`tsdp.io.files.read_table`)."""
        o = self.options
        return {o.time_col: "time", **({o.entity_col: "text"} if o.entity_col else {}),
                **{c: "number" for c in [*self.value_cols, *(self.aux_cols or [])]}}

    def load(self, df):
        """The entity panel of the table ``df`` (:class:`tsdp.io.entities.EntityPanel`)."""
        from tsdp.io.entities import load_entity_panel

        o = self.options
        return load_entity_panel(df, o.time_col, self.value_cols, o.entity_col, self.aux_cols, o.aux_entity,
                                 o.freq, o.timezone, enum_value(o.fill_missing),
                                 _filterable(self.settings, 1 + len(self.aux_cols or [])))

    def release(self, panel, items, master: int, *, seeded: bool, secrets_written: bool = False,
                on_series: Callable[[], None] = lambda: None) -> "FlipRelease":
        """Filter every series of ``items`` (``list(panel.series())``) with filters drawn from ``master``;
        BudgetError (nothing released) when a series has no date at the floor or, with --min-lip, a
        released date below it."""
        settings = self.settings
        results = flip_many(items, settings, master, on_series=on_series,
                            period=SEASONAL_PERIODS.get(panel.freq or ""))
        rows = _series_rows(panel, items, results)
        _check_released(items, results, settings)
        _check_min_lip(self.options.min_lip, rows)
        # the per-series findings about the estimated model quote figures of the data (and even their presence
        # is one): custodian file only; the public ones depend on the series' lengths and the options
        findings, series_warnings = _split_series_warnings([w for r in results for w in r.warnings])
        suffix = self.options.suffix
        general = (([SEEDED_FLIP_WARNING] if seeded else [])
                   + ([FIXED_R_WARNING] if settings.r_params is not None else [])
                   + ([SECRETS_WARNING] if secrets_written else [])
                   + ([CEPSTRAL_PAPER_WARNING] if settings.coef_method == "cepstral-paper" else [])
                   + ([_suffix_warning(panel.value_cols, suffix)] if suffix is not None else []))
        released = {(entity, column): r.released for (entity, column, _, _), r in zip(items, results)}
        return FlipRelease(self, panel, items, results, rows, findings, series_warnings + general,
                           panel.released_frame(released, suffix), claim_for(settings, self.options.entity_col),
                           master)


@dataclass(frozen=True)
class FlipRelease:
    """What a FLIP run produced: the released ``table``, the ``claim`` and ``warnings`` the report
    states, and the per-series ``rows`` and ``findings`` (figures of the private data: custodian only)."""

    plan: FlipPlan
    panel: Any
    items: list
    results: list
    rows: list[dict[str, Any]]
    findings: list
    warnings: list
    table: Any
    claim: Any
    master: int

    def custodian(self) -> dict[str, Any]:
        """The custodian file's figures (NOT for publication)."""
        return {"lip_series": self.rows}

    def secrets_json(self) -> bytes:
        """The master seed and every filter: anyone holding them can invert the release."""
        data = {
            "warning": SECRETS_WARNING,
            "master_seed": str(self.master),
            "series": [{"entity": entity, "column": column, **result.secrets}
                       for (entity, column, _, _), result in zip(self.items, self.results)],
        }
        return (json.dumps(data, indent=1, default=str) + "\n").encode()

    def report(self, described: dict, parameters: dict[str, Any], randomness: str):
        """The privacy report of the release written as ``described``, with the run's ``parameters``."""
        from tsdp.report import Report

        panel = self.panel
        return Report(
            command="flip",
            parameters=parameters,
            claim=self.claim,
            output={**described, "columns": self.table.columns,
                    "withheld": _withheld_pattern(panel, self.items, self.results)},
            randomness=randomness,
            grid={"freq": panel.freq, "entities": panel.n_entities, "series": len(self.items)},
            notes=_notes(panel, self.plan.settings, self.plan.options.suffix),
            warnings=self.warnings,
            lip={"statement": NOT_DP, "guarantee": self.claim.parameters["guarantee"], "disclaimer": DISCLAIMER},
        )


def flip_filter(frame, *, value_cols: str | Sequence[str], seed: int | None = None, **options):
    """FLIP-filter the series of ``frame`` (polars or pandas, long layout), as ``tsdp flip``.

    The keyword arguments are the command line's options with underscores (``time_col``,
    ``entity_col``, ``aux_cols``, ``lip_delta``, ``trend_order``, ``lip_floor``, ...; see
    ``tsdp flip --help``). ``seed`` fixes the master seed (a seeded release must not be published:
    the seed and the estimated spectra rebuild the filter). Returns :class:`tsdp.api.result.Result`:
    ``(released frame, report)``; ``result.custodian`` holds the per-series figures (NOT for publication).
    """
    import secrets as os_secrets

    from tsdp.api.frames import from_polars, to_polars
    from tsdp.api.result import Result, describe_in_memory
    from tsdp.api.series import IN_MEMORY_INPUT, _check_seed

    known = set(FlipOptions.__dataclass_fields__)
    unknown = sorted(set(options) - known)
    if unknown:
        raise UsageError(f"tsdp.flip_filter: unknown option {unknown[0]!r}; the options are those of 'tsdp flip --help' "
                         "with underscores (e.g. lip_delta for --lip-delta)")
    plan = FlipOptions(value_cols=value_cols, **options).plan()
    _check_seed(seed)
    df, kind = to_polars(frame)
    panel = plan.load(df)
    master = seed if seed is not None else os_secrets.randbits(128)
    released = plan.release(panel, list(panel.series()), master, seeded=seed is not None)
    parameters = {**plan.options.parameters(), "input": IN_MEMORY_INPUT}
    randomness = "seeded" if seed is not None else "os-entropy"

    def make_report(described: dict):
        return released.report(described, {**parameters, "output": described["file"]}, randomness)

    result = Result(from_polars(released.table, kind), make_report(describe_in_memory(released.table)),
                    released.table, make_report)
    result.custodian = released.custodian()
    return result


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


def _var_order(value: str | int) -> int | str:
    text = str(value)
    if text.strip().lower() == "aic":
        return "aic"
    try:
        order = int(text)
    except ValueError:
        raise UsageError(f"--var-order {text!r}: must be 'aic' or an integer >= 0") from None
    if order < 0:
        raise UsageError(f"--var-order {text!r}: must be 'aic' or an integer >= 0")
    return order


def _r_params(value: str | dict | None) -> BetaMixture | None:
    if value is None:
        return None
    try:
        data = loads_strict(value) if isinstance(value, str) else value  # no NaN, Infinity or repeated keys
        return BetaMixture(tuple(data["alpha"]), tuple(data["a"]), tuple(data["b"]))
    except (KeyError, TypeError, ValueError, RecursionError):  # deep nesting is a RecursionError
        raise UsageError('--r-params: must be JSON {"alpha": [...], "a": [...], "b": [...]} with finite '
                         "numbers") from None


def _split_series_warnings(warnings: list[str]) -> tuple[list[PrivateCaveat], list[Caveat]]:
    """(findings for the custodian file, public warnings) among the series' warnings. Fail closed: only
    a public :class:`Caveat` (one about a series' length or the options) is printed and reported; any
    other text is taken for a finding about the data."""
    public = [w for w in warnings if isinstance(w, Caveat) and not is_private(w)]
    findings = [w if is_private(w) else PrivateCaveat("flip_model", w) for w in warnings
                if not (isinstance(w, Caveat) and not is_private(w))]
    return findings, public


def _series_rows(panel, items, results) -> list[dict[str, Any]]:
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


def _withheld_pattern(panel, items, results) -> list[dict[str, Any]]:
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


def _suffix_warning(columns: list[str], suffix: str) -> str:
    """--suffix writes the original sensitive columns into the output: say so wherever the run is read."""
    listed = ", ".join(repr(c) for c in columns)
    return Caveat("unprotected_columns", f"--suffix {suffix}: the output keeps the original sensitive column(s) "
                  f"{listed} next to the released ones; it is for internal QA only and must not be published")


def _notes(panel, settings: FlipSettings, suffix: str | None = None) -> list[str]:
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

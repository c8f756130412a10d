"""``tsdp flip``: FLIP all-pass filtering (McElroy, Roy & Hore 2022) with its LIP measure.

Thin: parse the options into :class:`tsdp.api.flip.FlipOptions` (validated before the data is read),
read the table, run the plan (:mod:`tsdp.api.flip`: load the entity panel, filter every series) and
publish the output, the report, the custodian file and, only when asked, the secrets file,
atomically. FLIP is not differential privacy; the report's claim has definition ``lip`` and no epsilon.
"""

from __future__ import annotations

import secrets as os_secrets
from enum import Enum
from pathlib import Path
from typing import Optional

import typer

from tsdp.api.flip import CUSTODIAN_CHECKS, FlipOptions
from tsdp.cli import common
from tsdp.io import outputs
from tsdp.cli.options import options_from
from tsdp.errors import UsageError
from tsdp.io.files import check_output_path, read_table

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
    plan = options_from(FlipOptions, locals()).plan()  # every option checked before the data is read
    if seed is not None and seed < 0:
        raise UsageError(f"--seed must be a non-negative integer, got {seed}")
    output, report = outputs.resolve_outputs(input, output, report, force, json_summary)
    custodian = common.resolve_custodian(custodian, input, output, report, force)
    if secrets is not None:
        _check_secrets_path(secrets, input, output, report, custodian, force)
    console = common.Console(quiet, json_summary, stdout_taken="-" in (output, report))
    master = seed if seed is not None else os_secrets.randbits(128)

    panel = plan.load(read_table(input, plan.column_kinds()))
    items = list(panel.series())
    with console.progress(len(items) + 1) as stage:
        stage(f"filtering {len(items)} series")
        released = plan.release(panel, items, master, seeded=seed is not None, secrets_written=bool(secrets),
                                on_series=lambda: stage("filtering"))
        stage("writing output")
        private_files = ((common.custodian_document("flip", released.custodian(), released.findings), custodian,
                          "--custodian"),)
        if secrets is not None:
            private_files += ((released.secrets_json(), secrets, "--secrets"),)
        outputs.publish(released.table, output, report, lambda described: released.report(described, {
            **params, "input": outputs.display_name(input), "output": described["file"],
            "secrets_written": outputs.display_name(secrets) if secrets else False,
            "custodian_file": Path(custodian).name}, "seeded" if seed is not None else "os-entropy",
        ), private_files=private_files, force=force)

    for message in released.warnings:
        console.warn(message)
    # the achieved LIP, D_path, D_ACF and the attack diagnostics are figures of the original series: in the
    # custodian file only (DESIGN section 2), never on stdout where CI logs keep them
    console.summary({
        "output": output, "report": report, "custodian": custodian, "secrets": secrets,
        "definition": "lip", "differential_privacy": False, "lip_budget_delta": plan.settings.lip_delta,
        "lip_floor": plan.settings.lip_floor,
        "series": len(released.rows), "accuracy": _accuracy(json_summary),
        "custodian_checks": list(CUSTODIAN_CHECKS),
    }, "tsdp flip")


def _accuracy(json_mode: bool):
    """FLIP's accuracy line: there is no noise interval (see :func:`tsdp.accuracy.estimators.flip_filter`)."""
    from tsdp.accuracy.estimators import flip_filter
    from tsdp.cli.accuracy_options import DEFAULT_ALPHA, shown

    return shown(flip_filter(DEFAULT_ALPHA), json_mode)


def _check_secrets_path(path: str, input: str, output: str, report: str, custodian: str, force: bool) -> None:
    if path == "-":
        raise UsageError("--secrets -: the secrets go to a file only, never to stdout")
    for other, option in ((output, "--output"), (report, "--report"), (custodian, "--custodian")):
        if other != "-" and Path(other).resolve() == Path(path).resolve():
            raise UsageError(f"--secrets must differ from {option}")
    check_output_path(path, force, (input,), "--secrets")

"""``tsdp.account``: privacy accounting for notebooks, the figures ``tsdp account`` prints.

:func:`dpsgd` and :func:`calibrate_dpsgd` take the command line's options as keyword arguments
(``context_length``, ``forecast_length``, ``batch_size``, ``noise_multiplier``, ``epsilon``,
``unit`` = ``w-event``/``w-user``/``event``/``record``, ...) and return the summary ``tsdp account
... --json`` prints, as a dict, with the run's warnings under ``"warnings"``. :func:`compose` and
:func:`verify` take report files (or report dicts already read). Bad options raise
:class:`tsdp.errors.UsageError`; a budget that does not fit raises :class:`tsdp.errors.BudgetError`.
"""

from __future__ import annotations

import os
from typing import Any, Sequence

from tsdp.caveats import Caveat
from tsdp.errors import UsageError

SERIES_UNITS = ("event", "w-event", "w-user")  # and "user", refused by series_unit
RECORD_ONLY = {"sampling_rate": "--sampling-rate", "dataset_size": "--dataset-size", "sampling": "--sampling",
               "relation": "--relation"}
SERIES_ONLY = {"series": "--series", "length": "--length", "context_length": "--context-length",
               "forecast_length": "--forecast-length",
               "top": "--top", "bottom": "--bottom", "instances": "--instances", "w": "--w",
               "label_noise": "--label-noise", "context_noise": "--context-noise", "value_bound": "--value-bound",
               "bound": "--bound", "checkpoints": "--checkpoints", "compare_standard": "--compare-standard",
               "sampler": "--sampler", "parameters": "--parameters", "clip_norm": "--clip-norm"}
SERIES_REQUIRED = {"series": "--series", "length": "--length", "context_length": "--context-length",
                   "forecast_length": "--forecast-length", "batch_size": "--batch-size"}
DEFAULTS: dict[str, Any] = {
    "series": None, "length": None, "context_length": None, "forecast_length": None, "batch_size": None,
    "steps": None, "epochs": None, "top": "wor", "bottom": "wr", "instances": 1, "unit": "w-event", "w": 1,
    "label_noise": 0.0, "context_noise": 0.0, "value_bound": None, "sampling_rate": None, "dataset_size": None,
    "sampling": "poisson", "relation": "add-remove", "bound": "upper", "checkpoints": 0, "compare_standard": False,
    "discretization": 1e-3, "sampler": "float", "parameters": None, "clip_norm": None,
}


def series_unit(unit: str, w: int) -> str:
    """The protected unit of DP-SGD accounting as the accountant names it (``event`` or ``user``).

    ``w-event``: w contiguous steps of one series; ``w-user``: any w steps of one series (the
    paper's names); ``event``: one step (w = 1). ``user`` meant 'any w steps of one series' in
    earlier versions, but ``--unit user`` means a whole user everywhere now (as in ``release``),
    so it is refused rather than reinterpreted; so is ``event`` with w > 1, which meant w-event.
    """
    if unit == "user":
        raise UsageError("--unit user means a whole user (all of a user's contributions, as in 'tsdp release'); "
                         "DP-SGD accounting protects part of one series: use --unit w-user for any --w steps of "
                         "one series (what --unit user meant before), or --unit w-event for --w contiguous steps")
    if unit == "event" and w != 1:
        raise UsageError(f"--unit event protects one step; with --w {w} use --unit w-event (--w contiguous steps of "
                         f"one series, what --unit event --w {w} meant before) or --unit w-user (any --w steps)")
    return "user" if unit == "w-user" else "event"


def _plain(value: Any) -> Any:
    return getattr(value, "value", value)  # an Enum of the command line, or the plain value


def check_unit_options(options: dict[str, Any]) -> str:
    """``--unit record`` takes the record options and none of the series geometry, and vice versa
    (an option counts as given when it differs from its default). Returns the unit as the
    accountant names it: ``record``, or ``event``/``user`` (:func:`series_unit`)."""
    unit = _plain(options.get("unit", "w-event"))
    if unit != "record" and unit not in SERIES_UNITS + ("user",):
        raise UsageError(f"--unit {unit!r}: must be one of w-event, w-user, event or record")
    record = unit == "record"
    accounted = "record" if record else series_unit(unit, options.get("w", 1))
    foreign = SERIES_ONLY if record else RECORD_ONLY
    for name, option in foreign.items():
        if name in options and _plain(options[name]) != DEFAULTS[name]:
            other = "w-event/w-user/event" if record else "record"
            raise UsageError(f"{option} applies to --unit {other}, not --unit {unit}")
    if not record:
        for name, option in SERIES_REQUIRED.items():
            if options.get(name) is None:
                raise UsageError(f"missing option {option} (required with --unit {unit})")
    return accounted


def _options(given: dict[str, Any]) -> dict[str, Any]:
    unknown = sorted(set(given) - set(DEFAULTS) - {"noise_multiplier", "delta", "epsilon"})
    if unknown:
        raise UsageError(f"tsdp.account: unknown option {unknown[0]!r}; the options are those of 'tsdp account "
                         "dpsgd --help' with underscores (e.g. context_length for --context-length)")
    return {**DEFAULTS, **{k: _plain(v) for k, v in given.items()}}


def _setting(o: dict[str, Any], unit: str, noise_multiplier: float):
    from tsdp.accounting.structured import DpSgdSetting

    return DpSgdSetting(
        n_series=o["series"], length=o["length"], context=o["context_length"], horizon=o["forecast_length"],
        batch_size=o["batch_size"], noise_multiplier=noise_multiplier, top=o["top"], bottom=o["bottom"],
        instances=o["instances"], unit=unit, w=o["w"], label_noise=o["label_noise"],
        context_noise=o["context_noise"], value_bound=o["value_bound"],
        sampler=o["sampler"], parameters=o["parameters"], clip_norm=o["clip_norm"],
    )


def _describe(setting, derivation, count: int | None = None) -> dict:
    g = setting.geometry()
    lattice = {}
    if setting.lattice is not None:
        from tsdp.forecast.claim import sampler_parameters

        lattice = sampler_parameters(setting, count) if count is not None else {"sampler": "hardened"}
    return {**lattice,
        "theorem": derivation.theorem,
        "bound": "tight" if derivation.tight else derivation.bound,
        "is_privacy_guarantee": derivation.is_guarantee,
        "accounting_unit": derivation.accounting_unit,
        "relation": f"{setting.w}-{setting.unit} level (substitution of one series' values)",
        # T of the paper (windows per series) under a snake_case name, as every --json key
        "geometry": {("windows_per_series" if k == "T" else k): (round(v, 8) if isinstance(v, float) else v)
                     for k, v in g.items()},
    }


def dpsgd(*, noise_multiplier: float, delta: float, **options) -> dict[str, Any]:
    """Epsilon of DP-SGD training: structured subsampling of series (Schuchardt et al. 2025) for
    ``unit`` w-event/w-user/event, or standard DP-SGD on records for ``unit="record"``."""
    o = _options(options)
    unit = check_unit_options(o)
    if unit == "record":
        return _record_dpsgd(o, noise_multiplier, delta)
    from tsdp.accounting import structured as st

    setting = _setting(o, unit, noise_multiplier)
    result = st.account_dpsgd(setting, delta, o["steps"], o["epochs"], o["bound"], o["discretization"],
                              o["checkpoints"], o["compare_standard"])
    warnings = list(result.warnings)
    label = "epsilon" if result.derivation.is_guarantee else "epsilon_lower_bound"
    if not result.derivation.is_guarantee:
        warnings.append(Caveat("lower_bound", "--bound lower: the epsilon printed is an optimistic LOWER BOUND, never "
                                              "a privacy guarantee"))
    summary = {label: result.epsilon, "delta": delta, "compositions": result.compositions,
               "steps": o["steps"], "epochs": o["epochs"], "noise_multiplier": noise_multiplier,
               **_describe(setting, result.derivation, result.compositions)}
    if result.checkpoints:
        # labelled like the final figure: under --bound lower every checkpoint is a lower bound too
        summary["checkpoints"] = [{"compositions": count, label: eps} for count, eps in result.checkpoints]
    if result.standard_dpsgd_epsilon is not None:
        summary["standard_dpsgd_epsilon"] = result.standard_dpsgd_epsilon
        warnings.append(Caveat("standard_dpsgd_not_event_level", "standard_dpsgd_epsilon is the flattened 'standard "
                               "DP-SGD' figure (Prop. C.1): record level only, NOT valid for event-level privacy"))
    return {**summary, "warnings": warnings}


def calibrate_dpsgd(*, epsilon: float, delta: float, noise_multiplier: float | None = None,
                    **options) -> dict[str, Any]:
    """The noise multiplier for ``epsilon`` and a training length (``steps`` or ``epochs``), or,
    given ``noise_multiplier``, the longest training within ``epsilon``. Both answers are on the
    safe side (noise rounded up, length down); the epsilon returned is the upper bound at the answer."""
    o = _options(options)
    unit = check_unit_options(o)
    if unit == "record":
        return _record_calibrate(o, epsilon, noise_multiplier, delta)
    from tsdp.accounting import structured as st

    steps, epochs, discretization = o["steps"], o["epochs"], o["discretization"]
    warnings: list[str] = []
    if noise_multiplier is None:
        _require_length(steps, epochs)
        calibration = st.calibrate_noise(_setting(o, unit, 1.0), epsilon, delta, steps, epochs, discretization)
        sigma, eps = calibration
        warnings += _grid_limit_warning(calibration, epsilon, discretization)
        setting = _setting(o, unit, sigma)
        derivation = st.composition_profile(setting)[1]
        summary = {"noise_multiplier": sigma, "epsilon": eps, "target_epsilon": epsilon, "delta": delta,
                   "steps": steps, "epochs": epochs, "compositions": st.compositions(setting, steps, epochs),
                   **_describe(setting, derivation)}
    else:
        if steps is not None or epochs is not None:
            raise UsageError("with --noise-multiplier, leave out --steps/--epochs: they are what is calibrated")
        setting = _setting(o, unit, noise_multiplier)
        count, eps = st.max_compositions(setting, epsilon, delta, discretization)
        derivation = st.composition_profile(setting)[1]
        what = "steps" if setting.step_level else "epochs"
        summary = {what: count, "epsilon": eps, "target_epsilon": epsilon, "delta": delta,
                   "noise_multiplier": noise_multiplier, **_describe(setting, derivation)}
        if count == 0:
            warnings.append(Caveat("budget_too_small",
                                   f"even one {derivation.accounting_unit} exceeds epsilon {epsilon:g}"))
    return {**summary, "warnings": warnings + list(setting.warnings())}


def _record_setting(o: dict[str, Any], noise_multiplier: float):
    from tsdp.accounting import sgd

    q = sgd.sampling_rate(o["sampling_rate"], o["batch_size"], o["dataset_size"])
    return sgd.SgdSetting(q, noise_multiplier, o["sampling"], o["relation"])


def _record_description(setting, discretization: float) -> dict:
    from tsdp.accounting import sgd

    return {"unit": setting.relation_text, "sampling": setting.sampling, "sampling_rate": setting.sampling_rate,
            "steps_per_epoch": sgd.steps_per_epoch(setting.sampling_rate), "bound": "upper",
            "is_privacy_guarantee": True, "theorem": setting.theorem, "accountant": sgd.ACCOUNTANT,
            "discretization": discretization}


def _record_dpsgd(o: dict[str, Any], noise_multiplier: float, delta: float) -> dict[str, Any]:
    from tsdp.accounting import sgd

    setting = _record_setting(o, noise_multiplier)
    count = sgd.steps_for(o["steps"], o["epochs"], setting.sampling_rate)
    eps = sgd.epsilon(setting, count, delta, o["discretization"])
    return {"epsilon": eps, "delta": delta, "steps": count, "epochs": o["epochs"], "noise_multiplier": noise_multiplier,
            **_record_description(setting, o["discretization"]), "warnings": []}


def _grid_limit_warning(calibration, target: float, discretization: float) -> list[str]:
    """Say so when the noise multiplier is the smallest tsdp can account, not the smallest that
    meets the target, or when the grid's rounding inflates it (it is on the safe side either way:
    its epsilon is within the target)."""
    sigma, eps = calibration
    if target < 10 * discretization:
        return [Caveat("grid_limit", f"--epsilon {target:g} is below ten steps of the privacy-loss grid (--discretization "
                f"{discretization:g}): the grid's pessimistic rounding inflates the noise multiplier; a finer "
                f"--discretization (e.g. {target / 100:.2g}) gives less noise for the same guarantee")]
    if not calibration.at_grid_limit:
        return []
    return [Caveat("grid_limit", f"noise multiplier {sigma:.6g} is the smallest tsdp can account at --discretization {discretization:g} "
            f"(less noise needs a privacy-loss grid beyond its size limit); it spends epsilon {eps:g} of the "
            f"target {target:g}, and a coarser --discretization would allow less noise")]


def _require_length(steps, epochs) -> None:
    """Calibrating the noise needs the training length (the other way round needs the noise)."""
    if steps is None and epochs is None:
        raise UsageError("give --steps or --epochs to calibrate the noise, or --noise-multiplier to find the "
                         "training length")


def _record_calibrate(o: dict[str, Any], epsilon: float, noise_multiplier: float | None, delta: float) -> dict:
    from tsdp.accounting import sgd

    steps, epochs, discretization = o["steps"], o["epochs"], o["discretization"]
    warnings: list[str] = []
    if noise_multiplier is None:
        _require_length(steps, epochs)
        probe = _record_setting(o, 1.0)
        count = sgd.steps_for(steps, epochs, probe.sampling_rate)
        calibration = sgd.calibrate_noise(probe, epsilon, count, delta, discretization)
        sigma, eps = calibration
        warnings += _grid_limit_warning(calibration, epsilon, discretization)
        setting = _record_setting(o, sigma)
        summary = {"noise_multiplier": sigma, "epsilon": eps, "target_epsilon": epsilon, "delta": delta,
                   "steps": count, "epochs": epochs}
    else:
        if steps is not None or epochs is not None:
            raise UsageError("with --noise-multiplier, leave out --steps/--epochs: they are what is calibrated")
        setting = _record_setting(o, noise_multiplier)
        count, eps = sgd.max_steps(setting, epsilon, delta, discretization)
        summary = {"steps": count, "epochs": count // sgd.steps_per_epoch(setting.sampling_rate),
                   "epsilon": eps, "target_epsilon": epsilon, "delta": delta, "noise_multiplier": noise_multiplier}
        if count == 0:
            warnings.append(Caveat("budget_too_small", f"even one step exceeds epsilon {epsilon:g}"))
    return {**summary, **_record_description(setting, discretization), "warnings": warnings}


# the publication checks of tsdp.verify, and the code of the warning a failed one gives
UNPUBLISHABLE = {"randomness": "seeded_run", "sampler": "float_sampler"}


def _paths(reports) -> list:
    """One report path, or several: a lone string is one path, never a sequence of characters."""
    return [reports] if isinstance(reports, (str, bytes, os.PathLike)) else list(reports)


def compose(reports: Sequence[str], delta: float | None = None, discretization: float = 1e-3) -> dict[str, Any]:
    """Compose the claims of several report files: tightly through their mechanism events where
    every report has them, otherwise by basic composition (``method`` says which). The reports must
    protect one unit and each must pass :func:`verify`'s claim checks (BudgetError otherwise)."""
    from tsdp.accounting.budget import check_delta
    from tsdp.accounting.claim import PrivacyClaim
    from tsdp.accounting.compose import check_composable, compose_claims
    from tsdp.verify import claim_checks, publication_checks
    from tsdp.errors import BudgetError, DataError
    from tsdp.report import load_report

    if delta is not None:
        check_delta(delta)
    reports = [str(r) for r in _paths(reports)]
    documents = [load_report(path) for path in reports]  # not a report: exit 4
    from tsdp.verify.stream import one_spend

    reports, documents = one_spend(reports, documents)  # a stream and its appends: one spend (issue 32)
    try:
        claims = [PrivacyClaim.from_dict(d["claim"]) for d in documents]
    except (TypeError, ValueError, OverflowError) as exc:
        raise DataError(f"REPORT: a claim cannot be read ({exc})") from None
    check_composable(claims)  # LIP or lower bounds: exit 2; different units: exit 3
    for path, document in zip(reports, documents):
        failed = [c for c in claim_checks(document) if not c.passed]
        if failed:
            raise BudgetError(f"{path!r} does not verify, so its claim cannot be composed: {failed[0].name}: "
                              f"{failed[0].detail} (see 'tsdp account verify {path}')")
    result = compose_claims(claims, delta, discretization)
    # the figure is that of the ideal mechanisms: say so for releases that must not be published
    unpublishable = [Caveat(UNPUBLISHABLE[check.name], f"{path!r}: {check.detail}") for path, document, claim in zip(reports, documents, claims)
                     for check in publication_checks(document, claim) if not check.passed]
    return {"epsilon": result.epsilon, "delta": result.delta, "method": result.method, "reports": len(reports),
            "basic_composition_epsilon": result.basic_epsilon, "pld_composition_epsilon": result.tight_epsilon,
            "unit": result.unit, "warnings": list(result.warnings) + unpublishable}


def verify(reports: Sequence[str], max_epsilon: float | None = None, max_delta: float | None = None,
           released: Sequence[str] | None = None, output_check: bool = True) -> list[tuple[str, Any]]:
    """``[(report path, ReportVerification)]``: every check of every report (see ``tsdp account
    verify --help``); ``released``: the released file of each report, in order [default: the file
    the report names, when it sits next to it]. A report whose released file is not found fails,
    unless ``output_check`` is False (``--no-output-check``: the claims alone are verified)."""
    from pathlib import Path

    from tsdp.verify import check_thresholds, shape_columns, verify_report
    from tsdp.io.files import sha256_file
    from tsdp.report import load_report

    check_thresholds(max_epsilon, max_delta)
    reports = [str(r) for r in _paths(reports)]
    released = [str(r) for r in released] if released else None
    if released and len(released) != len(reports):
        raise UsageError(f"--released was given {len(released)} times for {len(reports)} reports: give it once per "
                         "report, in the same order, or leave it out to check the files next to the reports")
    documents = [load_report(path) for path in reports]  # missing: exit 2; not a report: exit 4
    results = []
    for i, (path, data) in enumerate(zip(reports, documents)):
        digest, note, file = None, None, None
        if released:
            if not Path(released[i]).is_file():
                raise UsageError(f"--released: file {released[i]!r} does not exist")
            file = released[i]
        else:
            named = str((data.get("output") or {}).get("file", ""))
            beside = Path(path).parent / named
            if named in ("", ".", "..", "<stdout>") or Path(named).name != named:
                note = f"the report names {named!r}, not a file next to it"
            elif beside.is_file():
                file = beside
            else:
                note = f"{named!r} is not next to the report"
        if file is not None:
            digest = sha256_file(file)
        keys = shape_columns(data)
        shape = None
        if file is not None and keys is not None:
            release = (data.get("command") or {}).get("name") == "release"
            shape = _csv_shape(file) if release and str(file).lower().endswith(".csv") else _table_shape(file, keys)
        results.append((path, verify_report(data, max_epsilon, max_delta, digest, note, shape, output_check)))
    return results


def _csv_shape(path) -> dict | None:
    """``{"rows", "columns"}`` of a released CSV in pure Python (a release's verify loads no numerical
    library): the header by the csv module, the rows by counting line ends, or, when the file holds
    a quote (a quoted field may hold a line end), by the csv module."""
    import csv

    try:
        with open(path, newline="", encoding="utf-8") as handle:
            columns = next(csv.reader(handle), None)
        if columns is None:
            return None
        ends, quoted, last = 0, False, b"\n"
        with open(path, "rb") as raw:
            for chunk in iter(lambda: raw.read(1 << 20), b""):
                ends += chunk.count(b"\n")
                quoted = quoted or b'"' in chunk
                last = chunk[-1:]
        lines = ends + (last != b"\n")
        if quoted:
            with open(path, newline="", encoding="utf-8") as handle:
                lines = sum(1 for _ in csv.reader(handle))
    except (OSError, UnicodeDecodeError, csv.Error):
        return None
    return {"rows": lines - 1, "columns": columns, "distinct": {}}


def _table_shape(path, keys: list[str]) -> dict | None:
    """``{"rows", "columns", "distinct"}`` of a released table (distinct values of its first column and
    of ``keys``), by a polars scan; None when it cannot be read as one (its sha256 check still stands)."""
    import polars as pl

    from tsdp.errors import TsdpError
    from tsdp.io.files import table_format

    try:
        fmt = table_format(path, "--released", allowed=("csv", "parquet"))
        frame = pl.scan_parquet(path) if fmt == "parquet" else pl.scan_csv(path, infer_schema=False)
        names = frame.collect_schema().names()
        wanted = [c for c in dict.fromkeys([*names[:1], *keys]) if c in names]
        row = frame.select(pl.len().alias("__rows"), *(pl.col(c).n_unique().alias(c) for c in wanted)).collect()
    except (TsdpError, OSError, pl.exceptions.PolarsError):
        return None
    return {"rows": int(row["__rows"][0]), "columns": names, "distinct": {c: int(row[c][0]) for c in wanted}}

"""``tsdp.stream``: continual release of a growing panel, one cron run at a time (issue 32).

A stream is fixed once, by :func:`init`, from public parameters only: the time grid (``start``,
``freq``, ``horizon`` T steps), the series keys, the unit and its contribution bounds, the budget and
the outputs (``daily``, ``cumulative``, ``window:7``). :func:`init` resolves the factorization
(:func:`tsdp.mechanisms.continual.choose`), computes the claim of the WHOLE horizon
(:func:`tsdp.mechanisms.continual.privacy_map`: one Gaussian mechanism on C x, the published B y
being post-processing), charges a budget ledger once for it, and writes

* the stream report (``tsdp-report/1``, command ``stream init``): the claim, the strategy, the
  comparison that chose it, and the exact s.d. of each output at each step (public);
* its accuracy table (CSV: step, time, output, s.d., half-width), the file the report's ``output``
  covers, so that ``tsdp account verify`` checks it like any released file;
* the custodian state file (mode 0600, NOT for publication): the noise secret, the position, the
  core's carry (running sums, buffers) and, at user level with raw events, each (user, series)
  pair's participations so far.

:func:`append` releases the next step(s): it reads them (panel rows of the public grid, or raw
events with the per-step caps enforced by release's own bounding code), calls
:func:`tsdp.mechanisms.continual.release_steps`, writes the output and an append report (the stream
id, the steps, the output's sha256), then advances the state. The state is replaced by an atomic
rename after the output and report are in place, under a lock (:mod:`tsdp.io.statefile`): a run
killed at any instant leaves it as before or fully advanced. The noise of (series, step) is a
function of the state's secret and the position only, so re-running an interrupted append (with
``force`` if its files did appear) writes the same values, and 365 appends of one step equal one
append of 365 steps bit for bit.

Refused with exit 4, nothing written and the state unchanged: a step given twice, a step skipped, a
step past the horizon, rows or events outside the steps of the append, series keys not declared at
init, and (user level, raw events) a user and series over ``max_steps`` participations over the
horizon.
"""

from __future__ import annotations

import hashlib
import io
import json
import math
import secrets
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np

from tsdp.accounting.samplers import sampler_of
from tsdp.errors import DataError, UsageError
from tsdp.io import outputs as published
from tsdp.signals import abandon_commit, begin_commit
from tsdp.api.stream_steps import _iso, output_frame, read_steps
from tsdp.mechanisms.continual.definition import Definition, accuracy_of, stream_claim

STATE_SCHEMA = "tsdp-stream-state/1"
STATE_NOTE = ("NOT FOR PUBLICATION: this file holds the stream's noise secret (whoever has it can remove the "
              "noise from every published value) and private counters. Keep it with the data custodian, mode 0600.")
INIT_COMMAND, APPEND_COMMAND = "stream init", "stream append"
LAYOUT_KEYS = ("layout", "time_col", "value_col", "series_col", "series_cols", "user_col", "timezone",
               "value_bound")


def _core():
    from tsdp.mechanisms import continual

    return continual


# --------------------------------------------------------------------------------------------------
# the stream's public definition and its private state
# --------------------------------------------------------------------------------------------------


@dataclass
class State:
    """The custodian state: the definition, the noise secret, the position (steps released so far),
    the core's carry, and the (user, series) participation counters (user level, raw events)."""

    definition: Definition
    secret: bytes
    position: int
    carry: dict[str, Any]
    seeded: bool
    report: str
    participation: dict[str, np.ndarray] = field(default_factory=dict)

    def to_bytes(self) -> bytes:
        meta = {"schema": STATE_SCHEMA, "publish": False, "note": STATE_NOTE, "definition": self.definition.to_dict(),
                "position": self.position, "seeded": self.seeded, "report": self.report,
                "carry_keys": sorted(self.carry), "updated": datetime.now(timezone.utc).isoformat(timespec="seconds")}
        arrays = {"meta": np.frombuffer(json.dumps(meta, allow_nan=False).encode(), dtype=np.uint8),
                  "secret": np.frombuffer(self.secret, dtype=np.uint8)}
        arrays.update({f"carry.{k}": np.asarray(v) for k, v in self.carry.items()})
        arrays.update({f"participation.{k}": np.asarray(v) for k, v in self.participation.items()})
        buffer = io.BytesIO()
        np.savez(buffer, **arrays)
        return buffer.getvalue()

    @classmethod
    def read(cls, path: str | Path) -> "State":
        p = Path(path)
        if not p.is_file():
            raise UsageError(f"STATE: file {str(path)!r} does not exist; create it with 'tsdp stream init'")
        try:
            with np.load(p, allow_pickle=False) as npz:
                arrays = {k: npz[k] for k in npz.files}
            meta = json.loads(arrays["meta"].tobytes().decode())
            if meta.get("schema") != STATE_SCHEMA:
                raise ValueError(f"schema {meta.get('schema')!r}")
            carry = {k: _unwrap(arrays[f"carry.{k}"]) for k in meta["carry_keys"]}
            participation = {k.split(".", 1)[1]: v for k, v in arrays.items() if k.startswith("participation.")}
            return cls(Definition.from_dict(meta["definition"]), arrays["secret"].tobytes(), int(meta["position"]),
                       carry, bool(meta["seeded"]), str(meta["report"]), participation)
        except (OSError, ValueError, KeyError, TypeError, json.JSONDecodeError) as exc:
            raise DataError(f"STATE: {str(path)!r} is not a tsdp stream state file ({type(exc).__name__}: {exc})") \
                from None


def _unwrap(value: np.ndarray):
    """A 0-d array back to the Python int or float the core stored."""
    return value.item() if value.ndim == 0 else value


def _secret(seed: int | None) -> bytes:
    """32 bytes of OS entropy; with ``--seed`` a hash of the seed (tests and experiments only)."""
    if seed is None:
        return secrets.token_bytes(32)
    if seed < 0:
        raise UsageError(f"--seed must be a non-negative integer, got {seed}")
    return hashlib.sha256(f"tsdp-stream-seed/{seed}".encode()).digest()


# --------------------------------------------------------------------------------------------------
# init
# --------------------------------------------------------------------------------------------------


def parse_outputs(text: str | list[str] | tuple[str, ...]) -> tuple[str, ...]:
    """``daily,cumulative,window:7`` -> a tuple of output names (UsageError naming --outputs)."""
    items = [t.strip() for t in (text.split(",") if isinstance(text, str) else text) if str(t).strip()]
    if not items:
        raise UsageError("--outputs: give at least one of daily, cumulative, window:K")
    for item in items:
        if item in ("daily", "cumulative"):
            continue
        kind, _, k = item.partition(":")
        if kind != "window" or not k.isdigit() or int(k) < 1:
            raise UsageError(f"--outputs {item!r}: must be daily, cumulative or window:K with an integer K >= 1")
    if len(set(items)) != len(items):
        raise UsageError(f"--outputs {','.join(items)!r} names an output twice")
    return tuple(items)


def parse_weights(text) -> dict[str, float] | None:
    """``daily=1,cumulative=4`` -> ``{"daily": 1.0, "cumulative": 4.0}`` (a dict passes through)."""
    if text is None or isinstance(text, dict):
        return text
    weights = {}
    for item in (t.strip() for t in str(text).split(",") if t.strip()):
        name, _, value = item.rpartition("=")
        try:
            weights[name.strip()] = float(value)
        except ValueError:
            raise UsageError(f"--weights {item!r}: write output=weight, e.g. daily=1,cumulative=4") from None
        if not name.strip():
            raise UsageError(f"--weights {item!r}: write output=weight, e.g. daily=1,cumulative=4")
    return weights or None


def public_setting(*, horizon: int, epsilon: float, delta: float | None, unit: str, w: int | None,
                   max_per_step: float, max_steps: int | None, min_separation: int | None,
                   series_per_user: int | None, n_series: int, outputs, strategy: str, sampler: str | None,
                   band: int | None = None, alpha: float = 0.05, weights=None):
    """The core's (setting, comparison table): every option checked, ``auto`` resolved."""
    from tsdp.accounting.sensitivity import ContributionBounds

    if not (isinstance(horizon, int) and horizon >= 1):
        raise UsageError(f"--horizon must be an integer >= 1, got {horizon!r}")
    if not (epsilon > 0 and math.isfinite(epsilon)):
        raise UsageError(f"--epsilon must be positive and finite, got {epsilon}")
    delta = 1e-6 if delta is None else delta
    if not 0 < delta < 1:
        raise UsageError(f"--delta must be in (0, 1) (the noise is Gaussian), got {delta}")
    ContributionBounds(unit, float(max_per_step), max_steps, w, series_per_user)  # the bounds' own checks
    if min_separation is not None and unit != "user":
        raise UsageError(f"--min-separation applies to --unit user only; with --unit {unit} remove it")
    return _core().choose(horizon=horizon, epsilon=float(epsilon), delta=float(delta), unit=unit, w=w,
                          max_per_step=float(max_per_step), max_steps=max_steps, min_separation=min_separation,
                          series_per_user=series_per_user or n_series, n_series=n_series,
                          outputs=parse_outputs(outputs), strategy=strategy, band=band, alpha=alpha,
                          weights=parse_weights(weights),
                          sampler=sampler or "hardened")


def init(state: str, *, start: str, freq: str, horizon: int, epsilon: float, delta: float | None = None,
         unit: str = "event", w: int | None = None, max_per_step: float = 1.0, max_steps: int | None = None,
         min_separation: int | None = None, series_per_user: int | None = None, series_keys: list[str],
         outputs="daily,cumulative", strategy: str = "auto", band: int | None = None, weights=None,
         sampler: str | None = None,
         layout: dict[str, Any] | None = None, alpha: float = 0.05, report: str | None = None,
         seed: int | None = None, ledger: str | None = None, dataset: str | None = None, force: bool = False,
         dry_run: bool = False, parameters: dict[str, Any] | None = None) -> dict[str, Any]:
    """Fix a stream (see the module docstring); returns the summary. ``dry_run``: the comparison of
    the strategies and the accuracy only, nothing written or charged."""
    from tsdp.io.files import AtomicOutputs, check_output_path

    keys = _keys(series_keys)
    layout = {k: (layout or {}).get(k) for k in LAYOUT_KEYS}
    _check_layout(layout, unit)
    _check_alpha(alpha)
    setting, table = public_setting(horizon=horizon, epsilon=epsilon, delta=delta, unit=unit, w=w,
                                    max_per_step=max_per_step, max_steps=max_steps, min_separation=min_separation,
                                    series_per_user=series_per_user, n_series=len(keys), outputs=outputs,
                                    strategy=strategy, band=band, sampler=sampler, alpha=alpha, weights=weights)
    _check_grid(start, freq)
    definition = Definition(secrets.token_hex(16), setting, str(start), str(freq), keys, layout, float(alpha))
    privacy = _core().privacy_map(setting)
    accuracy = accuracy_of(setting, alpha)
    summary = {"strategy": setting.strategy, "requested_strategy": strategy, "horizon": setting.horizon,
               "series": len(keys), "outputs": list(setting.outputs), "epsilon": privacy.epsilon,
               "delta": privacy.delta, "sigma": _sigma(privacy), "comparison": _comparison(table),
               "expected_error": _expected(accuracy)}
    if dry_run:
        return {"dry_run": "public parameters only; nothing written, no budget charged", **summary}

    report = report or str(Path(state).with_suffix("")) + ".stream.report.json"
    accuracy_file = _accuracy_path(report)
    for path, option in ((state, "STATE"), (report, "--report"), (accuracy_file, "accuracy table")):
        check_output_path(path, force, (), option)
    if len({str(Path(p).resolve()) for p in (state, report, accuracy_file)}) != 3:
        raise UsageError("STATE and --report must be different files")
    seeded = seed is not None
    new = State(definition, _secret(seed), 0, _core().new_carry(setting), seeded, Path(report).name,
                _empty_participation() if _counts_participation(definition) else {})
    charge = published.ledger_reservation(ledger, dataset, privacy.epsilon, privacy.delta,
                                       f"tsdp stream init {definition.stream_id} ({setting.strategy}, "
                                       f"{setting.horizon} steps of {freq})")
    from tsdp.io.statefile import locked

    with locked(state), charge as held, AtomicOutputs(replace=force) as files:  # (--force: not under an append)
        table_bytes = accuracy_table(definition, accuracy)
        digest = files.stage_bytes(table_bytes, accuracy_file, option="accuracy table")
        described = {"file": Path(accuracy_file).name, "format": "csv", "sha256": digest}
        params = {**(parameters or {}), **definition_parameters(definition),
                  "comparison": _comparison(table), **published.ledger_parameters(ledger, held)}
        document = stream_report(INIT_COMMAND, definition, params, described, seeded,
                                 grid={"n_series": len(keys), "n_steps": setting.horizon, "start": start, "freq": freq},
                                 accuracy=accuracy)
        files.stage_bytes(document, report, option="--report")
        files.stage_bytes(new.to_bytes(), state, private=True, option="STATE")
        _commit(files, held, described)
    return {**summary, "stream_id": definition.stream_id, "state": str(state), "report": str(report),
            "accuracy_table": str(accuracy_file),
            **({"ledger": {"dataset": dataset, "entry": held.id}} if held is not None else {})}


def _commit(files, held, described: dict) -> None:
    """Publish the staged files; the ledger confirms its spend just before (tsdp.io.outputs.publish's order)."""

    def hook():
        begin_commit()
        if held is not None:
            held.confirm(described["file"], described["sha256"])

    try:
        files.commit(before_publish=hook)
    except BaseException:
        abandon_commit()
        if held is not None and held.confirmed:
            held.unconfirm()
        raise


def definition_parameters(definition: Definition) -> dict[str, Any]:
    """The report's command parameters that define the stream (verify rebuilds the setting from them)."""
    return {"stream_id": definition.stream_id, "definition_sha256": definition.digest(),
            "definition": definition.to_dict()}


def _keys(series_keys) -> list[str]:
    keys = [str(k).strip() for k in (series_keys.split(",") if isinstance(series_keys, str) else series_keys or [])]
    keys = [k for k in keys if k]
    if not keys:
        raise UsageError("--series-keys: give the public series keys (comma-separated), or --series-cols for a "
                         "wide layout")
    if len(set(keys)) != len(keys):
        raise UsageError(f"--series-keys names a series twice ({sorted(k for k in keys if keys.count(k) > 1)[0]!r})")
    return keys


def _check_layout(layout: dict[str, Any], unit: str) -> None:
    kind = layout.get("layout") or ("events" if layout.get("user_col") else "long" if layout.get("value_col")
                                    else "wide")
    layout["layout"] = kind
    if kind == "events" and not layout.get("user_col"):
        raise UsageError("--user-col is required for --layout events")
    if kind == "long" and not layout.get("value_col"):
        raise UsageError("--value-col is required for --layout long")
    if kind != "events" and layout.get("value_bound") is not None:
        raise UsageError("--value-bound applies to --layout events")


def _check_alpha(alpha: float) -> None:
    if not 0 < alpha < 1:
        raise UsageError(f"--alpha must be in (0, 1), got {alpha}")


def _check_grid(start: str, freq: str) -> None:
    from tsdp.io.timegrid import parse_freq

    parse_freq(str(freq), str(start).lstrip("-").isdigit())
    if not str(start).strip():
        raise UsageError("--start: give the time of the stream's first step")


def _counts_participation(definition: Definition) -> bool:
    return definition.setting.unit == "user" and definition.layout.get("layout") == "events"


def _empty_participation() -> dict[str, np.ndarray]:
    return {"users": np.array([], dtype=str), "series": np.array([], dtype=np.int64),
            "steps": np.array([], dtype=np.int64)}


# --------------------------------------------------------------------------------------------------
# accuracy and reports
# --------------------------------------------------------------------------------------------------


def _z(alpha: float) -> float:
    from scipy.stats import norm

    return float(norm.ppf(1 - alpha / 2))


def _expected(accuracy: dict[str, np.ndarray]) -> list[dict[str, Any]]:
    """Per output: the s.d. at the first and last step, its largest value and the RMSE over the horizon."""
    return [{"output": name, "sd_first": float(sd[0]), "sd_last": float(sd[-1]), "sd_max": float(sd.max()),
             "rmse": float(np.sqrt(np.mean(sd ** 2)))} for name, sd in accuracy.items()]


def _sigma(privacy) -> float | None:
    for name in ("sigma", "noise"):
        if getattr(privacy, name, None) is not None:
            return float(getattr(privacy, name))
    return None


def _comparison(table) -> list[dict[str, Any]]:
    """The core's comparison rows, each output's figures as a list entry named by ``output`` (an
    output's name, ``window:7``, is not a key of a --json summary)."""
    from tsdp.report import json_ready

    rows = []
    for row in table or []:
        row = dict(row)
        row["outputs"] = [{"output": name, **figures} for name, figures in dict(row.get("outputs") or {}).items()]
        rows.append(row)
    return json_ready(rows)


def accuracy_block(definition: Definition, accuracy: dict[str, np.ndarray]) -> dict[str, Any]:
    """The report's accuracy block: the (1 - alpha) half-width, from public parameters only."""
    z = _z(definition.alpha)
    largest = max(float(sd.max()) for sd in accuracy.values())
    return {"alpha": definition.alpha, "confidence": 1 - definition.alpha, "target": "cell",
            "scope": "each output (" + ", ".join(accuracy) + ") of each series at each step of the horizon",
            "half_width": z * largest, "exact": True, "method": "closed form",
            "formula": "z_{1-alpha/2} * sigma * s(C) * ||B_t,:||_2 (the exact s.d. of output t)",
            "covers": "the noise only (not the bounding of contributions)",
            "summary": {"min": z * min(float(sd.min()) for sd in accuracy.values()),
                        "median": z * float(np.median(np.concatenate(list(accuracy.values())))), "max": z * largest},
            "per_step_sd": {name: [float(v) for v in sd] for name, sd in accuracy.items()}}


def accuracy_table(definition: Definition, accuracy: dict[str, np.ndarray]) -> bytes:
    """CSV: step, output, s.d. and (1 - alpha) half-width of every output at every step (public)."""
    z = _z(definition.alpha)
    lines = ["step,output,sd,half_width"]
    for name, sd in accuracy.items():
        lines.extend(f"{t},{name},{v!r},{z * v!r}" for t, v in enumerate(sd.tolist(), 1))
    return ("\n".join(lines) + "\n").encode()


def _accuracy_path(report: str) -> str:
    p = Path(report)
    stem = p.name[:-len(".report.json")] if p.name.endswith(".report.json") else p.stem
    return str(p.with_name(stem + ".accuracy.csv"))


def stream_report(command: str, definition: Definition, parameters: dict[str, Any], described: dict[str, Any],
                  seeded: bool, grid: dict[str, Any], accuracy: dict[str, np.ndarray] | None = None) -> bytes:
    from tsdp.report import Report
    from tsdp.rng import SEEDED_WARNING

    setting = definition.setting
    warnings = [SEEDED_WARNING] if seeded else []
    warnings.extend(sampler_of(setting.sampler).warnings)  # float: not for publication
    notes = [f"continual release: strategy {setting.strategy}; outputs {', '.join(setting.outputs)}; the claim "
             f"covers the whole horizon of {setting.horizon} steps, charged once at 'stream init'; every append "
             "report of this stream (same stream_id) is part of the same spend"]
    if definition.layout.get("layout") != "events":
        from tsdp.engine.panel import TRUSTED_NOTE

        notes.append(TRUSTED_NOTE)
    report = Report(command, parameters, stream_claim(setting, definition.layout), described,
                    "seeded" if seeded else "os-entropy", grid=grid, notes=notes, warnings=warnings,
                    accuracy=accuracy_block(definition, accuracy) if accuracy is not None else None)
    return report.to_json()


# --------------------------------------------------------------------------------------------------
# append
# --------------------------------------------------------------------------------------------------

PAUSE_ENV = "TSDP_STREAM_PAUSE_AT"  # tests only: "read", "staged" or "published" (see _pause)


def append(state: str, input: str, output: str, report: str | None = None, steps: int | None = None,
           force: bool = False) -> dict[str, Any]:
    """Release the next step(s) of the stream in ``state`` from ``input`` (module docstring)."""
    from tsdp.io.files import AtomicOutputs, table_format
    from tsdp.io.statefile import install, locked, stage_private

    if output == "-":
        raise UsageError("-o -: a stream's output goes to a file (its sha256 is in the append report)")
    output, report = published.resolve_outputs(input, output, report, force, False)
    if steps is not None and steps < 1:
        raise UsageError(f"--steps must be an integer >= 1, got {steps}")
    with locked(state):
        current = State.read(state)
        d, p = current.definition, current.position
        horizon = d.setting.horizon
        if p >= horizon:
            raise DataError(f"INPUT: the stream {d.stream_id} is complete ({horizon} of {horizon} steps released); "
                            "every further step is past its horizon; start a new stream with 'tsdp stream init'")
        x, times, participation = read_steps(input, d, p, steps, current.participation)
        k = x.shape[1]
        _pause("read")
        values, carry = _core().release_steps(d.setting, current.secret, current.carry, x, p)
        frame = output_frame(d, times, p, values)
        advanced = State(d, current.secret, p + k, carry, current.seeded, current.report, participation)
        with AtomicOutputs(replace=force) as files:
            digest = files.stage_table(frame, output, "--output")
            described = {"file": Path(output).name, "format": table_format(output, "--output"), "sha256": digest}
            params = {**definition_parameters(d), "first_step": p + 1, "last_step": p + k,
                      "input": published.display_name(input), "output": described["file"]}
            accuracy = {name: sd[p:p + k] for name, sd in accuracy_of(d.setting, d.alpha).items()}
            grid = {"n_series": len(d.series_keys), "n_steps": k, "start": _iso(times[0]), "freq": d.freq,
                    "first_step": p + 1, "horizon": horizon}
            files.stage_bytes(stream_report(APPEND_COMMAND, d, params, described, current.seeded, grid, accuracy),
                              report, option="--report")
            staged_state = stage_private(advanced.to_bytes(), state, "STATE")
            try:
                _pause("staged")
                files.commit(before_publish=begin_commit)  # from here a SIGTERM waits for the state too
                _pause("published")
                install(staged_state, state, "STATE")
            except BaseException:
                staged_state.unlink(missing_ok=True)
                abandon_commit()
                raise
    return {"stream_id": d.stream_id, "first_step": p + 1, "last_step": p + k, "horizon": horizon,
            "output": output, "report": report, "sha256": digest, "series": len(d.series_keys),
            "remaining_steps": horizon - p - k, "seeded": current.seeded}


def _pause(point: str) -> None:
    """Tests only: with ``TSDP_STREAM_PAUSE_AT=point``, write ``point`` to the file named by
    ``TSDP_STREAM_PAUSE_FILE`` and sleep, so that a test can send SIGTERM at that point."""
    import os

    if os.environ.get(PAUSE_ENV) != point:
        return
    import time

    Path(os.environ["TSDP_STREAM_PAUSE_FILE"]).write_text(point)
    time.sleep(float(os.environ.get("TSDP_STREAM_PAUSE_SECONDS", "30")))


# --------------------------------------------------------------------------------------------------
# status
# --------------------------------------------------------------------------------------------------


def status(state: str) -> dict[str, Any]:
    """Position, horizon, budget and the expected error of each output (public figures only)."""
    current = State.read(state)
    d, p = current.definition, current.position
    setting = d.setting
    privacy = _core().privacy_map(setting)
    accuracy = accuracy_of(setting, d.alpha)
    z = _z(d.alpha)
    following = [{"output": name, "sd": float(sd[p]), "half_width": z * float(sd[p])}
                 for name, sd in accuracy.items()] if p < setting.horizon else None
    return {"stream_id": d.stream_id, "position": p, "horizon": setting.horizon,
            "remaining_steps": setting.horizon - p, "complete": p >= setting.horizon, "start": d.start,
            "freq": d.freq, "series": len(d.series_keys), "unit": setting.unit, "strategy": setting.strategy,
            "sampler": setting.sampler, "epsilon": privacy.epsilon, "delta": privacy.delta,
            "budget": "charged once at init for the whole horizon", "alpha": d.alpha,
            "next_step": following, "expected_error": _expected(accuracy), "seeded": current.seeded,
            "report": current.report}

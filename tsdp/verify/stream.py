"""Verification of ``tsdp stream`` reports (the stream report of ``stream init`` and each append report).

Every such report records the stream's whole public definition (``command.parameters.definition``:
the :class:`~tsdp.mechanisms.continual.StreamSetting`, the grid, the series keys, the layout) and its
sha256 (``definition_sha256``, which also binds an append report to its stream report). The checks:

* ``command``: the definition hashes to the stated ``definition_sha256`` and carries the stated
  ``stream_id``; an append report's steps ``first_step..last_step`` lie within the horizon
  (1 <= first <= last <= T) and match its grid; the grid's series count is that of the keys;
* ``unit``, ``events``, ``parameters``, ``privacy_loss``: the claim is recomputed by calling the
  core's own privacy map (:func:`tsdp.mechanisms.continual.privacy_map`, through
  :func:`tsdp.api.stream.stream_claim`: the same map the release used, not a copy) on the setting
  rebuilt from the definition, and every figure of the report's claim must equal it: a lowered
  epsilon, a lowered sigma, an edited sensitivity or unit fails;
* the accuracy block: the per-step s.d. of each output, recomputed from the same setting
  (:func:`tsdp.api.stream.accuracy_of`), for the steps the report covers.

The released file's sha256 is checked by the caller like any report's (``tsdp account verify``).
"""

from __future__ import annotations

import math
from typing import Any

DESCRIBES = ("continual release (tsdp stream): one Gaussian mechanism on C x over the whole horizon, "
             "recomputed with tsdp.mechanisms.continual.privacy_map")
COMMANDS = ("stream init", "stream append")
REL_TOL = 1e-9


def _command_name(data: Any) -> Any:
    command = data.get("command") if isinstance(data, dict) else None
    return command.get("name") if isinstance(command, dict) else None


def is_stream_report(data: Any) -> bool:
    """Whether ``data`` was written by ``tsdp stream`` (its command names it)."""
    return _command_name(data) in COMMANDS


def is_append_report(data: Any) -> bool:
    """Whether ``data`` is the report of one ``tsdp stream append`` (part of its stream's one spend)."""
    return _command_name(data) == "stream append"


def check(report, out) -> None:
    """The verify rule (``tsdp.verify.checks`` calls it with its parsed report and outcome)."""
    from tsdp.mechanisms.continual.definition import Definition, accuracy_of, definition_digest, stream_claim

    out.definition = "approx-dp"
    command = out.group("command")
    data = report.data
    params = report.command
    name = (data.get("command") or {}).get("name")
    if not command.expect(name in COMMANDS, f"command {name!r} is not one of {', '.join(COMMANDS)}"):
        return
    stated = params.get("definition")
    if not command.expect(isinstance(stated, dict), "the report records no stream definition"):
        return
    command.equal("definition_sha256", params.get("definition_sha256"), definition_digest(stated))
    command.equal("stream_id", params.get("stream_id"), stated.get("stream_id"))
    definition = Definition.from_dict(stated)
    setting = definition.setting
    first, last = _steps(name, params, report.grid, setting.horizon, len(definition.series_keys), command)
    if not command.problems:
        command.ok(f"stream {definition.stream_id}: steps {first}..{last} of {setting.horizon}")

    want = stream_claim(setting, definition.layout)
    got = report.claim
    unit = out.group("unit")
    unit.equal("the claim's unit", got.unit, want.unit)
    events = out.group("events")
    events.equal("the mechanism events", got.events, want.events)
    prm = out.group("parameters")
    prm.equal("the mechanism", got.mechanism, want.mechanism)
    prm.equal("the theorem", got.theorem, want.theorem)
    _same_numbers(prm, "claim parameter", got.parameters, want.parameters)
    loss = out.group("privacy_loss")
    loss.same("epsilon", got.epsilon, want.epsilon, REL_TOL)
    loss.same("delta", got.delta, want.delta, REL_TOL)
    if not loss.problems:
        loss.ok(f"epsilon {want.epsilon:.6g}, delta {want.delta:.3g} recomputed by the core's privacy map")
    _accuracy(data.get("accuracy"), accuracy_of(setting, definition.alpha), first, last, prm)


def _steps(name: str, params: dict, grid: dict, horizon: int, n_series: int, command) -> tuple[int, int]:
    if name == "stream init":
        command.equal("the grid's n_steps", grid.get("n_steps"), horizon)
        command.equal("the grid's n_series", grid.get("n_series"), n_series)
        return 1, horizon
    first, last = params.get("first_step"), params.get("last_step")
    if not all(isinstance(v, int) and not isinstance(v, bool) for v in (first, last)):
        command.fail(f"the append report's steps are not integers (got {first!r}..{last!r})")
        return 1, 0
    command.expect(1 <= first <= last <= horizon,
                   f"steps {first}..{last} are not within the stream's horizon 1..{horizon}")
    command.equal("the grid's n_steps", grid.get("n_steps"), last - first + 1)
    command.equal("the grid's first_step", grid.get("first_step"), first)
    command.equal("the grid's n_series", grid.get("n_series"), n_series)
    return first, last


def _same_numbers(group, label: str, got: dict, want: dict) -> None:
    if sorted(got) != sorted(want):
        group.fail(f"the {label}s are {sorted(got)}, expected {sorted(want)}")
        return
    for key, value in want.items():
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            group.same(f"{label} {key}", got[key], value, REL_TOL)
        else:
            group.equal(f"{label} {key}", got[key], value)


def _accuracy(block: Any, accuracy: dict, first: int, last: int, group) -> None:
    if not isinstance(block, dict) or not isinstance(block.get("per_step_sd"), dict):
        group.fail("the report has no per-step accuracy block")
        return
    stated = block["per_step_sd"]
    if sorted(stated) != sorted(accuracy):
        group.fail(f"the accuracy block covers outputs {sorted(stated)}, the stream releases {sorted(accuracy)}")
        return
    for name, sd in accuracy.items():
        want = [float(v) for v in sd[first - 1:last]]
        values = stated[name]
        if not isinstance(values, list) or len(values) != len(want):
            group.fail(f"the accuracy of {name!r} states {len(values) if isinstance(values, list) else 0} steps, "
                       f"expected {len(want)}")
            return
        for t, (g, w) in enumerate(zip(values, want), first):
            if not (isinstance(g, (int, float)) and math.isclose(g, w, rel_tol=REL_TOL)):
                group.fail(f"the s.d. of {name!r} at step {t} is {g!r}, expected {w:.10g}")
                return
    group.ok("the per-step accuracy of every output recomputed")


def one_spend(paths: list[str], documents: list[dict]) -> tuple[list[str], list[dict]]:
    """The reports to compose with every stream counted once: a stream report and its append reports
    (one ``stream_id``) are one spend, charged for the whole horizon at init. BudgetError (exit 3)
    when reports of one stream id state different definitions (one of them was edited)."""
    from tsdp.errors import BudgetError

    kept_paths, kept, seen = [], [], {}
    for path, data in zip(paths, documents):
        if is_stream_report(data):
            params = data["command"].get("parameters")
            params = params if isinstance(params, dict) else {}
            stream_id, digest = params.get("stream_id"), params.get("definition_sha256")
            if stream_id in seen:
                if seen[stream_id][1] != digest:
                    raise BudgetError(f"{path!r} and {seen[stream_id][0]!r} are reports of stream {stream_id} but "
                                      "state different definitions: one of them was edited")
                continue
            seen[stream_id] = (path, digest)
        kept_paths.append(path)
        kept.append(data)
    return kept_paths, kept

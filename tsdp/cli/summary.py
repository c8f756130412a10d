"""The ``--json`` summary every command prints: one JSON object on stdout, for scripts and CI.

Its shape is the same in every command: a ``schema`` id naming the command and the version of its
summary (``tsdp.release.summary/1``), snake_case keys at every depth, numbers and identifiers as
values (caveats are warnings, not values), and ``warnings``: every warning the run printed on
stderr, each as ``{"code": ..., "message": ...}`` so that a script can act on the code (the codes
and their meanings: :data:`tsdp.caveats.CODES`). No warning quotes a figure of the private data:
those are in the custodian file. A non-finite number becomes ``null`` (strict JSON).
"""

from __future__ import annotations

import json
import re
from typing import Any

SUMMARY_VERSION = 1
SNAKE_CASE = re.compile(r"^[a-z][a-z0-9]*(_[a-z0-9]+)*$")


def warning_code(message: str) -> str:
    """A warning's stable code (:data:`tsdp.caveats.CODES`); ``warning`` for a plain string, which
    no tsdp command emits."""
    from tsdp.caveats import code_of

    return code_of(message)


def schema_id(title: str) -> str:
    """``tsdp account calibrate dpsgd --unit record`` -> ``tsdp.account.calibrate.dpsgd.summary/1``;
    a flag in the title that changes what the command does names its own summary
    (``tsdp release --evaluate`` -> ``tsdp.release.evaluate.summary/1``), option values do not."""
    words = title.split(":")[0].split()
    names: list[str] = []
    for i, word in enumerate(words):
        if word.startswith("--"):
            if i + 1 < len(words) and not words[i + 1].startswith("--"):
                continue  # an option with a value (--unit record) describes, it does not rename
            names.append(word[2:].replace("-", "_"))
        elif i == 0 or not words[i - 1].startswith("--"):
            names.append(word.replace("-", "_"))
    return ".".join(names) + f".summary/{SUMMARY_VERSION}"


def non_snake_keys(value: Any, where: str = "") -> list[str]:
    """Paths of the keys that are not snake_case, at any depth (empty when the summary is clean)."""
    found: list[str] = []
    if isinstance(value, dict):
        for key, item in value.items():
            path = f"{where}.{key}" if where else str(key)
            if not (isinstance(key, str) and SNAKE_CASE.match(key)):
                found.append(path)
            found.extend(non_snake_keys(item, path))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            found.extend(non_snake_keys(item, f"{where}[{i}]"))
    return found


def document(data: dict[str, Any], title: str, warnings: list[str], schema: str | None = None) -> str:
    """The summary as printed: ``schema`` first, then ``data``, then the warnings with codes."""
    from tsdp.caveats import require_public
    from tsdp.report import json_ready

    require_public(warnings, "the --json summary")
    body = {"schema": schema or schema_id(title), **data,
            "warnings": [{"code": warning_code(m), "message": m} for m in warnings]}
    bad = non_snake_keys(body)
    if bad:  # a programming error: a summary key written as prose
        raise RuntimeError(f"--json summary keys are not snake_case: {', '.join(bad)}")
    return json.dumps(json_ready(body, nonfinite_as_null=True), indent=2, allow_nan=False, default=str)

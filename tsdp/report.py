"""The privacy report: a versioned JSON document written next to every release.

Layout (``"schema": "tsdp-report/1"``, validated by ``tsdp/schemas/report.schema.json``):
tool name and version, creation time, the command and its public parameters, the privacy claim,
the released grid, the output file's name, format and sha256, the randomness source, notes and
warnings (public texts: :class:`tsdp.caveats.Caveat`), and the ``accuracy`` block (the noise's
(1 - alpha) half-width, from public parameters). It never holds the seed of a run, raw or true
values, data-dependent statistics that were not privatised (a finding about the private data,
:class:`tsdp.caveats.PrivateCaveat`, is refused), or a hash of the private input (DESIGN.md section 2).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from datetime import datetime, timezone
from importlib import resources
from typing import Any

from tsdp import __version__
from tsdp.accounting.claim import PrivacyClaim

SCHEMA_ID = "tsdp-report/1"
FORBIDDEN_PARAMETERS = ("seed",)


@dataclass
class Report:
    command: str
    parameters: dict[str, Any]
    claim: PrivacyClaim
    output: dict[str, Any]
    randomness: str
    grid: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    lip: dict[str, Any] | None = None  # FLIP's statement and per-series diagnostics
    accuracy: dict[str, Any] | None = None  # tsdp.accuracy.Accuracy.to_dict(): public parameters only

    def to_dict(self) -> dict[str, Any]:
        from tsdp.caveats import require_public

        require_public([*self.warnings, *self.notes], "a report")  # private findings: custodian file only
        params = {k: json_ready(v, where=f"parameters.{k}") for k, v in self.parameters.items()
                  if k not in FORBIDDEN_PARAMETERS}
        out = {
            "schema": SCHEMA_ID,
            "tool": {"name": "tsdp", "version": __version__},
            "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            # the seed's use, recorded apart from "randomness" and the seeded-run warning (never the seed):
            # tsdp account verify requires the three to agree, so relabelling a seeded report takes them all
            "command": {"name": self.command, "parameters": {**params, "seeded": self.randomness == "seeded"}},
            "claim": json_ready(self.claim.to_dict(), where="claim"),
            "grid": json_ready(self.grid, where="grid"),
            "output": json_ready(self.output, where="output"),
            "randomness": self.randomness,
            "notes": [str(n) for n in self.notes],
            "warnings": [str(w) for w in self.warnings],
        }
        if self.lip is not None:
            out["lip"] = json_ready(self.lip, where="lip")
        if self.accuracy is not None:
            out["accuracy"] = json_ready(self.accuracy, where="accuracy")
        return out

    def to_json(self) -> bytes:
        return (json.dumps(self.to_dict(), indent=2, allow_nan=False) + "\n").encode()


def schema() -> dict[str, Any]:
    """The JSON Schema that every tsdp report validates against."""
    text = resources.files("tsdp").joinpath("schemas/report.schema.json").read_text()
    return json.loads(text)


def load_report(path: str) -> dict[str, Any]:
    """Read a tsdp report and validate it against the schema.

    UsageError if the file is missing; DataError if it is not strict JSON (NaN, Infinity, duplicate
    keys and excessive nesting are refused by :func:`tsdp.jsonfile.read_json`), not a valid report,
    or holds a non-finite number.
    """
    import jsonschema

    from tsdp.errors import DataError
    from tsdp.jsonfile import read_json

    data = read_json(path, "REPORT")
    try:
        errors = sorted(jsonschema.Draft202012Validator(schema()).iter_errors(data), key=lambda e: list(e.path))
    except RecursionError:
        raise DataError(f"REPORT {path!r} is nested too deeply to be a {SCHEMA_ID} report") from None
    if errors:
        where = "/".join(str(x) for x in errors[0].path) or "(top level)"
        raise DataError(f"REPORT {path!r} is not a valid {SCHEMA_ID} report: at {where}: {errors[0].message}")
    return data


def json_ready(value: Any, nonfinite_as_null: bool = False, where: str = "") -> Any:
    """JSON-ready copy: tuples to lists, numpy scalars to Python; a non-finite float is refused
    (a report: NumericalError naming where it sits) or, with ``nonfinite_as_null``, becomes
    ``None`` (diagnostics such as a NaN loss)."""
    if isinstance(value, dict):
        return {str(k): json_ready(v, nonfinite_as_null, f"{where}.{k}" if where else str(k)) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_ready(v, nonfinite_as_null, f"{where}[{i}]") for i, v in enumerate(value)]
    if hasattr(value, "item") and callable(value.item):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        if nonfinite_as_null:
            return None
        from tsdp.errors import NumericalError

        raise NumericalError(f"the report would hold the non-finite number {value} at {where or 'top level'}: "
                             "a parameter or a computed figure overflowed; check the options that set it")
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    return str(value)

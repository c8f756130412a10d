"""Reading a JSON document that a user points tsdp at (a report, a ledger spend, a model's metadata).

tsdp writes strict JSON (``allow_nan=False``), so a file holding ``NaN``, ``Infinity``, a number too
large for a float, a key given twice, or nesting deep enough to exhaust the parser is not one of its
documents: it is refused as bad input (DataError, exit 4) instead of being read into values that
compare false with everything (a NaN epsilon is never "above" a budget).
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from tsdp.errors import DataError, UsageError


class _Refused(ValueError):
    """A JSON construct tsdp never writes (raised while parsing, reported as DataError)."""


def _constant(name: str) -> Any:
    raise _Refused(f"the non-finite constant {name} (tsdp writes strict JSON: no NaN or Infinity)")


def _number(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise _Refused(f"the number {text[:40]} does not fit a float (it would read as {value})")
    return value


def _integer(text: str) -> int:
    if len(text.lstrip("-")) > 308:
        raise _Refused(f"the integer {text[:20]}... of {len(text)} digits, too large for a float")
    return int(text)


def _object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise _Refused(f"the key {key!r} twice in one object (which one counts is ambiguous)")
        out[key] = value
    return out


def loads_strict(text: str) -> Any:
    """``json.loads`` that refuses NaN/Infinity, numbers overflowing a float, and duplicate keys
    (ValueError), and nesting deeper than the interpreter's recursion limit (RecursionError)."""
    return json.loads(text, parse_constant=_constant, parse_float=_number, parse_int=_integer,
                      object_pairs_hook=_object)


def read_json(path: str | Path, label: str) -> Any:
    """The parsed file; UsageError if it does not exist, DataError if it is not strict JSON.

    ``label`` names the file in messages, e.g. ``"--report"`` or ``"model metadata"``.
    """
    p = Path(path)
    if not p.is_file():
        raise UsageError(f"{label}: file {str(path)!r} does not exist")
    try:
        return loads_strict(p.read_text())
    except _Refused as exc:
        raise DataError(f"{label}: {str(path)!r} holds {exc}") from None
    except RecursionError:
        raise DataError(f"{label}: {str(path)!r} is nested too deeply to be a tsdp document") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise DataError(f"{label}: {str(path)!r} is not JSON ({exc})") from None

"""Checks of ``ReleaseOptions`` values as the command line or a Python caller gives them: a choice
(text or the command line's Enum), column names (``a,b`` or a list) and the ``auto``-able caps."""

from __future__ import annotations

from typing import Any, Sequence

from tsdp.errors import UsageError


def choice(option: str, value: Any, allowed: Sequence[str]) -> str | None:
    """``value`` (a string or an Enum of the command line) checked against ``allowed``."""
    if value is None:
        return None
    value = getattr(value, "value", value)
    if value not in allowed:
        raise UsageError(f"--{option} {value!r}: must be one of {', '.join(allowed)}")
    return value


def names(value: str | Sequence[str] | None) -> list[str] | None:
    """Column names given as ``a,b`` (command line) or a list (Python)."""
    if value is None:
        return None
    items = str(value).split(",") if isinstance(value, str) else [str(v) for v in value]
    return [t.strip() for t in items if t.strip()] or None


def cap_value(option: str, value, integer: bool):
    """A cap option: None, "auto", or a number (``integer``: a whole number >= 1); text from the
    command line is parsed. UsageError naming ``--option`` otherwise."""
    if value is None or value == "auto":
        return value
    given = value
    if isinstance(value, str):
        try:
            value = int(value) if integer else float(value)
        except ValueError:
            raise UsageError(f"--{option} {value!r}: must be a {'whole number >= 1' if integer else 'number'} "
                             "or auto") from None
    if integer and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
        raise UsageError(f"--{option} {given!r}: must be an integer >= 1 or auto")
    if not integer and (isinstance(value, bool) or not isinstance(value, (int, float))):
        raise UsageError(f"--{option} {given!r}: must be a number or auto")
    return value


def check_alpha(alpha) -> None:
    if isinstance(alpha, bool) or not isinstance(alpha, (int, float)) or not (0.0 < alpha < 1.0):
        raise UsageError(f"--alpha must be in (0, 1), got {alpha!r}")

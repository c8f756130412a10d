"""How the API reads an option given as text, as on the command line (``"a,b"``, ``"lo,hi"``), or as a
Python value; one place for the options of every command."""

from __future__ import annotations

from typing import Any, Sequence

from tsdp.errors import UsageError


def split_list(text: str | None) -> list[str] | None:
    """``a,b,c`` -> ``['a', 'b', 'c']`` (``None`` stays ``None``; nothing but commas is ``None``)."""
    if text is None:
        return None
    items = [t.strip() for t in str(text).split(",") if t.strip()]
    return items or None


def names(value: str | Sequence[str] | None) -> list[str] | None:
    """Column names given as ``"a,b"`` or as a sequence of names."""
    if value is None or isinstance(value, str):
        return split_list(value)
    return [str(v).strip() for v in value if str(v).strip()] or None


def number_pair(value: Any, option: str, example: str) -> tuple[float, float]:
    """``"lo,hi"`` or a pair of numbers -> ``(lo, hi)``; UsageError naming ``option`` otherwise."""
    parts = (split_list(value) or []) if isinstance(value, str) else [p for p in value if str(p).strip()]
    try:
        pair = tuple(float(p) for p in parts)
    except (TypeError, ValueError):
        pair = ()
    if len(pair) != 2:
        raise UsageError(f"{option} {value!r}: must be two numbers such as {example}")
    return pair  # type: ignore[return-value]


def enum_value(x: Any) -> Any:
    """An Enum of the command line as its value; a plain value as it is."""
    return getattr(x, "value", x)

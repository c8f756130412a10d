"""Grid steps: ``--freq`` read as a :class:`Step` (a fixed number of microseconds, calendar months, or
an integer step for integer time columns)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from tsdp.errors import UsageError

_UNIT_ALIASES = {
    "ns": "ns", "us": "us", "ms": "ms", "s": "s", "sec": "s", "second": "s", "seconds": "s",
    "m": "m", "min": "m", "minute": "m", "minutes": "m", "t": "m",
    "h": "h", "hour": "h", "hours": "h", "d": "d", "day": "d", "days": "d",
    "w": "w", "week": "w", "weeks": "w", "mo": "mo", "month": "mo", "months": "mo",
    "q": "q", "quarter": "q", "quarters": "q", "y": "y", "year": "y", "years": "y",
}
_FIXED_US = {"ns": 1e-3, "us": 1, "ms": 1_000, "s": 1_000_000, "m": 60_000_000,
             "h": 3_600_000_000, "d": 86_400_000_000, "w": 604_800_000_000}
_MONTHS = {"mo": 1, "q": 3, "y": 12}
_PHYSICAL_US = {"ns": 1e-3, "us": 1, "ms": 1_000}


@dataclass(frozen=True)
class Step:
    """A grid step: ``amount`` of ``unit`` (``us`` for fixed steps, ``mo`` for calendar, ``int``)."""

    amount: int
    unit: str

    @property
    def label(self) -> str:
        if self.unit == "int":
            return str(self.amount)
        if self.unit == "mo":
            if self.amount % 12 == 0:
                return f"{self.amount // 12}y"
            if self.amount % 3 == 0:
                return f"{self.amount // 3}q"
            return f"{self.amount}mo"
        for unit in ("w", "d", "h", "m", "s", "ms"):
            size = _FIXED_US[unit]
            if self.amount % size == 0:
                return f"{self.amount // size}{unit}"
        return f"{self.amount}us"


def parse_freq(freq: str, integer_time: bool) -> Step:
    """Parse ``--freq`` (``15min``, ``1h``, ``1d``, ``1mo``, ``1q`` ... or an integer step)."""
    text = str(freq).strip().lower()
    if integer_time:
        if re.fullmatch(r"\d+", text) and int(text) > 0:
            return Step(int(text), "int")
        raise UsageError(f"--freq must be a positive integer for an integer time column, got {freq!r}")
    match = re.fullmatch(r"(\d*)\s*([a-z]+)", text)
    unit = _UNIT_ALIASES.get(match.group(2)) if match else None
    amount = int(match.group(1) or 1) if match else 0
    if unit is None or amount <= 0:
        raise UsageError(
            f"--freq: cannot read {freq!r}; use a number and a unit such as 15min, 1h, 1d, 1w, 1mo, 1q, 1y"
        )
    if unit in _MONTHS:
        return Step(amount * _MONTHS[unit], "mo")
    us = amount * _FIXED_US[unit]
    if us != int(us) or us <= 0:
        raise UsageError(f"--freq {freq!r} is finer than a microsecond")
    return Step(int(us), "us")

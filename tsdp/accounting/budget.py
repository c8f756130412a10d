"""Validation of privacy budgets, shared by every mechanism and command."""

from __future__ import annotations

import math

from tsdp.errors import UsageError


def check_epsilon(epsilon: float, option: str = "--epsilon") -> None:
    if not (isinstance(epsilon, (int, float)) and math.isfinite(epsilon) and epsilon > 0):
        raise UsageError(f"{option} must be finite and > 0, got {epsilon}")


def check_delta(delta: float | None, option: str = "--delta") -> None:
    if delta is None or not (math.isfinite(delta) and 0 < delta < 1):
        raise UsageError(f"{option} must be in (0, 1), got {delta}")

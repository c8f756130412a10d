"""Validation of privacy budgets, shared by every mechanism and command."""

from __future__ import annotations

import math
import numbers

from tsdp.errors import UsageError


# The largest epsilon tsdp calibrates for. e^epsilon overflows a float beyond 709, so far larger
# budgets promise nothing and only drive the calibrations (root finding on privacy profiles in log
# space) outside the range where they are accurate; 1e6 keeps every mechanism's calibration exact.
MAX_EPSILON = 1e6
# The smallest: noise of scale sensitivity / epsilon beyond 1e12 x the sensitivity releases nothing
# but noise, and below it the noise scales and their sampling lattices leave the float range.
MIN_EPSILON = 1e-12


def check_epsilon(epsilon: float, option: str = "--epsilon") -> None:
    if isinstance(epsilon, bool) or not (isinstance(epsilon, numbers.Real) and math.isfinite(epsilon)
                                         and epsilon > 0):  # numbers.Real: numpy scalars too
        raise UsageError(f"{option} must be finite and > 0, got {epsilon}")
    if epsilon < MIN_EPSILON:
        raise UsageError(f"{option} {epsilon:g} is below {MIN_EPSILON:g}: the noise (scale sensitivity / epsilon) "
                         "would release nothing but noise, and tsdp calibrates noise for epsilon >= "
                         f"{MIN_EPSILON:g} only")
    if epsilon > MAX_EPSILON:
        raise UsageError(f"{option} {epsilon:g} is beyond {MAX_EPSILON:g}: such a budget promises no privacy "
                         f"(e^epsilon overflows), and tsdp calibrates noise for epsilon <= {MAX_EPSILON:g} only")


def check_delta(delta: float | None, option: str = "--delta") -> None:
    if delta is None or not (math.isfinite(delta) and 0 < delta < 1):
        raise UsageError(f"{option} must be in (0, 1), got {delta}")


# The noise search lives in its own module; its names are imported from here by the calibrations.
from tsdp.accounting.noise_search import (  # noqa: E402,F401
    MAX_NOISE_MULTIPLIER, MIN_NOISE_MULTIPLIER, Calibration, coarse_discretization, smallest_noise_within)

"""Validation of privacy budgets, shared by every mechanism and command."""

from __future__ import annotations

import math
import numbers

from tsdp.errors import GridTooLarge, UsageError


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


def largest_count_within(epsilon_of, target_epsilon: float, limit: int) -> tuple[int, float]:
    """The largest n in [1, limit] with ``epsilon_of(n) <= target_epsilon`` and that epsilon, for an
    epsilon that grows with the number n of compositions (doubling, then bisection); (0, epsilon
    of one) when even one exceeds the target. Used by every "how many steps fit" calibration."""
    first = epsilon_of(1)
    if first > target_epsilon:
        return 0, first
    good, good_eps, bad = 1, first, None
    while bad is None:
        trial = min(good * 2, limit)
        eps = epsilon_of(trial)
        if eps <= target_epsilon:
            good, good_eps = trial, eps
            if trial == limit:
                return good, good_eps
        else:
            bad = trial
    while bad - good > 1:
        mid = (good + bad) // 2
        eps = epsilon_of(mid)
        if eps <= target_epsilon:
            good, good_eps = mid, eps
        else:
            bad = mid
    return good, good_eps


# The largest noise multiplier a calibration tries: beyond it training learns nothing, and a target
# still out of reach there is refused (usually a target below the accountant's grid resolution).
MAX_NOISE_MULTIPLIER = 1e6
# A guard only: the privacy-loss grid outgrows its limit at far larger noise multipliers.
MIN_NOISE_MULTIPLIER = 1e-6


class Calibration(tuple):
    """``(sigma, epsilon)``, as the noise calibrations return it, and ``at_grid_limit``: whether a
    smaller sigma might still meet the target but cannot be accounted (its privacy-loss grid
    outgrows the limit at this discretization), so that sigma is the smallest tsdp certifies
    rather than the smallest that meets the target."""

    at_grid_limit: bool

    def __new__(cls, sigma: float, epsilon: float, at_grid_limit: bool = False):
        self = super().__new__(cls, (sigma, epsilon))
        self.at_grid_limit = at_grid_limit
        return self


def smallest_noise_within(epsilon_at, target_epsilon: float, lo: float, hi: float, discretization: float,
                          rtol: float = 1e-3) -> Calibration:
    """Smallest noise multiplier (to ``rtol``, rounded up) whose ``epsilon_at`` is at most the target.

    Doubling or halving from ``[lo, hi]`` to a bracket, then bisection on log(sigma) (epsilon
    decreases as sigma grows); the sigma returned is the upper end of the final bracket, whose
    epsilon was computed and is within the target. A sigma too small to account (GridTooLarge)
    counts as missing the target, so a target that only smaller noise would reach (a huge
    epsilon, or a sampling rate below delta) gets the smallest sigma tsdp can account, flagged
    ``at_grid_limit``. A target not reached by ``MAX_NOISE_MULTIPLIER`` is a UsageError naming
    --epsilon and the smallest epsilon reachable.
    """
    def within(sigma: float) -> tuple[bool, float | None]:
        try:
            eps = epsilon_at(sigma)
        except GridTooLarge:
            return False, None
        return eps <= target_epsilon, eps

    ok, hi_eps = within(hi)
    lo_measured = True  # lo's epsilon was computed (and exceeds the target), not only unaccountable
    if ok:
        while True:
            if lo < MIN_NOISE_MULTIPLIER:
                lo_measured = False
                break
            lo_ok, eps = within(lo)
            if not lo_ok:
                lo_measured = eps is not None
                break
            hi, hi_eps, lo = lo, eps, lo / 2
    while not ok:
        if hi >= MAX_NOISE_MULTIPLIER:
            raise _out_of_reach(target_epsilon, hi_eps, discretization)
        lo, lo_measured = hi, hi_eps is not None
        hi = min(hi * 2, MAX_NOISE_MULTIPLIER)
        ok, hi_eps = within(hi)
    while hi / lo > 1 + rtol:
        mid = math.sqrt(lo * hi)
        mid_ok, eps = within(mid)
        if mid_ok:
            hi, hi_eps = mid, eps
        else:
            lo, lo_measured = mid, eps is not None
    return Calibration(hi, hi_eps, not lo_measured)


def _out_of_reach(target: float, smallest: float | None, discretization: float) -> UsageError:
    """The refusal of a target that even the largest noise multiplier misses, and what to change."""
    if smallest is not None and smallest < 10 * discretization:
        hint = ("most of it is the rounding of the privacy-loss grid: pass a finer --discretization "
                f"(e.g. {target / 10:.2g}) or a larger --epsilon")
    else:
        hint = "give a larger --epsilon or a shorter training (--steps or --epochs)"
    reached = f"{smallest:.3g}" if smallest is not None else "not computable"
    return UsageError(f"--epsilon {target:g} is out of reach for this training: at noise multiplier "
                      f"{MAX_NOISE_MULTIPLIER:g}, the largest tsdp calibrates, epsilon is {reached} "
                      f"(--discretization {discretization:g}); {hint}")

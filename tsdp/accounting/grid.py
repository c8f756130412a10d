"""Settings of the privacy-loss grids, in a module without numpy (cheap to import at start-up)."""

from __future__ import annotations

from tsdp.errors import NumericalError

DEFAULT_DISCRETIZATION = 1e-3
TAIL_MASS = 1e-15
# The smallest delta read off a composed (FFT) privacy-loss distribution. The FFT is exact to about
# 1e-16 of the total mass per grid point, and over a grid of 10^4..10^6 points that error reaches the
# 1e-13 scale, where it is no longer small against delta. At delta = 1e-14 and 1e-15 epsilon moved by
# 5% to 20% between discretizations 1e-3 and 1e-4 (the finer grid higher). At 1e-12 it moved by only
# 0.02-0.2%, but against prv_accountant's lower bound (Gopi et al. 2021, which bounds its own errors)
# it fell short: Poisson q = 0.01, sigma 0.8, 10^4 steps gave 16.732 / 16.724 / 16.749 at grids 1e-3,
# 3e-4, 1e-4 where the true epsilon is at least 16.757 (dp-accounting: 16.792). At 1e-10 and above it
# stayed at or above that lower bound over q in 1e-4..0.1, 10^3..10^5 steps, sigma 0.6..3
# (tests/accounting/test_delta_floor.py checks the case above at the floor).
MIN_COMPOSED_DELTA = 1e-10
# The finest privacy-loss grid step of DP-SGD accounting: a finer one is refused rather than computed (it
# could take hours); forecast-train refuses it before training, verify in a report.
MIN_DPSGD_DISCRETIZATION = 1e-5


def tail_mass_for(delta: float) -> float:
    """Tail mass dp-accounting may truncate per composition: the paper's 1e-15, and never more than
    a thousandth of the target delta (truncated right tails go to infinite loss, pessimistically)."""
    return min(TAIL_MASS, delta * 1e-3)


def check_composed_delta(delta: float, count: int, option: str = "--delta") -> None:
    """NumericalError when ``count`` > 1 compositions would be read at a ``delta`` below
    :data:`MIN_COMPOSED_DELTA`: the answer would be rounding error, not an upper bound."""
    if count > 1 and delta < MIN_COMPOSED_DELTA:
        raise NumericalError(
            f"{option} {delta:g} is below {MIN_COMPOSED_DELTA:g}, the smallest delta tsdp reads off a composition "
            f"of {count:,} steps: the FFT that composes the privacy-loss distribution is exact only to about "
            f"1e-16 per grid point, which adds up to more than such a delta; use {option} {MIN_COMPOSED_DELTA:g} or "
            "larger")

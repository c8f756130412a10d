"""The noise-multiplier search shared by the DP-SGD calibrations.

Epsilon decreases as the noise multiplier sigma grows; a calibration wants the smallest sigma
(to a relative tolerance ``rtol``, rounded up) whose epsilon is within the target. It is the
certified calibrator's search for an expensive accountant
(:func:`tsdp.accounting.calibrate.smallest_within`: every evaluation builds a privacy-loss grid
and composes it) between the noise multipliers tsdp calibrates, with an optional cheap
``estimate`` (the same accountant on a coarser grid, :func:`coarse_discretization`) that only
chooses where the exact accountant looks; it never decides the answer.
"""

from __future__ import annotations

from tsdp.accounting.calibrate import Calibration, smallest_within
from tsdp.errors import UsageError

__all__ = ["MAX_NOISE_MULTIPLIER", "MIN_NOISE_MULTIPLIER", "Calibration", "coarse_discretization",
           "smallest_noise_within"]

# The largest noise multiplier a calibration tries: beyond it training learns nothing, and a target
# still out of reach there is refused (usually a target below the accountant's grid resolution).
MAX_NOISE_MULTIPLIER = 1e6
# A guard only: the privacy-loss grid outgrows its limit at far larger noise multipliers.
MIN_NOISE_MULTIPLIER = 1e-6
# The cheap estimate's grid is this many times coarser than the exact one ...
COARSE_FACTOR = 10
# ... but no coarser than this fraction of the target epsilon (its rounding would then move the
# estimate's root far from the exact one, and the exact search would pay for the walk).
COARSE_OF_TARGET = 1e-2


def coarse_discretization(target_epsilon: float, discretization: float, compositions: int = 1) -> float | None:
    """The grid step of the cheap estimate for a target after ``compositions`` compositions, or
    None when no grid is both coarse enough to save work and fine enough to resolve the target.
    The pessimistic rounding can cost up to a grid step per composition, so a long training
    gets no coarse estimate once that could reach the target (it would mislead more than guide)."""
    coarse = min(discretization * COARSE_FACTOR, target_epsilon * COARSE_OF_TARGET)
    if coarse < 2 * discretization or compositions * coarse > target_epsilon:
        return None
    return coarse


def smallest_noise_within(epsilon_at, target_epsilon: float, lo: float, hi: float, discretization: float,
                          rtol: float = 1e-3, estimate=None) -> Calibration:
    """Smallest noise multiplier (to ``rtol``, rounded up) whose ``epsilon_at`` is at most the target.

    ``epsilon_at`` is the exact accountant; ``estimate`` (optional) a cheaper one that only
    guides the search. Without an estimate the search starts at ``hi`` (``lo`` is not needed any
    more: the walk finds its own lower end). A sigma too small to account (GridTooLarge) counts as
    missing the target, so a target that only smaller noise would reach (a huge epsilon, or a
    sampling rate below delta) gets the smallest sigma tsdp can account, flagged
    ``at_grid_limit``. A target not reached by ``MAX_NOISE_MULTIPLIER`` is a UsageError naming
    --epsilon and the smallest epsilon reachable.
    """
    del lo  # the walk finds its own lower end
    return smallest_within(epsilon_at, target_epsilon, hi, rtol, MIN_NOISE_MULTIPLIER, MAX_NOISE_MULTIPLIER,
                           lambda smallest: _out_of_reach(target_epsilon, smallest, discretization), estimate)


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

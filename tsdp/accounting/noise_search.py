"""The noise-multiplier search shared by the DP-SGD calibrations.

Epsilon decreases as the noise multiplier sigma grows; a calibration wants the smallest sigma
(to a relative tolerance ``rtol``, rounded up) whose epsilon is within the target. Every
evaluation of the exact accountant builds a privacy-loss grid and composes it, so the search
spends as few of them as it can:

1. an optional cheap ``estimate`` (the same accountant on a coarser grid) locates the root first;
2. the exact accountant then brackets the root from that estimate with small steps (or, without
   an estimate, by doubling and halving) and closes the bracket by interpolating log(epsilon) in
   log(sigma), aiming each probe so that the bracket ends one ``rtol`` wide.

The answer is always certified by the exact accountant: the sigma returned is the upper end of
the final bracket, whose exact epsilon was computed and is within the target, and the lower end
(at most ``1 + rtol`` below it) was computed and misses the target (or cannot be accounted). The
estimate only chooses where the exact accountant looks; it never decides the answer.
"""

from __future__ import annotations

import math

from tsdp.errors import GridTooLarge, TsdpError, UsageError

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


def coarse_discretization(target_epsilon: float, discretization: float) -> float | None:
    """The grid step of the cheap estimate for a target, or None when no grid is both coarse
    enough to save work and fine enough to resolve the target."""
    coarse = min(discretization * COARSE_FACTOR, target_epsilon * COARSE_OF_TARGET)
    return coarse if coarse >= 2 * discretization else None


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


class _Bracket:
    """``lo`` misses the target (its epsilon ``lo_eps``, None when it could not be accounted),
    ``hi`` meets it (``hi_eps``); every probe goes through :meth:`probe`."""

    def __init__(self, epsilon_at, target: float):
        self.epsilon_at, self.target = epsilon_at, target
        self.lo = self.lo_eps = self.hi = self.hi_eps = None
        self.lo_measured = True

    def probe(self, sigma: float) -> bool:
        try:
            eps = self.epsilon_at(sigma)
        except GridTooLarge:  # too small a sigma to account counts as missing the target
            eps = None
        if eps is not None and eps <= self.target:
            self.hi, self.hi_eps = sigma, eps
            return True
        self.lo, self.lo_eps, self.lo_measured = sigma, eps, eps is not None
        return False


def smallest_noise_within(epsilon_at, target_epsilon: float, lo: float, hi: float, discretization: float,
                          rtol: float = 1e-3, estimate=None) -> Calibration:
    """Smallest noise multiplier (to ``rtol``, rounded up) whose ``epsilon_at`` is at most the target.

    ``epsilon_at`` is the exact accountant; ``estimate`` (optional) a cheaper one that only
    guides the search (see the module docstring). Without an estimate the search starts from
    ``[lo, hi]``. A sigma too small to account (GridTooLarge) counts as missing the target, so a
    target that only smaller noise would reach (a huge epsilon, or a sampling rate below delta)
    gets the smallest sigma tsdp can account, flagged ``at_grid_limit``. A target not reached by
    ``MAX_NOISE_MULTIPLIER`` is a UsageError naming --epsilon and the smallest epsilon reachable.
    """
    guess = _estimated_root(estimate, target_epsilon, lo, hi, discretization, rtol) if estimate else None
    bracket = _Bracket(epsilon_at, target_epsilon)
    if guess is not None:
        _bracket_near(bracket, guess, rtol, discretization)
    else:
        _bracket_by_doubling(bracket, lo, hi, discretization)
    if bracket.lo is not None:
        _close(bracket, rtol)
    return Calibration(bracket.hi, bracket.hi_eps, not bracket.lo_measured)


def _estimated_root(estimate, target: float, lo: float, hi: float, discretization: float,
                    rtol: float) -> float | None:
    """Where the cheap accountant puts the root (its own bracket's upper end), or None when it
    cannot say (then the exact search starts from scratch)."""
    try:
        return smallest_noise_within(estimate, target, lo, hi, discretization, rtol)[0]
    except TsdpError:  # out of reach, or not computable, on the coarse grid: no estimate
        return None


def _bracket_by_doubling(b: _Bracket, lo: float, hi: float, discretization: float) -> None:
    """Doubling or halving from ``[lo, hi]`` until a probe meets the target and one misses it
    (``b.lo`` stays None when every sigma down to the guard meets it)."""
    if b.probe(hi):
        while True:
            if lo < MIN_NOISE_MULTIPLIER:  # every sigma down to the guard meets the target
                b.lo, b.lo_eps, b.lo_measured = lo, None, False
                return
            if not b.probe(lo):
                return
            lo /= 2
    while True:
        if b.lo >= MAX_NOISE_MULTIPLIER:
            raise _out_of_reach(b.target, b.lo_eps, discretization)
        if b.probe(min(b.lo * 2, MAX_NOISE_MULTIPLIER)):
            return


def _bracket_near(b: _Bracket, guess: float, rtol: float, discretization: float) -> None:
    """A bracket around ``guess`` from the exact accountant: a probe just above it, then steps
    away from it that grow fourfold (in log sigma) from ``rtol``, so that an accurate guess costs
    two probes and a poor one a few more."""
    step = 1 + rtol
    sigma = min(guess * math.sqrt(step), MAX_NOISE_MULTIPLIER)
    if b.probe(sigma):
        while True:
            sigma /= step
            if sigma < MIN_NOISE_MULTIPLIER:
                b.lo, b.lo_eps, b.lo_measured = sigma, None, False
                return
            if not b.probe(sigma):
                return
            step = step ** 4
    while True:
        if sigma >= MAX_NOISE_MULTIPLIER:
            raise _out_of_reach(b.target, b.lo_eps, discretization)
        sigma = min(sigma * step, MAX_NOISE_MULTIPLIER)
        if b.probe(sigma):
            return
        step = step ** 4


def _close(b: _Bracket, rtol: float) -> None:
    """Shrink ``[b.lo, b.hi]`` to ``hi / lo <= 1 + rtol``.

    Each probe aims at the interpolated root (log epsilon linear in log sigma between the two
    ends): just above it when the upper end is still far, else one ``rtol`` below the upper end;
    a bisection instead whenever the last two probes did not halve the bracket (in log sigma),
    so the search never stalls on a poor interpolation.
    """
    half = 0.5 * math.log1p(rtol)
    widths: list[float] = []  # log(hi / lo) before each probe
    while b.hi / b.lo > 1 + rtol:
        width = math.log(b.hi / b.lo)
        stalled = len(widths) >= 2 and width > 0.5 * widths[-2]
        root = None if stalled else _interpolated(b)
        if root is None:
            sigma = math.sqrt(b.lo * b.hi)
        elif math.log(b.hi) - root > half:
            sigma = math.exp(root + half * (1 - 1e-9))  # just above the root
        else:
            sigma = b.hi / (1 + rtol) * (1 + 1e-12)  # one rtol below the upper end: closes if it misses
        if not b.lo < sigma < b.hi:
            sigma = math.sqrt(b.lo * b.hi)
        widths.append(width)
        b.probe(sigma)


def _interpolated(b: _Bracket) -> float | None:
    """log sigma where log epsilon, linear in log sigma between the bracket's ends, meets the target."""
    if b.lo_eps is None or b.hi_eps is None or b.hi_eps <= 0 or b.lo_eps <= b.hi_eps:
        return None
    u0, u1 = math.log(b.lo), math.log(b.hi)
    f0, f1 = math.log(b.lo_eps), math.log(b.hi_eps)
    root = u0 + (math.log(b.target) - f0) * (u1 - u0) / (f1 - f0)
    return root if u0 < root < u1 else None


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

"""The noise-multiplier search shared by the DP-SGD calibrations.

Epsilon decreases as the noise multiplier sigma grows; a calibration wants the smallest sigma
(to a relative tolerance ``rtol``, rounded up) whose epsilon is within the target. Every
evaluation of the exact accountant builds a privacy-loss grid and composes it, so the search
spends as few of them as it can:

1. an optional cheap ``estimate`` (the same accountant on a coarser grid) locates the root first;
2. the exact accountant then walks from that estimate (or from the caller's start) to a bracket,
   extrapolating log(epsilon) in log(sigma), and closes the bracket by interpolation, aiming each
   probe so that the bracket ends one ``rtol`` wide; bisection whenever that stalls.

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


def coarse_discretization(target_epsilon: float, discretization: float, compositions: int = 1) -> float | None:
    """The grid step of the cheap estimate for a target after ``compositions`` compositions, or
    None when no grid is both coarse enough to save work and fine enough to resolve the target.
    The pessimistic rounding can cost up to a grid step per composition, so a long training
    gets no coarse estimate once that could reach the target (it would mislead more than guide)."""
    coarse = min(discretization * COARSE_FACTOR, target_epsilon * COARSE_OF_TARGET)
    if coarse < 2 * discretization or compositions * coarse > target_epsilon:
        return None
    return coarse


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
        self.measured: list[tuple[float, float]] = []  # (sigma, epsilon) of every accounted probe

    def probe(self, sigma: float) -> bool:
        try:
            eps = self.epsilon_at(sigma)
        except GridTooLarge:  # too small a sigma to account counts as missing the target
            eps = None
        if eps is not None:
            self.measured.append((sigma, eps))
        if eps is not None and eps <= self.target:
            self.hi, self.hi_eps = sigma, eps
            return True
        self.lo, self.lo_eps, self.lo_measured = sigma, eps, eps is not None
        return False


def smallest_noise_within(epsilon_at, target_epsilon: float, lo: float, hi: float, discretization: float,
                          rtol: float = 1e-3, estimate=None) -> Calibration:
    """Smallest noise multiplier (to ``rtol``, rounded up) whose ``epsilon_at`` is at most the target.

    ``epsilon_at`` is the exact accountant; ``estimate`` (optional) a cheaper one that only
    guides the search (see the module docstring). Without an estimate the search starts at
    ``hi`` (``lo`` is not needed any more: the walk finds its own lower end). A sigma too small to account (GridTooLarge) counts as missing the target, so a
    target that only smaller noise would reach (a huge epsilon, or a sampling rate below delta)
    gets the smallest sigma tsdp can account, flagged ``at_grid_limit``. A target not reached by
    ``MAX_NOISE_MULTIPLIER`` is a UsageError naming --epsilon and the smallest epsilon reachable.
    """
    del lo  # the walk finds its own lower end
    b = _search(epsilon_at, target_epsilon, hi, discretization, rtol, estimate)
    return Calibration(b.hi, b.hi_eps, not b.lo_measured)


def _search(epsilon_at, target: float, start: float, discretization: float, rtol: float, estimate) -> _Bracket:
    guess, slope = _estimated_root(estimate, target, start, discretization, rtol) if estimate else (None, None)
    b = _Bracket(epsilon_at, target)
    _walk(b, guess if guess is not None else start, slope, rtol, discretization)
    _close(b, rtol)
    return b


def _estimated_root(estimate, target: float, start: float, discretization: float,
                    rtol: float) -> tuple[float | None, float | None]:
    """Where the cheap accountant puts the root (its bracket's upper end) and the slope of log
    epsilon in log sigma there, or (None, None) when it cannot say (the exact search then starts
    from scratch)."""
    try:
        b = _search(estimate, target, start, discretization, rtol, None)
    except TsdpError:  # out of reach, or not computable, on the coarse grid: no estimate
        return None, None
    return b.hi, _slope(b.lo, b.lo_eps, b.hi, b.hi_eps)


def _slope(s0: float, e0: float | None, s1: float, e1: float | None) -> float | None:
    """d log epsilon / d log sigma between two measured points, when it is negative (as it should be)."""
    if e0 is None or e1 is None or e0 <= 0 or e1 <= 0 or s0 == s1:
        return None
    slope = (math.log(e1) - math.log(e0)) / (math.log(s1) - math.log(s0))
    return slope if slope < 0 else None


def _walk(b: _Bracket, sigma: float, slope: float | None, rtol: float, discretization: float) -> None:
    """Probe from ``sigma`` until one probe meets the target and one misses it.

    Each step aims just past the root extrapolated from the last two probes (log epsilon linear
    in log sigma; before that, ``slope`` or -1, epsilon ~ 1/sigma), and moves at least ``margin``
    (from 1 + rtol, growing fourfold in log to 2) and at most a factor 4 down (small noise levels
    have large grids) or 1000 up; without a measured epsilon, by a factor 2. Every sigma down to
    the guard meeting the target leaves an unaccountable lower end (flagged ``at_grid_limit``).
    """
    margin, previous, half = 1 + rtol, None, math.sqrt(1 + rtol)
    while True:
        passed = b.probe(sigma)
        if b.lo is not None and b.hi is not None:
            return
        eps = b.hi_eps if passed else b.lo_eps
        if previous is not None:
            slope = _slope(previous[0], previous[1], sigma, eps) or slope
        root = None
        if eps is not None and eps > 0:
            log_root = math.log(sigma) + (math.log(b.target) - math.log(eps)) / (slope or -1.0)
            root = math.exp(min(max(log_root, -700.0), 700.0))
        previous = (sigma, eps)
        if passed:
            step = min(sigma / margin, root / half) if root else sigma / 2
            sigma = max(step, sigma / 4)
            if sigma < MIN_NOISE_MULTIPLIER:  # every sigma down to the guard meets the target
                b.lo, b.lo_eps, b.lo_measured = sigma, None, False
                return
        else:
            if sigma >= MAX_NOISE_MULTIPLIER:
                raise _out_of_reach(b.target, b.lo_eps, discretization)
            step = max(sigma * margin, root * half) if root else sigma * 2
            sigma = min(step, sigma * 1000, MAX_NOISE_MULTIPLIER)
        margin = min(margin ** 4, 2.0)


def _close(b: _Bracket, rtol: float) -> None:
    """Shrink ``[b.lo, b.hi]`` to ``hi / lo <= 1 + rtol``.

    A probe aims just above the interpolated root (log epsilon linear in log sigma between the
    two ends); when it meets the target, the next probe goes one ``rtol`` below it, which closes
    the bracket if it misses. Epsilon on a grid is a staircase in sigma, so an interpolation can
    be poor: the search bisects whenever the last two probes did not halve the bracket (in log
    sigma), so it never stalls.
    """
    half = 0.5 * math.log1p(rtol)
    widths: list[float] = []  # log(hi / lo) before each probe
    aimed_hit = False  # the last probe aimed just above the root and met the target
    while b.hi / b.lo > 1 + rtol:
        width = math.log(b.hi / b.lo)
        stalled = len(widths) >= 2 and width > 0.5 * widths[-2]
        root = _root_estimate(b)
        aim = False
        if aimed_hit:
            sigma = b.hi / (1 + rtol) * (1 + 1e-12)  # one rtol below: closes the bracket if it misses
        elif stalled or root is None:
            sigma = math.sqrt(b.lo * b.hi)
        elif math.log(b.hi) - root > half:
            sigma, aim = math.exp(root + half * (1 - 1e-9)), True
        else:
            sigma = b.hi / (1 + rtol) * (1 + 1e-12)
        if not b.lo < sigma < b.hi:
            sigma, aim = math.sqrt(b.lo * b.hi), False
        widths.append(width)
        aimed_hit = b.probe(sigma) and aim


def _root_estimate(b: _Bracket) -> float | None:
    """log sigma of the root: by the secant through the last two probes (their local slope) when
    it falls inside the bracket, else by interpolation between the bracket's ends."""
    if len(b.measured) >= 2:
        (s0, e0), (s1, e1) = b.measured[-2:]
        slope = _slope(s0, e0, s1, e1)
        if slope is not None:
            root = math.log(s1) + (math.log(b.target) - math.log(e1)) / slope
            if math.log(b.lo) < root < math.log(b.hi):
                return root
    return _interpolated(b)


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

"""The certified calibrator: the smallest (or largest) value of one scalar parameter whose privacy
measure the exact accountant certifies within a target.

Every calibration in tsdp is one search over a public parameter x (a noise scale, a noise
multiplier, a Gaussian's mu, an epsilon on a privacy profile, a count of compositions, an alpha of
the sampling filter) of a measure m(x) that is **monotone** in x, for a target t. The search has
three phases, each written once here:

1. **Bracket** (:func:`expand`): from a starting point, move geometrically (x -> x * factor, a
   factor > 1 to grow, < 1 to shrink) until the point lands on the wanted side of the target; the
   last point on the other side is returned with it, so the two make a bracket [miss, meet] (in
   either order). A ``limit`` stops the growth: past it the target is out of reach and the caller
   refuses it (or, where the limit is the answer, returns it).
2. **Narrow** the bracket, keeping one end missing and one meeting the target:
   - :func:`bisect` over floats, down to **adjacent floats** (the default: the answer is the
     exact float boundary of the measure as computed), or to an absolute width ``atol``; over
     **integers** (``integer=True``) down to adjacent integers; :func:`smallest_integer_meeting`
     when the lower end is not known to miss;
   - :func:`brent` (Brent's method to ``xtol + rtol * |x|``) where an answer was pinned with it;
   - :func:`smallest_within` for an expensive accountant (every evaluation builds and composes a
     privacy-loss grid): a walk that extrapolates log m in log x, then closes the bracket to a
     relative width ``rtol``, with an optional cheap ``estimate`` that only chooses where to look;
   - :func:`largest_integer_within`: the largest count n <= limit whose measure (increasing in n)
     is within the target (doubling, then integer bisection);
   - :func:`roots_increasing`: the same bracket contract on arrays (one root per point of a grid,
     Newton steps inside the bracket, bisection otherwise), for privacy-loss inversions.
3. **Certify** (:func:`certify`): the value returned is moved, by single ulps or by the caller's
   step, until the exact measure at exactly that value meets the target. So the answer is always
   on the safe side, whatever the rounding of the narrowing phase; the certificate is that final
   evaluation (returned where the caller reports it, e.g. :class:`Calibration`).

The contract every caller relies on: ``m`` monotone in x in the direction the caller states (a
noise scale lowers epsilon, a count raises it), the bracket's ends on opposite sides of the target
before narrowing, and the answer's measure computed at the answer itself. None of these searches
imports scipy.optimize except :func:`brent` (0.15-0.3 s to import, more than a small release takes),
and only the array forms import numpy (checking a claim imports this module and needs neither).
"""

from __future__ import annotations

import math
from typing import Callable, NamedTuple

from tsdp.errors import GridTooLarge, TsdpError

# Enough halvings to split any finite float interval down to adjacent floats.
ADJACENT_FLOAT_ITERATIONS = 2200


# ---------------------------------------------------------------------------------------------
# phase 1: the bracket
# ---------------------------------------------------------------------------------------------


class Expansion(NamedTuple):
    """The end of a geometric walk: ``point`` (where it stopped), ``previous`` (the last point
    that still failed, None when the start did not) and ``found`` (False when the walk passed its
    limit before the condition stopped failing; ``point`` is then the first point past it)."""

    previous: float | None
    point: float
    found: bool


def expand(fails: Callable[[float], bool], start: float, factor: float, limit: float | None = None) -> Expansion:
    """Multiply ``start`` by ``factor`` while ``fails(point)``; stop (``found=False``) at the first
    point beyond ``limit`` (above it when ``factor > 1``, below it when ``factor < 1``), which is
    not evaluated."""
    previous, point = None, start
    while fails(point):
        previous, point = point, point * factor
        if limit is not None and (point > limit if factor > 1 else point < limit):
            return Expansion(previous, point, False)
    return Expansion(previous, point, True)


def expand_below(fun, target, lo, hi):
    """Array form of :func:`expand` for an increasing ``fun``: move each ``lo`` left (steps
    doubling from ``max(hi - lo, 1)``) until ``fun(lo) <= target`` at every point."""
    import numpy as np  # (the scalar searches need no numpy: importing them stays cheap)

    lo = np.array(lo, dtype=float)
    step = np.maximum(hi - lo, 1.0)
    for _ in range(200):
        bad = fun(lo) > target
        if not bad.any():
            return lo
        lo = np.where(bad, lo - step, lo)
        step *= 2
    raise FloatingPointError("could not bracket the privacy-loss root")


def expand_above(fun, target, hi):
    """Array form of :func:`expand` for an increasing ``fun``: move each ``hi`` right (steps
    doubling from 1) until ``fun(hi) >= target`` at every point."""
    import numpy as np  # (the scalar searches need no numpy: importing them stays cheap)

    hi = np.array(hi, dtype=float)
    step = np.ones_like(hi)
    for _ in range(200):
        bad = fun(hi) < target
        if not bad.any():
            return hi
        hi = np.where(bad, hi + step, hi)
        step *= 2
    raise FloatingPointError("could not bracket the privacy-loss root")


# ---------------------------------------------------------------------------------------------
# phase 2: narrowing
# ---------------------------------------------------------------------------------------------


def bisect(high_side: Callable, lo, hi, *, atol: float = 0.0, integer: bool = False,
           iterations: int = ADJACENT_FLOAT_ITERATIONS):
    """Narrow ``[lo, hi]`` around the boundary of a monotone predicate; returns the final ``(lo, hi)``.

    ``high_side(x)`` says whether x lies on ``hi``'s side of the boundary (for an increasing
    ``f`` with root r: ``f(x) > 0``). The ends themselves are never evaluated: the caller knows
    their sides. Floats are halved at ``0.5 * (lo + hi)`` until they are adjacent floats (no float
    strictly between them), or until ``hi - lo <= atol``, or after ``iterations`` halvings;
    integers (``integer=True``) at ``(lo + hi) // 2`` until ``hi - lo <= 1``. The caller takes the
    side that meets its target and certifies it (:func:`certify`).
    """
    if integer:
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if high_side(mid):
                hi = mid
            else:
                lo = mid
        return lo, hi
    for _ in range(iterations):
        if hi - lo <= atol:
            break
        mid = 0.5 * (lo + hi)
        if not lo < mid < hi:
            break
        if high_side(mid):
            hi = mid
        else:
            lo = mid
    return lo, hi


def smallest_integer_meeting(meets: Callable[[int], bool], lo: int, hi: int) -> int:
    """The smallest n in ``[lo, hi]`` with ``meets(n)``, for a predicate monotone in n that holds
    at ``hi`` (not evaluated there): bisection at ``(lo + hi) // 2``, moving ``lo`` past every
    miss. Where ``lo`` itself may meet the target, so no end of the bracket is known to miss
    (:func:`bisect` needs one)."""
    while lo < hi:
        mid = (lo + hi) // 2
        if meets(mid):
            hi = mid
        else:
            lo = mid + 1
    return hi


def brent(fun: Callable[[float], float], lo: float, hi: float, xtol: float, rtol: float) -> float:
    """A sign change of ``fun`` in ``[lo, hi]`` by Brent's method (scipy's ``brentq``, at most 500
    iterations) to ``xtol + rtol * |x|``: the narrowing of the searches whose answers were pinned
    with it (the time-subsampling calibrations). Not certified by itself: :func:`certify` after."""
    from scipy import optimize  # heavy import, only where Brent's method is used

    return optimize.brentq(fun, lo, hi, xtol=xtol, rtol=rtol, maxiter=500)


def largest_integer_within(measure: Callable[[int], float], target: float, limit: int) -> tuple[int, float]:
    """The largest n in [1, limit] with ``measure(n) <= target`` and its measure, for a measure
    that grows with n (doubling from 1, capped at ``limit``, then :func:`bisect` over integers);
    ``(0, measure(1))`` when even n = 1 exceeds the target. The measure returned is the one
    computed at the answer (its certificate)."""
    first = measure(1)
    if first > target:
        return 0, first
    good, good_eps, bad = 1, first, None
    while bad is None:
        trial = min(good * 2, limit)
        eps = measure(trial)
        if eps <= target:
            good, good_eps = trial, eps
            if trial == limit:
                return good, good_eps
        else:
            bad = trial
    measured = {good: good_eps}

    def exceeds(n: int) -> bool:
        measured[n] = measure(n)
        return not measured[n] <= target  # a NaN measure exceeds

    good, _ = bisect(exceeds, good, bad, integer=True)
    return good, measured[good]


def roots_increasing(fun, target, lo, hi, iterations: int = 200):
    """Vectorised root of an increasing function: ``fun(x) = target`` on brackets ``[lo, hi]``.

    ``fun(x)`` returns ``(value, derivative)`` for an array of points. Newton steps are taken when
    they stay inside the bracket, bisection otherwise; the bracket shrinks every iteration, so each
    point ends within floating-point resolution of its root. Converged points leave the active set.
    """
    import numpy as np  # (the scalar searches need no numpy: importing them stays cheap)

    target = np.array(target, dtype=float)
    lo, hi = np.array(lo, dtype=float), np.array(hi, dtype=float)
    x = 0.5 * (lo + hi)
    active = np.arange(x.size)
    for _ in range(iterations):
        if active.size == 0:
            break
        xa, la, ha = x[active], lo[active], hi[active]
        value, slope = fun(xa)
        above = value > target[active]
        ha = np.where(above, xa, ha)
        la = np.where(above, la, xa)
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):  # a non-finite step is not taken
            newton = xa - (value - target[active]) / slope
        inside = np.isfinite(newton) & (newton > la) & (newton < ha)
        new = np.where(inside, newton, 0.5 * (la + ha))
        done = (np.abs(new - xa) <= 4e-16 * np.maximum(1.0, np.abs(xa))) | (ha - la <= 4e-16 * np.maximum(1.0, np.abs(xa)))
        x[active], lo[active], hi[active] = new, la, ha
        active = active[~done]
    return x


# ---------------------------------------------------------------------------------------------
# phase 3: the certificate
# ---------------------------------------------------------------------------------------------


def next_up(x: float) -> float:
    """The next float above ``x``."""
    return math.nextafter(x, math.inf)


def certify(value, fails: Callable, step: Callable = next_up):
    """Move ``value`` by ``step`` (default: one ulp up) until ``fails(value)`` is False, so the
    exact measure at the value returned meets the target."""
    while fails(value):
        value = step(value)
    return value


# ---------------------------------------------------------------------------------------------
# the search for an expensive accountant (relative tolerance)
# ---------------------------------------------------------------------------------------------


class Calibration(tuple):
    """``(value, measure)``, as the noise calibrations return it (a noise multiplier and its
    epsilon), and ``at_grid_limit``: whether a smaller value might still meet the target but
    cannot be accounted (its privacy-loss grid outgrows the limit), so that the value is the
    smallest tsdp certifies rather than the smallest that meets the target."""

    at_grid_limit: bool

    def __new__(cls, sigma: float, epsilon: float, at_grid_limit: bool = False):
        self = super().__new__(cls, (sigma, epsilon))
        self.at_grid_limit = at_grid_limit
        return self


class _Bracket:
    """``lo`` misses the target (its measure ``lo_eps``, None when it could not be accounted),
    ``hi`` meets it (``hi_eps``); every probe goes through :meth:`probe`."""

    def __init__(self, measure, target: float):
        self.measure, self.target = measure, target
        self.lo = self.lo_eps = self.hi = self.hi_eps = None
        self.lo_measured = True
        self.measured: list[tuple[float, float]] = []  # (x, measure) of every accounted probe

    def probe(self, x: float) -> bool:
        try:
            eps = self.measure(x)
        except GridTooLarge:  # a value too small to account counts as missing the target
            eps = None
        if eps is not None:
            self.measured.append((x, eps))
        if eps is not None and eps <= self.target:
            self.hi, self.hi_eps = x, eps
            return True
        self.lo, self.lo_eps, self.lo_measured = x, eps, eps is not None
        return False


def smallest_within(measure, target: float, start: float, rtol: float, lower: float, upper: float,
                    out_of_reach: Callable[[float | None], TsdpError], estimate=None) -> Calibration:
    """Smallest x (to ``rtol``, rounded up) whose ``measure`` (decreasing in x) is at most ``target``.

    ``measure`` is the exact accountant; ``estimate`` (optional) a cheaper one that only guides the
    search. The walk starts at the estimate's answer, else at ``start``, and extrapolates log
    measure in log x (:func:`_walk`); the bracket is then closed to ``hi / lo <= 1 + rtol``
    (:func:`_close`). The answer is the bracket's upper end: its exact measure was computed and is
    within the target, and the lower end (at most ``1 + rtol`` below) was computed and misses it
    (or could not be accounted: GridTooLarge counts as a miss, and the answer is then flagged
    ``at_grid_limit``). Every x down to ``lower`` meeting the target flags it too; a target missed
    at ``upper`` raises ``out_of_reach(the smallest measure seen, or None)``.
    """
    b = _search(measure, target, start, rtol, estimate, (lower, upper, out_of_reach))
    return Calibration(b.hi, b.hi_eps, not b.lo_measured)


def _search(measure, target: float, start: float, rtol: float, estimate, limits) -> _Bracket:
    guess, slope = _estimated_root(estimate, target, start, rtol, limits) if estimate else (None, None)
    b = _Bracket(measure, target)
    _walk(b, guess if guess is not None else start, slope, rtol, limits)
    _close(b, rtol)
    return b


def _estimated_root(estimate, target: float, start: float, rtol: float, limits) -> tuple[float | None, float | None]:
    """Where the cheap accountant puts the root (its bracket's upper end) and the slope of log
    measure in log x there, or (None, None) when it cannot say (the exact search then starts from
    scratch)."""
    try:
        b = _search(estimate, target, start, rtol, None, limits)
    except TsdpError:  # out of reach, or not computable, for the estimate: no estimate
        return None, None
    return b.hi, _slope(b.lo, b.lo_eps, b.hi, b.hi_eps)


def _slope(s0: float, e0: float | None, s1: float, e1: float | None) -> float | None:
    """d log measure / d log x between two measured points, when it is negative (as it should be)."""
    if e0 is None or e1 is None or e0 <= 0 or e1 <= 0:
        return None
    run = math.log(s1) - math.log(s0)  # 0 for points a few ulps apart, not only for equal ones
    if run == 0:
        return None
    slope = (math.log(e1) - math.log(e0)) / run
    return slope if slope < 0 else None


def _walk(b: _Bracket, x: float, slope: float | None, rtol: float, limits) -> None:
    """Probe from ``x`` until one probe meets the target and one misses it.

    Each step aims just past the root extrapolated from the last two probes (log measure linear
    in log x; before that, ``slope`` or -1, measure ~ 1/x), and moves at least ``margin`` (from
    1 + rtol, growing fourfold in log to 2) and at most a factor 4 down (small noise levels have
    large grids) or 1000 up; without a measured value, by a factor 2. Every x down to the lower
    limit meeting the target leaves an unaccountable lower end (flagged ``at_grid_limit``).
    """
    lower, upper, out_of_reach = limits
    margin, previous, half = 1 + rtol, None, math.sqrt(1 + rtol)
    while True:
        passed = b.probe(x)
        if b.lo is not None and b.hi is not None:
            return
        eps = b.hi_eps if passed else b.lo_eps
        if previous is not None:
            slope = _slope(previous[0], previous[1], x, eps) or slope
        root = None
        if eps is not None and eps > 0:
            log_root = math.log(x) + (math.log(b.target) - math.log(eps)) / (slope or -1.0)
            root = math.exp(min(max(log_root, -700.0), 700.0))
        previous = (x, eps)
        if passed:
            step = min(x / margin, root / half) if root else x / 2
            x = max(step, x / 4)
            if x < lower:  # every x down to the guard meets the target
                b.lo, b.lo_eps, b.lo_measured = x, None, False
                return
        else:
            if x >= upper:
                raise out_of_reach(b.lo_eps)
            step = max(x * margin, root * half) if root else x * 2
            x = min(step, x * 1000, upper)
        margin = min(margin ** 4, 2.0)


def _close(b: _Bracket, rtol: float) -> None:
    """Shrink ``[b.lo, b.hi]`` to ``hi / lo <= 1 + rtol``.

    A probe aims just above the interpolated root (log measure linear in log x between the two
    ends); when it meets the target, the next probe goes one ``rtol`` below it, which closes the
    bracket if it misses. A measure on a grid is a staircase in x, so an interpolation can be
    poor: the search bisects whenever the last two probes did not halve the bracket (in log x), so
    it never stalls.
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
            x = b.hi / (1 + rtol) * (1 + 1e-12)  # one rtol below: closes the bracket if it misses
        elif stalled or root is None:
            x = math.sqrt(b.lo * b.hi)
        elif math.log(b.hi) - root > half:
            x, aim = math.exp(root + half * (1 - 1e-9)), True
        else:
            x = b.hi / (1 + rtol) * (1 + 1e-12)
        if not b.lo < x < b.hi:
            x, aim = math.sqrt(b.lo * b.hi), False
        widths.append(width)
        aimed_hit = b.probe(x) and aim


def _root_estimate(b: _Bracket) -> float | None:
    """log x of the root: by the secant through the last two probes (their local slope) when it
    falls inside the bracket, else by interpolation between the bracket's ends."""
    if len(b.measured) >= 2:
        (s0, e0), (s1, e1) = b.measured[-2:]
        slope = _slope(s0, e0, s1, e1)
        if slope is not None:
            root = math.log(s1) + (math.log(b.target) - math.log(e1)) / slope
            if math.log(b.lo) < root < math.log(b.hi):
                return root
    return _interpolated(b)


def _interpolated(b: _Bracket) -> float | None:
    """log x where log measure, linear in log x between the bracket's ends, meets the target."""
    if b.lo_eps is None or b.hi_eps is None or b.hi_eps <= 0 or b.lo_eps <= b.hi_eps:
        return None
    u0, u1 = math.log(b.lo), math.log(b.hi)
    f0, f1 = math.log(b.lo_eps), math.log(b.hi_eps)
    if f0 == f1:  # measures a few ulps apart
        return None
    root = u0 + (math.log(b.target) - f0) * (u1 - u0) / (f1 - f0)
    return root if u0 < root < u1 else None

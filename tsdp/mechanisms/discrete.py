"""Exact samplers of the discrete Laplace and discrete Gaussian distributions on the integers.

``discrete_laplace(gen, t, n)`` draws ``n`` values with P(y) proportional to exp(-|y| / t);
``discrete_gaussian(gen, sigma, n)`` draws ``n`` values with P(y) proportional to
exp(-y^2 / (2 sigma^2)) (Canonne, Kamath and Steinke 2020, "The Discrete Gaussian for Differential
Privacy", Algorithms 2 and 3). Both are exact: every decision the samplers make is the outcome of
comparing exact random bits with an exactly defined real number, so the draws follow the stated
pmf with no floating-point error (the attack of Mironov 2012 needs such error).

How it is vectorised. Proposals are made in blocks of ``_BLOCK`` (numpy ufuncs writing into
scratch arrays reused from block to block). Each proposal takes one 64-bit word: its top 52 bits
form a uniform V in [u / 2^52, (u + 1) / 2^52) (the remaining bits of V are drawn only if needed),
its bit 0 is a sign. A Gaussian proposal also takes 32 bits of a further word (one word serves two
proposals), a uniform V' in [v / 2^32, (v + 1) / 2^32). The bit fields do not overlap, so all of
these are independent uniform variables.

* Magnitude: ``M = floor(-t ln V)`` is geometric, P(M = k) = (1 - q) q^k with q = exp(-1/t)
  (inversion, P(M >= k) = P(V <= q^k)). A float evaluation of ``-t ln V`` at both ends of V's
  interval, widened by a proven error margin, usually pins ``M`` to one integer; the rare undecided
  draws (a boundary inside the interval or the margin) are settled by :func:`_geometric_exact`,
  which draws further bits of V and compares with :mod:`decimal` values whose error is bounded.
* Sign: with ``M`` and a sign bit ``s``, ``y = -M`` if ``s`` else ``M``, rejecting (s = 1, M = 0), has
  P(y) proportional to q^|y|: the discrete Laplace (CKS Algorithm 2's last step). The sign is
  written into the float's sign bit, so the rejected pair is exactly the float -0.0.
* Gaussian: a discrete Laplace proposal of integer scale ``t = floor(sigma) + 1`` is accepted with
  probability exp(-gamma), gamma = (|y| - sigma^2/t)^2 / (2 sigma^2) (CKS Algorithm 3): accept iff
  E = -ln V' > gamma, decided like the magnitude (float with a margin, exact :mod:`decimal`
  fallback otherwise). 32 bits of V' are enough to decide: E's interval has width ln(1 + 1/v),
  about 2^-32 / V', so about one proposal in 2^31 needs more bits.

Two passes. Each decision has a margin that depends on the word (the width of its interval, 1/u or
1/v, and for the magnitude the size of ``-t ln V``). A first pass applies one margin to the words
for which a fixed bound on those holds (u >= 2^44, v >= 2^24: all but about 1 in 256) and counts
every other word as undecided; a second pass, on the few undecided words only, applies each word's
own margin; what it still cannot decide goes to the exact fallbacks. Each pass only ever decides
when its margin covers the float error, so both together decide exactly as one exact comparison.

Margins. numpy's ``log`` is accurate to a few units in the last place (about 2^-52 relative); the
margins used here allow ``_ETA_LOG`` = 2^-45 relative for it and 2^-44 (gamma + 64) absolute for
gamma, whose float rounding is below (sqrt(2 gamma) + gamma) 2^-50, a factor of 32 or more to spare
(:func:`_magnitudes` and :func:`_gaussian_proposals` give the bounds). Undecided draws only cost
time: about t 2^-43 of the proposals for the magnitude, 2^-31 for the acceptance.
"""

from __future__ import annotations

import math
from decimal import Decimal, localcontext

import numpy as np

_BITS = 52
_SCALE = float(2 ** _BITS)
_ETA_LOG = 2.0 ** -45
_WIDTH = (1 + 2.0 ** -40) / _SCALE  # t _WIDTH / (u / 2^52) >= t / u despite two roundings
MAX_LATTICE_SCALE = 2.0 ** 40  # t ln V stays far below 2^53, so the margins above hold


def _check_scale(name: str, value: float) -> float:
    value = float(value)
    if not (math.isfinite(value) and 0 < value <= MAX_LATTICE_SCALE):
        raise ValueError(f"{name} in lattice units must be in (0, 2^40], got {value!r}")
    return value


def discrete_laplace(gen: np.random.Generator, t: float, n: int, out: np.ndarray | None = None,
                     multiplier: float = 1.0) -> np.ndarray:
    """``n`` exact draws of the discrete Laplace on Z with P(y) proportional to exp(-|y| / t), each
    times ``multiplier`` (a power of two keeps them exact), in ``out`` when given."""
    t = _check_scale("discrete Laplace scale", t)
    return _rejection_fill(n, lambda size, w: _laplace_proposals(gen, t, size, w),
                           (1.0 + math.exp(-1.0 / t)) / 2, out, multiplier)


def discrete_gaussian(gen: np.random.Generator, sigma: float, n: int, out: np.ndarray | None = None,
                      multiplier: float = 1.0) -> np.ndarray:
    """``n`` exact draws of the discrete Gaussian on Z with P(y) proportional to exp(-y^2/(2 sigma^2)),
    each times ``multiplier`` (a power of two keeps them exact), in ``out`` when given."""
    sigma = _check_scale("discrete Gaussian sigma", sigma)
    t = math.floor(sigma) + 1
    return _rejection_fill(n, lambda size, w: _gaussian_proposals(gen, sigma, t, size, w), 0.74, out,
                           multiplier)


def discrete_laplace_scales(gen: np.random.Generator, t: np.ndarray) -> np.ndarray:
    """One exact draw per entry of ``t``: entry i from the discrete Laplace with P(y) proportional to
    exp(-|y| / t[i]) (e.g. one group's noise each, the groups having different scales).

    Every entry takes one proposal per round and the rejected ones (sign bit set and magnitude 0)
    take another in the next round, in index order, so a seeded generator gives the same draws."""
    t = np.asarray(t, dtype=np.float64)
    bad = ~(np.isfinite(t) & (t > 0) & (t <= MAX_LATTICE_SCALE))
    if bad.any():
        _check_scale("discrete Laplace scale", float(t[np.flatnonzero(bad)[0]]))
    out = np.empty(t.size, dtype=np.float64)
    pending = np.arange(t.size)
    while pending.size:
        m, negative = _geometric(gen, t[pending], gen.bit_generator.random_raw(pending.size))
        ok = ~(negative & (m == 0))
        np.negative(m, out=m, where=negative)
        out[pending[ok]] = m[ok]
        pending = pending[~ok]
    return out


# Proposals per vectorised step: few numpy calls per value (each hands the GIL over when threads
# share the work) while the scratch arrays (about 4 MB) stay in the last-level cache; measured
# best among 2^12..2^18 on the 2-core machine.
_BLOCK = 1 << 16


class _Scratch:
    """Work arrays for one sampler call, reused block after block (no per-step temporaries)."""

    def __init__(self, size: int) -> None:
        self.u = np.empty(size, dtype=np.uint64)
        self.v = np.empty(size, dtype=np.uint64)
        self.x = np.empty(size)
        self.y = np.empty(size)
        self.z = np.empty(size)
        self.m = np.empty(size)
        self.a = np.empty(size, dtype=bool)
        self.b = np.empty(size, dtype=bool)


def _rejection_fill(n: int, propose, rate: float, out: np.ndarray | None, multiplier: float) -> np.ndarray:
    """Collect accepted proposals until ``n`` are there, in proposal order (deterministic), each
    times ``multiplier``. ``propose(size, scratch)`` returns the proposals and the accepted mask."""
    out = np.empty(n, dtype=np.float64) if out is None else out
    scratch = _Scratch(min(_BLOCK, int(n / rate * 1.02) + 16))
    done = 0
    while done < n:
        size = min(_BLOCK, int((n - done) / rate * 1.02) + 16)
        values, keep = propose(size, scratch)
        if multiplier != 1.0:
            values *= multiplier
        k = int(np.count_nonzero(keep))
        if k > n - done:
            keep[np.flatnonzero(keep)[n - done]:] = False
            k = n - done
        np.compress(keep, values, out=out[done:done + k])
        done += k
    return out


def _magnitudes(gen, t, words: np.ndarray, w: _Scratch) -> np.ndarray:
    """``floor(-t ln V)`` for V uniform in [u / 2^52, (u + 1) / 2^52), u the top 52 bits of each
    word, ``t`` one float or one per word; exact (as float64, in ``w.m``).

    The float ``upper = -t ln(u / 2^52)`` is within ``upper 2 _ETA_LOG`` of the true value (the log
    within _ETA_LOG relative, one more rounding), and the true ``-t ln V`` lies in ``(upper - t ln(1
    + 1/u), upper]`` with ``t ln(1 + 1/u) <= t / u``. So with ``margin >= t / u + upper 2 _ETA_LOG``
    and ``frac = upper - floor(upper)`` (exact, Sterbenz), ``margin <= frac`` and ``frac + margin <
    1`` pin the value to ``floor(upper)``. For one scale, a first pass uses one margin for every
    word with u >= 2^44 (:func:`_first_margin`); the others (u < 2^44, about 1 in 256, or within
    that margin of a boundary) get their own margin in :func:`_settle_magnitudes`.
    """
    s = words.size
    u = np.right_shift(words, np.uint64(64 - _BITS), out=w.u[:s])
    x = np.multiply(u, 1.0 / _SCALE, out=w.x[:s])  # u / 2^52, exact
    with np.errstate(divide="ignore", invalid="ignore"):
        np.log(x, out=x)
        x *= -t
        m = np.floor(x, out=w.m[:s])
        x -= m  # frac
    if isinstance(t, np.ndarray):
        idx = np.arange(s)
    else:
        margin = _first_margin(t)
        unsure = np.less(x, margin, out=w.a[:s])
        unsure |= np.greater_equal(x, 1.0 - margin, out=w.b[:s])  # 1 - margin is exact
        unsure |= np.less(words, np.uint64(1 << 56), out=w.b[:s])  # u < 2^44, u = 0 (nan frac) too
        idx = np.flatnonzero(unsure)
    if idx.size:
        _settle_magnitudes(gen, t, u, m, x, idx)
    return m


def _first_margin(t: float) -> float:
    """A power of two at least ``t / u + upper 2 _ETA_LOG`` for every u >= 2^44: there ``t / u <=
    t 2^-44`` and ``upper <= t (8 ln 2) (1 + 2^-44) < 5.6 t`` (the factor 1 + 2^-20 covers the
    rounding of this bound itself). A power of two, at least 2^-52, so that ``1 - margin`` is exact."""
    bound = t * (2.0 ** -44 + 5.6 * 2 * _ETA_LOG) * (1 + 2.0 ** -20)
    return 2.0 ** max(-52, math.ceil(math.log2(bound)))


def _settle_magnitudes(gen, t, u: np.ndarray, m: np.ndarray, frac: np.ndarray, idx: np.ndarray) -> None:
    """Decide ``m[idx]`` with each word's own margin, or exactly (:func:`_geometric_exact`)."""
    ti = t[idx] if isinstance(t, np.ndarray) else t
    f = frac[idx]
    with np.errstate(divide="ignore", invalid="ignore"):
        margin = ti * _WIDTH / (u[idx] * (1.0 / _SCALE))  # t / u, rounded up (_WIDTH)
        margin += (m[idx] + f) * (2 * _ETA_LOG)  # m + frac is upper, exactly
        sure = (f >= margin) & (f + margin < 1.0)  # nan (u = 0) is not sure
    for i in idx[~sure]:
        m[i] = _geometric_exact(gen, float(t[i]) if isinstance(t, np.ndarray) else t, int(u[i]))


def _geometric(gen, t, raw: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """:func:`_magnitudes` of ``raw`` (a new array) and the words' low bits as signs."""
    m = _magnitudes(gen, t, raw, _Scratch(raw.size)).copy()
    return m, (raw & np.uint64(1)).astype(bool)


_NEG_ZERO = np.uint64(1 << 63)


def _signed(m: np.ndarray, words: np.ndarray, keep: np.ndarray, w: _Scratch) -> tuple[np.ndarray, np.ndarray]:
    """``m`` with the sign bit of each word's bit 0 (``-m`` where it is set), and ``keep`` without
    (sign set, m = 0), i.e. -0.0: CKS Algorithm 2's last step."""
    s = m.size
    bits = m.view(np.uint64)
    bits |= np.left_shift(words, np.uint64(63), out=w.u[:s])
    keep &= np.not_equal(bits, _NEG_ZERO, out=w.b[:s])
    return m, keep


def _laplace_proposals(gen, t: float, size: int, w: _Scratch) -> tuple[np.ndarray, np.ndarray]:
    words = gen.bit_generator.random_raw(size)
    m = _magnitudes(gen, t, words, w)
    keep = w.a[:size]
    keep.fill(True)
    return _signed(m, words, keep, w)


_ACCEPT_BITS = 32  # bits of V' per Gaussian proposal: two per 64-bit word
_ACCEPT_SCALE = float(2 ** _ACCEPT_BITS)
_ACCEPT_WIDTH = (1 + 2.0 ** -40) / _ACCEPT_SCALE
_GAUSS_MARGIN = 37 * _ETA_LOG + 2.0 ** -37


def _gaussian_proposals(gen, sigma: float, t: int, size: int, w: _Scratch) -> tuple[np.ndarray, np.ndarray]:
    """CKS Algorithm 3: accept a discrete Laplace(t) proposal m iff E = -ln V' > gamma(m).

    Words: one per proposal for the magnitude and sign, then one per two proposals for V' (its high
    and low 32 bits). With ``L = ln(v / 2^32)`` (float, within 23 _ETA_LOG of the true value as
    |L| <= 22.2) and E in (-L - ln(1 + 1/v), -L], the test is on ``d = L + gamma``: accept when
    ``d < -(1/v + margin)``, reject when ``d > margin``. The float gamma's error is below
    (gamma + 64) 2^-48 (the rounding of ``(m - sigma^2/t)^2 / (2 sigma^2)``); a sure acceptance
    needs gamma < E <= 22.2, where that is below 2^-41, and a gamma above 37 is rejected whatever
    its error. The sum d is rounded by at most |d| 2^-53, so a float d below -(w + margin) (w >=
    1/v, at most 1 + 2^-40) or above margin leaves the exact sum beyond (w + margin)(1 - 2^-53) or
    margin (1 - 2^-53) in the same direction; the margin ``37 _ETA_LOG + 2^-37`` exceeds the
    log's and gamma's errors plus 2^-52 by a factor of 4. Undecided draws (v = 0 among them,
    d = -inf) go to :func:`_gaussian_accept_exact`.
    """
    half = (size + 1) // 2
    raw = gen.bit_generator.random_raw(size + half)
    words = raw[:size]
    m = _magnitudes(gen, float(t), words, w)
    v = w.v[:size]
    np.right_shift(raw[size:], np.uint64(_ACCEPT_BITS), out=v[:half])
    np.bitwise_and(raw[size:size + size - half], np.uint64(2 ** _ACCEPT_BITS - 1), out=v[half:])
    s2 = sigma * sigma
    d = np.subtract(m, s2 / t, out=w.y[:size])
    d *= d
    d *= 0.5 / s2
    x = np.multiply(v, 1.0 / _ACCEPT_SCALE, out=w.x[:size])  # v / 2^32, exact
    with np.errstate(divide="ignore"):
        d += np.log(x, out=x)
    # first pass: one width for every v >= 2^24 (ln(1 + 1/v) <= 2^-24; the sum is exact in binary);
    # second pass, on the undecided: each word's own width (1 + 2^-40) / v >= ln(1 + 1/v)
    accept = np.less(d, -(2.0 ** -24 + _GAUSS_MARGIN), out=w.a[:size])
    accept &= np.greater_equal(v, np.uint64(1 << 24), out=w.b[:size])
    decided = np.greater(d, _GAUSS_MARGIN, out=w.b[:size])  # a sure rejection
    decided |= accept
    idx = np.flatnonzero(np.logical_not(decided, out=decided))
    if idx.size:
        with np.errstate(divide="ignore"):
            width = _ACCEPT_WIDTH / (v[idx] * (1.0 / _ACCEPT_SCALE))
        sure = d[idx] < -(width + _GAUSS_MARGIN)  # v = 0: d = -inf = -width, not sure
        accept[idx[sure]] = True
        for i in idx[~sure]:
            accept[i] = _gaussian_accept_exact(gen, sigma, t, int(m[i]), int(v[i]), _ACCEPT_BITS)
    return _signed(m, words, accept, w)


# Exact fallbacks, one draw at a time (rare: see the module docstring).

def _more_bits(gen, u: int, bits: int) -> tuple[int, int]:
    return (u << 64) | int(gen.bit_generator.random_raw()), bits + 64


def _geometric_exact(gen, t: float, u: int) -> int:
    """Settle ``floor(-t ln V)`` with V in [u / 2^bits, (u + 1) / 2^bits), drawing bits as needed."""
    bits = _BITS
    while True:
        prec = 40 + bits // 3
        with localcontext() as ctx:
            ctx.prec = prec
            err = Decimal(10) ** (-(prec - 10))  # relative: a handful of correctly rounded steps
            scale = Decimal(2) ** bits
            td = Decimal(t)
            largest = (-td * (Decimal(u) / scale).ln()) * (1 + err) + err if u else None
            smallest = (-td * (Decimal(u + 1) / scale).ln()) * (1 - err) - err
            if largest is not None and math.floor(max(smallest, Decimal(0))) == math.floor(largest):
                return int(math.floor(largest))
        u, bits = _more_bits(gen, u, bits)


def _gaussian_accept_exact(gen, sigma: float, t: int, m: int, v: int, bits: int = _BITS) -> bool:
    """Decide V < exp(-(m - sigma^2/t)^2 / (2 sigma^2)) for V in [v / 2^bits, (v + 1) / 2^bits)."""

    def exponent():  # evaluated at the precision _accept_exact sets
        s2 = Decimal(sigma) * Decimal(sigma)
        return -((Decimal(m) - s2 / t) ** 2) / (2 * s2)

    return _accept_exact(gen, exponent, v, bits)


def bernoulli_exp(gen: np.random.Generator, c: float, k: np.ndarray) -> np.ndarray:
    """One exact Bernoulli(exp(-c k[i])) per entry, for a float ``c > 0`` and integers ``k >= 0``.

    Accept iff E = -ln V > gamma = c k for a uniform V (CKS 2020's Bernoulli(exp(-gamma)), decided
    like the Gaussian acceptance: float with a margin, exact :mod:`decimal` fallback). The float
    ``c k`` errs by at most gamma 2^-53, inside the margin for gamma <= 37, and any gamma > 37 is
    rejected whatever its error (E <= 36.04 for V >= 2^-52)."""
    k = np.asarray(k, dtype=np.float64)
    raw = gen.bit_generator.random_raw(k.size)
    v = raw >> np.uint64(64 - _BITS)
    vf = v.astype(np.float64)
    d = c * k
    with np.errstate(divide="ignore", invalid="ignore"):
        d += np.log(vf * (1.0 / _SCALE))
        width = np.reciprocal(vf)
    width += _GAUSS_MARGIN
    accept = d < -width
    unsure = ~accept & (d <= _GAUSS_MARGIN)
    for i in np.flatnonzero(unsure):
        exponent = Decimal(c) * int(k[i])  # exact: c is a binary float
        accept[i] = _accept_exact(gen, lambda: -exponent, int(v[i]))
    return accept


def _accept_exact(gen, exponent, v: int, bits: int = _BITS) -> bool:
    """Decide V < exp(exponent()) for V in [v / 2^bits, (v + 1) / 2^bits), drawing bits as needed;
    ``exponent`` is evaluated in the current :mod:`decimal` context."""
    while True:
        prec = 40 + bits // 3
        with localcontext() as ctx:
            ctx.prec = prec
            err = Decimal(10) ** (-(prec - 10))
            p = exponent().exp()
            scale = Decimal(2) ** bits
            if Decimal(v + 1) / scale <= p * (1 - err):
                return True
            if Decimal(v) / scale >= p * (1 + err):
                return False
        v, bits = _more_bits(gen, v, bits)

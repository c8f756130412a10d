"""Exact samplers of the discrete Laplace and discrete Gaussian distributions on the integers.

``discrete_laplace(gen, t, n)`` draws ``n`` values with P(y) proportional to exp(-|y| / t);
``discrete_gaussian(gen, sigma, n)`` draws ``n`` values with P(y) proportional to
exp(-y^2 / (2 sigma^2)) (Canonne, Kamath and Steinke 2020, "The Discrete Gaussian for Differential
Privacy", Algorithms 2 and 3). Both are exact: every decision the samplers make is the outcome of
comparing exact random bits with an exactly defined real number, so the draws follow the stated
pmf with no floating-point error (the attack of Mironov 2012 needs such error).

How it is vectorised. Each proposal takes two 64-bit words of the generator: 52 bits form a uniform
V in [u / 2^52, (u + 1) / 2^52) (the remaining bits of V are drawn only if needed), one bit is a sign.

* Magnitude: ``M = floor(-t ln V)`` is geometric, P(M = k) = (1 - q) q^k with q = exp(-1/t)
  (inversion, P(M >= k) = P(V <= q^k)). A float evaluation of ``-t ln V`` at both ends of V's
  interval, widened by a proven error margin, usually pins ``M`` to one integer; the rare undecided
  draws (a boundary inside the interval or the margin) are settled by :func:`_geometric_exact`,
  which draws further bits of V and compares with :mod:`decimal` values whose error is bounded.
* Sign: with ``M`` and a sign bit ``s``, ``y = -M`` if ``s`` else ``M``, rejecting (s = 1, M = 0), has
  P(y) proportional to q^|y|: the discrete Laplace (CKS Algorithm 2's last step).
* Gaussian: a discrete Laplace proposal of integer scale ``t = floor(sigma) + 1`` is accepted with
  probability exp(-gamma), gamma = (|y| - sigma^2/t)^2 / (2 sigma^2) (CKS Algorithm 3): accept iff
  E = -ln V' > gamma for a second uniform V', decided like the magnitude (float with a margin,
  exact :mod:`decimal` fallback otherwise).

Margins. numpy's ``log`` is accurate to a few units in the last place (about 2^-50 relative); the
margins used here allow 2^-45 relative for it and 2^-44 (gamma + 64) absolute for gamma, whose
float rounding is below (sqrt(2 gamma) + gamma) 2^-50, a factor of 32 or more to spare. Undecided
draws are rare (the width of V's interval, 1/u, plus the margin: about t 2^-38 of them for the
magnitude) and only cost time.
"""

from __future__ import annotations

import math
from decimal import Decimal, localcontext

import numpy as np

_BITS = 52
_SCALE = float(2 ** _BITS)
_ETA_LOG = 2.0 ** -45
MAX_LATTICE_SCALE = 2.0 ** 40  # t ln V stays far below 2^53, so the margins above hold


def _check_scale(name: str, value: float) -> float:
    value = float(value)
    if not (math.isfinite(value) and 0 < value <= MAX_LATTICE_SCALE):
        raise ValueError(f"{name} in lattice units must be in (0, 2^40], got {value!r}")
    return value


def discrete_laplace(gen: np.random.Generator, t: float, n: int) -> np.ndarray:
    """``n`` exact draws of the discrete Laplace on Z with P(y) proportional to exp(-|y| / t)."""
    t = _check_scale("discrete Laplace scale", t)
    return _rejection_fill(gen, n, lambda size: _laplace_proposals(gen, t, size),
                           (1.0 + math.exp(-1.0 / t)) / 2)


def discrete_gaussian(gen: np.random.Generator, sigma: float, n: int) -> np.ndarray:
    """``n`` exact draws of the discrete Gaussian on Z with P(y) proportional to exp(-y^2/(2 sigma^2))."""
    sigma = _check_scale("discrete Gaussian sigma", sigma)
    t = math.floor(sigma) + 1
    return _rejection_fill(gen, n, lambda size: _gaussian_proposals(gen, sigma, t, size), 0.74)


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


_BLOCK = 1 << 14  # proposals per vectorised step: the temporaries stay in the CPU cache


def _rejection_fill(gen, n: int, propose, rate: float) -> np.ndarray:
    """Collect accepted proposals until ``n`` are there, in proposal order (deterministic)."""
    out = np.empty(n, dtype=np.float64)
    done = 0
    while done < n:
        size = min(_BLOCK, int((n - done) / rate * 1.02) + 16)
        got = propose(size)
        k = min(n - done, got.size)
        out[done:done + k] = got[:k]
        done += k
    return out


def _geometric(gen, t, raw: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``floor(-t ln V)`` for V uniform in [u / 2^52, (u + 1) / 2^52), u the top 52 bits of ``raw``.

    ``t`` is one float or an array with one scale per word. Returns the magnitudes (exact, as
    float64) and the words' low bits as signs. ``-t ln V`` lies
    in ``[upper - t/u, upper]`` with ``upper = -t ln(u / 2^52)``, and the float ``upper`` is within
    ``37 t _ETA_LOG`` of the true one (``-ln(u / 2^52) <= 36.04``).
    """
    u = raw >> np.uint64(64 - _BITS)
    negative = (raw & np.uint64(1)).astype(bool)
    uf = u.astype(np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        upper = np.log(uf * (1.0 / _SCALE))
        upper *= -t
        m = np.floor(upper)
        upper -= m  # the fractional part, exact (Sterbenz)
        margin = np.reciprocal(uf)
        margin *= t * (1 + 2.0 ** -50)
        margin += 37 * _ETA_LOG * t
        unsure = upper < margin
        upper += margin
        unsure |= upper >= 1  # also u = 0 (inf and nan)
    for i in np.flatnonzero(unsure):
        m[i] = _geometric_exact(gen, float(t[i]) if isinstance(t, np.ndarray) else t, int(u[i]))
    return m, negative


def _signed(m: np.ndarray, negative: np.ndarray, keep: np.ndarray) -> np.ndarray:
    """``-m`` where ``negative`` else ``m``, keeping ``keep`` and rejecting (negative, m = 0)."""
    np.negative(m, out=m, where=negative)
    keep &= ~(negative & (m == 0))
    return m[keep]


def _laplace_proposals(gen, t: float, size: int) -> np.ndarray:
    m, negative = _geometric(gen, t, gen.bit_generator.random_raw(size))
    return _signed(m, negative, np.ones(size, dtype=bool))


_GAUSS_MARGIN = 37 * _ETA_LOG + 2.0 ** -37


def _gaussian_proposals(gen, sigma: float, t: int, size: int) -> np.ndarray:
    """CKS Algorithm 3: accept a discrete Laplace(t) proposal m iff E = -ln V' > gamma(m).

    With ``L = ln(v / 2^52)`` (float, within 37 _ETA_LOG of the true value) and E in
    [-L - 1/v, -L], the test is on ``d = L + gamma``: accept when ``d < -(margin + 1/v)``, reject
    when ``d > margin``. The float gamma's error is below (gamma + 64) 2^-48 (the rounding of
    ``(m - sigma^2/t)^2 / (2 sigma^2)``); a sure acceptance needs gamma < E <= 36.04, where that
    is below 2^-41, and a gamma above 37 is rejected whatever its error, so the margin
    ``37 _ETA_LOG + 2^-37`` covers both.
    """
    raw = gen.bit_generator.random_raw(2 * size)
    m, negative = _geometric(gen, float(t), raw[:size])
    v = raw[size:] >> np.uint64(64 - _BITS)
    vf = v.astype(np.float64)
    s2 = sigma * sigma
    d = m - s2 / t
    d *= d
    d *= 0.5 / s2
    with np.errstate(divide="ignore", invalid="ignore"):
        d += np.log(vf * (1.0 / _SCALE))
        width = np.reciprocal(vf)
    width += _GAUSS_MARGIN
    accept = d < -width
    unsure = ~accept & (d <= _GAUSS_MARGIN)  # v = 0: d = -inf = -width, unsure
    for i in np.flatnonzero(unsure):
        accept[i] = _gaussian_accept_exact(gen, sigma, t, int(m[i]), int(v[i]))
    return _signed(m, negative, accept)


# Exact fallbacks, one draw at a time (about one proposal in 2^30 gets here).

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


def _gaussian_accept_exact(gen, sigma: float, t: int, m: int, v: int) -> bool:
    """Decide V < exp(-(m - sigma^2/t)^2 / (2 sigma^2)) for V in [v / 2^bits, (v + 1) / 2^bits)."""

    def exponent():  # evaluated at the precision _accept_exact sets
        s2 = Decimal(sigma) * Decimal(sigma)
        return -((Decimal(m) - s2 / t) ** 2) / (2 * s2)

    return _accept_exact(gen, exponent, v)


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


def _accept_exact(gen, exponent, v: int) -> bool:
    """Decide V < exp(exponent()) for V in [v / 2^bits, (v + 1) / 2^bits), drawing bits as needed;
    ``exponent`` is evaluated in the current :mod:`decimal` context."""
    bits = _BITS
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

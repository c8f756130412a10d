"""Smith's private quantile on a public lattice, sampled exactly (the hardened QUANTILE step).

The mechanism. For one group with array means clipped to [lo, hi] and sorted, y_1 <= ... <= y_n,
the outputs are the lattice points Lambda = {k g : k integer, lo <= k g < hi}, g a power of two fixed
by public parameters (:func:`selection_lattice`). A point x has rank(x) = #{j : y_j <= x} and utility
u(x) = -|rank(x) - t| with t = q n (Smith 2011's utility); the output is x with

    Pr[x] proportional to exp(-c |rank(x) - t|),   c = eps_q / (2 Delta_u).

Replacing one array mean moves every rank(x) by at most Delta_u (1 for BESTFIT, 2 for WRAPAROUND),
and Lambda does not depend on the data, so this is the exponential mechanism over a finite public
range: eps_q-DP (McSherry and Talwar 2007, Thm. 6; Dwork and Roth 2014, Thm. 3.10). It is Smith's
mechanism with its uniform base measure on [lo, hi) replaced by the counting measure on Lambda.

Sampling, exactly. The points of rank i are those in [z_i, z_{i+1}) with z_0 = lo, z_i = y_i,
z_{n+1} = hi; there are N_i = ceil(z_{i+1} / g) - ceil(z_i / g) of them (exact in floating point: z / g
only rescales by a power of two). So (1) choose the gap i with Pr proportional to
w_i = N_i exp(-c (d_i - d_min)), d_i = |i - t|, then (2) a point uniform among its N_i (numpy's exact
bounded integers). Step (1) is an inversion: a uniform U in [u / 2^52, (u + 1) / 2^52) from 52 random
bits picks the first gap whose cumulative weight exceeds U W. In floating point every w_i is within a
relative (c (n + |t| + 2) + 1) 2^-50 of its value (d_i and d_min within 2^-53 of |i - t| relative,
exp within a few units in the last place), and a cumulative sum of n + 1 such terms within a further
(n + 2) 2^-53 of its total; the weights below e^-700 that underflow add at most N e^-700. A draw is
decided when the whole interval of U W, widened by twice a margin covering all of these (at least
2^-30 of the total), lies inside one gap's interval; the rare others (about (n + 1) 2^-29 of the groups) are
settled by :func:`_choose_exact`, which recomputes the weights with :mod:`decimal` at a precision whose
error it bounds and draws further bits of U until the gap is certain. So the draws follow Pr[x]
exactly, without the floating-point error of Gumbel and uniform noise (Mironov 2012).
"""

from __future__ import annotations

import math
from decimal import Decimal, localcontext

import numpy as np

from tsdp.mean.selection import length_classes

_BITS = 52
_MIN_MARGIN = 2.0 ** -30
LATTICE_POINTS = 2 ** 20  # about this many selection lattice points span [lo, hi)


def selection_lattice(lo: float, hi: float) -> float:
    """The public lattice step: the largest power of two at most (hi - lo) / 2^20."""
    return math.ldexp(1.0, math.frexp((hi - lo) / LATTICE_POINTS)[1] - 1)


def lattice_quantile(sorted_values: np.ndarray, starts: np.ndarray, q: np.ndarray, eps_q: float, lo: float,
                     hi: float, score_sens: int, rng: np.random.Generator, g: float | None = None) -> np.ndarray:
    """One private q-quantile per group on the lattice g Z within [lo, hi) (module docstring).

    ``sorted_values``: every group's values clipped to [lo, hi] and sorted within the group
    (:func:`tsdp.mean.selection.sorted_segments`); group k holds ``sorted_values[starts[k]:starts[k+1]]``.
    ``q``: one quantile level per group."""
    g = selection_lattice(lo, hi) if g is None else float(g)
    starts = np.asarray(starts, dtype=np.int64)
    n_groups = starts.size - 1
    t = np.broadcast_to(np.asarray(q, dtype=np.float64) * np.diff(starts), (n_groups,))
    c = eps_q / (2.0 * score_sens)
    u = rng.bit_generator.random_raw(n_groups) >> np.uint64(64 - _BITS)
    uf = u.astype(np.float64)
    pick = np.empty(n_groups, dtype=np.int64)      # the gap drawn, within its group
    left = np.empty(n_groups, dtype=np.int64)      # its left end ceil(z_i / g)
    points = np.empty(n_groups, dtype=np.int64)    # its number of lattice points N_i
    decided = np.empty(n_groups, dtype=bool)
    pending = {}                                   # undecided groups: (their N_i, their ceil(z / g))
    values = np.asarray(sorted_values, dtype=np.float64)
    for segments, index in length_classes(starts):  # the groups of each size n, as (groups, n) arrays
        rows = values.reshape(index) if segments is None else values[index]
        which = slice(None) if segments is None else segments
        n = rows.shape[1]
        # boundaries z_0 = lo, z_1..z_n = the values, z_{n+1} = hi, as lattice indices ceil(z / g)
        kz = np.empty((rows.shape[0], n + 2), dtype=np.int64)
        kz[:, 0] = math.ceil(lo / g)
        kz[:, -1] = math.ceil(hi / g)
        kz[:, 1:-1] = np.ceil(rows / g).astype(np.int64)
        count = np.diff(kz, axis=1)  # N_i of the n + 1 gaps
        tk = t[which]
        d = np.abs(np.arange(n + 1) - tk[:, None])
        with np.errstate(under="ignore"):
            w = count * np.exp(-c * (d - d.min(axis=1)[:, None]))
        cum = np.cumsum(w, axis=1)  # sequential within each group
        total = cum[:, -1]
        # every cumulative weight (and the total) is within `margin` of its true value
        margin = (np.maximum(_MIN_MARGIN, ((c * (n + np.abs(tk) + 2) + 1) * 2.0 ** -50 + (n + 8) * 2.0 ** -52))
                  * total + count.sum(axis=1) * 1e-300)
        # U W_true lies in [low + margin, high - margin] (W_true within margin of total, U < 1); comparing
        # with float cumulative weights, each within margin of its true value, takes a second margin
        low = uf[which] * (total * 2.0 ** -_BITS) * (1 - 2.0 ** -50) - 2 * margin
        high = (uf[which] + 1) * (total * 2.0 ** -_BITS) * (1 + 2.0 ** -50) + 2 * margin
        # the gap: the number of cumulative weights at or below U W
        below = (cum <= low[:, None]).sum(axis=1)
        local = np.minimum(below, n)
        r = np.arange(rows.shape[0])
        prev = np.where(below > 0, cum[r, np.maximum(local - 1, 0)], 0.0)
        ok = (below <= n) & (low >= prev) & (high < cum[r, local])
        pick[which], left[which], points[which], decided[which] = local, kz[r, local], count[r, local], ok
        for i in np.flatnonzero(~ok).tolist():
            pending[int(i if segments is None else segments[i])] = (count[i], kz[i])
    for k in np.flatnonzero(~decided).tolist():  # in group order: the draws of a seeded run do not move
        count, kz = pending[k]
        i = _choose_exact(rng, count.tolist(), float(t[k]), c, int(u[k]))
        pick[k], left[k], points[k] = i, kz[i], count[i]
    offset = rng.integers(0, points)  # a point uniform among the gap's N_i (exact bounded integers)
    return (left + offset).astype(np.float64) * g


def _choose_exact(gen: np.random.Generator, counts: list[int], t: float, c: float, u: int) -> int:
    """The gap i of one group with Pr proportional to counts[i] exp(-c (|i - t| - d_min)), for
    U in [u / 2^bits, (u + 1) / 2^bits), drawing further bits of U until the choice is certain."""
    bits = _BITS
    td, cd = Decimal(t), Decimal(c)  # binary floats: exact
    while True:
        prec = 40 + bits // 3
        with localcontext() as ctx:
            ctx.prec = prec
            err = Decimal(10) ** (-(prec - 10))  # relative error of each step, with room
            d = [abs(Decimal(i) - td) for i in range(len(counts))]
            dmin = min(d)
            cum, acc = [], Decimal(0)
            for n_i, d_i in zip(counts, d):
                acc += n_i * (-(cd * (d_i - dmin))).exp() if n_i else 0
                cum.append(acc)
            slack = acc * err * (len(counts) + 4)  # bounds the error of every cumulative weight
            scale = Decimal(2) ** bits
            low = Decimal(u) / scale * acc - 2 * slack
            high = Decimal(u + 1) / scale * acc + 2 * slack
            for i, edge in enumerate(cum):
                if edge > low:
                    before = cum[i - 1] if i else Decimal(0)
                    if low >= before and high < edge and counts[i]:
                        return i
                    break
        u, bits = (u << 64) | int(gen.bit_generator.random_raw()), bits + 64

"""Public-only structure of Gupta, Rameshwar, Tandon and Chakraborty (SPCOM 2024, arXiv:2401.15906):
user order, per-user cap rules and the WRAPAROUND / BESTFIT groupings (spec ``mean.md`` 2.0-2.2).

Everything here is a function of the per-user record counts only (public by the paper's
assumption, spec 1.1), never of the values, so it costs no privacy budget (spec 1.3, M-T2).

Notation: L is the number of users; user l holds m_l records; the cap is m_UB; and
S(m) = sum_l min(m_l, m) is the number of records kept under cap m.
"""

from __future__ import annotations

import math
from bisect import bisect_left, insort
from dataclasses import dataclass

import numpy as np

_SHIFT = 32  # bestfit heap keys: remaining capacity << 32 | array index


def user_order(counts: np.ndarray) -> np.ndarray:
    """Spec 2.0 rule 4 [D]: users by count descending, ties in the given (user-id) order.

    Returns the permutation ``order`` with ``counts[order]`` non-increasing (stable sort)."""
    counts = np.asarray(counts, dtype=np.int64)
    return np.argsort(-counts, kind="stable")


def kept_records(counts: np.ndarray, m_ub: int) -> int:
    """S(m_UB) = sum_l min(m_l, m_UB)."""
    return int(np.minimum(np.asarray(counts, dtype=np.int64), m_ub).sum())


def median_cap(counts: np.ndarray) -> int:
    """Median rule [P] with the tsdp resolution [D] (spec 2.2, M-P2): the ceil(L/2)-th largest count."""
    c = np.sort(np.asarray(counts, dtype=np.int64))[::-1]
    return int(c[math.ceil(c.size / 2) - 1])


def opt_cap(counts: np.ndarray) -> int:
    """Eq. (1) of the paper: argmax over m_min <= m <= m_max of S(m) / sqrt(m), ties to the smallest m.

    The maximum is attained at an observed count (spec 2.2 fact: on each segment between distinct
    counts S(m) = A + B m, and A m^-1/2 + B m^1/2 is quasi-convex), so evaluating the distinct
    counts is exact enumeration. Ties are resolved exactly by comparing S^2/m as integers."""
    c = np.unique(np.asarray(counts, dtype=np.int64))
    s = np.array([kept_records(counts, int(m)) for m in c], dtype=np.int64)
    best_m, best_s = int(c[0]), int(s[0])
    for m, sm in zip(c[1:].tolist(), s[1:].tolist()):
        if sm * sm * best_m > best_s * best_s * m:  # strictly better; ties keep the smaller m
            best_m, best_s = m, sm
    return best_m


def bestfit_pack(counts_desc: list[int], m_ub: int) -> tuple[list[int], int]:
    """BESTFIT (spec 2.1): the array index of each user, users given in the spec 2.0 order.

    Users with m_l >= m_UB get one own (full) array. Each other user goes whole into the array
    filled the most among those that can still take its min(m_l, m_UB) = m_l records
    (w(A) + m_l <= m_UB), ties to the least index; an empty array is opened only if no non-empty
    one fits. Returns (array index per user, K-bar). O(L log K-bar).

    The counts are non-increasing, so the users with full arrays are a prefix (numbered 0, 1, ...
    at once); the loop over the others keeps the partially filled arrays as sorted integer keys
    (remaining capacity << 32 | index), so the best fit is the first key >= m << 32.
    """
    n = len(counts_desc)
    big = 0
    while big < n and counts_desc[big] >= m_ub:
        big += 1
    if big == n:
        return list(range(n)), n
    out = list(range(big))
    append = out.append
    free: list[int] = []  # sorted keys (remaining capacity << 32) | index, partially filled only
    pop, find, put = free.pop, bisect_left, insort
    n_arr = big
    mask = 0xFFFFFFFF
    for m in counts_desc[big:]:
        key = m << _SHIFT
        pos = find(free, key)
        if pos < len(free):
            key = pop(pos)
            idx = key & mask
            rem = (key >> _SHIFT) - m
        else:
            idx = n_arr
            n_arr += 1
            rem = m_ub - m
        append(idx)
        if rem:
            put(free, (rem << _SHIFT) | idx)
    return out, n_arr


@dataclass(frozen=True)
class Segment:
    """``length`` records of user ``user`` (input index), from its ``offset``-th record, in an array."""

    user: int
    offset: int
    length: int


@dataclass(frozen=True)
class Layout:
    """The arrays of one group: ``arrays[i]`` lists the segments that fill array i, in order."""

    grouping: str
    m_ub: int
    arrays: tuple[tuple[Segment, ...], ...]

    @property
    def num_arrays(self) -> int:
        return len(self.arrays)

    def sizes(self) -> list[int]:
        return [sum(s.length for s in a) for a in self.arrays]

    def array_means(self, user_values: list[np.ndarray]) -> np.ndarray:
        """Unweighted mean over the filled slots of each array (spec 2.1)."""
        out = []
        for a in self.arrays:
            parts = [np.asarray(user_values[s.user])[s.offset:s.offset + s.length] for s in a]
            out.append(float(np.concatenate(parts).mean()))
        return np.array(out)


def layout(counts: np.ndarray, m_ub: int, grouping: str) -> Layout:
    """Reference (per-group, readable) construction of the WRAPAROUND or BESTFIT arrays.

    WRAPAROUND: the truncated per-user streams (first min(m_l, m_UB) records) are concatenated in
    the spec 2.0 order and cut into chunks of m_UB; only the K = floor(S/m_UB) full chunks are kept.
    BESTFIT: see :func:`bestfit_pack`."""
    counts = np.asarray(counts, dtype=np.int64)
    order = user_order(counts)
    trunc = np.minimum(counts[order], m_ub).tolist()
    if grouping == "bestfit":
        assign, k = bestfit_pack(counts[order].tolist(), m_ub)
        arrays: list[list[Segment]] = [[] for _ in range(k)]
        for u, a, t in zip(order.tolist(), assign, trunc):
            arrays[a].append(Segment(u, 0, t))
        return Layout(grouping, m_ub, tuple(tuple(a) for a in arrays))
    if grouping != "wraparound":
        raise ValueError(f"unknown grouping {grouping!r}")
    k = sum(trunc) // m_ub
    arrays = [[] for _ in range(k)]
    pos = 0
    for u, t in zip(order.tolist(), trunc):
        off = 0
        while off < t and pos < k * m_ub:
            i, fill = divmod(pos, m_ub)
            n = min(t - off, m_ub - fill)
            arrays[i].append(Segment(u, off, n))
            off += n
            pos += n
    return Layout(grouping, m_ub, tuple(tuple(a) for a in arrays))

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
_KEY_LIMIT = 1 << 62  # bestfit_pack_groups: largest key span packed in one pass


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



def _ranges(starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """The concatenated integer ranges [starts[i], starts[i] + lengths[i])."""
    total = int(lengths.sum())
    if total == 0:
        return np.zeros(0, dtype=np.int64)
    excl = np.cumsum(lengths) - lengths
    return np.repeat(starts - excl, lengths) + np.arange(total, dtype=np.int64)


def bestfit_pack_groups(counts_desc: np.ndarray, group_starts: np.ndarray,
                        caps: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """:func:`bestfit_pack` of every group at once: (array index of each user within its group,
    K-bar of each group), equal to calling ``bestfit_pack`` group by group.

    ``counts_desc``: the counts, group by group, each group in the spec 2.0 order (non-increasing);
    ``group_starts``: offsets of each group's first user (``n_groups + 1``, from 0); ``caps``: m_UB
    of each group.

    Why it is the same packing. Write t = min(m_l, m_UB) and treat every array not yet opened as
    having remaining capacity m_UB (with the next free indices); a partially filled array has
    remaining capacity in [1, m_UB - 1], so "the fullest array that fits, least index, else a new
    one" is exactly "the least (remaining, index) with remaining >= t", and a user with m_l >= m_UB
    gets a new array of its own. Users arrive in non-increasing t, so equal t form blocks. Inside
    a block of value m, the chosen array (r, i) gets m and keeps being the least key >= m while
    r - k m >= m: an array with remaining in [m, r) would have been chosen instead of (r, i), and
    one with remaining r has a larger index. So it takes floor(r / m) users (fewer if the block
    ends), and the block walks the open arrays with remaining >= m in (remaining, index) order,
    each taking floor(r / m) users, then opens new arrays that take floor(m_UB / m) users each.
    The arrays it filled leave with remaining r mod m < m (out of this block's reach), except the
    last one it touched. So a block needs only a cumulative sum over at most (block size) arrays.

    All groups advance together, one block per group per step (step s handles each group's s-th
    block), with the open arrays of every group in one sorted int64 key array
    ``base[g] + remaining * L_g + index`` (L_g users, so index < L_g); a step costs numpy passes
    over the blocks' users plus one merge of the key array. Full arrays leave the key array.
    """
    t_all = np.asarray(counts_desc, dtype=np.int64)
    gs = np.asarray(group_starts, dtype=np.int64)
    caps = np.asarray(caps, dtype=np.int64)
    n_groups = gs.size - 1
    runs = np.diff(gs)
    gid = np.repeat(np.arange(n_groups), runs)
    t_all = np.minimum(t_all, caps[gid])
    out = np.empty(t_all.size, dtype=np.int64)
    n_arr = np.zeros(n_groups, dtype=np.int64)
    if t_all.size == 0:
        return out, n_arr
    span = caps * runs
    base = np.cumsum(span) - span
    if int(base[-1]) + int(span[-1]) >= _KEY_LIMIT:  # keys would overflow: pack fewer groups at a time
        if n_groups == 1:
            a, k = bestfit_pack(t_all.tolist(), int(caps[0]))
            return np.asarray(a, dtype=np.int64), np.array([k], dtype=np.int64)
        h = n_groups // 2
        a1, k1 = bestfit_pack_groups(t_all[:gs[h]], gs[:h + 1], caps[:h])
        a2, k2 = bestfit_pack_groups(t_all[gs[h]:], gs[h:] - gs[h], caps[h:])
        return np.concatenate((a1, a2)), np.concatenate((k1, k2))

    # blocks of equal t within a group, and each block's rank within its group
    new = np.ones(t_all.size, dtype=bool)
    new[1:] = (t_all[1:] != t_all[:-1]) | (gid[1:] != gid[:-1])
    b_start = np.flatnonzero(new)
    b_size = np.diff(np.append(b_start, t_all.size))
    b_val = t_all[b_start]
    b_gid = gid[b_start]
    first = np.searchsorted(b_gid, np.arange(n_groups))
    rank = np.arange(b_start.size) - first[b_gid]
    by_step = np.argsort(rank, kind="stable")  # step by step, groups ascending within a step
    step_starts = np.concatenate(([0], np.cumsum(np.bincount(rank))))

    keys = np.zeros(0, dtype=np.int64)  # open arrays, sorted: base[g] + remaining * L_g + index
    for s in range(step_starts.size - 1):
        bl = by_step[step_starts[s]:step_starts[s + 1]]
        g, m, n, start = b_gid[bl], b_val[bl], b_size[bl], b_start[bl]
        big_l, b0, cap = runs[g], base[g], caps[g]
        lo = np.searchsorted(keys, b0 + m * big_l)
        hi = np.searchsorted(keys, b0 + cap * big_l)
        w = np.minimum(hi - lo, n)  # each candidate takes >= 1 user, so n candidates suffice
        pos = _ranges(lo, w)
        seg = np.repeat(np.arange(bl.size), w)
        local = keys[pos] - b0[seg]
        rem = local // big_l[seg]
        idx = local - rem * big_l[seg]
        q = rem // m[seg]
        csum = np.concatenate(([0], np.cumsum(q)))
        w_end = np.cumsum(w)
        before = csum[:-1] - csum[(w_end - w)[seg]]  # users given to earlier arrays of the block
        take = np.clip(n[seg] - before, 0, q)
        taken = np.minimum(csum[w_end] - csum[w_end - w], n)
        left = n - taken  # users for new arrays (the open ones are exhausted)
        per_new = cap // m
        n_new = -(-left // per_new)
        used = take > 0
        out[_ranges(start, taken)] = np.repeat(idx[used], take[used])
        j = _ranges(np.zeros(bl.size, dtype=np.int64), left)
        out[_ranges(start + taken, left)] = np.repeat(n_arr[g], left) + j // np.repeat(per_new, left)
        # keys of the arrays this step touched or opened, those still open only
        new_rem = rem[used] - take[used] * m[seg[used]]
        seg_new = np.repeat(np.arange(bl.size), n_new)
        k = _ranges(np.zeros(bl.size, dtype=np.int64), n_new)
        last = k == n_new[seg_new] - 1
        fill = np.where(last, left[seg_new] - k * per_new[seg_new], per_new[seg_new])
        open_rem = cap[seg_new] - fill * m[seg_new]
        n_arr[g] += n_new
        add = np.concatenate((
            (b0[seg[used]] + new_rem * big_l[seg[used]] + idx[used])[new_rem > 0],
            (b0[seg_new] + open_rem * big_l[seg_new] + n_arr[g][seg_new] - n_new[seg_new] + k)[open_rem > 0]))
        keep = np.ones(keys.size, dtype=bool)
        keep[pos[used]] = False
        keys = np.concatenate((keys[keep], add))
        keys.sort(kind="stable")
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

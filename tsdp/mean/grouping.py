"""Public-only structure of Gupta, Rameshwar, Tandon and Chakraborty (SPCOM 2024, arXiv:2401.15906):
user order, per-user cap rules and the WRAPAROUND / BESTFIT groupings (spec ``mean.md`` 2.0-2.2).
:func:`bestfit_pack` is the readable BESTFIT of one group; :func:`bestfit_pack_groups` gives the
same arrays for every group at once, vectorised (what ``plan_runs`` uses).

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


def _segments(lengths: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(segment number, position within the segment) of each element of segments of ``lengths``."""
    seg = np.repeat(np.arange(lengths.size, dtype=lengths.dtype), lengths)
    return seg, np.arange(seg.size, dtype=lengths.dtype) - (np.cumsum(lengths) - lengths)[seg]


def _blocks(c: np.ndarray, gs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(first user of each block of equal counts within a group, index of each group's first block;
    ``gs.size`` entries, the last one the number of blocks)."""
    inner = gs[1:-1]
    inner = inner[(inner > 0) & (inner < c.size)]
    up = c[1:] > c[:-1]
    up[inner - 1] = False  # a group may start higher than the last one ended
    if up.any():
        raise ValueError("counts_desc must be non-increasing within each group (the spec 2.0 order)")
    new = np.empty(c.size, dtype=bool)
    new[0] = True
    np.not_equal(c[1:], c[:-1], out=new[1:])
    new[inner] = True
    b_start = np.flatnonzero(new)
    return b_start, np.searchsorted(b_start, gs)


def _carry(n_users: int, dests: list, labels: list, slopes: list) -> np.ndarray:
    """Each user's label from the pieces (first position d, label a, slope 0 or 1) that cover the
    users from each d to the next piece's: the user at position p gets a + slope (p - d)."""
    small = np.int32 if n_users < 2 ** 31 else np.int64  # halves the memory traffic of these passes
    dest = np.concatenate(dests).astype(small)
    label, one = np.concatenate(labels), np.concatenate(slopes)
    starts = np.zeros(n_users, dtype=np.int8)
    starts[dest] = 1
    piece = np.cumsum(starts, dtype=small)  # 1 + the rank of each user's piece in position order
    piece -= 1
    rank = piece[dest]
    value = np.empty(dest.size, dtype=small)
    value[rank] = np.where(one, label - dest, label)
    slope = np.empty(dest.size, dtype=bool)
    slope[rank] = one
    out = value[piece]
    np.add(out, np.arange(n_users, dtype=small), out=out, where=slope[piece])
    return out


def bestfit_pack_groups(counts_desc: np.ndarray, group_starts: np.ndarray,
                        caps: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """:func:`bestfit_pack` of every group at once: (array index of each user within its group, as
    int32 when the users fit it, and K-bar of each group), equal to ``bestfit_pack`` group by group.

    ``counts_desc``: the counts, group by group, each group in the spec 2.0 order (non-increasing);
    ``group_starts``: offsets of each group's first user (``n_groups + 1``, from 0); ``caps``: m_UB
    of each group.

    Why it is the same packing. Write t = min(m_l, m_UB) and treat every array not yet opened as
    having remaining capacity m_UB (with the next free indices); a partially filled array has
    remaining capacity in [1, m_UB - 1], so "the fullest array that fits, least index, else a new
    one" is exactly "the least (remaining, index) with remaining >= t", and a user with m_l >= m_UB
    gets a new array of its own. Users arrive in non-increasing t, so:

    * The leading users with 2 t > m_UB each open a new array: every array opened before holds
      some t' >= t, so has room m_UB - t' <= m_UB - t < t. User j of the group gets array j.
    * The others come in blocks of equal t. Inside a block of value m, the chosen array (r, i)
      gets m and keeps being the least key >= m while r - k m >= m: an array with remaining in
      [m, r) would have been chosen instead of (r, i), and one with remaining r has a larger index.
      So it takes floor(r / m) users (fewer if the block ends), and the block walks the open arrays
      with remaining >= m in (remaining, index) order, each taking floor(r / m) users, then opens
      new arrays that take floor(m_UB / m) users each. The arrays it filled leave with remaining
      r mod m < m (out of this block's reach), except the last one it touched.

    So arrays with equal remaining capacity and consecutive indices move together: the state is
    kept as runs (remaining r, first index a, length), and a block turns a run it fills whole into
    one run (r mod m, a, length), the run where it stops into at most three, and its new arrays
    into at most two. An array with less room than the group's least t can take no later user and
    leaves the state. All groups advance together, one block per group per step (step s handles
    each group's s-th block), with the runs of every group in one array sorted by the int64 key
    ``base[g] + r * L_g + a`` (L_g users, so a < L_g). The users of a block are cut into pieces:
    consecutive users that go to one array, or to consecutive arrays one user each; the labels are
    carried from the pieces to the users once at the end (:func:`_carry`). An empty group
    gets K-bar 0, as from ``bestfit_pack([], m_UB)``.
    """
    c = np.asarray(counts_desc, dtype=np.int64)
    gs = np.asarray(group_starts, dtype=np.int64)
    caps = np.asarray(caps, dtype=np.int64)
    n_groups = gs.size - 1
    runs = np.diff(gs)
    n_users = c.size
    if n_users == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(n_groups, dtype=np.int64)
    span = caps * runs
    base = np.cumsum(span) - span
    if int(base[-1]) + int(span[-1]) >= _KEY_LIMIT:  # keys would overflow: pack fewer groups at a time
        if n_groups == 1:
            a, k = bestfit_pack(c.tolist(), int(caps[0]))
            return np.asarray(a, dtype=np.int64), np.array([k], dtype=np.int64)
        h = n_groups // 2
        a1, k1 = bestfit_pack_groups(c[:gs[h]], gs[:h + 1], caps[:h])
        a2, k2 = bestfit_pack_groups(c[gs[h]:], gs[h:] - gs[h], caps[h:])
        return np.concatenate((a1, a2)), np.concatenate((k1, k2))

    b_start, first_block = _blocks(c, gs)
    b_gid = np.repeat(np.arange(n_groups), np.diff(first_block))
    b_val = np.minimum(c[b_start], caps[b_gid])
    b_size = np.diff(np.append(b_start, n_users))
    live = b_val[np.maximum(first_block[1:] - 1, 0)]  # each group's least t
    lead = 2 * b_val > caps[b_gid]

    # the leading users: one piece and one run (if it has room for a later user) per block
    lb = np.flatnonzero(lead)
    lg = b_gid[lb]
    n_arr = np.bincount(lg, weights=b_size[lb], minlength=n_groups).astype(np.int64)
    a0 = b_start[lb] - gs[lg]
    dests, labels, slopes = [b_start[lb]], [a0], [np.ones(lb.size, dtype=bool)]
    r0 = caps[lg] - b_val[lb]
    ok = r0 >= live[lg]
    keys = (base[lg] + r0 * runs[lg] + a0)[ok]  # in key order already: r0 grows with a0
    lens = b_size[lb][ok]
    n_keys = np.bincount(lg[ok], minlength=n_groups)

    rest = np.flatnonzero(~lead)
    rank = rest - first_block[b_gid[rest]] - np.bincount(lg, minlength=n_groups)[b_gid[rest]]
    if rest.size and rank.max() < 2 ** 15:
        rank = rank.astype(np.int16)  # a stable argsort of small integers is a radix sort
    by_step = rest[np.argsort(rank, kind="stable")]  # step by step, groups ascending within a step
    step_starts = np.concatenate(([0], np.cumsum(np.bincount(rank))))
    b_gid, b_start, b_val, b_size = b_gid[by_step], b_start[by_step], b_val[by_step], b_size[by_step]
    b_len, b_base, b_cap, b_live = runs[b_gid], base[b_gid], caps[b_gid], live[b_gid]
    b_per_new = b_cap // b_val  # users per new array (>= 2)

    for s in range(step_starts.size - 1):
        sl = slice(step_starts[s], step_starts[s + 1])
        g, m, n, start = b_gid[sl], b_val[sl], b_size[sl], b_start[sl]
        big_l, b0, cap, per_new, floor = b_len[sl], b_base[sl], b_cap[sl], b_per_new[sl], b_live[sl]
        # the runs with remaining >= m of each group, in key order: at most n of them
        lo = np.searchsorted(keys, b0 + m * big_l)
        w = np.minimum(np.cumsum(n_keys)[g] - lo, n)
        seg, off = _segments(w)
        pos = lo[seg] + off
        local = keys[pos] - b0[seg]
        rem = local // big_l[seg]
        q = rem // m[seg]  # users per array of the run
        csum = np.concatenate(([0], np.cumsum(lens[pos] * q)))
        w_end = np.cumsum(w)
        before = csum[:-1] - csum[(w_end - w)[seg]]  # users given to earlier runs of the block
        used = np.flatnonzero(before < n[seg])
        su, ru, qu, lu = seg[used], rem[used], q[used], lens[pos[used]]
        au = local[used] - ru * big_l[su]
        mu = m[su]
        take = np.minimum(n[su] - before[used], lu * qu)
        full = take // qu  # arrays filled to r mod m; then one array with `part` users, if any
        part = take - full * qu
        left = n - np.minimum(csum[w_end] - csum[w_end - w], n)  # users for new arrays
        n_full = left // per_new
        n_part = left - n_full * per_new
        base_idx = n_arr[g]
        n_arr[g] += n_full + (n_part > 0)

        # pieces: a run with one user per array is one piece, others one piece per array
        one = qu == 1
        dests += [start[su[one]] + before[used[one]]]
        labels += [au[one]]
        slopes += [np.ones(int(one.sum()), dtype=bool)]
        many = np.flatnonzero(~one)
        k_seg, k = _segments(full[many] + (part[many] > 0))
        j = many[k_seg]
        nk_seg, nk = _segments(n_full + (n_part > 0))
        dests += [start[su[j]] + before[used[j]] + k * qu[j],
                  start[nk_seg] + (n - left)[nk_seg] + nk * per_new[nk_seg]]
        labels += [au[j] + k, base_idx[nk_seg] + nk]
        slopes += [np.zeros(k.size + nk.size, dtype=bool)]

        # the runs that replace the used ones, and the new arrays' runs: (block, remaining, first, length)
        mid = au + full
        has_part = part > 0
        blk = np.concatenate((su, su, su, np.arange(g.size), np.arange(g.size)))
        r_new = np.concatenate((ru - qu * mu, ru - part * mu, ru, cap - per_new * m, cap - n_part * m))
        a_new = np.concatenate((au, mid, mid + has_part, base_idx, base_idx + n_full))
        l_new = np.concatenate((full, has_part, lu - full - has_part, n_full, n_part > 0))
        keep = (l_new > 0) & (r_new >= floor[blk])
        n_keys[g] += np.bincount(blk[keep], minlength=g.size) - np.bincount(su, minlength=g.size)
        kept = np.ones(keys.size, dtype=bool)
        kept[pos[used]] = False
        keys = np.concatenate((keys[kept], (b0[blk] + r_new * big_l[blk] + a_new)[keep]))
        lens = np.concatenate((lens[kept], l_new[keep].astype(np.int64)))
        order = np.argsort(keys, kind="stable")
        keys, lens = keys[order], lens[order]

    return _carry(n_users, dests, labels, slopes), n_arr


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

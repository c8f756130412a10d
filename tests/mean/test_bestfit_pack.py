"""The all-groups BESTFIT packing (``bestfit_pack_groups``, used by ``plan_runs``) gives every user
exactly the array :func:`bestfit_pack` gives it, group by group (spec mean.md 2.1): the packing
decides which users share an array, so it must agree bit for bit, ties and new arrays included."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tsdp.mean.grouping as grouping
from tsdp.mean.algorithms import plan_runs
from tsdp.mean.grouping import bestfit_pack, bestfit_pack_groups, median_cap, opt_cap, user_order

SETTINGS = settings(derandomize=True, max_examples=300, deadline=None)

counts_lists = st.lists(st.integers(1, 40), min_size=1, max_size=80)
# few distinct values: long blocks of equal counts, arrays filled by many users of one block
blocky_lists = st.lists(st.sampled_from([1, 2, 3, 5, 8, 13]), min_size=1, max_size=120)
# a few counts, each repeated: runs of arrays with equal room, each taking several users of a block
dense_lists = st.lists(st.tuples(st.integers(1, 8), st.integers(1, 20)), min_size=1, max_size=6).map(
    lambda pairs: [m for m, r in pairs for _ in range(r)])


def flat(groups: list[list[int]]) -> tuple[np.ndarray, np.ndarray]:
    """Each group sorted non-increasing, concatenated, and the group offsets."""
    c = np.array([m for g in groups for m in sorted(g, reverse=True)], dtype=np.int64)
    return c, np.concatenate(([0], np.cumsum([len(g) for g in groups]))).astype(np.int64)


def per_group(groups: list[list[int]], caps: list[int]) -> tuple[list[int], list[int]]:
    labels, ks = [], []
    for g, cap in zip(groups, caps):
        a, k = bestfit_pack(sorted(g, reverse=True), cap)
        labels += a
        ks.append(k)
    return labels, ks


def check(groups: list[list[int]], caps: list[int]) -> None:
    c, gs = flat(groups)
    labels, ks = bestfit_pack_groups(c, gs, np.array(caps, dtype=np.int64))
    ref_labels, ref_ks = per_group(groups, caps)
    assert labels.tolist() == ref_labels
    assert ks.tolist() == ref_ks


@SETTINGS
@given(counts_lists, st.integers(1, 50))
def test_one_group_equals_bestfit_pack(counts, cap):
    check([counts], [cap])  # caps below, inside and above the counts (users with m >= m_UB)


@SETTINGS
@given(blocky_lists, st.integers(1, 30))
def test_long_blocks_of_equal_counts(counts, cap):
    check([counts], [cap])


@SETTINGS
@given(dense_lists, st.integers(1, 14))
def test_small_counts_many_equal_arrays(counts, cap):
    check([counts], [cap])


@SETTINGS
@given(st.integers(1, 4), st.integers(2, 4), st.integers(0, 3), st.integers(1, 6), st.integers(2, 10),
       st.integers(0, 8), st.integers(1, 3), st.integers(1, 4), st.integers(0, 120))
def test_block_stops_inside_a_run_of_equal_arrays(m, q, extra, dt, r1, full, part, m2, r3):
    """r1 leading users of t leave r1 arrays with room r = q m + extra each; the block of m stops
    inside them (``full`` arrays filled, one with ``part`` of its q users, the rest untouched), and
    a later block of m2 <= m reaches the arrays after it."""
    extra, full, part, m2 = extra % m, min(full, r1 - 2), min(part, q - 1), min(m2, m)
    r = q * m + extra
    t = r + dt  # 2 t > m_UB = t + r
    check([[t] * r1 + [m] * (full * q + part) + [m2] * r3], [t + r])


@SETTINGS
@given(st.integers(1, 30), st.integers(1, 200), st.integers(1, 40))
def test_all_counts_equal(m, n, cap):
    check([[m] * n], [cap])


@SETTINGS
@given(st.integers(1, 40), st.integers(1, 40))
def test_single_user(m, cap):
    check([[m]], [cap])


@SETTINGS
@given(st.lists(st.tuples(st.one_of(counts_lists, blocky_lists), st.integers(1, 45)), min_size=1, max_size=25))
def test_many_groups_at_once(groups_caps):
    check([g for g, _ in groups_caps], [cap for _, cap in groups_caps])


@SETTINGS
@given(st.lists(st.tuples(st.lists(st.integers(1, 12), max_size=6), st.integers(1, 15)), min_size=1, max_size=12))
def test_small_and_empty_groups(groups_caps):
    check([g for g, _ in groups_caps], [cap for _, cap in groups_caps])


@SETTINGS
@given(st.lists(st.one_of(counts_lists, blocky_lists), min_size=1, max_size=20),
       st.sampled_from(["median", "opt"]))
def test_plan_runs_equals_the_per_group_reference(groups, rule):
    """plan_runs on runs in user order (not sorted) against bestfit_pack per group in the spec 2.0
    user order: the same array for every run, and the same K-bar."""
    counts = np.array([m for g in groups for m in g], dtype=np.int64)
    gs = np.concatenate(([0], np.cumsum([len(g) for g in groups]))).astype(np.int64)
    plan = plan_runs(counts, gs, algorithm="array-averaging", grouping="bestfit", m_ub=rule)
    s = plan.structure
    gid = np.repeat(np.arange(len(groups)), s.users)
    got = plan.arr1 - s.arr_starts[:-1][gid]
    for i, g in enumerate(groups):
        g = np.array(g, dtype=np.int64)
        cap = (median_cap if rule == "median" else opt_cap)(g)
        order = user_order(g)
        a, k = bestfit_pack(g[order].tolist(), cap)
        want = np.empty(g.size, dtype=np.int64)
        want[order] = a
        assert s.m_ub[i] == cap and s.num_arrays[i] == k
        assert got[gs[i]:gs[i + 1]].tolist() == want.tolist()


@pytest.mark.parametrize("counts, cap, labels, k", [
    # the two 4s meet two arrays with 4 left: the least index first
    ([6, 6, 4, 4, 2, 2, 2], 10, [0, 1, 0, 1, 2, 2, 2], 3),
    # best fit, not first fit: the 3 goes to the fuller array 0 (3 left), not array 1 (5 left)
    ([7, 5, 3, 3], 10, [0, 1, 0, 1], 2),
    # array 0 takes two 2s (5 left -> 1), then one new array takes four; the 1 goes back to array 0
    ([7, 2, 2, 2, 2, 2, 2, 1], 12, [0, 0, 0, 1, 1, 1, 1, 0], 2),
    # users with m >= m_UB: one full array each, in order
    ([9, 8, 8, 3, 3, 3], 8, [0, 1, 2, 3, 3, 4], 5),
    # a new array only when no open one fits: 4 left in array 0 fits the 4, not the 5
    ([6, 5, 4], 10, [0, 1, 0], 2),
    # the 2s stop inside arrays 0-2 (4 left each): array 0 takes two, array 1 one; the 1s then
    # fill array 1 (2 left) before array 2 (4 left), then open array 3
    ([6, 6, 6, 2, 2, 2, 1, 1, 1, 1, 1, 1, 1], 10, [0, 1, 2, 0, 0, 1, 1, 1, 2, 2, 2, 2, 3], 4),
])
def test_hand_cases(counts, cap, labels, k):
    assert bestfit_pack(counts, cap) == (labels, k)
    got, ks = bestfit_pack_groups(np.array(counts), np.array([0, len(counts)]), np.array([cap]))
    assert got.tolist() == labels and ks.tolist() == [k]


def test_groups_packed_in_parts_when_keys_would_overflow(monkeypatch):
    """The key span of all groups past the int64 limit: the groups are split (down to one group,
    which falls back to bestfit_pack), with the same answer."""
    rng = np.random.default_rng(4)
    groups = [rng.integers(1, 30, int(rng.integers(1, 40))).tolist() for _ in range(9)]
    caps = [int(rng.integers(1, 35)) for _ in groups]
    monkeypatch.setattr(grouping, "_KEY_LIMIT", 200)
    check(groups, caps)


def test_counts_out_of_order_are_refused():
    """The packing is only defined on the spec 2.0 order: a count that rises within a group is a
    caller's bug, refused rather than packed silently wrong (a rise between groups is fine)."""
    with pytest.raises(ValueError, match="non-increasing"):
        bestfit_pack_groups(np.array([3, 5, 1]), np.array([0, 3]), np.array([4]))
    labels, ks = bestfit_pack_groups(np.array([3, 1, 5, 1]), np.array([0, 2, 4]), np.array([3, 5]))
    assert labels.tolist() == [0, 1, 0, 1] and ks.tolist() == [2, 2]


def test_empty_input():
    labels, ks = bestfit_pack_groups(np.zeros(0, dtype=np.int64), np.array([0]), np.zeros(0, dtype=np.int64))
    assert labels.size == 0 and ks.size == 0

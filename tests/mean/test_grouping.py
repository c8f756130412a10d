"""Grouping and cap rules (spec mean.md 2.0-2.2): M-T1, M-T3, M-T4, M-T8 and the vectorised
engine against the per-group reference construction."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest

from tsdp.mean import MeanSettings, prepare_groups, release_prepared
from tsdp.mean.algorithms import _opt_caps
from tsdp.mean.grouping import bestfit_pack, kept_records, layout, median_cap, opt_cap, user_order
from tsdp.mean.itms_surrogate import ITMS_SURROGATE_COUNTS
from tsdp.mean.synthetic import flat_layout, scale_samples, scale_users

U = 65.0


def random_counts(rng, n_users=None, median=20.0, s=1.0, cap=300):
    if n_users is None:
        n_users = int(rng.integers(1, 60))
    return np.clip(np.rint(rng.lognormal(np.log(median), s, n_users)), 1, cap).astype(np.int64)


def naive_bestfit(counts_desc, m_ub):
    """O(L K) transcription of the spec 2.1 BESTFIT rule."""
    fill, out = [], []
    for m in counts_desc:
        if m >= m_ub:
            fill.append(m_ub)
            out.append(len(fill) - 1)
            continue
        fits = [i for i, w in enumerate(fill) if 0 < w and w + m <= m_ub]
        if fits:
            i = max(fits, key=lambda j: (fill[j], -j))
            fill[i] += m
        else:
            fill.append(m)
            i = len(fill) - 1
        out.append(i)
    return out, len(fill)


def test_user_order_count_descending_ties_in_given_order():
    order = user_order(np.array([3, 5, 3, 5, 1]))
    assert order.tolist() == [1, 3, 0, 2, 4]


@pytest.mark.parametrize("seed", range(40))
def test_m_t1_grouping_invariants(seed):
    rng = np.random.default_rng(seed)
    counts = random_counts(rng)
    m_ub = int(rng.integers(counts.min(), counts.max() + 1))
    s = kept_records(counts, m_ub)
    for grouping in ("bestfit", "wraparound"):
        lay = layout(counts, m_ub, grouping)
        assert all(0 < size <= m_ub for size in lay.sizes())
        per_user = {}
        for i, arr in enumerate(lay.arrays):
            for seg in arr:
                per_user.setdefault(seg.user, []).append((seg.offset, seg.length, i))
        for u, segs in per_user.items():  # contiguous from the user's first record
            segs.sort()
            off = 0
            for o, n, _ in segs:
                assert o == off
                off += n
            assert off <= min(counts[u], m_ub)
        for u in np.flatnonzero(counts >= m_ub):  # own full array
            (o, n, i), = per_user[int(u)]
            assert n == m_ub and len(lay.arrays[i]) == 1
        if grouping == "bestfit":
            assert len(per_user) == counts.size
            assert all(len(v) == 1 for v in per_user.values())
            assert all(sum(n for _, n, _ in v) == min(counts[u], m_ub) for u, v in per_user.items())
            assert sum(lay.sizes()) == s
            assert lay.num_arrays >= math.ceil(s / m_ub) >= s // m_ub
            order = user_order(counts)
            assert bestfit_pack(counts[order].tolist(), m_ub) == naive_bestfit(counts[order].tolist(), m_ub)
        else:
            assert all(len(v) <= 2 for v in per_user.values())
            assert lay.num_arrays == s // m_ub
            assert all(size == m_ub for size in lay.sizes())
            assert sum(lay.sizes()) == (s // m_ub) * m_ub


def brute_opt(counts):
    best = None
    for m in range(int(counts.min()), int(counts.max()) + 1):
        g = Fraction(kept_records(counts, m) ** 2, m)  # (S/sqrt m)^2, exact
        if best is None or g > best[0]:
            best = (g, m)
    return best[1]


@pytest.mark.parametrize("seed", range(60))
def test_m_t3_cap_rules(seed):
    rng = np.random.default_rng(100 + seed)
    counts = random_counts(rng, cap=120)
    assert median_cap(counts) == np.sort(counts)[::-1][math.ceil(counts.size / 2) - 1]
    m = opt_cap(counts)
    assert m in set(counts.tolist())
    assert m == brute_opt(counts)
    # scaling: counts x10 -> cap x10 and the same K-bar and K
    m10 = opt_cap(scale_samples(counts, 10))
    assert m10 == 10 * m
    for grouping in ("bestfit", "wraparound"):
        assert (layout(scale_samples(counts, 10), m10, grouping).num_arrays
                == layout(counts, m, grouping).num_arrays)
    assert opt_cap(scale_users(counts, 10)) == m


def test_opt_cap_ties_go_to_the_smallest():
    # S(1)/1 = 3 and S(4)/2 = 3: a tie
    assert opt_cap(np.array([4, 1, 1])) == 1
    assert brute_opt(np.array([4, 1, 1])) == 1


def test_vectorised_caps_match_reference():
    rng = np.random.default_rng(7)
    groups = [random_counts(rng, cap=80) for _ in range(300)] + [np.array([4, 1, 1]), np.array([8, 2, 2, 1])]
    c = np.concatenate([np.sort(g)[::-1] for g in groups])
    gs = np.concatenate(([0], np.cumsum([g.size for g in groups])))
    gid = np.repeat(np.arange(len(groups)), [g.size for g in groups])
    totals = np.array([g.sum() for g in groups])
    assert _opt_caps(c, gs, gid, totals).tolist() == [opt_cap(g) for g in groups]


def test_m_t3_itms_surrogate():
    counts = np.array(ITMS_SURROGATE_COUNTS)
    assert counts.max() == 417 and counts.sum() == 17166 and median_cap(counts) == 46
    m = opt_cap(counts)
    assert m == 64 and m in set(counts.tolist())
    assert layout(counts, m, "bestfit").num_arrays == 164
    assert layout(counts, m, "wraparound").num_arrays == 160
    assert 160 * m <= kept_records(counts, m) < 161 * m
    m10 = opt_cap(scale_samples(counts))
    assert m10 == 640
    assert layout(scale_samples(counts), m10, "bestfit").num_arrays == 164
    assert layout(scale_samples(counts), m10, "wraparound").num_arrays == 160


def test_m_t4_lemmas_on_random_count_vectors():
    rng = np.random.default_rng(11)
    for _ in range(1000):
        counts = random_counts(rng, n_users=int(rng.integers(1, 200)), s=float(rng.uniform(0.1, 2)))
        total, m_star, n = int(counts.sum()), int(counts.max()), counts.size
        delta_f = Fraction(m_star, total)  # times U
        for m in np.unique(counts).tolist() + [int(rng.integers(1, m_star + 1))]:
            assert delta_f >= Fraction(m, kept_records(counts, m))  # Lemma III.1
        med = median_cap(counts)
        gain = delta_f / Fraction(med, kept_records(counts, med))
        opt = Fraction(m_star * n, total)
        assert gain >= opt / 2  # Lemma III.2
        assert gain <= min(Fraction(m_star, med), opt)


@pytest.mark.parametrize("grouping", ["bestfit", "wraparound"])
@pytest.mark.parametrize("rule", ["median", "opt", "int"])
def test_vectorised_engine_matches_reference_layout(grouping, rule):
    rng = np.random.default_rng(3)
    groups, counts_list = [], []
    for _ in range(120):
        counts = random_counts(rng, cap=90)
        counts_list.append(counts)
        groups.append([rng.uniform(0, U, m) for m in counts])
    m_ub = "auto" if rule == "int" else rule
    if rule == "int":  # an integer valid in every group
        m_ub = 1
        groups.append([rng.uniform(0, U, 1)])
        counts_list.append(np.array([1]))
        counts_list = [c for c in counts_list if c.min() == 1]
        groups = [g for g in groups if min(len(u) for u in g) == 1]
    values, us, gs = flat_layout(groups)
    s = MeanSettings(epsilon=1.0, upper=U, algorithm="array-averaging", grouping=grouping, m_ub=m_ub)
    prep = prepare_groups(values, us, gs, s)
    ref = []
    for g, counts in zip(groups, counts_list):
        cap = {"median": median_cap, "opt": opt_cap}.get(rule, lambda c: 1)(counts)
        lay = layout(counts, cap, grouping)
        ref.append(lay.array_means(g))
        assert prep.m_ub[len(ref) - 1] == cap
        assert prep.num_arrays[len(ref) - 1] == lay.num_arrays
    np.testing.assert_allclose(prep.array_means, np.concatenate(ref), rtol=1e-12, atol=1e-12)


def test_m_t8_reductions():
    rng = np.random.default_rng(5)
    counts = random_counts(rng, n_users=40)
    counts[:3] = counts.max()
    m_star = int(counts.max())
    lay = layout(counts, m_star, "bestfit")
    for u in np.flatnonzero(counts == m_star):
        owners = [a for a in lay.arrays if any(s.user == u for s in a)]
        assert len(owners) == 1 and len(owners[0]) == 1
    # all counts equal to m, m_UB = m: K-bar = K = L and f_arr = f
    vals = [rng.uniform(0, U, 7) for _ in range(25)]
    values, us, gs = flat_layout([vals])
    for grouping in ("bestfit", "wraparound"):
        s = MeanSettings(epsilon=1.0, upper=U, algorithm="array-averaging", grouping=grouping, m_ub=7)
        prep = prepare_groups(values, us, gs, s)
        assert prep.num_arrays[0] == prep.k_wraparound[0] == 25
        rel = release_prepared(prep, s, np.random.default_rng(0))
        assert rel.statistic[0] == pytest.approx(values.mean(), rel=1e-13)
    # LEVY with [a, b] = [0, U] forced and the same m_UB equals f_arr,best
    groups = [[rng.uniform(0, U, m) for m in random_counts(rng)] for _ in range(30)]
    values, us, gs = flat_layout(groups)
    from tsdp.mean.algorithms import release
    arr = MeanSettings(epsilon=1.0, upper=U, algorithm="array-averaging", m_ub="opt")
    lev = MeanSettings(epsilon=1.0, upper=U, algorithm="levy")
    f_arr = release_prepared(prepare_groups(values, us, gs, arr), arr, np.random.default_rng(0)).statistic
    f_levy = release(prepare_groups(values, us, gs, lev), np.random.default_rng(0), epsilon=1.0,
                     lower=0.0, upper=U, interval=(0.0, U)).statistic
    np.testing.assert_allclose(f_levy, f_arr, rtol=1e-13)

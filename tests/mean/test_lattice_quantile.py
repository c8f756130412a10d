"""QUANTILE's hardened selection: Smith's utility over the public lattice, sampled exactly."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from tests.mechanisms.test_discrete import count_calls
from tsdp.mean import lattice_quantile as lq

LO, HI, G = 0.0, 8.0, 0.5  # 16 lattice points


def reference_pmf(values, q, eps_q, sens, lo=LO, hi=HI, g=G):
    """Pr[x] over the lattice points, straight from the definition: exp(-c |rank(x) - q n|)."""
    points = np.arange(math.ceil(lo / g), math.ceil(hi / g)) * g
    y = np.clip(np.asarray(values, dtype=float), lo, hi)
    rank = np.array([(y <= x).sum() for x in points])
    w = np.exp(-eps_q / (2 * sens) * np.abs(rank - q * y.size))
    return points, w / w.sum()


def draws(values, q, eps_q, sens, n, seed):
    y = np.sort(np.clip(values, LO, HI))
    reps = np.tile(y, n)
    starts = np.arange(n + 1) * y.size
    return lq.lattice_quantile(reps, starts, np.full(n, q), eps_q, LO, HI, sens, np.random.default_rng(seed), g=G)


@pytest.mark.parametrize("values,q,eps_q,sens", [
    ([1.0, 2.5, 2.5, 3.0, 6.75], 0.3, 1.0, 1),
    ([0.0, 0.0, 7.9, 8.0, 9.0, 4.2, 4.2], 0.9, 2.0, 2),  # values at and beyond the bounds, ties
    ([3.3], 0.1, 0.25, 1),
])
def test_draws_follow_the_exponential_mechanism_over_the_lattice(values, q, eps_q, sens):
    points, pmf = reference_pmf(values, q, eps_q, sens)
    x = draws(np.array(values), q, eps_q, sens, 30_000, seed=3)
    k = x / G
    assert np.all(k == np.round(k)) and x.min() >= LO and x.max() < HI
    observed = np.bincount(np.round(k).astype(int), minlength=points.size)
    expected = pmf * x.size
    assert stats.chisquare(observed, expected).pvalue > 1e-3


def test_the_exact_fallback_alone_gives_the_same_distribution(monkeypatch):
    """With the float margin widened to half the total weight, nearly every group is settled by the
    decimal fallback (drawing more bits), and the draws still follow the pmf."""
    monkeypatch.setattr(lq, "_MIN_MARGIN", 0.5)
    calls = count_calls(monkeypatch, lq, "_choose_exact")
    values = [1.0, 2.5, 2.5, 3.0, 6.75]
    points, pmf = reference_pmf(values, 0.3, 1.0, 1)
    x = draws(np.array(values), 0.3, 1.0, 1, 4000, seed=4)
    assert calls["n"] > 3000
    observed = np.bincount(np.round(x / G).astype(int), minlength=points.size)
    assert stats.chisquare(observed, pmf * x.size).pvalue > 1e-3


@given(st.lists(st.floats(-1.0, 9.0, allow_nan=False), min_size=1, max_size=8), st.integers(0, 7),
       st.floats(-1.0, 9.0, allow_nan=False), st.sampled_from([0.1, 0.5, 0.9]), st.sampled_from([0.25, 1.0, 3.0]))
@settings(max_examples=200, derandomize=True, deadline=None)
def test_replacing_one_array_mean_moves_no_probability_by_more_than_e_eps(values, which, new, q, eps_q):
    """The mechanism as defined is eps_q-DP: on neighbours (one array mean replaced), every lattice
    point's probability changes by a factor of at most exp(eps_q) (sensitivity 1, BESTFIT)."""
    other = list(values)
    other[which % len(values)] = new
    _, p = reference_pmf(values, q, eps_q, 1)
    _, p2 = reference_pmf(other, q, eps_q, 1)
    assert np.max(np.abs(np.log(p) - np.log(p2))) <= eps_q * (1 + 1e-12)


def test_many_groups_at_once_and_the_default_lattice():
    """Groups of different sizes and levels in one call, each on the default lattice of [lo, hi)."""
    rng = np.random.default_rng(8)
    sizes = [1, 5, 40, 300]
    values = [np.sort(np.clip(rng.normal(20, 5, s), 0, 65)) for s in sizes]
    starts = np.concatenate(([0], np.cumsum(sizes)))
    g = lq.selection_lattice(0.0, 65.0)
    assert g == 2.0 ** -14
    x = lq.lattice_quantile(np.concatenate(values), starts, np.array([0.1, 0.5, 0.9, 0.9]), 1.0, 0.0, 65.0, 1, rng)
    assert x.shape == (4,) and np.all((x / g) == np.round(x / g)) and np.all((x >= 0) & (x < 65))
    assert 10 < x[3] < 30  # 300 arrays: the private 0.9-quantile is near the data's


def test_a_hardened_quantile_run_clips_to_lattice_points():
    """The interval [a, b] a hardened QUANTILE run clips to lies on the selection lattice of its bounds."""
    from tsdp.mean.estimation import MeanSettings, estimate_groups

    rng = np.random.default_rng(2)
    counts = rng.integers(1, 6, 400)
    values = rng.uniform(10, 30, counts.sum())
    user_starts = np.concatenate(([0], np.cumsum(counts)))
    group_starts = np.array([0, 200, 400])
    estimates = estimate_groups(values, user_starts, group_starts, MeanSettings(epsilon=1.0, upper=65.0), rng)
    g = lq.selection_lattice(0.0, 65.0)
    for e in estimates:
        assert all((x / g).is_integer() and 0 <= x < 65 for x in e.interval)

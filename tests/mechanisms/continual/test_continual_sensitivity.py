"""s(C) by unit: brute force over all windows / sets and signs, jax-privacy's matrix_factorization,
and worst-case neighbours pushed through release_steps."""

import itertools

import jax
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.mechanisms.continual.conftest import setting
from tsdp.mechanisms.continual import new_carry, privacy_map, release_steps
from tsdp.mechanisms.continual import toeplitz as tz
from tsdp.mechanisms.continual.factorization import factorization
from tsdp.mechanisms.continual.sensitivity import dense_sensitivity, toeplitz_sensitivity

SMALL = [("independent", None), ("toeplitz", None), ("banded", 3), ("tree", None)]


def dense(strategy, T, band=None):
    fac = factorization(strategy, T, band)
    return fac.tree.matrix() if fac.tree is not None else tz.matrix(fac.column, T)


def brute_force(C, sets):
    """max over the given supports S and every sign vector on S of ||C d||, d in {-1, +1}^S."""
    best = 0.0
    for S in sets:
        for signs in itertools.product((-1.0, 1.0), repeat=len(S)):
            d = np.zeros(C.shape[1])
            d[list(S)] = signs
            best = max(best, float(np.linalg.norm(C @ d)))
    return best


def separated_sets(T, k, sep):
    return [S for size in range(1, k + 1) for S in itertools.combinations(range(T), size)
            if all(b - a >= sep for a, b in zip(S[:-1], S[1:]))]


@pytest.mark.parametrize("strategy, band", SMALL)
@pytest.mark.parametrize("T", [7, 10])
def test_event_and_w_event_equal_brute_force(strategy, band, T):
    C, fac = dense(strategy, T, band), factorization(strategy, T, band)
    assert fac.sensitivity("event", None, None, None) == pytest.approx(brute_force(C, [(j,) for j in range(T)]), rel=1e-12)
    for w in (2, 3, T):
        windows = [tuple(range(a, a + w)) for a in range(T - w + 1)]
        assert fac.sensitivity("w-event", w, None, None) == pytest.approx(brute_force(C, windows), rel=1e-12)


@pytest.mark.parametrize("strategy, band", [c for c in SMALL if c[0] != "tree"])
@pytest.mark.parametrize("k, sep", [(1, None), (2, None), (3, None), (3, 2), (2, 4), (4, 3)])
def test_toeplitz_user_level_is_exact(strategy, band, k, sep):
    T = 10
    fac = factorization(strategy, T, band)
    exact = brute_force(dense(strategy, T, band), separated_sets(T, k, sep or 1))
    assert fac.sensitivity("user", None, k, sep) == pytest.approx(exact, rel=1e-12)


@pytest.mark.parametrize("k, sep", [(1, None), (2, None), (3, None), (3, 2)])
def test_tree_user_level_is_an_upper_bound(k, sep):
    T = 10
    bound = factorization("tree", T).sensitivity("user", None, k, sep)
    exact = brute_force(dense("tree", T), separated_sets(T, k, sep or 1))
    assert exact <= bound * (1 + 1e-12)
    assert bound <= 1.25 * exact  # and not a loose one at these sizes


@pytest.mark.slow
def test_toeplitz_sensitivities_match_jax_privacy():
    from jax_privacy.matrix_factorization import toeplitz as jtz

    with jax.enable_x64(True):
        for T, band in ((365, None), (365, 16)):
            c = tz.strategy_column("banded" if band else "toeplitz", T, band)
            for k, sep in ((7, 1), (365, 1), (5, 7)):
                theirs = float(np.sqrt(jtz.minsep_sensitivity_squared(c, sep, k, T)))
                mine = toeplitz_sensitivity(c, T, "user", None, k, sep)
                assert mine == pytest.approx(theirs, rel=1e-6)


@pytest.mark.slow
def test_tree_user_bound_matches_jax_privacy_algorithm_4():
    from jax_privacy.matrix_factorization import sensitivity as jsens

    with jax.enable_x64(True):
        C = dense("tree", 64)
        for k in (2, 30):
            theirs = jsens.get_min_sep_sensitivity_upper_bound(C, 1, k)
            assert dense_sensitivity(C, "user", max_steps=k) == pytest.approx(theirs, rel=1e-6)


@pytest.mark.slow
def test_toeplitz_loss_matches_jax_privacy():
    from jax_privacy.matrix_factorization import toeplitz as jtz

    with jax.enable_x64(True):
        for strategy, band in (("toeplitz", None), ("banded", 8)):
            fac = factorization(strategy, 365, band)
            for output, a in (("cumulative", None), ("window:7", np.r_[np.ones(7), np.zeros(358)]),
                              ("daily", np.r_[1.0, np.zeros(364)])):
                theirs = np.asarray(jtz.per_query_error(strategy_coef=fac.column, n=365, workload_coef=a))
                assert np.allclose(fac.row_norms(output) ** 2, theirs, rtol=1e-6, atol=0)
            s = fac.sensitivity("event", None, None, None)
            assert s ** 2 * np.mean(fac.row_norms("cumulative") ** 2) == pytest.approx(
                float(jtz.loss(fac.column, 365)), rel=1e-6)


# ---- worst-case neighbours through the release ------------------------------------------------

def encoded_difference(s, x, x_prime):
    """y(D) - y(D') with the same secret (the noise cancels): C (x - x') after rounding."""
    secret = bytes(range(32))
    fac = factorization(s.strategy, s.horizon, s.band)
    ys = []
    for data in (x, x_prime):
        out, carry = release_steps(s, secret, new_carry(s), data, 0)
        ys.append(carry["nodes"] if fac.tree is not None else out["daily"] @ tz.matrix(fac.column, s.horizon).T)
    return ys[0] - ys[1]


@st.composite
def unit_change(draw, unit, T, S, K, w=None, k=None, sep=None):
    """A change d (S x T) one unit can make: values in [0, M = 1], on the unit's cells."""
    d = np.zeros((S, T))
    if unit == "event":
        d[draw(st.integers(0, S - 1)), draw(st.integers(0, T - 1))] = draw(st.floats(0, 1))
    elif unit == "w-event":
        a = draw(st.integers(0, T - w))
        for t in range(a, a + w):  # K series per step, chosen afresh at every step
            for series in draw(st.lists(st.integers(0, S - 1), min_size=0, max_size=K, unique=True)):
                d[series, t] = draw(st.floats(0, 1))
    else:
        for series in draw(st.lists(st.integers(0, S - 1), min_size=1, max_size=K, unique=True)):
            steps = draw(st.lists(st.integers(0, T - 1), min_size=1, max_size=k, unique=True))
            steps = sorted(steps)
            kept = [steps[0]]
            for t in steps[1:]:
                if t - kept[-1] >= (sep or 1):
                    kept.append(t)
            d[series, kept] = [draw(st.floats(0, 1)) for _ in kept]
    return d


UNITS = [("event", {}), ("w-event", {"w": 3}), ("user", {"max_steps": 3}),
         ("user", {"max_steps": 3, "min_separation": 2})]


@settings(max_examples=60, deadline=None)
@given(case=st.sampled_from(SMALL), unit=st.sampled_from(UNITS), sampler=st.sampled_from(["float", "hardened"]),
       data=st.data())
def test_a_unit_moves_the_encoded_stream_by_at_most_the_sensitivity(case, unit, sampler, data):
    strategy, band = case
    level, extra = unit
    T, S, K = 12, 3, 2 if level != "event" else 1
    s = setting(horizon=T, strategy=strategy, band=band, n_series=S, unit=level, series_per_user=K,
                outputs=("daily",), sampler=sampler, **extra)
    priv = privacy_map(s)
    x = np.asarray(data.draw(st.lists(st.integers(0, 9), min_size=S * T, max_size=S * T)), float).reshape(S, T)
    d = data.draw(unit_change(level, T, S, K, extra.get("w"), extra.get("max_steps"), extra.get("min_separation")))
    diff = encoded_difference(s, x + d, x)
    assert np.linalg.norm(diff) <= priv.covered_sensitivity * (1 + 1e-9)
    # the hardened sampler's rounding slack counts the noisy values a unit can change; the difference is
    # taken after the same noise went through C^-1 and back, so a value the unit does not change carries
    # round-off of the noise's size times 1e-16 (seen: 4.4e-16 in 3 places under banded:3, event level),
    # far below a change the slack must count (the hardened sampler moves a value by multiples of g)
    changed = np.abs(diff) > 1e-9
    assert np.count_nonzero(changed) <= priv.lattice_coords


@pytest.mark.parametrize("strategy, band", SMALL)
@pytest.mark.parametrize("level, extra", UNITS)
def test_the_worst_neighbour_attains_the_sensitivity(strategy, band, level, extra):
    """The all-M neighbour of the proof (w-event window at step 0, user steps sep apart from 0, K
    series) moves the encoded stream by s(C) exactly for the Toeplitz strategies."""
    T, S, K = 12, 3, 2 if level != "event" else 1
    s = setting(horizon=T, strategy=strategy, band=band, n_series=S, unit=level, series_per_user=K,
                outputs=("daily",), **extra)
    d = np.zeros((S, T))
    if level == "event":
        d[0, 0] = 1.0
    elif level == "w-event":
        d[:K, :extra["w"]] = 1.0
    else:
        d[:K, [i * extra.get("min_separation", 1) for i in range(extra["max_steps"])]] = 1.0
    moved = np.linalg.norm(encoded_difference(s, d, np.zeros((S, T))))
    priv = privacy_map(s)
    assert moved <= priv.l2_sensitivity * (1 + 1e-9)
    if strategy != "tree" or level != "user":
        assert moved == pytest.approx(priv.l2_sensitivity, rel=1e-9)


@pytest.mark.parametrize("strategy, band", SMALL)
def test_a_w_event_unit_spread_over_series_changes_at_most_the_counted_values(strategy, band):
    """K series per step, chosen afresh: the unit's cells may lie in min(S, K w) series, each reaching
    the rows of C below it; the rounding slack must count all of them (packing is the worst case for
    the L2 norm, spreading for the number of changed values)."""
    T, S, K, w = 12, 3, 2, 3
    s = setting(horizon=T, strategy=strategy, band=band, n_series=S, unit="w-event", w=w, series_per_user=K,
                outputs=("daily",))
    d = np.zeros((S, T))
    d[0, 0] = d[1, 0] = d[2, 1] = d[0, 2] = d[1, 2] = 1.0
    diff = encoded_difference(s, d, np.zeros((S, T)))
    assert np.count_nonzero(diff) <= privacy_map(s).lattice_coords
    assert np.linalg.norm(diff) <= privacy_map(s).l2_sensitivity * (1 + 1e-9)

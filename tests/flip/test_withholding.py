"""The withholding rule of ``tsdp flip`` (tsdp.flip.withholding, issue 33): every released date's same-date
LIP reaches the floor the claim states, checked against a dense reference independent of
tsdp.flip.datewise (tests/flip/lip_reference.py), across trend orders 0-3, both boundaries, the three
kinds of floor (the theorem's bound, the default cap at lip_delta 0, a --lip-floor below the bound) and
random seeds; the rule's parts (mask, runs, default floor, guarantee sentence) in closed form; and the
measurement behind the docstring: away from the ends, the shortfall comes from the released trend, not
from the taps' reach."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scipy.signal import lfilter

from tests.flip.lip_reference import ReleaseMap
from tsdp.errors import UsageError
from tsdp.flip import FlipSettings, claim_for, flip_series, withholding
from tsdp.flip import datewise, lip, mechanism

# a boundary tie: a date whose two independent LIP figures straddle the floor by rounding may go either way
TIE = 1e-8


def ar1(phi: float, T: int, seed: int) -> np.ndarray:
    return lfilter([1.0], [1.0, -phi], np.random.default_rng(seed).standard_normal(T + 300))[300:]


# ------------------------------------------------------------------------------------ the rule


def test_default_floor_is_the_bound_capped_at_099():
    assert withholding.default_floor(0.1) == 0.9 and withholding.default_floor(0.3) == 0.7
    assert withholding.default_floor(0.0) == 0.99 and withholding.default_floor(0.005) == 0.99
    assert FlipSettings(lip_delta=0.1).lip_floor == 0.9 and FlipSettings(lip_delta=0.1, floor=0.5).lip_floor == 0.5


def test_released_dates_and_runs():
    lip_t = np.array([0.2, 0.95, 0.95, 0.89, 0.9, 0.99, 0.5, 0.91])
    mask = withholding.released_dates(lip_t, 0.9, 0)
    np.testing.assert_array_equal(mask, [False, True, True, False, True, True, False, True])
    assert withholding.withheld_runs(mask) == [(0, 0), (3, 3), (6, 6)]
    ends = withholding.released_dates(lip_t, 0.9, 2)
    np.testing.assert_array_equal(ends, [False, False, True, False, True, True, False, False])
    assert withholding.withheld_runs(ends) == [(0, 1), (3, 3), (6, 7)]
    assert withholding.withheld_runs(np.ones(4, bool)) == [] and withholding.withheld_runs(np.zeros(3, bool)) == [(0, 2)]
    assert withholding.released_dates(lip_t, 0.0, 0).all()


def test_series_pattern_names_times():
    mask = np.array([False, True, True, False])
    entry = withholding.series_pattern("A", "v", ["q1", "q2", "q3", "q4"], mask)
    assert entry == {"entity": "A", "column": "v", "dates": 4, "released": 2, "withheld": [["q1", "q1"], ["q4", "q4"]]}


@pytest.mark.parametrize("floor, delta, given, says", [
    (0.9, 0.1, False, "the floor is the ideal filter's bound"),
    (0.99, 0.0, False, "the default floor is at most 0.99"),
    (0.7, 0.1, True, "BELOW the ideal filter's bound: --lip-floor released dates"),
    (0.95, 0.1, True, "above the ideal filter's bound"),
])
def test_guarantee_states_the_floor_and_how_it_relates_to_the_theorem(floor, delta, given, says):
    text = withholding.guarantee(floor, delta, given)
    assert f"at least lip_floor = {floor:g};" in text and f"1 - lip_budget_delta = {1 - delta:g}" in text
    assert says in text and "same date" in text and "ESTIMATED" in text


@pytest.mark.parametrize("floor", [-0.1, 1.5, math.nan])
def test_floor_outside_unit_interval_is_refused(floor):
    with pytest.raises(UsageError, match="--lip-floor"):
        FlipSettings(floor=floor)


def test_claim_states_the_floor_and_public_parameters_hold_it():
    claim = claim_for(FlipSettings(lip_delta=0.2, floor=0.6), None)
    assert claim.parameters["lip_floor"] == 0.6
    assert claim.parameters["guarantee"] == withholding.guarantee(0.6, 0.2, True)


# --------------------------------------------------------------------- released dates vs the floor


def released_and_reference(x, z, settings_, seed):
    """(result, LIP_t of every date from the dense reference)."""
    with pytest.MonkeyPatch.context() as mp:
        spy = ReleaseMap(mp)
        res = flip_series(x, z, settings_, np.random.default_rng(seed))
    return res, spy.lip_by_date(x.size, settings_.trend_order, settings_.boundary)


def assert_the_rule_holds(res, reference, settings_):
    d = res.diagnostics
    floor = settings_.lip_floor
    shown = ~np.isnan(res.released)
    assert d["lip_floor"] == floor
    # every released date reaches the floor the claim states
    assert np.all(reference[shown] >= floor - TIE), (reference[shown].min(), floor)
    # and every date that reaches it is released, unless --withhold-ends takes it
    ends = np.zeros(shown.size, bool)
    ends[settings_.withhold:shown.size - settings_.withhold] = True
    clear = np.abs(reference - floor) > TIE
    np.testing.assert_array_equal(shown[clear], (ends & (reference >= floor))[clear])
    assert d["released_dates"] == int(shown.sum()) and d["withheld_dates"] == int((~shown).sum())
    if shown.any():
        assert d["lip_applied"] >= floor and abs(d["lip_applied"] - reference[shown].min()) < TIE
    else:
        assert d["lip_applied"] is None


@pytest.mark.parametrize("trend_order", [0, 1, 2, 3])
@pytest.mark.parametrize("boundary", ["extend", "circular"])
def test_every_released_date_reaches_the_floor(trend_order, boundary):
    """A persistent AR(1) with a cubic trend, lip_delta 0.1: dates fall below 0.9 at every trend order
    (near the ends, and inside for the higher orders); none of them is released."""
    T = 120
    t = np.linspace(0.0, 1.0, T)
    x = 3.0 * ar1(0.95, T, seed=trend_order) + 5.0 + 4.0 * t - 3.0 * t ** 3
    settings_ = FlipSettings(lip_delta=0.1, trend_order=trend_order, boundary=boundary, M=20)
    res, reference = released_and_reference(x, None, settings_, seed=11)
    assert_the_rule_holds(res, reference, settings_)
    # (the rule had something to withhold, and something to release)
    assert (reference < 0.9).any() and np.isnan(res.released).any() and not np.isnan(res.released).all()


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(trend_order=st.integers(0, 3), boundary=st.sampled_from(["extend", "circular"]),
       phi=st.floats(-0.5, 0.95), delta=st.sampled_from([0.0, 0.1, 0.3]),
       floor=st.sampled_from([None, 0.5, 0.95]), withhold=st.sampled_from([0, 3]),
       aux=st.booleans(), seed=st.integers(0, 2 ** 16))
def test_the_rule_holds_for_random_series(trend_order, boundary, phi, delta, floor, withhold, aux, seed):
    T = 64
    x = ar1(phi, T, seed) + 0.5 * np.linspace(-1, 1, T) ** 2
    z = 0.6 * x + ar1(0.3, T, seed + 1) if aux else None
    settings_ = FlipSettings(lip_delta=delta, trend_order=trend_order, boundary=boundary, M=12, floor=floor,
                             withhold=withhold, grid=1024)
    res, reference = released_and_reference(x, z, settings_, seed)
    assert_the_rule_holds(res, reference, settings_)


def test_withheld_dates_are_the_same_release_otherwise():
    """Withholding is post-processing: the dates released are those of the release of every date."""
    x = ar1(0.8, 150, seed=3) + 10
    whole = flip_series(x, None, FlipSettings(lip_delta=0.1, floor=0.0), np.random.default_rng(4))
    part = flip_series(x, None, FlipSettings(lip_delta=0.1, floor=0.999), np.random.default_rng(4))
    shown = ~np.isnan(part.released)
    assert 0 < shown.sum() < x.size and not np.isnan(whole.released).any()
    np.testing.assert_array_equal(part.released[shown], whole.released[shown])


# ------------------------------------------------------------------- why dates fall below (docstring)


def test_away_from_the_ends_the_shortfall_is_the_released_trend():
    """At dates whose taps cover observed dates only (M <= t < T - M) the release map is the stationary
    FIR: without the trend term LIP_t equals Def. 4 of the taps (no effect of the taps reaching 2M into
    the backcasts), while conditioning on the released trend of order 3 takes a persistent series far
    below it. The trend share of Var(X_t | Z) explains the shortfall."""
    T, M = 160, 30
    x = ar1(0.95, T, seed=5) + np.linspace(0, 4, T) ** 2
    seen = {}

    def spy(apply, gamma, basis, **kw):
        seen.update(gamma=gamma, basis=basis, **kw)
        return lip_by_date(apply, gamma, basis, **kw)

    lip_by_date = datewise.lip_by_date
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(mechanism.datewise, "lip_by_date", spy)
        res = flip_series(x, None, FlipSettings(lip_delta=0.1, trend_order=3, M=M, floor=0.0),
                          np.random.default_rng(2))
    gamma_T = datewise.lags(seen["gamma"], T)
    cov, var = datewise._extend_diagonals(seen["gamma_x"], gamma_T, seen["taps"], M)
    untrended = 1.0 - cov ** 2 / (var * gamma_T[0])
    stationary = lip.taps_lip(seen["taps"], seen["gamma"])
    np.testing.assert_allclose(untrended[M:T - M], stationary, atol=1e-9)
    with pytest.MonkeyPatch.context() as mp:
        spy_map = ReleaseMap(mp)
        flip_series(x, None, FlipSettings(lip_delta=0.1, trend_order=3, M=M, floor=0.0), np.random.default_rng(2))
    conditioned = spy_map.lip_by_date(T, 3, "extend")
    assert stationary > 0.99 and conditioned[M:T - M].min() < stationary - 0.05
    assert res.diagnostics["below_floor_inside"] == 0  # (floor 0: nothing below it)

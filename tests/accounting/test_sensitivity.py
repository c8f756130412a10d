"""Sensitivity from the privacy unit, and that enforced event caps really bound it."""

import math

import numpy as np
import polars as pl
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from tsdp.accounting.sensitivity import ContributionBounds
from tsdp.errors import UsageError
from tsdp.engine.events import EventCaps, aggregate_events


@pytest.mark.parametrize(
    "bounds,n_series,n_steps,l1,l2",
    [
        (ContributionBounds("event", 1), 20, 2000, 1, 1),
        (ContributionBounds("event", 3, series_per_unit=5), 20, 2000, 3, 3),  # an event is one cell
        (ContributionBounds("user", 2, max_steps=9), 1, 100, 18, 6),  # M*I, M*sqrt(I)
        (ContributionBounds("user", 1, max_steps=180), 1, 1800, 180, math.sqrt(180)),
        (ContributionBounds("user", 1, max_steps=10), 20, 2000, 200, math.sqrt(200)),  # all series
        (ContributionBounds("user", 1, max_steps=10, series_per_unit=1), 20, 2000, 10, math.sqrt(10)),
        (ContributionBounds("user", 1, max_steps=500), 1, 100, 100, 10),  # I capped by T
        (ContributionBounds("w-event", 2, w=4), 3, 100, 24, 2 * math.sqrt(12)),
        (ContributionBounds("user", 1, max_steps=4, neighbouring="substitute"), 1, 100, 8, math.sqrt(8)),
        (ContributionBounds("event", 1, neighbouring="substitute"), 5, 10, 2, math.sqrt(2)),
    ],
)
def test_l1_l2(bounds, n_series, n_steps, l1, l2):
    assert bounds.l1(n_series, n_steps) == pytest.approx(l1)
    assert bounds.l2(n_series, n_steps) == pytest.approx(l2)


@pytest.mark.parametrize("kwargs", [
    dict(level="user", max_per_step=1), dict(level="user", max_per_step=1, max_steps=0),
    dict(level="w-event", max_per_step=1), dict(level="bogus", max_per_step=1),
    dict(level="event", max_per_step=0), dict(level="event", max_per_step=math.inf),
    dict(level="event", max_per_step=1, neighbouring="swap"),
    dict(level="user", max_per_step=1, max_steps=2, series_per_unit=0),
])
def test_invalid_bounds_are_usage_errors(kwargs):
    with pytest.raises(UsageError):
        ContributionBounds(**kwargs)


def test_unit_describes_relation_and_column():
    unit = ContributionBounds("user", 1, max_steps=3).privacy_unit(4, "user_id", True)
    assert "user_id" in unit.neighbouring and unit.neighbouring.startswith("add or remove")
    assert unit.series_per_unit == 4 and unit.enforced


# Few users, steps and series, so that a user's events collide in buckets and series often.
events_strategy = st.lists(
    st.tuples(st.integers(0, 2), st.integers(0, 5), st.integers(0, 2), st.floats(0, 10)),
    min_size=1, max_size=60,
)
HEAVY_USER = [(0, t, s, 9.0) for t in range(6) for s in range(3) for _ in range(3)] + [(1, 2, 1, 4.0)]


def _aggregate(rows, caps, with_values):
    df = pl.DataFrame(
        {"user": [f"u{u}" for u, *_ in rows], "t": [t * 60 for _, t, _, _ in rows],
         "s": [f"s{s}" for *_, s, _ in rows], "v": [v for *_, v in rows]},
        schema={"user": pl.String, "t": pl.Int64, "s": pl.String, "v": pl.Float64},
    )
    agg = aggregate_events(df, "user", "t", "60", "0", "720", caps, "s", ["s0", "s1", "s2"],
                           "v" if with_values else None)
    return agg.table.values_matrix()


@settings(max_examples=150, deadline=None)
@given(rows=events_strategy, m=st.integers(1, 3), i=st.integers(1, 4), k=st.integers(1, 3),
       with_values=st.booleans(), victim=st.integers(0, 2))
@example(rows=HEAVY_USER, m=1, i=1, k=1, with_values=False, victim=0)
@example(rows=HEAVY_USER, m=2, i=3, k=2, with_values=True, victim=0)
def test_enforced_caps_bound_the_change_from_removing_a_user(rows, m, i, k, with_values, victim):
    """Removing any user changes the aggregated panel by at most the declared L1/L2 sensitivity."""
    caps = EventCaps(max_per_step=m, max_steps=i, series_per_unit=k, value_bound=2.5 if with_values else None)
    full = _aggregate(rows, caps, with_values)
    rest = [r for r in rows if r[0] != victim]
    reduced = _aggregate(rest, caps, with_values) if rest else np.zeros_like(full)
    per_event = 2.5 if with_values else 1.0
    bounds = ContributionBounds("user", m * per_event, max_steps=i, series_per_unit=k)
    diff = full - reduced
    assert np.abs(diff).sum() <= bounds.l1(3, 12) + 1e-9
    assert np.sqrt((diff ** 2).sum()) <= bounds.l2(3, 12) + 1e-9
    assert np.abs(diff).max() <= m * per_event + 1e-9


# ---------------------------------------------------------------------------------------------
# how one unit's cells spread over the series (ContributionBounds.series_spread and friends)
# ---------------------------------------------------------------------------------------------


def _unit_patterns(bounds, S, T):
    """Every per-series cell count one unit (add/remove) can produce, by brute force: a user picks
    K series and I steps in each; a w-event unit picks up to K series at each of w steps; an event
    is one cell."""
    import itertools

    K = bounds.series_touched(S)
    if bounds.level == "event":
        return [tuple(1 if s == j else 0 for s in range(S)) for j in range(S)]
    if bounds.level == "user":
        steps = bounds.steps_per_series(T)
        return [tuple(steps if s in chosen else 0 for s in range(S)) for chosen in itertools.combinations(range(S), K)]
    per_step = [c for k in range(K + 1) for c in itertools.combinations(range(S), k)]
    out = set()
    for choice in itertools.product(per_step, repeat=bounds.steps_per_series(T)):
        out.add(tuple(sum(s in step for step in choice) for s in range(S)))
    return sorted(out)


LEVELS_SMALL = st.sampled_from(["event", "w-event", "user"])


@settings(max_examples=150, deadline=None, derandomize=True)
@given(level=LEVELS_SMALL, S=st.integers(1, 4), T=st.integers(1, 4), k=st.integers(1, 4), w=st.integers(1, 3),
       substitute=st.booleans(), m=st.integers(1, 4))
def test_the_spread_is_the_worst_case_of_every_concave_per_series_sum(level, S, T, k, w, substitute, m):
    """For sqrt (DFT Laplace's per-series L1) and min(m, c) (FAST's samples on changed cells), the
    largest sum over series that any unit pattern reaches, by brute force, equals spread_sum's
    add/remove figure; under substitution twice it is reached when the old and the new unit's
    series differ (S large enough), and never exceeded: the difference is the old minus the new."""
    kw = {"max_steps": min(k, T) if level == "user" else None, "w": w if level == "w-event" else None,
          "series_per_unit": None if level == "event" else k}
    relation = "substitute" if substitute else "add-remove"
    bounds = ContributionBounds(level, 1.0, neighbouring=relation, **kw)
    add = ContributionBounds(level, 1.0, **kw)
    patterns = _unit_patterns(add, S, T)
    for g in (math.sqrt, lambda c: min(m, c)):
        worst = max(sum(g(c) for c in p) for p in patterns)
        assert add.spread_sum(S, T, g) == pytest.approx(worst, rel=1e-12)
        # substitution: old pattern a, new pattern b, every cell's change bounded by the sum of both
        worst_sub = max(sum(g(x) for x in a) + sum(g(y) for y in b) for a in patterns for b in patterns)
        assert bounds.spread_sum(S, T, g) == pytest.approx(worst_sub if substitute else worst, rel=1e-12)
    reach = max(sum(c > 0 for c in p) for p in patterns)
    assert add.series_reach(S, T) == reach
    changed = max(sum((x + y) > 0 for x, y in zip(a, b)) for a in patterns for b in patterns) if substitute else reach
    assert bounds.series_changed(S, T) == changed
    assert sum(n * c for n, c in add.series_spread(S, T)) == add.cells(S, T)


@settings(max_examples=150, deadline=None, derandomize=True)
@given(level=LEVELS_SMALL, S=st.integers(1, 4), T=st.integers(1, 4), k=st.integers(1, 4), w=st.integers(1, 3),
       substitute=st.booleans())
def test_changed_cells_covers_every_pattern_by_brute_force(level, S, T, k, w, substitute):
    """Every pattern a unit can realise (two, the old and the new, under substitution) changes at most
    ``changed_cells`` cells in at most its series, and some pattern reaches both figures."""
    kw = {"max_steps": min(k, T) if level == "user" else None, "w": w if level == "w-event" else None,
          "series_per_unit": None if level == "event" else k}
    bounds = ContributionBounds(level, 1.0, neighbouring="substitute" if substitute else "add-remove", **kw)
    patterns = _unit_patterns(ContributionBounds(level, 1.0, **kw), S, T)
    pairs = [(a, b) for a in patterns for b in patterns] if substitute else [(a, (0,) * S) for a in patterns]
    # the old and the new unit's cells of one series can be disjoint, at most T together
    changed = [[min(T, x + y) for x, y in zip(a, b)] for a, b in pairs]
    series, cells = bounds.changed_cells(S, T)
    assert max(sum(c > 0 for c in p) for p in changed) == series
    assert max(sum(p) for p in changed) == cells


def test_wevent_unit_moving_between_series():
    """K = 1 series per step, w = 4, S = 10: a unit that moves every step changes 4 series."""
    bounds = ContributionBounds("w-event", 1.0, w=4, series_per_unit=1)
    assert bounds.series_touched(10) == 1 and bounds.series_reach(10, 100) == 4
    assert bounds.series_spread(10, 100) == ((4, 1),) and bounds.series_spread(3, 100) == ((1, 2), (2, 1))
    assert bounds.spread_sum(10, 100, math.sqrt) == 4
    sub = ContributionBounds("w-event", 1.0, w=4, series_per_unit=1, neighbouring="substitute")
    assert sub.series_changed(10, 100) == 8 and sub.series_changed(5, 100) == 5

"""The per-level rules of a privacy unit (:class:`tsdp.accounting.sensitivity.UnitLevel`) against the
closed forms of the module docstring (Koga et al. 2022, Section 3.1), and the engine's caps asking the
same objects which options a level takes."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tsdp.accounting.sensitivity import LEVELS, UNIT_LEVELS, ContributionBounds, unit_level
from tsdp.engine.events import EventCaps
from tsdp.errors import UsageError


def closed_form(level: str, S: int, T: int, k: int | None, w: int | None, i: int | None) -> tuple[int, int, int]:
    """(steps per series, series touched, series reach) of one unit, written out per level."""
    if level == "event":
        return 1, 1, 1
    touched = S if k is None else min(k, S)
    if level == "w-event":
        steps = min(w, T)
        return steps, touched, min(S, touched * steps)
    return min(i, T), touched, touched


@given(level=st.sampled_from(LEVELS), S=st.integers(1, 40), T=st.integers(1, 40),
       k=st.none() | st.integers(1, 50), w=st.integers(1, 50), i=st.integers(1, 50),
       substitute=st.booleans())
def test_levels_give_the_closed_forms(level, S, T, k, w, i, substitute):
    bounds = ContributionBounds(level, 1.5, max_steps=i if level == "user" else None,
                                w=w if level == "w-event" else None, series_per_unit=k,
                                neighbouring="substitute" if substitute else "add-remove")
    steps, touched, reach = closed_form(level, S, T, k, w, i)
    assert bounds.unit is UNIT_LEVELS[level]
    assert (bounds.steps_per_series(T), bounds.series_touched(S), bounds.series_reach(S, T)) == (steps, touched, reach)
    assert bounds.cells(S, T) == (2 if substitute else 1) * touched * steps
    assert bounds.l1(S, T) == bounds.cells(S, T) * 1.5


@pytest.mark.parametrize("level", LEVELS)
def test_caps_take_the_options_their_level_takes(level):
    unit = unit_level(level)
    if unit.uses_max_steps:
        assert EventCaps(level=level, max_steps=3).max_steps == 3
    else:
        with pytest.raises(UsageError, match="--max-steps applies to --unit user only"):
            EventCaps(level=level, max_steps=3)
    if unit.per_user_caps:
        caps = EventCaps(level=level, max_per_step=2, series_per_unit=1)
        where = "in each time bucket" if unit.series_cap_per_step else "in total"
        assert f"at most 1 series per user {where}" in caps.describe()
    else:
        with pytest.raises(UsageError, match="enforces no per-user caps"):
            EventCaps(level=level, series_per_unit=1)
    assert caps_scope(level) in EventCaps(level=level).describe()


def caps_scope(level: str) -> str:
    return {"event": "the event itself", "w-event": "the user's events in the same time bucket",
            "user": "all of a user's events"}[level]


def test_unknown_level_names_the_option():
    with pytest.raises(UsageError, match=r"--unit must be one of event, w-event, user, got 'row'"):
        unit_level("row")
    with pytest.raises(UsageError, match=r"--unit must be one of"):
        EventCaps(level="row")

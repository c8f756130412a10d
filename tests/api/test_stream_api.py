"""``tsdp.stream`` (issue 32): appending one step at a time equals one big append bit for bit, and raw
events are bounded as release bounds them, with the participation of a user counted over the horizon."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

import tsdp
from tsdp.errors import DataError

KEYS = [f"s{i}" for i in range(4)]
T = 365


def _panel(path, first: int, days: int, values: np.ndarray) -> str:
    dates = pl.date_range(pl.date(2025, 1, 1), pl.date(2025, 12, 31), "1d", eager=True)[first:first + days]
    pl.DataFrame({"time": np.repeat(dates.to_numpy(), len(KEYS)), "series": np.tile(KEYS, days),
                  "value": values[:, first:first + days].T.ravel()}).write_csv(path)
    return str(path)


def _init(state, **extra):
    options = dict(start="2025-01-01", freq="1d", horizon=T, epsilon=1.0, delta=1e-6, unit="event",
                   series_keys=KEYS, outputs="daily,cumulative,window:7", seed=11,
                   layout={"series_col": "series", "value_col": "value", "time_col": "time"})
    options.update(extra)
    return tsdp.stream.init(str(state), **options)


def test_365_daily_appends_equal_one_append_bit_for_bit(tmp_path):
    values = np.random.default_rng(0).integers(0, 20, (len(KEYS), T))
    daily, whole = tmp_path / "daily", tmp_path / "whole"
    daily.mkdir(), whole.mkdir()
    _init(daily / "s.state")
    _init(whole / "s.state")
    parts = []
    for t in range(T):
        out = daily / f"o{t}.csv"
        tsdp.stream.append(str(daily / "s.state"), _panel(daily / "in.csv", t, 1, values), str(out), force=True)
        parts.append(pl.read_csv(out))
        out.unlink()
    tsdp.stream.append(str(whole / "s.state"), _panel(whole / "in.csv", 0, T, values), str(whole / "o.csv"))
    one = pl.read_csv(whole / "o.csv")
    assert pl.concat(parts).equals(one)
    for name in ("daily", "cumulative", "window:7"):  # the exact float64 values, not only their CSV text
        assert np.array_equal(pl.concat(parts)[name].to_numpy(), one[name].to_numpy())
    assert tsdp.stream.status(str(daily / "s.state"))["position"] == T
    a, b = tsdp.stream.State.read(daily / "s.state"), tsdp.stream.State.read(whole / "s.state")
    assert a.position == b.position == T and a.secret == b.secret
    assert sorted(a.carry) == sorted(b.carry)
    for key in a.carry:
        assert np.array_equal(np.asarray(a.carry[key]), np.asarray(b.carry[key]))


def _events(path, rows) -> str:
    pl.DataFrame(rows, schema=["user", "time", "series"], orient="row").write_csv(path)
    return str(path)


def _event_stream(tmp_path, unit="user", **extra):
    options = dict(start="2025-01-01", freq="1d", horizon=10, epsilon=1.0, delta=1e-6, unit=unit, series_keys=KEYS,
                   outputs="daily", seed=3, max_per_step=1,
                   layout={"series_col": "series", "user_col": "user", "time_col": "time", "layout": "events"})
    options.update(extra)
    tsdp.stream.init(str(tmp_path / "s.state"), **options)
    return str(tmp_path / "s.state")


def test_events_are_capped_per_step_as_release_caps_them(tmp_path):
    state = _event_stream(tmp_path, unit="w-event", w=2)
    rows = [("u1", "2025-01-01 08:00:00", "s0")] * 5 + [("u2", "2025-01-01 09:00:00", "s1")]
    tsdp.stream.append(state, _events(tmp_path / "e1.csv", rows), str(tmp_path / "o1.csv"))
    assert tsdp.stream.State.read(state).position == 1
    # the same stream (same seed) given the events the caps keep: u1's five events count once (M = 1)
    again = tmp_path / "again"
    again.mkdir()
    capped = _event_stream(again, unit="w-event", w=2)
    rows_capped = [("u1", "2025-01-01 08:00:00", "s0"), ("u2", "2025-01-01 09:00:00", "s1")]
    tsdp.stream.append(capped, _events(again / "e1.csv", rows_capped), str(again / "o1.csv"))
    assert pl.read_csv(tmp_path / "o1.csv").equals(pl.read_csv(again / "o1.csv"))


def test_user_over_the_participation_cap_is_refused(tmp_path):
    state = _event_stream(tmp_path, max_steps=2)
    for day in (1, 2):
        rows = [("u1", f"2025-01-0{day} 08:00:00", "s0"), ("u2", f"2025-01-0{day} 08:00:00", "s1")]
        tsdp.stream.append(state, _events(tmp_path / f"e{day}.csv", rows), str(tmp_path / f"o{day}.csv"))
    before = (tmp_path / "s.state").read_bytes()
    rows = [("u1", "2025-01-03 08:00:00", "s0"), ("u3", "2025-01-03 08:00:00", "s1")]
    with pytest.raises(DataError, match="more than --max-steps 2"):
        tsdp.stream.append(state, _events(tmp_path / "e3.csv", rows), str(tmp_path / "o3.csv"))
    assert (tmp_path / "s.state").read_bytes() == before and not (tmp_path / "o3.csv").exists()
    rows = [("u1", "2025-01-03 08:00:00", "s1"), ("u3", "2025-01-03 08:00:00", "s1")]  # another series: allowed
    tsdp.stream.append(state, _events(tmp_path / "e3.csv", rows), str(tmp_path / "o3.csv"))


@pytest.mark.parametrize("when,steps,match", [("2025-01-02 00:00:00", 1, "outside the steps 1..1"),
                                              ("2024-12-31 23:00:00", 1, "before the stream's first step"),
                                              ("2025-01-01 10:00:00", 11, "past the stream's horizon")])
def test_events_outside_the_appended_steps_are_refused(tmp_path, when, steps, match):
    state = _event_stream(tmp_path, unit="event")
    before = (tmp_path / "s.state").read_bytes()
    rows = [("u1", "2025-01-01 08:00:00", "s0"), ("u2", when, "s1")]
    with pytest.raises(DataError, match=match):
        tsdp.stream.append(state, _events(tmp_path / "e.csv", rows), str(tmp_path / "o.csv"), steps=steps)
    assert (tmp_path / "s.state").read_bytes() == before and not (tmp_path / "o.csv").exists()


def test_user_over_the_series_cap_is_refused(tmp_path):
    state = _event_stream(tmp_path, max_steps=5, series_per_user=1)
    rows = [("u1", "2025-01-01 08:00:00", "s0")]
    tsdp.stream.append(state, _events(tmp_path / "e1.csv", rows), str(tmp_path / "o1.csv"))
    rows = [("u1", "2025-01-02 08:00:00", "s2")]  # a second series over the horizon: K = 1 is exceeded
    with pytest.raises(DataError, match="more than --series-per-user 1"):
        tsdp.stream.append(state, _events(tmp_path / "e2.csv", rows), str(tmp_path / "o2.csv"))

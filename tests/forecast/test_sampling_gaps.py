"""Series with gaps in the window sampler (forecast-train --fill-missing null, issue 29).

A window that touches a missing step is never sampled, and the accountant is given T = the fewest
admissible windows of a series. The structured-subsampling bounds (Schuchardt et al. 2025; spec
/work/shared/specs/schuchardt.md sections 1.2, 2.3, 2.7) then hold if, for every series and every
protected unit, the share of the series' admissible windows that contain the unit is at most the
accountant's r = k / T (WR bottom level), and a unit lies in at most k admissible windows (Poisson
bottom level). Both are checked here exhaustively on random gap patterns, against a brute-force
window enumeration; the sampler's draws are checked to be admissible and uniform over the
admissible starts (Z = 5 binomial standard errors, fixed seeds).
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tsdp.accounting.structured import DpSgdSetting
from tsdp.errors import DataError
from tsdp.forecast.sampling import WindowSampler, accounted_length, admissible_starts

Z = 5.0


def brute_admissible(missing: np.ndarray, context: int, horizon: int) -> np.ndarray:
    n, length = missing.shape
    out = np.zeros((n, length - horizon + 1), dtype=bool)
    for i in range(n):
        for s in range(length - horizon + 1):
            out[i, s] = not missing[i, max(0, s - context):s + horizon].any()
    return out


def units(length: int, unit: str, w: int):
    """Every protected unit of one series: w contiguous steps (w-event) or, for w-user, the w steps
    spread to lie in as many windows as possible (every (L_C + L_F)-th step), as index sets."""
    if unit == "event":
        return [range(e, min(length, e + w)) for e in range(length)]
    return [range(e, length, max(1, length // w))[:w] for e in range(length)]


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), length=st.integers(12, 40), context=st.integers(0, 4),
       horizon=st.integers(1, 3), holes=st.integers(0, 5))
def test_admissible_starts_match_a_brute_force_enumeration(seed, length, context, horizon, holes):
    rng = np.random.default_rng(seed)
    missing = np.zeros((3, length), dtype=bool)
    for _ in range(holes):
        missing[rng.integers(0, 3), rng.integers(0, length)] = True
    np.testing.assert_array_equal(admissible_starts(missing, context, horizon),
                                  brute_admissible(missing, context, horizon))


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), holes=st.integers(1, 6), unit=st.sampled_from(["event", "user"]),
       w=st.integers(1, 3))
def test_no_unit_lies_in_more_admissible_windows_than_the_accountant_assumes(seed, holes, unit, w):
    """For every series n and unit u: |windows containing u among n's admissible ones| / C_n <= r and
    that count <= k, with the accountant's T = min C_n (L = T + L_F - 1)."""
    rng = np.random.default_rng(seed)
    n, length, context, horizon = 4, 40, 3, 2
    missing = np.zeros((n, length), dtype=bool)
    for _ in range(holes):
        missing[rng.integers(0, n), rng.integers(0, length - 8)] = True
    admissible = admissible_starts(missing, context, horizon)
    setting = DpSgdSetting(n_series=n, length=accounted_length(admissible, horizon), context=context, horizon=horizon,
                           batch_size=2, noise_multiplier=1.0, unit=unit, w=w)
    k, T = setting.affected_windows, setting.windows
    assert T == int(admissible.sum(axis=1).min())
    for i in range(n):
        count = int(admissible[i].sum())
        starts = np.flatnonzero(admissible[i])
        for steps in units(length, unit, w):
            inside = sum(any(s - context <= e <= s + horizon - 1 for e in steps) for s in starts)
            assert inside <= k
            assert inside / count <= k / T + 1e-12


def test_sampled_windows_never_touch_a_missing_step_and_are_uniform():
    rng = np.random.default_rng(7)
    n, length, context, horizon = 5, 30, 3, 2
    missing = np.zeros((n, length), dtype=bool)
    missing[1, [4, 5, 17]] = True
    missing[3, 20] = True
    admissible = admissible_starts(missing, context, horizon)
    setting = DpSgdSetting(n_series=n, length=accounted_length(admissible, horizon), context=context, horizon=horizon,
                           batch_size=5, noise_multiplier=1.0)
    sampler = WindowSampler(setting, admissible=admissible)
    draws = [sampler.next_batch(rng) for _ in range(20_000)]
    series = np.concatenate([d[0] for d in draws])
    starts = np.concatenate([d[1] for d in draws])
    assert admissible[series, starts].all()
    for i in range(n):
        mine = starts[series == i]
        counts = np.bincount(mine, minlength=admissible.shape[1])[admissible[i]]
        p = 1.0 / admissible[i].sum()
        se = np.sqrt(mine.size * p * (1 - p))
        assert np.all(np.abs(counts - mine.size * p) <= Z * se), (i, counts)


def test_poisson_bottom_level_keeps_only_admissible_starts_at_the_accountants_rate():
    rng = np.random.default_rng(11)
    n, length, context, horizon = 4, 30, 2, 2
    missing = np.zeros((n, length), dtype=bool)
    missing[2, [10, 11]] = True
    admissible = admissible_starts(missing, context, horizon)
    setting = DpSgdSetting(n_series=n, length=accounted_length(admissible, horizon), context=context, horizon=horizon,
                           batch_size=4, noise_multiplier=1.0, top="deterministic", bottom="poisson", instances=2)
    sampler = WindowSampler(setting, admissible=admissible)
    steps = 20_000
    hits = np.zeros(admissible.shape, dtype=np.int64)
    for _ in range(steps):
        s, t = sampler.next_batch(rng)
        assert admissible[s, t].all()
        np.add.at(hits, (s, t), 1)
    chosen = steps * setting.selected // n  # the deterministic top level takes each series every n / N' steps
    rate = sampler.rate
    se = np.sqrt(chosen * rate * (1 - rate))
    assert np.all(np.abs(hits[admissible] - chosen * rate) <= Z * se)
    assert hits[~admissible].sum() == 0


def test_a_sampler_must_be_accounted_with_the_fewest_admissible_windows():
    missing = np.zeros((2, 30), dtype=bool)
    missing[0, 10] = True
    admissible = admissible_starts(missing, 3, 2)
    wrong = DpSgdSetting(n_series=2, length=30, context=3, horizon=2, batch_size=1, noise_multiplier=1.0)
    with pytest.raises(DataError, match="smallest number"):
        WindowSampler(wrong, admissible=admissible)


def test_a_series_without_any_admissible_window_is_refused():
    missing = np.zeros((2, 10), dtype=bool)
    missing[1, ::3] = True
    with pytest.raises(DataError, match="series 'b' has no window"):
        accounted_length(admissible_starts(missing, 3, 2), 2, ["a", "b"])


def test_complete_series_draw_exactly_as_before():
    """An all-admissible mask changes nothing: the same draws as a sampler without one."""
    setting = DpSgdSetting(n_series=6, length=25, context=3, horizon=2, batch_size=3, noise_multiplier=1.0)
    plain, masked = WindowSampler(setting), WindowSampler(setting, admissible=np.ones((6, 24), dtype=bool))
    a, b = np.random.default_rng(3), np.random.default_rng(3)
    for _ in range(50):
        for x, y in zip(plain.next_batch(a), masked.next_batch(b)):
            np.testing.assert_array_equal(x, y)

"""``--evaluate``'s split of the error against the raw input (tsdp.accuracy.evaluation, tsdp.api.evaluation.run_split).

The split rests on two facts tested here for every mechanism: a linear mechanism's randomness (sampled
steps, noise) is drawn without looking at the values, so its noise part is the same for any data
under one seed and its noiseless part is linear in the data; and FAST, given its released sampling
pattern, is the Kalman filter of :func:`filter_given_pattern` applied to values plus noise. The
noiseless parts are checked against independent closed forms (the rfft truncation, the linear
interpolation through the sampled steps).
"""

from __future__ import annotations

import copy

import numpy as np
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from tsdp.accuracy.evaluation import Evaluation, signal_figures, split_error
from tsdp.api.evaluation import run_split
from tsdp.api.series import ReleaseOptions, load_frame
from tsdp.mechanisms.registry import LINEAR
from tsdp.mechanisms.kalman import filter_given_pattern

S, T = 3, 120


def frame(values: np.ndarray) -> pl.DataFrame:
    times = pl.datetime_range(pl.datetime(2024, 1, 1), pl.datetime(2024, 1, 1) + pl.duration(hours=T - 1),
                              "1h", eager=True)
    return pl.DataFrame({"sensor": np.repeat([f"s{i}" for i in range(S)], T),
                         "time": pl.concat([times] * S), "count": values.ravel()})


OPTIONS = {
    "gaussian": {"delta": 1e-6},
    "laplace": {},
    "dft": {"delta": 1e-6, "dft_k": 9},
    "subsample": {"delta": 1e-4, "sampling_rate": 0.2},
    "filter-subsample": {"delta": 1e-4, "sampling_rate": 0.2, "filter_sigma": 3.0},
    "fast": {"fast_max_samples": 12},
}


def plan_of(mechanism: str, sampler: str = "float", **extra):
    return ReleaseOptions(epsilon=1.0, unit="user", mechanism=mechanism, max_steps=T, value_col="count",
                          series_col="sensor", sampler=sampler, allow_negative=True, max_per_step=1.0,
                          **{**OPTIONS[mechanism], **extra}).plan()


def split(plan, values: np.ndarray, seed: int):
    loaded = load_frame(frame(values), plan)
    return run_split(plan, loaded.loaded.table, loaded.panel, np.random.default_rng(seed))


def data(seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    t = np.arange(T)
    return np.round(50 + 30 * np.sin(2 * np.pi * t / 24)[None, :] + rng.normal(0, 5, (S, T)))


@pytest.mark.parametrize("sampler", ["float", "hardened"])
@pytest.mark.parametrize("mechanism", LINEAR)
def test_linear_noise_part_ignores_the_data_and_noiseless_part_is_linear(mechanism, sampler):
    plan = plan_of(mechanism, sampler)
    a, b = data(1), data(2)
    _, r_a, m_a = split(plan, a, 7)
    _, r_b, m_b = split(plan, b, 7)
    _, _, m_ab = split(plan, a + b, 7)
    scale = np.abs(r_a).max()
    # the noise: the same draws whatever the data (the lattice rounding of values is in the noiseless part)
    np.testing.assert_allclose(r_a - m_a, r_b - m_b, rtol=0, atol=1e-9 * scale)
    lattice = 0.0 if sampler == "float" else 1e-4 * scale  # snapping to g ~ sigma 2^-20 is not exactly linear
    np.testing.assert_allclose(m_ab, m_a + m_b, rtol=0, atol=1e-9 * scale + lattice)
    assert np.abs(r_a - m_a).max() > 1.0  # there is noise to separate


def test_gaussian_and_laplace_noiseless_part_is_the_panel():
    for mechanism in ("gaussian", "laplace"):
        values = data(3)
        _, _, noiseless = split(plan_of(mechanism, "hardened"), values, 4)
        np.testing.assert_array_equal(noiseless, values)  # integer counts lie on the lattice


def test_dft_noiseless_part_is_the_rfft_truncation():
    values = data(5)
    _, _, noiseless = split(plan_of("dft"), values, 6)
    spectrum = np.fft.rfft(values, axis=1)
    spectrum[:, 9:] = 0
    np.testing.assert_allclose(noiseless, np.fft.irfft(spectrum, n=T, axis=1), rtol=0, atol=1e-9)


def test_subsample_noiseless_part_interpolates_the_sampled_steps():
    values = data(8)
    rng = np.random.default_rng(9)
    mask = copy.deepcopy(rng).random((S, T)) < 0.2  # the mechanism's first draws: the Bernoulli steps
    assert mask.any(axis=1).all()
    loaded = load_frame(frame(values), plan_of("subsample"))
    _, _, noiseless = run_split(plan_of("subsample"), loaded.loaded.table, loaded.panel, rng)
    expected = np.array([np.interp(np.arange(T), np.flatnonzero(m), v[m]) for m, v in zip(mask, values)])
    np.testing.assert_allclose(noiseless, expected, rtol=0, atol=1e-9)


def test_fast_is_its_filter_given_the_pattern():
    """Fixed-interval FAST samples regardless of the data, so the mechanism on zeros with the same seed
    is its noise alone: release(x) - release(0) must be the filter of x at the released pattern."""
    plan = plan_of("fast", fast_fixed_interval=5, fast_max_samples=None)
    values = data(10)
    result, released, noiseless = split(plan, values, 11)
    _, zeros, _ = split(plan, np.zeros((S, T)), 11)
    np.testing.assert_allclose(released - zeros, noiseless, rtol=0, atol=1e-8 * np.abs(values).max())
    assert result.sampled[:, ::5].all() and not result.sampled[:, 1::5].any()


def test_adaptive_fast_noiseless_part_holds_between_samples():
    plan = plan_of("fast")
    values = data(12)
    result, released, noiseless = split(plan, values, 13)
    p = result.claim.parameters
    assert np.all(filter_given_pattern(np.zeros((S, T)), result.sampled, p["Q"], p["R"], p["P0"]) == 0)
    assert result.sampled[:, 0].all() and 1 < result.sampled.sum(axis=1).max() <= 12
    # between samples the release is constant, and so is its noiseless part
    held = ~result.sampled[:, 1:]
    assert np.all((np.diff(released, axis=1) == 0)[held]) and np.all((np.diff(noiseless, axis=1) == 0)[held])


def test_filter_given_pattern_matches_a_scalar_kalman_filter():
    rng = np.random.default_rng(14)
    z = rng.normal(size=(1, 30))
    sampled = np.zeros((1, 30), dtype=bool)
    sampled[0, [0, 1, 4, 5, 11, 29]] = True
    q, r, p0 = 0.3, 2.0, 1.5
    x, p, last, expected = z[0, 0], p0, 0, [z[0, 0]]
    for k in range(1, 30):
        if sampled[0, k]:
            prior = p + (k - last) * q
            gain = prior / (prior + r)
            x, p, last = x + gain * (z[0, k] - x), gain * r, k
        expected.append(x)
    np.testing.assert_allclose(filter_given_pattern(z, sampled, q, r, p0)[0], expected, rtol=1e-12)


panels = arrays(np.float64, (2, 6), elements=st.floats(-1e3, 1e3, allow_nan=False, width=32))


@settings(max_examples=60, deadline=None)
@given(panels, panels, panels, panels, panels, arrays(bool, (2, 6)))
def test_the_parts_mean_errors_add_up_to_the_total(x, b, m, r, p, observed):
    parts = split_error(x, b, m, r, p, observed)
    if not observed.any():
        assert np.isnan(parts["total"].mean)
        return
    total = sum(parts[name].mean for name in ("bounding", "approximation", "noise", "postprocessing"))
    assert total == pytest.approx(parts["total"].mean, abs=1e-9 * (1 + np.abs([x, b, m, r, p]).max()))
    for figures in parts.values():
        assert abs(figures.mean) <= figures.mae * (1 + 1e-12) + 1e-12
        assert figures.mae <= figures.rmse * (1 + 1e-12) + 1e-12


def test_unobserved_cells_are_left_out():
    x = np.array([[1.0, 2.0, 3.0, 100.0]])
    observed = np.array([[True, True, True, False]])
    parts = split_error(x, x, x, x + 1, x + 1, observed)
    assert parts["total"].mean == 1.0 and parts["noise"].mae == 1.0
    signal = signal_figures(x, observed)
    assert signal == {"cells": 3, "median": 2.0, "spread": pytest.approx(np.sqrt(2 / 3))}


def test_spread_is_within_series_and_r2_compares_with_each_series_mean():
    x = np.array([[10.0, 12.0, 14.0], [1000.0, 1002.0, 1004.0]])  # levels differ, spread does not
    ev = Evaluation(x, np.ones_like(x, dtype=bool))
    assert ev.signal["spread"] == pytest.approx(np.sqrt(8 / 3))
    means = x.mean(axis=1, keepdims=True) * np.ones_like(x)  # releasing each series' mean: r2 = 0
    ev.add(x, x, means, means)
    assert ev.r2 == pytest.approx(0.0, abs=1e-12) and not ev.exceeds_spread
    ev.add(x, x, means + 3, means + 3)
    assert ev.exceeds_spread and ev.r2 < 0
    summary = ev.to_dict()
    assert summary["runs"] == 2 and summary["error"]["noise"]["mean"]["max"] == pytest.approx(3.0)

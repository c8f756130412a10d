"""release_steps: position-keyed noise, chunking invariance, the A x + B z structure, errors."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.mechanisms.continual.conftest import setting
from tsdp.errors import DataError
from tsdp.mechanisms.continual import new_carry, privacy_map, release_steps
from tsdp.mechanisms.continual import toeplitz as tz
from tsdp.mechanisms.continual.factorization import factorization
from tsdp.mechanisms.continual.release import step_noise
from tsdp.mechanisms.continual.workloads import workload_column

SECRET = bytes(range(32))
OUTPUTS = ("daily", "cumulative", "window:3")
STRATEGY_CASES = [("independent", None), ("toeplitz", None), ("banded", 4), ("tree", None)]


def run_in_chunks(s, x, cuts, secret=SECRET):
    carry, parts = new_carry(s), []
    bounds = [0, *cuts, x.shape[1]]
    for a, b in zip(bounds[:-1], bounds[1:]):
        out, carry = release_steps(s, secret, carry, x[:, a:b], a)
        parts.append(out)
    return {o: np.concatenate([p[o] for p in parts], axis=1) for o in s.outputs}, carry


@settings(max_examples=25, deadline=None)
@given(case=st.sampled_from(STRATEGY_CASES), sampler=st.sampled_from(["float", "hardened"]),
       horizon=st.integers(1, 40), data=st.data())
def test_any_chunking_equals_one_append_bit_for_bit(case, sampler, horizon, data):
    strategy, band = case
    band = None if band is None else min(band, horizon)
    s = setting(horizon=horizon, strategy=strategy, band=band, sampler=sampler, n_series=3, outputs=OUTPUTS)
    x = np.asarray(data.draw(st.lists(st.integers(0, 50), min_size=3 * horizon, max_size=3 * horizon)),
                   dtype=float).reshape(3, horizon)
    cuts = sorted(set(data.draw(st.lists(st.integers(1, max(1, horizon - 1)), max_size=6)))) if horizon > 1 else []
    whole, carry_whole = run_in_chunks(s, x, [])
    chunked, carry_chunked = run_in_chunks(s, x, cuts)
    for o in OUTPUTS:
        assert np.array_equal(whole[o], chunked[o])
    for key in carry_whole:
        assert np.array_equal(carry_whole[key], carry_chunked[key])


def test_one_day_at_a_time_for_a_year_equals_one_append():
    for strategy, band in STRATEGY_CASES:
        s = setting(strategy=strategy, band=band, sampler="hardened", n_series=4, outputs=OUTPUTS)
        x = np.random.default_rng(5).poisson(20, (4, 365)).astype(float)
        whole, _ = run_in_chunks(s, x, [])
        daily, _ = run_in_chunks(s, x, list(range(1, 365)))
        for o in OUTPUTS:
            assert np.array_equal(whole[o], daily[o]), (strategy, o)


@pytest.mark.parametrize("strategy, band", STRATEGY_CASES)
def test_released_is_workload_plus_decoded_noise(strategy, band):
    """Float sampler: output_i = A_i x + B_i z with the step noise z the release drew."""
    T, S = 40, 2
    s = setting(horizon=T, strategy=strategy, band=band, n_series=S, outputs=OUTPUTS)
    priv, fac = privacy_map(s), factorization(strategy, T, band)
    x = np.random.default_rng(1).normal(10, 3, (S, T))
    out, _ = release_steps(s, SECRET, new_carry(s), x, 0)
    if fac.tree is None:
        z = np.concatenate([step_noise(s, priv, SECRET, t, 1) for t in range(T)], axis=1)
        for o in OUTPUTS:
            A = tz.matrix(workload_column(o, T), T)
            B = tz.matrix(fac.decoder_column(o), T)
            assert np.allclose(B @ tz.matrix(fac.column, T), A, atol=1e-9)  # B C = A
            assert np.allclose(out[o], x @ A.T + z @ B.T, atol=1e-8 * priv.sigma * T)
    else:
        z = np.concatenate([step_noise(s, priv, SECRET, t, int(fac.tree.released_at[t])) for t in range(T)], axis=1)
        for o in OUTPUTS:
            a = workload_column(o, T)
            A = tz.matrix(a, T)
            B = np.zeros((T, fac.n_rows))
            for t in range(T):
                row = fac.tree.decoder_row(a[t::-1], t)
                B[t, :row.size] = row
            assert np.allclose(B @ fac.tree.matrix(), A, atol=1e-9)
            assert np.allclose(out[o], x @ A.T + z @ B.T, atol=1e-8 * priv.sigma * T)


def test_hardened_encoded_values_are_on_the_lattice():
    s = setting(horizon=30, strategy="independent", sampler="hardened", n_series=2, outputs=("daily",))
    g = privacy_map(s).granularity
    x = np.random.default_rng(2).normal(0, 1, (2, 30))
    out, _ = release_steps(s, SECRET, new_carry(s), x, 0)
    assert np.array_equal(out["daily"] / g, np.rint(out["daily"] / g))


def test_noise_is_keyed_by_secret_and_position():
    s = setting(horizon=10, strategy="toeplitz", n_series=2, outputs=("daily",))
    priv = privacy_map(s)
    a = step_noise(s, priv, SECRET, 3, 1)
    assert np.array_equal(a, step_noise(s, priv, SECRET, 3, 1))
    assert not np.array_equal(a, step_noise(s, priv, SECRET, 4, 1))
    assert not np.array_equal(a, step_noise(s, priv, bytes(32), 3, 1))


def test_bad_steps_are_data_errors_and_leave_the_carry():
    s = setting(horizon=5, strategy="toeplitz", n_series=2, outputs=("cumulative",))
    x = np.ones((2, 2))
    _, carry = release_steps(s, SECRET, new_carry(s), x, 0)
    snapshot = {k: v.copy() for k, v in carry.items()}
    with pytest.raises(DataError, match="already released"):
        release_steps(s, SECRET, carry, x, 1)
    with pytest.raises(DataError, match="skips"):
        release_steps(s, SECRET, carry, x, 3)
    with pytest.raises(DataError, match="horizon"):
        release_steps(s, SECRET, carry, np.ones((2, 4)), 2)
    with pytest.raises(DataError, match="series"):
        release_steps(s, SECRET, carry, np.ones((3, 1)), 2)
    with pytest.raises(DataError, match="non-finite"):
        release_steps(s, SECRET, carry, np.array([[1.0], [np.nan]]), 2)
    for k in snapshot:
        assert np.array_equal(snapshot[k], carry[k])


@pytest.mark.parametrize("strategy, band", STRATEGY_CASES)
def test_the_carry_survives_np_savez(strategy, band, tmp_path):
    s = setting(horizon=20, strategy=strategy, band=band, sampler="hardened", n_series=3, outputs=OUTPUTS)
    x = np.random.default_rng(3).poisson(4, (3, 20)).astype(float)
    whole, _ = run_in_chunks(s, x, [])
    first, carry = release_steps(s, SECRET, new_carry(s), x[:, :9], 0)
    np.savez(tmp_path / "carry.npz", **carry)
    with np.load(tmp_path / "carry.npz") as saved:
        loaded = {k: saved[k] for k in saved.files}
    second, _ = release_steps(s, SECRET, loaded, x[:, 9:], int(loaded["position"]))
    for o in OUTPUTS:
        assert np.array_equal(np.concatenate([first[o], second[o]], axis=1), whole[o])


def test_a_carry_of_another_setting_is_refused():
    s = setting(horizon=10, strategy="toeplitz", n_series=2, outputs=("daily",))
    other = setting(horizon=10, strategy="banded", band=3, n_series=2, outputs=("daily",))
    with pytest.raises(DataError, match="state"):
        release_steps(s, SECRET, new_carry(other), np.ones((2, 1)), 0)
    bad = {**new_carry(s), "position": np.array(11)}
    with pytest.raises(DataError, match="state"):
        release_steps(s, SECRET, bad, np.ones((2, 1)), 11)

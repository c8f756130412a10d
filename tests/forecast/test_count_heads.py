"""DeepAR's count heads (tsdp.forecast.deep.distributions: negative binomial and Poisson) and
``nonnegative`` forecasts: the likelihoods against scipy's pmfs, the gamma-Poisson draws against
the negative binomial's mean and variance, no negative quantile on count data, and an epsilon that
the head does not change (the accountant sees the clip norm, the noise multiplier and the sampler).
Skipped, with the reason, when the optional extra tsdp[deep] is not installed.

Statistical checks use fixed seeds and accept at two-sided P ~ 1e-7 (as tests/forecast/test_deep.py).
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from tsdp.forecast.deep import missing_extra

_MISSING = missing_extra()
pytestmark = pytest.mark.skipif(_MISSING is not None, reason=f"needs the optional extra tsdp[deep]: {_MISSING}")

from tsdp.accounting.structured import account_dpsgd  # noqa: E402
from tsdp.errors import UsageError  # noqa: E402
from tsdp.forecast import persist, trainer  # noqa: E402
from tsdp.forecast.models import make_model, model_from_config  # noqa: E402
from tsdp.forecast.timefeatures import Calendar  # noqa: E402

Z_TAIL = 5.33  # two-sided P ~ 1e-7
CAL = Calendar(np.datetime64("2024-01-01T00:00"), step_us=3_600_000_000)
SMALL = dict(lags=(1, 2, 24), hidden=4, layers=1, time_features=("hour_of_day", "age"))
CONTEXT, HORIZON, N, LENGTH = 6, 4, 5, 300


def heads():
    from tsdp.forecast.deep import distributions

    return distributions


@pytest.mark.parametrize("log_s", [0.0, 1.7])
def test_negative_binomial_nll_is_scipys_pmf(log_s):
    """-log P(y) of NB(r, p) with r = softplus(raw_0) + floor and logit raw_1 + log s, p = sigmoid(logit):
    scipy's nbinom counts failures with success probability 1 - p."""
    import jax.numpy as jnp

    rng = np.random.default_rng(0)
    raw = rng.normal(0, 1.5, (50, 2))
    y = rng.integers(0, 200, 50).astype(float)
    s = np.exp(log_s)
    got = np.asarray(heads().NegativeBinomial.nll(jnp.asarray(y / s), jnp.asarray(raw), log_s), dtype=np.float64)
    r = np.log1p(np.exp(raw[:, 0])) + heads().R_FLOOR
    p = 1.0 / (1.0 + np.exp(-(raw[:, 1] + log_s)))
    np.testing.assert_allclose(got, -stats.nbinom.logpmf(y, r, 1.0 - p), rtol=2e-4, atol=2e-4)


def test_poisson_nll_is_scipys_pmf():
    import jax.numpy as jnp

    rng = np.random.default_rng(1)
    raw = rng.normal(0, 1.5, (50, 1))
    y = rng.integers(0, 60, 50).astype(float)
    log_s = 2.0
    got = np.asarray(heads().Poisson.nll(jnp.asarray(y / np.exp(log_s)), jnp.asarray(raw), log_s), dtype=np.float64)
    rate = np.exp(log_s) * np.log1p(np.exp(raw[:, 0])) + heads().RATE_FLOOR
    np.testing.assert_allclose(got, -stats.poisson.logpmf(y, rate), rtol=2e-4, atol=2e-4)


def test_negative_binomial_draws_have_its_mean_and_variance():
    """Gamma-Poisson draws: mean r e^l, variance r e^l (1 + e^l); z-tests on 200,000 draws; non-negative integers."""
    import jax
    import jax.numpy as jnp

    r, logit, s, n = 3.0, np.log(4.0), 2.0, 200_000
    raw = jnp.asarray(np.tile([np.log(np.expm1(r - heads().R_FLOOR)), logit - np.log(s)], (n, 1)), dtype=jnp.float32)
    z = np.asarray(heads().NegativeBinomial.sample(jax.random.key(3), raw, jnp.full(n, s, dtype=jnp.float32)))
    y = z.astype(np.float64) * s
    assert y.min() >= 0 and np.allclose(y, np.round(y), atol=1e-3)
    mean, var = r * 4.0, r * 4.0 * 5.0
    assert abs(y.mean() - mean) / np.sqrt(var / n) < Z_TAIL
    # the sample variance's standard error from the sample's fourth central moment
    fourth = np.mean((y - y.mean()) ** 4)
    assert abs(y.var() - var) / np.sqrt((fourth - var ** 2) / n) < Z_TAIL


def panel(seed: int = 0) -> np.ndarray:
    """Counts with a daily cycle and many zeros (N series of LENGTH hours)."""
    rng = np.random.default_rng(seed)
    level = 3.0 * (1.0 + np.sin(2 * np.pi * np.arange(LENGTH) / 24.0)) * rng.uniform(0.5, 2.0, (N, 1))
    return rng.poisson(level).astype(float)


def config(model, **changes) -> trainer.TrainConfig:
    base = dict(context=model.receptive_field, horizon=HORIZON, model="deepar", batch_size=N, clip_norm=0.5,
                noise_multiplier=1.1, delta=1e-5, steps=25, lr=1e-2, val_windows=2, sampler="float")
    return trainer.TrainConfig(**{**base, **changes})


@pytest.mark.parametrize("distribution", ["negbin", "poisson"])
def test_a_count_head_forecasts_no_negative_quantile_on_count_data(distribution):
    values = panel()
    assert (values == 0).mean() > 0.2  # many zeros: a Student-t head puts mass below 0 here
    model = make_model("deepar", CONTEXT, HORIZON, distribution=distribution, **SMALL)
    split = trainer.split_panel(values, model.receptive_field, HORIZON, 2, calendar=CAL, test_windows=3)
    result = trainer.train(model, split, config(model), np.random.default_rng(0))
    q = trainer.predict_test(model, result.theta, split, rng=np.random.default_rng(1))
    assert q.shape == (3 * N, HORIZON, 9) and np.isfinite(q).all()
    assert q.min() >= 0.0
    paths = model.sample_paths(result.theta, split.test_context,
                               trainer.window_features(model, split, split.test_positions, model.receptive_field)["feats"],
                               np.random.default_rng(2))
    assert paths.min() >= 0.0 and np.allclose(paths, np.round(paths), atol=1e-3 * max(1.0, paths.max()))


def test_the_student_t_head_does_forecast_negative_quantiles_here_unless_nonnegative():
    """The same data and training with the Student-t head: negative quantiles (what the count head
    prevents), and none with nonnegative=True (paths clipped at 0)."""
    values = panel()
    lows = []
    for nonnegative in (False, True):
        model = make_model("deepar", CONTEXT, HORIZON, nonnegative=nonnegative, **SMALL)
        split = trainer.split_panel(values, model.receptive_field, HORIZON, 2, calendar=CAL, test_windows=3)
        result = trainer.train(model, split, config(model), np.random.default_rng(0))
        lows.append(trainer.predict_test(model, result.theta, split, rng=np.random.default_rng(1)).min())
    assert lows[0] < 0.0 and lows[1] == 0.0


@pytest.mark.parametrize("sampler", ["float", "hardened"])
def test_the_head_does_not_change_epsilon(sampler):
    """Epsilon depends on C, sigma, the sampler and the batch geometry, not on the likelihood: the same
    run with the Student-t and the count heads claims the same epsilon (hardened: the lattice's cost
    also counts the parameters, so the heads are compared at the accountant's own figure for each)."""
    values = panel()
    claimed = {}
    for distribution in ("studentt", "negbin", "poisson"):
        model = make_model("deepar", CONTEXT, HORIZON, distribution=distribution, **SMALL)
        split = trainer.split_panel(values, model.receptive_field, HORIZON, 2, calendar=CAL)
        cfg = trainer.with_model(config(model, sampler=sampler, steps=12), model)
        result = trainer.train(model, split, cfg, np.random.default_rng(0))
        setting = trainer.make_setting(cfg, N, split.train.shape[1], cfg.noise_multiplier)
        expected = account_dpsgd(setting, 1e-5, steps=12).epsilon
        assert result.epsilon == expected
        claimed[distribution] = (result.epsilon, model.n_params)
    if sampler == "float":
        assert claimed["studentt"][0] == claimed["negbin"][0] == claimed["poisson"][0]
    else:  # three parameter counts (3, 2 and 1 head outputs), each run accounted for its own
        assert len({p for _, p in claimed.values()}) == 3


def test_count_heads_round_trip_through_the_model_files(tmp_path):
    model = make_model("deepar", CONTEXT, HORIZON, distribution="negbin", nonnegative=True, **SMALL)
    again = model_from_config(model.config())
    assert again.config() == model.config() and again.distribution == "negbin" and again.nonnegative
    theta = model.init(np.random.default_rng(0))
    weights = persist.weights_bytes(model, theta)
    (tmp_path / "m.npz").write_bytes(weights)
    (tmp_path / "m.json").write_bytes(persist.metadata_bytes(model, weights, "m.npz", {}))
    loaded, loaded_theta, _ = persist.load_model(tmp_path / "m.json")
    assert loaded.config() == model.config() and np.array_equal(loaded_theta, theta)


def test_unknown_distribution_is_a_usage_error():
    with pytest.raises(UsageError, match="--distribution"):
        make_model("deepar", CONTEXT, HORIZON, distribution="gamma", **SMALL)

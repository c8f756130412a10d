"""Forecasting models with per-window gradients (tsdp.forecast.models).

Finite differences (as in test_studentt.py): along a direction ``v`` the central difference
``fd(h) = (L(theta + h v) - L(theta - h v)) / 2h`` has truncation error ~``h^2`` (estimated by
``|fd(2h) - fd(h)|``, which is ~3 times it) and rounding error ``<= noise / h``, where ``noise`` bounds
the evaluation error of the per-window loss: ``8 eps`` times the magnitude of its Student-t terms plus
``|log s|``, plus the rounding of the raw outputs propagated through the NLL. Tolerance:
``|fd(2h) - fd(h)| + 4 noise / h + 1e-8 |g.v|``. A wrong gradient gives an O(|g.v|) error and fails.
"""

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import special

from tsdp.errors import DataError, UsageError
from tsdp.forecast import models, studentt

EPS = np.finfo(float).eps
L_C, L_F = 30, 5

CASES = [
    ("linear", {}),
    ("dlinear", {"kernel": 7, "hidden": 4}),
    ("dlinear", {"min_scale": 0.01}),  # default kernel 25 and hidden 20
    ("simple-ff", {"hidden": [8, 6]}),
]
IDS = ["linear", "dlinear-k7", "dlinear-default", "simple-ff"]


@pytest.fixture(params=CASES, ids=IDS)
def model(request):
    name, options = request.param
    return models.make_model(name, L_C, L_F, **options)


def make_data(rng, batch, zero_windows=True):
    """Context and target windows on very different scales; windows 0 and 1 have mean |context| below
    the floor (all zeros, and tiny values), so ``s = min_scale`` for them."""
    level = rng.lognormal(0.0, 2.0, size=(batch, 1))
    ctx = level * (1.0 + 0.5 * np.sin(np.arange(L_C) / 3.0 + rng.uniform(0, 6, (batch, 1)))
                   + 0.3 * rng.normal(size=(batch, L_C)))
    tgt = level * (1.0 + 0.3 * rng.normal(size=(batch, L_F)))
    if zero_windows:
        ctx[0] = 0.0
        tgt[0] = 0.01 * rng.normal(size=L_F)
        ctx[1] = 1e-5 * rng.normal(size=L_C)
    return ctx, tgt


def loss_noise(model, theta, ctx, tgt):
    """Bound on the floating-point error of one evaluation of each window's loss (module docstring)."""
    s = model.mean_scale(ctx)
    loc, scale, df = model.distribution(theta, ctx)
    z = (tgt - loc) / scale
    scaled_scale = scale / s[:, None]
    terms = (np.abs(special.gammaln((df + 1) / 2)) + np.abs(special.gammaln(df / 2))
             + np.abs(np.log(scaled_scale)) + 0.5 * np.abs(np.log(df * np.pi))
             + (df + 1) / 2 * np.log1p(z**2 / df))
    # the scaled raw loc carries an error ~ L_C eps ((|loc| + |target|) / s + 1) (a sum of L_C products
    # and the subtraction y - loc); its effect on the NLL is |dnll/dloc| = (df+1)|z| / (scale (df + z^2))
    dnll_dloc = (df + 1) * np.abs(z) / (scaled_scale * (df + z**2))
    propagated = dnll_dloc * ((np.abs(loc) + np.abs(tgt)) / s[:, None] + 1.0)
    return 8 * EPS * (terms.mean(axis=1) + np.abs(np.log(s)) + L_C * propagated.mean(axis=1) + 1.0)


def check_directional(model, theta, ctx, tgt, grads, v, h):
    def f(t):
        return model.loss(t, ctx, tgt)

    fd1 = (f(theta + h * v) - f(theta - h * v)) / (2 * h)
    fd2 = (f(theta + 2 * h * v) - f(theta - 2 * h * v)) / (4 * h)
    analytic = grads @ v
    noise = loss_noise(model, theta, ctx, tgt)
    tol = np.abs(fd2 - fd1) + 4 * noise / h + 1e-8 * np.abs(analytic)
    err = np.abs(fd1 - analytic)
    assert np.all(err <= tol), (np.max(err / tol), err, tol)
    # the check is not vacuous: the tolerance is far below the size of the derivatives (O(0.01 - 1))
    assert np.all(tol <= 1e-4 * np.abs(analytic) + 1e-6)


# ------------------------------------------------------------------------------------------------
# Gradients
# ------------------------------------------------------------------------------------------------


def test_per_example_grads_match_finite_differences(model):
    rng = np.random.default_rng(11)
    theta = model.init(rng)
    ctx, tgt = make_data(rng, 6)
    loss, grads = model.per_example_grads(theta, ctx, tgt)
    assert loss.shape == (6,) and grads.shape == (6, model.n_params)
    # loss() may take a cheaper product order (DLinear folds P into the weights): agree to rounding
    np.testing.assert_allclose(loss, model.loss(theta, ctx, tgt), rtol=1e-12)
    h = 1e-5
    directions = [rng.normal(size=model.n_params) for _ in range(3)]
    for name, _ in model.layout:  # one direction inside every parameter block
        v = np.zeros(model.n_params)
        model.unflatten(v)[name][...] = rng.normal(size=model.unflatten(v)[name].shape)
        directions.append(v)
    for k in rng.choice(model.n_params, size=5, replace=False):  # single coordinates
        v = np.zeros(model.n_params)
        v[k] = 1.0
        directions.append(v)
    for v in directions:
        v = v / np.linalg.norm(v)
        check_directional(model, theta, ctx, tgt, grads, v, h)


def test_gradient_rows_depend_only_on_their_window(model):
    rng = np.random.default_rng(12)
    theta = model.init(rng)
    ctx, tgt = make_data(rng, 5)
    loss, grads = model.per_example_grads(theta, ctx, tgt)
    ctx2, tgt2 = ctx.copy(), tgt.copy()
    ctx2[3] *= 1e4  # a far larger series in window 3 would change any batch-level scale
    tgt2[3] = -tgt2[3] * 1e4
    loss2, grads2 = model.per_example_grads(theta, ctx2, tgt2)
    others = [0, 1, 2, 4]
    np.testing.assert_allclose(loss2[others], loss[others], rtol=1e-14)
    np.testing.assert_allclose(grads2[others], grads[others], rtol=1e-13, atol=1e-15 * np.abs(grads).max())
    assert not np.allclose(grads2[3], grads[3])


@settings(max_examples=15, deadline=None)
@given(case=st.sampled_from(range(len(CASES))), seed=st.integers(0, 2**32 - 1), j=st.integers(0, 3),
       log_clip=st.floats(-4.0, 2.0), zero=st.booleans())
def test_property_window_isolation_and_clipping(case, seed, j, log_clip, zero):
    """For any window j and any replacement of it: every other window's loss, gradient, norm and
    forecast is unchanged, and the clipped contributions never exceed the clip norm."""
    name, options = CASES[case]
    model = models.make_model(name, L_C, L_F, **options)
    rng = np.random.default_rng(seed)
    theta = model.init(rng)
    ctx, tgt = make_data(rng, 4, zero_windows=False)
    new_ctx, new_tgt = make_data(rng, 1, zero_windows=False)
    ctx2, tgt2 = ctx.copy(), tgt.copy()
    ctx2[j] = 0.0 if zero else new_ctx[0] * 10 ** rng.uniform(-3, 3)
    tgt2[j] = new_tgt[0]
    clip = 10.0**log_clip
    others = [i for i in range(4) if i != j]
    loss, grads = model.per_example_grads(theta, ctx, tgt)
    loss2, grads2 = model.per_example_grads(theta, ctx2, tgt2)
    np.testing.assert_allclose(grads2[others], grads[others], rtol=1e-13, atol=1e-15 * np.abs(grads).max())
    _, _, norms = model.clipped_grad_sum(theta, ctx, tgt, clip)
    _, total2, norms2 = model.clipped_grad_sum(theta, ctx2, tgt2, clip)
    np.testing.assert_allclose(norms2[others], norms[others], rtol=1e-13)
    loc, scale, df = model.distribution(theta, ctx)
    loc2, scale2, df2 = model.distribution(theta, ctx2)
    np.testing.assert_allclose(loc2[others], loc[others], rtol=1e-13, atol=1e-300)
    np.testing.assert_allclose(scale2[others], scale[others], rtol=1e-13)
    factors = np.minimum(1.0, clip / norms2)
    assert np.all(np.linalg.norm(grads2 * factors[:, None], axis=1) <= clip * (1 + 1e-12))
    np.testing.assert_allclose(total2, (grads2 * factors[:, None]).sum(axis=0), rtol=1e-10,
                               atol=1e-12 * np.abs(grads2).max())


def test_clipped_grad_sum_equals_explicit_clipping(model):
    rng = np.random.default_rng(13)
    theta = model.init(rng)
    ctx, tgt = make_data(rng, 16)
    loss, grads = model.per_example_grads(theta, ctx, tgt)
    explicit_norms = np.linalg.norm(grads, axis=1)
    assert np.ptp(np.log(explicit_norms)) > 0.5  # the norms are spread, so "between" is meaningful
    for clip in (0.1 * explicit_norms.min(), np.median(explicit_norms), 10 * explicit_norms.max()):
        loss_c, total, norms = model.clipped_grad_sum(theta, ctx, tgt, clip)
        np.testing.assert_allclose(loss_c, loss, rtol=1e-14)
        np.testing.assert_allclose(norms, explicit_norms, rtol=1e-12)
        factors = 1.0 / np.maximum(1.0, explicit_norms / clip)
        clipped = grads * factors[:, None]
        assert np.all(np.linalg.norm(clipped, axis=1) <= clip * (1 + 1e-12))
        # entries that cancel in the sum are compared on the scale of the summands (atol)
        np.testing.assert_allclose(total, clipped.sum(axis=0), rtol=1e-10, atol=1e-13 * np.abs(clipped).max())
    # above every norm nothing is clipped: the plain sum
    _, total, _ = model.clipped_grad_sum(theta, ctx, tgt, 10 * explicit_norms.max())
    np.testing.assert_allclose(total, grads.sum(axis=0), rtol=1e-10, atol=1e-13 * np.abs(grads).max())
    with pytest.raises(UsageError):
        model.clipped_grad_sum(theta, ctx, tgt, 0.0)


def test_non_finite_window_is_left_out_of_the_clipped_sum(model):
    rng = np.random.default_rng(14)
    theta = model.init(rng)
    ctx, tgt = make_data(rng, 5)
    tgt[2, 1] = np.nan
    _, grads = model.per_example_grads(theta, ctx, tgt)
    with np.errstate(invalid="ignore"):
        _, total, norms = model.clipped_grad_sum(theta, ctx, tgt, 0.3)
    assert np.isnan(norms[2]) and np.all(np.isfinite(np.delete(norms, 2)))
    good = np.delete(grads, 2, axis=0)
    factors = np.minimum(1.0, 0.3 / np.linalg.norm(good, axis=1))
    np.testing.assert_allclose(total, (good * factors[:, None]).sum(axis=0), rtol=1e-10,
                               atol=1e-13 * np.abs(good).max())


def test_mean_grad_is_mean_of_per_example_grads(model):
    rng = np.random.default_rng(15)
    theta = model.init(rng)
    ctx, tgt = make_data(rng, 9)
    loss, grads = model.per_example_grads(theta, ctx, tgt)
    mean_loss, grad = model.mean_grad(theta, ctx, tgt)
    assert isinstance(mean_loss, float)
    assert mean_loss == pytest.approx(loss.mean(), rel=1e-14)
    np.testing.assert_allclose(grad, grads.mean(axis=0), rtol=1e-10, atol=1e-13 * np.abs(grads).max())


@pytest.mark.parametrize("factor", [1e-2, 0.37, 5.0, 1e3])
def test_scale_equivariance(model, factor):
    rng = np.random.default_rng(16)
    theta = model.init(rng)
    ctx, tgt = make_data(rng, 6, zero_windows=False)
    ctx = ctx + np.sign(ctx) * 2.0  # mean |context| >= 2, so factor * mean > min_scale (<= 0.01 here)
    loss, grads = model.per_example_grads(theta, ctx, tgt)
    loss_a, grads_a = model.per_example_grads(theta, factor * ctx, factor * tgt)
    # x = ctx/s and y = tgt/s agree to a few ulps, so gradients agree to rounding
    np.testing.assert_allclose(grads_a, grads, rtol=1e-9, atol=1e-12 * np.abs(grads).max())
    np.testing.assert_allclose(loss_a, loss + np.log(factor), rtol=1e-12, atol=1e-12)
    loc, scale, df = model.distribution(theta, ctx)
    loc_a, scale_a, df_a = model.distribution(theta, factor * ctx)
    np.testing.assert_allclose(loc_a, factor * loc, rtol=1e-12, atol=1e-12 * factor * np.abs(loc).max())
    np.testing.assert_allclose(scale_a, factor * scale, rtol=1e-12)
    np.testing.assert_allclose(df_a, df, rtol=1e-12)
    q = model.predict_quantiles(theta, ctx, [0.1, 0.5, 0.9])
    q_a = model.predict_quantiles(theta, factor * ctx, [0.1, 0.5, 0.9])
    np.testing.assert_allclose(q_a, factor * q, rtol=1e-10, atol=1e-12 * factor * np.abs(q).max())


# ------------------------------------------------------------------------------------------------
# Forward pass, scaling, layout
# ------------------------------------------------------------------------------------------------


def reference_raw(model, theta, ctx):
    """The models' formulas written out independently (per window, plain loops over layers)."""
    p = model.unflatten(theta)
    s = np.maximum(np.abs(ctx).mean(axis=1), model.min_scale)
    out = []
    for c, si in zip(ctx, s):
        x = c / si
        if model.name == "linear":
            raw = (p["W"] @ x + p["b"]).reshape(L_F, 3)
        elif model.name == "dlinear":
            half = (model.kernel - 1) // 2
            padded = np.concatenate([np.full(half, x[0]), x, np.full(half, x[-1])])
            trend = np.array([padded[j:j + model.kernel].mean() for j in range(L_C)])
            h = p["W_s"] @ (x - trend) + p["b_s"] + p["W_t"] @ trend + p["b_t"]
            raw = h.reshape(L_F, model.hidden) @ p["P"] + p["p"]
        else:
            a = x
            n = len(model.hidden) + 1
            for k in range(1, n):
                a = np.maximum(p[f"W{k}"] @ a + p[f"b{k}"], 0.0)
            raw = (p[f"W{n}"] @ a + p[f"b{n}"]).reshape(L_F, 3)
        out.append(raw)
    return np.array(out), s


def test_forward_and_loss_match_the_formulas(model):
    rng = np.random.default_rng(17)
    theta = model.init(rng)
    ctx, tgt = make_data(rng, 4)
    raw, s = reference_raw(model, theta, ctx)
    loc, scale, df = model.distribution(theta, ctx)
    np.testing.assert_allclose(loc, raw[..., 0] * s[:, None], rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(scale, (studentt.softplus(raw[..., 1]) + 1e-6) * s[:, None], rtol=1e-10)
    np.testing.assert_allclose(df, 2 + studentt.softplus(raw[..., 2]), rtol=1e-10)
    expected = studentt.nll(tgt / s[:, None], *studentt.domain(raw)).mean(axis=1) + np.log(s)
    np.testing.assert_allclose(model.loss(theta, ctx, tgt), expected, rtol=1e-10)
    # the loss is the NLL in data units: log-density of tgt under (loc, scale, df), averaged over steps
    np.testing.assert_allclose(model.loss(theta, ctx, tgt), studentt.nll(tgt, loc, scale, df).mean(axis=1),
                               rtol=1e-10)
    assert s[0] == model.min_scale and s[1] == model.min_scale


def test_dlinear_moving_average_matches_direct_computation():
    rng = np.random.default_rng(18)
    for length, kernel in [(30, 1), (30, 3), (30, 7), (30, 25), (10, 25), (96, 25)]:
        x = rng.normal(size=(5, length))
        half = (kernel - 1) // 2
        padded = np.pad(x, ((0, 0), (half, half)), mode="edge")
        direct = np.lib.stride_tricks.sliding_window_view(padded, kernel, axis=1).mean(axis=-1)
        np.testing.assert_allclose(models.moving_average(x, kernel), direct, rtol=1e-12, atol=1e-14)
        model = models.make_model("dlinear", length, 3, kernel=kernel)
        seasonal, trend = model.decompose(x)
        np.testing.assert_allclose(trend, direct, rtol=1e-12, atol=1e-14)
        np.testing.assert_allclose(seasonal, x - direct, rtol=1e-12, atol=1e-14)
    with pytest.raises(UsageError, match="odd"):
        models.make_model("dlinear", 30, 3, kernel=4)


def test_layout_unflatten_and_init(model):
    assert model.n_params == sum(int(np.prod(shape)) for _, shape in model.layout)
    theta = np.arange(model.n_params, dtype=float)
    views = model.unflatten(theta)
    assert [(n, v.shape) for n, v in views.items()] == model.layout
    first = model.layout[0][0]
    views[first][...] = -1.0  # views, not copies
    assert np.all(theta[: views[first].size] == -1.0)
    with pytest.raises(ValueError):
        model.unflatten(theta[:-1])
    a = model.init(np.random.default_rng(5))
    b = model.init(np.random.default_rng(5))
    np.testing.assert_array_equal(a, b)
    for name, block in model.unflatten(a).items():
        fan_in = model._fan_in[name]
        bound = 1 / np.sqrt(fan_in)
        assert np.all(np.abs(block) <= bound)
        if block.size >= 50:  # uniform on the whole interval, not a narrower one
            assert np.abs(block).max() > 0.8 * bound


def test_numpy_and_jax_models_share_one_parameter_layout_and_repr():
    """unflatten, repr and the layout bookkeeping are written once (tsdp.forecast.params), for the numpy
    models and the JAX ones (importing tsdp.forecast.deep.base does not import JAX)."""
    from tsdp.forecast.deep.base import DeepForecastModel
    from tsdp.forecast.params import FlatParameters

    for attr in ("unflatten", "__repr__", "_set_layout"):
        assert getattr(models.ForecastModel, attr) is getattr(FlatParameters, attr)
        assert getattr(DeepForecastModel, attr) is getattr(FlatParameters, attr)
    net = models.make_model("linear", 4, 2, min_scale=0.5)
    assert repr(net) == "LinearModel(context=4, horizon=2, min_scale=0.5; n_params=30)"
    with pytest.raises(UsageError, match="min_scale must be a positive finite number, got inf"):
        models.make_model("linear", 4, 2, min_scale=float("inf"))


def test_default_sizes_and_parameter_counts():
    lin = models.make_model("linear", 96, 24)
    assert lin.layout == [("W", (72, 96)), ("b", (72,))]
    dl = models.make_model("dlinear", 96, 24)
    assert (dl.kernel, dl.hidden, dl.min_scale) == (25, 20, 1e-3)
    assert dl.n_params == 2 * (480 * 96 + 480) + 20 * 3 + 3
    ff = models.make_model("simple-ff", 96, 24)
    assert ff.hidden == (64, 64)
    assert ff.layout == [("W1", (64, 96)), ("b1", (64,)), ("W2", (64, 64)), ("b2", (64,)),
                         ("W3", (72, 64)), ("b3", (72,))]
    assert ff._fan_in["W3"] == 64 and ff._fan_in["b1"] == 96
    assert models.MODELS == ("linear", "dlinear", "simple-ff")
    assert models.make_model("mlp", 96, 24).config()["name"] == "simple-ff"


def test_bad_options_are_usage_errors():
    with pytest.raises(UsageError, match="unknown model"):
        models.make_model("wavenet", 10, 2)
    with pytest.raises(UsageError, match="kernel"):
        models.make_model("linear", 10, 2, kernel=3)
    with pytest.raises(UsageError, match="context"):
        models.make_model("linear", 0, 2)
    with pytest.raises(UsageError, match="min_scale"):
        models.make_model("linear", 10, 2, min_scale=0.0)
    with pytest.raises(UsageError, match="hidden"):
        models.make_model("simple-ff", 10, 2, hidden=[])
    with pytest.raises(DataError):
        models.model_from_config({"name": "linear", "context": 10})
    m = models.make_model("linear", 10, 2)
    with pytest.raises(ValueError):
        m.loss(m.init(np.random.default_rng(0)), np.zeros((3, 9)), np.zeros((3, 2)))


def test_config_round_trip_rebuilds_an_identical_model(model):
    cfg = json.loads(json.dumps(model.config()))
    assert {"name", "context", "horizon", "min_scale"} <= set(cfg)
    rebuilt = models.model_from_config(cfg)
    assert type(rebuilt) is type(model)
    assert rebuilt.config() == model.config()
    assert rebuilt.layout == model.layout
    rng = np.random.default_rng(19)
    theta = model.init(rng)
    ctx, tgt = make_data(rng, 4)
    np.testing.assert_array_equal(rebuilt.per_example_grads(theta, ctx, tgt)[1],
                                  model.per_example_grads(theta, ctx, tgt)[1])
    for a, b in zip(rebuilt.distribution(theta, ctx), model.distribution(theta, ctx)):
        np.testing.assert_array_equal(a, b)


def test_quantiles_monotone_and_median_is_loc(model):
    rng = np.random.default_rng(20)
    theta = model.init(rng)
    ctx, _ = make_data(rng, 7)
    levels = np.arange(1, 10) / 10
    q = model.predict_quantiles(theta, ctx, levels)
    assert q.shape == (7, L_F, 9)
    assert np.all(np.diff(q, axis=-1) > 0)
    loc, _, _ = model.distribution(theta, ctx)
    np.testing.assert_allclose(q[..., 4], loc, rtol=1e-14, atol=0)


# ------------------------------------------------------------------ nonnegative forecasts (issue 31)


@pytest.mark.parametrize("loc, scale, df", [(-1.0, 2.0, 2.5), (0.5, 1.0, 5.0), (3.0, 0.5, 30.0), (-20.0, 1.0, 4.0)])
def test_censored_mean_is_the_integral_of_max_y_0(loc, scale, df):
    """E[max(Y, 0)] = int_0^inf y f(y) dy for Y = loc + scale T(df), by adaptive quadrature."""
    from scipy import integrate, stats

    from tsdp.forecast.studentt import censored_mean

    expected, _ = integrate.quad(lambda y: y * stats.t.pdf(y, df, loc=loc, scale=scale), 0, np.inf, epsabs=1e-13)
    assert censored_mean(loc, scale, df) == pytest.approx(expected, rel=1e-8, abs=1e-12)


@pytest.mark.parametrize("name", ["linear", "dlinear", "simple-ff"])
def test_nonnegative_models_forecast_max_y_0(name):
    """Quantiles of max(Y, 0) are max(quantile, 0); the mean is the censored mean; the weights and the
    training are those of the model without the option (post-processing only)."""
    from tsdp.forecast.metrics import QUANTILE_LEVELS
    from tsdp.forecast.studentt import censored_mean

    plain = models.make_model(name, 8, 3)
    clipped = models.make_model(name, 8, 3, nonnegative=True)
    assert clipped.n_params == plain.n_params and clipped.config()["nonnegative"] is True
    theta = plain.init(np.random.default_rng(0))
    theta[-3:] = [-2.0, 0.0, 0.0]  # a negative location for some outputs
    ctx = np.random.default_rng(1).gamma(2.0, 1.0, (5, 8))
    mean, q = plain.forecast(theta, ctx, QUANTILE_LEVELS)
    mean_nn, q_nn = clipped.forecast(theta, ctx, QUANTILE_LEVELS)
    assert q.min() < 0 and q_nn.min() == 0.0
    np.testing.assert_array_equal(q_nn, np.maximum(q, 0.0))
    np.testing.assert_allclose(mean_nn, censored_mean(*plain.distribution(theta, ctx)), rtol=1e-12)
    assert np.all(mean_nn >= np.maximum(mean, 0.0) - 1e-12)  # Jensen: E max(Y, 0) >= max(E Y, 0)
    np.testing.assert_array_equal(clipped.loss(theta, ctx, ctx[:, :3]), plain.loss(theta, ctx, ctx[:, :3]))
    assert models.model_from_config(clipped.config()).nonnegative is True
    with pytest.raises(UsageError, match="nonnegative"):
        models.make_model(name, 8, 3, nonnegative="yes")

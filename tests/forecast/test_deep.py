"""DeepAR and iTransformer in JAX (tsdp.forecast.deep) on tiny shapes: per-window clipped gradients
(JAX autodiff, clipped in float64 from ghost pieces) against finite differences and a manual ``vmap`` version, every
contribution within C (also for non-finite gradients), padding that contributes nothing and does not
recompile, host noise of std sigma C (chi-square), the budget stop and the accountant's epsilon, the
receptive field DeepAR reports, its sample paths against its own likelihood, and reloading a saved
model. Skipped, with the reason, when the optional extra tsdp[deep] is not installed.

Statistical checks use fixed seeds and accept at two-sided P ~ 1e-7 (as tests/forecast/test_trainer.py).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from tsdp.forecast.deep import missing_extra

_MISSING = missing_extra()
pytestmark = pytest.mark.skipif(_MISSING is not None, reason=f"needs the optional extra tsdp[deep]: {_MISSING}")

from tsdp.accounting.structured import DpSgdSetting, account_dpsgd, max_compositions  # noqa: E402
from tsdp.errors import UsageError  # noqa: E402
from tsdp.forecast import persist, synthetic, trainer  # noqa: E402
from tsdp.forecast.models import make_model  # noqa: E402
from tsdp.forecast.optim import Adam  # noqa: E402
from tsdp.forecast.timefeatures import Calendar  # noqa: E402

P_TAIL = 1e-7
HOUR_US = 3_600_000_000
CAL = Calendar(np.datetime64("2024-01-01T00:00"), step_us=HOUR_US)
# DeepAR: unrolled context 3, lags up to 5 -> receptive field 3 + 5 - 1 = 7; iTransformer: context 6
DEEPAR = dict(lags=(1, 2, 5), hidden=3, layers=2, time_features=("hour_of_day", "age"))
ITRANSFORMER = dict(d_model=4, heads=2, feedforward=8, layers=1)  # the CLI tests run the paper's 2 layers
OPTIONS = {"deepar": (3, DEEPAR), "itransformer": (6, ITRANSFORMER)}
HORIZON = 2


def build(name: str, dtype: str = "float32", **extra):
    context, options = OPTIONS[name]
    return make_model(name, context, HORIZON, dtype=dtype, **{**options, **extra})


@pytest.fixture(scope="module", params=list(OPTIONS))
def model(request):
    return build(request.param)


@pytest.fixture(scope="module")
def model64(model):
    return build(model.name, "float64")


def windows(model, n: int, seed: int = 0, level: float = 30.0):
    """n random windows of a traffic-like panel: (ctx, tgt, extra) with the model's time features."""
    rng = np.random.default_rng(seed)
    r = model.receptive_field
    ctx = rng.gamma(4.0, level / 4.0, (n, r))
    tgt = rng.gamma(4.0, level / 4.0, (n, HORIZON))
    positions = rng.integers(0, 500, n)
    extra = {"feats": CAL.window_features(model.time_features, positions, r, HORIZON)} if model.time_features else {}
    return ctx, tgt, extra


def rows(extra, index):
    return {k: v[index] for k, v in extra.items()}


def single_clipped(model, theta, ctx, tgt, extra, i, clip):
    """The clipped gradient of window i alone (the other windows are left out of the batch)."""
    _, total, norms = model.clipped_grad_sum(theta, ctx[i:i + 1], tgt[i:i + 1], clip, **rows(extra, slice(i, i + 1)))
    return total, norms[0]


# ------------------------------------------------------------------------------------------ models


def test_receptive_field_is_context_plus_largest_lag_minus_one_and_all_of_it_is_read():
    deepar = build("deepar", "float64")
    assert deepar.receptive_field == 3 + 5 - 1 == trainer.model_context(deepar)
    assert build("itransformer").receptive_field == 6
    theta = deepar.init(np.random.default_rng(3))
    ctx, tgt, extra = windows(deepar, 1)
    base = deepar.loss(theta, ctx, tgt, **extra)[0]
    bumped = ctx.copy()
    bumped[0, 0] += 5.0  # the oldest value only reaches the loss through the largest lag
    assert deepar.loss(theta, bumped, tgt, **extra)[0] != pytest.approx(base, abs=1e-9)
    with pytest.raises(ValueError, match="shape"):
        deepar.loss(theta, ctx[:, 1:], tgt, **extra)


def test_config_round_trip_and_layout(model):
    from tsdp.forecast.models import model_from_config

    again = model_from_config(model.config())
    assert again.config() == model.config() and again.layout == model.layout and again.n_params == model.n_params
    assert model.config()["dtype"] == "float32"
    theta = model.init(np.random.default_rng(0))
    assert theta.shape == (model.n_params,) and sum(v.size for v in model.unflatten(theta).values()) == model.n_params


def test_bad_options_are_usage_errors():
    with pytest.raises(UsageError, match="heads"):
        make_model("itransformer", 6, 2, d_model=6, heads=4)
    with pytest.raises(UsageError, match="lags"):
        make_model("deepar", 3, 2, lags=[0, 1])
    with pytest.raises(UsageError, match="no option 'kernel'"):
        make_model("deepar", 3, 2, kernel=3)
    with pytest.raises(UsageError, match="--dtype"):
        make_model("itransformer", 6, 2, dtype="float16")
    assert make_model("itransformer", 6, 2, device="cpu").device.platform == "cpu"


def test_device_gpu_without_a_gpu_is_a_usage_error():
    import jax

    try:
        has_gpu = bool(jax.devices("gpu"))
    except RuntimeError:
        has_gpu = False
    if has_gpu:
        pytest.skip("this machine has a GPU")
    with pytest.raises(UsageError, match="--device gpu"):
        _ = make_model("itransformer", 6, 2, device="gpu").device
    assert make_model("itransformer", 6, 2, device="auto").device.platform == "cpu"


# ------------------------------------------------------------------------------- clipped gradients


def test_per_window_clipped_gradients_match_finite_differences(model64):
    """float64: the per-window gradient (clip far above its norm) is the loss's derivative, checked along
    random directions by central differences; with a small C it is that gradient scaled to norm C."""
    model = model64
    theta = model.init(np.random.default_rng(1))
    ctx, tgt, extra = windows(model, 3, seed=2)
    rng = np.random.default_rng(4)
    h = 1e-5
    for i in range(3):
        grad, norm = single_clipped(model, theta, ctx, tgt, extra, i, 1e12)
        assert norm == pytest.approx(np.linalg.norm(grad), rel=1e-10)
        one = (ctx[i:i + 1], tgt[i:i + 1])
        for _ in range(3):
            v = rng.normal(size=model.n_params)
            up = model.loss(theta + h * v, *one, **rows(extra, slice(i, i + 1)))[0]
            down = model.loss(theta - h * v, *one, **rows(extra, slice(i, i + 1)))[0]
            assert grad @ v == pytest.approx((up - down) / (2 * h), rel=1e-6, abs=1e-9)
        clip = 0.1 * norm
        clipped, _ = single_clipped(model, theta, ctx, tgt, extra, i, clip)
        np.testing.assert_allclose(clipped, grad * (clip / norm), rtol=1e-10, atol=1e-15)
        assert np.linalg.norm(clipped) <= clip


def test_clipped_sum_equals_manual_vmap_clipping(model):
    """The ghost pieces' clipped sum (iTransformer: factored weights) equals clipping vmap's per-window
    gradients by hand."""
    from tsdp.forecast.deep.ghost import clip_margin

    theta = model.init(np.random.default_rng(5))
    ctx, tgt, extra = windows(model, 6, seed=6)
    losses, grads = model.per_example_grads(theta, ctx, tgt, **extra)  # vmap(grad), unclipped
    norms = np.linalg.norm(grads, axis=1)
    clip = float(np.median(norms))  # half the windows are clipped
    inner = clip * (1 - clip_margin(model.n_params, "float32"))  # the float32 clipping margin
    manual = (grads / np.maximum(1.0, norms / inner)[:, None]).sum(axis=0)
    got_losses, total, got_norms = model.clipped_grad_sum(theta, ctx, tgt, clip, **extra)
    np.testing.assert_allclose(total, manual, rtol=2e-5, atol=2e-6 * clip)
    np.testing.assert_allclose(got_norms, norms, rtol=1e-5)
    np.testing.assert_allclose(got_losses, losses, rtol=1e-6)
    np.testing.assert_allclose(losses, model.loss(theta, ctx, tgt, **extra), rtol=1e-6)


def test_every_window_contributes_at_most_c_even_when_its_gradient_is_not_finite(model):
    theta = model.init(np.random.default_rng(7))
    ctx, tgt, extra = windows(model, 5, seed=8)
    ctx[1] *= 1e30  # overflows float32 in the forward pass
    tgt[2] = np.nan
    tgt[3] *= 1e6  # a huge but finite gradient
    clip = 1e-3
    for i in range(5):
        contribution, _ = single_clipped(model, theta, ctx, tgt, extra, i, clip)
        assert np.all(np.isfinite(contribution))
        assert np.linalg.norm(contribution) <= clip  # float32, yet never above C (the clipping margin)
    _, total, _ = model.clipped_grad_sum(theta, ctx, tgt, clip, **extra)
    assert np.all(np.isfinite(total)) and np.linalg.norm(total) <= 5 * clip


def test_removing_one_window_moves_the_sum_by_at_most_c(model):
    """The attacker's neighbour: the batch with and without window i (ordinary, overflowing, NaN, huge); the
    float64 sums differ by at most C (1 + 1e-12), whatever the other windows."""
    theta = model.init(np.random.default_rng(17))
    ctx, tgt, extra = windows(model, 9, seed=18)
    ctx[1] *= 1e30
    tgt[2] = np.nan
    tgt[3] *= 1e6
    ctx[4] *= 1e-30  # tiny inputs
    clip = 2e-3
    _, whole, _ = model.clipped_grad_sum(theta, ctx, tgt, clip, **extra)
    for i in range(9):
        keep = np.arange(9) != i
        _, without, _ = model.clipped_grad_sum(theta, ctx[keep], tgt[keep], clip, **rows(extra, keep))
        assert np.linalg.norm(whole - without) <= clip * (1 + 1e-12)


def test_a_clip_norm_below_what_the_rounding_bound_covers_is_a_usage_error(model):
    """Below ghost.min_clip the squares' underflow could hide a gradient's norm (float32 squares of entries
    below 2^-75 are 0): refused rather than clipped wrongly."""
    from tsdp.forecast.deep.ghost import min_clip

    theta = model.init(np.random.default_rng(0))
    ctx, tgt, extra = windows(model, 2)
    least = min_clip(model.n_params, "float32")
    with pytest.raises(UsageError, match="--clip-norm"):
        model.clipped_grad_sum(theta, ctx, tgt, least / 2, **extra)
    model.clipped_grad_sum(theta, ctx, tgt, least, **extra)


@pytest.mark.parametrize("dtype, tolerance", [("float64", 1e-10), ("float32", 1e-5)])
def test_deepar_per_window_gradients_equal_jax_grad_of_the_plain_loss(dtype, tolerance):
    """DeepAR's per-window gradient (W_h from sum_t h_{t-1}^T dL/da_t, the rest by JAX) is jax.grad of
    its loss, whose LSTM is a plain lax.scan differentiated by JAX."""
    import jax

    model = build("deepar", dtype)
    theta = model.init(np.random.default_rng(11))
    ctx, tgt, extra = windows(model, 5, seed=12)
    _, grads = model.per_example_grads(theta, ctx, tgt, **extra)
    with model._scope():
        flat, c, t, f, _, n = model._inputs(theta, ctx, tgt, extra["feats"])
        def one(c, t, f):
            return model._ravel(jax.grad(model._window_loss)(model._tree(flat), c, t, f))

        plain = jax.vmap(one)(c, t, f)
    plain = np.asarray(plain, dtype=np.float64)[:n]
    recurrent = np.zeros(model.n_params, dtype=bool)
    for name, (sl, shape) in model._slices.items():
        if name.endswith(".W") and name.startswith("lstm"):
            recurrent[sl] = (np.arange(np.prod(shape)) // shape[1]) >= shape[0] - model.hidden
    assert np.abs(plain[:, recurrent]).max() > 1e-3  # the recurrent weights' gradients are not trivially zero
    np.testing.assert_allclose(grads, plain, rtol=tolerance, atol=tolerance * np.abs(plain).max())


@pytest.mark.parametrize("dtype, tolerance", [("float64", 1e-10), ("float32", 1e-5)])
def test_deepar_batch_mean_gradient_equals_jax_grad_of_the_plain_mean_loss(dtype, tolerance):
    """The non-private gradient (DeepAR's batched formulation, 5 windows padded to 8) is jax.grad of the mean
    of the plain per-window losses, and padding changes nothing."""
    import jax

    model = build("deepar", dtype)
    theta = model.init(np.random.default_rng(13))
    ctx, tgt, extra = windows(model, 5, seed=14)
    value, grad = model.mean_grad(theta, ctx, tgt, **extra)
    with model._scope():
        flat, c, t, f, _, n = model._inputs(theta, ctx, tgt, extra["feats"])

        def mean_loss(tree):
            return jax.vmap(model._window_loss, in_axes=(None, 0, 0, 0))(tree, c[:n], t[:n], f[:n]).mean()

        plain_value, plain = jax.value_and_grad(mean_loss)(model._tree(flat))
        plain = np.asarray(model._ravel(plain), dtype=np.float64)
    assert value == pytest.approx(float(plain_value), rel=tolerance)
    np.testing.assert_allclose(grad, plain, rtol=tolerance, atol=tolerance * np.abs(plain).max())


def test_deepar_steps_reuse_their_memory(tmp_path):
    """A DP-SGD step at the bench's size (batch 256, 71 unrolled positions, ~110 MB of XLA temporaries) faults
    no fresh pages once warm (the least of 4 steps, as other work in the process may move the heap): XLA:CPU
    runs inline and glibc keeps its freed temporaries
    (tsdp.forecast.deep.runtime); without that every step faults ~27,000 pages in again. Run in a fresh
    interpreter, as the settings must precede JAX's CPU client."""
    import subprocess
    import sys

    script = tmp_path / "faults.py"
    script.write_text(
        "import resource, numpy as np\n"
        "from tsdp.forecast.models import make_model\n"
        "from tsdp.forecast.timefeatures import Calendar, default_time_features\n"
        "hour = 3_600_000_000\n"
        "lags = list(range(1, 8)) + [23, 24, 25, 47, 48, 49, 71, 72, 73, 95, 96, 97, 119, 120, 121, 143, 144, 145, "
        "167, 168, 169]\n"
        "m = make_model('deepar', 48, 24, lags=lags, time_features=default_time_features(hour))\n"
        "rng = np.random.default_rng(0)\n"
        "r = m.receptive_field\n"
        "ctx, tgt = rng.gamma(4.0, 10.0, (256, r)), rng.gamma(4.0, 10.0, (256, 24))\n"
        "cal = Calendar(np.datetime64('2024-01-01T00:00'), step_us=hour)\n"
        "feats = cal.window_features(m.time_features, rng.integers(0, 500, 256), r, 24)\n"
        "theta = m.init(rng)\n"
        "for _ in range(3):\n"
        "    m.clipped_grad_sum(theta, ctx, tgt, 1e-4, feats=feats)\n"
        "counts = []\n"
        "for _ in range(4):\n"
        "    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt\n"
        "    m.clipped_grad_sum(theta, ctx, tgt, 1e-4, feats=feats)\n"
        "    counts.append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)\n"
        "print(min(counts))\n")
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    faults = float(done.stdout.split()[-1])
    assert faults < 2000, f"{faults:.0f} page faults in the least faulting of 4 warm steps (microseconds each on a VM)"


def test_no_hand_written_backward_pass_in_the_deep_models():
    """The deep models are differentiated by JAX (issue 16): no custom VJP/JVP rules of our own."""
    import pathlib

    import tsdp.forecast.deep as deep

    for path in pathlib.Path(deep.__file__).parent.glob("*.py"):
        text = path.read_text()
        for rule in ("custom_vjp", "custom_jvp", "defvjp", "defjvp"):
            assert rule not in text, f"{path.name} defines its own derivative ({rule})"


def test_padding_contributes_nothing(model):
    theta = model.init(np.random.default_rng(9))
    ctx, tgt, extra = windows(model, 7, seed=10)
    clip = 0.05
    whole = model.clipped_grad_sum(theta, ctx, tgt, clip, **extra)[1]  # 7 windows + 1 padding
    parts = sum(single_clipped(model, theta, ctx, tgt, extra, i, clip)[0] for i in range(7))  # 1 + 7 padding
    np.testing.assert_allclose(whole, parts, rtol=1e-5, atol=1e-7 * clip)


def test_batch_sizes_reuse_the_compiled_step():
    """A Poisson batch's size varies: it is padded to a size that only grows, in quarter octaves, so the
    compiled step sees few shapes (the compiled function is replaced by a recorder here)."""
    from tsdp.forecast.deep.base import bucket

    assert [bucket(n) for n in (1, 8, 9, 10, 11, 17, 250, 256, 257, 300)] == [8, 8, 10, 10, 12, 20, 256, 256, 320,
                                                                            320]
    model = build("itransformer")
    shapes = []

    def recorder(flat, ctx, tgt, feats):
        size = ctx.shape[0]
        shapes.append(size)
        assert np.asarray(ctx)[n - 1].any() and not np.asarray(ctx)[n:].any()  # n windows, then zero padding
        wide = {name: np.zeros((size,) + shape, dtype=np.float32) for name, shape in model.layout}
        return np.zeros(size), np.zeros(size), np.zeros((size, 0), dtype=np.float32), wide

    model._fns["clip"] = (recorder, {"outer": {}, "dense": {}, "blocks": (0, 0, 0)})
    ctx, tgt, _ = windows(model, 12, seed=10)
    theta = model.init(np.random.default_rng(0))
    for n in (9, 3, 11, 10, 12, 9, 1):
        model.clipped_grad_sum(theta, ctx[:n], tgt[:n], 0.1)
    assert shapes == [10, 10, 12, 12, 12, 12, 12]


# ---------------------------------------------------------------------------------------- training

N, LENGTH, VALW = 6, 240, 2


@pytest.fixture(scope="module")
def panel() -> np.ndarray:
    return synthetic.traffic_panel(N, LENGTH, seed=0)


def split_for(model, panel):
    return trainer.split_panel(panel, model.receptive_field, HORIZON, VALW, calendar=CAL)


def config(model, **changes) -> trainer.TrainConfig:
    base = dict(context=model.receptive_field, horizon=HORIZON, model=model.name, batch_size=3, clip_norm=0.5,
                noise_multiplier=1.3, delta=1e-5, val_windows=VALW, lr=1e-2)
    return trainer.TrainConfig(**{**base, **changes})


def test_noise_is_drawn_on_the_host_with_std_sigma_c(model, panel, monkeypatch):
    """Each step's update is (clipped sum + N(0, sigma^2 C^2 I)) / B with the noise from
    tsdp.mechanisms.noise: chi-square test of the residual against sigma C / B."""
    from tsdp.mechanisms import noise

    split = split_for(model, panel)
    cfg = config(model, steps=12)
    sums, grads, draws = [], [], []
    real_sum, real_step, real_noise = model.clipped_grad_sum, Adam.step, noise.gaussian_noise

    def spy_sum(*args, **kwargs):
        out = real_sum(*args, **kwargs)
        sums.append(out[1].copy())
        return out

    def spy_step(self, theta, grad):
        grads.append(np.array(grad, copy=True))
        return real_step(self, theta, grad)

    def spy_noise(rng, sigma, size, *args, **kwargs):
        draws.append((sigma, size))
        return real_noise(rng, sigma, size, *args, **kwargs)

    monkeypatch.setattr(model, "clipped_grad_sum", spy_sum)
    monkeypatch.setattr(Adam, "step", spy_step)
    monkeypatch.setattr(noise, "gaussian_noise", spy_noise)
    trainer.train(model, split, cfg, np.random.default_rng(11))
    assert len(sums) == len(grads) == 12
    assert draws == [(1.3 * 0.5, model.n_params)] * 12
    residual = np.stack([g * 3 - s for g, s in zip(grads, sums)]).ravel()  # the noise itself
    std = 1.3 * 0.5
    statistic = float(np.sum(residual ** 2)) / std ** 2
    assert stats.chi2.ppf(P_TAIL, residual.size) <= statistic <= stats.chi2.isf(P_TAIL, residual.size)
    assert abs(residual.mean()) <= 5.3 * std / math.sqrt(residual.size)


def test_budget_stops_at_the_accountants_k_and_epsilon_is_account_dpsgds(model, panel):
    split = split_for(model, panel)
    cfg = config(model, epsilon=2.0, noise_multiplier=2.5)
    result = trainer.train(model, split, cfg, np.random.default_rng(12))
    setting = DpSgdSetting(n_series=N, length=split.train.shape[1], context=model.receptive_field, horizon=HORIZON,
                           batch_size=3, noise_multiplier=2.5, sampler="hardened", parameters=model.n_params,
                           clip_norm=0.5)
    k, _ = max_compositions(setting, 2.0, 1e-5)
    assert result.plan.stopped_by == "budget" and result.steps == result.compositions == k > 0
    assert result.epsilon == account_dpsgd(setting, 1e-5, steps=k).epsilon <= 2.0
    assert account_dpsgd(setting, 1e-5, steps=k + 1).epsilon > 2.0
    assert np.all(np.isfinite(result.theta))


def test_the_accountant_is_given_the_receptive_field(model, panel):
    split = split_for(model, panel)
    with pytest.raises(UsageError, match="reads"):
        trainer.train(model, split, config(model, context=model.receptive_field - 1, steps=1), np.random.default_rng(0))


def test_non_private_training_lowers_the_validation_loss(panel):
    model = build("deepar")  # the path is the base class's; one model is enough
    split = split_for(model, panel)
    cfg = config(model, private=False, steps=60, delta=None, noise_multiplier=None, batch_size=6)
    result = trainer.train(model, split, cfg, np.random.default_rng(13))
    assert result.history[-1]["val_loss"] < result.history[0]["val_loss"]
    scores = trainer.evaluate(model, result.theta, split, 24)
    assert np.isfinite(scores["crps"]) and np.isfinite(scores["mase"])


# ------------------------------------------------------------------------------------- forecasting


def test_deepar_sample_paths_follow_its_own_likelihood():
    """The training loss is the mean NLL over the n = L + L_F - 1 unrolled positions, so for one context
    exp(-n loss(y1, y2)) is proportional to the joint density p(y1) p(y2 | y1) the model assigns to the
    forecast. The sample paths (first step from the context's state, lags and time features; second
    step fed with the first draw) must have its marginals: 10,000 paths against a 400 x 400 grid.
    Quantile standard errors at levels 0.1..0.9 are below 0.016 interquartile ranges; we accept 0.1."""
    model = build("deepar", "float64")
    theta = model.init(np.random.default_rng(14)) * 3.0
    weights = model.unflatten(theta)  # views: make the inputs matter and the Student-t narrow
    weights["lstm1.W"][0] *= 10.0  # lag 1 (the first draw, at the second step)
    weights["lstm1.W"][3] *= 30.0  # hour of day (a step of 1/23 moves the gates)
    weights["head.b"][:] = [0.0, -3.0, 3.0]  # scale ~0.05 s, df ~5
    rng = np.random.default_rng(15)
    ctx = rng.gamma(4.0, 10.0, (1, model.receptive_field))
    feats = CAL.window_features(model.time_features, [123], model.receptive_field, HORIZON)
    levels = np.array([0.1, 0.25, 0.5, 0.75, 0.9])
    paths = np.concatenate([model.sample_paths(theta, ctx, feats=feats, rng=np.random.default_rng(k))[0]
                            for k in range(100)])  # (10000, L_F)
    sampled = np.quantile(paths, levels, axis=0).T  # (L_F, levels)
    # the grid spans the paths' 0.0005..0.9995 quantiles (the mass outside shifts the CDF by < 0.001)
    lo, hi = np.quantile(paths, [0.0005, 0.9995], axis=0)
    g1, g2 = np.linspace(lo[0], hi[0], 400), np.linspace(lo[1], hi[1], 400)
    y1, y2 = np.meshgrid(g1, g2, indexing="ij")
    tgt = np.stack([y1.ravel(), y2.ravel()], axis=1)
    loss = model.loss(theta, np.repeat(ctx, tgt.shape[0], 0), tgt, feats=np.repeat(feats, tgt.shape[0], 0))
    log_joint = -(model.context + HORIZON - 1) * loss.reshape(400, 400)
    joint = np.exp(log_joint - log_joint.max())
    for j, marginal, grid in ((0, joint.sum(axis=1), g1), (1, joint.sum(axis=0), g2)):
        cdf = np.cumsum(marginal) / marginal.sum()
        expected = np.interp(levels, cdf, grid)
        iqr = expected[3] - expected[1]
        np.testing.assert_allclose(sampled[j], expected, atol=0.1 * iqr, err_msg=f"forecast step {j + 1}")


def test_forecasts_are_ordered_quantiles_in_data_units(model):
    theta = model.init(np.random.default_rng(17))
    ctx, _, extra = windows(model, 4, seed=18, level=500.0)
    mean, q = model.forecast(theta, ctx, [0.1, 0.5, 0.9], rng=np.random.default_rng(1), **extra)
    assert mean.shape == (4, HORIZON) and q.shape == (4, HORIZON, 3)
    assert np.all(np.diff(q, axis=2) >= 0)
    assert np.all(np.abs(q[:, :, 1]) < 100 * 500.0)  # scaled back by the window's mean (~500), not ~1
    assert np.all(np.abs(q[:, :, 2] - q[:, :, 0]) > 0.5)


def test_saved_model_reloads_and_forecasts_without_retraining(model, panel, tmp_path):
    split = split_for(model, panel)
    result = trainer.train(model, split, config(model, steps=3), np.random.default_rng(19))
    weights = persist.weights_bytes(model, result.theta)
    (tmp_path / "m.npz").write_bytes(weights)
    (tmp_path / "m.json").write_bytes(persist.metadata_bytes(model, weights, "m.npz", {}))
    loaded, theta, meta = persist.load_model(tmp_path / "m.json")
    assert type(loaded) is type(model) and loaded.config() == model.config()
    np.testing.assert_array_equal(theta, result.theta)
    n, r = split.future_context.shape
    extra = trainer.window_features(model, split, np.full(n, split.future_position), r)
    before = model.forecast(result.theta, split.future_context, [0.1, 0.5, 0.9], rng=np.random.default_rng(2), **extra)
    after = loaded.forecast(theta, split.future_context, [0.1, 0.5, 0.9], rng=np.random.default_rng(2), **extra)
    np.testing.assert_array_equal(before[0], after[0])
    np.testing.assert_array_equal(before[1], after[1])

"""The DP-SGD trainer (tsdp.forecast.trainer) against the accountant it must agree with.

Spec: /work/shared/specs/schuchardt.md sections 1.3 (Algs 1-2: batch, clip, noise N(0, sigma^2 C^2 I),
divide by the expected batch size B), 3.1 (stop before the budget, best checkpoint on validation
windows), 6.2 items 8 and 10 (the sampler is the accountant's; steps taken = max K with
eps_K <= budget).

Statistical checks use fixed seeds. For noise known to have mean 0 and standard deviation s,
sum(x^2) / s^2 ~ chi2(n): we accept it between the chi2(n) quantiles at P = 1e-7 and 1 - 1e-7, and
the sample mean within 5.3 standard errors (two-sided P ~ 1e-7). A correct implementation fails a
check with probability ~2e-7 for a random seed; the seeds here are fixed.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from tsdp.accounting.pld import pld_from_profile
from tsdp.accounting.structured import (
    DpSgdSetting,
    account_dpsgd,
    composition_profile,
    epsilon_of,
    max_compositions,
)
from tsdp.errors import BudgetError, DataError, UsageError
from tsdp.forecast import metrics, sampling, synthetic, trainer
from tsdp.forecast.models import make_model
from tsdp.forecast.optim import Adam

P_TAIL = 1e-7
Z_MEAN = 5.3

# A small panel: N = 6 series of 300 hourly steps; L_C = 8, L_F = 4, 2 validation windows, so the
# training part has 300 - 4 * (1 + 2) = 288 steps.
N, LENGTH, CTX, HOR, VALW = 6, 300, 8, 4, 2
TRAIN_LENGTH = LENGTH - HOR * (1 + VALW)


@pytest.fixture(scope="module")
def panel() -> np.ndarray:
    return synthetic.traffic_panel(N, LENGTH, seed=0)


@pytest.fixture(scope="module")
def split(panel) -> trainer.Split:
    return trainer.split_panel(panel, CTX, HOR, VALW)


# The trainer's default sampler is the hardened one: its accounting needs the model's parameter count.
P_LINEAR = make_model("linear", CTX, HOR).n_params


def config(**changes) -> trainer.TrainConfig:
    base = dict(context=CTX, horizon=HOR, model="linear", batch_size=2, clip_norm=1.0, noise_multiplier=2.0,
                delta=1e-5, val_windows=VALW, parameters=P_LINEAR)
    return trainer.TrainConfig(**{**base, **changes})


def hardened(*args, clip_norm: float = 1.0, **kwargs) -> DpSgdSetting:
    """The accountant's setting of a hardened run of the linear model (clip norm of ``config``)."""
    return DpSgdSetting(*args, **kwargs, sampler="hardened", parameters=P_LINEAR, clip_norm=clip_norm)


def check_gaussian(x: np.ndarray, std: float) -> None:
    """x is i.i.d. N(0, std^2): chi-square test of the variance (known mean) and z-test of the mean."""
    x = np.asarray(x, dtype=np.float64).ravel()
    n = x.size
    statistic = float(np.sum(x * x)) / std**2
    lo, hi = stats.chi2.ppf(P_TAIL, n), stats.chi2.isf(P_TAIL, n)
    assert lo <= statistic <= hi, (f"sum(x^2)/s^2 = {statistic:.1f} outside chi2({n}) range [{lo:.1f}, {hi:.1f}]; "
                                   f"empirical std {math.sqrt(statistic / n) * std:.6g} vs {std:.6g}")
    assert abs(x.mean()) <= Z_MEAN * std / math.sqrt(n), f"mean {x.mean():.3g} is not 0 (std {std:.3g}, n {n})"


# ------------------------------------------------------------------------------------ split_panel


def test_split_panel_cuts_train_validation_test_and_future_exactly():
    n, length, ctx, hor, valw = 3, 40, 4, 3, 2
    values = (np.arange(n)[:, None] * 1000 + np.arange(length)[None, :]).astype(float)
    s = trainer.split_panel(values, ctx, hor, valw)
    train_length = length - hor * (1 + valw)  # 31
    np.testing.assert_array_equal(s.train, values[:, :train_length])
    # validation windows: forecast parts start at 31 and 34; all series of window 0, then window 1
    np.testing.assert_array_equal(s.val_context, np.concatenate([values[:, 27:31], values[:, 30:34]]))
    np.testing.assert_array_equal(s.val_target, np.concatenate([values[:, 31:34], values[:, 34:37]]))
    # test tail: the last L_F steps, with the L_C steps before them as context
    np.testing.assert_array_equal(s.test_context, values[:, 33:37])
    np.testing.assert_array_equal(s.test_target, values[:, 37:40])
    np.testing.assert_array_equal(s.history, values[:, :37])
    # the context for forecasting beyond the data: the last L_C values
    np.testing.assert_array_equal(s.future_context, values[:, 36:40])
    assert s.val_context.shape == (n * valw, ctx) and s.val_target.shape == (n * valw, hor)


def test_split_panel_validation_never_overlaps_test_tail_and_train_ends_before_validation():
    values = np.random.default_rng(1).normal(size=(2, 100))
    s = trainer.split_panel(values, 10, 5, 5)
    assert s.train.shape == (2, 100 - 30)
    # every validation target value lies strictly between the training part and the test tail
    tail = set(values[:, -5:].ravel())
    train = set(s.train.ravel())
    for v in s.val_target.ravel():
        assert v not in tail and v not in train


def test_split_panel_boundary_and_too_short():
    values = np.ones((2, 10 + 2 * 4))  # L_C + L_F = 10 training steps, 2 * 4 held out (1 test + 1 val)
    assert trainer.split_panel(values, 6, 4, 1).train.shape == (2, 10)
    with pytest.raises(DataError, match=r"--context-length \+ --forecast-length = 11"):
        trainer.split_panel(values, 7, 4, 1)


def test_split_panel_scores_several_forecast_origins():
    """K test windows: origins L - K L_F, ..., L - L_F (one every L_F steps), each with the L_C values
    before it as context; rows origin-major; validation and training end before the first origin."""
    n, length, ctx, hor, valw, k = 3, 60, 4, 3, 2, 4
    values = (np.arange(n)[:, None] * 1000 + np.arange(length)[None, :]).astype(float)
    s = trainer.split_panel(values, ctx, hor, valw, test_windows=k)
    assert s.test_origins == (48, 51, 54, 57) and s.test_position == 48
    assert s.train.shape == (n, length - hor * (k + valw))  # 42
    for j, origin in enumerate(s.test_origins):
        rows = slice(j * n, (j + 1) * n)
        np.testing.assert_array_equal(s.test_context[rows], values[:, origin - ctx:origin])
        np.testing.assert_array_equal(s.test_target[rows], values[:, origin:origin + hor])
        np.testing.assert_array_equal(s.test_positions[rows], origin)
    np.testing.assert_array_equal(s.history, values[:, :48])
    np.testing.assert_array_equal(s.val_target, np.concatenate([values[:, 42:45], values[:, 45:48]]))
    with pytest.raises(UsageError, match="--test-windows"):
        trainer.split_panel(values, ctx, hor, valw, test_windows=0)
    with pytest.raises(DataError, match="4 test windows"):
        trainer.split_panel(values[:, :20], ctx, hor, valw, test_windows=k)


def test_scores_are_averaged_over_the_origins_and_naive_reads_each_origins_past():
    rng = np.random.default_rng(3)
    values = rng.gamma(3.0, 10.0, (4, 400))
    s = trainer.split_panel(values, 8, 5, 2, test_windows=6)
    model = make_model("linear", 8, 5)
    theta = model.init(np.random.default_rng(0))
    got = trainer.evaluate(model, theta, s, 24)
    per_origin = []
    for j, origin in enumerate(s.test_origins):
        q = model.predict_quantiles(theta, values[:, origin - 8:origin], metrics.QUANTILE_LEVELS)
        per_origin.append(metrics.mean_wql(values[:, origin:origin + 5], q))
    assert got["origins"] == 6 and got["crps_by_origin"] == pytest.approx(per_origin, rel=1e-12)
    assert got["crps"] == pytest.approx(np.mean(per_origin), rel=1e-12)
    for season in (1, 24, 168):
        naive = trainer.evaluate_seasonal_naive(s, season)
        expected = [np.abs(values[:, o - season + np.arange(5) % season] - values[:, o:o + 5]).sum()
                    / np.abs(values[:, o:o + 5]).sum() for o in s.test_origins]
        assert naive["crps"] == pytest.approx(np.mean(expected), rel=1e-12)
    baselines = trainer.seasonal_baselines(s, (1, 24, 168, 10_000), 24)
    assert sorted(baselines) == ["seasonal naive (season 1)", "seasonal naive (season 168)",
                                 "seasonal naive (season 24)"]  # 10,000 exceeds the history: left out
    assert baselines["seasonal naive (season 168)"]["mase"] == trainer.evaluate_seasonal_naive(s, 168, 24)["mase"]


# ------------------------------------------------------------------------------- dp_gradient noise


@pytest.mark.parametrize("sigma, clip, batch", [(1.3, 0.7, 8), (4.0, 1e-4, 256)])
def test_dp_gradient_noise_has_std_sigma_c_over_b(sigma, clip, batch):
    rng = np.random.default_rng(20250)
    g = trainer.dp_gradient(np.zeros(200_000), sigma, clip, batch, rng)
    check_gaussian(g, sigma * clip / batch)


def test_dp_gradient_adds_the_clipped_sum_divided_by_b():
    total = np.linspace(-3, 3, 1000)
    a = trainer.dp_gradient(total, 1.1, 0.5, 16, np.random.default_rng(5))
    b = trainer.dp_gradient(np.zeros(1000), 1.1, 0.5, 16, np.random.default_rng(5))
    np.testing.assert_allclose(a - b, total / 16, rtol=0, atol=1e-12)


# ------------------------------------------------------------------------ planning vs accountant


def test_budget_binds_steps_equal_max_compositions(split):
    cfg = config(epsilon=1.0)
    plan = trainer.plan_training(cfg, N, TRAIN_LENGTH)
    setting = hardened(N, TRAIN_LENGTH, CTX, HOR, 2, 2.0)
    assert plan.setting == setting
    k, _ = max_compositions(setting, 1.0, 1e-5)
    assert plan.stopped_by == "budget"
    assert plan.compositions == plan.steps == plan.budget_compositions == k
    base = pld_from_profile(composition_profile(setting)[0])
    assert epsilon_of(setting, base, k, 1e-5) <= 1.0 < epsilon_of(setting, base, k + 1, 1e-5)

    result = trainer.train(make_model("linear", CTX, HOR), split, cfg, np.random.default_rng(0))
    assert result.steps == result.compositions == k
    assert result.epsilon == account_dpsgd(setting, 1e-5, steps=k).epsilon
    assert result.epsilon <= 1.0


def test_budget_binds_epoch_level(split):
    cfg = config(epsilon=3.0, top="shuffle")
    plan = trainer.plan_training(cfg, N, TRAIN_LENGTH)
    setting = hardened(N, TRAIN_LENGTH, CTX, HOR, 2, 2.0, top="shuffle")
    k, _ = max_compositions(setting, 3.0, 1e-5)
    base = pld_from_profile(composition_profile(setting)[0])
    assert epsilon_of(setting, base, k, 1e-5) <= 3.0 < epsilon_of(setting, base, k + 1, 1e-5)
    assert plan.stopped_by == "budget" and plan.compositions == k
    assert plan.steps == k * setting.steps_per_epoch == 3 * k
    result = trainer.train(make_model("linear", CTX, HOR), split, cfg, np.random.default_rng(0), plan=plan)
    assert result.compositions == k and result.steps == 3 * k
    assert result.epsilon == account_dpsgd(setting, 1e-5, epochs=k).epsilon <= 3.0


def test_requested_length_within_budget_is_trained_in_full():
    plan = trainer.plan_training(config(epsilon=1.0, steps=30), N, TRAIN_LENGTH)
    assert (plan.compositions, plan.steps, plan.stopped_by) == (30, 30, "steps")
    plan = trainer.plan_training(config(epsilon=3.0, epochs=4, top="shuffle"), N, TRAIN_LENGTH)
    assert (plan.compositions, plan.steps, plan.stopped_by) == (4, 12, "epochs")
    # a length beyond the budget is cut at the budget
    plan = trainer.plan_training(config(epsilon=1.0, steps=10_000), N, TRAIN_LENGTH)
    assert plan.stopped_by == "budget" and plan.steps == plan.budget_compositions < 10_000


def test_without_budget_epsilon_is_the_accountants_for_the_steps(split):
    cfg = config(steps=25)
    result = trainer.train(make_model("linear", CTX, HOR), split, cfg, np.random.default_rng(3))
    setting = hardened(N, TRAIN_LENGTH, CTX, HOR, 2, 2.0)
    assert result.compositions == 25 and result.plan.stopped_by == "steps"
    assert result.epsilon == account_dpsgd(setting, 1e-5, steps=25).epsilon


def test_one_step_over_budget_is_refused():
    with pytest.raises(BudgetError, match="--epsilon 0.01"):
        trainer.plan_training(config(epsilon=0.01), N, TRAIN_LENGTH)


def test_auto_noise_multiplier_fits_requested_epochs_in_epsilon():
    cfg = config(noise_multiplier=None, epsilon=2.0, epochs=10)
    plan = trainer.plan_training(cfg, N, TRAIN_LENGTH)
    sigma = plan.noise_multiplier
    setting = hardened(N, TRAIN_LENGTH, CTX, HOR, 2, sigma)
    assert plan.setting == setting
    assert plan.compositions == 30 and plan.stopped_by == "epochs"  # 3 steps per epoch
    eps = account_dpsgd(setting, 1e-5, epochs=10).epsilon
    assert eps <= 2.0
    assert eps >= 2.0 * 0.99, f"calibrated sigma {sigma} wastes budget: epsilon {eps}"
    # the smallest such sigma (to the calibration's relative tolerance 1e-3)
    smaller = hardened(N, TRAIN_LENGTH, CTX, HOR, 2, sigma / 1.002)
    assert account_dpsgd(smaller, 1e-5, epochs=10).epsilon > 2.0


def test_config_validation():
    with pytest.raises(UsageError, match="--delta"):
        config(epsilon=1.0, delta=None)
    with pytest.raises(UsageError, match="--clip-norm"):
        config(clip_norm=0.0, steps=3)
    with pytest.raises(UsageError, match="--steps or --epochs"):
        config(steps=3, epochs=3)
    with pytest.raises(UsageError, match="--epsilon"):
        config(noise_multiplier=None, steps=3)


# --------------------------------------------------------------------------- what train() does


@pytest.mark.parametrize("top", ["wor", "poisson"])
def test_private_update_is_clipped_sum_plus_gaussian_noise_over_b(split, monkeypatch, top):
    cfg = config(steps=300, noise_multiplier=1.7, clip_norm=0.3, top=top, batch_size=2)
    model = make_model("linear", CTX, HOR)
    clip_calls, sums, noisy, adam_grads = [], [], [], []
    real_sum = model.clipped_grad_sum

    def spy_sum(theta, ctx, tgt, clip):
        clip_calls.append(clip)
        out = real_sum(theta, ctx, tgt, clip)
        sums.append(out[1].copy())
        return out

    real_dp = trainer.dp_gradient

    def spy_dp(total, sigma, clip, batch, rng, granularity=None):
        out = real_dp(total, sigma, clip, batch, rng, granularity)
        noisy.append((total.copy(), sigma, clip, batch, out.copy()))
        return out

    real_step = Adam.step

    def spy_step(self, theta, grad):
        adam_grads.append(np.array(grad, copy=True))
        return real_step(self, theta, grad)

    monkeypatch.setattr(model, "clipped_grad_sum", spy_sum)
    monkeypatch.setattr(trainer, "dp_gradient", spy_dp)
    monkeypatch.setattr(Adam, "step", spy_step)
    result = trainer.train(model, split, cfg, np.random.default_rng(11))

    assert result.steps == 300 and len(noisy) == 300 and len(adam_grads) == 300
    assert clip_calls and set(clip_calls) == {0.3}
    assert all((s, c, b) == (1.7, 0.3, 2) for _, s, c, b, _ in noisy)  # sigma, C and the expected B
    for (_, _, _, _, out), grad in zip(noisy, adam_grads):
        np.testing.assert_array_equal(grad, out)  # Adam receives exactly the privatised gradient
    nonzero = [t for t, *_ in noisy if np.any(t)]
    assert len(nonzero) == len(sums)
    for t, s in zip(nonzero, sums):
        np.testing.assert_array_equal(t, s)  # ... built on the clipped sum
    residual = np.stack([out * 2 - total for total, _, _, _, out in noisy])
    check_gaussian(residual, 1.7 * 0.3)


def test_noisy_gradient_with_zero_clipped_sum_has_reported_std(split, monkeypatch):
    cfg = config(steps=200, noise_multiplier=0.9, clip_norm=2.0, batch_size=3)
    model = make_model("linear", CTX, HOR)
    grads = []

    def zero_sum(theta, ctx, tgt, clip):
        return np.zeros(ctx.shape[0]), np.zeros(model.n_params), np.zeros(ctx.shape[0])

    real_step = Adam.step

    def spy_step(self, theta, grad):
        grads.append(np.array(grad, copy=True))
        return real_step(self, theta, grad)

    monkeypatch.setattr(model, "clipped_grad_sum", zero_sum)
    monkeypatch.setattr(Adam, "step", spy_step)
    trainer.train(model, split, cfg, np.random.default_rng(8))
    assert len(grads) == 200
    check_gaussian(np.stack(grads), 0.9 * 2.0 / 3)


def test_non_private_training_adds_no_noise(split, monkeypatch):
    cfg = config(private=False, steps=40, delta=None, noise_multiplier=None)
    model = make_model("linear", CTX, HOR)
    means, grads = [], []

    def forbidden(*args, **kwargs):
        raise AssertionError("noise drawn in non-private training")

    import tsdp.mechanisms.noise as noise

    monkeypatch.setattr(trainer, "dp_gradient", forbidden)
    monkeypatch.setattr(noise, "gaussian_noise", forbidden)
    monkeypatch.setattr(model, "clipped_grad_sum", forbidden)
    real_mean = model.mean_grad

    def spy_mean(theta, ctx, tgt):
        out = real_mean(theta, ctx, tgt)
        means.append(out[1].copy())
        return out

    real_step = Adam.step

    def spy_step(self, theta, grad):
        grads.append(np.array(grad, copy=True))
        return real_step(self, theta, grad)

    monkeypatch.setattr(model, "mean_grad", spy_mean)
    monkeypatch.setattr(Adam, "step", spy_step)
    result = trainer.train(model, split, cfg, np.random.default_rng(2))
    assert result.epsilon is None and result.compositions == 0
    assert len(grads) == len(means) == 40
    for g, m in zip(grads, means):
        np.testing.assert_array_equal(g, m)


def test_clipped_reference_takes_dp_sgds_step_without_noise(split, monkeypatch):
    """clipped=True (``--evaluate-only clipped``): every update is the clipped sum divided by B, the
    private step without its noise, so the private/non-private gap separates noise from clipping."""
    cfg = config(private=False, clipped=True, steps=30, delta=None, noise_multiplier=None, clip_norm=0.05)
    model = make_model("linear", CTX, HOR)
    sums, grads = [], []

    def forbidden(*args, **kwargs):
        raise AssertionError("noise drawn in the clipped reference")

    import tsdp.mechanisms.noise as noise

    monkeypatch.setattr(trainer, "dp_gradient", forbidden)
    monkeypatch.setattr(noise, "gaussian_noise", forbidden)
    monkeypatch.setattr(model, "mean_grad", forbidden)
    real_sum, real_step = model.clipped_grad_sum, Adam.step

    def spy_sum(theta, ctx, tgt, clip, **kw):
        out = real_sum(theta, ctx, tgt, clip, **kw)
        assert clip == 0.05 and np.all(out[2] > 0.05)  # these windows' gradients are clipped
        sums.append(out[1].copy())
        return out

    def spy_step(self, theta, grad):
        grads.append(np.array(grad, copy=True))
        return real_step(self, theta, grad)

    monkeypatch.setattr(model, "clipped_grad_sum", spy_sum)
    monkeypatch.setattr(Adam, "step", spy_step)
    result = trainer.train(model, split, cfg, np.random.default_rng(2))
    assert result.epsilon is None and len(grads) == len(sums) == 30
    for g, total in zip(grads, sums):
        np.testing.assert_array_equal(g, total / cfg.batch_size)
    with pytest.raises(UsageError, match="clipped"):
        config(clipped=True, steps=3)


@pytest.mark.parametrize("top, bottom, instances", [("wor", "wr", 1), ("shuffle", "wr", 1), ("wor", "poisson", 2)])
def test_sampler_is_the_accountants_setting(split, monkeypatch, top, bottom, instances):
    seen, batches = [], []

    class SpySampler(sampling.WindowSampler):
        def __init__(self, setting, lengths=None):
            seen.append(setting)
            super().__init__(setting, lengths)

        def next_batch(self, rng):
            out = super().next_batch(rng)
            batches.append(out)
            return out

    monkeypatch.setattr(sampling, "WindowSampler", SpySampler)
    cfg = config(steps=12, top=top, bottom=bottom, instances=instances, batch_size=2 * instances)
    plan = trainer.plan_training(cfg, N, TRAIN_LENGTH)
    result = trainer.train(make_model("linear", CTX, HOR), split, cfg, np.random.default_rng(4), plan=plan)
    assert seen == [plan.setting]
    assert plan.setting == hardened(N, TRAIN_LENGTH, CTX, HOR, 2 * instances, 2.0, top=top, bottom=bottom,
                                        instances=instances)
    assert len(batches) == result.steps == plan.steps
    if top == "shuffle":  # epoch-level: a started epoch counts as a whole one
        assert result.compositions == math.ceil(12 / plan.setting.steps_per_epoch)


def test_released_weights_do_not_depend_on_validation_data(panel):
    """Audit regression (issue 11, item 4): with the same seed, changing one held-out value changed the
    released checkpoint in 8 of 20 runs, because the best checkpoint on private validation windows was
    released. By default the last iterate is released: it never reads the validation windows."""
    cfg = config(steps=40, val_every=2, lr=0.05)
    model = make_model("linear", CTX, HOR)
    released = []
    for bump in (0.0, 1e3):
        tampered = panel.copy()
        s = trainer.split_panel(tampered, CTX, HOR, VALW)
        s.val_target[0, 0] += bump  # one validation value, never part of the training series
        result = trainer.train(model, s, cfg, np.random.default_rng(21))
        np.testing.assert_array_equal(result.theta, result.last_theta)
        released.append(result.theta)
    np.testing.assert_array_equal(released[0], released[1])


def test_checkpoint_must_be_known():
    with pytest.raises(UsageError, match="--checkpoint"):
        config(checkpoint="best")


def test_best_checkpoint_is_the_lowest_validation_loss(split, monkeypatch):
    # val_every 1 and a scripted validation-loss sequence whose minimum is in the middle
    losses = iter([5.0, 4.0, 4.5, 1.5, 3.0, 2.0, 1.5, 2.5, 3.5])
    evaluated = []

    def fake_validation_loss(model, theta, s):
        value = next(losses)
        evaluated.append((theta.copy(), value))
        return value

    monkeypatch.setattr(trainer, "validation_loss", fake_validation_loss)
    cfg = config(steps=8, val_every=1, checkpoint="best-validation")
    result = trainer.train(make_model("linear", CTX, HOR), split, cfg, np.random.default_rng(9))
    assert [h["val_loss"] for h in result.history] == [v for _, v in evaluated]
    assert [h["step"] for h in result.history] == list(range(9))
    assert result.best_val_loss == 1.5 and result.best_step == 3  # the first of two equal minima
    np.testing.assert_array_equal(result.theta, evaluated[3][0])
    assert not np.array_equal(result.theta, result.last_theta)
    np.testing.assert_array_equal(result.last_theta, evaluated[-1][0])


def test_best_checkpoint_can_be_the_initial_model(split, monkeypatch):
    losses = iter([1.0, 2.0, 3.0, 4.0])
    evaluated = []

    def fake_validation_loss(model, theta, s):
        value = next(losses)
        evaluated.append(theta.copy())
        return value

    monkeypatch.setattr(trainer, "validation_loss", fake_validation_loss)
    result = trainer.train(make_model("linear", CTX, HOR), split,
                           config(steps=3, val_every=1, checkpoint="best-validation"), np.random.default_rng(9))
    assert result.best_step == 0 and result.best_val_loss == 1.0
    np.testing.assert_array_equal(result.theta, evaluated[0])


def test_real_validation_history_selects_its_minimum(split):
    cfg = config(steps=60, val_every=5, lr=0.05, checkpoint="best-validation")
    model = make_model("linear", CTX, HOR)
    result = trainer.train(model, split, cfg, np.random.default_rng(12))
    losses = [h["val_loss"] for h in result.history]
    assert [h["step"] for h in result.history] == list(range(0, 61, 5))
    best = int(np.argmin(losses))
    assert result.best_step == result.history[best]["step"] and result.best_val_loss == losses[best]
    assert trainer.validation_loss(model, result.theta, split) == pytest.approx(losses[best], rel=1e-12)


# ---------------------------------------------------------------------------------- evaluation


def test_evaluate_uses_the_test_window_only(split):
    model = make_model("linear", CTX, HOR)
    theta = model.init(np.random.default_rng(0))
    got = trainer.evaluate(model, theta, split, 24)
    q = model.predict_quantiles(theta, split.test_context, metrics.QUANTILE_LEVELS)
    assert got["crps"] == metrics.mean_wql(split.test_target, q)
    assert got["mase"] == metrics.mase(split.test_target, q[:, :, 4], split.history, 24)
    naive = trainer.evaluate_seasonal_naive(split, 24)
    point = metrics.seasonal_naive(split.history, HOR, 24)
    assert naive["crps"] == pytest.approx(metrics.mean_wql(split.test_target, point), rel=1e-12)
    assert naive["mase"] == metrics.mase(split.test_target, point, split.history, 24)

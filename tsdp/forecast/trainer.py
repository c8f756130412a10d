"""DP-SGD training of forecasting models with structured subsampling (Schuchardt et al. 2025, Algs 1-2).

One step: the sampler draws the batch exactly as the accountant assumes (top level: series; bottom
level: windows after front-padding L_C zeros); optional Gaussian label/context noise is added to each
sampled window (Eq. 1); every window's gradient is clipped to norm C and summed; Gaussian noise of
standard deviation sigma C is added; the sum is divided by the expected batch size B; Adam takes the
step (post-processing):

    g~ = (sum_i g_i / max(1, ||g_i|| / C) + N(0, sigma^2 C^2 I)) / B.

With the hardened sampler (the default) the sum is rounded to a power-of-two lattice g and the
noise is exact discrete Gaussian noise on it (label/context noise likewise, on their own lattices);
the accountant is given the rounded sum's sensitivity and pays the lattice's delta slack and epsilon
shift (:mod:`tsdp.accounting.dpsgd_lattice`). The parameter count P enters both, so the config
carries it (``parameters``; :func:`train` fills it in from the model).

The accountant composes the per-step (or, for deterministic/shuffled iteration, per-epoch) dominating
pair of :func:`tsdp.accounting.structured.composition_profile`. Epsilon is non-decreasing in the
number of compositions, so "may the next composition be taken within (epsilon, delta)?" is answered
for every step by one number, the largest admissible count K (:func:`max_compositions`); training
stops before composition K + 1. The final epsilon is computed by exactly the route of
``tsdp account dpsgd`` for the same setting and count.

The JAX models of :mod:`tsdp.forecast.deep` (DeepAR, iTransformer) take the same calls as the numpy
models, plus the public time features of each window when they use them (:func:`window_features`,
from the split's :class:`~tsdp.forecast.timefeatures.Calendar`). The accountant's L_C is the number of
values a model reads per window (:func:`model_context`; DeepAR: its context plus its largest lag
minus 1), and :func:`train` refuses a model that reads another number of values than the L_C it was
given.

The released weights are the LAST iterate by default: the guarantee covers every iterate, and the
last one is chosen without looking at the data. ``checkpoint="best-validation"`` releases instead
the iterate with the lowest loss on validation windows cut from the end of the same private series,
as in the paper; that selection reads private data that the accountant does not charge, so the
claimed epsilon does NOT cover such weights (an explicit opt-in, marked in the report and the
model file). The validation losses are figures of the private data (custodian only) either way.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any, Callable

import numpy as np

from tsdp.accounting.budget import check_epsilon
from tsdp.accounting.grid import MIN_DPSGD_DISCRETIZATION
from tsdp.accounting.pld import DEFAULT_DISCRETIZATION, pld_from_profile
from tsdp.accounting.samplers import Float, Hardened, Sampler, sampler_of
from tsdp.accounting.structured import (
    Derivation,
    DpSgdSetting,
    calibrate_noise,
    composition_profile,
    compositions,
    epsilon_of,
    max_compositions,
)
from tsdp.caveats import Caveat
from tsdp.errors import BudgetError, DataError, NumericalError, UsageError
from tsdp.forecast import metrics, sampling
from tsdp.forecast.optim import Adam

CHECKPOINTS = ("last", "best-validation")
# Without --epochs/--steps, training runs until the budget, but never longer than this.
STEP_CAP = 200_000
VALIDATION_CHUNK = 4096


@dataclass(frozen=True)
class TrainConfig:
    """Everything that shapes a training run (all public: none of it is read from the data)."""

    context: int
    horizon: int
    model: str = "simple-ff"
    batch_size: int = 256
    instances: int = 1
    top: str = "wor"
    bottom: str = "wr"
    clip_norm: float = 1e-4
    noise_multiplier: float | None = None  # None: calibrated for the requested epochs/steps
    epsilon: float | None = None
    delta: float | None = None
    steps: int | None = None
    epochs: int | None = None
    lr: float = 1e-3
    weight_decay: float = 1e-8
    val_windows: int = 5
    val_every: int | None = None
    unit: str = "event"
    w: int = 1
    label_noise: float = 0.0
    context_noise: float = 0.0
    value_bound: float | None = None
    discretization: float = DEFAULT_DISCRETIZATION
    private: bool = True
    clipped: bool = False  # non-private reference only: clip every window to C, add no noise
    checkpoint: str = "last"
    sampler: Sampler = Hardened()  # (a name is read by sampler_of)
    parameters: int | None = None  # the model's parameter count (the hardened lattice's cost depends on it)

    def __post_init__(self) -> None:
        object.__setattr__(self, "sampler", sampler_of(self.sampler))
        if self.checkpoint not in CHECKPOINTS:
            raise UsageError(f"--checkpoint must be one of {', '.join(CHECKPOINTS)}, got {self.checkpoint!r}")
        for option, value in (("--batch-size", self.batch_size), ("--instances", self.instances)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise UsageError(f"{option} must be an integer >= 1, got {value!r}")
        if self.context < 1 or self.horizon < 1:
            raise UsageError(f"--context-length {self.context} and --forecast-length {self.horizon} must be >= 1")
        if not (self.clip_norm > 0 and math.isfinite(self.clip_norm)):
            raise UsageError(f"--clip-norm must be finite and > 0, got {self.clip_norm}")
        if not (self.lr > 0 and math.isfinite(self.lr)):
            raise UsageError(f"--lr must be finite and > 0, got {self.lr}")
        if not (self.weight_decay >= 0 and math.isfinite(self.weight_decay)):
            raise UsageError(f"--weight-decay must be finite and >= 0, got {self.weight_decay}")
        if self.val_windows < 1:
            raise UsageError(f"--val-windows must be >= 1, got {self.val_windows}")
        if self.val_every is not None and self.val_every < 1:
            raise UsageError(f"--val-every must be >= 1, got {self.val_every}")
        if self.steps is not None and self.epochs is not None:
            raise UsageError("give --steps or --epochs, not both")
        for name, value in (("--steps", self.steps), ("--epochs", self.epochs)):
            if value is not None and value < 1:
                raise UsageError(f"{name} must be >= 1, got {value}")
        if self.clipped and self.private:
            raise UsageError("clipped is the non-private reference (clipping without noise); a private run clips anyway")
        if not self.private:
            if self.steps is None and self.epochs is None:
                raise UsageError("non-private training needs --steps or --epochs")
            return
        if self.epsilon is not None and self.delta is None:
            raise UsageError(f"--epsilon {self.epsilon:g} needs --delta: an (epsilon, delta) budget has both")
        if self.delta is None:
            raise UsageError("--delta is required: DP-SGD is (epsilon, delta)-DP and the accountant needs delta")
        if self.epsilon is not None:
            check_epsilon(self.epsilon, "--epsilon")  # finite, > 0 and within the range tsdp calibrates
        if not MIN_DPSGD_DISCRETIZATION <= self.discretization <= 1:  # else 'account verify' refuses the report
            raise UsageError(f"--discretization must be in [{MIN_DPSGD_DISCRETIZATION:g}, 1] (the privacy-loss grid "
                             f"step 'tsdp account verify' recomputes DP-SGD reports with), got {self.discretization:g}")
        if self.noise_multiplier is None and (self.epsilon is None or (self.steps is None and self.epochs is None)):
            raise UsageError("--noise-multiplier auto needs --epsilon and --epochs (or --steps) to calibrate for")
        if self.epsilon is None and self.steps is None and self.epochs is None:
            raise UsageError("give an --epsilon budget, or --epochs/--steps to train for (epsilon is then reported)")


@dataclass
class Split:
    """A panel cut into training series, validation windows and the held-out test tail.

    Series of length L: the last K L_F steps are the test tail, scored at K forecast origins (rolling
    windows: origin j forecasts steps ``L - (K - j) L_F .. L - (K - j - 1) L_F - 1`` from everything
    before it); the ``val_windows`` windows before the tail (forecast parts of L_F steps each) are
    the validation windows; the first ``L - (K + val_windows) L_F`` steps are the training series the
    accountant sees. Test rows are origin-major: rows ``j N .. (j + 1) N - 1`` belong to origin j.
    """

    train: np.ndarray
    val_context: np.ndarray
    val_target: np.ndarray
    test_context: np.ndarray
    test_target: np.ndarray
    history: np.ndarray  # everything before the first test origin (the in-sample scale of MASE)
    future_context: np.ndarray  # the last L_C values, for forecasting beyond the data
    # where each window's forecast starts on the grid (0 = first value), for models with time features
    val_positions: np.ndarray | None = None
    test_position: int = 0  # the first test origin
    future_position: int = 0
    calendar: Any = None  # tsdp.forecast.timefeatures.Calendar of the panel's grid (public), or None
    test_origins: tuple[int, ...] = ()  # forecast origins of the test windows (positions on the grid)
    values: np.ndarray | None = None  # the whole panel (seasonal naive forecasts from each origin's past)

    @property
    def test_positions(self) -> np.ndarray:
        """The forecast origin of every test row (origin-major), shape ``(K N,)``."""
        n = self.train.shape[0]
        return np.repeat(np.asarray(self.test_origins or (self.test_position,), dtype=np.int64), n)

    # series with gaps: (N, T) the training windows that touch no missing step (tsdp.forecast.sampling)
    admissible: np.ndarray | None = None

    @property
    def accounted_length(self) -> int:
        """The training length the accountant is given: the series' length, or with gaps the length
        whose start positions are the fewest admissible windows of a series."""
        if self.admissible is None:
            return self.train.shape[1]
        return sampling.accounted_length(self.admissible, self.test_target.shape[1])


def split_panel(values: np.ndarray, context: int, horizon: int, val_windows: int, calendar=None,
                test_windows: int = 1) -> Split:
    """Cut (N, L) values into the parts of :class:`Split`; DataError if the training part is too short.

    ``calendar`` (a :class:`tsdp.forecast.timefeatures.Calendar`) is needed by models with time
    features (DeepAR); ``context`` is the model's whole receptive field (DeepAR: context + lags);
    ``test_windows`` K is the number of forecast origins of the held-out tail (K L_F steps)."""
    if isinstance(test_windows, bool) or not isinstance(test_windows, (int, np.integer)) or test_windows < 1:
        raise UsageError(f"--test-windows must be an integer >= 1, got {test_windows!r}")
    n, length = values.shape
    held_out = horizon * (test_windows + val_windows)
    train_length = length - held_out
    if train_length < context + horizon:
        raise DataError(
            f"series of {length} steps are too short: the last {held_out} steps are held out ({test_windows} test "
            f"windows and {val_windows} validation windows of {horizon}), leaving {train_length} for training, "
            f"fewer than --context-length + --forecast-length = {context + horizon}; shorten the context or "
            "the horizon, or use fewer --test-windows or --val-windows"
        )
    padded = np.concatenate([np.zeros((n, context)), values], axis=1)
    val_ctx, val_tgt, val_pos = [], [], []
    for j in range(val_windows):
        start = train_length + j * horizon  # forecast start in original coordinates
        val_ctx.append(padded[:, start:start + context])
        val_tgt.append(values[:, start:start + horizon])
        val_pos.append(np.full(n, start, dtype=np.int64))
    origins = tuple(length - (test_windows - j) * horizon for j in range(test_windows))
    test_start = origins[0]
    return Split(
        train=values[:, :train_length],
        val_context=np.concatenate(val_ctx), val_target=np.concatenate(val_tgt),
        test_context=np.concatenate([padded[:, o:o + context] for o in origins]),
        test_target=np.concatenate([values[:, o:o + horizon] for o in origins]),
        history=values[:, :test_start], future_context=values[:, length - context:] if length >= context
        else padded[:, -context:],
        val_positions=np.concatenate(val_pos), test_position=test_start, future_position=length, calendar=calendar,
        test_origins=origins, values=values,
    )


def model_context(model) -> int:
    """The L_C a model reads per window (its receptive field: DeepAR's context plus its largest lag)."""
    return int(getattr(model, "receptive_field", model.context))


def window_features(model, split: Split, positions, context: int) -> dict[str, Any]:
    """``{"feats": ...}`` (the time features of the windows whose forecasts start at ``positions``) for
    a model with time features, else ``{}``; the features are public (the grid, not the data)."""
    names = tuple(getattr(model, "time_features", ()))
    if not names:
        return {}
    if split.calendar is None:
        raise UsageError(f"model {model.name!r} uses the time features {', '.join(names)}: the panel's time grid "
                         "(a Calendar) is needed")
    horizon = split.test_target.shape[1]
    return {"feats": split.calendar.window_features(names, np.atleast_1d(positions), context, horizon)}


@dataclass
class Plan:
    """What the accountant allows: the setting, sigma, and how many compositions/steps to take."""

    setting: DpSgdSetting | None
    derivation: Derivation | None
    noise_multiplier: float | None
    compositions: int
    steps: int
    stopped_by: str  # "budget", "steps" or "epochs"
    budget_compositions: int | None = None
    warnings: list[str] = field(default_factory=list)


def make_setting(config: TrainConfig, n_series: int, train_length: int, sigma: float) -> DpSgdSetting:
    sampler = config.sampler if config.private else Float()  # a non-private run is accounted as nothing
    lattice_sized = sampler.hardened  # the lattice's cost depends on the parameter count and C
    if lattice_sized and config.parameters is None:
        raise UsageError("the hardened sampler's accounting needs the model's parameter count (TrainConfig.parameters)")
    return DpSgdSetting(
        n_series=n_series, length=train_length, context=config.context, horizon=config.horizon,
        batch_size=config.batch_size, noise_multiplier=sigma, top=config.top, bottom=config.bottom,
        instances=config.instances, unit=config.unit, w=config.w, label_noise=config.label_noise,
        context_noise=config.context_noise, value_bound=config.value_bound,
        sampler=sampler, parameters=config.parameters if lattice_sized else None,
        clip_norm=config.clip_norm if lattice_sized else None,
    )


def with_model(config: TrainConfig, model) -> TrainConfig:
    """``config`` with the model's parameter count; UsageError if it states another one."""
    count = int(model.n_params)
    if config.parameters is not None and config.parameters != count:
        raise UsageError(f"model {model.name!r} has {count} parameters, but the config states {config.parameters}")
    return replace(config, parameters=count)


def plan_training(config: TrainConfig, n_series: int, train_length: int) -> Plan:
    """Calibrate sigma if asked, and find how many steps the (epsilon, delta) budget allows."""
    if not config.private:
        setting = make_setting(config, n_series, train_length, 1.0)  # validates the batching only
        steps = config.steps if config.steps is not None else config.epochs * setting.steps_per_epoch
        return Plan(None, None, None, 0, steps, "steps" if config.steps else "epochs")
    sigma = config.noise_multiplier if config.noise_multiplier is not None else 1.0
    setting = make_setting(config, n_series, train_length, sigma)
    warnings = list(setting.warnings())
    if config.delta >= 1.0 / n_series:
        warnings.append(Caveat("delta_too_large", f"--delta {config.delta:g} is not below 1/N = {1.0 / n_series:.3g} for {n_series} series: a "
                        "mechanism that publishes one series outright can meet it (Schuchardt et al. use 1e-7)"))
    if config.noise_multiplier is None:
        sigma, _ = calibrate_noise(setting, config.epsilon, config.delta, config.steps, config.epochs,
                                   config.discretization)
        setting = replace(setting, noise_multiplier=sigma)
    derivation = composition_profile(setting, "upper")[1]
    requested = None
    if config.steps is not None or config.epochs is not None:
        requested = compositions(setting, config.steps, config.epochs)
    budget = None
    if config.epsilon is not None:
        budget, first = max_compositions(setting, config.epsilon, config.delta, config.discretization)
        if budget == 0:
            raise BudgetError(f"--epsilon {config.epsilon:g}: a single {derivation.accounting_unit} already spends "
                              f"epsilon {first:.4g} at delta {config.delta:g} with noise multiplier {sigma:.4g}; "
                              "raise --noise-multiplier or the budget")
    count, stopped = _count(requested, budget, config, setting)
    if requested is None and budget is not None and count < budget:
        warnings.append(Caveat("step_cap", f"the budget allows {budget} {derivation.accounting_unit}s; training stops at the cap of "
                        f"{STEP_CAP} steps"))
    steps = count if setting.step_level else count * setting.steps_per_epoch
    if config.steps is not None and not setting.step_level:
        steps = min(steps, config.steps)
    return Plan(setting, derivation, sigma, count, steps, stopped, budget, warnings)


def _count(requested, budget, config: TrainConfig, setting: DpSgdSetting) -> tuple[int, str]:
    length_reason = "steps" if config.steps is not None else "epochs"
    if budget is None:
        return requested, length_reason
    if requested is None:
        cap = STEP_CAP if setting.step_level else max(1, STEP_CAP // setting.steps_per_epoch)
        return min(budget, cap), "budget" if budget <= cap else "steps"
    if budget < requested:
        return budget, "budget"
    return requested, length_reason


def dp_gradient(total: np.ndarray, noise_multiplier: float, clip: float, expected_batch: int,
                rng: np.random.Generator, granularity: float | None = None) -> np.ndarray:
    """(sum of clipped gradients + N(0, sigma^2 C^2 I)) / B (Alg. 2); with ``granularity`` g (hardened),
    ``(round_g(sum) + g Z) / B`` with Z exact discrete Gaussian of parameter sigma C / g. The float
    sum of the two multiples of g is correctly rounded, so a function of their exact sum."""
    from tsdp.mechanisms.noise import gaussian_noise, snap

    total = np.asarray(total, dtype=np.float64)
    noise = gaussian_noise(rng, noise_multiplier * clip, total.size, granularity=granularity).reshape(total.shape)
    return (snap(total, granularity) + noise) / expected_batch


@dataclass
class TrainResult:
    theta: np.ndarray  # the released weights: the last iterate, or the best on validation (opt-in)
    last_theta: np.ndarray
    steps: int
    compositions: int
    epsilon: float | None
    delta: float | None
    plan: Plan
    best_step: int
    best_val_loss: float
    history: list[dict[str, Any]] = field(default_factory=list)


ProgressCallback = Callable[[int, int, float, "float | None"], None]


def validation_loss(model, theta: np.ndarray, split: Split) -> float:
    """Mean per-window NLL over the validation windows (in data units)."""
    total, n = 0.0, split.val_context.shape[0]
    context = split.val_context.shape[1]
    for start in range(0, n, VALIDATION_CHUNK):
        stop = min(n, start + VALIDATION_CHUNK)
        extra = window_features(model, split, split.val_positions[start:stop], context)
        total += float(model.loss(theta, split.val_context[start:stop], split.val_target[start:stop], **extra).sum())
    return total / n


def train(model, split: Split, config: TrainConfig, rng: np.random.Generator,
          progress: ProgressCallback | None = None, plan: Plan | None = None) -> TrainResult:
    """Run DP-SGD (or, with ``config.private`` False, minibatch Adam without noise: on the mean gradient, or
    with ``config.clipped`` on the sum of clipped gradients over B, DP-SGD's step without its noise) on
    ``split.train``."""
    n_series, train_length = split.train.shape[0], split.accounted_length
    if config.private and config.sampler.hardened:  # its lattice's cost depends on the parameter count
        config = with_model(config, model)
    if model_context(model) != config.context or split.val_context.shape[1] != config.context:
        # the accountant's L_C must be every value a window's loss reads (spec pitfall 6)
        raise UsageError(f"model {model.name!r} reads {model_context(model)} values per window, but the accountant "
                         f"and the split were given --context-length {config.context}")
    plan = plan or plan_training(config, n_series, train_length)
    if plan.setting is not None and plan.setting != make_setting(config, n_series, train_length, plan.noise_multiplier):
        # e.g. a hardened lattice's cost accounted for another parameter count: its epsilon would not be this run's
        raise UsageError(f"the plan's accounting setting is not this run's (model {model.name!r} with "
                         f"{config.parameters} parameters, {config.sampler.name} sampler): plan it for this model")
    setting = plan.setting or make_setting(config, n_series, train_length, 1.0)
    sampler = (sampling.WindowSampler(setting) if split.admissible is None
               else sampling.WindowSampler(setting, admissible=split.admissible))
    panel = sampling.PaddedPanel(split.train, config.context, config.horizon)
    base = pld_from_profile(composition_profile(setting, "upper")[0], config.discretization) if config.private else None
    lattice = setting.lattice if config.private else None
    granularity = None if lattice is None else lattice.granularity
    theta = model.init(rng)
    optimizer = Adam(lr=config.lr, weight_decay=config.weight_decay)
    val_every = config.val_every or max(1, round(plan.steps / 25))
    eps_every = max(1, plan.steps // 20)
    best_theta, best_loss, best_step = theta.copy(), validation_loss(model, theta, split), 0
    history: list[dict[str, Any]] = [{"step": 0, "val_loss": best_loss}]
    epsilon_now = None
    for step in range(1, plan.steps + 1):
        series, starts = sampler.next_batch(rng)
        ctx, tgt = panel.gather(series, starts)
        if config.label_noise or config.context_noise:
            ctx, tgt = sampling.augment(ctx, tgt, config.label_noise, config.context_noise, config.value_bound, rng,
                                        hardened=setting.sampler.hardened)
        extra = window_features(model, split, starts, config.context)
        if config.private:
            if series.size:
                losses, total, _ = model.clipped_grad_sum(theta, ctx, tgt, config.clip_norm, **extra)
                loss = float(losses.mean())
            else:  # a Poisson batch can be empty: the noisy step is still taken (and accounted)
                total, loss = np.zeros_like(theta), float("nan")
            grad = dp_gradient(total, plan.noise_multiplier, config.clip_norm, config.batch_size, rng, granularity)
        elif config.clipped:  # the non-private reference that keeps clipping: the same step without noise
            if not series.size:
                continue
            losses, total, _ = model.clipped_grad_sum(theta, ctx, tgt, config.clip_norm, **extra)
            loss, grad = float(losses.mean()), total / config.batch_size
        elif series.size:
            loss, grad = model.mean_grad(theta, ctx, tgt, **extra)
        else:
            continue
        theta = optimizer.step(theta, grad)
        if not np.isfinite(theta).all():  # diverged: every later step and the forecasts would be NaN
            raise NumericalError(f"training diverged at step {step}: the model's parameters are no longer finite "
                                 f"with --lr {config.lr:g}; lower --lr (or --clip-norm); nothing was published")
        if config.private and (step % eps_every == 0 or step == plan.steps):
            epsilon_now = epsilon_of(setting, base, _compositions_done(step, setting), config.delta)
        if step % val_every == 0 or step == plan.steps:
            val = validation_loss(model, theta, split)
            history.append({"step": step, "val_loss": val, "train_loss": loss})
            if val < best_loss:
                best_theta, best_loss, best_step = theta.copy(), val, step
        if progress is not None:
            progress(step, plan.steps, loss, epsilon_now)
    done = _compositions_done(plan.steps, setting) if config.private else 0
    epsilon = epsilon_of(setting, base, done, config.delta) if config.private and done else None
    released = best_theta if config.checkpoint == "best-validation" else theta
    return TrainResult(released, theta, plan.steps, done, epsilon, config.delta if config.private else None,
                       plan, best_step, best_loss, history)


def _compositions_done(steps: int, setting: DpSgdSetting) -> int:
    """Compositions charged after ``steps`` steps: one per step, or one per started epoch."""
    return steps if setting.step_level else math.ceil(steps / setting.steps_per_epoch)


def _by_origin(split: Split) -> list[slice]:
    n = split.train.shape[0]
    return [slice(j * n, (j + 1) * n) for j in range(len(split.test_origins) or 1)]


def _scores(split: Split, quantiles: np.ndarray, median: np.ndarray, season: int,
            levels: tuple[float, ...]) -> dict[str, Any]:
    """CRPS and MASE per forecast origin and their means (the headline figures)."""
    crps = [float(metrics.mean_wql(split.test_target[rows], quantiles[rows], levels)) for rows in _by_origin(split)]
    mase = [float(metrics.mase(split.test_target[rows], median[rows], split.history, season))
            for rows in _by_origin(split)]
    return {"crps": float(np.mean(crps)), "mase": float(np.mean(mase)), "origins": len(crps),
            "crps_by_origin": crps, "mase_by_origin": mase}


def predict_test(model, theta: np.ndarray, split: Split, levels: tuple[float, ...] = metrics.QUANTILE_LEVELS,
                 rng: np.random.Generator | None = None) -> np.ndarray:
    """Quantile forecasts ``(K N, L_F, len(levels))`` of every test window (all origins)."""
    context = split.test_context.shape[1]
    extra = window_features(model, split, split.test_positions, context)
    if rng is not None and getattr(model, "num_samples", None):
        extra["rng"] = rng
    return model.predict_quantiles(theta, split.test_context, levels, **extra)


def evaluate(model, theta: np.ndarray, split: Split, season: int,
             levels: tuple[float, ...] = metrics.QUANTILE_LEVELS) -> dict[str, Any]:
    """CRPS (mean weighted quantile loss) and MASE of the model on the held-out test tail, averaged over
    the forecast origins (``crps``, ``mase``), and per origin."""
    q = predict_test(model, theta, split, levels)
    median = q[:, :, list(levels).index(0.5)] if 0.5 in levels else q.mean(axis=2)
    return _scores(split, q, median, season, levels)


def seasonal_naive_forecasts(split: Split, season: int) -> np.ndarray:
    """The seasonal naive point forecast of every test window from everything before its origin,
    ``(K N, L_F)``: ``y_hat[o + t] = y[o - season + (t mod season)]``."""
    horizon = split.test_target.shape[1]
    values = split.values if split.values is not None else split.history
    origins = split.test_origins or (split.test_position,)
    return np.concatenate([metrics.seasonal_naive(values[:, :o], horizon, season) for o in origins])


def evaluate_seasonal_naive(split: Split, season: int, mase_season: int | None = None,
                            levels: tuple[float, ...] = metrics.QUANTILE_LEVELS) -> dict[str, Any]:
    """The same figures for the seasonal naive forecast (a point forecast: every quantile equal);
    MASE is scaled by the seasonal naive error of ``mase_season`` (default ``season``) on the history."""
    point = seasonal_naive_forecasts(split, season)
    q = np.repeat(point[:, :, None], len(levels), axis=2)
    return _scores(split, q, point, mase_season or season, levels)


def seasonal_baselines(split: Split, seasons, mase_season: int,
                       levels: tuple[float, ...] = metrics.QUANTILE_LEVELS) -> dict[str, dict[str, Any]]:
    """:func:`evaluate_seasonal_naive` for every season the history before the first origin covers,
    keyed ``"seasonal naive (season m)"``."""
    out = {}
    for season in sorted(set(int(m) for m in seasons)):
        if season < split.history.shape[1]:
            out[f"seasonal naive (season {season})"] = evaluate_seasonal_naive(split, season, mase_season, levels)
    return out

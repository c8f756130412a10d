"""A training plan from public parameters: noise, signal-to-noise and wall time against training length.

For a declared budget (epsilon, delta) and the public shape of the panel (N series of L training
steps, the model's receptive field L_C, the horizon L_F), :func:`training_grid` calibrates the noise
multiplier sigma(T, B) for a grid of step counts T and batch sizes B with the same accountant as the
run (Schuchardt et al. 2025, :func:`tsdp.accounting.structured.calibrate_noise`) and states, per row:

* the noise standard deviation per coordinate of the averaged gradient, ``sigma C / B`` (Alg. 2);
* the per-step signal-to-noise ratio ``B / (sigma sqrt(P))``: the largest averaged clipped gradient
  (norm C) over the expected norm of the noise added to it (``sigma C sqrt(P) / B``, P parameters);
* the signal-to-noise ratio of the whole run, ``sqrt(T) B / (sigma sqrt(P))``: T steps add up to at
  most T C of signal against noise of norm ``sqrt(T) sigma C sqrt(P) / B``;
* the wall time, ``T`` times the median time of a DP-SGD step measured on this machine
  (:func:`time_step`: a few steps of the same model on synthetic windows of the run's shape; no data
  is read).

For small sampling rates sigma grows like sqrt(T) at a fixed budget, so the run's signal-to-noise
ratio flattens out as T grows while the time keeps growing. :func:`recommend` picks, for the batch
size of the run, the step count of the grid with the highest run signal-to-noise ratio among those
whose estimated time fits ``time_budget`` (a choice from public parameters only, so it costs no
privacy). Default batch size: :func:`default_batch_size`, at most the series count.
"""

from __future__ import annotations

import math
import re
import time
from dataclasses import dataclass, replace

import numpy as np

from tsdp.errors import UsageError

STEP_GRID = (1000, 2000, 4000, 8000, 16000, 32000)
DEFAULT_BATCH = 256
TIMED_STEPS = 3


def default_batch_size(n_series: int, instances: int = 1) -> int:
    """``min(256, N lambda)``: every step can draw its N' = B / lambda series from N."""
    return max(instances, min(DEFAULT_BATCH, n_series * instances) // instances * instances)


def batch_grid(n_series: int, instances: int, chosen: int) -> tuple[int, ...]:
    """The batch sizes the plan compares: the run's, and a quarter, a half and all of the N lambda
    windows a step can take (multiples of lambda, at least lambda, at most 256 lambda)."""
    cap = min(n_series, DEFAULT_BATCH) * instances
    sizes = {int(chosen)}
    for fraction in (0.25, 0.5, 1.0):
        size = int(cap * fraction) // instances * instances
        if size >= instances:
            sizes.add(size)
    return tuple(sorted(sizes))


@dataclass(frozen=True)
class PlanRow:
    batch_size: int
    steps: int
    noise_multiplier: float
    noise_sd: float  # sigma C / B per coordinate of the averaged gradient
    step_snr: float  # B / (sigma sqrt(P))
    run_snr: float  # sqrt(T) B / (sigma sqrt(P))
    seconds: float | None  # estimated wall time of the training steps

    def to_dict(self) -> dict:
        return {"batch_size": self.batch_size, "steps": self.steps, "noise_multiplier": self.noise_multiplier,
                "noise_sd": self.noise_sd, "step_snr": self.step_snr, "run_snr": self.run_snr,
                "seconds": self.seconds}


def row(batch: int, steps: int, sigma: float, clip: float, parameters: int, seconds_per_step: float | None) -> PlanRow:
    root_p = math.sqrt(parameters)
    return PlanRow(batch, steps, sigma, sigma * clip / batch, batch / (sigma * root_p),
                   math.sqrt(steps) * batch / (sigma * root_p),
                   None if seconds_per_step is None else steps * seconds_per_step)


def training_grid(config, n_series: int, train_length: int, batches, step_grid=STEP_GRID,
                  seconds_per_step: dict[int, float] | None = None) -> list[PlanRow]:
    """Rows of the plan for every (batch size, step count): sigma calibrated at ``config.epsilon`` and
    ``config.delta`` by the run's accountant (:func:`tsdp.forecast.trainer.plan_training`)."""
    from tsdp.forecast.trainer import plan_training

    if config.epsilon is None:
        raise UsageError("the training plan needs the budget: give --epsilon (and --delta)")
    rows = []
    for batch in batches:
        for steps in step_grid:
            trial = replace(config, batch_size=int(batch), steps=int(steps), epochs=None, noise_multiplier=None)
            plan = plan_training(trial, n_series, train_length)
            rows.append(row(int(batch), int(plan.steps), plan.noise_multiplier, config.clip_norm, config.parameters,
                            None if seconds_per_step is None else seconds_per_step.get(int(batch))))
    return rows


def recommend(rows: list[PlanRow], batch_size: int, time_budget: float | None = None) -> PlanRow | None:
    """The row of ``batch_size`` with the highest run signal-to-noise ratio among those whose estimated
    time fits ``time_budget`` seconds (all rows without a budget); the shortest run if none fits."""
    mine = [r for r in rows if r.batch_size == batch_size]
    if not mine:
        return None
    fits = [r for r in mine if time_budget is None or r.seconds is None or r.seconds <= time_budget]
    if not fits:
        return min(mine, key=lambda r: r.steps)
    return max(fits, key=lambda r: (r.run_snr, -r.steps))


def time_step(model, config, batch: int, calendar=None, repeats: int = TIMED_STEPS, setting=None) -> float:
    """Median seconds of one DP-SGD step of ``model`` (clipped per-window gradients of ``batch`` windows,
    noise, Adam) on synthetic windows of the run's shape: public, no data is read. The first step
    (compilation for the JAX models) is not counted."""
    from tsdp.forecast.optim import Adam
    from tsdp.forecast.trainer import dp_gradient

    rng = np.random.default_rng(0)
    context, horizon = config.context, config.horizon
    ctx = rng.gamma(2.0, 1.0, size=(batch, context))
    tgt = rng.gamma(2.0, 1.0, size=(batch, horizon))
    extra = {}
    names = tuple(getattr(model, "time_features", ()))
    if names:
        from tsdp.forecast.timefeatures import Calendar

        positions = rng.integers(context, context + 10_000, size=batch)
        extra["feats"] = (calendar or Calendar()).window_features(names, positions, context, horizon)
    lattice = None if setting is None else setting.lattice
    granularity = None if lattice is None else lattice.granularity
    theta = model.init(rng)
    optimizer = Adam(lr=config.lr, weight_decay=config.weight_decay)
    sigma = setting.noise_multiplier if setting is not None else 1.0
    times = []
    for k in range(repeats + 1):
        started = time.perf_counter()
        _, total, _ = model.clipped_grad_sum(theta, ctx, tgt, config.clip_norm, **extra)
        theta = optimizer.step(theta, dp_gradient(total, sigma, config.clip_norm, batch, rng, granularity))
        if k:
            times.append(time.perf_counter() - started)
    return float(np.median(times))


def parse_duration(text: str, option: str = "--time-budget") -> float:
    """Seconds from ``90``, ``90s``, ``15m``, ``2h`` or ``1h30m``; UsageError otherwise."""
    raw = str(text).strip().lower()
    if re.fullmatch(r"\d+(\.\d+)?", raw):
        seconds = float(raw)
    else:
        parts = re.findall(r"(\d+(?:\.\d+)?)\s*([hms])", raw)
        if not parts or re.sub(r"(\d+(?:\.\d+)?)\s*([hms])", "", raw).strip():
            raise UsageError(f"{option} {text!r}: give a duration such as 900, 15m, 2h or 1h30m")
        seconds = sum(float(v) * {"h": 3600, "m": 60, "s": 1}[u] for v, u in parts)
    if not (seconds > 0 and math.isfinite(seconds)):
        raise UsageError(f"{option} {text!r}: must be a positive duration")
    return seconds

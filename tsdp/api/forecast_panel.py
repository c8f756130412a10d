"""The panel side of ``tsdp forecast-train`` (used by :mod:`tsdp.api.forecast`): the run's batch size,
the calendar of the grid (time features, natural seasons), the seasons of the baselines, the training
windows left by missing steps, the training plan and the forecast table; public parameters and the
panel's shape only, except the forecasts."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np

from tsdp.api.forecast_report import BATCH_RULE, PLAN_RULE
from tsdp.errors import DataError, UsageError


def training_plan(net, config, n_series: int, train_length: int, calendar, budget_seconds,
                   timed: bool = True) -> dict[str, Any]:
    """The training plan of :mod:`tsdp.forecast.plan` (public parameters and this machine's timing only);
    every batch size of the grid when ``timed`` (the dry run, --time-budget), else the run's alone."""
    from tsdp.forecast import plan as training
    from tsdp.forecast.trainer import make_setting

    batches = training.batch_grid(n_series, config.instances, config.batch_size) if timed else (config.batch_size,)
    seconds = {}
    for batch in batches if timed else ():
        sized = replace(config, batch_size=batch)
        setting = make_setting(sized, n_series, train_length, config.noise_multiplier or 1.0)
        seconds[batch] = training.time_step(net, sized, batch, calendar, setting=setting)
    rows = training.training_grid(config, n_series, train_length, batches, seconds_per_step=seconds or None)
    best = training.recommend(rows, config.batch_size, budget_seconds)
    return {"epsilon": config.epsilon, "delta": config.delta, "clip_norm": config.clip_norm,
            "parameters": config.parameters, "step_times": [{"batch_size": b, "seconds": t} for b, t in seconds.items()],
            "time_budget_seconds": budget_seconds, "rows": [r.to_dict() for r in rows],
            "recommended": best.to_dict(), "rule": PLAN_RULE}


def sized(config, batch_size: int | None, n_series: int):
    """The run's batch size: as given (checked against the panel), or min(256, N lambda)."""
    from tsdp.forecast.plan import default_batch_size

    if batch_size is None:
        return replace(config, batch_size=default_batch_size(n_series, config.instances))
    if batch_size // config.instances > n_series:
        raise DataError(f"--batch-size {batch_size} with --instances {config.instances} takes "
                        f"{batch_size // config.instances} series per step, but the input has only {n_series}; lower "
                        f"--batch-size (the default is {BATCH_RULE})")
    return config


def seasons(calendar, split, season: int | None, window: int) -> dict[str, Any]:
    """The headline season (``--season``, or the longest natural season the receptive field covers) and the
    seasons of every naive baseline (1 and the natural seasons of the step, with the headline)."""
    from tsdp.forecast.timefeatures import headline_season, natural_seasons

    natural = natural_seasons(calendar.step_us, calendar.step_months) if calendar.origin is not None else ()
    headline = season if season is not None else headline_season(natural, window)
    history = split.history.shape[1]
    if headline >= history:
        raise UsageError(f"--season {headline} needs a history longer than {history} values before the first test "
                         "window; give a shorter --season")
    return {"headline": headline, "baselines": tuple(sorted({1, headline, *(m for m in natural if m < history)}))}


def calendar(grid):
    """The public time features' calendar of the panel's grid (integer time: positions only)."""
    from tsdp.forecast.timefeatures import Calendar

    step = grid.step
    if step is None or step.unit == "int":
        return Calendar()
    first = grid.points[0]
    if getattr(first, "tzinfo", None) is not None:
        first = first.replace(tzinfo=None)  # calendar features in the series' own wall-clock time
    origin = np.datetime64(first.isoformat(), "us")
    if step.unit == "mo":
        return Calendar(origin, step_months=step.amount)
    return Calendar(origin, step_us=step.amount)


def public_calendar(input, spec):
    """DeepAR's default lags and the natural seasons depend on the time step: the calendar of the public grid."""
    from tsdp.io.files import read_table
    from tsdp.io.timegrid import build_grid
    from tsdp.io.timeparse import parse_time_column

    df = read_table(input, {spec.time_col: "time"}, None)
    times = parse_time_column(df.select(spec.time_col), spec.time_col, spec.timezone)[spec.time_col]
    return calendar(build_grid(times, spec.time_col, spec.freq, True))


def check_receptive_field(length: int, window: int, context: int, horizon: int, val_windows: int,
                           test_windows: int) -> None:
    train_length = length - horizon * (test_windows + val_windows)
    if train_length < window + horizon:
        raise DataError(
            f"series of {length} steps are too short for --model deepar: a window reads --context-length {context} "
            f"plus the largest of --lags minus 1, {window} values, and --forecast-length {horizon}, {window + horizon} "
            f"in all, but {train_length} remain for training after {test_windows} test windows and {val_windows} "
            "validation windows; use smaller --lags or --context-length, or fewer --test-windows"
        )


def skip_gaps(split, table, window: int, horizon: int, held_out_windows: int):
    """``split`` with the training windows that touch a missing step marked inadmissible (and the
    accountant's length with them); DataError if a step is missing where every series needs one: the
    last context and the held-out validation and test steps."""
    if getattr(table, "filled_mask", None) is None or table.filled_cells == 0:
        return split
    from tsdp.forecast import sampling

    mask = ~table.observed_matrix()
    train_length = split.train.shape[1]
    tail = mask[:, max(0, train_length - window):]
    if tail.any():
        i = int(np.flatnonzero(tail.any(axis=1))[0])
        first = table.grid.points[max(0, train_length - window) + int(np.flatnonzero(tail[i])[0])]
        raise DataError(f"series {table.series_names[i]!r} misses the step {first} among its last {tail.shape[1]} "
                        f"(the model's context of {window} before the validation and test windows, and those "
                        f"{horizon * held_out_windows} held-out steps), which every series needs complete: fill it or "
                        "end the series before it")
    admissible = sampling.admissible_starts(mask[:, :train_length], window, horizon)
    sampling.accounted_length(admissible, horizon, table.series_names)  # a series without any window is refused
    return replace(split, admissible=admissible)


def forecast_table(net, theta, split, table, names, rng):
    import polars as pl

    from tsdp.forecast.metrics import QUANTILE_LEVELS
    from tsdp.forecast.trainer import window_features
    from tsdp.io.timegrid import following_points

    horizon = split.test_target.shape[1]
    n, context = split.future_context.shape
    extra = window_features(net, split, np.full(n, split.future_position), context)
    if net.name == "deepar":
        extra["rng"] = rng  # sample paths keyed from the run's generator
    loc, quantiles = net.forecast(theta, split.future_context, QUANTILE_LEVELS, **extra)
    times = following_points(table.grid, horizon)
    series_name = table.series_col or "series"
    frame = {
        series_name: pl.Series(np.repeat(np.array(names, dtype=object), horizon).tolist(),
                               dtype=table.frame.schema[table.series_col] if table.series_col else pl.String),
        table.time_col: pl.concat([times] * len(names)),
        "mean": loc.ravel(),
    }
    for k, q in enumerate(QUANTILE_LEVELS):
        frame[f"q{q:g}"] = quantiles[:, :, k].ravel()
    return pl.DataFrame(frame)

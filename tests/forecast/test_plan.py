"""The training plan (tsdp.forecast.plan): default batch size, the grid's noise multipliers (the run's
own calibration), the signal-to-noise formulas, the recommendation under a time budget, timing on
synthetic windows (no data read), and durations."""

from __future__ import annotations

import math

import numpy as np
import pytest

from tsdp.errors import UsageError
from tsdp.forecast import plan, trainer
from tsdp.forecast.models import make_model

N, LENGTH, CTX, HOR = 12, 400, 8, 4


def config(**changes) -> trainer.TrainConfig:
    model = make_model("linear", CTX, HOR)
    base = dict(context=CTX, horizon=HOR, model="linear", batch_size=12, clip_norm=1e-4, epsilon=1.0, delta=1e-6,
                steps=10, noise_multiplier=None, sampler="float")
    return trainer.with_model(trainer.TrainConfig(**{**base, **changes}), model)


@pytest.mark.parametrize("series, instances, expected", [(23, 1, 23), (400, 1, 256), (5, 2, 10), (300, 3, 255)])
def test_default_batch_size_is_at_most_the_series_count(series, instances, expected):
    assert plan.default_batch_size(series, instances) == expected
    assert expected // instances <= series and expected % instances == 0


def test_batch_grid_holds_the_runs_batch_and_fractions_of_the_panel():
    assert plan.batch_grid(20, 1, 20) == (5, 10, 20)
    assert plan.batch_grid(20, 1, 7) == (5, 7, 10, 20)
    assert plan.batch_grid(1000, 1, 256) == (64, 128, 256)


def test_grid_rows_are_the_runs_calibration_and_the_stated_formulas():
    cfg = config()
    rows = plan.training_grid(cfg, N, LENGTH, [6, 12], step_grid=(50, 200), seconds_per_step={6: 0.01, 12: 0.02})
    assert [(r.batch_size, r.steps) for r in rows] == [(6, 50), (6, 200), (12, 50), (12, 200)]
    for r in rows:
        run = trainer.plan_training(trainer.TrainConfig(**{**cfg.__dict__, "batch_size": r.batch_size,
                                                            "steps": r.steps}), N, LENGTH)
        assert r.noise_multiplier == run.noise_multiplier  # the same accountant and calibration as the run
        assert r.noise_sd == pytest.approx(r.noise_multiplier * 1e-4 / r.batch_size, rel=1e-12)
        assert r.step_snr == pytest.approx(r.batch_size / (r.noise_multiplier * math.sqrt(cfg.parameters)), rel=1e-12)
        assert r.run_snr == pytest.approx(math.sqrt(r.steps) * r.step_snr, rel=1e-12)
        assert r.seconds == pytest.approx(r.steps * (0.01 if r.batch_size == 6 else 0.02), rel=1e-12)
    # more steps at the same budget need more noise
    assert rows[1].noise_multiplier > rows[0].noise_multiplier
    with pytest.raises(UsageError, match="--epsilon"):
        plan.training_grid(config(epsilon=None, noise_multiplier=1.0), N, LENGTH, [6])


def row(batch, steps, snr, seconds):
    return plan.PlanRow(batch, steps, 1.0, 1.0, 1.0, snr, seconds)


def test_recommend_takes_the_best_run_snr_that_fits_the_time_budget():
    rows = [row(8, 1000, 1.0, 10.0), row(8, 2000, 1.2, 20.0), row(8, 4000, 1.3, 40.0), row(8, 8000, 1.25, 80.0),
            row(16, 1000, 9.0, 5.0)]
    assert plan.recommend(rows, 8).steps == 4000  # the highest run SNR of batch 8
    assert plan.recommend(rows, 8, time_budget=30.0).steps == 2000
    assert plan.recommend(rows, 8, time_budget=1.0).steps == 1000  # nothing fits: the shortest
    assert plan.recommend(rows, 32) is None


def test_the_run_snr_peaks_for_a_small_panel_so_the_plan_stops_early():
    """At a fixed budget sigma grows about like sqrt(T) once T is large: the run's signal-to-noise ratio
    sqrt(T) B / (sigma sqrt(P)) rises, then falls, and the recommendation is inside the grid. The setting
    of an hourly panel of 20 series with DeepAR's receptive field 216 (r = 240 / 7977 = 0.03)."""
    cfg = trainer.TrainConfig(context=216, horizon=24, model="deepar", batch_size=20, clip_norm=1e-4, epsilon=1.0,
                              delta=1e-7, steps=10, sampler="float", parameters=25_000)
    rows = plan.training_grid(cfg, 20, 8000, [20], step_grid=(1000, 4000, 8000, 16000, 64000))
    snr = [r.run_snr for r in rows]
    assert max(snr) > snr[0] and max(snr) > snr[-1]
    assert plan.recommend(rows, 20).steps in (4000, 8000, 16000)


def test_time_step_reads_no_data_and_times_the_models_step():
    model = make_model("linear", CTX, HOR)
    cfg = config()
    seconds = plan.time_step(model, cfg, 12)
    assert 0 < seconds < 5


@pytest.mark.parametrize("text, seconds", [("90", 90.0), ("90s", 90.0), ("15m", 900.0), ("2h", 7200.0),
                                           ("1h30m", 5400.0), ("0.5h", 1800.0)])
def test_parse_duration(text, seconds):
    assert plan.parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["soon", "0", "-5m", "5x", "m", ""])
def test_parse_duration_refuses(text):
    with pytest.raises(UsageError, match="--time-budget"):
        plan.parse_duration(text)

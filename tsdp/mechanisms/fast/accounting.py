"""FAST's privacy map (Fan and Xiong 2012, Theorem 2, for the declared unit; module docstring of
:mod:`tsdp.mechanisms.fast`): the public setting -> the noise per sample, the event, the claim's
parameters. No data and no randomness: the release and ``tsdp verify`` call the same map."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from tsdp.accounting import discrete as disc
from tsdp.accounting import gaussian as gauss
from tsdp.accounting.budget import check_delta, check_epsilon
from tsdp.errors import UsageError
from tsdp.mechanisms.baseline import Panel
from tsdp.mechanisms.fast.sampling import changed_samples, samples_per_unit
from tsdp.mechanisms.fast.settings import NOISES, PRESETS, FastSettings, resolve_settings
from tsdp.mechanisms.protocol import PrivacyMap, Setting

FAST_THEOREM = ("Fan and Xiong 2012, Theorem 2 for the declared unit: at most n Laplace samples fall on "
                "changed cells (min(M, changed cells) per series, over the series the unit can change), each "
                "with privacy loss at most Delta_q/lambda, all others with loss 0; filtering and sampling "
                "decisions are post-processing")
FAST_GAUSSIAN_THEOREM = (
    "Fan and Xiong 2012, Theorem 2 argument with Gaussian samples for the declared unit: the at most "
    "n adaptively chosen samples that fall on changed cells (min(M, changed cells) per series, over the "
    "series the unit can change) have squared sensitivities summing to at most n*Delta_q^2, so the "
    "release is Delta_q*sqrt(n)/sigma-GDP "
    "by fully adaptive composition of Gaussian DP (Smith and Thakurta 2022); filtering and sampling "
    "decisions are post-processing; " + gauss.ANALYTIC_THEOREM
)

# the keyword arguments of release_fast that tune the filter and the controller (None: the preset's or default)
TUNING = ("preset", "max_samples", "max_samples_ratio", "interval", "q", "r", "p0", "gains", "ti", "theta", "xi",
          "error", "error_delta", "warmup")


@dataclass(frozen=True)
class FastCalibration:
    """The privacy map of a FAST release with what its recursion needs: the resolved settings and
    the filter's R and P0 (``auto``: from the noise variance)."""

    map: PrivacyMap
    settings: FastSettings
    r: float
    p0: float


def calibrate(setting: Setting) -> FastCalibration:
    """The noise per sample for the declared unit: Laplace ``lambda = Delta_q n / epsilon`` (pure DP) or
    Gaussian ``sigma = analytic_sigma(epsilon, delta, Delta_q sqrt(n))``, n the samples that can fall on
    the unit's changed cells (:func:`changed_samples`); the hardened sampler's lattice and slack from
    :mod:`tsdp.accounting.samplers`. ``setting.options``: ``noise``, ``adaptive`` and :data:`TUNING`."""
    o = setting.options
    panel, delta, noise = setting.panel, setting.delta, o.get("noise", "laplace")
    n_series, n_steps = panel.n_series, panel.n_steps
    preset = o.get("preset")
    if preset is not None and preset not in PRESETS:
        raise UsageError(f"--fast-preset must be one of {', '.join(PRESETS)}, got {preset!r}")
    epsilon = setting.epsilon
    if epsilon is None:
        if preset is None:
            raise UsageError("--epsilon is required (or give --fast-preset cikm2012|streamdp for its epsilon 0.01)")
        epsilon = PRESETS[preset]["epsilon"]
    check_epsilon(epsilon)
    if noise not in NOISES:
        raise UsageError(f"--noise must be one of {', '.join(NOISES)} for --mechanism fast, got {noise!r}")
    if noise == "gaussian":
        if delta is None:
            raise UsageError("--delta is required for --mechanism fast with --noise gaussian")
        check_delta(delta)
    elif delta is not None:
        raise UsageError("--delta does not apply to --mechanism fast with --noise laplace "
                         "(pure epsilon-DP); remove it")
    adaptive = o.get("adaptive", o.get("interval") is None)  # the command line: adaptive unless a fixed interval
    settings = resolve_settings(n_steps, adaptive=adaptive, **{k: o.get(k) for k in TUNING})

    bounds = panel.bounds
    m = settings.max_samples
    reach = bounds.series_reach(n_series, n_steps)
    hits = samples_per_unit(bounds, n_steps, m)  # c: samples of one series that can fall on changed cells
    factor = 2 if bounds.neighbouring == "substitute" else 1
    sensitivity = bounds.max_per_step * factor
    n_hit = changed_samples(bounds, n_series, n_steps, m, None if settings.adaptive else settings.interval)
    coords = factor * n_hit  # samples whose values can differ (the old and the new unit's)
    # Hardened sampler: the sampled values are rounded to multiples of g, so a sample changed by at
    # most Delta_q moves by at most (floor(Delta_q / g) + 1) g (tsdp.accounting.discrete); under
    # substitution twice that covers a cell both units change and two cells one each.
    sampler = setting.sampler
    if noise == "laplace":
        sampler = sampler.on_lattice(lambda d: d / epsilon, sensitivity * n_hit, coords, "l1")
        step = factor * sampler.rounded_step(bounds.max_per_step)  # float: Delta_q itself
        scale = step * n_hit / epsilon
        noise_variance = 2.0 * scale * scale
        event = sampler.laplace_event(sensitivity, step, scale, n_hit)
        definition, claim_delta = "pure-dp", 0.0
        record, theorem = sampler.laplace_record(scale, step * n_hit, FAST_THEOREM)
        noise_params = {"noise": "laplace", "scale": scale, "epsilon_per_sample": epsilon / n_hit, **record}
    else:
        l2 = sensitivity * math.sqrt(n_hit)

        def rounded(g: float | None) -> float:  # a sample changed by Delta_q moves by (floor(Delta_q/g) + 1) g
            return l2 if g is None else factor * disc.rounded_step(bounds.max_per_step, g) * math.sqrt(n_hit)

        sampler, scale, _ = sampler.calibrate_gaussian(
            epsilon, delta, l2, coords, lambda budget, g: (gauss.analytic_sigma(epsilon, budget, rounded(g)), None))
        covered = rounded(sampler.granularity)
        noise_variance = scale * scale
        event = sampler.gaussian_event(l2, covered, scale, coords)
        definition, claim_delta = "approx-dp", float(delta)
        record, theorem = sampler.gaussian_record(epsilon, scale, covered, coords, FAST_GAUSSIAN_THEOREM)
        noise_params = {"noise": "gaussian", "sigma": scale, "l2_sensitivity": l2, **record}
    r_val = noise_variance if settings.r == "auto" else float(settings.r)
    p0_val = r_val if settings.p0 == "auto" else float(settings.p0)
    parameters = _claim_parameters(settings, panel, epsilon, reach, hits, n_hit, sensitivity, r_val, p0_val,
                                   noise_params)
    privacy = PrivacyMap(definition, epsilon, claim_delta, theorem, (event,), parameters, scale, sampler,
                         tuple(settings.warnings) + sampler.warnings)
    return FastCalibration(privacy, settings, r_val, p0_val)


def _claim_parameters(settings: FastSettings, panel: Panel, epsilon: float, touched: int, hits: int,
                      n_hit: int, sensitivity: float, r: float, p0: float, noise_params: dict) -> dict:
    n_series = panel.n_series
    if n_series == 1:
        composition = {"across_series": "single", "series_per_unit": 1, "explanation": "one series"}
    elif touched == 1:
        composition = {"across_series": "parallel", "series_per_unit": 1,
                       "explanation": "a protected unit affects at most one series, so every series "
                                      "gets the whole budget (parallel composition)"}
    elif noise_params["noise"] == "laplace":
        composition = {"across_series": "split", "series_per_unit": touched,
                       "explanation": f"a protected unit may affect {touched} of the {n_series} series: "
                                      f"the budget is split over the {n_hit} samples that can fall on the "
                                      "cells it changes (basic composition)"}
    else:
        composition = {"across_series": "joint", "series_per_unit": touched,
                       "explanation": f"a protected unit may affect {touched} of the {n_series} series: "
                                      f"the noise is calibrated for the {n_hit} Gaussian samples "
                                      "that can fall on the cells it changes (exact composition)"}
    m = settings.max_samples
    most = max(min(m, cells) for _, cells in panel.bounds.series_spread(n_series, panel.n_steps))
    params: dict[str, Any] = {
        "variant": "adaptive" if settings.adaptive else "fixed",
        "preset": settings.preset,
        **noise_params,
        "sensitivity_per_timestamp": sensitivity,
        "series_length_T": panel.n_steps,
        "n_series": n_series,
        "n_steps": panel.n_steps,
        "epsilon_per_series": epsilon * most / n_hit,
        "max_samples_M": m,
        "samples_per_unit": hits,
        "samples_per_unit_rule": "c = min(M, steps of one series the declared unit touches: 1 for event, "
                                 "w for w-event, I for user)",
        "samples_on_changed_cells": n_hit,
        "samples_on_changed_cells_rule": "sum over the series a unit can change, in its worst spread, of "
                                         "min(M, its changed cells): K c for user and event; a w-event unit "
                                         "picks K series at every step, so up to min(S, K w) series",
        "composition": composition,
        "Q": settings.q,
        "R": r,
        "R_mode": "auto (variance of the DP noise)" if settings.r == "auto" else "given",
        "P0": p0,
        "P0_mode": "auto (= R)" if settings.p0 == "auto" else "given",
        "release_rule": "Kalman posterior at sampling points, prior elsewhere (piecewise constant)",
        "initial_interval": 1 if settings.adaptive else settings.interval,
        "min_interval": 1 if settings.adaptive else settings.interval,
    }
    if settings.adaptive:
        cp, ci, cd = settings.gains
        params.update({
            "Cp": cp, "Ci": ci, "Cd": cd, "Ti": settings.ti, "theta": settings.theta, "xi": settings.xi,
            "error_mode": settings.error, "error_delta": settings.error_delta, "warmup": settings.warmup,
            "interval_update": "I' = max(1, I + trunc(theta (1 - exp(min((Delta - xi)/xi, 50)))))",
        })
    else:
        params["interval"] = settings.interval
    params["provenance"] = dict(settings.sources)
    return params

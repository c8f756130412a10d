"""The releases of ``--mechanism subsample`` and ``filter-subsample``: each checks its values, draws the
sampled steps J, and calls its privacy map (:mod:`.maps`) for the claim; the noise and the interpolation
follow (the mask is drawn before the noise, as always, so a seeded release is unchanged)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from tsdp.accounting.samplers import Sampler, sampler_of
from tsdp.mechanisms import filters
from tsdp.mechanisms.baseline import Panel, Release
from tsdp.mechanisms.gaussian import release_gaussian
from tsdp.mechanisms.postprocess import postprocess
from tsdp.mechanisms.protocol import PrivacyMap, Setting
from tsdp.mechanisms.subsample.maps import (fallback_note, filter_accounting, filter_subsample_map,
    prepare_filter, prepare_subsample, series_sigmas, subsample_accounting, subsample_map, with_sampling)
from tsdp.mechanisms.subsample.sampling import draw_sample_mask, _noisy_interpolation, _sampling_parameters
from tsdp.mechanisms.subsample.settings import _as_panel_array


def _fallback(values, panel, epsilon, delta, rng, accounting, warnings, clip_min, shape, name,
              sampler: Sampler) -> Release:
    calibration = "classic" if accounting == "paper" else "analytic"
    rel = release_gaussian(values, panel, epsilon, delta, rng, calibration=calibration, sampler=sampler)
    out = postprocess(rel.values, clip_min=clip_min).reshape(shape)
    return Release(out, rel.claim, tuple(warnings) + (fallback_note(name, calibration),) + tuple(rel.warnings))


def _released(name: str, values: np.ndarray, panel: Panel, m: PrivacyMap, sampling: dict,
              sample_warnings: list) -> Release:
    """The release with its map's claim, the drawn J's ``subsampling`` block added to the parameters."""
    claim = replace(m, parameters=with_sampling(m.parameters, sampling)).claim(name, panel)
    return Release(values, claim, tuple(m.warnings) + tuple(sample_warnings))


def release_subsample(values: np.ndarray, panel: Panel, epsilon: float, delta: float,
                      rng: np.random.Generator, p: float, accounting: str = "exact",
                      clip_min: float | None = None, delta_split: float = 0.5,
                      emit_indices: bool = False, sampler: str = "hardened",
                      granularity: float | None = None) -> Release:
    """Subsample every series in time, add Gaussian noise to the kept steps, interpolate.

    ``values``: float array (n_series, n_steps) in time order (a 1-D series is accepted).
    ``accounting``: ``exact`` (profile of the released pair (J, noisy samples); ``analytic`` is
    accepted as an alias) or ``paper`` (Koga et al. 2022, Corollary 3 with the code's delta split
    ``delta_noise = delta_split * delta``). See the module docstring for the formulas.
    ``sampler="hardened"`` (default): the kept values are rounded to multiples of the granularity
    g and get g times discrete Gaussian noise; a kept cell then moves by at most
    ``M' = (floor(M / g) + 1) g`` and every formula uses M' for M (:func:`.accounting._sampler_record`).
    ``sampler="float"``: numpy's N(0, sigma^2) (not for publication).
    """
    options = {"p": p, "accounting": accounting, "delta_split": delta_split, "clip_min": clip_min}
    subsample_accounting(accounting)  # the options are checked before the values
    arr, shape = _as_panel_array(values, panel)
    prep = prepare_subsample(epsilon, delta, panel, options)
    S, T = arr.shape
    sampler = sampler_of(sampler, granularity)
    if p == 1:
        return _fallback(arr, panel, epsilon, delta, rng, prep.accounting, list(prep.warnings), clip_min, shape,
                         "subsample", sampler)
    m = subsample_map(Setting(epsilon, delta, panel, sampler, options), prep)
    mask, redraws = draw_sample_mask(rng, S, T, p)
    sampling, sample_warnings = _sampling_parameters(mask, p, T, redraws, emit_indices)
    out = _noisy_interpolation(arr, mask, np.full(S, m.scale), rng, m.sampler.granularity)
    out = postprocess(out, clip_min=clip_min)
    return _released("subsample", out.reshape(shape), panel, m, sampling, sample_warnings)


def release_filter_subsample(values: np.ndarray, panel: Panel, epsilon: float, delta: float,
                             rng: np.random.Generator, p: float, kernel="gaussian",
                             accounting: str = "conditional", filter_sigma: float = 10.0,
                             filter_width: int | None = None, clip_min: float | None = None,
                             delta_split: float = 0.5, alpha: float | None = None,
                             emit_indices: bool = False, sampler: str = "hardened",
                             granularity: float | None = None) -> Release:
    """Filter every series circularly, subsample in time, add Gaussian noise, interpolate.

    ``kernel``: see :func:`resolve_kernel`. ``accounting``: ``conditional`` (sensitivity
    ``M s_J sqrt(I)`` given the drawn J, I the unit's changed cells, analytic Gaussian;
    ``delta_split`` and ``alpha`` do not apply) or ``paper`` (Koga et al. 2022, Corollary 2 with
    Theorem 4; ``alpha`` fixes alpha instead of solving, and the resulting delta must fit the budget).
    ``sampler="hardened"`` (default): the sampled filtered values are rounded to multiples of the
    granularity g and get g times discrete Gaussian noise. The filter spreads a unit's change over
    every step of a series it touches, so rounding adds at most ``g sqrt(n_s)`` (n_s kept steps of
    series s; ``g sqrt(T)`` before J is drawn) in each of the n touched series. The conditional
    accounting sets ``sigma_s = M s_J(s) (sqrt(I) + g sqrt(n) rho) / mu*``,
    ``rho = max_s sqrt(n_s) / (M s_J(s))``: the joint mu of the exact change is at most
    ``mu* sqrt(I) / (sqrt(I) + g sqrt(n) rho)`` and that of the rounding at most
    ``mu* g sqrt(n) rho / (sqrt(I) + g sqrt(n) rho)``, mu* together (triangle inequality). The paper's
    uses ``M' = M + g sqrt(n T) / (alpha sqrt(I))``, so that both branches, ``alpha M' sqrt(I)`` and
    ``M' sqrt(I)``, cover the rounding. ``sampler="float"``: numpy's noise (not for publication).
    """
    options = {"p": p, "accounting": accounting, "delta_split": delta_split, "alpha": alpha, "kernel": kernel,
               "filter_sigma": filter_sigma, "filter_width": filter_width, "clip_min": clip_min}
    filter_accounting(accounting, alpha)  # the options are checked before the values
    arr, shape = _as_panel_array(values, panel)
    prep = prepare_filter(epsilon, delta, panel, options)
    S, T = arr.shape
    sampler = sampler_of(sampler, granularity)
    if p == 1:
        return _fallback(arr, panel, epsilon, delta, rng, prep.accounting, list(prep.warnings), clip_min, shape,
                         "filter-subsample", sampler)
    y = filters.circular_filter(arr, prep.h)
    mask, redraws = draw_sample_mask(rng, S, T, p)
    released = {}
    if prep.accounting == "conditional":  # the claim depends on the sampled rows of the filter (public J)
        released = {"s_J": np.array([filters.sampled_sigma_max(prep.h, np.flatnonzero(row), prep.stats)
                                     for row in mask]),
                    "n_sampled": mask.sum(axis=1)}
    m = filter_subsample_map(Setting(epsilon, delta, panel, sampler, options, released), prep)
    sampling, sample_warnings = _sampling_parameters(mask, p, T, redraws, emit_indices)
    out = _noisy_interpolation(y, mask, series_sigmas(m, S), rng, m.sampler.granularity)
    out = postprocess(out, clip_min=clip_min)
    return _released("filter-subsample", out.reshape(shape), panel, m, sampling, sample_warnings)

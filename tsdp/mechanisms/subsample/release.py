"""The releases of ``--mechanism subsample`` and ``filter-subsample`` and their registry entries."""

from __future__ import annotations

import math

import numpy as np

from tsdp.accounting import discrete as disc, timesubsampling as ts
from tsdp.accounting.claim import MechanismEvent
from tsdp.caveats import Caveat
from tsdp.errors import BudgetError, UsageError
from tsdp.mechanisms import filters
from tsdp.mechanisms.baseline import Panel, Release
from tsdp.mechanisms.gaussian import release_gaussian
from tsdp.mechanisms.postprocess import postprocess
from tsdp.accounting.samplers import Sampler, sampler_of
from tsdp.mechanisms.subsample.accounting import (_analytic_sigma, _baseline_comparison, _check_paper_branches,
    _joint, _paper_delta, _paper_privacy, _release, _report_parameters, _sampler_record, THEOREM_CONDITIONAL,
    THEOREM_EXACT, THEOREM_PAPER_FILTER, THEOREM_PAPER_SUBSAMPLE)
from tsdp.mechanisms.subsample.sampling import (draw_sample_mask, interpolate, _noisy_interpolation,
    _sampling_parameters)
from tsdp.mechanisms.subsample.settings import (_as_panel_array, _common_checks, FILTER_ACCOUNTING, _geometry,
    resolve_kernel, SUBSAMPLE_ACCOUNTING)


def _fallback(values, panel, epsilon, delta, rng, accounting, warnings, clip_min, shape, name,
              sampler: Sampler) -> Release:
    calibration = "classic" if accounting == "paper" else "analytic"
    rel = release_gaussian(values, panel, epsilon, delta, rng, calibration=calibration, sampler=sampler)
    out = postprocess(rel.values, clip_min=clip_min).reshape(shape)
    note = Caveat("mechanism_fallback", f"--sampling-rate 1 means no subsampling: {name} reduces to the plain "
                  f"Gaussian mechanism, which was released instead (calibration {calibration})")
    return Release(out, rel.claim, tuple(warnings) + (note,) + tuple(rel.warnings))


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
    ``M' = (floor(M / g) + 1) g`` and every formula uses M' for M (:func:`_sampler_record`).
    ``sampler="float"``: numpy's N(0, sigma^2) (not for publication).
    """
    if accounting == "analytic":
        accounting = "exact"
    if accounting not in SUBSAMPLE_ACCOUNTING:
        raise UsageError(f"--accounting must be one of {', '.join(SUBSAMPLE_ACCOUNTING)} for "
                         f"--mechanism subsample, got {accounting!r}")
    arr, shape = _as_panel_array(values, panel)
    warnings = _common_checks(epsilon, delta, p, panel)
    if accounting == "paper":
        ts.check_split(delta_split)
    steps, I, M, n = _geometry(panel)
    S, T = arr.shape
    sampler = sampler_of(sampler, granularity)
    if p == 1:
        return _fallback(arr, panel, epsilon, delta, rng, accounting, warnings, clip_min, shape, "subsample",
                         sampler)

    parameters: dict = {"paper": ts.PAPER, "mechanism": "subsample", "accounting": accounting}
    if accounting == "exact":
        def calibrate(budget: float, g: float | None):  # g: a kept cell's change after rounding (floor(M/g)+1) g
            cal = ts.exact_subsample(epsilon, budget, I, p, M if g is None else disc.rounded_step(M, g), T, n)
            return cal.sigma, cal

        # hardened: the continuous profile gets delta minus the rounding slack of the I values a unit changes
        sampler, sigma, cal = sampler.calibrate_gaussian(epsilon, delta, M * math.sqrt(I), I, calibrate)
        g, M_noise = sampler.granularity, sampler.rounded_step(M)
        events = (MechanismEvent("gaussian-mixture" if g is None else "discrete-gaussian-mixture",
                                 float(cal.mixture.sensitivities.max()), sigma, 1, mixture=cal.mixture.pairs(),
                                 granularity=g, lattice_coords=None if g is None else I),)
        theorem = THEOREM_EXACT + ("" if n == 1 else f"; the unit's {I} changed cells over up to {n} series "
                                   "taken jointly, each series' empty-sample redraw bounded separately")
        claim_delta = float(delta)
        parameters["privacy"] = {
            "epsilon": epsilon, "delta_total": delta,
            "delta_at_sigma": cal.delta_at_sigma,
            "epsilon_at_sigma": cal.epsilon_at_sigma,
            "calibration": cal.method,
            "mixture_components": int(cal.mixture.counts.size),
            "delta_prime": None,
            "composition": _joint(n),
        }
        parameters["sensitivity"] = {
            "l2_worst_case": M * math.sqrt(I),
            "per_component": ("M sqrt(k)" if g is None else "M' sqrt(k), M' = (floor(M/g) + 1) g (rounded)")
            + ", k = |J cap j_i| ~ Bin(I, p) (public after the fact)",
            "bound_used": "exact binomial mixture (no high-probability bound, no failure term)",
        }
        parameters["noise"] = {"distribution": "gaussian", "sigma": sigma, "calibration": "exact mixture profile"}
        degradation = ts.exact_degradation(sigma, delta, I, p, M_noise, T, n)
        paper_cmp = ts.paper_subsample(epsilon, delta, I, p, M, 0.5, T, n)
        parameters["paper_sigma_same_budget"] = paper_cmp.sigma
    else:
        sampler = sampler.on_lattice(lambda _d: ts.paper_subsample(epsilon, delta, I, p, M, delta_split, T, n).sigma,
                                     M * math.sqrt(I), I, "l2", (epsilon, delta))
        g, M_noise = sampler.granularity, sampler.rounded_step(M)
        cal = ts.paper_subsample(epsilon, delta, I, p, M_noise, delta_split, T, n)
        if g is not None:
            disc.check_lattice_scale(cal.sigma, g, "sigma")
        rate = 0.0 if g is None else disc.slack_rate(cal.sigma / g, I)  # the unit's changed values
        warnings += _check_paper_branches(cal, epsilon, f"--epsilon {epsilon:g}", rate)
        sigma = cal.sigma
        events = ()
        theorem = THEOREM_PAPER_SUBSAMPLE + ("" if n == 1 else f"; applied to the unit's {I} changed cells over "
                                             f"up to {n} series jointly")
        claim_delta = _paper_delta(cal.delta_total, delta)
        if cal.i_prime >= I:
            warnings.append(Caveat("no_amplification", f"I' = I = {I}: subsampling gives no amplification at this budget; use a "
                            "larger --delta, a smaller --sampling-rate, or --mechanism gaussian"))
        parameters["privacy"] = _paper_privacy(cal, n, epsilon)
        parameters["sensitivity"] = {
            "l2_worst_case": M * math.sqrt(I),
            "l2_high_prob": M * math.sqrt(cal.i_prime),
            "I_prime": cal.i_prime,
            "alpha": cal.alpha,
            "hoeffding_I_prime": ts.hoeffding_i_prime(I, p, cal.delta_prime) if cal.delta_prime > 0 else None,
            "bound_used": "Theorem 2 (exact binomial tail)",
        }
        parameters["noise"] = {"distribution": "gaussian", "sigma": sigma,
                               "c": float(ts.classical_c(cal.delta_noise)),
                               "calibration": "classical sqrt(2 ln(1.25/delta_noise))",
                               "delta_split": delta_split}
        degradation = ts.degradation_subsample(epsilon, cal.delta_noise, I, cal.i_prime, p, T, series=n)
    if g is not None:
        parameters["sensitivity"].update(rounded_per_step=M_noise, rounded_l2_worst_case=M_noise * math.sqrt(I))
    record, theorem_tail, sampler_warnings = _sampler_record(sampler, sigma, I, epsilon, accounting == "paper")
    theorem += theorem_tail
    warnings += sampler_warnings

    mask, redraws = draw_sample_mask(rng, S, T, p)
    sampling, sample_warnings = _sampling_parameters(mask, p, T, redraws, emit_indices)
    warnings += sample_warnings
    out = _noisy_interpolation(arr, mask, np.full(S, sigma), rng, g)
    out = postprocess(out, clip_min=clip_min)
    baseline = _baseline_comparison(panel, epsilon, delta)

    note = ("privacy if the true participation bound were c*I: "
            + ("Proposition 1 analogue without filter (spec section 1.4)" if accounting == "paper"
               else "exact mixture with floor(cI) cells, same sigma and delta"))
    parameters.update({"sigma": sigma, **record,
                       **_report_parameters(panel, steps, I, n, M, sampling, clip_min, baseline, degradation, note)})
    return _release("subsample", out.reshape(shape), panel, epsilon, claim_delta, theorem, events,
                    parameters, warnings)


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
    if accounting not in FILTER_ACCOUNTING:
        raise UsageError(f"--accounting must be one of {', '.join(FILTER_ACCOUNTING)} for "
                         f"--mechanism filter-subsample, got {accounting!r}")
    if alpha is not None and accounting != "paper":
        raise UsageError("--filter-alpha applies only to --accounting paper (the conditional accounting "
                         "computes sigma_max of the sampled filter rows instead)")
    arr, shape = _as_panel_array(values, panel)
    warnings = _common_checks(epsilon, delta, p, panel)
    if accounting == "paper":
        ts.check_split(delta_split)
    steps, I, M, n = _geometry(panel)
    S, T = arr.shape
    h, filter_info, kernel_warnings = resolve_kernel(kernel, T, filter_sigma, filter_width)
    warnings += kernel_warnings
    sampler = sampler_of(sampler, granularity)
    if p == 1:
        return _fallback(arr, panel, epsilon, delta, rng, accounting, warnings, clip_min, shape,
                         "filter-subsample", sampler)
    stats = filters.KernelStats(filter_info["L"], filter_info["srank"], filter_info["sigma_max"])
    y = filters.circular_filter(arr, h)
    parameters: dict = {"paper": ts.PAPER, "mechanism": "filter-subsample", "accounting": accounting}

    if accounting == "paper":
        cal = ts.paper_filter(epsilon, delta, I, p, stats.L, stats.srank, M, delta_split, T, alpha, n)
        sampler = sampler.on_lattice(lambda _d: cal.sigma, M * math.sqrt(I), T * n, "l2", (epsilon, delta))
        g = sampler.granularity
        M_noise = M
        if g is not None:  # alpha does not depend on M: the same alpha, both branches cover the rounding
            M_noise = M + g * math.sqrt(n * T) / (cal.alpha * math.sqrt(I))
            cal = ts.paper_filter(epsilon, delta, I, p, stats.L, stats.srank, M_noise, delta_split, T, alpha, n)
        if cal.delta_total > delta * (1 + 1e-12):
            raise BudgetError(f"--filter-alpha {alpha:g} gives delta {cal.delta_total:.4g} > --delta {delta:g}; "
                              "use a larger alpha or let tsdp solve for it")
        if g is not None:
            disc.check_lattice_scale(cal.sigma, g, "sigma")
        # the filter spreads a change over the T values of each touched series
        rate = 0.0 if g is None else disc.slack_rate(cal.sigma / g, n * T)
        warnings += _check_paper_branches(cal, epsilon, f"--epsilon {epsilon:g}", rate)
        if cal.alpha_at_floor:
            warnings.append(Caveat("paper_accounting", f"the budget is met at the validity floor alpha = sqrt(p + L) = {cal.alpha:.6g}: "
                            f"the failure term is {cal.failure_term:.3g}, below its share of delta"))
        if cal.alpha >= 1:
            warnings.append(Caveat("no_amplification", "alpha = 1: the filter bound gives no amplification at this budget"))
        mask, redraws = draw_sample_mask(rng, S, T, p)
        sigmas = np.full(S, cal.sigma)
        sigma_report: float | list = cal.sigma
        events = ()
        theorem = THEOREM_PAPER_FILTER + ("" if n == 1 else f"; applied to the unit's {I} changed cells over up "
                                          f"to {n} series jointly, delta' summed over the series")
        claim_delta = _paper_delta(cal.delta_total, delta)
        parameters["privacy"] = _paper_privacy(cal, n, epsilon)
        parameters["sensitivity"] = {
            "l2_worst_case": M * math.sqrt(I),
            "l2_high_prob": M * cal.alpha * math.sqrt(I),
            "alpha": cal.alpha,
            "alpha_given": alpha is not None,
            "alpha_floor": ts.alpha_floor(p, stats.L),
            "I_prime": None,
            "bound_used": "Theorem 4 (Tropp intrinsic-dimension matrix Chernoff)",
            "tropp_condition_alpha2_ge_p_plus_L": ts.tropp_condition(cal.alpha, p, stats.L),
        }
        parameters["noise"] = {"distribution": "gaussian", "sigma": cal.sigma,
                               "c": float(ts.classical_c(cal.delta_noise)),
                               "calibration": "classical sqrt(2 ln(1.25/delta_noise))",
                               "delta_split": delta_split}
        degradation = ts.degradation_filter(epsilon, cal.delta_noise, cal.alpha, cal.delta_prime)
        degradation_note = "Koga et al. 2022, Proposition 1: privacy if the true participation bound were c*I"
        if g is not None:
            parameters["sensitivity"].update(rounded_per_step=M_noise,
                                             rounded_l2_high_prob=M_noise * cal.alpha * math.sqrt(I),
                                             rounded_l2_worst_case=M_noise * math.sqrt(I))
    else:
        mask, redraws = draw_sample_mask(rng, S, T, p)
        s_J = np.array([filters.sampled_sigma_max(h, np.flatnonzero(row), stats) for row in mask])
        sens = M * s_J * math.sqrt(I)
        low = float(sens.min())  # public given J; the smallest sigma sets the default lattice

        def calibrate(budget: float, g: float | None):  # one sigma per series, for its rounded sensitivity
            covered = sens if g is None else sens * (1 + ts.rounding_share(M * s_J, mask.sum(axis=1), I, n, g))
            return np.array([_analytic_sigma(epsilon, budget, s) for s in covered]), covered

        # hardened: the continuous profile gets delta minus the rounding slack of the n T values a unit changes
        sampler, sigmas, covered = sampler.calibrate_gaussian(epsilon, delta, low, T * n, calibrate,
                                                              first=lambda d: _analytic_sigma(epsilon, d, low))
        g = sampler.granularity
        worst = int(np.argmax(covered / sigmas))
        mu_total = covered[worst] / sigmas[worst]
        sigma_report = float(sigmas[0]) if S == 1 else float(sigmas.max())
        events = (MechanismEvent("gaussian", float(covered[worst]), float(sigmas[worst]), 1) if g is None else
                  MechanismEvent("discrete-gaussian", float(covered[worst]), float(sigmas[worst]), 1,
                                 granularity=g, lattice_coords=n * T),)
        theorem = THEOREM_CONDITIONAL + ("" if n == 1 else f"; the unit's {I} changed cells over up to {n} series "
                                         "taken jointly (each series' sigma proportional to its s_J)")
        claim_delta = float(delta)
        parameters["privacy"] = {
            "epsilon": epsilon, "delta_total": delta, "delta_prime": None,
            "composition": ("single series" if n == 1 else
                            f"sigma_s = M s_J(s) sqrt(I) / mu* in every series, so the cells of a unit in up to "
                            f"{n} series, {I} in all, move the release by at most mu* jointly (exact)"),
        }
        parameters["sensitivity"] = {
            "l2_worst_case": M * math.sqrt(I),
            "s_J": s_J.tolist(),
            "l2_conditional": sens.tolist(),
            "bound_used": ("sigma_max of the sampled filter rows, from the Gram matrix of the circular "
                           "autocorrelation (dense eigenvalues or Lanczos), computed given the public J"),
        }
        if g is not None:
            parameters["sensitivity"]["rounded_l2_conditional"] = covered.tolist()
        parameters["noise"] = {"distribution": "gaussian", "sigma": sigma_report,
                               "sigma_per_series": sigmas.tolist(),
                               "calibration": "analytic (Balle and Wang 2018, Theorem 8)"}
        degradation = ts.gaussian_degradation(mu_total, delta)
        degradation_note = ("privacy if the true participation bound were c*I: mu grows by sqrt(c), "
                            "epsilon at the same delta from the exact Gaussian profile")

    record, theorem_tail, sampler_warnings = _sampler_record(sampler, float(sigmas.min()), T * n, epsilon,
                                                             accounting == "paper")
    theorem += theorem_tail
    warnings += sampler_warnings
    sampling, sample_warnings = _sampling_parameters(mask, p, T, redraws, emit_indices)
    warnings += sample_warnings
    out = _noisy_interpolation(y, mask, sigmas, rng, g)
    out = postprocess(out, clip_min=clip_min)
    baseline = _baseline_comparison(panel, epsilon, delta)

    parameters.update({"sigma": sigma_report, "filter": filter_info, **record,
                       **_report_parameters(panel, steps, I, n, M, sampling, clip_min, baseline, degradation,
                                            degradation_note)})
    return _release("filter-subsample", out.reshape(shape), panel, epsilon, claim_delta, theorem, events,
                    parameters, warnings)

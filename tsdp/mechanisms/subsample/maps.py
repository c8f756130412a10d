"""The privacy maps of ``--mechanism subsample`` and ``filter-subsample``: public setting -> claim.

Pure functions (no data, no randomness) of :class:`tsdp.mechanisms.protocol.Setting`; the releases
(:mod:`.release`) call them for their claims and ``tsdp verify`` calls the same maps. The formulas are
those of the package docstring (:mod:`tsdp.mechanisms.subsample`).

``Setting.options`` keywords (the registry entries' ``options``): ``p``, ``accounting``,
``delta_split``; for filter-subsample also ``kernel`` (a kernel name, or the custom taps as numbers;
``custom`` with the taps in ``filter_kernel``), ``filter_sigma``, ``filter_width`` and ``alpha`` (Koga
et al.'s filter parameter). ``clip_min`` (library callers only; the command line clips after the
release) is recorded in the ``postprocessing`` block.

``Setting.released`` (only filter-subsample's ``conditional`` accounting reads it: its per-series
sigma depends on the sampled steps J, public once released), either

* ``s_J``: S floats, ``sigma_max`` of the sampled rows of the filter in each series, and
  ``n_sampled``: S ints, the sampled steps of each series (a report records them as
  ``parameters.sensitivity.s_J`` and ``parameters.subsampling.n_sampled``); or
* ``sampled``: the (S, T) boolean mask of J (a report made with the sampled indices records it as
  ``parameters.subsampling.indices``), from which both are computed.

The maps give every report parameter except ``subsampling`` (the drawn J: its sizes, redraws and
indices), which the release adds after ``assumption``; at ``p = 1`` (no subsampling) the map is the
plain Gaussian mechanism's that the release falls back to (its claim names ``gaussian``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from tsdp.accounting import discrete as disc, timesubsampling as ts
from tsdp.accounting.claim import MechanismEvent
from tsdp.caveats import Caveat
from tsdp.errors import BudgetError, DataError, UsageError
from tsdp.mechanisms import filters
from tsdp.mechanisms.baseline import Panel
from tsdp.mechanisms.gaussian import GAUSSIAN
from tsdp.mechanisms.protocol import PrivacyMap, Setting
from tsdp.mechanisms.subsample.accounting import (_analytic_sigma, _baseline_comparison, _check_paper_branches,
    _joint, _paper_delta, _paper_privacy, _report_parameters, _sampler_record, THEOREM_CONDITIONAL, THEOREM_EXACT,
    THEOREM_PAPER_FILTER, THEOREM_PAPER_SUBSAMPLE)
from tsdp.mechanisms.subsample.settings import (_common_checks, FILTER_ACCOUNTING, _geometry, resolve_kernel,
    SUBSAMPLE_ACCOUNTING)


@dataclass(frozen=True)
class Prepared:
    """What both a map and its release need of the public setting, checked once: the accounting, the
    parameter warnings so far, the geometry ``(steps, I, M, n)`` and (filter-subsample) the kernel."""

    accounting: str
    warnings: tuple
    steps: int
    I: int
    M: float
    n: int
    h: np.ndarray | None = None
    filter_info: dict | None = None
    stats: filters.KernelStats | None = None


def subsample_accounting(accounting: str) -> str:
    """``exact`` or ``paper`` (``analytic`` is an alias of ``exact``); UsageError otherwise."""
    if accounting == "analytic":
        accounting = "exact"
    if accounting not in SUBSAMPLE_ACCOUNTING:
        raise UsageError(f"--accounting must be one of {', '.join(SUBSAMPLE_ACCOUNTING)} for "
                         f"--mechanism subsample, got {accounting!r}")
    return accounting


def filter_accounting(accounting: str, alpha: float | None) -> str:
    """``conditional`` or ``paper``; ``--filter-alpha`` only with ``paper``. UsageError otherwise."""
    if accounting not in FILTER_ACCOUNTING:
        raise UsageError(f"--accounting must be one of {', '.join(FILTER_ACCOUNTING)} for "
                         f"--mechanism filter-subsample, got {accounting!r}")
    if alpha is not None and accounting != "paper":
        raise UsageError("--filter-alpha applies only to --accounting paper (the conditional accounting "
                         "computes sigma_max of the sampled filter rows instead)")
    return accounting


def _checked(epsilon: float, delta: float, panel: Panel, p: float, accounting: str, delta_split: float) -> tuple:
    if panel.n_steps < 2:
        raise DataError(f"a series needs at least 2 time steps after grid completion, got {panel.n_steps}")
    warnings = _common_checks(epsilon, delta, p, panel)
    if accounting == "paper":
        ts.check_split(delta_split)
    return warnings, _geometry(panel)


def prepare_subsample(epsilon: float, delta: float, panel: Panel, options) -> Prepared:
    accounting = subsample_accounting(options.get("accounting", "exact"))
    warnings, (steps, I, M, n) = _checked(epsilon, delta, panel, options["p"], accounting,
                                          options.get("delta_split", 0.5))
    return Prepared(accounting, tuple(warnings), steps, I, M, n)


def kernel_of(options, read_numbers=None):
    """The kernel of ``options``: its name, or the custom taps (``custom`` with ``filter_kernel``: numbers,
    or a file read by ``read_numbers(path, option)``, the caller's I/O; a map has none)."""
    kernel, taps = options.get("kernel", "gaussian"), options.get("filter_kernel")
    if isinstance(kernel, str) and kernel == "custom":
        if taps is None:
            raise UsageError("--filter custom needs --filter-kernel FILE")
        if isinstance(taps, str):
            if read_numbers is None:
                raise UsageError("--filter-kernel: the privacy map needs the kernel's taps as numbers, not a file")
            return read_numbers(taps, "--filter-kernel")
        return [float(t) for t in taps]
    if taps is not None:
        raise UsageError("--filter-kernel needs --filter custom")
    return kernel


def stated_kernel(stats: dict) -> tuple[None, dict, list]:
    """A custom kernel known by its recorded statistics only (``kernel_stats``: ``taps``, ``L``, ``srank``,
    ``sigma_max``; a report records no taps): ``(None, filter block, no warnings)``. The accounting needs
    only these given the released s_J (conditional) or alpha (paper); the sampled rows' s_J cannot be
    recomputed without the taps (the ``sampled`` route refuses)."""
    info = {"type": "custom", "taps": int(stats["taps"]), "L": float(stats["L"]), "srank": float(stats["srank"]),
            "sigma_max": float(stats["sigma_max"]), "circular": True,
            "convention": "y_t = sum_k x_k h_{(t-k) mod T} (circular convolution by FFT)"}
    return None, info, []


def prepare_filter(epsilon: float, delta: float, panel: Panel, options) -> Prepared:
    """The checked setting of filter-subsample; the kernel from ``kernel`` (and ``filter_kernel``), or a
    custom kernel's recorded statistics ``kernel_stats`` (:func:`stated_kernel`, for verification)."""
    accounting = filter_accounting(options.get("accounting", "conditional"), options.get("alpha"))
    warnings, (steps, I, M, n) = _checked(epsilon, delta, panel, options["p"], accounting,
                                          options.get("delta_split", 0.5))
    if options.get("kernel_stats") is not None:
        h, info, kernel_warnings = stated_kernel(options["kernel_stats"])
    else:
        h, info, kernel_warnings = resolve_kernel(kernel_of(options), panel.n_steps,
                                                  options.get("filter_sigma", 10.0), options.get("filter_width"))
    stats = filters.KernelStats(info["L"], info["srank"], info["sigma_max"])
    return Prepared(accounting, tuple(warnings) + tuple(kernel_warnings), steps, I, M, n, h, info, stats)


def fallback_note(name: str, calibration: str) -> Caveat:
    return Caveat("mechanism_fallback", f"--sampling-rate 1 means no subsampling: {name} reduces to the plain "
                  f"Gaussian mechanism, which was released instead (calibration {calibration})")


def _fallback_map(setting: Setting, prep: Prepared, name: str) -> PrivacyMap:
    """``p = 1``: the plain Gaussian mechanism's map (classic calibration for the paper accounting)."""
    calibration = "classic" if prep.accounting == "paper" else "analytic"
    m = GAUSSIAN.privacy_map(replace(setting, options={"calibration": calibration}))
    return replace(m, warnings=(*prep.warnings, fallback_note(name, calibration), *m.warnings))


def subsample_map(setting: Setting, prep: Prepared | None = None) -> PrivacyMap:
    """The claim of ``--mechanism subsample`` (exact: the binomial mixture profile, sigma the smallest
    meeting (epsilon, delta); paper: Corollary 3), without the ``subsampling`` block."""
    epsilon, delta, panel, o = setting.epsilon, setting.delta, setting.panel, setting.options
    prep = prep or prepare_subsample(epsilon, delta, panel, o)
    if o["p"] == 1:
        return _fallback_map(setting, prep, "subsample")
    p, accounting, delta_split = o["p"], prep.accounting, o.get("delta_split", 0.5)
    steps, I, M, n, T = prep.steps, prep.I, prep.M, prep.n, panel.n_steps
    warnings = list(prep.warnings)
    parameters: dict = {"paper": ts.PAPER, "mechanism": "subsample", "accounting": accounting}
    if accounting == "exact":
        def calibrate(budget: float, g: float | None):  # g: a kept cell's change after rounding (floor(M/g)+1) g
            cal = ts.exact_subsample(epsilon, budget, I, p, M if g is None else disc.rounded_step(M, g), T, n)
            return cal.sigma, cal

        # hardened: the continuous profile gets delta minus the rounding slack of the I values a unit changes
        sampler, sigma, cal = setting.sampler.calibrate_gaussian(epsilon, delta, M * math.sqrt(I), I, calibrate)
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
        parameters["paper_sigma_same_budget"] = ts.paper_subsample(epsilon, delta, I, p, M, 0.5, T, n).sigma
    else:
        sampler = setting.sampler.on_lattice(
            lambda _d: ts.paper_subsample(epsilon, delta, I, p, M, delta_split, T, n).sigma,
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
            warnings.append(Caveat("no_amplification", f"I' = I = {I}: subsampling gives no amplification at this "
                                   "budget; use a larger --delta, a smaller --sampling-rate, or --mechanism gaussian"))
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
    note = ("privacy if the true participation bound were c*I: "
            + ("Proposition 1 analogue without filter (spec section 1.4)" if accounting == "paper"
               else "exact mixture with floor(cI) cells, same sigma and delta"))
    parameters.update({"sigma": sigma, **record,
                       **_report_parameters(panel, steps, I, n, M, None, o.get("clip_min"),
                                            _baseline_comparison(panel, epsilon, delta), degradation, note)})
    del parameters["subsampling"]  # the drawn J: the release adds it (with_sampling)
    return PrivacyMap("approx-dp", epsilon, claim_delta, theorem + theorem_tail, events, parameters, sigma, sampler,
                      (*warnings, *sampler_warnings))


def released_figures(released, prep: Prepared, n_series: int, n_steps: int) -> tuple[np.ndarray, np.ndarray]:
    """``(s_J, n_sampled)`` per series from ``Setting.released`` (module docstring); UsageError when
    they are missing or do not fit the panel."""
    if "sampled" in released:
        if prep.h is None:
            raise UsageError("the sampled rows' s_J need the kernel's taps, which a custom kernel's report "
                             "does not record")
        mask = np.asarray(released["sampled"], dtype=bool)
        if mask.shape != (n_series, n_steps) or not mask.any(axis=1).all():
            raise UsageError(f"released sampled steps: need a non-empty sample in each of {n_series} series x "
                             f"{n_steps} steps, got shape {mask.shape}")
        s_J = np.array([filters.sampled_sigma_max(prep.h, np.flatnonzero(row), prep.stats) for row in mask])
        return s_J, mask.sum(axis=1)
    if "s_J" not in released or "n_sampled" not in released:
        raise UsageError("filter-subsample's conditional accounting needs the released sampled steps "
                         "(released 's_J' and 'n_sampled', or 'sampled')")
    s_J = np.asarray(released["s_J"], dtype=float)
    kept = np.asarray(released["n_sampled"], dtype=np.int64)
    if s_J.shape != (n_series,) or kept.shape != (n_series,) or not np.all((kept >= 1) & (kept <= n_steps)):
        raise UsageError(f"released s_J and n_sampled must list {n_series} figures (sample sizes in [1, {n_steps}])")
    return s_J, kept


def filter_subsample_map(setting: Setting, prep: Prepared | None = None) -> PrivacyMap:
    """The claim of ``--mechanism filter-subsample`` (conditional: given the released J, sigma_s =
    M s_J(s) sqrt(I) / mu* per series; paper: Corollary 2), without the ``subsampling`` block."""
    epsilon, delta, panel, o = setting.epsilon, setting.delta, setting.panel, setting.options
    prep = prep or prepare_filter(epsilon, delta, panel, o)
    if o["p"] == 1:
        return _fallback_map(setting, prep, "filter-subsample")
    p, accounting, delta_split, alpha = o["p"], prep.accounting, o.get("delta_split", 0.5), o.get("alpha")
    steps, I, M, n, stats = prep.steps, prep.I, prep.M, prep.n, prep.stats
    S, T = panel.n_series, panel.n_steps
    warnings = list(prep.warnings)
    parameters: dict = {"paper": ts.PAPER, "mechanism": "filter-subsample", "accounting": accounting}
    if accounting == "paper":
        cal = ts.paper_filter(epsilon, delta, I, p, stats.L, stats.srank, M, delta_split, T, alpha, n)
        sampler = setting.sampler.on_lattice(lambda _d: cal.sigma, M * math.sqrt(I), T * n, "l2", (epsilon, delta))
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
            warnings.append(Caveat("paper_accounting", f"the budget is met at the validity floor alpha = sqrt(p + L) = "
                                   f"{cal.alpha:.6g}: the failure term is {cal.failure_term:.3g}, below its share "
                                   "of delta"))
        if cal.alpha >= 1:
            warnings.append(Caveat("no_amplification", "alpha = 1: the filter bound gives no amplification at this "
                                   "budget"))
        sigmas = np.full(S, cal.sigma)
        sigma_report: float = cal.sigma
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
        s_J, kept = released_figures(setting.released, prep, S, T)
        sens = M * s_J * math.sqrt(I)
        low = float(sens.min())  # public given J; the smallest sigma sets the default lattice

        def calibrate(budget: float, g: float | None):  # one sigma per series, for its rounded sensitivity
            covered = sens if g is None else sens * (1 + ts.rounding_share(M * s_J, kept, I, n, g))
            return np.array([_analytic_sigma(epsilon, budget, s) for s in covered]), covered

        # hardened: the continuous profile gets delta minus the rounding slack of the n T values a unit changes
        sampler, sigmas, covered = setting.sampler.calibrate_gaussian(epsilon, delta, low, T * n, calibrate,
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
    parameters.update({"sigma": sigma_report, "filter": prep.filter_info, **record,
                       **_report_parameters(panel, steps, I, n, M, None, o.get("clip_min"),
                                            _baseline_comparison(panel, epsilon, delta), degradation,
                                            degradation_note)})
    del parameters["subsampling"]  # the drawn J: the release adds it (with_sampling)
    return PrivacyMap("approx-dp", epsilon, claim_delta, theorem + theorem_tail, events, parameters, sigma_report,
                      sampler, (*warnings, *sampler_warnings))


def series_sigmas(m: PrivacyMap, n_series: int) -> np.ndarray:
    """The noise sigma of every series a map calibrated (the conditional accounting's differ)."""
    per_series = m.parameters["noise"].get("sigma_per_series")
    return np.full(n_series, m.scale) if per_series is None else np.asarray(per_series, dtype=float)


def with_sampling(parameters: dict, sampling: dict) -> dict:
    """The report's parameters: the map's with the drawn J's ``subsampling`` block after ``assumption``."""
    out = {}
    for key, value in parameters.items():
        out[key] = value
        if key == "assumption":
            out["subsampling"] = sampling
    return out

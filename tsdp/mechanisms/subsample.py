"""Subsampling in time, with and without a smoothing filter (Koga, Meehan and Chaudhuri 2022).

Koga, Meehan and Chaudhuri, "Privacy Amplification by Subsampling in Time Domain" (AISTATS 2022,
arXiv:2201.04762), Algorithm 1, for every series x (length T) of a panel:

1. (``filter-subsample`` only) y = A x, a circular non-negative filter with unit row sums
   (:mod:`tsdp.mechanisms.filters`); otherwise y = x;
2. J ~ Bernoulli(p)^T, drawn independently per series and independently of the data
   (an empty J is redrawn, which is data-independent too; the accounting conditions each series
   on J != {});
3. z = y_J + N(0, sigma^2 I_|J|);
4. the release is the linear interpolation of (J, z) over 0..T-1, constant before min J and after
   max J (``numpy.interp``); optional clipping. Both are post-processing given the public J.

Accounting. ``I`` = the unit's changed cells over all series (the participation bound of
Assumption 1 times the series it touches, doubled under substitution, at most T per series;
:meth:`ContributionBounds.changed_cells`), ``n`` = the series they can lie in, ``M`` = per-step
cap. All series share sigma and are sampled independently, so given every J the touched series
are one Gaussian mechanism with sensitivity ``M sqrt(k)``, k the sampled changed cells: the
accountings take the unit's cells jointly; the spread over the n series matters only through the
redraw of empty samples (:mod:`tsdp.accounting.timesubsampling`, module docstring):

* ``subsample``, ``exact`` (default): the released pair (J, noisy samples) has the privacy profile
  ``delta(eps) = sum_k w_k deltaGauss(eps; M sqrt(k) / sigma)``, w dominating the law of k for
  every spread (for n = 1 the exactly conditioned ``Bin(k; I, p)``); sigma is the smallest that
  meets (epsilon, delta).
* ``subsample``, ``paper``: Corollary 3 (corrected exponent) with Theorem 2's exact binomial tail,
  ``sigma = c(delta_noise) M sqrt(I') / epsilon``, applied to the unit's I cells jointly.
* ``filter-subsample``, ``conditional`` (default; spec section 4.1, not in the paper): given J, a
  series' change is at most ``s_J ||change||``, ``s_J = sigma_max(A_J)``; each series gets
  ``sigma_s = M s_J(s) sqrt(I) / mu*`` (analytic mu* of (epsilon, delta)), so the touched series'
  joint mu is ``sqrt(sum_s c_s) / sqrt(I) mu* <= mu*`` for any c_s cells per series summing to at
  most I: (epsilon, delta), no failure term.
* ``filter-subsample``, ``paper``: Corollary 2 with Theorem 4 (alpha solved as in the authors'
  ``find_alpha_log``), ``sigma = c(delta_noise) M alpha sqrt(I) / epsilon``, the failure
  probability delta' summed over the n series.

``p = 1`` is no subsampling: the plain Gaussian baseline is released instead (with a warning).

Noise (``sampler``). ``hardened`` (default): the sampled values are rounded to multiples of a
power-of-two granularity g (chosen from public parameters, :mod:`tsdp.accounting.discrete`) and get
g times exact discrete Gaussian noise of parameter sigma / g; the sensitivities above are those of
the rounded values (``M' = (floor(M/g) + 1) g`` per kept cell without filter; after the filter,
which spreads a change over a whole series, ``+ g sqrt(n_s)`` in each touched series). Given the
public J the release is then a discrete Gaussian mechanism, whose profile is the continuous one with
the same sensitivity plus a rounding slack that the calibration pays out of delta
(:mod:`tsdp.accounting.discrete`).
``float``: numpy's N(0, sigma^2), for experiments only.
"""

from __future__ import annotations

import math

import numpy as np

from tsdp.accounting import discrete as disc
from tsdp.accounting import gaussian as gauss
from tsdp.accounting import timesubsampling as ts
from tsdp.accounting.budget import check_delta, check_epsilon
from tsdp.accounting.claim import MechanismEvent, PrivacyClaim
from tsdp.accounting.sensitivity import ContributionBounds, privacy_unit
from tsdp.caveats import Caveat
from tsdp.errors import BudgetError, DataError, NumericalError, UsageError
from tsdp.mechanisms import filters
from tsdp.mechanisms.baseline import Panel, Release, release_gaussian
from tsdp.mechanisms.noise import FLOAT_WARNING, gaussian_noise, snap
from tsdp.mechanisms.postprocess import postprocess

SUBSAMPLE_ACCOUNTING = ("exact", "paper")
FILTER_ACCOUNTING = ("conditional", "paper")
CHUNK_CELLS = 1 << 20  # cells of the panel handled at once (bounds the temporary arrays)

THEOREM_EXACT = (
    "exact privacy profile of the released pair (J, noisy samples): "
    "delta(eps) = sum_k Bin(k; I, p) deltaGauss(eps; M sqrt(k)/sigma), k = |J cap j_i| "
    "(conditioning on the public J as in Koga et al. 2022, Theorem 2; Gaussian profile of "
    "Balle and Wang 2018, Theorem 8)"
)
THEOREM_PAPER_SUBSAMPLE = (
    "Koga et al. 2022, Corollary 3 (with the corrected exponent exp(eps sqrt(I/I'))) with "
    "Theorem 2's exact binomial tail; each branch's classical Gaussian bound (Theorem 1) "
    "re-verified with the exact Gaussian profile (Balle and Wang 2018, Theorem 8)"
)
THEOREM_PAPER_FILTER = (
    "Koga et al. 2022, Corollary 2 with Theorem 4 (Tropp 2015 matrix Chernoff bound, side "
    "condition alpha^2 >= p + L); each branch's classical Gaussian bound (Theorem 1) re-verified "
    "with the exact Gaussian profile (Balle and Wang 2018, Theorem 8)"
)
THEOREM_CONDITIONAL = (
    "Gaussian mechanism conditional on the public, data-independent J with sensitivity "
    "M sigma_max(A_J) sqrt(I) (tsdp's conditional accounting of the filter-subsample mechanism of "
    "Koga et al. 2022, spec section 4.1); analytic calibration, Balle and Wang 2018, Theorem 8"
)


# ---------------------------------------------------------------------------------------------
# the privacy unit of Assumption 1
# ---------------------------------------------------------------------------------------------


def participation_bounds(n_steps: int, max_steps: int | None = None, assume_none: bool = False,
                         max_per_step: float = 1.0, neighbouring: str = "add-remove",
                         series_per_unit: int | None = None) -> ContributionBounds:
    """User-level bounds of Assumption 1: at most I steps (``--max-steps``), M per step.

    I has no silent default (spec section 4.1): it is required unless ``assume_none`` (I = T, the
    assumption-free version of the paper's remark after Theorem 4). I > T is refused.
    """
    if assume_none:
        if max_steps is not None and max_steps != n_steps:
            raise UsageError(f"--max-steps {max_steps} contradicts --assume-none (which sets I = T = {n_steps})")
        max_steps = n_steps
    if max_steps is None:
        raise UsageError("--max-steps (the participation bound I of Assumption 1) is required for the "
                         "subsampling mechanisms; pass it, or --assume-none to use I = T")
    ts.check_participation(max_steps, n_steps)
    return ContributionBounds("user", max_per_step, max_steps=max_steps,
                              series_per_unit=series_per_unit, neighbouring=neighbouring)


def _geometry(panel: Panel) -> tuple[int, int, float, int]:
    """``(steps of one series, I = the unit's changed cells, M, n = the series they can lie in)``
    for the Koga accounting (:meth:`ContributionBounds.changed_cells`)."""
    bounds, T = panel.bounds, panel.n_steps
    if bounds.level == "user" and bounds.max_steps is not None and bounds.max_steps > T:
        ts.check_participation(bounds.max_steps, T)
    series, cells = bounds.changed_cells(panel.n_series, T)
    return bounds.steps_per_series(T), cells, float(bounds.max_per_step), series


# ---------------------------------------------------------------------------------------------
# sampling, noise and interpolation
# ---------------------------------------------------------------------------------------------


def draw_sample_mask(rng: np.random.Generator, n_series: int, n_steps: int, p: float) -> tuple[np.ndarray, int]:
    """J for every series as a boolean (S, T) mask: ``uniform < p`` cell by cell (Bernoulli(p)).

    A series whose J came out empty is redrawn until it is not (data-independent; the accounting
    conditions on J != {}). Returns the mask and the number of redraws.
    """
    check_sample_size(p, n_steps)
    mask = np.empty((n_series, n_steps), dtype=bool)
    rows = max(1, CHUNK_CELLS // max(n_steps, 1))
    for start in range(0, n_series, rows):
        stop = min(start + rows, n_series)
        mask[start:stop] = rng.random((stop - start, n_steps)) < p
    redraws = 0
    empty = np.flatnonzero(~mask.any(axis=1))
    for _ in range(MAX_REDRAW_ROUNDS):  # a bound on top of the check: the loop always ends
        if not empty.size:
            return mask, redraws
        redraws += empty.size
        mask[empty] = rng.random((empty.size, n_steps)) < p
        empty = empty[~mask[empty].any(axis=1)]
    raise NumericalError(f"--sampling-rate {p:g}: {empty.size} series still had an empty sample after "
                         f"{MAX_REDRAW_ROUNDS:,} redraws; raise --sampling-rate")


def interpolate(mask: np.ndarray, knots: np.ndarray) -> np.ndarray:
    """Linear interpolation of every row through its knots, constant outside them.

    ``mask`` (S, T) marks J; ``knots`` (S, T) holds z at the marked cells (other cells ignored).
    Row-wise this equals ``numpy.interp(arange(T), J, z)``: z_k at j_k, linear in between,
    ``z_1`` before ``j_1`` and ``z_m`` after ``j_m`` (Koga et al. 2022, App. 2.1). Vectorised with
    running maxima/minima of the knot positions; every row needs at least one knot.
    """
    mask = np.asarray(mask, dtype=bool)
    S, T = mask.shape
    t = np.arange(T)
    prev = np.maximum.accumulate(np.where(mask, t, -1), axis=1)
    nxt = np.minimum.accumulate(np.where(mask, t, T)[:, ::-1], axis=1)[:, ::-1]
    prev_ok = prev >= 0
    nxt_ok = nxt < T
    left = np.where(prev_ok, prev, nxt)
    right = np.where(nxt_ok, nxt, prev)
    rows = np.arange(S)[:, None]
    z_left = knots[rows, left]
    z_right = knots[rows, right]
    span = right - left
    frac = np.divide(t - left, span, out=np.zeros((S, T)), where=span > 0)
    return z_left + (z_right - z_left) * frac


def _noisy_interpolation(y: np.ndarray, mask: np.ndarray, sigma: np.ndarray,
                         rng: np.random.Generator, granularity: float | None = None) -> np.ndarray:
    """``interpolate(mask, y_J + N(0, sigma_s^2))`` for every series s, by chunks of series.

    The noise comes from :func:`tsdp.mechanisms.noise.gaussian_noise`: one draw with the common
    sigma, or standard normals scaled per series when the sigmas differ. With ``granularity`` g
    (hardened sampler) the sampled values are rounded to multiples of g and get g times discrete
    Gaussian noise of parameter sigma_s / g instead (one draw per series when the sigmas differ: a
    discrete Gaussian cannot be rescaled). Long series (more than ``CHUNK_CELLS / 4`` steps) are
    interpolated one by one with ``numpy.interp``, which needs no temporary (S, T) index arrays.
    """
    S, T = y.shape
    out = np.empty((S, T))
    counts = mask.sum(axis=1)
    uniform = bool(np.all(sigma == sigma[0]))
    rows = max(1, CHUNK_CELLS // T)
    t = np.arange(T)
    for start in range(0, S, rows):
        stop = min(start + rows, S)
        m = mask[start:stop]
        n = int(counts[start:stop].sum())
        if uniform:
            noise = gaussian_noise(rng, float(sigma[0]), n, granularity=granularity)
        elif granularity is not None:
            noise = np.concatenate([gaussian_noise(rng, float(sd), int(c), granularity=granularity)
                                    for sd, c in zip(sigma[start:stop], counts[start:stop])])
        else:
            noise = gaussian_noise(rng, 1.0, n)
            noise *= np.repeat(sigma[start:stop], counts[start:stop])
        z = snap(y[start:stop][m], granularity) + noise  # row by row, in time order
        if T > CHUNK_CELLS // 4:
            offsets = np.concatenate([[0], np.cumsum(counts[start:stop])])
            for r in range(stop - start):
                knots = np.flatnonzero(m[r])
                out[start + r] = np.interp(t, knots, z[offsets[r]:offsets[r + 1]])
        else:
            knots = np.zeros((stop - start, T))
            knots[m] = z
            out[start:stop] = interpolate(m, knots)
    return out


# ---------------------------------------------------------------------------------------------
# shared validation, warnings and claim parts
# ---------------------------------------------------------------------------------------------


def _as_panel_array(values, panel: Panel) -> tuple[np.ndarray, tuple]:
    arr = np.asarray(values, dtype=float)
    shape = arr.shape
    if arr.ndim == 1:
        arr = arr[None, :]
    if arr.shape != (panel.n_series, panel.n_steps):
        raise ValueError(f"values of shape {shape} do not match the panel "
                         f"({panel.n_series} series x {panel.n_steps} steps)")
    if panel.n_steps < 2:
        raise DataError(f"a series needs at least 2 time steps after grid completion, got {panel.n_steps}")
    if not np.all(np.isfinite(arr)):
        raise DataError("values must be finite (no NaN or infinity)")
    return arr, shape


# A series' sample J must be non-empty with at least this probability: an empty J is redrawn, so a
# smaller chance means more than a thousand redraws per series on average (and p = 1e-300 for ever).
MIN_NONEMPTY = 1e-3
MAX_REDRAW_ROUNDS = 1_000_000


def nonempty_probability(p: float, n_steps: int) -> float:
    """P(J != {}) for Bernoulli(p) sampling of ``n_steps`` steps: 1 - (1 - p)^T, without cancellation."""
    return 1.0 if p >= 1 else -math.expm1(n_steps * math.log1p(-p))


def check_sample_size(p: float, n_steps: int) -> None:
    """UsageError when a non-empty sample is so unlikely that redrawing it would not end in time."""
    chance = nonempty_probability(p, n_steps)
    if chance < MIN_NONEMPTY:
        floor = -math.expm1(math.log1p(-MIN_NONEMPTY) / n_steps)
        raise UsageError(f"--sampling-rate {p:g}: a series of T={n_steps} steps samples p*T = {p * n_steps:.3g} "
                         f"steps on average, so a non-empty sample (which the mechanism needs) would take about "
                         f"{1 / chance:.3g} draws per series; use --sampling-rate {floor * 1.001:.3g} or more")


def _common_checks(epsilon: float, delta: float, p: float, panel: Panel) -> list[str]:
    check_epsilon(epsilon)
    check_delta(delta)
    ts.check_rate(p)
    T = panel.n_steps
    check_sample_size(p, T)
    warnings = []
    if delta >= 1.0 / T:
        warnings.append(Caveat("delta_too_large", f"--delta {delta:g} is at least 1/T = {1 / T:.3g}: such a delta allows "
                        "releasing a whole time step in the clear; use a smaller delta"))
    if T * p < 2:
        warnings.append(Caveat("few_sampled_steps", f"T * p = {T * p:.3g} < 2: most draws keep at most one step, and the "
                        "release is then constant"))
    return warnings


def _fallback(values, panel, epsilon, delta, rng, accounting, warnings, clip_min, shape, name,
              sampler: str = "hardened", granularity: float | None = None) -> Release:
    calibration = "classic" if accounting == "paper" else "analytic"
    rel = release_gaussian(values, panel, epsilon, delta, rng, calibration=calibration, sampler=sampler,
                           granularity=granularity)
    out = postprocess(rel.values, clip_min=clip_min).reshape(shape)
    note = Caveat("mechanism_fallback", f"--sampling-rate 1 means no subsampling: {name} reduces to the plain "
                  f"Gaussian mechanism, which was released instead (calibration {calibration})")
    return Release(out, rel.claim, tuple(warnings) + (note,) + tuple(rel.warnings))


def _sampling_parameters(mask: np.ndarray, p: float, T: int, redraws: int, emit: bool) -> tuple[dict, list[str]]:
    counts = mask.sum(axis=1)
    params = {
        "scheme": "poisson/bernoulli (each step kept independently with probability p)",
        "p": p,
        "n_sampled": counts.tolist(),
        "empty_sample_policy": ("an empty J is redrawn (data-independent); the accounting "
                                "conditions each touched series on J non-empty (factor 1/(1-(1-p)^T) "
                                "per series)"),
        "probability_empty": ts.empty_probability(T, p),
        "empty_redraws": redraws,
        "indices": [np.flatnonzero(row).tolist() for row in mask] if emit else None,
    }
    warnings = []
    single = int(np.sum(counts == 1))
    if single:
        warnings.append(Caveat("single_sampled_step", f"{single} series kept a single time step: their release is constant"))
    return params, warnings


def _assumption(panel: Panel, steps: int, cells: int, series: int, M: float) -> dict:
    bounds = panel.bounds
    return {
        "name": "bounded participation (Assumption 1)",
        "I": steps,
        "I_effective": cells,
        "series": series,
        "M": M,
        "T": panel.n_steps,
        "level": bounds.level,
        "neighbouring": bounds.neighbouring,
        "assume_none": bounds.level == "user" and steps == panel.n_steps,
        "enforced": panel.enforced,
        "note": "the guarantee is conditional on I (see degradation: a true bound cI costs about sqrt(c) epsilon)",
    }


def _baseline_comparison(panel: Panel, epsilon: float, delta: float) -> dict:
    l2 = panel.bounds.l2(panel.n_series, panel.n_steps)
    return {
        "gaussian_sigma_same_budget": gauss.analytic_sigma(epsilon, delta, l2),
        "gaussian_classic_sigma_same_budget": gauss.classic_sigma(epsilon, delta, l2),
        "gaussian_l2_sensitivity": l2,
    }


def _check_paper_branches(cal: ts.PaperCalibration, epsilon: float, option: str, rate: float = 0.0) -> list[str]:
    """Refuse a paper calibration whose Gaussian branches fail the exact profile (spec 4.2); with the
    hardened sampler each branch also pays its rounding slack ``(1 + e^eps) rate``."""
    success, failure = cal.exact_branch_deltas
    success += disc.rounding_slack(epsilon, rate)
    failure += disc.rounding_slack(cal.epsilon_failure_branch, rate)
    if success > cal.delta_noise or failure > cal.delta_noise:
        raise BudgetError(
            f"--accounting paper: at {option} the classical Gaussian calibration does not give "
            f"(epsilon, delta_noise) on both branches under the exact profile (deltas {success:.3g} "
            f"and {failure:.3g} > {cal.delta_noise:.3g}); use a smaller --epsilon or the exact accounting"
        )
    warnings = []
    if epsilon >= 1:
        warnings.append(Caveat("paper_accounting", f"--accounting paper: Theorem 1 (classical Gaussian) assumes epsilon < 1; at "
                        f"epsilon {epsilon:g} both branches were verified with the exact Gaussian profile"))
    elif cal.epsilon_failure_branch >= 1:
        warnings.append(Caveat("paper_accounting", f"--accounting paper: the failure branch has epsilon "
                        f"{cal.epsilon_failure_branch:.4g} >= 1, outside Theorem 1; it was verified "
                        "with the exact Gaussian profile (spec pitfall 6)"))
    return warnings


def _paper_delta(total: float, delta: float) -> float:
    """The delta a paper-accounting claim states: the corollary's total (it may be below --delta).
    Above --delta it would be understated by stating --delta (the min of the two did, by up to 1e-12
    relative with a given --filter-alpha): refused instead."""
    if total > delta:
        raise NumericalError(f"the paper accounting's delta {total:.17g} exceeds --delta {delta:g}; "
                             "use --accounting exact/conditional, or another --filter-alpha")
    return float(total)


def _paper_privacy(cal: ts.PaperCalibration, series: int, epsilon: float) -> dict:
    return {
        "epsilon": epsilon,
        "delta_total": cal.delta_total,
        "delta_fail_budget": cal.delta_fail,
        "delta_noise": cal.delta_noise,
        "delta_failure_term": cal.failure_term,
        "delta_prime": cal.delta_prime,
        "epsilon_failure_branch": cal.epsilon_failure_branch,
        "exact_gaussian_delta_success_branch": cal.exact_branch_deltas[0],
        "exact_gaussian_delta_failure_branch": cal.exact_branch_deltas[1],
        "composition": _joint(series),
    }


def _joint(series: int) -> str:
    return ("single series" if series == 1 else
            f"the unit's cells in up to {series} series taken jointly: given every J the series are one "
            "Gaussian mechanism; each series' empty-sample redraw is accounted separately")


def _analytic_sigma(epsilon: float, delta: float, sensitivity: float) -> float:
    """Analytic sigma for ``sensitivity``: the certified calibrator's answer, whose certificate is
    already the profile at mu = sensitivity / sigma as an auditor computes it."""
    return gauss.analytic_sigma(epsilon, delta, sensitivity)


# ---------------------------------------------------------------------------------------------
# the hardened sampler (module docstring of tsdp.accounting.discrete)
# ---------------------------------------------------------------------------------------------


def _granularity(sampler: str, granularity: float | None, sigma0, sensitivity: float, coords: int,
                 slack: tuple[float, float]) -> float | None:
    """The lattice of a hardened release, None for the float sampler.

    ``granularity`` when given, else the default of :func:`tsdp.accounting.discrete.choose_granularity`
    from ``sigma0()``, a public sigma calibrated without the rounding (called only then), the
    unrounded L2 ``sensitivity`` of the unit and the ``coords`` released numbers it can change, and
    ``slack``, the release's (epsilon, delta), which pays the rounding slack.
    """
    g, _ = disc.lattice(sampler, granularity, lambda _d: sigma0(), sensitivity, coords, "l2", slack)
    return g


def _sampler_record(g: float | None, sigma_min: float, coords: int, epsilon: float,
                    paper: bool) -> tuple[dict, str, list[str]]:
    """(report parameters, theorem suffix, warnings) of the sampler that drew the noise.

    Hardened: given the public J the release is a discrete Gaussian mechanism on the rounded
    values, which a unit changes in at most ``coords`` places; its profile is the continuous one of
    the rounded sensitivities plus the rounding slack ``(1 + e^eps) coords 0.025 (g / sigma)^2``
    (:mod:`tsdp.accounting.discrete`), which the calibration paid out of delta (``paper``: the
    paper accountings pay it in the corollary's two Gaussian branches instead).
    """
    if g is None:
        return {"sampler": "float"}, "", [FLOAT_WARNING]
    disc.check_lattice_scale(sigma_min, g, "sigma")
    slack = disc.rounding_slack(epsilon, disc.slack_rate(sigma_min / g, coords))
    where = "in the corollary's Gaussian branches" if paper else "out of delta"
    theorem = (f"; {disc.GAUSSIAN_THEOREM}, given the public J (rounding slack {slack:.3g} paid {where}), the "
               "sensitivities above being those of the rounded samples")
    return {"sampler": "hardened", "granularity": g, "rounding_slack": slack}, theorem, []


# ---------------------------------------------------------------------------------------------


def _report_parameters(panel: Panel, steps: int, cells: int, series: int, M: float, sampling: dict, clip_min,
                       baseline: dict, degradation, degradation_note: str) -> dict:
    """The public report parameters both subsampling mechanisms share (spec section 4.3)."""
    return {
        "assumption": _assumption(panel, steps, cells, series, M),
        "subsampling": sampling,
        "interpolation": {"kind": "linear", "extrapolation": "constant-nearest"},
        "postprocessing": {"clip_min": clip_min},
        "baseline_comparison": baseline,
        "gaussian_sigma_same_budget": baseline["gaussian_sigma_same_budget"],
        "degradation": degradation,
        "degradation_note": degradation_note,
        "n_series": panel.n_series,
        "n_steps": panel.n_steps,
        "composition": panel.composition,
    }


def _release(mechanism: str, values: np.ndarray, panel: Panel, epsilon: float, delta: float, theorem: str,
             events: tuple, parameters: dict, warnings: list[str]) -> Release:
    """The release with its approximate-DP claim for the panel's unit."""
    claim = PrivacyClaim(
        definition="approx-dp",
        unit=privacy_unit(panel.bounds, panel.n_series, panel.id_column, panel.enforced),
        epsilon=float(epsilon), delta=delta, mechanism=mechanism, theorem=theorem,
        events=events, parameters=parameters,
    )
    return Release(values, claim, tuple(warnings))


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
    if p == 1:
        return _fallback(arr, panel, epsilon, delta, rng, accounting, warnings, clip_min, shape, "subsample",
                         sampler, granularity)

    def sigma0() -> float:  # public: the float calibration's sigma
        if accounting == "paper":
            return ts.paper_subsample(epsilon, delta, I, p, M, delta_split, T, n).sigma
        return ts.exact_subsample(epsilon, delta, I, p, M, T, n).sigma

    scale0 = sigma0() if sampler == "hardened" else None
    g = _granularity(sampler, granularity, lambda: scale0, M * math.sqrt(I), I, (epsilon, delta))
    M_noise = M if g is None else disc.rounded_step(M, g)  # a kept cell's change after rounding

    parameters: dict = {"paper": ts.PAPER, "mechanism": "subsample", "accounting": accounting}
    if accounting == "exact":
        # hardened: the continuous profile gets delta minus the rounding slack of the I values a unit changes
        budget = delta if g is None else disc.slack_budget(epsilon, delta, scale0 / g, I)
        cal = ts.exact_subsample(epsilon, budget, I, p, M_noise, T, n)
        sigma = cal.sigma
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
    record, theorem_tail, sampler_warnings = _sampler_record(g, sigma, I, epsilon, accounting == "paper")
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


# ---------------------------------------------------------------------------------------------
# filter-subsample
# ---------------------------------------------------------------------------------------------


def resolve_kernel(kernel, n_steps: int, filter_sigma: float = 10.0,
                   filter_width: int | None = None) -> tuple[np.ndarray, dict, list[str]]:
    """The circular kernel, its public description and warnings.

    ``kernel``: ``gaussian`` (width ``filter_sigma``), ``triangle``, ``boxcar`` (``filter_width``),
    ``identity``, or an array of non-negative custom taps (centred, normalised to sum 1).
    """
    warnings = []
    if isinstance(kernel, str):
        h = filters.make_kernel(kernel, n_steps, sigma=filter_sigma, width=filter_width)
        info = {"type": kernel}
        if kernel == "gaussian":
            info["sigma_g"] = float(filter_sigma)
            if filter_sigma > n_steps / 6:
                warnings.append(Caveat("filter_wraps", f"--filter-sigma {filter_sigma:g} > T/6 = {n_steps / 6:.3g}: the circular "
                                "wrap of the filter dominates"))
        elif kernel == "boxcar":
            info["width"] = filter_width
        elif kernel == "identity":
            warnings.append(Caveat("filter_identity", "--filter identity: use --mechanism subsample, whose analysis (Theorem 2) "
                            "is tighter for the identity filter"))
    else:
        taps = np.asarray(kernel, dtype=float)
        h = filters.place_taps(n_steps, taps)
        info = {"type": "custom", "taps": int(taps.size)}
    stats = filters.kernel_stats(h)
    if abs(stats.sigma_max - 1.0) > 1e-9:  # cannot happen for non-negative taps of sum 1
        raise UsageError(f"--filter-kernel: sigma_max(A) = {stats.sigma_max:.12g} != 1")
    info.update({"L": stats.L, "srank": stats.srank, "sigma_max": stats.sigma_max, "circular": True,
                 "convention": "y_t = sum_k x_k h_{(t-k) mod T} (circular convolution by FFT)"})
    return h, info, warnings


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
    if p == 1:
        return _fallback(arr, panel, epsilon, delta, rng, accounting, warnings, clip_min, shape,
                         "filter-subsample", sampler, granularity)
    stats = filters.KernelStats(filter_info["L"], filter_info["srank"], filter_info["sigma_max"])
    y = filters.circular_filter(arr, h)
    parameters: dict = {"paper": ts.PAPER, "mechanism": "filter-subsample", "accounting": accounting}

    if accounting == "paper":
        cal = ts.paper_filter(epsilon, delta, I, p, stats.L, stats.srank, M, delta_split, T, alpha, n)
        g = _granularity(sampler, granularity, lambda: cal.sigma, M * math.sqrt(I), T * n, (epsilon, delta))
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
        scale0 = _analytic_sigma(epsilon, delta, low) if sampler == "hardened" else None
        g = _granularity(sampler, granularity, lambda: scale0, low, T * n, (epsilon, delta))
        covered = sens if g is None else sens * (1 + ts.rounding_share(M * s_J, mask.sum(axis=1), I, n, g))
        # hardened: the continuous profile gets delta minus the rounding slack of the n T values a unit changes
        budget = delta if g is None else disc.slack_budget(epsilon, delta, scale0 / g, T * n)
        sigmas = np.array([_analytic_sigma(epsilon, budget, s) for s in covered])
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

    record, theorem_tail, sampler_warnings = _sampler_record(g, float(sigmas.min()), T * n, epsilon,
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

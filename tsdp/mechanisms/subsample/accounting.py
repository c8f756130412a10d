"""The claims of the subsampling mechanisms: theorems, paper-accounting checks, the sampler's record
and the report parameters both mechanisms share."""

from __future__ import annotations


import numpy as np

from tsdp.accounting import discrete as disc, gaussian as gauss, timesubsampling as ts
from tsdp.accounting.claim import PrivacyClaim
from tsdp.caveats import Caveat
from tsdp.errors import BudgetError, NumericalError
from tsdp.mechanisms.baseline import Panel, Release
from tsdp.accounting.samplers import Sampler


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
        "assume_none": bounds.unit.uses_max_steps and steps == panel.n_steps,
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


def _sampler_record(sampler: Sampler, sigma_min: float, coords: int, epsilon: float,
                    paper: bool) -> tuple[dict, str, list[str]]:
    """(report parameters, theorem suffix, warnings) of the sampler that drew the noise.

    Hardened: given the public J the release is a discrete Gaussian mechanism on the rounded
    values, which a unit changes in at most ``coords`` places; its profile is the continuous one of
    the rounded sensitivities plus the rounding slack ``(1 + e^eps) coords 0.025 (g / sigma)^2``
    (:mod:`tsdp.accounting.discrete`), which the calibration paid out of delta (``paper``: the
    paper accountings pay it in the corollary's two Gaussian branches instead).
    """
    record, slack = sampler.lattice_record(epsilon, sigma_min, coords)
    if slack is None:
        return record, "", list(sampler.warnings)
    where = "in the corollary's Gaussian branches" if paper else "out of delta"
    theorem = (f"; {disc.GAUSSIAN_THEOREM}, given the public J (rounding slack {slack:.3g} paid {where}), the "
               "sensitivities above being those of the rounded samples")
    return record, theorem, list(sampler.warnings)


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
        unit=panel.bounds.privacy_unit(panel.n_series, panel.id_column, panel.enforced),
        epsilon=float(epsilon), delta=delta, mechanism=mechanism, theorem=theorem,
        events=events, parameters=parameters,
    )
    return Release(values, claim, tuple(warnings))

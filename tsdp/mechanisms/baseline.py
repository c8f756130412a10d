"""Calibrated Gaussian and Laplace baselines for a panel of S series x T steps.

The whole panel is released by one additive-noise mechanism on the S*T vector, whose sensitivity
follows from the privacy unit (:mod:`tsdp.accounting.sensitivity`). For the Gaussian this is the
exact composition of the per-series Gaussian mechanisms (Gaussian mechanisms compose by adding
their squared mu = sensitivity/sigma), so sharing one (epsilon, delta) across the series this way is
never looser than splitting the budget. For the Laplace mechanism the L1 sensitivity adds over the
series, which is basic composition of the per-series budgets.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from tsdp.accounting import discrete as disc
from tsdp.accounting import gaussian as gauss
from tsdp.accounting.budget import check_epsilon
from tsdp.accounting.claim import MechanismEvent, PrivacyClaim
from tsdp.accounting.sensitivity import ContributionBounds, privacy_unit
from tsdp.caveats import Caveat
from tsdp.errors import UsageError
from tsdp.mechanisms.noise import FLOAT_WARNING, NoiseStream, PrefetchedNormals, gaussian_noise, laplace_noise, snap

LAPLACE_THEOREM = "Dwork, McSherry, Nissim and Smith 2006; Dwork and Roth 2014, Theorem 3.6 (Laplace mechanism)"
CALIBRATIONS = ("analytic", "classic")


@dataclass(frozen=True)
class Panel:
    """Shape of the released panel and who is protected."""

    n_series: int
    n_steps: int
    bounds: ContributionBounds
    id_column: str | None = None
    enforced: bool = False

    @property
    def composition(self) -> dict:
        """How one (epsilon, delta) covers the S series, in data and in words."""
        series = self.bounds.series_reach(self.n_series, self.n_steps)  # a w-event unit: K per step
        if self.n_series == 1:
            how, text = "single", "one series"
        elif series == 1:
            how = "parallel"
            text = (
                "parallel composition: a protected unit affects at most one series, "
                "so the whole panel costs the budget of one series"
            )
        else:
            how = "joint"
            text = (
                f"the budget is shared by the {self.n_series} series: a protected unit may "
                f"affect up to {series} of them, and the panel is released by one mechanism "
                f"whose sensitivity covers all {series} (exact composition across series)"
            )
        return {"across_series": how, "series_per_unit": series, "explanation": text}


@dataclass(frozen=True)
class Release:
    values: np.ndarray
    claim: PrivacyClaim
    warnings: tuple[str, ...] = field(default=())


def gaussian_sigma(
    epsilon: float, delta: float, sensitivity: float, calibration: str = "analytic"
) -> tuple[float, str, list[str]]:
    """Noise sigma, the theorem that proves it, and warnings, for one Gaussian mechanism.

    ``analytic``: the smallest sigma meeting the exact profile (Balle and Wang, Thm 8).
    ``classic``: ``sqrt(2 ln(1.25/delta)) Delta / epsilon``; proven by Dwork and Roth only for
    epsilon < 1. For epsilon >= 1 tsdp accepts it only when the exact profile confirms it.
    """
    if calibration == "analytic":
        return gauss.analytic_sigma(epsilon, delta, sensitivity), gauss.ANALYTIC_THEOREM, []
    if calibration != "classic":
        raise UsageError(f"--calibration must be one of {', '.join(CALIBRATIONS)}, got {calibration!r}")
    sigma = gauss.classic_sigma(epsilon, delta, sensitivity)
    if epsilon < 1:
        return sigma, gauss.CLASSIC_THEOREM, []
    exact = gauss.delta_for_epsilon(epsilon, sensitivity / sigma)
    if exact > delta:
        raise UsageError(
            f"--calibration classic is not valid at --epsilon {epsilon:g} (>= 1): its sigma "
            f"{sigma:.6g} gives delta {exact:.3g} > {delta:g}; use --calibration analytic"
        )
    warning = Caveat(
        "classical_calibration",
        f"--calibration classic: the classical formula is proven only for epsilon < 1; at "
        f"epsilon={epsilon:g} the guarantee rests on the exact Gaussian profile instead "
        "(Balle and Wang 2018, Theorem 8), which also allows less noise with --calibration analytic",
    )
    return sigma, gauss.ANALYTIC_THEOREM, [warning]


def release_gaussian(
    values: np.ndarray | Sequence[np.ndarray],
    panel: Panel,
    epsilon: float,
    delta: float,
    rng: np.random.Generator,
    calibration: str = "analytic",
    prefetched: PrefetchedNormals | None = None,
    stream: NoiseStream | None = None,
    sampler: str = "hardened",
    granularity: float | None = None,
) -> Release:
    """Add Gaussian noise to every cell, sigma calibrated to the panel's L2 sensitivity.

    ``sampler="hardened"`` (default): the cells are rounded to multiples of the granularity ``g``
    (``granularity``, else chosen from public parameters) and get ``g`` times discrete Gaussian
    noise; sigma is calibrated to the L2 sensitivity including the rounding
    (:mod:`tsdp.accounting.discrete`). ``sampler="float"``: N(0, sigma^2) from numpy (not for
    publication). ``values`` is an array, or a sequence of 1-D chunks of the flat panel (see
    :func:`_add`). ``prefetched`` standard normals, drawn before the data was read, may supply
    the float noise; a ``stream`` supplies it when the panel is released in chunks of series
    (``values`` one chunk).
    """
    l2 = panel.bounds.l2(panel.n_series, panel.n_steps)
    cells = panel.bounds.cells(panel.n_series, panel.n_steps)
    sigma0 = gaussian_sigma(epsilon, delta, l2, calibration)[0] if sampler == "hardened" else None
    g, noisy_l2, hardened = _lattice(sampler, granularity, lambda d: sigma0, l2, cells, "l2", (epsilon, delta))
    # hardened: the continuous profile gets delta minus the rounding slack (tsdp.accounting.discrete)
    budget = disc.slack_budget(epsilon, delta, sigma0 / g, cells) if hardened else delta
    sigma, theorem, warnings = gaussian_sigma(epsilon, budget, noisy_l2, calibration)
    parameters = {
        "noise": "gaussian",
        "sigma": sigma,
        "l2_sensitivity": l2,
        "cells_per_unit": cells,
        "calibration": calibration,
        "classic_sigma": gauss.classic_sigma(epsilon, delta, l2),
        "n_series": panel.n_series,
        "n_steps": panel.n_steps,
        "composition": panel.composition,
    }
    if panel.n_series > 1:
        # What one series alone costs (the panel figure above is the one that holds).
        one_series_l2 = panel.bounds.l2(1, panel.n_steps)
        parameters["per_series_epsilon"] = gauss.epsilon_for_delta(
            delta, (disc.rounded_l2(one_series_l2, panel.bounds.cells(1, panel.n_steps), g) if hardened
                    else one_series_l2) / sigma)
    if hardened:
        disc.check_lattice_scale(sigma, g, "sigma")
        slack = disc.rounding_slack(epsilon, disc.slack_rate(sigma / g, cells))
        parameters.update(sampler="hardened", granularity=g, rounded_l2_sensitivity=noisy_l2, rounding_slack=slack)
        theorem = f"{theorem}; {disc.GAUSSIAN_THEOREM} (slack {slack:.3g} of delta)"
        event = MechanismEvent("discrete-gaussian", noisy_l2, sigma, 1, granularity=g, lattice_coords=cells)
    else:
        parameters["sampler"] = "float"
        event = MechanismEvent("gaussian", l2, sigma, 1)
        warnings = [*warnings, FLOAT_WARNING]
    claim = PrivacyClaim(
        definition="approx-dp",
        unit=privacy_unit(panel.bounds, panel.n_series, panel.id_column, panel.enforced),
        epsilon=float(epsilon),
        delta=float(delta),
        mechanism="gaussian",
        theorem=theorem,
        events=(event,),
        parameters=parameters,
    )
    noise = gaussian_noise(rng, sigma, _size(values), None if hardened else prefetched, stream, g)
    return Release(_add(values, noise, g), claim, tuple(warnings))


def release_laplace(
    values: np.ndarray | Sequence[np.ndarray], panel: Panel, epsilon: float, rng: np.random.Generator,
    stream: NoiseStream | None = None, sampler: str = "hardened", granularity: float | None = None,
) -> Release:
    """Add Laplace noise of scale ``b = L1 / epsilon`` to every cell (pure epsilon-DP).

    ``sampler="hardened"`` (default): cells rounded to multiples of the granularity ``g`` get ``g``
    times discrete Laplace noise, and L1 is that of the rounded cells, ``cells x (floor(M/g) + 1) g``
    (:mod:`tsdp.accounting.discrete`); ``sampler="float"``: numpy's Laplace (not for publication).
    ``values`` is an array, or a sequence of 1-D chunks of the flat panel (see :func:`_add`);
    ``stream``: as for :func:`release_gaussian`.
    """
    check_epsilon(epsilon)
    cells = panel.bounds.cells(panel.n_series, panel.n_steps)
    l1 = panel.bounds.l1(panel.n_series, panel.n_steps)
    g, _, hardened = _lattice(sampler, granularity, lambda d: d / epsilon, l1, cells, "l1")
    step = disc.rounded_step(panel.bounds.max_per_step, g) if hardened else panel.bounds.max_per_step
    noisy_l1 = cells * step if hardened else l1
    scale = noisy_l1 / epsilon
    parameters = {
        "noise": "laplace",
        "scale": scale,
        "l1_sensitivity": l1,
        "cells_per_unit": cells,
        "n_series": panel.n_series,
        "n_steps": panel.n_steps,
        "composition": panel.composition,
    }
    warnings: list[str] = []
    if hardened:
        disc.check_lattice_scale(scale, g, "the Laplace scale")
        parameters.update(sampler="hardened", granularity=g, rounded_l1_sensitivity=noisy_l1)
        theorem, event = disc.LAPLACE_THEOREM, MechanismEvent("discrete-laplace", step, scale, cells, granularity=g)
    else:
        parameters["sampler"] = "float"
        theorem, event = LAPLACE_THEOREM, MechanismEvent("laplace", panel.bounds.max_per_step, scale, cells)
        warnings.append(FLOAT_WARNING)
    claim = PrivacyClaim(
        definition="pure-dp",
        unit=privacy_unit(panel.bounds, panel.n_series, panel.id_column, panel.enforced),
        epsilon=float(epsilon),
        delta=0.0,
        mechanism="laplace",
        theorem=theorem,
        events=(event,),
        parameters=parameters,
    )
    return Release(_add(values, laplace_noise(rng, scale, _size(values), stream, g), g), claim, tuple(warnings))


def _lattice(sampler: str, granularity: float | None, scale_for, sensitivity: float, cells: int, norm: str,
             slack: tuple[float, float] | None = None):
    """(granularity or None, the sensitivity the noise must cover, hardened?) for a release
    (:func:`tsdp.accounting.discrete.lattice`; the Laplace release uses its own per-cell bound;
    ``slack``: a Gaussian release's (epsilon, delta), which pays the rounding slack)."""
    g, covered = disc.lattice(sampler, granularity, scale_for, sensitivity, cells, norm, slack)
    return g, covered, g is not None


def _size(values) -> int:
    return values.size if isinstance(values, np.ndarray) else sum(len(c) for c in values)


def _add(values, noise: np.ndarray, granularity: float | None = None) -> np.ndarray:
    """``values + noise`` computed in the noise buffer (no extra copy of the data), the values
    rounded to multiples of ``granularity`` first when it is given (hardened sampler).

    ``values`` is an array (the result has its shape) or a sequence of 1-D arrays, the columnar
    chunks whose concatenation is the flat panel (the result is then 1-D).
    """
    if isinstance(values, np.ndarray):
        noise = noise.reshape(values.shape)
        noise += snap(values, granularity)
        return noise
    offset = 0
    for chunk in values:
        noise[offset:offset + len(chunk)] += chunk if granularity is None else snap(np.asarray(chunk, dtype=np.float64), granularity)
        offset += len(chunk)
    return noise

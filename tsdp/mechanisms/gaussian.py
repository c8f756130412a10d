"""The Gaussian mechanism on a panel of S series x T steps (``--mechanism gaussian``).

The whole panel is released by one additive-noise mechanism on the S*T vector, whose L2 sensitivity
follows from the privacy unit (:mod:`tsdp.accounting.sensitivity`). This is the exact composition of
the per-series Gaussian mechanisms (Gaussian mechanisms compose by adding their squared mu =
sensitivity/sigma), so sharing one (epsilon, delta) across the series this way is never looser than
splitting the budget.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from tsdp.accounting import discrete as disc
from tsdp.accounting import gaussian as gauss
from tsdp.caveats import Caveat
from tsdp.errors import UsageError
from tsdp.mechanisms.baseline import Panel, Release, add_noise, panel_size
from tsdp.mechanisms.noise import NoiseStream, PrefetchedNormals, gaussian_noise
from tsdp.mechanisms.protocol import REMEDY_COMMON, PrivacyMap, Setting
from tsdp.accounting.samplers import Sampler, sampler_of

CALIBRATIONS = ("analytic", "classic")


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


class Gaussian:
    """N(0, sigma^2) on every cell (hardened: g times a discrete Gaussian on the rounded cells)."""

    name = "gaussian"
    describes = "Gaussian mechanism on the panel (L2 sensitivity of the unit)"
    theorem_words = (("Balle and Wang 2018, Theorem 8", "Dwork and Roth 2014, Theorem A.1"),)
    remedy = (f"{REMEDY_COMMON}, a coarser grid (--freq, fewer steps per user) or a mechanism that smooths "
              "(--mechanism dft or filter-subsample)")
    cellwise = True
    summable = True
    linear = True
    norm_bounded = True  # its noise is calibrated to the L2 sensitivity alone: --max-norm tightens it
    prefetches = True  # its float noise is standard normals, which may be drawn before the data is read
    dry_run_caveat = None
    options = {"calibration": ("calibration", "analytic")}  # ReleaseOptions field -> (keyword, default)

    def pure(self, noise: str | None) -> bool:
        return False

    def privacy_map(self, setting: Setting) -> PrivacyMap:
        """sigma for the panel's L2 sensitivity ``Delta_2`` (``--calibration`` analytic or classic; the
        hardened sampler pays its rounding slack out of delta and covers ``Delta_2 + g sqrt(cells)``)."""
        epsilon, delta, panel = setting.epsilon, setting.delta, setting.panel
        calibration = setting.options.get("calibration", "analytic")
        l2 = panel.bounds.l2(panel.n_series, panel.n_steps)
        cells = panel.bounds.cells(panel.n_series, panel.n_steps)

        def calibrate(budget: float, g: float | None):
            sigma, theorem, warnings = gaussian_sigma(epsilon, budget, l2 if g is None else
                                                      disc.rounded_l2(l2, cells, g), calibration)
            return sigma, (theorem, warnings)

        sampler, sigma, (theorem, warnings) = setting.sampler.calibrate_gaussian(epsilon, delta, l2, cells,
                                                                                  calibrate)
        covered = sampler.rounded_l2(l2, cells)
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
            one = panel.bounds.l2(1, panel.n_steps)
            parameters["per_series_epsilon"] = gauss.epsilon_for_delta(
                delta, sampler.rounded_l2(one, panel.bounds.cells(1, panel.n_steps)) / sigma)
        record, theorem = sampler.gaussian_record(epsilon, sigma, covered, cells, theorem)
        parameters.update(record)
        return PrivacyMap("approx-dp", epsilon, delta, theorem, (sampler.gaussian_event(l2, covered, sigma, cells),),
                          parameters, sigma, sampler, (*warnings, *sampler.warnings))

    def release(self, values, panel: Panel, rng: np.random.Generator, setting: Setting,
                prefetched: PrefetchedNormals | None = None, stream: NoiseStream | None = None) -> Release:
        """``values`` plus the noise the privacy map calibrated (``prefetched`` normals, drawn before the
        data was read, may supply the float noise; ``stream`` the noise of a panel released in chunks)."""
        m = self.privacy_map(setting)
        g = m.sampler.granularity
        noise = gaussian_noise(rng, m.scale, panel_size(values), None if g is not None else prefetched, stream, g)
        return Release(add_noise(values, noise, g), m.claim(self.name, panel), m.warnings)

    def accuracy(self, claim, alpha: float, target: str = "cell", sampled=None):
        from tsdp.accuracy import mechanisms as acc

        return acc.cellwise_release("gaussian", claim.parameters, alpha, target)


GAUSSIAN = Gaussian()


def release_gaussian(
    values: np.ndarray | Sequence[np.ndarray],
    panel: Panel,
    epsilon: float,
    delta: float,
    rng: np.random.Generator,
    calibration: str = "analytic",
    prefetched: PrefetchedNormals | None = None,
    stream: NoiseStream | None = None,
    sampler: str | Sampler = "hardened",
    granularity: float | None = None,
) -> Release:
    """Add Gaussian noise to every cell, sigma calibrated to the panel's L2 sensitivity.

    ``sampler="hardened"`` (default): the cells are rounded to multiples of the granularity ``g``
    (``granularity``, else chosen from public parameters) and get ``g`` times discrete Gaussian
    noise; sigma is calibrated to the L2 sensitivity including the rounding
    (:mod:`tsdp.accounting.discrete`). ``sampler="float"``: N(0, sigma^2) from numpy (not for
    publication). ``values`` is an array, or a sequence of 1-D chunks of the flat panel (see
    :func:`tsdp.mechanisms.baseline.add_noise`). ``prefetched`` standard normals, drawn before the
    data was read, may supply the float noise; a ``stream`` supplies it when the panel is released in
    chunks of series (``values`` one chunk).
    """
    setting = Setting(epsilon, delta, panel, sampler_of(sampler, granularity), {"calibration": calibration})
    return GAUSSIAN.release(values, panel, rng, setting, prefetched, stream)

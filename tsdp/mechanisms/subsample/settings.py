"""Koga et al.'s subsampling, its settings: the accountings, the participation bounds of
Assumption 1, the panel's geometry, the shared checks and the filter kernels."""

from __future__ import annotations

import numpy as np

from tsdp.accounting import timesubsampling as ts
from tsdp.accounting.budget import check_delta, check_epsilon
from tsdp.accounting.sensitivity import ContributionBounds
from tsdp.caveats import Caveat
from tsdp.errors import DataError, UsageError
from tsdp.mechanisms import filters
from tsdp.mechanisms.baseline import Panel
from tsdp.mechanisms.subsample.sampling import check_sample_size


SUBSAMPLE_ACCOUNTING = ("exact", "paper")


FILTER_ACCOUNTING = ("conditional", "paper")


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
    if bounds.unit.uses_max_steps and bounds.max_steps is not None and bounds.max_steps > T:
        ts.check_participation(bounds.max_steps, T)
    series, cells = bounds.changed_cells(panel.n_series, T)
    return bounds.steps_per_series(T), cells, float(bounds.max_per_step), series


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

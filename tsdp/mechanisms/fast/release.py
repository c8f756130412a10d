"""FAST's release: the mechanism of the registry (:data:`FAST`) and :func:`release_fast`."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from tsdp.errors import DataError, UsageError
from tsdp.mechanisms.baseline import Panel, Release
from tsdp.mechanisms.fast.accounting import calibrate
from tsdp.mechanisms.fast.sampling import run_fast
from tsdp.mechanisms.fast.settings import parse_gains
from tsdp.mechanisms.noise import gaussian_noise, laplace_noise, snap
from tsdp.mechanisms.protocol import REMEDY_COMMON, PrivacyMap, Setting
from tsdp.accounting.samplers import Sampler, sampler_of


@dataclass(frozen=True)
class FastRelease(Release):
    """A FAST release: the values, the claim, and the sampled flags.

    ``sampled`` (bool, the shape of ``values``) marks the sampling points; it is post-processing of
    DP outputs and may be released (spec 4, output column ``is_sample``). ``trace`` is filled only
    with ``trace=True`` (tests, ``--debug``): arrays of the shape of ``values`` holding the prior
    ``P^-`` (NaN at k = 0), and at sampling points the noisy observation ``z``, the gain ``K``
    (NaN at k = 0, where ``xhat_0 = z_0``) and the posterior variance ``P`` (NaN elsewhere).
    ``z`` is the output of the Laplace (Gaussian) mechanism and is covered by the same guarantee;
    ``P^-``, ``K`` and ``P`` are post-processing of the sampling pattern.
    """

    sampled: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=bool))
    trace: dict[str, np.ndarray] | None = None


class Fast:
    """FAST (Fan and Xiong 2012): at most M noisy samples per series, a Kalman filter between them."""

    name = "fast"
    describes = "FAST: at most c = min(M, steps the unit touches) noisy samples per series (Fan and Xiong)"
    theorem_words = (("Fan and Xiong 2012, Theorem 2",),)
    remedy = f"{REMEDY_COMMON} or fewer samples per series (--fast-max-samples)"
    cellwise = False
    summable = False
    linear = False  # the sampling pattern depends on the noisy values: see noiseless()
    norm_bounded = False  # --max-norm does not apply
    dry_run_caveat = None
    # ReleaseOptions field -> (release_fast keyword, default); the noise defaults to Laplace, the paper's
    options = {"noise": ("noise", "laplace"), "fast_preset": ("preset", None), "fast_max_samples": ("max_samples", None),
               "fast_fixed_interval": ("interval", None), "fast_gains": ("gains", None), "fast_theta": ("theta", None),
               "fast_xi": ("xi", None), "fast_q": ("q", None), "fast_r": ("r", None)}
    parsers = {"fast_gains": parse_gains}

    def pure(self, noise: str | None) -> bool:
        return noise == "laplace"

    def privacy_map(self, setting: Setting) -> PrivacyMap:
        return calibrate(setting).map

    def release(self, values, panel: Panel, rng: np.random.Generator, setting: Setting, trace: bool = False,
                **_runtime) -> "FastRelease":
        """Release each series of ``values`` (n_series x n_steps, time order; or one 1-D series)."""
        arr = np.asarray(values, dtype=np.float64)
        one_d = arr.ndim == 1
        if one_d:
            arr = arr[None, :]
        if arr.ndim != 2 or arr.shape != (panel.n_series, panel.n_steps):
            raise UsageError(f"values have shape {np.shape(values)}, but the panel is "
                             f"{panel.n_series} series x {panel.n_steps} steps")
        n_series, n_steps = arr.shape
        cal = calibrate(setting)
        if not np.all(np.isfinite(arr)):
            s, k = np.argwhere(~np.isfinite(arr))[0]
            raise DataError(f"values: non-finite value {arr[s, k]} in series {s} at step {k}; "
                            "FAST needs finite values")
        m, g = cal.settings.max_samples, cal.map.sampler.granularity
        draw = laplace_noise if cal.map.parameters["noise"] == "laplace" else gaussian_noise
        draws = draw(rng, cal.map.scale, n_series * m, granularity=g)
        released, sampled, tr = run_fast(
            lambda k, rows: snap(arr[rows, k], g), n_series, n_steps, draws.reshape(n_series, m), cal.settings,
            cal.r, cal.p0, trace=trace,
        )
        if one_d:
            released, sampled = released[0], sampled[0]
            tr = None if tr is None else {key: val[0] for key, val in tr.items()}
        return FastRelease(released, cal.map.claim(self.name, panel), cal.map.warnings, sampled, tr)

    def noiseless(self, values: np.ndarray, result: "FastRelease") -> np.ndarray:
        """The release's noiseless part: given the released sampling pattern the Kalman filter is linear
        in the observations (:func:`tsdp.mechanisms.kalman.filter_given_pattern`), so it is that filter run
        on the (lattice-rounded) values at the released pattern."""
        from tsdp.accuracy.mechanisms import lattice_of
        from tsdp.mechanisms.kalman import filter_given_pattern

        p = result.claim.parameters
        sampled = result.sampled.reshape(values.shape)
        return filter_given_pattern(snap(values, lattice_of(p)), sampled, p["Q"], p["R"], p["P0"])

    def accuracy(self, claim, alpha: float, target: str = "cell", sampled=None):
        """One noisy sample's interval covers every released value (Proschan 1965); with the released
        sampling pattern, also the exact noise s.d. of each value (:func:`tsdp.accuracy.mechanisms.fast`)."""
        from tsdp.accuracy import mechanisms as acc

        p = claim.parameters
        scale = p["sigma"] if p["noise"] == "gaussian" else p["scale"]
        interval = acc.on_lattice(acc.fast(p["noise"], scale, alpha), acc.lattice_of(p), 1.0)
        if sampled is None:
            return interval
        variance = scale * scale * (1.0 if p["noise"] == "gaussian" else 2.0)
        return replace(interval, extra={"given_sampling_pattern": acc.fast_given_pattern(
            np.asarray(sampled, dtype=bool).reshape(-1, p["n_steps"]), p["Q"], p["R"], p["P0"], variance)})


FAST = Fast()


def release_fast(
    values: np.ndarray,
    panel: Panel,
    epsilon: float | None,
    rng: np.random.Generator,
    delta: float | None = None,
    noise: str = "laplace",
    preset: str | None = None,
    max_samples: int | None = None,
    interval: int | None = None,
    adaptive: bool = True,
    *,
    max_samples_ratio: float | None = None,
    q: float | None = None,
    r: float | str | None = None,
    p0: float | str | None = None,
    gains: tuple[float, float, float] | None = None,
    ti: int | None = None,
    theta: float | None = None,
    xi: float | None = None,
    error: str | None = None,
    error_delta: float | None = None,
    warmup: int | str | None = None,
    trace: bool = False,
    sampler: str | Sampler = "hardened",
    granularity: float | None = None,
) -> FastRelease:
    """Release each series of ``values`` (n_series x n_steps, time order; or one 1-D series) by FAST.

    ``epsilon`` is the total budget of the panel (``None``: the preset's, 0.01 for both presets).
    The claim is for exactly the unit of ``panel.bounds``.
    ``noise="laplace"`` gives pure epsilon-DP with ``Lap(Delta_q c K / epsilon)`` per sample
    (Theorem 2); ``noise="gaussian"`` gives (epsilon, delta)-DP with
    ``sigma = analytic_sigma(epsilon, delta, Delta_q sqrt(c K))``. ``Delta_q`` is
    ``panel.bounds.max_per_step`` (doubled for substitution neighbours), K the number of series
    one unit can touch and ``c = min(M, steps of a series the unit touches)`` (:func:`samples_per_unit`). Adaptive sampling (default) takes at most M samples per series (M given,
    or ``floor(ratio T)`` with ratio 0.15 by default); ``adaptive=False`` samples every
    ``interval`` steps (M = ceil(T / interval)). The other keyword arguments are the filter and
    controller parameters of the module docstring (``None``: the preset's, else the default);
    errors name the ``--fast-*`` option of ``tsdp release`` where there is one, else the keyword.
    """
    options: dict[str, Any] = {
        "noise": noise, "adaptive": adaptive, "preset": preset, "max_samples": max_samples,
        "max_samples_ratio": max_samples_ratio, "interval": interval, "q": q, "r": r, "p0": p0, "gains": gains,
        "ti": ti, "theta": theta, "xi": xi, "error": error, "error_delta": error_delta, "warmup": warmup}
    setting = Setting(epsilon, delta, panel, sampler_of(sampler, granularity), options)
    return FAST.release(values, panel, rng, setting, trace=trace)

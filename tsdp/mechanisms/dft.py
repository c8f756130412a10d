"""The DFT baseline (Rastogi and Nath 2010, FPA_k): perturb the first k Fourier coefficients.

Each series x (length T) is transformed with the orthonormal real FFT; the first ``k``
coefficients are kept (the DC term and the k - 1 lowest frequencies), their real and imaginary
parts perturbed, the rest set to zero, and the series rebuilt with the inverse transform. The
output is real (the noise respects Hermitian symmetry, unlike the complex-valued code of Koga et
al., spec pitfall 18).

Sensitivity: with the orthonormal transform, Parseval gives ``sum_j |F_j|^2 <= ||x||^2`` over the
rfft half-spectrum (every non-DC, non-Nyquist coefficient appears twice in the full spectrum), so
the kept real vector (``n_r <= 2k - 1`` numbers) has L2 sensitivity at most the series' L2
sensitivity ``Delta_2``, and L1 sensitivity at most ``sqrt(n_r) * Delta_2`` (Cauchy-Schwarz).

* Gaussian: N(0, sigma^2) on each kept real number, sigma from the analytic calibration for
  ``Delta_2`` (Balle and Wang 2018, Theorem 8); everything after is post-processing.
* Laplace: Lap(b) with ``b = Delta_1 / epsilon`` (Rastogi and Nath 2010, FPA_k; pure DP), where
  ``Delta_1`` sums ``sqrt(n_r)`` times each series' L2 change over the series a unit can change, in
  its worst spread (:func:`laplace_l1`): a user's K series, a w-event unit's up to ``K w`` series
  (one set per step), and under substitution the old and the new unit's series.

Sampler. By default (``sampler="hardened"``) the kept real numbers are rounded to multiples of a
power-of-two granularity ``g`` and get ``g`` times discrete Gaussian (discrete Laplace) noise;
the sensitivities are those of the rounded numbers, ``Delta_2 + g sqrt(n)`` and ``Delta_1 + g n``
for the ``n = n_r x series changed`` numbers a unit can change (:mod:`tsdp.accounting.discrete`).
The inverse transform of the noisy lattice values is post-processing. ``sampler="float"`` draws
numpy's floating-point noise (not for publication).

The rebuilt series is the projection of the data on the first k frequencies plus noise: a
smooth approximation whose error is the discarded high-frequency content plus the noise.
"""

from __future__ import annotations

import math

import numpy as np

from tsdp.accounting import discrete as disc
from tsdp.accounting import gaussian as gauss
from tsdp.accounting.budget import check_delta, check_epsilon
from tsdp.errors import UsageError
from tsdp.mechanisms.baseline import Panel, Release
from tsdp.mechanisms.noise import gaussian_noise, laplace_noise, snap
from tsdp.mechanisms.protocol import REMEDY_COMMON, PrivacyMap, Setting
from tsdp.accounting.samplers import Sampler, sampler_of

DFT_THEOREM = ("Rastogi and Nath 2010, FPA_k: the first k orthonormal Fourier coefficients have the "
               "series' L2 sensitivity (Parseval); the inverse transform is post-processing")
DEFAULT_K = 30  # Fourier coefficients kept when --dft-k is not given


def kept_real_count(n_steps: int, k: int) -> int:
    """Real numbers in the first k rfft coefficients (DC and a Nyquist term are real)."""
    count = 2 * k - 1
    if n_steps % 2 == 0 and k == n_steps // 2 + 1:
        count -= 1  # the Nyquist coefficient is real too
    return count


def laplace_l1(bounds, n_series: int, n_steps: int, n_real: int) -> float:
    """L1 sensitivity of the kept coefficients: a series whose c cells change by at most M each
    moves its n_r kept real numbers by at most sqrt(n_r) ||Delta||_2 <= sqrt(n_r) M sqrt(c) in L1
    (orthonormal rfft, Cauchy-Schwarz); summed over the series in the unit's worst spread
    (:meth:`ContributionBounds.spread_sum`: a w-event unit may lie in a different series every
    step, a substitution in the old and the new unit's series)."""
    m = bounds.max_per_step
    return math.sqrt(n_real) * bounds.spread_sum(n_series, n_steps, lambda c: m * math.sqrt(c))


class Dft:
    """The first ``k`` orthonormal rfft coefficients of every series plus Gaussian or Laplace noise."""

    name = "dft"
    describes = "first k Fourier coefficients with Gaussian or Laplace noise (Rastogi and Nath)"
    theorem_words = (("Rastogi and Nath 2010, FPA_k",),)
    remedy = f"{REMEDY_COMMON} or fewer coefficients (--dft-k)"
    cellwise = False
    summable = True
    linear = True
    norm_bounded = False  # --max-norm does not apply
    dry_run_caveat = None
    options = {"dft_k": ("dft_k", DEFAULT_K), "noise": ("noise", "gaussian")}  # field -> (keyword, default)

    def pure(self, noise: str | None) -> bool:
        return noise == "laplace"

    def privacy_map(self, setting: Setting) -> PrivacyMap:
        """The noise on the kept real coefficients: Gaussian for the series' L2 sensitivity (Parseval),
        Laplace for the L1 bound of :func:`laplace_l1` (module docstring)."""
        epsilon, delta, panel = setting.epsilon, setting.delta, setting.panel
        k, noise = setting.options["dft_k"], setting.options["noise"]
        n_series, n_steps = panel.n_series, panel.n_steps
        limit = n_steps // 2 + 1
        if not (isinstance(k, (int, np.integer)) and 1 <= k <= limit):
            raise UsageError(f"--dft-k must be an integer in [1, {limit}] for series of length {n_steps}, got {k}")
        check_epsilon(epsilon)
        bounds = panel.bounds
        series_l2 = bounds.l2(1, n_steps)  # one series: M sqrt(cells)
        touched = bounds.series_touched(n_series)
        changed = bounds.series_changed(n_series, n_steps)
        n_real = kept_real_count(n_steps, k)
        coords = n_real * changed  # kept real numbers a unit can change
        if noise == "gaussian":
            check_delta(delta)
            l2 = series_l2 * math.sqrt(touched)

            def calibrate(budget: float, g: float | None):
                return gauss.analytic_sigma(epsilon, budget, l2 if g is None else disc.rounded_l2(l2, coords, g)), None

            sampler, sigma, _ = setting.sampler.calibrate_gaussian(epsilon, delta, l2, coords, calibrate)
            covered = sampler.rounded_l2(l2, coords)
            record, theorem = sampler.gaussian_record(epsilon, sigma, covered, coords,
                                                      f"{DFT_THEOREM}; {gauss.ANALYTIC_THEOREM}")
            definition, claim_delta, scale = "approx-dp", float(delta), sigma
            noise_params = {"sigma": sigma, "l2_sensitivity": l2, **record}
            events = (sampler.gaussian_event(l2, covered, sigma, coords),)
        elif noise == "laplace":
            if delta is not None:
                raise UsageError("--delta does not apply to --noise laplace (pure epsilon-DP); remove it")
            l1 = laplace_l1(bounds, n_series, n_steps, n_real)
            sampler = setting.sampler.on_lattice(lambda d: d / epsilon, l1, coords, "l1")
            covered = sampler.rounded_l1(l1, coords)
            scale = covered / epsilon
            record, theorem = sampler.laplace_record(scale, covered, f"{DFT_THEOREM}; Laplace mechanism with "
                                                                     "L1 <= sum over series of sqrt(n_r) L2")
            definition, claim_delta = "pure-dp", 0.0
            events = ()  # pure epsilon is proven; tight composition of the vector Laplace is not claimed
            noise_params = {"scale": scale, "l1_sensitivity": l1, **record}
        else:
            raise UsageError(f"--noise must be gaussian or laplace, got {noise!r}")
        parameters = {"noise": noise, "k": int(k), "kept_real_coefficients": n_real,
                      "series_l2_sensitivity": series_l2, "series_per_unit": touched, "series_changed": changed,
                      "transform": "orthonormal rfft, first k coefficients", "n_series": n_series,
                      "n_steps": n_steps, **noise_params}
        return PrivacyMap(definition, epsilon, claim_delta, theorem, events, parameters, scale, sampler,
                          sampler.warnings)

    def release(self, values: np.ndarray, panel: Panel, rng: np.random.Generator, setting: Setting,
                **_runtime) -> Release:
        """Perturb the first ``k`` rfft coefficients of every series (``values``: n_series x n_steps)."""
        m = self.privacy_map(setting)
        k, g = setting.options["dft_k"], m.sampler.granularity
        n_series, n_steps = values.shape
        spectrum = np.fft.rfft(values, axis=1, norm="ortho")[:, :k]
        parts = np.stack([spectrum.real, spectrum.imag], axis=-1)  # (S, k, 2)
        real_mask = np.ones((k, 2), dtype=bool)
        real_mask[0, 1] = False  # DC is real
        if m.parameters["kept_real_coefficients"] == 2 * k - 2:
            real_mask[k - 1, 1] = False  # Nyquist is real
        size = n_series * int(real_mask.sum())
        draw = gaussian_noise if setting.options["noise"] == "gaussian" else laplace_noise
        draws = draw(rng, m.scale, size, granularity=g)
        if g is not None:
            parts = snap(parts, g)
        noisy = parts.copy()  # (a fresh array already when snapped)
        noisy[:, real_mask] += draws.reshape(n_series, -1)
        noisy[:, ~real_mask] = 0.0
        full = np.zeros((n_series, n_steps // 2 + 1), dtype=complex)
        full[:, :k] = noisy[..., 0] + 1j * noisy[..., 1]
        released = np.fft.irfft(full, n=n_steps, axis=1, norm="ortho")
        return Release(released, m.claim(self.name, panel), m.warnings)

    def accuracy(self, claim, alpha: float, target: str = "cell", sampled=None):
        from tsdp.accuracy import mechanisms as acc

        p = claim.parameters
        scale = p["sigma"] if p["noise"] == "gaussian" else p["scale"]
        interval = acc.dft(p["noise"], scale, p["k"], p["kept_real_coefficients"], p["n_steps"], alpha, target)
        g = acc.lattice_of(p)
        if g is None:
            return interval
        n_real, n_steps = p["kept_real_coefficients"], p["n_steps"]
        # sum_j |a_j(t)| <= sqrt(n_r) sqrt(sum_j a_j(t)^2) (Cauchy-Schwarz; see accuracy.dft for the sum of squares)
        weights = math.sqrt(n_steps) if target == "sum" else math.sqrt(
            n_real * (2 * n_real - 1 - (n_real % 2 == 0)) / n_steps)
        return acc.on_lattice(interval, g, weights)


DFT = Dft()


def release_dft(values: np.ndarray, panel: Panel, epsilon: float, delta: float | None,
                rng: np.random.Generator, k: int, noise: str = "gaussian", sampler: str | Sampler = "hardened",
                granularity: float | None = None) -> Release:
    """Perturb the first ``k`` rfft coefficients of every series (``values``: n_series x n_steps),
    with the hardened sampler on a granularity lattice (default) or the float one (module docstring)."""
    setting = Setting(epsilon, delta, panel, sampler_of(sampler, granularity), {"dft_k": k, "noise": noise})
    return DFT.release(values, panel, rng, setting)

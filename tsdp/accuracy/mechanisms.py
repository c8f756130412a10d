"""The accuracy of every mechanism's release, from its claim's public parameters.

Each release mechanism's ``accuracy`` (:mod:`tsdp.mechanisms.registry`, ``for_claim``) calls the
interval of its noise here; the mean estimators and
DP-SGD have their own functions because their noise scale is per group (a released column) or
their release is a model. Noise distributions and why each interval holds:

* gaussian / laplace: N(0, sigma^2) or Lap(b) on every cell, independently; sums of n cells of one
  series are N(0, n sigma^2) or b (G1 - G2) with G ~ Gamma(n) (exact).
* dft: the noise on the n_r kept real coefficients goes through the orthonormal inverse rfft, so
  every cell's noise is ``sum_j a_j(t) nu_j``; the rfft keeps each frequency once, so its real and
  imaginary parts reach cell t as (2/sqrt(T)) cos and sin, and ``sum_j a_j(t)^2`` is
  (1 + 4 (k - 1)) / T for every t (a Nyquist term adds 1/T instead of 4/T): Gaussian noise gives
  N(0, sigma^2 sum_j a_j^2) exactly; Laplace noise a weighted Laplace sum, by seeded simulation.
  The sum of a whole series is sqrt(T) times the DC coefficient's noise.
* fast: each released value is the Kalman estimate, a convex combination of the noisy samples taken
  so far (gains in [0, 1], the first release is the first sample), so its noise is a convex
  combination of i.i.d. symmetric log-concave noise draws; by Proschan (1965) such a combination is
  more peaked than one draw, so the single draw's (1 - alpha) half-width covers every released
  value, whatever the sampling pattern (exact at the first step, conservative elsewhere).
* subsample / filter-subsample: N(0, sigma_s^2) at the sampled steps (exact); between them the
  linear interpolation is a convex combination of two samples' noise, N(0, (w^2 + (1-w)^2) sigma^2)
  with smaller variance, and outside them a copy of one sample's; so z sigma_s covers every cell.
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np

from tsdp.accuracy import intervals as iv
from tsdp.accuracy.result import Accuracy

TARGETS = ("cell", "sum")
PROSCHAN = ("Proschan 1965 (Ann. Math. Statist. 36, Thm 2.3): a convex combination of i.i.d. symmetric "
            "log-concave variables is more peaked than one of them")
INTERPOLATION_MODEL = (
    "interpolation between sampled steps adds an error that depends on the data, not on the noise: under a "
    "random-walk model of the series with increment s.d. s, linear interpolation over a gap of L steps errs "
    "at step k of the gap with variance s^2 k (L - k) / L (a Brownian bridge; at most s^2 L / 4), and "
    "Bernoulli(p) sampling gives gaps of 1/p steps on average; s is a property of the private series, so "
    "this figure is not computed here (--evaluate measures the whole error)")


def lattice_of(parameters: dict) -> float | None:
    """The granularity g of a hardened release's lattice, from its claim's parameters (None: float)."""
    return parameters.get("granularity") if parameters.get("sampler") == "hardened" else None


def on_lattice(acc: Accuracy, granularity: float | None, weight: float) -> Accuracy:
    """The interval of the hardened sampler's noise: ``g`` times a discrete Gaussian or Laplace
    (:mod:`tsdp.mechanisms.discrete`), entering each released value with weights ``w_j``.

    For X on the lattice gZ with the discrete law of parameter s, P(X >= g m) <= P(Y >= g (m - 1))
    for the continuous Y of the same s: the lattice sum over x >= m is at most the integral from
    m - 1, and the discrete normaliser is at least the continuous one (sqrt(2 pi) sigma by Poisson
    summation for the Gaussian; coth(g / 2b) >= 2b / g for the Laplace). So |X| - g is
    stochastically dominated by |Y|; coupling each X_j with a Y_j of the same sign gives
    |sum_j w_j X_j| <= |sum_j w_j Y_j| + g sum_j |w_j|, and the continuous half-width plus
    ``g * weight`` (``weight`` >= sum_j |w_j|) covers the discrete noise with probability >= 1 - alpha.
    """
    if granularity is None or acc.half_width is None:
        return acc
    extra = granularity * weight
    summary = None if acc.summary is None else {k: v + extra for k, v in acc.summary.items()}
    return replace(acc, half_width=acc.half_width + extra, exact=False, summary=summary,
                   formula=f"{acc.formula}; + g sum_j |w_j| = {extra:.6g} for the hardened sampler's lattice "
                           f"(g = {granularity:.6g}): a bound, exact coverage to within one lattice step")


def _spread(values) -> dict[str, float] | None:
    arr = np.asarray(values, dtype=np.float64)
    if arr.size <= 1:
        return None
    return {"min": float(arr.min()), "median": float(np.median(arr)), "max": float(arr.max())}


def cellwise(noise: str, scale: float, alpha: float, target: str = "cell", n_steps: int = 1) -> Accuracy:
    """Gaussian (``scale`` = sigma) or Laplace (``scale`` = b) noise, i.i.d. on every cell."""
    if target == "cell":
        if noise == "gaussian":
            return Accuracy(alpha, "cell", "each cell", iv.gaussian_half_width(scale, alpha), "analytic",
                            f"z_(1-alpha/2) sigma, sigma = {scale:.6g}")
        return Accuracy(alpha, "cell", "each cell", iv.laplace_half_width(scale, alpha), "analytic",
                        f"b ln(1/alpha), b = {scale:.6g}")
    scope = f"each series' sum over its {n_steps} steps"
    if noise == "gaussian":
        return Accuracy(alpha, "sum", scope, iv.gaussian_sum_half_width(scale, n_steps, alpha), "analytic",
                        f"z_(1-alpha/2) sigma sqrt(T), sigma = {scale:.6g}, T = {n_steps}")
    return Accuracy(alpha, "sum", scope, iv.laplace_sum_half_width(scale, n_steps, alpha), "numerical integration",
                    f"quantile of b (G1 - G2), G ~ Gamma(T, 1), b = {scale:.6g}, T = {n_steps}")


def cellwise_release(noise: str, parameters: dict, alpha: float, target: str = "cell") -> Accuracy:
    """A cellwise release's interval from its claim parameters: :func:`cellwise` for its noise (``sigma``
    or the Laplace ``scale``), widened by the hardened sampler's rounding (:func:`on_lattice`: one
    rounding per cell, ``n_steps`` of them in a series' sum)."""
    scale = parameters["sigma"] if noise == "gaussian" else parameters["scale"]
    n_steps = parameters["n_steps"]
    return on_lattice(cellwise(noise, scale, alpha, target, n_steps), lattice_of(parameters),
                      n_steps if target == "sum" else 1)


def dft_weights(n_steps: int, k: int, n_real: int, cells: np.ndarray | None = None) -> np.ndarray:
    """(cells x n_r) coefficients a_j(t) mapping the noise on the n_r kept real coefficients (real and
    imaginary parts of the first k rfft terms, as :func:`tsdp.mechanisms.dft.release_dft` perturbs
    them; :func:`tsdp.mechanisms.dft.kept_real_count`) to the cells' noise: the inverse orthonormal
    rfft of each unit coordinate."""
    spectra = np.zeros((n_real, n_steps // 2 + 1), dtype=complex)
    row = 0
    for j in range(k):
        spectra[row, j] = 1.0
        row += 1
        real_only = j == 0 or (n_real == 2 * k - 2 and j == k - 1)
        if not real_only:
            spectra[row, j] = 1j
            row += 1
    basis = np.fft.irfft(spectra, n=n_steps, axis=1, norm="ortho")  # n_r x T
    return (basis if cells is None else basis[:, np.asarray(cells)]).T


MAX_SIMULATED_CELLS = 128


def dft(noise: str, scale: float, k: int, n_real: int, n_steps: int, alpha: float, target: str = "cell") -> Accuracy:
    """The DFT baseline's noise after the inverse transform (per cell, or each series' sum)."""
    if target == "sum":
        scope = f"each series' sum over its {n_steps} steps"
        root = math.sqrt(n_steps)
        if noise == "gaussian":
            return Accuracy(alpha, "sum", scope, root * iv.gaussian_half_width(scale, alpha), "analytic",
                            f"sqrt(T) z_(1-alpha/2) sigma (only the DC coefficient reaches the sum), T = {n_steps}")
        return Accuracy(alpha, "sum", scope, root * iv.laplace_half_width(scale, alpha), "analytic",
                        f"sqrt(T) b ln(1/alpha) (only the DC coefficient reaches the sum), T = {n_steps}")
    if noise == "gaussian":
        gain = math.sqrt((2 * n_real - 1 - (n_real % 2 == 0)) / n_steps)  # sqrt(sum_j a_j(t)^2), every t
        return Accuracy(alpha, "cell", "each cell", iv.gaussian_half_width(scale * gain, alpha), "analytic",
                        f"z_(1-alpha/2) sigma g, g^2 = sum_j a_j(t)^2 = (1 + 4 (k - 1) [- 3 with a Nyquist term]) / T "
                        f"= {gain * gain:.6g}, sigma = {scale:.6g}, k = {k}, T = {n_steps}")
    cells = (np.arange(n_steps) if n_steps <= MAX_SIMULATED_CELLS
             else np.unique(np.linspace(0, n_steps - 1, MAX_SIMULATED_CELLS).round().astype(np.int64)))
    draws = 2000
    widths = iv.weighted_laplace_half_widths(dft_weights(n_steps, k, n_real, cells), scale, alpha, draws)
    where = "every cell" if cells.size == n_steps else f"{cells.size} evenly spaced cells"
    return Accuracy(alpha, "cell", "each cell", float(widths.max()),
                    f"simulation, n={draws} (Rao-Blackwellised, seed {iv.SIMULATION_SEED}) at {where}",
                    f"quantile of sum_j a_j(t) Lap(b)_j (a_j(t): inverse orthonormal rfft of coordinate j), "
                    f"b = {scale:.6g}, n_r = {n_real}, T = {n_steps}", summary=_spread(widths))


def fast(noise: str, scale: float, alpha: float) -> Accuracy:
    """FAST: the half-width of one noisy sample covers every released value (Proschan 1965)."""
    if noise == "gaussian":
        width, formula = iv.gaussian_half_width(scale, alpha), f"z_(1-alpha/2) sigma, sigma = {scale:.6g}"
    else:
        width, formula = iv.laplace_half_width(scale, alpha), f"b ln(1/alpha), b = {scale:.6g}"
    return Accuracy(alpha, "cell", "each released value", width, "analytic bound",
                    f"{formula}; every released value is a convex combination of the noisy samples (Kalman gains "
                    f"in [0, 1]), hence at least as concentrated as one sample: {PROSCHAN}; exact at the first "
                    "step, conservative elsewhere, for any sampling pattern", exact=False)


def subsample(sigmas, alpha: float, filtered: bool = False) -> Accuracy:
    """Koga et al.: N(0, sigma_s^2) at sampled steps, a convex combination of two of them between."""
    widths = np.array([iv.gaussian_half_width(float(s), alpha) for s in sigmas])
    filtered = " of the filtered series" if filtered else ""
    return Accuracy(alpha, "cell", "each released value", float(widths.max()), "analytic",
                    f"z_(1-alpha/2) sigma_s{filtered}: exact at the sampled steps; between them the linear "
                    "interpolation of two samples' noise has variance (w^2 + (1-w)^2) sigma_s^2 <= sigma_s^2, "
                    f"so the interval is conservative there. {INTERPOLATION_MODEL}",
                    exact=False, summary=_spread(widths))


def fast_noise_sd(sampled: np.ndarray, q: float, r: float, p0: float, noise_variance: float
                  ) -> tuple[np.ndarray, np.ndarray]:
    """FAST's noise given its (released) sampling pattern, from the filter's public Q, R and P0:
    (the noise s.d. of every released value, series x steps; the Kalman posterior variances at the
    sampled steps).

    Each released value is ``sum_j w_j z_j`` over the samples so far; at a sample with gain K the
    weights become ``(1 - K) w + K e_new``, so their sum of squares follows ``S' = (1-K)^2 S + K^2``
    (S = 1 after the first sample) and the noise of the released value has variance
    ``noise_variance x S`` exactly. The Kalman posterior variance P is the filter's own model of its
    error (signal drift Q included), defined at the sampled steps.
    """
    n_series, n_steps = sampled.shape
    p_post = np.full(n_series, float(p0))
    squares = np.ones(n_series)
    last = np.zeros(n_series, dtype=np.int64)
    ratio = np.empty((n_series, n_steps))
    ratio[:, 0] = 1.0
    posterior = [p_post.copy()]
    for k in range(1, n_steps):
        rows = np.flatnonzero(sampled[:, k])
        if rows.size:
            prior = p_post[rows] + (k - last[rows]) * q
            gain = prior / (prior + r)
            squares[rows] = (1.0 - gain) ** 2 * squares[rows] + gain * gain
            p_post[rows] = gain * r
            last[rows] = k
            posterior.append(p_post[rows].copy())
        ratio[:, k] = squares
    return np.sqrt(noise_variance * ratio), np.concatenate(posterior)


def fast_given_pattern(sampled: np.ndarray, q: float, r: float, p0: float, noise_variance: float) -> dict:
    """Summary of :func:`fast_noise_sd` for the accuracy block (public: the pattern is released)."""
    sd, post = fast_noise_sd(sampled, q, r, p0, noise_variance)
    return {
        "noise_sd": {"min": float(sd.min()), "median": float(np.median(sd)), "max": float(sd.max())},
        "kalman_posterior_variance_at_samples": {"min": float(post.min()), "median": float(np.median(post)),
                                                 "max": float(post.max())},
        "covers": ("the exact standard deviation of the noise of each released value given the released "
                   "sampling pattern (variance = noise variance x sum of squared Kalman weights); the Kalman "
                   "posterior variance is the filter's model-based error (noise and signal drift Q), at sampled "
                   "steps only"),
    }

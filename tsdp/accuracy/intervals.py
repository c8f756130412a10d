"""Half-widths of (1 - alpha) intervals of additive noise, from its public scale only.

Every function returns ``h`` with ``P(|noise| <= h) = 1 - alpha`` (exactly, or at least where the
name says ``bound``). Inputs are the public noise parameters (sigma, Laplace scale, cell counts,
a seed for simulations); no function here reads data.
"""

from __future__ import annotations

import math

import numpy as np

DEFAULT_ALPHA = 0.05
SIMULATION_SEED = 20240515  # fixed: a simulation on public parameters is itself public and reproducible


def check_alpha(alpha: float) -> float:
    """``alpha`` as a float in (0, 1), else ValueError naming --alpha."""
    if isinstance(alpha, bool) or not isinstance(alpha, (int, float)) or not (0.0 < float(alpha) < 1.0):
        raise ValueError(f"--alpha must be a number in (0, 1), got {alpha!r}")
    return float(alpha)


def gaussian_half_width(sigma: float, alpha: float) -> float:
    """``z_{1-alpha/2} sigma``: the two-sided (1 - alpha) half-width of N(0, sigma^2)."""
    from scipy.special import ndtri

    return float(-ndtri(alpha / 2.0) * sigma)  # the upper tail directly: 1 - alpha/2 rounds to 1 below 1e-16


def laplace_half_width(scale: float, alpha: float) -> float:
    """``b ln(1/alpha)``: P(|Lap(b)| > h) = exp(-h/b) = alpha."""
    return float(scale * math.log(1.0 / alpha))


def gaussian_sum_half_width(sigma: float, n_cells: int, alpha: float) -> float:
    """Half-width of the sum of ``n_cells`` independent N(0, sigma^2): N(0, n sigma^2)."""
    return gaussian_half_width(sigma * math.sqrt(n_cells), alpha)


def laplace_sum_half_width(scale: float, n_cells: int, alpha: float) -> float:
    """Half-width of the sum of ``n_cells`` independent Lap(b), exactly (numerical integration).

    The sum is ``b (G1 - G2)`` with G1, G2 ~ Gamma(n, 1) independent (a Laplace variable is the
    difference of two unit exponentials), so ``P(|sum| > h) = 2 int f_G(y) SF_G(y + h/b) dy``;
    the quantile is found by root finding on that tail.
    """
    if n_cells == 1:
        return laplace_half_width(scale, alpha)
    from scipy import integrate, optimize, stats

    g = stats.gamma(n_cells)
    lo, hi = g.ppf(1e-14), g.isf(1e-14)

    def tail(t: float) -> float:
        value, _ = integrate.quad(lambda y: g.pdf(y) * g.sf(y + t), lo, hi, limit=200,
                                  points=[float(n_cells - 1)], epsabs=1e-13, epsrel=1e-10)
        return 2.0 * value - alpha

    sd = math.sqrt(2.0 * n_cells)
    upper = sd * 2.0
    while tail(upper) > 0:
        upper *= 2.0
    return float(scale * optimize.brentq(tail, 0.0, upper, xtol=1e-10 * sd, rtol=1e-12))


def weighted_laplace_half_widths(weights: np.ndarray, scale: float, alpha: float, draws: int = 2000,
                                 seed: int = SIMULATION_SEED) -> np.ndarray:
    """Per row of ``weights`` (cells x noise draws), the half-width of ``sum_j w_j Lap(b)_j``.

    Seeded simulation, Rao-Blackwellised: a Laplace variable is a Gaussian scale mixture
    (``Lap(b) = b sqrt(2E) Z``, E ~ Exp(1)), so given the E's every cell's noise is
    ``N(0, 2 b^2 sum_j w_j^2 E_j)``; the tail is the average of exact Gaussian tails over ``draws``
    sets of E's, and the half-width is found by bisection on that average for every cell at once.
    """
    from scipy.special import ndtr

    rng = np.random.default_rng(seed)
    e = rng.exponential(size=(weights.shape[1], draws))
    sd = np.sqrt(2.0 * scale * scale * ((weights * weights) @ e))  # cells x draws
    lo = np.zeros(weights.shape[0])
    hi = np.full(weights.shape[0], laplace_half_width(scale, alpha) * max(1.0, float(np.abs(weights).sum(1).max())))
    for _ in range(45):  # bisection to 2^-45 of the bracket
        mid = (lo + hi) / 2.0
        with np.errstate(divide="ignore", invalid="ignore"):
            tail = 2.0 * np.mean(np.where(sd > 0, ndtr(-mid[:, None] / sd), 0.0), axis=1)
        above = tail > alpha
        lo = np.where(above, mid, lo)
        hi = np.where(above, hi, mid)
    return hi

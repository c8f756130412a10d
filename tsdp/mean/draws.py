"""The randomised draws of mean estimation, one class per noise sampler; the sampler is chosen once
(:func:`draws_for`), and :func:`tsdp.mean.algorithms.release` asks it for:

* the LEVY median's centre, the exponential mechanism over the candidate centres with utility minus
  the distance in ranks to the median (sensitivity ``Delta_s``, budget ``eps_sel``): hardened, exact
  sampling from integer scores with ``c = eps_sel / (2 Delta_s)`` a binary float
  (:func:`~tsdp.mean.selection.exact_em_argmax`); float, Gumbel-max over floating-point logits;
* a QUANTILE end point, Smith's exponential mechanism for the q-quantile: hardened, exact over the
  public lattice points (:func:`~tsdp.mean.lattice_quantile.lattice_quantile`); float, the continuous
  sampler (:func:`~tsdp.mean.selection.smith_sample`);
* the Laplace step ``g + Lap(Delta / eps_mean)`` (Thm. II.1): hardened, the statistic rounded to a
  power-of-two lattice step and discrete Laplace noise (:func:`lattice_laplace`); float, numpy's Laplace.
"""

from __future__ import annotations

import numpy as np

from tsdp.accounting.discrete import DEFAULT_RESOLUTION, MAX_RESOLUTION, MIN_LATTICE_SCALE
from tsdp.accounting.samplers import Sampler, sampler_of
from tsdp.mean.errors import GroupUsageError
from tsdp.mean.lattice_quantile import lattice_quantile
from tsdp.mean.selection import (em_median_logits, em_median_scores, exact_em_argmax, segmented_gumbel_argmax,
                                 smith_sample)
from tsdp.mechanisms.discrete import discrete_laplace_scales
from tsdp.mechanisms.noise import laplace_noise, snap


class ExactDraws:
    """The hardened sampler's draws: exact selection and discrete Laplace noise on a lattice."""

    @staticmethod
    def median_centre(means, starts, tau, lower, upper, eps_sel, dsens, rng) -> np.ndarray:
        cstarts, centres, score = em_median_scores(means, starts, tau, lower, upper)
        return centres[exact_em_argmax(score, cstarts, eps_sel / (2.0 * dsens), rng)]

    @staticmethod
    def quantile(ys, starts, q, eps_q, lower, upper, dsens, rng) -> np.ndarray:
        return lattice_quantile(ys, starts, q, eps_q, lower, upper, dsens, rng)

    @staticmethod
    def laplace(rng, stat, sens, eps_mean, granularity):
        """``(estimate, laplace scale, g, rounded sensitivity)`` per group (:func:`lattice_laplace`)."""
        g, step, scale, estimate = lattice_laplace(rng, stat, sens, eps_mean, granularity)
        return estimate, scale, g, step


class FloatDraws:
    """The float sampler's draws: floating-point selection and numpy's Laplace noise."""

    @staticmethod
    def median_centre(means, starts, tau, lower, upper, eps_sel, dsens, rng) -> np.ndarray:
        cstarts, centres, logits = em_median_logits(means, starts, tau, lower, upper, eps_sel, dsens)
        return centres[segmented_gumbel_argmax(logits, cstarts, rng)]

    @staticmethod
    def quantile(ys, starts, q, eps_q, lower, upper, dsens, rng) -> np.ndarray:
        return smith_sample(ys, starts, q, eps_q, lower, upper, dsens, rng, presorted=True)

    @staticmethod
    def laplace(rng, stat, sens, eps_mean, granularity):
        """``(stat + Lap(sens / eps_mean), its scale, None, None)``."""
        if granularity is not None:
            raise ValueError("a granularity applies to the hardened sampler only")
        scale = sens / eps_mean
        noise = laplace_noise(rng, 1.0, sens.size)
        return stat + scale * noise, np.asarray(scale, dtype=np.float64), None, None


DRAWS = {"hardened": ExactDraws, "float": FloatDraws}


def draws_for(sampler: str | Sampler) -> type[ExactDraws] | type[FloatDraws]:
    """The draws of ``sampler`` (a sampler object or its ``--sampler`` name)."""
    return DRAWS[sampler_of(sampler).name]


def group_granularities(sens: np.ndarray, eps_mean: float) -> np.ndarray:
    """The default lattice step of each group, from its public sensitivity (and epsilon) only:
    :func:`tsdp.accounting.discrete.choose_granularity` for one L1 coordinate, i.e. the largest power
    of two at most 2^-20 min(b_0, Delta) with b_0 = Delta / eps, unless 2^-20 min(b_0, Delta) < b_0 2^-24: then
    the least power of two at or above b_0 2^-24 (so the lattice scale b / g is below 2^25)."""
    scale0 = sens / eps_mean
    target = np.minimum(scale0, sens) * 2.0 ** -DEFAULT_RESOLUTION
    floor = scale0 * 2.0 ** -MAX_RESOLUTION
    _, e_t = np.frexp(target)  # target = f 2^e_t, f in [0.5, 1): 2^(e_t - 1) <= target
    _, e_f = np.frexp(floor)
    up = np.where(floor == np.ldexp(0.5, e_f), e_f - 1, e_f)  # the least power of two >= floor
    return np.where(target >= floor, np.ldexp(1.0, e_t - 1), np.ldexp(1.0, up))


def lattice_laplace(rng: np.random.Generator, stat: np.ndarray, sens: np.ndarray, eps_mean: float,
                    granularity: float | None):
    """The hardened Laplace step: ``(g, step, scale, estimate)`` per group.

    ``g`` is ``granularity`` (a power of two) or :func:`group_granularities`; the statistic is
    rounded to a multiple of g, so a neighbour moves it by at most ``step = (floor(Delta / g) + 1) g``
    (:func:`tsdp.accounting.discrete.rounded_step`), and ``estimate = round_g(stat) + g Z`` with Z
    discrete Laplace of scale ``step / (g eps_mean)``: pure eps_mean-DP on the lattice (Canonne, Kamath
    and Steinke 2020, Section 2), with ``scale = step / eps_mean``, the reported Laplace scale."""
    zero = sens == 0  # a degenerate interval a = b: the statistic is data-independent, no noise
    g = group_granularities(np.where(zero, 1.0, sens), eps_mean) if granularity is None \
        else np.full(sens.size, float(granularity))
    step = np.where(zero, 0.0, (np.floor(sens / g) + 1.0) * g)
    scale = step / eps_mean
    t = np.where(zero, 1.0, scale / g)
    coarse = np.flatnonzero(((t < MIN_LATTICE_SCALE) | (t > 2.0 ** 40)) & ~zero)
    if coarse.size:
        i = int(coarse[0])
        raise GroupUsageError(i, f"--granularity {g[i]:g} does not fit the Laplace scale {scale[i]:.6g} of this "
                                 f"group: it must lie in [scale x 2^-40, scale / {MIN_LATTICE_SCALE:g}]")
    noise = discrete_laplace_scales(rng, t)
    estimate = np.where(zero, stat, snap(stat, g) + g * noise)
    return g, step, scale, estimate

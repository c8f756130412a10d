"""Bernoulli(p) sampling of the time steps, the noisy samples and their interpolation."""

from __future__ import annotations

import math

import numpy as np

from tsdp.accounting import timesubsampling as ts
from tsdp.caveats import Caveat
from tsdp.errors import NumericalError, UsageError
from tsdp.mechanisms.noise import gaussian_noise, snap


CHUNK_CELLS = 1 << 20  # cells of the panel handled at once (bounds the temporary arrays)


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

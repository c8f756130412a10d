"""FAST's sampling and filtering recursion (spec 2.9): the PID-controlled interval (Eq. 13),
:func:`run_fast` over all series at once, and how many samples can fall on a unit's changed cells."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from tsdp.accounting.sensitivity import ContributionBounds
from tsdp.mechanisms import kalman
from tsdp.mechanisms.fast.settings import FastSettings

EXPONENT_CLIP = 50.0  # F-P8: exp((Delta - xi)/xi) is evaluated with the exponent clipped at 50


def next_interval(interval, pid_error, theta: float, xi: float):
    """Eq. 13 [R]: ``max(1, I + trunc(theta (1 - exp(min((Delta - xi)/xi, 50)))))``, elementwise.

    Delta = xi leaves I unchanged; Delta = 0 adds ``trunc(0.632 theta)``; a large Delta collapses I
    to 1 without overflow (the exponent is clipped before ``exp``, F-P8).
    """
    exponent = np.minimum((np.asarray(pid_error, dtype=float) - xi) / xi, EXPONENT_CLIP)
    step = np.trunc(theta * -np.expm1(exponent))  # theta (1 - e^x), truncated toward zero
    new = np.asarray(interval, dtype=float) + np.clip(step, -2.0**62, 2.0**62)
    return np.clip(new, 1.0, 2.0**62).astype(np.int64)


def run_fast(
    read: Callable[[int, np.ndarray], np.ndarray],
    n_series: int,
    n_steps: int,
    noise: np.ndarray,
    settings: FastSettings,
    r: float,
    p0: float,
    trace: bool = False,
) -> tuple[np.ndarray, np.ndarray, dict[str, np.ndarray] | None]:
    """The FAST recursion (spec 2.9) for all series at once; returns (released, sampled, trace).

    ``read(k, rows)`` returns the true values of series ``rows`` (an index array) at step ``k``;
    it is the only access to the data and is called only for the series sampled at ``k``.
    ``noise[s, n]`` is the noise of the n-th sample of series s (shape n_series x M). ``r`` and
    ``p0`` are the resolved R and P0. A Python loop runs over the time steps (the filter is
    sequential); every step works on all series as arrays.
    """
    s_all = np.arange(n_series)
    m = settings.max_samples
    q = settings.q
    adaptive = settings.adaptive
    cp, ci, cd = settings.gains
    out = np.empty((n_steps, n_series))  # time-major: each step writes one contiguous row
    flags = np.zeros((n_steps, n_series), dtype=bool)
    if trace:
        tr = {name: np.full((n_steps, n_series), np.nan) for name in ("P_prior", "P", "K", "z")}

    # k = 0 is always a sampling point: xhat_0 = z_0, P_0 = P0 [D].
    z = read(0, s_all) + noise[:, 0]
    xhat = np.array(z, dtype=np.float64)
    p_post = np.full(n_series, float(p0))
    k_last = np.zeros(n_series, dtype=np.int64)  # step of the last sample
    taken = np.ones(n_series, dtype=np.int64)  # samples taken so far (n)
    step = np.ones(n_series, dtype=np.int64) if adaptive else np.full(n_series, settings.interval, dtype=np.int64)
    due_at = step.copy()  # next sampling point
    out[0] = xhat
    flags[0] = True
    if trace:
        tr["z"][0], tr["P"][0] = z, p_post
    if adaptive:
        ti = settings.ti
        errors = np.zeros((n_series, ti))  # ring buffer of the last Ti feedback errors
        n_errors = np.zeros(n_series, dtype=np.int64)
        last_error = np.zeros(n_series)
        last_error_k = np.zeros(n_series, dtype=np.int64)
        relative = settings.error == "relative"

    for k in range(1, n_steps):
        due = due_at == k
        if adaptive:
            due &= taken < m
        rows = np.flatnonzero(due)
        if trace:
            tr["P_prior"][k] = kalman.predict_variance(p_post, k - k_last, q)
        if rows.size:
            prior = xhat[rows]
            p_prior = kalman.predict_variance(p_post[rows], k - k_last[rows], q)
            n = taken[rows]
            z = read(k, rows) + noise[rows, n]
            post, p_new, gain = kalman.correct(prior, p_prior, z, r)
            xhat[rows] = post
            p_post[rows] = p_new
            k_last[rows] = k
            taken[rows] = n + 1
            flags[k, rows] = True
            if trace:
                tr["z"][k, rows], tr["K"][k, rows], tr["P"][k, rows] = z, gain, p_new
            if adaptive:
                err = np.abs(post - prior)  # Eq. 10 [R]: posterior vs prior, never the true value
                if relative:
                    err /= np.maximum(post, settings.error_delta)
                count = n_errors[rows]
                errors[rows, count % ti] = err
                count += 1
                n_errors[rows] = count
                integral = errors[rows].sum(axis=1) / np.minimum(count, ti)
                slope = np.where(count >= 2, (err - last_error[rows]) / (k - last_error_k[rows]), 0.0)
                last_error[rows] = err
                last_error_k[rows] = k
                pid = cp * err + ci * integral + cd * slope  # Eq. 11 [R]
                current = step[rows]
                step[rows] = np.where(n + 1 > settings.warmup,
                                      next_interval(current, pid, settings.theta, settings.xi), current)
            due_at[rows] = k + step[rows]
        out[k] = xhat  # posterior where sampled, prior (= last posterior) elsewhere

    released = np.ascontiguousarray(out.T)
    sampled = np.ascontiguousarray(flags.T)
    if not trace:
        return released, sampled, None
    return released, sampled, {name: np.ascontiguousarray(val.T) for name, val in tr.items()}


def samples_per_unit(bounds: ContributionBounds, n_steps: int, max_samples: int) -> int:
    """c = min(M, steps of one series the unit touches): the most samples of a series that can fall
    on cells one unit changes (1 for ``event``, min(M, w) for ``w-event``, min(M, I) for ``user``)."""
    return min(int(max_samples), bounds.steps_per_series(n_steps))


def changed_samples(bounds: ContributionBounds, n_series: int, n_steps: int, max_samples: int,
                    interval: int | None = None) -> int:
    """The most samples that can fall on cells one unit changes: a series with ``c`` changed cells
    holds at most ``min(M, c)`` of them (once per time stamp, M in all), summed over the series in
    the unit's worst spread (:meth:`ContributionBounds.series_spread`): ``K min(M, I)`` for a user,
    but up to ``K w`` for a w-event unit that picks other series at every step. Fixed sampling
    every ``interval`` steps samples every series at the same steps, and a window of w steps holds
    at most ceil(w / interval) of them with K changed cells each: a w-event unit then has at most
    ``K ceil(w / interval)``. Under substitution the per-sample sensitivity doubles instead
    (2 Delta_q: the old and the new unit's cells)."""
    m = int(max_samples)
    spread = sum(count * min(m, cells) for count, cells in bounds.series_spread(n_series, n_steps))
    if interval is not None and bounds.unit.uses_w:
        steps = bounds.steps_per_series(n_steps)
        return min(spread, bounds.series_touched(n_series) * -(-steps // int(interval)))
    return spread

"""Student-t output head: GluonTS ``StudentTOutput`` in numpy, with analytic derivatives.

Source: Schuchardt et al. (ICML 2025), ``specs/schuchardt.md`` section 3.2: every model outputs
per-step Student-t parameters (GluonTS 0.15.1 ``StudentTOutput``) and is trained with the negative
log-likelihood. A model emits three unconstrained numbers per forecast step, ``raw = (r0, r1, r2)``,
and the domain map (GluonTS ``StudentTOutput.domain_map``) turns them into

    loc   = r0
    scale = softplus(r1) + SCALE_FLOOR
    df    = 2 + softplus(r2)

[D] GluonTS clamps ``scale`` from below at machine epsilon (``clamp_min``); tsdp *adds* the public
floor ``SCALE_FLOOR = 1e-6`` instead, so the map is smooth and its derivative is exact everywhere.

Negative log-likelihood of ``y`` under ``t(df, loc, scale)`` with ``z = (y - loc) / scale``:

    -log p(y) = -lgamma((df+1)/2) + lgamma(df/2) + 0.5 log(df pi) + log scale
                + (df+1)/2 log(1 + z^2/df)
              = log B(df/2, 1/2) + 0.5 log df + log scale + (df+1)/2 log(1 + z^2/df)

Derivatives (``softplus' = sigmoid``; chain rule through the domain map):

    d/dloc   = -(df+1) z / (scale (df + z^2))
    d/dscale = 1/scale - (df+1) z^2 / (scale (df + z^2))
    d/ddf    = -0.5 psi((df+1)/2) + 0.5 psi(df/2) + 1/(2 df) + 0.5 log(1 + z^2/df)
               - (df+1) z^2 / (2 df (df + z^2))

Numerics [D]: every quantity is written in terms of ``w = z / sqrt(df)`` with branches for
``|w| <= 1`` and ``|w| > 1`` so nothing overflows, and for ``df/2 >= 20`` the differences
``lgamma(a + 1/2) - lgamma(a)`` and ``psi(a + 1/2) - psi(a)`` (which cancel catastrophically in
floating point) use their asymptotic series (DLMF 5.11.13 expanded; truncation error < 1e-16 there).
The result is finite for every finite ``raw``.
"""

from __future__ import annotations

import numpy as np
from scipy import special

__all__ = ["SCALE_FLOOR", "DF_OFFSET", "softplus", "domain", "nll", "nll_and_grad", "quantiles"]

SCALE_FLOOR = 1e-6
"""Public lower bound added to the softplus of the scale (data units after mean scaling)."""

DF_OFFSET = 2.0
"""Degrees of freedom are ``DF_OFFSET + softplus(raw)`` > 2, so the variance always exists."""

_HALF_LOG_PI = 0.5 * np.log(np.pi)
_SERIES_FROM = 20.0  # use the asymptotic series for a = df/2 >= this


def softplus(x):
    """Numerically stable ``log(1 + exp(x)) = max(x, 0) + log1p(exp(-|x|))``."""
    x = np.asarray(x, dtype=np.float64)
    return np.maximum(x, 0.0) + np.log1p(np.exp(-np.abs(x)))


def domain(raw):
    """Map raw outputs ``(..., 3)`` to ``(loc, scale, df)``, each of shape ``(...)``.

    ``loc = raw[..., 0]``, ``scale = softplus(raw[..., 1]) + SCALE_FLOOR``,
    ``df = 2 + softplus(raw[..., 2])`` (GluonTS ``StudentTOutput.domain_map``, see module docstring).
    """
    raw = np.asarray(raw, dtype=np.float64)
    if raw.shape[-1:] != (3,):
        raise ValueError(f"raw outputs must have a last axis of length 3, got shape {raw.shape}")
    return raw[..., 0], softplus(raw[..., 1]) + SCALE_FLOOR, DF_OFFSET + softplus(raw[..., 2])


def _lgamma_ratio(a):
    """``lgamma(a + 1/2) - lgamma(a)`` for ``a >= 1``, accurate for large ``a`` as well.

    Asymptotic series for ``a >= 20``: ``0.5 log a - 1/(8a) + 1/(192 a^3) - 1/(640 a^5)
    + 17/(14336 a^7) - 31/(18432 a^9)`` (verified against mpmath to 2e-17 at a = 20).
    """
    shape = np.shape(a)
    a = np.atleast_1d(np.asarray(a, dtype=np.float64))
    out = special.gammaln(a + 0.5) - special.gammaln(a)
    big = a >= _SERIES_FROM
    if np.any(big):
        ab = a[big]
        u = 1.0 / ab
        u2 = u * u
        out[big] = 0.5 * np.log(ab) + u * (
            -1.0 / 8 + u2 * (1.0 / 192 + u2 * (-1.0 / 640 + u2 * (17.0 / 14336 - u2 * 31.0 / 18432))))
    return out.reshape(shape)


def _digamma_ratio(a):
    """``psi(a + 1/2) - psi(a)``, the derivative of :func:`_lgamma_ratio` (same series, differentiated):
    ``1/(2a) + 1/(8a^2) - 1/(64a^4) + 1/(128a^6) - 17/(2048a^8) + 31/(2048a^10)`` for ``a >= 20``."""
    shape = np.shape(a)
    a = np.atleast_1d(np.asarray(a, dtype=np.float64))
    out = special.digamma(a + 0.5) - special.digamma(a)
    big = a >= _SERIES_FROM
    if np.any(big):
        u = 1.0 / a[big]
        u2 = u * u
        out[big] = u * (0.5 + u * (1.0 / 8 + u2 * (-1.0 / 64 + u2 * (1.0 / 128 + u2 * (
            -17.0 / 2048 + u2 * 31.0 / 2048)))))
    return out.reshape(shape)


def _w_terms(w):
    """For ``w = z / sqrt(df)`` return ``log(1 + w^2)``, ``w^2/(1 + w^2)`` and ``w/(1 + w^2)`` without
    overflow: when some ``|w| > 1e150`` the ``|w| > 1`` branch is rewritten in powers of ``1/w``."""
    aw = np.abs(w)
    if np.all(aw < 1e150):  # fast path: w^2 cannot overflow
        w2 = w * w
        inv = 1.0 / (1.0 + w2)
        return np.log1p(w2), w2 * inv, w * inv
    small = aw <= 1.0
    ws = np.clip(w, -1.0, 1.0)  # equals w where small
    wb = np.where(small, 1.0, w)  # equals w where not small, |wb| >= 1
    inv = 1.0 / wb
    inv2 = inv * inv
    ws2 = ws * ws
    log1p_w2 = np.where(small, np.log1p(ws2), 2.0 * np.log(np.abs(wb)) + np.log1p(inv2))
    ratio = np.where(small, ws2 / (1.0 + ws2), 1.0 / (1.0 + inv2))
    odd = np.where(small, ws / (1.0 + ws2), inv / (1.0 + inv2))
    return log1p_w2, ratio, odd


def nll(y, loc, scale, df):
    """Negative log-density of ``y`` under ``loc + scale * t(df)``, elementwise (broadcasting).

    ``-log p(y) = log B(df/2, 1/2) + 0.5 log df + log scale + (df+1)/2 log(1 + z^2/df)``,
    ``z = (y - loc)/scale``, which equals ``-lgamma((df+1)/2) + lgamma(df/2) + 0.5 log(df pi)
    + log scale + (df+1)/2 log(1 + z^2/df)`` (``log B(a, 1/2) = lgamma(a) + lgamma(1/2) - lgamma(a+1/2)``).
    """
    y, loc, scale, df = np.broadcast_arrays(*(np.asarray(v, dtype=np.float64) for v in (y, loc, scale, df)))
    sqrt_df = np.sqrt(df)
    w = (y - loc) / scale / sqrt_df
    log1p_w2, _, _ = _w_terms(w)
    return (_HALF_LOG_PI - _lgamma_ratio(0.5 * df) + 0.5 * np.log(df) + np.log(scale)
            + 0.5 * (df + 1.0) * log1p_w2)


def nll_and_grad(y, raw):
    """Student-t NLL of ``y`` (shape ``(...)``) under raw outputs ``raw`` (shape ``(..., 3)``) and its
    derivative with respect to ``raw`` (shape ``(..., 3)``).

    Uses the formulas of the module docstring; ``dnll/draw = (d/dloc, d/dscale * sigmoid(r1),
    d/ddf * sigmoid(r2))``.
    """
    raw = np.asarray(raw, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    if raw.shape[-1:] != (3,) or y.shape != raw.shape[:-1]:
        raise ValueError(f"y must have shape raw.shape[:-1]; got y {y.shape} and raw {raw.shape}")
    loc, scale, df = domain(raw)
    sqrt_df = np.sqrt(df)
    w = (y - loc) / scale / sqrt_df
    log1p_w2, ratio, odd = _w_terms(w)  # ratio = z^2/(df+z^2), odd = sqrt(df) z/(df+z^2)
    a = 0.5 * df
    dfp1 = df + 1.0
    value = _HALF_LOG_PI - _lgamma_ratio(a) + 0.5 * np.log(df) + np.log(scale) + 0.5 * dfp1 * log1p_w2

    grad = np.empty(raw.shape, dtype=np.float64)
    # d/dloc = -(df+1) z / (scale (df+z^2)) = -(sqrt(df) + 1/sqrt(df)) / scale * w/(1+w^2)
    grad[..., 0] = -((sqrt_df + 1.0 / sqrt_df) / scale) * odd
    # d/dscale = (1 - (df+1) z^2/(df+z^2)) / scale
    grad[..., 1] = (1.0 - dfp1 * ratio) / scale * special.expit(raw[..., 1])
    # d/ddf = -0.5 [psi((df+1)/2) - psi(df/2)] + 1/(2df) + 0.5 log(1+z^2/df) - (df+1) z^2/(2 df (df+z^2))
    ddf = -0.5 * _digamma_ratio(a) + 0.5 / df + 0.5 * log1p_w2 - 0.5 * ratio * (dfp1 / df)
    grad[..., 2] = ddf * special.expit(raw[..., 2])
    return value, grad


def quantiles(loc, scale, df, levels):
    """Exact quantiles ``loc + scale * t.ppf(level, df)``, shape ``(..., len(levels))``.

    ``loc``, ``scale`` and ``df`` broadcast against each other; ``levels`` is a 1-d sequence in (0, 1).
    The standard-t quantile is ``scipy.special.stdtrit(df, level)`` (the median is exactly ``loc``).
    """
    levels = np.asarray(levels, dtype=np.float64)
    if levels.ndim != 1:
        raise ValueError(f"levels must be one-dimensional, got shape {levels.shape}")
    if np.any(~((levels > 0.0) & (levels < 1.0))):
        raise ValueError(f"quantile levels must lie strictly between 0 and 1, got {levels.tolist()}")
    loc, scale, df = np.broadcast_arrays(*(np.asarray(v, dtype=np.float64) for v in (loc, scale, df)))
    std = special.stdtrit(df[..., None], levels)
    return loc[..., None] + scale[..., None] * std


def censored_mean(loc, scale, df):
    """``E[max(Y, 0)]`` for ``Y = loc + scale T(df)`` (df > 1): with ``a = -loc / scale``,

        E[max(Y, 0)] = loc P(T > a) + scale (df + a^2) / (df - 1) f_df(a),

    since ``int_a^inf t f_df(t) dt = (df + a^2) / (df - 1) f_df(a)`` for the standard t density f_df.
    The mean of the forecast of a non-negative quantity (``--nonnegative``)."""
    loc, scale, df = np.broadcast_arrays(*(np.asarray(v, dtype=np.float64) for v in (loc, scale, df)))
    a = -loc / scale
    tail = special.stdtr(df, -a)  # P(T > a) = P(T < -a)
    log_density = (special.gammaln((df + 1.0) / 2.0) - special.gammaln(df / 2.0) - 0.5 * np.log(np.pi * df)
                   - (df + 1.0) / 2.0 * np.log1p(a * a / df))
    return loc * tail + scale * (df + a * a) / (df - 1.0) * np.exp(log_density)


def nonnegative_forecast(loc, scale, df, levels) -> tuple[np.ndarray, np.ndarray]:
    """(mean, quantiles) of ``max(Y, 0)``: :func:`censored_mean` and ``max(quantile, 0)`` (the quantiles of
    a non-decreasing function of Y are its images)."""
    return censored_mean(loc, scale, df), np.maximum(quantiles(loc, scale, df, levels), 0.0)

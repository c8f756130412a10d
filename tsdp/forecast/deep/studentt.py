"""The Student-t output head in JAX: the same domain map and likelihood as
:mod:`tsdp.forecast.studentt` (GluonTS ``StudentTOutput``), differentiated by JAX.

    loc = r0,  scale = softplus(r1) + SCALE_FLOOR,  df = 2 + softplus(r2)
    -log p(y) = lgamma(df/2) - lgamma((df+1)/2) + 0.5 log(pi df) + log scale + (df+1)/2 log(1 + w^2)

with ``w = (y - loc) / (scale sqrt(df))``; ``log(1 + w^2)`` is evaluated as
``2 log m + log1p((clip(w, -1, 1) / m)^2)``, ``m = max(|w|, 1)``, which cannot overflow.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax.scipy.special import gammaln

from tsdp.forecast.studentt import DF_OFFSET, SCALE_FLOOR

_HALF_LOG_PI = 0.5723649429247001  # 0.5 log(pi)


def domain(raw):
    """``(loc, scale, df)`` from raw outputs ``(..., 3)``."""
    return raw[..., 0], jax.nn.softplus(raw[..., 1]) + SCALE_FLOOR, DF_OFFSET + jax.nn.softplus(raw[..., 2])


def _log1p_square(w):
    big = jnp.maximum(jnp.abs(w), 1.0)
    return 2.0 * jnp.log(big) + jnp.log1p(jnp.square(jnp.clip(w, -1.0, 1.0) / big))


def nll(y, raw):
    """Elementwise negative log-likelihood of ``y`` (shape ``(...)``) under raw outputs ``(..., 3)``."""
    loc, scale, df = domain(raw)
    w = (y - loc) / (scale * jnp.sqrt(df))
    half = 0.5 * df
    return (gammaln(half) - gammaln(half + 0.5) + _HALF_LOG_PI + 0.5 * jnp.log(df) + jnp.log(scale)
            + (half + 0.5) * _log1p_square(w))


def sample(key, raw):
    """One draw per element of the distribution given by raw outputs ``(..., 3)``."""
    loc, scale, df = domain(raw)
    return loc + scale * jax.random.t(key, df, shape=loc.shape, dtype=loc.dtype)

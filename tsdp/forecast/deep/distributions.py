"""Output heads of DeepAR in JAX: Student-t (real values) and negative binomial or Poisson (counts),
as GluonTS's ``StudentTOutput``, ``NegativeBinomialOutput`` and ``PoissonOutput``.

The network emits ``args`` raw numbers per position; a head maps them to a distribution of the value
``y = z s`` in data units, where ``z`` is the mean-scaled value the network reads and ``s`` the
window's mean scale (``log_s`` below):

* ``studentt``: ``z ~ loc + scale T(df)`` (:mod:`tsdp.forecast.deep.studentt`); the NLL of ``y`` is
  ``nll(z) + log s``.
* ``negbin``: ``y ~ NB(r, p)`` with ``r = softplus(raw_0) + R_FLOOR`` and logit
  ``l = raw_1 + log s`` (GluonTS adds ``log scale`` to the logits), i.e. mean ``r e^l`` and variance
  ``r e^l (1 + e^l)``; ``-log P(y) = lgamma(r) + lgamma(y + 1) - lgamma(y + r) + r softplus(l)
  + y softplus(-l)`` (``log(1 - p) = -softplus(l)``, ``log p = -softplus(-l)``). Draws are
  gamma-Poisson mixtures, ``Poisson(e^l Gamma(r))``.
* ``poisson``: ``y ~ Poisson(lambda)`` with ``lambda = s softplus(raw_0) + RATE_FLOOR``;
  ``-log P(y) = lambda - y log lambda + lgamma(y + 1)``.

Count draws are non-negative integers, so every forecast quantile of a count head is >= 0. The head
changes only the loss whose gradient is clipped: the accountant sees the clip norm, the noise
multiplier and the sampler, never the head.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax.scipy.special import gammaln

from tsdp.errors import UsageError
from tsdp.forecast.deep import studentt
from tsdp.forecast.deep.heads import COUNT_DISTRIBUTIONS, DISTRIBUTIONS

__all__ = ["COUNT_DISTRIBUTIONS", "DISTRIBUTIONS", "head"]
R_FLOOR = 1e-6  # the negative binomial's total count stays positive
RATE_FLOOR = 1e-8  # the Poisson rate stays positive
MAX_RATE = 1e9  # draws are capped here (jax.random.poisson needs a finite rate)


class StudentT:
    name, args = "studentt", 3

    @staticmethod
    def nll(z, raw, log_s):
        return studentt.nll(z, raw) + log_s

    @staticmethod
    def sample(key, raw, s):
        """A draw of the scaled value ``z`` per element."""
        return studentt.sample(key, raw)


class NegativeBinomial:
    name, args = "negbin", 2

    @staticmethod
    def _params(raw, log_s):
        return jax.nn.softplus(raw[..., 0]) + R_FLOOR, raw[..., 1] + log_s

    @classmethod
    def nll(cls, z, raw, log_s):
        r, logit = cls._params(raw, log_s)
        y = z * jnp.exp(log_s)
        return (gammaln(r) + gammaln(y + 1.0) - gammaln(y + r) + r * jax.nn.softplus(logit)
                + y * jax.nn.softplus(-logit))

    @classmethod
    def sample(cls, key, raw, s):
        r, logit = cls._params(raw, jnp.log(s))
        k_gamma, k_poisson = jax.random.split(key)
        rate = jnp.minimum(jax.random.gamma(k_gamma, r, dtype=r.dtype) * jnp.exp(logit), MAX_RATE)
        return jax.random.poisson(k_poisson, rate).astype(r.dtype) / s


class Poisson:
    name, args = "poisson", 1

    @staticmethod
    def _rate(raw, log_s):
        return jnp.exp(log_s) * jax.nn.softplus(raw[..., 0]) + RATE_FLOOR

    @classmethod
    def nll(cls, z, raw, log_s):
        rate = cls._rate(raw, log_s)
        y = z * jnp.exp(log_s)
        return rate - y * jnp.log(rate) + gammaln(y + 1.0)

    @classmethod
    def sample(cls, key, raw, s):
        rate = jnp.minimum(cls._rate(raw, jnp.log(s)), MAX_RATE)
        return jax.random.poisson(key, rate).astype(rate.dtype) / s


_HEADS = {"studentt": StudentT, "negbin": NegativeBinomial, "poisson": Poisson}


def head(name: str):
    """The head called ``name`` (one of :data:`DISTRIBUTIONS`)."""
    if name not in _HEADS:
        raise UsageError(f"--distribution must be one of {', '.join(DISTRIBUTIONS)}, got {name!r}")
    return _HEADS[name]

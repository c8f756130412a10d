"""Privacy profiles delta(epsilon) of the dominating pairs used by tsdp, evaluated on whole grids.

A privacy profile is ``delta(eps) = H_{e^eps}(P || Q)`` for a dominating pair (P, Q), with the
hockey-stick divergence ``H_a(P || Q) = int max(dP/dQ - a, 0) dQ`` (Schuchardt et al. 2025, Def. 3.1).
Every profile here belongs to a *symmetric* relation (or is the paper's switching construction,
Lemma D.10), so its negative branch follows from the positive one through the identity

    H_a(Q || P) = 1 - a + a * H_{1/a}(P || Q),   i.e.  delta(-e) = 1 - e^{-e} + e^{-e} delta(e),

and each class only implements ``delta`` for ``eps >= 0``. Roots of the privacy loss are found for
the whole grid at once by a vectorised, bracketed Newton iteration (no per-point loop;
:func:`tsdp.accounting.calibrate.roots_increasing`); tail sums
are taken in log space so that deltas down to 1e-300 keep their relative accuracy.

Families (sigma is the noise standard deviation in units of the sensitivity scale):

* :class:`MixtureVsGaussian`: ``P = sum_j w_j N(m_j, sigma^2)`` against ``Q = N(0, sigma^2)``,
  switching profile (Thms 4.2, 4.3, 4.4, F.7, G.1, Prop. C.1/C.2 of Schuchardt et al.).
* :class:`DoubleMixture`: ``P = sum_j w_j N(-m_j, sigma^2)`` against ``Q = sum_j w_j N(m_j, sigma^2)``
  (Thms E.1, E.8, F.8).
* :class:`WeightedWithPerfect`: ``rho * inner + (1 - rho) * max(0, 1 - e^eps)`` (Thms F.1, F.2).
* :class:`GaussianProfile` and :class:`LaplaceProfile`: the two basic additive mechanisms.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field

import numpy as np
from scipy import special

from tsdp.accounting.calibrate import expand_above, expand_below, roots_increasing

# Standard-normal quantile with tail mass 1e-20: noise beyond it is treated as a privacy-loss tail.
TAIL_Z = 9.262340089798408


def _log_sf(z):
    """log(1 - Phi(z)) accurately in both tails."""
    return special.log_ndtr(-z)


def _difference(log_a, log_b):
    """exp(log_a) - exp(log_b) for log_a >= log_b, without cancellation; clipped at 0."""
    gap = np.minimum(log_b - log_a, 0.0)
    return np.exp(log_a) * -np.expm1(gap)


class Profile(ABC):
    """A privacy profile; ``delta`` works on arrays of epsilons of either sign."""

    @abstractmethod
    def delta_nonnegative(self, eps: np.ndarray) -> np.ndarray:
        """delta(eps) for eps >= 0 (array in, array out)."""

    @abstractmethod
    def max_loss(self) -> float:
        """A privacy loss beyond which delta is below about 1e-20 (the grid's upper end)."""

    def delta(self, eps) -> np.ndarray:
        eps = np.asarray(eps, dtype=float)
        out = np.empty_like(eps)
        positive = eps >= 0
        out[positive] = self.delta_nonnegative(eps[positive])
        neg = eps[~positive]
        out[~positive] = -np.expm1(neg) + np.exp(neg) * self.delta_nonnegative(-neg)
        return np.clip(out, 0.0, 1.0)


@dataclass(frozen=True)
class GaussianProfile(Profile):
    """N(mu, 1) vs N(0, 1), i.e. a Gaussian mechanism with ``mu = sensitivity / sigma``."""

    mu: float

    def delta_nonnegative(self, eps):
        from tsdp.accounting.gaussian import delta_for_epsilon

        return np.asarray(delta_for_epsilon(eps, self.mu), dtype=float)

    def max_loss(self):
        return self.mu * self.mu / 2 + self.mu * TAIL_Z


@dataclass(frozen=True)
class GaussianMixtureProfile(Profile):
    """``sum_k w_k * deltaGauss(eps; mu_k)``: a Gaussian mechanism whose sensitivity is drawn
    (publicly) from a distribution, e.g. the number of sampled time steps of one individual."""

    weights: tuple[float, ...]
    mus: tuple[float, ...]

    def delta_nonnegative(self, eps):
        from tsdp.accounting.gaussian import delta_for_epsilon

        eps = np.asarray(eps, dtype=float)
        out = np.zeros_like(eps)
        for w, mu in zip(self.weights, self.mus):  # a handful of components, each vectorised
            if w > 0 and mu > 0:
                out += w * np.asarray(delta_for_epsilon(eps, mu), dtype=float)
        return out

    def max_loss(self):
        mu = max(self.mus)
        return mu * mu / 2 + mu * TAIL_Z


@dataclass(frozen=True)
class LaplaceProfile(Profile):
    """Laplace(0, b) vs Laplace(s, b) with ``ratio = s / b``: delta(e) = 1 - exp((e - ratio)/2)."""

    ratio: float

    def delta_nonnegative(self, eps):
        return np.where(eps < self.ratio, -np.expm1((eps - self.ratio) / 2), 0.0)

    def max_loss(self):
        return self.ratio


@dataclass(frozen=True)
class DiscreteLaplaceProfile(Profile):
    """Discrete Laplace on Z, P(y) ~ exp(-a |y|), vs the same shifted by the integer ``k``.

    The privacy loss at y is ``a (|y - k| - |y|)``: ``K = a k`` for y <= 0, ``a (k - 2y)`` for
    0 < y < k, ``-K`` beyond; delta(eps) = sum over losses above eps of P(y) (1 - exp(eps - loss)),
    two geometric sums (y <= 0, and 1 <= y <= Y with Y the last y whose loss exceeds eps).
    """

    a: float
    k: int

    def delta_nonnegative(self, eps):
        a, k = self.a, self.k
        big = a * k
        eps = np.asarray(eps, dtype=float)
        y_max = np.maximum(np.ceil((k - eps / a) / 2) - 1, 0.0)
        c = -np.expm1(-a) / (1 + np.exp(-a))
        shift = np.exp(eps - big)
        left = -np.expm1(eps - big) / (1 + np.exp(-a))
        inner = c * (np.exp(-a) * -np.expm1(-a * y_max) / -np.expm1(-a)
                     - shift * np.exp(a) * np.expm1(a * y_max) / np.expm1(a))
        return np.where(eps < big, np.maximum(left + np.maximum(inner, 0.0), 0.0), 0.0)

    def max_loss(self):
        return self.a * self.k


@dataclass(frozen=True)
class _Mixture(Profile):
    """Components ``(weights, means)`` of Gaussians with common standard deviation ``sigma``;
    components of weight 0 are dropped."""

    weights: tuple[float, ...]
    means: tuple[float, ...]
    sigma: float
    _w: np.ndarray = field(init=False, repr=False, compare=False)
    _m: np.ndarray = field(init=False, repr=False, compare=False)

    def __post_init__(self):
        w, m = _components(self.weights, self.means)
        object.__setattr__(self, "_w", w)
        object.__setattr__(self, "_m", m)


@dataclass(frozen=True)
class MixtureVsGaussian(_Mixture):
    """Switching profile of ``P = sum_j w_j N(m_j, sigma^2)`` against ``Q = N(0, sigma^2)``.

    Privacy loss ``l(x) = log sum_j w_j exp((2 m_j x - m_j^2) / (2 sigma^2))`` is increasing; for
    eps >= 0 with ``l(x*) = eps``:
    ``delta = sum_j w_j Sf((x* - m_j)/sigma) - e^eps Sf(x*/sigma)`` (spec section 2.10).
    """


    def _loss(self, x):
        s2 = self.sigma ** 2
        logits = np.log(self._w)[None, :] + (2 * self._m[None, :] * x[:, None] - self._m[None, :] ** 2) / (2 * s2)
        value = special.logsumexp(logits, axis=1)
        post = np.exp(logits - value[:, None])
        return value, (post @ self._m) / s2

    def _closed_form_root(self, level):
        """The x with ``l(x) = level`` in closed form when P has one component off 0 (at most one
        more, at 0): ``l(x) = log(w_0 + w_1 exp((2 m x - m^2) / (2 sigma^2)))`` inverts to
        ``x = m/2 + sigma^2/m log((e^level - w_0)/w_1)`` (levels above log w_0); None for other
        mixtures, whose root the bracketed Newton iteration finds. Both agree to rounding; this
        one costs a handful of array operations instead of tens of Newton passes."""
        off = self._m > 0
        if off.sum() != 1 or self._m.size - off.sum() > 1:
            return None
        m, w1 = float(self._m[off][0]), float(self._w[off][0])
        w0 = float(self._w[~off].sum())
        with np.errstate(divide="ignore", invalid="ignore"):
            # log(e^level - w0) = level + log(1 - w0 e^-level), exact for large levels too
            log_excess = level + np.log1p(-w0 * np.exp(-level)) if w0 > 0 else level
        return m / 2 + self.sigma ** 2 / m * (log_excess - np.log(w1))

    def delta_nonnegative(self, eps):
        eps = np.asarray(eps, dtype=float)
        if eps.size == 0:
            return eps.copy()
        top = self._m.max()
        if top <= 0:
            return np.zeros_like(eps)
        s2 = self.sigma ** 2
        w_top = self._w[self._m == top].sum()
        # l(x) >= log w_top + (2 top x - top^2)/(2 s2): the root lies left of where that reaches eps;
        # l(x) <= (2 top x - top^2)/(2 s2) for x >= top/2 ... bracket generously on the left.
        x = self._closed_form_root(eps)
        if x is None:
            hi = s2 * (eps - np.log(w_top)) / top + top / 2 + 1e-9
            lo = np.minimum(s2 * eps / top + top / 2, hi) - 1.0 - 10 * self.sigma
            lo = expand_below(lambda x: self._loss(x)[0], eps, lo, hi)
            x = roots_increasing(self._loss, eps, lo, hi)
        log_p = special.logsumexp(np.log(self._w)[None, :] + _log_sf((x[:, None] - self._m[None, :]) / self.sigma), axis=1)
        log_q = eps + _log_sf(x / self.sigma)
        return _difference(log_p, log_q)

    def max_loss(self):
        x = np.array([self._m.max() + TAIL_Z * self.sigma])
        return float(self._loss(x)[0][0])

    def delta_add_nonnegative(self, eps):
        """``H_{e^eps}(Q || P)`` for eps >= 0 (the ADD direction of add/remove adjacency).

        With ``l(x_o) = -eps``: ``delta = Phi(x_o/sigma) - e^eps sum_j w_j Phi((x_o - m_j)/sigma)``;
        it is 0 once ``-eps <= log w_0`` (the loss of Q against P never exceeds -log w_0).
        """
        eps = np.asarray(eps, dtype=float)
        out = np.zeros_like(eps)
        floor = np.log(self._w[self._m == 0].sum()) if np.any(self._m == 0) else -np.inf
        live = -eps > floor + 1e-15
        if not live.any() or self._m.max() <= 0:
            return out
        target = -eps[live]
        top = self._m.max()
        x = self._closed_form_root(target)
        if x is None:
            hi = np.full_like(target, top / 2)  # l(top/2) >= log(sum w) + ... >= 0 >= target
            hi = expand_above(lambda x: self._loss(x)[0], target, hi)
            lo = expand_below(lambda x: self._loss(x)[0], target, hi - 1.0 - 10 * self.sigma, hi)
            x = roots_increasing(self._loss, target, lo, hi)
        log_q = special.log_ndtr(x / self.sigma)
        log_p = eps[live] + special.logsumexp(
            np.log(self._w)[None, :] + special.log_ndtr((x[:, None] - self._m[None, :]) / self.sigma), axis=1)
        out[live] = _difference(log_q, log_p)
        return out

    def directions(self) -> tuple["Profile", "Profile"]:
        """The REMOVE profile ``H(P || Q)`` and the ADD profile ``H(Q || P)`` on all epsilons."""
        return (_Directional(self.delta_nonnegative, self.delta_add_nonnegative, self.max_loss()),
                _Directional(self.delta_add_nonnegative, self.delta_nonnegative, self.max_loss()))


@dataclass(frozen=True)
class _Directional(Profile):
    """One direction of an asymmetric pair: ``positive`` gives delta for eps >= 0, and the other
    direction's positive branch gives eps < 0 through ``H_a(P||Q) = 1 - a + a H_{1/a}(Q||P)``."""

    positive: object
    reverse_positive: object
    loss: float

    def delta_nonnegative(self, eps):
        return self.positive(eps)

    def delta(self, eps):
        eps = np.asarray(eps, dtype=float)
        out = np.empty_like(eps)
        pos = eps >= 0
        out[pos] = self.positive(eps[pos])
        neg = eps[~pos]
        out[~pos] = -np.expm1(neg) + np.exp(neg) * self.reverse_positive(-neg)
        return np.clip(out, 0.0, 1.0)

    def max_loss(self):
        return self.loss


@dataclass(frozen=True)
class DoubleMixture(_Mixture):
    """Profile of ``P = sum_j w_j N(-m_j, sigma^2)`` against ``Q = sum_j w_j N(m_j, sigma^2)``.

    Privacy loss ``l(x) = log p(x) - log q(x)`` is decreasing in x; with ``l(x*) = eps``,
    ``delta = sum_j w_j Phi((x* + m_j)/sigma) - e^eps sum_j w_j Phi((x* - m_j)/sigma)``.
    The pair is symmetric, so one formula serves both signs of eps.
    """


    def _loss_at_minus(self, y):
        """``h(y) = l(-y)``, increasing in y, and ``h'(y) = (mean_p + mean_q) / sigma^2`` (posterior
        means of m under P's and Q's components at x = -y; l'(x) = -(mean_p + mean_q) / sigma^2)."""
        s2 = self.sigma ** 2
        x = -y
        log_w = np.log(self._w)[None, :]
        a = log_w - (x[:, None] + self._m[None, :]) ** 2 / (2 * s2)
        b = log_w - (x[:, None] - self._m[None, :]) ** 2 / (2 * s2)
        la, lb = special.logsumexp(a, axis=1), special.logsumexp(b, axis=1)
        mean_a = np.exp(a - la[:, None]) @ self._m
        mean_b = np.exp(b - lb[:, None]) @ self._m
        return la - lb, (mean_a + mean_b) / s2

    def delta_nonnegative(self, eps):
        eps = np.asarray(eps, dtype=float)
        if eps.size == 0:
            return eps.copy()
        top = self._m.max()
        if top <= 0:
            return np.zeros_like(eps)
        s2 = self.sigma ** 2
        # l(-y) = eps with y >= 0; l(-y) <= 2 top y / s2 gives y >= eps s2 / (2 top).
        lo = np.full_like(eps, -1e-9) + eps * s2 / (2 * top)
        hi = expand_above(lambda y: self._loss_at_minus(y)[0], eps, lo + 1.0)
        y = roots_increasing(self._loss_at_minus, eps, lo, hi)
        x = -y
        log_w = np.log(self._w)[None, :]
        log_p = special.logsumexp(log_w + special.log_ndtr((x[:, None] + self._m[None, :]) / self.sigma), axis=1)
        log_q = eps + special.logsumexp(log_w + special.log_ndtr((x[:, None] - self._m[None, :]) / self.sigma), axis=1)
        return _difference(log_p, log_q)

    def max_loss(self):
        y = np.array([self._m.max() + TAIL_Z * self.sigma])
        return float(self._loss_at_minus(y)[0][0])


@dataclass(frozen=True)
class WeightedWithPerfect(Profile):
    """``rho * inner(eps) + (1 - rho) * max(0, 1 - e^eps)`` (joint convexity, Thms F.1 and F.2)."""

    inner: Profile
    rho: float

    def delta_nonnegative(self, eps):
        return self.rho * self.inner.delta_nonnegative(eps)

    def max_loss(self):
        return self.inner.max_loss()


@dataclass(frozen=True)
class Truncated(Profile):
    """``(1 - omega) * inner + omega``: mixture with a pair of disjoint supports of weight omega.

    Used when a mixture's negligible components (total weight omega) are dropped: by joint
    convexity the full pair's profile is at most this one (the dropped part counts as fully
    distinguishable, so the bound stays an upper bound).
    """

    inner: Profile
    omega: float

    def delta_nonnegative(self, eps):
        return (1 - self.omega) * self.inner.delta_nonnegative(eps) + self.omega

    def max_loss(self):
        return self.inner.max_loss()


def _components(weights, means) -> tuple[np.ndarray, np.ndarray]:
    w = np.asarray(weights, dtype=float)
    m = np.asarray(means, dtype=float)
    if w.shape != m.shape or w.ndim != 1 or w.size == 0:
        raise ValueError("weights and means must be 1-D arrays of the same length")
    if np.any(w < 0) or not np.isclose(w.sum(), 1.0, rtol=0, atol=1e-12) or np.any(m < 0):
        raise ValueError("mixture weights must be >= 0 and sum to 1; means must be >= 0")
    keep = w > 0
    return w[keep], m[keep]

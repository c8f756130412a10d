"""Exact composition of private selections (exponential mechanisms) with a Gaussian release.

A release whose caps were chosen privately (:mod:`tsdp.mechanisms.bounds`) is a selection, an
exponential mechanism of epsilon_s, followed by a Gaussian mechanism calibrated to the cap chosen.
Basic composition charges epsilon_s + epsilon_release. The selection is more private than a generic
epsilon_s-DP mechanism, and this module composes it exactly.

**Bounded range.** The exponential mechanism Pr[j] proportional to pi_j exp(-eps s_j / (2 Delta)),
with every score s_j moved by at most Delta between neighbours, has privacy loss
L(j) = ln(Pr[j] / Pr'[j]) = -eps (s_j - s'_j) / (2 Delta) + ln(Z' / Z), whose values over j lie in
an interval [t - eps, t] of width eps: it is eps-bounded-range (Durfee and Rogers 2019, "Practical
differentially private top-k selection with pay-what-you-get composition", the exponential mechanism
is eps-BR). Since E_Q[e^L] = 1, t lies in [0, eps].

**Domination by generalized randomized response** (Dong, Durfee and Rogers 2020, "Optimal
differential privacy composition for exponential mechanisms", Section 3.1). For such a pair (P, Q)
and every alpha >= 0 the hockey-stick divergence H_alpha(P || Q) = E_Q[(e^L - alpha)_+] is the
expectation of a convex function of x = e^L on [e^(t - eps), e^t] with E_Q[x] = 1 fixed, so it is at
most that of the two-point law on the interval's ends with the same mean, and likewise
H_alpha(Q || P) = E_Q[(1 - alpha e^L)_+]. That two-point pair is GRR(eps, t): under P the loss is t
with probability p(t) = (e^eps - e^t) / (e^eps - 1) and t - eps otherwise. So GRR(eps, t) dominates
the selection's pair for that pair of neighbours (the reversed pair is GRR(eps, eps - t)).

**Composition.** Whatever cap is chosen, the Gaussian release that follows is calibrated to it and
enforces it, so for every choice its pair is dominated by (N(0, 1), N(mu, 1)) with the same mu.
Dominating pairs compose adaptively as products (Zhu, Dong and Wang 2022, Theorem 10; the rule
:mod:`tsdp.accounting.compose` uses), so k selections and the release are (epsilon, delta)-DP with

    delta(epsilon) = sup over t in [0, eps_1] x ... x [0, eps_k] of
                     E[ deltaGauss(epsilon - L_1 - ... - L_k; mu) ],   L_i ~ GRR(eps_i, t_i) under P,

deltaGauss the Gaussian profile (Balle and Wang 2018, Theorem 8) at a shifted epsilon (a shift that
may make it negative: deltaGauss is the hockey-stick of the Gaussian pair at any alpha = e^x). The
supremum is bounded from above on a grid of cells: on a cell [a_i, b_i] every loss value is at most
the one at b_i (deltaGauss grows with the loss) and p_i(t) <= p_i(a_i) (p decreases in t), and
moving probability from the low value to the high one can only raise the expectation, so
E at (b, p(a)) bounds the whole cell. With epsilon_s = 0.1 of epsilon 1 at delta 1e-6 the release
keeps the noise of a Gaussian mechanism at epsilon 0.977 instead of 0.9 (basic composition).
"""

from __future__ import annotations

import itertools
import math

from tsdp.accounting.calibrate import bisect, certify, expand
from tsdp.accounting.gaussian import delta_for_epsilon, epsilon_for_delta
from tsdp.errors import NumericalError

THEOREM = ("selections composed exactly with the Gaussian release: the exponential mechanism is bounded-range "
           "(Durfee and Rogers 2019), so dominated by generalized randomized response (Dong, Durfee and Rogers "
           "2020, Section 3.1); dominating pairs compose (Zhu, Dong and Wang 2022, Theorem 10)")
CELLS = 2 ** 16  # grid cells over the selections' t (per selection: CELLS ** (1 / k))
RESERVE = 1e-3  # of delta, left by the calibration for a discrete sampler's rounding slack and round-off


def grr_high_probability(eps: float, t):
    """p(t) = (e^eps - e^t) / (e^eps - 1): the probability under P of the high loss t of GRR(eps, t)."""
    import numpy as np

    return -np.expm1(t - eps) / -math.expm1(-eps)


def delta_bound(epsilon: float, selections: tuple[float, ...], mu: float) -> float:
    """An upper bound (module docstring) on delta(epsilon) of selections of ``selections`` (their
    epsilons, each bounded-range) composed with a Gaussian mechanism of ``mu``; exact up to the grid of
    :data:`CELLS` cells over t (256 x 256 for two selections). With no selection, the Gaussian profile itself."""
    import numpy as np

    if not selections:
        return float(delta_for_epsilon(epsilon, mu))
    if any(not (e > 0 and math.isfinite(e)) for e in selections):
        raise ValueError(f"every selection's epsilon must be positive, got {selections}")
    per = max(2, math.ceil(CELLS ** (1.0 / len(selections))))
    edges = [np.linspace(0.0, e, per + 1) for e in selections]
    lows = np.meshgrid(*[edge[:-1] for edge in edges], indexing="ij")
    highs = np.meshgrid(*[edge[1:] for edge in edges], indexing="ij")
    total = np.zeros(lows[0].shape)
    for pattern in itertools.product((True, False), repeat=len(selections)):
        weight = np.ones(lows[0].shape)
        loss = np.zeros(lows[0].shape)
        for high, e, a, b in zip(pattern, selections, lows, highs):
            p = grr_high_probability(e, a)
            weight = weight * (p if high else 1.0 - p)
            loss = loss + (b if high else b - e)
        total = total + weight * delta_for_epsilon(epsilon - loss, mu)
    return float(np.max(total))


def largest_mu(epsilon: float, delta: float, selections: tuple[float, ...]) -> float:
    """The largest Gaussian mu (up to floating point, certified) whose composition with the
    selections meets (epsilon, delta) by :func:`delta_bound`, which increases with mu."""
    def excess(mu: float) -> float:
        return math.log(max(delta_bound(epsilon, selections, mu), 5e-324)) - math.log(delta)

    grown = expand(lambda mu: excess(mu) < 0, 1.0, 2.0, 1e8)
    shrunk = expand(lambda mu: excess(mu) > 0, 1e-3 if grown.previous is None else grown.previous, 0.5, 1e-12)
    if not (grown.found and shrunk.found):
        raise NumericalError(f"could not calibrate the release for epsilon={epsilon:g}, delta={delta:g} "
                             f"after selections of epsilon {selections}")
    mu = bisect(lambda m: excess(m) > 0, shrunk.point, grown.point)[0]
    return float(certify(mu, lambda m: excess(m) > 0, lambda m: math.nextafter(m, 0.0)))


def release_epsilon(epsilon: float, delta: float, selections: tuple[float, ...], reserve: float = RESERVE) -> float:
    """The epsilon at which a Gaussian release, calibrated at (that epsilon, ``delta``) as if alone,
    composes with the selections to (``epsilon``, ``delta``) with ``reserve`` of delta to spare (for a
    discrete sampler's rounding slack, :class:`tsdp.mechanisms.bounds.Split`): the epsilon of the
    Gaussian profile of :func:`largest_mu` at ``delta (1 - reserve)`` (Balle and Wang 2018, Theorem 8),
    rounded down to 12 significant digits so the release's mu stays below it. Whatever cap is chosen,
    the release's mu is at most that (its calibration meets (epsilon, delta) at this epsilon)."""
    if not 0 < reserve < 1:
        raise ValueError(f"the reserve must be a share of delta in (0, 1), got {reserve}")
    mu = largest_mu(epsilon, delta * (1.0 - reserve), selections)
    eps = epsilon_for_delta(delta, mu)
    return float(math.floor(eps * 1e12) / 1e12) if eps > 0 else 0.0

"""Exact composition of bounded-range selections with a Gaussian release (tsdp.accounting.bounded_range).

The bound is checked against independent computations: the exact hockey-stick divergence of a
generalized randomized response composed with the Gaussian pair (two Gaussian profiles at shifted
levels, with scipy's normal CDF, not the module's), dp-accounting's PLD of the same pair, random
bounded-range pairs (any finite pair whose privacy loss spans at most eps), and the exponential
mechanisms tsdp samples, on neighbouring histograms.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import norm

from tsdp.accounting import bounded_range as br
from tsdp.accounting.gaussian import analytic_sigma, delta_for_epsilon


def gaussian_hockey_stick(x: float, mu: float) -> float:
    """H_{e^x}(N(mu, 1) || N(0, 1)) from the normal CDF (Balle and Wang 2018, Theorem 8 at any level x)."""
    return float(norm.cdf(mu / 2 - x / mu) - math.exp(x) * norm.cdf(-mu / 2 - x / mu))


def composed_delta(epsilon: float, losses, p_probs, mu: float) -> float:
    """H_{e^epsilon} of (P x N(mu, 1), Q x N(0, 1)) for a finite pair with privacy losses ``losses`` and
    P-probabilities ``p_probs``: sum_j P_j H_{e^(epsilon - L_j)}(N(mu, 1) || N(0, 1))."""
    return sum(p * gaussian_hockey_stick(epsilon - loss, mu) for loss, p in zip(losses, p_probs))


def grr(eps: float, t: float):
    """The generalized randomized response pair GRR(eps, t): losses (t, t - eps), P-probabilities."""
    p = (math.exp(eps) - math.exp(t)) / (math.exp(eps) - 1)
    return (t, t - eps), (p, 1 - p)


@pytest.mark.parametrize("eps_s, mu, epsilon", [(0.1, 0.23, 1.0), (0.5, 0.5, 1.5), (1.0, 1.0, 2.0), (0.05, 2.0, 3.0)])
def test_the_bound_covers_every_grr_and_is_attained(eps_s, mu, epsilon):
    bound = br.delta_bound(epsilon, (eps_s,), mu)
    exact = [composed_delta(epsilon, *grr(eps_s, t), mu) for t in np.linspace(0, eps_s, 201)]
    assert max(exact) <= bound
    assert bound <= max(exact) * (1 + 2e-4)  # the grid's cells are eps_s / 65536 wide


def test_two_selections_bound_every_pair_of_grrs():
    eps, mu, epsilon = (0.1, 0.2), 0.3, 1.2
    bound = br.delta_bound(epsilon, eps, mu)
    worst = 0.0
    for t1 in np.linspace(0, eps[0], 41):
        for t2 in np.linspace(0, eps[1], 41):
            (l1, p1), (l2, p2) = grr(eps[0], t1), grr(eps[1], t2)
            losses = [a + b for a in l1 for b in l2]
            probs = [a * b for a in p1 for b in p2]
            worst = max(worst, composed_delta(epsilon, losses, probs, mu))
    # 256 x 256 cells: the bound sits 1.5% above the true supremum here (1.1598e-05 on an 801 x 801 grid of t)
    assert worst <= bound <= worst * 1.02


def test_the_bound_lies_between_the_gaussian_alone_and_basic_composition():
    mu = 1.0 / analytic_sigma(0.9, 1e-6, 1.0)
    alone = delta_for_epsilon(1.0, mu)
    basic = delta_for_epsilon(0.9, mu)  # the selection's 0.1 paid in full
    bound = br.delta_bound(1.0, (0.1,), mu)
    assert alone < bound < basic
    assert br.delta_bound(1.0, (), mu) == alone


def test_dp_accounting_pld_of_the_same_pairs_agrees():
    """dp-accounting composes GRR(eps, t) (as two probability mass functions) with its Gaussian PLD."""
    from dp_accounting.pld import privacy_loss_distribution as pld

    eps_s, epsilon, sigma = 0.2, 1.0, 4.0
    gaussian = pld.from_gaussian_mechanism(sigma, sensitivity=1.0, value_discretization_interval=1e-4)
    ours = br.delta_bound(epsilon, (eps_s,), 1.0 / sigma)
    theirs = []
    for t in np.linspace(0, eps_s, 23)[1:-1]:
        (hi, lo), (p, q) = grr(eps_s, t)
        upper = {0: math.log(p), 1: math.log(q)}
        lower = {0: math.log(p) - hi, 1: math.log(q) - lo}
        pair = pld.from_two_probability_mass_functions(upper, lower, value_discretization_interval=1e-4)
        theirs.append(pair.compose(gaussian).get_delta_for_epsilon(epsilon))
    assert max(theirs) == pytest.approx(ours, rel=5e-3)


@st.composite
def bounded_range_pairs(draw):
    """A finite pair (P, Q) with privacy loss in [t - eps, t]: Q arbitrary, e^L in [e^(t - eps), e^t]
    with E_Q[e^L] = 1 (by rescaling inside the interval), P = Q e^L."""
    eps = draw(st.floats(0.01, 2.0))
    n = draw(st.integers(2, 8))
    q = np.array(draw(st.lists(st.floats(0.01, 1.0), min_size=n, max_size=n)))
    q = q / q.sum()
    u = np.array(draw(st.lists(st.floats(0.0, 1.0), min_size=n, max_size=n)))
    if u.max() - u.min() < 1e-6:
        u = np.linspace(0, 1, n)
    u = (u - u.min()) / (u.max() - u.min())  # positions in [0, 1]
    # losses s + eps u, shift s chosen so that E_Q[e^L] = 1 (then the losses span [s, s + eps])
    s = -math.log(float(np.sum(q * np.exp(eps * u))))
    losses = s + eps * u
    return eps, losses, q * np.exp(losses), q


@settings(max_examples=150, deadline=None)
@given(bounded_range_pairs(), st.floats(0.05, 3.0), st.floats(0.0, 4.0))
def test_every_bounded_range_pair_is_covered_both_ways(pair, mu, epsilon):
    eps, losses, p, q = pair
    bound = br.delta_bound(epsilon, (eps,), mu)
    forward = composed_delta(epsilon, losses, p, mu)
    backward = composed_delta(epsilon, -losses, q, mu)  # the pair (Q, P)
    assert forward <= bound * (1 + 1e-9) + 1e-15
    assert backward <= bound * (1 + 1e-9) + 1e-15


def test_tsdp_s_exponential_mechanisms_are_bounded_range_on_neighbours():
    """The selections of tsdp.mechanisms.bounds: the privacy loss over the candidates spans at most eps
    when one user (any weight the score allows, in any bin) is added."""
    from fractions import Fraction

    from tsdp.mechanisms import bounds

    rng = np.random.default_rng(5)
    eps = 0.15
    balance = bounds.Balance(target=400, weight_bound=32)
    q = Fraction(9, 10)
    for _ in range(200):
        h = rng.integers(0, 40, size=66)
        j, w = int(rng.integers(0, 66)), int(rng.integers(0, 33))
        g = h.copy()
        g[j] += w
        loss = balance.log_probabilities(g, eps) - balance.log_probabilities(h, eps)
        assert loss.max() - loss.min() <= eps * (1 + 1e-9)
        hq = rng.integers(0, 40, size=14)
        gq = hq.copy()
        gq[int(rng.integers(0, 14))] += 1
        loss = bounds.log_probabilities(gq, q, eps) - bounds.log_probabilities(hq, q, eps)
        assert loss.max() - loss.min() <= eps * (1 + 1e-9)


@pytest.mark.parametrize("selections", [(0.1,), (0.15,), (0.1, 0.1), (0.5,)])
def test_the_release_epsilon_meets_the_total_and_beats_basic_composition(selections):
    epsilon, delta = 1.0, 1e-6
    eps_r = br.release_epsilon(epsilon, delta, selections)
    assert epsilon - sum(selections) < eps_r < epsilon
    mu = 1.0 / analytic_sigma(eps_r, delta, 1.0)  # the release's calibration at eps_r
    assert br.delta_bound(epsilon, selections, mu) <= delta * (1 - br.RESERVE)
    richer = 1.0 / analytic_sigma(min(epsilon, eps_r * 1.01), delta, 1.0)
    assert br.delta_bound(epsilon, selections, richer) > delta  # 1% more epsilon breaks the total


def test_published_figure_of_the_docstring():
    assert br.release_epsilon(1.0, 1e-6, (0.1,)) == pytest.approx(0.977, abs=5e-4)

"""The analytic Gaussian calibration against dp-accounting, prv-accountant and closed forms."""

import math

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from scipy import integrate, stats

from tsdp.accounting import gaussian as g
from tsdp.errors import UsageError

BUDGETS = [(0.1, 1e-5), (0.5, 1e-4), (1.0, 1e-5), (1.0, 1e-6), (2.0, 1e-7), (8.0, 1e-10),
           (0.01, 1e-3), (20.0, 1e-12), (50.0, 1e-15)]


def dp_accounting_delta(sigma, sensitivity, epsilon):
    from dp_accounting.pld import privacy_loss_distribution as pld

    dist = pld.from_gaussian_mechanism(sigma, sensitivity=sensitivity, value_discretization_interval=1e-5)
    return dist.get_delta_for_epsilon(epsilon)


@pytest.mark.parametrize("epsilon,delta", BUDGETS)
def test_analytic_sigma_meets_target_exactly_per_dp_accounting(epsilon, delta):
    sensitivity = 3.0
    sigma = g.analytic_sigma(epsilon, delta, sensitivity)
    # dp-accounting's exact Gaussian privacy loss (independent implementation of the profile)
    from dp_accounting.pld.privacy_loss_mechanism import GaussianPrivacyLoss

    exact = GaussianPrivacyLoss(sigma, sensitivity=sensitivity).get_delta_for_epsilon(epsilon)
    assert exact == pytest.approx(delta, rel=1e-9)
    # 0.1% less noise breaks the budget
    assert GaussianPrivacyLoss(0.999 * sigma, sensitivity=sensitivity).get_delta_for_epsilon(epsilon) > delta
    if epsilon <= 8:  # the PLD grid grows with (sensitivity/sigma)^2: keep the suite fast
        # ... and its PLD built by from_gaussian_mechanism (pessimistic discretisation)
        assert dp_accounting_delta(sigma, sensitivity, epsilon) == pytest.approx(delta, rel=1e-6)
        assert dp_accounting_delta(0.999 * sigma, sensitivity, epsilon) > delta


@pytest.mark.parametrize("epsilon,delta", BUDGETS)
def test_own_profile_never_exceeds_target(epsilon, delta):
    sigma = g.analytic_sigma(epsilon, delta, 1.0)
    assert g.delta_for_epsilon(epsilon, 1.0 / sigma) <= delta
    assert g.delta_for_epsilon(epsilon, 1.0 / sigma) == pytest.approx(delta, rel=1e-9)


def test_sigma_matches_dp_accounting_calibration():
    from dp_accounting.pld.common import DifferentialPrivacyParameters
    from dp_accounting.pld.privacy_loss_mechanism import GaussianPrivacyLoss

    for epsilon, delta in BUDGETS[:6]:
        theirs = GaussianPrivacyLoss.from_privacy_guarantee(
            DifferentialPrivacyParameters(epsilon, delta), sensitivity=1.0).standard_deviation
        assert g.analytic_sigma(epsilon, delta, 1.0) == pytest.approx(theirs, rel=1e-6)


def test_epsilon_inside_prv_accountant_interval():
    from prv_accountant import PRVAccountant
    from prv_accountant.privacy_random_variables import PoissonSubsampledGaussianMechanism

    for epsilon, delta in [(0.5, 1e-4), (1.0, 1e-5), (2.0, 1e-7)]:
        sigma = g.analytic_sigma(epsilon, delta, 1.0)
        acc = PRVAccountant(
            prvs=[PoissonSubsampledGaussianMechanism(sampling_probability=1.0, noise_multiplier=sigma)],
            max_self_compositions=[1], eps_error=1e-3, delta_error=delta * 1e-4)
        low, _, high = acc.compute_epsilon(delta=delta, num_self_compositions=[1])
        assert low <= epsilon <= high
        assert low <= g.epsilon_for_delta(delta, 1.0 / sigma) <= high


@pytest.mark.parametrize("epsilon,mu", [(0.0, 0.5), (0.7, 1.0), (3.0, 2.5), (0.2, 0.05)])
def test_profile_equals_numerical_hockey_stick_integral(epsilon, mu):
    """delta(eps) = int max(0, p(x) - e^eps q(x)) dx for p = N(mu, 1), q = N(0, 1)."""
    def integrand(x):
        return max(0.0, stats.norm.pdf(x, loc=mu) - math.exp(epsilon) * stats.norm.pdf(x))

    crossing = epsilon / mu + mu / 2  # p >= e^eps q exactly for x >= crossing
    numeric, _ = integrate.quad(integrand, crossing, np.inf, epsabs=1e-14, epsrel=1e-12)
    assert g.delta_for_epsilon(epsilon, mu) == pytest.approx(numeric, rel=1e-8, abs=1e-15)


def test_classic_formula_value_and_ordering():
    # c(1e-4) = 4.343612 and c(5e-5) = 4.500362 (koga spec 5.1, golden)
    assert g.classic_sigma(1.0, 1e-4, 1.0) == pytest.approx(4.343612, abs=1e-6)
    assert g.classic_sigma(1.0, 5e-5, 1.0) == pytest.approx(4.500362, abs=1e-6)
    # PeMS baseline of Koga et al.: sigma = c(1e-4) * sqrt(180) / 0.5 = 116.551
    assert g.classic_sigma(0.5, 1e-4, math.sqrt(180)) == pytest.approx(116.551, abs=1e-3)
    for epsilon, delta in BUDGETS:
        if epsilon < 1:
            assert g.analytic_sigma(epsilon, delta, 1.0) < g.classic_sigma(epsilon, delta, 1.0)


@settings(max_examples=200, deadline=None)
@given(epsilon=st.floats(1e-3, 40.0), delta=st.floats(1e-14, 0.4), sensitivity=st.floats(1e-3, 1e3))
def test_calibration_is_tight_and_safe(epsilon, delta, sensitivity):
    sigma = g.analytic_sigma(epsilon, delta, sensitivity)
    assert g.delta_for_epsilon(epsilon, sensitivity / sigma) <= delta
    assert g.delta_for_epsilon(epsilon, sensitivity / (sigma * (1 - 1e-6))) > delta * (1 - 1e-12) or sigma < 1e-300
    assert sigma / sensitivity == pytest.approx(g.analytic_sigma(epsilon, delta, 1.0), rel=1e-9)


@settings(max_examples=100, deadline=None)
@given(mu=st.floats(0.01, 20.0), delta=st.floats(1e-14, 0.3))
def test_epsilon_for_delta_inverts_the_profile(mu, delta):
    eps = g.epsilon_for_delta(delta, mu)
    assert eps >= 0
    assert g.delta_for_epsilon(eps, mu) <= delta
    if eps > 1e-9:
        assert g.delta_for_epsilon(eps * (1 - 1e-6), mu) > delta * (1 - 1e-9)


@settings(max_examples=100, deadline=None)
@given(mu=st.floats(0.01, 20.0), e1=st.floats(0, 30), e2=st.floats(0, 30))
@example(mu=0.125, e1=0.0, e2=1.18e-17)  # 10 ulps apart (found by hypothesis)
def test_profile_is_monotone_and_in_unit_interval(mu, e1, e2):
    lo, hi = sorted((e1, e2))
    d_lo, d_hi = g.delta_for_epsilon(lo, mu), g.delta_for_epsilon(hi, mu)
    # Two epsilons a few ulps apart give deltas that differ only by rounding: delta is the difference
    # Phi(mu/2 - eps/mu) - e^eps Phi(-mu/2 - eps/mu), so its relative rounding error is a few ulps of
    # the terms, amplified by their sum over their difference (about 20 at mu = 0.125, eps = 0: 10 ulps
    # were seen there). The profile is monotone up to that resolution.
    from scipy.special import ndtr

    terms = ndtr(mu / 2 - lo / mu) + np.exp(lo) * ndtr(-mu / 2 - lo / mu)
    ulps = 8 * np.finfo(float).eps * max(1.0, terms / d_lo) if d_lo > 0 else 8 * np.finfo(float).eps
    assert 0 <= d_hi <= d_lo * (1 + ulps) and d_lo <= 1
    assert g.delta_for_epsilon(lo, mu * 1.1) >= d_lo * (1 - ulps)


def test_vectorised_profile_matches_scalar():
    eps = np.linspace(0, 10, 101)
    vec = g.delta_for_epsilon(eps, 1.3)
    assert vec.shape == eps.shape
    assert np.allclose(vec, [g.delta_for_epsilon(float(e), 1.3) for e in eps], rtol=0, atol=0)


@pytest.mark.parametrize("epsilon,delta", [(0, 1e-5), (-1, 1e-5), (math.inf, 1e-5), (math.nan, 1e-5),
                                           (1, 0), (1, 1), (1, -0.1), (1, math.nan)])
def test_bad_budget_is_a_usage_error(epsilon, delta):
    with pytest.raises(UsageError):
        g.analytic_sigma(epsilon, delta, 1.0)

"""Accounting of the hardened sampler's events, checked against dp-accounting's discrete profiles."""

import math

import numpy as np
import pytest
from dp_accounting.pld import privacy_loss_distribution as pl

from tsdp.accounting import discrete as disc
from tsdp.accounting.claim import MechanismEvent, PrivacyClaim
from tsdp.accounting.compose import event_pld, events_privacy
from tsdp.accounting.profiles import DiscreteLaplaceProfile, LaplaceProfile


@pytest.mark.parametrize("a,k", [(0.3, 3), (0.05, 20), (0.002, 500)])
def test_discrete_laplace_profile_matches_dp_accounting(a, k):
    ref = pl.from_discrete_laplace_mechanism(a, sensitivity=k, value_discretization_interval=1e-6)
    ours = DiscreteLaplaceProfile(a, k)
    for eps in (0.0, 0.3 * a * k, 0.9 * a * k):
        assert ours.delta([eps])[0] == pytest.approx(ref.get_delta_for_epsilon(eps), abs=2e-5)


def test_discrete_laplace_profile_differs_from_continuous_at_small_k():
    """Why the discrete pair has its own profile: with few lattice steps it is less private."""
    assert DiscreteLaplaceProfile(0.3, 3).delta([0.1])[0] > LaplaceProfile(0.9).delta([0.1])[0] + 1e-3


@pytest.mark.parametrize("sigma,k", [(20.0, 3), (40.0, 7)])
def test_discrete_gaussian_event_epsilon_bounds_dp_accounting(sigma, k):
    """The epsilon tsdp reports for a discrete-gaussian event (continuous profile, CKS Thm 15) is an
    upper bound on dp-accounting's discrete Gaussian epsilon, and close to it."""
    g = 0.5
    event = MechanismEvent("discrete-gaussian", k * g, sigma * g, 1, granularity=g)
    ours = event_pld(event).epsilon(1e-6)
    ref = pl.from_discrete_gaussian_mechanism(sigma, sensitivity=k, value_discretization_interval=1e-4)
    exact = ref.get_epsilon_for_delta(1e-6)
    assert ours >= exact - 2e-3  # dp-accounting's own pessimistic rounding is 1e-4 per unit of loss
    assert ours == pytest.approx(exact, abs=5e-3)


def test_discrete_laplace_event_pld_and_pure_epsilon():
    g, b, steps = 2.0 ** -4, 3.0, 20
    event = MechanismEvent("discrete-laplace", steps * g, b, 2, granularity=g)
    ok, _ = events_privacy((event,), "pure-dp", 2 * steps * g / b, 0.0)
    assert ok
    bad, text = events_privacy((event,), "pure-dp", 2 * steps * g / b * 0.99, 0.0)
    assert not bad and "more privacy" in text
    eps = event_pld(event).epsilon(1e-6)
    ref = pl.from_discrete_laplace_mechanism(g / b, sensitivity=steps, value_discretization_interval=1e-4)
    assert eps == pytest.approx(ref.self_compose(2).get_epsilon_for_delta(1e-6), abs=2e-3)


def test_discrete_laplace_event_needs_lattice_sensitivity():
    from tsdp.errors import NumericalError

    with pytest.raises(NumericalError, match="multiple"):
        event_pld(MechanismEvent("discrete-laplace", 1.3, 3.0, 1, granularity=0.25))


def test_events_need_their_granularity_and_round_trip():
    with pytest.raises(ValueError):
        MechanismEvent("discrete-gaussian", 1.0, 2.0)
    with pytest.raises(ValueError):
        MechanismEvent("gaussian", 1.0, 2.0, granularity=0.5)
    from tsdp.accounting.sensitivity import ContributionBounds, privacy_unit

    unit = privacy_unit(ContributionBounds(level="event", max_per_step=1.0), 1, None, False)
    claim = PrivacyClaim("approx-dp", unit, 1.0, 1e-6, "gaussian", "t",
                         (MechanismEvent("discrete-gaussian", 1.5, 6.0, 1, granularity=0.5),))
    assert PrivacyClaim.from_dict(claim.to_dict()) == claim
    plain = PrivacyClaim("approx-dp", unit, 1.0, 1e-6, "gaussian", "t", (MechanismEvent("gaussian", 1.0, 6.0),))
    assert "granularity" not in plain.to_dict()["events"][0]


def test_granularity_rules():
    from tsdp.errors import UsageError

    g = disc.choose_granularity(4.2, 1.0, 1, "l2")
    assert math.frexp(g)[0] == 0.5 and 2 ** 20 <= 4.2 / g <= 2 ** 24 and g <= 2 ** -20  # g sqrt(1) <= Delta 2^-20
    many = disc.choose_granularity(4.2, 1.0, 10 ** 6, "l2")  # the rounding would cost g * 1000: capped at 2^-24 sigma
    assert 2 ** 23 < 4.2 / many <= 2 ** 24
    assert disc.tau_bound(8.0) < 1e-270
    with pytest.raises(UsageError):
        disc.check_granularity(0.3)
    assert np.isclose(disc.rounded_step(1.0, 0.25), 1.25)


@pytest.mark.parametrize("sigma,shifts", [(20.0, (5,)), (20.0, (3, 4)), (30.0, (7,)), (30.0, (2, 3, 6)), (30.0, (6, 3, 2))])
def test_multivariate_discrete_gaussian_epsilon_covers_every_realisable_shift(sigma, shifts):
    """A d-dimensional discrete-gaussian event of L2 lattice sensitivity ||shifts||_2 is reported
    with the continuous Gaussian's profile (CKS 2020, multivariate theorem). Any one pair of
    neighbours whose lattice difference is ``shifts`` is a product of independent 1-D discrete
    Gaussian pairs, so composing dp-accounting's 1-D discrete Gaussian PLDs gives that pair's
    exact epsilon: a LOWER bound on the mechanism's epsilon, which the reported one must cover.
    (Composing d PLDs each of the full sensitivity would be an upper bound but loose by about
    sqrt(d); it checks nothing about tightness, so it is not used.) The reported epsilon is also
    close to these: the pairs (5), (3, 4) and (2, 3, 6) all reach the L2 bound exactly."""
    g = 2.0 ** -3
    l2 = math.sqrt(sum(s * s for s in shifts))
    assert l2 == round(l2)
    event = MechanismEvent("discrete-gaussian", l2 * g, sigma * g, 1, granularity=g)
    ours = event_pld(event).epsilon(1e-6)
    pair = None
    for s in shifts:
        one = pl.from_discrete_gaussian_mechanism(sigma, sensitivity=s, value_discretization_interval=1e-4)
        pair = one if pair is None else pair.compose(one)
    exact = pair.get_epsilon_for_delta(1e-6)
    assert ours >= exact - 1e-4 * len(shifts) * 3  # dp-accounting's pessimistic rounding, per composed PLD
    assert ours == pytest.approx(exact, abs=5e-3)


def test_hardened_mean_estimate_claims_compose_through_their_discrete_laplace_events():
    """mean-estimate (array-averaging, hardened) claims carry discrete-laplace events: composed at a
    delta they go through the PLD path, below basic composition and at least the exact epsilon of
    one group's discrete Laplace composed k times (dp-accounting); a LEVY claim (no events) forces
    basic composition."""
    from tsdp.accounting.compose import BASIC, TIGHT, compose_claims
    from tsdp.mean import MeanSettings, claim_for, estimate_groups
    from tsdp.mean.synthetic import flat_layout

    rng = np.random.default_rng(3)
    groups = [[rng.uniform(0, 65, 20) for _ in range(8)] for _ in range(3)]
    values, us, gs = flat_layout(groups)
    s = MeanSettings(epsilon=0.5, upper=65.0, algorithm="array-averaging")
    est = estimate_groups(values, us, gs, s, rng)
    claim = claim_for(s, len(est), "uid", est)
    assert {e.kind for e in claim.events} == {"discrete-laplace"}
    out = compose_claims([claim, claim], delta=1e-6)
    assert out.method == TIGHT and out.epsilon < out.basic_epsilon == 2 * 0.5 * 3
    (event,) = claim.events  # same arrays per group: one scale
    g = event.granularity
    single = pl.from_discrete_laplace_mechanism(g / event.noise, sensitivity=int(event.sensitivity / g),
                                                value_discretization_interval=1e-4)
    exact = single.self_compose(6).get_epsilon_for_delta(1e-6)
    assert out.epsilon >= exact * (1 - 1e-3)
    levy = MeanSettings(epsilon=0.5, upper=65.0, algorithm="levy")
    other = claim_for(levy, 3, "uid", estimate_groups(values, us, gs, levy, rng))
    assert compose_claims([claim, other], delta=1e-6).method == BASIC

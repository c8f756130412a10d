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


def _reported_epsilon(event, delta):
    """The epsilon tsdp reports for events: the continuous PLD at delta minus the rounding slack."""
    from tsdp.accounting.compose import epsilon_with_slack, slack_rate

    return epsilon_with_slack(event_pld(event).epsilon, delta, slack_rate([event]))


@pytest.mark.parametrize("sigma,k", [(20.0, 3), (40.0, 7)])
def test_discrete_gaussian_event_epsilon_bounds_dp_accounting(sigma, k):
    """The epsilon tsdp reports for a discrete-gaussian event (continuous profile plus the rounding slack) is
    at least dp-accounting's OPTIMISTIC discrete Gaussian epsilon (a lower bound on the true one), and close."""
    g, delta = 0.5, 1e-2  # a coarse lattice: its slack needs a large delta
    event = MechanismEvent("discrete-gaussian", k * g, sigma * g, 1, granularity=g, lattice_coords=1)
    ours = _reported_epsilon(event, delta)
    ref = pl.from_discrete_gaussian_mechanism(sigma, sensitivity=k, value_discretization_interval=1e-4,
                                              pessimistic_estimate=False)
    exact = ref.get_epsilon_for_delta(delta)
    assert exact <= ours <= exact + 0.02


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
    with pytest.raises(ValueError, match="lattice_coords"):
        MechanismEvent("discrete-gaussian", 1.0, 2.0, granularity=0.5)  # its slack needs m
    with pytest.raises(ValueError, match="lattice_coords"):
        MechanismEvent("discrete-laplace", 1.0, 2.0, granularity=0.5, lattice_coords=2)
    from tsdp.accounting.sensitivity import ContributionBounds

    unit = ContributionBounds(level="event", max_per_step=1.0).privacy_unit(1, None, False)
    claim = PrivacyClaim("approx-dp", unit, 1.0, 1e-6, "gaussian", "t",
                         (MechanismEvent("discrete-gaussian", 1.5, 6.0, 1, granularity=0.5, lattice_coords=3),))
    assert PrivacyClaim.from_dict(claim.to_dict()) == claim
    plain = PrivacyClaim("approx-dp", unit, 1.0, 1e-6, "gaussian", "t", (MechanismEvent("gaussian", 1.0, 6.0),))
    assert "granularity" not in plain.to_dict()["events"][0]


def test_granularity_rules():
    from tsdp.errors import UsageError

    g = disc.choose_granularity(4.2, 1.0, 1, "l2")
    assert math.frexp(g)[0] == 0.5 and 2 ** 20 <= 4.2 / g <= 2 ** 24 and g <= 2 ** -20  # g sqrt(1) <= Delta 2^-20
    many = disc.choose_granularity(4.2, 1.0, 10 ** 6, "l2")  # the rounding would cost g * 1000: capped at 2^-24 sigma
    assert 2 ** 23 < 4.2 / many <= 2 ** 24
    # the slack of the default lattice is negligible: below 2.3e-14 (1 + e^eps) per changed value
    assert disc.rounding_slack(1.0, disc.slack_rate(2.0 ** 20, 1)) < 2.3e-14 * (1 + math.e)
    assert disc.slack_budget(1.0, 1e-6, 2.0 ** 20, 2000) > 1e-6 * (1 - 1e-3)
    with pytest.raises(UsageError, match="finer --granularity"):
        disc.slack_budget(1.0, 1e-6, 8.0, 10)
    with pytest.raises(UsageError):
        disc.check_granularity(0.3)
    assert np.isclose(disc.rounded_step(1.0, 0.25), 1.25)


@pytest.mark.parametrize("sigma,shifts", [(20.0, (5,)), (20.0, (3, 4)), (30.0, (7,)), (30.0, (2, 3, 6)), (30.0, (6, 3, 2))])
def test_multivariate_discrete_gaussian_epsilon_covers_every_realisable_shift(sigma, shifts):
    """A d-dimensional discrete-gaussian event of L2 lattice sensitivity ||shifts||_2 is reported
    with the continuous Gaussian's profile plus the rounding slack. Any one pair of
    neighbours whose lattice difference is ``shifts`` is a product of independent 1-D discrete
    Gaussian pairs, so composing dp-accounting's 1-D discrete Gaussian PLDs gives that pair's
    exact epsilon: a LOWER bound on the mechanism's epsilon, which the reported one must cover.
    (Composing d PLDs each of the full sensitivity would be an upper bound but loose by about
    sqrt(d); it checks nothing about tightness, so it is not used.) The reported epsilon is also
    close to these: the pairs (5), (3, 4) and (2, 3, 6) all reach the L2 bound exactly."""
    g, delta = 2.0 ** -3, 1e-2
    l2 = math.sqrt(sum(s * s for s in shifts))
    assert l2 == round(l2)
    event = MechanismEvent("discrete-gaussian", l2 * g, sigma * g, 1, granularity=g, lattice_coords=len(shifts))
    ours = _reported_epsilon(event, delta)
    pair = None
    for s in shifts:
        one = pl.from_discrete_gaussian_mechanism(sigma, sensitivity=s, value_discretization_interval=1e-4,
                                                  pessimistic_estimate=False)
        pair = one if pair is None else pair.compose(one)
    exact = pair.get_epsilon_for_delta(delta)  # optimistic: a lower bound on this pair's epsilon
    assert exact <= ours <= exact + 0.03


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


def _discrete_delta(s, n, k, eps):
    """Exact delta of k independent 1-D discrete Gaussian pairs (parameter s, integer shift n) at eps."""
    z = np.arange(-int(40 * s), int(40 * s) + 1)
    pmf = np.exp(-z.astype(float) ** 2 / (2 * s * s))
    pmf /= pmf.sum()
    total = pmf
    for _ in range(k - 1):
        total = np.convolve(total, pmf)
    sums = np.arange(total.size) - (total.size - 1) // 2
    loss = (2 * n * sums + k * n * n) / (2 * s * s)  # privacy loss under the shifted side
    return float(np.sum(total * np.clip(-np.expm1(eps - loss), 0, None)))


def test_discrete_gaussian_can_be_less_private_than_the_continuous_one():
    """Why the rounding slack exists: at the same Delta/sigma the discrete delta can exceed the continuous
    one (the lattice of the privacy loss), and the slack (1 + e^eps) m 0.025 / s^2 covers the excess."""
    from tsdp.accounting.normal import gaussian_delta

    for s, n, k, eps in [(8.0, 3, 1, 0.1), (8.0, 10, 1, 1.0), (19.5, 3, 2, 1.0), (8.0, 3, 4, 1.0)]:
        exact = _discrete_delta(s, n, k, eps)
        continuous = float(gaussian_delta(eps, n * math.sqrt(k) / s))
        assert exact > continuous * (1 + 1e-4)
        assert exact <= continuous + disc.rounding_slack(eps, disc.slack_rate(s, k))


@pytest.mark.parametrize("s", [8.0, 20.0])
def test_lattice_total_variation_bound(s):
    """Sum |discrete - rounded Gaussian| per coordinate (mpmath for the rounded pmf) against the bound."""
    from mpmath import erfc, mp, mpf, sqrt

    mp.dps = 30
    z = np.arange(-int(30 * s), int(30 * s) + 1)
    dg = np.exp(-z.astype(float) ** 2 / (2 * s * s))
    dg /= dg.sum()
    rounded = np.array([float((erfc((mpf(int(k)) - mpf(1) / 2) / (s * sqrt(2)))
                               - erfc((mpf(int(k)) + mpf(1) / 2) / (s * sqrt(2)))) / 2) for k in z])
    tv = 0.5 * np.abs(dg - rounded).sum()
    assert 0.019 / s ** 2 < tv <= disc.lattice_tv(s) == 0.025 / s ** 2


@pytest.mark.parametrize("p,I", [(0.5, 4), (0.3, 6)])
def test_hardened_subsample_claim_bounds_the_exact_discrete_mixture(p, I):
    """From below: a hardened subsample release on a coarse lattice (sigma / g about 10). Given the public J,
    k = |J cap changed steps| kept cells move by at most M' = (floor(M/g) + 1) g each, i.e. n lattice steps;
    the exact profile of that discrete pair is the k-fold product of 1-D discrete Gaussian pairs with shift
    n (dp-accounting's PLD, pessimistic), mixed over k with the claim's own weights. It never exceeds the
    claimed delta at the claimed epsilon (continuous profile plus the rounding slack)."""
    from tsdp.mechanisms import subsample as sm
    from tsdp.mechanisms.baseline import Panel

    T, g = 12, 0.25
    pnl = Panel(1, T, sm.participation_bounds(T, I))  # delta large enough for the coarse lattice's slack
    rel = sm.release_subsample(np.zeros(T), pnl, 1.0, 0.05, np.random.default_rng(0), p, granularity=g)
    c = rel.claim
    (ev,) = c.events
    sigma_l, n = ev.noise / g, round(disc.rounded_step(1.0, g) / g)
    assert ev.kind == "discrete-gaussian-mixture" and 8 <= sigma_l <= 40 and n == 5
    base = pl.from_discrete_gaussian_mechanism(sigma_l, sensitivity=n, value_discretization_interval=1e-5)
    exact = 0.0
    for weight, sens in ev.mixture:
        k = round((sens / (n * g)) ** 2)
        assert sens == pytest.approx(n * g * math.sqrt(k), rel=1e-12)
        if k:
            exact += weight * base.self_compose(k).get_delta_for_epsilon(c.epsilon)
    assert 0.75 * c.delta < exact <= c.delta  # below the claim; the coarse lattice's slack is the gap


def test_a_forecast_report_stating_the_earlier_float_reason_still_verifies_its_sampler():
    """Reports keep the reason of the version that wrote them: the earlier forecast-train text is known."""
    from tsdp.verify.checks import _sampler_check
    from tsdp.forecast.claim import MECHANISM

    class Claim:
        mechanism = MECHANISM
        parameters = {"sampler": "float", "float_noise_reason": disc.FLOAT_ONLY_EARLIER["forecast-train"][0]}

    assert _sampler_check({}, Claim()).passed
    Claim.parameters = {"sampler": "float", "float_noise_reason": "hardened after all"}
    assert not _sampler_check({}, Claim()).passed

"""The PLD interface (tsdp.accounting.pld_backend): both back ends build and compose the same
dominating PLDs, against the closed form of composed Gaussians and against each other."""

from __future__ import annotations

import math

import numpy as np
import pytest

from tsdp.accounting import gaussian
from tsdp.accounting.grid import tail_mass_for
from tsdp.accounting.pld_backend import DENSE, DP_ACCOUNTING
from tsdp.accounting.profiles import GaussianProfile, MixtureVsGaussian
from tsdp.accounting.sgd import poisson_gaussian_pld

D = 1e-3
DELTA = 1e-6
BACKENDS = [DENSE, DP_ACCOUNTING]


@pytest.mark.parametrize("backend", BACKENDS, ids=lambda b: b.name)
@pytest.mark.parametrize("mu,times", [(0.5, 1), (0.3, 20), (1.0, 7)])
def test_self_composed_gaussian_bounds_the_closed_form(backend, mu, times):
    """n Gaussians of mu compose to one of mu sqrt(n) (Dong, Roth and Su 2022): the PLD's epsilon is
    an upper bound, within a grid step per composition."""
    pld = backend.from_profile(GaussianProfile(mu), D).self_compose(times, tail_mass_for(DELTA))
    exact = gaussian.epsilon_for_delta(DELTA, mu * math.sqrt(times))
    assert exact <= pld.epsilon(DELTA) <= exact + times * D + 1e-9
    assert pld.delta(exact) >= DELTA * (1 - 1e-9)  # the delta read-off is an upper bound too


@pytest.mark.parametrize("backend", BACKENDS, ids=lambda b: b.name)
def test_compose_two_gaussians_bounds_the_closed_form(backend):
    a, b = backend.from_profile(GaussianProfile(0.4), D), backend.from_profile(GaussianProfile(0.7), D)
    pld = a.compose(b, tail_mass_for(DELTA))
    exact = gaussian.epsilon_for_delta(DELTA, math.hypot(0.4, 0.7))
    assert exact <= pld.epsilon(DELTA) <= exact + 2 * D + 1e-9


def test_dense_compose_with_itself_is_its_self_composition():
    pld = DENSE.from_profile(GaussianProfile(0.6), D)
    twice, squared = pld.compose(pld), pld.self_compose(2, 0.0)
    assert twice.pmfs[0].lower == squared.pmfs[0].lower
    np.testing.assert_allclose(twice.pmfs[0].probs, squared.pmfs[0].probs[:twice.pmfs[0].probs.size], atol=1e-15)
    assert twice.epsilon(DELTA) == pytest.approx(squared.epsilon(DELTA), abs=1e-12)


def test_a_symmetric_dense_pld_composes_with_an_add_remove_one_in_both_directions():
    symmetric = DENSE.from_profile(GaussianProfile(0.5), D)
    remove, add = MixtureVsGaussian((0.9, 0.1), (0.0, 1.0), 1.0).directions()
    pair = DENSE.from_directions(remove, add, D)
    both = pair.compose(symmetric)
    assert len(both.pmfs) == 2
    assert both.epsilon(DELTA) == max(pair.pmfs[i].compose(symmetric.pmfs[0]).epsilon(DELTA) for i in (0, 1))


@pytest.mark.parametrize("q,sigma,steps", [(0.01, 1.0, 200), (0.1, 2.0, 30)])
def test_backends_agree_on_the_poisson_subsampled_gaussian(q, sigma, steps):
    """The same dominating pair three ways: DP-SGD's own sampled profile (dense), and the mixture's
    two directions through either back end; all within a few grid steps per composition."""
    remove, add = MixtureVsGaussian((1 - q, q), (0.0, 1.0), sigma).directions()
    tail = tail_mass_for(DELTA)
    eps = [poisson_gaussian_pld(q, sigma, D).self_compose(steps, tail).epsilon(DELTA)]
    eps += [b.from_directions(remove, add, D).self_compose(steps, tail).epsilon(DELTA) for b in BACKENDS]
    assert max(eps) - min(eps) <= 1e-2 * max(eps) + 2 * D


@pytest.mark.parametrize("backend", BACKENDS, ids=lambda b: b.name)
def test_sampled_profiles_build_the_same_pld_as_the_profile(backend):
    profile = GaussianProfile(0.8)
    hi = math.ceil(profile.max_loss() / D)
    sampled = backend.from_sampled_profiles([(-hi, profile.delta(np.arange(-hi, hi + 1) * D))], D)
    direct = backend.from_profile(profile, D)
    for e in (0.0, 0.5, 2.0):
        assert sampled.delta(e) == direct.delta(e)
    assert sampled.self_compose(5, 1e-12).epsilon(DELTA) == direct.self_compose(5, 1e-12).epsilon(DELTA)

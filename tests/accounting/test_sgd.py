"""Standard (record-level) DP-SGD accounting (tsdp.accounting.sgd, tsdp.accounting.dense).

Cross-checked against dp-accounting's PLD accountant and Microsoft's prv_accountant on the case
every Opacus / TF-Privacy user knows: Poisson q = 0.01, sigma = 1, 10^4 steps, delta = 1e-5,
add/remove of one record (epsilon about 6.19).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from tsdp.accounting import sgd
from tsdp.accounting.dense import DensePmf, _chernoff_window
from tsdp.accounting.gaussian import epsilon_for_delta
from tsdp.errors import UsageError

STANDARD = sgd.SgdSetting(0.01, 1.0)


@pytest.fixture(scope="module")
def standard_epsilon() -> float:
    return sgd.epsilon(STANDARD, 10_000, 1e-5, 1e-3)


def test_matches_dp_accounting_pld_accountant(standard_epsilon):
    from dp_accounting import dp_event
    from dp_accounting.pld.pld_privacy_accountant import PLDAccountant

    accountant = PLDAccountant(value_discretization_interval=1e-3)
    accountant.compose(dp_event.PoissonSampledDpEvent(0.01, dp_event.GaussianDpEvent(1.0)), 10_000)
    reference = accountant.get_epsilon(1e-5)
    assert standard_epsilon == pytest.approx(6.191, abs=5e-4)
    # the same pessimistic construction on the same grid: equal up to truncation and rounding
    assert abs(standard_epsilon - reference) < 1e-6


def test_within_prv_accountant_bounds(standard_epsilon):
    from prv_accountant import PoissonSubsampledGaussianMechanism, PRVAccountant

    prv = PoissonSubsampledGaussianMechanism(noise_multiplier=1.0, sampling_probability=0.01)
    accountant = PRVAccountant(prvs=prv, max_self_compositions=10_000, eps_error=0.05, delta_error=1e-8)
    low, estimate, high = accountant.compute_epsilon(delta=1e-5, num_self_compositions=[10_000])
    # an upper bound (never below the true epsilon, which is >= low) that is tight (<= high)
    assert low <= standard_epsilon <= high
    assert standard_epsilon == pytest.approx(estimate, abs=0.01)


def test_finer_grid_is_tighter_and_still_an_upper_bound(standard_epsilon):
    fine = sgd.epsilon(STANDARD, 10_000, 1e-5, 1e-4)
    assert 6.18 < fine <= standard_epsilon


@pytest.mark.parametrize("sigma", [0.7, 1.0, 3.0])
def test_no_subsampling_is_the_gaussian_mechanism(sigma):
    """q = 1: one step is the Gaussian mechanism; n steps are one with sensitivity sqrt(n)."""
    for steps in (1, 16):
        exact = epsilon_for_delta(1e-5, math.sqrt(steps) / sigma)
        ours = sgd.epsilon(sgd.SgdSetting(1.0, sigma), steps, 1e-5, 1e-4)
        assert exact - 1e-9 <= ours <= exact + 2e-3


def test_fixed_size_substitution_matches_the_structured_spec():
    """Prop. C.1 pair with switching: the spec's [derived] values for sigma 1, q 0.01, delta 1e-5."""
    setting = sgd.SgdSetting(0.01, 1.0, "fixed", "substitution")
    for steps, expected in ((1, 3.0254), (100, 6.6408), (1000, 14.8207)):
        assert sgd.epsilon(setting, steps, 1e-5) == pytest.approx(expected, rel=2e-3)


def test_fixed_size_substitution_is_never_below_the_poisson_add_remove_bound():
    poisson = sgd.epsilon(STANDARD, 1000, 1e-5)
    fixed = sgd.epsilon(sgd.SgdSetting(0.01, 1.0, "fixed", "substitution"), 1000, 1e-5)
    assert fixed > poisson


def test_epsilon_grows_with_steps_and_shrinks_with_noise():
    eps = [sgd.epsilon(STANDARD, n, 1e-5) for n in (1, 10, 100, 1000)]
    assert eps == sorted(eps) and eps[0] > 0
    assert sgd.epsilon(sgd.SgdSetting(0.01, 2.0), 1000, 1e-5) < eps[-1]


def test_calibrated_noise_is_on_the_safe_side():
    sigma, eps = sgd.calibrate_noise(STANDARD, 3.0, 2000, 1e-5)
    assert eps <= 3.0
    assert sgd.epsilon(sgd.SgdSetting(0.01, sigma), 2000, 1e-5) == eps
    assert sgd.epsilon(sgd.SgdSetting(0.01, sigma / 1.002), 2000, 1e-5) > 3.0  # and tight to rtol


def test_max_steps_is_the_last_step_within_the_target():
    count, eps = sgd.max_steps(STANDARD, 2.0, 1e-5)
    assert eps <= 2.0 < sgd.epsilon(STANDARD, count + 1, 1e-5)
    assert sgd.epsilon(STANDARD, count, 1e-5) == eps
    assert sgd.max_steps(sgd.SgdSetting(0.5, 0.3), 0.1, 1e-5)[0] == 0


@pytest.mark.parametrize("kwargs, needle", [
    (dict(sampling_rate=0.0, noise_multiplier=1.0), "--sampling-rate"),
    (dict(sampling_rate=1.5, noise_multiplier=1.0), "--sampling-rate"),
    (dict(sampling_rate=0.1, noise_multiplier=0.0), "--noise-multiplier"),
    (dict(sampling_rate=0.1, noise_multiplier=float("nan")), "--noise-multiplier"),
    (dict(sampling_rate=0.1, noise_multiplier=1.0, sampling="fixed"), "--relation substitution"),
    (dict(sampling_rate=0.1, noise_multiplier=1.0, relation="substitution"), "--sampling fixed"),
])
def test_refusals(kwargs, needle):
    with pytest.raises(UsageError, match=needle):
        sgd.SgdSetting(**kwargs)


def test_steps_and_sampling_rate_from_the_batch():
    assert sgd.sampling_rate(None, 256, 60_000) == 256 / 60_000
    assert sgd.steps_for(None, 3, 256 / 60_000) == 3 * 235  # ceil(N / B) steps an epoch
    assert sgd.steps_for(None, 2, 0.01) == 200
    with pytest.raises(UsageError, match="exactly one of --steps or --epochs"):
        sgd.steps_for(10, 1, 0.01)
    with pytest.raises(UsageError, match="--batch-size 7 exceeds --dataset-size 5"):
        sgd.sampling_rate(None, 7, 5)
    with pytest.raises(UsageError, match="--sampling-rate Q, or --batch-size B with --dataset-size N"):
        sgd.sampling_rate(None, 7, None)


# -- the dense PLD machinery ------------------------------------------------------------------


def test_epsilon_readoff_agrees_with_dp_accounting_on_the_same_pmf():
    from dp_accounting.pld.pld_pmf import DensePLDPmf

    pmf = STANDARD.pld(1e-3).pmfs[0].self_compose(300, 1e-15)
    theirs = DensePLDPmf(1e-3, pmf.lower, pmf.probs, pmf.infinity, True)
    for delta in (1e-3, 1e-5, 1e-8):
        assert pmf.epsilon(delta) == pytest.approx(theirs.get_epsilon_for_delta(delta), abs=1e-9)
        assert pmf.delta(pmf.epsilon(delta)) <= delta * (1 + 1e-9)
    assert pmf.delta(1.0) == pytest.approx(theirs.get_delta_for_epsilon(1.0), rel=1e-9)


def test_truncated_composition_equals_the_full_convolution():
    rng = np.random.default_rng(3)
    probs = rng.random(40) ** 6
    probs /= probs.sum() * 1.0001
    pmf = DensePmf(-10, probs, 1e-4, 0.01)
    composed = pmf.self_compose(25, 1e-12)
    full = probs
    for _ in range(24):
        full = np.convolve(full, probs)
    offset = composed.lower - 25 * pmf.lower
    window = full[offset:offset + composed.probs.size]
    assert np.allclose(composed.probs, window, atol=1e-15)
    dropped = full.sum() - window.sum()
    assert dropped <= 1e-12
    assert composed.infinity == pytest.approx(1e-12 + 1 - (1 - 1e-4) ** 25, rel=1e-9)


def test_chernoff_window_keeps_all_but_the_tail_mass():
    pmf = STANDARD.pld(1e-2).pmfs[1]  # the add direction: a long left tail
    low, high = _chernoff_window(pmf.probs, 50, 1e-10)
    full = pmf.probs
    for _ in range(49):
        full = np.convolve(full, pmf.probs)
    assert full[:low].sum() <= 5e-11 and full[high + 1:].sum() <= 5e-11
    assert high - low < full.size / 3  # and it does cut


def test_a_huge_epsilon_under_substitution_is_calibrated_fast_and_certified_at_the_exact_grid():
    """epsilon 1000, fixed batches under substitution (about 110 s before the coarse-grid guide and
    the closed-form loss inversion): the sigma is checked at --discretization itself, meets the
    target there, and sigma / (1 + rtol) misses it."""
    setting = sgd.SgdSetting(0.01, 1.0, "fixed", "substitution")
    sigma, eps = sgd.calibrate_noise(setting, 1000.0, 1, 1e-5)
    at = lambda s: sgd.epsilon(sgd.SgdSetting(0.01, s, "fixed", "substitution"), 1, 1e-5, 1e-3)  # noqa: E731
    assert eps == at(sigma) <= 1000.0
    assert at(sigma / 1.001) > 1000.0
    assert 0.045 < sigma < 0.05

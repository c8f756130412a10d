"""Gaussian and Laplace baselines: calibration, claims and the noise actually drawn."""

import math

import numpy as np
import pytest
from scipy import stats

from tsdp.accounting import discrete as disc
from tsdp.accounting import gaussian as g
from tsdp.accounting.sensitivity import ContributionBounds
from tsdp.errors import UsageError
from tsdp.mechanisms.baseline import Panel
from tsdp.mechanisms.gaussian import release_gaussian
from tsdp.mechanisms.laplace import release_laplace
from tsdp.mechanisms.noise import FLOAT_WARNING

N_DRAWS = 1_000_000
# Two-sided tail probability for every statistical check below: a correct implementation fails
# one check with probability about 1e-6 (and the seeds are fixed, so the suite is deterministic).
Z = stats.norm.isf(0.5e-6)


def user_panel(n_series=4, n_steps=250_000, steps=9, per_step=2.0, **kw):
    return Panel(n_series, n_steps, ContributionBounds("user", per_step, max_steps=steps, **kw))


def test_gaussian_claim_and_sigma():
    panel = user_panel()
    rel = release_gaussian(np.zeros((4, 250_000)), panel, 1.0, 1e-6, np.random.default_rng(1), sampler="float")
    claim = rel.claim
    l2 = 2.0 * math.sqrt(9 * 4)
    assert claim.parameters["l2_sensitivity"] == pytest.approx(l2)
    # float sampler: the continuous Gaussian mechanism's closed form, and the do-not-publish warning
    assert claim.parameters["sigma"] == g.analytic_sigma(1.0, 1e-6, l2)
    assert claim.events[0].kind == "gaussian" and claim.events[0].noise == claim.parameters["sigma"]
    assert claim.parameters["sampler"] == "float" and FLOAT_WARNING in rel.warnings
    assert claim.definition == "approx-dp" and claim.epsilon == 1.0 and claim.delta == 1e-6
    assert "Balle and Wang" in claim.theorem
    assert claim.parameters["composition"]["across_series"] == "joint"
    # one series alone costs less than the panel
    assert claim.parameters["per_series_epsilon"] < 1.0


def test_hardened_gaussian_sigma_covers_the_lattice_rounding():
    """Hardened (default): sigma is calibrated to L2 + g sqrt(cells), the rounded cells' sensitivity."""
    panel = user_panel()
    rel = release_gaussian(np.zeros((4, 250_000)), panel, 1.0, 1e-6, np.random.default_rng(1))
    p, ev = rel.claim.parameters, rel.claim.events[0]
    l2, cells = 2.0 * math.sqrt(9 * 4), 36
    gran = p["granularity"]
    assert p["sampler"] == "hardened" and math.frexp(gran)[0] == 0.5
    assert p["rounded_l2_sensitivity"] == l2 + gran * math.sqrt(cells)
    # delta minus the rounding slack of 36 changed values, computed at the unrounded sigma (a lower bound)
    budget = disc.slack_budget(1.0, 1e-6, g.analytic_sigma(1.0, 1e-6, l2) / gran, cells)
    assert 1e-6 * (1 - 1e-6) < budget < 1e-6
    assert p["sigma"] == g.analytic_sigma(1.0, budget, l2 + gran * math.sqrt(cells))
    assert p["rounding_slack"] == disc.rounding_slack(1.0, disc.slack_rate(p["sigma"] / gran, cells))
    assert p["sigma"] > g.analytic_sigma(1.0, 1e-6, l2)
    assert (ev.kind, ev.sensitivity, ev.noise, ev.granularity, ev.lattice_coords) == (
        "discrete-gaussian", l2 + gran * 6, p["sigma"], gran, cells)
    assert "Canonne, Kamath and Steinke" in rel.claim.theorem and not rel.warnings
    # every released value is a multiple of the granularity
    assert np.array_equal(np.round(rel.values / gran) * gran, rel.values)


def test_gaussian_noise_moments_match_reported_sigma():
    values = np.full(N_DRAWS, 1234.5)
    rel = release_gaussian(values, user_panel(1, N_DRAWS), 0.7, 1e-5, np.random.default_rng(7))
    sigma = rel.claim.parameters["sigma"]
    noise = rel.values - values
    n = noise.size
    assert abs(noise.mean()) <= Z * sigma / math.sqrt(n)
    # sample variance: chi-square with n-1 degrees of freedom
    lo, hi = stats.chi2.ppf([0.5e-6, 1 - 0.5e-6], n - 1) / (n - 1)
    assert lo * sigma**2 <= noise.var(ddof=1) <= hi * sigma**2
    # shape: Kolmogorov-Smirnov against N(0, sigma^2)
    assert stats.kstest(noise[:100_000], "norm", args=(0, sigma)).pvalue > 1e-6


def test_laplace_scale_is_exactly_l1_over_epsilon():
    panel = user_panel(n_series=3, n_steps=10, steps=4, per_step=1.5, series_per_unit=2)
    rel = release_laplace(np.zeros(30), panel, 0.25, np.random.default_rng(0), sampler="float")
    l1 = 1.5 * 4 * 2
    assert rel.claim.parameters["l1_sensitivity"] == l1
    assert rel.claim.parameters["scale"] == l1 / 0.25
    assert rel.claim.definition == "pure-dp" and rel.claim.delta == 0.0
    ev = rel.claim.events[0]
    assert (ev.kind, ev.sensitivity, ev.noise, ev.count) == ("laplace", 1.5, l1 / 0.25, 8)
    assert FLOAT_WARNING in rel.warnings
    # hardened (default): each of the 8 cells moves by at most (floor(1.5/g) + 1) g once rounded
    rel = release_laplace(np.zeros(30), panel, 0.25, np.random.default_rng(0))
    gran = rel.claim.parameters["granularity"]
    step = (math.floor(1.5 / gran) + 1) * gran
    assert rel.claim.parameters["l1_sensitivity"] == l1
    assert rel.claim.parameters["rounded_l1_sensitivity"] == 8 * step
    assert rel.claim.parameters["scale"] == 8 * step / 0.25
    ev = rel.claim.events[0]
    assert (ev.kind, ev.sensitivity, ev.noise, ev.count, ev.granularity) == \
        ("discrete-laplace", step, 8 * step / 0.25, 8, gran)
    assert not rel.warnings and "discrete Laplace" in rel.claim.theorem


def test_laplace_noise_moments_match_reported_scale():
    panel = Panel(1, N_DRAWS, ContributionBounds("event", 3.0))
    rel = release_laplace(np.zeros(N_DRAWS), panel, 0.5, np.random.default_rng(11), sampler="float")
    b = rel.claim.parameters["scale"]
    assert b == 6.0
    x = rel.values
    n = x.size
    assert abs(x.mean()) <= Z * math.sqrt(2) * b / math.sqrt(n)
    # E|X| = b, Var|X| = b^2; Var(X) = 2 b^2, Var(sample variance) ~ (mu4 - sigma^4)/n = 20 b^4 / n
    assert abs(np.abs(x).mean() - b) <= Z * b / math.sqrt(n)
    assert abs(x.var() - 2 * b**2) <= Z * math.sqrt(20 * b**4 / n)
    assert stats.kstest(x[:100_000], "laplace", args=(0, b)).pvalue > 1e-6


def test_hardened_laplace_noise_moments_match_reported_scale():
    """The hardened draws are g times a discrete Laplace of parameter b/g: their variance is the
    discrete Laplace's, 2 q / (1 - q)^2 g^2 with q = exp(-g/b) (which is 2 b^2 up to O(g^2))."""
    panel = Panel(1, N_DRAWS, ContributionBounds("event", 3.0))
    rel = release_laplace(np.zeros(N_DRAWS), panel, 0.5, np.random.default_rng(11))
    b, gran = rel.claim.parameters["scale"], rel.claim.parameters["granularity"]
    assert b == (math.floor(3.0 / gran) + 1) * gran / 0.5 and b > 6.0
    x = rel.values
    n = x.size
    assert np.array_equal(np.round(x / gran) * gran, x)
    q = math.exp(-gran / b)
    var = 2 * q / (1 - q) ** 2 * gran ** 2
    assert abs(x.mean()) <= Z * math.sqrt(var) / math.sqrt(n)
    assert abs(x.var() - var) <= Z * math.sqrt(20 * (var / 2) ** 2 / n)
    assert stats.kstest(x[:100_000], "laplace", args=(0, b)).pvalue > 1e-6


def test_event_level_panel_costs_one_cell():
    panel = Panel(50, 100, ContributionBounds("event", 1.0))
    rel = release_gaussian(np.zeros((50, 100)), panel, 1.0, 1e-6, np.random.default_rng(0))
    assert rel.claim.parameters["l2_sensitivity"] == 1.0
    assert rel.claim.parameters["composition"]["across_series"] == "parallel"


def test_same_seed_same_noise_and_different_seed_different_noise():
    panel = user_panel(1, 1000)
    a = release_gaussian(np.zeros(1000), panel, 1.0, 1e-6, np.random.default_rng(5)).values
    b = release_gaussian(np.zeros(1000), panel, 1.0, 1e-6, np.random.default_rng(5)).values
    c = release_gaussian(np.zeros(1000), panel, 1.0, 1e-6, np.random.default_rng(6)).values
    assert np.array_equal(a, b) and not np.array_equal(a, c)


def test_noise_does_not_depend_on_values():
    """The noise added is the same whatever the data (the mechanism never reads values to calibrate)."""
    panel = user_panel(2, 500)
    rng_a, rng_b = np.random.default_rng(9), np.random.default_rng(9)
    x = np.random.default_rng(1).poisson(50, (2, 500)).astype(float)
    a = release_gaussian(x, panel, 1.0, 1e-6, rng_a)
    b = release_gaussian(x * 100 + 7, panel, 1.0, 1e-6, rng_b)
    assert np.allclose(a.values - x, b.values - (x * 100 + 7))
    assert a.claim == b.claim


def test_classic_calibration_below_one_and_its_guard_above():
    panel = user_panel(1, 100, steps=180, per_step=1.0)
    rel = release_gaussian(np.zeros(100), panel, 0.5, 1e-4, np.random.default_rng(0), "classic", sampler="float")
    # sqrt(I) is capped by T = 100 here: sigma = c(1e-4) * 10 / 0.5
    assert rel.claim.parameters["sigma"] == pytest.approx(4.343612 * 10 / 0.5, rel=1e-6)
    assert "Dwork and Roth" in rel.claim.theorem and rel.warnings == (FLOAT_WARNING,)
    # hardened: the same closed form on the rounded sensitivity 10 + g sqrt(100)
    rel = release_gaussian(np.zeros(100), panel, 0.5, 1e-4, np.random.default_rng(0), "classic")
    gran = rel.claim.parameters["granularity"]
    assert rel.claim.parameters["sigma"] == pytest.approx(4.343612 * (10 + 10 * gran) / 0.5, rel=1e-6)
    assert rel.claim.parameters["sigma"] > 4.343612 * 10 / 0.5 * (1 + 1e-7)
    assert "Dwork and Roth" in rel.claim.theorem and not rel.warnings
    # epsilon >= 1: accepted only with the exact profile's backing, and with a warning
    for sampler in ("float", "hardened"):
        rel = release_gaussian(np.zeros(100), panel, 2.0, 1e-4, np.random.default_rng(0), "classic", sampler=sampler)
        assert rel.warnings and "epsilon < 1" in rel.warnings[0]
        assert "Balle and Wang" in rel.claim.theorem
        s = rel.claim.parameters["sigma"]
        sens = 10 if sampler == "float" else rel.claim.parameters["rounded_l2_sensitivity"]
        assert g.delta_for_epsilon(2.0, sens / s) <= 1e-4


def test_classic_calibration_rejected_where_it_fails():
    # for large epsilon the classical sigma is too small for the exact profile
    panel = Panel(1, 10, ContributionBounds("event", 1.0))
    with pytest.raises(UsageError, match="not valid"):
        release_gaussian(np.zeros(10), panel, 30.0, 0.3, np.random.default_rng(0), "classic")

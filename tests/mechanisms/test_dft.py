"""DFT baseline: sensitivity of the kept coefficients, noise, shape and validation."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from tsdp.accounting import discrete as disc
from tsdp.accounting import gaussian as gauss
from tsdp.accounting.sensitivity import ContributionBounds
from tsdp.errors import UsageError
from tsdp.mechanisms.baseline import Panel
from tsdp.mechanisms.dft import kept_real_count, release_dft
from tsdp.mechanisms.noise import FLOAT_WARNING


def kept_vector(x, k):
    f = np.fft.rfft(x, norm="ortho")[:k]
    parts = [f[0].real] + [v for c in f[1:] for v in (c.real, c.imag)]
    if len(x) % 2 == 0 and k == len(x) // 2 + 1:
        parts = parts[:-1]  # the Nyquist imaginary part is identically zero
    return np.array(parts)


@settings(max_examples=200, deadline=None)
@given(n=st.integers(2, 40), data=st.data())
def test_kept_coefficients_have_the_series_sensitivity(n, data):
    k = data.draw(st.integers(1, n // 2 + 1))
    i = data.draw(st.integers(1, n))
    m = data.draw(st.floats(0.1, 5))
    cells = data.draw(st.lists(st.integers(0, n - 1), min_size=1, max_size=i, unique=True))
    x = np.array(data.draw(st.lists(st.floats(-100, 100), min_size=n, max_size=n)))
    y = x.copy()
    y[cells] += np.array(data.draw(st.lists(st.floats(-m, m), min_size=len(cells), max_size=len(cells))))
    diff = kept_vector(x, k) - kept_vector(y, k)
    assert len(diff) == kept_real_count(n, k)
    l2 = ContributionBounds("user", m, max_steps=i).l2(1, n)
    assert np.linalg.norm(diff) <= l2 * (1 + 1e-9) + 1e-9
    assert np.abs(diff).sum() <= math.sqrt(len(diff)) * l2 * (1 + 1e-9) + 1e-9


def test_gaussian_dft_noise_and_claim():
    panel = Panel(200, 64, ContributionBounds("user", 1.0, max_steps=4))
    x = np.random.default_rng(0).poisson(30, (200, 64)).astype(float)
    rel = release_dft(x, panel, 1.0, 1e-5, np.random.default_rng(1), k=8, sampler="float")
    sigma = rel.claim.parameters["sigma"]
    assert sigma == gauss.analytic_sigma(1.0, 1e-5, 2.0 * math.sqrt(200))  # user in all 200 series
    assert rel.claim.events[0].kind == "gaussian" and FLOAT_WARNING in rel.warnings
    assert rel.values.shape == x.shape and np.isrealobj(rel.values)
    # the released kept coefficients minus the true ones are N(0, sigma^2)
    noise = np.concatenate([kept_vector(r, 8) - kept_vector(t, 8) for r, t in zip(rel.values, x)])
    n = noise.size
    lo, hi = stats.chi2.ppf([0.5e-6, 1 - 0.5e-6], n) / n
    assert lo * sigma**2 <= np.mean(noise**2) <= hi * sigma**2
    # frequencies above k are removed exactly
    assert np.allclose(np.fft.rfft(rel.values, axis=1, norm="ortho")[:, 8:], 0, atol=1e-9)


def test_laplace_dft_is_pure_dp():
    panel = Panel(1, 100, ContributionBounds("event", 1.0))
    rel = release_dft(np.zeros((1, 100)), panel, 0.5, None, np.random.default_rng(0), k=51, noise="laplace",
                      sampler="float")
    assert rel.claim.definition == "pure-dp" and rel.claim.delta == 0.0
    assert rel.claim.parameters["scale"] == math.sqrt(100) * 1.0 / 0.5  # all 100 real numbers kept
    # hardened: the 100 rounded real numbers move by at most their true change plus g each
    rel = release_dft(np.zeros((1, 100)), panel, 0.5, None, np.random.default_rng(0), k=51, noise="laplace")
    p = rel.claim.parameters
    gran = p["granularity"]
    assert p["sampler"] == "hardened" and p["rounded_l1_sensitivity"] == 10.0 + 100 * gran
    assert p["scale"] == (10.0 + 100 * gran) / 0.5 and not rel.warnings
    assert "discrete Laplace" in rel.claim.theorem


def test_hardened_gaussian_dft_rounds_the_coefficients_and_covers_it():
    """Default sampler: the kept coefficients are rounded to multiples of g and get g times discrete
    Gaussian noise, sigma calibrated to L2 + g sqrt(n_r x series per unit); the released kept
    coefficients minus the rounded true ones are lattice values with the reported variance."""
    panel = Panel(200, 64, ContributionBounds("user", 1.0, max_steps=4))
    x = np.random.default_rng(0).poisson(30, (200, 64)).astype(float)
    rel = release_dft(x, panel, 1.0, 1e-5, np.random.default_rng(1), k=8)
    p, ev = rel.claim.parameters, rel.claim.events[0]
    gran, l2 = p["granularity"], 2.0 * math.sqrt(200)
    covered = l2 + gran * math.sqrt(15 * 200)  # 15 real numbers in 8 coefficients, all 200 series
    assert p["sampler"] == "hardened" and p["rounded_l2_sensitivity"] == covered
    budget = disc.slack_budget(1.0, 1e-5, gauss.analytic_sigma(1.0, 1e-5, l2) / gran, 15 * 200)  # minus the slack
    assert p["sigma"] == gauss.analytic_sigma(1.0, budget, covered) > gauss.analytic_sigma(1.0, 1e-5, l2)
    assert (ev.kind, ev.sensitivity, ev.noise, ev.granularity, ev.lattice_coords) == (
        "discrete-gaussian", covered, p["sigma"], gran, 15 * 200)
    assert not rel.warnings and "Canonne" in rel.claim.theorem and 0 < p["rounding_slack"] < 1e-9
    kept = np.stack([kept_vector(r, 8) for r in rel.values])
    truth = np.stack([kept_vector(t, 8) for t in x])
    noise = (kept - np.round(truth / gran) * gran).ravel()
    assert np.allclose(noise / gran, np.round(noise / gran), atol=1e-3)  # lattice, up to the FFT round trip
    n = noise.size
    lo, hi = stats.chi2.ppf([0.5e-6, 1 - 0.5e-6], n) / n
    assert lo * p["sigma"] ** 2 <= np.mean(noise ** 2) <= hi * p["sigma"] ** 2


@pytest.mark.parametrize("k", [0, 34, 2.5])
def test_bad_k(k):
    with pytest.raises(UsageError, match="--dft-k"):
        release_dft(np.zeros((1, 64)), Panel(1, 64, ContributionBounds("event", 1.0)), 1.0, 1e-5,
                    np.random.default_rng(0), k=k)


@pytest.mark.parametrize("noise,delta", [("gaussian", 1e-5), ("laplace", None)])
def test_hardened_dft_seeded_determinism(noise, delta):
    panel = Panel(3, 64, ContributionBounds("event", 1.0))
    x = np.random.default_rng(0).poisson(30, (3, 64)).astype(float)
    a, b, c = (release_dft(x, panel, 1.0, delta, np.random.default_rng(s), k=8, noise=noise).values for s in (4, 4, 5))
    assert np.array_equal(a, b) and not np.array_equal(a, c)

"""The hardened sampler: exact discrete Gaussian/Laplace draws, lattice outputs, determinism."""

import math

import numpy as np
import pytest
from scipy import stats

from tsdp.accounting.sensitivity import ContributionBounds
from tsdp.mechanisms import discrete as d
from tsdp.mechanisms.baseline import Panel
from tsdp.mechanisms.gaussian import release_gaussian
from tsdp.mechanisms.laplace import release_laplace
from tsdp.mechanisms.noise import CHUNK, NoiseStream, discrete_gaussian_fill, discrete_laplace_fill, gaussian_noise, laplace_noise


def _pmf_gauss(sigma, support):
    w = np.exp(-support.astype(float) ** 2 / (2 * sigma ** 2))
    return w / w.sum()


def _pmf_laplace(t, support):
    w = np.exp(-np.abs(support.astype(float)) / t)
    return w / w.sum()


def _chi2_pvalue(draws, pmf_of, half_width):
    """Chi-square of the draws against the pmf on [-h, h], with the two tails pooled in one bin each."""
    support = np.arange(-half_width, half_width + 1)
    full = np.arange(-50 * half_width, 50 * half_width + 1)
    p_full = pmf_of(full)
    inner = p_full[(full >= -half_width) & (full <= half_width)]
    probs = np.concatenate([[p_full[full < -half_width].sum()], inner, [p_full[full > half_width].sum()]])
    counts = np.concatenate([[np.sum(draws < -half_width)],
                             np.bincount(draws[np.abs(draws) <= half_width].astype(np.int64) + half_width,
                                         minlength=support.size),
                             [np.sum(draws > half_width)]])
    keep = probs * draws.size >= 5
    observed = np.append(counts[keep], counts[~keep].sum())
    expected = np.append(probs[keep], probs[~keep].sum()) * draws.size
    if expected[-1] == 0:
        observed, expected = observed[:-1], expected[:-1]
    return stats.chisquare(observed, expected * observed.sum() / expected.sum()).pvalue


@pytest.mark.parametrize("sigma", [0.7, 3.0, 12.5])
def test_discrete_gaussian_matches_pmf(sigma):
    draws = d.discrete_gaussian(np.random.default_rng(11), sigma, 200_000)
    assert np.all(draws == np.round(draws))
    assert _chi2_pvalue(draws, lambda s: _pmf_gauss(sigma, s), int(5 * sigma) + 1) > 1e-3


@pytest.mark.parametrize("t", [0.4, 2.0, 9.5])
def test_discrete_laplace_matches_pmf(t):
    draws = d.discrete_laplace(np.random.default_rng(12), t, 200_000)
    assert _chi2_pvalue(draws, lambda s: _pmf_laplace(t, s), int(8 * t) + 1) > 1e-3


def count_calls(monkeypatch, module, name: str) -> dict:
    """Replace ``module.name`` by a wrapper that counts its calls in the returned ``{"n": ...}``."""
    calls = {"n": 0}
    real = getattr(module, name)

    def counted(*args):
        calls["n"] += 1
        return real(*args)

    monkeypatch.setattr(module, name, counted)
    return calls


def test_exact_fallback_alone_gives_the_same_distribution(monkeypatch):
    """With the float margins widened so that nearly every decision goes to the exact
    decimal fallback, the draws still follow the pmf (the fallback is exact, not a patch)."""
    monkeypatch.setattr(d, "_ETA_LOG", 2.0 ** -8)
    monkeypatch.setattr(d, "_GAUSS_MARGIN", 0.5)
    calls = count_calls(monkeypatch, d, "_gaussian_accept_exact")
    draws = d.discrete_gaussian(np.random.default_rng(13), 2.5, 20_000)
    assert calls["n"] > 5_000
    assert _chi2_pvalue(draws, lambda s: _pmf_gauss(2.5, s), 13) > 1e-3


def test_large_lattice_scale_variance():
    """At the default lattice scale (about 2^20) the variance is sigma^2 within sampling error."""
    sigma = 1.3 * 2 ** 20
    draws = d.discrete_gaussian(np.random.default_rng(14), sigma, 400_000)
    # var of the sample variance / sigma^2 is about 2/n: 5 standard errors
    assert abs(draws.var() / sigma ** 2 - 1) < 5 * math.sqrt(2 / draws.size)
    t = 1.3 * 2 ** 20
    lap = d.discrete_laplace(np.random.default_rng(15), t, 400_000)
    q = math.exp(-1 / t)
    var = 2 * q / (1 - q) ** 2
    assert abs(lap.var() / var - 1) < 5 * math.sqrt(5 / lap.size)  # kurtosis 6: var of s^2 ~ 5 var^2 / n


def test_seeded_draws_are_deterministic():
    a = gaussian_noise(np.random.default_rng(5), 3.0, 1000, granularity=2.0 ** -10)
    b = gaussian_noise(np.random.default_rng(5), 3.0, 1000, granularity=2.0 ** -10)
    assert np.array_equal(a, b)
    assert not np.array_equal(a, gaussian_noise(np.random.default_rng(6), 3.0, 1000, granularity=2.0 ** -10))


@pytest.mark.parametrize("fill", [discrete_gaussian_fill(3.0, 2.0 ** -12), discrete_laplace_fill(3.0, 2.0 ** -12)])
def test_noise_stream_equals_in_memory_for_hardened(fill):
    total = 2 * CHUNK + 12345
    from tsdp.mechanisms.noise import _fill_chunked

    whole = _fill_chunked(np.random.default_rng(21), total, fill)
    stream = NoiseStream(np.random.default_rng(21), total)
    pieces = [stream.take(n, fill) for n in (1000, CHUNK, CHUNK - 1000, 12345)]
    assert np.array_equal(np.concatenate(pieces), whole)


def _panel():
    return Panel(4, 50, ContributionBounds(level="event", max_per_step=1.0))


def test_hardened_release_is_on_the_lattice_and_hides_the_fraction():
    """Outputs are exact multiples of g; inputs differing below g give identically distributed outputs."""
    x = np.random.default_rng(0).uniform(0, 10, (4, 50))
    r = release_gaussian(x, _panel(), 1.0, 1e-6, np.random.default_rng(1))
    g = r.claim.parameters["granularity"]
    assert r.claim.parameters["sampler"] == "hardened"
    assert np.all(r.values / g == np.round(r.values / g))
    on_grid = np.round(x / g) * g
    low = release_gaussian(on_grid + 0.1 * g, _panel(), 1.0, 1e-6, np.random.default_rng(1))
    high = release_gaussian(on_grid + 0.3 * g, _panel(), 1.0, 1e-6, np.random.default_rng(1))
    assert np.array_equal(low.values, high.values)  # the part below the granularity leaves no trace


def test_reported_sigma_and_scale_match_the_draws():
    x = np.zeros((4, 50_000))
    panel = Panel(4, 50_000, ContributionBounds(level="event", max_per_step=1.0))
    r = release_gaussian(x, panel, 1.0, 1e-6, np.random.default_rng(2))
    sigma = r.claim.parameters["sigma"]
    assert abs(r.values.var() / sigma ** 2 - 1) < 5 * math.sqrt(2 / x.size)
    lap = release_laplace(x, panel, 1.0, np.random.default_rng(3))
    b = lap.claim.parameters["scale"]
    assert abs(lap.values.var() / (2 * b ** 2) - 1) < 5 * math.sqrt(5 / x.size)


def test_rounding_is_in_the_sensitivity():
    from tsdp.errors import UsageError

    # a coarse lattice (sigma / g about 20): its rounding slack needs a large delta (tsdp.accounting.discrete)
    r = release_gaussian(np.zeros((4, 50)), _panel(), 1.0, 1e-2, np.random.default_rng(1), granularity=0.125)
    p = r.claim.parameters
    assert p["rounded_l2_sensitivity"] == pytest.approx(p["l2_sensitivity"] + 0.125)  # one cell per unit
    assert r.claim.events[0].kind == "discrete-gaussian" and r.claim.events[0].lattice_coords == 1
    assert r.claim.events[0].sensitivity == pytest.approx(1.125)
    with pytest.raises(UsageError, match="finer --granularity"):  # the same lattice at delta 1e-6
        release_gaussian(np.zeros((4, 50)), _panel(), 1.0, 1e-6, np.random.default_rng(1), granularity=0.125)
    lap = release_laplace(np.zeros((4, 50)), _panel(), 1.0, np.random.default_rng(1), granularity=0.125)
    assert lap.claim.parameters["scale"] == pytest.approx(1.125)  # (floor(1 / 0.125) + 1) 0.125
    assert lap.claim.events[0].sensitivity == pytest.approx(1.125)


def test_float_sampler_warns_and_granularity_checks():
    from tsdp.errors import UsageError

    r = release_laplace(np.zeros((4, 50)), _panel(), 1.0, np.random.default_rng(1), sampler="float")
    assert r.claim.events[0].kind == "laplace" and any("--sampler float" in w for w in r.warnings)
    with pytest.raises(UsageError, match="power of two"):
        release_gaussian(np.zeros((4, 50)), _panel(), 1.0, 1e-6, np.random.default_rng(1), granularity=0.3)
    with pytest.raises(UsageError, match="too coarse"):
        release_gaussian(np.zeros((4, 50)), _panel(), 1.0, 0.4, np.random.default_rng(1), granularity=2.0)


def test_discrete_laplace_with_one_scale_per_entry_matches_each_pmf():
    """Entries of different scales, interleaved, each follow their own discrete Laplace (one draw per
    entry, rejected entries redrawn); small scales make the rejection step (sign set, magnitude 0) common."""
    scales = np.array([0.4, 2.0, 9.5])
    t = np.tile(scales, 100_000)
    draws = d.discrete_laplace_scales(np.random.default_rng(13), t)
    assert draws.shape == t.shape and np.all(draws == np.round(draws))
    for k, s in enumerate(scales):
        assert _chi2_pvalue(draws[k::3], lambda x: _pmf_laplace(s, x), int(8 * s) + 1) > 1e-3
    again = d.discrete_laplace_scales(np.random.default_rng(13), t)
    assert np.array_equal(draws, again)
    with pytest.raises(ValueError, match="scale"):
        d.discrete_laplace_scales(np.random.default_rng(0), np.array([1.0, 0.0]))

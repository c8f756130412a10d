"""The stated (1 - alpha) half-width covers 1 - alpha of seeded noise draws, for every mechanism.

Each test releases all-zero data (so the release IS the noise) many times over independent series,
takes one value per independent draw, and checks the empirical coverage against 1 - alpha within 4
binomial standard errors: two-sided for exact intervals, one-sided (at least) for bounds. Each also
checks that half the stated width would fail, so a wrong (too generous) formula cannot pass.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from tsdp.accounting.sensitivity import ContributionBounds
from tsdp.mechanisms.registry import for_claim
from tsdp.accuracy import intervals as iv
from tsdp.accuracy.estimators import mean_groups
from tsdp.mechanisms.baseline import Panel
from tsdp.mechanisms.gaussian import release_gaussian
from tsdp.mechanisms.laplace import release_laplace

ALPHA = 0.1


def _coverage(noise: np.ndarray, width: float | np.ndarray) -> tuple[float, float]:
    noise = np.asarray(noise).ravel()
    inside = np.abs(noise) <= np.broadcast_to(width, noise.shape)
    return float(inside.mean()), 4.0 * math.sqrt(ALPHA * (1 - ALPHA) / noise.size)


def check(noise, acc, exact: bool | None = None) -> None:
    """Coverage of ``acc.half_width``: 1 - alpha (exact) or at least that (bound); halved: too low."""
    exact = acc.exact if exact is None else exact
    cov, tol = _coverage(noise, acc.half_width)
    if exact:
        assert abs(cov - (1 - ALPHA)) <= tol, (cov, tol)
    else:
        assert cov >= 1 - ALPHA - tol, (cov, tol)
    halved, _ = _coverage(noise, acc.half_width / 2)
    assert halved < 1 - ALPHA - tol, halved


def panel(n_series: int, n_steps: int, level: str = "event") -> Panel:
    bounds = ContributionBounds(level=level, max_per_step=1.0, max_steps=4 if level == "user" else None)
    return Panel(n_series, n_steps, bounds)


def test_gaussian_cell_and_sum():
    rng = np.random.default_rng(1)
    S, T = 4000, 25
    rel = release_gaussian(np.zeros((S, T)), panel(S, T), 1.0, 1e-5, rng)
    check(rel.values, for_claim(rel.claim, ALPHA, "cell"))
    check(rel.values.sum(axis=1), for_claim(rel.claim, ALPHA, "sum"))


def test_laplace_cell_and_sum():
    rng = np.random.default_rng(2)
    S, T = 4000, 25
    rel = release_laplace(np.zeros((S, T)), panel(S, T), 1.0, rng)
    cell = for_claim(rel.claim, ALPHA, "cell")
    p = rel.claim.parameters
    assert p["sampler"] == "hardened"
    assert cell.half_width == pytest.approx(p["scale"] * math.log(1 / ALPHA) + p["granularity"])
    check(rel.values, cell)
    float_rel = release_laplace(np.zeros((S, T)), panel(S, T), 1.0, rng, sampler="float")
    float_cell = for_claim(float_rel.claim, ALPHA, "cell")
    assert float_cell.exact and float_cell.half_width == pytest.approx(
        float_rel.claim.parameters["scale"] * math.log(1 / ALPHA))
    check(float_rel.values, float_cell)
    check(rel.values.sum(axis=1), for_claim(rel.claim, ALPHA, "sum"))


@pytest.mark.parametrize("release", ["gaussian", "laplace"])
def test_hardened_interval_covers_a_coarse_lattice(release):
    """With the coarsest granularity allowed (the noise scale only 8 lattice steps), the lattice's
    discreteness is visible, and the stated half-width (continuous width + g) still covers 1 - alpha
    of the noise (a bound: at least 1 - alpha, within the binomial error)."""
    rng = np.random.default_rng(5)
    S, T = 20000, 5
    zeros = np.zeros((S, T))
    if release == "gaussian":
        # delta 0.05: the coarse lattice's rounding slack (1 + e^eps) 0.025 / 64 must fit (tsdp.accounting.discrete)
        probe = release_gaussian(zeros[:1], panel(1, T), 1.0, 0.05, rng, sampler="float").claim.parameters["sigma"]
        g = 2.0 ** math.floor(math.log2(probe / 8))
        rel = release_gaussian(zeros, panel(S, T), 1.0, 0.05, rng, granularity=g)
    else:
        g = 0.125  # scale = (floor(1 / g) + 1) g / epsilon = 1.125: 9 lattice steps
        rel = release_laplace(zeros, panel(S, T), 1.0, rng, granularity=g)
    assert rel.claim.parameters["granularity"] == g
    assert np.all(np.mod(rel.values, g) == 0)
    cell = for_claim(rel.claim, ALPHA, "cell")
    assert not cell.exact
    check(rel.values, cell)
    check(rel.values.sum(axis=1), for_claim(rel.claim, ALPHA, "sum"))


def test_laplace_sum_matches_closed_forms():
    """n = 1 is the Laplace quantile; n = 2 has the closed-form tail (1 + t/2b) exp(-t/b)."""
    assert iv.laplace_sum_half_width(3.0, 1, 0.05) == pytest.approx(3.0 * math.log(20))
    h = iv.laplace_sum_half_width(1.0, 2, 0.05)
    assert (1 + h / 2) * math.exp(-h) == pytest.approx(0.05, rel=1e-7)


@pytest.mark.parametrize("noise, n_steps, k", [("gaussian", 48, 6), ("gaussian", 48, 25), ("laplace", 47, 5)])
def test_dft_cell_and_sum(noise, n_steps, k):
    from tsdp.mechanisms.dft import release_dft

    rng = np.random.default_rng(3)
    S = 4000
    rel = release_dft(np.zeros((S, n_steps)), panel(S, n_steps), 1.0, 1e-5 if noise == "gaussian" else None,
                      rng, k, noise)
    cell = for_claim(rel.claim, ALPHA, "cell")
    for t in (0, 7, n_steps // 2):  # one cell per independent series
        check(rel.values[:, t], cell, exact=True)
    check(rel.values.sum(axis=1), for_claim(rel.claim, ALPHA, "sum"))


@pytest.mark.parametrize("noise", ["laplace", "gaussian"])
def test_fast_bound_covers_every_step(noise):
    from tsdp.mechanisms.fast import release_fast

    rng = np.random.default_rng(4)
    S, T = 3000, 60
    rel = release_fast(np.zeros((S, T)), panel(S, T), 1.0, rng, delta=1e-5 if noise == "gaussian" else None,
                       noise=noise, max_samples=10)
    acc = for_claim(rel.claim, ALPHA)
    assert not acc.exact
    check(rel.values[:, 0], acc, exact=True)  # the first release is one sample: exact there
    for t in (5, 30, T - 1):
        cov, tol = _coverage(rel.values[:, t], acc.half_width)
        assert cov >= 1 - ALPHA - tol


def test_fast_noise_sd_given_the_pattern_is_exact():
    """Gaussian FAST at a fixed interval on zeros: each released value's noise is N(0, sd_t^2) with
    sd_t from the released pattern, Q, R and P0 (one cell per independent series)."""
    from tsdp.accuracy.mechanisms import fast_noise_sd
    from tsdp.mechanisms.fast import release_fast

    rng = np.random.default_rng(7)
    S, T = 4000, 30
    rel = release_fast(np.zeros((S, T)), panel(S, T), 1.0, rng, delta=1e-5, noise="gaussian", interval=4,
                       adaptive=False, q=50.0)
    p = rel.claim.parameters
    sd, posterior = fast_noise_sd(rel.sampled, p["Q"], p["R"], p["P0"], p["sigma"] ** 2)
    assert sd[0, 0] == pytest.approx(p["sigma"]) and sd[0, -1] < p["sigma"]
    assert posterior.min() > 0
    z = iv.gaussian_half_width(1.0, ALPHA)
    for t in (0, 5, 13, T - 1):
        cov, tol = _coverage(rel.values[:, t], z * sd[:, t])
        assert abs(cov - (1 - ALPHA)) <= tol, (t, cov)
        assert _coverage(rel.values[:, t], z * sd[:, t] / 2)[0] < 1 - ALPHA - tol
    block = for_claim(rel.claim, ALPHA, "cell", rel.sampled).to_dict()
    assert block["given_sampling_pattern"]["noise_sd"]["max"] == pytest.approx(p["sigma"])


@pytest.mark.parametrize("mechanism", ["subsample", "filter-subsample"])
def test_subsample_sampled_exact_interpolated_covered(mechanism):
    from tsdp.mechanisms import subsample as ss

    rng = np.random.default_rng(5)
    S, T = 3000, 40
    zeros = np.zeros((S, T))
    if mechanism == "subsample":
        rel = ss.release_subsample(zeros, panel(S, T, "user"), 1.0, 1e-5, rng, 0.3, "exact", emit_indices=True)
    else:
        rel = ss.release_filter_subsample(zeros, panel(S, T, "user"), 1.0, 1e-5, rng, 0.3, "gaussian",
                                          "conditional", filter_sigma=2.0, emit_indices=True)
    acc = for_claim(rel.claim, ALPHA)
    indices = rel.claim.parameters["subsampling"]["indices"]
    sigmas = rel.claim.parameters["noise"].get("sigma_per_series") or [rel.claim.parameters["sigma"]] * S
    z = iv.gaussian_half_width(1.0, ALPHA)
    # at a sampled step, per-series widths z sigma_s are exact
    first = np.array([rel.values[s, idx[0]] for s, idx in enumerate(indices)])
    cov, tol = _coverage(first, z * np.asarray(sigmas))
    assert abs(cov - (1 - ALPHA)) <= tol
    # every step (interpolated or not) is covered by the stated (largest) width
    check(rel.values[:, T // 2], acc)
    # hardened (default): the stated width adds the lattice step (interpolation weights sum to 1)
    g = rel.claim.parameters["granularity"]
    assert acc.half_width == pytest.approx(z * max(sigmas) + g, rel=1e-12) and "lattice" in acc.formula


def test_mean_estimators_given_released_scale():
    from tsdp.mean import MeanSettings, estimate_groups
    from tsdp.mean.algorithms import release
    from tsdp.mean.estimation import prepare_groups
    from tsdp.mean.synthetic import flat_layout

    rng = np.random.default_rng(6)
    groups = [[rng.uniform(0, 65, m) for m in rng.integers(5, 40, 30)] for _ in range(20)]
    values, user_starts, group_starts = flat_layout(groups)
    settings = MeanSettings(epsilon=1.0, upper=65.0)
    prep = prepare_groups(values, user_starts, group_starts, settings).repeat(200)
    out = release(prep, rng, epsilon=1.0, lower=0.0, upper=65.0)
    acc = mean_groups(out.laplace_scale, ALPHA)
    widths = out.laplace_scale * math.log(1 / ALPHA)
    assert acc.half_width == pytest.approx(widths.max())
    noise = out.estimate - out.statistic
    cov, tol = _coverage(noise, widths)
    assert abs(cov - (1 - ALPHA)) <= tol
    assert _coverage(noise, widths / 2)[0] < 1 - ALPHA - tol
    assert estimate_groups  # the public API releases through the same function


def test_alpha_and_target_are_checked():
    rel = release_laplace(np.zeros((1, 3)), panel(1, 3), 1.0, np.random.default_rng(0))
    with pytest.raises(ValueError, match="--alpha"):
        for_claim(rel.claim, 1.5)
    with pytest.raises(ValueError, match="--accuracy-for"):
        for_claim(rel.claim, 0.05, "window")

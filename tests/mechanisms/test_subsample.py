"""Subsampling mechanisms of Koga et al. 2022: claims, noise, interpolation, validation, trends
(spec koga.md sections 4, 5.2 and 5.3)."""

import json
import math

import numpy as np
import pytest
from scipy import stats

from tsdp.accounting import gaussian as gauss
from tsdp.accounting import timesubsampling as ts
from tsdp.accounting.compose import claim_backed_by_events
from tsdp.errors import BudgetError, DataError, NumericalError, UsageError
from tsdp.mechanisms import filters as F
from tsdp.mechanisms import subsample as sm
from tsdp.mechanisms.baseline import Panel
from tsdp.mechanisms.gaussian import release_gaussian

EPS, DELTA = 0.5, 1e-4
TAIL = 1e-6  # two-sided tail probability of every statistical check (the seeds are fixed)
Z = stats.norm.isf(TAIL / 2)


def panel(n_series=1, T=1800, I=180, per_unit=1, **kw):
    return Panel(n_series, T, sm.participation_bounds(T, I, series_per_unit=per_unit, **kw))


def sampled(rel):
    return [np.asarray(j) for j in rel.claim.parameters["subsampling"]["indices"]]


def noise_at_samples(rel, y):
    return np.concatenate([rel.values.reshape(y.shape)[s, J] - y[s, J] for s, J in enumerate(sampled(rel))])


def assert_gaussian(noise, sigma=1.0):
    n = noise.size
    assert abs(noise.mean()) <= Z * sigma / math.sqrt(n)
    lo, hi = stats.chi2.ppf([TAIL / 2, 1 - TAIL / 2], n - 1) / (n - 1)
    assert lo * sigma**2 <= noise.var(ddof=1) <= hi * sigma**2
    assert stats.kstest(noise, "norm", args=(0, sigma)).pvalue > TAIL


# ------------------------------------------------------------------ the privacy unit

def test_participation_bound_is_required_and_checked():
    with pytest.raises(UsageError, match="--max-steps.*--assume-none"):
        sm.participation_bounds(100)
    with pytest.raises(UsageError, match="--max-steps"):
        sm.participation_bounds(100, 101)
    assert sm.participation_bounds(100, assume_none=True).max_steps == 100
    with pytest.raises(UsageError, match="--assume-none"):
        sm.participation_bounds(100, 50, assume_none=True)
    p = Panel(1, 100, sm.participation_bounds(100, assume_none=True))
    rel = sm.release_subsample(np.zeros(100), p, EPS, DELTA, np.random.default_rng(0), 0.2)
    assert rel.claim.parameters["assumption"]["assume_none"] is True


def test_declared_bound_above_series_length_is_refused():
    from tsdp.accounting.sensitivity import ContributionBounds

    p = Panel(1, 100, ContributionBounds("user", 1.0, max_steps=150))
    with pytest.raises(UsageError, match="--max-steps 150 exceeds"):
        sm.release_subsample(np.zeros(100), p, EPS, DELTA, np.random.default_rng(0), 0.1)


# ------------------------------------------------------------------ claims

# The golden figures below are the paper's (continuous Gaussian noise): --sampler float reproduces them;
# the hardened sampler's claims are checked against them in test_hardened_claims_are_the_float_ones_rounded.

def test_exact_subsample_claim_at_pems():
    rel = sm.release_subsample(np.full(1800, 300.0), panel(), EPS, DELTA, np.random.default_rng(0), 0.1,
                               sampler="float")
    c = rel.claim
    assert c.definition == "approx-dp" and c.epsilon == EPS and c.delta == DELTA
    assert c.mechanism == "subsample" and "(J, noisy samples)" in c.theorem
    sigma = c.parameters["sigma"]
    assert sigma <= 54.004 / 2
    assert sigma == pytest.approx(26.086, abs=5e-3)
    (ev,) = c.events
    assert ev.kind == "gaussian-mixture" and ev.count == 1 and ev.noise == sigma
    assert ev.sensitivity == pytest.approx(math.sqrt(180))
    assert sum(w for w, _ in ev.mixture) == pytest.approx(1.0, abs=1e-12)
    ok, _ = claim_backed_by_events(c)
    assert ok
    assert c.parameters["paper_sigma_same_budget"] == pytest.approx(54.004, abs=5e-4)
    baseline = c.parameters["baseline_comparison"]
    assert baseline["gaussian_sigma_same_budget"] == gauss.analytic_sigma(EPS, DELTA, math.sqrt(180))
    assert c.parameters["gaussian_sigma_same_budget"] == baseline["gaussian_sigma_same_budget"]
    assert c.parameters["baseline_comparison"]["gaussian_classic_sigma_same_budget"] == pytest.approx(116.551, abs=5e-4)
    assert c.parameters["assumption"]["I"] == 180 and c.parameters["assumption"]["M"] == 1
    assert [r["c"] for r in c.parameters["degradation"]] == [1.5, 2.0, 4.0]
    assert c.unit.level == "user" and c.unit.max_steps == 180
    json.dumps(c.to_dict())  # the claim is plain JSON


def test_paper_subsample_claim_at_pems():
    rel = sm.release_subsample(np.full(1800, 300.0), panel(), EPS, DELTA, np.random.default_rng(0), 0.1,
                               accounting="paper", sampler="float")
    c = rel.claim
    assert c.events == () and "Corollary 3" in c.theorem and "Theorem 2" in c.theorem
    assert c.parameters["sigma"] == pytest.approx(54.004, abs=5e-4)
    s = c.parameters["sensitivity"]
    assert s["I_prime"] == 36 and s["alpha"] == pytest.approx(math.sqrt(36 / 180))
    assert s["hoeffding_I_prime"] >= 36
    pr = c.parameters["privacy"]
    assert pr["delta_prime"] == pytest.approx(1.835e-5, rel=5e-4)
    assert pr["epsilon_failure_branch"] == pytest.approx(0.5 * math.sqrt(5))
    assert c.delta == pytest.approx(pr["delta_total"]) and c.delta <= DELTA
    assert pr["exact_gaussian_delta_failure_branch"] == pytest.approx(2.99e-7, rel=5e-3)  # spec 4.2
    assert any("failure branch has epsilon 1.118" in w for w in rel.warnings)
    assert c.parameters["noise"]["c"] == pytest.approx(4.500362, abs=5e-7)
    json.dumps(c.to_dict())


def test_paper_filter_claim_at_pems():
    rel = sm.release_filter_subsample(np.full(1800, 300.0), panel(), EPS, DELTA, np.random.default_rng(0),
                                      0.1, accounting="paper", sampler="float")
    c = rel.claim
    assert c.events == () and "Corollary 2" in c.theorem and "Theorem 4" in c.theorem
    assert c.parameters["sigma"] == pytest.approx(84.261, abs=5e-4)
    assert c.parameters["sensitivity"]["alpha"] == pytest.approx(0.69777, abs=5e-6)
    assert c.parameters["sensitivity"]["tropp_condition_alpha2_ge_p_plus_L"]
    assert c.parameters["privacy"]["delta_prime"] == pytest.approx(1.254e-4, rel=5e-4)
    f = c.parameters["filter"]
    assert f["srank"] == pytest.approx(50.78, abs=5e-3) and f["L"] == pytest.approx(0.028209, abs=5e-7)
    deg = c.parameters["degradation"]
    assert [round(r["epsilon"], 3) for r in deg] == [0.612, 0.707, 1.0]
    assert [float(f"{r['delta']:.3g}") for r in deg] == [1.20e-4, 1.41e-4, 2.35e-4]
    assert c.delta <= DELTA


def test_conditional_claim_has_no_failure_term_and_matches_svd():
    T, I = 64, 6
    rng = np.random.default_rng(3)
    x = rng.integers(0, 20, size=(3, T)).astype(float)
    pnl = panel(3, T, I)
    h = F.gaussian_kernel(T, 2.0)
    rel = sm.release_filter_subsample(x, pnl, EPS, DELTA, rng, 0.25, kernel="gaussian", filter_sigma=2.0,
                                      emit_indices=True, sampler="float")
    c = rel.claim
    assert c.parameters["privacy"]["delta_prime"] is None and "delta_failure_term" not in c.parameters["privacy"]
    A = h[(np.arange(T)[:, None] - np.arange(T)[None, :]) % T]
    for s, J in enumerate(sampled(rel)):
        svd = np.linalg.svd(A[J], compute_uv=False)[0]
        s_J = c.parameters["sensitivity"]["s_J"][s]
        assert svd <= s_J <= svd * (1 + 1e-8)
        assert c.parameters["noise"]["sigma_per_series"][s] == gauss.analytic_sigma(EPS, DELTA, s_J * math.sqrt(I))
    (ev,) = c.events
    assert ev.kind == "gaussian" and ev.count == 1
    ok, _ = claim_backed_by_events(c)
    assert ok
    assert "conditional" in c.theorem
    json.dumps(c.to_dict())


def test_conditional_noise_is_smaller_than_paper_at_pems():
    x = np.full(1800, 300.0)
    cond = sm.release_filter_subsample(x, panel(), EPS, DELTA, np.random.default_rng(1), 0.1)
    paper = sm.release_filter_subsample(x, panel(), EPS, DELTA, np.random.default_rng(1), 0.1, accounting="paper")
    s_J = cond.claim.parameters["sensitivity"]["s_J"][0]
    assert 0.35 < s_J < 0.6 < 0.69777  # spec 2.6: typically about 0.44
    assert cond.claim.parameters["sigma"] < 0.6 * paper.claim.parameters["sigma"]


def test_several_series_per_unit():
    """A unit in K = 3 series: its 3 I cells are accounted jointly (one Gaussian mechanism given every
    J), each series' empty-sample redraw separately."""
    T, I, K = 400, 20, 3
    x = np.full((K, T), 50.0)
    pnl = Panel(K, T, sm.participation_bounds(T, I))  # a unit may touch all three series
    rng = np.random.default_rng(4)
    exact = sm.release_subsample(x, pnl, EPS, DELTA, rng, 0.2, sampler="float")
    (ev,) = exact.claim.events
    assert ev.kind == "gaussian-mixture" and ev.count == 1 and ev.sensitivity == pytest.approx(math.sqrt(K * I))
    assert exact.claim.parameters["assumption"]["I_effective"] == K * I
    assert exact.claim.parameters["assumption"]["series"] == K
    assert exact.claim.parameters["privacy"]["epsilon_at_sigma"] <= EPS
    assert claim_backed_by_events(exact.claim)[0]
    assert exact.claim.parameters["sigma"] == ts.exact_subsample(EPS, DELTA, K * I, 0.2, n_steps=T, series=K).sigma
    one = ts.exact_subsample(EPS, DELTA, I, 0.2, n_steps=T).sigma
    basic = ts.exact_subsample(EPS / K, DELTA / K, I, 0.2, n_steps=T).sigma
    assert one < exact.claim.parameters["sigma"] < basic
    paper = sm.release_subsample(x, pnl, EPS, DELTA, rng, 0.2, accounting="paper", sampler="float")
    assert paper.claim.parameters["sigma"] == ts.paper_subsample(EPS, DELTA, K * I, 0.2, n_steps=T, series=K).sigma
    assert paper.claim.parameters["sigma"] < ts.paper_subsample(EPS / K, DELTA / K, I, 0.2, n_steps=T).sigma
    assert "jointly" in paper.claim.parameters["privacy"]["composition"]
    assert paper.claim.delta <= DELTA
    cond = sm.release_filter_subsample(x, pnl, EPS, DELTA, rng, 0.2, filter_sigma=3.0, sampler="float")
    (ev,) = cond.claim.events
    assert ev.kind == "gaussian" and ev.count == 1
    # every series has the same mu* for the unit's K I cells: its cells, however spread, move the
    # release by sqrt(sum_s c_s / (K I)) mu* <= mu*
    mus = np.array(cond.claim.parameters["sensitivity"]["l2_conditional"]) / np.array(
        cond.claim.parameters["noise"]["sigma_per_series"])
    np.testing.assert_allclose(mus, mus[0], rtol=1e-9)
    s_j = np.array(cond.claim.parameters["sensitivity"]["s_J"])
    np.testing.assert_allclose(cond.claim.parameters["sensitivity"]["l2_conditional"], s_j * math.sqrt(K * I))
    assert gauss.delta_for_epsilon(EPS, mus.max()) <= DELTA
    assert claim_backed_by_events(cond.claim)[0]


def test_substitution_doubles_the_cells():
    pnl = Panel(1, 500, sm.participation_bounds(500, 30, neighbouring="substitute"))
    rel = sm.release_subsample(np.zeros(500), pnl, EPS, DELTA, np.random.default_rng(0), 0.1, accounting="paper",
                               sampler="float")
    assert rel.claim.parameters["assumption"]["I_effective"] == 60
    assert rel.claim.parameters["sigma"] == ts.paper_subsample(EPS, DELTA, 60, 0.1, n_steps=500).sigma


def test_sampling_rate_one_falls_back_to_the_baseline():
    x = np.full(300, 5.0)
    rel = sm.release_subsample(x, panel(T=300, I=30), EPS, DELTA, np.random.default_rng(0), 1.0)
    ref = release_gaussian(x, panel(T=300, I=30), EPS, DELTA, np.random.default_rng(0))
    assert rel.claim.mechanism == "gaussian" and any("no subsampling" in w for w in rel.warnings)
    np.testing.assert_array_equal(rel.values, ref.values)
    rel = sm.release_filter_subsample(x, panel(T=300, I=30), EPS, DELTA, np.random.default_rng(0), 1.0,
                                      accounting="paper")
    assert rel.claim.parameters["calibration"] == "classic"


# ------------------------------------------------------------------ noise actually drawn (5.2.1)

@pytest.mark.parametrize("accounting", ["exact", "paper"])
def test_subsample_noise_matches_reported_sigma(accounting):
    S, T = 60, 2000
    x = np.random.default_rng(10).integers(0, 1000, size=(S, T)).astype(float)
    rel = sm.release_subsample(x, panel(S, T, 200), EPS, DELTA, np.random.default_rng(11), 0.15,
                               accounting=accounting, emit_indices=True)
    assert_gaussian(noise_at_samples(rel, x), rel.claim.parameters["sigma"])


@pytest.mark.parametrize("accounting", ["conditional", "paper"])
def test_filter_noise_matches_reported_sigma(accounting):
    S, T = 60, 2000
    x = np.random.default_rng(12).integers(0, 1000, size=(S, T)).astype(float)
    rel = sm.release_filter_subsample(x, panel(S, T, 200), EPS, DELTA, np.random.default_rng(13), 0.15,
                                      accounting=accounting, filter_sigma=5.0, emit_indices=True)
    y = F.circular_filter(x, F.gaussian_kernel(T, 5.0))
    if accounting == "paper":
        assert_gaussian(noise_at_samples(rel, y), rel.claim.parameters["sigma"])
    else:
        sig = rel.claim.parameters["noise"]["sigma_per_series"]
        z = np.concatenate([(rel.values[s, J] - y[s, J]) / sig[s] for s, J in enumerate(sampled(rel))])
        assert_gaussian(z)


# ------------------------------------------------------------------ sampling (5.2.2)

def test_sample_sizes_and_inclusion_frequencies():
    S, T, p = 4000, 300, 0.1
    mask, redraws = sm.draw_sample_mask(np.random.default_rng(20), S, T, p)
    assert redraws == 0
    counts = mask.sum(axis=1)
    assert abs(counts.mean() - T * p) <= 4 * math.sqrt(T * p * (1 - p) / S)
    per_step = mask.sum(axis=0)
    chi2 = ((per_step - S * p) ** 2 / (S * p * (1 - p))).sum()
    assert chi2 <= stats.chi2.isf(TAIL, T)
    # |J| ~ Bin(T, p): goodness of fit of the sample sizes
    def jittered_cdf(c):  # CDF of |J| + U(0, 1), continuous, for a Kolmogorov-Smirnov test
        k = np.floor(c)
        return stats.binom.cdf(k - 1, T, p) + (c - k) * stats.binom.pmf(k, T, p)

    ks = stats.kstest(counts + np.random.default_rng(21).random(S), jittered_cdf)
    assert ks.pvalue > TAIL


def test_empty_samples_are_redrawn_and_singletons_warned():
    mask, redraws = sm.draw_sample_mask(np.random.default_rng(0), 500, 4, 0.05)
    assert mask.any(axis=1).all() and redraws > 0
    pnl = Panel(200, 4, sm.participation_bounds(4, 2, series_per_unit=1))
    rel = sm.release_subsample(np.zeros((200, 4)), pnl, EPS, DELTA, np.random.default_rng(1), 0.05)
    assert any("single time step" in w for w in rel.warnings)
    assert any("T * p" in w for w in rel.warnings)
    sub = rel.claim.parameters["subsampling"]
    assert sub["empty_redraws"] > 0 and sub["probability_empty"] == pytest.approx(0.95**4)


def test_same_seed_same_output_different_seed_different():
    x = np.random.default_rng(0).normal(100, 10, size=(2, 500))
    pnl = panel(2, 500, 50)
    for release in (sm.release_subsample, sm.release_filter_subsample):
        a = release(x, pnl, EPS, DELTA, np.random.default_rng(7), 0.1)
        b = release(x, pnl, EPS, DELTA, np.random.default_rng(7), 0.1)
        c = release(x, pnl, EPS, DELTA, np.random.default_rng(8), 0.1)
        np.testing.assert_array_equal(a.values, b.values)
        assert not np.array_equal(a.values, c.values)


# ------------------------------------------------------------------ interpolation (5.3.6)

def test_interpolation_equals_numpy_interp_and_has_the_right_shape():
    rng = np.random.default_rng(30)
    S, T = 50, 97
    mask = rng.random((S, T)) < 0.15
    mask[np.arange(S), rng.integers(0, T, S)] = True  # at least one knot per row
    mask[0] = False
    mask[0, 40] = True  # a single knot: constant row
    knots = rng.normal(size=(S, T)) * 10
    out = sm.interpolate(mask, knots)
    t = np.arange(T)
    for s in range(S):
        J = np.flatnonzero(mask[s])
        np.testing.assert_allclose(out[s], np.interp(t, J, knots[s, J]), rtol=1e-13, atol=1e-12)
        np.testing.assert_array_equal(out[s, J], knots[s, J])  # exact at the knots
        assert np.all(out[s, :J[0]] == knots[s, J[0]]) and np.all(out[s, J[-1]:] == knots[s, J[-1]])
        for a, b in zip(J[:-1], J[1:]):  # linear between knots: zero second differences
            if b - a >= 2:
                seg = out[s, a:b + 1]
                np.testing.assert_allclose(np.diff(seg, 2), 0.0, atol=1e-10)
    assert np.all(out[0] == knots[0, 40])


def test_zero_noise_reproduces_a_linear_input_between_the_outer_knots():
    T = 500
    y = np.vstack([3.0 * np.arange(T) - 20, -0.5 * np.arange(T) + 7])
    mask, _ = sm.draw_sample_mask(np.random.default_rng(31), 2, T, 0.05)
    out = sm._noisy_interpolation(y, mask, np.zeros(2), np.random.default_rng(0))
    for s in range(2):
        J = np.flatnonzero(mask[s])
        np.testing.assert_allclose(out[s, J[0]:J[-1] + 1], y[s, J[0]:J[-1] + 1], rtol=1e-12)


def test_clip_min_is_post_processing():
    x = np.zeros(400)
    rel = sm.release_subsample(x, panel(T=400, I=40), EPS, DELTA, np.random.default_rng(0), 0.1, clip_min=0.0)
    assert rel.values.min() >= 0 and rel.claim.parameters["postprocessing"]["clip_min"] == 0.0


def test_custom_boxcar_and_triangle_kernels():
    x = np.full(300, 10.0)
    rng = np.random.default_rng(0)
    for kw in ({"kernel": "boxcar", "filter_width": 5}, {"kernel": "triangle"}, {"kernel": [1, 2, 1]}):
        rel = sm.release_filter_subsample(x, panel(T=300, I=30), EPS, DELTA, rng, 0.2, **kw)
        assert rel.claim.parameters["filter"]["sigma_max"] == pytest.approx(1.0)
    rel = sm.release_filter_subsample(x, panel(T=300, I=30), EPS, DELTA, rng, 0.2, kernel=[1, 2, 1])
    assert rel.claim.parameters["filter"]["L"] == pytest.approx(0.375)


# ------------------------------------------------------------------ validation (5.3.8)

@pytest.mark.parametrize("kwargs, error, option", [
    ({"p": 0.0}, UsageError, "--sampling-rate"),
    ({"p": 1.2}, UsageError, "--sampling-rate"),
    ({"p": 0.1, "accounting": "paper", "delta_split": 1.0}, UsageError, "--delta-split"),
    ({"p": 0.1, "accounting": "conditional"}, UsageError, "--accounting"),
    ({"p": 0.1, "epsilon": 0.0}, UsageError, "--epsilon"),
    ({"p": 0.1, "delta": 1.0}, UsageError, "--delta"),
])
def test_subsample_validation(kwargs, error, option):
    args = {"epsilon": EPS, "delta": DELTA, **kwargs}
    eps, delta = args.pop("epsilon"), args.pop("delta")
    with pytest.raises(error, match=option):
        sm.release_subsample(np.zeros(200), panel(T=200, I=20), eps, delta, np.random.default_rng(0), **args)


@pytest.mark.parametrize("kwargs, error, option", [
    ({"kernel": [0.5, -0.2, 0.7]}, UsageError, "--filter-kernel"),
    ({"kernel": np.ones(201)}, UsageError, "--filter-kernel"),
    ({"kernel": "boxcar", "filter_width": 4}, UsageError, "--filter-width"),
    ({"filter_sigma": -1.0}, UsageError, "--filter-sigma"),
    ({"accounting": "exact"}, UsageError, "--accounting"),
    ({"alpha": 0.8}, UsageError, "--filter-alpha"),  # alpha needs the paper accounting
    ({"accounting": "paper", "alpha": 0.2}, UsageError, "--filter-alpha"),
    ({"accounting": "paper", "alpha": 0.331}, UsageError, "--filter-alpha .* floor"),  # sqrt(p) < alpha < sqrt(p+L)
    ({"accounting": "paper", "alpha": 0.36}, BudgetError, "--filter-alpha"),  # valid, but delta too large
    ({"accounting": "paper", "delta_split": 0.0}, UsageError, "--delta-split"),
])
def test_filter_validation(kwargs, error, option):
    with pytest.raises(error, match=option):
        sm.release_filter_subsample(np.zeros(200), panel(T=200, I=20), EPS, DELTA, np.random.default_rng(0),
                                    0.1, **kwargs)


def test_values_must_be_finite_and_match_the_panel():
    with pytest.raises(DataError, match="finite"):
        sm.release_subsample(np.full(200, np.nan), panel(T=200, I=20), EPS, DELTA, np.random.default_rng(0), 0.1)
    with pytest.raises(ValueError, match="do not match"):
        sm.release_subsample(np.zeros(199), panel(T=200, I=20), EPS, DELTA, np.random.default_rng(0), 0.1)


def test_given_alpha_and_floor_are_reported():
    T = 1800
    rel = sm.release_filter_subsample(np.zeros(T), panel(T=T), EPS, DELTA, np.random.default_rng(0), 0.1,
                                      accounting="paper", alpha=0.8)
    s = rel.claim.parameters["sensitivity"]
    assert s["alpha"] == 0.8 and s["alpha_given"] and rel.claim.delta < DELTA
    pnl = Panel(1, 64, sm.participation_bounds(64, 10))
    rel = sm.release_filter_subsample(np.zeros(64), pnl, 0.01, 0.1, np.random.default_rng(0), 0.5,
                                      accounting="paper", filter_sigma=1.0)
    assert any("validity floor" in w for w in rel.warnings) and rel.claim.delta < 0.1


# ------------------------------------------------------------------ Synth trends (5.2.4)

def synth(f, observation_noise, rng):
    t = np.arange(0, 10_000, 1 / f)
    y = 200 * np.sin(0.01 * t) + 500 + 0.1 * t
    x = y + 100 * rng.standard_normal(t.size) if observation_noise else y
    return y, x


def mae_trials(mechanism, f, observation_noise, trials, accounting="paper", seed=0):
    """Mean and standard error of the per-trial MAE; the trials are the rows of one panel
    (one series per unit, so each row is an independent release at the full budget)."""
    y, x = synth(f, observation_noise, np.random.default_rng(12345))
    T = y.size
    p = 0.1 * (1 + math.log2(1 / f) / 4)
    pnl = Panel(trials, T, sm.participation_bounds(T, 100, series_per_unit=1))
    panel_x = np.tile(x, (trials, 1))
    rng = np.random.default_rng(seed)
    if mechanism == "gaussian":
        out = release_gaussian(panel_x, pnl, EPS, DELTA, rng,
                               calibration="classic" if accounting == "paper" else "analytic").values
    elif mechanism == "subsample":
        out = sm.release_subsample(panel_x, pnl, EPS, DELTA, rng, p, accounting=accounting).values
    else:
        out = sm.release_filter_subsample(panel_x, pnl, EPS, DELTA, rng, p, accounting=accounting,
                                          filter_sigma=10 / (1 + math.log2(1 / f) / 4)).values
    mae = np.abs(out - y).mean(axis=1)
    return mae.mean(), mae.std(ddof=1) / math.sqrt(trials)


def clearly_less(a, b, z=3.0):
    """Mean a below mean b by more than z standard errors of the difference."""
    return b[0] - a[0] > z * math.hypot(a[1], b[1])


def test_synth_trends():
    n = 40
    for obs in (False, True):
        wo = {f: mae_trials("subsample", f, obs, n, seed=1) for f in (1, 1 / 4, 1 / 16)}
        assert clearly_less(wo[1], wo[1 / 4]) and clearly_less(wo[1 / 4], wo[1 / 16])  # decreasing in f
        g1, g16 = mae_trials("gaussian", 1, obs, n, seed=2), mae_trials("gaussian", 1 / 16, obs, n, seed=3)
        assert clearly_less(wo[1], g1)  # ours w/o filter beats the Gaussian at f = 1
        assert abs(g1[0] - g16[0]) <= 3 * math.hypot(g1[1], g16[1])  # Gaussian flat in f
        wf = mae_trials("filter", 1, obs, n, seed=4)
        if obs:
            assert clearly_less(wf, wo[1])  # with observation noise the filter helps
        else:
            assert clearly_less(wo[1], wf)  # without it, it does not
    # noiseless Gaussian: MAE = sigma sqrt(2/pi) = 69.31 (spec 3.5)
    g = mae_trials("gaussian", 1, False, n, seed=5)
    assert abs(g[0] - 86.872 * math.sqrt(2 / math.pi)) <= Z * g[1]
    # the exact accounting needs less noise, hence a smaller error (spec values 28.15 vs about 13)
    exact = mae_trials("subsample", 1, False, n, "exact", seed=6)
    assert clearly_less(exact, mae_trials("subsample", 1, False, n, seed=7))


def test_long_series_path_equals_the_vectorised_path(monkeypatch):
    x = np.random.default_rng(40).normal(100, 5, size=(5, 3000))
    pnl = panel(5, 3000, 100)
    # float noise: the same normals whatever the chunking (the exact sampler's draws depend on the block sizes)
    a = sm.release_filter_subsample(x, pnl, EPS, DELTA, np.random.default_rng(41), 0.1, accounting="paper",
                                    sampler="float")
    monkeypatch.setattr(sm.sampling, "CHUNK_CELLS", 2048)  # series longer than CHUNK_CELLS/4: numpy.interp, row by row
    b = sm.release_filter_subsample(x, pnl, EPS, DELTA, np.random.default_rng(41), 0.1, accounting="paper",
                                    sampler="float")
    np.testing.assert_allclose(a.values, b.values, rtol=1e-12, atol=1e-9)


def test_claims_fit_the_report_schema():
    import jsonschema

    from tsdp.report import Report, schema

    T = 300
    x = np.full((2, T), 20.0)
    rng = np.random.default_rng(50)
    shared = Panel(2, T, sm.participation_bounds(T, 30))  # K = 2
    releases = [
        sm.release_subsample(x, shared, EPS, DELTA, rng, 0.1),
        sm.release_subsample(x, shared, EPS, DELTA, rng, 0.1, accounting="paper", emit_indices=True),
        sm.release_filter_subsample(x, shared, EPS, DELTA, rng, 0.1, filter_sigma=4.0),
        sm.release_filter_subsample(x, shared, EPS, DELTA, rng, 0.1, accounting="paper", filter_sigma=4.0),
        sm.release_filter_subsample(np.zeros(64), Panel(1, 64, sm.participation_bounds(64, 10)), 0.01, 0.1, rng,
                                    0.5, accounting="paper", filter_sigma=1.0),  # alpha at the floor
    ]
    validator = jsonschema.Draft202012Validator(schema())
    for rel in releases:
        report = Report(command="release", parameters={"mechanism": rel.claim.mechanism}, claim=rel.claim,
                        output={"file": "out.csv", "sha256": "0" * 64, "format": "csv"}, randomness="seeded",
                        warnings=list(rel.warnings))
        data = json.loads(report.to_json())  # refuses NaN and infinity
        assert not list(validator.iter_errors(data))


# ------------------------------------------------------------------ hardened sampler (issue 17)

HARDENED_CASES = [("subsample", "exact"), ("subsample", "paper"), ("filter-subsample", "conditional"),
                  ("filter-subsample", "paper")]


def _koga_release(mechanism, accounting, sampler, x=None, pnl=None, **kw):
    x = np.full(1800, 300.0) if x is None else x
    pnl = panel() if pnl is None else pnl
    run = sm.release_subsample if mechanism == "subsample" else sm.release_filter_subsample
    return run(x, pnl, EPS, DELTA, np.random.default_rng(7), 0.1, accounting=accounting, sampler=sampler, **kw)


@pytest.mark.parametrize("mechanism,accounting", HARDENED_CASES)
def test_hardened_claims_are_the_float_ones_rounded(mechanism, accounting):
    from tsdp.accounting import discrete as disc
    from tsdp.mechanisms.noise import FLOAT_WARNING

    hard = _koga_release(mechanism, accounting, "hardened")
    flt = _koga_release(mechanism, accounting, "float")
    h, f = hard.claim.parameters, flt.claim.parameters
    assert h["sampler"] == "hardened" and f["sampler"] == "float" and "granularity" not in f
    assert FLOAT_WARNING in flt.warnings and FLOAT_WARNING not in hard.warnings
    g = h["granularity"]
    assert math.frexp(g)[0] == 0.5 and h["sigma"] / g >= 2.0 ** 20  # default lattice: 2^20 steps per sigma
    assert disc.GAUSSIAN_THEOREM in hard.claim.theorem and disc.GAUSSIAN_THEOREM not in flt.claim.theorem
    assert 0 < h["rounding_slack"] < 1e-9  # the default lattice's slack is negligible (tsdp.accounting.discrete)
    # rounding costs a small fraction of the noise (g <= max(2^-20 M, 2^-23 sigma) per kept cell; the filter spreads
    # a change over all T steps, so rounding adds g sqrt(n_s)), never less noise than the float claim; the exact
    # relations are checked per accounting below
    assert f["sigma"] <= h["sigma"] <= f["sigma"] * (1 + 1e-4)
    assert (hard.claim.epsilon, hard.claim.delta) == (flt.claim.epsilon, pytest.approx(flt.claim.delta, rel=1e-5))
    assert hard.claim.delta <= DELTA
    if accounting == "exact":
        (ev,) = hard.claim.events
        M = 1.0
        assert ev.kind == "discrete-gaussian-mixture" and ev.granularity == g
        assert h["sensitivity"]["rounded_per_step"] == disc.rounded_step(M, g) > M
        assert ev.sensitivity == pytest.approx(disc.rounded_step(M, g) * math.sqrt(180), rel=1e-12)
        assert ev.lattice_coords == 180  # the kept values a unit can change in its series
        assert claim_backed_by_events(hard.claim)[0]
    elif accounting == "conditional":
        (ev,) = hard.claim.events
        s = h["sensitivity"]
        n = np.array(h["subsampling"]["n_sampled"])
        # one series: + g sqrt(n_s), the rounding of its kept values
        np.testing.assert_allclose(s["rounded_l2_conditional"], np.array(s["l2_conditional"]) + g * np.sqrt(n),
                                   rtol=1e-12)
        assert ev.kind == "discrete-gaussian" and ev.sensitivity == max(s["rounded_l2_conditional"])
        # calibrated to delta minus the rounding slack of the T = 1800 filtered values a unit changes
        budget = disc.slack_budget(EPS, DELTA, sm._analytic_sigma(EPS, DELTA, min(s["l2_conditional"])) / g, 1800)
        assert h["noise"]["sigma_per_series"] == [sm._analytic_sigma(EPS, budget, c)
                                                  for c in s["rounded_l2_conditional"]]
        assert ev.lattice_coords == 1800
        assert claim_backed_by_events(hard.claim)[0]
    else:
        assert hard.claim.events == ()
        alpha, T, I = h["sensitivity"]["alpha"], 1800, 180
        M_noise = 1.0 if mechanism == "subsample" else None
        want = disc.rounded_step(1.0, g) if M_noise else 1.0 + g * math.sqrt(T) / (alpha * math.sqrt(I))
        assert h["sensitivity"]["rounded_per_step"] == pytest.approx(want, rel=1e-15)
        assert h["sigma"] == pytest.approx(f["sigma"] * want, rel=1e-9)  # the paper's sigma is linear in M


def test_hardened_granularity_is_checked_and_float_refuses_one():
    with pytest.raises(UsageError, match="--granularity must be a positive power of two"):
        _koga_release("subsample", "exact", "hardened", granularity=0.3)
    with pytest.raises(UsageError, match="--granularity applies to --sampler hardened only"):
        _koga_release("filter-subsample", "conditional", "float", granularity=2.0 ** -10)
    rel = _koga_release("subsample", "exact", "hardened", granularity=2.0 ** -6)
    assert rel.claim.parameters["granularity"] == 2.0 ** -6
    assert rel.claim.parameters["sensitivity"]["rounded_per_step"] == 1.0 + 2.0 ** -6


@pytest.mark.parametrize("S,I,series,cells", [(2, 500, 2, 1000), (3, 400, 2, 800), (1, 500, 1, 500),
                                              (4, 250, 2, 500)])
def test_substitution_counts_the_old_and_the_new_users_cells(S, I, series, cells):
    """Substitution: the old user's I cells and the new user's I cells can lie in two series (at most
    T in each, at most S series); the accounting takes all of them jointly. It accounted K = 1 series
    of T cells: half the cells at I = T (found by the red-team audit)."""
    T = 500
    pnl = Panel(S, T, sm.participation_bounds(T, I, series_per_unit=1, neighbouring="substitute"))
    rel = sm.release_subsample(np.zeros((S, T)), pnl, EPS, DELTA, np.random.default_rng(0), 0.1, sampler="float")
    assert rel.claim.parameters["assumption"]["I_effective"] == cells
    assert rel.claim.parameters["assumption"]["series"] == series
    assert rel.claim.events[0].sensitivity == pytest.approx(math.sqrt(cells))
    if S >= 2 and 2 * I > T:  # the old user in series 0, the new one in series 1: 2 I changed cells
        alone = sm.release_subsample(np.zeros((S, T)), Panel(S, T, sm.participation_bounds(T, I, series_per_unit=1)),
                                     EPS, DELTA, np.random.default_rng(0), 0.1, sampler="float")
        assert rel.claim.parameters["noise"]["sigma"] > alone.claim.parameters["noise"]["sigma"]


def test_paper_claim_states_the_corollaries_delta_and_never_less():
    """The paper accountings claim their delta_total; it stated min(--delta, that), which understated a
    total a few ulps above --delta (red-team audit): such a total is refused now."""
    assert sm._paper_delta(0.5e-5, 1e-5) == 0.5e-5
    with pytest.raises(NumericalError, match="exceeds --delta"):
        sm._paper_delta(1e-5 * (1 + 1e-12), 1e-5)
    rel = sm.release_subsample(np.zeros((3, 500)), panel(3, 500, 30, per_unit=2), EPS, DELTA,
                               np.random.default_rng(0), 0.1, accounting="paper", sampler="float")
    assert rel.claim.delta == rel.claim.parameters["privacy"]["delta_total"] < DELTA  # 2 series jointly


def test_paper_filter_sums_the_failure_probability_over_the_series_a_w_event_unit_reaches():
    """A w-event unit (w = 4, one series per step) can change one cell in each of 4 series; the
    filter's failure event (sigma_max(A_J) > alpha) is per series, so Theorem 4's delta' counts 4 times
    (with each series' redraw), and the Gaussian branch covers the 4 cells jointly."""
    T, S = 200, 4
    bounds = sm.ContributionBounds("w-event", 1.0, w=4, series_per_unit=1)
    rel = sm.release_filter_subsample(np.zeros((S, T)), Panel(S, T, bounds), EPS, DELTA, np.random.default_rng(0),
                                      0.2, accounting="paper", filter_sigma=3.0, sampler="float")
    prm = rel.claim.parameters
    alpha, L, srank = prm["sensitivity"]["alpha"], prm["filter"]["L"], prm["filter"]["srank"]
    assert prm["assumption"]["I_effective"] == 4 and prm["assumption"]["series"] == 4
    one = ts.delta_prime(alpha, 0.2, L, srank, cap=False) * ts.redraw_inflation(T, 0.2)
    assert prm["privacy"]["delta_prime"] == pytest.approx(4 * one, rel=1e-12)
    assert prm["sensitivity"]["l2_high_prob"] == pytest.approx(alpha * 2.0)  # M alpha sqrt(4 cells)
    assert rel.claim.delta == pytest.approx(prm["privacy"]["delta_noise"] + prm["privacy"]["delta_failure_term"])

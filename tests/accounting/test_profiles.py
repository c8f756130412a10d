"""Privacy profiles (tsdp.accounting.profiles) against golden values, dp-accounting and quadrature.

Spec: /work/shared/specs/schuchardt.md, sections 2.0, 2.10, 6.1 and 6.2 (items 2, 5, 6).

Tolerances used below and why:
* GOLDEN_RTOL = 1e-9: the golden values of spec 6.1 are printed to 11 significant digits.
* XCHECK = 1e-10 (absolute or relative): two double-precision evaluations of the same closed-form
  expression (ours in log space, dp-accounting in linear space); dp-accounting's own root search
  stops at an x-precision of 1e-6, but delta is stationary in the root (d delta / d x* = p - e^eps q
  = 0 there), so that costs only ~1e-12.
* QUAD_ABS = 1e-10: scipy.integrate.quad with epsabs=1e-13 per piece over a finite range cut at
  40 standard deviations (neglected mass < 1e-300), with the kink of the integrand as a breakpoint.
* FP = 1e-12: slack for properties that hold exactly in real arithmetic (monotonicity, convexity,
  lower bound 1 - e^eps), covering rounding in deltas that are themselves at most 1.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import integrate, optimize, special, stats

from tsdp.accounting.profiles import (DoubleMixture, GaussianProfile, LaplaceProfile, MixtureVsGaussian,
                                      Truncated, WeightedWithPerfect)

GOLDEN_RTOL = 1e-9
XCHECK = 1e-10
QUAD_ABS = 1e-10
FP = 1e-12

# Spec 6.1: Thm 4.4 with N=320, B=32, lambda=1, sigma=1, L_C=L_F=1, L=20 => r=0.1, rho=0.1, q=0.01.
GOLDEN_EPS = [-1.0, -0.1, 0.0, 0.1, 0.5, 1.0, 2.0, 4.0]
GOLDEN_DELTA = [6.3222122444e-01, 9.7522428014e-02, 6.8268949214e-03, 2.6080332260e-03,
                7.1936183140e-04, 2.7363749225e-04, 5.3967168388e-05, 1.7310020788e-06]
THM44 = MixtureVsGaussian((0.99, 0.01), (0.0, 2.0), 1.0)


# ------------------------------------------------------------------------------------------------
# strategies
# ------------------------------------------------------------------------------------------------

@st.composite
def mixtures(draw, max_components=4):
    """Random mixture (weights, means, sigma): weights > 0 summing to 1, means >= 0, largest >= 0.05."""
    n = draw(st.integers(1, max_components))
    raw = draw(st.lists(st.floats(1e-3, 1.0), min_size=n, max_size=n))
    weights = np.array(raw) / sum(raw)
    # Means are 0 or at least 1e-3: a mean like 1e-300 puts the ADD-direction root beyond 1e60
    # (the loss slope is m / sigma^2), where the bracket search gives up (see the report).
    means = np.array(draw(st.lists(st.one_of(st.just(0.0), st.floats(1e-3, 5.0)), min_size=n, max_size=n)))
    if draw(st.booleans()):
        means[0] = 0.0
    if means.max() < 0.05:
        means[-1] = 0.05
    sigma = draw(st.floats(0.3, 4.0))
    return tuple(weights), tuple(means), sigma


@st.composite
def paper_mixtures(draw):
    """Mixtures of the paper's shape: w_0 = 1 - rho + rho Bin(0; lam, r), w_j = rho Bin(j; lam, r),
    means spacing * j (Thms 4.2-4.4, F.7, G.1 use spacing 2)."""
    lam = draw(st.integers(1, 5))
    r = draw(st.floats(1e-3, 0.9))
    rho = draw(st.floats(1e-2, 1.0))
    spacing = draw(st.sampled_from([2.0, 1.0, 0.5]))
    sigma = draw(st.floats(0.3, 4.0))
    w = rho * stats.binom.pmf(np.arange(lam + 1), lam, r)
    w[0] += 1 - rho
    keep = w > 0
    w, m = w[keep] / w[keep].sum(), spacing * np.arange(lam + 1)[keep]
    if m.max() == 0:  # everything on mean 0 (rho r ~ 0): give the pair a second component
        w, m = np.array([1 - 1e-3, 1e-3]), np.array([0.0, spacing])
    return tuple(w), tuple(m), sigma


EPS_GRID = np.concatenate([np.linspace(-8, -0.01, 60), [0.0], np.linspace(0.01, 25, 90)])


# ------------------------------------------------------------------------------------------------
# references
# ------------------------------------------------------------------------------------------------

def _pdf_mix(x, weights, means, sigma):
    """Mixture density at scalar or array x (plain numpy: quad calls it thousands of times)."""
    z = (np.asarray(x, dtype=float)[..., None] - np.asarray(means, dtype=float)) / sigma
    return np.exp(-0.5 * z * z) @ np.asarray(weights, dtype=float) / (sigma * math.sqrt(2 * math.pi))


def hockey_stick_quad(p, q, eps, lo, hi, kinks=()):
    """int max(p(x) - e^eps q(x), 0) dx on [lo, hi] (breakpoints at the sign changes)."""
    a = math.exp(eps)
    points = sorted({lo, hi, *[k for k in kinks if lo < k < hi]})
    total = 0.0
    for left, right in zip(points[:-1], points[1:]):
        value, _ = integrate.quad(lambda x: max(p(x) - a * q(x), 0.0), left, right,
                                  epsabs=1e-13, epsrel=1e-12, limit=400)
        total += value
    return total


def sign_changes(f, lo, hi, n=4001):
    """Roots of f on [lo, hi], bracketed on a fine grid and polished by brentq (independent of tsdp).
    ``f`` must accept arrays as well as scalars."""
    xs = np.linspace(lo, hi, n)
    vals = np.asarray(f(xs), dtype=float)
    roots = []
    for i in np.nonzero(np.sign(vals[:-1]) * np.sign(vals[1:]) < 0)[0]:
        roots.append(optimize.brentq(f, xs[i], xs[i + 1], xtol=1e-14))
    return roots


def mixture_vs_gaussian_quad(weights, means, sigma, eps):
    """Switching profile by integration: H(P||Q) for eps >= 0, H(Q||P) for eps < 0."""
    p = lambda x: _pdf_mix(x, weights, means, sigma)  # noqa: E731
    q = lambda x: _pdf_mix(x, (1.0,), (0.0,), sigma)  # noqa: E731
    lo, hi = -40 * sigma, max(means) + 40 * sigma
    first, second = (p, q) if eps >= 0 else (q, p)
    kinks = sign_changes(lambda x: np.log(first(x) + 1e-320) - eps - np.log(second(x) + 1e-320),
                         -12 * sigma, max(means) + 12 * sigma)
    return hockey_stick_quad(first, second, eps, lo, hi, kinks)


def double_mixture_quad(weights, means, sigma, eps, swap=False):
    """H_{e^eps}(P || Q) for P = sum w N(-m), Q = sum w N(+m) (or (Q || P) with swap=True)."""
    p = lambda x: _pdf_mix(x, weights, -np.asarray(means), sigma)  # noqa: E731
    q = lambda x: _pdf_mix(x, weights, means, sigma)  # noqa: E731
    if swap:
        p, q = q, p
    top = max(means)
    lo, hi = -top - 40 * sigma, top + 40 * sigma
    kinks = sign_changes(lambda x: np.log(p(x) + 1e-320) - eps - np.log(q(x) + 1e-320),
                         -top - 12 * sigma, top + 12 * sigma)
    return hockey_stick_quad(p, q, eps, lo, hi, kinks)


def dp_accounting_switching(weights, means, sigma, eps):
    """dp-accounting's MixtureGaussianPrivacyLoss: REMOVE for eps >= 0 and ADD for eps < 0.

    Work-around for an upstream defect (dp-accounting 0.6.0): ``inverse_privacy_losses`` brackets
    its binary search with the inverses of two subsampled Gaussians that carry all non-zero mass at
    the smallest or the largest sensitivity. That is not a pointwise bound on a multi-component
    mixture's loss, so the bracket can miss the root; it then happens only at the two ends of the
    requested epsilon array (see test_dp_accounting_bracket_defect_case_is_ours_by_quadrature).
    We therefore pad every request with one sentinel epsilon on each side and drop them.
    """
    from dp_accounting.pld.privacy_loss_mechanism import AdjacencyType, MixtureGaussianPrivacyLoss

    w, m = np.asarray(weights), np.asarray(means)
    eps = np.asarray(eps, dtype=float)
    p0 = w[m == 0].sum()
    out = np.empty_like(eps)
    pos, neg = eps >= 0, eps < 0
    if pos.any():
        remove = MixtureGaussianPrivacyLoss(sigma, m, w, adjacency_type=AdjacencyType.REMOVE)
        below = 0.5 * math.log(p0) if p0 > 0 else -60.0  # must stay above log(1 - sampling prob)
        padded = np.concatenate([[below], eps[pos], [eps[pos].max() + 60.0]])
        out[pos] = remove.get_delta_for_epsilon(padded)[1:-1]
    if neg.any():
        add = MixtureGaussianPrivacyLoss(sigma, m, w, adjacency_type=AdjacencyType.ADD)
        above = -0.5 * math.log(p0) if p0 > 0 else 60.0  # must stay below -log(1 - sampling prob)
        padded = np.concatenate([[eps[neg].min() - 60.0], eps[neg], [above]])
        out[neg] = add.get_delta_for_epsilon(padded)[1:-1]
    return out


def assert_close(ours, ref, tol):
    ours, ref = np.asarray(ours), np.asarray(ref)
    err = np.abs(ours - ref)
    ok = (err <= tol) | (err <= tol * np.abs(ref))
    assert ok.all(), f"max abs error {err.max():.3g} at index {int(np.argmax(err))}: {ours[~ok]} vs {ref[~ok]}"


# ------------------------------------------------------------------------------------------------
# 1. golden single-step values (spec 6.1)
# ------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("eps,expected", list(zip(GOLDEN_EPS, GOLDEN_DELTA)))
def test_thm44_golden_values(eps, expected):
    assert THM44.delta(np.array([eps]))[0] == pytest.approx(expected, rel=GOLDEN_RTOL)


def test_thm44_golden_values_as_one_vectorised_call():
    assert THM44.delta(np.array(GOLDEN_EPS)) == pytest.approx(GOLDEN_DELTA, rel=GOLDEN_RTOL)


def test_thm44_delta_at_zero_is_q_times_tv_distance():
    q, sigma = 0.01, 1.0
    closed = q * (2 * stats.norm.cdf(1 / sigma) - 1)
    assert closed == pytest.approx(6.8268949214e-03, rel=GOLDEN_RTOL)
    assert THM44.delta(np.array([0.0]))[0] == pytest.approx(closed, rel=1e-12)


@settings(max_examples=100, deadline=None)
@given(q=st.floats(1e-6, 1.0), mean=st.floats(0.01, 20.0), sigma=st.floats(0.1, 10.0))
def test_delta_at_zero_closed_form_for_two_components(q, mean, sigma):
    """Spec 2.10: delta(0) = q (2 Phi(M / (2 sigma)) - 1) for (1-q) N(0) + q N(M) vs N(0)."""
    closed = q * special.erf(mean / (2 * sigma) / math.sqrt(2))  # 2 Phi(z) - 1 = erf(z / sqrt 2)
    profile = MixtureVsGaussian((1 - q, q), (0.0, mean), sigma)
    # At eps = 0 the profile is P(X > x*) - Q(X > x*), a difference of two tail masses of size up
    # to 1/2 that agree to about q: its rounding error is a few ulps of 1/2 in absolute terms
    # (relative 1e-16 / q), hence abs=1e-15 besides rel=1e-10.
    assert profile.delta(np.array([0.0]))[0] == pytest.approx(closed, rel=1e-10, abs=1e-15)
    assert profile.delta_add_nonnegative(np.array([0.0]))[0] == pytest.approx(closed, rel=1e-10, abs=1e-15)


def test_two_component_roots_match_spec_closed_form():
    """Spec 2.10: x* = (s^2/M) log((e^eps - (1-q))/q) + M/2 gives the same delta as the profile."""
    q, mean, sigma = 0.05, 2.0, 0.8
    for eps in [0.0, 0.3, 1.0, 3.0, 8.0]:
        x = sigma ** 2 / mean * math.log((math.exp(eps) - (1 - q)) / q) + mean / 2
        delta = (1 - q) * stats.norm.sf(x / sigma) + q * stats.norm.sf((x - mean) / sigma) \
            - math.exp(eps) * stats.norm.sf(x / sigma)
        ours = MixtureVsGaussian((1 - q, q), (0.0, mean), sigma).delta(np.array([eps]))[0]
        assert ours == pytest.approx(delta, rel=1e-9)


# ------------------------------------------------------------------------------------------------
# 2. cross-checks against dp-accounting and quadrature
# ------------------------------------------------------------------------------------------------

def test_golden_values_match_dp_accounting():
    ref = dp_accounting_switching((0.99, 0.01), (0.0, 2.0), 1.0, np.array(GOLDEN_EPS))
    assert ref == pytest.approx(GOLDEN_DELTA, rel=GOLDEN_RTOL)


@settings(max_examples=30, deadline=None)
@given(q=st.floats(1e-5, 1.0), mean=st.floats(0.05, 6.0), sigma=st.floats(0.3, 4.0))
def test_two_component_switching_equals_dp_accounting_remove_and_add(q, mean, sigma):
    weights = (1 - q, q) if q < 1 else (1.0,)
    means = (0.0, mean) if q < 1 else (mean,)
    ours = MixtureVsGaussian(weights, means, sigma).delta(EPS_GRID)
    assert_close(ours, dp_accounting_switching(weights, means, sigma, EPS_GRID), XCHECK)


@settings(max_examples=30, deadline=None)
@given(mixture=paper_mixtures())
def test_paper_shaped_mixtures_equal_dp_accounting_remove_and_add(mixture):
    weights, means, sigma = mixture
    ours = MixtureVsGaussian(weights, means, sigma).delta(EPS_GRID)
    assert_close(ours, dp_accounting_switching(weights, means, sigma, EPS_GRID), XCHECK)


@settings(max_examples=25, deadline=None)
@given(mixture=paper_mixtures())
def test_directions_equal_dp_accounting_remove_and_add(mixture):
    """``directions()``: REMOVE = H(P||Q) and ADD = H(Q||P) for every epsilon of either sign."""
    from dp_accounting.pld.privacy_loss_mechanism import AdjacencyType, MixtureGaussianPrivacyLoss

    weights, means, sigma = mixture
    remove, add = MixtureVsGaussian(weights, means, sigma).directions()
    w, m = np.array(weights), np.array(means)
    p_pos = w[m > 0].sum()
    # dp-accounting accepts REMOVE epsilons above log(1 - p) and ADD epsilons below -log(1 - p);
    # pad both ends (see dp_accounting_switching for why).
    lo = math.log1p(-p_pos) if p_pos < 1 else -40.0
    hi = -lo
    grid = np.linspace(max(lo, -8.0) + 0.01, 12.0, 80)
    ref_remove = MixtureGaussianPrivacyLoss(sigma, m, w, adjacency_type=AdjacencyType.REMOVE) \
        .get_delta_for_epsilon(np.concatenate([[grid[0] - 0.005], grid, [80.0]]))[1:-1]
    assert_close(remove.delta(grid), ref_remove, XCHECK)
    grid_add = np.linspace(-8.0, min(hi, 12.0) - 0.01, 80)
    ref_add = MixtureGaussianPrivacyLoss(sigma, m, w, adjacency_type=AdjacencyType.ADD) \
        .get_delta_for_epsilon(np.concatenate([[-80.0], grid_add, [grid_add[-1] + 0.005]]))[1:-1]
    assert_close(add.delta(grid_add), ref_add, XCHECK)
    # beyond -log(1 - p) the ADD loss never reaches epsilon: delta is exactly 0
    if p_pos < 1 and hi < 30:
        assert add.delta(np.array([hi + 1e-9, hi + 1.0, 30.0])).max() == 0.0


@settings(max_examples=25, deadline=None)
@given(q=st.floats(1e-5, 0.999), sigma=st.floats(0.3, 4.0))
def test_one_step_thm44_equals_poisson_subsampled_gaussian_sensitivity_two(q, sigma):
    """Spec 2.11 / 6.2 item 2: for eps >= 0, Thm 4.4 is dp-accounting's subsampled Gaussian
    (sensitivity 2, REMOVE); for eps < 0 it is the ADD direction."""
    from dp_accounting.pld.privacy_loss_mechanism import AdjacencyType, GaussianPrivacyLoss

    profile = MixtureVsGaussian((1 - q, q), (0.0, 2.0), sigma)
    pos = EPS_GRID[EPS_GRID >= 0]
    remove = GaussianPrivacyLoss(sigma, sensitivity=2.0, sampling_prob=q, adjacency_type=AdjacencyType.REMOVE)
    assert_close(profile.delta(pos), remove.get_delta_for_epsilon(pos), XCHECK)
    neg = EPS_GRID[EPS_GRID < 0]
    add = GaussianPrivacyLoss(sigma, sensitivity=2.0, sampling_prob=q, adjacency_type=AdjacencyType.ADD)
    assert_close(profile.delta(neg), add.get_delta_for_epsilon(neg), XCHECK)


@settings(max_examples=10, deadline=None)
@given(mixture=mixtures(), eps=st.sampled_from([-2.0, -0.3, 0.0, 0.2, 1.0, 3.0]))
def test_random_mixture_vs_gaussian_equals_quadrature(mixture, eps):
    weights, means, sigma = mixture
    ours = MixtureVsGaussian(weights, means, sigma).delta(np.array([eps]))[0]
    assert ours == pytest.approx(mixture_vs_gaussian_quad(weights, means, sigma, eps), abs=QUAD_ABS)


def test_dp_accounting_bracket_defect_case_is_ours_by_quadrature():
    """A mixture where dp-accounting 0.6.0 (unpadded, one epsilon) answers 0.1918 instead of 0.2864:
    its bracket [-1.330, -1.223] misses the root at -0.885 of its mirrored loss. Quadrature sides
    with tsdp; this pins the discrepancy down as upstream."""
    from dp_accounting.pld.privacy_loss_mechanism import AdjacencyType, MixtureGaussianPrivacyLoss

    w = np.array([0.00715314, 0.52268365, 0.04354705, 0.42661616])
    w = w / w.sum()
    m = (0.0, 0.24034833, 2.17912994, 1.07826496)
    sigma, eps = 0.3873884952256535, 1.9322033898305087
    ours = MixtureVsGaussian(tuple(w), m, sigma).delta(np.array([eps]))[0]
    assert ours == pytest.approx(mixture_vs_gaussian_quad(tuple(w), m, sigma, eps), abs=QUAD_ABS)
    theirs = MixtureGaussianPrivacyLoss(sigma, m, w, adjacency_type=AdjacencyType.REMOVE) \
        .get_delta_for_epsilon(np.array([eps]))[0]
    assert abs(theirs - ours) > 0.05  # documents the upstream defect; padded requests avoid it
    assert dp_accounting_switching(tuple(w), m, sigma, np.array([eps]))[0] == pytest.approx(ours, abs=XCHECK)


DOUBLE_MIXTURES = [
    ((0.9, 0.1), (0.0, 2.0), 1.0),  # Thm E.1, lambda = 1, r = 0.1
    tuple([tuple(stats.binom.pmf(np.arange(3), 2, 0.3)), (0.0, 2.0, 4.0), 1.5]),  # E.1, lambda = 2
    tuple([tuple(stats.binom.pmf(np.arange(5), 4, 0.25)), (0.0, 1.0, 2.0, 3.0, 4.0), 0.8]),  # E.8
    ((0.2, 0.5, 0.3), (0.3, 1.1, 2.7), 0.6),  # no zero-mean component
]


@pytest.mark.parametrize("weights,means,sigma", DOUBLE_MIXTURES)
@pytest.mark.parametrize("eps", [-3.0, -0.5, 0.0, 0.25, 1.0, 4.0])
def test_double_mixture_equals_quadrature(weights, means, sigma, eps):
    weights = tuple(np.array(weights) / np.sum(weights))
    ours = DoubleMixture(weights, means, sigma).delta(np.array([eps]))[0]
    assert ours == pytest.approx(double_mixture_quad(weights, means, sigma, eps), abs=QUAD_ABS)


@pytest.mark.parametrize("weights,means,sigma", DOUBLE_MIXTURES)
@pytest.mark.parametrize("eps", [-1.0, 0.0, 0.7, 2.5])
def test_double_mixture_is_symmetric(weights, means, sigma, eps):
    """Spec 6.2 item 6: delta from (P, Q) equals delta from (Q, P)."""
    weights = tuple(np.array(weights) / np.sum(weights))
    forward = double_mixture_quad(weights, means, sigma, eps)
    backward = double_mixture_quad(weights, means, sigma, eps, swap=True)
    assert forward == pytest.approx(backward, abs=QUAD_ABS)
    assert DoubleMixture(weights, means, sigma).delta(np.array([eps]))[0] == pytest.approx(backward, abs=QUAD_ABS)


def test_double_mixture_lambda_one_spec_values():
    """Spec 6.2 item 3: Thm E.1 (lambda=1, r=0.1, sigma=1) at eps 0/1/2 (5 printed digits)."""
    values = DoubleMixture((0.9, 0.1), (0.0, 2.0), 1.0).delta(np.array([0.0, 1.0, 2.0]))
    assert values == pytest.approx([9.5450e-2, 2.1813e-2, 8.1196e-3], rel=1e-4)


@pytest.mark.parametrize("mu", [0.05, 0.5, 1.0, 2.0, 5.0])
def test_gaussian_profile_is_balle_wang_on_both_signs(mu):
    eps = np.linspace(-6, 20, 131)
    closed = stats.norm.cdf(mu / 2 - eps / mu) - np.exp(eps) * stats.norm.cdf(-mu / 2 - eps / mu)
    assert_close(GaussianProfile(mu).delta(eps), closed, 1e-10)
    # and it is the two-component mixture with q = 1
    assert_close(MixtureVsGaussian((1.0,), (mu,), 1.0).delta(eps), closed, 1e-10)


@pytest.mark.parametrize("ratio", [0.1, 1.0, 3.0])
@pytest.mark.parametrize("eps", [-4.0, -1.0, -0.05, 0.0, 0.05, 0.9, 2.5])
def test_laplace_profile_equals_quadrature(ratio, eps):
    p = lambda x: 0.5 * math.exp(-abs(x - ratio))  # noqa: E731
    q = lambda x: 0.5 * math.exp(-abs(x))  # noqa: E731
    first, second = (p, q) if eps >= 0 else (q, p)  # the pair is symmetric; either order
    # the log ratio is piecewise linear with kinks at 0 and ratio; the sign change is inside
    kinks = [0.0, ratio] + sign_changes(np.vectorize(lambda x: math.log(first(x)) - eps - math.log(second(x))),
                                        -5, ratio + 5)
    numeric = hockey_stick_quad(first, second, eps, -80.0, ratio + 80.0, kinks)
    assert LaplaceProfile(ratio).delta(np.array([eps]))[0] == pytest.approx(numeric, abs=QUAD_ABS)


# ------------------------------------------------------------------------------------------------
# composite profiles
# ------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("rho", [0.0, 0.1, 0.5, 1.0])
def test_weighted_with_perfect_is_spec_formula_on_both_signs(rho):
    """Spec 2.10: delta = rho delta_inner(eps) + (1 - rho) max(0, 1 - e^eps) for every eps."""
    inner = DoubleMixture(tuple(stats.binom.pmf(np.arange(3), 2, 0.1)), (0.0, 2.0, 4.0), 1.0)
    eps = np.linspace(-6, 15, 107)
    expected = rho * inner.delta(eps) + (1 - rho) * np.maximum(0.0, -np.expm1(eps))
    assert_close(WeightedWithPerfect(inner, rho).delta(eps), expected, FP)


def test_weighted_with_perfect_f1_spec_values():
    """Spec 6.2 item 3: F.1 with lambda = 1 (r = rho = 0.1, sigma = 1) at eps 0/1/2."""
    profile = WeightedWithPerfect(DoubleMixture((0.9, 0.1), (0.0, 2.0), 1.0), 0.1)
    assert profile.delta(np.array([0.0, 1.0, 2.0])) == pytest.approx([9.5450e-3, 2.1813e-3, 8.1196e-4], rel=1e-4)


@pytest.mark.parametrize("omega", [1e-30, 1e-6, 0.2])
def test_truncated_is_mixture_with_blatantly_non_private_pair(omega):
    """A disjoint-support pair has H = 1 for every alpha, so by the mixture identity
    delta = (1 - omega) delta_inner + omega on both signs of eps, and it dominates the inner profile."""
    inner = THM44
    eps = np.linspace(-6, 15, 107)
    truncated = Truncated(inner, omega).delta(eps)
    assert_close(truncated, (1 - omega) * inner.delta(eps) + omega, FP)
    assert np.all(truncated >= inner.delta(eps) - FP)


# ------------------------------------------------------------------------------------------------
# 3. profile validity (Lemma D.11, spec 6.2 item 5)
# ------------------------------------------------------------------------------------------------

ALPHAS = np.linspace(0.0, 6.0, 241)[1:]  # uniform grid in alpha = e^eps (alpha = 0 checked separately)


def check_valid_profile(profile):
    eps = np.sort(np.concatenate([EPS_GRID, np.log(ALPHAS)]))
    delta = profile.delta(eps)
    assert np.all((delta >= 0) & (delta <= 1))
    assert np.all(np.diff(delta) <= FP), "delta must be non-increasing in eps"
    assert np.all(delta >= np.maximum(0.0, -np.expm1(eps)) - FP), "delta >= max(0, 1 - e^eps)"
    # H(alpha) is convex in alpha: second differences on a uniform alpha grid are >= 0
    h = profile.delta(np.log(ALPHAS))
    assert np.min(h[:-2] - 2 * h[1:-1] + h[2:]) >= -4 * FP
    # H(0) = 1: delta(eps) -> 1 as eps -> -infinity
    assert profile.delta(np.array([-40.0]))[0] == pytest.approx(1.0, abs=1e-15)


@settings(max_examples=30, deadline=None)
@given(mixture=mixtures())
def test_mixture_vs_gaussian_is_a_valid_profile(mixture):
    check_valid_profile(MixtureVsGaussian(*mixture))


@settings(max_examples=20, deadline=None)
@given(mixture=mixtures())
def test_both_directions_are_valid_profiles(mixture):
    remove, add = MixtureVsGaussian(*mixture).directions()
    check_valid_profile(remove)
    check_valid_profile(add)


@settings(max_examples=30, deadline=None)
@given(mixture=mixtures())
def test_double_mixture_is_a_valid_profile(mixture):
    check_valid_profile(DoubleMixture(*mixture))


@settings(max_examples=15, deadline=None)
@given(mixture=mixtures(), rho=st.floats(0.0, 1.0), omega=st.sampled_from([0.0, 1e-30, 1e-3]))
def test_weighted_and_truncated_are_valid_profiles(mixture, rho, omega):
    check_valid_profile(WeightedWithPerfect(DoubleMixture(*mixture), rho))
    check_valid_profile(Truncated(DoubleMixture(*mixture), omega))


@settings(max_examples=30, deadline=None)
@given(mu=st.floats(0.01, 10.0), ratio=st.floats(0.01, 10.0))
def test_gaussian_and_laplace_are_valid_profiles(mu, ratio):
    check_valid_profile(GaussianProfile(mu))
    check_valid_profile(LaplaceProfile(ratio))


@settings(max_examples=60, deadline=None)
@given(mixture=mixtures())
def test_switching_branches_meet_at_zero(mixture):
    """H_1(P||Q) = H_1(Q||P) = TV(P, Q), so the eps < 0 branch continues the eps >= 0 one."""
    profile = MixtureVsGaussian(*mixture)
    zero = np.array([0.0])
    tv_pq = profile.delta_nonnegative(zero)[0]
    tv_qp = profile.delta_add_nonnegative(zero)[0]
    assert tv_pq == pytest.approx(tv_qp, rel=1e-10, abs=1e-300)
    left, right = profile.delta(np.array([-1e-9, 1e-9]))
    # |d delta / d eps| <= 1 + delta on both sides, so a 1e-9 step moves delta by at most 2e-9
    assert abs(left - tv_pq) <= 2e-9 + FP and abs(right - tv_pq) <= 2e-9 + FP


@settings(max_examples=30, deadline=None)
@given(mixture=mixtures())
def test_max_loss_is_where_delta_becomes_negligible(mixture):
    """max_loss() is the grid's upper end: delta there must be below about 1e-20."""
    for profile in (MixtureVsGaussian(*mixture), DoubleMixture(*mixture)):
        assert profile.delta(np.array([profile.max_loss()]))[0] <= 1e-19


def test_invalid_mixtures_are_rejected():
    with pytest.raises(ValueError):
        MixtureVsGaussian((0.5, 0.4), (0.0, 1.0), 1.0)  # weights do not sum to 1
    with pytest.raises(ValueError):
        MixtureVsGaussian((0.5, 0.5), (0.0, -1.0), 1.0)  # negative mean
    with pytest.raises(ValueError):
        DoubleMixture((1.0,), (0.0, 1.0), 1.0)  # shapes differ


def test_zero_weight_components_are_dropped():
    a = MixtureVsGaussian((0.99, 0.0, 0.01), (0.0, 7.0, 2.0), 1.0)
    assert a.delta(np.array(GOLDEN_EPS)) == pytest.approx(GOLDEN_DELTA, rel=GOLDEN_RTOL)
    assert a.max_loss() == pytest.approx(THM44.max_loss())


def test_tiny_deltas_keep_relative_accuracy():
    """Log-space evaluation: delta(10) = 3.417e-13 (spec 4.6 Fig 2, lambda = 1, step 1)."""
    assert THM44.delta(np.array([10.0]))[0] == pytest.approx(3.417e-13, rel=5e-4)
    far = THM44.delta(np.array([30.0, 60.0]))  # 5.1e-63 and 1.3e-218: no underflow to 0
    assert np.all(far > 0) and far[1] < 1e-200 and far[1] < far[0] < 1e-60
    # the log-space tail agrees with the closed form of spec 2.10 computed with log_ndtr:
    # x* = log((e^eps - 0.99)/0.01)/2 + 1 and delta = 0.99 Sf(x*) + 0.01 Sf(x* - 2) - e^eps Sf(x*)
    for eps, value in zip([30.0, 60.0], far):
        x = math.log((math.exp(eps) - 0.99) / 0.01) / 2 + 1
        log_terms = [math.log(0.01) + special.log_ndtr(-(x - 2)), math.log(0.99) + special.log_ndtr(-x)]
        log_minus = eps + special.log_ndtr(-x)
        expected = math.exp(special.logsumexp(log_terms)) * -math.expm1(log_minus - special.logsumexp(log_terms))
        assert value == pytest.approx(expected, rel=1e-9)


@pytest.mark.parametrize("weights, means, sigma", [((0.99, 0.01), (0.0, 2.0), 0.0478), ((0.7, 0.3), (0.0, 1.0), 0.5),
                                                   ((1.0,), (2.0,), 2.0), ((0.5, 0.5), (0.0, 3.0), 1e-2)])
def test_closed_form_loss_inversion_matches_the_newton_iteration(weights, means, sigma):
    """Mixtures with one component off 0 invert their loss in closed form (tens of times faster on
    a grid of 10^6 losses); the profile is the one the bracketed Newton iteration gives, to rounding."""
    profile = MixtureVsGaussian(weights, means, sigma)
    eps = np.linspace(0.0, min(profile.max_loss(), 2000.0), 20_001)
    fast, fast_add = profile.delta_nonnegative(eps), profile.delta_add_nonnegative(eps[:2001] / 100)
    assert profile._closed_form_root(eps) is not None
    object.__setattr__(profile, "_closed_form_root", lambda level: None)  # the Newton iteration
    slow, slow_add = profile.delta_nonnegative(eps), profile.delta_add_nonnegative(eps[:2001] / 100)
    np.testing.assert_allclose(fast, slow, rtol=1e-11, atol=1e-15)
    np.testing.assert_allclose(fast_add, slow_add, rtol=1e-11, atol=1e-15)


def test_mixtures_with_several_components_off_zero_keep_the_newton_iteration():
    assert MixtureVsGaussian((0.5, 0.3, 0.2), (0.0, 1.0, 2.0), 1.0)._closed_form_root(np.array([1.0])) is None

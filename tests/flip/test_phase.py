"""The phase function R, the shift bound B and the shifted CDF H (spec flip.md 2.2-2.3, checks 7-9)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.integrate import quad

from tsdp.errors import UsageError
from tsdp.flip import phase, spectral
from tsdp.flip.phase import BetaMixture

N = 8192
LAM = spectral.frequency_grid(N)


def ar1_spectrum(phi: float, lam: np.ndarray = LAM) -> np.ndarray:
    return 1.0 / np.abs(1.0 - phi * np.exp(-1j * lam)) ** 2


@st.composite
def beta_mixtures(draw, low: float = 1.0, high: float = 10.0, max_components: int = 3) -> BetaMixture:
    """Symmetrised Beta mixtures with a_j, b_j in [low, high] and positive weights summing to 1."""
    J = draw(st.integers(1, max_components))
    par = st.floats(low, high, allow_nan=False)
    a = [draw(par) for _ in range(J)]
    b = [draw(par) for _ in range(J)]
    w = np.array([draw(st.floats(0.05, 1.0)) for _ in range(J)])
    return BetaMixture(tuple(w / w.sum()), tuple(a), tuple(b))


FIXED_R = BetaMixture((0.5, 0.5), (2.0, 3.0), (1.5, 3.5))


# ---------------------------------------------------------------------------------------------
# R family (Thm 6, eq. (9))
# ---------------------------------------------------------------------------------------------


@settings(max_examples=60, deadline=None)
@given(beta_mixtures(), st.lists(st.floats(0.0, 1.0), min_size=1, max_size=50))
def test_tabulated_r_is_in_the_family(r, xs):
    """Check 7: R(0)=0, R(1)=1, R(x)+R(1-x)=1, monotone, within [0, 1]."""
    x = np.array(xs)
    assert r(np.array([0.0]))[0] == 0.0
    assert r(np.array([1.0]))[0] == 1.0
    np.testing.assert_allclose(r(x) + r(1.0 - x), 1.0, atol=1e-12)
    grid = np.linspace(0.0, 1.0, 20001)
    values = r(grid)
    assert np.all(np.diff(values) >= -1e-15)
    assert values.min() >= 0.0 and values.max() <= 1.0


def test_tabulated_r_stays_in_the_unit_interval_when_betainc_rounds_above_one():
    """A mixture whose weighted betainc sum reaches 1 + 1 ulp near x = 1: the symmetrised table went to
    -1.1e-16 near x = 0 (found by hypothesis) before the clip."""
    r = BetaMixture((0.4024455308455524, 0.5975544691544478), (7.390342573293977, 9.695623765560445),
                    (9.52828559384421, 9.735284847798097))
    values = r(np.linspace(0.0, 1.0, 20001))
    assert values.min() >= 0.0 and values.max() <= 1.0


@settings(max_examples=30, deadline=None)
@given(beta_mixtures())
def test_tabulated_r_follows_exact_mixture_and_lipschitz(r):
    """Check 7: the table interpolates the exact Beta mixture; L_R bounds every secant and sup r."""
    grid = np.linspace(0.0, 1.0, 4097)
    exact = r.exact(grid)
    # betainc-based exact R is itself in the family
    np.testing.assert_allclose(exact + exact[::-1], 1.0, atol=1e-12)
    # linear interpolation of a C^1 function with bounded second derivative on 1024 cells
    assert np.max(np.abs(r(grid) - exact)) < 1e-3
    x, y = np.random.default_rng(0).uniform(0, 1, (2, 2000))
    assert np.all(np.abs(r(x) - r(y)) <= r.lipschitz * np.abs(x - y) + 1e-12)
    dense = np.linspace(0.0, 1.0, 50001)
    assert r.lipschitz <= np.max(r.exact_density(dense)) * (1 + 1e-3)
    assert r.lipschitz >= 1.0 - 1e-12  # R goes from 0 to 1 over [0, 1]


@settings(max_examples=30, deadline=None)
@given(beta_mixtures(low=0.3, high=10.0))
def test_integral_of_cos_pi_r_vanishes(r):
    """Check 7: int_0^1 cos(pi R(x)) dx = 0 for the exact and the tabulated R."""
    exact, _ = quad(lambda x: math.cos(math.pi * float(r.exact(np.array([x]))[0])), 0.0, 1.0, limit=200)
    assert abs(exact) < 1e-7
    x = np.linspace(0.0, 1.0, 100001)
    tab = np.cos(math.pi * r(x))
    assert abs((tab.sum() - 0.5 * (tab[0] + tab[-1])) / (x.size - 1)) < 1e-12


def test_identity_r_and_symmetric_beta_closed_form():
    """R(x)=x for Beta(1,1); Beta(2,2) gives 3x^2 - 2x^3 (spec 2.4)."""
    x = np.linspace(0, 1, 1001)
    np.testing.assert_allclose(BetaMixture.identity()(x), x, atol=1e-15)
    assert BetaMixture.identity().lipschitz == pytest.approx(1.0, abs=1e-12)
    r22 = BetaMixture((1.0,), (2.0,), (2.0,))
    np.testing.assert_allclose(r22.exact(x), 3 * x ** 2 - 2 * x ** 3, atol=1e-13)
    np.testing.assert_allclose(r22(x), 3 * x ** 2 - 2 * x ** 3, atol=1e-6)
    assert r22.lipschitz == pytest.approx(1.5, abs=1e-5)


@pytest.mark.parametrize("kwargs", [
    dict(alpha=(0.5, 0.5), a=(1.0,), b=(1.0, 2.0)),          # lengths differ
    dict(alpha=(), a=(), b=()),                               # empty
    dict(alpha=(1.0,), a=(0.0,), b=(2.0,)),                   # a_j <= 0
    dict(alpha=(1.0,), a=(2.0,), b=(-1.0,)),                  # b_j <= 0
    dict(alpha=(1.0,), a=(math.inf,), b=(2.0,)),              # not finite
    dict(alpha=(0.6, 0.6), a=(1.0, 2.0), b=(1.0, 2.0)),       # sum != 1
    dict(alpha=(1.2, -0.2), a=(1.0, 2.0), b=(1.0, 2.0)),      # non-positive weight
])
def test_bad_r_params_rejected(kwargs):
    """Check 19 (core): bad R parameters are a usage error."""
    with pytest.raises(UsageError, match="r-params"):
        BetaMixture(**kwargs)


def test_draw_respects_range_and_weights():
    """Spec 4.2: a_j, b_j ~ U[lo, hi], alpha on the simplex."""
    rng = np.random.default_rng(7)
    draws = [BetaMixture.draw(rng, 3, 2.0, 5.0) for _ in range(200)]
    params = np.array([r.a + r.b for r in draws])
    assert params.min() >= 2.0 and params.max() <= 5.0
    assert params.min() < 2.2 and params.max() > 4.8  # spread over the range
    assert all(len(r.alpha) == 3 and abs(sum(r.alpha) - 1) < 1e-12 and min(r.alpha) > 0 for r in draws)
    assert BetaMixture.draw(rng, 1, 1.0, 4.0).alpha == (1.0,)


def test_check_r_refuses_non_lipschitz_and_warns_on_trend_order():
    """Spec 4.3: delta > 0 with a_j < 1 is an error; min(a, b) < d + 1 only warns."""
    u_shaped = BetaMixture((1.0,), (0.5,), (2.0,))
    with pytest.raises(UsageError, match="lip-delta"):
        phase.check_r(u_shaped, 0.1, 0)
    assert phase.check_r(u_shaped, 0.0, 0)  # warns: 0.5 < d + 1 = 1
    assert phase.check_r(FIXED_R, 0.1, 0) == []
    warn = phase.check_r(FIXED_R, 0.1, 1)  # min parameter 1.5 < 2
    assert len(warn) == 1 and "trend" in warn[0]
    assert phase.check_r(BetaMixture((1.0,), (4.0,), (4.0,)), 0.3, 3) == []


# ---------------------------------------------------------------------------------------------
# S, D_KS and the shift bound (Thm 10, eq. (12); ks bound)
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("phi", [0.6, -0.5])
def test_sup_deviation_ar1(phi):
    """Check 5: S = 2|phi| / (1 - |phi|) (3.0 and 2.0), invariant to rescaling f."""
    f = ar1_spectrum(phi)
    expected = 2 * abs(phi) / (1 - abs(phi))
    assert phase.sup_deviation(f) == pytest.approx(expected, abs=1e-9)
    assert phase.sup_deviation(17.5 * f) == pytest.approx(expected, abs=1e-9)
    assert phase.trapezoid_mean(f) == pytest.approx(1 / (1 - phi ** 2), rel=1e-12)


@pytest.mark.parametrize("delta,B,alpha", [(0.05, 0.00774, 0.0237), (0.1, 0.01105, 0.0336), (0.3, 0.01964, 0.0581)])
def test_paper_bound_regression_values(delta, B, alpha):
    """Check 8: AR(1) phi=0.6 (S=3), R(x)=x (L_R=1): B = 0.00774, 0.01105, 0.01964."""
    got = phase.shift_bound(delta, 1.0, 3.0, 0.5, "paper")
    assert abs(got - B) < 5e-6
    expected = math.sqrt(delta) / (math.pi ** 2 * 3.0 - math.pi * math.sqrt(delta))
    assert got == pytest.approx(expected, rel=1e-12)
    assert abs(phase.mixing_weight(got) - alpha) < 5e-5


def test_ks_bound_regression_value():
    """Spec 2.3: AR(1) phi=0.6, delta=0.1: alpha_max = 0.246, B_ks = 0.104."""
    f = ar1_spectrum(0.6)
    d_ks = phase.ks_distance(spectral.spectral_cdf(f))
    B = phase.shift_bound(0.1, 1.0, 3.0, d_ks, "ks")
    assert abs(phase.mixing_weight(B) - 0.246) < 5e-4
    assert abs(B - 0.104) < 5e-4
    assert phase.mixing_weight(B) == pytest.approx(math.sqrt(0.1) / (math.pi * d_ks), rel=1e-12)


def test_shift_bound_edge_cases():
    """Spec 2.3: delta=0 gives B=0; B is infinite when S <= sqrt(delta)/(pi L_R); bad names refused."""
    assert phase.shift_bound(0.0, 1.0, 3.0, 0.5, "paper") == 0.0
    assert phase.shift_bound(0.0, 1.0, 3.0, 0.5, "ks") == 0.0
    threshold = math.sqrt(0.1) / math.pi
    assert phase.shift_bound(0.1, 1.0, threshold * 0.99, 0.5, "paper") == math.inf
    assert math.isfinite(phase.shift_bound(0.1, 1.0, threshold * 1.01, 0.5, "paper"))
    assert phase.shift_bound(0.1, 2.0, threshold * 0.6, 0.5, "paper") > 0  # L_R enters the threshold
    assert phase.shift_bound(0.1, 1.0, 3.0, 0.0, "ks") == math.inf
    assert phase.shift_bound(0.3, 1.0, 3.0, 0.05, "ks") == math.inf  # alpha_max >= 1
    with pytest.raises(UsageError, match="bound"):
        phase.shift_bound(0.1, 1.0, 3.0, 0.5, "sharp")


def test_draw_shift_uniform_and_capped():
    """Spec 3.3 step 3: Delta ~ U[0, B]; infinite B capped at 1/pi (alpha <= 1/2)."""
    rng = np.random.default_rng(11)
    assert phase.draw_shift(rng, 0.0) == (0.0, False)
    draws = np.array([phase.draw_shift(rng, 0.02)[0] for _ in range(4000)])
    assert draws.min() >= 0 and draws.max() <= 0.02
    # mean of U[0, B]: B/2 with SE B / sqrt(12 n)
    assert abs(draws.mean() - 0.01) < 4 * 0.02 / math.sqrt(12 * draws.size)
    capped = [phase.draw_shift(rng, math.inf) for _ in range(500)]
    assert all(c for _, c in capped)
    values = np.array([d for d, _ in capped])
    assert values.max() <= 1 / math.pi and values.max() > 0.9 / math.pi
    assert phase.mixing_weight(1 / math.pi) == pytest.approx(0.5)


@pytest.mark.parametrize("shift", [0.0, 0.004, 0.05, 1.0 / math.pi, 3.0])
@pytest.mark.parametrize("spectrum", ["ar1", "arma"])
def test_shifted_cdf_is_cdf_of_shifted_density(shift, spectrum):
    """Check 9: H from h = A(f~ + Delta) equals (1 - alpha) F + alpha lambda/pi (err < 1e-9); A is irrelevant."""
    z = np.exp(-1j * LAM)
    f = ar1_spectrum(0.8) if spectrum == "ar1" else np.abs(1 + 0.7 * z) ** 2 / np.abs(1 + 0.5 * z) ** 2
    F = spectral.spectral_cdf(f)
    p = f / (math.pi * phase.trapezoid_mean(f))  # density on [0, pi] (A1)
    alpha = phase.mixing_weight(shift)
    H = phase.shifted_cdf(F, alpha)
    for A in (1.0, 0.37, 250.0):
        h = A * (p + shift)
        np.testing.assert_allclose(spectral.spectral_cdf(h), H, atol=1e-9, rtol=0)
    # independent closed form H = (F + Delta lambda) / (1 + pi Delta)
    np.testing.assert_allclose(H, (F + shift * LAM) / (1 + math.pi * shift), atol=1e-12, rtol=0)
    assert H[0] == 0.0 and H[-1] == pytest.approx(1.0, abs=1e-15)


@settings(max_examples=30, deadline=None)
@given(beta_mixtures(), st.floats(-0.9, 0.9), st.floats(0.0, 0.5))
def test_phase_winds_once(r, phi, alpha):
    """Spec 2.2: theta = pi R(H) rises from 0 at lambda=0 to pi at lambda=pi, monotonically."""
    F = spectral.spectral_cdf(ar1_spectrum(phi))
    theta = math.pi * r(phase.shifted_cdf(F, alpha))
    assert theta[0] == 0.0
    assert theta[-1] == pytest.approx(math.pi, abs=1e-14)
    assert np.all(np.diff(theta) >= -1e-14)
    # the ideal response is unimodular: exp(i theta) with real theta (check 1)
    assert np.isrealobj(theta) and np.all(np.isfinite(theta))
    np.testing.assert_allclose(np.abs(np.exp(1j * theta)), 1.0, atol=1e-15)


def test_ks_distance_of_uniform_and_ar1():
    """D_KS = sup |F - lambda/pi|: 0 for white noise, positive otherwise."""
    assert phase.ks_distance(LAM / math.pi) < 1e-15
    F = spectral.spectral_cdf(ar1_spectrum(0.6))
    assert phase.ks_distance(F) == pytest.approx(np.max(np.abs(F - LAM / math.pi)), abs=1e-15)
    assert phase.ks_distance(F) > 0.2

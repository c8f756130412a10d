"""Linear Incremental Privacy and the section-7 attack diagnostics (spec flip.md 1.3, 2.2-2.3, 2.9, 7;
checks 4, 6-8, 10)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

import example1 as ex
from tsdp.flip import coefficients, lip, phase, spectral
from tsdp.flip.phase import BetaMixture
from test_phase import beta_mixtures

N = 8192
LAM = spectral.frequency_grid(N)
Z = np.exp(-1j * LAM)
FIXED_R = BetaMixture((0.5, 0.5), (2.0, 3.0), (1.5, 3.5))


def ar1_spectrum(phi: float) -> np.ndarray:
    return 1.0 / np.abs(1 - phi * Z) ** 2


def shift_taps(s: int, M: int) -> np.ndarray:
    """Psi = z^{-s}: psi_{-s} = 1 (Xhat_t = X_{t+s})."""
    taps = np.zeros(2 * M + 1)
    taps[M - s] = 1.0
    return taps


# ---------------------------------------------------------------------------------------------
# Spectra for the property tests: AR(1), ARMA(1,1), VAR (conditional), flat-top estimate
# ---------------------------------------------------------------------------------------------


@st.composite
def spectra(draw) -> np.ndarray:
    kind = draw(st.sampled_from(["ar1", "arma", "example1", "var", "flattop"]))
    if kind == "ar1":
        return ar1_spectrum(draw(st.floats(-0.95, 0.95)))
    if kind == "arma":
        phi, th = draw(st.floats(-0.9, 0.9)), draw(st.floats(-0.95, 0.95))
        return np.abs(1 + th * Z) ** 2 / np.abs(1 - phi * Z) ** 2
    if kind == "example1":
        rho = draw(st.floats(0.0, 0.9))
        return spectral.conditional_spectrum(
            spectral.VarFit(ex.phi(rho)[None], ex.sigma(), "t", True).spectrum(LAM))[0]
    seed = draw(st.integers(0, 2 ** 32 - 1))
    rng = np.random.default_rng(seed)
    if kind == "var":
        a = rng.normal(size=(2, 2))
        coefs = a / (max(abs(np.linalg.eigvals(a))) / draw(st.floats(0.1, 0.9)))
        l = rng.normal(size=(2, 2))
        fit = spectral.VarFit(coefs[None], l @ l.T + 0.1 * np.eye(2), "t", True)
        return spectral.conditional_spectrum(fit.spectrum(LAM))[0]
    w = ex.simulate(draw(st.sampled_from(ex.RHOS)), 300, rng)
    f, _, _ = spectral.flattop_spectrum(w - w.mean(axis=0), LAM)
    return spectral.conditional_spectrum(f)[0]


# ---------------------------------------------------------------------------------------------
# Check 6: LIP of simple filters
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("s,expected", [(1, 0.64), (2, 0.8704), (3, 1 - 0.6 ** 6)])
def test_shift_filter_lip(s, expected):
    """Check 6: Psi = z^{-s} on AR(1) phi=0.6 has LIP = 1 - phi^{2s}."""
    gamma = spectral.acvf(ar1_spectrum(0.6))
    assert lip.taps_lip(shift_taps(s, 5), gamma) == pytest.approx(expected, abs=1e-10)
    assert lip.ideal_lip(s * LAM, ar1_spectrum(0.6)) == pytest.approx(expected, abs=1e-10)


def test_identity_filter_lip_is_zero():
    """Check 6: the identity filter has LIP = 0."""
    gamma = spectral.acvf(ar1_spectrum(0.6))
    assert lip.taps_lip(shift_taps(0, 5), gamma) == pytest.approx(0.0, abs=1e-12)
    assert lip.ideal_lip(np.zeros_like(LAM), ar1_spectrum(0.6)) == pytest.approx(0.0, abs=1e-12)


@pytest.mark.parametrize("noise_var", [0.3, "equal", 4.0])
def test_noise_addition_lip_via_covariance_form(noise_var):
    """Check 6 / A11: X + N has LIP = sigma_N^2 / (sigma_X|Z^2 + sigma_N^2) (0.5 at equality), not 1.

    The conditional moments come from a joint Gaussian (X, Xhat = X + N, Z) by the Schur complement."""
    cov_xz = np.array([[2.0, 0.9], [0.9, 1.2]])  # (X, Z)
    cond_var = cov_xz[0, 0] - cov_xz[0, 1] ** 2 / cov_xz[1, 1]
    if noise_var == "equal":
        noise_var = cond_var
    # joint covariance of (X, Xhat, Z)
    joint = np.array([
        [cov_xz[0, 0], cov_xz[0, 0], cov_xz[0, 1]],
        [cov_xz[0, 0], cov_xz[0, 0] + noise_var, cov_xz[0, 1]],
        [cov_xz[0, 1], cov_xz[0, 1], cov_xz[1, 1]],
    ])
    cond = joint[:2, :2] - np.outer(joint[:2, 2], joint[:2, 2]) / joint[2, 2]
    got = lip.covariance_lip(cond[0, 1], cond[1, 1], cond[0, 0])
    assert got == pytest.approx(lip.noise_lip(cond_var, noise_var), rel=1e-12)
    assert got == pytest.approx(noise_var / (cond_var + noise_var), rel=1e-12)
    assert got < 1
    assert lip.noise_lip(cond_var, cond_var) == pytest.approx(0.5)


def test_taps_lip_matches_double_sum():
    """Spec 1.3: LIP = 1 - (sum psi_j gamma(j))^2 / ((sum_jk psi_j psi_k gamma(j-k)) gamma(0)), by explicit loops."""
    rng = np.random.default_rng(3)
    M = 6
    taps = rng.normal(size=2 * M + 1)
    gamma = spectral.acvf(ar1_spectrum(-0.7))
    j = np.arange(-M, M + 1)
    cov = sum(taps[a] * gamma[abs(j[a])] for a in range(2 * M + 1))
    var = sum(taps[a] * taps[b] * gamma[abs(j[a] - j[b])] for a in range(2 * M + 1) for b in range(2 * M + 1))
    assert lip.taps_lip(taps, gamma) == pytest.approx(1 - cov ** 2 / (var * gamma[0]), rel=1e-12)


def test_white_noise_identity_r_lip_is_one():
    """Check 4: white noise with R(x) = x has LIP = 1 (ideal and applied)."""
    f = np.ones(N + 1)
    theta = math.pi * BetaMixture.identity()(spectral.spectral_cdf(f))
    assert lip.ideal_lip(theta, f) == pytest.approx(1.0, abs=1e-12)
    taps = coefficients.filter_taps(theta, 45)
    assert lip.taps_lip(taps, spectral.acvf(f)) == pytest.approx(1.0, abs=1e-10)


@pytest.mark.parametrize("rname", ["identity", "mixture"])
def test_applied_lip_converges_to_ideal(rname):
    """Spec P15: the applied LIP of the direct taps approaches the ideal LIP as M grows (Ex.-1, rho = 0.7)."""
    r = {"identity": BetaMixture.identity(), "mixture": FIXED_R}[rname]
    _, _, f = ex.true_spectra(0.7, N)
    theta = math.pi * r(spectral.spectral_cdf(f))
    ideal = lip.ideal_lip(theta, f)
    gamma = spectral.acvf(f)
    gaps = [abs(lip.taps_lip(coefficients.filter_taps(theta, M), gamma) - ideal) for M in (10, 45, 200)]
    assert gaps[2] < 1e-8 and gaps[1] < 1e-3
    assert gaps[2] <= gaps[0]


# ---------------------------------------------------------------------------------------------
# Checks 7 and 8: perfect privacy and delta-LIP
# ---------------------------------------------------------------------------------------------


@settings(max_examples=60, deadline=None)
@given(beta_mixtures(), spectra())
def test_perfect_lip_theorem6(r, f):
    """Check 7: for any Beta-mixture R and valid f, lip_ideal >= 1 - 1e-9 at delta = 0."""
    theta = math.pi * r(spectral.spectral_cdf(f))
    assert lip.ideal_lip(theta, f) >= 1 - 1e-9


@settings(max_examples=60, deadline=None)
@given(beta_mixtures(), spectra(), st.sampled_from([0.05, 0.1, 0.3]), st.sampled_from(list(phase.BOUNDS)))
def test_delta_lip_theorems_8_10(r, f, delta, bound):
    """Check 8: for delta in {0.05, 0.1, 0.3} and Delta in {0, B/2, B} (paper and ks bounds): lip_ideal >= 1 - delta.

    An infinite B means every shift qualifies; then the mechanism's cap 1/pi and a larger shift are tested."""
    F = spectral.spectral_cdf(f)
    B = phase.shift_bound(delta, r.lipschitz, phase.sup_deviation(f), phase.ks_distance(F), bound)
    assert B > 0
    shifts = [0.0, B / 2, B] if math.isfinite(B) else [0.0, phase.SHIFT_CAP / 2, phase.SHIFT_CAP, 10.0]
    for shift in shifts:
        theta = math.pi * r(phase.shifted_cdf(F, phase.mixing_weight(shift)))
        assert lip.ideal_lip(theta, f) >= 1 - delta


@pytest.mark.parametrize("delta,B,expected", [(0.05, 0.00774, 0.99980), (0.1, 0.01105, 0.99959),
                                              (0.3, 0.01964, 0.99876)])
def test_delta_lip_regression_values(delta, B, expected):
    """Check 8: AR(1) phi=0.6, R(x)=x: B = 0.00774 / 0.01105 / 0.01964; LIP(Delta=B) = 0.99980 / 0.99959 / 0.99876."""
    f = ar1_spectrum(0.6)
    F = spectral.spectral_cdf(f)
    r = BetaMixture.identity()
    got_B = phase.shift_bound(delta, r.lipschitz, phase.sup_deviation(f), phase.ks_distance(F), "paper")
    assert abs(got_B - B) < 5e-6
    theta = math.pi * r(phase.shifted_cdf(F, phase.mixing_weight(got_B)))
    assert abs(lip.ideal_lip(theta, f) - expected) < 5e-6


def test_ks_bound_regression_value():
    """Spec 2.3: AR(1) phi=0.6, delta=0.1: LIP(Delta=B_ks) = 0.9765 >= 0.9."""
    f = ar1_spectrum(0.6)
    F = spectral.spectral_cdf(f)
    B = phase.shift_bound(0.1, 1.0, phase.sup_deviation(f), phase.ks_distance(F), "ks")
    value = lip.ideal_lip(math.pi * phase.shifted_cdf(F, phase.mixing_weight(B)), f)
    assert abs(value - 0.9765) < 5e-5


def test_example1_shift_bound():
    """Spec 2.3: Example-1 rho = 0.1, L_R = 1, delta = 0.1: B ~ 0.0035 and alpha ~ 0.011."""
    _, _, f = ex.true_spectra(0.1, N)
    B = phase.shift_bound(0.1, 1.0, phase.sup_deviation(f), 0.5, "paper")
    assert abs(B - 0.0035) < 5e-5
    assert abs(phase.mixing_weight(B) - 0.011) < 5e-4


# ---------------------------------------------------------------------------------------------
# Check 10: population spectral preservation
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("rho", ex.RHOS)
def test_population_acvf_preserved(rho):
    """Check 10: |Psi|^2 f_X = f_X for the ideal filter (ACVF rel err < 1e-10); for the FIR taps the ACVF error is
    bounded by sup ||Psi_M|^2 - 1| gamma(0)."""
    _, f_x, f_cond = ex.true_spectra(rho, N)
    theta = math.pi * FIXED_R(spectral.spectral_cdf(f_cond))
    gain2 = np.abs(np.exp(1j * theta)) ** 2
    gam = spectral.acvf(f_x, 50)
    np.testing.assert_allclose(spectral.acvf(gain2 * f_x, 50), gam, rtol=1e-10, atol=1e-10 * gam[0])
    p, g0 = ex.phi(rho), ex.gamma0(rho)
    np.testing.assert_allclose(gam[:10], [(np.linalg.matrix_power(p, h) @ g0)[0, 0] for h in range(10)], rtol=1e-10)
    full = spectral.acvf(f_x)
    for M in (25, 45):
        taps = coefficients.filter_taps(theta, M)
        j = np.arange(-M, M + 1)
        # gamma_Xhat(h) = sum_{j,k} psi_j psi_k gamma(h + j - k)
        out = np.array([taps @ full[np.abs(h + j[:, None] - j[None, :])] @ taps for h in range(20)])
        bound = np.max(np.abs(np.abs(coefficients.frequency_response(taps, N)) ** 2 - 1)) * gam[0]
        assert np.all(np.abs(out - gam[:20]) <= bound + 1e-12)
        assert np.max(np.abs(out - gam[:20])) > 0  # a truncated filter is not exact


# ---------------------------------------------------------------------------------------------
# Section 7: what LIP does not cover
# ---------------------------------------------------------------------------------------------


def test_lagged_attack_on_white_noise():
    """Spec 7: white noise with R(x)=x has LIP = 1, yet Xhat_{t-1} = X_t: min lagged LIP = 0 at lag -1."""
    f = np.ones(N + 1)
    taps = coefficients.filter_taps(LAM.copy(), 45)
    gamma = spectral.acvf(f)
    corr = lip.lagged_correlations(taps, gamma, 10)
    assert corr[10] == pytest.approx(0.0, abs=1e-10)
    assert corr[10 - 1] == pytest.approx(1.0, abs=1e-10)
    value, lag = lip.lagged_lip(taps, gamma, 10)
    assert value == pytest.approx(0.0, abs=1e-10) and lag == -1


def test_lagged_correlations_ar1_shift():
    """corr^2(X_t, Xhat_{t+l}) for Xhat_t = X_{t+2} on AR(1): phi^{2|l+2|}."""
    gamma = spectral.acvf(ar1_spectrum(0.6))
    corr = lip.lagged_correlations(shift_taps(2, 5), gamma, 6)
    ell = np.arange(-6, 7)
    np.testing.assert_allclose(corr, 0.6 ** (2 * np.abs(ell + 2)), atol=1e-10)


@pytest.mark.parametrize("rho", ex.RHOS)
def test_inversion_attacks(rho):
    """Spec 7: with the true taps the release is invertible (LIP after inversion ~ 0); a guess with the wrong R
    recovers less."""
    _, _, f = ex.true_spectra(rho, N)
    F = spectral.spectral_cdf(f)
    gamma = spectral.acvf(f)
    taps = coefficients.filter_taps(math.pi * FIXED_R(F), 45)
    assert lip.taps_lip(taps, gamma) > 0.99
    known = lip.inversion_lip(taps, taps, gamma)
    assert 0 <= known < 1e-3
    guess = lip.inversion_lip(taps, coefficients.filter_taps(math.pi * F, 45), gamma)
    assert known < guess < 1
    identity_taps = coefficients.filter_taps(math.pi * F, 45)
    assert lip.inversion_lip(identity_taps, identity_taps, gamma) < 1e-3


def test_acvf_for_lags_guard():
    f = np.ones(65)
    assert lip.acvf_for_lags(f, 64).shape == (65,)
    with pytest.raises(ValueError):
        lip.acvf_for_lags(f, 65)


@pytest.mark.parametrize("phi", [0.6, -0.5, 0.95])
@pytest.mark.parametrize("alpha", [0.0, 0.0336, 0.3])
def test_ideal_lip_on_cdf_matches_frequency_form(phi, alpha):
    """Eq. (7) in the coordinate x = F(lambda) (the mechanism's report value) equals the frequency-domain form,
    the latter on a fine grid (2^18) so that its own discretisation error is negligible."""
    F = spectral.spectral_cdf(ar1_spectrum(phi))
    fine = spectral.frequency_grid(1 << 18)
    f_fine = 1.0 / np.abs(1 - phi * np.exp(-1j * fine)) ** 2
    F_fine = spectral.spectral_cdf(f_fine)
    for r in (BetaMixture.identity(), FIXED_R):
        reference = lip.ideal_lip(math.pi * r(phase.shifted_cdf(F_fine, alpha)), f_fine)
        assert lip.ideal_lip_on_cdf(F, alpha, r) == pytest.approx(reference, abs=1e-6)
        if alpha == 0:
            assert lip.ideal_lip_on_cdf(F, alpha, r) >= 1 - 1e-12

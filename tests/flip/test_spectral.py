"""Spectral estimation, the conditional spectrum and the ACVF (spec flip.md 0, 1.3, 2.5; checks 5, 10, 14)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.linalg import toeplitz

import example1 as ex
from tsdp.errors import DataError
from tsdp.flip import phase, spectral

N = 8192
LAM = spectral.frequency_grid(N)


def ar1_fit(phi: float, sigma2: float = 1.0) -> spectral.VarFit:
    return spectral.VarFit(np.array([[[phi]]]), np.array([[sigma2]]), "true", True)


def var_acvf(phi_mat: np.ndarray, g0: np.ndarray, h: int) -> np.ndarray:
    """Gamma(h) = E[W_{t+h} W_t'] = Phi^h Gamma0 for a VAR(1)."""
    return np.linalg.matrix_power(phi_mat, h) @ g0


def test_frequency_grid():
    lam = spectral.frequency_grid(8)
    assert lam.size == 9 and lam[0] == 0.0 and lam[-1] == math.pi
    np.testing.assert_allclose(np.diff(lam), math.pi / 8)


# ---------------------------------------------------------------------------------------------
# Conventions: f(lambda) = sum_h gamma(h) e^{-i lambda h} (no 1/(2 pi)); acvf inverts it
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("phi", [0.6, -0.5, 0.95])
def test_ar1_spectrum_and_acvf(phi):
    """Spec 0 / check 10: VAR spectrum convention and gamma(h) = sigma^2 phi^h / (1 - phi^2) (rel < 1e-10)."""
    f = ar1_fit(phi, 2.0).spectrum(LAM)
    assert f.shape == (N + 1, 1, 1)
    np.testing.assert_allclose(f[:, 0, 0].real, 2.0 / np.abs(1 - phi * np.exp(-1j * LAM)) ** 2, rtol=1e-12)
    gam = spectral.acvf(f[:, 0, 0].real, 40)
    h = np.arange(41)
    expected = 2.0 * phi ** h / (1 - phi ** 2)
    np.testing.assert_allclose(gam, expected, rtol=1e-10, atol=1e-10 * expected[0])


@pytest.mark.parametrize("rho", ex.RHOS)
def test_example1_model_and_acvf(rho):
    """Spec 3.1 / A8: Phi reproduces Gamma0 = Phi Gamma0 Phi' + Sigma; f_X's ACVF equals (Phi^h Gamma0)_00."""
    p, g0 = ex.phi(rho), ex.gamma0(rho)
    np.testing.assert_allclose(p @ g0 @ p.T + ex.sigma(), g0, atol=1e-12)
    assert max(abs(np.linalg.eigvals(p))) < 1
    expected_phi = {0.1: [[0.8215, 0.0198], [0.0198, 0.8215]], 0.7: [[0.7778, 0.1654], [0.1654, 0.7778]]}[rho]
    np.testing.assert_allclose(p, expected_phi, atol=5e-5)
    fmat = ex.true_fit(rho).spectrum(LAM)
    gam_x = spectral.acvf(fmat[:, 0, 0].real, 30)
    expected = np.array([var_acvf(p, g0, h)[0, 0] for h in range(31)])
    np.testing.assert_allclose(gam_x, expected, rtol=1e-10)
    # cross-spectrum: gamma_XZ(h) = <z^h, f_XZ>; its real part carries (Gamma(h) + Gamma(-h))_01 / 2
    cross = spectral.acvf(fmat[:, 0, 1].real, 10)
    sym = np.array([(var_acvf(p, g0, h)[0, 1] + var_acvf(p, g0, h)[1, 0]) / 2 for h in range(11)])
    np.testing.assert_allclose(cross, sym, rtol=1e-10)


def test_spectral_matrix_is_hermitian_psd():
    """The VAR spectral matrix is Hermitian and positive definite on the grid."""
    fmat = ex.true_fit(0.7).spectrum(LAM)
    np.testing.assert_allclose(fmat, np.conj(np.swapaxes(fmat, 1, 2)), atol=1e-12)
    assert np.linalg.eigvalsh(fmat).min() > 0


# ---------------------------------------------------------------------------------------------
# Check 14: conditional spectrum of the Example-1 model
# ---------------------------------------------------------------------------------------------

EX1_REFERENCE = {  # rho: (<f_X|Z>, S, D_KS) [spec 5, check 14]
    0.1: (1.5287, 9.146, 0.613),
    0.7: (1.0109, 5.445, 0.522),
}


@pytest.mark.parametrize("rho", ex.RHOS)
def test_example1_conditional_spectrum_reference(rho):
    """Check 14: f_X|Z >= 0; <f_X|Z> = 1.5287 / 1.0109; <f_X> = v; S = 9.146 / 5.445; D_KS = 0.613 / 0.522."""
    mean_cond, S, d_ks = EX1_REFERENCE[rho]
    lam, f_x, f_cond = ex.true_spectra(rho, N)
    fmat = ex.true_fit(rho).spectrum(lam)
    raw = fmat[:, 0, 0].real - np.abs(fmat[:, 0, 1]) ** 2 / fmat[:, 1, 1].real
    assert raw.min() > 0
    np.testing.assert_allclose(f_cond, raw, rtol=1e-10)
    assert phase.trapezoid_mean(f_x) == pytest.approx(ex.variance(rho), rel=1e-10)
    assert abs(phase.trapezoid_mean(f_cond) - mean_cond) < 5e-5
    assert abs(phase.sup_deviation(f_cond) - S) < 5e-4
    assert abs(phase.ks_distance(spectral.spectral_cdf(f_cond)) - d_ks) < 5e-4
    _, share = spectral.conditional_spectrum(fmat)
    assert share == pytest.approx(mean_cond / ex.variance(rho), abs=5e-5)


@pytest.mark.parametrize("rho", ex.RHOS)
def test_conditional_variance_equals_finite_projection_limit(rho):
    """Check 14 (exact): Var(X_t | Z_{t-L..t+L}) from the VAR covariances converges to <f_X|Z>."""
    p, g0 = ex.phi(rho), ex.gamma0(rho)
    L = 60
    lags = np.arange(-L, L + 1)

    def cov(h: int) -> np.ndarray:  # E[W_{t+h} W_t']
        return var_acvf(p, g0, h) if h >= 0 else var_acvf(p, g0, -h).T

    zz = np.array([[cov(i - j)[1, 1] for j in lags] for i in lags])
    xz = np.array([cov(-k)[0, 1] for k in lags])  # Cov(X_t, Z_{t+k}) = E[W_t W_{t+k}']_01
    resid = g0[0, 0] - xz @ np.linalg.solve(zz, xz)
    _, _, f_cond = ex.true_spectra(rho, N)
    assert resid == pytest.approx(phase.trapezoid_mean(f_cond), rel=1e-8)


@pytest.mark.parametrize("rho", ex.RHOS)
def test_conditional_variance_matches_two_sided_regression(rho):
    """Check 14 (simulation): residual variance of X on Z_{t-30..t+30}, n = 200000, within 4 SE of <f_X|Z>."""
    rng = np.random.default_rng(1400 + int(rho * 10))
    w = ex.simulate(rho, 200_000, rng)
    L, T = 30, w.shape[0]
    x = w[L:T - L, 0]
    design = np.column_stack([w[L + k:T - L + k, 1] for k in range(-L, L + 1)])
    beta, *_ = np.linalg.lstsq(design, x, rcond=None)
    estimate = np.mean((x - design @ beta) ** 2)
    _, _, f_cond = ex.true_spectra(rho, N)
    target = phase.trapezoid_mean(f_cond)
    # the residual series has spectrum f_X|Z; Var(mean of e_t^2) ~ 2 sum_h gamma(h)^2 / n = 2 <f^2> / n
    se = math.sqrt(2 * phase.trapezoid_mean(f_cond ** 2) / x.size)
    assert abs(estimate - target) < 4 * se


def test_marginal_and_conditional_agree_with_spectral_matrix():
    """The VarFit shortcut (f_X, f_X|Z) equals spectrum() + conditional_spectrum() (eq. (6))."""
    rng = np.random.default_rng(3)
    for q in (1, 2, 3):
        coefs = rng.normal(0, 0.25, (2, q, q))
        a = rng.normal(size=(q, q))
        fit = spectral.VarFit(coefs, a @ a.T + np.eye(q), "test", True)
        f_x, f_cond = fit.marginal_and_conditional(LAM)
        fmat = fit.spectrum(LAM)
        np.testing.assert_allclose(f_x, fmat[:, 0, 0].real, rtol=1e-10)
        cond, _ = spectral.conditional_spectrum(fmat)
        np.testing.assert_allclose(f_cond, cond, rtol=1e-9)


def test_conditional_spectrum_without_aux_is_marginal():
    """Spec 2.5: no auxiliary series means f_X|Z := f_X."""
    fmat = ar1_fit(0.6).spectrum(LAM)
    cond, share = spectral.conditional_spectrum(fmat)
    np.testing.assert_allclose(cond, fmat[:, 0, 0].real, rtol=1e-15)
    assert share == pytest.approx(1.0)


def test_conditional_spectrum_refuses_perfect_prediction():
    """Spec 1.3 / Prop. 3: Z = X makes <f_X|Z> = 0 and LIP undefined."""
    f = 1.0 / np.abs(1 - 0.6 * np.exp(-1j * LAM)) ** 2
    fmat = np.broadcast_to(f[:, None, None], (f.size, 2, 2)).astype(complex)
    with pytest.raises(DataError, match="LIP is undefined"):
        spectral.conditional_spectrum(fmat)


def test_conditional_spectrum_floor():
    """Spec P11: f_X|Z is floored at 1e-10 <f_X> so that F is a proper CDF."""
    f = 1.0 / np.abs(1 - 0.6 * np.exp(-1j * LAM)) ** 2
    fmat = np.zeros((f.size, 2, 2), dtype=complex)
    fmat[:, 0, 0] = f
    fmat[:, 1, 1] = 1.0
    fmat[: N // 2, 0, 1] = fmat[: N // 2, 1, 0] = np.sqrt(f[: N // 2])  # Z explains X below pi/2
    cond, share = spectral.conditional_spectrum(fmat)
    floor = 1e-10 * phase.trapezoid_mean(f)
    assert np.all(cond >= floor) and cond[: N // 2].max() == pytest.approx(floor, rel=1e-6)
    np.testing.assert_allclose(cond[N // 2 + 1:], f[N // 2 + 1:])
    assert 0 < share < 1


# ---------------------------------------------------------------------------------------------
# CDF (A1) and AR(1) closed forms (check 5)
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("phi", [0.6, -0.5])
def test_ar1_cdf_closed_form(phi):
    """Check 5: F(lambda) = (2/pi) arctan(((1+phi)/(1-phi)) tan(lambda/2)), max error < 1e-7."""
    f = ar1_fit(phi).spectrum(LAM)[:, 0, 0].real
    F = spectral.spectral_cdf(f)
    closed = (2 / math.pi) * np.arctan((1 + phi) / (1 - phi) * np.tan(LAM[:-1] / 2))
    assert np.max(np.abs(F[:-1] - closed)) < 1e-7
    assert F[0] == 0.0 and F[-1] == 1.0
    assert np.all(np.diff(F) > 0)
    np.testing.assert_allclose(spectral.spectral_cdf(123.0 * f), F, atol=1e-15)


def test_white_noise_cdf_is_uniform():
    """Spec 2.2: white noise has F(lambda) = lambda / pi."""
    F = spectral.spectral_cdf(np.full(N + 1, 0.7))
    np.testing.assert_allclose(F, LAM / math.pi, atol=1e-14)


# ---------------------------------------------------------------------------------------------
# VAR fitting (AIC, Yule-Walker fallback) and the flat-top estimator
# ---------------------------------------------------------------------------------------------


def test_fit_var_recovers_example1():
    """Option 1: least squares on a long Example-1 path recovers Phi and Sigma within sampling error."""
    rng = np.random.default_rng(21)
    w = ex.simulate(0.7, 20_000, rng)
    fit = spectral.fit_var(w, 1)
    assert fit.method == "var-ols" and fit.stable and fit.order == 1
    # SE of a VAR(1) coefficient ~ sqrt(sigma^2 / (n var)) ~ 0.004 here
    np.testing.assert_allclose(fit.coefs[0], ex.phi(0.7), atol=0.02)
    np.testing.assert_allclose(fit.sigma, ex.sigma(), atol=0.03)
    aic = spectral.fit_var(w[:2000])
    assert 1 <= aic.order <= spectral.max_var_order(2000, 2, 0)
    assert any("AIC" in note for note in aic.notes)


def test_fit_var_order_zero_and_max_order():
    """AIC may choose order 0; the order cap is min(8, T//10) and keeps T >= q p + d + 10."""
    rng = np.random.default_rng(5)
    fit = spectral.fit_var(rng.standard_normal((400, 1)), 0)
    assert fit.order == 0 and fit.coefs.shape == (0, 1, 1)
    assert fit.sigma[0, 0] == pytest.approx(1.0, abs=0.2)
    assert spectral.max_var_order(200, 2, 0) == 8
    assert spectral.max_var_order(50, 2, 0) == 5
    assert spectral.max_var_order(30, 3, 2) == 3
    assert spectral.max_var_order(12, 3, 0) == 0


def test_fit_var_falls_back_to_yule_walker():
    """Spec 4.3 / P12: an unstable least-squares VAR is refitted by Yule-Walker (stable)."""
    t = np.arange(60)
    w = (1.05 ** t * (1 + 0.01 * np.random.default_rng(2).standard_normal(60)))[:, None]
    fit = spectral.fit_var(w, 1)
    assert fit.method == "var-yule-walker" and fit.stable
    assert any("Yule-Walker" in note for note in fit.notes)
    # Yule-Walker AR(1) with the biased, uncentred autocovariances: phi = Gamma_1 / Gamma_0
    x = w[:, 0]
    assert fit.coefs[0, 0, 0] == pytest.approx(np.sum(x[1:] * x[:-1]) / np.sum(x * x), rel=1e-10)
    assert spectral.companion_radius(fit.coefs) < 1


def test_companion_radius():
    coefs = np.array([[[0.5]], [[0.3]]])  # roots of 1 - .5 z - .3 z^2
    expected = max(abs(np.roots([1, -0.5, -0.3])))
    assert spectral.companion_radius(coefs) == pytest.approx(expected)
    assert spectral.companion_radius(np.zeros((0, 2, 2))) == 0.0


def test_flattop_matches_sample_autocovariances_in_flat_part():
    """Option 2 (A6 resolution): with Lambda = 1 on |k| <= b/2 the estimate reproduces Gamma_k there."""
    rng = np.random.default_rng(8)
    x = ex.simulate(0.1, 2000, rng)[:, 0]
    x = x - x.mean()
    f, b, notes = spectral.flattop_spectrum(x, LAM)
    assert b >= 2 and any("C = 1/T" in n for n in notes)
    assert not any("clipped" in n for n in notes)
    gam = spectral.sample_autocovariances(x[:, None], b)[:, 0, 0]
    est = spectral.acvf(f[:, 0, 0].real, b)
    half = b // 2
    np.testing.assert_allclose(est[: half + 1], gam[: half + 1], rtol=1e-9, atol=1e-12)
    # tapered part: Lambda(k/b) = 2 (1 - k/b); zero from b on
    k = np.arange(half + 1, b)
    np.testing.assert_allclose(est[half + 1:b], 2 * (1 - k / b) * gam[half + 1:b], rtol=1e-9, atol=1e-12)
    assert abs(est[b]) < 1e-12


def test_flattop_bivariate_is_psd_and_close_to_truth():
    """Option 2: PSD repair; a long sample's estimate is close to the true Example-1 conditional mean."""
    rng = np.random.default_rng(9)
    w = ex.simulate(0.7, 5000, rng)
    w = w - w.mean(axis=0)
    f, b, _ = spectral.flattop_spectrum(w, LAM)
    np.testing.assert_allclose(f, np.conj(np.swapaxes(f, 1, 2)), atol=1e-12)
    assert np.linalg.eigvalsh(f).min() >= -1e-10
    cond, _ = spectral.conditional_spectrum(f)
    _, _, truth = ex.true_spectra(0.7, N)
    assert phase.trapezoid_mean(cond) == pytest.approx(phase.trapezoid_mean(truth), rel=0.15)


def test_flattop_with_vanishing_aux_spectrum():
    """Spec 2.5 / P11: after eigenvalue clipping f_Z can vanish at some frequency; f_X|Z must still be defined
    (there |f_XZ|^2 <= f_X f_Z = 0, so f_X|Z = f_X), not a LinAlgError."""
    w = ex.simulate(0.1, 300, np.random.default_rng(4064854858))
    f, _, notes = spectral.flattop_spectrum(w - w.mean(axis=0), LAM)
    assert any("clipped" in n for n in notes)
    assert f[:, 1, 1].real.min() <= 1e-12  # the precondition: f_Z = 0 somewhere
    cond, share = spectral.conditional_spectrum(f)
    f_x = f[:, 0, 0].real
    assert np.all(cond > 0) and np.all(cond <= f_x * (1 + 1e-9) + 1e-10 * phase.trapezoid_mean(f_x))
    assert 0 < share <= 1


def test_flattop_white_noise_bandwidth_small():
    """Politis' rule picks a small bandwidth for white noise, so f is nearly flat."""
    rng = np.random.default_rng(10)
    x = rng.standard_normal(1000)
    f, b, _ = spectral.flattop_spectrum(x - x.mean(), LAM)
    assert b <= 4
    assert phase.sup_deviation(f[:, 0, 0].real) < 0.3


def test_acvf_max_lag_and_dct_trapezoid():
    """acvf(f)[h] = pi^{-1} int_0^pi cos(h lambda) f by the trapezoid rule."""
    rng = np.random.default_rng(12)
    f = rng.uniform(0.5, 2.0, 65)
    lam = spectral.frequency_grid(64)
    for h in (0, 1, 5, 64):
        g = np.cos(h * lam) * f
        expected = (g.sum() - 0.5 * (g[0] + g[-1])) / 64
        assert spectral.acvf(f)[h] == pytest.approx(expected, abs=1e-13)
    assert spectral.acvf(f, 3).shape == (4,)

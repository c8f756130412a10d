"""Finite-series filtering: forecast/backcast extension, FIR application, inversion, circular mode
(spec flip.md 2.7, 2.9; checks 4, 11, 15)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.linalg import toeplitz

import example1 as ex
from tsdp.flip import coefficients, filtering, spectral, utility
from tsdp.flip.phase import BetaMixture

N = 8192
LAM = spectral.frequency_grid(N)
FIXED_R = BetaMixture((0.5, 0.5), (2.0, 3.0), (1.5, 3.5))


def ar1_gamma(phi: float, lags: int) -> np.ndarray:
    h = np.arange(lags + 1)
    return phi ** h / (1 - phi ** 2)


def ar1_path(phi: float, T: int, rng: np.random.Generator) -> np.ndarray:
    from scipy.signal import lfilter

    e = rng.standard_normal(T + 300)
    return lfilter([1.0], [1.0, -phi], e)[300:]


def ar1_theta(phi: float, r: BetaMixture) -> np.ndarray:
    f = 1.0 / np.abs(1 - phi * np.exp(-1j * LAM)) ** 2
    return math.pi * r(spectral.spectral_cdf(f))


# ---------------------------------------------------------------------------------------------
# extend: best linear backcasts and forecasts (A7)
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("phi", [0.6, -0.5])
def test_extend_ar1_is_phi_power(phi):
    """Spec 2.7: for an AR(1) the best linear forecast of X_{T+i} is phi^i X_T, the backcast of X_{1-i} phi^i X_1."""
    rng = np.random.default_rng(1)
    x = ar1_path(phi, 150, rng)
    M = 45
    extended, windowed = filtering.extend(x, ar1_gamma(phi, 400), M)
    assert not windowed and extended.size == 150 + 2 * M
    np.testing.assert_array_equal(extended[M:M + 150], x)
    i = np.arange(1, M + 1)
    np.testing.assert_allclose(extended[M + 150:], phi ** i * x[-1], atol=1e-10)
    np.testing.assert_allclose(extended[:M][::-1], phi ** i * x[0], atol=1e-10)


def test_extend_windowed_long_series():
    """Beyond PROJECTION_WINDOW observations the projection is windowed (and still exact for an AR(1))."""
    rng = np.random.default_rng(2)
    T = filtering.PROJECTION_WINDOW + 300
    x = ar1_path(0.6, T, rng)
    extended, windowed = filtering.extend(x, ar1_gamma(0.6, T + 100), 10)
    assert windowed
    i = np.arange(1, 11)
    np.testing.assert_allclose(extended[10 + T:], 0.6 ** i * x[-1], atol=1e-10)
    np.testing.assert_allclose(extended[:10][::-1], 0.6 ** i * x[0], atol=1e-10)


def test_extend_matches_dense_projection():
    """Spec 2.7: X^E_t = c_t' Gamma_T^{-1} x, checked against a dense solve on the Example-1 f_X (ARMA-type)."""
    rng = np.random.default_rng(3)
    T, M = 120, 30
    x = ex.simulate(0.7, T, rng)[:, 0]
    _, f_x, _ = ex.true_spectra(0.7, N)
    gamma = spectral.acvf(f_x)
    extended, _ = filtering.extend(x, gamma, M)
    big = toeplitz(gamma[:T])
    s = np.arange(1, T + 1)
    for i in (1, 2, 7, M):
        fore = gamma[np.abs(T + i - s)] @ np.linalg.solve(big, x)
        back = gamma[np.abs(1 - i - s)] @ np.linalg.solve(big, x)
        assert extended[M + T + i - 1] == pytest.approx(fore, abs=1e-9)
        assert extended[M - i] == pytest.approx(back, abs=1e-9)


def test_extend_zero_padding():
    x = np.arange(5.0)
    out, windowed = filtering.extend(x, np.ones(10), 0)
    np.testing.assert_array_equal(out, x)
    assert out is not x and not windowed


# ---------------------------------------------------------------------------------------------
# apply_taps / inverse_taps
# ---------------------------------------------------------------------------------------------


def test_apply_taps_convention():
    """Spec 2.7: Xhat_t = sum_{j=-M}^{M} psi_j X^E_{t-j}, t = 1..T, by an explicit double loop."""
    rng = np.random.default_rng(4)
    M, T = 4, 12
    taps = rng.normal(size=2 * M + 1)
    ext = rng.normal(size=T + 2 * M)  # ext[k] holds X^E at time k - M + 1
    out = filtering.apply_taps(ext, taps)
    assert out.size == T
    for t in range(1, T + 1):
        expected = sum(taps[j + M] * ext[(t - j) + M - 1] for j in range(-M, M + 1))
        assert out[t - 1] == pytest.approx(expected, abs=1e-12)


def test_white_noise_release_is_one_step_lead():
    """Check 4: white noise, R(x) = x, delta = 0: Xhat_t = X_{t+1} in the interior (and the last value is the
    forecast, 0)."""
    rng = np.random.default_rng(5)
    x = rng.standard_normal(200)
    taps = coefficients.filter_taps(math.pi * BetaMixture.identity()(LAM / math.pi), 45)
    gamma = np.zeros(400)
    gamma[0] = 1.0
    xhat = filtering.apply_taps(filtering.extend(x, gamma, 45)[0], taps)
    np.testing.assert_allclose(xhat[:-1], x[1:], atol=1e-6 * np.std(x))
    assert abs(xhat[-1]) < 1e-6


def test_inverse_taps_reverse_and_compose_to_identity():
    """Spec 2.9: Psi^{-1}(z) = Psi(1/z): reversed taps; composition is ~ the identity filter."""
    theta = ar1_theta(0.6, FIXED_R)
    taps = coefficients.filter_taps(theta, 100)
    inv = filtering.inverse_taps(taps)
    np.testing.assert_array_equal(inv, taps[::-1])
    assert inv is not taps
    comp = np.convolve(taps, inv)
    delta = np.zeros_like(comp)
    delta[comp.size // 2] = 1.0
    assert np.max(np.abs(comp - delta)) < 2 * coefficients.allpass_defect(taps, N) + 1e-12


@pytest.mark.parametrize("rname", ["identity", "mixture"])
def test_invertibility_interior(rname):
    """Check 15: AR(1) phi=0.6, T=128, M=45, direct: filtering the extended release with psi_{-j} recovers X for
    M < t <= T-M with max error < 1e-2 SD(X)."""
    r = {"identity": BetaMixture.identity(), "mixture": FIXED_R}[rname]
    rng = np.random.default_rng(15)
    T, M = 128, 45
    x = ar1_path(0.6, T, rng)
    gamma = ar1_gamma(0.6, T + M + 10)
    taps = coefficients.filter_taps(ar1_theta(0.6, r), M)
    released = filtering.apply_taps(filtering.extend(x, gamma, M)[0], taps)
    recovered = filtering.apply_taps(filtering.extend(released, gamma, M)[0], filtering.inverse_taps(taps))
    interior = slice(M, T - M)  # t = M+1..T-M
    assert np.max(np.abs(recovered[interior] - x[interior])) < 1e-2 * np.std(x)
    # and the release itself is far from X (a genuine perturbation)
    assert np.max(np.abs(released - x)) > 0.5 * np.std(x)


# ---------------------------------------------------------------------------------------------
# Check 11: circular mode
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("T", [200, 137])
@pytest.mark.parametrize("rname", ["identity", "mixture"])
def test_circular_preserves_periodogram(T, rname):
    """Check 11: I_Xhat(lambda_k) = I_X(lambda_k) at every Fourier frequency; mean and sum x^2 equal (rel 1e-12)."""
    r = {"identity": BetaMixture.identity(), "mixture": FIXED_R}[rname]
    rng = np.random.default_rng(T)
    x = ex.simulate(0.1, T, rng)[:, 0] + 3.0
    xhat = filtering.circular_filter(x, ar1_theta(0.8, r))
    assert xhat.shape == x.shape and np.isrealobj(xhat)
    i_x, i_hat = utility.periodogram(x), utility.periodogram(xhat)
    assert np.max(np.abs(i_hat - i_x)) <= 1e-12 * np.max(i_x)
    assert xhat.mean() == pytest.approx(x.mean(), rel=1e-12)
    assert np.sum(xhat ** 2) == pytest.approx(np.sum(x ** 2), rel=1e-12)
    assert np.max(np.abs(xhat - x)) > 0.1 * np.std(x)  # not the identity


@pytest.mark.parametrize("T", [64, 65])
def test_circular_white_noise_is_circular_lead(T):
    """Check 4 in circular mode: theta = lambda gives Xhat_t = X_{t+1 mod T} exactly."""
    x = np.random.default_rng(6).standard_normal(T)
    xhat = filtering.circular_filter(x, LAM.copy())
    np.testing.assert_allclose(xhat, np.roll(x, -1), atol=1e-12)

"""Filter coefficients: direct and cepstral routes, Wiener-Hopf, all-pass defect, moments
(spec flip.md 2.1, 2.4, 2.6; checks 1-5, 16)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.special import jv

import example1 as ex
from tsdp.flip import coefficients, phase, spectral
from tsdp.flip.phase import BetaMixture

N = 8192
LAM = spectral.frequency_grid(N)
FIXED_R = BetaMixture((0.5, 0.5), (2.0, 3.0), (1.5, 3.5))
R_CASES = {"identity": BetaMixture.identity(), "mixture": FIXED_R}


def ar1_cdf(phi: float) -> np.ndarray:
    return spectral.spectral_cdf(1.0 / np.abs(1 - phi * np.exp(-1j * LAM)) ** 2)


def example1_theta(r: BetaMixture, rho: float = 0.1) -> np.ndarray:
    _, _, f_cond = ex.true_spectra(rho, N)
    return math.pi * r(spectral.spectral_cdf(f_cond))


def at(taps: np.ndarray, j: int) -> float:
    """psi_j from the array psi_{-M..M}."""
    M = (taps.size - 1) // 2
    return taps[j + M]


def reference_taps(theta: np.ndarray, M: int) -> np.ndarray:
    """psi_j = (2 pi)^{-1} int_{-pi}^{pi} Psi(e^{-i lambda}) e^{i lambda j} d lambda with Psi(e^{-i lambda}) = e^{i theta~},
    theta~ odd, by a complex DFT over the whole circle (returned complex, so realness is checked)."""
    n = theta.size - 1
    full = np.concatenate((theta, -theta[-2:0:-1]))  # lambda_m = pi m / n, m = 0..2n-1, wrapped to (-pi, pi]
    values = np.exp(1j * full)
    coef = np.fft.ifft(values)  # (1/2n) sum_m values_m e^{+i lambda_m j}
    return coef[np.arange(-M, M + 1) % (2 * n)]


# ---------------------------------------------------------------------------------------------
# Check 4: white noise, R(x) = x
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("method", ["direct", "cepstral-unwrapped"])
def test_white_noise_gives_one_step_lead(method):
    """Check 4: psi_{-1} = 1 and all other psi_j = 0 (|err| < 1e-6): Xhat_t = X_{t+1} (sign convention A3)."""
    theta = math.pi * BetaMixture.identity()(LAM / math.pi)
    taps = coefficients.filter_taps(theta, 45, method, 25)
    expected = np.zeros(91)
    expected[45 - 1] = 1.0
    assert np.max(np.abs(taps - expected)) < 1e-6


def test_white_noise_cepstrum():
    """Check 4: phi_k = (-1)^k / k for k <= 10 (err < 1e-6)."""
    phi = coefficients.cepstrum(LAM.copy(), 10)
    k = np.arange(1, 11)
    assert np.max(np.abs(phi - (-1.0) ** k / k)) < 1e-6


# ---------------------------------------------------------------------------------------------
# Check 5: AR(1) closed-form taps
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("phi", [0.6, -0.5])
@pytest.mark.parametrize("method", ["direct", "cepstral-unwrapped"])
def test_ar1_closed_form_taps(phi, method):
    """Check 5: psi_0 = -phi, psi_{-k} = (1 - phi^2) phi^{k-1}, psi_k = 0 for k >= 1 (err < 1e-5)."""
    taps = coefficients.filter_taps(math.pi * ar1_cdf(phi), 45, method, 25)
    k = np.arange(1, 46)
    assert abs(at(taps, 0) + phi) < 1e-5
    assert np.max(np.abs(taps[45 - k] - (1 - phi ** 2) * phi ** (k - 1))) < 1e-5
    assert np.max(np.abs(taps[45 + k])) < 1e-5


# ---------------------------------------------------------------------------------------------
# Checks 1-3: all-pass, realness, level
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("rname", list(R_CASES))
def test_cepstral_filter_is_exactly_allpass(rname):
    """Check 1: anti-symmetric cepstrum => |exp(phi_K(z) - phi_K(1/z))| = 1 (to 1e-12); its phase is theta_K."""
    theta = example1_theta(R_CASES[rname])
    for phase_in in (theta, theta - LAM):
        phi = coefficients.cepstrum(phase_in, 25)
        z = np.exp(-1j * LAM)
        k = np.arange(1, 26)[:, None]
        log_psi = phi @ (z[None, :] ** k) - phi @ (z[None, :] ** -k)
        psi = np.exp(log_psi)
        np.testing.assert_allclose(np.abs(psi), 1.0, atol=1e-12)
        np.testing.assert_allclose(psi, np.exp(1j * coefficients.cepstral_phase(phi, N)), atol=1e-10)


@pytest.mark.parametrize("rname", list(R_CASES))
def test_direct_taps_are_real_fourier_coefficients(rname):
    """Checks 1/3: direct taps equal the full-circle Fourier coefficients of e^{i theta~}; those are real."""
    theta = example1_theta(R_CASES[rname])
    ref = reference_taps(theta, 45)
    assert np.max(np.abs(ref.imag)) < 1e-12
    taps = coefficients.filter_taps(theta, 45)
    assert np.isrealobj(taps)
    np.testing.assert_allclose(taps, ref.real, atol=1e-12)


@pytest.mark.parametrize("rname", list(R_CASES))
def test_direct_level_and_convergence(rname):
    """Check 3: |sum psi_j - 1| < 0.02 at M = 45 (direct) and it shrinks as M grows."""
    theta = example1_theta(R_CASES[rname])
    errors = [abs(coefficients.filter_taps(theta, M).sum() - 1) for M in (45, 100, 200)]
    assert errors[0] < 0.02
    assert errors[1] < errors[0] and errors[2] < errors[1] + 1e-12
    assert errors[2] < 1e-4


@pytest.mark.parametrize("rname", list(R_CASES))
def test_allpass_defect_by_method(rname):
    """Check 2: Ex.-1 (rho = 0.1, true f_X|Z), M = 45: direct < 0.02 and decreasing in M;
    cepstral-paper ~ 0.46 (K = 25); cepstral-unwrapped < 0.005."""
    theta = example1_theta(R_CASES[rname])
    direct = [coefficients.allpass_defect(coefficients.filter_taps(theta, M), N) for M in (25, 45, 100)]
    assert direct[1] < 0.02
    assert direct[0] > direct[1] > direct[2]
    paper = coefficients.allpass_defect(coefficients.filter_taps(theta, 45, "cepstral-paper", 25), N)
    assert abs(paper - 0.46) < 0.01
    unwrapped = coefficients.allpass_defect(coefficients.filter_taps(theta, 45, "cepstral-unwrapped", 25), N)
    assert unwrapped < 0.005


def test_cepstral_paper_defect_at_pi():
    """Spec 2.6 P1: the literal route's defect sits at lambda = pi (K = 25, M = 45 ~ 0.46; M = 25 ~ 0.99)."""
    theta = example1_theta(BetaMixture.identity())
    taps = coefficients.filter_taps(theta, 45, "cepstral-paper", 25)
    gain = np.abs(coefficients.frequency_response(taps, N))
    assert np.argmax(np.abs(gain - 1)) > 0.95 * N
    assert abs(coefficients.allpass_defect(coefficients.filter_taps(theta, 25, "cepstral-paper", 25), N) - 0.99) < 0.02


# ---------------------------------------------------------------------------------------------
# Wiener-Hopf recursions (19)
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("rname", list(R_CASES))
def test_wiener_hopf_matches_filter_taps(rname):
    """Spec 2.6: the paper's recursions give the same taps as filter_taps for both cepstral routes."""
    theta = example1_theta(R_CASES[rname])
    phi = coefficients.cepstrum(theta, 25)
    np.testing.assert_allclose(coefficients.wiener_hopf_taps(phi, 45, 600),
                               coefficients.filter_taps(theta, 45, "cepstral-paper", 25), atol=1e-10)
    phi0 = coefficients.cepstrum(theta - LAM, 25)
    shifted = coefficients.wiener_hopf_taps(phi0, 46, 600)[2:]  # psi_j = psi0_{j+1}
    np.testing.assert_allclose(shifted, coefficients.filter_taps(theta, 45, "cepstral-unwrapped", 25), atol=1e-10)


@pytest.mark.parametrize("c", [0.3, 1.2])
def test_wiener_hopf_single_cepstral_term_is_bessel(c):
    """exp(c (z - 1/z)) = sum_n J_n(2c) z^n: with K = 1 the recursions must give psi_j = J_j(2c)."""
    taps = coefficients.wiener_hopf_taps(np.array([c]), 20, 80)
    j = np.arange(-20, 21)
    np.testing.assert_allclose(taps, jv(j, 2 * c), atol=1e-13)


# ---------------------------------------------------------------------------------------------
# Frequency response and moments
# ---------------------------------------------------------------------------------------------


def test_frequency_response_sign_convention():
    """Spec 0: Psi(e^{-i lambda}) = sum_j psi_j e^{-i lambda j}; psi_{-1} = 1 gives e^{+i lambda}."""
    taps = np.zeros(11)
    taps[5 - 1] = 1.0
    np.testing.assert_allclose(coefficients.frequency_response(taps, 64), np.exp(1j * spectral.frequency_grid(64)),
                               atol=1e-14)
    assert coefficients.allpass_defect(taps, 64) < 1e-14
    rng = np.random.default_rng(0)
    taps = rng.normal(size=9)
    lam = spectral.frequency_grid(32)
    j = np.arange(-4, 5)
    expected = np.exp(-1j * lam[:, None] * j[None, :]) @ taps
    np.testing.assert_allclose(coefficients.frequency_response(taps, 32), expected, atol=1e-12)
    with pytest.raises(ValueError):
        coefficients.frequency_response(np.ones(131), 64)


def test_unknown_method_rejected():
    with pytest.raises(ValueError):
        coefficients.filter_taps(LAM.copy(), 10, "rational")


def test_moments_ar1_identity():
    """Spec 2.4: R(x) = x on AR(1) phi = 0.6: sum psi_j = 1 and sum j psi_j = -(1+phi)/(1-phi) = -4."""
    taps = coefficients.filter_taps(math.pi * ar1_cdf(0.6), 100)
    m = coefficients.moments(taps, 2)
    assert m[0] == pytest.approx(1.0, abs=1e-6)
    assert m[1] == pytest.approx(-4.0, abs=1e-5)
    # sum j^2 psi_j = sum_k k^2 (1 - phi^2) phi^{k-1} = (1 - phi^2)(1 + phi)/(1 - phi)^3
    assert m[2] == pytest.approx(0.64 * 1.6 / 0.4 ** 3, rel=1e-5)


def test_moments_converge_for_smooth_r():
    """Check 16: min(a, b) >= d + 1 gives sum j^k psi_j -> 0 (k <= d); Beta(2,2), d=1: -0.43 (M=45), -0.097 (M=200)."""
    F = ar1_cdf(0.6)
    beta22 = coefficients.filter_taps(math.pi * BetaMixture((1.0,), (2.0,), (2.0,))(F), 45)
    assert abs(coefficients.moments(beta22, 1)[1] + 0.43) < 0.01
    m200 = coefficients.moments(coefficients.filter_taps(math.pi * BetaMixture((1.0,), (2.0,), (2.0,))(F), 200), 1)
    assert abs(m200[1] + 0.097) < 0.002
    smooth_mixture = BetaMixture((0.5, 0.5), (2.0, 3.0), (2.5, 3.5))
    for r, d in ((BetaMixture((1.0,), (2.0,), (2.0,)), 1), (smooth_mixture, 1), (BetaMixture((1.0,), (4.0,), (4.0,)), 3)):
        theta = math.pi * r(F)
        first = coefficients.moments(coefficients.filter_taps(theta, 45), d)
        last = coefficients.moments(coefficients.filter_taps(theta, 400), d)
        assert abs(last[0] - 1) < 1e-6
        assert np.all(np.abs(last[1:]) < 0.2 * np.abs(first[1:]) + 1e-3)
    beta44 = coefficients.filter_taps(math.pi * BetaMixture((1.0,), (4.0,), (4.0,))(F), 45)
    assert abs(coefficients.moments(beta44, 3)[1] - 0.016) < 0.002

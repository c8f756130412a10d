"""Circular filters of the filter-subsample mechanism (spec koga.md sections 2.0, 5.1.2, 5.3.1-5.3.2, 5.3.5)."""

import itertools
import math

import numpy as np
import pytest
from scipy import stats

from tsdp.accounting import timesubsampling as ts
from tsdp.errors import UsageError
from tsdp.mechanisms import filters as F


def circulant(h):
    """Dense A with A_ij = h_{(i - j) mod T} (the paper's convolution orientation)."""
    T = h.size
    i, j = np.meshgrid(np.arange(T), np.arange(T), indexing="ij")
    return h[(i - j) % T]


# ------------------------------------------------------------------ kernel statistics (5.1.2)

def test_gaussian_kernel_statistics_golden():
    s = F.kernel_stats(F.gaussian_kernel(10_000, 10))
    assert s.L == pytest.approx(0.0282095, abs=1e-6)
    assert s.srank == pytest.approx(282.09, abs=5e-3)
    assert s.sigma_max == pytest.approx(1.0, abs=1e-12)
    for T, srank in [(1800, 50.78), (725, 20.45), (2126, 59.97)]:
        assert F.kernel_stats(F.gaussian_kernel(T, 10)).srank == pytest.approx(srank, abs=5e-3)
    # closed form for sigma_g << T: L = 1 / (2 sqrt(pi) sigma_g)
    assert s.L == pytest.approx(1 / (2 * math.sqrt(math.pi) * 10), rel=1e-9)


@pytest.mark.parametrize("f, T, L, srank", [
    (1, 10000, 0.02821, 282.09), (1 / 2, 5000, 0.03526, 176.31), (1 / 4, 2500, 0.04231, 105.79),
    (1 / 8, 1250, 0.04937, 61.71), (1 / 16, 625, 0.05642, 35.26), (1 / 32, 313, 0.06347, 19.87),
    (1 / 64, 157, 0.07052, 11.07),
])
def test_synth_kernel_statistics(f, T, L, srank):
    sigma_g = 10 / (1 + math.log2(1 / f) / 4)
    assert T == math.ceil(10_000 * f)
    s = F.kernel_stats(F.gaussian_kernel(T, sigma_g))
    assert s.L == pytest.approx(L, abs=5e-6)
    assert s.srank == pytest.approx(srank, abs=5e-3)


def test_gaussian_kernel_matches_paper_formula_and_code_for_odd_T():
    from scipy.signal.windows import gaussian

    T, sg = 725, 10.0
    t = np.arange(T)
    paper = np.exp(-0.5 * ((T / 2 - np.abs(t - T / 2)) / sg) ** 2)
    h = F.gaussian_kernel(T, sg)
    np.testing.assert_allclose(h, paper / paper.sum(), rtol=1e-12, atol=0)
    code = np.roll(gaussian(T, std=sg), -(T // 2))  # authors' get_h: index T//2 rolled to 0
    np.testing.assert_allclose(h, code / code.sum(), rtol=1e-12, atol=1e-300)
    # even T: the code kernel is half a sample off, L and srank agree to display precision
    T = 1800
    code = np.roll(gaussian(T, std=sg), -(T // 2))
    a, b = F.kernel_stats(F.gaussian_kernel(T, sg)), F.kernel_stats(code / code.sum())
    assert a.srank == pytest.approx(b.srank, abs=5e-3) and a.L == pytest.approx(b.L, abs=5e-7)
    assert np.allclose(h[1:], h[1:][::-1])  # zero-phase: h_t = h_{T-t}


def test_other_kernels_statistics():
    T = 101
    box = F.boxcar_kernel(T, 7)
    s = F.kernel_stats(box)
    assert s.L == pytest.approx(1 / 7) and s.srank == pytest.approx(T / 7) and s.sigma_max == pytest.approx(1.0)
    tri = F.triangle_kernel(T)
    assert tri[0] == 0.5 and tri[1] == 0.25 and tri[-1] == 0.25 and tri.sum() == 1.0
    assert F.kernel_stats(tri).L == pytest.approx(0.375)
    ident = F.identity_kernel(T)
    assert F.kernel_stats(ident).srank == pytest.approx(T)


# ------------------------------------------------------------------ FFT filter (5.3.5)

@pytest.mark.parametrize("T", [2, 5, 16, 33, 64])
def test_fft_filter_equals_dense_circulant(T):
    rng = np.random.default_rng(T)
    kernels = [F.gaussian_kernel(T, 1.5), F.identity_kernel(T), F.place_taps(T, rng.random(min(T, 5)))]
    if T >= 3:
        kernels += [F.triangle_kernel(T), F.boxcar_kernel(T, 3)]
    x = rng.normal(size=(4, T)) * 100
    for h in kernels:
        A = circulant(h)
        np.testing.assert_allclose(A.sum(axis=1), 1.0, rtol=1e-12)  # rows sum to 1
        np.testing.assert_allclose(F.circular_filter(x, h), x @ A.T, atol=1e-9)
        # sigma_max of the dense matrix is the largest |FFT(h)|
        assert np.linalg.svd(A, compute_uv=False)[0] == pytest.approx(F.kernel_stats(h).sigma_max, rel=1e-10)
    np.testing.assert_allclose(F.circular_filter(x, F.identity_kernel(T)), x, atol=1e-12)


def test_symmetric_kernel_convolution_equals_correlation():
    T = 48
    h = F.gaussian_kernel(T, 3.0)
    A = circulant(h)
    np.testing.assert_allclose(A, A.T, atol=1e-15)  # correlation (the authors' code) = convolution
    x = np.random.default_rng(0).normal(size=T)
    corr = np.array([np.dot(np.roll(h, i), x) for i in range(T)])  # code: row i = np.roll(h, i)
    np.testing.assert_allclose(F.circular_filter(x, h), corr, atol=1e-12)


def test_custom_taps_are_centred_like_numpy_convolve_same():
    T = 60
    taps = np.array([1.0, 3.0, 0.0, 2.0])
    x = np.random.default_rng(1).normal(size=T)
    y = F.circular_filter(x, F.place_taps(T, taps))
    ref = np.convolve(x, taps / taps.sum(), mode="same")
    np.testing.assert_allclose(y[5:-5], ref[5:-5], atol=1e-12)


def test_filter_is_vectorised_over_a_panel():
    x = np.random.default_rng(2).normal(size=(3, 200))
    h = F.gaussian_kernel(200, 4)
    y = F.circular_filter(x, h)
    for row in range(3):
        np.testing.assert_allclose(y[row], F.circular_filter(x[row], h), atol=1e-12)


@pytest.mark.parametrize("taps, word", [
    ([0.5, -0.1, 0.6], "non-negative"), ([0.0, 0.0], "positive sum"), (np.ones(11), "more than"),
    ([1.0, np.nan], "finite"), ([], "no taps"),
])
def test_custom_kernel_validation_names_the_option(taps, word):
    with pytest.raises(UsageError, match="--filter-kernel") as err:
        F.place_taps(10, taps)
    assert word in str(err.value)


def test_kernel_parameter_validation():
    with pytest.raises(UsageError, match="--filter-width"):
        F.boxcar_kernel(50, 4)
    with pytest.raises(UsageError, match="--filter-width"):
        F.boxcar_kernel(5, 7)
    with pytest.raises(UsageError, match="--filter-sigma"):
        F.gaussian_kernel(50, 0.0)
    with pytest.raises(UsageError, match="--filter-sigma"):
        F.gaussian_kernel(50, float("inf"))
    with pytest.raises(UsageError, match="--filter-width"):
        F.make_kernel("boxcar", 50)
    with pytest.raises(UsageError, match="--filter "):
        F.make_kernel("sinc", 50)


# ------------------------------------------------------------------ s_J = sigma_max(A_J)

def dense_sampled_sigma(h, J):
    rows = h[(np.asarray(J)[:, None] - np.arange(h.size)[None, :]) % h.size]  # A_J, built row by row
    return np.linalg.svd(rows, compute_uv=False)[0]


def test_sampled_sigma_max_matches_svd_dense_path():
    rng = np.random.default_rng(3)
    for T in (16, 64, 300):
        for h in (F.gaussian_kernel(T, 2.0), F.boxcar_kernel(T, 5), F.place_taps(T, rng.random(7))):
            for _ in range(3):
                J = np.flatnonzero(rng.random(T) < 0.3)
                ref = dense_sampled_sigma(h, J)
                got = F.sampled_sigma_max(h, J)
                assert ref <= got <= ref * (1 + 1e-8)


@pytest.mark.parametrize("kernel", ["banded-gaussian", "banded-boxcar", "fft-gaussian"])
def test_sampled_sigma_max_matches_svd_lanczos_path(kernel):
    T = 3000
    h = {"banded-gaussian": F.gaussian_kernel(T, 3.0), "banded-boxcar": F.boxcar_kernel(T, 9),
         "fft-gaussian": F.gaussian_kernel(T, 10.0)}[kernel]
    assert (F._compact_autocorrelation(h) is None) == (kernel == "fft-gaussian")
    J = np.flatnonzero(np.random.default_rng(4).random(T) < 0.16)
    assert J.size > F.DENSE_MAX
    ref = dense_sampled_sigma(h, J)
    got = F.sampled_sigma_max(h, J)
    assert ref <= got <= ref * (1 + 1e-7)


def test_sampled_sigma_max_wraps_around_the_circle():
    # samples clustered at both ends of the series interact through the circular wrap
    T = 5000
    h = F.gaussian_kernel(T, 3.0)
    J = np.concatenate([np.arange(0, 300, 2), np.arange(T - 600, T, 2)])
    assert J.size > F.DENSE_MAX
    ref = dense_sampled_sigma(h, J)
    assert ref <= F.sampled_sigma_max(h, J) <= ref * (1 + 1e-7)


# ------------------------------------------------------------------ brute force (5.3.1, 5.3.2)

def test_sensitivity_bound_by_enumeration():
    T, I = 14, 3
    rng = np.random.default_rng(5)
    vs = [np.bincount(list(c), minlength=T) for k in range(1, I + 1) for c in itertools.combinations(range(T), k)]
    V = np.array(vs, dtype=float)  # every v in {0,1}^T with 1 <= |v| <= I
    for h in (F.gaussian_kernel(T, 1.0), F.triangle_kernel(T), F.identity_kernel(T)):
        A = circulant(h)
        for _ in range(3):
            J = np.flatnonzero(rng.random(T) < 0.4)
            worst = np.linalg.norm(V @ A[J].T, axis=1).max()
            assert worst <= F.sampled_sigma_max(h, J) * math.sqrt(I) * (1 + 1e-12)
            if h[0] == 1.0:  # identity filter: exactly sqrt(min(I, |J|))
                assert worst == pytest.approx(math.sqrt(min(I, J.size)), rel=1e-12)


def batch_sampled_sigma(A, masks):
    """sigma_max(A_J) for many J at once: lambda_max of the rows/columns J of the dense A A^T,
    zero-padded to the largest |J|."""
    width = max(int(masks.sum(axis=1).max()), 1)
    order = np.argsort(~masks, axis=1, kind="stable")[:, :width]  # sampled indices first
    valid = np.take_along_axis(masks, order, axis=1)
    gram = (A @ A.T)[order[:, :, None], order[:, None, :]] * (valid[:, :, None] & valid[:, None, :])
    return np.sqrt(np.maximum(np.linalg.eigvalsh(gram)[:, -1], 0.0))


def test_failure_probability_by_enumeration_T16():
    T, p = 16, 0.3
    h = F.gaussian_kernel(T, 1.0)
    A = circulant(h)
    st = F.kernel_stats(h)
    masks = ((np.arange(2**T)[:, None] >> np.arange(T)) & 1).astype(bool)
    weights = np.prod(np.where(masks, p, 1 - p), axis=1)
    s = batch_sampled_sigma(A, masks)
    # spot-check the batch against sampled_sigma_max
    for idx in (1, 77, 4097, 2**T - 1):
        assert s[idx] == pytest.approx(F.sampled_sigma_max(h, np.flatnonzero(masks[idx])), rel=1e-8)
    for alpha in np.linspace(math.sqrt(p + st.L) + 1e-6, 1.0, 9):
        exact = weights[s > alpha].sum()
        bound = ts.delta_prime(alpha, p, st.L, st.srank)
        assert exact <= bound  # vacuous (bound = 1) at this size, as the spec notes


def test_failure_probability_monte_carlo_T400():
    T, p, alpha, n = 400, 0.1, 0.6, 4000
    h = F.gaussian_kernel(T, 10.0)
    st = F.kernel_stats(h)
    bound = ts.delta_prime(alpha, p, st.L, st.srank)
    assert bound == pytest.approx(1.8e-2, rel=0.05)
    masks = np.random.default_rng(6).random((n, T)) < p
    s = batch_sampled_sigma(circulant(h), masks)
    exceed = int((s > alpha).sum())
    # if the true probability were the bound, seeing this few exceedances has probability < 1e-6
    assert stats.binom.cdf(exceed, n, bound) < 1e-6
    assert exceed == 0
    assert 0.35 < s.mean() < 0.45  # spec 2.6: mean about 0.403 for T = 400


def test_sampled_sigma_max_survives_a_lapack_mrrr_failure(monkeypatch):
    """LAPACK's MRRR driver (scipy's eigh with subset_by_index) reports "internal error" on rare Gram
    matrices (a CI run of filter-subsample --filter custom, kernel 0.25 0.5 0.25, failed so): the dense
    path falls back to all eigenvalues by divide and conquer, with the same bound."""
    from scipy import linalg

    rng = np.random.default_rng(3)
    h = np.array([0.25, 0.5, 0.25] + [0.0] * 97)
    J = np.sort(rng.choice(100, size=40, replace=False))
    expected = F.sampled_sigma_max(h, J)

    def failing(*args, **kwargs):
        raise linalg.LinAlgError("internal error")

    monkeypatch.setattr(linalg, "eigh", failing)
    got = F.sampled_sigma_max(h, J)
    assert got == pytest.approx(expected, rel=1e-12)
    ref = dense_sampled_sigma(h, J)
    assert ref <= got <= ref * (1 + 1e-8)

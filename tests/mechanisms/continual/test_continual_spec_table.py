"""The figures of specs/continual.md (event level, T = 365, per unit of noise and sensitivity)."""

import numpy as np
import pytest

from tsdp.mechanisms.continual.factorization import factorization
from tsdp.mechanisms.continual.tree import BinaryTree

T = 365
SPEC_TREE_SENSITIVITY = np.sqrt(np.ceil(np.log2(T)) + 1)  # the spec's convention: sqrt(10)


def rms(v):
    return float(np.sqrt(np.mean(np.asarray(v) ** 2)))


def normalised(strategy, horizon=T, output="cumulative", unit="event", k=None, steps=None):
    fac = factorization(strategy, horizon)
    norms = fac.row_norms(output)[:steps]
    s = fac.sensitivity(unit, None, k, None)
    return s * rms(norms), s * norms[-1]


def test_independent_row():
    assert normalised("independent") == pytest.approx((13.53, 19.10), abs=0.005)
    assert normalised("independent")[0] == pytest.approx(np.sqrt((T + 1) / 2), rel=1e-12)


def test_square_root_toeplitz_row():
    assert normalised("toeplitz") == pytest.approx((2.78, 2.94), abs=0.005)


def test_square_root_sized_for_ten_years():
    rmse = normalised("toeplitz", horizon=3650, steps=T)[0]
    assert rmse == pytest.approx(3.11, abs=0.005)
    assert rmse / normalised("toeplitz")[0] == pytest.approx(1.12, abs=0.005)


def test_tree_rows_with_the_spec_sensitivity():
    tree = BinaryTree(T)
    # plain decoding: the roots of the forest of t + 1 steps, popcount(t + 1) nodes
    plain = np.array([np.sqrt(len(tree.forest(t))) for t in range(T)])
    assert SPEC_TREE_SENSITIVITY * rms(plain) == pytest.approx(6.39, abs=0.005)
    assert SPEC_TREE_SENSITIVITY * plain[-1] == pytest.approx(7.75, abs=0.005)
    ls = factorization("tree", T).row_norms("cumulative")
    assert SPEC_TREE_SENSITIVITY * rms(ls) == pytest.approx(4.94, abs=0.005)
    assert SPEC_TREE_SENSITIVITY * ls[-1] == pytest.approx(6.01, abs=0.005)


def test_tree_sensitivity_counts_complete_levels_only():
    # 2^8 = 256 <= 365 < 512: nine levels complete within the horizon, so s(C) = 3 < sqrt(10)
    C = BinaryTree(T).matrix()
    assert np.sqrt((C * C).sum(axis=0)).max() == 3.0
    assert factorization("tree", T).sensitivity("event", None, None, None) == 3.0


def test_least_squares_decoder_is_unbiased_and_online():
    tree = BinaryTree(T)
    C = tree.matrix()
    for t in (0, 1, 6, 100, 255, 364):
        n = tree.first_id[t + 1]
        row = tree.decoder_row(np.ones(t + 1), t)
        assert np.allclose(C[n:, :t + 1].sum(), C[n:, :t + 1].sum())  # shape sanity
        assert np.allclose(row @ C[:n, :t + 1], 1.0)      # B_t C = A_t on the released nodes
        assert not C[:n, t + 1:].any()                      # released nodes see no future step
        assert row @ row == pytest.approx(tree.row_norm_squared(np.ones(t + 1), t), rel=1e-10)


@pytest.mark.parametrize("k, independent, toeplitz", [(7, 35.8, 16.76), (365, 258.4, 472.4)])
def test_user_level_figures(k, independent, toeplitz):
    assert normalised("independent", unit="user", k=k)[0] == pytest.approx(independent, abs=0.05)
    assert normalised("toeplitz", unit="user", k=k)[0] == pytest.approx(toeplitz, abs=0.05)


def test_user_level_gain_shrinks_with_participation():
    gain = {k: normalised("independent", unit="user", k=k)[0] / normalised("toeplitz", unit="user", k=k)[0]
            for k in (7, 30, 365)}
    assert round(gain[7], 1) == 2.1
    assert 1.1 < gain[30] < 1.2
    assert gain[365] < 0.55  # independent noise wins: 258 vs 472


def test_square_root_squares_to_the_prefix_matrix_and_its_inverse_is_closed_form():
    from tsdp.mechanisms.continual import toeplitz as tz

    n = 2000
    c = tz.sqrt_coefficients(n)
    assert np.allclose(tz.product(c, c, n), 1.0, rtol=1e-12)          # C C = L
    assert np.allclose(tz.inverse_sqrt_coefficients(n), tz.inverse(c, n), rtol=1e-9, atol=1e-15)
    assert np.allclose(tz.product(c, tz.inverse_sqrt_coefficients(n), n), np.r_[1.0, np.zeros(n - 1)], atol=1e-12)
    # the stable recurrence against exact binomials for small k
    from math import comb
    assert np.allclose(c[:30], [comb(2 * k, k) / 4 ** k for k in range(30)], rtol=1e-14)


def test_mixed_workload_independent_row():
    fac = factorization("independent", T)
    figures = [rms(fac.row_norms(o)) for o in ("daily", "window:7", "cumulative")]
    assert figures == pytest.approx([1.00, 2.63, 13.53], abs=0.005)

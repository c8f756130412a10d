"""Student-t output head (tsdp.forecast.studentt): density, derivatives, quantiles, extremes.

Finite differences: the central difference ``fd(h) = (f(x+h) - f(x-h)) / 2h`` has truncation error
``h^2 f'''(x)/6 + O(h^4)`` and rounding error at most ``noise / h``, where ``noise`` bounds the
floating-point error of one evaluation of ``f``. The NLL is a sum of terms (``lgamma``, ``log``,
``(df+1)/2 log(1 + z^2/df)``) that can be much larger than the result, so ``noise`` is taken as
``8 eps`` times the sum of the terms' magnitudes. Because the truncation error scales like ``h^2``,
``|fd(2h) - fd(h)| ~ 3 |fd(h) - f'|``. The tolerance below is
``|fd(2h) - fd(h)| + 4 noise / h + 1e-9 |f'|``: the estimated truncation error (safety factor 3), the
rounding of both differences, and a relative floor. A wrong derivative formula produces an
O(|f'|) discrepancy and fails.
"""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import special, stats

from tsdp.forecast import studentt

EPS = np.finfo(float).eps


def term_magnitude(y, raw):
    """Sum of the magnitudes of the NLL's terms: its evaluation error is below ``8 eps`` times this."""
    loc, scale, df = studentt.domain(raw)
    z = (y - loc) / scale
    return (np.abs(special.gammaln((df + 1) / 2)) + np.abs(special.gammaln(df / 2)) + np.abs(np.log(scale))
            + 0.5 * np.abs(np.log(df * np.pi)) + (df + 1) / 2 * np.log1p(z**2 / df))


def fd_check(y, x, analytic, h):
    """Central differences of the NLL along every raw component (see the module docstring)."""

    def f(r):
        return studentt.nll_and_grad(y, r)[0]

    for k in range(x.shape[-1]):
        e = np.zeros(x.shape[-1])
        e[k] = 1.0
        f1 = (f(x + h * e) - f(x - h * e)) / (2 * h)
        f2 = (f(x + 2 * h * e) - f(x - 2 * h * e)) / (4 * h)
        noise = 8 * EPS * np.maximum(term_magnitude(y, x + 2 * h * e), term_magnitude(y, x - 2 * h * e))
        tol = np.abs(f2 - f1) + 4 * noise / h + 1e-9 * np.abs(analytic[..., k])
        err = np.abs(f1 - analytic[..., k])
        assert np.all(err <= tol), (k, np.max(err / tol))


def random_raw(rng, n, df_raw=(-3.0, 5.0)):
    raw = np.column_stack([rng.uniform(-3, 3, n), rng.uniform(-2, 3, n), rng.uniform(*df_raw, n)])
    y = rng.uniform(-6, 6, n)
    return y, raw


def test_domain_map():
    raw = np.array([[0.3, 0.0, 0.0], [-1.0, 40.0, -40.0]])
    loc, scale, df = studentt.domain(raw)
    np.testing.assert_array_equal(loc, raw[:, 0])
    np.testing.assert_allclose(scale, [np.log(2) + 1e-6, 40.0 + 1e-6], rtol=1e-15)
    np.testing.assert_allclose(df, [2 + np.log(2), 2 + np.log1p(np.exp(-40.0))], rtol=1e-15)
    assert studentt.SCALE_FLOOR == 1e-6
    np.testing.assert_allclose(studentt.softplus(np.array([-800.0, 0.0, 800.0])), [0.0, np.log(2), 800.0])


@pytest.mark.parametrize("df_raw", [(-6.0, 6.0), (30.0, 200.0), (1e3, 1e5)])
def test_nll_matches_scipy(df_raw):
    rng = np.random.default_rng(1)
    y, raw = random_raw(rng, 2000, df_raw)
    loc, scale, df = studentt.domain(raw)
    ref = -stats.t.logpdf(y, df, loc=loc, scale=scale)
    # scipy subtracts lgamma values directly; its own error is ~eps |lgamma(df/2)| (1e-11 at df = 1e5)
    tol = 1e-13 * np.abs(ref) + 8 * EPS * term_magnitude(y, raw)
    assert np.all(np.abs(studentt.nll(y, loc, scale, df) - ref) <= tol)
    value, _ = studentt.nll_and_grad(y, raw)
    assert np.all(np.abs(value - ref) <= tol)


# -log p(y) for (y, loc, scale, df), computed with mpmath at 40 digits from the lgamma form
GOLDEN = [((1.3, 0.2, 0.7, 40 + 1e-9), 1.7965464591775944), ((2.0, -1.0, 0.5, 3e4), 18.21560795849726),
          ((0.3, 0.1, 2.0, 1e5), 1.6170882635146155), ((5.0, 0.0, 1.0, 1e12), 13.418938533061173)]


@pytest.mark.parametrize(("args", "expected"), GOLDEN)
def test_nll_golden_values(args, expected):
    assert studentt.nll(*args) == pytest.approx(expected, rel=1e-14)


def test_nll_series_branch_is_continuous_and_tends_to_normal():
    # df/2 = 20 is where the lgamma/digamma differences switch to their asymptotic series
    df = np.array([40.0 - 1e-9, 40.0, 40.0 + 1e-9])
    v = studentt.nll(1.3, 0.2, 0.7, df)
    assert np.ptp(v) < 1e-9
    # direct differences at a = 20 carry an error of ~eps lgamma(20) = 1e-14
    np.testing.assert_allclose(studentt._lgamma_ratio(np.array([20.0])),
                               special.gammaln(20.5) - special.gammaln(20.0), rtol=1e-13)
    np.testing.assert_allclose(studentt._digamma_ratio(np.array([20.0])),
                               special.digamma(20.5) - special.digamma(20.0), rtol=1e-13)
    # df -> infinity: the normal log-density (relative difference O(1/df))
    normal = -stats.norm.logpdf(1.3, 0.2, 0.7)
    np.testing.assert_allclose(studentt.nll(1.3, 0.2, 0.7, 1e14), normal, rtol=1e-12)


@pytest.mark.parametrize("df_raw", [(-6.0, 6.0), (35.0, 45.0), (100.0, 1e4)])
def test_gradient_matches_finite_differences(df_raw):
    rng = np.random.default_rng(2)
    y, raw = random_raw(rng, 500, df_raw)
    _, grad = studentt.nll_and_grad(y, raw)
    fd_check(y, raw, grad, h=1e-5)


def test_gradient_matches_closed_forms():
    """The chain rule through the domain map, against the derivative formulas written directly."""
    rng = np.random.default_rng(3)
    y, raw = random_raw(rng, 300)
    _, grad = studentt.nll_and_grad(y, raw)
    loc, scale, df = studentt.domain(raw)
    z = (y - loc) / scale
    dloc = -(df + 1) * z / (scale * (df + z**2))
    dscale = 1 / scale - (df + 1) * z**2 / (scale * (df + z**2))
    ddf = (-0.5 * special.digamma((df + 1) / 2) + 0.5 * special.digamma(df / 2) + 1 / (2 * df)
           + 0.5 * np.log1p(z**2 / df) - (df + 1) * z**2 / (2 * df * (df + z**2)))
    np.testing.assert_allclose(grad[:, 0], dloc, rtol=1e-12)
    np.testing.assert_allclose(grad[:, 1], dscale * special.expit(raw[:, 1]), rtol=1e-11, atol=1e-14)
    np.testing.assert_allclose(grad[:, 2], ddf * special.expit(raw[:, 2]), rtol=1e-9, atol=1e-14)


def test_batched_shapes():
    rng = np.random.default_rng(4)
    raw = rng.normal(size=(4, 5, 3))
    y = rng.normal(size=(4, 5))
    v, g = studentt.nll_and_grad(y, raw)
    assert v.shape == (4, 5) and g.shape == (4, 5, 3)
    v1, g1 = studentt.nll_and_grad(y[2, 3], raw[2, 3])
    np.testing.assert_allclose(v1, v[2, 3], rtol=1e-15)
    np.testing.assert_allclose(g1, g[2, 3], rtol=1e-15)
    with pytest.raises(ValueError):
        studentt.nll_and_grad(y[:, :4], raw)


def test_extreme_raw_values_stay_finite():
    grid = np.array([-1e300, -1e5, -30.0, 0.0, 30.0, 1e5, 1e300])
    raw = np.stack(np.meshgrid(grid, grid, grid, indexing="ij"), axis=-1).reshape(-1, 3)
    for y0 in (-1e10, 0.0, 1e10):
        y = np.full(raw.shape[0], y0)
        with np.errstate(over="raise", invalid="raise", divide="raise"):
            v, g = studentt.nll_and_grad(y, raw)
            q = studentt.quantiles(*studentt.domain(raw), [0.1, 0.5, 0.9])
        assert np.all(np.isfinite(v)) and np.all(np.isfinite(g))
        assert np.all(np.isfinite(q))


def test_quantiles_match_scipy():
    rng = np.random.default_rng(5)
    loc = rng.normal(size=(6, 4))
    scale = rng.uniform(0.1, 3, size=(6, 4))
    df = rng.uniform(2.01, 60, size=(6, 4))
    levels = [0.01, 0.1, 0.25, 0.5, 0.75, 0.9, 0.99]
    q = studentt.quantiles(loc, scale, df, levels)
    assert q.shape == (6, 4, 7)
    ref = stats.t.ppf(np.array(levels), df[..., None], loc=loc[..., None], scale=scale[..., None])
    np.testing.assert_allclose(q, ref, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(q[..., 3], loc, rtol=1e-15, atol=0)
    assert np.all(np.diff(q, axis=-1) > 0)
    with pytest.raises(ValueError):
        studentt.quantiles(loc, scale, df, [0.0, 0.5])


@settings(max_examples=60, deadline=None)
@given(y=st.floats(-1e6, 1e6), loc=st.floats(-1e6, 1e6), log_scale=st.floats(-10, 10),
       df=st.floats(2.0 + 1e-6, 1e8))
def test_nll_property_against_scipy(y, loc, log_scale, df):
    scale = float(np.exp(log_scale))
    ref = -stats.t.logpdf(y, df, loc=loc, scale=scale)
    z = (y - loc) / scale
    terms = (abs(special.gammaln((df + 1) / 2)) + abs(special.gammaln(df / 2)) + abs(np.log(scale))
             + 0.5 * abs(np.log(df * np.pi)) + (df + 1) / 2 * np.log1p(z**2 / df))
    assert abs(studentt.nll(y, loc, scale, df) - ref) <= 1e-13 * abs(ref) + 8 * EPS * terms

"""The FLIP pipeline: settings, length rules, determinism, invariances and Monte Carlo properties
(spec flip.md 2.8, 2.9, 3.1, 4.3-4.6, 7; checks 2, 11-13, 15-18, 19 (core part), 20)."""

from __future__ import annotations

import math
import os
import subprocess
import sys

import numpy as np
import pytest

import example1 as ex
from tsdp.errors import DataError, UsageError
from tsdp.flip import (NOT_DP, BetaMixture, FlipSettings, claim_for, flip_many, flip_series,
                       series_generator)
from tsdp.flip import coefficients, filtering, mechanism, phase, spectral, trend, utility

MASTER = 20221122
FIXED_R = BetaMixture((0.5, 0.5), (2.0, 3.0), (1.5, 3.5))
# --lip-floor 0 releases every date: the checks that use it are of the filter itself (the paper's
# properties on the whole series), not of the withholding rule (tests/flip/test_withholding.py)
EVERY_DATE = 0.0


def ar1_path(phi: float, T: int, rng: np.random.Generator) -> np.ndarray:
    from scipy.signal import lfilter

    return lfilter([1.0], [1.0, -phi], rng.standard_normal(T + 300))[300:]


def run(x, z, settings, seed=0, label="series"):
    return flip_series(x, z, settings, np.random.default_rng(seed), label)


def assert_same_release(got: np.ndarray, want: np.ndarray, rel: float) -> None:
    """The same dates withheld (NaN), and the released values equal to ``rel`` of their largest."""
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    shown = ~np.isnan(want)
    assert shown.any()
    assert np.max(np.abs(got[shown] - want[shown])) < rel * np.max(np.abs(want[shown]))


# ---------------------------------------------------------------------------------------------
# Check 19 (core part): settings and length rules
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("delta", [-0.1, 1.0, 1.5, math.nan, math.inf])
def test_settings_reject_lip_delta_outside_unit_interval(delta):
    """Check 19 / spec 4.3: delta outside [0, 1) is a usage error naming the option."""
    with pytest.raises(UsageError, match="lip-delta"):
        FlipSettings(lip_delta=delta)


def test_settings_accept_valid_delta_and_defaults():
    assert FlipSettings(lip_delta=0.0).lip_delta == 0.0
    assert FlipSettings(lip_delta=0.999).lip_delta == 0.999
    s = FlipSettings()
    assert (s.lip_delta, s.trend_order, s.spectral, s.var_order, s.K, s.coef_method, s.boundary, s.bound,
            s.r_components, s.grid, s.acf_lags) == (0.0, 0, "var", "aic", 25, "direct", "extend", "paper", 2,
                                                    8192, 24)
    assert s.beta_range == (1.0, 4.0)
    assert FlipSettings(trend_order=3).beta_range == (4.0, 7.0)
    assert [s.padding(T) for T in (100, 200, 1000)] == [25, 45, 45]
    assert FlipSettings(M=10).padding(1000) == 10


@pytest.mark.parametrize("kwargs,needle", [
    (dict(trend_order=-1), "trend-order"),
    (dict(lip_delta=0.1, r_range=(0.5, 4.0)), "r-range"),
    (dict(r_range=(3.0, 2.0)), "r-range"),
    (dict(r_range=(0.0, 2.0)), "r-range"),
    (dict(r_range=(1.0, math.inf)), "r-range"),
    (dict(lip_delta=0.1, r_params=BetaMixture((1.0,), (0.5,), (2.0,))), "r-params"),
    (dict(K=0), "--cepstral-terms 0"),
    (dict(M=0), "--filter-half-length 0"),
    (dict(var_order=-1), "var-order"),
    (dict(var_order="bic"), "var-order"),
    (dict(spectral="welch"), "spectral"),
    (dict(coef_method="rational"), "coef-method"),
    (dict(boundary="reflect"), "boundary"),
    (dict(bound="sharp"), "bound"),
    (dict(r_components=0), "r-components"),
    (dict(grid=100), "grid"),
    (dict(acf_lags=0), "acf-lags"),
])
def test_settings_reject_bad_options(kwargs, needle):
    """Check 19 / spec 4.3: negative trend order, bad R parameters and other bad options are usage errors."""
    with pytest.raises(UsageError, match=needle):
        FlipSettings(**kwargs)


def test_settings_accept_u_shaped_r_without_budget():
    """Spec 4.3: a_j < 1 is allowed when delta = 0 (L_R only matters for the shift bound)."""
    FlipSettings(r_params=BetaMixture((1.0,), (0.5,), (2.0,)))
    FlipSettings(r_range=(0.3, 1.0))


LABEL = "entity 'CA', column 'asian'"


@pytest.mark.parametrize("T,kwargs,needle", [
    (19, {}, "at least 20"),
    (25, dict(M=25), "--filter-half-length 25"),
    (25, dict(M=30), "--filter-half-length 30"),
    (40, dict(trend_order=10), "trend-order 10"),
    (30, dict(var_order=8), "var-order 8"),
])
def test_check_length_errors_name_the_series(T, kwargs, needle):
    """Check 19 / spec 4.3: T < 20, M >= T, (d+1) > T/4, and too short for the VAR order are data errors
    naming the series."""
    with pytest.raises(DataError) as info:
        mechanism.check_length(T, FlipSettings(**kwargs), 3, LABEL)
    assert LABEL in str(info.value) and needle in str(info.value)


def test_check_length_boundaries_and_warnings():
    """Spec 4.3: T = 20 and d + 1 = T/4 pass; M > T/4 and T < 50 only warn."""
    assert mechanism.check_length(100, FlipSettings(), 1, LABEL) == []
    warnings = mechanism.check_length(20, FlipSettings(M=10, trend_order=4), 1, LABEL)
    assert len(warnings) == 2 and all(LABEL in w for w in warnings)
    assert any("T/4" in w for w in warnings) and any("unreliable" in w for w in warnings)


def test_flip_many_errors_name_entity_and_column():
    """Spec 4.3: an error in one series names its entity and column."""
    x = np.random.default_rng(0).standard_normal(15)
    with pytest.raises(DataError, match="entity 'NV', column 'emp'"):
        flip_many([("NV", "emp", x, None)], FlipSettings(), MASTER)
    with pytest.raises(DataError, match="column 'emp'"):
        flip_many([(None, "emp", x, None)], FlipSettings(), MASTER)


def test_bad_series_refused():
    """Spec 4.3: non-finite, constant, or perfectly predicted series are data errors."""
    rng = np.random.default_rng(1)
    x = ar1_path(0.5, 100, rng)
    bad = x.copy()
    bad[10] = np.nan
    with pytest.raises(DataError, match="non-finite"):
        run(bad, None, FlipSettings())
    with pytest.raises(DataError, match="constant"):
        run(np.full(100, 3.0), None, FlipSettings())
    with pytest.raises(DataError, match="constant"):
        run(np.arange(100.0), None, FlipSettings(trend_order=1))
    with pytest.raises(DataError, match="LIP is undefined"):
        run(x, 2.0 * x + 1.0, FlipSettings())
    with pytest.raises(DataError, match="constant"):
        run(x, np.ones(100), FlipSettings())


# ---------------------------------------------------------------------------------------------
# Diagnostics, warnings, secrets
# ---------------------------------------------------------------------------------------------


def test_cepstral_paper_warns_with_defect():
    """Check 2: cepstral-paper emits a warning with the measured all-pass defect (~0.46); direct does not."""
    rng = np.random.default_rng(2)
    w = ex.simulate(0.1, 200, rng)
    paper = run(w[:, 0], w[:, 1:], FlipSettings(coef_method="cepstral-paper", r_params=FIXED_R), label=LABEL)
    defect = paper.diagnostics["allpass_max_defect"]
    assert abs(defect - 0.46) < 0.05
    assert defect == pytest.approx(coefficients.allpass_defect(np.array(paper.secrets["taps"]),
                                                               paper.diagnostics["grid"]))
    hits = [m for m in paper.warnings if "cepstral-paper" in m]
    assert len(hits) == 1 and f"{defect:.3g}" in hits[0] and LABEL in hits[0]
    direct = run(w[:, 0], w[:, 1:], FlipSettings(r_params=FIXED_R), label=LABEL)
    assert not any("cepstral" in m for m in direct.warnings)
    assert direct.diagnostics["allpass_max_defect"] < 0.02
    assert abs(direct.diagnostics["psi_sum"] - 1) < 0.02


@pytest.mark.parametrize("delta,bound", [(0.0, "paper"), (0.1, "paper"), (0.3, "ks")])
def test_pipeline_lip_and_shift(delta, bound):
    """Checks 7/8 in the pipeline: lip_ideal >= 1 - delta, Delta in [0, B], alpha = pi Delta / (1 + pi Delta)."""
    rng = np.random.default_rng(3)
    w = ex.simulate(0.7, 200, rng)
    res = run(w[:, 0], w[:, 1:], FlipSettings(lip_delta=delta, bound=bound), seed=4)
    d, s = res.diagnostics, res.secrets
    assert d["lip_lower_bound"] == 1 - delta and d["lip_budget_delta"] == delta
    assert d["lip_ideal"] >= min(1 - delta, 1 - 1e-9)
    assert d["lip_applied_interior"] > 0.99 - delta  # the taps away from the ends (the ends: tests/audit)
    if delta == 0:
        assert s["shift"] == 0.0 and s["shift_bound"] == 0.0 and d["lip_ideal"] >= 1 - 1e-9
    else:
        assert 0 < s["shift"] <= s["shift_bound"]
    assert s["alpha"] == pytest.approx(phase.mixing_weight(s["shift"]))
    assert s["lipschitz"] == pytest.approx(BetaMixture(**s["r_params"]).lipschitz)


def test_flattop_pipeline_with_vanishing_aux_spectrum():
    """Spec 2.5 / P11 in the pipeline: a flat-top estimate whose clipped f_Z vanishes somewhere must still
    give a release (Thm 6: lip_ideal >= 1 - 1e-9), not a NumericalError."""
    w = ex.simulate(0.1, 300, np.random.default_rng(4064854858))
    res = run(w[:, 0], w[:, 1:], FlipSettings(spectral="flattop"), label=LABEL)
    assert res.diagnostics["lip_ideal"] >= 1 - 1e-9
    assert res.released.shape == (300,)


def test_flattop_pipeline_runs():
    """Option 2 end to end: the flat-top route releases a series with LIP ~ 1 and small D_ACF."""
    w = ex.simulate(0.7, 300, np.random.default_rng(31))
    res = run(w[:, 0], w[:, 1:], FlipSettings(spectral="flattop", floor=EVERY_DATE), label=LABEL)
    assert res.diagnostics["spectral_fit"]["flattop_bandwidth"] >= 2
    assert res.diagnostics["lip_ideal"] >= 1 - 1e-9
    assert utility.d_acf(w[:, 0], res.released, 24) < 0.02


def test_near_white_spectrum_caps_shift_with_warning():
    """Spec 4.3 / P4: S <= sqrt(delta)/(pi L_R) makes B infinite; the shift is capped at 1/pi with a warning."""
    x = np.random.default_rng(5).standard_normal(300)
    res = run(x, None, FlipSettings(lip_delta=0.3, var_order=0), label=LABEL)
    assert res.diagnostics["S_sup"] < 1e-9
    assert res.secrets["shift_bound"] is None
    assert 0 < res.secrets["shift"] <= 1 / math.pi
    assert any("capped" in m and LABEL in m for m in res.warnings)


def test_report_diagnostics_hold_no_secrets():
    """Spec 4.5: R parameters, L_R, B, Delta, alpha and the taps never appear in the diagnostics."""
    rng = np.random.default_rng(6)
    w = ex.simulate(0.1, 200, rng)
    res = run(w[:, 0], w[:, 1:], FlipSettings(lip_delta=0.1))
    assert set(res.secrets) >= {"r_params", "lipschitz", "shift_bound", "shift", "alpha", "taps"}

    def keys(obj):
        if isinstance(obj, dict):
            for k, v in obj.items():
                yield k
                yield from keys(v)

    assert not set(keys(res.diagnostics)) & set(res.secrets)
    text = repr(res.diagnostics)
    for value in (res.secrets["shift"], res.secrets["alpha"], res.secrets["lipschitz"], res.secrets["taps"][45]):
        assert repr(value) not in text


def test_claim_is_lip_not_dp():
    """Spec 7: the claim is LIP with no epsilon or DP delta and says it is not differential privacy."""
    settings = FlipSettings(lip_delta=0.1, r_params=FIXED_R)
    claim = claim_for(settings, "state")
    assert claim.definition == "lip" and claim.epsilon is None and claim.delta is None
    data = claim.to_dict()
    assert "epsilon" not in data and "delta" not in data
    params = data["parameters"]
    assert params["differential_privacy"] is False
    assert params["lip_budget_delta"] == 0.1
    assert "secret" in str(params["r_range"])
    assert "not differential privacy" in NOT_DP and params["statement"] == NOT_DP
    guarantee = params["guarantee"]
    assert "same date" in guarantee and "ESTIMATED" in guarantee and params["lip_floor"] == 0.9
    assert "at least lip_floor = 0.9;" in guarantee and "withheld" in guarantee
    assert "ε" not in repr(data) and "(epsilon, delta)" not in repr(data).lower()
    assert claim.unit.id_column == "state"


# ---------------------------------------------------------------------------------------------
# Check 11 (pipeline): circular mode keeps the periodogram
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("T", [200, 151])
def test_circular_pipeline_preserves_periodogram(T):
    """Check 11: boundary = circular (d = 0) releases a series with the same periodogram, mean and sum x^2."""
    rng = np.random.default_rng(T)
    w = ex.simulate(0.7, T, rng)
    x = w[:, 0] + 12.0
    res = run(x, w[:, 1:], FlipSettings(boundary="circular", floor=EVERY_DATE))
    i_x, i_hat = utility.periodogram(x), utility.periodogram(res.released)
    assert np.max(np.abs(i_hat - i_x)) <= 1e-12 * np.max(i_x)
    assert res.released.mean() == pytest.approx(x.mean(), rel=1e-12)
    assert np.sum(res.released ** 2) == pytest.approx(np.sum(x ** 2), rel=1e-12)
    assert res.diagnostics["lip_applied_interior"] == res.diagnostics["lip_ideal"]
    assert utility.d_path(x, res.released) > 0.3


# ---------------------------------------------------------------------------------------------
# Checks 12 and 20: Example-1 Monte Carlo (T = 200, M = 45, 500 reps per rho)
# ---------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def example1_runs():
    """500 FLIP releases of Example-1 paths per rho: columns lip_applied_interior (the paper's figure:
    Def. 4 for the taps), D_path, D_ACF, var_ratio."""
    settings = FlipSettings(K=25, M=45, floor=EVERY_DATE)
    out = {}
    for rho in ex.RHOS:
        paths = ex.simulate(rho, 200, np.random.default_rng(100 + int(10 * rho)), reps=500)
        rows = []
        for rep, w in enumerate(paths):
            x = w[:, 0]
            res = flip_series(x, w[:, 1:], settings, series_generator(MASTER, rep, f"rho={rho}"))
            rows.append((res.diagnostics["lip_applied_interior"], utility.d_path(x, res.released),
                         utility.d_acf(x, res.released, 24), np.var(res.released) / np.var(x),
                         res.diagnostics["utility"]["D_path"], res.diagnostics["utility"]["D_ACF"]))
        out[rho] = np.array(rows)
    return out


@pytest.mark.slow
@pytest.mark.parametrize("rho", ex.RHOS)
def test_example1_acf_and_variance(example1_runs, rho):
    """Check 12: T=200, M=45, 100 reps: mean D_ACF < 2e-3; mean var ratio in [0.95, 1.02]."""
    rows = example1_runs[rho][:100]
    assert rows[:, 2].mean() < 2e-3
    assert 0.95 <= rows[:, 3].mean() <= 1.02
    # the report's figures are the same functions of the data (d = 0)
    np.testing.assert_allclose(rows[:, 4], rows[:, 1], rtol=1e-9)
    np.testing.assert_allclose(rows[:, 5], rows[:, 2], rtol=1e-9, atol=1e-15)


@pytest.mark.slow
@pytest.mark.parametrize("rho", ex.RHOS)
def test_example1_mean_lip(example1_runs, rho):
    """Check 20: Ex. 1, 500 reps: mean LIP(f^) > 0.99 for rho = 0.1 and 0.7."""
    assert example1_runs[rho][:, 0].mean() > 0.99


@pytest.mark.slow
def test_example1_path_distortion_low_knowledge(example1_runs):
    """Check 20: Ex. 1, rho = 0.1: P(D_path > 1) >= 0.5 and P(D_path > 0.64) > 0.6."""
    d_path = example1_runs[0.1][:, 1]
    assert np.mean(d_path > 1) >= 0.5
    assert np.mean(d_path > 0.64) > 0.6


@pytest.mark.slow
def test_example1_acf_long_series():
    """Check 12: at T = 1000 (M = 45) the mean D_ACF is < 1e-4 (30 reps)."""
    paths = ex.simulate(0.1, 1000, np.random.default_rng(1000), reps=30)
    values = []
    for rep, w in enumerate(paths):
        res = flip_series(w[:, 0], w[:, 1:], FlipSettings(floor=EVERY_DATE), series_generator(MASTER, rep, "long"))
        values.append(utility.d_acf(w[:, 0], res.released, 24))
    assert np.mean(values) < 1e-4


# ---------------------------------------------------------------------------------------------
# Check 13: D_path expectation
# ---------------------------------------------------------------------------------------------


def population_d_path(rho: float, r: BetaMixture) -> float:
    """E[D_path] = 2 (1 - <cos theta, f_X> / gamma_X(0)), theta from the true f_X|Z (spec 2.9)."""
    _, f_x, f_cond = ex.true_spectra(rho)
    theta = math.pi * r(spectral.spectral_cdf(f_cond))
    return 2 * (1 - phase.trapezoid_mean(np.cos(theta) * f_x) / ex.variance(rho))


def test_population_d_path_example1():
    """Spec 2.9: Ex.-1 with R(x)=x: E[D_path] = 1.976 (rho=0.1) and 0.903 (rho=0.7)."""
    assert abs(population_d_path(0.1, BetaMixture.identity()) - 1.976) < 1e-3
    assert abs(population_d_path(0.7, BetaMixture.identity()) - 0.903) < 1e-3


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["white", "ar1"])
def test_d_path_no_aux_tends_to_two(kind):
    """Check 13: no aux, delta = 0, T = 5000: D_path -> 2 (1 - <cos theta, f_X>/gamma_X(0)) = 2; +-0.1 (mean of 4)."""
    rng = np.random.default_rng(13)
    values = []
    for rep in range(4):
        x = rng.standard_normal(5000) if kind == "white" else ar1_path(0.6, 5000, rng)
        res = run(x, None, FlipSettings(floor=EVERY_DATE), seed=rep)
        values.append(utility.d_path(x, res.released))
    assert abs(np.mean(values) - 2.0) < 0.1


@pytest.mark.slow
def test_d_path_with_aux_matches_population():
    """Check 13: Ex.-1 rho = 0.7, R(x) = x, T = 5000: mean D_path within 0.1 of the population 0.903 (8 reps)."""
    rng = np.random.default_rng(131)
    target = population_d_path(0.7, BetaMixture.identity())
    settings = FlipSettings(r_params=BetaMixture.identity(), floor=EVERY_DATE)
    values = []
    for w in ex.simulate(0.7, 5000, rng, reps=8):
        res = run(w[:, 0], w[:, 1:], settings)
        values.append(utility.d_path(w[:, 0], res.released))
    assert abs(np.mean(values) - target) < 0.1


# ---------------------------------------------------------------------------------------------
# Check 15 (pipeline): invertibility from the secret taps
# ---------------------------------------------------------------------------------------------


def test_release_invertible_with_secret_taps():
    """Check 15: AR(1) phi=0.6, T=128, M=45, direct: reversed secret taps on the extended release recover X
    in the interior (max error < 1e-2 SD)."""
    rng = np.random.default_rng(15)
    T, M = 128, 45
    x = ar1_path(0.6, T, rng)
    res = run(x, None, FlipSettings(M=M), seed=7)
    taps = np.array(res.secrets["taps"])
    center = x.mean()
    h = np.arange(T + M + 10)
    gamma = 0.6 ** h / (1 - 0.36)
    extended, _ = filtering.extend(res.released - center, gamma, M)
    recovered = filtering.apply_taps(extended, filtering.inverse_taps(taps)) + center
    interior = slice(M, T - M)
    assert np.max(np.abs(recovered[interior] - x[interior])) < 1e-2 * np.std(x)
    assert np.max(np.abs(res.released - x)) > 0.5 * np.std(x)


# ---------------------------------------------------------------------------------------------
# Check 16: trend
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("d", [1, 3])
def test_polynomial_trend_passes_through_exactly(d):
    """Check 16: FLIP(X + p) = FLIP(X) + p for any polynomial p of degree <= d (same seed), to 1e-9 relative."""
    rng = np.random.default_rng(16 + d)
    w = ex.simulate(0.1, 200, rng)
    t = np.arange(1, 201.0)
    p = 30 + 0.05 * t if d == 1 else 30 + 0.05 * t - 2e-4 * (t - 100) ** 2 + 3e-6 * (t - 80) ** 3
    settings = FlipSettings(lip_delta=0.1, trend_order=d)
    base = run(w[:, 0], w[:, 1:], settings, seed=d)
    with_trend = run(w[:, 0] + p, w[:, 1:] + 10 + 0.06 * t[:, None], settings, seed=d)
    # the same dates are withheld (their LIP depends on the residuals only), the others move by p
    assert_same_release(with_trend.released, base.released + p, 1e-9)
    assert base.diagnostics["trend_moments"] == pytest.approx(
        coefficients.moments(np.array(base.secrets["taps"]), d)[1:].tolist())


@pytest.mark.slow
@pytest.mark.parametrize("d", [1, 3])
def test_release_minus_original_has_small_trend(d):
    """Check 16: Xhat - X has a small OLS polynomial fit of order d (Ex. 2: mu = 30 + 0.05 t, delta = 0.1).

    A stationary series' own degree-d fit has RMS ~0.3-0.4 SD at T = 200; the release's must be far below."""
    rng = np.random.default_rng(160 + d)
    t = np.arange(1, 201.0)
    ratios, slopes = [], []
    for rep, w in enumerate(ex.simulate(0.1, 200, rng, reps=20)):
        x = w[:, 0] + 30 + 0.05 * t
        z = w[:, 1] + 10 + 0.06 * t
        res = run(x, z, FlipSettings(lip_delta=0.1, trend_order=d, floor=EVERY_DATE), seed=rep)
        resid, fit = trend.detrend(res.released - x, d)
        ratios.append(np.sqrt(np.mean(fit ** 2)) / np.std(trend.detrend(x, d)[0]))
        slopes.append(np.polyfit(t, res.released - x, 1)[0])
    assert np.mean(ratios) < 0.15 and max(ratios) < 0.5
    # the slope of a T=200 stationary Ex.-1 path has SE ~0.004; the trend's own slope is 0.05
    assert max(abs(s) for s in slopes) < 0.01


# ---------------------------------------------------------------------------------------------
# Check 17: determinism and independence
# ---------------------------------------------------------------------------------------------


def test_series_generator_keys():
    """Check 17 / spec 4.6: identical keys give identical draws; a different master, entity or column does not."""
    def draws(master, entity, column):
        return series_generator(master, entity, column).integers(0, 2 ** 62, size=4).tolist()

    assert draws(MASTER, "CA", "emp") == draws(MASTER, "CA", "emp")
    others = [draws(MASTER + 1, "CA", "emp"), draws(MASTER, "MD", "emp"), draws(MASTER, "CA", "pay"),
              draws(MASTER, "emp", "CA")]
    assert all(o != draws(MASTER, "CA", "emp") for o in others)
    assert len({tuple(o) for o in others}) == len(others)


def test_series_generator_stable_across_processes():
    """Check 17: the per-series seed does not depend on Python's hash randomisation."""
    code = ("from tsdp.flip import series_generator; "
            f"print(series_generator({MASTER}, 'CA', 'emp').integers(0, 2**62, size=3).tolist())")
    outputs = set()
    for hashseed in ("1", "2"):
        env = dict(os.environ, PYTHONHASHSEED=hashseed)
        outputs.add(subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                                   check=True).stdout.strip())
    assert outputs == {str(series_generator(MASTER, "CA", "emp").integers(0, 2 ** 62, size=3).tolist())}


def test_flip_many_independent_of_other_entities_and_order():
    """Check 17: an entity's release depends only on (master, entity, column, data), not on the others or order."""
    rng = np.random.default_rng(17)
    data = {e: ex.simulate(0.7, 120, rng) for e in ("A", "B", "C")}
    items = {e: (e, "x", w[:, 0], w[:, 1:]) for e, w in data.items()}
    settings = FlipSettings(lip_delta=0.1)
    alone = flip_many([items["B"]], settings, MASTER)[0]
    together = flip_many([items["C"], items["B"], items["A"]], settings, MASTER)
    np.testing.assert_array_equal(together[1].released, alone.released)
    assert together[1].secrets == alone.secrets
    forward = flip_many([items["A"], items["B"], items["C"]], settings, MASTER)
    for got, want in zip(forward, [together[2], together[1], together[0]]):
        np.testing.assert_array_equal(got.released, want.released)
    # a rerun with the same master reproduces; another master does not
    np.testing.assert_array_equal(flip_many([items["B"]], settings, MASTER)[0].released, alone.released)
    assert not np.allclose(flip_many([items["B"]], settings, MASTER + 1)[0].released, alone.released)


def test_different_entities_get_different_filters():
    """Check 17: the same data under two entity names gets different R and Delta, hence different releases."""
    w = ex.simulate(0.1, 150, np.random.default_rng(18))
    a, b = flip_many([("A", "x", w[:, 0], w[:, 1:]), ("B", "x", w[:, 0], w[:, 1:])], FlipSettings(lip_delta=0.1),
                     MASTER)
    assert a.secrets["r_params"] != b.secrets["r_params"]
    assert a.secrets["shift"] != b.secrets["shift"]
    assert np.max(np.abs(a.released - b.released)) > 1e-3


# ---------------------------------------------------------------------------------------------
# Check 18: scale and shift invariance
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("aux,d", [(False, 0), (True, 0), (True, 1), (False, 1)])
@pytest.mark.parametrize("a,b", [(3.0, -50.0), (0.01, 100.0)])
def test_affine_equivariance(aux, d, a, b):
    """Check 18: FLIP(a X + b) = a FLIP(X) + b for a > 0 with the same seed (~1e-9 relative)."""
    rng = np.random.default_rng(180)
    w = ex.simulate(0.7, 200, rng)
    t = np.arange(200.0)
    x = w[:, 0] + (0.02 * t if d else 0.0)
    z = w[:, 1:] if aux else None
    settings = FlipSettings(lip_delta=0.1, trend_order=d)
    base = run(x, z, settings, seed=5)
    moved = run(a * x + b, z, settings, seed=5)
    assert_same_release(moved.released, a * base.released + b, 1e-9)
    assert moved.secrets["taps"] == pytest.approx(base.secrets["taps"], abs=1e-10)


def test_aux_affine_invariance():
    """Spec 2.8 step 2: rescaling or shifting an auxiliary series does not change the release."""
    w = ex.simulate(0.7, 200, np.random.default_rng(181))
    settings = FlipSettings(lip_delta=0.1)
    base = run(w[:, 0], w[:, 1:], settings, seed=6)
    moved = run(w[:, 0], 4.0 * w[:, 1:] - 2.0, settings, seed=6)
    assert_same_release(moved.released, base.released, 1e-9)

"""Accounting of Koga, Meehan and Chaudhuri 2022 (spec koga.md sections 1.4, 2.2-2.6, 5.1, 5.3.3-5.3.4).

Golden values are the spec's [R] figures; the exact profile is checked against an independent
numerical integration of the hockey-stick divergence.
"""

import itertools
import math

import numpy as np
import pytest
from scipy import integrate, stats

from tsdp.accounting import gaussian as gauss
from tsdp.accounting import timesubsampling as ts
from tsdp.errors import UsageError
from tsdp.mechanisms import filters as F

EPS, DELTA, P = 0.5, 1e-4, 0.1


def stats_for(T, sigma_g=10.0):
    return F.kernel_stats(F.gaussian_kernel(T, sigma_g))


# ------------------------------------------------------------------ 5.1.1 c(delta)

def test_classical_c_golden():
    assert ts.classical_c(1e-4) == pytest.approx(4.343612, abs=5e-7)
    assert ts.classical_c(5e-5) == pytest.approx(4.500362, abs=5e-7)


# ------------------------------------------------------------------ 2.5 / 5.1.3-5.1.5: the table

GOLDEN = [
    # name, T, I, sigma_G, I', B(I'), sigma_S, srank, alpha, delta'(alpha), sigma_F
    ("PeMS", 1800, 180, 116.551, 36, 1.835e-5, 54.004, 50.78, 0.69777, 1.254e-4, 84.261),
    ("Gowalla code", 725, 72, 73.714, 19, 1.782e-5, 39.233, 20.45, 0.68670, 1.184e-4, 52.445),
    ("Gowalla paper", 725, 73, 74.224, 19, 2.225e-5, 39.233, 20.45, 0.68670, 1.184e-4, 52.808),
    ("Foursquare code", 2126, 212, 126.488, 40, 3.064e-5, 56.926, 59.97, 0.69975, 1.267e-4, 91.704),
    ("Foursquare paper", 2126, 213, 126.786, 41, 1.527e-5, 57.633, 59.97, 0.69975, 1.267e-4, 91.920),
    ("Synth f=1", 10000, 100, 86.872, 23, 3.964e-5, 43.166, 282.09, 0.71766, 1.395e-4, 64.595),
]


@pytest.mark.parametrize("row", GOLDEN, ids=[r[0] for r in GOLDEN])
def test_golden_table(row):
    _, T, I, sigma_g, i_prime, tail, sigma_s, srank, alpha, dprime, sigma_f = row
    assert gauss.classic_sigma(EPS, DELTA, math.sqrt(I)) == pytest.approx(sigma_g, abs=5e-4)
    sub = ts.paper_subsample(EPS, DELTA, I, P, n_steps=T)
    assert sub.i_prime == i_prime
    assert sub.delta_prime == pytest.approx(tail, rel=5e-4)
    assert sub.sigma == pytest.approx(sigma_s, abs=5e-4)
    assert sub.delta_total <= DELTA
    st = stats_for(T)
    assert st.L == pytest.approx(0.028209, abs=5e-7) and st.srank == pytest.approx(srank, abs=5e-3)
    fil = ts.paper_filter(EPS, DELTA, I, P, st.L, st.srank, n_steps=T)
    assert fil.alpha == pytest.approx(alpha, abs=5e-6)
    assert fil.delta_prime == pytest.approx(dprime, rel=5e-4)
    assert fil.sigma == pytest.approx(sigma_f, abs=5e-4)
    assert ts.tropp_condition(fil.alpha, P, st.L)  # spec: holds in every configuration
    # the root: delta'(alpha) (e^{eps/alpha} - e^eps) = delta/2 to 1e-6, and never above it
    assert fil.failure_term == pytest.approx(DELTA / 2, rel=1e-6) and fil.failure_term <= DELTA / 2
    assert fil.delta_total <= DELTA
    sol = ts.solve_alpha(EPS, DELTA / 2, P, st.L, st.srank)
    assert abs(sol.residual) < 1e-9 and not sol.at_floor


SYNTH = [  # f, T, p, sigma_g, I', sigma_S, L, srank, alpha, sigma_F
    (1, 10000, 0.1000, 10.000, 23, 43.166, 0.02821, 282.09, 0.71766, 64.595),
    (1 / 2, 5000, 0.1250, 8.000, 27, 46.769, 0.03526, 176.31, 0.79015, 71.120),
    (1 / 4, 2500, 0.1500, 6.667, 30, 49.299, 0.04231, 105.79, 0.85086, 76.584),
    (1 / 8, 1250, 0.1750, 5.714, 33, 51.705, 0.04937, 61.71, 0.90117, 81.111),
    (1 / 16, 625, 0.2000, 5.000, 36, 54.004, 0.05642, 35.26, 0.94117, 84.712),
    (1 / 32, 313, 0.2250, 4.444, 39, 56.210, 0.06347, 19.87, 0.96992, 87.300),
    (1 / 64, 157, 0.2500, 4.000, 42, 58.331, 0.07052, 11.07, 0.98667, 88.808),
]


@pytest.mark.parametrize("row", SYNTH, ids=[f"f=1/{round(1 / r[0])}" for r in SYNTH])
def test_golden_synth(row):
    f, T, p, sigma_g, i_prime, sigma_s, L, srank, alpha, sigma_f = row
    I = 100
    assert 0.1 * (1 + math.log2(1 / f) / 4) == pytest.approx(p, abs=5e-5)
    sg = 10 / (1 + math.log2(1 / f) / 4)
    assert sg == pytest.approx(sigma_g, abs=5e-4)
    sub = ts.paper_subsample(EPS, DELTA, I, 0.1 * (1 + math.log2(1 / f) / 4), n_steps=T)
    assert sub.i_prime == i_prime and sub.sigma == pytest.approx(sigma_s, abs=5e-4)
    st = stats_for(T, sg)
    assert st.L == pytest.approx(L, abs=5e-6) and st.srank == pytest.approx(srank, abs=5e-3)
    fil = ts.paper_filter(EPS, DELTA, I, 0.1 * (1 + math.log2(1 / f) / 4), st.L, st.srank, n_steps=T)
    assert fil.alpha == pytest.approx(alpha, abs=5e-6)
    assert fil.sigma == pytest.approx(sigma_f, abs=5e-4)
    assert fil.failure_term == pytest.approx(DELTA / 2, rel=1e-6)
    assert ts.tropp_condition(fil.alpha, 0.1 * (1 + math.log2(1 / f) / 4), st.L)


@pytest.mark.parametrize("I, expected", [(180, 36), (72, 19), (73, 19), (212, 40), (213, 41), (100, 23)])
def test_i_prime_solver_golden(I, expected):
    assert ts.solve_i_prime(I, EPS, 5e-5, P) == expected


@pytest.mark.parametrize("p, expected", [(0.125, 27), (0.15, 30), (0.175, 33), (0.2, 36), (0.225, 39), (0.25, 42)])
def test_i_prime_solver_synth(p, expected):
    assert ts.solve_i_prime(100, EPS, 5e-5, p) == expected


def test_i_prime_solver_is_the_authors_loop():
    for I, p, eps, d in [(180, 0.1, 0.5, 5e-5), (40, 0.3, 1.0, 1e-3), (500, 0.05, 0.2, 1e-6), (7, 0.5, 0.3, 1e-2)]:
        expected = I
        for i in range(1, I + 1):
            if stats.binom.sf(i, I, p) * (math.exp(eps * math.sqrt(I / i)) - math.exp(eps)) < d:
                expected = i
                break
        assert ts.solve_i_prime(I, eps, d, p) == expected


# ------------------------------------------------------------------ 2.6 / 5.1.6: delta'(alpha)

DPRIME = {  # p: values at alpha = 0.4 ... 1.0 (None: alpha^2 < p, formula invalid)
    0.5: [None, None, None, None, 1, 1, 5.996e-1],
    0.2: [None, 1, 1, 1, 1.161e-2, 5.015e-6, 1.949e-10],
    0.1: [1, 1, 4.517e-1, 5.846e-4, 5.954e-8, 3.945e-13, 1.439e-19],
    0.05: [1, 4.325e-1, 3.828e-4, 2.031e-8, 5.187e-14, 5.274e-21, 1.806e-29],
    0.02: [6.089e-1, 3.726e-4, 9.257e-9, 7.200e-15, 1.408e-22, 5.724e-32, 4.092e-43],
    0.01: [1.703e-2, 1.141e-6, 1.900e-12, 6.059e-20, 2.971e-29, 1.853e-40, 1.244e-53],
}


@pytest.mark.parametrize("p", list(DPRIME))
def test_delta_prime_table(p):
    st = stats_for(10_000)
    alphas = np.array([0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0])
    got = ts.delta_prime(alphas, p, st.L, st.srank)
    for value, want in zip(got, DPRIME[p]):
        if want is None:
            assert math.isnan(value)
        else:
            assert float(f"{value:.4g}") == pytest.approx(want, rel=1e-3)  # 3 significant digits


def test_delta_prime_strictly_decreasing_and_alpha_for_target():
    st = stats_for(10_000)
    for p in (0.5, 0.1, 0.01):
        alphas = np.linspace(math.sqrt(p) * 1.0001, 1.0, 400)
        logs = ts.log_delta_prime(alphas, p, st.L, st.srank)
        assert np.all(np.diff(logs) < 0)
    a = ts.alpha_for_delta_prime(1e-6, 0.1, st.L, st.srank)
    assert ts.delta_prime(a, 0.1, st.L, st.srank) <= 1e-6
    assert ts.delta_prime(a - 1e-9, 0.1, st.L, st.srank) > 1e-6


# ------------------------------------------------------------------ Corollary 1 (5.1.7)

def test_hoeffding_golden_and_never_below_exact():
    assert ts.hoeffding_i_prime(180, 0.1, 1.835e-5) == pytest.approx(49.33, abs=5e-3)
    for I in (10, 50, 180, 1000):
        for p in (0.01, 0.1, 0.3, 0.7):
            for dp in (1e-2, 1e-5, 1e-9):
                exact = int(np.argmax(stats.binom.sf(np.arange(I + 1), I, p) <= dp))
                assert ts.hoeffding_i_prime(I, p, dp) >= exact


# ------------------------------------------------------------------ Proposition 1 (5.1.8)

def test_proposition1_golden():
    rows = ts.degradation_filter(EPS, DELTA / 2, 0.69777, 1.254e-4)
    want = [(1.5, 0.612, 1.20e-4), (2.0, 0.707, 1.41e-4), (4.0, 1.000, 2.35e-4)]
    for row, (c, e, d) in zip(rows, want):
        assert row["c"] == c
        assert row["epsilon"] == pytest.approx(e, abs=5e-4)
        assert row["delta"] == pytest.approx(d, rel=5e-3)


def test_no_filter_degradation_uses_the_exact_tail():
    rows = ts.degradation_subsample(EPS, DELTA / 2, 180, 36, P)
    for row in rows:
        c = row["c"]
        tail = stats.binom.sf(math.floor(c * 36), math.floor(c * 180), P)
        e = math.sqrt(c) * EPS
        term = tail * (math.exp(e * math.sqrt(180 / 36)) - math.exp(e))
        assert row["delta"] == pytest.approx(DELTA / 2 + term, rel=1e-9)
        assert row["epsilon"] == pytest.approx(e)


# ------------------------------------------------------------------ 5.3.3 binomial tail

def test_binomial_tail_by_enumeration():
    for I in (1, 5, 12):
        for p in (0.1, 0.37):
            probs = np.zeros(I + 1)
            for bits in itertools.product((0, 1), repeat=I):  # every J cap j_i
                k = sum(bits)
                probs[k] += p**k * (1 - p) ** (I - k)
            for i in range(I + 1):
                assert ts.binomial_tail(i, I, p) == pytest.approx(probs[i + 1:].sum(), rel=1e-12, abs=1e-300)


def test_binomial_tail_monotonicity():
    i = np.arange(0, 60)
    assert np.all(np.diff(ts.binomial_tail(i, 100, 0.2)) <= 0)  # nonincreasing in I'
    n = np.arange(20, 200)
    assert np.all(np.diff(ts.binomial_tail(15, n, 0.1)) >= 0)  # nondecreasing in I
    p = np.linspace(0.01, 0.99, 100)
    assert np.all(np.diff(ts.binomial_tail(15, 100, p)) >= 0)  # nondecreasing in p


# ------------------------------------------------------------------ 5.3.4 solver monotonicity

def test_solver_values_across_epsilon():
    st = stats_for(1800)
    for eps, i_prime, alpha in [(0.25, 34, 0.6855), (0.5, 36, 0.6978), (1.0, 37, 0.7129), (2.0, 40, 0.7338)]:
        assert ts.solve_i_prime(180, eps, 5e-5, P) == i_prime
        assert ts.solve_alpha(eps, 5e-5, P, st.L, st.srank).alpha == pytest.approx(alpha, abs=5e-5)


def test_i_prime_monotone():
    grid = [ts.solve_i_prime(I, EPS, 5e-5, P) for I in range(20, 400, 7)]
    assert grid == sorted(grid)
    grid = [ts.solve_i_prime(180, EPS, 5e-5, p) for p in np.linspace(0.02, 0.6, 30)]
    assert grid == sorted(grid)
    grid = [ts.solve_i_prime(180, e, 5e-5, P) for e in np.linspace(0.05, 3, 30)]
    assert grid == sorted(grid)
    grid = [ts.solve_i_prime(180, EPS, d, P) for d in np.logspace(-10, -1, 30)]
    assert grid == sorted(grid, reverse=True)


def test_alpha_monotone():
    st = stats_for(1800)
    a = [ts.solve_alpha(EPS, 5e-5, p, st.L, st.srank).alpha for p in np.linspace(0.02, 0.4, 20)]
    assert np.all(np.diff(a) >= 0)
    a = [ts.solve_alpha(e, 5e-5, P, st.L, st.srank).alpha for e in np.linspace(0.05, 3, 20)]
    assert np.all(np.diff(a) >= 0)
    a = [ts.solve_alpha(EPS, d, P, st.L, st.srank).alpha for d in np.logspace(-10, -2, 20)]
    assert np.all(np.diff(a) <= 0)
    # wider sigma_g -> smaller L -> smaller alpha
    a = [ts.solve_alpha(EPS, 5e-5, P, s.L, s.srank).alpha for s in (stats_for(1800, g) for g in (20, 10, 5, 2))]
    assert np.all(np.diff(a) >= 0)


def test_alpha_at_the_validity_floor():
    T, p, eps, delta = 64, 0.5, 0.01, 0.1
    st = stats_for(T, 1.0)
    sol = ts.solve_alpha(eps, delta / 2, p, st.L, st.srank, T)
    assert sol.at_floor and sol.alpha == pytest.approx(math.sqrt(p + st.L))
    assert sol.failure_term < delta / 2
    cal = ts.paper_filter(eps, delta, 10, p, st.L, st.srank, n_steps=T)
    assert cal.alpha_at_floor and cal.delta_total < delta


def test_alpha_validation():
    st = stats_for(1800)
    with pytest.raises(UsageError, match="--filter-alpha"):
        ts.paper_filter(EPS, DELTA, 180, P, st.L, st.srank, alpha=0.3)  # below sqrt(p)
    with pytest.raises(UsageError, match="--filter-alpha .*floor"):
        ts.paper_filter(EPS, DELTA, 180, P, st.L, st.srank, alpha=math.sqrt(P + st.L) * 0.999)
    with pytest.raises(UsageError, match="--filter-alpha"):
        ts.paper_filter(EPS, DELTA, 180, P, st.L, st.srank, alpha=1.2)
    fixed = ts.paper_filter(EPS, DELTA, 180, P, st.L, st.srank, alpha=0.8)
    assert fixed.alpha == 0.8 and fixed.delta_total < DELTA


@pytest.mark.parametrize("call, option", [
    (lambda: ts.paper_subsample(EPS, DELTA, 180, 0.0), "--sampling-rate"),
    (lambda: ts.paper_subsample(EPS, DELTA, 180, 1.5), "--sampling-rate"),
    (lambda: ts.paper_subsample(EPS, DELTA, 180, P, delta_split=1.0), "--delta-split"),
    (lambda: ts.paper_subsample(EPS, DELTA, 180, P, delta_split=0.0), "--delta-split"),
    (lambda: ts.check_participation(181, 180), "--max-steps"),
    (lambda: ts.check_participation(2.5), "--max-steps"),
    (lambda: ts.exact_subsample(EPS, 0.0, 180, P), "--delta"),
])
def test_validation_names_the_option(call, option):
    with pytest.raises(UsageError, match=option):
        call()


# ------------------------------------------------------------------ exact accounting

def hockey_stick_gaussian(eps, mu, sigma):
    """Independent: integrate max(p1 - e^eps p0, 0) for p1 = N(mu, sigma^2), p0 = N(0, sigma^2)."""
    crossing = sigma**2 * eps / mu + mu / 2  # p1 / p0 = e^eps there
    def integrand(x):
        return max(stats.norm.pdf(x, mu, sigma) - math.exp(eps) * stats.norm.pdf(x, 0, sigma), 0.0)
    value, err = integrate.quad(integrand, crossing, crossing + 40 * sigma, epsabs=1e-17, epsrel=1e-11, limit=200)
    return value


def independent_mixture_delta(eps, sigma, I, p, M=1.0):
    total = 0.0
    for k in range(1, I + 1):
        w = stats.binom.pmf(k, I, p)
        if w > 1e-30:
            total += w * hockey_stick_gaussian(eps, M * math.sqrt(k), sigma)
    return total


def test_exact_sigma_pems_and_independent_integration():
    cal = ts.exact_subsample(EPS, DELTA, 180, P, n_steps=1800)
    paper = ts.paper_subsample(EPS, DELTA, 180, P, n_steps=1800)
    assert cal.sigma <= paper.sigma / 2  # at most half the paper's 54.004
    assert cal.sigma == pytest.approx(26.086, abs=5e-3)
    independent = independent_mixture_delta(EPS, cal.sigma, 180, P)
    assert independent <= DELTA * (1 + 1e-7)
    assert independent >= DELTA * (1 - 1e-5)  # and tight
    # a slightly smaller sigma breaks the budget: the calibration is the smallest one
    assert ts.mixture_delta(EPS, cal.sigma * (1 - 1e-6), cal.mixture) > DELTA


def test_exact_delta_below_paper_delta():
    for I, T in ((180, 1800), (72, 725), (100, 10_000)):
        paper = ts.paper_subsample(EPS, DELTA, I, P, n_steps=T)
        mix = ts.subsample_mixture(I, P, n_steps=T)
        exact = ts.mixture_delta(EPS, paper.sigma, mix)
        assert exact <= paper.delta_total
    # spec 4.1: PeMS paper total 7.59e-5 vs exact about 1.9e-10
    paper = ts.paper_subsample(EPS, DELTA, 180, P, n_steps=1800)
    assert paper.delta_total == pytest.approx(7.59e-5, rel=1e-3)
    exact = ts.mixture_delta(EPS, paper.sigma, ts.subsample_mixture(180, P, n_steps=1800))
    assert exact == pytest.approx(1.9e-10, rel=0.05)
    assert independent_mixture_delta(EPS, paper.sigma, 180, P) == pytest.approx(exact, rel=1e-6)


def test_exact_sigma_with_substitution_and_per_step_cap():
    cal = ts.exact_subsample(0.8, 1e-6, 50, 0.2, M=3.0, n_steps=500)
    independent = independent_mixture_delta(0.8, cal.sigma, 50, 0.2, M=3.0)
    assert 1e-6 * (1 - 1e-5) <= independent <= 1e-6 * (1 + 1e-7)


@pytest.mark.parametrize("T, series", [(20_000, 1), (60, 7), (60, 150)])
def test_mixture_truncation_keeps_an_upper_bound(T, series):
    """The truncated mixture, evaluated only where it keeps mass (its ends by bisection), against the
    whole law: never below it, and within 1e-6 (a unit of 5000 cells over 1, 7 or 150 series; with
    T = 60 and p = 0.1 each series' redraw weighs r = 1.0018)."""
    full = ts.subsample_mixture(5000, 0.1, n_steps=T, series=series)
    cut = ts.subsample_mixture(5000, 0.1, n_steps=T, truncation=1e-14, series=series)
    assert full.weights.size == 5001 and full.weights.sum() == pytest.approx(1.0, abs=1e-12)
    assert cut.weights.size < full.weights.size / 5
    assert cut.weights.sum() == pytest.approx(1.0, abs=1e-12) and cut.counts[-1] == 5000
    assert np.all(np.diff(cut.counts) > 0) and np.all(cut.weights >= 0)
    for sigma in (30.0, 60.0, 120.0):
        for eps in (0.1, 0.5, 2.0):
            a, b = ts.mixture_delta(eps, sigma, cut), ts.mixture_delta(eps, sigma, full)
            assert a >= b * (1 - 1e-12)
            assert a <= b * (1 + 1e-6) + 1e-14


def test_i_prime_by_bisection_is_the_first_that_qualifies():
    """solve_i_prime bisects; the first qualifying i of a full scan is the same."""
    for I, eps, p, T, series in ((180, 0.5, 0.1, 1800, 1), (60, 1.0, 0.2, 24, 3), (2000, 0.3, 0.05, 400, 5)):
        i = np.arange(1, I + 1, dtype=float)
        term = ts.log_unit_tail(i, I, p, T, series) + ts.log_exp_gap(eps, eps * np.sqrt(I / i))
        ok = np.flatnonzero(term < math.log(1e-6))
        assert ts.solve_i_prime(I, eps, 1e-6, p, T, series) == int(i[ok[0]])


def test_redraw_conditioning_by_enumeration():
    T, I, p = 8, 3, 0.2
    probs = np.zeros(I + 1)
    empty = 0.0
    for bits in itertools.product((0, 1), repeat=T):
        w = np.prod([p if b else 1 - p for b in bits])
        if not any(bits):
            empty += w
            continue
        probs[sum(bits[:I])] += w  # j_i = the first I steps
    probs /= 1 - empty
    mix = ts.subsample_mixture(I, p, n_steps=T)
    np.testing.assert_allclose(mix.weights, probs, rtol=1e-12)
    assert ts.empty_probability(T, p) == pytest.approx(empty)
    # Theorem 2's failure probability conditioned on J != {}
    for i in range(I):
        assert ts.binomial_tail(i, I, p) * ts.redraw_inflation(T, p) == pytest.approx(probs[i + 1:].sum())


def _conditioned_law(cells: int, T: int, p: float) -> np.ndarray:
    """Law of the sampled cells among the first ``cells`` of one series, J conditioned non-empty,
    by enumerating every J of T steps (independent of tsdp's formulas)."""
    law, empty = np.zeros(cells + 1), 0.0
    for bits in itertools.product((0, 1), repeat=T):
        w = np.prod([p if b else 1 - p for b in bits])
        if not any(bits):
            empty += w
        else:
            law[sum(bits[:cells])] += w
    return law / (1 - empty)


def _spreads(cells: int, series: int, T: int):
    """Every way to put ``cells`` changed cells into at most ``series`` series of T steps."""
    def parts(left, most, room):
        if left == 0:
            yield ()
            return
        if room == 0:
            return
        for c in range(min(left, most, T), 0, -1):
            for rest in parts(left - c, c, room - 1):
                yield (c,) + rest
    return list(parts(cells, cells, series))


@pytest.mark.parametrize("T, p", [(4, 0.2), (6, 0.1), (5, 0.35)])
def test_unit_sample_law_dominates_every_spread_by_enumeration(T, p):
    """For every spread of C cells over at most n series (each J conditioned non-empty, enumerated),
    Pr[k >= j] is at most the dominating law's tail; n = 1 is the exact conditioned law, and when
    n = C the top tail p^C r^C is reached by one cell in each series."""
    for cells in range(1, 6):
        for series in range(-(-cells // T), cells + 1):  # (at most T cells fit in one series)
            bound = np.cumsum(ts.unit_sample_law(cells, p, T, series)[::-1])[::-1]
            worst = np.zeros(cells + 1)
            for spread in _spreads(cells, series, T):
                law = np.array([1.0])
                for c in spread:
                    law = np.convolve(law, _conditioned_law(c, T, p))
                tail = np.cumsum(law[::-1])[::-1]
                worst = np.maximum(worst, np.pad(tail, (0, cells + 1 - tail.size)))
            assert np.all(worst <= bound * (1 + 1e-12)), (cells, series, worst, bound)
            if series == 1:
                np.testing.assert_allclose(bound, worst, rtol=1e-12)
            if series == cells and cells <= T:
                assert bound[-1] == pytest.approx(worst[-1], rel=1e-12)


def test_unit_tail_matches_the_law():
    for cells, series in ((12, 1), (12, 4), (30, 30)):
        pmf = ts.unit_sample_law(cells, 0.15, 20, series)
        for i in range(cells + 1):
            assert math.exp(ts.log_unit_tail(i, cells, 0.15, 20, series)) == pytest.approx(pmf[i + 1:].sum(),
                                                                                           rel=1e-9, abs=1e-300)


def test_joint_calibration_over_series_against_a_pld_composition():
    """K = 3 series of 180 cells each: the joint calibration covers the concentrated pattern as an
    independent route computes it (each series' exact conditioned mixture, composed by a pessimistic
    PLD), and beats basic composition."""
    from tsdp.accounting.pld import pld_from_profile, tail_mass_for
    from tsdp.accounting.profiles import GaussianMixtureProfile

    cal = ts.exact_subsample(EPS, DELTA, 3 * 180, P, n_steps=1800, series=3)
    basic = ts.exact_subsample(EPS / 3, DELTA / 3, 180, P, n_steps=1800)
    single = ts.exact_subsample(EPS, DELTA, 180, P, n_steps=1800)
    assert single.sigma < cal.sigma <= basic.sigma
    assert cal.epsilon_at_sigma <= EPS

    def composed(sigma):
        mix = ts.subsample_mixture(180, P, n_steps=1800)
        profile = GaussianMixtureProfile(tuple(mix.weights.tolist()), tuple((mix.sensitivities / sigma).tolist()))
        return pld_from_profile(profile, 1e-4).self_compose(3, tail_mass_for(DELTA)).epsilon(DELTA)

    assert composed(cal.sigma) <= EPS * (1 + 1e-3)
    assert composed(cal.sigma * 0.99) > EPS  # and the joint figure is near-tight


def test_exact_joint_without_sampling_is_the_gaussian():
    # p = 1: every component is k = I: one Gaussian with sqrt(I), whatever the series
    for series in (1, 4):
        cal = ts.exact_subsample(1.0, 1e-5, 80, 1.0, n_steps=100, series=series)
        assert cal.sigma == pytest.approx(gauss.analytic_sigma(1.0, 1e-5, math.sqrt(80)), rel=1e-9)


def test_exact_degradation_and_mixture_epsilon():
    cal = ts.exact_subsample(EPS, DELTA, 180, P, n_steps=1800)
    assert ts.mixture_epsilon(DELTA, cal.sigma, cal.mixture) == pytest.approx(EPS, abs=1e-9)
    rows = ts.exact_degradation(cal.sigma, DELTA, 180, P, 1.0, 1800)
    eps = [r["epsilon"] for r in rows]
    assert EPS < eps[0] < eps[1] < eps[2]
    for row in rows:  # about sqrt(c) epsilon: no cliff
        assert row["epsilon"] <= 1.1 * math.sqrt(row["c"]) * EPS and row["delta"] == DELTA


def test_joint_paper_calibration_of_a_large_unit_is_finite_and_quiet():
    """A unit over 200 series of 8760 steps (1.75 M cells): Corollary 3's exponent eps sqrt(I/I')
    reaches 1300 at I' = 1, where e^x overflows; the failure term is computed in logs and stays finite,
    with no floating-point warning (which the CLI would print)."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        cal = ts.paper_subsample(1.0, 1e-6, 200 * 8760, 0.1, n_steps=8760, series=200)
    assert math.isfinite(cal.sigma) and 0 < cal.delta_total <= 1e-6
    assert float(ts.log_exp_gap(1.0, 1300.0)) == pytest.approx(1300.0)

"""The hardened sampler of ``subsample`` and ``filter-subsample`` seen by an attacker (issue 17).

With ``sampler="hardened"`` the kept (optionally circularly filtered) values are rounded to
multiples of a power-of-two granularity g and get g times exact discrete Gaussian noise of parameter
sigma / g; the claims use the sensitivities of the ROUNDED values: ``M' = (floor(M / g) + 1) g`` per
kept cell without filter, ``M s_J sqrt(I) + g sqrt(n_s)`` for the conditional filter accounting,
``M' = M + g sqrt(T) / (alpha sqrt(I))`` for the paper's filter accounting.

What is checked, as an attacker would: the released kept values sit on the lattice and their noise
is an integer number of steps (1); that integer noise has the discrete Gaussian law of the stated
sigma, per series when the sigmas differ (2); neighbours built as the privacy unit allows, with
values parked next to rounding boundaries, never move the rounded kept values by more than the
claimed rounded sensitivity, while they do exceed the unrounded one (3); an empirical audit of a
tiny panel stays below the claimed epsilon and refutes the same noise calibrated without the
rounding (4); and ``verify`` accepts the genuine hardened reports but not one edited field (5).
Statistical checks use fixed seeds and a two-sided tail of 1e-6.
"""

from __future__ import annotations

import copy
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from tsdp.accounting import audit
from tsdp.accounting import timesubsampling as ts
from tsdp.verify import verify_report as verify_with_output
from tsdp.errors import DataError, UsageError
from tsdp.mechanisms import filters as F
from tsdp.mechanisms import subsample as sm
from tsdp.mechanisms.baseline import Panel
from tsdp.mechanisms.noise import snap
from tsdp.report import Report

# The discrete noise may add (1 + e^eps) m 0.025 (g / sigma)^2 to delta for m changed values (the rounding
# slack, tsdp.accounting.discrete), and a release refuses a lattice whose slack takes half of delta. The
# coarse lattices below are chosen so that it does not; tests that need a coarser lattice relative to the
# noise pass their own (epsilon, delta).
EPS, DELTA = 1.0, 1e-2
TAIL = 1e-6
FILTER_SIGMA = 3.0
CASES = [("subsample", "exact"), ("subsample", "paper"),
         ("filter-subsample", "conditional"), ("filter-subsample", "paper")]


def panel(S, T, I, M=1.0, relation="add-remove", K=1):
    return Panel(S, T, sm.participation_bounds(T, I, max_per_step=M, neighbouring=relation, series_per_unit=K))


def release(mechanism, accounting, x, pan, seed, p=0.5, eps=EPS, delta=DELTA, **kw):
    rng = np.random.default_rng(seed)
    if mechanism == "subsample":
        return sm.release_subsample(x, pan, eps, delta, rng, p, accounting=accounting, emit_indices=True, **kw)
    return sm.release_filter_subsample(x, pan, eps, delta, rng, p, accounting=accounting, filter_sigma=FILTER_SIGMA,
                                       emit_indices=True, **kw)


def sampled_values(mechanism, x):
    """The values the mechanism samples from: x itself, or its circular filter."""
    if mechanism == "subsample":
        return np.asarray(x, dtype=float)
    h, _, _ = sm.resolve_kernel("gaussian", x.shape[-1], FILTER_SIGMA)
    return F.circular_filter(x, h)


def kept(rel):
    return [np.asarray(j, dtype=int) for j in rel.claim.parameters["subsampling"]["indices"]]


def lattice_noise(rel, y, g):
    """Per series, the noise at the kept steps in lattice steps: (release - snap(y, g)) / g."""
    out = rel.values.reshape(y.shape)
    return [(out[s, J] - snap(y[s, J], g)) / g for s, J in enumerate(kept(rel))]


def is_integer(a):
    return bool(np.all(np.isfinite(a)) and np.array_equal(a, np.rint(a)))


# ------------------------------------------------------------------ 1. the lattice

# 2^-4: at 2^-3 the rounding slack of the 64 filtered values a unit changes would take half of DELTA
@pytest.mark.parametrize("granularity", [None, 2.0 ** -4])
@pytest.mark.parametrize("mechanism,accounting", CASES)
def test_kept_values_and_their_noise_lie_on_the_lattice(mechanism, accounting, granularity):
    x = np.random.default_rng(3).uniform(-50, 50, (4, 64))
    rel = release(mechanism, accounting, x, panel(4, 64, 8), seed=4, granularity=granularity)
    params = rel.claim.parameters
    g = params["granularity"]
    assert params["sampler"] == "hardened" and g == (granularity or g) and math.frexp(g)[0] == 0.5
    for s, J in enumerate(kept(rel)):
        assert is_integer(rel.values[s, J] / g)  # dividing by a power of two is exact
    noise = lattice_noise(rel, sampled_values(mechanism, x), g)
    assert all(is_integer(k) for k in noise)
    assert np.concatenate(noise).std() > 1  # real noise, not a constant shift

    # negative control: the float sampler's kept values are off the lattice
    float_rel = release(mechanism, accounting, x, panel(4, 64, 8), seed=4, sampler="float")
    assert not all(is_integer(k) for k in lattice_noise(float_rel, sampled_values(mechanism, x), g))


# ------------------------------------------------------------------ 2. the noise's law

def dg_pmf(scale, support):
    """Discrete Gaussian pmf of parameter ``scale`` on ``support`` (its mass outside is below 1e-300)."""
    w = np.exp(-0.5 * (support / scale) ** 2)
    return w / w.sum()


def chi2_pvalue(k, scales, counts):
    """Pearson chi-square p-value of the integers ``k`` against the mixture of discrete Gaussians
    with ``counts[i]`` draws of parameter ``scales[i]`` (expected counts add); tails are pooled
    until every bin expects at least 5 draws."""
    R = int(math.ceil(40 * max(scales)))
    support = np.arange(-R, R + 1)
    expected = sum(n * dg_pmf(s, support) for s, n in zip(scales, counts))
    observed = np.bincount(np.clip(k.astype(int), -R, R) + R, minlength=support.size).astype(float)
    core = np.flatnonzero(expected >= 5)
    lo, hi = core[0] + 1, core[-1] - 1  # the outermost large bins absorb the tails
    e = np.concatenate([[expected[:lo].sum()], expected[lo:hi], [expected[hi:].sum()]])
    o = np.concatenate([[observed[:lo].sum()], observed[lo:hi], [observed[hi:].sum()]])
    assert o.sum() == k.size and abs(e.sum() - k.size) < 1e-6 * k.size
    stat = float(np.sum((o - e) ** 2 / e))
    return float(stats.chi2.sf(stat, e.size - 1))


# (mechanism, accounting, T, g, delta): sigma / g between 8 and 30, about 10^4 kept cells, the rounding
# slack below half of delta (the filter's conditional accounting pays it for all T = 40 values a unit
# changes, hence its larger delta; the filter's paper accounting pays it in both Gaussian branches)
LAW_CASES = [("subsample", "exact", 40, 0.25, DELTA), ("subsample", "paper", 40, 1.0, DELTA),
             ("filter-subsample", "conditional", 40, 0.125, 0.1), ("filter-subsample", "paper", 16, 4.0, 0.05)]


@pytest.mark.parametrize("mechanism,accounting,T,g,delta", LAW_CASES)
def test_noise_at_kept_steps_is_discrete_gaussian_of_the_stated_sigma(mechanism, accounting, T, g, delta):
    S = 20_000 // T
    x = np.random.default_rng(5).uniform(-50, 50, (S, T))
    rel = release(mechanism, accounting, x, panel(S, T, 4), seed=6, granularity=g, delta=delta)
    params = rel.claim.parameters
    sigmas = np.asarray(params["noise"].get("sigma_per_series") or [params["sigma"]] * S)
    assert params["granularity"] == g and 8 <= sigmas.min() / g and sigmas.max() / g <= 30
    noise = lattice_noise(rel, sampled_values(mechanism, x), g)
    counts = [k.size for k in noise]
    k = np.concatenate(noise)
    assert k.size >= 8000
    scales = sigmas / g
    assert chi2_pvalue(k, scales, counts) > TAIL
    # teeth: the same statistic rejects a sigma 10 % too large, and rounded continuous noise of it
    assert chi2_pvalue(k, 1.1 * scales, counts) < TAIL
    wide = np.rint(np.random.default_rng(7).normal(0.0, np.repeat(1.1 * scales, counts)))
    assert chi2_pvalue(wide, scales, counts) < TAIL
    if mechanism == "filter-subsample" and accounting == "conditional":
        # the per-series sigmas differ (each series' n_s enters its rounded sensitivity), and a
        # single sigma for all, the largest stated one, is rejected
        assert sigmas.max() / sigmas.min() > 1.3
        assert chi2_pvalue(k, np.full(S, scales.max()), counts) < TAIL


# ------------------------------------------------------------------ 3. worst-case neighbours

TINY = 2.0 ** -20  # in lattice steps: far above float error, far below a step


def user_pair(rng, S, T, I, M, relation, boundary, g, constant_base=False):
    """(x, x', s, changed): panels of a user's data set and its neighbour, which differ in series s only.

    The other users' sum is ``base``; the user adds at most M at each of at most I steps (its steps
    and amounts are drawn); add-remove drops the user, substitution replaces it by another such user.
    ``boundary``: every contribution is exactly M and the base is parked just below a half-lattice
    point (so the larger side rounds up, the smaller down: the rounding adds a whole step).
    """
    base = rng.uniform(-20, 20, (S, T))
    if boundary:
        base = (np.floor(base / g) + 0.5 - TINY) * g
    if constant_base:  # the filter keeps a constant: y = A base = base
        base[:] = base[0, 0]
    s = int(rng.integers(S))

    def contribution():
        c = np.zeros(T)
        steps = rng.choice(T, size=int(rng.integers(1, I + 1)), replace=False)
        c[steps] = M if boundary else rng.uniform(0, M, steps.size)
        return c

    x, x2 = base.copy(), base.copy()
    x[s] += contribution()
    if relation == "substitute":
        x2[s] += contribution()
    return x, x2, s, np.flatnonzero(x[s] != x2[s])


# The neighbour tests check sensitivities, which do not depend on delta: at this delta the rounding slack
# of up to 24 changed values stays below half of it even at sigma / g = 8 (0.035 < 0.05), so the lattice
# is as coarse as the noise allows.
NEIGHBOUR_DELTA = 0.1


def coarsest_lattice(mechanism, accounting, pan, seed, p, g):
    """The coarsest of g, g/2, ... that the noise spans 8 times (sigma / g >= 8); the claim does not
    depend on the values, so zeros stand in for them."""
    zeros = np.zeros((pan.n_series, pan.n_steps))
    while True:
        try:
            release(mechanism, accounting, zeros, pan, seed, p=p, granularity=g, delta=NEIGHBOUR_DELTA)
            return g
        except UsageError as err:
            # refused as too coarse for the noise, or for the rounding slack it would add to delta
            assert "too coarse" in str(err) or "use a finer --granularity" in str(err)
            g /= 2


NEIGHBOURS = dict(T=st.integers(4, 24), S=st.integers(1, 3), frac=st.floats(0, 1), M=st.floats(0.01, 50),
                  relation=st.sampled_from(["add-remove", "substitute"]), p=st.floats(0.2, 0.9),
                  boundary=st.booleans(), shift=st.integers(0, 3), seed=st.integers(0, 2**32 - 1))


@settings(max_examples=200, deadline=None, derandomize=True)
@given(accounting=st.sampled_from(["exact", "paper"]), **NEIGHBOURS)
def test_subsample_rounded_neighbours_stay_within_the_rounded_sensitivity(accounting, T, S, frac, M, relation, p,
                                                                           boundary, shift, seed):
    I = max(1, round(frac * T))
    g0 = 2.0 ** (math.ceil(math.log2(M)) + 1 - shift)  # coarser than M unless shifted: rounding matters
    pan = panel(S, T, I, M, relation)
    g = coarsest_lattice("subsample", accounting, pan, seed, p, g0)
    x, x2, s, changed = user_pair(np.random.default_rng(seed), S, T, I, M, relation, boundary, g)
    rel = release("subsample", accounting, x, pan, seed, p=p, granularity=g, delta=NEIGHBOUR_DELTA)
    M_r = rel.claim.parameters["sensitivity"]["rounded_per_step"]
    assert M_r == (math.floor(M / g) + 1) * g
    I_eff = rel.claim.parameters["assumption"]["I_effective"]
    assert changed.size <= I_eff
    J = kept(rel)[s]
    k = np.intersect1d(J, changed).size
    moved = np.linalg.norm(snap(x[s, J], g) - snap(x2[s, J], g))
    assert moved <= M_r * math.sqrt(k) * (1 + 1e-12)
    assert moved <= rel.claim.parameters["sensitivity"]["rounded_l2_worst_case"] * (1 + 1e-12)
    if accounting == "exact":  # so does the event's largest mixture component
        assert max(c for _, c in rel.claim.events[0].mixture) >= moved * (1 - 1e-12)
    if boundary and (M / g) % 1 > 2 * TINY:  # the attacker attains the claim: M sqrt(k) is exceeded
        assert moved == pytest.approx(M_r * math.sqrt(k), rel=1e-12)


@settings(max_examples=200, deadline=None, derandomize=True)
@given(accounting=st.sampled_from(["conditional", "paper"]), **NEIGHBOURS)
def test_filter_rounded_neighbours_stay_within_the_rounded_sensitivity(accounting, T, S, frac, M, relation, p,
                                                                        boundary, shift, seed):
    """Conditional: the series' ``rounded_l2_conditional`` for the drawn J. Paper: its worst case
    ``M' sqrt(I)`` (its high-probability branch ``alpha M' sqrt(I)`` holds only with probability
    1 - delta' over J, so no single J can be checked against it)."""
    I = max(1, round(frac * T))
    g0 = 2.0 ** (math.ceil(math.log2(M)) + 4 - shift)  # the rounding term g sqrt(n_s) dominates
    pan = panel(S, T, I, M, relation)
    g = coarsest_lattice("filter-subsample", accounting, pan, seed, p, g0)
    x, x2, s, changed = user_pair(np.random.default_rng(seed), S, T, I, M, relation, boundary, g,
                                  constant_base=boundary)
    rel = release("filter-subsample", accounting, x, pan, seed, p=p, granularity=g, delta=NEIGHBOUR_DELTA)
    assert changed.size <= rel.claim.parameters["assumption"]["I_effective"]
    J = kept(rel)[s]
    y, y2 = sampled_values("filter-subsample", x), sampled_values("filter-subsample", x2)
    moved = np.linalg.norm(snap(y[s, J], g) - snap(y2[s, J], g))
    sens = rel.claim.parameters["sensitivity"]
    if accounting == "conditional":
        # each series' sensitivity grows by the same share, which covers g sqrt(n_s) in every series
        a = M * np.array(sens["s_J"])
        share = ts.rounding_share(a, np.array(rel.claim.parameters["subsampling"]["n_sampled"]),
                                  rel.claim.parameters["assumption"]["I_effective"],
                                  rel.claim.parameters["assumption"]["series"], g)
        np.testing.assert_allclose(sens["rounded_l2_conditional"], np.array(sens["l2_conditional"]) * (1 + share),
                                   rtol=1e-12)
        assert sens["rounded_l2_conditional"][s] >= (sens["l2_conditional"][s] + g * math.sqrt(J.size)) * (1 - 1e-12)
        assert moved <= sens["rounded_l2_conditional"][s] * (1 + 1e-12)
    else:
        assert moved <= sens["rounded_l2_worst_case"] * (1 + 1e-12)


def test_rounding_bites_without_filter():
    """Values parked below half-lattice points, each moved by M = 1.25 g: every kept changed cell
    moves by 2 g = M' exactly, so the claim is attained and M sqrt(k) is exceeded. (delta 0.05: the
    rounding slack of the 16 changed values at sigma / g about 9 stays below half of it.)"""
    T, g, M = 16, 1.0, 1.25
    base = np.full(T, (0.5 - TINY) * g)
    x, x2 = base + M, base  # the user is at every step (I = T); the neighbour drops it
    rel = release("subsample", "exact", x, panel(1, T, T, M), seed=8, granularity=g, delta=0.05)
    M_r = rel.claim.parameters["sensitivity"]["rounded_per_step"]
    J = kept(rel)[0]
    moved = np.linalg.norm(snap(x[J], g) - snap(x2[J], g))
    assert M_r == 2 * g and moved == pytest.approx(M_r * math.sqrt(J.size), rel=1e-12)
    assert moved > 1.5 * M * math.sqrt(J.size)
    # a tie rounds to even: 0.5 g -> 0 but 1.5 g -> 2 g, so a change M = g moves a cell by 2 g = M' too
    M_tie = g
    assert snap(np.array([0.5 * g + M_tie]), g) - snap(np.array([0.5 * g]), g) == 2 * g == (M_tie // g + 1) * g


def test_rounding_bites_after_the_filter():
    """A constant base below a half-lattice point, a user adding M = g/4 at two steps: the filter
    spreads the small change over many kept steps and each of them rounds up by a whole step, far
    beyond the unrounded ``M s_J sqrt(I)`` but within ``+ g sqrt(n_s)``. (epsilon 0.3, delta 0.1: the
    rounding slack of the T = 32 filtered values a unit changes stays below half of delta on a lattice
    g = 4 M, sigma / g about 8.)"""
    T, g, M, I = 32, 1.0, 0.25, 2
    base = np.full(T, (0.5 - TINY) * g)
    x, x2 = base.copy(), base.copy()
    x[10:12] += M
    rel = release("filter-subsample", "conditional", x, panel(1, T, I, M), seed=9, granularity=g, eps=0.3,
                  delta=0.1)
    J = kept(rel)[0]
    y, y2 = sampled_values("filter-subsample", x), sampled_values("filter-subsample", x2)
    moved = np.linalg.norm(snap(y[J], g) - snap(y2[J], g))
    sens = rel.claim.parameters["sensitivity"]
    assert moved > 2 * sens["l2_conditional"][0]
    assert moved <= sens["rounded_l2_conditional"][0]


# ------------------------------------------------------------------ 4. empirical audit

def test_audit_of_a_tiny_hardened_panel_stays_below_the_claim():
    """1 series, T = 8, I = T, p = 0.5, M = 1 on a lattice g = 2 (sigma / g about 8), the base parked
    below half-lattice points so that removing the user moves every rounded cell by 2 = M'.

    N seeded runs per side, drawn with the mechanism's own pieces (``draw_sample_mask`` with N rows
    for N independent runs, ``_noisy_interpolation``): ``release_subsample`` per run would be far
    slower. The statistic is the exact log-likelihood ratio of what is released at the kept steps
    (for lattice shifts the discrete Gaussian's normalisers cancel: the Gaussian formula is exact).
    The same noise calibrated for M instead of M' is refuted by the same audit.

    epsilon 0.3, delta 0.02: the unit changes 8 values, and on a lattice this coarse the rounding slack
    is bounded at sigma / g = 8, (1 + e^0.3) 8 0.025 / 8^2 = 0.0073 < delta / 2; at epsilon 1 it would
    be 0.0116, which needs delta > 0.023, where sigma / g falls below 8 (g = 2 too coarse). A lower bound
    above 0.2 is now two thirds of the claim; the control's sigma is below half of the claimed one."""
    EPS, DELTA = 0.3, 0.02
    T, p, M, g, N = 8, 0.5, 1.0, 2.0, 400_000
    base = np.full(T, (0.5 - TINY) * g)
    x, x2 = base + M, base
    rel = sm.release_subsample(x, Panel(1, T, sm.participation_bounds(T, assume_none=True, max_per_step=M)), EPS,
                               DELTA, np.random.default_rng(0), p, granularity=g)
    sigma = rel.claim.parameters["sigma"]
    assert rel.claim.parameters["sensitivity"]["rounded_per_step"] == 2.0 and 8 <= sigma / g < 9
    a, b = snap(x, g), snap(x2, g)
    assert np.all(a - b == 2.0)

    def llr(values, s, seed):
        rng = np.random.default_rng(seed)
        mask, _ = sm.draw_sample_mask(rng, N, T, p)
        out = sm._noisy_interpolation(np.tile(values, (N, 1)), mask, np.full(N, s), rng, g)
        return audit.gaussian_llr(np.where(mask, out, np.nan), a, b, s)

    bound = audit.epsilon_lower_bound(llr(x, sigma, 1), llr(x2, sigma, 2), delta=DELTA)
    assert bound.bound == "lower" and 0.2 < bound.eps_lower < rel.claim.epsilon, bound.describe()
    unrounded = ts.exact_subsample(EPS, DELTA, T, p, M, T, 1).sigma  # ignores the rounding
    assert unrounded < sigma
    broken = audit.epsilon_lower_bound(llr(x, unrounded, 3), llr(x2, unrounded, 4), delta=DELTA)
    assert broken.refutes(EPS), broken.describe()


# ------------------------------------------------------------------ 5. verify

def report_of(mechanism, accounting, granularity=2.0 ** -4):
    S, T, I, M = 3, 60, 6, 2.0
    pan = panel(S, T, I, M, K=None)
    x = np.random.default_rng(0).uniform(0, 10, (S, T))
    kw = {} if mechanism == "subsample" else {"filter_sigma": FILTER_SIGMA}
    make = sm.release_subsample if mechanism == "subsample" else sm.release_filter_subsample
    rel = make(x, pan, EPS, DELTA, np.random.default_rng(1), 0.2, accounting=accounting, granularity=granularity, **kw)
    b = pan.bounds
    params = {"mechanism": mechanism, "epsilon": EPS, "delta": DELTA, "unit": b.level, "max_per_step": M,
              "max_steps": I, "w": None, "series_per_user": None, "neighbouring": b.neighbouring,
              "assume_none": False, "layout": "wide", "user_col": None, "value_bound": None, "fast_preset": None,
              "sampling_rate": 0.2}
    return Report(command="release", parameters=params, claim=rel.claim,
                  output={"file": "out.csv", "format": "csv", "sha256": "0" * 64}, randomness="os-entropy",
                  grid={"n_series": S, "n_steps": T}).to_dict()


@pytest.fixture(scope="module")
def reports():
    return {case: report_of(*case) for case in CASES}


def _halve_granularity(d):
    d["claim"]["parameters"]["granularity"] /= 2


def _halve_event_granularity(d):
    d["claim"]["events"][0]["granularity"] /= 2


def _unrounded_step(d):
    sens = d["claim"]["parameters"]["sensitivity"]
    sens["rounded_per_step"] = d["claim"]["unit"]["max_per_step"]


def _unrounded_conditional(d):  # in a series that does not set the event (only the stated figure can tell)
    sens = d["claim"]["parameters"]["sensitivity"]
    s = int(np.argmin(sens["rounded_l2_conditional"]))
    sens["rounded_l2_conditional"][s] = sens["l2_conditional"][s]


def _continuous_event(d):  # a forger's consistent edit: the continuous kind, no lattice
    event = d["claim"]["events"][0]
    event["kind"] = event["kind"].removeprefix("discrete-")
    del event["granularity"]


def _continuous_kind_only(d):
    event = d["claim"]["events"][0]
    event["kind"] = event["kind"].removeprefix("discrete-")


def _unrounded_mixture(d):
    event = d["claim"]["events"][0]
    M, M_r = d["claim"]["unit"]["max_per_step"], d["claim"]["parameters"]["sensitivity"]["rounded_per_step"]
    event["mixture"] = [[w, c * M / M_r] for w, c in event["mixture"]]
    event["sensitivity"] *= M / M_r


TAMPERS = {
    ("subsample", "exact"): [_halve_granularity, _halve_event_granularity, _unrounded_step, _continuous_event,
                             _continuous_kind_only, _unrounded_mixture],
    ("subsample", "paper"): [_halve_granularity, _unrounded_step],
    ("filter-subsample", "conditional"): [_halve_granularity, _halve_event_granularity, _unrounded_conditional,
                                          _continuous_event, _continuous_kind_only],
    ("filter-subsample", "paper"): [_halve_granularity, _unrounded_step],
}


@pytest.mark.parametrize("case", CASES)
def test_genuine_hardened_reports_verify(reports, case):
    data = copy.deepcopy(reports[case])
    assert data["claim"]["parameters"]["sampler"] == "hardened"
    result = verify_with_output(data, output_check=False)  # the claim alone
    assert result.passed, [c for c in result.checks if not c.passed]
    assert {c.name: c.passed for c in result.checks}["sampler"]


@pytest.mark.parametrize("case,tamper", [(c, t) for c, ts_ in TAMPERS.items() for t in ts_],
                         ids=lambda v: v.__name__.strip("_") if callable(v) else "-".join(v))
def test_one_edited_hardened_field_fails_verification(reports, case, tamper):
    data = copy.deepcopy(reports[case])
    tamper(data)
    assert data != reports[case]
    try:
        result = verify_with_output(data, output_check=False)  # the claim alone
    except DataError:
        return  # no longer a parseable claim (a continuous event carrying a lattice)
    assert not result.passed, f"{case}: {tamper.__name__} went unnoticed"

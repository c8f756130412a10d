"""The estimate_groups / claim_for contract: settings validation (spec 4 rules 3, 6-8), M-T2,
M-T5, M-T10, M-T11 (determinism), per-group errors and degenerate cases (M-P12)."""

from __future__ import annotations

import math
import re

import numpy as np
import pytest

from tsdp.errors import DataError, UsageError
from tsdp.mean import (
    NEIGHBOURING,
    GroupDataError,
    GroupUsageError,
    MeanSettings,
    claim_for,
    estimate_groups,
    participation_epsilon,
    prepare_groups,
    release_prepared,
)
from tsdp.mean.algorithms import release
from tsdp.mean.grouping import layout
from tsdp.mean.itms_surrogate import ITMS_SURROGATE_COUNTS
from tsdp.mean.synthetic import flat_layout, split_users, synth_values

U = 65.0
COMBOS = [("baseline", "bestfit")] + [(a, g) for a in ("array-averaging", "levy", "quantile")
                                      for g in ("bestfit", "wraparound")]


def random_groups(rng, n_groups=50, lower=0.0, upper=U, max_users=40):
    counts = [rng.integers(1, 90, rng.integers(1, max_users)) for _ in range(n_groups)]
    return counts, [[rng.uniform(lower, upper, m) for m in c] for c in counts]


# ---------------------------------------------------------------- settings validation
@pytest.mark.parametrize("kwargs, option", [
    (dict(epsilon=0.0), "--epsilon"), (dict(epsilon=-1.0), "--epsilon"),
    (dict(epsilon=math.inf), "--epsilon"), (dict(epsilon=math.nan), "--epsilon"),
    (dict(upper=math.inf), "--upper"), (dict(upper=math.nan), "--upper"),
    (dict(upper=0.0), "--upper"), (dict(lower=70.0), "--upper"), (dict(lower=math.nan), "--lower"),
    (dict(algorithm="median"), "--algorithm"), (dict(grouping="first-fit"), "--grouping"),
    (dict(m_ub="max"), "--m-ub"), (dict(m_ub=0), "--m-ub"), (dict(m_ub=-3), "--m-ub"),
    (dict(quantile_mode="adaptive"), "--quantile-mode"),
    (dict(quantiles=(0.9, 0.1)), "--quantiles"), (dict(quantiles=(0.5, 0.5)), "--quantiles"),
    (dict(quantiles=(-0.1, 0.9)), "--quantiles"), (dict(quantiles=(0.1, 1.5)), "--quantiles"),
    (dict(quantiles=(0.1,)), "--quantiles"),
    (dict(algorithm="levy", gamma=0.0), "--gamma"), (dict(algorithm="levy", gamma=1.0), "--gamma"),
    (dict(tau_k="K-bar"), "--tau-k"),
    # rule 8: algorithm-specific options with the wrong algorithm
    (dict(algorithm="levy", quantiles=(0.2, 0.8)), "--quantiles"),
    (dict(algorithm="levy", quantile_mode="eps-dependent"), "--quantile-mode"),
    (dict(quantile_mode="eps-dependent", quantiles=(0.2, 0.8)), "--quantiles"),
    (dict(algorithm="quantile", gamma=0.1), "--gamma"),
    (dict(algorithm="array-averaging", tau_k="k"), "--tau-k"),
    (dict(algorithm="baseline", m_ub="opt"), "--m-ub"),
    (dict(algorithm="baseline", grouping="wraparound"), "--grouping"),
])
def test_settings_validation_names_the_option(kwargs, option):
    base = dict(epsilon=1.0, upper=U)
    with pytest.raises(UsageError) as info:
        MeanSettings(**(base | kwargs))
    assert option in str(info.value)
    assert info.value.exit_code == 2


def test_settings_normalise():
    s = MeanSettings(epsilon=1, upper=65, m_ub="40", quantiles=[0.2, 0.7])
    assert s.m_ub == 40 and s.quantiles == (0.2, 0.7) and isinstance(s.epsilon, float)
    assert MeanSettings(epsilon=1, upper=65, algorithm="levy", gamma=0.1, tau_k="k").tau_k == "k"


# ---------------------------------------------------------------- M-T10 budget split
def test_m_t10_budget_split_sums_to_epsilon_exactly():
    rng = np.random.default_rng(0)
    for eps in np.concatenate([rng.uniform(1e-3, 10, 300), [0.1, 1 / 3, 0.7, 2 / 3]]):
        for algo in ("baseline", "array-averaging", "levy", "quantile"):
            split = MeanSettings(epsilon=float(eps), upper=U, algorithm=algo).budget_split()
            assert sum(split.values()) == float(eps)
    assert MeanSettings(epsilon=1.0, upper=U).budget_split() == {
        "quantile_low": 0.25, "quantile_high": 0.25, "mean": 0.5}
    assert MeanSettings(epsilon=1.0, upper=U, algorithm="levy").budget_split() == {
        "median": 0.5, "mean": 0.5}


# ---------------------------------------------------------------- M-T2 public-only structure
@pytest.mark.parametrize("algo, grouping", COMBOS)
def test_m_t2_structure_does_not_depend_on_values(algo, grouping):
    rng = np.random.default_rng(1)
    counts, groups = random_groups(rng)
    s = MeanSettings(epsilon=1.0, upper=U, algorithm=algo, grouping=grouping)
    values, us, gs = flat_layout(groups)
    ref = prepare_groups(values, us, gs, s)
    ref_tau = release_prepared(ref, s, np.random.default_rng(0)).tau
    for trial in range(20):
        fuzzed = values.copy()
        mode = trial % 3
        if mode == 0:
            fuzzed = rng.uniform(0, U, values.size)
        elif mode == 1:
            fuzzed = np.clip(values + rng.normal(0, 5, values.size), 0, U)
        else:
            fuzzed[rng.integers(0, values.size, 10)] = rng.choice([0.0, U], 10)
        p = prepare_groups(fuzzed, us, gs, s)
        for key in ("users", "records_total", "m_max", "m_min", "m_ub", "num_arrays",
                    "k_wraparound", "records_used", "arr_starts"):
            np.testing.assert_array_equal(getattr(p, key), getattr(ref, key))
        tau = release_prepared(p, s, np.random.default_rng(0)).tau
        if ref_tau is not None:
            np.testing.assert_array_equal(tau, ref_tau)
    # array membership and sizes are a function of the counts only
    for c in counts[:5]:
        assert layout(c, int(np.median(c)) or 1, grouping).arrays == layout(c.copy(), int(np.median(c)) or 1, grouping).arrays


# ---------------------------------------------------------------- M-T5 noise scales
@pytest.mark.parametrize("algo, grouping", COMBOS)
@pytest.mark.parametrize("lower", [0.0, 3.0])
@pytest.mark.parametrize("sampler", ["float", "hardened"])
def test_m_t5_reported_scale_matches_formula(algo, grouping, lower, sampler):
    """The paper's scales exactly (float sampler; ARRAY-AVERAGING under WRAPAROUND half the paper's); the
    hardened sampler rounds the statistic to a
    power-of-two step g and its scale is exactly (floor(sensitivity / g) + 1) g over the Laplace
    step's epsilon, within 2^-19 of the paper's."""
    rng = np.random.default_rng(2)
    _, groups = random_groups(rng, lower=lower)
    values, us, gs = flat_layout(groups)
    eps = 0.7
    s = MeanSettings(epsilon=eps, upper=U, lower=lower, algorithm=algo, grouping=grouping, sampler=sampler)
    ds = 1 if grouping == "bestfit" else 2
    eps_mean = eps if algo in ("baseline", "array-averaging") else eps / 2
    estimates = estimate_groups(values, us, gs, s, rng)
    # plus twice the float64 error of the computed statistic (algorithms.float_error), one margin for all
    terms = max(e.records_total if algo == "baseline" else e.m_ub + e.num_arrays for e in estimates) + 2
    margin = 2 * 1.01 * terms * 2.0 ** -53 * max(abs(lower), U)
    for e in estimates:
        if algo == "baseline":
            sens = (U - lower) * e.m_max / e.records_total + margin
        elif algo == "array-averaging":  # U/K under WRAPAROUND too (algorithms module docstring), not 2U/K
            sens = (U - lower) / e.num_arrays + margin
        else:
            a, b = e.interval
            sens = ds * (b - a) / e.num_arrays + margin
        scale = sens / eps_mean
        assert e.sensitivity == pytest.approx(sens, rel=1e-14)
        if sampler == "float":
            assert e.laplace_scale == pytest.approx(scale, rel=1e-12)
            assert e.granularity is None
        else:
            g = e.granularity
            assert math.frexp(g)[0] == 0.5 and scale * 2.0 ** -25 <= g <= scale * 2.0 ** -20
            assert e.rounded_sensitivity == (math.floor(e.sensitivity / g) + 1) * g
            assert e.laplace_scale == e.rounded_sensitivity / eps_mean
            assert scale < e.laplace_scale <= scale * (1 + 2.0 ** -19)
            assert (e.estimate / g).is_integer()
        n_expected = e.num_arrays if grouping == "bestfit" else e.k_wraparound
        if algo != "baseline":
            assert e.num_arrays == n_expected


def test_m_t5_itms_baseline_scale():
    counts = np.array(ITMS_SURROGATE_COUNTS)
    values, us, gs = flat_layout([split_users(synth_values(counts, 10.0, 0), counts)])
    for eps in (0.5, 1.0, 2.0):
        s = MeanSettings(epsilon=eps, upper=65, algorithm="baseline", sampler="float")
        (e,) = estimate_groups(values, us, gs, s, np.random.default_rng(0))
        assert e.laplace_scale == pytest.approx(1.578993 / eps, abs=1e-6 / eps)
        margin = 2 * 1.01 * (17166 + 2) * 2.0 ** -53 * 65  # twice algorithms.float_error (N = 17166 records)
        assert e.laplace_scale == pytest.approx((65 * 417 / 17166 + margin) / eps, rel=1e-14)
        (h,) = estimate_groups(values, us, gs, MeanSettings(epsilon=eps, upper=65, algorithm="baseline"),
                               np.random.default_rng(0))
        assert h.laplace_scale == (math.floor((65 * 417 / 17166 + margin) / h.granularity) + 1) * h.granularity / eps


@pytest.mark.parametrize("algo, grouping", COMBOS)
def test_m_t5_mean_abs_noise_matches_scale(algo, grouping):
    rng = np.random.default_rng(3)
    counts = np.array(ITMS_SURROGATE_COUNTS)
    values, us, gs = flat_layout([split_users(synth_values(counts, 10.0, 1), counts)])
    s = MeanSettings(epsilon=1.0, upper=U, algorithm=algo, grouping=grouping)
    prep = prepare_groups(values, us, gs, s).repeat(10_000)
    rel = release(prep, rng, epsilon=1.0, lower=0.0, upper=U, interval=(10.0, 30.0))
    noise = rel.estimate - rel.statistic
    assert np.all(rel.laplace_scale == rel.laplace_scale[0])
    # E|Lap(b)| = b and sd |Lap(b)| = b: +-3 % is 3 standard errors at 10^4 draws
    assert abs(np.mean(np.abs(noise)) / rel.laplace_scale[0] - 1) <= 0.03


# ---------------------------------------------------------------- M-T11 determinism
@pytest.mark.parametrize("algo, grouping", COMBOS)
def test_m_t11_same_seed_same_estimate(algo, grouping):
    rng = np.random.default_rng(4)
    _, groups = random_groups(rng)
    values, us, gs = flat_layout(groups)
    s = MeanSettings(epsilon=1.0, upper=U, algorithm=algo, grouping=grouping)
    a = estimate_groups(values, us, gs, s, np.random.default_rng(7))
    b = estimate_groups(values, us, gs, s, np.random.default_rng(7))
    c = estimate_groups(values, us, gs, s, np.random.default_rng(8))
    assert a == b
    assert [x.estimate for x in a] != [x.estimate for x in c]


# ---------------------------------------------------------------- per-group errors
def test_m_ub_outside_group_range_names_the_group():
    rng = np.random.default_rng(5)
    groups = [[rng.uniform(0, U, 5), rng.uniform(0, U, 9)], [rng.uniform(0, U, 2), rng.uniform(0, U, 3)]]
    values, us, gs = flat_layout(groups)
    s = MeanSettings(epsilon=1.0, upper=U, algorithm="array-averaging", m_ub=6)
    with pytest.raises(GroupUsageError) as info:
        estimate_groups(values, us, gs, s, rng)
    assert info.value.group_index == 1
    assert str(info.value).startswith("group 1: --m-ub 6 is outside [m_min, m_max] = [2, 3]")
    assert info.value.exit_code == 2 and isinstance(info.value, UsageError)


def test_eps_dependent_infeasible_is_an_error():
    rng = np.random.default_rng(6)
    groups = [[rng.uniform(0, U, 10) for _ in range(40)], [rng.uniform(0, U, 10) for _ in range(7)]]
    values, us, gs = flat_layout(groups)
    s = MeanSettings(epsilon=1.0, upper=U, quantile_mode="eps-dependent")  # ceil(2/1) = 2
    with pytest.raises(GroupUsageError) as info:  # group 1: 2 >= 7/2 is false -> ok; check eps 0.5
        estimate_groups(values, us, gs, MeanSettings(epsilon=0.5, upper=U, quantile_mode="eps-dependent"), rng)
    assert info.value.group_index == 1 and "use --quantile-mode fixed" in str(info.value)
    out = estimate_groups(values, us, gs, s, rng)
    assert out[1].budget_split == {"quantile_low": 0.25, "quantile_high": 0.25, "mean": 0.5}


def test_eps_dependent_rank_levels():
    from tsdp.mean.algorithms import eps_dependent_rank
    assert [eps_dependent_rank(e) for e in (0.5, 1.0, 1.5, 2.0, 2 / 3, 0.1)] == [4, 2, 2, 1, 3, 20]


def test_empty_group_and_empty_run_are_data_errors():
    values, us, gs = flat_layout([[np.ones(3)], [], [np.ones(2)]])
    with pytest.raises(GroupDataError) as info:
        estimate_groups(values, us, gs, MeanSettings(epsilon=1.0, upper=U), np.random.default_rng(0))
    assert info.value.group_index == 1 and info.value.exit_code == 4
    assert isinstance(info.value, DataError) and str(info.value).startswith("group 1: ")
    values, us, gs = flat_layout([[np.ones(3)], [np.ones(2), np.ones(0)]])
    with pytest.raises(GroupDataError) as info:
        estimate_groups(values, us, gs, MeanSettings(epsilon=1.0, upper=U), np.random.default_rng(0))
    assert info.value.group_index == 1


# ---------------------------------------------------------------- degenerate cases (M-P12)
def test_single_user_single_record_is_finite_and_warns():
    values, us, gs = flat_layout([[np.array([12.0])]])
    for algo, grouping in COMBOS:
        s = MeanSettings(epsilon=1.0, upper=U, algorithm=algo, grouping=grouping)
        (e,) = estimate_groups(values, us, gs, s, np.random.default_rng(0))
        assert math.isfinite(e.estimate) and e.users == 1
        assert any("single user" in w for w in e.warnings)
        if algo == "levy":  # tau >= U: one bin, [a, b] = [0, U]
            assert e.tau >= U and e.interval == (0.0, U)
        if algo in ("levy", "quantile"):
            assert any("fewer than 10" in w for w in e.warnings)


def test_zero_width_interval_gives_zero_noise():
    values, us, gs = flat_layout([[np.array([12.0, 40.0]), np.array([1.0])]])
    s = MeanSettings(epsilon=1.0, upper=U)
    rel = release(prepare_groups(values, us, gs, s), np.random.default_rng(0), epsilon=1.0,
                  lower=0.0, upper=U, interval=(5.0, 5.0))
    assert rel.laplace_scale[0] == 0.0 and rel.estimate[0] == 5.0


def test_group_estimate_fields():
    counts = np.array(ITMS_SURROGATE_COUNTS)
    values, us, gs = flat_layout([split_users(synth_values(counts, 10.0, 2), counts)])
    (e,) = estimate_groups(values, us, gs, MeanSettings(epsilon=1.0, upper=U), np.random.default_rng(0))
    assert (e.m_ub, e.m_ub_rule, e.num_arrays, e.k_wraparound) == (64, "opt", 164, 160)
    assert (e.users, e.records_total, e.m_max, e.m_min) == (233, 17166, 417, int(counts.min()))
    assert 160 * 64 <= e.records_used < 161 * 64
    (w,) = estimate_groups(values, us, gs, MeanSettings(epsilon=1.0, upper=U, grouping="wraparound"),
                           np.random.default_rng(0))
    assert w.records_used == 160 * 64 and w.num_arrays == 160
    (m,) = estimate_groups(values, us, gs, MeanSettings(epsilon=1.0, upper=U, algorithm="array-averaging"),
                           np.random.default_rng(0))
    assert (m.m_ub, m.m_ub_rule, m.interval) == (46, "median", None)


# ---------------------------------------------------------------- the claim
def test_claim_for():
    s = MeanSettings(epsilon=0.5, upper=65, lower=5)
    c = claim_for(s, n_groups=12, user_column="bus_id")
    assert c.definition == "pure-dp" and c.delta == 0.0 and c.epsilon == 6.0
    assert c.unit.level == "user" and c.unit.relation == "substitute"
    assert c.unit.neighbouring == NEIGHBOURING == (
        "replace all values of one user; the user set, the groups each user appears in and the user's record count "
        "in each group (per-group participation) are public")
    assert c.unit.id_column == "bus_id" and c.unit.enforced is False and c.unit.max_per_step == 60
    p = c.parameters
    assert p["epsilon_per_group"] == 0.5 and p["n_groups"] == 12 and p["epsilon_total_bound"] == 6.0
    assert p["participation"] == "public"
    # eps x the number of groups one user appears in is a function of the data: never in the claim
    assert not any("participation" in key for key in p if key != "participation")
    assert participation_epsilon(s, 3) == {"max_groups_per_user": 3, "epsilon_total_if_participation_public": 1.5,
                                           "assumption": participation_epsilon(s, 3)["assumption"]}
    assert "public" in participation_epsilon(s, 3)["assumption"]
    assert "Thm. II.1" in c.theorem and "exponential mechanism" in c.theorem
    assert "composition" in c.theorem
    assert type(c).from_dict(c.to_dict()) == c


# ---------------------------------------------------------------- hardened sampler (issue 17)
@pytest.mark.parametrize("algo", ["baseline", "array-averaging", "quantile"])
def test_hardened_noise_is_lattice_laplace_of_the_reported_scale(algo):
    """Every estimate is round_g(statistic) + g Z on the group's lattice, and the noise's mean
    absolute value and variance match the reported scale b (discrete Laplace of scale b / g on the
    lattice: E|X| = g 2 q / (1 - q^2) and Var = g^2 2 q / (1 - q)^2, q = exp(-g / b); ~ b and 2 b^2)."""
    counts = np.array(ITMS_SURROGATE_COUNTS)
    values, us, gs = flat_layout([split_users(synth_values(counts, 10.0, 1), counts)])
    s = MeanSettings(epsilon=1.0, upper=U, algorithm=algo)
    prep = prepare_groups(values, us, gs, s).repeat(20_000)
    rel = release(prep, np.random.default_rng(9), epsilon=1.0, lower=0.0, upper=U,
                  interval=None if algo != "quantile" else (10.0, 30.0))
    g, b = rel.granularity[0], rel.laplace_scale[0]
    assert np.all(rel.granularity == g) and np.all(rel.laplace_scale == b)
    lattice = rel.estimate / g
    assert np.all(lattice == np.round(lattice))
    noise = rel.estimate - np.round(rel.statistic / g) * g
    q = math.exp(-g / b)
    mean_abs = g * 2 * q / (1 - q * q)
    var = g * g * 2 * q / (1 - q) ** 2
    n = noise.size
    assert abs(np.mean(np.abs(noise)) - mean_abs) <= 4 * b / math.sqrt(n)  # sd |X| ~ b
    assert abs(np.var(noise) - var) <= 4 * math.sqrt(20) * b * b / math.sqrt(n)  # sd X^2 = sqrt(20) b^2


def test_hardened_and_float_samplers_differ_and_are_each_deterministic():
    rng = np.random.default_rng(4)
    _, groups = random_groups(rng)
    values, us, gs = flat_layout(groups)
    for sampler in ("hardened", "float"):
        s = MeanSettings(epsilon=1.0, upper=U, algorithm="array-averaging", sampler=sampler)
        a = estimate_groups(values, us, gs, s, np.random.default_rng(7))
        assert a == estimate_groups(values, us, gs, s, np.random.default_rng(7))
        assert all((e.granularity is None) == (sampler == "float") for e in a)


@pytest.mark.parametrize("kwargs, needle", [
    (dict(sampler="exact"), "--sampler must be one of hardened, float"),
    (dict(granularity=0.3), "--granularity must be a positive power of two"),
    (dict(sampler="float", granularity=2.0 ** -10), "--granularity applies to --sampler hardened only"),
])
def test_sampler_options_are_validated(kwargs, needle):
    with pytest.raises(UsageError, match=re.escape(needle)):
        MeanSettings(epsilon=1.0, upper=U, **kwargs)


def test_too_coarse_granularity_names_the_group():
    values, us, gs = flat_layout([[np.array([12.0, 40.0]), np.array([1.0, 3.0])]])
    s = MeanSettings(epsilon=1.0, upper=U, algorithm="array-averaging", granularity=8.0)
    with pytest.raises(GroupUsageError, match=r"group 0: --granularity 8 does not fit the Laplace scale"):
        estimate_groups(values, us, gs, s, np.random.default_rng(0))
    fine = MeanSettings(epsilon=1.0, upper=U, algorithm="array-averaging", granularity=2.0 ** -8)
    (e,) = estimate_groups(values, us, gs, fine, np.random.default_rng(0))
    assert e.granularity == 2.0 ** -8 and e.rounded_sensitivity == (math.floor(65 / 2 / 2.0 ** -8) + 1) * 2.0 ** -8


@pytest.mark.parametrize("sampler", ["hardened", "float"])
def test_claim_events_cover_every_group_at_epsilon(sampler):
    """BASELINE / ARRAY-AVERAGING claims carry one Laplace event per distinct group scale (counts summing
    to the groups), discrete-laplace on the group's lattice for the hardened sampler; LEVY/QUANTILE none."""
    from tsdp.accounting.compose import claim_backed_by_events

    rng = np.random.default_rng(5)
    _, groups = random_groups(rng, n_groups=30)
    values, us, gs = flat_layout(groups)
    s = MeanSettings(epsilon=0.5, upper=U, algorithm="array-averaging", sampler=sampler)
    est = estimate_groups(values, us, gs, s, rng)
    claim = claim_for(s, len(est), "uid", est)
    assert sum(e.count for e in claim.events) == len(est) and len(claim.events) < len(est)
    assert {e.kind for e in claim.events} == {"discrete-laplace" if sampler == "hardened" else "laplace"}
    for e in claim.events:
        assert e.sensitivity / e.noise == pytest.approx(0.5, rel=1e-12)
        if sampler == "hardened":
            assert (e.sensitivity / e.granularity).is_integer()
    assert claim_backed_by_events(claim)[0]
    assert claim.parameters["sampler"] == sampler
    assert ("Canonne" in claim.theorem) == (sampler == "hardened")
    q = MeanSettings(epsilon=0.5, upper=U, algorithm="quantile")
    assert claim_for(q, len(est), "uid", estimate_groups(values, us, gs, q, rng)).events == ()


def test_float_error_is_charged_and_refused_when_it_dominates():
    """The computed statistic differs from the exact one by at most float_error (sums of values of
    magnitude <= max(|lower|, |upper|)); release charges twice it to every group's sensitivity, and
    refuses bounds so far from zero that the margin would exceed the sensitivity itself (red-team
    audit: --lower 2**52 --upper 2**52 + 8 moved the statistic by 3.9 sensitivities)."""
    from tsdp.mean.algorithms import UNIT_ROUNDOFF, float_error, prepare

    rng = np.random.default_rng(3)
    _, groups = random_groups(rng, lower=0.0)
    values, us, gs = flat_layout(groups)
    prep = prepare(values, us, gs, algorithm="array-averaging", grouping="bestfit", m_ub="auto")
    k = float(np.max(prep.m_ub + prep.num_arrays)) + 2
    assert float_error(prep, -3.0, U) == 1.01 * k * UNIT_ROUNDOFF * U  # B = max(|lower|, |upper|)
    assert float_error(prep, -2 * U, U) == 2 * float_error(prep, -3.0, U)
    base = prepare(values, us, gs, algorithm="baseline", grouping="bestfit", m_ub="auto")
    assert float_error(base, 0.0, U) == 1.01 * (float(np.max(base.records_total)) + 2) * UNIT_ROUNDOFF * U
    offset = 2.0 ** 52
    far = MeanSettings(epsilon=1.0, upper=offset + 8, lower=offset, algorithm="array-averaging")
    with pytest.raises(UsageError, match="--lower .* --upper .*subtract a constant"):
        estimate_groups(values * 0 + offset + 4, us, gs, far, np.random.default_rng(0))

"""The private choice of contribution bounds (tsdp.mechanisms.bounds): grids, scores, the exact
exponential mechanism, its sensitivity on neighbours, and the claim it composes into."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from tsdp.accounting.claim import MechanismEvent, PrivacyClaim
from tsdp.accounting.sensitivity import PrivacyUnit
from tsdp.accounting.compose import events_privacy
from tsdp.mechanisms import bounds


def test_grids_are_public_and_end_at_the_series_length():
    assert bounds.PER_STEP_GRID[:4] == (1, 2, 4, 8) and bounds.PER_STEP_GRID[-1] == 4096
    assert bounds.steps_grid(14) == (1, 2, 4, 8, 14)
    assert bounds.steps_grid(16) == (1, 2, 4, 8, 16)
    assert bounds.steps_grid(1) == (1,)
    assert bounds.steps_grid(2) == (1, 2)


def test_quantile_fraction():
    assert bounds.quantile_fraction(0.9) == Fraction(9, 10)
    assert bounds.quantile_fraction(1 / 3) == Fraction(1, 3)
    for bad in (0, 1, 1.5, True, float("nan")):
        with pytest.raises(ValueError, match="--bound-quantile"):
            bounds.quantile_fraction(bad)


def test_scores_measure_how_far_the_quantile_lies_outside_each_bin():
    hist = np.array([5, 3, 0, 2])  # 10 users: 5 <= c1, 8 <= c2, 8 <= c3, 2 above
    q = Fraction(1, 2)  # the median lies in the first bin (5 users <= c1)
    below, at_most = np.array([0, 5, 8]), np.array([5, 8, 8])
    want = np.maximum(np.maximum(2 * below - 10, 10 - 2 * at_most), 0)
    np.testing.assert_array_equal(bounds.scores(hist, q), want)
    assert list(want) == [0, 0, 6]  # c2's bin starts at the median's 5th user: no one between
    # candidates above every statistic tie on the score: the base measure 2^-j prefers the smaller
    top = np.array([0, 0, 0, 500, 0, 0, 0])
    p = np.exp(bounds.log_probabilities(top, Fraction(9, 10), 0.1))
    assert p.argmax() == 3 and p[3] > 0.9 and np.all(np.diff(p[3:]) < 0)


def neighbours(draw_hist, extra_bin):
    d = np.asarray(draw_hist)
    d_prime = d.copy()
    d_prime[extra_bin] += 1
    return d, d_prime


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(0, 50), min_size=3, max_size=10), st.integers(0, 9),
       st.fractions(min_value=Fraction(1, 100), max_value=Fraction(99, 100), max_denominator=100))
def test_one_user_moves_every_score_by_at_most_b(hist, extra, q):
    """Add/remove: one user in one bin; substitution: one user moved between bins."""
    hist = np.array(hist)
    extra %= hist.size
    d, added = neighbours(hist, extra)
    assert np.abs(bounds.scores(d, q) - bounds.scores(added, q)).max() <= q.denominator
    if hist[extra]:
        moved = hist.copy()
        moved[extra] -= 1
        moved[(extra + 1) % hist.size] += 1
        assert np.abs(bounds.scores(hist, q) - bounds.scores(moved, q)).max() <= q.denominator


@settings(max_examples=100, deadline=None)
@given(st.lists(st.integers(0, 40), min_size=3, max_size=8), st.integers(0, 7),
       st.floats(0.05, 3.0))
def test_exact_probabilities_satisfy_pure_dp_on_neighbours(hist, extra, epsilon):
    """The exponential mechanism's log-probabilities differ by at most epsilon between neighbours."""
    q = Fraction(9, 10)
    d, d_prime = neighbours(hist, extra % len(hist))
    gap = np.abs(bounds.log_probabilities(d, q, epsilon) - bounds.log_probabilities(d_prime, q, epsilon))
    assert gap.max() <= epsilon * (1 + 1e-12)


def test_choose_samples_the_exact_distribution():
    rng = np.random.default_rng(3)
    hist = np.array([40, 30, 20, 8, 2])
    q, epsilon = Fraction(3, 4), 0.2
    draws = np.array([bounds.choose(hist, q, epsilon, rng) for _ in range(4000)])
    expected = np.exp(bounds.log_probabilities(hist, q, epsilon)) * draws.size
    observed = np.bincount(draws, minlength=expected.size)
    keep = expected > 5
    result = stats.chisquare(observed[keep], expected[keep] * observed[keep].sum() / expected[keep].sum())
    assert result.pvalue > 1e-3, (observed, expected)


def test_select_splits_the_budget_and_composes_into_the_claim():
    rng = np.random.default_rng(0)
    grids = {"max_per_step": bounds.PER_STEP_GRID, "max_steps": bounds.steps_grid(14)}
    hists = {"max_per_step": np.array([0, 0, 0, 500] + [0] * 10), "max_steps": np.array([0, 0, 0, 0, 500, 0])}
    choices = bounds.select(hists, grids, Fraction(9, 10), 0.2, rng)
    assert choices["max_per_step"].chosen == 8 and choices["max_steps"].chosen == 14
    assert all(c.epsilon == pytest.approx(0.1) for c in choices.values())
    unit = PrivacyUnit("user", "add-remove", "x", 8.0, 14, None, 1, "u", True)
    from tsdp.accounting.gaussian import analytic_sigma

    sigma = analytic_sigma(0.8, 1e-6, 8 * math.sqrt(14))
    release = PrivacyClaim("approx-dp", unit, 0.8, 1e-6, "gaussian", "Balle and Wang 2018, Theorem 8",
                           (MechanismEvent("gaussian", 8 * math.sqrt(14), sigma, 1),), {"sigma": sigma})
    basic = bounds.Split.of(1.0, 1e-6, 0.2, 2, exact=False)  # a release that does not compose exactly
    assert (basic.rule, basic.release_epsilon) == (bounds.BASIC, pytest.approx(0.8))
    claim = bounds.with_selection(release, choices, 0.2, basic, 1.0)
    assert claim.epsilon == pytest.approx(1.0) and claim.delta == 1e-6
    assert [e.kind for e in claim.events] == ["gaussian", "exponential", "exponential"]
    assert claim.events[1] == MechanismEvent("exponential", 10.0, 200.0, 1)  # 2 b / eps = 2 x 10 / 0.1
    record = claim.parameters["bound_selection"]
    assert record["release_epsilon"] == 0.8 and record["max_per_step"]["chosen"] == 8
    assert record["composition"] == bounds.RULES[bounds.BASIC] and bounds.BASIC_THEOREM in claim.theorem
    ok, detail = events_privacy(claim.events, claim.definition, claim.epsilon, claim.delta)
    assert ok, detail
    unpaid, detail = events_privacy(claim.events, claim.definition, 0.8, claim.delta)  # the selection unpaid
    assert not unpaid and "spends 0.2" in detail


def test_a_gaussian_release_composes_exactly_with_its_selections():
    """The Gaussian release is calibrated at the epsilon bounded_range gives (more than the basic
    rest), and the composed claim at --epsilon follows from its events; at the release's epsilon alone
    (the selections unpaid) it does not."""
    from tsdp.accounting import bounded_range
    from tsdp.accounting.gaussian import analytic_sigma

    split = bounds.Split.of(1.0, 1e-6, 0.2, 2, exact=True)
    assert split.rule == bounds.EXACT and split.selection_epsilon == pytest.approx(0.2)
    assert split.release_epsilon == bounded_range.release_epsilon(1.0, 1e-6, (0.1, 0.1))
    assert 0.94 < split.release_epsilon < 0.96  # basic composition would leave 0.8
    rng = np.random.default_rng(0)
    grids = {"max_per_step": bounds.PER_STEP_GRID, "max_steps": bounds.steps_grid(14)}
    hists = {"max_per_step": np.array([0, 0, 0, 500] + [0] * 10), "max_steps": np.array([0, 0, 0, 0, 500, 0])}
    choices = bounds.select(hists, grids, Fraction(9, 10), split.selection_epsilon, rng)
    unit = PrivacyUnit("user", "add-remove", "x", 8.0, 14, None, 1, "u", True)
    l2 = 8 * math.sqrt(14)
    sigma = analytic_sigma(split.release_epsilon, 1e-6, l2)
    release = PrivacyClaim("approx-dp", unit, split.release_epsilon, 1e-6, "gaussian", "Balle and Wang 2018, Theorem 8",
                           (MechanismEvent("gaussian", l2, sigma, 1),), {"sigma": sigma})
    claim = bounds.with_selection(release, choices, 0.2, split, 1.0)
    assert claim.epsilon == 1.0 and claim.parameters["bound_selection"]["composition"] == bounds.RULES[bounds.EXACT]
    assert bounded_range.THEOREM in claim.theorem
    ok, detail = events_privacy(claim.events, claim.definition, claim.epsilon, claim.delta)
    assert ok and "composed exactly" in detail, detail
    for epsilon in (split.release_epsilon, 0.99):  # the selections unpaid, or barely paid
        ok, detail = events_privacy(claim.events, claim.definition, epsilon, claim.delta)
        assert not ok, detail


# --max-norm auto: the balance rule (weighted histogram of the users' norms, tsdp.mechanisms.bounds.Balance)

def test_norm_grid_and_balance_constants():
    grid = bounds.norm_grid()
    assert grid[0] == 1.0 and grid[4] == 2.0 and grid[-1] == 2.0 ** 16 and len(grid) == 65
    assert bounds.norm_grid(2.5)[8] == 10.0
    b = bounds.Balance.of(sigma_per_unit=4.0, released_cells=70, cells_per_user=70)
    assert b.target == round(8 * math.sqrt(2 / math.pi) * 4.0 * 70) and b.weight_bound == 32  # 8 x min(sqrt 70, 4)
    assert bounds.Balance.of(4.0, 70, 2).weight_bound == math.floor(8 * math.sqrt(2))
    from tsdp.accounting.gaussian import analytic_sigma

    rel = bounds.Balance.for_release(0.9, 1e-6, False, 5, 14, None, None)
    assert rel == bounds.Balance.of(analytic_sigma(0.9, 1e-6, 1.0), 70, 70)
    sub = bounds.Balance.for_release(0.9, 1e-6, True, 5, 14, 1, 10)
    assert sub == bounds.Balance.of(analytic_sigma(0.9, 1e-6, 1.0) * math.sqrt(2), 70, 10)


def test_balance_scores_are_zero_where_the_weight_above_crosses_the_target():
    b = bounds.Balance(target=10, weight_bound=4)
    hist = np.array([20, 8, 6, 3, 0])  # weight above c_0: 17, c_1: 9, c_2: 3, c_3: 0 (nothing above the grid)
    # G_j = [17, 9, 3, 0], G_{j-1} = [37, 17, 9, 3]
    np.testing.assert_array_equal(b.scores(hist), [7, 0, 1, 7])
    p = np.exp(b.log_probabilities(hist, 1.0))
    assert p.argmax() == 1 and p.sum() == pytest.approx(1.0)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(0, 300), min_size=3, max_size=12), st.integers(0, 11), st.integers(1, 32),
       st.integers(0, 400))
def test_one_user_moves_every_balance_score_by_at_most_delta(hist, where, weight, target):
    """Add/remove one user of weight <= Delta in any bin; substitution: one user moved between bins."""
    b = bounds.Balance(target=target, weight_bound=32)
    hist = np.array(hist)
    where %= hist.size
    added = hist.copy()
    added[where] += weight
    assert np.abs(b.scores(hist) - b.scores(added)).max() <= b.weight_bound
    moved = added.copy()
    moved[where] -= weight
    moved[(where + 3) % hist.size] += weight
    assert np.abs(b.scores(added) - b.scores(moved)).max() <= b.weight_bound


@settings(max_examples=100, deadline=None)
@given(st.lists(st.integers(0, 500), min_size=3, max_size=10), st.integers(0, 9), st.integers(0, 32),
       st.floats(0.02, 2.0))
def test_balance_probabilities_satisfy_pure_dp_on_neighbours(hist, where, weight, epsilon):
    b = bounds.Balance(target=300, weight_bound=32)
    hist = np.array(hist)
    added = hist.copy()
    added[where % hist.size] += weight
    gap = np.abs(b.log_probabilities(hist, epsilon) - b.log_probabilities(added, epsilon))
    assert gap.max() <= epsilon * (1 + 1e-12)


def test_balance_choose_samples_the_exact_distribution():
    """Uniform proposals, the base measure 2^(-3j/4) and the score, each accepted exactly."""
    rng = np.random.default_rng(11)
    b = bounds.Balance(target=60, weight_bound=8)
    hist = np.array([30, 40, 25, 15, 10, 4, 2, 0, 0, 0, 0])
    draws = np.array([b.choose(hist, 0.5, rng) for _ in range(4000)])
    expected = np.exp(b.log_probabilities(hist, 0.5)) * draws.size
    observed = np.bincount(draws, minlength=expected.size)
    keep = expected > 5
    result = stats.chisquare(observed[keep], expected[keep] * observed[keep].sum() / expected[keep].sum())
    assert result.pvalue > 1e-3, (observed, expected)


def test_empirical_audit_of_the_norm_selection_stays_below_its_epsilon():
    """Many seeded selections on two neighbouring histograms (one user of the largest weight added in the
    bin that moves the choice most): a Clopper-Pearson lower bound on epsilon from the most telling
    candidate must stay below the claimed epsilon."""
    b = bounds.Balance(target=40, weight_bound=8)
    d = np.array([40, 30, 20, 6, 3, 1, 0, 0])
    d_prime = d.copy()
    d_prime[2] += 8  # exact log-ratios 0.51 and -0.49 at the first and third candidates
    epsilon, runs = 1.0, 4000
    rng = np.random.default_rng(2024)
    a = np.bincount([b.choose(d, epsilon, rng) for _ in range(runs)], minlength=d.size - 1)
    c = np.bincount([b.choose(d_prime, epsilon, rng) for _ in range(runs)], minlength=d.size - 1)
    lower = 0.0
    for j in range(a.size):
        for x, y in ((a[j], c[j]), (c[j], a[j])):
            if x == 0:
                continue
            p_low = stats.beta.ppf(0.0005, x, runs - x + 1)  # Clopper-Pearson, both sides at 99.9%
            q_high = stats.beta.ppf(0.9995, y + 1, runs - y)
            lower = max(lower, math.log(p_low / q_high))
    exact = np.abs(b.log_probabilities(d, epsilon) - b.log_probabilities(d_prime, epsilon)).max()
    assert lower <= epsilon and exact <= epsilon * (1 + 1e-12)
    assert lower > 0.2  # the audit can see a real privacy loss on these neighbours (it is not vacuous)


def test_select_records_the_balance_and_its_event():
    rng = np.random.default_rng(0)
    grid = bounds.norm_grid()
    hist = np.zeros(len(grid) + 1, dtype=np.int64)
    hist[[4, 8, 12, 16]] = [5000, 3000, 900, 40]
    balance = bounds.Balance(target=900, weight_bound=32)
    choice = bounds.select({"max_norm": hist}, {"max_norm": grid}, Fraction(9, 10), 0.1, rng, balance)["max_norm"]
    assert choice.chosen in grid and 4.0 <= choice.chosen <= 16.0
    record = choice.to_dict()
    assert record["rule"] == "balance" and record["target"] == 900 and record["weight_bound"] == 32
    assert "quantile" not in record
    assert choice.event() == MechanismEvent("exponential", 32.0, 640.0, 1)  # 2 Delta / eps


def test_only_a_gaussian_release_composes_exactly():
    from tsdp.mechanisms.registry import MECHANISMS

    assert bounds.composes_exactly(MECHANISMS["gaussian"], None)
    assert bounds.composes_exactly(MECHANISMS["gaussian"], "gaussian")
    assert not any(bounds.composes_exactly(MECHANISMS[name], noise) for name in MECHANISMS if name != "gaussian"
                   for noise in (None, "gaussian", "laplace"))
    assert bounds.default_share(("max_norm",), True) == 0.15 and bounds.default_share(("max_norm",), False) == 0.1
    assert bounds.default_share(("max_per_step", "max_steps"), True) == pytest.approx(0.2)


def test_the_rounding_slack_must_be_bounded_for_every_cap_to_compose_exactly():
    """Exact composition needs the release's slack bounded whatever cap is chosen: the float sampler
    (none), the hardened default lattice (SLACK_SHARE of delta per cap), never a hand-set --granularity
    (the slack grows as the chosen cap's noise shrinks) nor a budget whose finest lattice may not reach
    that share."""
    from tsdp.accounting import discrete as disc

    assert bounds.lattice_slack_share(False, None, 1.0, 1e-6, 70) == 0.0
    assert bounds.lattice_slack_share(True, None, 1.0, 1e-6, 70) == disc.SLACK_SHARE
    assert bounds.lattice_slack_share(True, 2.0 ** -10, 1.0, 1e-6, 70) is None
    assert bounds.lattice_slack_share(True, None, 40.0, 1e-6, 10 ** 6) is None
    assert bounds.Split.of(1.0, 1e-6, 0.1, 1, exact=True, slack_share=None).rule == bounds.BASIC
    tight = bounds.Split.of(1.0, 1e-6, 0.1, 1, exact=True, slack_share=0.0)
    reserved = bounds.Split.of(1.0, 1e-6, 0.1, 1, exact=True, slack_share=disc.SLACK_SHARE)
    assert tight.rule == reserved.rule == bounds.EXACT and 0.9 < reserved.release_epsilon < tight.release_epsilon

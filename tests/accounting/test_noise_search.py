"""The noise-multiplier search shared by the DP-SGD calibrations (tsdp.accounting.budget)."""

from __future__ import annotations

import pytest

from tsdp.accounting.budget import MAX_NOISE_MULTIPLIER, smallest_noise_within
from tsdp.errors import GridTooLarge, UsageError


def inverse(floor: float = 0.0):
    """epsilon = 1 / sigma, unaccountable (GridTooLarge) below ``floor``."""
    def eps(sigma: float) -> float:
        if sigma < floor:
            raise GridTooLarge("grid too large")
        return 1.0 / sigma
    return eps


@pytest.mark.parametrize("target", [0.5, 5.0, 2e-5])
def test_smallest_sigma_within_the_target_to_rtol(target):
    sigma, eps = found = smallest_noise_within(inverse(), target, 0.25, 1.0, 1e-3)
    assert eps == 1 / sigma <= target and 1 / (sigma / 1.002) > target
    assert not found.at_grid_limit


def test_an_unaccountable_sigma_counts_as_missing_the_target_and_is_flagged():
    """Every sigma meets epsilon 100 down to the floor 0.1 (say a huge epsilon): the answer is the
    smallest accountable sigma, on the safe side, flagged; not a NumericalError."""
    found = smallest_noise_within(inverse(0.1), 100.0, 0.25, 1.0, 1e-3)
    sigma, eps = found
    assert 0.1 <= sigma <= 0.1 * 1.002 and eps <= 100 and found.at_grid_limit
    # above the floor the answer is the usual one, unflagged
    assert not smallest_noise_within(inverse(0.1), 5.0, 0.25, 1.0, 1e-3).at_grid_limit


def test_a_target_missed_by_the_largest_noise_names_epsilon():
    with pytest.raises(UsageError, match=r"--epsilon 0\.5 is out of reach.*larger --epsilon"):
        smallest_noise_within(lambda s: 1.0 + 1.0 / s, 0.5, 0.25, 1.0, 1e-3)
    assert smallest_noise_within(lambda s: 1e-7 / s, 1e-12, 0.25, 1.0, 1e-3)[0] <= MAX_NOISE_MULTIPLIER


def counted(fn):
    """``fn`` that records the sigmas it is asked about."""
    def wrapped(sigma: float) -> float:
        wrapped.calls.append(sigma)
        return fn(sigma)
    wrapped.calls = []
    return wrapped


@pytest.mark.parametrize("scale", [0.5, 0.97, 1.0005, 2.0])
def test_the_answer_is_certified_by_the_exact_accountant_whatever_the_estimate_says(scale):
    """The estimate (a coarse grid) only guides the search: an optimistic one (scale < 1) puts the
    root too low, a pessimistic one too high; the sigma returned is always checked by the exact
    accountant, meets the target there and is the smallest that does, to rtol."""
    exact = counted(inverse())
    sigma, eps = found = smallest_noise_within(exact, 0.5, 0.25, 1.0, 1e-3, estimate=lambda s: scale / s)
    assert sigma in exact.calls and eps == 1 / sigma <= 0.5  # computed by the exact accountant
    assert any(s < sigma <= s * 1.001 and 1 / s > 0.5 for s in exact.calls)  # its neighbour, rtol below, misses
    assert not found.at_grid_limit


def test_a_good_estimate_leaves_few_exact_evaluations():
    """Four exact evaluations at most (a probe above the estimate, steps down to a miss, one
    interpolation), where the search without an estimate took 13 on this function."""
    exact, estimate = counted(inverse()), counted(lambda s: 1.0002 / s)
    sigma, _ = smallest_noise_within(exact, 0.5, 0.25, 1.0, 1e-3, estimate=estimate)
    assert 1 / sigma <= 0.5 < 1 / (sigma / 1.002)
    assert len(exact.calls) <= 4 and estimate.calls


def test_without_an_estimate_interpolation_closes_the_bracket_in_few_evaluations():
    """Bisection from a 2x bracket to rtol 1e-3 takes 10 evaluations; log-log interpolation fewer."""
    exact = counted(lambda s: 3.0 / s ** 1.5)
    sigma, eps = smallest_noise_within(exact, 0.7, 0.25, 1.0, 1e-3)
    assert eps <= 0.7 < 3.0 / (sigma / 1.001) ** 1.5
    assert len(exact.calls) <= 8


def test_an_estimate_that_fails_or_is_unaccountable_falls_back_to_the_exact_search():
    def broken(sigma):
        raise GridTooLarge("coarse grid too large")
    found = smallest_noise_within(inverse(0.1), 100.0, 0.25, 1.0, 1e-3, estimate=broken)
    assert 0.1 <= found[0] <= 0.1 * 1.002 and found.at_grid_limit  # the exact grid's own limit, flagged
    sigma, eps = smallest_noise_within(inverse(), 5.0, 0.25, 1.0, 1e-3, estimate=lambda s: 1e9)
    assert eps == 1 / sigma <= 5.0 < 1 / (sigma / 1.002)


def test_a_non_monotone_exact_accountant_still_gets_a_certified_answer():
    """Whatever the exact figure does between probes, the answer's own figure meets the target."""
    exact = counted(lambda s: (1.0 / s) * (1.3 if 1.9 < s < 2.1 else 1.0))
    sigma, eps = smallest_noise_within(exact, 0.5, 0.25, 1.0, 1e-3, estimate=lambda s: 1.0 / s)
    assert eps == exact(sigma) <= 0.5 and sigma in exact.calls

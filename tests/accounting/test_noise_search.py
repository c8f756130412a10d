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

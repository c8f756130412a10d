"""The smallest delta tsdp reads off a composed privacy-loss distribution (tsdp.accounting.grid).

Below it the FFT's rounding is no longer small against delta, and the epsilon read there can fall
below the truth. The witness: Poisson-subsampled Gaussian, q = 0.01, sigma 0.8, 10^4 steps. At delta
1e-12 tsdp said 16.732 (grid 1e-3), 16.724 (3e-4) and 16.749 (1e-4), while prv_accountant (Gopi et al.
2021, whose bounds account for its own discretisation) puts the true epsilon at 16.757 or more.
"""

from __future__ import annotations

import pytest

from tsdp import account
from tsdp.accounting.grid import MIN_COMPOSED_DELTA
from tsdp.errors import NumericalError

Q, SIGMA, STEPS = 0.01, 0.8, 10_000


def prv_lower_bound(delta: float) -> float:
    from prv_accountant import PRVAccountant
    from prv_accountant.privacy_random_variables import PoissonSubsampledGaussianMechanism

    acc = PRVAccountant(prvs=PoissonSubsampledGaussianMechanism(noise_multiplier=SIGMA, sampling_probability=Q),
                        max_self_compositions=STEPS, eps_error=0.005, delta_error=delta * 1e-3)
    return acc.compute_epsilon(delta=delta, num_self_compositions=STEPS)[0]


@pytest.mark.slow
@pytest.mark.parametrize("discretization", [1e-3, 1e-4])
def test_epsilon_at_the_floor_is_above_prv_accountants_lower_bound(discretization):
    eps = account.dpsgd(unit="record", noise_multiplier=SIGMA, sampling_rate=Q, steps=STEPS,
                        delta=MIN_COMPOSED_DELTA, discretization=discretization)["epsilon"]
    assert eps >= prv_lower_bound(MIN_COMPOSED_DELTA)


def test_a_delta_below_the_floor_is_refused():
    """1e-12 was the floor, and the witness case fell short of the truth there."""
    assert MIN_COMPOSED_DELTA >= 1e-10
    with pytest.raises(NumericalError, match=f"below {MIN_COMPOSED_DELTA:g}"):
        account.dpsgd(unit="record", noise_multiplier=SIGMA, sampling_rate=Q, steps=STEPS, delta=1e-12)

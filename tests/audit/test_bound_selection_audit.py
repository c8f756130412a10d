"""The private choice of a cap (--max-per-step auto) audited as an attacker would (specs/audit.md).

Worst-case neighbours for the selection: D, a small event table whose users' contributions straddle
the quantile, and D', D plus one user with a huge contribution (501 events in one hour, and one in every
other hour of the grid). Both go through the profile job the release runs
(:meth:`tsdp.engine.events.EventJob.profiling`); the selection is then drawn N times per side with the
exact sampler and the chosen candidate is the statistic. The Clopper-Pearson lower bound on epsilon
must stay below the selection's claimed epsilon; the exact log-probabilities give the true loss,
which the claim must bound too. A negative control (the same sampler told a 10x larger epsilon than
it claims) must be refuted, so the audit can fail.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import polars as pl
import pytest

from tsdp.accounting.audit import epsilon_lower_bound
from tsdp.engine.events import EventCaps, EventJob, assemble, partial_cell_sums, profile_histograms
from tsdp.mechanisms import bounds

N = 20_000
EPSILON = 1.0
Q = Fraction(1, 2)
GRIDS = {"max_per_step": bounds.PER_STEP_GRID}


def table(giant: bool) -> pl.DataFrame:
    """10 users with one event per hour in 3 hours, 10 with three in one hour, and (D') the giant."""
    users, times = [], []
    for u in range(10):
        for h in range(3):
            users.append(f"small{u}")
            times.append(f"2024-01-01 {h + u % 5:02d}:15:00")
    for u in range(10):
        for k in range(3):
            users.append(f"mid{u}")
            times.append(f"2024-01-01 {u + 5:02d}:{10 + k:02d}:00")
    if giant:
        for h in range(24):
            for k in range(500 if h == 23 else 1):
                users.append("giant")
                times.append(f"2024-01-01 {h:02d}:{k % 60:02d}:{k // 60:02d}")
    return pl.DataFrame({"user": users, "time": times})


def histogram(giant: bool) -> np.ndarray:
    job = EventJob("user", "time", "1h", "2024-01-01", "2024-01-02",
                   EventCaps(level="user")).profiling(GRIDS)
    return profile_histograms(assemble(job, [partial_cell_sums(table(giant), job)]).diagnostics,
                              GRIDS)["max_per_step"]


def draws(hist: np.ndarray, epsilon: float, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return np.array([bounds.choose(hist, Q, epsilon, rng) for _ in range(N)], dtype=float)


@pytest.fixture(scope="module")
def neighbours():
    d, d_prime = histogram(False), histogram(True)
    diff = d_prime - d
    assert diff.sum() == 1 and diff[9] == 1  # exactly one more user, 501 events in a cell: (256, 512]
    return d, d_prime


def test_the_true_loss_is_within_the_claim(neighbours):
    d, d_prime = neighbours
    gap = np.abs(bounds.log_probabilities(d, Q, EPSILON) - bounds.log_probabilities(d_prime, Q, EPSILON))
    assert 0.2 * EPSILON < gap.max() <= EPSILON  # the neighbour moves the selection, within the claim


def test_the_empirical_lower_bound_stays_below_the_claim(neighbours):
    d, d_prime = neighbours
    bound = epsilon_lower_bound(draws(d, EPSILON, 1), draws(d_prime, EPSILON, 2))
    assert bound.bound == "lower" and not bound.refutes(EPSILON), bound.describe()


def test_negative_control_a_sampler_ten_times_too_sharp_is_refuted(neighbours):
    d, d_prime = neighbours
    bound = epsilon_lower_bound(draws(d, 10 * EPSILON, 3), draws(d_prime, 10 * EPSILON, 4))
    assert bound.refutes(EPSILON), bound.describe()

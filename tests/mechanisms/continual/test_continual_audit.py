"""Empirical audit of short streams (specs/audit.md): worst-case neighbours at every unit, N seeded
releases per side stacked as N series (K = 1: one unit touches one series, and the calibrated noise
does not depend on the number of series, checked; at w-event level only the hardened lattice and
rounding slack do, by under 1e-6), the exact Gaussian log-likelihood ratio of the
encoded stream y = C x + z (reconstructed from the published daily values, or the tree's released
nodes), and a Clopper-Pearson lower bound on epsilon that must stay below the claim. A negative
control (a user-level neighbour against an event-level calibration) shows the audit can fail."""

import numpy as np
import pytest

from tests.mechanisms.continual.conftest import setting
from tsdp.accounting.audit import epsilon_lower_bound, gaussian_llr
from tsdp.mechanisms.continual import new_carry, privacy_map, release_steps
from tsdp.mechanisms.continual import toeplitz as tz
from tsdp.mechanisms.continual.factorization import factorization

N = 20_000
T = 8
EPSILON, DELTA = 1.0, 1e-5
UNITS = {"event": {}, "w-event": {"w": 3}, "user": {"max_steps": 3}, "user-sep": {"max_steps": 2, "min_separation": 3}}
STRATEGIES = [("independent", None), ("toeplitz", None), ("banded", 4), ("tree", None)]


def worst_neighbour(level, extra):
    """The per-series change of the proofs' worst case (all M = 1, starting at step 0)."""
    d = np.zeros(T)
    if level == "event":
        d[0] = 1.0
    elif level == "w-event":
        d[:extra["w"]] = 1.0
    else:
        d[[i * extra.get("min_separation", 1) for i in range(extra["max_steps"])]] = 1.0
    return d


def encoded(s, data, secret):
    fac = factorization(s.strategy, s.horizon, s.band)
    out, carry = release_steps(s, secret, new_carry(s), data, 0)
    return carry["nodes"] if fac.tree is not None else out["daily"] @ tz.matrix(fac.column, T).T


def dense(s):
    fac = factorization(s.strategy, s.horizon, s.band)
    return fac.tree.matrix() if fac.tree is not None else tz.matrix(fac.column, T)


def audit(s, d):
    C = dense(s)
    sigma = privacy_map(s).sigma
    stats = []
    for data, secret in ((np.tile(d, (N, 1)), bytes(range(32))), (np.zeros((N, T)), bytes(range(1, 33)))):
        y = encoded(s, data, secret)
        stats.append(gaussian_llr(y, C @ d, np.zeros(C.shape[0]), sigma))
    return epsilon_lower_bound(stats[0], stats[1], delta=s.delta)


@pytest.mark.parametrize("strategy, band", STRATEGIES)
@pytest.mark.parametrize("unit", list(UNITS))
def test_audit_stays_below_the_claim(strategy, band, unit):
    level, extra = unit.split("-sep")[0], UNITS[unit]
    s = setting(horizon=T, strategy=strategy, band=band, unit=level, n_series=N, epsilon=EPSILON, delta=DELTA,
                outputs=("daily",), sampler="hardened", **extra)
    one_series = privacy_map(setting(**{**s.to_dict(), "n_series": 1})).sigma
    if level == "w-event":
        # a w-event unit may spread its cells over up to w series, so the hardened lattice and rounding
        # slack (and only they) depend on the panel; the panel's calibration counts at least the values
        # one series' window changes, so it proves the one-series claim the stacked rows test
        assert privacy_map(s).sigma == pytest.approx(one_series, rel=1e-6)
        assert privacy_map(s).lattice_coords >= privacy_map(setting(**{**s.to_dict(), "n_series": 1})).lattice_coords
    else:
        assert privacy_map(s).sigma == one_series
    d = worst_neighbour(level, extra)
    bound = audit(s, d)
    assert bound.bound == "lower"
    assert bound.eps_lower <= EPSILON
    if np.linalg.norm(dense(s) @ d) >= 0.99 * privacy_map(s).l2_sensitivity:
        # the neighbour attains the sensitivity (all but the tree's user-level upper bound): the test has power
        assert bound.eps_lower > 0.3


def test_audit_refutes_a_claim_for_the_wrong_unit():
    event = setting(horizon=T, strategy="toeplitz", n_series=N, epsilon=EPSILON, delta=DELTA, outputs=("daily",))
    bound = audit(event, worst_neighbour("user", {"max_steps": 3}))
    assert bound.eps_lower > EPSILON

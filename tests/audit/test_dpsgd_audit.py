"""A DP-SGD step of forecast-train audited as an attacker would (specs/audit.md), hardened sampler.

Neighbours: datasets that differ in one value of series 0 (event level, substitution). Every window
has the clipped gradient -C e_1, except, under D, the windows that contain that value: +C e_1 (the
two ends of the clipping ball). Under D' every step's sum is then the same, -B C e_1, and under D it
moves by 2C exactly when the value is in the batch: the pair (1 - q) N(0) + q N(2) vs N(0) of
Theorem 4.4, which the accountant's claim is tight for. One
step is drawn as `forecast-train` draws it: the batch from tsdp's own WindowSampler (WOR top level,
WR bottom level, lambda = 1), the windows through PaddedPanel, the noisy sum through
`trainer.dp_gradient` with the hardened lattice of the accountant's setting. The statistic is the
released coordinate; its likelihood ratio is monotone for this pair, so a threshold test is the
strongest one. The empirical LOWER bound on epsilon (Clopper-Pearson, 95%) must not exceed the
epsilon `tsdp account dpsgd --sampler hardened` claims for one step; a negative control (the noise
of half the claimed multiplier) must be refuted, so the audit can fail.
"""

from __future__ import annotations

import numpy as np
import pytest

from tests.audit.markers import marker_panel
from tsdp.accounting.audit import epsilon_lower_bound
from tsdp.accounting.structured import DpSgdSetting, account_dpsgd
from tsdp.forecast import sampling, trainer

N_DRAWS = 40_000  # per side: resolves epsilon ~1-2 to about a tenth
SERIES, LENGTH, CONTEXT, HORIZON, BATCH = 4, 6, 2, 1, 2  # T = 6 windows, k = 3 contain the value: r = 1/2
VALUE_AT = 3  # the substituted value (series 0, time 3) lies in k = 3 windows
CLIP, SIGMA, DELTA = 1.0, 2.0, 1e-3  # claim: epsilon 1.47 for one step


def setting(sigma: float) -> DpSgdSetting:
    return DpSgdSetting(SERIES, LENGTH, CONTEXT, HORIZON, BATCH, sigma, sampler="hardened", parameters=1,
                        clip_norm=CLIP)


def windows_with_the_value(seed: int) -> np.ndarray:
    """How many windows of each of N_DRAWS steps contain the substituted value, drawn by the sampler."""
    s = setting(SIGMA)
    panel = marker_panel(SERIES, LENGTH, VALUE_AT, CONTEXT, HORIZON)
    sampler = sampling.WindowSampler(s)
    rng = np.random.default_rng(seed)
    counts = np.empty(N_DRAWS)
    for i in range(N_DRAWS):
        series, starts = sampler.next_batch(rng)
        ctx, tgt = panel.gather(series, starts)
        counts[i] = ctx.sum() + tgt.sum()
    return counts


def released(counts: np.ndarray, neighbour: str, sigma: float, seed: int) -> np.ndarray:
    """The released coordinate of each step: the hardened dp_gradient of the clipped sums (one
    parameter per step, so a vector of N_DRAWS sums is N_DRAWS independent steps). Each batch holds
    BATCH windows; under D those with the value contribute +C, all others -C."""
    g = setting(sigma).lattice.granularity
    flipped = counts if neighbour == "D" else np.zeros_like(counts)
    sums = CLIP * (2 * flipped - BATCH)
    return trainer.dp_gradient(sums, sigma, CLIP, BATCH, np.random.default_rng(seed), g)


@pytest.fixture(scope="module")
def counts():
    return windows_with_the_value(1), windows_with_the_value(2)


def test_the_sampler_puts_the_value_in_a_batch_at_the_accountants_rate(counts):
    """q = rho r = (2/4)(3/6): the step sees the value (in exactly one window, lambda = 1) at rate 1/4."""
    geometry = setting(SIGMA).geometry()
    assert geometry["q"] == 0.25 and geometry["k"] == 3
    for c in counts:
        assert set(np.unique(c)) <= {0.0, 1.0}
        rate = c.mean()
        assert abs(rate - 0.25) < 5.3 * np.sqrt(0.25 * 0.75 / N_DRAWS)


def test_hardened_step_is_not_refuted(counts):
    """The lower bound stays below the claim (1.47 at delta 1e-3) and above half of it, so that an audit
    that cannot see the step fails too (0.81-1.05 over four seed pairs at 40,000 draws per side)."""
    claim = account_dpsgd(setting(SIGMA), DELTA, steps=1).epsilon
    d = released(counts[0], "D", SIGMA, 11)
    d_prime = released(counts[1], "D'", SIGMA, 12)
    g = setting(SIGMA).lattice.granularity
    assert np.all(np.mod(d * BATCH, g) == 0)  # every release is a lattice point (over B)
    bound = epsilon_lower_bound(d, d_prime, DELTA)
    assert 0.5 * claim < bound.eps_lower <= claim, (bound.eps_lower, claim)


def test_audit_refutes_noise_below_the_claim(counts):
    """Negative control: half the noise the claim assumes is caught."""
    claim = account_dpsgd(setting(SIGMA), DELTA, steps=1).epsilon
    d = released(counts[0], "D", SIGMA / 2, 13)
    d_prime = released(counts[1], "D'", SIGMA / 2, 14)
    assert epsilon_lower_bound(d, d_prime, DELTA).eps_lower > claim

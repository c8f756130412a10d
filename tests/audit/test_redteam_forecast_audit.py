"""Empirical audit of forecast-train's Poisson bottom level (specs/audit.md; schuchardt.md 2.2, 2.4).

tests/audit/test_dpsgd_audit.py audits the default WOR top / WR bottom level (Theorem 4.4). This file
audits the other bottom level, where a batch can hold SEVERAL windows that contain the protected value
(a binomial number of them), through the code forecast-train runs: the batches from tsdp's own
:class:`~tsdp.forecast.sampling.WindowSampler`, the windows through
:class:`~tsdp.forecast.sampling.PaddedPanel`, the noisy sum through :func:`tsdp.forecast.trainer.dp_gradient`
on the hardened lattice of the accountant's setting.

Neighbours: one value of series 0 substituted (event level). Worst case of Theorems E.8 / F.2 (Lemma
E.12): a window containing the value has clipped gradient +C e_1 under D and -C e_1 under D'; every other
window 0. The released coordinate is then C J + noise under D and -C J + noise under D', J the number of
windows in the batch containing the value: the double mixture sum_j Bin(j; k, r_P) N(+-j) (in units of
2C apart per window). Its likelihood ratio is monotone in the release, so a threshold test is optimal.

* deterministic top level (per EPOCH, Theorem E.8, tight): series 0 is in exactly one step per epoch
  (checked); the lower bound must stay below the claim and come close to it;
* WOR top level (per STEP, Theorem F.2, an upper bound): not refuted.

* WR bottom level with lambda = 2, deterministic top level (per epoch, Theorem E.1): not refuted;
* label and context noise (Theorem G.1, WOR / WR, lambda = 1): the augmentation's amplification, attacked
  through ``sampling.augment`` (hardened) at the coupling's weakest point: not refuted; without the
  augmentation the same attack refutes the augmented claim (the test's lower bound is loose, about a
  quarter of the claim: it catches a missing augmentation, not a slightly smaller one).

A negative control (half the noise multiplier the claim assumes) must be refuted, so the audit can fail.
Mutations this file catches (checked by hand): the Poisson bottom rate r_P doubled in
``WindowSampler.__init__`` (binomial check and the audit: 3.01 > 1.90); the accountant's k one short
(``L_C + L_F + w - 2`` in ``DpSgdSetting.affected_windows``; the audit: 1.57 > 1.18); ``augment``
returning its inputs unchanged (the G.1 audit: 1.49 > 1.33); the deterministic top level giving every step
of an epoch the same block of series (the epoch-level checks). The WR lambda = 2 audit below is loose (0.6-0.7
against a claim of 1.86): it does not catch an E.1 pair with means +-j or lambda taken as 1 (claims 0.82).
"""

from __future__ import annotations

import numpy as np
import pytest

from tests.audit.markers import marker_panel
from tsdp.accounting.audit import epsilon_lower_bound
from tsdp.accounting.structured import DpSgdSetting, account_dpsgd
from tsdp.forecast import sampling, trainer

N_DRAWS = 40_000  # per side
LENGTH, CONTEXT, HORIZON, INSTANCES = 6, 2, 1, 2  # T = 6 start positions, r_P = lambda / T = 1/3
VALUE_AT = 3  # the substituted value (series 0, time 3) lies in k = 3 windows: starts 3, 4, 5
CLIP, SIGMA, DELTA = 1.0, 3.0, 1e-3
TOPS = {  # top level: (series, batch size) -> rho = batch / (lambda series)
    "deterministic": (2, 2),  # one series per step, two steps per epoch; claim 1.90 per epoch
    "wor": (4, 4),  # two of four series per step; claim 1.73 per step
}


def setting(top: str, sigma: float) -> DpSgdSetting:
    series, batch = TOPS[top]
    return DpSgdSetting(series, LENGTH, CONTEXT, HORIZON, batch, sigma, top=top, bottom="poisson",
                        instances=INSTANCES, sampler="hardened", parameters=1, clip_norm=CLIP)


def claim(top: str) -> float:
    s = setting(top, SIGMA)
    one = {"epochs": 1} if top == "deterministic" else {"steps": 1}
    return account_dpsgd(s, DELTA, **one).epsilon


def affected(top: str, seed: int) -> np.ndarray:
    """J per composition (an epoch for the deterministic top level, a step for WOR): how many windows of
    the batch(es) contain the substituted value, as the sampler draws them."""
    s = setting(top, SIGMA)
    panel = marker_panel(s.n_series, LENGTH, VALUE_AT, CONTEXT, HORIZON)
    sampler = sampling.WindowSampler(s)
    rng = np.random.default_rng(seed)
    per_step = s.steps_per_epoch if top == "deterministic" else 1
    counts = np.zeros((N_DRAWS, per_step))
    for i in range(N_DRAWS):
        for j in range(per_step):
            series, starts = sampler.next_batch(rng)
            ctx, tgt = panel.gather(series, starts)
            counts[i, j] = ctx.sum() + tgt.sum()
    if top == "deterministic":
        # epoch-level accounting assumes the series is in ONE step of the epoch: the other step never sees it
        assert np.all(counts[:, 1:] == 0)
    return counts[:, 0]


def released(j: np.ndarray, neighbour: str, top: str, sigma: float, seed: int) -> np.ndarray:
    """The released coordinate of the step that holds series 0: +C per affected window under D, -C
    under D' (one parameter per step, so a vector of N_DRAWS sums is N_DRAWS independent steps)."""
    s = setting(top, sigma)
    sums = CLIP * j * (1.0 if neighbour == "D" else -1.0)
    return trainer.dp_gradient(sums, sigma, CLIP, s.batch_size, np.random.default_rng(seed), s.lattice.granularity)


@pytest.fixture(scope="module", params=sorted(TOPS))
def drawn(request):
    top = request.param
    return top, affected(top, 21), affected(top, 22)


def test_affected_windows_follow_the_accountants_binomial(drawn):
    """J ~ rho Bin(k, r_P) (+ (1 - rho) point mass at 0): mean rho k r_P, P[J = 3] = rho r_P^3."""
    top, d, d_prime = drawn
    geometry = setting(top, SIGMA).geometry()
    k, r_p, rho = geometry["k"], geometry["r_poisson"], geometry["rho"]
    assert (k, r_p) == (3, 1 / 3)
    for j in (d, d_prime):
        assert set(np.unique(j)) <= {0.0, 1.0, 2.0, 3.0}
        mean, full = rho * k * r_p, rho * r_p ** 3
        assert abs(j.mean() - mean) < 5.3 * np.sqrt(rho * k * r_p * (1 - r_p) / N_DRAWS + mean * (1 - mean) / N_DRAWS)
        assert abs((j == 3).mean() - full) < 5.3 * np.sqrt(full * (1 - full) / N_DRAWS)


def test_poisson_bottom_level_is_not_refuted(drawn):
    """The lower bound stays below the claim; for the tight per-epoch pair (Theorem E.8) it also comes
    within a factor 2 of it, so an audit that cannot see the affected windows would fail."""
    top, d, d_prime = drawn
    eps = claim(top)
    release_d = released(d, "D", top, SIGMA, 31)
    release_d_prime = released(d_prime, "D'", top, SIGMA, 32)
    g = setting(top, SIGMA).lattice.granularity
    assert np.all(np.mod(release_d * setting(top, SIGMA).batch_size, g) == 0)  # lattice points (over B)
    bound = epsilon_lower_bound(release_d, release_d_prime, DELTA)
    assert bound.eps_lower <= eps, (top, bound.eps_lower, eps)
    if top == "deterministic":
        assert bound.eps_lower > 0.5 * eps, (bound.eps_lower, eps)


def test_audit_refutes_half_the_claimed_noise(drawn):
    """Negative control: the same attack on half the noise multiplier refutes the claim."""
    top, d, d_prime = drawn
    bound = epsilon_lower_bound(released(d, "D", top, SIGMA / 2, 33), released(d_prime, "D'", top, SIGMA / 2, 34),
                                DELTA)
    assert bound.eps_lower > claim(top), (top, bound.eps_lower, claim(top))


# ---------------------------------------------------------------------------------------------------------
# Label and context noise (Theorem G.1): the augmentation's amplification, audited with its own noise
# ---------------------------------------------------------------------------------------------------------
# WOR top level, WR bottom level, lambda = 1, w = 1, label = context noise sigma_X = 1 in units of v = 1: the
# claim charges rho r tau instead of rho r (tau = 2 Phi(1 / (2 sigma_X)) - 1 = 0.38, hardened a little more).
# Neighbours: the value of series 0 at time 3 is v under D and 0 under D'. Attack (the coupling of Lemma G.3
# at its weakest point): a window holding that position has gradient +C when its NOISY copy of the value
# exceeds v / 2, every other window -C. The windows are drawn by WindowSampler, gathered by PaddedPanel
# and noised by sampling.augment (hardened), all steps at once (the augmentation noise is i.i.d. per value).
AUG_SERIES, AUG_BATCH, AUG_NOISE, AUG_BOUND, AUG_SIGMA = 4, 2, 1.0, 1.0, 1.5  # claim 1.33 (2.56 without augmentation)


def augmented_setting(noise: float) -> DpSgdSetting:
    return DpSgdSetting(AUG_SERIES, LENGTH, CONTEXT, HORIZON, AUG_BATCH, AUG_SIGMA, label_noise=noise,
                        context_noise=noise, value_bound=AUG_BOUND if noise else None, sampler="hardened",
                        parameters=1, clip_norm=CLIP)


def augmented_release(neighbour: str, noise: float, seed: int) -> np.ndarray:
    """One released coordinate per step of the attack above (N_DRAWS steps); ``noise`` is the label and
    context noise the windows actually get (the claim's is AUG_NOISE)."""
    s = augmented_setting(AUG_NOISE)
    values = np.zeros((AUG_SERIES, LENGTH))
    values[0, VALUE_AT] = AUG_BOUND if neighbour == "D" else 0.0
    panel = sampling.PaddedPanel(values, CONTEXT, HORIZON)
    sampler = sampling.WindowSampler(s)
    rng = np.random.default_rng(seed)
    batches = [sampler.next_batch(rng) for _ in range(N_DRAWS)]
    series = np.concatenate([b[0] for b in batches])
    starts = np.concatenate([b[1] for b in batches])
    assert series.size == N_DRAWS * AUG_BATCH  # WR bottom level, lambda = 1: exactly B windows a step
    ctx, tgt = panel.gather(series, starts)
    ctx, tgt = sampling.augment(ctx, tgt, noise, noise, AUG_BOUND, rng, hardened=True)
    windows = np.concatenate([ctx, tgt], axis=1)
    offset = VALUE_AT - starts + CONTEXT  # where the value sits in a window of series 0
    holds = (series == 0) & (offset >= 0) & (offset < CONTEXT + HORIZON)
    noisy = windows[np.arange(series.size), np.clip(offset, 0, CONTEXT + HORIZON - 1)]
    grads = np.where(holds & (noisy > AUG_BOUND / 2), CLIP, -CLIP)
    sums = grads.reshape(N_DRAWS, AUG_BATCH).sum(axis=1)
    return trainer.dp_gradient(sums, AUG_SIGMA, CLIP, AUG_BATCH, rng, s.lattice.granularity)


@pytest.fixture(scope="module")
def augmented_claim() -> float:
    return account_dpsgd(augmented_setting(AUG_NOISE), DELTA, steps=1).epsilon


def test_label_and_context_noise_amplification_is_not_refuted(augmented_claim):
    bound = epsilon_lower_bound(augmented_release("D", AUG_NOISE, 41), augmented_release("D'", AUG_NOISE, 42), DELTA)
    assert bound.eps_lower <= augmented_claim, (bound.eps_lower, augmented_claim)


def test_audit_refutes_the_augmented_claim_without_augmentation(augmented_claim):
    """Negative control: windows that do not get the noise the claim credits are caught (the claim
    with augmentation is 1.33; the same steps without it reach about 1.8 here)."""
    assert augmented_claim < account_dpsgd(augmented_setting(0.0), DELTA, steps=1).epsilon
    bound = epsilon_lower_bound(augmented_release("D", 0.0, 43), augmented_release("D'", 0.0, 44), DELTA)
    assert bound.eps_lower > augmented_claim, (bound.eps_lower, augmented_claim)


# ---------------------------------------------------------------------------------------------------------
# WR bottom level with lambda = 2, deterministic top level (per epoch, Theorem E.1, an upper bound)
# ---------------------------------------------------------------------------------------------------------
# Attack of Theorem 4.3 (the optimistic lower bound): a window containing the value has gradient +C e_1
# under D, every other window -C e_1, so a step's sum is (2 J - lambda) C under D and -lambda C under D',
# J ~ Bin(lambda, r) the windows of series 0 (drawn WITH replacement) that contain it.
WR_SIGMA = 6.0  # claim 1.86 per epoch (the Theorem 4.3 lower bound is 1.03)


def wr_setting(sigma: float) -> DpSgdSetting:
    return DpSgdSetting(2, LENGTH, CONTEXT, HORIZON, 2, sigma, top="deterministic", bottom="wr", instances=2,
                        sampler="hardened", parameters=1, clip_norm=CLIP)


def wr_release(neighbour: str, sigma: float, seed: int) -> np.ndarray:
    """The released coordinate of the step of each epoch that holds series 0 (N_DRAWS epochs)."""
    s = wr_setting(sigma)
    panel = marker_panel(2, LENGTH, VALUE_AT, CONTEXT, HORIZON)
    sampler = sampling.WindowSampler(s)
    rng = np.random.default_rng(seed)
    j = np.empty(N_DRAWS)
    for i in range(N_DRAWS):
        counts = []
        for _ in range(s.steps_per_epoch):
            series, starts = sampler.next_batch(rng)
            assert series.size == INSTANCES  # lambda windows of one series, with replacement
            ctx, tgt = panel.gather(series, starts)
            counts.append(ctx.sum() + tgt.sum())
        assert counts[1] == 0  # series 0 is in the first step of every epoch only
        j[i] = counts[0]
    sums = CLIP * (2 * j - INSTANCES) if neighbour == "D" else np.full(N_DRAWS, -CLIP * INSTANCES)
    return trainer.dp_gradient(sums, sigma, CLIP, s.batch_size, rng, s.lattice.granularity)


def test_wr_bottom_level_with_two_instances_is_not_refuted():
    claim_wr = account_dpsgd(wr_setting(WR_SIGMA), DELTA, epochs=1).epsilon
    bound = epsilon_lower_bound(wr_release("D", WR_SIGMA, 51), wr_release("D'", WR_SIGMA, 52), DELTA)
    assert bound.eps_lower <= claim_wr, (bound.eps_lower, claim_wr)


def test_wr_audit_refutes_a_third_of_the_claimed_noise():
    """Negative control (half the noise reaches only about the claim here: this attack is loose for lambda > 1)."""
    claim_wr = account_dpsgd(wr_setting(WR_SIGMA), DELTA, epochs=1).epsilon
    bound = epsilon_lower_bound(wr_release("D", WR_SIGMA / 3, 53), wr_release("D'", WR_SIGMA / 3, 54), DELTA)
    assert bound.eps_lower > claim_wr, (bound.eps_lower, claim_wr)

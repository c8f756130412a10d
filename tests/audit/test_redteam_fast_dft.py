"""Red-team audit of the DFT and FAST claims when one unit reaches more series than K (specs/audit.md).

Two ways a unit reaches series beyond ``--series-per-user K`` that tsdp's own bounds allow: a
substitution whose old and new user lie in different series (this section), and a w-event unit,
whose K is per bucket, moving between series (the last section).

tsdp's substitution relation replaces one unit by another "whose cells may be disjoint from the
first" (:mod:`tsdp.accounting.sensitivity`). With ``--series-per-user 1`` each of the two units
touches one series, but not necessarily the same one: the old user's events leave series s0 and
the new user's events arrive in series s1. The neighbours below are event tables loaded through
``tsdp.engine.panel.load_panel`` (the route of ``tsdp release``, caps enforced), so the pair is one
tsdp itself accepts: the panels differ by exactly its own cell count and L1 (2 I M).

The existing audit (tests/audit/test_mechanism_audit.py) substitutes within one series only.
Across series, FAST holds (its per-sample sensitivity doubles, each series getting the whole
epsilon), and so does DFT with Gaussian noise (its L2 covers both series), but DFT with Laplace
noise does not: its L1 bound sqrt(n_r) x (per-series L2, already doubled for substitution by
sqrt(2)) x K counts the old and the new unit's series as one, which is sqrt(2) too small when
they lie in two series. With k = 1 (the DC term) and a user active in all I = T steps the bound is
attained on each series, so the loss is sqrt(2) epsilon.

Draws are stacked: N copies of the panel as N x S series of one release. With one series per
unit (K = 1) neither mechanism's calibration depends on the number of series (checked: the claim
of the stacked release equals that of the real panel).
"""

from __future__ import annotations

import math
from datetime import datetime, timedelta

import numpy as np
import polars as pl
import pytest

from tsdp.accounting.audit import epsilon_lower_bound, laplace_llr
from tsdp.accounting.sensitivity import ContributionBounds
from tsdp.engine.panel import load_panel
from tsdp.io.load import InputSpec
from tsdp.mechanisms.baseline import Panel
from tsdp.mechanisms.dft import release_dft
from tsdp.mechanisms.fast import release_fast

T, S, M = 8, 3, 1  # hourly buckets, series, events per bucket (the user is active in every bucket: I = T)
EPS = 1.0
N = 40_000  # releases per side
START = datetime(2024, 1, 1)
T_FAST = 2  # FAST's audit: few changed cells, so that the threshold test sees the tail of the LLR


def spec(n_steps: int) -> InputSpec:
    return InputSpec(layout="events", time_col="time", series_col="series", user_col="user",
                     series_keys=[f"s{i}" for i in range(S)], start=str(START),
                     end=str(START + timedelta(hours=n_steps)), freq="1h")


def declared(relation: str, n_steps: int) -> ContributionBounds:
    return ContributionBounds("user", float(M), max_steps=n_steps, series_per_unit=1, neighbouring=relation)


def _events(user: str, series: int, n_steps: int, extra: int = 0) -> list[tuple]:
    """``user`` with M + extra events in every bucket of one series (the extra ones are capped)."""
    return [(user, START + timedelta(hours=h, minutes=5 + j), f"s{series}")
            for h in range(n_steps) for j in range(M + extra)]


def neighbours(relation: str, n_steps: int = T):
    """(d, d', panel): background users, plus the target in s0 under D; under D' the target is
    gone and (substitution) a newcomer is active in s1. Both load as the same panel."""
    rng = np.random.default_rng(7)
    base = [(f"b{u}", START + timedelta(hours=int(h), minutes=int(m)), f"s{int(s)}")
            for u in range(4) for h, m, s in zip(rng.integers(0, n_steps, 6), rng.integers(0, 60, 6), [u % S] * 6)]
    d_rows = base + _events("target", 0, n_steps, extra=2)
    dp_rows = base + (_events("newcomer", 1, n_steps, extra=2) if relation == "substitute" else [])
    frame = lambda rows: pl.DataFrame(rows, schema=["user", "time", "series"], orient="row")  # noqa: E731
    a, panel, _ = load_panel(frame(d_rows), spec(n_steps), declared(relation, n_steps))
    b, panel_b, _ = load_panel(frame(dp_rows), spec(n_steps), declared(relation, n_steps))
    assert panel == panel_b and panel.enforced
    return a.table.values_matrix(), b.table.values_matrix(), panel


def test_the_cross_series_substitution_is_a_neighbour_tsdp_accepts():
    """The panels differ by -1 on every step of s0 and +1 on every step of s1: exactly the cells and
    the L1 tsdp's own bounds allow for this unit (2 K I cells of M), so the pair is in scope."""
    d, dp, panel = neighbours("substitute")
    diff = d - dp
    assert np.array_equal(diff[0], np.full(T, 1.0)) and np.array_equal(diff[1], np.full(T, -1.0))
    assert not diff[2].any()
    assert np.count_nonzero(diff) == panel.bounds.cells(S, T) == 2 * T
    assert np.abs(diff).sum() == panel.bounds.l1(S, T)


def _dc(x: np.ndarray) -> np.ndarray:
    return np.fft.rfft(x, axis=-1, norm="ortho")[..., 0].real


def _stacked(panel: Panel, copies: int) -> Panel:
    return Panel(panel.n_series * copies, panel.n_steps, panel.bounds, panel.id_column, panel.enforced)


def _dft_llr_draws(d, dp, panel, sampler: str, seed: int):
    """N releases per side of DFT (Laplace, k = 1); statistic: the exact Laplace LLR of the noisy
    DC coefficients of all series (recovered exactly by the orthonormal rfft of the release)."""
    single = release_dft(d, panel, EPS, None, np.random.default_rng(0), 1, "laplace", sampler)
    scale = single.claim.parameters["scale"]
    stats = []
    for x, s in ((d, seed), (dp, seed + 1)):
        rel = release_dft(np.tile(x, (N, 1)), _stacked(panel, N), EPS, None, np.random.default_rng(s), 1,
                          "laplace", sampler)
        assert rel.claim.parameters["scale"] == scale and rel.claim.epsilon == EPS  # calibrated as one panel
        stats.append(laplace_llr(_dc(rel.values).reshape(N, S), _dc(d), _dc(dp), scale))
    return single.claim, epsilon_lower_bound(*stats)


def test_dft_laplace_add_remove_claim_holds_and_is_attained():
    """Control (no defect): the target removed, the others kept. The DC coefficient of s0 moves by
    sqrt(T) M = the claimed L1, so the claim is attained and the audit must see most of it.
    Mutation caught: halving ``l1`` in tsdp/mechanisms/dft.py gives eps_lo ~ 1.9 > 1."""
    d, dp, panel = neighbours("add-remove")
    claim, bound = _dft_llr_draws(d, dp, panel, "float", 11)
    assert bound.eps_lower <= claim.epsilon, bound.describe()
    assert bound.eps_lower > 0.8, bound.describe()  # seeds 11, 13, 15, 17: 0.95-0.99
    assert np.abs(_dc(d) - _dc(dp)).sum() == pytest.approx(claim.parameters["l1_sensitivity"], rel=1e-12)


# Was a defect, fixed (ContributionBounds.series_spread / series_changed):
#  DFT Laplace under --neighbouring substitute calibrates L1 = sqrt(n_r) * sqrt(2 I) M * K, counting the
#  old and the new user's series as one; when they lie in two series the kept coefficients move by 2
#  sqrt(n_r I) M * K, sqrt(2) more (tsdp/mechanisms/dft.py, l1 = ...)
def test_dft_laplace_kept_coefficients_stay_within_the_claimed_l1_across_series():
    d, dp, panel = neighbours("substitute")
    rel = release_dft(d, panel, EPS, None, np.random.default_rng(0), 1, "laplace", "float")
    moved = np.abs(_dc(d) - _dc(dp)).sum()
    assert moved == pytest.approx(2 * math.sqrt(T) * M)  # each series' DC moves by sqrt(T) M
    assert moved <= rel.claim.parameters["l1_sensitivity"] * (1 + 1e-12), (
        moved, rel.claim.parameters["l1_sensitivity"])


# Was a defect, fixed (ContributionBounds.series_spread / series_changed):
#  DFT Laplace, user-level substitution across two series (K = 1): claimed epsilon 1, empirical lower bound
#  ~1.38 (true loss sqrt(2)); see the test above
@pytest.mark.parametrize("sampler", ["hardened", "float"])
def test_dft_laplace_substitution_across_series_audit(sampler):
    d, dp, panel = neighbours("substitute")
    claim, bound = _dft_llr_draws(d, dp, panel, sampler, 21)
    assert claim.unit.relation == "substitute" and claim.epsilon == EPS
    assert bound.eps_lower <= claim.epsilon, bound.describe()


def test_dft_gaussian_l2_covers_substitution_across_series():
    """Control: the Gaussian DFT's L2 (per-series L2 x sqrt(K), the per-series L2 doubled in cells)
    covers the two series: sqrt(sqrt(T)^2 + sqrt(T)^2) M = sqrt(2 T) M <= the claimed L2.
    Mutation caught: dropping the substitution factor of ``cells`` in sensitivity.py fails it."""
    d, dp, panel = neighbours("substitute")
    rel = release_dft(d, panel, EPS, 1e-6, np.random.default_rng(0), 3, "gaussian", "float")
    spec = lambda x: np.fft.rfft(x, axis=-1, norm="ortho")[:, :3]  # noqa: E731
    moved = np.sqrt((np.abs(spec(d) - spec(dp)) ** 2).sum())
    assert moved == pytest.approx(math.sqrt(2 * T) * M)
    assert moved <= rel.claim.parameters["l2_sensitivity"] * (1 + 1e-12)


def test_fast_substitution_across_series_claim_holds_and_is_attained():
    """FAST, every step sampled (fixed interval 1, M = T samples): the old user's T samples of s0
    and the newcomer's T samples of s1 each move by Delta_q; with the per-sample sensitivity
    doubled for substitution (lambda = 2 Delta_q c / epsilon) the loss is exactly epsilon, and the
    two series each get the whole epsilon (parallel: K = 1). The audit must stay below epsilon and
    see most of it. Mutation caught: dropping the factor 2.0 for substitution in
    tsdp/mechanisms/fast.py gives eps_lo ~ 1.8 > 1."""
    d, dp, panel = neighbours("substitute", T_FAST)
    single = release_fast(d, panel, EPS, np.random.default_rng(0), interval=1, adaptive=False, sampler="float")
    scale = single.claim.parameters["scale"]
    stats = []
    for x, seed in ((d, 31), (dp, 32)):
        rel = release_fast(np.tile(x, (N, 1)), _stacked(panel, N), EPS, np.random.default_rng(seed), interval=1,
                           adaptive=False, sampler="float", trace=True)
        assert rel.claim.parameters["scale"] == scale and rel.claim.epsilon == EPS
        z = rel.trace["z"].reshape(N, S * T_FAST)  # every step sampled: the noisy observations
        stats.append(laplace_llr(z, d.ravel(), dp.ravel(), scale))
    bound = epsilon_lower_bound(*stats)
    assert bound.eps_lower <= EPS, bound.describe()
    assert bound.eps_lower > 0.6, bound.describe()  # seeds 31, 33, 35, 37: 0.80-0.92
    assert scale == 2 * M * T_FAST / EPS and single.claim.parameters["samples_per_unit"] == T_FAST


# ---------------------------------------------------------------------------------------------
# w-event with --series-per-user K: K series PER BUCKET, so a unit can reach min(S, K w) series
# ---------------------------------------------------------------------------------------------
# tsdp.io.events enforces, for level w-event, at most K series per bucket (a choice over the whole
# stream would not be stable for a window), and ContributionBounds.cells counts K w cells. But
# ContributionBounds.series_touched returns K for w-event too, and DFT (Laplace: L1 = sqrt(n_r) x
# per-series L2 x K) and FAST (samples on changed cells: min(M, w) x K) treat it as the number of
# series the unit reaches. A unit active in one series per bucket, a different one each bucket
# (a user who moves between stations), reaches w series.


def wevent_neighbours(n_steps: int, n_series: int, w: int, background: int = 1):
    """(d, d', panel) for a w-event unit (M = 1 event per bucket, K = 1 series per bucket) active in
    series j mod S at bucket j, for j < w, with 3 events per bucket (2 are capped); add/remove.
    ``background``: events of other users in every cell."""
    spec_w = InputSpec(layout="events", time_col="time", series_col="series", user_col="user",
                       series_keys=[f"s{i}" for i in range(n_series)], start=str(START),
                       end=str(START + timedelta(hours=n_steps)), freq="1h")
    bounds = ContributionBounds("w-event", 1.0, w=w, series_per_unit=1)
    base = [(f"bg{s}_{e}", START + timedelta(hours=h, minutes=1), f"s{s}")
            for h in range(n_steps) for s in range(n_series) for e in range(background)]
    unit = [("mover", START + timedelta(hours=j, minutes=5 + e), f"s{j % n_series}") for j in range(w) for e in range(3)]
    frame = lambda rows: pl.DataFrame(rows, schema=["user", "time", "series"], orient="row")  # noqa: E731
    a, panel, _ = load_panel(frame(base + unit), spec_w, bounds)
    b, panel_b, _ = load_panel(frame(base), spec_w, bounds)
    assert panel == panel_b and panel.enforced
    d, dp = a.table.values_matrix(), b.table.values_matrix()
    diff = d - dp
    assert np.abs(diff).sum() == panel.bounds.l1(n_series, n_steps) == w  # within tsdp's own cell count
    assert np.count_nonzero(diff.any(axis=1)) == min(n_series, w)  # ...but in min(S, w) series
    return d, dp, panel


# Was a defect, fixed (ContributionBounds.series_spread / series_changed):
#  DFT Laplace, --unit w-event --series-per-user 1: a unit moving between series reaches w series, not 1;
#  the kept coefficients move by L1 41.8 against the claimed 16 (T = S = w = 16, k = 9)
#  (tsdp/mechanisms/dft.py l1 = sqrt(n_r) * series_l2 * touched, touched = series_touched = K)
def test_dft_laplace_wevent_unit_moving_between_series_stays_within_l1():
    n = 16
    d, dp, panel = wevent_neighbours(n, n, n)
    rel = release_dft(d, panel, EPS, None, np.random.default_rng(0), 9, "laplace", "float")
    spec = np.fft.rfft(d - dp, axis=-1, norm="ortho")[:, :9]
    moved = np.abs(spec.real).sum() + np.abs(spec.imag).sum()
    assert moved <= rel.claim.parameters["l1_sensitivity"] * (1 + 1e-12), (moved, rel.claim.parameters["l1_sensitivity"])


# Was a defect, fixed (ContributionBounds.series_spread / series_changed):
#  as above, audited: T = S = w = 2, k = 2 (DC and Nyquist), claimed epsilon 1, Clopper-Pearson lower bound
#  ~1.3 (true loss sqrt(2))
def test_dft_laplace_wevent_unit_moving_between_series_audit():
    d, dp, panel = wevent_neighbours(2, 2, 2)

    def coefficients(x):  # every kept real number: DC and Nyquist of each series (both real)
        return np.fft.rfft(x, axis=-1, norm="ortho").real

    scale = release_dft(d, panel, EPS, None, np.random.default_rng(0), 2, "laplace", "float").claim.parameters["scale"]
    stats = []
    for x, seed in ((d, 61), (dp, 62)):
        rel = release_dft(np.tile(x, (N, 1)), _stacked(panel, N), EPS, None, np.random.default_rng(seed), 2,
                          "laplace", "float")
        assert rel.claim.parameters["scale"] == scale
        stats.append(laplace_llr(coefficients(rel.values).reshape(N, 4), coefficients(d).ravel(),
                                 coefficients(dp).ravel(), scale))
    bound = epsilon_lower_bound(*stats)
    assert bound.eps_lower <= EPS, bound.describe()


# Was a defect, fixed (ContributionBounds.series_spread / series_changed):
#  FAST, --unit w-event --series-per-user 1, adaptive with M < w: the noise is calibrated for c K = min(M,
#  w) x 1 samples on changed cells, but a unit moving between series is sampled more often in some
#  transcripts (M = 3, warm-up 0, xi 1, theta 2: 4 of 3 in ~5% of them; the defaults at epsilon 0.1, T =
#  100, S = 5: up to 19 of 15), where the privacy loss reaches (hits / (c K)) epsilon
#  (tsdp/mechanisms/fast.py: n_hit = hits * touched, touched = series_touched = K)
@pytest.mark.parametrize("case", [dict(n_steps=24, n_series=3, epsilon=1.0, max_samples=3, warmup=0, xi=1.0, theta=2.0, n=4000),
                                  dict(n_steps=100, n_series=5, epsilon=0.1, n=2000)], ids=["M3-warmup0", "defaults"])
def test_fast_wevent_unit_moving_between_series_is_sampled_at_most_as_claimed(case):
    """The pointwise bound of the Laplace claim: in every transcript, the samples on changed cells
    times Delta_q stay within epsilon x lambda (F-T7 for the declared unit)."""
    case = dict(case)
    n_steps, n_series, n = case.pop("n_steps"), case.pop("n_series"), case.pop("n")
    d, dp, panel = wevent_neighbours(n_steps, n_series, n_steps, background=2)
    changed = d != dp
    rel = release_fast(np.tile(d, (n, 1)), _stacked(panel, n), case.pop("epsilon"), np.random.default_rng(71),
                       sampler="float", **case)
    hits = (rel.sampled.reshape(n, n_series, n_steps) & changed).sum(axis=(1, 2))
    p = rel.claim.parameters
    budget = rel.claim.epsilon * p["scale"] / p["sensitivity_per_timestamp"]  # the claim's c K
    assert hits.max() <= budget + 1e-9, (int(hits.max()), budget)

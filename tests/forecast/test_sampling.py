"""Window samplers (tsdp.forecast.sampling) against the accountant they must match.

Spec: /work/shared/specs/schuchardt.md sections 1.2 ("[derived]" window-membership paragraph),
1.3 (Algs 1, 3-6, Eq. 1), 5.4 and 6.2 item 8; accountant: tsdp.accounting.structured.DpSgdSetting.

Where the tolerances come from: every Monte Carlo check compares a count with its exact (or a
conservative) binomial/normal standard error and allows Z = 5 standard errors (two-sided
P ~ 6e-7 per check under a correct sampler), with fixed seeds. Where draws are not independent
(positions of one series under a deterministic or WOR top level) the binomial standard error is an
upper bound on the true one, so the check is conservative. Sample variances use the standard error
sqrt((mu4 - sigma^4) / n) computed from the exact distribution. Exact properties (support, batch
composition, epoch structure, window geometry) are asserted exactly.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from tsdp.accounting.structured import DpSgdSetting, binomial_weights
from tsdp.errors import DataError, UsageError
from tsdp.forecast.sampling import PaddedPanel, WindowSampler, augment, gather_windows, series_lengths

Z = 5.0
STEPS = 20_000
TOPS = ("wor", "poisson", "deterministic", "shuffle")
BOTTOMS = ("wr", "poisson")

# N = 20 series of length L = 30, L_C = 3, L_F = 2 => T = 29, k = 5, r = 5/29, N' = 5, rho = 0.25,
# 4 steps per epoch (N divisible by N', so every top level selects a series with probability 1/4
# per step).
BASE = dict(n_series=20, length=30, context=3, horizon=2, batch_size=5, noise_multiplier=1.0)


def setting(**changes) -> DpSgdSetting:
    return DpSgdSetting(**{**BASE, **changes})


def run(s: DpSgdSetting, steps: int, seed: int, lengths=None):
    """Draw ``steps`` batches; return per-step lists and the concatenated (step, series, start)."""
    sampler = WindowSampler(s, lengths)
    rng = np.random.default_rng(seed)
    batches = [sampler.next_batch(rng) for _ in range(steps)]
    step = np.concatenate([np.full(b[0].size, i) for i, b in enumerate(batches)])
    series = np.concatenate([b[0] for b in batches])
    starts = np.concatenate([b[1] for b in batches])
    return batches, step, series, starts


def membership(length: int, context: int, horizon: int):
    """(T, L) booleans from the window definition: start s covers context s-L_C..s-1 and forecast
    s..s+L_F-1 (original 0-based indices; negative ones are padding)."""
    t = length - horizon + 1
    s = np.arange(t)[:, None]
    e = np.arange(length)[None, :]
    in_context = (s - context <= e) & (e <= s - 1)
    in_forecast = (s <= e) & (e <= s + horizon - 1)
    return in_context | in_forecast, in_forecast


def assert_rate(count, n, p, what: str, z: float = Z) -> None:
    """count ~ Bin(n, p) (or less variable): |count/n - p| <= z standard errors."""
    count, n = np.asarray(count, dtype=float), np.asarray(n, dtype=float)
    se = np.sqrt(p * (1 - p) / n)
    dev = np.abs(count / n - p)
    assert np.all(dev <= z * se), f"{what}: max deviation {np.max(dev / se):.2f} standard errors"


def moments_of_sum(pmf_one: np.ndarray, copies: int):
    """Mean, variance and 4th central moment of the sum of ``copies`` iid copies of pmf_one."""
    pmf = np.array([1.0])
    for _ in range(copies):
        pmf = np.convolve(pmf, pmf_one)
    x = np.arange(pmf.size)
    mean = float(pmf @ x)
    var = float(pmf @ (x - mean) ** 2)
    mu4 = float(pmf @ (x - mean) ** 4)
    return mean, var, mu4


def assert_mean_and_variance(sample: np.ndarray, mean: float, var: float, mu4: float, what: str) -> None:
    n = sample.size
    assert abs(sample.mean() - mean) <= Z * math.sqrt(var / n), f"{what}: mean {sample.mean()} vs {mean}"
    assert abs(sample.var(ddof=1) - var) <= Z * math.sqrt((mu4 - var**2) / n), \
        f"{what}: variance {sample.var(ddof=1)} vs {var}"


# --- geometry: the window definition gives the accountant's k ----------------------------------------
@pytest.mark.parametrize("length, context, horizon", [(30, 3, 2), (40, 5, 4), (12, 0, 3), (6, 3, 2), (9, 4, 1)])
def test_window_geometry_matches_accountant_k(length, context, horizon):
    member, forecast = membership(length, context, horizon)
    t = length - horizon + 1
    counts = member.sum(axis=0)
    span = context + horizon
    one = DpSgdSetting(n_series=1, length=length, context=context, horizon=horizon, batch_size=1,
                       noise_multiplier=1.0)
    assert one.windows == t
    # the worst-case element lies in exactly k windows; element 0 only in min(L_C + 1, T) (spec 6.3.5)
    assert counts.max() == one.affected_windows
    assert counts[0] == min(context + 1, t)
    interior = np.arange(horizon - 1, t - context)  # L_F-1 <= e <= T-L_C-1 (0-based)
    if t >= span:
        assert interior.size > 0
        assert np.all(counts[interior] == span)
        assert np.all(forecast.sum(axis=0)[interior] == horizon)  # phi = L_F / (L_C + L_F)
        outside = np.setdiff1d(np.arange(length), interior)
        assert np.all(counts[outside] < span)
    for w in (1, 2, 3):
        event = DpSgdSetting(**{**one.__dict__, "unit": "event", "w": w})
        user = DpSgdSetting(**{**one.__dict__, "unit": "user", "w": w})
        blocks = [member[:, e:e + w].any(axis=1).sum() for e in range(length - w + 1)]
        assert max(blocks) == event.affected_windows
        worst_set = max(member[:, list(c)].any(axis=1).sum()
                        for c in itertools.combinations(range(length), w))
        assert worst_set == user.affected_windows


def test_gathered_windows_follow_the_window_definition():
    length, context, horizon = 30, 3, 2
    member, forecast = membership(length, context, horizon)
    labels = np.arange(1, length + 1, dtype=float)[None, :]  # element e carries label e + 1
    starts = np.arange(length - horizon + 1)
    ctx, tgt = gather_windows(labels, np.zeros_like(starts), starts, context, horizon)
    for s in starts:
        got = set(ctx[s][ctx[s] > 0].astype(int) - 1) | set(tgt[s].astype(int) - 1)
        assert got == set(np.flatnonzero(member[s]))
        assert set(tgt[s].astype(int) - 1) == set(np.flatnonzero(forecast[s]))
        assert np.sum(ctx[s] == 0) == max(0, context - s)  # front padding


# --- exact batch structure ---------------------------------------------------------------------------
@pytest.mark.parametrize("top", TOPS)
@pytest.mark.parametrize("bottom", BOTTOMS)
def test_batch_structure(top, bottom):
    s = setting(top=top, bottom=bottom, instances=2, batch_size=10)
    batches, _, series, starts = run(s, 2000, seed=1)
    assert series.dtype == np.int64 and starts.dtype == np.int64
    assert series.min() >= 0 and series.max() < s.n_series
    assert starts.min() == 0 and starts.max() == s.windows - 1  # the whole start range 0..T-1 is used
    for ser, st in batches:
        assert ser.shape == st.shape
        chosen, reps = np.unique(ser, return_counts=True)
        if bottom == "wr":
            assert np.all(reps == s.instances)
            if top != "poisson":
                assert chosen.size == s.selected and ser.size == s.batch_size
        else:
            pairs = ser * s.windows + st
            assert np.unique(pairs).size == pairs.size  # Poisson bottom: distinct starts per series
            assert chosen.size <= (s.n_series if top == "poisson" else s.selected)


@pytest.mark.parametrize("top", ["wor", "poisson"])
@pytest.mark.parametrize("bottom", BOTTOMS)
def test_series_inclusion_probability_is_rho(top, bottom):
    s = setting(top=top, bottom=bottom, instances=2, batch_size=10)
    g = s.geometry()
    batches, *_ = run(s, STEPS, seed=2)
    appear = np.zeros(s.n_series)
    for ser, _ in batches:
        appear[np.unique(ser)] += 1
    # a series selected by the top level shows up unless the Poisson bottom level draws no window
    p = g["rho"] if bottom == "wr" else g["rho"] * (1 - (1 - g["r_poisson"]) ** g["T"])
    assert g["rho"] == s.selected / s.n_series == 0.25
    assert_rate(appear, STEPS, p, f"series inclusion ({top}/{bottom})")


@pytest.mark.parametrize("bottom", BOTTOMS)
def test_poisson_top_level_batch_size(bottom):
    s = setting(top="poisson", bottom=bottom, instances=2, batch_size=10)
    g = s.geometry()
    batches, *_ = run(s, STEPS, seed=3)
    sizes = np.array([b[0].size for b in batches])
    if bottom == "wr":  # lambda windows per selected series
        per_series = np.zeros(s.instances + 1)
        per_series[0], per_series[s.instances] = 1 - g["rho"], g["rho"]
    else:  # Bin(T, r_P) windows per selected series
        x = np.arange(g["T"] + 1)
        from scipy import stats

        per_series = g["rho"] * stats.binom.pmf(x, g["T"], g["r_poisson"])
        per_series[0] += 1 - g["rho"]
    mean, var, mu4 = moments_of_sum(per_series, s.n_series)
    assert mean == pytest.approx(s.instances * s.selected)  # E = lambda N' = B
    assert_mean_and_variance(sizes, mean, var, mu4, f"poisson top batch size ({bottom})")
    if bottom == "wr":
        n_series = sizes / s.instances  # distinct series per step ~ Bin(N, N'/N)
        assert var == pytest.approx(s.instances**2 * s.n_series * g["rho"] * (1 - g["rho"]))
        assert np.all(n_series == np.round(n_series))


# --- epoch-level top levels --------------------------------------------------------------------------
@pytest.mark.parametrize("top", ["deterministic", "shuffle"])
@pytest.mark.parametrize("n_series", [20, 22])
def test_iteration_epochs(top, n_series):
    s = setting(top=top, n_series=n_series)
    sampler = WindowSampler(s)
    assert sampler.epoch_level and not WindowSampler(setting()).epoch_level
    assert sampler.steps_per_epoch == s.steps_per_epoch == 4  # floor(N lambda / B) with 2 left over
    rng = np.random.default_rng(4)
    epochs = 1500 if top == "shuffle" else 3
    used = np.zeros(n_series)
    orders = set()
    for epoch in range(epochs):
        seen = []
        for step in range(s.steps_per_epoch):
            assert sampler.epoch == epoch and sampler.step_in_epoch == step
            ser, st = sampler.next_batch(rng)
            assert ser.size == s.batch_size and np.unique(ser).size == s.selected
            if top == "deterministic":  # Alg. 3: consecutive disjoint blocks in index order
                np.testing.assert_array_equal(ser, np.arange(step * s.selected, (step + 1) * s.selected))
            seen.append(ser)
        seen = np.concatenate(seen)
        assert np.unique(seen).size == seen.size == s.steps_per_epoch * s.selected  # each at most once
        used[seen] += 1
        orders.add(tuple(seen))
    expected = s.steps_per_epoch * s.selected / n_series
    if n_series == 20:
        assert np.all(used == epochs)  # every series exactly once per epoch
    if top == "deterministic":
        assert len(orders) == 1
        if n_series == 22:
            assert used[20] == used[21] == 0  # leftover series are never used
    else:
        assert len(orders) == epochs  # a fresh permutation every epoch
        if n_series == 22:
            assert_rate(used, epochs, expected, "shuffle: series used in an epoch")


@pytest.mark.parametrize("top", ["deterministic", "shuffle"])
def test_iteration_with_poisson_bottom_uses_a_series_at_most_once_per_epoch(top):
    s = setting(top=top, bottom="poisson", instances=2, batch_size=10)
    sampler, rng = WindowSampler(s), np.random.default_rng(5)
    for _ in range(200):
        seen = np.concatenate([np.unique(sampler.next_batch(rng)[0]) for _ in range(s.steps_per_epoch)])
        assert np.unique(seen).size == seen.size


# --- bottom level: window containment ------------------------------------------------------------------
@pytest.mark.parametrize("top", TOPS)
def test_wr_window_contains_element_with_probability_r(top):
    s = setting(top=top)  # lambda = 1, 1-event
    g = s.geometry()
    _, _, _, starts = run(s, STEPS, seed=6)
    member, forecast = membership(s.length, s.context, s.horizon)
    hist = np.bincount(starts, minlength=g["T"])
    contain = hist @ member  # windows (over all series, equal lengths) containing element e
    in_forecast = hist @ forecast
    m = starts.size
    if top != "poisson":  # a Poisson top level has a random batch size
        assert m == STEPS * s.batch_size
    expected = member.sum(axis=0) / g["T"]  # start uniform over T positions
    assert_rate(contain, m, expected, f"containment ({top})")
    interior = np.arange(s.horizon - 1, g["T"] - s.context)
    assert np.allclose(expected[interior], g["r"]) and g["r"] == s.affected_windows / s.windows
    assert expected[0] == (s.context + 1) / g["T"]  # element 0 is in L_C + 1 windows only
    assert_rate(in_forecast[interior], contain[interior], g["phi"], f"forecast part ({top})")


def test_wr_with_several_instances_is_binomial_with_replacement():
    s = setting(top="wor", instances=3, batch_size=15)
    g = s.geometry()
    batches, _, series, starts = run(s, STEPS, seed=7)
    lam, t = s.instances, g["T"]
    st = starts.reshape(-1, lam)  # lambda consecutive windows per selected series
    assert np.all(series.reshape(-1, lam) == series.reshape(-1, lam)[:, :1])
    member, _ = membership(s.length, s.context, s.horizon)
    e = 12  # interior element: in k windows
    assert member[:, e].sum() == s.affected_windows
    hits = member[st, e].sum(axis=1)  # affected windows drawn per selected series
    weights, _ = binomial_weights(lam, g["r"])  # the accountant's mixture weights (Thm E.1/4.3)
    for j in range(lam + 1):
        assert_rate(np.sum(hits == j), hits.size, weights[j], f"{j} affected windows of {lam}")
    # with replacement: two draws of a series coincide with probability 1/T
    assert_rate(np.sum(st[:, 0] == st[:, 1]), st.shape[0], 1 / t, "repeated start")


@pytest.mark.parametrize("unit, w, elements", [
    ("event", 2, [10, 11]),
    ("event", 4, [8, 9, 10, 11]),
    ("user", 3, [1, 6, 11]),  # interior and spaced >= L_C + L_F apart: disjoint window sets
    ("user", 2, [4, 20]),
])
def test_w_event_and_w_user_affected_windows(unit, w, elements):
    s = setting(unit=unit, w=w)
    g = s.geometry()
    _, _, _, starts = run(s, STEPS, seed=8)
    member, _ = membership(s.length, s.context, s.horizon)
    affected = member[:, elements].any(axis=1)
    assert affected.sum() == s.affected_windows  # the worst case for this unit is attained
    hits = affected[starts].sum()
    assert_rate(hits, starts.size, g["r"], f"{w}-{unit} containment")


@pytest.mark.parametrize("top", TOPS)
def test_poisson_bottom_inclusion_rate_per_position(top):
    s = setting(top=top, bottom="poisson", instances=2, batch_size=10)
    g = s.geometry()
    assert g["r_poisson"] == 2 / 29
    _, _, series, starts = run(s, STEPS, seed=9)
    # every top level here selects a series with probability N'/N = 1/4 per step (N divisible by N')
    per_step = g["rho"] if s.step_level else s.selected / s.n_series
    counts = np.bincount(starts, minlength=g["T"])
    assert_rate(counts, STEPS * s.n_series, per_step * g["r_poisson"], f"Poisson rate per position ({top})")


def test_poisson_bottom_affected_windows_follow_the_accountants_binomial():
    s = setting(top="deterministic", bottom="poisson", instances=2, batch_size=10)
    g = s.geometry()
    batches, step, series, starts = run(s, STEPS, seed=10)
    member, _ = membership(s.length, s.context, s.horizon)
    e = 12
    assert member[:, e].sum() == g["k"]
    # each (step, selected series) is one bottom-level draw; the selected series are known exactly
    selections = np.array([(i, n) for i in range(STEPS)
                           for n in range((i % 4) * s.selected, (i % 4 + 1) * s.selected)])
    key = step * s.n_series + series
    sel_key = selections[:, 0] * s.n_series + selections[:, 1]
    assert np.all(np.isin(key, sel_key))
    windows = np.bincount(np.searchsorted(sel_key, key), minlength=sel_key.size)
    hits = np.bincount(np.searchsorted(sel_key, key), weights=member[starts, e], minlength=sel_key.size)
    weights, _ = binomial_weights(g["k"], g["r_poisson"])  # Thm E.8 mixture weights Bin(j; k, r_P)
    for j in range(4):
        assert_rate(np.sum(hits == j), hits.size, weights[j], f"{j} affected windows (Poisson)")
    from scipy import stats

    pmf = stats.binom.pmf(np.arange(g["T"] + 1), g["T"], g["r_poisson"])
    mean, var, mu4 = moments_of_sum(pmf, 1)
    assert mean == pytest.approx(s.instances)  # lambda windows per series in expectation
    assert_mean_and_variance(windows.astype(float), mean, var, mu4, "windows per selected series")


# --- series of different lengths ----------------------------------------------------------------------
def test_longer_series_wr_starts_cover_their_own_range():
    s = setting(top="deterministic")
    lengths = np.full(20, 30)
    lengths[3], lengths[7] = 45, 31
    batches, _, series, starts = run(s, 8000, seed=11, lengths=lengths)
    for n in (0, 3, 7):
        own = starts[series == n]
        t_n = lengths[n] - s.horizon + 1
        assert own.min() == 0 and own.max() == t_n - 1
        assert_rate(np.bincount(own, minlength=t_n), own.size, 1 / t_n, f"uniform starts of series {n}")
    # containment of an interior element is k / T_n <= r: never more than the accountant assumes
    assert s.affected_windows / (lengths[3] - s.horizon + 1) < s.geometry()["r"]
    values = np.full((20, 45), np.nan)
    for n, ln in enumerate(lengths):
        values[n, :ln] = np.arange(ln) + 1.0
    panel = PaddedPanel(values, s.context, s.horizon)
    np.testing.assert_array_equal(panel.lengths, lengths)
    ctx, tgt = panel.gather(series, starts)
    assert np.all(np.isfinite(ctx)) and np.all(np.isfinite(tgt))


def test_longer_series_poisson_bottom_rate_is_the_accountants():
    s = setting(top="deterministic", bottom="poisson", instances=2, batch_size=10)
    lengths = np.full(20, 30)
    lengths[:5] = 50  # selected in step 0 of every epoch
    _, _, series, starts = run(s, 4000, seed=12, lengths=lengths)
    own = starts[np.isin(series, np.arange(5))]
    t_long = 50 - s.horizon + 1
    assert own.max() == t_long - 1
    # 1000 selections of each of the 5 long series; every position at rate r_P = lambda / T
    assert_rate(np.bincount(own, minlength=t_long), 5 * 1000, s.geometry()["r_poisson"], "long-series rate")


def test_length_refusals():
    with pytest.raises(DataError, match="shorter than the accountant"):
        WindowSampler(setting(), np.r_[np.full(19, 30), 29])
    with pytest.raises(DataError, match="20 series lengths"):
        WindowSampler(setting(), np.full(19, 30))
    # k clipped to T (short series): a longer series would hold the unit in more than k windows
    fits = setting(length=6, bottom="poisson")  # T = 5, raw k = L_C + L_F = 5: not clipped
    WindowSampler(fits, np.r_[np.full(19, 6), 9])
    clipped = setting(length=6, bottom="poisson", unit="event", w=2)  # raw k = 6 > T = 5
    assert clipped.affected_windows == clipped.windows == 5
    with pytest.raises(UsageError, match="--bottom poisson"):
        WindowSampler(clipped, np.r_[np.full(19, 6), 7])
    WindowSampler(setting(length=6, unit="event", w=2), np.r_[np.full(19, 6), 7])  # WR is fine


# --- gathering ----------------------------------------------------------------------------------------
def gather_loop(values, series, starts, context, horizon):
    ctx = np.zeros((len(series), context))
    tgt = np.zeros((len(series), horizon))
    for i, (n, s) in enumerate(zip(series, starts)):
        for j in range(context):
            idx = s - context + j
            ctx[i, j] = values[n, idx] if idx >= 0 else 0.0
        for j in range(horizon):
            tgt[i, j] = values[n, s + j]
    return ctx, tgt


def test_gather_matches_loop_and_pads_with_zeros():
    rng = np.random.default_rng(13)
    lengths = rng.integers(8, 20, size=6)
    values = np.full((6, 20), np.nan)
    for n, ln in enumerate(lengths):
        values[n, :ln] = rng.normal(size=ln) + 5.0  # no zeros in the data
    context, horizon = 4, 3
    series = rng.integers(0, 6, size=500)
    starts = rng.integers(0, lengths[series] - horizon + 1)
    ctx, tgt = gather_windows(values, series, starts, context, horizon)
    ref_ctx, ref_tgt = gather_loop(values, series, starts, context, horizon)
    np.testing.assert_array_equal(ctx, ref_ctx)
    np.testing.assert_array_equal(tgt, ref_tgt)
    assert ctx.shape == (500, context) and tgt.shape == (500, horizon)
    for i in np.flatnonzero(starts < context):
        assert np.all(ctx[i, :context - starts[i]] == 0) and np.all(ctx[i, context - starts[i]:] != 0)
    panel = PaddedPanel(values, context, horizon)
    np.testing.assert_array_equal(panel.lengths, lengths)
    np.testing.assert_array_equal(panel.gather(series, starts)[0], ref_ctx)
    ctx0, tgt0 = PaddedPanel(values, 0, horizon).gather(series, starts)
    assert ctx0.shape == (500, 0)
    np.testing.assert_array_equal(tgt0, ref_tgt)


def test_gather_refusals():
    values = np.arange(20.0).reshape(2, 10)
    values[1, 8:] = np.nan
    with pytest.raises(UsageError, match="outside"):
        gather_windows(values, np.array([1]), np.array([7]), 2, 2)  # series 1 has length 8
    with pytest.raises(UsageError, match="outside"):
        gather_windows(values, np.array([0]), np.array([-1]), 2, 2)
    gap = values.copy()
    gap[0, 3] = np.nan
    with pytest.raises(DataError, match="series 0 has a missing value at time index 3"):
        series_lengths(gap)
    inf = values.copy()
    inf[1, 2] = np.inf
    with pytest.raises(DataError, match="infinite"):
        series_lengths(inf)


# --- augmentation -------------------------------------------------------------------------------------
def test_augment_noise_scale_and_independence():
    rng = np.random.default_rng(14)
    ctx = rng.normal(size=(4000, 6))
    tgt = rng.normal(size=(4000, 3))
    ctx_in, tgt_in = ctx.copy(), tgt.copy()
    sigma_f, sigma_c, v = 2.0, 0.5, 0.3
    out_c, out_t = augment(ctx, tgt, label_noise=sigma_f, context_noise=sigma_c, value_bound=v, rng=rng)
    np.testing.assert_array_equal(ctx, ctx_in)  # inputs untouched
    np.testing.assert_array_equal(tgt, tgt_in)
    for noise, sigma in ((out_c - ctx, sigma_c * v), (out_t - tgt, sigma_f * v)):
        df = noise.size  # sum (z / sigma)^2 ~ chi-square(df): mean df, sd sqrt(2 df)
        chi2 = np.sum((noise / sigma) ** 2)
        assert abs(chi2 - df) <= Z * math.sqrt(2 * df)
        assert abs(noise.mean()) <= Z * sigma / math.sqrt(df)
    # context and forecast noise independent; fresh noise for every window
    zc = (out_c - ctx)[:, 0] / (sigma_c * v)
    zf = (out_t - tgt)[:, 0] / (sigma_f * v)
    n = zc.size
    assert abs(np.corrcoef(zc, zf)[0, 1]) <= Z / math.sqrt(n)
    assert abs(np.corrcoef(zf[:-1], zf[1:])[0, 1]) <= Z / math.sqrt(n)
    again = augment(ctx, tgt, sigma_f, sigma_c, v, rng)[1] - tgt
    assert abs(np.corrcoef((again[:, 0]), zf)[0, 1]) <= Z / math.sqrt(n)


def test_augment_label_only_and_no_noise():
    rng = np.random.default_rng(15)
    ctx, tgt = rng.normal(size=(10, 4)), rng.normal(size=(10, 2))
    c, t = augment(ctx, tgt, 0.0, 0.0, None, rng)
    assert c is ctx and t is tgt
    c, t = augment(ctx, tgt, 1.0, 0.0, 0.1, rng)
    assert c is ctx and not np.array_equal(t, tgt)
    with pytest.raises(UsageError, match="--value-bound"):
        augment(ctx, tgt, 1.0, 0.0, None, rng)
    with pytest.raises(UsageError, match="--context-noise"):
        augment(ctx, tgt, 0.0, -1.0, 1.0, rng)

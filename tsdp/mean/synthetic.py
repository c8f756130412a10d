"""Synthetic data of Gupta et al. (spec ``mean.md`` 3.2): an ITMS-like **surrogate** count vector
(the real ITMS counts are not public), the paper's i.i.d. clipped-Gaussian values, and the
sample-scaling and user-scaling settings of Fig. 2.

The surrogate matches every published ITMS statistic: m_max = 417, sum m_l = 17166, median
(ceil(L/2)-th largest) 46, and at the Eq. (1) cap BESTFIT gives K-bar = 164 and WRAPAROUND K = 160.
"""

from __future__ import annotations

import numpy as np

from tsdp.mean.grouping import layout, median_cap, opt_cap

ITMS_M_MAX = 417
ITMS_TOTAL = 17166
ITMS_MEDIAN = 46
ITMS_KBAR = 164
ITMS_K = 160
ITMS_U = 65.0
ITMS_MU = 20.66769


def _adjust(raw: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Spec 3.2 step 2: force one user to 417 and scale the others to total 17166."""
    c = raw.astype(np.float64)
    top = int(np.argmax(c))
    rest = np.delete(np.arange(c.size), top)
    c[rest] *= (ITMS_TOTAL - ITMS_M_MAX) / c[rest].sum()
    c = np.clip(np.rint(c), 1, ITMS_M_MAX - 1).astype(np.int64)
    c[top] = ITMS_M_MAX
    diff = ITMS_TOTAL - int(c.sum())
    while diff != 0:  # fix rounding one record at a time on random users
        i = int(rng.choice(rest))
        step = 1 if diff > 0 else -1
        if 1 <= c[i] + step <= ITMS_M_MAX - 1:
            c[i] += step
            diff -= step
    return c


def surrogate_stats(counts: np.ndarray) -> dict[str, int]:
    m = opt_cap(counts)
    return {"m_max": int(counts.max()), "total": int(counts.sum()), "median": median_cap(counts),
            "m_ub_opt": m, "kbar": layout(counts, m, "bestfit").num_arrays,
            "k": layout(counts, m, "wraparound").num_arrays}


def synth_itms_counts(seed: int, max_tries: int = 20000) -> np.ndarray:
    """Spec 3.2 recipe: round(LogNormal(ln 46, s)) clipped to [1, 417], adjusted to the ITMS total,
    accepted when the median is 46 and K-bar = 164, K = 160 at the Eq. (1) cap (s, L resampled)."""
    rng = np.random.default_rng(seed)
    for _ in range(max_tries):
        s = rng.uniform(0.5, 1.5)
        n_users = int(rng.integers(164, 731))
        raw = np.clip(np.rint(rng.lognormal(np.log(ITMS_MEDIAN), s, n_users)), 1, ITMS_M_MAX)
        c = _adjust(raw, rng)
        if median_cap(c) != ITMS_MEDIAN:
            continue
        st = surrogate_stats(c)
        if st["kbar"] == ITMS_KBAR and st["k"] == ITMS_K:
            return c
    raise RuntimeError("no surrogate count vector found")


def synth_values(counts: np.ndarray, sigma: float, seed: int | np.random.Generator,
                 mu: float = ITMS_MU, upper: float = ITMS_U) -> np.ndarray:
    """The paper's i.i.d. values Pi_[0,U](N(mu, sigma^2)), one per record, users concatenated."""
    rng = np.random.default_rng(seed)
    return np.clip(rng.normal(mu, sigma, int(np.sum(counts))), 0.0, upper)


def scale_samples(counts: np.ndarray, factor: int = 10) -> np.ndarray:
    """Sample scaling (Fig. 2a): m_l -> factor * m_l, same users."""
    return np.asarray(counts, dtype=np.int64) * factor


def scale_users(counts: np.ndarray, factor: int = 10) -> np.ndarray:
    """User scaling (Fig. 2b): each count pattern replicated factor times (user l -> users
    factor*(l-1)+1 .. factor*l)."""
    return np.repeat(np.asarray(counts, dtype=np.int64), factor)


def flat_layout(groups: list[list[np.ndarray]]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The (values, user_starts, group_starts) layout of ``estimate_groups`` from nested lists:
    ``groups[g][u]`` holds user u's values (users in id order, values in time order) in group g."""
    runs = [np.asarray(u, dtype=np.float64) for g in groups for u in g]
    values = np.concatenate(runs) if runs else np.zeros(0)
    user_starts = np.concatenate(([0], np.cumsum([r.size for r in runs]))).astype(np.int64)
    group_starts = np.concatenate(([0], np.cumsum([len(g) for g in groups]))).astype(np.int64)
    return values, user_starts, group_starts


def split_users(values: np.ndarray, counts: np.ndarray) -> list[np.ndarray]:
    """Cut concatenated values into per-user arrays."""
    return np.split(np.asarray(values), np.cumsum(counts)[:-1])


def experiment_mae(counts: np.ndarray, sigma: float, epsilon: float, *, algorithm: str,
                   grouping: str = "bestfit", m_ub: str | int = "auto",
                   quantile_mode: str = "fixed", runs: int = 1000, seed: int = 0,
                   upper: float = ITMS_U, batch: int = 2000,
                   fresh_data: bool = False) -> tuple[float, float]:
    """The paper's protocol (spec 3.1): one synthetic dataset (seeded), the mechanism run ``runs``
    times, MAE = (1/N) sum_{i=1..N} |M_i - mu| against the true mean over all records (M-P4, M-P5).
    With ``fresh_data`` every run draws a new dataset (so the clipping/re-weighting error is
    averaged over datasets too, not frozen at one realisation).
    Returns (MAE, its Monte-Carlo standard error)."""
    from tsdp.mean.estimation import MeanSettings, prepare_groups, release_prepared

    counts = np.asarray(counts, dtype=np.int64)
    ss = np.random.SeedSequence(seed)
    data_seed, noise_seed = ss.spawn(2)
    values = synth_values(counts, sigma, np.random.default_rng(data_seed), upper=upper)
    true_mean = float(values.mean())
    user_starts = np.concatenate(([0], np.cumsum(counts)))
    settings = MeanSettings(epsilon=epsilon, upper=upper, algorithm=algorithm, grouping=grouping,
                            m_ub=m_ub if algorithm != "baseline" else "auto",
                            quantile_mode=quantile_mode)
    prep = prepare_groups(values, user_starts, np.array([0, counts.size]), settings)
    rng = np.random.default_rng(noise_seed)
    errs = []
    if fresh_data:
        data_rng = np.random.default_rng(data_seed)
        per = max(1, min(batch, 2_000_000 // int(counts.sum())))
        for start in range(0, runs, per):
            n = min(per, runs - start)
            vals = synth_values(np.tile(counts, n), sigma, data_rng, upper=upper)
            us = np.concatenate(([0], np.cumsum(np.tile(counts, n))))
            gs = np.arange(n + 1) * counts.size
            truth = vals.reshape(n, -1).mean(axis=1)
            est = release_prepared(prepare_groups(vals, us, gs, settings), settings, rng).estimate
            errs.append(np.abs(est - truth))
        err = np.concatenate(errs)
        return float(err.mean()), float(err.std(ddof=1) / np.sqrt(err.size))
    for start in range(0, runs, batch):
        n = min(batch, runs - start)
        errs.append(np.abs(release_prepared(prep.repeat(n), settings, rng).estimate - true_mean))
    err = np.concatenate(errs)
    return float(err.mean()), float(err.std(ddof=1) / np.sqrt(err.size))

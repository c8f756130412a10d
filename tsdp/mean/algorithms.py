"""BASELINE, ARRAY-AVERAGING, LEVY and QUANTILE of Gupta, Rameshwar, Tandon and Chakraborty
("Mean Estimation with User-Level Privacy for Spatio-Temporal IoT Datasets", SPCOM 2024,
arXiv:2401.15906), vectorised over many groups (spec ``mean.md`` section 2).

Two stages:

* :func:`prepare` does all the per-record work, for every group at once, and depends on the values
  only through the array means (and, for BASELINE, the group mean): user order, caps, arrays.
* :func:`release` does the randomised part: private interval (LEVY, QUANTILE), clipping, and one
  Laplace draw per group (Thm. II.1: g + Lap(Delta_g / eps) is user-level eps-DP).

Laplace scales (spec 2.7; R = upper - lower replaces the paper's U when lower > 0; Delta_s = 1
for BESTFIT, 2 for WRAPAROUND: the arrays one user's records can reach; n = K-bar for BESTFIT, K
for WRAPAROUND):

=================  ===========================================  ========================
algorithm          statistic                                    Laplace scale
=================  ===========================================  ========================
BASELINE           f = sum S / sum m_l                          R m_max / (eps sum m_l)
ARRAY-AVERAGING    (1/n) sum A_i                                R / (n eps)
LEVY               (1/n) sum clip(A_i, a, b)                    2 Delta_s (b - a) / (n eps)
QUANTILE           (1/n) sum clip(A_i, a', b')                  2 Delta_s (b' - a') / (n eps)
=================  ===========================================  ========================

ARRAY-AVERAGING under WRAPAROUND: the paper states 2U/K (a user split over two arrays), but under
the relation tsdp states (one user's values replaced; the users and their record counts public, so
the arrays are the same in both neighbours) the user's t <= m_UB kept records hold c_1 + c_2 = t of
the m_UB places of the two arrays they span, so sum_i |A_i - A'_i| <= R (c_1 + c_2) / m_UB <= R and
the average moves by at most R / K, half the paper's. (BESTFIT: one array of n_i >= t records,
R t / n_i <= R.) The clipped averages of LEVY and QUANTILE keep 2 (b - a): a split user can move
two clipped arrays across the whole interval.

Private participation (grouping ``hash``, :func:`plan_buckets`): when which users appear in a group,
and with how many records, is private, BESTFIT and WRAPAROUND do not apply (one user added or
removed repacks every later user, and the median/opt caps read the counts). Each group instead has K
public arrays; a user's first min(m_l, m_UB) records (m_UB a public integer) go to array
h(user id) mod K, h a fixed hash of the id alone, and an empty array's mean is the public midpoint
(lower + upper) / 2. Adding, removing or replacing one user's records changes the mean of one array
of each group only, by at most R (every array mean lies in [lower, upper]), so the table holds with
n = K and Delta_s = 1, whatever the other users do: the paper's Thm. II.1 argument with the arrays'
membership a function of public parameters and the changed user's own id.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from tsdp.accounting.samplers import Sampler
from tsdp.mean.draws import draws_for
from tsdp.mean.errors import GroupDataError, GroupUsageError
from tsdp.mean.grouping import bestfit_pack_groups
from tsdp.mean.selection import sorted_segments

_TIE_RTOL = 1e-12


@dataclass
class Prepared:
    """Public structure and array means of every group (flat arrays, one entry per group unless noted)."""

    algorithm: str
    grouping: str                # bestfit, wraparound or hash (private participation: plan_buckets)
    m_ub_rule: str
    users: np.ndarray
    records_total: np.ndarray
    m_max: np.ndarray
    m_min: np.ndarray
    m_ub: np.ndarray
    num_arrays: np.ndarray       # K-bar (bestfit) or K (wraparound); 0 for baseline
    k_wraparound: np.ndarray     # floor(S(m_UB) / m_UB); 0 for baseline
    records_used: np.ndarray     # (m_max, m_min: -1 under grouping hash, which never reads them)
    arr_starts: np.ndarray       # n_groups + 1 offsets into array_means
    array_means: np.ndarray      # flat, group by group
    group_mean: np.ndarray | None = None  # baseline only: f(D)

    @property
    def n_groups(self) -> int:
        return int(self.users.size)

    def repeat(self, r: int) -> "Prepared":
        """The groups tiled r times (group g of copy c is group c * n_groups + g): for experiments
        that rerun the randomised part many times on the same data."""
        sizes = np.tile(np.diff(self.arr_starts), r)
        tile = {k: np.tile(getattr(self, k), r) for k in
                ("users", "records_total", "m_max", "m_min", "m_ub", "num_arrays",
                 "k_wraparound", "records_used", "array_means")}
        gm = None if self.group_mean is None else np.tile(self.group_mean, r)
        return replace(self, arr_starts=np.concatenate(([0], np.cumsum(sizes))), group_mean=gm, **tile)


def _opt_caps(c: np.ndarray, gs: np.ndarray, gid: np.ndarray, totals: np.ndarray) -> np.ndarray:
    """Eq. (1) per group on counts ``c`` sorted descending within groups: argmax S(m)/sqrt(m) over
    the observed counts (exact enumeration, spec 2.2 fact), ties to the smallest m, exactly.

    At position k (1-based) of the sorted counts, S(c_k) = (k - 1) c_k + sum_{i >= k} c_i."""
    n_runs = c.size
    k0 = np.arange(n_runs) - gs[:-1][gid]
    excl = np.cumsum(c) - c
    prefix = excl - excl[gs[:-1]][gid]
    s = k0 * c + (totals[gid] - prefix)
    g = s / np.sqrt(c)
    gmax = np.maximum.reduceat(g, gs[:-1])
    cand = g >= gmax[gid] * (1.0 - _TIE_RTOL)
    big = np.iinfo(np.int64).max
    lo = np.minimum.reduceat(np.where(cand, c, big), gs[:-1])
    hi = np.maximum.reduceat(np.where(cand, c, 0), gs[:-1])
    out = lo.copy()
    for grp in np.flatnonzero(lo != hi).tolist():  # near-ties: resolve exactly (S^2/m as integers)
        pos = np.flatnonzero(cand[gs[grp]:gs[grp + 1]]) + gs[grp]
        best_m = best_s = None
        for m, sm in sorted(set(zip(c[pos].tolist(), s[pos].tolist()))):
            if best_m is None or sm * sm * best_m > best_s * best_s * m:
                best_m, best_s = m, sm
        out[grp] = best_m
    return out


def _user_order(counts: np.ndarray, gid: np.ndarray) -> np.ndarray:
    """The runs by group, then count descending, ties in the given order: one stable argsort of
    ``gid (c_max + 1) + (c_max - count)`` (three times faster than a lexsort of the two)."""
    c_max = int(counts.max()) if counts.size else 0
    if gid.size and (int(gid[-1]) + 1) * (c_max + 1) >= 2**62:
        return np.lexsort((-counts, gid))
    return np.argsort(gid * (c_max + 1) + (c_max - counts), kind="stable")


@dataclass
class RunPlan:
    """The public structure of every group, decided from the per-run record counts alone, and the
    two pieces of each run whose value sums the array means need.

    Runs are in the caller's order (group by group, users ascending). Run ``i`` contributes the sum
    of its first ``cut1[i]`` records (in time order) to array ``arr1[i]`` and the sum of records
    ``cut1[i] .. cut2[i] - 1`` to array ``arr2[i]`` (-1: to no array). BESTFIT keeps a user whole
    in one array (cut1 = cut2 = min(m_l, m_UB)); WRAPAROUND may split a user over two consecutive
    arrays; BASELINE sums every record (cut1 = cut2 = m_l, arrays unused). Any engine that can sum
    a run's records by rank produces the sums (:func:`run_piece_sums` in memory).
    """

    structure: Prepared          # everything but array_means / group_mean
    cut1: np.ndarray
    cut2: np.ndarray
    arr1: np.ndarray
    arr2: np.ndarray
    kept: np.ndarray             # records of each run inside some array (for the array sizes)
    bounds: tuple[float, float] | None = None  # grouping hash: [lower, upper], the array means' range


def run_piece_sums(values: np.ndarray, user_starts: np.ndarray, cut1: np.ndarray,
                   cut2: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(sum(values[s : s + cut1]), sum(values[s + cut1 : s + cut2])) of every run starting at s,
    one reduceat pass over ``values`` sorted run by run in time order (each piece summed left to
    right, whichever branch). When the cuts are equal (BESTFIT, private participation) the second
    pieces are empty and only each run's start and first cut are boundaries; when they are the
    whole runs, the run starts alone."""
    values = np.asarray(values, dtype=np.float64)
    user_starts = np.asarray(user_starts, dtype=np.int64)
    starts = user_starts[:-1]
    if starts.size == 0:
        return np.zeros(0), np.zeros(0)
    one_cut = cut1 is cut2 or np.array_equal(cut1, cut2)
    if one_cut and np.array_equal(cut1, np.diff(user_starts)):  # whole runs (every run holds a record)
        return np.add.reduceat(values, starts), np.zeros(starts.size)
    width = 2 if one_cut else 3
    idx = np.empty(width * starts.size, dtype=np.int64)
    idx[0::width] = starts
    np.add(starts, cut1, out=idx[1::width])
    if not one_cut:
        np.add(starts, cut2, out=idx[2::width])
    # boundaries at the end of the values can only trail (the runs are in order): a piece before
    # them runs to the end, and the pieces after them are empty
    sums = np.add.reduceat(values, idx[:int(np.searchsorted(idx, values.size))])  # every run start is kept
    # reduceat gives values[idx[k]] (not 0) for an empty slice idx[k] == idx[k + 1]
    first = sums[0::width]
    first = first.copy() if (cut1 > 0).all() else np.where(cut1 > 0, first, 0.0)
    if one_cut:
        return first, np.zeros(starts.size)
    second = np.zeros(starts.size)
    second[:sums[1::3].size] = sums[1::3]  # (the last run's may have been trimmed: empty)
    return first, np.where(cut2 > cut1, second, 0.0)


def plan_runs(counts: np.ndarray, group_starts: np.ndarray, *, algorithm: str, grouping: str,
              m_ub: str | int) -> RunPlan:
    """Caps (spec 2.2), user order (2.0) and array assignment (2.1) of every group, from the
    per-run record counts ``counts`` (one run = one user's records in one group, runs group by
    group in ascending user order; ``group_starts``: offsets of each group's first run)."""
    counts = np.asarray(counts, dtype=np.int64)
    group_starts = np.asarray(group_starts, dtype=np.int64)
    n_groups = group_starts.size - 1
    runs = np.diff(group_starts)
    if n_groups < 1:
        raise GroupDataError(0, "no groups to estimate")
    empty = np.flatnonzero(runs <= 0)
    if empty.size:
        raise GroupDataError(int(empty[0]), "no records in this group")
    gid = np.repeat(np.arange(n_groups), runs)
    bad = np.flatnonzero(counts <= 0)
    if bad.size:
        raise GroupDataError(int(gid[bad[0]]), "a user run has no records")
    gs = group_starts - group_starts[0]
    totals = np.add.reduceat(counts, gs[:-1])
    order = _user_order(counts, gid)  # spec 2.0 rule 4: count descending, ties in given order
    c = counts[order]
    m_max = c[gs[:-1]]
    m_min = c[gs[1:] - 1]
    zeros = np.zeros(n_groups, dtype=np.int64)
    none = np.full(counts.size, -1, dtype=np.int64)

    if algorithm == "baseline":
        structure = Prepared(algorithm, grouping, "none", runs, totals, m_max, m_min, m_max.copy(),
                             zeros, zeros, totals.copy(), np.zeros(n_groups + 1, dtype=np.int64),
                             np.zeros(0))
        return RunPlan(structure, counts.copy(), counts.copy(), none, none, counts.copy())

    rule = m_ub
    if rule == "auto":
        rule = "median" if algorithm == "array-averaging" else "opt"
    if rule == "median":
        cap = c[gs[:-1] + (runs + 1) // 2 - 1]  # the ceil(L/2)-th largest count
    elif rule == "opt":
        cap = _opt_caps(c, gs, gid, totals)
    else:
        cap = np.full(n_groups, int(rule), dtype=np.int64)
        out = np.flatnonzero((cap < m_min) | (cap > m_max))
        if out.size:
            g0 = int(out[0])
            raise GroupUsageError(g0, f"--m-ub {int(rule)} is outside [m_min, m_max] = "
                                      f"[{int(m_min[g0])}, {int(m_max[g0])}] of this group; "
                                      "use --m-ub opt or median, or an integer in that range")
        rule = "fixed"
    t = np.minimum(c, cap[gid])  # records kept per user, in sorted order
    kept = np.add.reduceat(t, gs[:-1])
    k_wrap = kept // cap
    cut1, cut2, arr1, arr2 = (np.empty(counts.size, dtype=np.int64) for _ in range(4))
    cut2[order] = t

    if grouping == "bestfit":
        assign, n_arr = bestfit_pack_groups(c, gs, cap)
        arr_starts = np.concatenate(([0], np.cumsum(n_arr)))
        cut1[order] = t
        arr1[order] = arr_starts[:-1][gid] + assign
        arr2[:] = -1
        in_array = cut2
        used = kept
    elif grouping == "wraparound":
        n_arr = k_wrap
        zero = np.flatnonzero(n_arr == 0)
        if zero.size:
            raise GroupDataError(int(zero[0]), "WRAPAROUND gives K = 0 full arrays "
                                               "(S(m_UB) < m_UB); use --grouping bestfit")
        # the truncated streams concatenated in user order, group by group, cut into chunks of m_UB;
        # a user's t <= m_UB records start at offset pos and reach into at most two chunks
        pos = np.cumsum(t) - t
        pos -= pos[gs[:-1]][gid]
        cg = cap[gid]
        j1 = pos // cg
        first = np.minimum(t, (j1 + 1) * cg - pos)
        arr_starts = np.concatenate(([0], np.cumsum(n_arr)))
        base = arr_starts[:-1][gid]
        k = n_arr[gid]
        cut1[order] = first
        arr1[order] = np.where(j1 < k, base + j1, -1)
        arr2[order] = np.where((first < t) & (j1 + 1 < k), base + j1 + 1, -1)
        in_array = np.empty(counts.size, dtype=np.int64)
        in_array[order] = np.where(j1 < k, first, 0) + np.where((first < t) & (j1 + 1 < k), t - first, 0)
        used = n_arr * cap
    else:
        raise ValueError(f"unknown grouping {grouping!r}")
    if np.any(n_arr == 0):
        raise GroupDataError(int(np.flatnonzero(n_arr == 0)[0]), "no arrays (K-bar = 0)")
    structure = Prepared(algorithm, grouping, rule, runs, totals, m_max, m_min, cap, n_arr, k_wrap,
                         used, arr_starts, np.zeros(0))
    return RunPlan(structure, cut1, cut2, arr1, arr2, in_array)


def plan_buckets(counts: np.ndarray, group_starts: np.ndarray, buckets: np.ndarray, *, algorithm: str,
                 m_ub: int, arrays: int, lower: float, upper: float) -> RunPlan:
    """Private participation (module docstring): every group gets ``arrays`` = K arrays; run i (one
    user's records in one group) puts its first min(counts[i], m_ub) records, in time order, in
    array ``buckets[i]`` (in [0, K): a public function of the run's user id) of its group. Groups
    may be empty (all their arrays then hold the midpoint). Nothing here depends on the counts but
    which records are summed: K, m_UB and the array of each user are public."""
    if algorithm == "baseline":
        raise ValueError("BASELINE needs public participation (its sensitivity reads the counts)")
    counts = np.asarray(counts, dtype=np.int64)
    group_starts = np.asarray(group_starts, dtype=np.int64)
    n_groups = group_starts.size - 1
    runs = np.diff(group_starts)
    k = int(arrays)
    cap = int(m_ub)
    t = np.minimum(counts, cap)
    gid = np.repeat(np.arange(n_groups, dtype=np.int64), runs)
    arr1 = gid * k + np.asarray(buckets, dtype=np.int64)
    none = np.full(counts.size, -1, dtype=np.int64)
    unknown = np.full(n_groups, -1, dtype=np.int64)
    used = np.bincount(gid, weights=t, minlength=n_groups).astype(np.int64)
    structure = Prepared(algorithm, "hash", "fixed", runs, unknown, unknown, unknown,
                         np.full(n_groups, cap, dtype=np.int64), np.full(n_groups, k, dtype=np.int64),
                         np.zeros(n_groups, dtype=np.int64), used,
                         np.arange(n_groups + 1, dtype=np.int64) * k, np.zeros(0))
    return RunPlan(structure, t, t, arr1, none, t, (float(lower), float(upper)))


def finish_plan(plan: RunPlan, first: np.ndarray, second: np.ndarray) -> Prepared:
    """The array means (or, for BASELINE, the group means) from each run's two piece sums.

    Grouping hash: an empty array's mean is the midpoint of the public bounds, and every computed
    mean is clamped to them (the exact mean lies in them; the clamp removes rounding beyond), so a
    neighbour moves the computed mean of its one array by at most R, and leaves every other
    array's computed mean bit for bit (its runs and their order are unchanged)."""
    s = plan.structure
    if s.grouping == "hash":
        n_tot = int(s.arr_starts[-1])
        lower, upper = plan.bounds
        sums = np.bincount(plan.arr1, weights=first, minlength=n_tot)
        sizes = np.bincount(plan.arr1, weights=plan.cut1, minlength=n_tot)
        filled = sizes > 0
        means = np.full(n_tot, 0.5 * (lower + upper))
        np.divide(sums, sizes, out=means, where=filled)
        return replace(s, array_means=np.clip(means, lower, upper))
    if s.algorithm == "baseline":
        gid = np.repeat(np.arange(s.n_groups), s.users)
        group_mean = np.bincount(gid, weights=first, minlength=s.n_groups) / s.records_total
        return replace(s, group_mean=group_mean)
    n_tot = int(s.arr_starts[-1])
    one, two = plan.arr1 >= 0, plan.arr2 >= 0
    sums = (np.bincount(plan.arr1[one], weights=first[one], minlength=n_tot)
            + np.bincount(plan.arr2[two], weights=second[two], minlength=n_tot))
    if s.grouping == "bestfit":
        sizes = np.bincount(plan.arr1[one], weights=plan.cut1[one], minlength=n_tot)
    else:
        sizes = np.repeat(s.m_ub, s.num_arrays).astype(np.float64)
    return replace(s, array_means=sums / sizes)


def prepare(values: np.ndarray, user_starts: np.ndarray, group_starts: np.ndarray, *,
            algorithm: str, grouping: str, m_ub: str | int) -> Prepared:
    """Structure and array means for every group. See ``api.estimate_groups`` for the layout."""
    user_starts = np.asarray(user_starts, dtype=np.int64)
    plan = plan_runs(np.diff(user_starts), group_starts, algorithm=algorithm, grouping=grouping, m_ub=m_ub)
    first, second = run_piece_sums(values, user_starts, plan.cut1, plan.cut2)
    return finish_plan(plan, first, second)


def eps_dependent_rank(epsilon: float) -> int:
    """ceil(2 / eps) (spec 2.6, M-P3), robust to the rounding of 2 / eps (e.g. eps = 2/3 -> 3)."""
    return math.ceil(2.0 / epsilon - 1e-9)


@dataclass
class Released:
    estimate: np.ndarray
    statistic: np.ndarray        # the clipped/array average before noise (never reported)
    sensitivity: np.ndarray
    laplace_scale: np.ndarray
    interval: np.ndarray | None  # (n_groups, 2): [a, b] or [a', b']
    tau: np.ndarray | None
    granularity: np.ndarray | None = None  # hardened sampler: each group's lattice step g (else None)
    rounded_sensitivity: np.ndarray | None = None  # hardened: (floor(sensitivity / g) + 1) g


def check_feasible(prep: Prepared, *, algorithm: str, quantile_mode: str, epsilon: float) -> None:
    """Spec 4 rule 7: eps-dependent quantiles need ceil(2/eps) < n/2 in every group."""
    if algorithm == "quantile" and quantile_mode == "eps-dependent":
        r = eps_dependent_rank(epsilon)
        bad = np.flatnonzero(r >= prep.num_arrays / 2.0)
        if bad.size:
            g0 = int(bad[0])
            raise GroupUsageError(g0, f"too few arrays for eps-dependent quantiles (ceil(2/eps) = {r} "
                                      f">= K-bar/2 = {prep.num_arrays[g0] / 2:g}); "
                                      "use --quantile-mode fixed")


def release(prep: Prepared, rng: np.random.Generator, *, epsilon: float, lower: float, upper: float,
            quantile_mode: str = "fixed", quantiles: tuple[float, float] = (0.1, 0.9),
            gamma: float = 0.2, tau_k: str = "kbar", interval: tuple[float, float] | None = None,
            sampler: str | Sampler = "hardened", granularity: float | None = None) -> Released:
    """The randomised part, for every group. Randomness is drawn in a fixed order (selection
    steps, then one Laplace draw per group), so a seeded run is reproducible.

    ``sampler`` (a :class:`~tsdp.accounting.samplers.Sampler` or its name) picks the draws
    (:mod:`tsdp.mean.draws`): hardened, each group's statistic is rounded to a power-of-two lattice
    step g and gets g times a discrete Laplace draw (:func:`~tsdp.mean.draws.lattice_laplace`) and
    the selection steps are exact; float, numpy's Laplace and floating-point selection.

    ``interval`` forces [a, b] (LEVY/QUANTILE) for tests (M-T5, M-T8); it is not a user option."""
    algorithm = prep.algorithm
    draws = draws_for(sampler)
    check_feasible(prep, algorithm=algorithm, quantile_mode=quantile_mode, epsilon=epsilon)
    width = upper - lower
    n_groups = prep.n_groups
    tau = box = None
    if algorithm == "baseline":
        stat = prep.group_mean
        sens = width * prep.m_max / prep.records_total
        scale = sens / epsilon
    else:
        n = prep.num_arrays
        dsens = 2 if prep.grouping == "wraparound" else 1
        starts = prep.arr_starts
        means = prep.array_means
        if algorithm == "array-averaging":
            stat = np.add.reduceat(means, starts[:-1]) / n
            sens = width / n  # both groupings (module docstring)
            scale = sens / epsilon
        else:
            if interval is not None:
                a = np.full(n_groups, float(interval[0]))
                b = np.full(n_groups, float(interval[1]))
                if algorithm == "levy":
                    kt = n if tau_k == "kbar" else prep.k_wraparound
                    tau = width * np.sqrt(np.log(2.0 * kt / gamma) / (2.0 * prep.m_ub))
            elif algorithm == "levy":
                kt = n if tau_k == "kbar" else prep.k_wraparound
                tau = width * np.sqrt(np.log(2.0 * kt / gamma) / (2.0 * prep.m_ub))
                mu = draws.median_centre(means, starts, tau, lower, upper, epsilon / 2.0, dsens, rng)
                a = np.maximum(mu - 1.5 * tau, lower)
                b = np.minimum(mu + 1.5 * tau, upper)
            elif algorithm == "quantile":
                if quantile_mode == "fixed":
                    qlo = np.full(n_groups, float(quantiles[0]))
                    qhi = np.full(n_groups, float(quantiles[1]))
                else:
                    qlo = eps_dependent_rank(epsilon) / n
                    qhi = 1.0 - qlo
                ys = sorted_segments(means, starts, lower, upper)
                x1 = draws.quantile(ys, starts, qlo, epsilon / 4.0, lower, upper, dsens, rng)
                x2 = draws.quantile(ys, starts, qhi, epsilon / 4.0, lower, upper, dsens, rng)
                a, b = np.minimum(x1, x2), np.maximum(x1, x2)  # swap if crossed [C]
            else:
                raise ValueError(f"unknown algorithm {algorithm!r}")
            seg = np.repeat(np.arange(n_groups), n)
            stat = np.add.reduceat(np.clip(means, a[seg], b[seg]), starts[:-1]) / n
            sens = dsens * (b - a) / n
            scale = sens / (epsilon / 2.0)
            box = np.column_stack((a, b))
    sens = np.broadcast_to(np.asarray(sens, dtype=np.float64), (n_groups,)).copy()
    # the statistic is computed in float64: a neighbour moves the computed value by at most the
    # exact sensitivity plus twice the rounding error (zero-width groups stay data-independent)
    margin = 2.0 * float_error(prep, lower, upper)
    swamped = np.flatnonzero((sens > 0) & (margin > sens))
    if swamped.size:
        i = int(swamped[0])
        raise GroupUsageError(i, f"--lower {lower:g} / --upper {upper:g}: values this far from zero, relative to "
                                 f"their range, are not summed exactly in float64; the rounding error (up to "
                                 f"{margin / 2:.3g}) would more than double the sensitivity {sens[i]:.3g}; subtract "
                                 "a constant from the values and the bounds first")
    sens = np.where(sens > 0, sens + margin, sens)
    eps_mean = epsilon if algorithm in ("baseline", "array-averaging") else epsilon / 2.0
    estimate, scale, g, step = draws.laplace(rng, stat, sens, eps_mean, granularity)
    return Released(estimate, stat, sens, scale, box, tau, g, step)


UNIT_ROUNDOFF = 2.0 ** -53  # float64, round to nearest
MAX_ERROR_TERMS = 2.0 ** 46  # k u <= 2^-7: gamma_k = k u / (1 - k u) <= 1.01 k u


def float_error(prep: Prepared, lower: float, upper: float) -> float:
    """A bound, for every group and from public figures only, on |computed statistic - exact statistic|.

    Every value lies in [lower, upper], so |v| <= B = max(|lower|, |upper|), and a float64 sum of k
    such values in any order (numpy's reduceat, bincount, a Spark aggregate) is within
    gamma_{k-1} k B of the exact sum, gamma_j = j u / (1 - j u) (Higham 2002, eq. 4.4). A group mean
    (BASELINE) sums its N records and divides: error <= (N + 1) u B (1.01). An array mean sums at
    most m_UB values: error <= (m_UB + 1) u B; clipping to [a, b] is 1-Lipschitz and exact; the
    average of the n clipped means adds (n + 1) u B. Hence (k + 2) u B (1.01) with k = N, or
    k = m_UB + n, taken at the largest k of all groups (one margin for all, so groups of one
    sensitivity keep one Laplace scale and one report event). The bound is in B, not in the range:
    values far from zero relative to their range (a shift of the data) make it large, and
    :func:`release` charges twice it to the sensitivity."""
    b = max(abs(float(lower)), abs(float(upper)))
    if prep.n_groups == 0:
        return 0.0
    if prep.algorithm == "baseline":
        k = float(np.max(prep.records_total))
    elif prep.grouping == "hash":
        # the computed array means lie in [lower, upper] and all but one are the same in both
        # neighbours (finish_plan): only the average of the n clipped means adds (n + 1) u B
        k = float(np.max(prep.num_arrays))
    else:
        k = float(np.max(prep.m_ub.astype(np.float64) + prep.num_arrays.astype(np.float64)))
    k += 2.0
    if k > MAX_ERROR_TERMS:
        raise ValueError("more than 2^46 terms in one group's sum")
    return 1.01 * k * UNIT_ROUNDOFF * b

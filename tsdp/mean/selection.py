"""The two private selection steps of Gupta et al. (spec ``mean.md`` 2.5 step 2 and 2.6 step 2).

* LEVY's private median over tau-bins (Levy et al. 2021, Alg. 6, in the Feldman-Steinke
  exponential-mechanism form): data-independent candidates c_j = lower + (j - 1/2) tau for j >= 1
  with c_j < upper (at least one); each array mean is quantised to its nearest centre (ties to the
  lower one); score s_j = max(#{q_i < c_j}, #{q_i > c_j}) has sensitivity Delta_s (1 for BESTFIT,
  2 for WRAPAROUND); Pr[j] proportional to exp(-(eps_sel / (2 Delta_s)) s_j). This is
  eps_sel-DP (McSherry-Talwar exponential mechanism).
* Smith's private quantile (Smith 2011, Alg. 2): clip to [lo, hi], sort, y_(0) = lo,
  y_(n+1) = hi; gap i has length l_i = y_(i+1) - y_(i) and utility u_i = -|i - q n|;
  Pr[i] proportional to l_i exp(eps_q u_i / (2 Delta_u)) (zero-length gaps dropped), output
  Uniform[y_(i), y_(i+1)]. The output density is exp(eps_q u(x) / (2 Delta_u)) / W, eps_q-DP.

Both are computed in log space (M-P13), for many groups at once ("segmented": the values of group
g are ``x[starts[g]:starts[g+1]]``), and sampled by the Gumbel-max trick, which draws exactly from
the normalised exponential weights. The single-group functions ``*_log_probs`` /
``smith_log_density`` expose the exact distributions for the DP tests (M-T6).
"""

from __future__ import annotations

import numpy as np


def _seg_ids(starts: np.ndarray) -> np.ndarray:
    return np.repeat(np.arange(starts.size - 1), np.diff(starts))


def length_classes(starts: np.ndarray):
    """The segments by length, one ``(segments, index)`` per distinct length L (a loop over the
    lengths, never over segments): ``segments`` the ids of the segments of length L, ``index`` the
    (segments, L) array of their flat positions. When every segment has one length and they tile
    [0, n), a single ``(None, (n_segments, L))``: a reshape serves. Row-wise numpy operations on
    these 2-D views (cumsum, sort) run segment by segment, each in its own order."""
    starts = np.asarray(starts, dtype=np.int64)
    lengths = np.diff(starts)
    if lengths.size and (lengths == lengths[0]).all() and starts[0] == 0:
        yield None, (lengths.size, int(lengths[0]))
        return
    order = np.argsort(lengths, kind="stable")
    sorted_lengths = lengths[order]
    edges = np.concatenate(([0], np.flatnonzero(np.diff(sorted_lengths)) + 1, [lengths.size]))
    for a, b in zip(edges[:-1].tolist(), edges[1:].tolist()):
        segments = order[a:b]
        yield segments, starts[segments][:, None] + np.arange(int(sorted_lengths[a]))


def segment_rows(x: np.ndarray, starts: np.ndarray, fn) -> np.ndarray:
    """``fn`` (a row-wise operation on a 2-D array, e.g. ``np.cumsum(a, axis=1)``) applied to every
    segment ``x[starts[k]:starts[k + 1]]``, by :func:`length_classes`."""
    out = np.empty_like(x)
    for segments, index in length_classes(starts):
        if segments is None:
            out[:] = fn(x.reshape(index)).reshape(-1)
        else:
            out[index] = fn(x[index])
    return out


def segmented_gumbel_argmax(logits: np.ndarray, starts: np.ndarray,
                            rng: np.random.Generator) -> np.ndarray:
    """Flat index of one draw per segment from softmax(logits[segment]) (Gumbel-max trick).

    Every segment must be non-empty and hold at least one finite logit."""
    g = logits + rng.gumbel(size=logits.size)
    mx = np.maximum.reduceat(g, starts[:-1])
    seg = _seg_ids(starts)
    hit = np.flatnonzero(g == mx[seg])
    hs = seg[hit]
    first = np.ones(hit.size, dtype=bool)
    first[1:] = hs[1:] != hs[:-1]
    return hit[first]


def num_centres(tau: np.ndarray, width: float) -> np.ndarray:
    """#{j >= 1 : (j - 1/2) tau < width}, at least 1 (spec 2.5 step 2a; M-P12 for tau >= width)."""
    tau = np.asarray(tau, dtype=np.float64)
    n = np.floor(width / tau + 0.5).astype(np.int64)
    n = np.where((n - 0.5) * tau >= width, n - 1, n)
    n = np.where((n + 0.5) * tau < width, n + 1, n)
    return np.maximum(n, 1)


def em_median_logits(means: np.ndarray, starts: np.ndarray, tau: np.ndarray, lower: float,
                     upper: float, eps_sel: float, score_sens: int):
    """Segmented EM-median logits. Returns (candidate starts, candidate centres, logits).

    Candidates depend only on tau, lower and upper (M-T7), never on the data."""
    cstarts, centres, score = em_median_scores(means, starts, tau, lower, upper)
    return cstarts, centres, -(eps_sel / (2.0 * score_sens)) * score


def exact_em_argmax(score: np.ndarray, starts: np.ndarray, c: float, rng: np.random.Generator) -> np.ndarray:
    """Flat index of one draw per segment with Pr[j] proportional to exp(-c score[j]), exactly
    (integer scores): propose j uniformly in its segment (numpy's exact bounded integers), accept
    with probability exp(-c (score[j] - min score of the segment)) by an exact Bernoulli
    (:func:`tsdp.mechanisms.discrete.bernoulli_exp`), else propose again. Rejection sampling gives
    the normalised target exactly; a segment needs at most (its size) proposals on average."""
    from tsdp.mechanisms.discrete import bernoulli_exp

    sizes = np.diff(starts)
    smin = np.minimum.reduceat(score, starts[:-1])
    out = np.empty(sizes.size, dtype=np.int64)
    pending = np.arange(sizes.size)
    while pending.size:
        idx = starts[pending] + rng.integers(0, sizes[pending])
        ok = bernoulli_exp(rng, c, score[idx] - smin[pending])
        out[pending[ok]] = idx[ok]
        pending = pending[~ok]
    return out


def em_median_scores(means: np.ndarray, starts: np.ndarray, tau: np.ndarray, lower: float, upper: float):
    """(candidate starts, candidate centres, integer scores s_j) of the segmented EM median."""
    tau = np.asarray(tau, dtype=np.float64)
    n_g = np.diff(starts)
    n_c = num_centres(tau, upper - lower)
    cstarts = np.concatenate(([0], np.cumsum(n_c)))
    cgroup = _seg_ids(cstarts)
    centres = lower + (np.arange(cstarts[-1]) - cstarts[cgroup] + 0.5) * tau[cgroup]
    agroup = _seg_ids(starts)
    ta = tau[agroup]
    k = np.ceil((means - lower) / ta) - 1.0  # nearest centre, ties to the lower one
    k = np.clip(k, 0, n_c[agroup] - 1).astype(np.int64)
    cnt = np.bincount(cstarts[agroup] + k, minlength=cstarts[-1])
    cs = np.cumsum(cnt)
    before = np.concatenate(([0], cs))[cstarts[:-1]]
    incl = cs - before[cgroup]  # #{q_i <= c_j} within the group
    below = incl - cnt
    above = n_g[cgroup] - incl
    return cstarts, centres, np.maximum(below, above)


def em_median_log_probs(means: np.ndarray, tau: float, lower: float, upper: float,
                        eps_sel: float, score_sens: int) -> tuple[np.ndarray, np.ndarray]:
    """Single group: (centres, log Pr[centre]) of the EM median, exactly normalised."""
    means = np.asarray(means, dtype=np.float64)
    _, centres, logits = em_median_logits(means, np.array([0, means.size]), np.array([tau]),
                                          lower, upper, eps_sel, score_sens)
    from scipy.special import logsumexp  # (scipy costs 0.7 s to import: only these exact-distribution helpers use it)

    return centres, logits - logsumexp(logits)


def sorted_segments(values: np.ndarray, starts: np.ndarray, lo: float, hi: float) -> np.ndarray:
    """``values`` clipped to [lo, hi] and sorted within each segment (one sort serves both of
    QUANTILE's private quantiles): a row-wise sort of the segments of each length."""
    y = np.clip(np.asarray(values, dtype=np.float64), lo, hi)
    if y.size < 2:
        return y
    return segment_rows(y, starts, lambda a: np.sort(a, axis=1))


def smith_gaps(values: np.ndarray, starts: np.ndarray, q: np.ndarray, eps_q: float,
               lo: float, hi: float, score_sens: int, presorted: bool = False):
    """Segmented Smith gaps. Returns (gap starts, left ends, lengths, log-weights).

    Group g has n_g + 1 gaps; log w_i = log l_i + eps_q u_i / (2 Delta_u), -inf if l_i = 0.
    ``presorted``: ``values`` are already :func:`sorted_segments`."""
    n_g = np.diff(starts)
    n_groups = n_g.size
    agroup = _seg_ids(starts)
    y = values if presorted else sorted_segments(values, starts, lo, hi)
    zstarts = starts + 2 * np.arange(n_groups + 1)  # n_g + 2 points per group
    z = np.empty(zstarts[-1])
    z[zstarts[:-1]] = lo
    z[zstarts[1:] - 1] = hi
    z[np.arange(y.size) + 2 * agroup + 1] = y
    gstarts = starts + np.arange(n_groups + 1)  # n_g + 1 gaps per group
    ggroup = _seg_ids(gstarts)
    left_pos = np.arange(gstarts[-1]) + ggroup  # z index of each gap's left end
    left = z[left_pos]
    length = z[left_pos + 1] - left
    i_local = np.arange(gstarts[-1]) - gstarts[ggroup]
    util = -np.abs(i_local - np.asarray(q, dtype=np.float64)[ggroup] * n_g[ggroup])
    with np.errstate(divide="ignore"):
        logw = np.where(length > 0, np.log(length), -np.inf) + (eps_q / (2.0 * score_sens)) * util
    return gstarts, left, length, logw


def smith_sample(values: np.ndarray, starts: np.ndarray, q: np.ndarray, eps_q: float,
                 lo: float, hi: float, score_sens: int, rng: np.random.Generator,
                 presorted: bool = False) -> np.ndarray:
    """One private q-quantile per group (Smith 2011, Alg. 2); ``presorted`` as in :func:`smith_gaps`."""
    gstarts, left, length, logw = smith_gaps(values, starts, q, eps_q, lo, hi, score_sens, presorted)
    pick = segmented_gumbel_argmax(logw, gstarts, rng)
    u = rng.random(pick.size)
    return np.minimum(left[pick] + u * length[pick], hi)


def smith_log_density(values: np.ndarray, q: float, eps_q: float, lo: float, hi: float,
                      score_sens: int, x: np.ndarray) -> np.ndarray:
    """Single group: log density of Smith's output at points x in [lo, hi) (gaps right-open)."""
    values = np.asarray(values, dtype=np.float64)
    _, left, length, logw = smith_gaps(values, np.array([0, values.size]), np.array([q]),
                                       eps_q, lo, hi, score_sens)
    from scipy.special import logsumexp

    log_w_total = logsumexp(logw)
    ok = length > 0
    left, length, logw = left[ok], length[ok], logw[ok]
    i = np.searchsorted(left, np.asarray(x, dtype=np.float64), side="right") - 1
    return logw[i] - np.log(length[i]) - log_w_total

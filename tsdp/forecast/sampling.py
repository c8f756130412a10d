"""Batch sampling for DP-SGD forecasting: exactly the configurations the accountant analyses.

Schuchardt et al. (ICML 2025), Algorithms 1 and 3-6; spec sections 1.2 and 1.3. Each DP-SGD step
takes a *top-level* sample of series and, from every selected series, a *bottom-level* sample of
windows (context of L_C values followed by a forecast of L_F values):

    top level   "wor"            a fresh uniformly random subset of N' = B / lambda distinct series
                                 every step (Alg. 5; numpy ``choice(N, N', replace=False)``)
                "poisson"        every series independently with probability N' / N
                "deterministic"  the steps of an epoch take consecutive disjoint blocks of N' series
                                 in index order (Alg. 3); floor(N lambda / B) steps per epoch, the
                                 N mod N' series left over are not used
                "shuffle"        the same over a fresh random permutation of the series each epoch
    bottom      "wr"             lambda window starts per selected series, each uniform over the
                                 series' start positions, with replacement (Alg. 4)
                "poisson"        every start position of a selected series independently with
                                 probability r_P = min(1, lambda / T) (Alg. 6)

Window geometry (0-based, original coordinates). Every series is front-padded with L_C zeros. A start
s means context = original indices s - L_C .. s - 1 (indices < 0 are padding zeros) and forecast =
s .. s + L_F - 1, so a series of length L_n has T_n = L_n - L_F + 1 start positions s = 0 .. T_n - 1
(the paper's t = s + 1 = 1 .. T in padded coordinates). Element e of a series lies in the windows
with max(0, e - L_F + 1) <= s <= min(T_n - 1, e + L_C): exactly L_C + L_F of them (L_F in the
forecast part, L_C in the context part) for interior elements L_F - 1 <= e <= T_n - L_C - 1, fewer
near the ends (element 0 is in only min(L_C + 1, T_n) windows).

Series of different lengths. The accountant (:class:`~tsdp.accounting.structured.DpSgdSetting`)
uses the shortest length L, i.e. T = L - L_F + 1 start positions and k = min(raw_k, T) affected
windows per protected unit (raw_k = L_C + L_F + w - 1 for w-event, w (L_C + L_F) for w-user). A
longer series (T_n > T) is sampled as follows, which is never less private than what is accounted:

* WR bottom level: starts are uniform over the series' own T_n positions. A window then contains
  the protected unit with probability min(raw_k, T_n) / T_n <= k / T = r (the accountant's value;
  equality when all series have length L), and the WR bounds are monotone in r.
* Poisson bottom level: every position is included with the accountant's rate r_P = min(1, lambda/T),
  whatever T_n, so the per-position inclusion probability is exactly r_P and a protected unit lies in
  min(raw_k, T_n) windows. That equals the accountant's k when raw_k <= T (the usual case
  T >= L_C + L_F + w - 1); when k is clipped to T (short series) a longer series would put the unit
  in more than k windows, so that combination is refused. A longer series contributes
  lambda T_n / T windows in expectation instead of lambda; the privacy analysis depends only on the
  per-position rate, not on the expected batch size.

Series with gaps (``forecast-train --fill-missing null``). A window whose context or forecast
touches a missing step is never sampled; nothing is imputed. Series n then has C_n admissible start
positions (:func:`admissible_starts`), and the accountant is given T = min_n C_n start positions
(:func:`accounted_length`: the length L = T + L_F - 1). The WR bottom level draws uniformly over the
series' own admissible starts, so a window contains the protected unit with probability at most
min(raw_k, C_n) / C_n <= min(raw_k, T) / T = r, and the Poisson bottom level includes each admissible
start with the accountant's rate r_P: the two arguments above carry over with C_n in place of T_n.
Both need the missing steps to be the same in neighbouring datasets: the missing pattern is treated
as public (the relations substitute values; they never make a value missing or present).

The bottom-level and top-level draws use the generator passed to :meth:`WindowSampler.next_batch`
(a fresh ``numpy.random.Generator``, DESIGN.md section 5).
"""

from __future__ import annotations

import math

import numpy as np

from tsdp.accounting.structured import DpSgdSetting
from tsdp.errors import DataError, UsageError

__all__ = ["WindowSampler", "PaddedPanel", "series_lengths", "gather_windows", "augment", "admissible_starts",
           "accounted_length"]


class WindowSampler:
    """Draws the (series, start) pairs of one DP-SGD step, as analysed by the accountant.

    ``setting`` fixes N, L (the shortest training series), L_C, L_F, B, lambda and the top and bottom
    levels; ``lengths[n]`` is the length of series n (default: all ``setting.length``; every length
    must be at least ``setting.length``). ``admissible`` (N, T_max) marks the start positions a
    window may take in series with gaps (module docstring; default: all of them), and then the
    accountant's T must be the smallest count of them. Steps are drawn with :meth:`next_batch`; for
    the deterministic and shuffle top levels the sampler remembers its position in the epoch.
    """

    def __init__(self, setting: DpSgdSetting, lengths: np.ndarray | None = None,
                 admissible: np.ndarray | None = None) -> None:
        self.setting = setting
        n = setting.n_series
        self._starts = None  # with gaps: every series' admissible starts, concatenated, and where each begins
        if admissible is not None and not np.asarray(admissible).all():
            admissible = np.asarray(admissible, dtype=bool)
            counts = admissible.sum(axis=1)
            if admissible.shape[0] != n or int(counts.min()) != setting.windows:
                raise DataError(f"the accountant's T = {setting.windows} start positions must be the smallest number "
                                f"of admissible windows of a series ({int(counts.min())})")
            self._starts = (np.flatnonzero(admissible.ravel()) % admissible.shape[1]).astype(np.int64)
            self._first = np.r_[0, np.cumsum(counts)[:-1]].astype(np.int64)
            self._admissible, self._counts = admissible, counts.astype(np.int64)
            if lengths is None:
                lengths = np.full(n, admissible.shape[1] + setting.horizon - 1, dtype=np.int64)
        if lengths is None:
            lengths = np.full(n, setting.length, dtype=np.int64)
        lengths = np.asarray(lengths)
        if lengths.shape != (n,):
            raise DataError(f"expected {n} series lengths (--series {n}), got an array of shape {lengths.shape}")
        if lengths.size and not np.issubdtype(lengths.dtype, np.integer):
            if not (np.all(np.isfinite(lengths)) and np.all(lengths == np.round(lengths))):
                raise DataError("series lengths must be whole numbers")
        lengths = lengths.astype(np.int64)
        short = np.flatnonzero(lengths < setting.length)
        if short.size and self._starts is None:
            i = int(short[0])
            raise DataError(
                f"series {i} has length {int(lengths[i])}, shorter than the accountant's --length "
                f"{setting.length} (the accountant must use the shortest series)"
            )
        self.lengths = lengths
        self.positions = lengths - setting.horizon + 1  # T_n start positions per series
        self._uniform = bool(np.all(lengths == setting.length)) and self._starts is None
        self.rate = min(1.0, setting.instances / setting.windows)  # Poisson bottom level r_P
        if setting.bottom == "poisson" and not self._uniform:
            span = setting.context + setting.horizon
            raw = span + setting.w - 1 if setting.unit == "event" else setting.w * span
            most = self._counts if self._starts is not None else self.positions
            worst = int(min(raw, int(most.max())))
            if worst > setting.affected_windows:
                raise UsageError(
                    f"--bottom poisson with series longer than --length {setting.length}: a protected "
                    f"unit can lie in {worst} windows of a longer series, more than the k = "
                    f"{setting.affected_windows} the accountant assumes (k is clipped to T = "
                    f"{setting.windows}); use --bottom wr or trim the series to a common length"
                )
        self._steps = 0
        self._order: np.ndarray | None = None

    # --- bookkeeping ----------------------------------------------------------------------------
    @property
    def steps_per_epoch(self) -> int:
        """floor(N lambda / B) steps make one epoch (Alg. 1), as the accountant counts them."""
        return self.setting.steps_per_epoch

    @property
    def epoch_level(self) -> bool:
        """True when the accountant composes once per epoch (deterministic and shuffle top levels)."""
        return not self.setting.step_level

    @property
    def steps_taken(self) -> int:
        """Number of :meth:`next_batch` calls so far."""
        return self._steps

    @property
    def epoch(self) -> int:
        """Index (0-based) of the epoch the next step belongs to."""
        return self._steps // self.steps_per_epoch

    @property
    def step_in_epoch(self) -> int:
        """Position (0-based) of the next step within its epoch; 0 means it starts a new epoch."""
        return self._steps % self.steps_per_epoch

    # --- sampling -------------------------------------------------------------------------------
    def next_batch(self, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        """The windows of one step as (series, starts), two int64 arrays of equal length.

        With the WR bottom level each selected series appears ``lambda`` times in a row (the batch
        has exactly B windows unless the top level is Poisson); with the Poisson bottom level the
        windows are sorted by series, then start, and their number is random. A batch can be empty
        (Poisson levels); DP-SGD still takes its noisy step.
        """
        series = self._top(rng)
        self._steps += 1
        if self.setting.bottom == "wr":
            return self._bottom_wr(series, rng)
        return self._bottom_poisson(series, rng)

    def _top(self, rng: np.random.Generator) -> np.ndarray:
        s = self.setting
        n, chosen = s.n_series, s.selected
        if s.top == "wor":
            return rng.choice(n, chosen, replace=False).astype(np.int64)
        if s.top == "poisson":
            return np.flatnonzero(rng.random(n) < chosen / n).astype(np.int64)
        block = self.step_in_epoch
        if s.top == "deterministic":
            return np.arange(block * chosen, (block + 1) * chosen, dtype=np.int64)
        if block == 0 or self._order is None:  # shuffle: a fresh permutation at every epoch start
            self._order = rng.permutation(n).astype(np.int64)
        return self._order[block * chosen:(block + 1) * chosen].copy()

    def _bottom_wr(self, series: np.ndarray, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        lam = self.setting.instances
        rep = np.repeat(series, lam)
        if self._starts is not None:  # uniform over each series' admissible starts
            pick = rng.integers(0, self._counts[rep], dtype=np.int64)
            return rep, self._starts[self._first[rep] + pick]
        if self._uniform:
            starts = rng.integers(0, self.setting.windows, size=rep.size, dtype=np.int64)
        else:
            starts = rng.integers(0, self.positions[rep], dtype=np.int64)
        return rep, starts

    def _bottom_poisson(self, series: np.ndarray, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        """Bernoulli(r_P) inclusion of every start position, drawn as geometric gaps.

        The included positions of an i.i.d. Bernoulli(p) sequence are the partial sums of i.i.d.
        Geometric(p) gaps (support 1, 2, ...) minus one; gaps are drawn in blocks for all selected
        series at once until every series has run past its last position.
        """
        p = self.rate
        out_series, out_starts = [], []
        rows = np.arange(series.size)
        last = np.full(series.size, -1, dtype=np.int64)  # last included position so far
        ends = self.positions[series]
        while rows.size:
            left = int((ends[rows] - 1 - last).max())
            mean = p * left
            block = max(1, math.ceil(mean + 6.0 * math.sqrt(mean) + 8.0))
            pos = last[:, None] + np.cumsum(rng.geometric(p, size=(rows.size, block)), axis=1)
            r, c = np.nonzero(pos < ends[rows][:, None])
            out_series.append(series[rows[r]])
            out_starts.append(pos[r, c])
            running = pos[:, -1] < ends[rows]
            rows, last = rows[running], pos[running, -1]
        if not out_series:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
        s = np.concatenate(out_series).astype(np.int64)
        t = np.concatenate(out_starts).astype(np.int64)
        if self._starts is not None:  # Bernoulli(r_P) at every position, kept where admissible
            keep = self._admissible[s, t]
            s, t = s[keep], t[keep]
        order = np.lexsort((t, s))
        return s[order], t[order]


# --- gaps ---------------------------------------------------------------------------------------
def admissible_starts(missing: np.ndarray, context: int, horizon: int) -> np.ndarray:
    """(N, L - L_F + 1) booleans: whether the window starting at s (context s - L_C .. s - 1, the
    front padding included, and forecast s .. s + L_F - 1) touches no missing step of its series;
    ``missing`` is (N, L), true where a step has no value."""
    missing = np.asarray(missing, dtype=bool)
    n, length = missing.shape
    starts = length - horizon + 1
    if starts < 1:
        return np.zeros((n, 0), dtype=bool)
    before = np.zeros((n, length + 1), dtype=np.int64)
    np.cumsum(missing, axis=1, out=before[:, 1:])  # before[:, i] = missing steps among 0 .. i - 1
    s = np.arange(starts)
    first = np.maximum(s - context, 0)
    return (before[:, s + horizon] - before[:, first]) == 0


def accounted_length(admissible: np.ndarray, horizon: int, names=None) -> int:
    """The length L the accountant is given for series with gaps: T = the smallest number of
    admissible windows of a series, L = T + L_F - 1 (module docstring). DataError naming a series
    with none."""
    counts = np.asarray(admissible, dtype=bool).sum(axis=1)
    if counts.size and int(counts.min()) == 0:
        i = int(np.argmin(counts))
        label = repr(names[i]) if names is not None else str(i)
        raise DataError(f"series {label} has no window of --context-length + --forecast-length steps without a "
                        "missing step in its training part; drop it or shorten the windows")
    return int(counts.min()) + horizon - 1


# --- windows ------------------------------------------------------------------------------------
def series_lengths(values: np.ndarray) -> np.ndarray:
    """Length of every row of a (N, Lmax) panel padded with trailing NaN; raises on other gaps."""
    values = np.asarray(values, dtype=np.float64)
    if values.ndim != 2:
        raise DataError(f"expected a (series, time) array, got shape {values.shape}")
    present = ~np.isnan(values)
    width = values.shape[1]
    if width == 0:
        return np.zeros(values.shape[0], dtype=np.int64)
    has_any = present.any(axis=1)
    lengths = np.where(has_any, width - np.argmax(present[:, ::-1], axis=1), 0).astype(np.int64)
    gaps = np.flatnonzero(present.sum(axis=1) != lengths)
    if gaps.size:
        i = int(gaps[0])
        t = int(np.flatnonzero(~present[i, :lengths[i]])[0])
        raise DataError(f"series {i} has a missing value at time index {t} before its last observation; "
                        "only trailing NaN (series end) is allowed")
    bad = np.argwhere(np.isinf(values))
    if bad.size:
        raise DataError(f"series {int(bad[0, 0])} has an infinite value at time index {int(bad[0, 1])}")
    return lengths


class PaddedPanel:
    """A (N, Lmax) panel front-padded once with L_C zeros, for fast window gathering.

    ``values`` holds one series per row, NaN after each series' end (no other NaN). ``lengths``
    gives each series' length, ready for :class:`WindowSampler`.
    """

    def __init__(self, values: np.ndarray, context: int, horizon: int) -> None:
        if context < 0 or horizon < 1:
            raise UsageError(f"need --context-length >= 0 and --forecast-length >= 1, got {context} and {horizon}")
        values = np.asarray(values, dtype=np.float64)
        self.lengths = series_lengths(values)
        self.context, self.horizon = int(context), int(horizon)
        n, width = values.shape
        self.padded = np.zeros((n, context + width), dtype=np.float64)
        self.padded[:, context:] = values
        self._offsets = np.arange(context + horizon, dtype=np.int64)

    def gather(self, series: np.ndarray, starts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(ctx (n, L_C), tgt (n, L_F)) of the windows starting at ``starts`` of ``series``."""
        series = np.asarray(series, dtype=np.int64).ravel()
        starts = np.asarray(starts, dtype=np.int64).ravel()
        if series.shape != starts.shape:
            raise UsageError(f"series and starts differ in length ({series.size} vs {starts.size})")
        n_series = self.padded.shape[0]
        if series.size and (series.min() < 0 or series.max() >= n_series):
            raise UsageError(f"series index out of range 0..{n_series - 1}")
        last = self.lengths[series] - self.horizon  # last admissible start of each window's series
        bad = np.flatnonzero((starts < 0) | (starts > last))
        if bad.size:
            i = int(bad[0])
            raise UsageError(f"window start {int(starts[i])} of series {int(series[i])} is outside "
                             f"0..{int(last[i])} (series length {int(self.lengths[series[i]])}, "
                             f"horizon {self.horizon})")
        width = self.padded.shape[1]
        flat = (series * width + starts)[:, None] + self._offsets
        windows = np.take(self.padded.ravel(), flat)
        return windows[:, :self.context], windows[:, self.context:]


def gather_windows(values: np.ndarray, series: np.ndarray, starts: np.ndarray, context: int,
                   horizon: int) -> tuple[np.ndarray, np.ndarray]:
    """(ctx (n, L_C), tgt (n, L_F)) of the given windows; pads ``values`` on every call.

    For repeated gathering build a :class:`PaddedPanel` once and call its ``gather``.
    """
    return PaddedPanel(values, context, horizon).gather(series, starts)


# --- augmentation -------------------------------------------------------------------------------
def augment(ctx: np.ndarray, tgt: np.ndarray, label_noise: float, context_noise: float,
            value_bound: float | None, rng: np.random.Generator,
            hardened: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """Online Gaussian data augmentation of the sampled windows (Eq. 1, Thm G.1).

    Adds fresh N(0, (context_noise v)^2) noise to every context value and fresh
    N(0, (label_noise v)^2) noise to every forecast value (v = ``value_bound``). Context noise is
    drawn first, then forecast noise, both from ``rng`` through :mod:`tsdp.mechanisms.noise`. The
    inputs are never modified; a part whose noise multiplier is 0 is returned as is (the same
    array object). ``hardened``: the values are rounded to the lattice g_in of
    :func:`tsdp.accounting.dpsgd_lattice.input_granularity` and exact discrete Gaussian noise on it
    is added (what the hardened accounting of Theorem G.1 assumes).
    """
    from tsdp.accounting.dpsgd_lattice import input_granularity
    from tsdp.mechanisms.noise import gaussian_noise, snap

    for name, value in (("--label-noise", label_noise), ("--context-noise", context_noise)):
        if not (value >= 0 and math.isfinite(value)):
            raise UsageError(f"{name} must be finite and >= 0, got {value}")
    if label_noise == 0 and context_noise == 0:
        return ctx, tgt
    if value_bound is None or not (value_bound > 0 and math.isfinite(value_bound)):
        raise UsageError(f"--value-bound V > 0 is required with --label-noise/--context-noise, got {value_bound}")
    def noisy(values: np.ndarray, noise: float) -> np.ndarray:
        values = np.asarray(values, dtype=np.float64)
        g = input_granularity(noise, value_bound) if hardened else None
        return snap(values, g) + gaussian_noise(rng, noise * value_bound, values.size,
                                                granularity=g).reshape(values.shape)

    if context_noise > 0:
        ctx = noisy(ctx, context_noise)
    if label_noise > 0:
        tgt = noisy(tgt, label_noise)
    return ctx, tgt

"""The bounding-and-aggregation kernel: tsdp's contribution caps, written once as polars expressions.

Every engine runs this same code on the rows of a set of whole users: the local engine on the
whole input or on one user-hash shard at a time, the Spark engine on each user partition through
``mapInArrow``. Because every cap looks only at one user's rows (:mod:`tsdp.engine.events` states the
rules and why each is stable for its unit), the kept rows of a user never depend on which other
users share the partition, and partial cell sums of disjoint user sets add up to the whole panel.

Input: prepared rows with the canonical columns below (one row per event on the public grid, of a
declared series as an Enum whose categories are the sorted declared keys, value already clipped to
[0, V]). ``ORDER`` is the tie-break key assigned when the
input was read (file ordinal and row ordinal), so that "the earliest rows" means the same rows
whatever the partitioning: rows are ranked by (time, series key, ORDER), never by value.
"""

from __future__ import annotations

import numpy as np
import polars as pl

from tsdp.io.events import COLUMNS, ORDER, SERIES, STEP, TIME, USER, VALUE  # noqa: F401  (the prepared rows)


# Runs are sorted on integers only: one key packing the user id's hash (high 48 bits) with the
# series' rank among the keys (low 16 bits; SERIES arrives as an Enum whose categories are the
# sorted keys), then time and ORDER. Which user comes first does not matter (every cap looks at one
# user); within a user the order is (series key, time, ORDER), and a row's bucket follows from its
# time, so the bucket needs no key of its own. Two users whose hashes collide would share runs, so
# the sorted ids are checked, and on a collision (or with more than 2^16 series) the user is coded
# by its id itself (exact, slower).
RUN_ORDER = ["__key", TIME, ORDER]
_SERIES_BITS = 16


def _sorted(frame: pl.DataFrame) -> pl.DataFrame:
    """``frame`` with ``__key`` (user code << 16 | series rank), ``__ucode`` and ``__srank``,
    sorted by RUN_ORDER."""
    srank = pl.col(SERIES).to_physical().cast(pl.UInt64)
    fits = frame.height == 0 or frame.select(srank.max()).item() < (1 << _SERIES_BITS)
    if fits:
        work = _keyed(frame, _hash_code(), srank)
        same = pl.col("__ucode") == pl.col("__ucode").shift(1)
        other = pl.col(USER).cast(pl.String) != pl.col(USER).cast(pl.String).shift(1)
        if not work.select((same & other).any()).item():
            return work
    code = pl.col(USER).cast(pl.String).cast(pl.Categorical).to_physical().cast(pl.UInt64)
    if fits:
        return _keyed(frame, code, srank)
    return frame.with_columns(code.alias("__ucode"), srank.alias("__srank"),
                              pl.lit(0, dtype=pl.UInt64).alias("__key")).sort(["__ucode", "__srank", TIME, ORDER])


def _hash_code() -> pl.Expr:
    return pl.col(USER).hash(seed=0) // (1 << _SERIES_BITS)


def _keyed(frame: pl.DataFrame, code: pl.Expr, srank: pl.Expr) -> pl.DataFrame:
    return (frame.with_columns(code.alias("__ucode"), srank.alias("__srank"))
            .with_columns((pl.col("__ucode") * (1 << _SERIES_BITS) + pl.col("__srank")).alias("__key"))
            .sort(RUN_ORDER))


def runs(frame: pl.DataFrame) -> pl.DataFrame:
    """Sort rows into runs (user, series, bucket), each earliest first (time, then ORDER), and
    number them: ``__pair`` (user, series) and ``__cell`` (user, series, bucket) run ids,
    ``__in_cell`` the row's rank in its cell and ``__step_rank`` the cell's rank among the user's
    buckets of that series. Sorted runs replace hash windows: every rank is a difference of
    positions (numpy over the sorted columns)."""
    work = _sorted(frame)
    n = work.height
    user, series, step = (work[c].to_numpy() for c in ("__ucode", "__srank", STEP))
    new_pair = np.ones(n, dtype=bool)
    if n:
        new_pair[1:] = (user[1:] != user[:-1]) | (series[1:] != series[:-1])
    new_cell = new_pair.copy()
    if n:
        new_cell[1:] |= step[1:] != step[:-1]
    pair = np.cumsum(new_pair) - 1
    cell = np.cumsum(new_cell) - 1
    in_cell = np.arange(n) - np.flatnonzero(new_cell)[cell] if n else np.zeros(0, dtype=np.int64)
    step_rank = cell - cell[np.flatnonzero(new_pair)][pair] if n else np.zeros(0, dtype=np.int64)
    return work.with_columns(pl.Series("__new_pair", new_pair), pl.Series("__new_cell", new_cell),
                             pl.Series("__pair", pair, dtype=pl.Int64), pl.Series("__cell", cell, dtype=pl.Int64),
                             pl.Series("__in_cell", in_cell, dtype=pl.Int64),
                             pl.Series("__step_rank", step_rank, dtype=pl.Int64))


def first_series(frame: pl.LazyFrame, series_per_unit: int, per_step: bool) -> pl.Expr:
    """Keep-flag of each row for "a user keeps their first ``series_per_unit`` series": ranked by the
    first event time, then the series key, within each bucket when ``per_step`` (w-event) and over
    the user's whole stream otherwise (user level; the run's first row is its earliest event)."""
    scope, run = (["__ucode", STEP], "__cell") if per_step else (["__ucode"], "__pair")
    starts = (frame.filter(pl.col(f"__new_{run[2:]}")).select(run, *scope, "__srank", TIME)
              .sort([*scope, TIME, "__srank"]))
    new_scope = pl.any_horizontal([pl.col(c) != pl.col(c).shift(1) for c in scope]).fill_null(True)
    rank = pl.int_range(pl.len(), dtype=pl.Int64)
    kept = (starts.with_columns((rank - pl.when(new_scope).then(rank).forward_fill()).alias("__rank"))
            .sort(run).select(pl.col("__rank") < series_per_unit))
    return kept


def cell_sums(frame: pl.LazyFrame) -> pl.LazyFrame:
    """The partial panel: the sum of kept values per (series, bucket)."""
    return frame.group_by([SERIES, STEP]).agg(pl.col(VALUE).sum()).with_columns(pl.col(SERIES).cast(pl.String))


def cap_and_sum(rows: pl.DataFrame, caps) -> tuple[pl.DataFrame, dict[str, int]]:
    """Enforce ``caps`` (an :class:`tsdp.engine.events.EventCaps`) on the prepared ``rows`` of whole
    users and return (cell sums with columns SERIES, STEP, VALUE; counts of dropped and kept rows).

    The three caps remove whole runs or ranks within runs, so their keep-flags are computed on one
    sorted frame and combined; the counts follow the caps' order (series, then buckets, then
    events per bucket), as diagnostics for the operator, never published.
    """
    work = runs(rows)
    keep = pl.Series(np.ones(work.height, dtype=bool))
    diag: dict[str, int] = {}
    if caps.series_per_unit is not None:
        per_step = caps.unit.series_cap_per_step
        run = "__cell" if per_step else "__pair"
        flags = first_series(work.lazy(), caps.series_per_unit, per_step).collect().to_series()
        step = flags.gather(work[run])
        diag["dropped_series_cap"] = int((keep & ~step).sum())
        keep = keep & step
    if caps.max_steps is not None:
        step = work["__step_rank"] < caps.max_steps
        diag["dropped_step_cap"] = int((keep & ~step).sum())
        keep = keep & step
    if caps.max_per_step is not None:
        step = work["__in_cell"] < caps.max_per_step
        diag["dropped_per_step_cap"] = int((keep & ~step).sum())
        keep = keep & step
    kept = work.filter(keep)
    diag["rows_kept"] = kept.height
    if caps.max_norm is not None:
        kept, diag["users_norm_scaled"] = scaled_to_norm(kept, caps.max_norm)
    return cell_sums(kept.lazy()).collect(), diag


def user_cells(kept: pl.DataFrame) -> pl.DataFrame:
    """Per user (``__ucode``): the L2 norm ``__norm``, the L1 norm ``__l1`` and the number ``__n``
    of their kept cell totals (values summed per (series, bucket): the vector one user adds), and
    the number ``__rows`` of their kept rows."""
    return (kept.group_by("__ucode", "__cell").agg(pl.col(VALUE).sum().alias("__total"), pl.len().alias("__k"))
            .group_by("__ucode").agg((pl.col("__total") ** 2).sum().sqrt().alias("__norm"),
                                     pl.col("__total").abs().sum().alias("__l1"), pl.len().alias("__n"),
                                     pl.col("__k").sum().alias("__rows")))


def scaled_to_norm(kept: pl.DataFrame, max_norm: float) -> tuple[pl.DataFrame, int]:
    """``kept`` with every user's values scaled so that their cell totals have L2 norm at most
    ``max_norm`` (rule 4 of :mod:`tsdp.engine.events`), and the number of users scaled down.

    The factor C / ||x|| is lowered by a relative (r + 8) 2^-52 for the user's r kept rows: each cell
    total of k rows is a float64 sum within (k - 1) u of the exact one (u = 2^-53, Higham's gamma),
    the sum of the n <= r squares adds n u, the square root, the quotient and each product a few u,
    and the scaled cell sums again (k - 1) u, so the exact norm of what the user adds stays at most C.
    A user whose computed norm lies within that margin below C is scaled too (exactly, it may exceed C)."""
    margin = 1.0 - (pl.col("__rows") + 8).cast(pl.Float64) * 2.0 ** -52
    per_user = user_cells(kept).with_columns(  # (a norm within the margin of C may exceed it exactly)
        pl.when(pl.col("__norm") > max_norm * margin)
        .then(max_norm / pl.col("__norm") * margin)
        .otherwise(1.0).alias("__factor"))
    scaled = int((per_user["__factor"] < 1.0).sum())
    if not scaled:
        return kept, 0
    out = kept.join(per_user.select("__ucode", "__factor"), on="__ucode", how="left")
    return out.with_columns(pl.col(VALUE) * pl.col("__factor")), scaled


PROFILE_PREFIX = "__bounds"  # diagnostics keys of contribution_profile's histograms (summed like counts)


NORM_WEIGHT_SCALE = 8  # the weight of a user in the max_norm profile: floor(8 r), r = ||x||_1 / ||x||_2
NORM_WEIGHT_CAP = 4.0  # ... with r at most 4 (tsdp.mechanisms.bounds: the score's sensitivity)


def contribution_profile(rows: pl.DataFrame, caps, grids: dict[str, tuple[float, ...]]) -> dict[str, int]:
    """Histograms of each user's contribution over public candidate grids, for the private choice of
    the caps (:mod:`tsdp.mechanisms.bounds`), once the caps that are fixed (``caps``: the series cap,
    the bucket cap and the per-bucket cap when they are given) hold.

    ``grids["max_per_step"]``: the most events the user keeps in one (series, bucket) cell;
    ``grids["max_steps"]``: the most buckets the user keeps in one series;
    ``grids["max_norm"]``: the L2 norm of the user's cell totals, and instead of one user per bin
    the bin sums the users' weights floor(8 r), r = min(||x||_1 / ||x||_2, sqrt(n), 4) for their n cells
    (r <= sqrt(n) by Cauchy-Schwarz, that minimum only absorbs rounding; the cap 4 bounds the weight).
    Each statistic is a function of that user's rows only, so the histograms of disjoint user sets
    add up; key ``f"{PROFILE_PREFIX}:{name}:{j}"`` counts (weighs) the users whose statistic lies in
    ``(c_{j-1}, c_j]`` of the ascending grid (``j = len(grid)``: above its last candidate).
    """
    work = runs(rows)
    keep = pl.Series(np.ones(work.height, dtype=bool))
    if caps.series_per_unit is not None:
        per_step = caps.unit.series_cap_per_step
        run = "__cell" if per_step else "__pair"
        keep = keep & first_series(work.lazy(), caps.series_per_unit, per_step).collect().to_series().gather(work[run])
    if caps.max_steps is not None:
        keep = keep & (work["__step_rank"] < caps.max_steps)
    if caps.max_per_step is not None:
        keep = keep & (work["__in_cell"] < caps.max_per_step)
    kept = work.filter(keep)
    out: dict[str, int] = {}
    for name, grid in grids.items():
        if name == "max_norm":
            per_user = user_cells(kept)
            statistic = per_user["__norm"].to_numpy()
            positive = statistic > 0  # a user whose kept values are all 0 weighs nothing
            ratio = np.zeros(statistic.size)
            ratio[positive] = np.minimum(np.minimum(per_user["__l1"].to_numpy()[positive] / statistic[positive],
                                                    np.sqrt(per_user["__n"].to_numpy()[positive])), NORM_WEIGHT_CAP)
            weights = np.floor(NORM_WEIGHT_SCALE * ratio).astype(np.int64)
        else:
            per_user = kept.group_by("__ucode", "__pair", "__cell").len().group_by("__ucode", "__pair").agg(
                pl.col("len").max().alias("max_per_step"), pl.len().alias("max_steps")
            ).group_by("__ucode").agg(pl.col("max_per_step").max(), pl.col("max_steps").max())
            statistic, weights = per_user[name].to_numpy(), None
        bins = np.searchsorted(np.asarray(grid), statistic, side="left")
        counts = np.bincount(bins, weights=weights, minlength=len(grid) + 1)
        out.update({f"{PROFILE_PREFIX}:{name}:{j}": int(round(c)) for j, c in enumerate(counts)})
    return out

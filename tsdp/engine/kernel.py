"""The bounding-and-aggregation kernel: tsdp's contribution caps, written once as polars expressions.

Every engine runs this same code on the rows of a set of whole users: the local engine on the
whole input or on one user-hash shard at a time, the Spark engine on each user partition through
``mapInArrow``. Because every cap looks only at one user's rows (:mod:`tsdp.io.events` states the
rules and why each is stable for its unit), the kept rows of a user never depend on which other
users share the partition, and partial cell sums of disjoint user sets add up to the whole panel.

Input: prepared rows with the canonical columns below (one row per event on the public grid, of a
declared series, value already clipped to [0, V]). ``ORDER`` is the tie-break key assigned when the
input was read (file ordinal and row ordinal), so that "the earliest rows" means the same rows
whatever the partitioning: rows are ranked by (time, series key, ORDER), never by value.
"""

from __future__ import annotations

import numpy as np
import polars as pl

USER, TIME, SERIES, STEP, VALUE, ORDER = "__user", "__time", "__series", "__step", "__value", "__order"
COLUMNS = (USER, TIME, SERIES, STEP, VALUE, ORDER)


# The user's hash leads the sort only for speed (an integer compare); the user id itself follows,
# so two users whose hashes collide still form separate runs.
RUN_ORDER = ["__user_hash", USER, SERIES, STEP, TIME, ORDER]


def runs(frame: pl.LazyFrame) -> pl.LazyFrame:
    """Sort rows into runs (user, series, bucket), each earliest first (time, then ORDER), and
    number them: ``__pair`` (user, series) and ``__cell`` (user, series, bucket) run ids,
    ``__in_cell`` the row's rank in its cell and ``__step_rank`` the cell's rank among the user's
    buckets of that series. Sorted runs replace hash windows: every rank is a difference of
    running counts."""
    new_pair = (pl.col(USER) != pl.col(USER).shift(1)) | (pl.col(SERIES) != pl.col(SERIES).shift(1))
    new_cell = pl.col("__new_pair") | (pl.col(STEP) != pl.col(STEP).shift(1))
    row = pl.int_range(pl.len(), dtype=pl.Int64)
    return (frame.with_columns(pl.col(USER).hash(seed=0).alias("__user_hash")).sort(RUN_ORDER)
            .with_columns(new_pair.fill_null(True).alias("__new_pair"))
            .with_columns(new_cell.fill_null(True).alias("__new_cell"))
            .with_columns((pl.col("__new_pair").cum_sum().cast(pl.Int64) - 1).alias("__pair"),
                          (pl.col("__new_cell").cum_sum().cast(pl.Int64) - 1).alias("__cell"))
            .with_columns((row - pl.when(pl.col("__new_cell")).then(row).forward_fill()).alias("__in_cell"),
                          (pl.col("__cell") - pl.when(pl.col("__new_pair")).then(pl.col("__cell")).forward_fill())
                          .alias("__step_rank")))


def first_series(frame: pl.LazyFrame, series_per_user: int, level: str) -> pl.Expr:
    """Keep-flag of each row for "a user keeps their first ``series_per_user`` series": ranked by the
    first event time, then the series key, over the user's whole stream at user level and within
    each bucket otherwise (the run's first row is its earliest event)."""
    scope, run = ([USER], "__pair") if level == "user" else ([USER, STEP], "__cell")
    starts = (frame.filter(pl.col(f"__new_{run[2:]}")).select(run, "__user_hash", *scope, SERIES, TIME)
              .sort(["__user_hash", *scope, TIME, SERIES]))
    new_scope = pl.any_horizontal([pl.col(c) != pl.col(c).shift(1) for c in scope]).fill_null(True)
    rank = pl.int_range(pl.len(), dtype=pl.Int64)
    kept = (starts.with_columns((rank - pl.when(new_scope).then(rank).forward_fill()).alias("__rank"))
            .sort(run).select(pl.col("__rank") < series_per_user))
    return kept


def cell_sums(frame: pl.LazyFrame) -> pl.LazyFrame:
    """The partial panel: the sum of kept values per (series, bucket)."""
    return frame.group_by([SERIES, STEP]).agg(pl.col(VALUE).sum())


def cap_and_sum(rows: pl.DataFrame, caps) -> tuple[pl.DataFrame, dict[str, int]]:
    """Enforce ``caps`` (an :class:`tsdp.io.events.EventCaps`) on the prepared ``rows`` of whole
    users and return (cell sums with columns SERIES, STEP, VALUE; counts of dropped and kept rows).

    The three caps remove whole runs or ranks within runs, so their keep-flags are computed on one
    sorted frame and combined; the counts follow the caps' order (series, then buckets, then
    events per bucket), as diagnostics for the operator, never published.
    """
    work = runs(rows.lazy()).collect()
    keep = pl.Series(np.ones(work.height, dtype=bool))
    diag: dict[str, int] = {}
    if caps.series_per_user is not None:
        run = "__pair" if caps.level == "user" else "__cell"
        flags = first_series(work.lazy(), caps.series_per_user, caps.level).collect().to_series()
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
    return cell_sums(kept.lazy()).collect(), diag

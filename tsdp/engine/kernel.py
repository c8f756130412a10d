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

import polars as pl

USER, TIME, SERIES, STEP, VALUE, ORDER = "__user", "__time", "__series", "__step", "__value", "__order"
COLUMNS = (USER, TIME, SERIES, STEP, VALUE, ORDER)


def earliest_first(frame: pl.LazyFrame) -> pl.LazyFrame:
    """Rows of each user in the order every cap reads them: by time, series key, then ORDER."""
    return frame.sort([USER, TIME, SERIES, ORDER])


def cap_series(frame: pl.LazyFrame, series_per_user: int, level: str) -> pl.LazyFrame:
    """Keep each user's first ``series_per_user`` series (by first event time, then series key),
    chosen over the user's whole stream at user level and within each bucket otherwise."""
    scope = [USER] if level == "user" else [USER, STEP]
    firsts = (frame.group_by([*scope, SERIES]).agg(pl.col(TIME).min().alias("__first"))
              .sort([*scope, "__first", SERIES])
              .with_columns(pl.int_range(pl.len()).over(scope).alias("__rank"))
              .filter(pl.col("__rank") < series_per_user).select([*scope, SERIES]))
    return frame.join(firsts, on=[*scope, SERIES], how="semi", maintain_order="left")


def cap_steps(frame: pl.LazyFrame, max_steps: int) -> pl.LazyFrame:
    """Keep, in each (user, series), the rows of the earliest ``max_steps`` buckets."""
    return frame.filter(pl.col(STEP).rank("dense").over([USER, SERIES]) <= max_steps)


def cap_per_step(frame: pl.LazyFrame, max_per_step: int) -> pl.LazyFrame:
    """Keep the earliest ``max_per_step`` rows of each (user, series, bucket); needs
    :func:`earliest_first` order."""
    return frame.filter(pl.int_range(pl.len()).over([USER, SERIES, STEP]) < max_per_step)


def cell_sums(frame: pl.LazyFrame) -> pl.LazyFrame:
    """The partial panel: the sum of kept values per (series, bucket)."""
    return frame.group_by([SERIES, STEP]).agg(pl.col(VALUE).sum())


def cap_and_sum(rows: pl.DataFrame, caps) -> tuple[pl.DataFrame, dict[str, int]]:
    """Enforce ``caps`` (an :class:`tsdp.io.events.EventCaps`) on the prepared ``rows`` of whole
    users and return (cell sums with columns SERIES, STEP, VALUE; counts of dropped and kept rows).

    Each cap is one of the lazy stages above; the stages are collected one by one only to count
    what each drops (diagnostics for the operator, never published).
    """
    diag: dict[str, int] = {}
    work = earliest_first(rows.lazy()).collect()
    stages = []
    if caps.series_per_user is not None:
        stages.append(("dropped_series_cap", lambda f: cap_series(f, caps.series_per_user, caps.level)))
    if caps.max_steps is not None:
        stages.append(("dropped_step_cap", lambda f: cap_steps(f, caps.max_steps)))
    if caps.max_per_step is not None:
        stages.append(("dropped_per_step_cap", lambda f: cap_per_step(f, caps.max_per_step)))
    for name, stage in stages:
        before = work.height
        work = stage(work.lazy()).collect()
        diag[name] = before - work.height
    diag["rows_kept"] = work.height
    return cell_sums(work.lazy()).collect(), diag

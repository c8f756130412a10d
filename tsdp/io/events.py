"""Event layout: one row per (user id, time[, series][, value]), read and bucketed for aggregation.

:func:`event_rows` turns raw events into the rows the bounding kernel reads (:data:`COLUMNS`): ids
and times checked, each event on its bucket of the public grid, values clipped to ``[0, V]`` when the
caller bounds them. Which rows each user keeps, and why, is :mod:`tsdp.engine.events`'s business.

The time grid (``start``, ``end``, ``freq``) and the series keys must be public: they are given as
options, never read off the data. Events outside the grid or of undeclared series are dropped;
so is an event whose local time the zone skips or repeats when both instants it could mean lie
outside the grid (one that could lie inside is an error: its bucket is unknown).
The counts of dropped rows are returned as diagnostics for the operator; they are not private and
never go into the report.
"""

from __future__ import annotations

import re

import numpy as np
import polars as pl

from tsdp.errors import DataError, UsageError
from tsdp.io.ids import reject_nan_ids
from tsdp.io.layouts import numeric_values, require_columns
from tsdp.io.timegrid import fixed_grid, parse_instant
from tsdp.io.timeparse import dates_as_times_deferred, parse_time_column_deferred
from tsdp.io.timezones import ClockChanged

# The prepared rows :func:`event_rows` returns, which the bounding kernel (:mod:`tsdp.engine.kernel`) reads.
USER, TIME, SERIES, STEP, VALUE, ORDER = "__user", "__time", "__series", "__step", "__value", "__order"
COLUMNS = (USER, TIME, SERIES, STEP, VALUE, ORDER)


def check_series_keys(series_col: str | None, series_keys) -> None:
    """UsageError unless the released series of event input are public: ``--series-keys`` given
    with ``--series-col``, without duplicates."""
    if series_col is not None and not series_keys:
        raise UsageError(
            "--series-keys is required with --series-col for event input: the set of released "
            "series must be public, not read off the data"
        )
    if series_keys is not None and len(set(series_keys)) != len(series_keys):
        raise UsageError("--series-keys: duplicate keys")


def event_grid(start: str, end: str, freq: str, time_col: str, like: pl.DataType):
    """(the public grid, its exclusive end) for a time column of dtype ``like``."""
    end_at = parse_instant(end, "--end", like)
    return fixed_grid(parse_instant(start, "--start", like), end_at, freq, time_col, like), end_at


def event_rows(df: pl.DataFrame, job, clip: float | None, order_col: str | None,
               diag: dict[str, int]) -> tuple[pl.DataFrame, pl.DataType]:
    """(the prepared rows of ``df``, the dtype of its time column): ids and times checked, events
    bucketed on the public grid of ``job`` (an :class:`tsdp.engine.events.EventJob`), outside or
    undeclared ones dropped, values clipped to ``[0, clip]`` (``None``: not clipped); the counts of
    rows in and dropped go into ``diag``.

    ``order_col`` holds the tie-break key assigned when the input was read (shards carry the
    input's row number, and errors then name that row); without it, the row number of ``df`` is
    the key.
    """
    require_columns(df, {"--user-col": job.user_col, "--time-col": job.time_col,
                         "--series-col": job.series_col, "--value-col": job.value_col})
    try:
        if df[job.user_col].null_count():
            row = int(df[job.user_col].is_null().arg_true()[0])
            raise DataError(f"column {job.user_col!r}: missing user id at row {row + 1}")
        reject_nan_ids(df[job.user_col], job.user_col, "user id")
        df, changed = parse_time_column_deferred(df, job.time_col, job.timezone, bucketed=True)
        if changed is None:
            df, changed = dates_as_times_deferred(df, job.time_col, job.timezone, job.freq, job.start, job.end)
        like = df.schema[job.time_col]
        grid, end_at = job.grid(like)
        diag["rows_in"] = df.height
        rows = _prepared_rows(df, job, clip, grid, end_at, order_col, diag,
                              _clock_changes_outside(changed, grid, end_at))
    except DataError as exc:
        if order_col is None:
            raise
        raise DataError(input_rows(str(exc), df[order_col])) from None
    return rows, like


def input_rows(message: str, order: pl.Series) -> str:
    """A shard's error names the row of the input, not of the shard (``at row N``, ``(row N)``)."""
    def original(match: re.Match) -> str:
        k = int(match.group(2))
        return f"{match.group(1)} {int(order[k - 1]) + 1}" if 1 <= k <= order.len() else match.group(0)

    return re.sub(r"(at row|\(row) (\d+)", original, message)


def _clock_changes_outside(changed: ClockChanged | None, grid, end_at) -> np.ndarray | None:
    """The rows whose local time the zone skips or repeats, all of which lie outside the grid
    ``[start, end)`` under both readings (to be dropped as outside); DataError for the first that
    could lie inside, whose bucket only its writer knows.

    Dropping such a row depends on the public grid alone, as for any other row outside it; an
    error for it would let one user's row outside the grid decide between a release and none.
    """
    if changed is None:
        return None
    outside = changed.outside(grid.points[0], end_at)
    if not outside.all():
        raise changed.error(int(np.flatnonzero(~outside)[0]))
    return changed.rows


def _prepared_rows(df: pl.DataFrame, job, clip: float | None, grid, end_at, order_col: str | None, diag,
                   dropped: np.ndarray | None = None) -> pl.DataFrame:
    """The kernel's input (the :data:`COLUMNS`): events on the grid, of declared series,
    values clipped to [0, V], with the tie-break ORDER (``order_col``, else the row number).
    ``dropped``: positions of rows outside the grid whatever their time column holds."""
    user_col, time_col, series_col, value_col = job.user_col, job.time_col, job.series_col, job.value_col
    cols = [pl.col(user_col).alias(USER), pl.col(time_col).alias(TIME),
            pl.col(series_col).cast(pl.String).alias(SERIES) if series_col else pl.lit("all").alias(SERIES)]
    if value_col:
        values = numeric_values(df, value_col, allow_negative=True, allow_null=False,
                                null_hint="give every event a value or drop the event")
        if clip is not None:
            clipped = values.clip(0.0, clip).cast(pl.Float64)
            diag["values_clipped"] = int((clipped != values).sum())
        else:
            clipped = values.cast(pl.Float64)
        cols.append(clipped.alias(VALUE))
    else:
        cols.append(pl.lit(1.0).alias(VALUE))
    cols.append(pl.col(order_col).cast(pl.Int64).alias(ORDER) if order_col else
                pl.int_range(pl.len(), dtype=pl.Int64).alias(ORDER))
    work = df.select(cols).with_columns(pl.Series(STEP, grid.positions(df[time_col])))

    # [start, end): the last bucket may be cut short by an --end that is not on the grid.
    inside = (pl.col(STEP) >= 0) & (pl.col(STEP) < grid.n_steps) & (pl.col(TIME) < end_at)
    if dropped is not None and dropped.size:
        inside = inside & ~pl.int_range(pl.len(), dtype=pl.Int64).is_in(pl.Series(dropped, dtype=pl.Int64).implode())
    diag["dropped_outside_grid"] = work.height - work.filter(inside).height
    work = work.filter(inside)
    if series_col:
        known = pl.col(SERIES).is_in(pl.Series(job.names, dtype=pl.String).implode())
        diag["dropped_undeclared_series"] = work.height - work.filter(known).height
        work = work.filter(known)
    # the kernel ranks series by key through the Enum's physical codes
    keys = sorted(set(job.names)) if series_col else ["all"]
    return work.with_columns(pl.col(SERIES).cast(pl.Enum(keys)))


def cell_matrix(sums: pl.DataFrame, keys: list[str], n_steps: int) -> np.ndarray:
    """The (series x steps) panel from kernel cell sums (series in the order of ``keys``)."""
    lookup = pl.DataFrame({SERIES: keys, "__row": np.arange(len(keys))}, schema_overrides={SERIES: pl.String})
    located = sums.join(lookup, on=SERIES)
    matrix = np.zeros((len(keys), n_steps))
    matrix[located["__row"].to_numpy(), located[STEP].to_numpy()] = located[VALUE].to_numpy()
    return matrix


def long_frame(names, points, matrix, series_col, time_col, out_col) -> pl.DataFrame:
    n_series, n_steps = matrix.shape
    data = {}
    if series_col:
        data[series_col] = pl.Series(np.repeat(np.array(names, dtype=object), n_steps), dtype=pl.String)
    data[time_col] = pl.concat([points] * n_series) if n_series > 1 else points
    data[out_col] = matrix.ravel()
    return pl.DataFrame(data)

"""Event layout: one row per (user id, time[, series][, value]), aggregated by tsdp itself.

Aggregating raw events lets tsdp *enforce* the contribution bounds that the guarantee assumes
instead of trusting them. Rows are kept by rules that never look at values, only at time (ties
broken by the series key, then by input order), and every rule is **stable for the unit it
serves**: which of a user's rows are kept depends only on that user's rows inside the scope that
one neighbouring step may change, so removing (or substituting) one unit changes only the cells
that unit may touch.

``level="user"`` (the whole user is the unit; scope: all of the user's rows):

1. a user keeps at most ``series_per_user`` series, the ones they appear in first;
2. in each kept series a user keeps at most ``max_steps`` time buckets, the earliest ones;
3. in each bucket a user keeps at most ``max_per_step`` events per series, the earliest ones.

``level="w-event"`` (a user's events in any w consecutive buckets; scope: one bucket):

1. in each bucket a user keeps at most ``series_per_user`` series, the ones they appear in first
   *within that bucket*; a choice over the whole stream would let events outside a window decide
   which cells inside it are kept, so a w-window neighbour could move cells far from the window;
2. in each bucket a user keeps at most ``max_per_step`` events per series, the earliest ones.
   ``max_steps`` is refused: "the earliest I buckets" looks beyond any one window.

``level="event"``: no per-user caps (one event is the unit).

In every level an event's value (if any) is clipped to [0, value_bound]. Once these caps hold, one
unit changes at most ``series_per_user`` series per bucket (user level: in total) and at most
``max_per_step * value_bound`` per cell, which is what :mod:`tsdp.accounting.sensitivity` assumes.

The time grid (``start``, ``end``, ``freq``) and the series keys must be public: they are given as
options, never read off the data. Events outside the grid or of undeclared series are dropped.
The counts of dropped rows are returned as diagnostics for the operator; they are not private and
never go into the report.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import polars as pl

from tsdp.engine.kernel import ORDER, SERIES, STEP, TIME, USER, VALUE, cap_and_sum
from tsdp.errors import DataError, UsageError
from tsdp.io.layouts import SeriesTable, numeric_values, require_columns
from tsdp.io.timegrid import fixed_grid, parse_instant, parse_time_column

CAP_LEVELS = ("event", "w-event", "user")


@dataclass(frozen=True)
class EventCaps:
    """Contribution caps to enforce (``None`` means no cap of that kind)."""

    max_per_step: int | None = None
    max_steps: int | None = None
    series_per_user: int | None = None
    value_bound: float | None = None
    level: str = "user"

    def __post_init__(self) -> None:
        if self.level not in CAP_LEVELS:
            raise UsageError(f"--unit must be one of {', '.join(CAP_LEVELS)}, got {self.level!r}")
        if self.level != "user" and self.max_steps is not None:
            raise UsageError(f"--max-steps applies to --unit user only; with --unit {self.level} "
                             f"remove --max-steps {self.max_steps}")
        if self.level == "event" and (self.max_per_step is not None or self.series_per_user is not None):
            raise UsageError("--unit event enforces no per-user caps: one event is the unit")

    def describe(self) -> str:
        """The enforced rule in words, for the report."""
        if self.level == "event":
            rule = "no per-user caps (one event is the protected unit)"
        else:
            parts = []
            if self.series_per_user is not None:
                where = "in total" if self.level == "user" else "in each time bucket"
                parts.append(f"at most {self.series_per_user} series per user {where} (the first "
                             f"it appears in{' within the bucket' if self.level != 'user' else ''})")
            if self.max_steps is not None:
                parts.append(f"at most {self.max_steps} time buckets per user and series (the earliest)")
            if self.max_per_step is not None:
                parts.append(f"at most {self.max_per_step} events per user, series and bucket (the earliest)")
            rule = "; ".join(parts) or "no caps"
        if self.value_bound is not None:
            rule += f"; each event's value clipped to [0, {self.value_bound:g}]"
        scope = {"user": "all of a user's events", "w-event": "the user's events in the same time bucket",
                 "event": "the event itself"}[self.level]
        return (f"enforced caps: {rule}. Rows are chosen by time (ties by series key, then input order), "
                f"never by value, and each choice depends only on {scope}")

    def cell_bound(self) -> float:
        """Largest total one user adds to one (series, bucket) cell once the caps are enforced:
        at most ``max_per_step`` events (one if uncapped, as for event-level units), each worth at
        most ``value_bound`` (1 for counts)."""
        return (self.max_per_step or 1) * (self.value_bound or 1.0)


@dataclass
class EventAggregation:
    table: SeriesTable
    diagnostics: dict = field(default_factory=dict)


def aggregate_events(
    df: pl.DataFrame,
    user_col: str,
    time_col: str,
    freq: str,
    start: str,
    end: str,
    caps: EventCaps,
    series_col: str | None = None,
    series_keys: list[str] | None = None,
    value_col: str | None = None,
    output_col: str | None = None,
    order_col: str | None = None,
) -> EventAggregation:
    """Bucket events on the public grid, enforce ``caps`` and sum per (series, bucket).

    ``order_col`` holds the tie-break key assigned when the input was read (shards carry the
    input's row number); without it, the row number of ``df`` is the key.
    """
    require_columns(df, {"--user-col": user_col, "--time-col": time_col,
                         "--series-col": series_col, "--value-col": value_col})
    if series_col is not None and not series_keys:
        raise UsageError(
            "--series-keys is required with --series-col for event input: the set of released "
            "series must be public, not read off the data"
        )
    if value_col is not None and caps.value_bound is None:
        raise UsageError("--value-bound is required with --value-col for event input")
    if caps.value_bound is not None and not caps.value_bound > 0:
        raise UsageError(f"--value-bound must be > 0, got {caps.value_bound}")
    if df[user_col].null_count():
        row = int(df[user_col].is_null().arg_true()[0])
        raise DataError(f"column {user_col!r}: missing user id at row {row + 1}")
    df = parse_time_column(df, time_col)
    like = df.schema[time_col]
    end_at = parse_instant(end, "--end", like)
    grid = fixed_grid(parse_instant(start, "--start", like), end_at, freq, time_col, like)
    out_col = output_col or (value_col if value_col else "count")
    diag = {"rows_in": df.height}

    rows, names = _prepared_rows(df, user_col, time_col, grid, end_at, caps, series_col, series_keys,
                                 value_col, out_col, order_col, diag)
    sums, capped = cap_and_sum(rows, caps)
    diag.update(capped)
    matrix = cell_matrix(sums, names if series_col else ["all"], grid.n_steps)
    frame = _long_frame(names, grid.points, matrix, series_col, time_col, out_col)
    table = SeriesTable(frame, "long", time_col, [out_col], series_col, names, grid)
    return EventAggregation(table, diag)


def _prepared_rows(df, user_col, time_col, grid, end_at, caps, series_col, series_keys, value_col, out_col,
                   order_col, diag) -> tuple[pl.DataFrame, list[str]]:
    """The kernel's input (:mod:`tsdp.engine.kernel` columns): events on the grid, of declared series,
    values clipped to [0, V], with the tie-break ORDER (``order_col``, else the row number)."""
    cols = [pl.col(user_col).alias(USER), pl.col(time_col).alias(TIME),
            pl.col(series_col).cast(pl.String).alias(SERIES) if series_col else pl.lit("all").alias(SERIES)]
    if value_col:
        values = numeric_values(df, value_col, allow_negative=True, allow_null=False,
                                null_hint="give every event a value or drop the event")
        clipped = values.clip(0.0, caps.value_bound).cast(pl.Float64)
        diag["values_clipped"] = int((clipped != values).sum())
        cols.append(clipped.alias(VALUE))
    else:
        cols.append(pl.lit(1.0).alias(VALUE))
    cols.append(pl.col(order_col).cast(pl.Int64).alias(ORDER) if order_col else
                pl.int_range(pl.len(), dtype=pl.Int64).alias(ORDER))
    work = df.select(cols).with_columns(pl.Series(STEP, grid.positions(df[time_col])))

    # [start, end): the last bucket may be cut short by an --end that is not on the grid.
    inside = (pl.col(STEP) >= 0) & (pl.col(STEP) < grid.n_steps) & (pl.col(TIME) < end_at)
    diag["dropped_outside_grid"] = work.height - work.filter(inside).height
    work = work.filter(inside)
    names = list(series_keys) if series_col else [out_col]
    if series_col:
        if len(set(names)) != len(names):
            raise UsageError("--series-keys: duplicate keys")
        known = pl.col(SERIES).is_in(pl.Series(names, dtype=pl.String).implode())
        diag["dropped_undeclared_series"] = work.height - work.filter(known).height
        work = work.filter(known)
    return work, names


def cell_matrix(sums: pl.DataFrame, keys: list[str], n_steps: int) -> np.ndarray:
    """The (series x steps) panel from kernel cell sums (series in the order of ``keys``)."""
    lookup = pl.DataFrame({SERIES: keys, "__row": np.arange(len(keys))}, schema_overrides={SERIES: pl.String})
    located = sums.join(lookup, on=SERIES)
    matrix = np.zeros((len(keys), n_steps))
    matrix[located["__row"].to_numpy(), located[STEP].to_numpy()] = located[VALUE].to_numpy()
    return matrix


def _long_frame(names, points, matrix, series_col, time_col, out_col) -> pl.DataFrame:
    n_series, n_steps = matrix.shape
    data = {}
    if series_col:
        data[series_col] = pl.Series(np.repeat(np.array(names, dtype=object), n_steps), dtype=pl.String)
    data[time_col] = pl.concat([points] * n_series) if n_series > 1 else points
    data[out_col] = matrix.ravel()
    return pl.DataFrame(data)

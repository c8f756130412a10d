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
options, never read off the data. Events outside the grid or of undeclared series are dropped;
so is an event whose local time the zone skips or repeats when both instants it could mean lie
outside the grid (one that could lie inside is an error: its bucket is unknown).
The counts of dropped rows are returned as diagnostics for the operator; they are not private and
never go into the report.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np
import polars as pl

from tsdp.engine.kernel import (ORDER, PROFILE_PREFIX, SERIES, STEP, TIME, USER, VALUE, cap_and_sum,
                                contribution_profile)
from tsdp.errors import DataError, UsageError
from tsdp.io.ids import reject_nan_ids
from tsdp.io.layouts import SeriesTable, numeric_values, require_columns
from tsdp.io.timegrid import dates_as_times_deferred, fixed_grid, parse_instant, parse_time_column_deferred
from tsdp.io.timezones import ClockChanged
from tsdp.limits import MAX_MAGNITUDE

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


@dataclass(frozen=True)
class EventJob:
    """Everything public about one event aggregation: the columns, the grid, the caps, the keys.

    Every engine runs :func:`partial_cell_sums` on the rows of a set of whole users and
    :func:`assemble` on the added-up partial sums; :func:`aggregate_events` is the in-memory route.
    """

    user_col: str
    time_col: str
    freq: str
    start: str
    end: str
    caps: EventCaps
    series_col: str | None = None
    series_keys: tuple[str, ...] | None = None
    value_col: str | None = None
    output_col: str | None = None
    timezone: str | None = None  # the zone of timestamps without an offset, and of --start/--end
    bounded: bool = True  # False: no caps and no value clipping (:meth:`unbounded`)
    profile: tuple[tuple[str, tuple[int, ...]], ...] | None = None  # (cap, candidate grid): :meth:`profiling`

    def __post_init__(self) -> None:
        if self.series_col is not None and not self.series_keys:
            raise UsageError(
                "--series-keys is required with --series-col for event input: the set of released "
                "series must be public, not read off the data"
            )
        if self.series_keys is not None:
            object.__setattr__(self, "series_keys", tuple(self.series_keys))
            if len(set(self.series_keys)) != len(self.series_keys):
                raise UsageError("--series-keys: duplicate keys")
        if not self.bounded and (self.caps.level != "event" or self.caps.value_bound is not None):
            raise ValueError("an unbounded event job enforces no caps and clips no value")
        if self.value_col is not None and self.caps.value_bound is None and self.bounded:
            raise UsageError("--value-bound is required with --value-col for event input")
        if self.caps.value_bound is not None and not self.caps.value_bound > 0:
            raise UsageError(f"--value-bound must be > 0, got {self.caps.value_bound}")
        if self.caps.value_bound is not None and not self.caps.value_bound <= MAX_MAGNITUDE:
            raise UsageError(f"--value-bound {self.caps.value_bound}: must be at most 2**53; rescale the values")

    def unbounded(self) -> "EventJob":
        """The same aggregation without any cap or value clip: every event of a declared series on the
        public grid counts with its own value. The panel a release is meant to approximate, which
        ``--evaluate`` compares with (never released: it has no sensitivity bound)."""
        return replace(self, caps=EventCaps(level="event"), bounded=False)

    def profiling(self, grids: dict[str, tuple[int, ...]]) -> "EventJob":
        """The same events and fixed caps, counted into histograms of each user's contribution over
        the public candidate grids of the caps to be chosen privately
        (:func:`tsdp.engine.kernel.contribution_profile`) instead of into cells: the aggregation's
        diagnostics then hold the histograms (:func:`profile_histograms`), its panel is empty."""
        return replace(self, profile=tuple((name, tuple(int(c) for c in grid)) for name, grid in grids.items()))

    @property
    def out_col(self) -> str:
        return self.output_col or (self.value_col if self.value_col else "count")

    @property
    def names(self) -> list[str]:
        """The released series: the public keys, or the one output column."""
        return list(self.series_keys) if self.series_col else [self.out_col]

    @property
    def columns(self) -> list[str]:
        """The input columns the job reads."""
        return [c for c in (self.user_col, self.time_col, self.series_col, self.value_col) if c is not None]

    def grid(self, like: pl.DataType):
        """(the public grid, its exclusive end) for a time column of dtype ``like``."""
        end_at = parse_instant(self.end, "--end", like)
        return fixed_grid(parse_instant(self.start, "--start", like), end_at, self.freq, self.time_col, like), end_at


@dataclass
class PartialSums:
    """Cell sums of a set of whole users (columns SERIES, STEP, VALUE), row counts, time dtype."""

    sums: pl.DataFrame
    diagnostics: dict[str, int]
    time_dtype: pl.DataType


def partial_cell_sums(df: pl.DataFrame, job: EventJob, order_col: str | None = None) -> PartialSums:
    """Check, bucket, cap and sum the events of ``df``, which must hold every row of its users.

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
        diag = {"rows_in": df.height}
        rows = _prepared_rows(df, job, grid, end_at, order_col, diag, _clock_changes_outside(changed, grid, end_at))
    except DataError as exc:
        if order_col is None:
            raise
        raise DataError(input_rows(str(exc), df[order_col])) from None
    if job.profile is not None:
        diag.update(contribution_profile(rows, job.caps, dict(job.profile)))
        return PartialSums(pl.DataFrame(schema={SERIES: pl.String, STEP: pl.Int64, VALUE: pl.Float64}), diag, like)
    sums, capped = cap_and_sum(rows, job.caps)
    diag.update(capped)
    return PartialSums(sums, diag, like)


def profile_histograms(diagnostics: dict[str, int], grids: dict[str, tuple[int, ...]]) -> dict:
    """The histograms a profiling job counted (:meth:`EventJob.profiling`), one array per cap:
    entry j counts the users whose statistic lies in (c_{j-1}, c_j], the last those above the grid."""
    import numpy as np

    return {name: np.array([diagnostics.get(f"{PROFILE_PREFIX}:{name}:{j}", 0) for j in range(len(grid) + 1)],
                           dtype=np.int64) for name, grid in grids.items()}


def assemble(job: EventJob, parts: list[PartialSums]) -> EventAggregation:
    """The panel from the partial sums of disjoint sets of users (they add up), with summed counts."""
    dtypes = {str(p.time_dtype) for p in parts}
    if len(dtypes) > 1:
        raise DataError(f"column {job.time_col!r}: parts of the input parse to different time types "
                        f"({', '.join(sorted(dtypes))}); write every timestamp in one format")
    diag: dict[str, int] = {}
    for part in parts:
        for key, count in part.diagnostics.items():
            diag[key] = diag.get(key, 0) + count
    grid, _ = job.grid(parts[0].time_dtype)
    sums = pl.concat([p.sums for p in parts]).group_by([SERIES, STEP]).agg(pl.col(VALUE).sum())
    matrix = cell_matrix(sums, job.names if job.series_col else ["all"], grid.n_steps)
    frame = _long_frame(job.names, grid.points, matrix, job.series_col, job.time_col, job.out_col)
    table = SeriesTable(frame, "long", job.time_col, [job.out_col], job.series_col, job.names, grid)
    return EventAggregation(table, diag)


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
    timezone: str | None = None,
) -> EventAggregation:
    """Bucket events on the public grid, enforce ``caps`` and sum per (series, bucket), in memory."""
    job = EventJob(user_col, time_col, freq, start, end, caps, series_col, series_keys, value_col, output_col,
                   timezone)
    return assemble(job, [partial_cell_sums(df, job)])


def input_rows(message: str, order: pl.Series) -> str:
    """A shard's error names the row of the input, not of the shard (``at row N``, ``(row N)``)."""
    import re

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


def _prepared_rows(df: pl.DataFrame, job: EventJob, grid, end_at, order_col: str | None, diag,
                   dropped: np.ndarray | None = None) -> pl.DataFrame:
    """The kernel's input (:mod:`tsdp.engine.kernel` columns): events on the grid, of declared series,
    values clipped to [0, V], with the tie-break ORDER (``order_col``, else the row number).
    ``dropped``: positions of rows outside the grid whatever their time column holds."""
    user_col, time_col, series_col, value_col = job.user_col, job.time_col, job.series_col, job.value_col
    cols = [pl.col(user_col).alias(USER), pl.col(time_col).alias(TIME),
            pl.col(series_col).cast(pl.String).alias(SERIES) if series_col else pl.lit("all").alias(SERIES)]
    if value_col:
        values = numeric_values(df, value_col, allow_negative=True, allow_null=False,
                                null_hint="give every event a value or drop the event")
        if job.bounded:
            clipped = values.clip(0.0, job.caps.value_bound).cast(pl.Float64)
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


def _long_frame(names, points, matrix, series_col, time_col, out_col) -> pl.DataFrame:
    n_series, n_steps = matrix.shape
    data = {}
    if series_col:
        data[series_col] = pl.Series(np.repeat(np.array(names, dtype=object), n_steps), dtype=pl.String)
    data[time_col] = pl.concat([points] * n_series) if n_series > 1 else points
    data[out_col] = matrix.ravel()
    return pl.DataFrame(data)

"""Bounding events: the caps tsdp enforces on raw events, and the event aggregation every engine runs.

Aggregating raw events lets tsdp *enforce* the contribution bounds that the guarantee assumes
instead of trusting them. Rows are kept by rules that never look at values, only at time (ties
broken by the series key, then by input order), and every rule is **stable for the unit it
serves**: which of a user's rows are kept depends only on that user's rows inside the scope that
one neighbouring step may change, so removing (or substituting) one unit changes only the cells
that unit may touch.

``level="user"`` (the whole user is the unit; scope: all of the user's rows):

1. a user keeps at most ``series_per_unit`` series, the ones they appear in first;
2. in each kept series a user keeps at most ``max_steps`` time buckets, the earliest ones;
3. in each bucket a user keeps at most ``max_per_step`` events per series, the earliest ones.

4. with ``max_norm`` C, a user's kept cell totals (their values' sums per (series, bucket)) form a
   non-negative vector x; when ||x||_2 > C every one of the user's kept values is multiplied by
   C / ||x||_2 (lowered by a relative (r + 8) 2^-52 for the user's r kept rows, which covers the
   float64 rounding of the sums, the norm, the quotient and the products), so the user's cells sum to a
   vector of norm at most C (:mod:`tsdp.accounting.sensitivity`). The factor depends only on the
   user's own kept rows.

``level="w-event"`` (a user's events in any w consecutive buckets; scope: one bucket):

1. in each bucket a user keeps at most ``series_per_unit`` series, the ones they appear in first
   *within that bucket*; a choice over the whole stream would let events outside a window decide
   which cells inside it are kept, so a w-window neighbour could move cells far from the window;
2. in each bucket a user keeps at most ``max_per_step`` events per series, the earliest ones.
   ``max_steps`` is refused: "the earliest I buckets" looks beyond any one window.

``level="event"``: no per-user caps (one event is the unit).

In every level an event's value (if any) is clipped to [0, value_bound]. Once these caps hold, one
unit changes at most ``series_per_unit`` series per bucket (user level: in total) and at most
``max_per_step * value_bound`` per cell, which is what :mod:`tsdp.accounting.sensitivity` assumes.
Which rule applies is the unit level's (:class:`tsdp.accounting.sensitivity.UnitLevel`); the caps
run in :mod:`tsdp.engine.kernel`, on the rows :mod:`tsdp.io.events` reads and buckets.

"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np
import polars as pl

from tsdp.accounting.sensitivity import UNIT_LEVELS, UnitLevel, unit_level
from tsdp.engine.kernel import PROFILE_PREFIX, SERIES, STEP, VALUE, cap_and_sum, contribution_profile
from tsdp.errors import DataError, UsageError
from tsdp.io.events import cell_matrix, check_series_keys, event_grid, event_rows, long_frame
from tsdp.io.layouts import SeriesTable
from tsdp.io.load import InputSpec, LoadedInput
from tsdp.limits import MAX_MAGNITUDE


@dataclass(frozen=True)
class EventCaps:
    """Contribution caps to enforce (``None`` means no cap of that kind)."""

    max_per_step: int | None = None
    max_steps: int | None = None
    series_per_unit: int | None = None
    value_bound: float | None = None
    level: str = "user"
    max_norm: float | None = None  # user level: each user's cell totals scaled to L2 norm <= max_norm

    def __post_init__(self) -> None:
        unit = unit_level(self.level)
        if self.max_norm is not None and not unit.whole_user:
            raise UsageError(f"--max-norm applies to --unit user, not {self.level}")
        if not unit.uses_max_steps and self.max_steps is not None:
            raise UsageError(f"--max-steps applies to --unit user only; with --unit {self.level} "
                             f"remove --max-steps {self.max_steps}")
        if not unit.per_user_caps and (self.max_per_step is not None or self.series_per_unit is not None):
            raise UsageError("--unit event enforces no per-user caps: one event is the unit")

    @property
    def unit(self) -> UnitLevel:
        return UNIT_LEVELS[self.level]

    def describe(self) -> str:
        """The enforced rule in words, for the report."""
        unit = self.unit
        if not unit.per_user_caps:
            rule = "no per-user caps (one event is the protected unit)"
        else:
            parts = []
            if self.series_per_unit is not None:
                where = "in each time bucket" if unit.series_cap_per_step else "in total"
                parts.append(f"at most {self.series_per_unit} series per user {where} (the first "
                             f"it appears in{' within the bucket' if unit.series_cap_per_step else ''})")
            if self.max_steps is not None:
                parts.append(f"at most {self.max_steps} time buckets per user and series (the earliest)")
            if self.max_per_step is not None:
                parts.append(f"at most {self.max_per_step} events per user, series and bucket (the earliest)")
            if self.max_norm is not None:
                parts.append(f"each user's cell totals scaled down to L2 norm at most {self.max_norm:g} "
                             "(one factor per user, from that user's kept rows)")
            rule = "; ".join(parts) or "no caps"
        if self.value_bound is not None:
            rule += f"; each event's value clipped to [0, {self.value_bound:g}]"
        return (f"enforced caps: {rule}. Rows are chosen by time (ties by series key, then input order), "
                f"never by value, and each choice depends only on {unit.cap_scope}")

    def cell_bound(self) -> float:
        """Largest total one user adds to one (series, bucket) cell once the caps are enforced:
        at most ``max_per_step`` events (one if uncapped, as for event-level units), each worth at
        most ``value_bound`` (1 for counts), and at most ``max_norm`` when the user's cells are scaled
        to that norm (without ``max_per_step``, ``max_norm`` alone bounds a cell)."""
        if self.max_norm is not None:
            box = None if self.max_per_step is None else self.max_per_step * (self.value_bound or 1.0)
            return self.max_norm if box is None else min(box, self.max_norm)
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
        if self.series_keys is not None:
            object.__setattr__(self, "series_keys", tuple(self.series_keys))
        check_series_keys(self.series_col, self.series_keys)
        if not self.bounded and (self.caps.unit.per_user_caps or self.caps.value_bound is not None):
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
        return replace(self, profile=tuple((name, tuple(float(c) if isinstance(c, float) else int(c) for c in grid)) for name, grid in grids.items()))

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
        return event_grid(self.start, self.end, self.freq, self.time_col, like)


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
    diag: dict[str, int] = {}
    rows, like = event_rows(df, job, job.caps.value_bound if job.bounded else None, order_col, diag)
    if job.profile is not None:
        diag.update(contribution_profile(rows, job.caps, dict(job.profile)))
        return PartialSums(pl.DataFrame(schema={SERIES: pl.String, STEP: pl.Int64, VALUE: pl.Float64}), diag, like)
    sums, capped = cap_and_sum(rows, job.caps)
    diag.update(capped)
    return PartialSums(sums, diag, like)


def profile_histograms(diagnostics: dict[str, int], grids: dict[str, tuple[int, ...]]) -> dict:
    """The histograms a profiling job counted (:meth:`EventJob.profiling`), one array per cap:
    entry j counts the users whose statistic lies in (c_{j-1}, c_j], the last those above the grid."""
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
    frame = long_frame(job.names, grid.points, matrix, job.series_col, job.time_col, job.out_col)
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


def event_job(spec: InputSpec, caps: EventCaps) -> EventJob:
    """The public description of the event aggregation the options ask for (UsageError if incomplete)."""
    if spec.user_col is None:
        raise UsageError("--user-col is required for --layout events")
    missing = [o for o, v in (("--freq", spec.freq), ("--start", spec.start), ("--end", spec.end)) if v is None]
    if missing:
        raise UsageError(f"{', '.join(missing)} required for event input: the time grid must be public")
    return EventJob(spec.user_col, spec.time_col, spec.freq, spec.start, spec.end, caps, spec.series_col,
                    spec.series_keys, spec.value_col, timezone=spec.timezone)


def loaded_events(agg: EventAggregation, caps: EventCaps) -> LoadedInput:
    """Aggregated events as a loaded input: bounds enforced, with the rule in the notes."""
    notes = [caps.describe(), "the time grid and the series keys are public parameters, not read off the data"]
    return LoadedInput(agg.table, True, notes, agg.diagnostics)

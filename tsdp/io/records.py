"""The record pipeline of ``tsdp mean-estimate``: one row per (user, time?, cell?, value).

:func:`load_records` reads the needed columns, checks them (missing columns, null user ids and
keys, non-numeric or non-finite values, unparseable timestamps), checks the values against the
PUBLIC bounds ``[lower, upper]`` (an error, or per-record clipping, which keeps every record and so
the public per-user counts), derives time slots, selects one cell/slot and/or groups by key
columns, and returns the records in the compressed layout of :mod:`tsdp.mean.api`:

* ``values``: float64, sorted by group keys, then user id (as text, ascending), then timestamp,
  then input row order (a stable sort). The order never depends on the values.
* ``user_starts``: int64 offsets of each run (one user's records in one group), ``n_runs + 1``.
* ``group_starts``: int64 offsets into ``user_starts`` of each group's first run, ``n_groups + 1``.

Declared groups: when every group key is declared (a cell by ``--cell`` or ``--group-keys`` /
``--group-keys-file``, a derived slot by ``--slot`` or the grid ``--start``/``--end`` with
``--slot-length``), :func:`declared_groups` lists every declared group (typed like the input's
columns, in the canonical order), records outside them are dropped, and :class:`Records` carries
the table (``declared``) and the number of records dropped (``dropped``, a figure of the data).

Everything is vectorised (polars and numpy); there is no Python loop over records. This module
knows nothing about privacy.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import numpy as np
import polars as pl

from tsdp.errors import DataError, UsageError
from tsdp.io.ids import reject_nan_ids
from tsdp.io.layouts import numeric_values, require_columns
from tsdp.io.timegrid import parse_freq, parse_instant, parse_time_column_deferred

SLOT = "slot"  # name of the derived time-slot column
DEFAULT_SLOT_LENGTH = "1h"  # the paper's 1-hour time slots
OUT_OF_RANGE = ("error", "clip")
DF_ROW, ORDER_KEY = "__df_row", "__order"  # a row's position in the frame read; its input row number


@dataclass(frozen=True)
class RecordSpec:
    """Which columns hold what, which records to keep, and how to group them."""

    user_col: str
    value_col: str
    lower: float
    upper: float
    time_col: str | None = None
    cell_col: str | None = None
    slot_length: str | None = None
    cell: str | None = None
    slot: str | None = None
    group_by: tuple[str, ...] = ()
    out_of_range: str = "error"
    timezone: str | None = None  # --timezone: the zone of timestamps written without an offset
    group_keys: tuple[str, ...] | None = None  # --group-keys: the declared values of the one non-slot key
    group_keys_table: pl.DataFrame | None = None  # --group-keys-file: declared combinations (text columns)
    start: str | None = None  # --start/--end: the declared slot grid [start, end) of --slot-length slots
    end: str | None = None

    def declares(self) -> bool:
        """Whether a declaration of groups was given (beyond selecting one cell or slot)."""
        return self.group_keys is not None or self.group_keys_table is not None or self.start is not None


class OutOfBounds(DataError):
    """Values outside the public bounds (``--value-out-of-range error``): how many, and the one at
    the earliest input row (``row``, 0-based; ``value``; ``group``: its group keys in words)."""

    def __init__(self, spec: "RecordSpec", count: int, row: int, value: float, group: str) -> None:
        self.spec, self.count, self.row, self.value, self.group = spec, count, row, value, group
        super().__init__(
            f"--value-col: column {spec.value_col!r} has {count} value(s) outside the public bounds "
            f"[{spec.lower:g}, {spec.upper:g}], the first {value:g} at row {row + 1}"
            + (f" in group {group}" if group else "")
            + "; fix the data, raise the public --upper/--lower, or pass --value-out-of-range clip")

    @classmethod
    def combined(cls, parts: list["OutOfBounds"]) -> "OutOfBounds":
        """One error for several shards: the counts add up, the earliest row is named."""
        first = min(parts, key=lambda e: e.row)
        return cls(first.spec, sum(e.count for e in parts), first.row, first.value, first.group)


@dataclass
class Records:
    """Records in CSR layout (see the module docstring) plus the group keys in the same order."""

    values: np.ndarray
    user_starts: np.ndarray
    group_starts: np.ndarray
    groups: pl.DataFrame  # one row per group, key columns only (no columns: one group)
    key_columns: list[str]
    n_groups: int
    max_groups_per_user: int
    clipped: bool = False  # whether clipping was requested (never how many records it changed)
    notes: list[str] = field(default_factory=list)
    run_users: pl.Series | None = None  # the user id (as text) of every run
    run_codes: np.ndarray | None = None  # the user code of every run (its rank among the ids as text)
    declared: pl.DataFrame | None = None  # every declared group (Declared.table), or None
    declared_index: np.ndarray | None = None  # the position of each group among the declared ones
    dropped: int = 0  # records outside the declared groups or the selection (a figure of the data)

    @property
    def counts(self) -> np.ndarray:
        """Records of every run."""
        return np.diff(self.user_starts)

    def group_label(self, index: int) -> str:
        """The group's keys in words, e.g. ``cell_id='c00_01', slot=2024-05-06 09:00:00``."""
        if not self.key_columns:
            return "the selection"
        row = self.groups.row(index, named=True)
        return ", ".join(f"{k}={_show(v)}" for k, v in row.items())

    def true_means(self) -> np.ndarray:
        """The exact per-group sample means (NOT private: for ``--evaluate`` diagnostics only)."""
        record_starts = self.user_starts[self.group_starts[:-1]]
        sums = np.add.reduceat(self.values, record_starts) if self.values.size else np.zeros(0)
        counts = np.diff(self.user_starts[self.group_starts])
        return sums / counts


def _show(value) -> str:
    return repr(value) if isinstance(value, str) else str(value)


def load_records(df: pl.DataFrame, spec: RecordSpec, order_col: str | None = None,
                 shard: bool = False, consume: bool = False) -> Records:
    """Check, select, group and sort ``df`` into :class:`Records` (see the module docstring).

    ``order_col``: the input's row number of each row (a shard of a larger input): it breaks ties
    in time instead of the row order of ``df``, and errors name the input's row. ``shard``: ``df``
    holds only some of the users, so an empty selection is no error (an empty :class:`Records`).
    ``consume``: the columns of ``df`` are dropped from it once read, so that memory holding ids
    and keys is freed before the sort (the caller's ``df`` is left without columns).
    """
    if order_col is None:
        return _load_records(df, spec, None, shard, consume)
    from tsdp.io.events import input_rows

    rows = df[order_col]
    try:
        return _load_records(df, spec, order_col, shard, consume)
    except OutOfBounds as exc:
        raise OutOfBounds(spec, exc.count, int(rows[exc.row]), exc.value, exc.group) from None
    except DataError as exc:
        raise DataError(input_rows(str(exc), rows)) from None


def _load_records(df: pl.DataFrame, spec: RecordSpec, order_col: str | None, shard: bool,
                  consume: bool = False) -> Records:
    if spec.out_of_range not in OUT_OF_RANGE:
        raise UsageError(f"--value-out-of-range must be error or clip, got {spec.out_of_range!r}")
    keys, slot_needed = group_keys(df.columns, spec)
    if spec.slot_length is not None and spec.time_col is None:
        raise UsageError("--slot-length needs --time-col (the column the slots are cut from)")
    if slot_needed and spec.time_col is None:
        raise UsageError("time slots (--slot or --group-by slot) need --time-col and --slot-length")
    if spec.timezone is not None and spec.time_col is None:
        raise UsageError("--timezone needs --time-col (the column whose timestamps it describes)")
    columns = {"--user-col": spec.user_col, "--value-col": spec.value_col, "--time-col": spec.time_col}
    if spec.cell_col is not None:
        columns["--cell-col"] = spec.cell_col
    require_columns(df, columns)
    source_keys = [k for k in keys if not (k == SLOT and slot_needed)]
    for k in source_keys:
        if k not in df.columns:
            raise DataError(f"--group-by: column {k!r} not found; the input has columns: {', '.join(df.columns)}")
    needed = list(dict.fromkeys(
        [spec.user_col, spec.value_col] + ([spec.time_col] if spec.time_col else []) + source_keys))
    position = pl.int_range(df.height, dtype=pl.Int64, eager=True)
    frame = df.select(needed).with_columns(
        position.alias(DF_ROW), (df[order_col].cast(pl.Int64) if order_col else position).alias(ORDER_KEY))
    n_read = frame.height
    if consume:
        for name in df.columns:
            df.drop_in_place(name)

    # Column checks, on the whole table (row numbers refer to the input).
    users = frame[spec.user_col]
    if users.null_count():
        row = int(users.is_null().arg_true()[0])
        raise DataError(f"--user-col: column {spec.user_col!r} has a missing user id at row {row + 1}; "
                        "every record needs a user (the privacy unit)")
    # The distinct values of the ids and keys are found once: the NaN checks and the codes use
    # them. The user ids' take about as long as everything else up to the sort, so they are found
    # in a second thread meanwhile (polars and numpy release the GIL).
    pool = ThreadPoolExecutor(1)
    user_job = pool.submit(_user_codes, users, spec.user_col, spec.cell is None and spec.slot is None)
    pool.shutdown(wait=False)
    distinct = {}
    all_declared = _declares_all(keys, slot_needed, spec)
    try:
        for k in source_keys:
            if frame[k].null_count():
                row = int(frame[k].is_null().arg_true()[0])
                raise DataError(f"column {k!r}: missing group key at row {row + 1}; fill or drop such records first")
            if not all_declared:  # (declared keys: records of undeclared values, NaN among them, are dropped)
                distinct[k] = frame[k].unique()
                reject_nan_ids(frame[k], k, "group key", distinct[k])
        values = numeric_values(frame, spec.value_col, allow_negative=True, allow_null=False,
                                null_hint="every record needs a value; drop such records before the run "
                                          "(the guarantee then covers the cleaned dataset)")
        frame = frame.with_columns(values.cast(pl.Float64).alias(spec.value_col))
        if spec.time_col is not None:
            frame, changed = parse_time_column_deferred(frame, spec.time_col, spec.timezone, bucketed=True)
            if changed is not None:
                frame = _drop_unselected_clock_changes(frame, changed, spec)
        if spec.slot_length is not None:
            _slots(frame[spec.time_col][:0], spec.slot_length)  # a bad --slot-length is refused even if unused
        if slot_needed:
            frame = frame.with_columns(_slots(frame[spec.time_col], spec.slot_length or DEFAULT_SLOT_LENGTH))

        # Selection of one cell and/or one slot.
        if spec.cell is not None:
            col = frame[spec.cell_col]
            as_text = col if col.dtype == pl.String else col.cast(pl.String)
            frame = frame.filter(as_text == str(spec.cell))
        if spec.slot is not None:
            frame = frame.filter(pl.col(SLOT) == _slot_instant(spec, frame.schema[spec.time_col]))
        declared = declared_groups(frame.schema, keys, slot_needed, spec)
        declared_index = None  # each record's declared group
        if declared is not None and declared.keys:
            frame, declared_index = declared.select(frame)
        dropped = n_read - frame.height
        table = None if declared is None else declared.table()
        if frame.height == 0:
            if shard or declared is not None:
                return _empty_records(spec, keys, frame.select(keys), table, dropped)
            raise DataError(f"no records in the selection {_selection(spec)}; check the value(s) against the data")

        # Public value bounds: error (default) or per-record clipping (keeps every record).
        v = frame[spec.value_col]
        if v.min() < spec.lower or v.max() > spec.upper:
            if spec.out_of_range == "clip":
                frame = frame.with_columns(pl.col(spec.value_col).clip(spec.lower, spec.upper))
            else:
                bad = (v < spec.lower) | (v > spec.upper)
                first = int(bad.arg_true()[int(frame[ORDER_KEY].filter(bad).arg_min())])  # earliest input row
                where = ", ".join(f"{k}={_show(frame[k][first])}" for k in keys)
                raise OutOfBounds(spec, int(bad.sum()), int(frame[DF_ROW][first]), float(v[first]), where)
    except Exception:
        user_job.result()  # a bad user id is reported first, as the checks come in that order
        raise

    # Sort (stable: ties keep the input row order) and cut into runs and groups. Keys and user ids
    # are replaced by integer codes in their sort order, so that one or two int64 columns are
    # sorted instead of text.
    if declared_index is not None:  # the declared group index: the groups' codes in their order
        size = declared.n_groups
        key_codes = [_Codes(declared_index, size, lambda c: table.gather(c))]
        del declared_index
    else:
        key_codes = [_codes(frame[k], distinct=distinct.get(k)) for k in keys]
    user_distinct, user = user_job.result()
    del users
    if user is None:  # rows were selected: code the ids that remain
        user = _codes(frame[spec.user_col], as_text=True, distinct=user_distinct)
    elif frame.height != n_read:  # rows were dropped (outside the declared groups, clock changes): their codes too
        user.codes = user.codes[frame[DF_ROW].to_numpy()]
    ucodes, n_users = user.codes, user.size
    user.codes = None
    group = np.zeros(frame.height, dtype=np.int64) if not key_codes else None
    mixed_radix = True  # group = the key codes in mixed radix (else re-densified: not decodable)
    for i, codes in enumerate(key_codes):
        if i == 0:
            group = codes.codes  # (no zeros to multiply: fresh pages cost system time)
        else:
            if group.size and int(group.max()) >= (2**62) // max(codes.size, 1):
                group, mixed_radix = _dense_codes(pl.Series(group))[0], False  # re-densify before it could overflow
            group = group * codes.size
            group += codes.codes
        codes.codes = None  # only its size and decoder are needed from here on (memory)
    n_codes = int(group.max()) + 1 if group.size else 1
    if keys and n_codes > (2**62) // max(n_users, 1):
        group, mixed_radix = _dense_codes(pl.Series(group))[0], False  # only the combinations present
        n_codes = int(group.max()) + 1
    sort_cols = {}
    if n_codes <= (2**62) // max(n_users, 1):
        sort_cols["k"] = group * n_users
        sort_cols["k"] += ucodes
    else:
        sort_cols["g"], sort_cols["u"] = group, ucodes
    span = 1
    if spec.time_col is not None:
        offsets = _time_offsets(frame, spec.time_col, SLOT in keys and slot_needed)
        if "k" in sort_cols and offsets is not None and n_codes * n_users * offsets[1] < 2**63:
            # one int64 key (run, time within the run) sorts about twice as fast as two columns
            sort_cols["k"] *= offsets[1]
            sort_cols["k"] += offsets[0]
            span = offsets[1]
        else:
            sort_cols["t"] = frame[spec.time_col]
        del offsets
    if order_col is not None and not frame[ORDER_KEY].is_sorted():
        sort_cols["o"] = frame[ORDER_KEY]  # a shard's rows out of input order: the input row breaks ties
    n = frame.height
    values = frame[spec.value_col]
    if set(sort_cols) <= {"k", "o"} and mixed_radix:
        # The key holds (group, user, time): sort it with the values alongside (no gathers by an
        # order, which cost more than the sort) and read the groups and users back from it.
        del group, ucodes, frame  # (memory: the sort is the peak)
        ordered = pl.DataFrame({**sort_cols, "v": values}).sort(
            list(sort_cols), maintain_order=True, multithreaded=True)
        del sort_cols
        run_code = ordered["k"].to_numpy(writable=True)
        if span > 1:
            run_code //= span
        g_sorted, u_sorted = np.divmod(run_code, n_users)
        sorted_values = ordered["v"].to_numpy()
        del ordered, run_code
        order = None
    else:
        order = pl.DataFrame(sort_cols).select(
            pl.arg_sort_by(list(sort_cols), maintain_order=True, multithreaded=True)
        ).to_series().to_numpy()
        del sort_cols
        g_sorted = group[order]
        u_sorted = ucodes[order]
        sorted_values = values.to_numpy()[order]
        del group, ucodes
    g_change = np.empty(n, dtype=bool)
    g_change[0] = True
    np.not_equal(g_sorted[1:], g_sorted[:-1], out=g_change[1:])
    r_change = g_change.copy()
    r_change[1:] |= u_sorted[1:] != u_sorted[:-1]
    run_start_rows = np.flatnonzero(r_change)
    group_flags = g_change[run_start_rows]
    user_starts = np.append(run_start_rows, n).astype(np.int64)
    group_run_starts = np.flatnonzero(group_flags)
    group_starts = np.append(group_run_starts, run_start_rows.size).astype(np.int64)
    run_codes = u_sorted[run_start_rows]
    declared_pos = None  # the position of every group among the declared ones
    if not keys:
        groups = pl.DataFrame()
        declared_pos = np.zeros(group_run_starts.size, dtype=np.int64) if table is not None else None
    elif table is not None and mixed_radix:
        declared_pos = g_sorted[run_start_rows[group_run_starts]]
        groups = table.gather(declared_pos)
    elif order is None:
        groups = _decode_groups(g_sorted[run_start_rows[group_run_starts]], keys, key_codes)
    else:
        groups = frame.select(keys).gather(order[run_start_rows[group_run_starts]])
    runs_per_user = np.bincount(run_codes, minlength=n_users)
    if order is None:
        run_users = user.decode(run_codes)
    else:
        run_users = frame[spec.user_col].cast(pl.String).gather(order[run_start_rows])
    return Records(
        values=np.ascontiguousarray(sorted_values, dtype=np.float64),
        user_starts=user_starts, group_starts=group_starts, groups=groups, key_columns=keys,
        n_groups=group_run_starts.size, max_groups_per_user=int(runs_per_user.max()),
        clipped=spec.out_of_range == "clip",
        notes=_notes(spec),
        run_users=run_users,
        run_codes=run_codes,
        declared=table,
        declared_index=declared_pos,
        dropped=dropped,
    )


def _user_codes(users: pl.Series, column: str, code: bool) -> tuple[pl.Series, "_Codes | None"]:
    """(the distinct user ids as text, after the NaN check; their :class:`_Codes` if ``code``)."""
    distinct = _text(users).unique()
    reject_nan_ids(users, column, "user id", distinct if users.dtype == pl.String else None)
    return distinct, (_codes(users, as_text=True, distinct=distinct) if code else None)


def _decode_groups(group_codes: np.ndarray, keys: list[str], key_codes: list["_Codes"]) -> pl.DataFrame:
    """The key values of groups given by their codes in mixed radix (first key most significant)."""
    columns = {}
    rest = group_codes.astype(np.int64, copy=True)
    for k, codes in zip(reversed(keys), reversed(key_codes)):
        rest, own = np.divmod(rest, codes.size)
        columns[k] = codes.decode(own).alias(k)
    return pl.DataFrame([columns[k] for k in keys])


def _time_offsets(frame: pl.DataFrame, time_col: str, slot_key: bool) -> tuple[np.ndarray, int] | None:
    """(each record's time as a small non-negative integer, their span): ordered within every run
    as the times are, so that it can join the run's code in one sort key. The time minus its slot
    start when the derived slot is a group key (a run lies in one slot), else minus the earliest
    time; divided by the offsets' greatest common divisor (whole seconds in microseconds). None
    when the offsets would not fit."""
    times = frame[time_col]
    if not (times.dtype.is_temporal() or times.dtype.is_integer()) or frame.height == 0:
        return None
    t = times.to_physical().cast(pl.Int64, strict=False)
    if t.null_count():
        return None
    t = t.to_numpy()
    if slot_key:
        offsets = t - frame[SLOT].to_physical().cast(pl.Int64).to_numpy()
        del t
    else:
        low, high = int(t.min()), int(t.max())
        if high - low >= 2**62:
            return None
        offsets = t - low
    if int(offsets.min()) < 0:
        return None
    step = int(np.gcd.reduce(offsets))
    if step > 1:
        offsets //= step
    return offsets, int(offsets.max()) + 1


def _notes(spec: RecordSpec) -> list[str]:
    return [] if spec.time_col else ["no --time-col: each user's records are taken in input row order"]


def _empty_records(spec: RecordSpec, keys: list[str], key_frame: pl.DataFrame | None,
                   declared: pl.DataFrame | None = None, dropped: int = 0) -> Records:
    """No records (a shard without any in the selection, or no records in the declared groups)."""
    return Records(values=np.zeros(0), user_starts=np.zeros(1, dtype=np.int64),
                   group_starts=np.zeros(1, dtype=np.int64),
                   groups=key_frame.clear() if key_frame is not None else pl.DataFrame(),
                   key_columns=keys, n_groups=0, max_groups_per_user=0,
                   clipped=spec.out_of_range == "clip", notes=_notes(spec),
                   run_users=pl.Series([], dtype=pl.String), run_codes=np.zeros(0, dtype=np.int64),
                   declared=declared, declared_index=np.zeros(0, dtype=np.int64), dropped=dropped)


@dataclass(frozen=True)
class Declared:
    """The declared groups as a product of factors, in the canonical key order: each factor is a
    sorted table of distinct declared values of one key column (a cell fixed by ``--cell``, the
    values of ``--group-keys``, the slot grid) or of several (the rows of ``--group-keys-file``).
    Group ``i`` of :meth:`table` has the mixed-radix digits of ``i`` as its factors' positions, so a
    record's group index is computed from its keys without materialising the groups per record."""

    keys: list[str]
    factors: list[pl.DataFrame]

    @property
    def n_groups(self) -> int:
        return math.prod(f.height for f in self.factors) if self.keys else 1

    def table(self) -> pl.DataFrame:
        """Every declared group, in order (the factors' cross product: lexicographic, as sorted)."""
        if not self.keys:
            return pl.DataFrame()
        table = self.factors[0]
        for factor in self.factors[1:]:
            table = table.join(factor, how="cross", maintain_order="left_right")
        return table.select(self.keys)

    def select(self, frame: pl.DataFrame) -> tuple[pl.DataFrame, np.ndarray]:
        """(the records of ``frame`` inside the declared groups, in their order; each one's declared
        group index)."""
        index = pl.lit(0, dtype=pl.Int64)
        for factor in self.factors:
            index = index * factor.height + _position(factor, frame)
        inside = frame.with_columns(index.alias(DECLARED)).filter(pl.col(DECLARED).is_not_null())
        return inside.drop(DECLARED), inside[DECLARED].to_numpy()


DECLARED = "__declared"


def _position(factor: pl.DataFrame, frame: pl.DataFrame) -> pl.Expr:
    """The position of each record's values in ``factor`` (sorted, distinct rows), null if absent."""
    names = factor.columns
    if len(names) > 1:  # combinations of several columns: a join
        found = frame.select(names).join(factor.with_row_index("__pos"), on=names, how="left",
                                         maintain_order="left")["__pos"]
        return pl.lit(found.cast(pl.Int64))
    column, values = pl.col(names[0]), factor[names[0]]
    dtype = frame.schema[names[0]]
    if dtype == pl.String:  # an Enum of the declared values: its physical codes are the positions
        return column.cast(pl.Enum(values), strict=False).to_physical().cast(pl.Int64)
    if dtype.is_integer() or dtype.is_temporal():
        grid = values.to_physical().cast(pl.Int64).to_numpy()
        steps = np.diff(grid)
        if grid.size > 1 and (steps == steps[0]).all() and steps[0] > 0:  # a regular grid (slots): arithmetic
            offset = column.to_physical().cast(pl.Int64) - int(grid[0])
            pos = offset // int(steps[0])
            return pl.when((offset % int(steps[0]) == 0) & (pos >= 0) & (pos < grid.size)).then(pos)
    return column.replace_strict(values, pl.int_range(values.len(), eager=True, dtype=pl.Int64), default=None,
                                 return_dtype=pl.Int64)


def declared_groups(schema: pl.Schema, keys: list[str], slot_derived: bool, spec: RecordSpec) -> Declared | None:
    """The declared groups (:class:`Declared`), typed like ``schema`` (the records' columns, with
    the derived slot), in the canonical group order (the order of the runs): a cell fixed by
    ``--cell``, the other non-slot keys' declared values (``--group-keys``, or the rows of
    ``--group-keys-file``), the slot fixed by ``--slot`` or the grid ``--start``, ``--start +
    --slot-length``, ... before ``--end``. No factors when there are no keys (one group). None when
    some key is not declared (the groups are then read off the records, which only
    ``--participation public`` allows)."""
    if not keys:
        return Declared([], [])
    slot_key = SLOT in keys and slot_derived
    rest = [k for k in keys if not (k == SLOT and slot_key) and not (spec.cell is not None and k == spec.cell_col)]
    parts: dict[tuple[str, ...], pl.DataFrame] = {}
    if spec.cell is not None and spec.cell_col in keys:
        parts[(spec.cell_col,)] = _typed(pl.DataFrame({spec.cell_col: [str(spec.cell)]}), schema, "--cell")
    if rest:
        if spec.group_keys_table is not None:
            table = spec.group_keys_table
            if sorted(table.columns) != sorted(rest):
                raise UsageError(f"--group-keys-file: its columns {', '.join(table.columns) or '(none)'} must be the "
                                 f"group key columns {', '.join(rest)} (one declared group per row)")
            parts[tuple(rest)] = _distinct(_typed(table.select(rest), schema, "--group-keys-file"),
                                           "--group-keys-file")
        elif spec.group_keys is not None:
            if len(rest) > 1:
                raise UsageError(f"--group-keys lists the values of one key column, but the groups have "
                                 f"{len(rest)} ({', '.join(rest)}); give their combinations in --group-keys-file")
            parts[(rest[0],)] = _distinct(_typed(pl.DataFrame({rest[0]: list(spec.group_keys)},
                                                             schema={rest[0]: pl.String}), schema, "--group-keys"),
                                          "--group-keys")
        else:
            return None
    elif spec.group_keys is not None or spec.group_keys_table is not None:
        raise UsageError("--group-keys/--group-keys-file declare the values of a --group-by column other than the "
                         "slot, but the groups have no such key")
    if slot_key:
        like = schema[SLOT]
        if spec.slot is not None:
            if spec.start is not None or spec.end is not None:
                raise UsageError("--start/--end declare a grid of slots, but --slot selects one: give one of them")
            points = pl.Series(SLOT, [_slot_instant(spec, like)], dtype=like)
        elif spec.start is not None and spec.end is not None:
            points = slot_grid(spec, like)
        else:
            return None
        parts[(SLOT,)] = points.to_frame()
    elif spec.start is not None or spec.end is not None:
        raise UsageError("--start/--end declare the grid of time slots, but the groups have no slot key; add slot "
                         "to --group-by or drop them")
    # factors in key order; a multi-column factor whose columns are not consecutive keys becomes one
    # factor of the whole product (sorted), which the join codes as well
    order = sorted(parts, key=lambda cols: keys.index(cols[0]))
    flat = [k for cols in order for k in cols]
    if flat != keys:
        table = parts[order[0]]
        for cols in order[1:]:
            table = table.join(parts[cols], how="cross")
        return Declared(keys, [table.select(keys).sort(keys)])
    return Declared(keys, [parts[cols].sort(list(cols)) for cols in order])


def _declares_all(keys: list[str], slot_derived: bool, spec: RecordSpec) -> bool:
    """Whether :func:`declared_groups` will declare every key (before the slots are derived)."""
    slot_key = SLOT in keys and slot_derived
    rest = [k for k in keys if not (k == SLOT and slot_key) and not (spec.cell is not None and k == spec.cell_col)]
    if rest and spec.group_keys is None and spec.group_keys_table is None:
        return False
    return not slot_key or spec.slot is not None or (spec.start is not None and spec.end is not None)


def _distinct(table: pl.DataFrame, option: str) -> pl.DataFrame:
    """``table`` without duplicates (UsageError naming one: a group declared twice)."""
    if table.is_duplicated().any():
        row = table.filter(table.is_duplicated()).row(0)
        raise UsageError(f"declared groups: {row!r} is declared twice ({option})")
    return table


def slot_grid(spec: RecordSpec, like: pl.DataType) -> pl.Series:
    """The declared slots: ``--start``, then every ``--slot-length`` before ``--end`` (``--start``
    must be a slot start, as ``--slot`` must)."""
    from tsdp.io.timegrid import fixed_grid

    length = spec.slot_length or DEFAULT_SLOT_LENGTH
    start = parse_instant(spec.start, "--start", like)
    end = parse_instant(spec.end, "--end", like)
    first = _slots(pl.Series([start], dtype=like), length)[0]
    if first != start:
        raise UsageError(f"--start {spec.start!r} is not the start of a slot of length {length}; use {first}")
    points = fixed_grid(start, end, length, SLOT, like).points
    return points.cast(like).alias(SLOT)


def _typed(table: pl.DataFrame, schema: pl.Schema, option: str) -> pl.DataFrame:
    """Declared key values (text) as the input's column types; UsageError naming ``option`` and a
    value that is not one of that type."""
    out = {}
    for name in table.columns:
        column = table[name]
        dtype = schema[name]
        if column.null_count():
            raise UsageError(f"{option}: a declared value of column {name!r} is empty")
        if column.dtype == dtype:
            out[name] = column
            continue
        cast = (column.cast(pl.String) if column.dtype != pl.String else column).cast(dtype, strict=False)
        bad = cast.is_null()
        if bad.any():
            raise UsageError(f"{option}: {column.filter(bad)[0]!r} is not a value of column {name!r} ({dtype})")
        out[name] = cast
    return pl.DataFrame(out)


def _dense_codes(series: pl.Series, as_text: bool = False) -> tuple[np.ndarray, int]:
    """(int64 code of each element in the sort order of the distinct values, number of them).

    ``as_text`` orders by the values' text (user ids compare as strings, whatever their type).
    """
    if as_text and series.dtype != pl.String:
        series = series.cast(pl.String)
    uniq = series.unique().sort()
    if series.dtype == pl.String:
        # An Enum whose categories are the sorted distinct values: its physical codes are the ranks.
        codes = series.cast(pl.Enum(uniq)).to_physical()
    elif not (series.dtype.is_numeric() or series.dtype.is_temporal()):
        codes = series.replace_strict(uniq, pl.int_range(uniq.len(), eager=True, dtype=pl.Int64),
                                      return_dtype=pl.Int64)
    else:
        codes = uniq.search_sorted(series)
    return np.ascontiguousarray(codes.to_numpy(), dtype=np.int64), uniq.len()


# Above this many distinct text ids, ranks come from a hash join rather than an Enum cast, whose
# cost grows with its categories (CPU seconds at 10^7 rows: 0.17 against 0.40 at 10^4 ids, 0.25
# against 0.29 at 3 x 10^4, 0.56 against 0.48 at 6 x 10^4, 1.84 against 0.81 at 2 x 10^5).
_MANY_IDS = 2**15


@dataclass
class _Codes:
    """Integer codes of a column in the sort order of its values: ``codes`` in ``[0, size)``,
    equal values equal codes, a smaller value a smaller code; ``decode`` maps codes back to values."""

    codes: np.ndarray | None
    size: int
    decode: Callable[[np.ndarray], pl.Series]


def _text(series: pl.Series) -> pl.Series:
    return series if series.dtype == pl.String else series.cast(pl.String)


def _codes(series: pl.Series, as_text: bool = False, distinct: pl.Series | None = None) -> _Codes:
    """The :class:`_Codes` of ``series`` (``as_text``: ordered by the values' text). ``distinct``:
    its distinct values (as text if ``as_text``), if known.

    Integer and temporal columns whose distinct values lie on a short arithmetic grid (e.g. hourly
    slots) are coded by arithmetic, ``(value - lowest) // step``, which skips a search per row."""
    if as_text:
        series = _text(series)
    name, dtype = series.name, series.dtype  # (the decoders below must not hold the column)
    uniq = series.unique() if distinct is None else distinct
    if (dtype.is_temporal() or dtype.is_signed_integer()) and uniq.len() and not as_text:
        phys = uniq.to_physical().cast(pl.Int64).to_numpy()
        low, high = int(phys.min()), int(phys.max())
        step = int(np.gcd.reduce(phys - low)) or 1
        size = (high - low) // step + 1
        if high - low < 2**62 and size <= 2 * phys.size + 1024:
            codes = series.to_physical().cast(pl.Int64).to_numpy() - low
            if step > 1:
                codes //= step

            physical = series.to_physical().dtype

            def decode(c: np.ndarray) -> pl.Series:
                return pl.Series(name, c * step + low, dtype=pl.Int64).cast(physical).cast(dtype)

            return _Codes(np.ascontiguousarray(codes, dtype=np.int64), int(size), decode)
    uniq = uniq.sort()
    hashes = uniq.hash(seed=0) if dtype == pl.String and uniq.len() > _MANY_IDS else None
    if hashes is not None and hashes.n_unique() == hashes.len():
        # Many distinct ids (a shard of many users): each row's rank by a hash join on the ids'
        # hashes, exact because the distinct ids' hashes are distinct; an Enum of a million
        # categories takes several times longer.
        codes = series.hash(seed=0).replace_strict(hashes, pl.int_range(uniq.len(), eager=True, dtype=pl.Int64),
                                                   return_dtype=pl.Int64)
    elif dtype == pl.String:
        # An Enum whose categories are the sorted distinct values: its physical codes are the ranks.
        codes = series.cast(pl.Enum(uniq)).to_physical()
    elif not (dtype.is_numeric() or dtype.is_temporal()):
        codes = series.replace_strict(uniq, pl.int_range(uniq.len(), eager=True, dtype=pl.Int64),
                                      return_dtype=pl.Int64)
    else:
        codes = uniq.search_sorted(series)
    return _Codes(np.ascontiguousarray(codes.to_numpy(), dtype=np.int64), uniq.len(),
                  lambda c: uniq.gather(c).alias(name))


def group_keys(columns: list[str], spec: RecordSpec) -> tuple[list[str], bool]:
    """(the group key columns of an input with ``columns``, in their sort order; whether the
    ``slot`` key is derived from the time column rather than read)."""
    keys = _key_columns(columns, spec)
    slot_needed = spec.slot is not None or SLOT in keys and spec.slot_length is not None or (
        SLOT in keys and SLOT not in columns)
    return keys, slot_needed


def _key_columns(columns: list[str], spec: RecordSpec) -> list[str]:
    """Group key columns: the selected cell/slot, then --group-by (``cell``/``slot`` are aliases)."""
    keys: list[str] = []
    if spec.cell is not None:
        if spec.cell_col is None:
            raise UsageError(f"--cell {spec.cell!r} needs --cell-col (the column holding cell ids)")
        keys.append(spec.cell_col)
    if spec.slot is not None:
        keys.append(SLOT)
    for name in spec.group_by:
        if name == "cell" and (spec.cell_col is not None or "cell" not in columns):
            if spec.cell_col is None:
                raise UsageError("--group-by cell needs --cell-col (the column holding cell ids)")
            name = spec.cell_col
        if name in (spec.user_col, spec.value_col) or (name == spec.time_col and name is not None):
            raise UsageError(f"--group-by: {name!r} is the user, value or time column; group by cells, "
                             "slots or another key column")
        if name not in keys:
            keys.append(name)
    return keys


def _slots(times: pl.Series, length: str) -> pl.Series:
    """The start of each record's time slot (``dt.truncate``; integer times by integer division)."""
    slot = slot_of(pl.col(SLOT), length, times.dtype.is_integer())
    return times.alias(SLOT).to_frame().select(slot.alias(SLOT)).to_series()


def slot_of(times: pl.Expr, length: str, integer: bool) -> pl.Expr:
    """The slot start of ``times`` as an expression (so that an engine can derive the same slots
    lazily): ``dt.truncate``, or integer division for integer times."""
    try:
        step = parse_freq(length, integer)
    except UsageError as exc:
        raise UsageError(str(exc).replace("--freq", "--slot-length")) from None
    if integer:
        return (times // step.amount) * step.amount
    every = f"{step.amount}mo" if step.unit == "mo" else f"{step.amount}us"
    return times.dt.truncate(every)


def _drop_unselected_clock_changes(frame: pl.DataFrame, changed, spec: RecordSpec) -> pl.DataFrame:
    """``frame`` without the rows whose local time the zone skips or repeats
    (:class:`tsdp.io.timezones.ClockChanged`) when the selection excludes them under both readings
    of that time (another ``--cell``, or a ``--slot`` neither reading falls in): they would be
    dropped by the selection anyway, and an error for them would let one user's record outside the
    selection decide between an estimate and none. DataError (naming the column, value, row and
    ``--timezone``) for the first such row the selection may include, as for any other use of its
    time (the slot it belongs to, or its place in its user's time order)."""
    excluded = np.zeros(changed.rows.size, dtype=bool)
    if spec.cell is not None:
        cells = frame[spec.cell_col].gather(changed.rows)
        excluded |= ((cells if cells.dtype == pl.String else cells.cast(pl.String)) != str(spec.cell)).to_numpy()
    if spec.slot is not None:
        selected = _slot_instant(spec, frame.schema[spec.time_col])
        length = spec.slot_length or DEFAULT_SLOT_LENGTH
        excluded |= ((_slots(changed.earliest, length) != selected)
                     & (_slots(changed.latest, length) != selected)).to_numpy()
    if spec.start is not None and spec.end is not None and spec.slot is None:
        like = frame.schema[spec.time_col]
        length = spec.slot_length or DEFAULT_SLOT_LENGTH
        start, end = parse_instant(spec.start, "--start", like), parse_instant(spec.end, "--end", like)

        def outside(times: pl.Series) -> np.ndarray:
            slots = _slots(times, length)
            return ((slots < start) | (slots >= end)).to_numpy()

        excluded |= outside(changed.earliest) & outside(changed.latest)
    if spec.group_keys is not None:
        keys = [k for k in group_keys(frame.columns, spec)[0] if k != SLOT and k != (spec.cell_col if spec.cell else None)]
        if len(keys) == 1:
            values = frame[keys[0]].gather(changed.rows)
            excluded |= ~(values if values.dtype == pl.String else values.cast(pl.String)).is_in(
                list(spec.group_keys)).to_numpy()
    if not excluded.all():
        raise changed.error(int(np.flatnonzero(~excluded)[0]))
    keep = np.ones(frame.height, dtype=bool)
    keep[changed.rows] = False
    return frame.filter(pl.Series(keep))


def _slot_instant(spec: RecordSpec, like: pl.DataType):
    instant = parse_instant(spec.slot, "--slot", like)
    start = _slots(pl.Series([instant], dtype=like), spec.slot_length or DEFAULT_SLOT_LENGTH)[0]
    if start != instant:
        raise UsageError(f"--slot {spec.slot!r} is not the start of a slot of length "
                         f"{spec.slot_length or DEFAULT_SLOT_LENGTH}; use {start}")
    return instant


def _selection(spec: RecordSpec) -> str:
    parts = []
    if spec.cell is not None:
        parts.append(f"--cell {spec.cell!r}")
    if spec.slot is not None:
        parts.append(f"--slot {spec.slot!r}")
    return " ".join(parts) or "(the whole input)"

"""The record pipeline of ``tsdp mean-estimate``: one row per (user, time?, cell?, value).

:func:`load_records` reads the needed columns, checks them (missing columns, null user ids and
keys, non-numeric or non-finite values, unparseable timestamps), checks the values against the
PUBLIC bounds ``[lower, upper]`` (an error, or per-record clipping, which keeps every record and so
the public per-user counts), derives time slots, selects one cell/slot and/or groups by key
columns, and returns the records in the compressed layout of :mod:`tsdp.mean.estimation`:

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

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import numpy as np
import polars as pl

from tsdp.errors import DataError, UsageError
from tsdp.io.ids import reject_nan_ids
from tsdp.io.layouts import numeric_values, require_columns
from tsdp.io.record_groups import (DECLARED, _codes, _Codes, _declares_all, _dense_codes, Declared, _selection,
                                   _slot_instant, _slots, _text, declared_groups, group_keys)
from tsdp.io.record_spec import DEFAULT_SLOT_LENGTH, OUT_OF_RANGE, SLOT, OutOfBounds, RecordSpec
from tsdp.io.timegrid import parse_instant
from tsdp.io.timeparse import parse_time_column_deferred

DF_ROW, ORDER_KEY = "__df_row", "__order"  # a row's position in the frame read; its input row number

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


@dataclass(frozen=True)
class Coded:
    """A shard of the input whose group keys an engine has already matched to the declared groups,
    as :func:`load_records` would: its column DECLARED holds each record's index among the
    ``declared`` groups (null outside them) instead of the key columns. ``columns``: the input's
    column names. The engine has checked what the index hides: no group key is missing."""

    declared: Declared
    columns: tuple[str, ...]


def _show(value) -> str:
    return repr(value) if isinstance(value, str) else str(value)


def load_records(df: pl.DataFrame, spec: RecordSpec, order_col: str | None = None,
                 shard: bool = False, consume: bool = False, coded: Coded | None = None) -> Records:
    """Check, select, group and sort ``df`` into :class:`Records` (see the module docstring).

    ``order_col``: the input's row number of each row (a shard of a larger input): it breaks ties
    in time instead of the row order of ``df``, and errors name the input's row. ``shard``: ``df``
    holds only some of the users, so an empty selection is no error (an empty :class:`Records`).
    ``consume``: the columns of ``df`` are dropped from it once read, so that memory holding ids
    and keys is freed before the sort (the caller's ``df`` is left without columns).
    ``coded``: ``df`` is a shard of coded groups (:class:`Coded`).
    """
    if order_col is None:
        return _load_records(df, spec, None, shard, consume, coded)
    from tsdp.io.events import input_rows

    rows = df[order_col]
    try:
        return _load_records(df, spec, order_col, shard, consume, coded)
    except OutOfBounds as exc:
        raise OutOfBounds(spec, exc.count, int(rows[exc.row]), exc.value, exc.group) from None
    except DataError as exc:
        raise DataError(input_rows(str(exc), rows)) from None


def _load_records(df: pl.DataFrame, spec: RecordSpec, order_col: str | None, shard: bool,
                  consume: bool = False, coded: Coded | None = None) -> Records:
    if spec.out_of_range not in OUT_OF_RANGE:
        raise UsageError(f"--value-out-of-range must be error or clip, got {spec.out_of_range!r}")
    keys, slot_needed = group_keys(list(coded.columns) if coded else df.columns, spec)
    if spec.slot_length is not None and spec.time_col is None:
        raise UsageError("--slot-length needs --time-col (the column the slots are cut from)")
    if slot_needed and spec.time_col is None:
        raise UsageError("time slots (--slot or --group-by slot) need --time-col and --slot-length")
    if spec.timezone is not None and spec.time_col is None:
        raise UsageError("--timezone needs --time-col (the column whose timestamps it describes)")
    columns = {"--user-col": spec.user_col, "--value-col": spec.value_col, "--time-col": spec.time_col}
    if spec.cell_col is not None and not coded:
        columns["--cell-col"] = spec.cell_col
    require_columns(df, columns)
    source_keys = [k for k in keys if not (k == SLOT and slot_needed)] if not coded else []
    for k in source_keys:
        if k not in df.columns:
            raise DataError(f"--group-by: column {k!r} not found; the input has columns: {', '.join(df.columns)}")
    needed = list(dict.fromkeys(
        [spec.user_col, spec.value_col] + ([spec.time_col] if spec.time_col else []) + source_keys
        + ([DECLARED] if coded else [])))
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

        # Selection of one cell and/or one slot (coded: the declared groups are the selection).
        if spec.cell is not None and not coded:
            col = frame[spec.cell_col]
            as_text = col if col.dtype == pl.String else col.cast(pl.String)
            frame = frame.filter(as_text == str(spec.cell))
        if spec.slot is not None and not coded:
            frame = frame.filter(pl.col(SLOT) == _slot_instant(spec, frame.schema[spec.time_col]))
        declared = coded.declared if coded else declared_groups(frame.schema, keys, slot_needed, spec)
        declared_index = None  # each record's declared group
        if coded:
            if frame[DECLARED].null_count():  # (a filter copies every column: only when needed)
                frame = frame.filter(pl.col(DECLARED).is_not_null())
            declared_index = frame[DECLARED].to_numpy()
            frame = frame.drop(DECLARED)
        elif declared is not None and declared.keys:
            frame, declared_index = declared.select(frame)
        dropped = n_read - frame.height
        table = None if declared is None else declared.table()
        if frame.height == 0:
            if shard or declared is not None:
                return _empty_records(spec, keys, table if coded else frame.select(keys), table, dropped)
            raise DataError(f"no records in the selection {_selection(spec)}; check the value(s) against the data")

        # Public value bounds: error (default) or per-record clipping (keeps every record).
        v = frame[spec.value_col]
        if v.min() < spec.lower or v.max() > spec.upper:
            if spec.out_of_range == "clip":
                frame = frame.with_columns(pl.col(spec.value_col).clip(spec.lower, spec.upper))
            else:
                bad = (v < spec.lower) | (v > spec.upper)
                first = int(bad.arg_true()[int(frame[ORDER_KEY].filter(bad).arg_min())])  # earliest input row
                row = table.row(int(declared_index[first]), named=True) if coded else {k: frame[k][first] for k in keys}
                where = ", ".join(f"{k}={_show(v)}" for k, v in row.items())
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

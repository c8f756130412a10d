"""The groups of ``tsdp mean-estimate``'s records: the group key columns, the derived time slots, the
selection of one cell or slot, the declared groups (:func:`declared_groups`), and the dense codes of
ids and keys that order them (:func:`_codes`). Used by :mod:`tsdp.io.records` and by the engines'
routes, which must derive the same keys (:mod:`tsdp.engine.group_ranges`). Knows nothing about privacy.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import polars as pl

from tsdp.errors import UsageError
from tsdp.io.record_spec import DEFAULT_SLOT_LENGTH, SLOT, RecordSpec
from tsdp.io.timegrid import parse_freq, parse_instant

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
        inside = frame.with_columns(self.index(frame)).filter(pl.col(DECLARED).is_not_null())
        return inside.drop(DECLARED), inside[DECLARED].to_numpy()

    def index(self, frame: pl.DataFrame) -> pl.Expr:
        """Each row's declared group index (Int64, named DECLARED; null outside the declared groups),
        from ``frame``'s key columns."""
        index = pl.lit(0, dtype=pl.Int64)
        for factor in self.factors:
            index = index * factor.height + _position(factor, frame)
        return index.alias(DECLARED)


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

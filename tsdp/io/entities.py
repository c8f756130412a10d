"""Entity panels for ``tsdp flip``: one regular, complete series per entity and column.

The input is long: an optional entity column, a time column, one or more sensitive value columns
and optional auxiliary columns (the attacker's assumed knowledge Z) on the same rows. Without an
entity column the whole file is one entity, which also reads a wide file (one time column, series as
columns). Rows may come in any order; each entity is sorted by time, must sit on one regular grid
without gaps or repeats, and needs finite values everywhere (FLIP imputes nothing). The released
table keeps the input's rows in their order but only the entity and time columns and the released
value columns: no other input column leaves, the auxiliary ones included.

``aux_entity`` is the QWI layout of the paper's Example 3: the value series of one entity serve as
Z for every other entity (which must then cover exactly the same times); that entity's rows are
not part of the release.

Gaps (``missing="null"``, ``tsdp flip --fill-missing null``). FLIP filters a complete series, and
filling a gap from the data would put raw neighbours into the released values; nothing is imputed.
Instead each series is cut at its gaps (dates absent from the grid, and rows whose value or
auxiliary cells are empty) into stretches of consecutive dates, and every stretch is released as a
series of its own (its own estimated model, its own secret filter, its own two ends); the dates in
the gaps are written empty (rows with an empty cell) or stay absent (dates with no row).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import polars as pl

from tsdp.errors import DataError, UsageError
from tsdp.io.ids import reject_nan_ids
from tsdp.io.layouts import require_columns
from tsdp.io.timegrid import build_grid
from tsdp.io.timeparse import parse_time_column


@dataclass
class EntityPanel:
    """Sorted view of the input: rows ``order`` (a permutation) grouped by entity, then by time."""

    frame: pl.DataFrame
    entity_col: str | None
    time_col: str
    value_cols: list[str]
    aux_cols: list[str]
    order: np.ndarray
    starts: np.ndarray  # entity i occupies sorted rows starts[i]:starts[i+1]
    entities: list[Any]
    values: np.ndarray  # (rows, len(value_cols)), sorted
    aux: np.ndarray  # (rows, len(aux_cols)), sorted
    times: pl.Series  # sorted
    freq: str | None
    aux_entity: Any = None
    # the series released, as (key, entity, sorted rows): one per entity, or with missing="null" one per
    # stretch between gaps (key: the entity's label and the stretch's first and last dates)
    blocks: list[tuple[Any, Any, slice]] | None = None
    gap_rows: int = 0  # rows of a stretch too short for FLIP or with an empty cell: written empty

    @property
    def n_entities(self) -> int:
        return len(self.entities)

    def rows(self, i: int) -> slice:
        return slice(int(self.starts[i]), int(self.starts[i + 1]))

    def series(self):
        """Yield ``(entity, column, x, z)`` for every sensitive series (the aux entity excluded); with
        gaps split, ``entity`` is the stretch's key (:attr:`blocks`)."""
        aux_block = None
        if self.aux_entity is not None:
            k = self._entity_index(self.aux_entity)
            aux_block = self.values[self.rows(k)]
        for key, entity, block in self.released_blocks():
            if self.aux_entity is not None and entity == self.aux_entity:
                continue
            for j, column in enumerate(self.value_cols):
                z = aux_block[:, j:j + 1] if aux_block is not None else (self.aux[block] if self.aux_cols else None)
                yield key, column, self.values[block, j], z

    def released_blocks(self) -> list[tuple[Any, Any, slice]]:
        """(key, entity, sorted rows) of every series FLIP filters."""
        if self.blocks is not None:
            return self.blocks
        return [(entity, entity, self.rows(i)) for i, entity in enumerate(self.entities)]

    def block_rows(self, key: Any) -> slice:
        """The sorted rows of the series ``key`` (an entity, or a stretch between gaps)."""
        for found, _, block in self.released_blocks():
            if found == key:
                return block
        raise KeyError(key)

    def n_series(self) -> int:
        released = self.n_entities - (1 if self.aux_entity is not None else 0)
        return released * len(self.value_cols)

    def _entity_index(self, entity: Any) -> int:
        return self.entities.index(entity)

    def released_frame(self, released: dict[tuple[Any, str], np.ndarray], suffix: str | None = None) -> pl.DataFrame:
        """What may leave: the entity and time columns and each value column replaced by its release
        (or, with ``suffix``, the original followed by the release), in the input's row order.

        Every other input column, the auxiliary columns included, stays behind: only protected
        series are published. The auxiliary entity's rows are dropped for the same reason (its
        series was the attacker's assumed knowledge, not a release)."""
        keys = [c for c in (self.entity_col, self.time_col) if c is not None]
        columns = []
        for j, column in enumerate(self.value_cols):
            sorted_out = self.values[:, j].astype(float).copy()
            if self.blocks is not None:
                sorted_out[:] = np.nan  # rows in no released stretch (gaps, short stretches) are written empty
            for key, _, block in self.released_blocks():
                if (key, column) in released:
                    sorted_out[block] = released[(key, column)]
            out = np.empty_like(sorted_out)
            out[self.order] = sorted_out
            columns.append(pl.Series(column + (suffix or ""), out, dtype=pl.Float64, nan_to_null=True))  # withheld
        if suffix:
            frame = self.frame.select(keys + self.value_cols).with_columns(columns)
        else:
            frame = self.frame.select(keys).with_columns(columns)
        if self.aux_entity is not None:
            frame = frame.filter(pl.col(self.entity_col) != pl.lit(self.aux_entity, dtype=self.frame.schema[self.entity_col]))
        return frame


def _label(entity: Any) -> str:
    return f"entity {entity!r}" if entity is not None else "the series"


def load_entity_panel(df: pl.DataFrame, time_col: str, value_cols: list[str], entity_col: str | None = None,
                      aux_cols: list[str] | None = None, aux_entity: str | None = None,
                      freq: str | None = None, timezone: str | None = None, missing: str = "error",
                      usable=None) -> EntityPanel:
    """Check the table and sort it into an :class:`EntityPanel` (every rule raises one clear error);
    ``timezone`` is the zone of timestamps written without an offset.

    ``missing="null"`` cuts each series at its gaps into stretches (module docstring); ``usable(n)``
    says whether a stretch of n dates can be filtered (a shorter one is written empty)."""
    aux_cols = list(aux_cols or [])
    if missing not in ("error", "null"):
        raise UsageError(f"--fill-missing {missing!r}: flip takes error or null (FLIP imputes nothing)")
    if missing == "null" and aux_entity is not None:
        raise UsageError("--fill-missing null with --aux-entity: each series would be cut at its own gaps, but the "
                         "auxiliary entity's series must cover exactly the dates of every other; fill the gaps first "
                         "or give the auxiliary series as --aux-cols")
    if not value_cols:
        raise UsageError("--value-cols: name at least one sensitive column")
    if aux_cols and aux_entity is not None:
        raise UsageError("--aux-cols and --aux-entity are mutually exclusive: Z is either columns on the same "
                         "rows or another entity's series")
    if aux_entity is not None and entity_col is None:
        raise UsageError("--aux-entity needs --entity-col")
    for option, names in (("--value-cols", value_cols), ("--aux-cols", aux_cols)):
        repeated = [c for c in names if names.count(c) > 1]
        if repeated:
            raise UsageError(f"{option}: column {repeated[0]!r} is listed twice")
    both = set(value_cols) & set(aux_cols)
    if both:
        raise UsageError(f"column {sorted(both)[0]!r} is both a value and an auxiliary column; the attacker "
                         "would already know the series (LIP is undefined)")
    require_columns(df, {"--time-col": time_col, "--entity-col": entity_col})
    for option, names in (("--value-cols", value_cols), ("--aux-cols", aux_cols)):
        for name in names:
            require_columns(df, {option: name})
            if name in (time_col, entity_col):
                raise UsageError(f"{option}: {name!r} is the time or entity column")
    if df.height == 0:
        raise DataError("the input has no rows")

    work = parse_time_column(df.select([c for c in (entity_col, time_col) if c]), time_col, timezone)
    if entity_col is not None and work[entity_col].null_count():
        row = int(work[entity_col].is_null().arg_true()[0])
        raise DataError(f"column {entity_col!r}: missing entity id at row {row + 1}")
    if entity_col is not None:
        reject_nan_ids(work[entity_col], entity_col, "entity id")
    work = work.with_row_index("_row")
    sort_keys = [entity_col, time_col] if entity_col else [time_col]
    work = work.sort(sort_keys, maintain_order=True)
    order = work["_row"].to_numpy().astype(np.int64)
    times = work[time_col]

    if entity_col is not None:
        ids = work[entity_col]
        change = np.flatnonzero(ids[1:].to_numpy() != ids[:-1].to_numpy()) + 1 if ids.len() > 1 else np.array([], int)
        starts = np.concatenate(([0], change, [ids.len()])).astype(np.int64)
        entities = [ids[int(s)] for s in starts[:-1]]
    else:
        starts = np.array([0, work.height], dtype=np.int64)
        entities = [None]

    grid = _common_grid(times, time_col, freq, starts, entities)
    positions = grid.positions(times)
    steps = np.diff(positions)
    inside = np.ones(steps.size, dtype=bool)
    inside[starts[1:-1] - 1] = False  # differences across an entity boundary do not count
    repeated = np.flatnonzero(inside & (steps == 0))
    if repeated.size:
        k = int(repeated[0])
        entity = entities[int(np.searchsorted(starts, k, side="right") - 1)]
        raise DataError(f"column {time_col!r}: duplicate time {times[k]} for {_label(entity)}")
    gaps = np.flatnonzero(inside & (steps > 1))
    if gaps.size and missing == "error":
        k = int(gaps[0])
        entity = entities[int(np.searchsorted(starts, k, side="right") - 1)]
        first = grid.points[int(positions[k]) + 1] if int(positions[k]) + 1 < grid.n_steps else "?"
        raise DataError(f"column {time_col!r}: {_label(entity)} has a gap (first missing time: {first}); "
                        f"FLIP needs regular series without gaps (step {grid.freq}); --fill-missing null releases "
                        "the stretches between gaps as series of their own")

    keep = missing == "null"
    values = _matrix(df, value_cols, order, work, entity_col, time_col, "--value-cols", keep)
    aux = _matrix(df, aux_cols, order, work, entity_col, time_col, "--aux-cols", keep)
    panel = EntityPanel(df, entity_col, time_col, list(value_cols), aux_cols, order, starts, entities, values,
                        aux, times, grid.freq)
    if keep:
        panel.blocks, panel.gap_rows = _stretches(panel, positions, usable or (lambda n: n > 0))
    if aux_entity is not None:
        panel.aux_entity = _find_entity(entities, aux_entity, entity_col)
        _check_same_times(panel)
    return panel


def _common_grid(times: pl.Series, time_col: str, freq: str | None, starts: np.ndarray, entities: list[Any]):
    """The step shared by all entities. When the union of times is irregular, the error names the
    first entity whose own times are irregular (or, if each is regular alone, the union's problem)."""
    try:
        return build_grid(times, time_col, freq, fill_missing=True)
    except DataError:
        if len(entities) > 1:
            for i, entity in enumerate(entities):
                try:
                    build_grid(times[int(starts[i]):int(starts[i + 1])], time_col, freq, fill_missing=True)
                except DataError as exc:
                    raise DataError(f"{_label(entity)}: {exc}") from None
        raise


def _stretches(panel: EntityPanel, positions: np.ndarray, usable) -> tuple[list, int]:
    """The released blocks of a panel cut at its gaps: runs of consecutive grid positions whose value
    and auxiliary cells are all present, per entity; a run that ``usable`` rejects is left out.
    Returns (blocks, rows written empty); an entity in one piece keeps its own key."""
    present = np.isfinite(panel.values).all(axis=1)
    if panel.aux_cols:
        present &= np.isfinite(panel.aux).all(axis=1)
    blocks, dropped = [], int((~present).sum())
    for i, entity in enumerate(panel.entities):
        lo, hi = int(panel.starts[i]), int(panel.starts[i + 1])
        ok = present[lo:hi]
        rows = np.flatnonzero(ok)
        if not rows.size:
            continue
        # a run breaks where dates jump (an absent date) or an empty row lies between two present ones
        split = np.flatnonzero((np.diff(positions[lo:hi][rows]) > 1) | (np.diff(rows) > 1)) + 1
        for first, last in zip(np.r_[0, split], np.r_[split, rows.size]):
            a, b = lo + int(rows[first]), lo + int(rows[last - 1]) + 1
            if not usable(b - a):
                dropped += b - a
                continue
            whole = split.size == 0 and (a, b) == (lo, hi)
            blocks.append((entity if whole else _stretch_key(entity, panel.times[a], panel.times[b - 1]), entity,
                           slice(a, b)))
    return blocks, dropped


def _stretch_key(entity: Any, first, last) -> str:
    """The name of a stretch between gaps: its entity and its first and last dates (the key of its
    secret filter and of its custodian figures)."""
    return (f"{entity} " if entity is not None else "") + f"[{first} .. {last}]"


MISSING_TEXT = ("", "na", "nan", "null", "none", "n/a")


def _matrix(df, columns, order, work, entity_col, time_col, option, keep_missing: bool = False) -> np.ndarray:
    """The columns as floats in sorted order; any missing, non-numeric or non-finite cell is an
    error naming the column, the entity and the time (FLIP imputes nothing). ``keep_missing``: an
    empty cell (null, NaN or a text such as NA) is NaN instead, a gap; other cells are checked."""
    out = np.empty((df.height, len(columns)))
    for j, column in enumerate(columns):
        raw = df[column]
        text = None
        if raw.dtype == pl.String:
            text = raw.str.strip_chars()
            parsed = text.cast(pl.Float64, strict=False)
            empty = (raw.is_null() | text.str.to_lowercase().is_in(MISSING_TEXT)).to_numpy()
        elif raw.dtype.is_numeric() or raw.dtype == pl.Null:
            parsed = raw.cast(pl.Float64)
            empty = (parsed.is_null() | parsed.is_nan()).fill_null(True).to_numpy()
        else:
            raise DataError(f"{option}: column {column!r} has type {raw.dtype}; a numeric column is required")
        values = parsed.to_numpy()[order]
        bad = ~np.isfinite(values)
        if keep_missing:
            bad &= ~empty[order]
        if bad.any():
            k = int(np.flatnonzero(bad)[0])
            row = int(order[k])
            entity = work[entity_col][k] if entity_col else None
            cell = raw[row]
            if empty[row]:
                what = "a missing value" if cell is None or text is None or text[row] == "" else \
                    f"a missing value ({cell!r})"
            elif text is not None and parsed[row] is None:
                what = f"a non-numeric value {cell!r}"
            else:
                what = f"a non-finite value {values[k]}"
            hint = ("; FLIP needs complete series and imputes nothing (--fill-missing null releases the stretches "
                    "between gaps)") if empty[row] else ""
            raise DataError(f"{option}: column {column!r} has {what} for {_label(entity)} at {time_col} "
                            f"{work[time_col][k]}{hint}")
        out[:, j] = values
    return out


def _find_entity(entities: list[Any], wanted: str, entity_col: str) -> Any:
    for entity in entities:
        if str(entity) == str(wanted):
            return entity
    shown = ", ".join(repr(e) for e in entities[:10])
    raise DataError(f"--aux-entity {wanted!r}: no such value in column {entity_col!r} (entities: {shown})")


def _check_same_times(panel: EntityPanel) -> None:
    k = panel._entity_index(panel.aux_entity)
    reference = panel.times[panel.rows(k)]
    for i, entity in enumerate(panel.entities):
        if i == k:
            continue
        mine = panel.times[panel.rows(i)]
        if mine.len() != reference.len() or not (mine == reference).all():
            raise DataError(f"--aux-entity {panel.aux_entity!r}: {_label(entity)} covers {mine[0]}..{mine[-1]} "
                            f"({mine.len()} steps) but the auxiliary entity covers {reference[0]}..{reference[-1]} "
                            f"({reference.len()} steps); they must cover identical times")
    if panel.n_entities < 2:
        raise DataError(f"--aux-entity {panel.aux_entity!r}: there is no other entity to release")

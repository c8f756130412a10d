"""Series layouts: long (series id?, time, value) and wide (time + one column per series).

Loading checks the schema and the values, puts every series on one regular time grid and
returns a :class:`SeriesTable` whose frame is complete (one value per series and step). The frame
keeps the input's row order when nothing had to be filled, so a mechanism that treats cells
independently can work on the flat value column without sorting.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl

from tsdp.errors import DataError, UsageError
from tsdp.io.ids import reject_nan_ids
from tsdp.io.magnitudes import check_magnitude, check_text_magnitude
from tsdp.io.timegrid import MISSING_STEPS_HINT, TimeGrid, block_grid, build_grid
from tsdp.io.timeparse import parse_time_column

LAYOUTS = ("long", "wide", "events")


def require_columns(df: pl.DataFrame, columns: dict[str, str | None]) -> None:
    """DataError naming the option and the missing column, listing the columns that exist.

    Two options naming the same column (``--series-col count --value-col count``) is a UsageError.
    """
    seen: dict[str, str] = {}
    for option, name in columns.items():
        if name is not None and seen.setdefault(name, option) != option:
            raise UsageError(f"{seen[name]} and {option} both name column {name!r}; give each its own column")
    for option, name in columns.items():
        if name is not None and name not in df.columns:
            raise DataError(
                f"{option}: column {name!r} not found; the input has columns: {', '.join(df.columns)}"
                + _separator_hint(df.columns)
            )


def _separator_hint(names: list[str]) -> str:
    """A hint when the header was read as one column holding another separator (``time;a;b``).

    Such a file was written with a separator other than its extension's (semicolons from a
    spreadsheet in a decimal-comma locale, tabs in a ``.csv``); tsdp takes the separator from the
    extension only, so the one column is the whole header line.
    """
    if len(names) != 1:
        return ""
    for separator, label, fix in ((";", "semicolons", "convert it to commas"),
                                  ("\t", "tabs", "name it .tsv"),
                                  ("|", "vertical bars", "convert it to commas")):
        if separator in names[0]:
            return (f" (one column: the header looks separated by {label}, but tsdp reads a .csv file as "
                    f"separated by commas and a .tsv file by tabs: {fix})")
    return ""


FILL_HINT = ("fix the input, or pass --fill-missing zero to treat missing values as 0 (counts) or --fill-missing "
             "null to keep them missing (levels)")


def _integer_median_abs(column: pl.Series) -> float:
    """Median of |values| of an integer column: by counting when the values are small (counts usually
    are: one pass, no sort), else polars' median."""
    lo, hi = column.min(), column.max()
    if lo is None or column.null_count() or max(abs(int(lo)), abs(int(hi))) > 1 << 24:
        return float(column.abs().median())
    counts = np.zeros(max(abs(int(lo)), abs(int(hi))) + 1, dtype=np.int64)
    for chunk in column.get_chunks():
        counts += np.bincount(np.abs(chunk.to_numpy()), minlength=counts.size)
    cumulative = np.cumsum(counts)
    n = int(cumulative[-1])
    lower = int(np.searchsorted(cumulative, (n - 1) // 2, side="right"))  # the order statistic (n-1)//2
    upper = int(np.searchsorted(cumulative, n // 2, side="right"))
    return (lower + upper) / 2


def numeric_values(df: pl.DataFrame, column: str, allow_negative: bool, allow_null: bool,
                   null_hint: str = FILL_HINT) -> pl.Series:
    """The column as numbers after checking it is numeric, finite and (by default) non-negative.

    Integer columns keep their type (they cannot hold NaN); text is parsed as Float64. Nulls are
    returned as nulls when ``allow_null`` (they are then filled as missing steps); otherwise they
    are an error (whose message ends with ``null_hint``), as are NaN, infinities, text and
    negative values. The checks are aggregations, so no per-row mask is built unless a problem
    has to be located.
    """
    raw = df[column]
    if raw.dtype == pl.String:
        values = raw.str.strip_chars().cast(pl.Float64, strict=False)
        bad = values.is_null() & raw.is_not_null() & (raw.str.strip_chars() != "")
        if bad.any():
            row = int(bad.arg_true()[0])
            raise DataError(f"column {column!r}: non-numeric value {raw[row]!r} at row {row + 1}")
        check_text_magnitude(raw, values, column)  # digits beyond 2**53 that the float reading rounded
    elif raw.dtype.is_integer() or raw.dtype.is_float():
        values = raw
    elif raw.dtype.is_numeric() or raw.dtype == pl.Null:
        values = raw.cast(pl.Float64)
    else:
        raise DataError(f"column {column!r} has type {raw.dtype}; a numeric column is required")
    if values.null_count() and not allow_null:
        row = int(values.is_null().arg_true()[0])
        raise DataError(f"column {column!r}: missing value at row {row + 1}; {null_hint}")
    if values.dtype.is_float() and (values.is_nan().any() or values.is_infinite().any()):
        row = int((values.is_nan() | values.is_infinite()).arg_true()[0])
        raise DataError(f"column {column!r}: non-finite value {values[row]} at row {row + 1}")
    values = check_magnitude(values, column)
    if not allow_negative and values.len() > values.null_count() and values.min() < 0:
        row = int((values < 0).fill_null(False).arg_true()[0])
        raise DataError(
            f"column {column!r}: negative value {values[row]:g} at row {row + 1}; counts must be "
            ">= 0 (pass --allow-negative for series that may be negative)"
        )
    return values


@dataclass
class SeriesTable:
    """A complete panel: ``frame`` holds every (series, step) exactly once."""

    frame: pl.DataFrame
    layout: str
    time_col: str
    value_cols: list[str]
    series_col: str | None
    series_names: list[str]
    grid: TimeGrid
    filled_cells: int = 0
    filled_mask: np.ndarray | None = None  # the filled cells, in :meth:`values_flat` order (None: none)

    @property
    def n_series(self) -> int:
        return len(self.series_names)

    @property
    def n_steps(self) -> int:
        return self.grid.n_steps

    def values_flat(self) -> np.ndarray:
        """All cell values as one numeric array (read-only, possibly integer), in the frame's order."""
        if self.layout == "long":
            return self.frame[self.value_cols[0]].to_numpy()
        return self.frame.select(self.value_cols).to_numpy().ravel()

    def value_chunks(self) -> list[np.ndarray]:
        """The values of :meth:`values_flat` as the column's own chunks (zero-copy views)."""
        if self.layout == "long":
            return [c.to_numpy() for c in self.frame[self.value_cols[0]].get_chunks()]
        return [self.values_flat()]

    def with_values_flat(self, values: np.ndarray) -> pl.DataFrame:
        """The frame with its values replaced by ``values`` (same order as :meth:`values_flat`)."""
        if self.layout == "long":
            return self.frame.with_columns(pl.Series(self.value_cols[0], values, dtype=pl.Float64))
        matrix = values.reshape(self.frame.height, len(self.value_cols))
        return self.frame.with_columns(
            [pl.Series(name, matrix[:, j]) for j, name in enumerate(self.value_cols)]
        )

    def median_abs(self, target: str = "cell") -> float:
        """Median absolute value of the cells (``target="cell"``) or of the series' sums (``"sum"``),
        computed by polars on the frame without building the (n_series, n_steps) matrix (a panel is
        complete, so its cells are the frame's values)."""
        if target not in ("cell", "sum"):
            raise ValueError(f"target must be 'cell' or 'sum', got {target!r}")
        values = [pl.col(c).cast(pl.Float64) for c in self.value_cols]
        if target == "cell":
            column = self.frame[self.value_cols[0]] if self.layout == "long" else None
            if column is not None and column.dtype.is_integer():
                return _integer_median_abs(column)
            if column is not None:
                return float(column.abs().median())
            return float(np.median(np.abs(self.values_flat())))
        if self.layout == "wide":  # one column per series
            sums = self.frame.select([v.sum() for v in values]).row(0)
        elif self.series_col is None:
            sums = self.frame.select(values[0].sum()).row(0)
        else:
            sums = self.frame.group_by(self.series_col).agg(values[0].sum())[self.value_cols[0]].to_list()
        return float(np.median(np.abs(np.asarray(sums, dtype=np.float64))))

    def values_matrix(self) -> np.ndarray:
        """Values as an (n_series, n_steps) array in grid order."""
        return self.flat_to_matrix(self.values_flat())

    def holds_whole_numbers(self) -> bool:
        """True when every value is a whole number: integer columns by their type, float columns by
        their values (an aggregation: no per-row output)."""
        floats = [c for c in self.value_cols if not self.frame.schema[c].is_integer()]
        if not floats:
            return True
        return bool(self.frame.select(pl.all_horizontal([(pl.col(c) == pl.col(c).round(0)).all()
                                                          for c in floats])).item())

    def observed_matrix(self) -> np.ndarray:
        """(n_series, n_steps) booleans: True where the input gave the cell's value, False where
        ``--fill-missing zero`` filled it (its true value is unknown)."""
        if self.filled_mask is None:
            return np.ones((self.n_series, self.n_steps), dtype=bool)
        return self.flat_to_matrix(self.filled_mask.astype(np.float64)) == 0.0

    def flat_to_matrix(self, flat: np.ndarray) -> np.ndarray:
        """Arrange values given in :meth:`values_flat` order as an (n_series, n_steps) array."""
        rows, cols = self._cell_index()
        out = np.empty((self.n_series, self.n_steps))
        if self.layout == "wide":
            out[:, cols] = np.asarray(flat).reshape(self.frame.height, len(self.value_cols)).T
        else:
            out[rows, cols] = flat
        return out

    def with_values_matrix(self, matrix: np.ndarray) -> pl.DataFrame:
        rows, cols = self._cell_index()
        if self.layout == "wide":
            return self.frame.with_columns(
                [pl.Series(name, matrix[j, cols]) for j, name in enumerate(self.value_cols)]
            )
        return self.with_values_flat(matrix[rows, cols])

    def _cell_index(self) -> tuple[np.ndarray, np.ndarray]:
        cols = self.grid.positions(self.frame[self.time_col])
        if self.layout == "wide" or self.series_col is None:
            return np.zeros(len(cols), dtype=np.int64), cols
        lookup = pl.DataFrame({"_k": self.series_names, "_i": np.arange(self.n_series)},
                              schema_overrides={"_k": self.frame.schema[self.series_col]})
        rows = self.frame.select(pl.col(self.series_col).alias("_k")).join(
            lookup, on="_k", how="left", maintain_order="left")["_i"].to_numpy()
        return rows, cols


def load_long(
    df: pl.DataFrame,
    time_col: str,
    value_col: str,
    series_col: str | None = None,
    freq: str | None = None,
    fill_missing: bool = False,
    allow_negative: bool = False,
    null_hint: str = FILL_HINT,
    timezone: str | None = None,
    grid: TimeGrid | None = None,
) -> SeriesTable:
    """Check and complete a long-layout table (one row per series id, time, value); ``timezone``
    is the zone of timestamps written without an offset (:func:`parse_time_column`).

    ``grid``: the grid of the whole input when ``df`` holds only some of its series (a chunk of a
    streamed release); otherwise it is built from ``df``'s times."""
    require_columns(df, {"--time-col": time_col, "--value-col": value_col, "--series-col": series_col})
    df = df.select([c for c in (series_col, time_col, value_col) if c is not None])
    if series_col is not None and df[series_col].null_count():
        row = int(df[series_col].is_null().arg_true()[0])
        raise DataError(f"column {series_col!r}: missing series id at row {row + 1}")
    if series_col is not None:
        reject_nan_ids(df[series_col], series_col, "series id")
    df = parse_time_column(df, time_col, timezone)
    df = df.with_columns(numeric_values(df, value_col, allow_negative, allow_null=fill_missing, null_hint=null_hint))
    if not df[value_col].null_count():
        fast = _sorted_complete_panel(df, series_col, time_col, freq)
        if fast is not None and (grid is None or fast[0].points.equals(grid.points)):
            return SeriesTable(df, "long", time_col, [value_col], series_col, fast[1] or [value_col],
                               grid or fast[0])
    grid = grid or build_grid(df[time_col], time_col, freq, fill_missing)
    keys = [series_col] if series_col else []
    if series_col is None:
        names = [value_col]
        if df[time_col].n_unique() != df.height:
            _raise_duplicate(df, keys, time_col)
        complete = df.height == grid.n_steps
    else:
        counts = df.group_by(series_col).agg(pl.len().alias("n"), pl.col(time_col).n_unique().alias("nu"))
        if (counts["n"] != counts["nu"]).any():
            _raise_duplicate(df, keys, time_col)
        names = counts[series_col].sort().to_list()
        short = counts.filter(pl.col("nu") < grid.n_steps)
        complete = short.height == 0
        if not complete and not fill_missing:
            first = short.sort(series_col).row(0)
            present = df.filter(pl.col(series_col) == first[0])[time_col]
            raise DataError(
                f"column {time_col!r}: series {first[0]!r} has {grid.n_steps - first[2]} missing "
                f"step(s) (first missing: {_first_missing(grid, present)}); {MISSING_STEPS_HINT}"
            )
    nulls = df[value_col].null_count()
    if complete and not nulls:
        return SeriesTable(df, "long", time_col, [value_col], series_col, names, grid)
    full = pl.DataFrame({time_col: grid.points})
    if series_col is not None:
        full = pl.DataFrame({series_col: pl.Series(names, dtype=df.schema[series_col])}).join(full, how="cross")
    filled = full.join(df, on=keys + [time_col], how="left", maintain_order="left")
    mask = filled[value_col].is_null().to_numpy()
    filled = filled.with_columns(pl.col(value_col).fill_null(0.0))
    return SeriesTable(filled, "long", time_col, [value_col], series_col, names, grid, int(mask.sum()), mask)


def load_wide(
    df: pl.DataFrame,
    time_col: str,
    series_cols: list[str] | None = None,
    freq: str | None = None,
    fill_missing: bool = False,
    allow_negative: bool = False,
    null_hint: str = FILL_HINT,
    timezone: str | None = None,
) -> SeriesTable:
    """Check and complete a wide-layout table (time column + one column per series)."""
    require_columns(df, {"--time-col": time_col})
    if series_cols:
        for c in series_cols:
            require_columns(df, {"--series-cols": c})
    else:
        series_cols = [c for c in df.columns if c != time_col]
        if not series_cols:
            raise DataError(f"the input has no series columns besides the time column {time_col!r}")
    if time_col in series_cols:
        raise UsageError(f"--series-cols: the time column {time_col!r} cannot also be a series")
    repeated = [c for c in series_cols if series_cols.count(c) > 1]
    if repeated:
        raise UsageError(f"--series-cols: column {repeated[0]!r} is listed twice")
    df = parse_time_column(df.select([time_col] + series_cols), time_col, timezone)
    df = df.with_columns([numeric_values(df, c, allow_negative, fill_missing, null_hint) for c in series_cols])
    if df[time_col].n_unique() != df.height:
        _raise_duplicate(df, [], time_col)
    grid = build_grid(df[time_col], time_col, freq, fill_missing)
    null_cells = int(sum(df[c].null_count() for c in series_cols))
    if df.height == grid.n_steps and not null_cells:
        return SeriesTable(df, "wide", time_col, series_cols, None, series_cols, grid)
    filled = pl.DataFrame({time_col: grid.points}).join(df, on=time_col, how="left", maintain_order="left")
    mask = np.column_stack([filled[c].is_null().to_numpy() for c in series_cols]).ravel()
    filled = filled.with_columns([pl.col(c).fill_null(0.0) for c in series_cols])
    return SeriesTable(filled, "wide", time_col, series_cols, None, series_cols, grid, int(mask.sum()), mask)


def _sorted_complete_panel(df, series_col, time_col, freq):
    """Fast path for the canonical long layout: sorted by series (ascending) and then time, with
    every series exactly on one regular grid. Returns ``(grid, series names)``, or ``None`` for any
    other table, which then goes through the general checks (any row order, gaps, duplicates).

    With the series column sorted, a block whose first and last ids agree holds one id only, and
    strictly increasing block ids mean that no series appears in two blocks.
    """
    grid = block_grid(df[time_col], freq)
    if grid is None:
        return None
    if series_col is None:
        return (grid, None) if df.height == grid.n_steps else None
    ids = df[series_col]
    if not ids.is_sorted():
        return None
    firsts = ids.gather_every(grid.n_steps)
    lasts = ids.gather_every(grid.n_steps, offset=grid.n_steps - 1)
    if not (firsts == lasts).all() or firsts.n_unique() != firsts.len():
        return None
    return grid, firsts.to_list()


def _raise_duplicate(df: pl.DataFrame, keys: list[str], time_col: str) -> None:
    """DataError naming the first repeated (series, time); only called once a repeat is known."""
    dup = df.select(pl.struct(keys + [time_col]).is_duplicated()).to_series()
    row = int(dup.arg_true()[0])
    where = f" for series {df[keys[0]][row]!r}" if keys else ""
    dtype = df.schema[time_col]
    hint = ("; if these are local clock times, the clocks going back repeat an hour: write the times with "
            "UTC offsets" if isinstance(dtype, pl.Datetime) and dtype.time_zone is None else "")
    raise DataError(f"column {time_col!r}: duplicate timestamp {df[time_col][row]}{where} (row {row + 1}){hint}")


def _first_missing(grid: TimeGrid, present: pl.Series):
    mask = np.ones(grid.n_steps, dtype=bool)
    mask[grid.positions(present)] = False
    return grid.points[int(np.flatnonzero(mask)[0])]

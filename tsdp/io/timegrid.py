"""Regular time grids: parse time columns, infer or check the step, find gaps.

A released series lives on a regular grid ``start, start + step, ...``. The step comes from
``--freq`` or is inferred from the data; missing steps are an error unless the caller fills them.
Fixed steps (``30s``, ``15m``, ``1h``, ``1d``, ``1w``) are checked with integer arithmetic on the
physical representation; calendar steps (``1mo``, ``1q``, ``1y``) by month arithmetic.
Integer time columns use integer steps.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
import polars as pl

from tsdp.errors import DataError, NumericalError, UsageError
from tsdp.io.magnitudes import int64_times

_UNIT_ALIASES = {
    "ns": "ns", "us": "us", "ms": "ms", "s": "s", "sec": "s", "second": "s", "seconds": "s",
    "m": "m", "min": "m", "minute": "m", "minutes": "m", "t": "m",
    "h": "h", "hour": "h", "hours": "h", "d": "d", "day": "d", "days": "d",
    "w": "w", "week": "w", "weeks": "w", "mo": "mo", "month": "mo", "months": "mo",
    "q": "q", "quarter": "q", "quarters": "q", "y": "y", "year": "y", "years": "y",
}
_FIXED_US = {"ns": 1e-3, "us": 1, "ms": 1_000, "s": 1_000_000, "m": 60_000_000,
             "h": 3_600_000_000, "d": 86_400_000_000, "w": 604_800_000_000}
_MONTHS = {"mo": 1, "q": 3, "y": 12}
_PHYSICAL_US = {"ns": 1e-3, "us": 1, "ms": 1_000}
MAX_STEPS = 10_000_000  # longer grids are refused (exit 5) instead of exhausting memory


@dataclass(frozen=True)
class Step:
    """A grid step: ``amount`` of ``unit`` (``us`` for fixed steps, ``mo`` for calendar, ``int``)."""

    amount: int
    unit: str

    @property
    def label(self) -> str:
        if self.unit == "int":
            return str(self.amount)
        if self.unit == "mo":
            if self.amount % 12 == 0:
                return f"{self.amount // 12}y"
            if self.amount % 3 == 0:
                return f"{self.amount // 3}q"
            return f"{self.amount}mo"
        for unit in ("w", "d", "h", "m", "s", "ms"):
            size = _FIXED_US[unit]
            if self.amount % size == 0:
                return f"{self.amount // size}{unit}"
        return f"{self.amount}us"


def parse_freq(freq: str, integer_time: bool) -> Step:
    """Parse ``--freq`` (``15min``, ``1h``, ``1d``, ``1mo``, ``1q`` ... or an integer step)."""
    text = str(freq).strip().lower()
    if integer_time:
        if re.fullmatch(r"\d+", text) and int(text) > 0:
            return Step(int(text), "int")
        raise UsageError(f"--freq must be a positive integer for an integer time column, got {freq!r}")
    match = re.fullmatch(r"(\d*)\s*([a-z]+)", text)
    unit = _UNIT_ALIASES.get(match.group(2)) if match else None
    amount = int(match.group(1) or 1) if match else 0
    if unit is None or amount <= 0:
        raise UsageError(
            f"--freq: cannot read {freq!r}; use a number and a unit such as 15min, 1h, 1d, 1w, 1mo, 1q, 1y"
        )
    if unit in _MONTHS:
        return Step(amount * _MONTHS[unit], "mo")
    us = amount * _FIXED_US[unit]
    if us != int(us) or us <= 0:
        raise UsageError(f"--freq {freq!r} is finer than a microsecond")
    return Step(int(us), "us")


def parse_time_column(df: pl.DataFrame, column: str) -> pl.DataFrame:
    """Return ``df`` with ``column`` as Datetime, Date or Int64; DataError if unparseable."""
    dtype = df.schema[column]
    if dtype.is_integer():
        out = df.with_columns(int64_times(df[column], column))
    elif dtype == pl.Date or isinstance(dtype, pl.Datetime):
        out = df
    elif dtype == pl.String:
        parsed = df[column].str.strip_chars()
        # a value longer than YYYY-MM-DD is no date: skip the pass that would try every value as one
        longest = parsed.str.len_bytes().max()
        as_date = parsed.str.to_date(strict=False, format="%Y-%m-%d") if (longest or 0) <= 10 else None
        if as_date is not None and as_date.null_count() == parsed.null_count():
            converted = as_date
        else:
            converted = _to_datetime(parsed)
        bad = converted.is_null() & parsed.is_not_null()
        if bad.any():
            row = int(bad.arg_true()[0])
            raise DataError(
                f"column {column!r}: cannot parse timestamp {df[column][row]!r} at row {row + 1}; "
                "use ISO 8601 such as 2024-01-31 or 2024-01-31 13:00:00"
            )
        out = df.with_columns(converted.alias(column))
    else:
        raise DataError(f"column {column!r} has type {dtype}, which is not a time or integer column")
    nulls = out[column].is_null()
    if nulls.any():
        raise DataError(f"column {column!r}: missing timestamp at row {int(nulls.arg_true()[0]) + 1}")
    return out


ISO_DATETIME_FORMATS = (  # whole seconds first: parsing them without %.f is several times faster
    "%Y-%m-%d %H:%M:%S", "%Y-%m-%dT%H:%M:%S", "%Y-%m-%d %H:%M:%S%.f", "%Y-%m-%dT%H:%M:%S%.f",
    "%Y-%m-%d %H:%M", "%Y-%m-%dT%H:%M", "%Y-%m-%d",
)


def _to_datetime(texts: pl.Series) -> pl.Series:
    """Parse strings as ISO 8601 datetimes (each value in any ISO layout), null where unparseable.

    Only ISO layouts are accepted: a guessed format could read 01/02/2024 as either day first or
    month first. The ISO layouts cannot be confused with one another, so they are combined.
    """
    # One layout at a time, each only on the values still unparsed: a column in one layout (the
    # usual case) costs one pass.
    result = texts.str.to_datetime(format=ISO_DATETIME_FORMATS[0], strict=False, time_unit="us")
    for fmt in ISO_DATETIME_FORMATS[1:]:
        missing = result.is_null() & texts.is_not_null()
        if not missing.any():
            break
        retry = texts.filter(missing).str.to_datetime(format=fmt, strict=False, time_unit="us")
        result = result.scatter(missing.arg_true(), retry)
    return result.alias(texts.name)


@dataclass(frozen=True)
class TimeGrid:
    """The regular grid a panel is released on."""

    points: pl.Series
    step: Step | None

    @property
    def n_steps(self) -> int:
        return self.points.len()

    @property
    def freq(self) -> str | None:
        return self.step.label if self.step else None

    def positions(self, times: pl.Series) -> np.ndarray:
        """Index of each time on the grid (times must lie on it)."""
        if self.step is None:
            return np.zeros(times.len(), dtype=np.int64)
        if self.step.unit == "mo":
            return (_month_index(times) - _month_index(self.points[:1])[0]) // self.step.amount
        start = _physical_us(self.points[:1])[0]
        return ((_physical_us(times) - start) // self.step.amount).astype(np.int64)


def _physical_us(times: pl.Series) -> np.ndarray:
    """Times as int64 microseconds (dates as days), integers as they are."""
    dtype = times.dtype
    phys = times.to_physical().to_numpy().astype(np.int64)
    if dtype == pl.Date:
        return phys * _FIXED_US["d"]
    if isinstance(dtype, pl.Datetime):
        factor = _PHYSICAL_US[dtype.time_unit]
        return phys // 1000 if factor < 1 else phys * int(factor)
    return phys


def _month_index(times: pl.Series) -> np.ndarray:
    return (times.dt.year().cast(pl.Int64) * 12 + times.dt.month().cast(pl.Int64) - 1).to_numpy()


def _within_month_offset(times: pl.Series) -> np.ndarray:
    """Microseconds since the start of the month: equal for all points of a monthly grid."""
    starts = times.dt.truncate("1mo")  # midnight of the 1st (dt.month_start keeps the time of day)
    return _physical_us(times) - _physical_us(starts)


def _fmt(value) -> str:
    return str(value)


def build_grid(times: pl.Series, column: str, freq: str | None, fill_missing: bool) -> TimeGrid:
    """Infer or check the regular grid spanned by ``times`` (any order, duplicates allowed).

    Raises DataError for times off the grid and, unless ``fill_missing``, for missing steps.
    """
    integer_time = times.dtype.is_integer()
    uniq = times.unique().sort()
    if uniq.len() == 0:
        raise DataError(f"column {column!r}: the input has no rows")
    step = parse_freq(freq, integer_time) if freq else _infer_step(uniq, column, integer_time)
    if step is None:
        return TimeGrid(uniq, None)
    if step.unit == "mo":
        offsets = _within_month_offset(uniq)
        months = _month_index(uniq)
        off = np.flatnonzero((offsets != offsets[0]) | ((months - months[0]) % step.amount != 0))
        n_steps = int((months[-1] - months[0]) // step.amount) + 1
    else:
        phys = _physical_us(uniq)
        off = np.flatnonzero((phys - phys[0]) % step.amount != 0)
        n_steps = int((phys[-1] - phys[0]) // step.amount) + 1
    if off.size:
        bad = uniq[int(off[0])]
        raise DataError(
            f"column {column!r}: time {_fmt(bad)} is not on the grid with step {step.label} starting at "
            f"{_fmt(uniq[0])}; pass --freq with the right step"
        )
    grid = TimeGrid(_grid_points(uniq[0], uniq[-1], step, times.dtype), step)
    if grid.n_steps != n_steps:  # pragma: no cover - guards the two grid constructions agreeing
        raise DataError(f"column {column!r}: inconsistent grid construction for step {step.label}")
    missing = n_steps - uniq.len()
    if missing and not fill_missing:
        present = np.zeros(n_steps, dtype=bool)
        present[grid.positions(uniq)] = True
        first_gap = grid.points[int(np.flatnonzero(~present)[0])]
        raise DataError(
            f"column {column!r}: {missing} missing step(s) on the grid with step {step.label} "
            f"(first missing: {_fmt(first_gap)}); pass --fill-missing zero to fill them with 0"
        )
    return grid


def _grid_points(start, end, step: Step, dtype) -> pl.Series:
    if dtype == pl.Date and step.unit == "us" and step.amount % _FIXED_US["d"]:
        raise UsageError(f"--freq {step.label} is finer than a day, but the time column holds dates")
    n_steps = _count_steps(start, end, step)
    if n_steps > MAX_STEPS:
        raise NumericalError(
            f"the time grid from {start} to {end} with --freq {step.label} would have {n_steps:,} "
            f"steps, more than {MAX_STEPS:,}; use a coarser --freq or a shorter time range"
        )
    if step.unit == "int":
        return pl.Series("time", np.arange(start, end + 1, step.amount, dtype=np.int64))
    interval = f"{step.amount}mo" if step.unit == "mo" else f"{step.amount}us"
    if dtype == pl.Date:
        if step.unit == "us":
            interval = f"{step.amount // _FIXED_US['d']}d"
        return pl.date_range(start, end, interval=interval, eager=True)
    return pl.datetime_range(start, end, interval=interval, time_unit=dtype.time_unit,
                             time_zone=dtype.time_zone, eager=True)


def _count_steps(start, end, step: Step) -> int:
    """Points of the grid ``start, start + step, ...`` up to ``end`` (inclusive), by arithmetic."""
    if step.unit == "int":
        return (end - start) // step.amount + 1
    bounds = pl.Series([start, end])
    if step.unit == "mo":
        months = _month_index(bounds)
        return int(months[1] - months[0]) // step.amount + 1
    phys = _physical_us(bounds)
    return int(phys[1] - phys[0]) // step.amount + 1


def _infer_step(uniq: pl.Series, column: str, integer_time: bool) -> Step | None:
    if uniq.len() == 1:
        return None
    phys = _physical_us(uniq)
    diffs = np.diff(phys)
    smallest = int(diffs.min())
    if np.all(diffs % smallest == 0):
        return Step(smallest, "int" if integer_time else "us")
    if not integer_time:
        months = _month_index(uniq)
        offsets = _within_month_offset(uniq)
        month_diffs = np.diff(months)
        if np.all(offsets == offsets[0]) and month_diffs.min() > 0:
            m = int(month_diffs.min())
            if np.all(month_diffs % m == 0):
                return Step(m, "mo")
    raise DataError(
        f"column {column!r}: irregular time steps: {_fmt(uniq[_first_off_grid(uniq, phys, integer_time)])} is "
        "off the grid that the other timestamps follow; fix it or pass --freq with the intended step"
    )


def _first_off_grid(uniq: pl.Series, phys: np.ndarray, integer_time: bool) -> int:
    """Index of the first time off the grid most timestamps follow: either a fixed step (the most
    common difference, in the most common phase) or, for dates, the same point of every month."""
    values, counts = np.unique(np.diff(phys), return_counts=True)
    step = int(values[np.argmax(counts)])
    phases = phys % step
    values, counts = np.unique(phases, return_counts=True)
    off_fixed = phases != values[np.argmax(counts)]
    candidates = [off_fixed]
    if not integer_time:
        offsets = _within_month_offset(uniq)
        values, counts = np.unique(offsets, return_counts=True)
        candidates.append(offsets != values[np.argmax(counts)])
    best = min((c for c in candidates if c.any()), key=lambda c: int(c.sum()), default=off_fixed)
    return int(np.flatnonzero(best)[0]) if best.any() else 1


def parse_instant(text: str, option: str, like: pl.DataType):
    """Parse ``--start``/``--end`` into a value comparable with a time column of type ``like``."""
    if like.is_integer():
        try:
            return int(text)
        except ValueError:
            raise UsageError(f"{option} must be an integer for an integer time column, got {text!r}") from None
    parsed = _to_datetime(pl.Series([str(text).strip()]))
    if parsed.is_null().any():
        raise UsageError(f"{option}: cannot parse {text!r}; use ISO 8601 such as 2024-03-04 or 2024-03-04 06:00:00")
    if like == pl.Date:
        return parsed.dt.date()[0]
    return parsed.cast(like)[0]


def fixed_grid(start, end, freq: str, column: str, like: pl.DataType) -> TimeGrid:
    """The public grid ``start, start + freq, ...`` of all points strictly before ``end``."""
    step = parse_freq(freq, like.is_integer())
    if not end > start:
        raise UsageError(f"--end ({end}) must be after --start ({start})")
    if step.unit == "mo":
        first = pl.Series([start])
        if _within_month_offset(first)[0] != 0:
            raise UsageError(f"--start {start} must be the first instant of a month for --freq {freq}")
    points = _grid_points(start, end, step, like)
    points = points.filter(points < end)
    return TimeGrid(points.alias(column), step)


def block_grid(times: pl.Series, freq: str | None) -> TimeGrid | None:
    """Fast check of the canonical layout: ``times`` is one regular grid repeated block after block.

    The grid runs from the smallest to the largest time with the step of ``freq`` (or the first
    difference). Returns it when every block of ``n_steps`` consecutive rows is exactly
    ``start, start + step, ..., end``; ``None`` when the rows are in any other form, so that the
    caller falls back to the general checks. Only fixed steps are tried here.
    """
    n = times.len()
    if n < 2:
        return None
    integer_time = times.dtype.is_integer()
    phys = times.to_physical()
    if freq:
        step = parse_freq(freq, integer_time)
        if step.unit == "mo":
            return None
    else:
        first = _physical_us(times[:2])
        step = Step(int(first[1] - first[0]), "int" if integer_time else "us")
        if step.amount <= 0:
            return None
    native = _native_amount(step, times.dtype)
    if native is None:
        return None
    start, end = phys.min(), phys.max()
    if (end - start) % native:
        return None
    block = (end - start) // native + 1
    if n % block or block < 2 or block > MAX_STEPS:
        return None
    # Every block must begin at start and finish at end. The diffs across block boundaries are then
    # start - end < 0, never the step, so "all other diffs equal the step" is the same as
    # "exactly n - n_blocks diffs equal the step".
    if not ((phys.gather_every(block) == start).all()
            and (phys.gather_every(block, offset=block - 1) == end).all()):
        return None
    if _count_diffs_equal(phys, native) != n - n // block:
        return None
    return TimeGrid(_grid_points(times.min(), times.max(), step, times.dtype), step)


def _count_diffs_equal(values: pl.Series, amount: int) -> int:
    """How many consecutive differences of ``values`` equal ``amount`` (chunk by chunk, no copy)."""
    count, previous = 0, None
    for chunk in values.get_chunks():
        arr = chunk.to_numpy()
        if not arr.size:
            continue
        count += int(np.count_nonzero(np.diff(arr) == amount))
        if previous is not None and arr[0] - previous == amount:
            count += 1
        previous = arr[-1]
    return count


def _native_amount(step: Step, dtype: pl.DataType) -> int | None:
    """The step in the column's own physical unit, or ``None`` if it is not a whole number of them."""
    if step.unit == "int":
        return step.amount
    per_unit = _FIXED_US["d"] if dtype == pl.Date else _PHYSICAL_US[dtype.time_unit]
    native = step.amount / per_unit
    return int(native) if native == int(native) and native > 0 else None


def following_points(grid: TimeGrid, count: int) -> pl.Series:
    """The ``count`` grid points after the grid's last point (e.g. the dates a forecast is for)."""
    if grid.step is None:
        raise DataError("a single time point has no step to continue; pass --freq")
    last = grid.points[-1]
    step = grid.step
    dtype = grid.points.dtype
    if step.unit == "int":
        return pl.Series(grid.points.name, last + step.amount * np.arange(1, count + 1, dtype=np.int64))
    offsets = [f"{step.amount * k}mo" if step.unit == "mo" else f"{step.amount * k}us" for k in range(1, count + 1)]
    frame = pl.DataFrame({"t": [last] * count, "o": offsets}, schema={"t": dtype, "o": pl.String})
    if dtype == pl.Date and step.unit == "us":
        frame = frame.with_columns(pl.col("t").cast(pl.Datetime("us")))
        return frame.select(pl.col("t").dt.offset_by(pl.col("o")).cast(pl.Date)).to_series().alias(grid.points.name)
    return frame.select(pl.col("t").dt.offset_by(pl.col("o"))).to_series().alias(grid.points.name)

"""Regular time grids: parse time columns, infer or check the step, find gaps.

A released series lives on a regular grid ``start, start + step, ...``. The step comes from
``--freq`` or is inferred from the data; missing steps are an error unless the caller fills them.
Fixed steps (``30s``, ``15m``, ``1h``, ``1d``, ``1w``) are checked with integer arithmetic on the
physical representation; calendar steps (``1mo``, ``1q``, ``1y``) by month arithmetic.
Integer time columns use integer steps.

Time zones (:mod:`tsdp.io.timezones` says how a column gets one). Zone-aware times are instants
(their physical value is UTC), so on a zone-aware column:

* a step shorter than a day (``1h``, ``15min``) is elapsed time: the grid is built and bucketed on
  UTC instants, so a day on which the clocks change has 23 or 25 hourly points and no hour is
  missing or repeated;
* a step of whole days (``1d``, ``7d``, ``1w``; ``24h`` counts as ``1d``) is calendar days of the
  column's zone: points and buckets follow local midnight (or the start's local clock time), so
  a day is 23 or 25 hours long across a clock change;
* months, quarters and years are calendar months of the zone, as for zone-less times.

Zone-less times are computed as they are written (no clock changes exist for them).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl

from tsdp.errors import DataError, NumericalError, UsageError
from tsdp.io.magnitudes import INT64_MAX
from tsdp.io.timeparse import _to_datetime, _to_instant
from tsdp.io.timestep import _FIXED_US, _PHYSICAL_US, Step, parse_freq
from tsdp.io.timezones import EXAMPLE, has_offset, is_zoned, localize_instant, wall_clock

MAX_STEPS = 10_000_000  # longer grids are refused (exit 5) instead of exhausting memory
# what a command that has the option offers for missing steps (a command with another policy replaces it)
MISSING_STEPS_HINT = ("pass --fill-missing zero for counts (a missing step is 0) or --fill-missing null for levels "
                      "(kept missing)")


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
        start = _axis(self.points[:1], self.step)[0]
        return ((_axis(times, self.step) - start) // self.step.amount).astype(np.int64)


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


def _calendar_days(step: Step, dtype: pl.DataType) -> bool:
    """Whether ``step`` counts calendar days of the column's zone: whole days on zone-aware times."""
    return step.unit == "us" and step.amount % _FIXED_US["d"] == 0 and is_zoned(dtype)


def _axis(times: pl.Series, step: Step) -> np.ndarray:
    """The int64 values the arithmetic of a fixed ``step`` runs on: local clock microseconds for
    calendar days (so that a 23- or 25-hour day is one step), otherwise :func:`_physical_us`."""
    return _physical_us(wall_clock(times) if _calendar_days(step, times.dtype) else times)


def _month_index(times: pl.Series) -> np.ndarray:
    return (times.dt.year().cast(pl.Int64) * 12 + times.dt.month().cast(pl.Int64) - 1).to_numpy()


def _within_month_offset(times: pl.Series) -> np.ndarray:
    """Microseconds since the start of the month: equal for all points of a monthly grid."""
    wall = wall_clock(times)  # on the local clock: a clock change within the month is no offset
    starts = wall.dt.truncate("1mo")  # midnight of the 1st (dt.month_start keeps the time of day)
    return _physical_us(wall) - _physical_us(starts)


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
    if integer_time and int(uniq[-1]) - int(uniq[0]) > INT64_MAX:  # the differences would overflow int64
        raise NumericalError(f"column {column!r}: the integer times run from {uniq[0]} to {uniq[-1]}, more than "
                             f"2**63 - 1 apart; no grid of at most {MAX_STEPS:,} steps (--freq) covers them: use "
                             "smaller time numbers (e.g. steps since the first one) or ISO timestamps")
    step = parse_freq(freq, integer_time) if freq else _infer_step(uniq, column, integer_time)
    if step is None:
        return TimeGrid(uniq, None)
    if step.unit == "mo":
        offsets = _within_month_offset(uniq)
        months = _month_index(uniq)
        off = np.flatnonzero((offsets != offsets[0]) | ((months - months[0]) % step.amount != 0))
        n_steps = int((months[-1] - months[0]) // step.amount) + 1
    else:
        phys = _axis(uniq, step)
        off = np.flatnonzero((phys - phys[0]) % step.amount != 0)
        n_steps = int((phys[-1] - phys[0]) // step.amount) + 1
    if off.size:
        bad = uniq[int(off[0])]
        calendar = (f" (whole days count calendar days of {times.dtype.time_zone}, from local midnight; "
                    "convert the column to UTC to count 24-hour steps)" if _calendar_days(step, times.dtype) else "")
        raise DataError(
            f"column {column!r}: time {_fmt(bad)} is not on the grid with step {step.label} starting at "
            f"{_fmt(uniq[0])}{calendar}; pass --freq with the right step"
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
            f"(first missing: {_fmt(first_gap)}); {MISSING_STEPS_HINT}"
            + _clock_change_hint(times.dtype, step)
        )
    return grid


def _clock_change_hint(dtype: pl.DataType, step: Step) -> str:
    """For zone-less times on a sub-day grid: a skipped hour may be a clock change, not a gap."""
    if isinstance(dtype, pl.Datetime) and dtype.time_zone is None and step.unit == "us" \
            and step.amount < _FIXED_US["d"]:
        return (" (if these are local clock times, a daylight-saving change skips an hour: pass "
                "--timezone with their zone instead)")
    return ""


def _grid_points(start, end, step: Step, dtype) -> pl.Series:
    if dtype == pl.Date and step.unit == "us" and step.amount % _FIXED_US["d"]:
        raise UsageError(f"--freq {step.label} is finer than a day, but the time column holds dates")
    n_steps = _count_steps(start, end, step, dtype)
    if n_steps > MAX_STEPS:
        raise NumericalError(
            f"the time grid from {start} to {end} with --freq {step.label} would have {n_steps:,} "
            f"steps, more than {MAX_STEPS:,}; use a coarser --freq or a shorter time range"
        )
    if step.unit == "int":
        return pl.Series("time", np.arange(start, end + 1, step.amount, dtype=np.int64))
    interval = f"{step.amount}mo" if step.unit == "mo" else f"{step.amount}us"
    if _calendar_days(step, dtype):
        interval = f"{step.amount // _FIXED_US['d']}d"  # polars: calendar days in a zone
    if dtype == pl.Date:
        if step.unit == "us":
            interval = f"{step.amount // _FIXED_US['d']}d"
        return pl.date_range(start, end, interval=interval, eager=True)
    return pl.datetime_range(start, end, interval=interval, time_unit=dtype.time_unit,
                             time_zone=dtype.time_zone, eager=True)


def _count_steps(start, end, step: Step, dtype: pl.DataType) -> int:
    """Points of the grid ``start, start + step, ...`` up to ``end`` (inclusive), by arithmetic."""
    if step.unit == "int":
        return (end - start) // step.amount + 1
    bounds = pl.Series([start, end], dtype=dtype)
    if step.unit == "mo":
        months = _month_index(bounds)
        return int(months[1] - months[0]) // step.amount + 1
    phys = _axis(bounds, step)
    return int(phys[1] - phys[0]) // step.amount + 1


def _infer_step(uniq: pl.Series, column: str, integer_time: bool) -> Step | None:
    if uniq.len() == 1:
        return None
    phys = _physical_us(uniq)
    diffs = np.diff(phys)
    if is_zoned(uniq.dtype) and diffs.min() >= 23 * _FIXED_US["h"]:
        # Daily or coarser: whole calendar days of the zone? (23- and 25-hour days are one step.)
        local = np.diff(_physical_us(wall_clock(uniq)))
        days = int(local.min())
        if days > 0 and days % _FIXED_US["d"] == 0 and np.all(local % days == 0):
            return Step(days, "us")
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
    """Parse ``--start``/``--end`` into a value comparable with a time column of type ``like``.

    With a UTC offset the value is that instant (the column must be zone-aware); without one it is
    a local time of the column's zone (an error if the clocks skip or repeat it there).
    """
    if like.is_integer():
        try:
            return int(text)
        except ValueError:
            raise UsageError(f"{option} must be an integer for an integer time column, got {text!r}") from None
    raw = str(text).strip()
    if has_offset(raw):
        if not is_zoned(like):
            kind = "dates" if like == pl.Date else "times without a time zone"
            raise UsageError(f"{option} {text!r} has a UTC offset, but the time column holds {kind}; "
                             "drop the offset, or pass --timezone with the zone of the column's times")
        parsed = _to_instant(pl.Series([raw]))
        if parsed.is_null().any():
            raise UsageError(f"{option}: cannot parse {text!r}; use ISO 8601 such as {EXAMPLE}")
        return parsed.dt.convert_time_zone(like.time_zone).cast(like)[0]
    parsed = _to_datetime(pl.Series([raw]))
    if parsed.is_null().any():
        raise UsageError(f"{option}: cannot parse {text!r}; use ISO 8601 such as 2024-03-04, "
                         f"2024-03-04 06:00:00 or {EXAMPLE}")
    if like == pl.Date:
        if parsed.dt.truncate("1d")[0] != parsed[0]:  # a time of day would be dropped silently
            raise UsageError(f"{option} {text!r} has a time of day, but the time column holds dates; "
                             "give a date such as 2024-03-04")
        return parsed.dt.date()[0]
    if is_zoned(like):
        parsed = localize_instant(parsed, like.time_zone, option, raw)
    return parsed.cast(like)[0]


def fixed_grid(start, end, freq: str, column: str, like: pl.DataType) -> TimeGrid:
    """The public grid ``start, start + freq, ...`` of all points strictly before ``end``."""
    step = parse_freq(freq, like.is_integer())
    bounds = pl.Series([start, end], dtype=like).to_physical()  # instants (Python ignores fold)
    if not bounds[1] > bounds[0]:
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
    if is_zoned(times.dtype) and step.amount >= 23 * _FIXED_US["h"]:
        return None  # perhaps calendar days, whose length varies: left to the general checks
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
    unit, amount = ("mo", step.amount) if step.unit == "mo" else ("us", step.amount)
    if _calendar_days(step, dtype):
        unit, amount = "d", step.amount // _FIXED_US["d"]  # polars: calendar days in the zone
    offsets = [f"{amount * k}{unit}" for k in range(1, count + 1)]
    frame = pl.DataFrame({"t": [last] * count, "o": offsets}, schema={"t": dtype, "o": pl.String})
    if dtype == pl.Date and step.unit == "us":
        frame = frame.with_columns(pl.col("t").cast(pl.Datetime("us")))
        return frame.select(pl.col("t").dt.offset_by(pl.col("o")).cast(pl.Date)).to_series().alias(grid.points.name)
    return frame.select(pl.col("t").dt.offset_by(pl.col("o"))).to_series().alias(grid.points.name)

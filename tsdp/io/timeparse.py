"""Time columns parsed to polars times: ISO text (with or without an offset), dates, integer times,
in the zone :mod:`tsdp.io.timezones` gives them (``--timezone``), at whole microseconds (the finest
step of :mod:`tsdp.io.timegrid`)."""

from __future__ import annotations

import polars as pl

from tsdp.errors import DataError, TsdpError, UsageError
from tsdp.io.magnitudes import int64_times
from tsdp.io.timezones import (EXAMPLE, ClockChanged, check_offsets, check_zone, has_offset, localize_deferred,
                               strip_offsets, with_zone_deferred)

from tsdp.io.timestep import _FIXED_US, parse_freq


def parse_time_column(df: pl.DataFrame, column: str, timezone: str | None = None) -> pl.DataFrame:
    """Return ``df`` with ``column`` as Datetime, Date or Int64; DataError if unparseable.

    Text with UTC offsets becomes zone-aware (UTC, or ``timezone``); ``timezone`` (the
    ``--timezone`` option) reads zone-less timestamps as local times of that zone. Dates are
    calendar days in any zone and stay dates. :mod:`tsdp.io.timezones` states the rules.
    """
    out, changed = parse_time_column_deferred(df, column, timezone)
    if changed is not None:
        raise changed.error(0)
    return out


def parse_time_column_deferred(df: pl.DataFrame, column: str, timezone: str | None = None,
                               bucketed: bool = False) -> tuple[pl.DataFrame, ClockChanged | None]:
    """:func:`parse_time_column`, with the rows whose local clock time ``timezone`` skips or
    repeats returned (they hold their earliest reading) instead of raised: for callers that drop
    rows outside a public grid, which must drop these too when no reading lies inside.

    ``bucketed``: the times are only ever floored into buckets of whole microseconds or more (raw
    events, records by slot), so digits below a microsecond, which parsing drops, change nothing
    and are accepted; a series' own times are refused with them (two of them could merge)."""
    timezone = check_zone(timezone)
    changed = None
    dtype = df.schema[column]
    if dtype.is_integer():
        if timezone is not None:
            raise UsageError(f"--timezone {timezone}: column {column!r} holds integers, not timestamps; "
                             "remove --timezone")
        out = df.with_columns(int64_times(df[column], column))
    elif dtype == pl.Date:
        out = df
    elif isinstance(dtype, pl.Datetime):
        if not bucketed:
            _refuse_sub_microsecond(df[column], column)
        if timezone is None:
            out = df
        else:
            zoned, changed = with_zone_deferred(df[column], timezone, column)
            out = df.with_columns(zoned)
    elif dtype == pl.String:
        parsed = df[column].str.strip_chars()
        # a value longer than YYYY-MM-DD is no date: skip the pass that would try every value as one
        longest = parsed.str.len_bytes().max()
        # an empty column is no evidence of dates: it takes the timestamps' type, which keeps the
        # time of day of a public --start/--end
        as_date = parsed.str.to_date(strict=False, format="%Y-%m-%d") \
            if longest is not None and longest <= 10 else None
        if as_date is not None and as_date.null_count() == parsed.null_count():
            converted = as_date
        else:
            converted, changed = _text_times(parsed, column, timezone, df[column], not bucketed)
        out = df.with_columns(converted.alias(column))
    else:
        raise DataError(f"column {column!r} has type {dtype}, which is not a time or integer column")
    nulls = out[column].is_null()
    if nulls.any():
        raise DataError(f"column {column!r}: missing timestamp at row {int(nulls.arg_true()[0]) + 1}")
    return out, changed


def dates_as_times(df: pl.DataFrame, column: str, timezone: str | None, freq: str, *instants) -> pl.DataFrame:
    """:func:`dates_as_times_deferred`, raising for a midnight ``timezone`` skips or repeats."""
    out, changed = dates_as_times_deferred(df, column, timezone, freq, *instants)
    if changed is not None:
        raise changed.error(0)
    return out


def dates_as_times_deferred(df: pl.DataFrame, column: str, timezone: str | None, freq: str,
                            *instants) -> tuple[pl.DataFrame, ClockChanged | None]:
    """``df`` with a Date ``column`` (from :func:`parse_time_column`) turned into midnight
    timestamps (local to ``timezone`` when given) when the public grid needs times of day: a
    ``freq`` finer than a day, or one of ``instants`` (``--start``/``--end``) with a time of day.
    The column's type then follows the public options only: otherwise a column of dates becomes
    timestamps when any one row has a time of day, and whether a sub-day release runs at all
    would depend on that row (one user's data). Midnights that ``timezone`` skips or repeats are
    returned as in :func:`parse_time_column_deferred`."""
    if df.schema[column] != pl.Date or not _grid_needs_times(freq, instants):
        return df, None
    times, changed = df[column].cast(pl.Datetime("us")), None
    if timezone is not None:
        times, changed = with_zone_deferred(times, timezone, column)
    return df.with_columns(times.alias(column)), changed


def _grid_needs_times(freq: str, instants) -> bool:
    try:
        step = parse_freq(freq, False)
    except TsdpError:
        return False  # the grid's own parsing reports a bad --freq
    if step.unit == "us" and step.amount % _FIXED_US["d"]:
        return True
    for text in instants:
        if text is None or has_offset(str(text)):
            continue
        parsed = _to_datetime(pl.Series([str(text).strip()]))
        if parsed.null_count() == 0 and parsed.dt.truncate("1d")[0] != parsed[0]:
            return True
    return False


def _text_times(texts: pl.Series, column: str, timezone: str | None, raw: pl.Series,
                exact: bool = True) -> tuple[pl.Series, ClockChanged | None]:
    """Text timestamps (stripped) as Datetime: zone-less, or instants when they carry UTC offsets
    (and the local times ``timezone`` skips or repeats, see :func:`parse_time_column_deferred`).

    The first timestamp decides which: parsing the other kind costs nothing on the usual columns,
    and a column mixing both is an error (``raw``: the column as read, for messages).
    """
    first = next(iter(texts.drop_nulls().head(1)), None)
    offsets = has_offset(first)
    converted = _to_instant(texts) if offsets else _to_datetime(texts)
    bad = converted.is_null() & texts.is_not_null()
    if bad.any():
        row = int(bad.arg_true()[0])
        cell = texts[row:row + 1]
        if (_to_datetime(cell) if offsets else _to_instant(cell)).is_not_null().all():
            raise DataError(
                f"column {column!r}: timestamp {raw[row]!r} at row {row + 1} "
                f"{'has no' if offsets else 'has a'} UTC offset, unlike the first timestamp {first!r}; "
                f"write every timestamp of the column with an offset (e.g. {EXAMPLE}) or none"
            )
        raise DataError(
            f"column {column!r}: cannot parse timestamp {raw[row]!r} at row {row + 1}; "
            f"use ISO 8601 such as 2024-01-31, 2024-01-31 13:00:00 or {EXAMPLE}"
        )
    if exact:
        _refuse_sub_microsecond_text(texts, column, raw)
    if offsets:
        if timezone is None:
            return converted, None
        return check_offsets(converted, _to_datetime(strip_offsets(texts)), timezone, column, raw), None
    return (converted, None) if timezone is None else localize_deferred(converted, timezone, column, raw)


FINEST_STEP = ("tsdp's time grid resolves whole microseconds (the finest --freq is 1us), so times closer than "
               "that cannot be told apart: round the times, or aggregate the rows to a coarser step, first")
_SUB_MICROSECOND = r"\.\d{6}\d*[1-9]"  # a fraction of a second with a non-zero digit after the sixth
_LONGEST_MICROSECOND_TEXT = len("2024-01-01T00:00:00.000000")


def _refuse_sub_microsecond(times: pl.Series, column: str) -> None:
    """DataError naming the first time of a nanosecond column that is not a whole microsecond
    (tsdp computes grids in microseconds; truncating would merge or shift such times silently)."""
    if times.dtype.time_unit != "ns":
        return
    off = (times.to_physical() % 1000 != 0).fill_null(False)
    if off.any():
        row = int(off.arg_true()[0])
        shown = times[row:row + 1].dt.to_string("%Y-%m-%d %H:%M:%S%.9f")[0]
        raise DataError(f"column {column!r}: time {shown} at row {row + 1} is "
                        f"{int(times.to_physical()[row]) % 1000} ns past a whole microsecond; {FINEST_STEP}")


def _refuse_sub_microsecond_text(texts: pl.Series, column: str, raw: pl.Series) -> None:
    """:func:`_refuse_sub_microsecond` for text: parsing at microsecond resolution drops later digits
    (``00:00:00.0000001`` would read as ``00:00:00``); only a column with long values is searched."""
    longest = texts.str.len_bytes().max()
    if longest is None or longest <= _LONGEST_MICROSECOND_TEXT:
        return
    off = texts.str.contains(_SUB_MICROSECOND).fill_null(False)
    if off.any():
        row = int(off.arg_true()[0])
        raise DataError(f"column {column!r}: timestamp {raw[row]!r} at row {row + 1} has digits below a "
                        f"microsecond; {FINEST_STEP}")


ISO_DATETIME_FORMATS = (  # whole seconds first: parsing them without %.f is several times faster
    "%Y-%m-%d %H:%M:%S", "%Y-%m-%dT%H:%M:%S", "%Y-%m-%d %H:%M:%S%.f", "%Y-%m-%dT%H:%M:%S%.f",
    "%Y-%m-%d %H:%M", "%Y-%m-%dT%H:%M", "%Y-%m-%d",
)


# The same layouts ending in a UTC offset (Z, +HH, +HHMM or +HH:MM): parsed to UTC instants.
ISO_OFFSET_FORMATS = tuple(f + "%#z" for f in ISO_DATETIME_FORMATS[:-1])


def _to_datetime(texts: pl.Series) -> pl.Series:
    """Parse strings as ISO 8601 datetimes (each value in any ISO layout), null where unparseable.

    Only ISO layouts are accepted: a guessed format could read 01/02/2024 as either day first or
    month first. The ISO layouts cannot be confused with one another, so they are combined.
    """
    return _by_layout(texts, ISO_DATETIME_FORMATS)


def _to_instant(texts: pl.Series) -> pl.Series:
    """Parse ISO 8601 datetimes with UTC offsets as instants (``Datetime('us', 'UTC')``), null
    where unparseable or without an offset; offsets may differ from value to value."""
    return _by_layout(texts, ISO_OFFSET_FORMATS)


def _by_layout(texts: pl.Series, formats: tuple[str, ...]) -> pl.Series:
    # One layout at a time, each only on the values still unparsed: a column in one layout (the
    # usual case) costs one pass. The first value's layout goes first (found on that value alone).
    first = texts[:1].drop_nulls()
    if first.len():
        fits = [f for f in formats if first.str.to_datetime(format=f, strict=False).is_not_null().all()]
        formats = tuple(fits[:1]) + tuple(f for f in formats if f not in fits[:1])
    result = texts.str.to_datetime(format=formats[0], strict=False, time_unit="us")
    for fmt in formats[1:]:
        missing = result.is_null() & texts.is_not_null()
        if not missing.any():
            break
        retry = texts.filter(missing).str.to_datetime(format=fmt, strict=False, time_unit="us")
        result = result.scatter(missing.arg_true(), retry)
    return result.alias(texts.name)

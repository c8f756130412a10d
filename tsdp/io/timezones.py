"""Time zones: UTC offsets in text, ``--timezone`` for local clock times, offsets written back.

The rules (the README's "Time zones" section says the same for users):

* A text timestamp may end in an ISO 8601 UTC offset: ``Z``, ``+HH``, ``+HHMM`` or ``+HH:MM``
  (``2024-03-30T01:00:00+01:00``, ``2024-03-30 00:00:00.5Z``). Such a timestamp is an instant.
  Within one column either every timestamp carries an offset or none does; offsets may differ from
  row to row (a zone across a daylight-saving change), they are all converted to UTC instants.
* The column's zone decides what a calendar day is and how the output is written. It is never read
  off the values (it would move the public grid of event input with one private row): it is the
  zone of a zone-aware Parquet column, else ``--timezone``, else UTC for text with offsets.
  With ``--timezone`` each written offset must be the zone's offset at that instant (DataError).
* A timestamp without an offset is a local clock time. With ``--timezone ZONE`` it is read in ZONE:
  a local time that does not exist there (the hour skipped when clocks go forward) or exists twice
  (the hour repeated when they go back) is an error naming the timestamp, its row and the option.
  Event input is the one exception: rows outside the public grid are dropped, so a row that lies
  outside it under both readings of its clock time (:class:`ClockChanged`) is dropped like any other
  (one user's row must not decide between a release and an error); one that could lie inside is
  the error above. Without ``--timezone`` such times stay zone-less, as before.
* A zone-aware column (Parquet) keeps its zone; ``--timezone`` naming another zone is a usage
  error rather than a silent conversion.
* Computation is on instants (polars keeps zone-aware times as UTC microseconds). Output: CSV
  writes zone-aware columns as ISO 8601 with the offset (``Z`` for UTC), so the two 02:00 hours
  of a fall-back day stay distinct; Parquet keeps the zone-aware column.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
import polars as pl

from tsdp.errors import DataError, UsageError

OPTION = "--timezone"
# An offset right after a clock time: the whole value must look like an ISO date-time to count.
_OFFSET_AT_END = r"(?:Z|z|[+-]\d{2}(?::?\d{2})?)$"
_HAS_OFFSET = re.compile(r"^\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?" + _OFFSET_AT_END)
CSV_FORMAT = "%Y-%m-%dT%H:%M:%S%.f"  # fractional seconds only when present
EXAMPLE = "2024-01-31T13:00:00+01:00"


def check_zone(zone: str | None, option: str = OPTION) -> str | None:
    """``zone`` if polars knows it as a time zone (an IANA name such as Europe/Berlin, or UTC)."""
    if zone is None:
        return None
    if not str(zone).strip():  # polars reads "" as 'no zone': it would silently mean the default
        raise UsageError(f"{option} '': empty; give an IANA name such as Europe/Berlin or UTC, or leave it out")
    try:
        pl.Series([0], dtype=pl.Datetime("us")).dt.replace_time_zone(str(zone))
    except (pl.exceptions.PolarsError, ValueError):
        raise UsageError(f"{option} {zone!r}: unknown time zone; give an IANA name such as "
                         "Europe/Berlin, America/New_York or UTC") from None
    return str(zone)


def has_offset(text: str | None) -> bool:
    """Whether ``text`` is a date-time ending in a UTC offset (``Z``, ``+01``, ``+0100``, ``+01:00``)."""
    return text is not None and _HAS_OFFSET.search(text.strip()) is not None


def strip_offsets(texts: pl.Series) -> pl.Series:
    """The local clock time each text was written in (its offset removed)."""
    return texts.str.replace(r"\s*" + _OFFSET_AT_END, "")


def localize(times: pl.Series, zone: str, column: str, shown: pl.Series | None = None) -> pl.Series:
    """Naive local clock times as instants of ``zone``; DataError naming the first local time that
    does not exist in ``zone`` or exists twice (``shown``: the values as the input wrote them)."""
    zoned, changed = localize_deferred(times, zone, column, shown)
    if changed is not None:
        raise changed.error(0)
    return zoned


@dataclass(frozen=True)
class ClockChanged:
    """Rows whose local clock time ``zone`` skips or repeats, and the two instants each could mean.

    A repeated time (02:30 on a fall-back night) has two readings, its first and its second
    occurrence. A skipped time (02:30 on a spring-forward night) has none; its readings are the
    clock time taken with the offset in force before the change and with the one after it, the
    two instants a writer could have meant. Whichever reading is right lies among these two.
    """

    column: str
    zone: str
    rows: np.ndarray  # positions in the column
    walls: pl.Series  # the local clock times (zone-less), at ``rows``
    shown: pl.Series  # the values as the input wrote them, at ``rows``
    earliest: pl.Series  # instants (zone-aware), at ``rows``
    latest: pl.Series

    def error(self, k: int) -> DataError:
        """The DataError for the ``k``-th row: the column, the value, its row and what to do."""
        problem, why, advice = _problem(self.walls[k:k + 1], self.zone)
        return DataError(f"column {self.column!r}: local time {str(self.shown[k])!r} at row "
                         f"{int(self.rows[k]) + 1} {problem} ({OPTION} {self.zone}): {why}; {advice}")

    def outside(self, start, end) -> np.ndarray:
        """Per row, whether both readings lie outside ``[start, end)`` (instants of the column's
        type): then no resolution of the clock change puts the row inside."""
        bounds = pl.Series([start, end], dtype=self.earliest.dtype).to_physical()
        lo, hi = int(bounds[0]), int(bounds[1])
        out = np.ones(self.rows.size, dtype=bool)
        for reading in (self.earliest, self.latest):
            t = reading.to_physical().to_numpy()
            out &= (t < lo) | (t >= hi)
        return out


def localize_deferred(times: pl.Series, zone: str, column: str,
                      shown: pl.Series | None = None) -> tuple[pl.Series, ClockChanged | None]:
    """Naive local clock times as instants of ``zone``, and the rows whose clock time ``zone``
    skips or repeats (``None`` if there are none). Those rows hold their earliest reading: the
    caller must drop them or raise :meth:`ClockChanged.error`, never use them as they are."""
    zoned = times.dt.replace_time_zone(zone, ambiguous="null", non_existent="null")
    failed = zoned.is_null() & times.is_not_null()
    if not failed.any():
        return zoned, None
    rows = failed.arg_true().to_numpy()
    walls = times.gather(rows)
    first, second = _readings(walls, zone)
    earliest = pl.select(pl.min_horizontal(first, second)).to_series()
    latest = pl.select(pl.max_horizontal(first, second)).to_series()
    changed = ClockChanged(column, zone, rows, walls, (shown if shown is not None else times).gather(rows),
                           earliest, latest)
    return zoned.scatter(rows, earliest), changed


def _readings(walls: pl.Series, zone: str) -> tuple[pl.Series, pl.Series]:
    """Each naive clock time read with the offset ``zone`` has one day earlier and with the one it
    has one day later: the offsets on either side of the clock change (a zone changes its offset
    at most a few times a year, never twice within two days)."""
    as_utc = walls.dt.replace_time_zone("UTC")
    day = pl.duration(days=1)
    readings = []
    for moment in (pl.col("t") - day, pl.col("t") + day):
        offset = moment.dt.convert_time_zone(zone).dt.replace_time_zone(None) - moment.dt.replace_time_zone(None)
        readings.append((pl.col("t") - offset).dt.convert_time_zone(zone))
    frame = pl.DataFrame({"t": as_utc}).select(readings[0].alias("a"), readings[1].alias("b"))
    return frame["a"], frame["b"]


def localize_instant(time: pl.Series, zone: str, option: str, text: str) -> pl.Series:
    """One naive option value (``--start 2024-03-31 02:30``) as an instant of ``zone`` (UsageError)."""
    zoned = time.dt.replace_time_zone(zone, ambiguous="null", non_existent="null")
    if zoned.is_null().any():
        problem, why, advice = _problem(time, zone)
        raise UsageError(f"{option} {text!r} {problem}, the zone of the time column: {why}; {advice}")
    return zoned


def _problem(time: pl.Series, zone: str) -> tuple[str, str, str]:
    """Why a local time cannot be read in ``zone`` (skipped or repeated by a clock change), and
    what to do about it."""
    earliest = time.dt.replace_time_zone(zone, ambiguous="earliest", non_existent="null")
    if earliest.is_null().any():
        return (f"does not exist in {zone}", "the clocks skip it when daylight saving time starts",
                f"fix the time, or write it with its UTC offset (e.g. {EXAMPLE})")
    return (f"is ambiguous in {zone}", "it occurs twice when the clocks go back",
            f"write the times with UTC offsets (e.g. {EXAMPLE}) to say which of the two is meant")


def check_offsets(instants: pl.Series, walls: pl.Series, zone: str, column: str, shown: pl.Series) -> pl.Series:
    """``instants`` in ``zone`` after checking that each was written (``walls``: the clock time of
    its text) with ``zone``'s offset at that instant; DataError naming the first that was not."""
    local = instants.dt.convert_time_zone(zone)
    wrong = (local.dt.replace_time_zone(None) != walls).fill_null(False)
    if wrong.any():
        row = int(wrong.arg_true()[0])
        expected = local[row:row + 1].dt.to_string("%:z")[0]
        raise DataError(f"column {column!r}: timestamp {shown[row]!r} at row {row + 1} does not have the "
                        f"offset of {zone} ({OPTION}), which is {expected} at that instant; drop "
                        f"{OPTION} to use the offsets as written, or name the zone they were written in")
    return local


def with_zone(times: pl.Series, zone: str, column: str) -> pl.Series:
    """A Datetime column read with ``--timezone zone``: naive times are localized; a zone-aware
    column must already be in ``zone`` (converting it silently would change what a day is)."""
    zoned, changed = with_zone_deferred(times, zone, column)
    if changed is not None:
        raise changed.error(0)
    return zoned


def with_zone_deferred(times: pl.Series, zone: str, column: str) -> tuple[pl.Series, ClockChanged | None]:
    """:func:`with_zone`, with the rows whose clock time ``zone`` skips or repeats returned as in
    :func:`localize_deferred` instead of raised."""
    current = times.dtype.time_zone
    if current is None:
        return localize_deferred(times, zone, column)
    if current != zone:
        raise UsageError(f"{OPTION} {zone}: column {column!r} already carries the time zone {current}; "
                         f"drop {OPTION} or pass {OPTION} {current}")
    return times, None


def is_zoned(dtype: pl.DataType) -> bool:
    return isinstance(dtype, pl.Datetime) and dtype.time_zone is not None


def wall_clock(times: pl.Series) -> pl.Series:
    """Local clock times (zone-less) of zone-aware ``times``; others unchanged."""
    return times.dt.replace_time_zone(None) if is_zoned(times.dtype) else times


def csv_ready(df: pl.DataFrame) -> pl.DataFrame:
    """``df`` with every zone-aware column as ISO 8601 text with its offset (``Z`` for UTC), the
    form CSV output uses; other columns untouched (no copy when there is none)."""
    zoned = [name for name, dtype in df.schema.items() if is_zoned(dtype)]
    if not zoned:
        return df
    return df.with_columns(
        pl.col(name).dt.to_string(CSV_FORMAT + ("Z" if df.schema[name].time_zone == "UTC" else "%:z"))
        for name in zoned
    )

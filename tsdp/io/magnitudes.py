"""Input columns whose numbers float64 cannot carry: values beyond ±2**53, integer times beyond 64 bits.

Polars reads integers wider than 64 bits as Int128 and unsigned ones as UInt64; numpy has no 128-bit
integers, and tsdp's time grid computes in Int64. Each is refused with the column, the row and the
value (DataError, exit 4) instead of failing later inside a conversion.

Values beyond ±2**53 are judged exactly, never after a rounding to float64 that could hide them:
integer columns (Parquet Int64) against the integer 2**53, and numbers read from text (a CSV value
column is read as Float64, where 9007199254740993 becomes 2**53) by their digits wherever the float
sits exactly at ±2**53 (:func:`check_text_magnitude`).
"""

from __future__ import annotations

import polars as pl

from decimal import Decimal, InvalidOperation

from tsdp.errors import DataError, NumericalError
from tsdp.limits import MAX_MAGNITUDE

INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
MAX_INTEGER = 2**53  # MAX_MAGNITUDE as an exact integer


def beyond_error(column: str, value, row: int) -> DataError:
    """The DataError for ``value`` at (0-based) ``row`` of ``column`` beyond ±2**53."""
    return DataError(f"column {column!r}: value {value} at row {row + 1} is beyond ±2**53 "
                     f"(= {MAX_MAGNITUDE:.0f}), where float64 cannot carry the noise tsdp adds; rescale the "
                     "column (e.g. count in thousands)")


def check_magnitude(values: pl.Series, column: str) -> pl.Series:
    """``values`` (numbers, nulls allowed), refused if any is beyond ±MAX_MAGNITUDE; integer types
    wider than Int64 come back as Int64 (every accepted value fits)."""
    if values.len() == values.null_count():
        return values
    lo, hi = values.min(), values.max()  # two reductions; the per-row mask only to locate a problem
    # Python compares an int with a float exactly; polars would compare an Int64 column as floats
    limit = MAX_INTEGER if values.dtype.is_integer() else MAX_MAGNITUDE
    in_range = -limit <= lo and hi <= limit
    unsigned = values.dtype in (pl.UInt8, pl.UInt16, pl.UInt32, pl.UInt64)
    big = None if in_range else ((values > limit) if unsigned else (values > limit) | (values < -limit)).fill_null(False)
    if big is not None and big.any():  # (a NaN fails the range test but is not big: NaN is checked elsewhere)
        row = int(big.arg_true()[0])
        raise beyond_error(column, values[row], row)
    if values.dtype.is_integer() and values.dtype not in (pl.Int8, pl.Int16, pl.Int32, pl.Int64, pl.UInt8,
                                                          pl.UInt16, pl.UInt32):
        return values.cast(pl.Int64)
    return values


def check_text_magnitude(texts: pl.Series, values: pl.Series, column: str) -> None:
    """DataError if a number written in ``texts`` is beyond ±2**53 although its float64 reading
    ``values`` (same rows) is not: only a float of exactly ±2**53 can hide one, so only those rows
    are read digit by digit."""
    edge = (values.abs() == MAX_MAGNITUDE).fill_null(False)
    if not edge.any():
        return
    for row in edge.arg_true().to_list():
        text = texts[row]
        try:
            exact = Decimal(str(text).strip())
        except InvalidOperation:
            continue  # not a plain decimal (e.g. 'inf'): the float reading stands
        if abs(exact) > MAX_INTEGER:
            raise beyond_error(column, str(text).strip(), row)


def int64_times(times: pl.Series, column: str) -> pl.Series:
    """An integer time column as Int64; DataError naming the first value outside the Int64 range."""
    if times.dtype in (pl.Int64, pl.Int32, pl.Int16, pl.Int8, pl.UInt8, pl.UInt16, pl.UInt32):
        return times.cast(pl.Int64)
    outside = times > INT64_MAX
    if times.dtype.is_signed_integer():
        outside = outside | (times < INT64_MIN)
    outside = outside.fill_null(False)
    if outside.any():
        row = int(outside.arg_true()[0])
        raise DataError(f"column {column!r}: integer time {times[row]} at row {row + 1} is outside the 64-bit "
                        f"range [{INT64_MIN}, {INT64_MAX}] of tsdp's time grid; use smaller time numbers "
                        "(e.g. steps since the first one) or ISO timestamps")
    return times.cast(pl.Int64)


def require_finite_output(df, offset: int = 0):
    """NumericalError (exit 5) naming the first column and row of ``df`` holding NaN or an
    infinity: a computation overflowed, and such a table is never published.

    ``df`` may be an iterable of frames (a release streamed chunk by chunk): each is checked as it
    is produced (rows counted across them), and the iterable is returned wrapped."""
    if not isinstance(df, pl.DataFrame):
        return _finite_frames(df)
    for name, dtype in df.schema.items():
        if not dtype.is_float():
            continue
        bad = (~df[name].is_finite()).fill_null(False)
        if bad.any():
            row = int(bad.arg_true()[0])
            raise NumericalError(f"the output column {name!r} would hold {df[name][row]} at row {row + 1 + offset}: the "
                                 "computation overflowed float64; rescale the input values or the public bounds; "
                                 "nothing was published")


def _finite_frames(frames):
    rows = 0
    for frame in frames:
        require_finite_output(frame, rows)
        rows += frame.height
        yield frame

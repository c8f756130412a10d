"""Reading input tables: bounded type inference plus the schema the command needs.

Inferring every column's type from the whole file (``infer_schema_length=None``) reads a large CSV
twice and holds it as text in between: 7x slower than polars' default, which infers from the
first 100 rows. tsdp reads with the default and types the columns it needs explicitly:

* ``number`` columns (values) as Float64,
* ``text`` columns (series and user ids) as String,
* ``time`` columns by inference (ISO text or integer steps; the layout code parses them).

A cell that does not fit its column's type (``x`` among numbers, a number with blanks around it, a
timestamp after 100 integer steps) ends the read. A time column of integer steps then names its
first cell that is not one; any other column is read as text and the read retried, and the layout
code parses the text or names the bad cell with its column, row and value (``column 'value':
non-numeric value 'x' at row 7``), exactly as it did after full inference.

Formats: CSV, TSV, either gzipped (``.csv.gz``, ``.tsv.gz``), and Parquet; ``-`` reads stdin as
Parquet when it starts with Parquet's magic bytes ``PAR1``, as CSV otherwise.
"""

from __future__ import annotations

import csv
import gzip
import io
import re
import sys
from pathlib import Path

from tsdp.errors import DataError, UsageError
from tsdp.io.inputs import HEADER_BYTES, PARQUET_MAGIC, check_header, check_input, is_truncation, truncated_gzip

KINDS = ("number", "text", "time")
_FAILED_COLUMN = re.compile(r"at column '.*' \(column number (\d+)\)", re.DOTALL)


def read_input(path, fmt: str, columns: dict[str, str], rest: str | None = None):
    """The table at ``path`` (format ``fmt`` from :func:`tsdp.io.files.table_format`).

    ``columns``: kind (``number``, ``text``, ``time``) of each column the command needs; a column
    missing from the file is left to the command's own check. ``rest``: kind of every other column.
    """
    import polars as pl

    for kind in (*columns.values(), rest or "time"):
        if kind not in KINDS:
            raise ValueError(f"column kind {kind!r} is not one of {KINDS}")
    source, fmt = _source(path, fmt)
    try:
        if fmt == "parquet":
            return pl.read_parquet(source)
        return _read_text(source, "\t" if fmt.startswith("tsv") else ",", columns, rest)
    except DataError:
        raise
    except (pl.exceptions.PolarsError, OSError, ValueError, EOFError, UnicodeDecodeError) as exc:
        first_line = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        if fmt.endswith(".gz") and (isinstance(exc, EOFError) or is_truncation(first_line)):
            raise truncated_gzip(path) from None
        raise DataError(f"INPUT: cannot parse {str(path)!r} as {fmt}: {first_line}") from None


def _source(path, fmt: str):
    """(what polars reads, the format): a path, or stdin's bytes with the format sniffed."""
    if str(path) == "-":
        data = sys.stdin.buffer.read()
        if data[:4] == PARQUET_MAGIC:
            return data, "parquet"
        check_header(data[:HEADER_BYTES], "INPUT <stdin>")
        return data, "csv"
    check_input(path)  # a regular file (a FIFO would block), a CSV header without repeated names
    return path, fmt


def header(source, separator: str) -> list[str]:
    """Column names from the first line (a path, possibly gzipped, or bytes)."""
    if isinstance(source, (bytes, bytearray)):
        first = bytes(source[: source.find(b"\n") + 1 or len(source)])
    else:
        with open(source, "rb") as fh:
            magic = fh.read(2)
        opener = gzip.open if magic == b"\x1f\x8b" else open
        with opener(source, "rb") as fh:
            first = fh.readline()
    line = first.decode("utf-8-sig", errors="replace")
    try:
        return next(csv.reader(io.StringIO(line), delimiter=separator), [])
    except csv.Error as exc:  # e.g. a lone carriage return in binary data: not a CSV header
        raise DataError(f"INPUT: the first line is not a CSV header ({exc}); is the file CSV?") from None


def _read_text(source, separator: str, columns: dict[str, str], rest: str | None):
    import polars as pl

    types = {"number": pl.Float64, "text": pl.String}
    kinds = dict(columns)
    names = header(source, separator)
    if rest is not None:
        kinds.update({name: rest for name in names if name not in columns})
    overrides = {name: types[kind] for name, kind in kinds.items() if kind in types}
    for _ in range(len(names) + 1):
        try:
            df = pl.read_csv(source, separator=separator, schema_overrides=overrides)
            _check_exact_numbers(df, source, separator, [n for n, t in overrides.items() if t == pl.Float64])
            return df
        except pl.exceptions.ComputeError as exc:
            column = _failed_column(str(exc), names)
            if column is None or overrides.get(column) == pl.String:
                raise
            integers = "`i64`" in str(exc)
        if kinds.get(column) == "time" and integers:
            _raise_bad_step(source, separator, column)
        overrides[column] = pl.String  # the layout code parses it, or names the bad cell
    raise DataError("INPUT: cannot settle the column types")  # unreachable: one retry per column


def _check_exact_numbers(df, source, separator: str, columns: list[str]) -> None:
    """Numbers read as Float64 that sit at exactly ±2**53 may stand for larger ones written in the
    file (9007199254740993 reads as 2**53): those columns are read again as text and judged by
    their digits (:func:`tsdp.io.magnitudes.check_text_magnitude`)."""
    import polars as pl

    from tsdp.io.magnitudes import check_text_magnitude
    from tsdp.limits import MAX_MAGNITUDE

    for column in columns:
        if column not in df.columns or not (df[column].abs() == MAX_MAGNITUDE).any():
            continue
        texts = pl.read_csv(source, separator=separator, columns=[column],
                            schema_overrides={column: pl.String})[column]
        check_text_magnitude(texts, df[column], column)


def _failed_column(message: str, names: list[str]) -> str | None:
    """The column a polars parse error names (by its 1-based number), if it names one."""
    match = _FAILED_COLUMN.search(message)
    if match is None:
        return None
    number = int(match.group(1))
    return names[number - 1] if 1 <= number <= len(names) else None



def _raise_bad_step(source, separator: str, column: str) -> None:
    """DataError for the first cell of an integer time column that is not an integer step."""
    import polars as pl

    raw = pl.read_csv(source, separator=separator, columns=[column], schema_overrides={column: pl.String})[column]
    text = raw.str.strip_chars()
    bad = text.cast(pl.Int64, strict=False).is_null() & text.is_not_null() & (text != "")
    if bad.any():
        row = int(bad.arg_true()[0])
        raise DataError(f"column {column!r}: time {raw[row]!r} at row {row + 1} is not an integer step like "
                        "the rows before it; write every time as an integer step or every one as ISO 8601")

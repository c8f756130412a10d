"""Checks on an input path before tsdp opens it: a regular file, and a CSV header without repeats.

* A FIFO (named pipe), a device or a socket is refused before ``open()``, which would block until a
  writer appears (a cron job hanging for ever) or read an endless stream. Piped data goes to ``-``
  (stdin), which stays allowed.
* A Parquet file named ``.csv`` or ``.tsv`` is refused with a message saying so (the CSV parser's
  own error would be "invalid utf-8"); the format stays chosen by the extension.
* A header that names a column twice (``a,a``) is refused in every text format (CSV, TSV, either
  gzipped, and CSV on stdin): polars would rename the second copy to ``a_duplicated_0``, so
  ``--value-col a`` would silently read only the first one and a wide release would publish a
  column under a name the file never had.
"""

from __future__ import annotations

import csv
import gzip
import io
import os
import zlib
import stat
from pathlib import Path

from tsdp.errors import DataError, UsageError

STDIO = "-"
HEADER_BYTES = 1 << 20  # a header longer than this is not checked (polars reads it all the same)
PARQUET_MAGIC = b"PAR1"  # a Parquet file begins and ends with these bytes
TEXT_SUFFIXES = (".csv", ".tsv")  # read as text by extension: Parquet bytes there get a clear error
# text formats by the end of the file name -> their field separator (gzipped ones are decompressed)
SEPARATORS = {".csv": ",", ".tsv": "\t", ".csv.gz": ",", ".tsv.gz": "\t"}


def check_input(path: str | Path, option: str = "INPUT") -> None:
    """UsageError unless ``path`` is ``-`` or an existing regular file; DataError if it is a text
    file (CSV or TSV, gzipped or not) whose header repeats a column name."""
    if str(path) == STDIO:
        return
    try:
        mode = os.stat(path).st_mode  # follows symbolic links: a link to a FIFO is a FIFO
    except FileNotFoundError:
        raise UsageError(f"{option}: file {str(path)!r} does not exist") from None
    except OSError as exc:
        raise UsageError(f"{option}: cannot read {str(path)!r}: {exc.strerror or exc}") from None
    if stat.S_ISDIR(mode):
        raise UsageError(f"{option}: {str(path)!r} is a directory, not a file")
    if not stat.S_ISREG(mode):
        kind = "a named pipe (FIFO)" if stat.S_ISFIFO(mode) else "a device or socket"
        raise UsageError(f"{option}: {str(path)!r} is {kind}, not a regular file; save the data to a file, or "
                         "pipe it to tsdp as '-' (stdin)")
    suffix = Path(path).suffix.lower()
    if suffix in TEXT_SUFFIXES:
        try:
            with open(path, "rb") as fh:
                head = fh.read(HEADER_BYTES)
                fh.seek(max(0, os.fstat(fh.fileno()).st_size - len(PARQUET_MAGIC)))
                tail = fh.read()
        except OSError as exc:
            raise UsageError(f"{option}: cannot read {str(path)!r}: {exc.strerror or exc}") from None
        if head[:4] == PARQUET_MAGIC and tail == PARQUET_MAGIC:
            raise DataError(f"{option}: {str(path)!r} is a Parquet file (it begins and ends with PAR1), not "
                            f"{suffix[1:].upper()}; tsdp reads a file by its extension: name it .parquet")
    name = Path(path).name.lower()
    ending = next((e for e in SEPARATORS if name.endswith(e) and len(name) > len(e)), None)
    if ending is None:
        return
    if ending.endswith(".gz"):
        head = _gunzipped_head(path)
        if head is None:
            return  # not gzip data after all: the reader names the problem
    check_header(head, f"{option} {str(path)!r}", SEPARATORS[ending])


def truncated_gzip(path) -> DataError:
    """The error for a gzipped input whose stream stops before its end marker."""
    return DataError(f"INPUT: {str(path)!r} is truncated: its gzip stream ends before the end-of-stream marker (an "
                     "incomplete copy or download?); copy it again")


def is_truncation(message: str) -> bool:
    """Whether a decompressor's message says the compressed stream ended early."""
    text = message.lower()
    return "end of file" in text or "end-of-stream" in text


def _gunzipped_head(path) -> bytes | None:
    """The first line (at most HEADER_BYTES) of a gzipped file, decompressed; None if it does not
    decompress."""
    try:
        with gzip.open(path, "rb") as fh:
            return fh.readline(HEADER_BYTES)
    except (OSError, EOFError, zlib.error):
        return None


def check_header(head: bytes, where: str = "INPUT", separator: str = ",") -> None:
    """DataError if the first record of ``head`` (fields split by ``separator``) names a column more
    than once."""
    if len(head) >= HEADER_BYTES and b"\n" not in head:
        return  # the header goes on beyond what was read
    text = head.decode("utf-8", errors="replace")
    if text.startswith("\ufeff"):
        text = text[1:]
    try:
        names = next(csv.reader(io.StringIO(text, newline=""), delimiter=separator), [])
    except csv.Error:
        return  # polars reports what is wrong with the file
    seen: set[str] = set()
    for name in names:
        if name in seen:
            raise DataError(f"{where}: the header names column {name!r} more than once; give every column a "
                            f"unique name (polars would read the second one as {name + '_duplicated_0'!r})")
        seen.add(name)

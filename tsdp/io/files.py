"""Reading and writing tables: CSV and Parquet chosen by extension, ``-`` for stdin/stdout.

Writes are atomic: every output is first written to a temporary file in its target directory and
renamed into place only when all outputs of a command are complete (:class:`AtomicOutputs`).
CSV writes zone-aware times as ISO 8601 with their UTC offset (``Z`` for UTC), so that the two
02:00 hours of a fall-back day stay distinct; Parquet keeps the zone-aware column.
An existing output is never replaced without ``force``, and an input is never an output.
"""

from __future__ import annotations

import hashlib
import io
import os
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from tsdp.errors import DataError, UsageError
from tsdp.io.inputs import HEADER_BYTES, check_header, check_input
from tsdp.io.publish import Staged, publish_all, writing

if TYPE_CHECKING:  # polars is imported where it is used: `tsdp --help` and `account verify` never pay for it
    import polars as pl

FORMATS = {".csv": "csv", ".parquet": "parquet", ".pq": "parquet", ".json": "json"}
# Inputs only (outputs are .csv or .parquet): compressed CSV and tab-separated text.
INPUT_FORMATS = {".csv.gz": "csv.gz", ".tsv": "tsv", ".tsv.gz": "tsv.gz"}
READABLE = ("csv", "csv.gz", "tsv", "tsv.gz", "parquet")
STDIO = "-"
CSV_DATETIME_FORMAT = "%Y-%m-%d %H:%M:%S%.f"  # zone-less times; fractional seconds only when present
# Snappy: readable by every Parquet implementation, and fast. Released values carry noise in
# every digit, so stronger codecs (zstd) buy little size for clearly more time.
PARQUET_COMPRESSION = "snappy"


def table_format(path: str | Path, option: str = "INPUT", allowed=None) -> str:
    """The format from the file extension (``-`` means CSV on stdin/stdout).

    ``allowed`` defaults to what can be read for ``INPUT`` (CSV, gzipped CSV, TSV, Parquet) and to
    ``csv``/``parquet`` for any other option (outputs).
    """
    if allowed is None:
        allowed = READABLE if option == "INPUT" else ("csv", "parquet")
    if str(path) == STDIO:
        return "csv"
    name = Path(path).name.lower()
    compound = next((f for e, f in INPUT_FORMATS.items() if name.endswith(e) and len(name) > len(e)), None)
    fmt = compound or FORMATS.get(Path(path).suffix.lower())
    if fmt not in allowed:
        known = {**FORMATS, **INPUT_FORMATS}
        exts = ", ".join(e for e, f in known.items() if f in allowed)
        raise UsageError(f"{option}: unknown file extension in {str(path)!r}; use one of {exts}")
    return fmt


def text_separator(fmt: str) -> str:
    """The field separator of a text format from :func:`table_format`: a tab for TSV, else a comma."""
    return "\t" if fmt.startswith("tsv") else ","


def read_table(path: str | Path, columns=None, rest: str | None = None) -> pl.DataFrame:
    """Read a CSV/TSV (optionally gzipped) or Parquet file, or stdin for ``-``, into a DataFrame.

    ``columns`` maps the columns the command needs to ``"number"``, ``"text"`` or ``"time"``, and
    ``rest`` gives the kind of every other column (``"number"`` for a wide layout), so that a CSV is
    read with bounded type inference plus that schema (see :mod:`tsdp.io.readers`).
    """
    from tsdp.io.readers import read_input

    return read_input(path, table_format(path), columns or {}, rest)


def read_numbers(path: str, option: str) -> list[float]:
    """Numbers from a small text file (one per line, or separated by commas or spaces)."""
    p = Path(path)
    if not p.is_file():
        raise UsageError(f"{option}: file {path!r} does not exist")
    tokens = p.read_text().replace(",", " ").split()
    try:
        values = [float(t) for t in tokens]
    except ValueError as exc:
        raise DataError(f"{option}: {path!r} holds a value that is not a number ({exc})") from None
    if not values:
        raise DataError(f"{option}: {path!r} holds no numbers")
    return values


def serialise_table(df: pl.DataFrame, fmt: str) -> bytes:
    """The bytes of ``df`` in ``fmt`` (used for stdout, where no file can be renamed)."""
    from tsdp.io.timezones import csv_ready

    buf = io.BytesIO()
    if fmt == "parquet":
        df.write_parquet(buf, compression=PARQUET_COMPRESSION)
    else:
        csv_ready(df).write_csv(buf, datetime_format=CSV_DATETIME_FORMAT)
    return buf.getvalue()


def sha256_file(path: str | Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def check_output_path(path: str | Path, force: bool, inputs: tuple = (), option: str = "--output") -> None:
    """Refuse an output that exists (without ``force``), is a directory, or is an input."""
    if str(path) == STDIO:
        return
    p = Path(path)
    for src in inputs:
        if str(src) != STDIO and Path(src).exists() and p.exists() and p.resolve() == Path(src).resolve():
            raise UsageError(f"{option}: {str(path)!r} is the input file; tsdp never modifies its input")
    if p.is_dir():
        raise UsageError(f"{option}: {str(path)!r} is a directory; give a file name")
    if p.exists() and not force:
        raise UsageError(f"{option}: {str(path)!r} already exists; pass --force to overwrite it")
    if not p.parent.exists():
        raise UsageError(f"{option}: directory {str(p.parent)!r} does not exist")
    if not p.parent.is_dir():
        raise UsageError(f"{option}: {str(p.parent)!r} is a file, not a directory")
    if not os.access(p.parent, os.W_OK | os.X_OK):  # early; publishing checks again (root passes this)
        raise UsageError(f"{option}: directory {str(p.parent)!r} is not writable; choose a directory you can "
                         "write to")


class _HashingWriter(io.RawIOBase):
    """A write-only file object that hashes what passes through it (sha256 while writing)."""

    def __init__(self, fh) -> None:
        super().__init__()
        self._fh = fh
        self.digest = hashlib.sha256()

    def writable(self) -> bool:
        return True

    def write(self, data) -> int:
        self.digest.update(data)
        return self._fh.write(data)


class AtomicOutputs:
    """Stage several output files and publish them together.

    ``stage_table``/``stage_bytes`` write to a hidden temporary file beside the target and return
    its sha256. ``commit()`` publishes every staged file at once (:func:`tsdp.io.publish.publish_all`:
    synced to disk, both or neither, and, unless ``replace``, never over a file that another process
    wrote meanwhile); leaving the ``with`` block without committing (an exception) deletes the
    temporaries, so no half-written output remains. ``option`` names a file's option in errors.
    """

    def __init__(self, replace: bool = False) -> None:
        self.replace = replace
        self._staged: list[Staged] = []
        self.stdout_payload: bytes | None = None

    def __enter__(self) -> "AtomicOutputs":
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        for item in self._staged:
            item.tmp.unlink(missing_ok=True)
        self._staged.clear()

    def _temp_beside(self, target: Path, option: str | None = None, private: bool = False) -> Path:
        with writing(target, option):
            fd, name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent or ".")
        os.close(fd)
        tmp = Path(name)
        self._staged.append(Staged(tmp, target, option, private))
        return tmp

    def stage_table(self, df, path: str | Path, option: str | None = "--output") -> str:
        """Stage ``df`` for ``path`` (format by extension); return the sha256 of its bytes.

        ``df`` is a DataFrame, or an iterable of DataFrames with one schema (a release streamed
        chunk by chunk), written as they come: Parquet row groups, or CSV blocks under one header.
        """
        import polars as pl

        from tsdp.io.timezones import csv_ready

        fmt = table_format(path, "--output")
        if not isinstance(df, pl.DataFrame):
            if str(path) == STDIO:
                df = pl.concat(list(df))
            else:
                return self._stage_stream(df, Path(path), fmt, option)
        if str(path) == STDIO:
            self.stdout_payload = serialise_table(df, fmt)
            return hashlib.sha256(self.stdout_payload).hexdigest()
        tmp = self._temp_beside(Path(path), option)
        with writing(path, option):
            # polars writes the file natively (through a Python file object every block would cross the
            # GIL); the staged file is then hashed from the page cache
            if fmt == "parquet":
                df.write_parquet(tmp, compression=PARQUET_COMPRESSION)
            else:
                csv_ready(df).write_csv(tmp, datetime_format=CSV_DATETIME_FORMAT)
            return sha256_file(tmp)

    def _stage_stream(self, frames, path: Path, fmt: str, option: str | None) -> str:
        from tsdp.io.timezones import csv_ready

        tmp = self._temp_beside(path, option)
        with writing(path, option), open(tmp, "wb") as fh:
            sink = _HashingWriter(fh)
            writer = None
            for k, frame in enumerate(frames):
                if fmt == "csv":
                    csv_ready(frame).write_csv(sink, include_header=k == 0, datetime_format=CSV_DATETIME_FORMAT)
                    continue
                table = frame.to_arrow()
                if writer is None:
                    import pyarrow.parquet as pq

                    writer = pq.ParquetWriter(sink, table.schema, compression=PARQUET_COMPRESSION)
                writer.write_table(table)
            if writer is not None:
                writer.close()
        return sink.digest.hexdigest()

    def stage_bytes(self, data: bytes, path: str | Path, private: bool = False, option: str | None = None) -> str:
        """Stage ``data`` for ``path``; ``private`` files (secrets) are published with mode 0600."""
        if str(path) == STDIO:
            self.stdout_payload = data
        else:
            tmp = self._temp_beside(Path(path), option, private)
            with writing(path, option):
                tmp.write_bytes(data)
        return hashlib.sha256(data).hexdigest()

    def commit(self, before_publish: Callable[[], None] | None = None) -> None:
        """Publish the staged files and what goes to stdout (``before_publish`` runs just before;
    stdout is written first, so that a closed pipe leaves no file published)."""
        publish_all(self._staged, self.replace, before_publish, self.stdout_payload)
        self._staged.clear()

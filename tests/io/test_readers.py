"""Input reading (tsdp.io.readers): bounded inference plus the command's schema, more formats, stdin."""

from __future__ import annotations

import gzip
import io
import json
import sys

import polars as pl
import pytest

from tsdp.errors import DataError, UsageError
from tsdp.io import readers
from tsdp.io.files import read_table, table_format

GAUSS = ["--epsilon", "1", "--delta", "1e-6", "--unit", "event", "--clip-min", "0", "--clip-max", "100",
         "--seed", "1", "-q"]


def long_csv(rows: int = 300, bad: tuple[int, str, str] | None = None, sep: str = ",") -> str:
    """A long table (id, t, v) whose ``bad = (row, column, text)`` cell is replaced (row 1-based)."""
    lines = [sep.join(["id", "t", "v"])]
    for i in range(rows):
        cells = {"id": "007" if i % 2 else "012", "t": str(i // 2), "v": str(i % 5)}
        if bad is not None and bad[0] == i + 1:
            cells[bad[1]] = bad[2]
        lines.append(sep.join(cells[c] for c in ("id", "t", "v")))
    return "\n".join(lines) + "\n"


def test_the_command_types_its_columns(tmp_path):
    path = tmp_path / "a.csv"
    path.write_text(long_csv(10))
    df = read_table(path, {"id": "text", "t": "time", "v": "number"})
    # integers in the sample do not make the value column integer, nor strip the ids' zeros
    assert df.schema == {"id": pl.String, "t": pl.Int64, "v": pl.Float64}
    assert df["id"][0] == "012"


def test_inference_is_bounded_and_a_late_surprise_is_read_as_text(tmp_path, monkeypatch):
    calls = []
    original = pl.read_csv
    monkeypatch.setattr(pl, "read_csv", lambda *a, **k: calls.append(k) or original(*a, **k))
    path = tmp_path / "a.csv"
    path.write_text(long_csv(300, bad=(250, "t", "2024-01-01")))  # integers for 249 rows, then a date
    df = read_table(path, {"v": "number"})
    assert df.schema["t"] == pl.String and df["t"][249] == "2024-01-01"
    assert all("infer_schema_length" not in k for k in calls)  # never the whole file
    assert len(calls) == 2  # one failed read, one with the column as text


@pytest.mark.parametrize("column, text", [("v", "x"), ("v", "1,5"), ("t", "noon")])
def test_a_bad_cell_after_the_sample_is_named_with_column_row_and_value(tsdp_cli, tmp_path, monkeypatch,
                                                                        column, text):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "in.csv").write_text(long_csv(300, bad=(257, column, text)).replace("1,5", '"1,5"'))
    run = tsdp_cli("release", "in.csv", "--series-col", "id", "--time-col", "t", "--value-col", "v", *GAUSS)
    assert run.code == 4
    assert f"column {column!r}" in run.error_line and "row 257" in run.error_line and text in run.error_line
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.csv"]


def test_numbers_with_blanks_still_parse(tmp_path):
    path = tmp_path / "a.csv"
    path.write_text("t,v\n1, 2 \n2,3\n")
    df = read_table(path, {"t": "time", "v": "number"})
    assert df["v"].dtype == pl.String  # re-read as text; the layout code strips and parses it


@pytest.mark.parametrize("name, fmt", [("a.csv.gz", "csv.gz"), ("a.tsv", "tsv"), ("A.TSV.GZ", "tsv.gz")])
def test_gzip_and_tab_separated_inputs(tmp_path, name, fmt):
    assert table_format(name) == fmt
    text = long_csv(5, sep="\t" if "tsv" in name.lower() else ",")
    data = gzip.compress(text.encode()) if name.lower().endswith(".gz") else text.encode()
    (tmp_path / name).write_bytes(data)
    df = read_table(tmp_path / name, {"id": "text", "v": "number"})
    assert df.columns == ["id", "t", "v"] and df.height == 5 and df["v"].dtype == pl.Float64
    with pytest.raises(UsageError, match="--output: unknown file extension"):
        table_format(name, "--output")  # inputs only


def test_release_of_a_gzipped_csv_writes_a_plain_csv(tsdp_cli, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "in.csv.gz").write_bytes(gzip.compress(long_csv(20).encode()))
    run = tsdp_cli("release", "in.csv.gz", "--series-col", "id", "--time-col", "t", "--value-col", "v", *GAUSS)
    assert run.code == 0, run.err
    out = pl.read_csv(tmp_path / "in.released.csv")
    assert out.height == 20
    assert json.loads((tmp_path / "in.released.report.json").read_text())["output"]["file"] == "in.released.csv"


def stdin_of(monkeypatch, data: bytes) -> None:
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data)))


def test_parquet_on_stdin_is_recognised_by_its_magic_bytes(monkeypatch):
    frame = pl.DataFrame({"t": [1, 2], "v": [0.5, 1.5]})
    buf = io.BytesIO()
    frame.write_parquet(buf)
    assert buf.getvalue()[:4] == readers.PARQUET_MAGIC
    stdin_of(monkeypatch, buf.getvalue())
    assert read_table("-").equals(frame)
    stdin_of(monkeypatch, b"t,v\n1,0.5\n")
    assert read_table("-", {"v": "number"}).rows() == [(1, 0.5)]


def test_unreadable_parquet_on_stdin_is_a_data_error(monkeypatch):
    stdin_of(monkeypatch, b"PAR1 and nothing else")
    with pytest.raises(DataError, match="INPUT: cannot parse '-' as parquet"):
        read_table("-")


def test_wide_layout_reads_every_other_column_as_numbers(tmp_path):
    path = tmp_path / "w.csv"
    path.write_text("t,a,b\n1,1,2\n2,3,4\n")
    assert read_table(path, {"t": "time"}, rest="number").schema == {"t": pl.Int64, "a": pl.Float64, "b": pl.Float64}


def test_spark_engine_refuses_formats_it_cannot_read():
    from tsdp.engine.spark import aggregate_events_spark

    with pytest.raises(UsageError, match="--engine spark reads .csv and .parquet"):
        aggregate_events_spark("events.tsv", job=None)

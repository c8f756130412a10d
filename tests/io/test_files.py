"""Reading tables and writing outputs atomically (tsdp.io.files)."""

from __future__ import annotations

import errno
import hashlib
import io
import os
import stat
import sys
from datetime import datetime
from pathlib import Path

import polars as pl
import pytest

from tsdp.errors import DataError, ResourceError, UsageError
from tsdp.io import files
from tsdp.io.files import AtomicOutputs, check_output_path, read_table, serialise_table, table_format

FRAME = pl.DataFrame({"time": [datetime(2024, 1, 1), datetime(2024, 1, 1, 1, 0, 0, 500_000)],
                      "value": [1.5, 2.0]})


def listing(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir())


# ---------------------------------------------------------------------------------------------
# Formats and reading
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("path, fmt", [("a.csv", "csv"), ("dir.x/A.CSV", "csv"), ("a.parquet", "parquet"),
                                       ("a.pq", "parquet"), ("-", "csv")])
def test_table_format(path, fmt):
    assert table_format(path) == fmt


@pytest.mark.parametrize("path", ["a.txt", "a", "a.csv.gz", "a.json", ".csv"])
def test_table_format_refuses(path):
    with pytest.raises(UsageError, match=r"--output: unknown file extension in .*; use one of \.csv, \.parquet, \.pq"):
        table_format(path, "--output")


def test_table_format_for_reports():
    assert table_format("r.json", "--report", allowed=("json",)) == "json"
    with pytest.raises(UsageError, match="--report: .*'r.csv'.*use one of .json"):
        table_format("r.csv", "--report", allowed=("json",))


def test_read_csv_and_parquet(tmp_path):
    FRAME.write_parquet(tmp_path / "a.parquet")
    assert read_table(tmp_path / "a.parquet").equals(FRAME)
    (tmp_path / "a.csv").write_text("time,value\n2024-01-01 00:00:00,1\n2024-01-01 01:00:00,x\n")
    df = read_table(str(tmp_path / "a.csv"))
    assert df.schema == {"time": pl.String, "value": pl.String}  # whole file inferred, nothing lost
    assert df["value"].to_list() == ["1", "x"]


def test_read_stdin(monkeypatch):
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"a,b\n1,2\n")))
    assert read_table("-").rows() == [(1, 2)]


def test_read_errors(tmp_path):
    with pytest.raises(UsageError, match="INPUT: file .*'.*missing.csv' does not exist"):
        read_table(tmp_path / "missing.csv")
    (tmp_path / "d.csv").mkdir()
    with pytest.raises(UsageError, match="is a directory"):
        read_table(tmp_path / "d.csv")
    with pytest.raises(UsageError, match="INPUT: unknown file extension"):
        read_table(tmp_path / "a.txt")
    (tmp_path / "bad.parquet").write_bytes(b"PAR1 but not really")
    with pytest.raises(DataError, match="INPUT: cannot parse .*bad.parquet.* as parquet") as info:
        read_table(tmp_path / "bad.parquet")
    assert "\n" not in str(info.value)
    (tmp_path / "ragged.csv").write_text("a,b\n1,2,3,4\n")
    with pytest.raises(DataError, match="as csv"):
        read_table(tmp_path / "ragged.csv")


def test_serialise_table_csv_time_format():
    text = serialise_table(FRAME, "csv").decode()
    assert text.splitlines() == ["time,value", "2024-01-01 00:00:00,1.5", "2024-01-01 01:00:00.500,2.0"]
    assert pl.read_parquet(io.BytesIO(serialise_table(FRAME, "parquet"))).equals(FRAME)


# ---------------------------------------------------------------------------------------------
# check_output_path
# ---------------------------------------------------------------------------------------------


def test_check_output_path(tmp_path):
    src = tmp_path / "in.csv"
    src.write_text("a\n1\n")
    check_output_path(tmp_path / "new.csv", False, (src,))
    check_output_path("-", False, (src,))
    (tmp_path / "old.csv").write_text("x\n")
    with pytest.raises(UsageError, match="--output: .*'.*old.csv' already exists; pass --force"):
        check_output_path(tmp_path / "old.csv", False, (src,))
    check_output_path(tmp_path / "old.csv", True, (src,))
    with pytest.raises(UsageError, match="is the input file"):
        check_output_path(src, True, (src,))
    (tmp_path / "sub").mkdir()
    with pytest.raises(UsageError, match="is the input file"):
        check_output_path(tmp_path / "sub" / ".." / "in.csv", True, ("-", src))
    with pytest.raises(UsageError, match="is a directory"):
        check_output_path(tmp_path / "sub", True)
    with pytest.raises(UsageError, match="--report: directory .*'.*nodir' does not exist"):
        check_output_path(tmp_path / "nodir" / "r.json", False, option="--report")
    with pytest.raises(UsageError, match="is a file, not a directory"):
        check_output_path(tmp_path / "old.csv" / "r.json", False)


def test_symlink_to_the_input_is_the_input(tmp_path):
    src = tmp_path / "in.csv"
    src.write_text("a\n1\n")
    (tmp_path / "link.csv").symlink_to(src)
    with pytest.raises(UsageError, match="is the input file"):
        check_output_path(tmp_path / "link.csv", True, (src,))


# ---------------------------------------------------------------------------------------------
# AtomicOutputs
# ---------------------------------------------------------------------------------------------


def test_staged_files_are_hidden_until_commit(tmp_path):
    with AtomicOutputs() as outputs:
        digest = outputs.stage_table(FRAME, tmp_path / "out.csv")
        outputs.stage_bytes(b"{}\n", tmp_path / "out.report.json")
        names = listing(tmp_path)
        assert len(names) == 2
        assert all(n.startswith((".out.csv.", ".out.report.json.")) and n.endswith(".tmp") for n in names)
        outputs.commit()
    assert listing(tmp_path) == ["out.csv", "out.report.json"]
    assert hashlib.sha256((tmp_path / "out.csv").read_bytes()).hexdigest() == digest
    assert (tmp_path / "out.csv").read_bytes() == serialise_table(FRAME, "csv")
    assert (tmp_path / "out.report.json").read_bytes() == b"{}\n"


def test_exception_leaves_nothing(tmp_path):
    with pytest.raises(RuntimeError, match="late failure"):
        with AtomicOutputs() as outputs:
            outputs.stage_table(FRAME, tmp_path / "out.parquet")
            outputs.stage_bytes(b"{}", tmp_path / "out.report.json")
            raise RuntimeError("late failure")
    assert listing(tmp_path) == []


def test_exception_while_staging_leaves_nothing(tmp_path, monkeypatch):
    def broken_write(self, *args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    with pytest.raises(ResourceError, match="--output: cannot write .*No space left on device"):
        with AtomicOutputs() as outputs:
            outputs.stage_bytes(b"{}", tmp_path / "r.json")
            monkeypatch.setattr(pl.DataFrame, "write_csv", broken_write)
            outputs.stage_table(FRAME, tmp_path / "out.csv")
    assert listing(tmp_path) == []


def test_exception_keeps_existing_files(tmp_path):
    (tmp_path / "out.csv").write_bytes(b"previous\n")
    with pytest.raises(KeyboardInterrupt):
        with AtomicOutputs() as outputs:
            outputs.stage_table(FRAME, tmp_path / "out.csv")
            raise KeyboardInterrupt
    assert listing(tmp_path) == ["out.csv"]
    assert (tmp_path / "out.csv").read_bytes() == b"previous\n"


def test_commit_replaces_existing_files(tmp_path):
    (tmp_path / "out.parquet").write_bytes(b"previous")
    with AtomicOutputs(replace=True) as outputs:
        digest = outputs.stage_table(FRAME, tmp_path / "out.parquet")
        outputs.commit()
    assert pl.read_parquet(tmp_path / "out.parquet").equals(FRAME)
    assert hashlib.sha256((tmp_path / "out.parquet").read_bytes()).hexdigest() == digest
    assert listing(tmp_path) == ["out.parquet"]


def test_published_files_follow_the_umask(tmp_path):
    old = os.umask(0o027)
    try:
        with AtomicOutputs() as outputs:
            outputs.stage_bytes(b"x", tmp_path / "r.json")
            outputs.commit()
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "r.json").stat().st_mode) == 0o640


def test_stdout_payload_is_written_on_commit_only(tmp_path, capsysbinary):
    with AtomicOutputs() as outputs:
        digest = outputs.stage_table(FRAME, "-")
        outputs.stage_bytes(b"{}", tmp_path / "r.json")
        assert capsysbinary.readouterr().out == b""
        outputs.commit()
    out = capsysbinary.readouterr().out
    assert out == serialise_table(FRAME, "csv")
    assert hashlib.sha256(out).hexdigest() == digest
    with pytest.raises(ValueError):
        with AtomicOutputs() as outputs:
            outputs.stage_table(FRAME, "-")
            raise ValueError
    assert capsysbinary.readouterr().out == b""


def test_stage_table_checks_the_extension(tmp_path):
    with AtomicOutputs() as outputs:
        with pytest.raises(UsageError, match="unknown file extension"):
            outputs.stage_table(FRAME, tmp_path / "out.txt")
    assert listing(tmp_path) == []
    assert files.STDIO == "-"

"""Long inputs larger than memory released in chunks of series (issue 12, item 2): the streamed
release equals the in-memory one cell for cell (same seed), errors name the input row, and the
chunks are removed."""

from __future__ import annotations

import json
from datetime import datetime, timedelta

import numpy as np
import polars as pl
import pytest
from typer.testing import CliRunner

from tsdp.cli.app import app
from tsdp.engine import series_stream
from tsdp.errors import DataError
from tsdp.io.load import InputSpec

SPEC = InputSpec(layout="long", time_col="time", value_col="value", series_col="sensor")


def long_frame(n_series: int = 120, n_steps: int = 50, seed: int = 2) -> pl.DataFrame:
    rng = np.random.default_rng(seed)
    start = datetime(2024, 1, 1)
    return pl.DataFrame({
        "sensor": np.repeat([f"s{i:03d}" for i in range(n_series)], n_steps),
        "time": [start + timedelta(hours=h) for h in range(n_steps)] * n_series,
        "value": rng.poisson(20, n_series * n_steps).astype(float),
    })


def release(path, out, *extra) -> pl.DataFrame:
    result = CliRunner().invoke(app, ["release", str(path), "--layout", "long", "--series-col", "sensor",
                                      "--time-col", "time", "--value-col", "value", "--unit", "event",
                                      "--max-per-step", "30", "--seed", "7", "-o", str(out), "--quiet", *extra])
    assert result.exit_code == 0, result.output
    return pl.read_parquet(out) if str(out).endswith(".parquet") else pl.read_csv(out)


@pytest.fixture
def chunked(monkeypatch):
    """Every input counts as larger than 64 MiB, in chunks of about 10 series."""
    monkeypatch.setattr(series_stream, "BYTES_PER_ROW", 1 << 20)
    monkeypatch.setattr(series_stream, "CHUNK_BYTES_PER_ROW", (64 << 20) // 750)
    calls = []
    tables = series_stream.SeriesChunks.tables
    monkeypatch.setattr(series_stream.SeriesChunks, "tables", lambda self: calls.append(self) or tables(self))
    return calls


@pytest.mark.parametrize("mechanism", [["--mechanism", "gaussian", "--epsilon", "1", "--delta", "1e-6"],
                                       ["--mechanism", "laplace", "--epsilon", "1"]], ids=["gaussian", "laplace"])
@pytest.mark.parametrize("fmt", ["parquet", "csv", "tsv"])
def test_streamed_release_equals_in_memory(tmp_path, chunked, mechanism, fmt):
    df = long_frame()
    path = tmp_path / f"long.{fmt}"
    df.write_parquet(path) if fmt == "parquet" else df.write_csv(path, separator="\t" if fmt == "tsv" else ",")
    fmt = "csv" if fmt == "tsv" else fmt  # the output's format (a .tsv input is released as CSV)
    whole = release(path, tmp_path / f"whole.{fmt}", *mechanism, "--memory-limit", "64GiB")
    assert chunked == []
    work = tmp_path / "work"
    work.mkdir()
    streamed = release(path, tmp_path / f"streamed.{fmt}", *mechanism, "--memory-limit", "64MiB",
                       "--work-dir", str(work))
    assert len(chunked) == 1 and chunked[0].n_chunks >= 10 and len({d for d, _ in chunked[0].parts}) <= 16
    assert streamed.equals(whole)
    assert list(work.iterdir()) == []
    reports = [json.loads((tmp_path / f"{name}.{fmt}").with_suffix(".report.json").read_text())
               for name in ("whole", "streamed")]
    for block in ("claim", "grid", "notes", "warnings"):
        assert reports[0][block] == reports[1][block]


def test_missing_steps_are_checked_against_the_whole_grid(tmp_path, chunked):
    """A chunk whose series all lack the last step is incomplete on the whole input's grid."""
    df = long_frame(n_series=40).filter(~((pl.col("sensor") < "s010") & (pl.col("time") == datetime(2024, 1, 3, 1))))
    path = tmp_path / "gaps.parquet"
    df.write_parquet(path)
    result = CliRunner().invoke(app, ["release", str(path), "--layout", "long", "--series-col", "sensor",
                                      "--time-col", "time", "--value-col", "value", "--unit", "event",
                                      "--max-per-step", "30", "--mechanism", "laplace", "--epsilon", "1",
                                      "-o", str(tmp_path / "o.parquet"), "--memory-limit", "64MiB"])
    assert isinstance(result.exception, DataError) and result.exception.exit_code == 4
    assert "series 's000' has 1 missing step(s)" in str(result.exception)
    filled = release(path, tmp_path / "f.parquet", "--mechanism", "laplace", "--epsilon", "1",
                     "--memory-limit", "64MiB", "--fill-missing", "zero")
    assert filled.height == 40 * 50


def test_errors_name_the_input_row(tmp_path):
    df = long_frame(n_series=30).with_columns(
        pl.when(pl.int_range(pl.len()) == 1234).then(pl.lit("x")).otherwise(pl.col("value").cast(pl.String))
        .alias("value"))
    path = tmp_path / "bad.csv"
    df.write_csv(path)
    with pytest.raises(DataError, match="non-numeric value 'x' at row 1235"):
        with series_stream.series_chunks(str(path), SPEC, memory_limit=1 << 16, work_dir=str(tmp_path)) as chunks:
            list(chunks.tables())


def test_streamed_output_is_checked_for_overflow_across_chunks():
    from tsdp.errors import NumericalError
    from tsdp.io.magnitudes import require_finite_output

    chunks = [pl.DataFrame({"value": [1.0, 2.0, 3.0]}), pl.DataFrame({"value": [4.0, float("inf")]})]
    checked = require_finite_output(iter(chunks))
    assert next(checked).equals(chunks[0])
    with pytest.raises(NumericalError, match="would hold inf at row 5"):
        next(checked)

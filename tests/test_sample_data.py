"""Checks on the bundled sample datasets in ``sample_data/``.

The bundled files must be exactly what ``sample_data/generate.py`` produces,
must stay small, and must have the structure that the docs and examples rely on.
"""

from __future__ import annotations

from datetime import date, datetime, timedelta
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from polars.testing import assert_frame_equal

SAMPLE_DIR = Path(__file__).parents[1] / "sample_data"
GENERATOR = SAMPLE_DIR / "generate.py"
MAX_BYTES = 2_000_000

FILES = (
    "traffic_hourly.parquet",
    "traffic_hourly_wide.csv",
    "events.csv",
    "itms_speeds.parquet",
    "qwi_quarterly.csv",
)

SENSORS = [f"s{i:02d}" for i in range(1, 21)]
SCHEMAS = {
    "traffic_hourly.parquet": {"sensor": pl.String, "time": pl.Datetime("us"), "count": pl.Int64},
    "traffic_hourly_wide.csv": {"time": pl.Datetime("us")} | {s: pl.Int64 for s in SENSORS},
    "events.csv": {"user_id": pl.String, "timestamp": pl.Datetime("us"), "station": pl.String},
    "itms_speeds.parquet": {
        "bus_id": pl.String,
        "timestamp": pl.Datetime("us"),
        "cell_id": pl.String,
        "speed": pl.Float64,
    },
    "qwi_quarterly.csv": {
        "quarter": pl.Date,
        "ca_white": pl.Float64,
        "ca_asian": pl.Float64,
        "md_montgomery": pl.Float64,
        "md_baltimore": pl.Float64,
    },
}


def _read(path: Path) -> pl.DataFrame:
    """Read a file the way a user would, with plain polars."""
    if path.suffix == ".parquet":
        return pl.read_parquet(path)
    return pl.read_csv(path, try_parse_dates=True)


@pytest.fixture(scope="module")
def gen():
    from tests.conftest import load_script

    return load_script(GENERATOR, "tsdp_sample_data_generate")


@pytest.fixture(scope="module")
def regen_dir(gen, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("regen")
    assert gen.main(["--out", str(out)]) == 0
    return out


@pytest.fixture(scope="module")
def data() -> dict[str, pl.DataFrame]:
    return {name: _read(SAMPLE_DIR / name) for name in FILES}


# --------------------------------------------------------------------------
# reproducibility, schema, size
# --------------------------------------------------------------------------
def test_generator_file_list(gen):
    assert tuple(gen.FILES) == FILES
    assert gen.__doc__ and "not** real Census data" in gen.__doc__


@pytest.mark.parametrize("name", FILES)
def test_bundled_file_is_what_the_script_makes(name, regen_dir, data):
    assert_frame_equal(data[name], _read(regen_dir / name))


def test_regeneration_is_deterministic(gen, regen_dir, tmp_path):
    gen.write_all(tmp_path)
    for name in FILES:
        assert_frame_equal(_read(tmp_path / name), _read(regen_dir / name))


def test_in_memory_frames_match_files(gen, data):
    built = gen.build_all()
    assert set(built) == set(FILES)
    for name in FILES:
        assert_frame_equal(built[name], data[name])


@pytest.mark.parametrize("name", FILES)
def test_schema(name, data):
    assert data[name].schema == pl.Schema(SCHEMAS[name])
    assert data[name].null_count().sum_horizontal().item() == 0


@pytest.mark.parametrize("name", FILES)
def test_size_limit(name):
    assert (SAMPLE_DIR / name).stat().st_size < MAX_BYTES


def test_readme_lists_every_file():
    readme = (SAMPLE_DIR / "README.md").read_text()
    for name in FILES:
        assert name in readme


# --------------------------------------------------------------------------
# traffic panel
# --------------------------------------------------------------------------
def test_traffic_panel_is_regular(data):
    df = data["traffic_hourly.parquet"]
    assert df.height == 20 * 2000
    assert sorted(df["sensor"].unique().to_list()) == SENSORS
    expected = pl.datetime_range(
        datetime(2024, 1, 1), datetime(2024, 1, 1) + timedelta(hours=1999), "1h", eager=True, time_unit="us"
    )
    for sensor, part in df.group_by("sensor"):
        assert part["time"].sort().equals(expected), sensor  # no gaps, no duplicates
    assert df.select(pl.struct("sensor", "time").is_unique().all()).item()


def test_traffic_counts_and_seasonality(data):
    df = data["traffic_hourly.parquet"]
    assert df["count"].min() >= 0
    means = df.group_by("sensor").agg(pl.col("count").mean())["count"]
    assert means.min() > 10 and means.max() < 500
    by_slot = (
        df.with_columns(hour=pl.col("time").dt.hour(), weekend=pl.col("time").dt.weekday() >= 6)
        .group_by("weekend", "hour")
        .agg(pl.col("count").mean())
    )

    def slot(weekend: bool, hour: int) -> float:
        return by_slot.filter(weekend=weekend, hour=hour)["count"].item()

    assert slot(False, 8) > 2 * slot(False, 3)  # morning rush
    assert slot(False, 17) > 2 * slot(False, 3)  # evening rush
    assert slot(True, 8) < slot(False, 8)  # lower weekends


def test_traffic_wide_matches_long(data):
    long, wide = data["traffic_hourly.parquet"], data["traffic_hourly_wide.csv"]
    assert wide.columns == ["time", *SENSORS]
    assert wide.height == 2000
    pivoted = long.pivot(on="sensor", index="time", values="count").sort("time")
    assert_frame_equal(pivoted.select(wide.columns), wide)
    first_line = (SAMPLE_DIR / "traffic_hourly_wide.csv").read_text().splitlines()[1]
    assert first_line.startswith("2024-01-01 00:00:00,")


# --------------------------------------------------------------------------
# raw events
# --------------------------------------------------------------------------
def test_events_structure(data):
    df = data["events.csv"]
    assert 30_000 <= df.height <= 60_000
    assert df["timestamp"].is_sorted()
    start = datetime(2024, 3, 4)
    assert df["timestamp"].min() >= start
    assert df["timestamp"].max() < start + timedelta(days=14)
    assert df["timestamp"].dt.date().n_unique() == 14
    assert (df["timestamp"].dt.microsecond() == 0).all()  # second resolution
    assert df["user_id"].str.contains(r"^u\d{5}$").all()
    assert sorted(df["station"].unique().to_list()) == ["st1", "st2", "st3", "st4", "st5"]
    assert 1_800 <= df["user_id"].n_unique() <= 2_000
    line = (SAMPLE_DIR / "events.csv").read_text().splitlines()[1]
    assert len(line.split(",")[1]) == len("2024-03-04 00:00:00")


def test_events_contribution_patterns(data):
    df = data["events.csv"]
    per_user = df.group_by("user_id").len()["len"]
    assert per_user.median() <= 10 and per_user.max() >= 200  # heavy-tailed
    per_user_hour = df.group_by("user_id", pl.col("timestamp").dt.truncate("1h")).len()
    assert per_user_hour["len"].max() > 1
    stations = df.group_by("user_id").agg(pl.col("station").n_unique())["station"]
    assert stations.max() == 2
    assert 0.05 <= (stations == 2).mean() <= 0.15
    hourly = df.group_by(pl.col("timestamp").dt.hour()).len()
    assert hourly.filter(timestamp=8)["len"].item() > 3 * hourly.filter(timestamp=3)["len"].item()


# --------------------------------------------------------------------------
# ITMS speeds
# --------------------------------------------------------------------------
def test_itms_structure(data):
    df = data["itms_speeds.parquet"]
    assert 20_000 <= df.height <= 40_000
    assert df["speed"].min() >= 0.0 and df["speed"].max() <= 65.0
    assert df["bus_id"].str.contains(r"^GJ\d{2}-\d{4}$").all()
    assert df["cell_id"].str.contains(r"^c0[0-4]_0[0-4]$").all()
    assert df["cell_id"].n_unique() == 25
    start = datetime(2024, 5, 6)
    assert df["timestamp"].min() >= start
    assert df["timestamp"].max() < start + timedelta(days=3)


def test_itms_records_per_bus(data):
    per_bus = data["itms_speeds.parquet"].group_by("bus_id").len()["len"]
    assert 400 <= per_bus.len() <= 700
    assert per_bus.max() == 417
    assert 30 <= per_bus.median() <= 70


def test_itms_trajectories(data):
    df = data["itms_speeds.parquet"].with_columns(
        row=pl.col("cell_id").str.slice(1, 2).cast(pl.Int32),
        col=pl.col("cell_id").str.slice(4, 2).cast(pl.Int32),
    )
    steps = df.select(
        dt=pl.col("timestamp").diff().over("bus_id").dt.total_seconds(),
        dr=pl.col("row").diff().over("bus_id").abs(),
        dc=pl.col("col").diff().over("bus_id").abs(),
    ).drop_nulls()
    assert steps["dt"].min() >= 30  # strictly increasing within a bus
    assert steps["dr"].max() <= 1 and steps["dc"].max() <= 1  # random walk on the grid


# --------------------------------------------------------------------------
# QWI-like quarterly series
# --------------------------------------------------------------------------
def test_qwi_quarters(data):
    df = data["qwi_quarterly.csv"]
    assert df.height == 100
    expected = pl.date_range(date(1995, 1, 1), date(2019, 10, 1), "3mo", eager=True)
    assert df["quarter"].equals(expected.alias("quarter"))


def test_qwi_levels_and_correlation(data):
    df = data["qwi_quarterly.csv"]
    ranges = {
        "ca_white": (5000, 8000),
        "ca_asian": (1500, 3000),
        "md_montgomery": (400, 550),
        "md_baltimore": (300, 400),
    }
    for name, (lo, hi) in ranges.items():
        assert lo <= df[name].min() and df[name].max() <= hi, name
    changes = df.select(pl.col("md_montgomery", "md_baltimore").log().diff()).drop_nulls().to_numpy()
    assert np.corrcoef(changes.T)[0, 1] > 0.9

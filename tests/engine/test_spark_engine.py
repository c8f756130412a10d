"""``--engine spark`` against the in-memory route (issue 12, item 3).

The Spark engine and ``aggregate_events`` on ``read_table(path)`` must produce identical integer
count panels, value panels equal to 1e-9 (float sums in another order), equal diagnostics and the
same time type, on inputs with ties in time (so the tie-break key decides which rows are kept),
many users, one user with most rows, more partitions than users, for every cap level, from CSV and
from Parquet split into many row groups and scan partitions. Data errors are one DataError naming
the input row, like the local engine's. One SparkSession in ``local[2]`` serves the whole module.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from contextlib import contextmanager
from datetime import datetime, timedelta
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from tsdp.engine.kernel import ORDER
from tsdp.errors import DataError, TsdpError, UsageError
from tsdp.engine.events import EventCaps, EventJob, assemble, partial_cell_sums
from tsdp.io.files import read_table

try:
    import pandas  # noqa: F401
    import pyspark  # noqa: F401
except ImportError:
    pytest.skip("pyspark or pandas is not installed (pip install 'tsdp[spark]')", allow_module_level=True)
if not (shutil.which("java") or (os.environ.get("JAVA_HOME")
                                 and os.access(os.path.join(os.environ["JAVA_HOME"], "bin", "java"), os.X_OK))):
    pytest.skip("Java (17 or newer) is not installed: the Spark engine needs it", allow_module_level=True)

from tsdp.engine import spark as engine  # noqa: E402

pytestmark = pytest.mark.slow

START = datetime(2024, 1, 1)
SMALL_SPLITS = "48k"  # several scan partitions (and Parquet row groups) per file


@pytest.fixture(scope="module")
def spark():
    session = engine.spark_session("local[2]", {"spark.sql.shuffle.partitions": "7",
                                                "spark.sql.files.maxPartitionBytes": SMALL_SPLITS})
    yield session
    session.stop()


@contextmanager
def spark_conf(session, **settings):
    """Spark SQL settings for one block (``spark_sql_x_y`` means ``spark.sql.x.y``)."""
    names = {k: k.replace("_", ".") for k in settings}
    old = {k: session.conf.get(names[k], None) for k in settings}
    for k, v in settings.items():
        session.conf.set(names[k], str(v))
    try:
        yield
    finally:
        for k, v in old.items():
            if v is None:
                session.conf.unset(names[k])
            else:
                session.conf.set(names[k], v)


def make_events(n: int = 12_000, n_users: int = 250, seed: int = 7) -> pl.DataFrame:
    """Events of many users, one of them ("heavy") with about 40% of the rows; times on a coarse
    grid so that a user often has several events at the same instant with different values; some
    rows outside the grid and of an undeclared series."""
    rng = np.random.default_rng(seed)
    users = np.where(rng.random(n) < 0.4, "heavy", np.char.add("u", rng.integers(0, n_users, n).astype(str)))
    minutes = rng.integers(0, 26 * 60, n) // 20 * 20 - 30  # 20-minute instants, some before/after the grid
    return pl.DataFrame({
        "user": users,
        "time": [START + timedelta(minutes=int(m)) for m in minutes],
        "station": rng.choice(["a", "b", "c", "z"], n, p=[0.4, 0.3, 0.2, 0.1]),
        "amount": rng.normal(2.0, 2.5, n).round(3),
    })


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    root = tmp_path_factory.mktemp("spark_events")
    df = make_events()
    df.write_csv(root / "events.csv")
    df.write_parquet(root / "events.parquet", row_group_size=1000)
    return {"csv": str(root / "events.csv"), "parquet": str(root / "events.parquet")}


CAPS = {
    "event": EventCaps(level="event", value_bound=5.0),
    "w-event": EventCaps(level="w-event", series_per_unit=1, max_per_step=2, value_bound=4.0),
    "user": EventCaps(level="user", series_per_unit=2, max_steps=6, max_per_step=1, value_bound=5.0),
    "user-norm": EventCaps(level="user", max_norm=6.0, value_bound=5.0),  # --max-norm: one factor per user
}


def job_for(caps: EventCaps, values: bool = True, series: bool = True, **grid) -> EventJob:
    grid = {"freq": "1h", "start": "2024-01-01", "end": "2024-01-02", **grid}
    return EventJob("user", "time", grid["freq"], grid["start"], grid["end"], caps,
                    series_col="station" if series else None,
                    series_keys=("a", "b", "c") if series else None,
                    value_col="amount" if values else None)


def local(path: str, job: EventJob):
    """The in-memory route of the local engine."""
    return assemble(job, [partial_cell_sums(read_table(path), job)])


def assert_same(got, want, counts: bool) -> None:
    a, b = got.table.frame, want.table.frame
    assert a.schema == b.schema
    value = got.table.value_cols[0]
    assert a.drop(value).equals(b.drop(value))
    if counts:
        assert a[value].to_list() == b[value].to_list()
        assert all(float(v).is_integer() for v in a[value])
    else:
        np.testing.assert_allclose(a[value].to_numpy(), b[value].to_numpy(), rtol=1e-9, atol=1e-9)
    assert got.diagnostics == want.diagnostics


# ------------------------------------------------------------------------------------------
# the tie-break key: the row number of the input file, whatever the partitioning
# ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("fmt", ["csv", "parquet"])
def test_key_equals_polars_row_index(spark, tmp_path, fmt):
    """ORDER (as the engine makes it) next to a column holding polars' with_row_index."""
    df = make_events(n=6000).with_row_index("rid")
    path = str(tmp_path / f"rows.{fmt}")
    df.write_csv(path) if fmt == "csv" else df.write_parquet(path, row_group_size=500)
    job = EventJob("rid", "time", "1h", "2024-01-01", "2024-01-02", CAPS["event"])
    with spark_conf(spark, spark_sql_files_maxPartitionBytes="16k"):
        from pyspark.sql import functions as F

        frame, rows, _ = engine._event_rows(spark, path, fmt, job)
        splits = frame.select(F.col("_metadata.file_block_start")).distinct().count()
        got = pl.from_arrow(rows.select("rid", ORDER).toArrow())
    assert splits >= 4  # the file is read as several scan partitions
    want = pl.read_parquet(path) if fmt == "parquet" else read_table(path)
    want = want.with_row_index(ORDER).select(pl.col("rid").cast(pl.String), pl.col(ORDER).cast(pl.Int64))
    got = got.select(pl.col("rid").cast(pl.String), pl.col(ORDER).cast(pl.Int64))
    assert got.sort(ORDER).equals(want)


# ------------------------------------------------------------------------------------------
# the same panels as the in-memory route
# ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("fmt", ["csv", "parquet"])
@pytest.mark.parametrize("level", list(CAPS))
def test_values_match_local(spark, files, fmt, level):
    job = job_for(CAPS[level])
    assert_same(engine.aggregate_events_spark(files[fmt], job, spark=spark), local(files[fmt], job), counts=False)


@pytest.mark.parametrize("fmt", ["csv", "parquet"])
@pytest.mark.parametrize("caps", [
    EventCaps(level="user", series_per_unit=1, max_steps=4, max_per_step=2),
    EventCaps(level="w-event", series_per_unit=2, max_per_step=1),
    EventCaps(level="event"),
], ids=["user", "w-event", "event"])
def test_counts_match_local(spark, files, fmt, caps):
    job = job_for(caps, values=False)
    assert_same(engine.aggregate_events_spark(files[fmt], job, spark=spark), local(files[fmt], job), counts=True)


def test_one_series_without_series_column(spark, files):
    job = job_for(EventCaps(level="user", max_steps=3, max_per_step=1, value_bound=3.0), series=False)
    assert_same(engine.aggregate_events_spark(files["parquet"], job, spark=spark), local(files["parquet"], job),
                counts=False)


def test_ties_decide_the_kept_rows(files):
    """The inputs above exercise the tie-break: reading the rows in another order changes the panel."""
    job = job_for(CAPS["user"])
    df = read_table(files["parquet"])
    forward = assemble(job, [partial_cell_sums(df, job)]).table.frame["amount"].to_numpy()
    backward = assemble(job, [partial_cell_sums(df.reverse(), job)]).table.frame["amount"].to_numpy()
    assert np.abs(forward - backward).max() > 0.1


@pytest.mark.parametrize("shuffle, split", [("1", "1m"), ("23", "20k")])
def test_partitioning_changes_nothing(spark, tmp_path, shuffle, split):
    """One partition, or many more partitions than users (most of them empty), and other scan
    splits: the same panel. Five users, one with most of the rows."""
    df = make_events(n=5000, n_users=4)
    path = str(tmp_path / "few_users.csv")
    df.write_csv(path)
    job = job_for(CAPS["user"])
    with spark_conf(spark, spark_sql_shuffle_partitions=shuffle, spark_sql_files_maxPartitionBytes=split,
                    spark_sql_adaptive_coalescePartitions_enabled="false"):
        got = engine.aggregate_events_spark(path, job, spark=spark)
    assert_same(got, local(path, job), counts=False)


def test_csv_integer_time(spark, tmp_path):
    rng = np.random.default_rng(3)
    n = 3000
    path = str(tmp_path / "int_time.csv")
    pl.DataFrame({"user": rng.integers(0, 40, n), "time": rng.integers(-5, 130, n) // 3 * 3,
                  "station": rng.choice(["a", "b", "c"], n), "amount": rng.integers(0, 9, n)}).write_csv(path)
    job = job_for(CAPS["user"], freq="10", start="0", end="120")
    want = local(path, job)
    assert want.table.frame.schema["time"] == pl.Int64
    assert_same(engine.aggregate_events_spark(path, job, spark=spark), want, counts=False)


def test_csv_dates_then_datetimes(spark, tmp_path):
    """A split holding only plain dates must parse as datetimes when the file also holds datetimes
    (as the local engine parses the whole column)."""
    rng = np.random.default_rng(4)
    n = 4000
    times = [f"2024-01-{1 + d:02d}" for d in rng.integers(0, 6, n // 2)]
    times += [f"2024-01-{1 + d:02d} {h:02d}:00:00" for d, h in zip(rng.integers(0, 6, n // 2), rng.integers(0, 24, n // 2))]
    path = str(tmp_path / "mixed.csv")
    pl.DataFrame({"user": rng.integers(0, 60, n).astype(str), "time": times,
                  "station": rng.choice(["a", "b"], n), "amount": rng.random(n).round(2)}).write_csv(path)
    job = job_for(CAPS["w-event"], freq="6h", start="2024-01-01", end="2024-01-07")
    want = local(path, job)
    assert isinstance(want.table.frame.schema["time"], pl.Datetime)
    with spark_conf(spark, spark_sql_files_maxPartitionBytes="16k"):
        got = engine.aggregate_events_spark(path, job, spark=spark)
    assert_same(got, want, counts=False)


def test_parquet_time_zone_and_unit(spark, tmp_path):
    df = make_events(n=3000).with_columns(pl.col("time").dt.replace_time_zone("Europe/Paris").dt.cast_time_unit("ms"))
    path = str(tmp_path / "zoned.parquet")
    df.write_parquet(path)
    job = job_for(CAPS["user"], freq="1d", start="2023-12-31", end="2024-01-03")
    want = local(path, job)
    assert_same(engine.aggregate_events_spark(path, job, spark=spark), want, counts=False)


def test_empty_input(spark, tmp_path):
    path = str(tmp_path / "empty.csv")
    pl.DataFrame(schema={"user": pl.String, "time": pl.String, "station": pl.String, "amount": pl.String}).write_csv(path)
    job = job_for(CAPS["user"], freq="1d", start="2024-01-01", end="2024-01-08")
    assert_same(engine.aggregate_events_spark(path, job, spark=spark), local(path, job), counts=False)


# ------------------------------------------------------------------------------------------
# errors
# ------------------------------------------------------------------------------------------


def local_error(path: str, job: EventJob) -> str:
    with pytest.raises(DataError) as info:
        local(path, job)
    return str(info.value)


@pytest.mark.parametrize("fmt", ["csv", "parquet"])
def test_bad_timestamp_names_the_input_row(spark, tmp_path, fmt):
    df = make_events(n=6000).with_columns(pl.col("time").dt.to_string("%Y-%m-%d %H:%M:%S"))
    df = df.with_columns(pl.when(pl.int_range(pl.len()).is_in([3210, 4500])).then(pl.lit("soon"))
                         .otherwise(pl.col("time")).alias("time"))
    path = str(tmp_path / f"bad_time.{fmt}")
    df.write_csv(path) if fmt == "csv" else df.write_parquet(path, row_group_size=500)
    job = job_for(CAPS["user"])
    with pytest.raises(DataError) as info:
        engine.aggregate_events_spark(path, job, spark=spark)
    message = str(info.value)
    assert "'soon' at row 3211;" in message and "\n" not in message
    assert message == local_error(path, job)


def test_missing_user_names_the_input_row(spark, tmp_path):
    df = make_events(n=4000)
    df = df.with_columns(pl.when(pl.int_range(pl.len()) == 2718).then(None).otherwise(pl.col("user")).alias("user"))
    path = str(tmp_path / "no_user.csv")
    df.write_csv(path)
    job = job_for(CAPS["user"])
    with pytest.raises(DataError, match="missing user id at row 2719$") as info:
        engine.aggregate_events_spark(path, job, spark=spark)
    assert str(info.value) == local_error(path, job)


def test_missing_column_and_bad_value(spark, files, tmp_path):
    job = EventJob("who", "time", "1h", "2024-01-01", "2024-01-02", CAPS["event"])
    with pytest.raises(DataError, match="--user-col: column 'who' not found; the input has columns: user, time"):
        engine.aggregate_events_spark(files["csv"], job, spark=spark)
    df = make_events(n=2000).with_columns(pl.col("amount").cast(pl.String))
    df = df.with_columns(pl.when(pl.int_range(pl.len()) == 1500).then(pl.lit("lots")).otherwise(pl.col("amount"))
                         .alias("amount"))
    path = str(tmp_path / "bad_value.csv")
    df.write_csv(path)
    with pytest.raises(DataError) as info:
        engine.aggregate_events_spark(path, job_for(CAPS["user"]), spark=spark)
    assert str(info.value) == local_error(path, job_for(CAPS["user"]))


def test_other_task_failure_is_one_line(spark, files, monkeypatch):
    def broken(job, hint, batches):
        raise RuntimeError("the kernel broke")

    monkeypatch.setitem(engine._LOG, "keep", engine._LOG["keep"])  # the suite leaves no kept log in /tmp
    with pytest.raises(TsdpError) as info:
        engine._aggregate(spark, files["parquet"], "parquet", job_for(CAPS["user"]), worker=broken)
    assert isinstance(info.value, engine.SparkJobError) and info.value.exit_code == 1
    assert "RuntimeError: the kernel broke" in str(info.value) and "\n" not in str(info.value)
    # the log the error names is kept for the user, and holds the task's traceback
    assert engine._LOG["keep"] and f"(Spark's log: {engine._LOG['path']})" in str(info.value)
    assert "the kernel broke" in Path(engine._LOG["path"]).read_text()


def test_missing_input_file(spark, tmp_path):
    with pytest.raises(UsageError, match="does not exist"):
        engine.aggregate_events_spark(str(tmp_path / "nope.csv"), job_for(CAPS["user"]), spark=spark)


def test_missing_pyspark_is_a_usage_error(monkeypatch, files):
    monkeypatch.setitem(sys.modules, "pyspark", None)
    with pytest.raises(UsageError, match=r"--engine spark needs the optional extra: pip install 'tsdp\[spark\]'"):
        engine.aggregate_events_spark(files["csv"], job_for(CAPS["user"]), master="local[1]")


def test_missing_java_is_a_usage_error(monkeypatch, tmp_path):
    monkeypatch.delenv("JAVA_HOME", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(UsageError, match="Java 17"):
        engine._java()
    monkeypatch.setenv("JAVA_HOME", str(tmp_path))
    with pytest.raises(UsageError, match="Java 17.*holds no bin/java"):
        engine._java()


FRESH = textwrap.dedent("""
    import sys
    from tsdp.engine.spark import aggregate_events_spark
    from tsdp.errors import TsdpError
    from tsdp.engine.events import EventCaps, EventJob
    job = EventJob("user", "time", "1h", "2024-01-01", "2024-01-02", EventCaps(level="user", max_per_step=1))
    try:
        agg = aggregate_events_spark(sys.argv[1], job, "local[1]")
    except TsdpError as exc:
        print(type(exc).__name__, exc)
    else:
        print("rows", int(agg.table.frame["count"].sum()))
""")


def test_fresh_process_without_java(tmp_path, files):
    """A process with no Java on PATH fails before starting Spark, with the usage error."""
    env = {k: v for k, v in os.environ.items() if k != "JAVA_HOME"} | {"PATH": str(tmp_path)}
    out = subprocess.run([sys.executable, "-c", FRESH, files["csv"]], env=env, capture_output=True, text=True,
                         timeout=120)
    assert out.stdout.startswith("UsageError --engine spark needs Java 17"), out
    assert out.stderr == ""


def test_fresh_process_is_quiet(tmp_path, files):
    """A full run in its own process: the result, and nothing from Spark or Java on stdout/stderr."""
    out = subprocess.run([sys.executable, "-c", FRESH, files["parquet"]], capture_output=True, text=True,
                         timeout=300)
    want = local(files["parquet"], EventJob("user", "time", "1h", "2024-01-01", "2024-01-02",
                                            EventCaps(level="user", max_per_step=1)))
    assert out.stdout == f"rows {int(want.table.frame['count'].sum())}\n", out
    assert out.stderr == ""


# ------------------------------------------------------------------------------------------
# the three routes side by side, and the command line
# ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("level", list(CAPS))
def test_spark_equals_local_sharded_and_unsharded(spark, files, tmp_path, level):
    """Spark, the local engine forced into user-hash shards, and the local engine in memory."""
    from tsdp.engine.local import aggregate_events_local

    job = job_for(CAPS[level], values=False)
    whole = aggregate_events_local(files["parquet"], job, memory_limit=1 << 40)
    sharded = aggregate_events_local(files["csv"], job, memory_limit=64 * 1024, work_dir=str(tmp_path))
    on_spark = engine.aggregate_events_spark(files["csv"], job, spark=spark)
    counts = CAPS[level].max_norm is None  # scaled counts are fractions, summed in each engine's order
    assert_same(sharded, whole, counts=counts)
    assert_same(on_spark, whole, counts=counts)


def test_release_cli_spark_equals_local(files, tmp_path):
    """`tsdp release --engine spark` publishes what `--engine local` publishes (same seed)."""
    from typer.testing import CliRunner

    from tsdp.cli.app import app

    common = [files["parquet"], "--layout", "events", "--user-col", "user", "--time-col", "time",
              "--series-col", "station", "--series-keys", "a,b,c", "--freq", "1h", "--start", "2024-01-01",
              "--end", "2024-01-02", "--mechanism", "gaussian", "--epsilon", "1", "--delta", "1e-6",
              "--unit", "user", "--max-steps", "4", "--max-per-step", "1", "--seed", "11"]
    outs = {}
    for name, extra in {"local": ["--engine", "local"],
                        "spark": ["--engine", "spark", "--spark-master", "local[2]"]}.items():
        out = tmp_path / f"{name}.csv"
        result = CliRunner().invoke(app, ["release", *common, *extra, "-o", str(out)])
        assert result.exit_code == 0, result.output
        outs[name] = pl.read_csv(out)
    assert outs["spark"].equals(outs["local"])

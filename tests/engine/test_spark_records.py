"""``mean-estimate --engine spark`` against the local engine (issue 12, item 3).

The runs of the Spark engine, of the local engine forced into user-hash shards and of the
in-memory route must be the same (counts, group starts, group keys with their dtypes, key
columns, max groups per user, notes) and give the same piece sums (array means equal to 1e-9),
for the baseline, array-averaging (bestfit, wraparound with the median m_UB) and quantile (opt
m_UB) estimators, from CSV and from Parquet read as many scan partitions, on inputs with ties in
time, many users, one heavy user and more shuffle partitions than users. Errors are the in-memory
route's. Large inputs come to the driver as chunks of whole groups cut by the records alone (issue
30: 10^8 records exceeded the driver's limits when every run was collected at once): the module's
session allows one action only Spark's smallest result size (1 MiB), which all the runs of one test
input exceed. One SparkSession in ``local[2]`` serves the whole module.
"""

from __future__ import annotations

import os
import shutil
import sys
from contextlib import contextmanager
from datetime import datetime, timedelta

import numpy as np
import polars as pl
import pytest

from tests.engine import record_cases
from tsdp.engine.records import record_runs
from tsdp.errors import DataError, UsageError
from tsdp.io.files import read_table
from tsdp.io.records import RecordSpec, load_records
from tsdp.mean import MeanSettings, prepare_from_runs, prepare_groups

try:
    import pandas  # noqa: F401
    import pyspark  # noqa: F401
except ImportError:
    pytest.skip("pyspark or pandas is not installed (pip install 'tsdp[spark]')", allow_module_level=True)
if not (shutil.which("java") or (os.environ.get("JAVA_HOME")
                                 and os.access(os.path.join(os.environ["JAVA_HOME"], "bin", "java"), os.X_OK))):
    pytest.skip("Java (17 or newer) is not installed: the Spark engine needs it", allow_module_level=True)

from tsdp.engine.spark import spark_session  # noqa: E402
from tsdp.engine.spark_records import spark_record_chunks, spark_record_runs  # noqa: E402

pytestmark = pytest.mark.slow

TINY = 1 << 16  # bytes: forces the local engine into user-hash shards on these inputs
START = datetime(2024, 5, 6)
SMALL_SPLITS = "48k"  # several scan partitions (and Parquet row groups) per file
RESULT_LIMIT = "1m"  # Spark's smallest limit on what one action may bring to the driver


@pytest.fixture(scope="module")
def spark():
    session = spark_session("local[2]", {"spark.sql.shuffle.partitions": "7",
                                         "spark.sql.files.maxPartitionBytes": SMALL_SPLITS,
                                         "spark.driver.maxResultSize": RESULT_LIMIT})
    yield session
    session.stop()


@contextmanager
def spark_conf(session, **settings):
    """Spark SQL settings for one block (``x_y`` means ``spark.sql.x.y``)."""
    names = {k: "spark.sql." + k.replace("_", ".") for k in settings}
    old = {k: session.conf.get(names[k], None) for k in settings}
    for k, v in settings.items():
        session.conf.set(names[k], str(v))
    try:
        yield
    finally:
        for k, v in old.items():
            session.conf.unset(names[k]) if v is None else session.conf.set(names[k], v)


@pytest.fixture(autouse=True)
def _runs_fit_any_limit(monkeypatch):
    """The tiny memory limits here only force shards; the per-run state check has its own test."""
    import tsdp.engine.records

    monkeypatch.setattr(tsdp.engine.records, "RUN_BYTES", 0)


def make_records(n: int = 9000, n_users: int = 300, seed: int = 5) -> pl.DataFrame:
    """Records of many users, one ("heavy") with 30% of them, at quarter hours (many ties in
    time within a user), in three cells and four integer zones."""
    rng = np.random.default_rng(seed)
    users = np.where(rng.random(n) < 0.3, "heavy", np.char.add("bus", rng.integers(0, n_users, n).astype(str)))
    minutes = rng.integers(0, 6 * 60, n) // 15 * 15
    return pl.DataFrame({
        "bus": users,
        "ts": [START + timedelta(minutes=int(m)) for m in minutes],
        "cell": rng.choice(["c1", "c2", "c3"], n, p=[0.5, 0.3, 0.2]),
        "zone": pl.Series(rng.integers(1, 12, n) // 3, dtype=pl.UInt16),
        "speed": rng.uniform(0, 65, n).round(2),
    })


def write(df: pl.DataFrame, path) -> str:
    if str(path).endswith(".csv"):
        df.write_csv(path)
    else:
        df.write_parquet(path, row_group_size=700)
    return str(path)


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    root = tmp_path_factory.mktemp("spark_records")
    df = make_records()
    return {fmt: write(df, root / f"records.{fmt}") for fmt in ("csv", "parquet")}


spec = record_cases.spec
SETTINGS = [s for s in record_cases.SETTINGS if s.algorithm != "levy"]


def assert_same_runs(got, want) -> None:
    """RecordRuns ``got`` against the in-memory Records ``want``."""
    assert got.counts.dtype == np.int64 and got.group_starts.dtype == np.int64
    np.testing.assert_array_equal(got.counts, want.counts)
    np.testing.assert_array_equal(got.group_starts, want.group_starts)
    assert got.groups.schema == want.groups.schema
    assert got.groups.equals(want.groups)
    assert got.key_columns == want.key_columns
    assert got.max_groups_per_user == want.max_groups_per_user
    assert (got.clipped, got.notes) == (want.clipped, want.notes)


def assert_same_estimates(got, want, settings: MeanSettings) -> None:
    """The prepared estimators of RecordRuns ``got`` against those of the in-memory ``want``."""
    a = prepare_from_runs(got.counts, got.group_starts, got.piece_sums, settings)
    b = prepare_groups(want.values, want.user_starts, want.group_starts, settings)
    for name in ("m_ub", "num_arrays", "records_used", "users", "arr_starts"):
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name))
    np.testing.assert_allclose(a.array_means, b.array_means, rtol=1e-9, atol=1e-9)
    if settings.algorithm == "baseline":
        np.testing.assert_allclose(a.group_mean, b.group_mean, rtol=1e-9, atol=1e-9)


def scan_partitions(session, path: str) -> int:
    from pyspark.sql import functions as F

    reader = session.read.option("header", True)
    frame = reader.csv(path) if path.endswith(".csv") else reader.parquet(path)
    return frame.select(F.spark_partition_id()).distinct().count()


# ------------------------------------------------------------------------------------------
# the three routes side by side
# ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("fmt", ["csv", "parquet"])
def test_spark_equals_local_sharded_and_in_memory(spark, files, tmp_path, fmt):
    path = files[fmt]
    want = load_records(read_table(path), spec())
    with spark_conf(spark, files_maxPartitionBytes="48k" if fmt == "csv" else "16k"):
        assert scan_partitions(spark, path) >= 4  # the file is read as several scan partitions
        with record_runs(path, spec(), memory_limit=TINY, work_dir=str(tmp_path)) as sharded, \
                spark_record_runs(path, spec(), spark=spark) as got:
            assert len(list(tmp_path.iterdir())) == 1  # the local engine did shard
            for runs in (sharded, got):
                assert_same_runs(runs, want)
            for settings in SETTINGS:
                assert_same_estimates(got, want, settings)
                assert_same_estimates(sharded, want, settings)
            np.testing.assert_allclose(got.true_means(), want.true_means(), rtol=1e-12)


def test_the_input_row_breaks_ties(files):
    """On this input the tie-break decides the result: reversing the rows changes the array
    means of capped users (so the equalities above test that Spark follows the input rows)."""
    df = read_table(files["parquet"])
    s = spec(group_by=("cell",), slot_length=None)
    means = [prepare_groups(r.values, r.user_starts, r.group_starts, SETTINGS[1]).array_means
             for r in (load_records(df, s), load_records(df.reverse(), s))]
    assert np.abs(means[0] - means[1]).max() > 1e-6


@pytest.mark.parametrize("shuffle, split", [("1", "1m"), ("11", "20k")])
def test_partitioning_changes_nothing(spark, tmp_path, shuffle, split):
    """One partition, or many more partitions than users (most of them empty): the same runs."""
    path = write(make_records(n=4000, n_users=4), tmp_path / "few_users.csv")
    want = load_records(read_table(path), spec())
    with spark_conf(spark, shuffle_partitions=shuffle, files_maxPartitionBytes=split,
                    adaptive_coalescePartitions_enabled="false"):
        with spark_record_runs(path, spec(), spark=spark) as got:
            assert_same_runs(got, want)
            assert_same_estimates(got, want, SETTINGS[2])


@pytest.mark.parametrize("fmt, kw", [
    ("parquet", dict(cell="c2", slot="2024-05-06 03:00:00", group_by=("zone",))),
    ("csv", dict(group_by=("zone", "slot"))),
    ("csv", dict(time_col=None, slot_length=None, group_by=())),
    ("parquet", dict(timezone="America/New_York", slot_length="30m")),
], ids=["cell-slot-uint16-key", "int-key", "no-time-no-groups", "zoned-slots"])
def test_selections_and_key_types(spark, files, tmp_path, fmt, kw):
    """One selected cell (and slot); keys typed as polars types them (an integer CSV column is
    Int64 and sorts as numbers; a UInt16 Parquet column, which Spark reads as int, stays UInt16;
    slots in a time zone keep it on their way through Spark as integers); no time column (records
    in input row order) and no groups. Spark and the sharded local
    engine against the in-memory route."""
    s = spec(**kw)
    want = load_records(read_table(files[fmt]), s)
    if "zone" in s.group_by:
        assert want.groups.schema["zone"] == (pl.Int64 if fmt == "csv" else pl.UInt16)
    with record_runs(files[fmt], s, memory_limit=TINY, work_dir=str(tmp_path)) as sharded, \
            spark_record_runs(files[fmt], s, spark=spark) as got:
        for runs in (sharded, got):
            assert_same_runs(runs, want)
            assert_same_estimates(runs, want, SETTINGS[1])


def expected_chunks(want, chunk_records: int) -> np.ndarray:
    """The chunk of every group: the groups starting within each ``chunk_records`` records."""
    per_group = np.add.reduceat(want.counts, want.group_starts[:-1])
    return (np.cumsum(per_group) - per_group) // chunk_records


@pytest.mark.parametrize("shuffle", ["1", "11"])
def test_chunks_are_whole_groups_cut_by_the_records_alone(spark, files, shuffle):
    """Several chunks, each whole groups in the canonical order, cut where the records say (the
    same whatever Spark's partitioning), together the in-memory runs and estimates."""
    want = load_records(read_table(files["parquet"]), spec())
    with spark_conf(spark, shuffle_partitions=shuffle, adaptive_coalescePartitions_enabled="false"):
        with spark_record_chunks(files["parquet"], spec(), spark=spark, chunk_records=700) as chunks:
            parts = list(chunks)
        with spark_record_runs(files["parquet"], spec(), spark=spark, chunk_records=700) as got:
            assert_same_runs(got, want)
            for settings in SETTINGS:
                assert_same_estimates(got, want, settings)
    cut = expected_chunks(want, 700)
    assert len(parts) == len(np.unique(cut)) >= 5
    assert [p.n_groups for p in parts] == np.unique(cut, return_counts=True)[1].tolist()
    assert pl.concat([p.groups for p in parts]).equals(want.groups)
    assert chunks.max_groups_per_user == want.max_groups_per_user
    assert chunks.dropped == want.dropped


def test_the_driver_receives_one_chunk_at_a_time(spark, tmp_path):
    """Runs that would be several MiB on the driver at once pass Spark's 1 MiB limit on what one
    action may return: the driver fetches a chunk at a time."""
    df = make_records(n=120_000, n_users=60_000, seed=9)
    path = write(df, tmp_path / "many_runs.parquet")
    want = load_records(df, spec())
    assert want.counts.size > 60_000  # (group, user) runs: some 2.5 MiB as keys, ids and counts
    with spark_record_runs(path, spec(), spark=spark, chunk_records=8_000) as got:
        assert_same_runs(got, want)
        assert_same_estimates(got, want, SETTINGS[1])


# ------------------------------------------------------------------------------------------
# errors
# ------------------------------------------------------------------------------------------


def in_memory_error(path: str, s: RecordSpec) -> str:
    with pytest.raises(DataError) as info:
        load_records(read_table(path), s)
    return str(info.value)


def spark_error(session, path: str, s: RecordSpec) -> str:
    with pytest.raises(DataError) as info:
        with spark_record_runs(path, s, spark=session):
            pass
    return str(info.value)


def test_out_of_bounds_counts_every_partition_and_names_the_earliest_row(spark, tmp_path):
    df = make_records(n=4000).with_columns(
        pl.when(pl.int_range(pl.len()).is_in([777, 1500, 2600, 3999])).then(99.0).otherwise(pl.col("speed"))
        .alias("speed"))
    path = write(df, tmp_path / "bad.parquet")
    from pyspark.sql import functions as F

    users = spark.createDataFrame([(u,) for u in df["bus"].gather([777, 1500, 2600, 3999]).unique()], "bus string")
    partitions = users.select(F.pmod(F.hash("bus"), F.lit(7)).alias("p")).distinct().count()
    assert partitions >= 2  # the values are in several partitions (Spark's hash partitioning)
    with spark_conf(spark, shuffle_partitions=7, adaptive_coalescePartitions_enabled="false"):
        message = spark_error(spark, path, spec())
    assert "4 value(s) outside the public bounds [0, 65], the first 99 at row 778 in group cell=" in message
    assert message == in_memory_error(path, spec())


def test_missing_user_names_the_input_row(spark, tmp_path):
    df = make_records(n=3000).with_columns(
        pl.when(pl.int_range(pl.len()).is_in([2345, 2900])).then(None).otherwise(pl.col("bus")).alias("bus"))
    path = write(df, tmp_path / "nouser.csv")
    message = spark_error(spark, path, spec())
    assert "missing user id at row 2346;" in message and "\n" not in message
    assert message == in_memory_error(path, spec())


def test_column_errors_name_the_input_columns(spark, files):
    for s in (spec(group_by=("nope",)), spec(user_col="who")):
        assert spark_error(spark, files["parquet"], s) == in_memory_error(files["parquet"], s)


def test_empty_selection(spark, files):
    """--cell declares its group: no runs, the declared group, as in memory (no error)."""
    s = spec(cell="nope", group_by=())
    with spark_record_runs(files["parquet"], s, spark=spark) as runs:
        assert runs.n_groups == 0 and runs.declared.to_dicts() == [{"cell": "nope"}]
    assert load_records(read_table(files["parquet"]), s).declared.to_dicts() == [{"cell": "nope"}]


def test_missing_pyspark_is_a_usage_error(monkeypatch, files):
    monkeypatch.setitem(sys.modules, "pyspark", None)
    with pytest.raises(UsageError, match=r"--engine spark needs the optional extra: pip install 'tsdp\[spark\]'"):
        with spark_record_runs(files["csv"], spec(), master="local[1]"):
            pass


# ------------------------------------------------------------------------------------------
# the command line (last: the run stops the module's session when it ends)
# ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("participation, rows", [
    (["--participation", "public"], 18),
    (["--group-keys", "c1,c3,c9", "--start", "2024-05-06 00:00", "--end", "2024-05-06 07:00", "--arrays", "6",
      "--m-ub", "4"], 21)], ids=["public", "private"])
def test_cli_mean_estimate_spark_equals_local(files, tmp_path, participation, rows):
    """`tsdp mean-estimate --engine spark` publishes what `--engine local` publishes (same seed)."""
    from typer.testing import CliRunner

    from tsdp.cli.app import app

    common = [files["csv"], "--user-col", "bus", "--value-col", "speed", "--upper", "65", "--epsilon", "1",
              "--time-col", "ts", "--cell-col", "cell", "--group-by", "cell,slot", "--epsilon-per-group-ok",
              "--algorithm", "array-averaging", "--seed", "3", *participation]
    outs = {}
    for name, extra in {"local": ["--engine", "local"],
                        "spark": ["--engine", "spark", "--spark-master", "local[2]"]}.items():
        out = tmp_path / f"{name}.csv"
        result = CliRunner().invoke(app, ["mean-estimate", *common, *extra, "-o", str(out)])
        assert result.exit_code == 0, result.output
        outs[name] = pl.read_csv(out)
    assert outs["local"].height == rows  # 3 cells x 6 hourly slots (declared: 3 x 7)
    assert outs["spark"].drop("estimate").equals(outs["local"].drop("estimate"))
    np.testing.assert_allclose(outs["spark"]["estimate"], outs["local"]["estimate"], rtol=1e-9)


def test_cli_chunked_spark_runs_are_the_same_on_any_cluster(files, tmp_path, monkeypatch):
    """Chunks of whole groups cut by the records alone (a seeded run draws its noise chunk by
    chunk): the same estimates whatever Spark's partitioning, and every column but the noisy
    estimate as --engine local."""
    from typer.testing import CliRunner

    import tsdp.engine.spark_records
    from tsdp.cli.app import app

    monkeypatch.setattr(tsdp.engine.spark_records, "CHUNK_RECORDS", 1500)
    merged = []
    merge = tsdp.engine.spark_records.merge_runs
    monkeypatch.setattr(tsdp.engine.spark_records, "merge_runs", lambda *a: merged.append(1) or merge(*a))
    common = [files["parquet"], "--user-col", "bus", "--value-col", "speed", "--upper", "65", "--epsilon", "1",
              "--time-col", "ts", "--cell-col", "cell", "--group-by", "cell,slot", "--epsilon-per-group-ok",
              "--participation", "public", "--algorithm", "array-averaging", "--seed", "3"]
    outs = {}
    for name, extra in {"local": ["--engine", "local"],
                        "spark3": ["--engine", "spark", "--spark-master", "local[2]",
                                   "--spark-conf", "spark.sql.shuffle.partitions=3"],
                        "spark13": ["--engine", "spark", "--spark-master", "local[1]",
                                    "--spark-conf", "spark.sql.shuffle.partitions=13"]}.items():
        out = tmp_path / f"{name}.csv"
        result = CliRunner().invoke(app, ["mean-estimate", *common, *extra, "-o", str(out)])
        assert result.exit_code == 0, result.output
        outs[name] = pl.read_csv(out)
    assert len(merged) >= 2 * 5  # each Spark run estimated five chunks or more
    assert outs["spark3"].equals(outs["spark13"])
    assert outs["spark3"].drop("estimate").equals(outs["local"].drop("estimate"))

"""``mean-estimate`` over inputs larger than memory, shards by group range (issue 12): every chunk
holds whole groups in the canonical order, and the per-group structure and array means equal the
in-memory route and the user-hash route (1e-9), on inputs with ties in time, many users, one heavy
user in every group, and shards left empty by a selection."""

from __future__ import annotations

import json

from datetime import datetime, timedelta

import numpy as np
import polars as pl
import pytest

from tests.engine import record_cases
from tsdp.engine import group_ranges
from tsdp.engine import records as engine
from tsdp.errors import DataError
from tsdp.io.files import read_table
from tsdp.io.records import RecordSpec, load_records
from tsdp.mean import MeanSettings, prepare_from_runs, prepare_groups

START = datetime(2024, 5, 6)
N = 12_000
# 12,000 rows of 240 "bytes" (in memory) in a limit of 1.8 MB: shards of 3,000 rows of 400 "bytes"
# (group_ranges.BYTES_PER_ROW), each cell (about 1,000 rows) below half of that
LIMIT = 1_800_000
FIELDS = ("users", "records_total", "m_max", "m_min", "m_ub", "num_arrays", "k_wraparound", "records_used")


@pytest.fixture(autouse=True)
def _runs_fit_any_limit(monkeypatch):
    """The small limits here only force shards; the user-hash route's run check has its own test."""
    monkeypatch.setattr(engine, "RUN_BYTES", 0)


def make_records(n: int = N, n_users: int = 400, seed: int = 11) -> pl.DataFrame:
    rng = np.random.default_rng(seed)
    users = np.where(rng.random(n) < 0.2, "heavy", np.char.add("bus", rng.integers(0, n_users, n).astype(str)))
    minutes = rng.integers(0, 6 * 60, n) // 20 * 20  # many ties in time within a user
    return pl.DataFrame({
        "bus": users,
        "ts": [START + timedelta(minutes=int(m)) for m in minutes],
        "cell": np.char.add("c", rng.integers(0, 12, n).astype(str)),  # c0, c1, c10, c11, c2, ...
        "speed": rng.uniform(0, 65, n).round(2),
    })


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    root = tmp_path_factory.mktemp("group_ranges")
    df = make_records()
    df.write_csv(root / "records.csv")
    df.write_parquet(root / "records.parquet", row_group_size=900)
    return {"csv": str(root / "records.csv"), "parquet": str(root / "records.parquet")}


spec = record_cases.spec
SETTINGS = record_cases.SETTINGS


def chunked(path: str, s: RecordSpec, settings: MeanSettings, tmp_path, limit: int = LIMIT):
    """(chunks' prepared structures, their group keys, the RecordChunks) of the local engine."""
    preps, keys = [], []
    tmp_path.mkdir(exist_ok=True)
    with engine.record_chunks(path, s, memory_limit=limit, work_dir=str(tmp_path)) as chunks:
        for runs in chunks:
            preps.append(prepare_from_runs(runs.counts, runs.group_starts, runs.piece_sums, settings))
            keys.append(runs.groups)
    assert list(tmp_path.iterdir()) == []  # the shards are removed at the end of the block
    return preps, keys, chunks


def assert_same(preps, want, settings):
    """The chunks' per-group figures, concatenated, equal ``want`` (one Prepared of all groups)."""
    for name in FIELDS:
        np.testing.assert_array_equal(np.concatenate([getattr(p, name) for p in preps]), getattr(want, name))
    sizes = np.concatenate([np.diff(p.arr_starts) for p in preps])
    np.testing.assert_array_equal(sizes, np.diff(want.arr_starts))
    np.testing.assert_allclose(np.concatenate([p.array_means for p in preps]), want.array_means,
                               rtol=1e-9, atol=1e-9)
    if settings.algorithm == "baseline":
        np.testing.assert_allclose(np.concatenate([p.group_mean for p in preps]), want.group_mean, rtol=1e-9)


@pytest.mark.parametrize("fmt", ["csv", "parquet"])
@pytest.mark.parametrize("settings", SETTINGS, ids=lambda s: f"{s.algorithm}-{s.grouping}")
def test_group_ranges_equal_in_memory_and_user_shards(files, tmp_path, fmt, settings):
    whole = load_records(read_table(files[fmt]), spec())
    want = prepare_groups(whole.values, whole.user_starts, whole.group_starts, settings)
    preps, keys, chunks = chunked(files[fmt], spec(), settings, tmp_path / "a")
    assert not chunks.single and len(preps) >= 2  # shards of whole groups
    assert pl.concat(keys).equals(whole.groups)  # every group once, in the canonical order
    assert chunks.n_groups == whole.n_groups
    assert chunks.max_groups_per_user == whole.max_groups_per_user  # the heavy user spans every shard
    assert_same(preps, want, settings)
    with engine.record_runs(files[fmt], spec(), memory_limit=1 << 16, work_dir=str(tmp_path)) as hashed:
        by_user = prepare_from_runs(hashed.counts, hashed.group_starts, hashed.piece_sums, settings)
    assert_same(preps, by_user, settings)


def test_the_keys_polars_derives(files):
    """Parquet times give the slot lazily (both keys); CSV times are text, so only the cell."""
    parquet = engine.scan_records(files["parquet"], spec())
    csv = engine.scan_records(files["csv"], spec())
    assert len(group_ranges.lazy_group_keys(spec(), parquet.collect_schema())) == 2
    assert len(group_ranges.lazy_group_keys(spec(), csv.collect_schema())) == 1
    assert group_ranges.lazy_group_keys(spec(group_by=("slot", "cell")), csv.collect_schema()) == []
    assert group_ranges.lazy_group_keys(spec(group_by=()), parquet.collect_schema()) == []


def test_slot_first_on_text_times_uses_user_shards(files, tmp_path):
    """No leading key polars can derive: one chunk from the user-hash shards, same figures."""
    s = spec(group_by=("slot", "cell"))
    whole = load_records(read_table(files["csv"]), s)
    preps, _, chunks = chunked(files["csv"], s, SETTINGS[1], tmp_path / "a")
    assert chunks.single
    assert_same(preps, prepare_groups(whole.values, whole.user_starts, whole.group_starts, SETTINGS[1]),
                SETTINGS[1])


def test_a_group_larger_than_half_a_shard_uses_user_shards(files, tmp_path):
    s = spec(group_by=("cell",), slot_length=None)  # about 1,000 rows per cell
    preps, _, chunks = chunked(files["parquet"], s, SETTINGS[1], tmp_path / "a", limit=400_000)
    assert chunks.single
    whole = load_records(read_table(files["parquet"]), s)
    assert_same(preps, prepare_groups(whole.values, whole.user_starts, whole.group_starts, SETTINGS[1]),
                SETTINGS[1])


def test_a_selection_leaves_shards_empty(files, tmp_path):
    """--cell c3 --slot 02:00: one group; the shards without it yield no chunk."""
    s = spec(cell="c3", slot="2024-05-06 02:00:00", group_by=())
    whole = load_records(read_table(files["parquet"]), s)
    preps, keys, chunks = chunked(files["parquet"], s, SETTINGS[3], tmp_path / "a")
    assert not chunks.single and len(preps) == 1
    assert keys[0].equals(whole.groups)
    assert_same(preps, prepare_groups(whole.values, whole.user_starts, whole.group_starts, SETTINGS[3]),
                SETTINGS[3])


def test_empty_selection_is_one_empty_group(files, tmp_path):
    """--cell declares its group: without records it is one empty chunk carrying the declared group
    (its row is released without records), never an error that one user's records could decide."""
    tmp_path.mkdir(exist_ok=True)
    with engine.record_chunks(files["parquet"], spec(cell="nope", group_by=()), memory_limit=LIMIT,
                              work_dir=str(tmp_path)) as chunks:
        runs = list(chunks)
    assert [r.n_groups for r in runs] == [0] and runs[0].declared.to_dicts() == [{"cell": "nope"}]
    assert chunks.dropped == 12_000


def data_errors(df: pl.DataFrame, s: RecordSpec, tmp_path) -> tuple[str, str]:
    """The DataError of ``df``'s records in memory and over shards of whole groups (whose
    scratch directory is left empty)."""
    path = str(tmp_path / "bad.parquet")
    df.write_parquet(path)
    with pytest.raises(DataError) as whole:
        load_records(read_table(path), s)
    work = tmp_path / "work"
    work.mkdir()
    with pytest.raises(DataError) as chunks:
        chunked(path, s, SETTINGS[1], work)
    assert list(work.iterdir()) == []
    return str(whole.value), str(chunks.value)


def test_out_of_bounds_counts_every_shard_and_names_the_earliest_row(tmp_path):
    df = make_records().with_columns(
        pl.when(pl.int_range(pl.len()).is_in([777, 5000, 11999])).then(99.0).otherwise(pl.col("speed")).alias("speed"))
    whole, chunks = data_errors(df, spec(), tmp_path)
    assert "3 value(s) outside the public bounds [0, 65], the first 99 at row 778 " in whole
    assert chunks == whole


# --participation private: declared cells (c5 left out, c99 without records, in the middle of the
# order: c0, c1, c10, c11, c2, c3, c4, c6, c7, c8, c9, c99) and slots (06:00 without records, last)
PRIVATE = ["--group-keys", ",".join([f"c{i}" for i in range(12) if i != 5] + ["c99"]),
           "--start", "2024-05-06 00:00", "--end", "2024-05-06 07:00", "--arrays", "8", "--m-ub", "5"]
PARTICIPATION = {"public": ["--participation", "public"], "private": PRIVATE}


@pytest.mark.parametrize("participation", ["public", "private"])
def test_cli_group_ranges_equal_in_memory(files, tmp_path, monkeypatch, participation):
    """`tsdp mean-estimate` over the memory limit writes the groups' rows chunk by chunk: the
    same groups, structure and (up to the noise, drawn chunk by chunk) estimates' scales, and the
    same custodian figures. With declared groups, those without records (between chunks and after
    the last) get their rows in the declared order."""
    from typer.testing import CliRunner

    from tsdp.cli.app import app

    monkeypatch.setattr(engine, "BYTES_PER_ROW", 8_000)  # 12,000 rows "need" 96 MB: shards at 64MiB
    monkeypatch.setattr(group_ranges, "BYTES_PER_ROW", 8_000)  # of about 5,600 rows
    common = [files["parquet"], "--user-col", "bus", "--value-col", "speed", "--upper", "65",
              "--epsilon", "1", "--time-col", "ts", "--cell-col", "cell", "--group-by", "cell,slot",
              "--epsilon-per-group-ok", "--seed", "3", "--algorithm", "array-averaging", *PARTICIPATION[participation]]
    outs, custodians = {}, {}
    for name, extra in {"memory": ["--memory-limit", "8GiB"], "ranges": ["--memory-limit", "64MiB"]}.items():
        out = tmp_path / f"{name}.parquet"
        result = CliRunner().invoke(app, ["mean-estimate", *common, *extra, "-o", str(out)])
        assert result.exit_code == 0, result.output
        outs[name] = pl.read_parquet(out)
        custodians[name] = next(tmp_path.glob(f"{name}*custodian*")).read_text()
    import pyarrow.parquet as pq

    assert pq.ParquetFile(tmp_path / "ranges.parquet").num_row_groups >= 2  # written chunk by chunk
    assert outs["memory"].drop("estimate").equals(outs["ranges"].drop("estimate"))
    assert custodians["memory"] == custodians["ranges"]
    if participation == "private":
        assert outs["ranges"].height == 12 * 7 and "users" not in outs["ranges"].columns
        assert outs["ranges"]["cell"].unique(maintain_order=True).to_list()[-1] == "c99"
        assert json.loads(custodians["ranges"])["figures"]["records_outside_declared_groups"] == int(
            (make_records()["cell"] == "c5").sum())


def test_integer_user_ids_are_ordered_as_text(tmp_path):
    """Users within a group come in the order of their ids as text ("10" < "9"), in every shard:
    the global user codes joined while sharding give the in-memory order."""
    df = make_records().with_columns(
        pl.col("bus").str.replace("heavy", "bus7").str.strip_prefix("bus").cast(pl.Int64).alias("bus"))
    path = str(tmp_path / "ints.parquet")
    df.write_parquet(path)
    whole = load_records(read_table(path), spec())
    for settings in (SETTINGS[1], SETTINGS[4]):
        preps, keys, chunks = chunked(path, spec(), settings, tmp_path / "a")
        assert not chunks.single
        assert chunks.max_groups_per_user == whole.max_groups_per_user
        assert_same(preps, prepare_groups(whole.values, whole.user_starts, whole.group_starts, settings), settings)


@pytest.mark.parametrize("participation, groups", [("public", 72), ("private", 66)])
def test_cli_evaluate_runs_chunk_by_chunk(files, tmp_path, monkeypatch, participation, groups):
    """--evaluate over the memory limit: one MAE per group with records, every group of every shard."""
    from typer.testing import CliRunner

    from tsdp.cli.app import app

    monkeypatch.setattr(engine, "BYTES_PER_ROW", 8_000)
    monkeypatch.setattr(group_ranges, "BYTES_PER_ROW", 8_000)
    calls = []
    chunks_of = group_ranges.group_range_chunks
    monkeypatch.setattr(group_ranges, "group_range_chunks", lambda *a: calls.append(1) or chunks_of(*a))
    result = CliRunner().invoke(app, [
        "mean-estimate", files["parquet"], "--user-col", "bus", "--value-col", "speed", "--upper", "65",
        "--epsilon", "1", "--time-col", "ts", "--cell-col", "cell", "--group-by", "cell,slot",
        "--epsilon-per-group-ok", "--seed", "3", "--evaluate", "3", "--memory-limit", "64MiB",
        "--work-dir", str(tmp_path), "--json", *PARTICIPATION[participation]])
    assert result.exit_code == 0, result.output
    assert calls == [1]
    assert f'"groups": {groups}' in result.stdout
    assert list(tmp_path.iterdir()) == []


# Declared groups (c5 left out, c99 without records; the slots of the first six hours): every key
# is declared and polars derives both from Parquet, so the shards carry each record's declared
# group instead of its keys (group_ranges.shard_coding).
DECLARED_CELLS = tuple([f"c{i}" for i in range(12) if i != 5] + ["c99"])


def declared_spec(**kw) -> RecordSpec:
    return spec(group_keys=DECLARED_CELLS, start="2024-05-06 00:00", end="2024-05-06 06:00", **kw)


def shard_columns(monkeypatch) -> list:
    """The columns of every shard load_records reads (a spy on the local engine's loader)."""
    from tsdp.io import records as io_records

    seen, real = [], io_records.load_records

    def spy(df, *args, **kwargs):
        seen.append((list(df.columns), kwargs.get("coded") is not None))
        return real(df, *args, **kwargs)

    monkeypatch.setattr(io_records, "load_records", spy)
    return seen


@pytest.mark.parametrize("settings", SETTINGS, ids=lambda s: f"{s.algorithm}-{s.grouping}")
def test_declared_groups_shard_coded_and_equal_in_memory(files, tmp_path, monkeypatch, settings):
    seen = shard_columns(monkeypatch)
    whole = load_records(read_table(files["parquet"]), declared_spec())
    preps, keys, chunks = chunked(files["parquet"], declared_spec(), settings, tmp_path / "a")
    assert len(seen) >= 2 and all(coded and "cell" not in columns for columns, coded in seen)
    assert not chunks.single and len(preps) >= 2
    assert pl.concat(keys).equals(whole.groups)
    assert chunks.dropped == whole.dropped > 0  # c5's records and those after 06:00
    assert chunks.max_groups_per_user == whole.max_groups_per_user
    assert_same(preps, prepare_groups(whole.values, whole.user_starts, whole.group_starts, settings), settings)


@pytest.mark.parametrize("declared", [False, True])
def test_null_group_key_names_the_input_row(tmp_path, monkeypatch, declared):
    """With declared groups too: a missing cell would hide from the declared index, so such inputs
    shard their keys, and the error names the input row as in memory."""
    seen = shard_columns(monkeypatch)
    df = make_records().with_columns(
        pl.when(pl.int_range(pl.len()) == 4321).then(None).otherwise(pl.col("cell")).alias("cell"))
    path = str(tmp_path / "nullkey.parquet")
    df.write_parquet(path)
    work = tmp_path / "work"
    work.mkdir()
    with pytest.raises(DataError, match="missing group key at row 4322"):
        chunked(path, declared_spec() if declared else spec(), SETTINGS[1], work)
    assert seen and not any(coded for _, coded in seen)


@pytest.mark.parametrize("bad", [99.0, float("nan")])
def test_a_bad_value_with_declared_groups_is_named_as_in_memory(tmp_path, bad):
    """Values are checked on every record read, declared group or not, as in memory; a value
    outside the bounds names its group from the declared index."""
    df = make_records()
    rows = df.with_row_index("i").filter(pl.col("cell") == "c5")["i"].head(1).to_list()  # an undeclared cell
    rows += df.with_row_index("i").filter(pl.col("cell") == "c7")["i"].slice(3, 2).to_list()
    df = df.with_columns(pl.when(pl.int_range(pl.len()).is_in(rows)).then(bad).otherwise(pl.col("speed")).alias("speed"))
    whole, chunks = data_errors(df, declared_spec(), tmp_path)
    assert chunks == whole
    if bad == 99.0:  # outside the bounds: only the declared records count, and the first names its group
        assert "2 value(s) outside the public bounds" in whole and "cell='c7'" in whole
    else:  # not a number: every record read, the undeclared c5's first
        assert f"row {min(rows) + 1}" in whole

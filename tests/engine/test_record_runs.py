"""``mean-estimate`` records reduced to runs: the sharded local engine against the in-memory route
(issue 12). Equal counts, group keys and structure; array means equal to 1e-9; errors naming input
rows; on inputs with ties in time, many users, one heavy user, groups by cell and slot."""

from __future__ import annotations

from datetime import datetime, timedelta

import numpy as np
import polars as pl
import pytest

from tests.engine import record_cases
from tsdp.engine import records as engine
from tsdp.errors import DataError
from tsdp.io.files import read_table
from tsdp.io.records import RecordSpec, load_records
from tsdp.mean import MeanSettings, prepare_from_runs, prepare_groups

TINY = 1 << 16  # bytes: forces user-hash shards on these inputs
START = datetime(2024, 5, 6)


@pytest.fixture(autouse=True)
def _runs_fit_any_limit(monkeypatch):
    """The tiny memory limits here only force shards; the per-run state check has its own test."""
    import tsdp.engine.records

    monkeypatch.setattr(tsdp.engine.records, "RUN_BYTES", 0)


def make_records(n: int = 9000, n_users: int = 300, seed: int = 5) -> pl.DataFrame:
    rng = np.random.default_rng(seed)
    users = np.where(rng.random(n) < 0.3, "heavy", np.char.add("bus", rng.integers(0, n_users, n).astype(str)))
    minutes = rng.integers(0, 6 * 60, n) // 15 * 15  # quarter hours: many ties within a user
    return pl.DataFrame({
        "bus": users,
        "ts": [START + timedelta(minutes=int(m)) for m in minutes],
        "cell": rng.choice(["c1", "c2", "c3"], n, p=[0.5, 0.3, 0.2]),
        "speed": rng.uniform(0, 65, n).round(2),
    })


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    root = tmp_path_factory.mktemp("records")
    df = make_records()
    df.write_csv(root / "records.csv")
    df.write_parquet(root / "records.parquet", row_group_size=700)
    return {"csv": str(root / "records.csv"), "parquet": str(root / "records.parquet")}


spec = record_cases.spec
SETTINGS = record_cases.SETTINGS


def in_memory(path: str, s: RecordSpec):
    r = load_records(read_table(path), s)
    return r


@pytest.mark.parametrize("fmt", ["csv", "parquet"])
@pytest.mark.parametrize("settings", SETTINGS, ids=lambda s: f"{s.algorithm}-{s.grouping}")
def test_sharded_runs_equal_in_memory(files, tmp_path, fmt, settings):
    want = in_memory(files[fmt], spec())
    with engine.record_runs(files[fmt], spec(), memory_limit=TINY, work_dir=str(tmp_path)) as got:
        assert len(list(tmp_path.iterdir())) == 1  # the shards exist while the runs are used
        np.testing.assert_array_equal(got.counts, want.counts)
        np.testing.assert_array_equal(got.group_starts, want.group_starts)
        assert got.groups.equals(want.groups)
        assert got.max_groups_per_user == want.max_groups_per_user
        a = prepare_from_runs(got.counts, got.group_starts, got.piece_sums, settings)
        np.testing.assert_allclose(got.true_means(), want.true_means(), rtol=1e-12)
    b = prepare_groups(want.values, want.user_starts, want.group_starts, settings)
    assert list(tmp_path.iterdir()) == []  # removed at the end of the block
    for name in ("m_ub", "num_arrays", "records_used", "users", "arr_starts"):
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name))
    np.testing.assert_allclose(a.array_means, b.array_means, rtol=1e-9, atol=1e-9)
    if settings.algorithm == "baseline":
        np.testing.assert_allclose(a.group_mean, b.group_mean, rtol=1e-9)


def test_a_tsv_input_is_sharded_as_its_csv_twin(files, tmp_path):
    """The streaming scan reads a .tsv with tabs, as the in-memory reader does (it read one column)."""
    tsv = tmp_path / "records.tsv"
    pl.read_csv(files["csv"]).write_csv(tsv, separator="\t")
    want = in_memory(files["csv"], spec())
    (tmp_path / "work").mkdir()
    with engine.record_runs(str(tsv), spec(), memory_limit=TINY, work_dir=str(tmp_path / "work")) as got:
        np.testing.assert_array_equal(got.counts, want.counts)
        assert got.groups.equals(want.groups)
        np.testing.assert_allclose(got.true_means(), want.true_means(), rtol=1e-12)


def test_the_input_row_breaks_ties(files, tmp_path):
    """Reversing the rows changes which tied records a capped user keeps (so the tie-break
    matters on this input), and the sharded route follows the input rows, not the shard order."""
    s = spec(group_by=("cell",), slot_length=None)
    settings = SETTINGS[1]
    df = read_table(files["parquet"])
    forward = load_records(df, s)
    backward = load_records(df.reverse(), s)
    fa = prepare_groups(forward.values, forward.user_starts, forward.group_starts, settings).array_means
    fb = prepare_groups(backward.values, backward.user_starts, backward.group_starts, settings).array_means
    assert np.abs(fa - fb).max() > 1e-6
    with engine.record_runs(files["parquet"], s, memory_limit=TINY, work_dir=str(tmp_path)) as got:
        a = prepare_from_runs(got.counts, got.group_starts, got.piece_sums, settings).array_means
    np.testing.assert_allclose(a, fa, rtol=1e-9, atol=1e-9)


def test_one_selected_cell_and_slot(files, tmp_path):
    s = spec(cell="c2", slot="2024-05-06 03:00:00", group_by=())
    want = in_memory(files["csv"], s)
    with engine.record_runs(files["csv"], s, memory_limit=TINY, work_dir=str(tmp_path)) as got:
        np.testing.assert_array_equal(got.counts, want.counts)
        assert got.groups.equals(want.groups)


def test_empty_selection_is_one_empty_group(files, tmp_path):
    """--cell declares its group: without records, no runs and the declared group (no error)."""
    with engine.record_runs(files["csv"], spec(cell="nope", group_by=()), memory_limit=TINY,
                            work_dir=str(tmp_path)) as runs:
        assert runs.n_groups == 0 and runs.counts.size == 0
        assert runs.declared.to_dicts() == [{"cell": "nope"}]


def test_out_of_bounds_counts_every_shard_and_names_the_earliest_row(tmp_path):
    df = make_records(n=4000).with_columns(
        pl.when(pl.int_range(pl.len()).is_in([777, 1500, 3999])).then(99.0).otherwise(pl.col("speed")).alias("speed"))
    path = str(tmp_path / "bad.parquet")
    df.write_parquet(path)
    message = "3 value(s) outside the public bounds [0, 65], the first 99 at row 778 "
    with pytest.raises(DataError) as whole:
        load_records(read_table(path), spec())
    assert message in str(whole.value)
    work = tmp_path / "work"
    work.mkdir()
    with pytest.raises(DataError) as sharded:
        with engine.record_runs(path, spec(), memory_limit=TINY, work_dir=str(work)):
            pass
    assert str(sharded.value) == str(whole.value)
    assert list(work.iterdir()) == []


def test_missing_user_names_the_input_row(tmp_path):
    df = make_records(n=3000).with_columns(
        pl.when(pl.int_range(pl.len()) == 2345).then(None).otherwise(pl.col("bus")).alias("bus"))
    path = str(tmp_path / "nouser.csv")
    df.write_csv(path)
    with pytest.raises(DataError, match="missing user id at row 2346;"):
        with engine.record_runs(path, spec(), memory_limit=TINY, work_dir=str(tmp_path)):
            pass


@pytest.mark.parametrize("participation", [
    ["--participation", "public"],
    ["--group-keys", "c1,c2,c4", "--start", "2024-05-06 00:00", "--end", "2024-05-06 08:00", "--arrays", "6",
     "--m-ub", "4"]], ids=["public", "private"])
def test_cli_mean_estimate_sharded_equals_in_memory(files, tmp_path, monkeypatch, participation):
    """`tsdp mean-estimate` publishes the same estimates (same seed) sharded or not."""
    from typer.testing import CliRunner

    monkeypatch.setattr(engine, "BYTES_PER_ROW", 100_000)  # 9000 rows "need" 900 MB
    from tsdp.engine import group_ranges

    monkeypatch.setattr(group_ranges, "BYTES_PER_ROW", 100_000)  # groups fill over half a shard: user shards
    calls = []
    sharded_runs = engine.sharded_runs
    monkeypatch.setattr(engine, "sharded_runs", lambda *a: calls.append(1) or sharded_runs(*a))

    from tsdp.cli.app import app

    common = [files["parquet"], "--user-col", "bus", "--value-col", "speed", "--upper", "65",
              "--epsilon", "1", "--time-col", "ts", "--cell-col", "cell", "--group-by", "cell,slot",
              "--epsilon-per-group-ok", "--seed", "3", *participation]
    outs = {}
    for name, extra in {"memory": ["--memory-limit", "8GiB"], "sharded": ["--memory-limit", "64MiB"]}.items():
        out = tmp_path / f"{name}.csv"
        result = CliRunner().invoke(app, ["mean-estimate", *common, *extra, "-o", str(out)])
        assert result.exit_code == 0, result.output
        outs[name] = pl.read_csv(out)
    assert calls == [1]  # only the 64MiB run was sharded
    assert outs["memory"].drop("estimate").equals(outs["sharded"].drop("estimate"))
    np.testing.assert_allclose(outs["memory"]["estimate"], outs["sharded"]["estimate"], rtol=1e-9)


def test_too_many_runs_for_the_memory_limit_is_exit_5(files, tmp_path, monkeypatch):
    """Per-run state that would not fit the limit ends with a ResourceError, nothing left behind."""
    from tsdp.errors import ResourceError

    monkeypatch.setattr(engine, "RUN_BYTES", TINY)  # every run "needs" the whole limit
    with pytest.raises(ResourceError, match=r"\(group, user\) runs .* over --memory-limit"):
        with engine.record_runs(files["parquet"], spec(), memory_limit=TINY, work_dir=str(tmp_path)):
            pass
    assert list(tmp_path.iterdir()) == []

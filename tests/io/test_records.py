"""The record pipeline of ``mean-estimate``: checks, selection, grouping and the CSR layout."""

from __future__ import annotations

from datetime import datetime

import numpy as np
import polars as pl
import pytest

from tsdp.errors import DataError, UsageError
from tsdp.io.records import RecordSpec, load_records


def frame(**overrides) -> pl.DataFrame:
    data = {
        "user": ["b", "a", "b", "a", "c", "a", "b"],
        "ts": [datetime(2024, 1, 1, 9, 50), datetime(2024, 1, 1, 9, 10), datetime(2024, 1, 1, 9, 5),
               datetime(2024, 1, 1, 10, 1), datetime(2024, 1, 1, 9, 30), datetime(2024, 1, 1, 9, 10),
               datetime(2024, 1, 1, 10, 30)],
        "cell": ["x", "x", "x", "y", "y", "x", "x"],
        "v": [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0],
    }
    data.update(overrides)
    return pl.DataFrame(data)


def spec(**kw) -> RecordSpec:
    base = dict(user_col="user", value_col="v", lower=0.0, upper=10.0, time_col="ts", cell_col="cell")
    base.update(kw)
    return RecordSpec(**base)


def test_single_group_sorted_by_user_then_time_then_row():
    r = load_records(frame(), spec())
    # users a (rows 1 and 5 tie at 09:10 -> input order, then 10:01), b (09:05, 09:50, 10:30), c
    assert r.values.tolist() == [2.0, 6.0, 4.0, 3.0, 1.0, 7.0, 5.0]
    assert r.user_starts.tolist() == [0, 3, 6, 7]
    assert r.group_starts.tolist() == [0, 3]
    assert r.n_groups == 1 and r.key_columns == [] and r.max_groups_per_user == 1
    assert r.values.dtype == np.float64 and r.user_starts.dtype == np.int64


def test_group_by_cell_and_slot():
    r = load_records(frame(), spec(group_by=("cell", "slot"), slot_length="1h"))
    assert r.groups.columns == ["cell", "slot"]
    assert r.groups.rows() == [("x", datetime(2024, 1, 1, 9)), ("x", datetime(2024, 1, 1, 10)),
                               ("y", datetime(2024, 1, 1, 9)), ("y", datetime(2024, 1, 1, 10))]
    assert r.values.tolist() == [2.0, 6.0, 3.0, 1.0, 7.0, 5.0, 4.0]
    assert r.user_starts.tolist() == [0, 2, 4, 5, 6, 7]
    assert r.group_starts.tolist() == [0, 2, 3, 4, 5]
    assert r.max_groups_per_user == 2  # a: (x,9) and (y,10); b: (x,9) and (x,10)
    assert r.group_label(2) == "cell='y', slot=2024-01-01 09:00:00"
    np.testing.assert_allclose(r.true_means(), [(2 + 6 + 3 + 1) / 4, 7, 5, 4])


def test_select_cell_and_slot():
    r = load_records(frame(), spec(cell="x", slot="2024-01-01T09:00"))
    assert r.n_groups == 1 and r.groups.rows() == [("x", datetime(2024, 1, 1, 9))]
    assert r.values.tolist() == [2.0, 6.0, 3.0, 1.0]


def test_user_ids_sort_as_text_and_order_does_not_depend_on_values():
    df = pl.DataFrame({"user": [10, 9, 10, 9], "v": [4.0, 3.0, 2.0, 1.0]})
    r = load_records(df, RecordSpec(user_col="user", value_col="v", lower=0, upper=5))
    assert r.values.tolist() == [4.0, 2.0, 3.0, 1.0]  # "10" < "9"; input order within a user
    flipped = load_records(df.with_columns(pl.col("v") * 0 + 1), RecordSpec("user", "v", 0, 5))
    assert flipped.user_starts.tolist() == r.user_starts.tolist()


def test_integer_cell_ids_select_by_text():
    r = load_records(frame(cell=[7, 7, 7, 8, 8, 7, 7]), spec(cell="8"))
    assert sorted(r.values.tolist()) == [4.0, 5.0]


def test_clip_keeps_every_record():
    r = load_records(frame(v=[1.0, 20.0, 3.0, -4.0, 5.0, 6.0, 7.0]), spec(out_of_range="clip"))
    assert sorted(r.values.tolist()) == [0.0, 1.0, 3.0, 5.0, 6.0, 7.0, 10.0]
    assert r.clipped


def test_out_of_range_names_count_value_and_group():
    with pytest.raises(DataError, match=r"2 value\(s\) outside .*\[0, 10\], the first 20 at row 2 in group cell='x'"):
        load_records(frame(v=[1.0, 20.0, 3.0, 4.0, 50.0, 6.0, 7.0]), spec(group_by=("cell",)))


def test_out_of_range_names_the_earliest_input_row_of_a_shard():
    """A shard's rows carry their input row (order_col): the earliest input row is named."""
    df = frame(v=[1.0, 20.0, 3.0, 4.0, 50.0, 6.0, 7.0]).with_columns(
        pl.Series("__input_row", [9, 40, 2, 3, 17, 5, 6]))
    with pytest.raises(DataError, match=r"the first 50 at row 18 "):
        load_records(df, spec(group_by=("cell",)), order_col="__input_row")


@pytest.mark.parametrize("column, values, message", [
    ("user", ["b", None, "b", "a", "c", "a", "b"], "missing user id at row 2"),
    ("v", [1.0, float("nan"), 3.0, 4.0, 5.0, 6.0, 7.0], "non-finite value nan at row 2"),
    ("v", [1.0, float("inf"), 3.0, 4.0, 5.0, 6.0, 7.0], "non-finite value inf at row 2"),
    ("v", ["1", "x", "3", "4", "5", "6", "7"], "non-numeric value 'x' at row 2"),
    ("v", [1.0, None, 3.0, 4.0, 5.0, 6.0, 7.0], "missing value at row 2"),
    ("ts", ["2024-01-01 09:00", "tomorrow", "2024-01-01 09:00", "2024-01-01 09:00", "2024-01-01 09:00",
            "2024-01-01 09:00", "2024-01-01 09:00"], "cannot parse timestamp 'tomorrow' at row 2"),
    ("cell", ["x", None, "x", "y", "y", "x", "x"], "missing group key at row 2"),
])
def test_bad_data(column, values, message):
    with pytest.raises(DataError, match=message):
        load_records(frame(**{column: values}), spec(group_by=("cell",)))


def test_missing_column_lists_existing_ones():
    with pytest.raises(DataError, match=r"--value-col: column 'speed' not found; .*user, ts, cell, v"):
        load_records(frame(), spec(value_col="speed"))


def test_empty_selection_is_a_declared_group_without_records():
    r = load_records(frame(), spec(cell="zz"))
    assert r.n_groups == 0 and r.values.size == 0 and r.declared.to_dicts() == [{"cell": "zz"}]
    assert r.dropped == frame().height


def test_slot_not_on_a_boundary():
    with pytest.raises(UsageError, match=r"--slot '2024-01-01T09:30' is not the start of a slot"):
        load_records(frame(), spec(slot="2024-01-01T09:30"))


def test_slots_need_a_time_column():
    with pytest.raises(UsageError, match="--time-col"):
        load_records(frame(), spec(time_col=None, group_by=("slot",)))


def test_group_by_any_column():
    r = load_records(frame(), spec(group_by=("cell",)))
    assert r.groups["cell"].to_list() == ["x", "y"] and r.group_starts.tolist() == [0, 2, 4]


def _reference_order(df: pl.DataFrame, keys: list[str], user: str, time: str) -> pl.DataFrame:
    """The records sorted by group keys, user id as text, time and input row: the documented order."""
    return (df.with_row_index("__row").with_columns(pl.col(user).cast(pl.String).alias("__u"))
            .sort([*keys, "__u", time, "__row"]))


@pytest.mark.parametrize("case", ["slot-us", "slot-seconds", "no-slot", "int-times", "huge-int-times"])
def test_sort_key_with_time_folded_in_is_the_documented_order(case):
    """Runs ordered by (group, user, time, input row) whether the time joins the run's code in one
    sort key (offsets within the slot or from the earliest time, divided by their gcd) or, when it
    would not fit, is a column of its own."""
    rng = np.random.default_rng(9)
    n = 6000
    base = 1_714_953_600_000_000  # 2024-05-06 in microseconds
    step = 1_000_000 if case == "slot-seconds" else 1
    t = base + rng.integers(0, 5 * 3600 * 1_000_000 // step, n) // 7 * 7 * step  # ties
    if case in ("int-times", "huge-int-times"):
        t = rng.integers(-50, 50, n) * (2**61 if case == "huge-int-times" else 3)
    df = pl.DataFrame({
        "u": rng.choice([f"b{i}" for i in range(40)] + [str(i) for i in range(5)], n),
        "ts": pl.Series(t).cast(pl.Datetime("us")) if "int" not in case else pl.Series(t),
        "cell": rng.choice(["x", "y", "z"], n),
        "v": rng.uniform(0, 10, n).round(3),
    })
    slots = case.startswith("slot")
    spec = RecordSpec(user_col="u", value_col="v", lower=0.0, upper=10.0, time_col="ts", cell_col="cell",
                      slot_length="1h" if slots else None, group_by=("cell", "slot") if slots else ("cell",))
    got = load_records(df, spec)
    keys = ["cell"]
    frame = df
    if slots:
        frame = df.with_columns(pl.col("ts").dt.truncate("1h").alias("slot"))
        keys = ["cell", "slot"]
    want = _reference_order(frame, keys, "u", "ts")
    np.testing.assert_array_equal(got.values, want["v"].to_numpy())
    runs = want.select(pl.struct([*keys, "__u"]).rle_id().alias("r"))["r"]
    np.testing.assert_array_equal(got.counts, runs.value_counts(sort=False).sort("r")["count"].to_numpy())


KEY_KINDS = {
    "text": lambda r, n: r.choice(["x", "y", "z10", "z9"], n),
    "int-dense": lambda r, n: r.integers(-3, 4, n),
    "int-sparse": lambda r, n: r.choice([-(2**40), 7, 2**50], n),
    "int-huge": lambda r, n: r.choice([-(2**62), 0, 2**62], n),  # codes by search, not arithmetic
    "float": lambda r, n: r.choice([-1.5, 0.25, 3.0], n),
    "bool": lambda r, n: r.integers(0, 2, n).astype(bool),
    "date": lambda r, n: pl.Series(r.integers(19_000, 19_003, n)).cast(pl.Int32).cast(pl.Date),
    "datetime-tz": lambda r, n: pl.Series(r.integers(0, 3, n) * 3_600_000_000).cast(pl.Datetime("us", "UTC")),
}


@pytest.mark.parametrize("kind", sorted(KEY_KINDS))
@pytest.mark.parametrize("users", ["text", "int"])
def test_records_equal_the_documented_order_for_every_key_type(kind, users):
    """Values, runs, groups (their key values and dtypes), the runs' user ids and the most groups of
    a user equal a plain polars sort by (keys, user id as text, time, input row), whichever way the
    keys are coded (arithmetic on a grid, a search among the distinct values, or re-densified)."""
    rng = np.random.default_rng(len(kind) * 7 + len(users))
    n = 3000
    df = pl.DataFrame({
        "u": rng.choice([f"b{i}" for i in range(30)], n) if users == "text" else rng.integers(0, 120, n),
        "k": KEY_KINDS[kind](rng, n),
        "cell": rng.choice(["p", "q"], n),
        "ts": pl.Series(1_714_953_600_000_000 + rng.integers(0, 40, n) * 60_000_000).cast(pl.Datetime("us")),
        "v": rng.uniform(0, 10, n).round(3),
    })
    s = RecordSpec(user_col="u", value_col="v", lower=0.0, upper=10.0, time_col="ts", cell_col="cell",
                   group_by=("cell", "k"))
    got = load_records(df, s)
    want = _reference_order(df, ["cell", "k"], "u", "ts")
    np.testing.assert_array_equal(got.values, want["v"].to_numpy())
    run_id = want.select(pl.struct(["cell", "k", "__u"]).rle_id())[:, 0].to_numpy()
    run_first = np.flatnonzero(np.diff(run_id, prepend=-1))
    np.testing.assert_array_equal(got.user_starts, np.append(run_first, n))
    runs = want[run_first]
    assert got.run_users.to_list() == runs["__u"].to_list()
    group_first = runs.select(pl.struct(["cell", "k"]).rle_id())[:, 0].to_numpy()
    starts = np.flatnonzero(np.diff(group_first, prepend=-1))
    np.testing.assert_array_equal(got.group_starts, np.append(starts, runs.height))
    expected_groups = runs[starts].select("cell", "k")
    assert got.groups.schema == expected_groups.schema
    assert got.groups.to_dicts() == expected_groups.to_dicts()
    assert got.max_groups_per_user == int(runs["__u"].value_counts()["count"].max())


@pytest.mark.parametrize("many", [False, True])
def test_text_ids_rank_the_same_by_enum_or_by_hash_join(monkeypatch, many):
    """Above _MANY_IDS distinct ids the ranks come from a hash join: the same records either way,
    and a hash collision among the distinct ids falls back to the Enum (faked here by a constant hash)."""
    import tsdp.io.record_groups as record_groups

    rng = np.random.default_rng(5)
    n = 4000
    df = pl.DataFrame({"u": rng.choice([f"id{i}" for i in range(900)], n), "v": rng.uniform(0, 10, n),
                       "k": rng.choice(["a", "b", "c"], n)})
    s = RecordSpec(user_col="u", value_col="v", lower=0.0, upper=10.0, group_by=("k",))
    want = load_records(df, s)
    monkeypatch.setattr(record_groups, "_MANY_IDS", 10 if many else 10**9)
    got = load_records(df, s)
    np.testing.assert_array_equal(got.values, want.values)
    np.testing.assert_array_equal(got.user_starts, want.user_starts)
    assert got.run_users.to_list() == want.run_users.to_list()
    if many:
        monkeypatch.setattr(pl.Series, "hash", lambda self, seed=0: pl.Series(np.zeros(self.len(), dtype=np.uint64)))
        again = load_records(df, s)
        np.testing.assert_array_equal(again.values, want.values)
        assert again.run_users.to_list() == want.run_users.to_list()


@pytest.mark.parametrize("other", ["value", "key", "bounds"])
def test_a_bad_user_id_is_reported_before_later_checks(other):
    """The user ids are checked in a second thread while the keys and values are: a NaN user id is
    still the error reported when a later check fails too, as the checks come in that order."""
    bad = {"value": {"v": [1.0, None, 3.0, 4.0, 5.0, 6.0, 7.0]},
           "key": {"cell": ["x", None, "x", "y", "y", "x", "x"]},
           "bounds": {"v": [1.0, 99.0, 3.0, 4.0, 5.0, 6.0, 7.0]}}[other]
    df = frame(user=["b", "a", "nan", "a", "c", "a", "b"], **bad)
    with pytest.raises(DataError, match="user id 'nan' at row 3"):
        load_records(df, spec(group_by=("cell",)))

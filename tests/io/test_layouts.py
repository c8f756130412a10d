"""Long and wide layouts: checks, grid completion, and the value matrix (tsdp.io.layouts)."""

from __future__ import annotations

from datetime import date, datetime, timedelta

import numpy as np
import polars as pl
import pytest

from tsdp.errors import DataError, UsageError
from tsdp.io.layouts import load_long, load_wide, numeric_values, require_columns

T0 = datetime(2024, 1, 1)
TIMES = [T0 + timedelta(hours=h) for h in range(4)]
NAMES = ["a", "b", "c"]
# Cell (series i, step j) holds 100 * (i + 1) + j, so every cell is distinguishable.
TRUTH = np.array([[100 * (i + 1) + j for j in range(4)] for i in range(3)], dtype=float)
SHUFFLE = np.random.default_rng(20240101).permutation(12)


def long_frame(shuffled: bool = True, series_dtype=pl.String) -> pl.DataFrame:
    rows = [(NAMES[i], TIMES[j], int(TRUTH[i, j])) for i in range(3) for j in range(4)]
    if shuffled:
        rows = [rows[k] for k in SHUFFLE]
    df = pl.DataFrame(rows, schema=["sid", "t", "v"], orient="row")
    if series_dtype != pl.String:
        df = df.with_columns(pl.col("sid").replace_strict({"a": 30, "b": 10, "c": 20}).cast(series_dtype))
    return df


def wide_frame(shuffled: bool = True) -> pl.DataFrame:
    df = pl.DataFrame({"t": TIMES, **{n: TRUTH[i].astype(int) for i, n in enumerate(NAMES)}})
    return df[[2, 0, 3, 1]] if shuffled else df


# ---------------------------------------------------------------------------------------------
# values_matrix / with_values_matrix
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("shuffled", [False, True])
def test_long_values_matrix_round_trip(shuffled):
    df = long_frame(shuffled)
    table = load_long(df, "t", "v", "sid")
    assert table.layout == "long" and table.series_names == NAMES
    assert (table.n_series, table.n_steps) == (3, 4) and table.filled_cells == 0
    np.testing.assert_array_equal(table.values_matrix(), TRUTH)
    # The frame keeps the input's row order (nothing to fill) ...
    assert table.frame.select("sid", "t").rows() == df.select("sid", "t").rows()
    # ... and with_values_matrix puts M[i, j] in the row of series i at step j.
    out = table.with_values_matrix(-TRUTH)
    expected = {(NAMES[i], TIMES[j]): -TRUTH[i, j] for i in range(3) for j in range(4)}
    assert {(s, t): v for s, t, v in out.select("sid", "t", "v").rows()} == expected
    assert out.select("sid", "t").rows() == df.select("sid", "t").rows()
    np.testing.assert_array_equal(table.with_values_matrix(table.values_matrix())["v"].to_numpy(),
                                  df["v"].to_numpy().astype(float))


def test_long_with_integer_series_ids():
    table = load_long(long_frame(series_dtype=pl.Int64), "t", "v", "sid")
    assert table.series_names == [10, 20, 30]  # b, c, a
    np.testing.assert_array_equal(table.values_matrix(), TRUTH[[1, 2, 0]])
    out = table.with_values_matrix(TRUTH[[1, 2, 0]] + 0.5)
    assert out.sort("sid", "t")["v"].to_list() == list((TRUTH[[1, 2, 0]] + 0.5).ravel())


def test_long_without_series_column():
    df = pl.DataFrame({"t": [TIMES[k] for k in (2, 0, 3, 1)], "v": [2, 0, 3, 1]})
    table = load_long(df, "t", "v")
    assert table.series_names == ["v"] and table.series_col is None
    np.testing.assert_array_equal(table.values_matrix(), [[0, 1, 2, 3]])
    assert table.with_values_matrix(np.array([[10.0, 11, 12, 13]]))["v"].to_list() == [12, 10, 13, 11]


@pytest.mark.parametrize("shuffled", [False, True])
def test_wide_values_matrix_round_trip(shuffled):
    df = wide_frame(shuffled)
    table = load_wide(df, "t")
    assert table.layout == "wide" and table.series_names == NAMES and table.value_cols == NAMES
    np.testing.assert_array_equal(table.values_matrix(), TRUTH)
    out = table.with_values_matrix(-TRUTH)
    assert out["t"].to_list() == df["t"].to_list()
    for i, name in enumerate(NAMES):
        assert dict(zip(out["t"], out[name])) == {TIMES[j]: -TRUTH[i, j] for j in range(4)}
    back = table.with_values_matrix(table.values_matrix())
    assert back.select(NAMES).to_numpy().tolist() == df.select(NAMES).to_numpy().astype(float).tolist()


def test_values_flat_round_trip():
    for table in (load_long(long_frame(), "t", "v", "sid"), load_wide(wide_frame(), "t")):
        flat = table.values_flat()
        assert flat.dtype.kind in "iuf" and flat.size == 12
        assert sorted(flat) == sorted(TRUTH.ravel())
        again = table.with_values_flat(flat * 2)
        np.testing.assert_array_equal(table.with_values_flat(flat).select(table.value_cols).to_numpy(),
                                      table.frame.select(table.value_cols).to_numpy())
        assert sorted(again.select(table.value_cols).to_numpy().ravel()) == sorted(2 * TRUTH.ravel())


def test_wide_selected_series_and_date_time():
    df = pl.DataFrame({"q": [date(2020, m, 1) for m in (1, 4, 7, 10)], "x": [1, 2, 3, 4],
                       "y": [5.0, 6, 7, 8], "label": list("abcd")})
    table = load_wide(df, "q", ["y", "x"])
    assert table.series_names == ["y", "x"] and table.grid.freq == "1q"
    np.testing.assert_array_equal(table.values_matrix(), [[5, 6, 7, 8], [1, 2, 3, 4]])
    assert table.frame.columns == ["q", "y", "x"]


def test_integer_time_column():
    df = pl.DataFrame({"step": [3, 1, 2], "v": [30, 10, 20]})
    table = load_long(df, "step", "v")
    assert table.grid.points.to_list() == [1, 2, 3]
    np.testing.assert_array_equal(table.values_matrix(), [[10, 20, 30]])


# ---------------------------------------------------------------------------------------------
# Filling
# ---------------------------------------------------------------------------------------------


def test_long_fill_counts():
    """Series b lacks step 1 and step 3 of series c is null: 2 filled cells, all zero."""
    df = long_frame().filter(~((pl.col("sid") == "b") & (pl.col("t") == TIMES[1])))
    df = df.with_columns(pl.when((pl.col("sid") == "c") & (pl.col("t") == TIMES[3]))
                         .then(None).otherwise(pl.col("v")).alias("v"))
    with pytest.raises(DataError):
        load_long(df, "t", "v", "sid")
    table = load_long(df, "t", "v", "sid", fill_missing=True)
    assert table.filled_cells == 2
    assert table.frame.height == 12
    expected = TRUTH.copy()
    expected[1, 1] = 0
    expected[2, 3] = 0
    np.testing.assert_array_equal(table.values_matrix(), expected)


def test_long_fill_a_step_missing_in_every_series():
    df = long_frame().filter(pl.col("t") != TIMES[2])
    with pytest.raises(DataError, match="first missing: 2024-01-01 02:00:00"):
        load_long(df, "t", "v", "sid")
    table = load_long(df, "t", "v", "sid", fill_missing=True)
    assert table.filled_cells == 3 and table.frame.height == 12 and table.n_steps == 4
    assert table.values_matrix()[:, 2].tolist() == [0, 0, 0]


def test_wide_fill_counts():
    """One missing row (3 cells) and one null cell: 4 filled cells."""
    df = wide_frame().filter(pl.col("t") != TIMES[1])
    df = df.with_columns(pl.when(pl.col("t") == TIMES[3]).then(None).otherwise(pl.col("a")).alias("a"))
    with pytest.raises(DataError):
        load_wide(df, "t")
    table = load_wide(df, "t", fill_missing=True)
    assert table.filled_cells == 4 and table.frame.height == 4
    expected = TRUTH.copy()
    expected[:, 1] = 0
    expected[0, 3] = 0
    np.testing.assert_array_equal(table.values_matrix(), expected)


def test_nothing_to_fill_keeps_filled_cells_zero():
    assert load_wide(wide_frame(), "t", fill_missing=True).filled_cells == 0
    assert load_long(long_frame(), "t", "v", "sid", fill_missing=True).filled_cells == 0


# ---------------------------------------------------------------------------------------------
# Checks
# ---------------------------------------------------------------------------------------------


def test_require_columns_lists_what_exists():
    df = pl.DataFrame({"x": [1], "y": [2]})
    require_columns(df, {"--time-col": "x", "--series-col": None, "--value-col": None})
    with pytest.raises(UsageError, match="--time-col and --value-col both name column 'x'"):
        require_columns(df, {"--time-col": "x", "--value-col": "x"})
    with pytest.raises(DataError, match=r"--value-col: column 'z' not found; the input has columns: x, y"):
        require_columns(df, {"--time-col": "x", "--value-col": "z"})


@pytest.mark.parametrize("values, message", [
    (["1", "x"], "non-numeric value 'x' at row 2"),
    ([1.0, float("nan")], "non-finite value nan at row 2"),
    ([float("inf"), 1.0], "non-finite value inf at row 1"),
    ([1, -2], "negative value -2 at row 2"),
    ([1, None], "missing value at row 2"),
    ([True, False], "numeric column is required"),
])
def test_numeric_values_rejects(values, message):
    with pytest.raises(DataError, match="column 'v'") as info:
        numeric_values(pl.DataFrame({"v": values}), "v", allow_negative=False, allow_null=False)
    assert message in str(info.value)


def test_numeric_values_accepts():
    df = pl.DataFrame({"v": [" 1.5", "-2", None, ""]})
    got = numeric_values(df, "v", allow_negative=True, allow_null=True)
    assert got.dtype == pl.Float64 and got.to_list() == [1.5, -2.0, None, None]
    assert numeric_values(pl.DataFrame({"v": [1, 2]}), "v", False, False).to_list() == [1.0, 2.0]
    assert numeric_values(pl.DataFrame({"v": [None, None]}), "v", False, True).null_count() == 2


def test_load_long_errors():
    with pytest.raises(DataError, match="--series-col: column 'nope' not found"):
        load_long(long_frame(), "t", "v", "nope")
    df = long_frame().with_columns(pl.when(pl.col("v") == 201).then(None).otherwise(pl.col("sid")).alias("sid"))
    with pytest.raises(DataError, match="column 'sid': missing series id at row"):
        load_long(df, "t", "v", "sid")
    dup = pl.concat([long_frame(False), long_frame(False)[5:6]])
    with pytest.raises(DataError, match="duplicate timestamp 2024-01-01 01:00:00 for series 'b'"):
        load_long(dup, "t", "v", "sid")


def test_load_wide_errors():
    with pytest.raises(DataError, match="--series-cols: column 'zz' not found"):
        load_wide(wide_frame(), "t", ["a", "zz"])
    with pytest.raises(UsageError, match="--series-cols: the time column 't'"):
        load_wide(wide_frame(), "t", ["a", "t"])
    with pytest.raises(UsageError, match="--series-cols: column 'a' is listed twice"):
        load_wide(wide_frame(), "t", ["a", "b", "a"])
    with pytest.raises(DataError, match="no series columns"):
        load_wide(pl.DataFrame({"t": TIMES}), "t")
    with pytest.raises(DataError, match="duplicate timestamp 2024-01-01 00:00:00"):
        load_wide(pl.concat([wide_frame(False), wide_frame(False)[0:1]]), "t")


@pytest.mark.parametrize("kind", ["float", "counts", "wide-ints"])
@pytest.mark.parametrize("target", ["cell", "sum"])
@pytest.mark.parametrize("shape", ["long", "long-one-series", "wide", "long-filled"])
def test_median_abs_is_the_median_of_the_matrix_cells_or_series_sums(shape, target, kind):
    """The steward's noise-to-signal scale, computed on the frame, equals the median of |cells| (or of
    |series sums|) of the (n_series, n_steps) matrix it no longer builds."""
    from datetime import datetime, timedelta

    from tsdp.io.layouts import load_long, load_wide

    rng = np.random.default_rng(7)
    n, t = 5, 9
    times = [datetime(2024, 1, 1) + timedelta(hours=h) for h in range(t)]
    values = rng.normal(0, 10, (n, t)).round(3)
    if kind == "counts":  # small integers (counted), negatives included
        values = rng.integers(-40, 40, (n, t))
    elif kind == "wide-ints":  # integers beyond the counting range
        values = rng.integers(-(1 << 40), 1 << 40, (n, t))
    values[1] *= -1
    if shape == "wide":
        df = pl.DataFrame({"time": times, **{f"s{i}": values[i] for i in range(n)}})
        table = load_wide(df, "time", allow_negative=True)
    else:
        series = 1 if shape == "long-one-series" else n
        df = pl.DataFrame({"id": np.repeat([f"s{i}" for i in range(series)], t), "time": times * series,
                           "v": values[:series].ravel()})
        if shape == "long-filled":  # a missing cell filled with 0 is a cell too
            df = df.filter(~((pl.col("id") == "s2") & (pl.col("time") == times[4])))
        table = load_long(df.sample(fraction=1.0, shuffle=True, seed=3), "time", "v",
                          None if series == 1 else "id", fill_missing=shape == "long-filled", allow_negative=True)
    matrix = table.values_matrix()
    expected = np.median(np.abs(matrix.sum(axis=1) if target == "sum" else matrix))
    assert table.median_abs(target) == pytest.approx(expected, rel=1e-12, abs=1e-12)


@pytest.mark.parametrize("size", [1, 2, 7, 10])
def test_integer_median_abs_counts_even_and_odd_sizes(size):
    from tsdp.io.layouts import _integer_median_abs

    values = np.random.default_rng(size).integers(-9, 9, size)
    column = pl.concat([pl.Series("v", values[: size // 2]), pl.Series("v", values[size // 2:])], rechunk=False)
    assert _integer_median_abs(column) == np.median(np.abs(values))

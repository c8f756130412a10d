"""The sorted-panel fast path of load_long agrees with the general checks on any input."""

import numpy as np
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tsdp.errors import DataError
from tsdp.io import layouts
from tsdp.io.timegrid import block_grid


def reference(df):
    """Brute force: the panel as {series: {time: value}}, or the kind of error expected."""
    cells = {}
    for s, t, v in df.iter_rows():
        if t in cells.setdefault(s, {}):
            return "duplicate"
        cells[s][t] = v
    times = sorted({t for row in cells.values() for t in row})
    diffs = np.diff(times) if len(times) > 1 else np.array([1])
    step = int(diffs.min())
    if any(d % step for d in diffs):
        return "irregular"
    grid = list(range(times[0], times[-1] + 1, step))
    if any(len(row) != len(grid) for row in cells.values()):
        return "missing"
    return {s: [row[t] for t in grid] for s, row in cells.items()}


rows = st.lists(st.tuples(st.sampled_from(["a", "b", "c"]), st.integers(0, 6), st.integers(0, 9)),
                min_size=1, max_size=30)


@st.composite
def panels(draw):
    """Mostly complete panels (sorted, shuffled, or broken by a few edits), sometimes random rows."""
    if draw(st.booleans()):
        data = draw(rows)
    else:
        names = draw(st.lists(st.sampled_from(["a", "b", "c", "d"]), min_size=1, max_size=4, unique=True))
        start, step, n = draw(st.integers(-5, 5)), draw(st.integers(1, 3)), draw(st.integers(2, 6))
        data = [(s, start + k * step, draw(st.integers(0, 9))) for s in sorted(names) for k in range(n)]
        for _ in range(draw(st.integers(0, 2))):
            i = draw(st.integers(0, len(data) - 1))
            s, t, v = data[i]
            data[i] = (s, t + draw(st.sampled_from([-step, step, 1, -1])), v)
        if draw(st.booleans()):
            data = draw(st.permutations(data))
    return pl.DataFrame(data, schema={"s": pl.String, "t": pl.Int64, "v": pl.Int64}, orient="row")


@settings(max_examples=300, deadline=None)
@given(df=panels())
def test_load_long_matches_brute_force(df):
    expected = reference(df)
    if isinstance(expected, str):
        with pytest.raises(DataError):
            layouts.load_long(df, "t", "v", "s")
        return
    table = layouts.load_long(df, "t", "v", "s")
    matrix = table.values_matrix()
    got = {name: list(matrix[i]) for i, name in enumerate(table.series_names)}
    assert got == expected


@pytest.mark.parametrize("times,block", [
    ([0, 1, -1, 0, 1, 2], None),  # first block is not a grid although later diffs are regular
    ([0, 1, 2, 0, 2, 1], None),   # right endpoints, wrong order inside a block
    ([0, 2, 4, 0, 2, 4], 3),
    ([5, 6, 7, 5, 6, 7, 5, 6, 7], 3),
    ([0, 1, 2, 3], 4),
    ([0, 1, 1, 2], None),
])
def test_block_grid_on_hand_made_cases(times, block):
    grid = block_grid(pl.Series(times), None)
    if block is None:
        assert grid is None
    else:
        assert grid is not None and grid.n_steps == block


def test_fast_path_is_taken_for_sorted_complete_panels(monkeypatch):
    calls = []
    monkeypatch.setattr(layouts, "build_grid", lambda *a, **k: calls.append(1))
    df = pl.DataFrame({"s": ["a"] * 3 + ["b"] * 3, "t": [0, 1, 2] * 2, "v": [1, 2, 3, 4, 5, 6]})
    table = layouts.load_long(df, "t", "v", "s")
    assert not calls and table.series_names == ["a", "b"]
    assert table.values_matrix().tolist() == [[1, 2, 3], [4, 5, 6]]

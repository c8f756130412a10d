"""Private participation (``--participation private``, grouping ``hash``): worst-case neighbours
through the whole record path (:func:`tsdp.io.records.load_records`, the engines' runs, the plan).

The relation: add or remove one user with all of their records, or replace all of one user's
records by any others (any number, in any declared groups). The claim rests on two facts checked
here on random data and random neighbours, as an attacker would choose them (values at the bounds,
the changed user alone in its array or swamping it):

* the structure is public: every group has K = --arrays arrays, cap m_UB, the same sensitivity;
* in each group at most one array mean moves (the changed user's array h(id) mod K), by at most
  U - lower, so the array average moves by at most its claimed sensitivity, and so does the
  average clipped to any fixed [a, b] (the selection scores of LEVY/QUANTILE change by at most 1).
"""

from __future__ import annotations

from datetime import datetime, timedelta

import numpy as np
import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tsdp.api.means import MeanOptions
from tsdp.engine.records import declared_positions, expand_declared, runs_from_records
from tsdp.io.records import load_records
from tsdp.mean.algorithms import release

U = 65.0
CELLS = ["a", "b", "c"]
T0 = datetime(2024, 1, 1)
K = 4
M_UB = 3


def records(rows: list[tuple[str, str, int, float]]) -> pl.DataFrame:
    """(user, cell, minute, value) rows as a frame of records."""
    return pl.DataFrame({"user": [r[0] for r in rows], "cell": [r[1] for r in rows],
                         "ts": [T0 + timedelta(minutes=r[2]) for r in rows], "v": [r[3] for r in rows]},
                        schema={"user": pl.String, "cell": pl.String, "ts": pl.Datetime("us"), "v": pl.Float64})


def prepared(df: pl.DataFrame, algorithm: str):
    plan = MeanOptions(user_col="user", value_col="v", upper=U, epsilon=1.0, time_col="ts", cell_col="cell",
                       group_by="cell", epsilon_per_group_ok=True, group_keys=CELLS, arrays=K, m_ub=M_UB,
                       algorithm=algorithm).plan()
    runs = runs_from_records(load_records(df, plan.spec))
    positions = declared_positions(runs)
    runs = expand_declared(runs, positions, 0, len(CELLS))
    prep, present = plan.prepare(runs)
    assert present is None
    return prep


VALUE = st.one_of(st.sampled_from([0.0, U]), st.floats(0, U, allow_nan=False))
ROW = st.tuples(st.sampled_from([f"u{i}" for i in range(8)]), st.sampled_from(CELLS), st.integers(0, 50), VALUE)
NEW_ROWS = st.lists(st.tuples(st.sampled_from(CELLS), st.integers(0, 50), VALUE), min_size=1, max_size=12)


def neighbour(rows, kind: str, victim_index: int, new_rows):
    users = sorted({r[0] for r in rows})
    victim = users[victim_index % len(users)]
    others = [r for r in rows if r[0] != victim]
    mine = [r for r in rows if r[0] == victim]
    if kind == "add":
        return rows + [("newcomer", c, t, v) for c, t, v in new_rows]
    if kind == "remove":
        return others
    if kind == "replace":  # any number of records, in any groups, any values
        return others + [(victim, c, t, v) for c, t, v in new_rows]
    moved = {"a": "b", "b": "c", "c": "a"}  # same records, another cell
    return others + [(u, moved[c], t, v) for u, c, t, v in mine]


@pytest.mark.parametrize("algorithm", ["array-averaging", "levy", "quantile"])
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rows=st.lists(ROW, min_size=1, max_size=40), kind=st.sampled_from(["add", "remove", "replace", "move"]),
       victim=st.integers(0, 7), new_rows=NEW_ROWS, box=st.tuples(st.floats(0, U - 1), st.floats(1, U)))
def test_one_array_mean_per_group_moves_within_the_claimed_sensitivity(algorithm, rows, kind, victim, new_rows, box):
    other = neighbour(rows, kind, victim, new_rows)
    if not other:
        return
    p, q = prepared(records(rows), algorithm), prepared(records(other), algorithm)
    for name in ("num_arrays", "m_ub", "arr_starts"):  # the public structure
        np.testing.assert_array_equal(getattr(p, name), getattr(q, name))
    assert (p.num_arrays == K).all() and (p.m_ub == M_UB).all()
    changed = (p.array_means != q.array_means).reshape(len(CELLS), K).sum(axis=1)
    assert (changed <= 1).all(), changed  # one array per group at most
    assert np.all((p.array_means >= 0) & (p.array_means <= U))
    a = box[0]
    b = min(U, a + box[1])  # a forced interval of width >= 1 (a test-only option of release)
    interval = None if algorithm == "array-averaging" else (a, b)
    rp = release(p, np.random.default_rng(0), epsilon=1.0, lower=0.0, upper=U, interval=interval, sampler="float")
    rq = release(q, np.random.default_rng(0), epsilon=1.0, lower=0.0, upper=U, interval=interval, sampler="float")
    np.testing.assert_array_equal(rp.sensitivity, rq.sensitivity)  # public (given the interval)
    assert np.all(np.abs(rp.statistic - rq.statistic) <= rp.sensitivity), (rp.statistic, rq.statistic)


def test_the_worst_case_moves_an_array_by_the_whole_range():
    """A user alone in its array, values 0 replaced by U: the array mean moves by U and the average
    by U / K, the claimed sensitivity up to its rounding margin (so the bound is tight)."""
    base = [("solo", "a", t, 0.0) for t in range(M_UB)]
    p = prepared(records(base), "array-averaging")
    q = prepared(records([(u, c, t, U) for u, c, t, _ in base]), "array-averaging")
    rp = release(p, np.random.default_rng(0), epsilon=1.0, lower=0.0, upper=U, sampler="float")
    rq = release(q, np.random.default_rng(0), epsilon=1.0, lower=0.0, upper=U, sampler="float")
    moved = np.abs(rp.statistic - rq.statistic)
    assert moved[0] == pytest.approx(U / K, rel=1e-12) and moved[0] <= rp.sensitivity[0]
    assert rp.sensitivity[0] == pytest.approx(U / K, rel=1e-9)
    # the other groups hold only the midpoint: untouched
    assert (moved[1:] == 0).all() and rp.statistic[1] == U / 2

"""--max-norm's cap (tsdp.engine.kernel.scaled_to_norm, rule 4 of tsdp.engine.events): every user's
cell totals scaled to an L2 norm of at most C, checked as an attacker would (remove a user,
substitute one, remove one user's events in one cell) against the sensitivity the release claims
(tsdp.accounting.sensitivity), exactly in rational arithmetic, the same on every engine, and the
weighted norm histogram --max-norm auto chooses from against a brute-force count."""

from __future__ import annotations

import math
from collections import defaultdict
from fractions import Fraction

import numpy as np
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.engine.test_local_engine import END, KEYS, START, TINY, make_events, write
from tsdp.accounting.sensitivity import ContributionBounds
from tsdp.engine import kernel, local
from tsdp.engine.events import EventCaps, EventJob, aggregate_events, assemble, partial_cell_sums, profile_histograms
from tsdp.errors import UsageError
from tsdp.mechanisms import bounds


def panel(df: pl.DataFrame, caps: EventCaps, value_col: str | None = None) -> np.ndarray:
    return aggregate_events(df, "user", "time", "1h", START, END, caps, "station", KEYS,
                            value_col=value_col).table.values_matrix()


def exact_norm_squared(x: np.ndarray) -> Fraction:
    return sum((Fraction(float(v)) ** 2 for v in np.ravel(x)), Fraction(0))


def without(df: pl.DataFrame, user: str) -> pl.DataFrame:
    return df.filter(pl.col("user") != user)


@pytest.mark.parametrize("norm", [1.0, 2.5, 7.0, 40.0])
@pytest.mark.parametrize("values", [False, True])
def test_removing_any_user_moves_the_panel_by_at_most_the_norm(norm, values):
    df = make_events(1200, 25, seed=3, values=values)
    caps = EventCaps(max_norm=norm, value_bound=5.0 if values else None)
    col = "amount" if values else None
    whole = panel(df, caps, col)
    moved = []
    for user in df["user"].unique().to_list():
        diff = whole - panel(without(df, user), caps, col)
        assert np.all(diff >= -1e-9)  # a user only adds (non-negative contributions)
        moved.append(math.sqrt(float(exact_norm_squared(diff))))
    assert max(moved) <= norm * (1 + 1e-12)
    assert max(moved) >= 0.999 * norm  # the skewed user is scaled down to (nearly) exactly C


def test_substitution_moves_the_panel_by_at_most_sqrt2_times_the_norm():
    df = make_events(800, 12, seed=5)
    caps = EventCaps(max_norm=3.0)
    base = without(df, "u000")
    heavy = df.filter(pl.col("user") == "u000")
    hour = pl.col("time").str.slice(11, 2).cast(pl.Int32)
    # the old and the new user's events lie in disjoint cells (morning vs afternoon): the worst case
    old, new = heavy.filter(hour < 12), heavy.filter(hour >= 12)
    diff = panel(pl.concat([base, old]), caps) - panel(pl.concat([base, new]), caps)
    l2 = math.sqrt(float(exact_norm_squared(diff)))
    assert 0.999 * math.sqrt(2) * 3.0 < l2 <= math.sqrt(2) * 3.0 * (1 + 1e-12)
    sens = ContributionBounds("user", 3.0, 24, None, None, "substitute", max_norm=3.0)
    assert l2 <= sens.l2(len(KEYS), 24)


def test_removing_one_users_events_in_one_cell_stays_within_the_norm():
    df = make_events(1500, 20, seed=8)
    caps = EventCaps(max_norm=4.0)
    heavy = df.filter(pl.col("user") == "u000").sort("time")
    cell = heavy.row(0, named=True)
    trimmed = df.filter(~((pl.col("user") == "u000") & (pl.col("station") == cell["station"])
                          & (pl.col("time").str.slice(0, 13) == cell["time"][:13])))
    # the user's scaled vector changes inside the ball of radius C, so two such vectors differ by <= 2C;
    # against the removal of the whole user each stays within C
    for frame in (df, trimmed):
        diff = panel(frame, caps) - panel(without(frame, "u000"), caps)
        assert math.sqrt(float(exact_norm_squared(diff))) <= 4.0 * (1 + 1e-12)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.floats(1e-300, 1e300, allow_nan=False, allow_infinity=False), min_size=1, max_size=40),
       st.floats(1e-6, 1e6))
def test_the_scaled_totals_never_exceed_the_norm_in_exact_arithmetic(values, norm):
    """The factor's margin covers float64 rounding whatever the magnitudes (rational check)."""
    n = len(values)
    kept = pl.DataFrame({"__ucode": [7] * n, "__cell": list(range(n)), kernel.VALUE: values})
    scaled, count = kernel.scaled_to_norm(kept, norm)
    total = exact_norm_squared(scaled[kernel.VALUE].to_numpy())
    assert total <= Fraction(norm) ** 2
    if exact_norm_squared(np.asarray(values)) <= (Fraction(norm) * (1 - Fraction(1, 2 ** 40))) ** 2:
        assert count == 0 and scaled[kernel.VALUE].to_list() == values  # a user clearly below C is untouched
    elif exact_norm_squared(np.asarray(values)) > Fraction(norm) ** 2:
        assert count == 1


def test_a_user_within_the_norm_is_untouched_and_the_rule_is_described():
    df = make_events(600, 30, seed=1)
    assert np.array_equal(panel(df, EventCaps(max_norm=1e6)), panel(df, EventCaps()))
    assert "L2 norm at most 3" in EventCaps(max_norm=3.0).describe()
    assert EventCaps(max_norm=3.0).cell_bound() == 3.0
    assert EventCaps(max_norm=30.0, max_per_step=2, value_bound=4.0).cell_bound() == 8.0
    with pytest.raises(UsageError, match="--max-norm applies to --unit user"):
        EventCaps(max_norm=1.0, level="w-event")


@pytest.mark.parametrize("suffix", [".csv", ".parquet"])
def test_sharded_equals_in_memory(tmp_path, suffix):
    df = make_events(values=True)
    path = write(df, tmp_path / f"events{suffix}")
    caps = EventCaps(max_norm=6.0, value_bound=4.0, series_per_unit=2)
    job = EventJob("user", "time", "1h", START, END, caps, "station", KEYS, value_col="amount")
    sharded = local.aggregate_events_local(path, job, memory_limit=TINY, work_dir=str(tmp_path))
    whole = assemble(job, [partial_cell_sums(df, job)])
    np.testing.assert_allclose(sharded.table.values_matrix(), whole.table.values_matrix(), rtol=1e-12, atol=1e-12)
    assert sharded.diagnostics["users_norm_scaled"] == whole.diagnostics["users_norm_scaled"] > 0


def test_sensitivity_is_the_smaller_of_the_box_and_the_norm():
    box = ContributionBounds("user", 2.0, 10, None, 3, "add-remove")
    norm = ContributionBounds("user", 2.0, 10, None, 3, "add-remove", max_norm=5.0)
    assert box.l2(5, 20) == pytest.approx(2.0 * math.sqrt(30))
    assert norm.l2(5, 20) == 5.0 and norm.l1(5, 20) == pytest.approx(5.0 * math.sqrt(30))
    loose = ContributionBounds("user", 2.0, 10, None, 3, "add-remove", max_norm=100.0)
    assert loose.l2(5, 20) == box.l2(5, 20) and loose.l1(5, 20) == box.l1(5, 20)
    sub = ContributionBounds("user", 2.0, 10, None, 3, "substitute", max_norm=5.0)
    assert sub.l2(5, 20) == pytest.approx(5.0 * math.sqrt(2)) and sub.l1(5, 20) == pytest.approx(10 * math.sqrt(30))
    assert norm.privacy_unit(5, "user", True).max_norm == 5.0
    assert "max_norm" not in box.privacy_unit(5, "user", True).to_dict()
    for level, w in (("event", None), ("w-event", 3)):
        with pytest.raises(UsageError, match="--max-norm"):
            ContributionBounds(level, 1.0, None, w, None, "add-remove", max_norm=5.0)
    for bad in (0.0, -1.0, float("inf"), float("nan"), True):
        with pytest.raises(UsageError, match="--max-norm"):
            ContributionBounds("user", 1.0, 3, None, None, "add-remove", max_norm=bad)


GRID = bounds.norm_grid()


def brute_force_norms(df: pl.DataFrame) -> np.ndarray:
    """Per user in plain Python: cell counts, their L2 norm and the weight floor(8 min(L1/L2, sqrt n, 4)),
    summed into the grid's bins."""
    cells: dict = defaultdict(lambda: defaultdict(int))
    for r in df.iter_rows(named=True):
        if r["station"] in KEYS:
            cells[r["user"]][(r["station"], r["time"][:13])] += 1
    hist = np.zeros(len(GRID) + 1, dtype=np.int64)
    for counts in cells.values():
        x = np.array(list(counts.values()), dtype=float)
        l2 = math.sqrt(float((x * x).sum()))
        weight = math.floor(8 * min(x.sum() / l2, math.sqrt(x.size), 4.0))
        hist[int(np.searchsorted(GRID, l2, side="left"))] += weight
    return hist


def test_weighted_norm_histogram_matches_a_brute_force_count(tmp_path):
    df = make_events(2000, 50, seed=9)
    grids = {"max_norm": GRID}
    job = EventJob("user", "time", "1h", START, END, EventCaps(), "station", KEYS).profiling(grids)
    got = profile_histograms(assemble(job, [partial_cell_sums(df, job)]).diagnostics, grids)["max_norm"]
    np.testing.assert_array_equal(got, brute_force_norms(df))
    sharded = local.aggregate_events_local(write(df, tmp_path / "e.parquet"), job, memory_limit=TINY,
                                           work_dir=str(tmp_path))
    np.testing.assert_array_equal(profile_histograms(sharded.diagnostics, grids)["max_norm"], got)


def test_the_kernel_and_the_selection_agree_on_the_weights():
    assert kernel.NORM_WEIGHT_SCALE == bounds.WEIGHT_SCALE and kernel.NORM_WEIGHT_CAP == bounds.WEIGHT_CAP

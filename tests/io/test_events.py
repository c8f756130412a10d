"""Event aggregation with enforced contribution caps (tsdp.io.events), checked against counts
worked out by hand on a small table.

Grid: 2024-01-01 00:00 to 04:00 (exclusive), hourly: buckets 0..3. Declared series A, B, C.
The rows are deliberately out of time order, so that "first" and "earliest" must come from the
timestamps, not from the row order.

    user  time              series   note
    u1    00:50             A        bucket 0 (third event of u1 in A/0)
    u1    00:30             B        u1 appears in B after A (A first at 00:05)
    u1    00:05             A        bucket 0
    u1    03:20             A        bucket 3
    u1    00:10             A        bucket 0
    u1    02:10             A        bucket 2
    u1    01:30             A        bucket 1
    u1    02:00             C        bucket 2
    u2    01:15             B        bucket 1
    u2    2023-12-31 23:59  A        before start: dropped
    u2    01:00             B        bucket 1
    u2    00:40             C        u2 appears in C first
    u2    05:00             B        after end: dropped
    u2    02:00             D        undeclared series: dropped
    u3    04:00             A        exactly at end: dropped (end is exclusive)
    u3    03:59:59          A        bucket 3

Without caps:  A = [3, 1, 1, 2], B = [1, 2, 0, 0], C = [1, 0, 1, 0].
"""

from __future__ import annotations

from datetime import date, datetime

import numpy as np
import polars as pl
import pytest

from tsdp.errors import DataError, UsageError
from tsdp.engine.events import EventCaps, aggregate_events

ROWS = [
    ("u1", "2024-01-01 00:50:00", "A"),
    ("u1", "2024-01-01 00:30:00", "B"),
    ("u1", "2024-01-01 00:05:00", "A"),
    ("u1", "2024-01-01 03:20:00", "A"),
    ("u1", "2024-01-01 00:10:00", "A"),
    ("u1", "2024-01-01 02:10:00", "A"),
    ("u1", "2024-01-01 01:30:00", "A"),
    ("u1", "2024-01-01 02:00:00", "C"),
    ("u2", "2024-01-01 01:15:00", "B"),
    ("u2", "2023-12-31 23:59:00", "A"),
    ("u2", "2024-01-01 01:00:00", "B"),
    ("u2", "2024-01-01 00:40:00", "C"),
    ("u2", "2024-01-01 05:00:00", "B"),
    ("u2", "2024-01-01 02:00:00", "D"),
    ("u3", "2024-01-01 04:00:00", "A"),
    ("u3", "2024-01-01 03:59:59", "A"),
]
KEYS = ["A", "B", "C"]
START, END = "2024-01-01 00:00:00", "2024-01-01 04:00:00"


@pytest.fixture
def events() -> pl.DataFrame:
    return pl.DataFrame(ROWS, schema=["user", "ts", "series"], orient="row")


def aggregate(df, caps=EventCaps(), keys=KEYS, **kwargs):
    return aggregate_events(df, "user", "ts", "1h", START, END, caps, "series", keys, **kwargs)


def matrix(agg) -> list[list[float]]:
    return agg.table.values_matrix().tolist()


def test_no_caps(events):
    agg = aggregate(events)
    assert matrix(agg) == [[3, 1, 1, 2], [1, 2, 0, 0], [1, 0, 1, 0]]
    assert agg.diagnostics == {"rows_in": 16, "dropped_outside_grid": 3, "dropped_undeclared_series": 1,
                               "rows_kept": 12}


def test_series_per_user_keeps_the_first_series_by_time(events):
    """u1 keeps A (00:05, before B at 00:30); u2 keeps C (00:40, before B at 01:00)."""
    agg = aggregate(events, EventCaps(series_per_unit=1))
    assert matrix(agg) == [[3, 1, 1, 2], [0, 0, 0, 0], [1, 0, 0, 0]]
    assert agg.diagnostics["dropped_series_cap"] == 4  # u1: B, C; u2: B twice


def test_series_per_user_two(events):
    """u1 keeps A and B (C comes last, at 02:00); u2 keeps C and B."""
    agg = aggregate(events, EventCaps(series_per_unit=2))
    assert matrix(agg) == [[3, 1, 1, 2], [1, 2, 0, 0], [1, 0, 0, 0]]
    assert agg.diagnostics["dropped_series_cap"] == 1


def test_max_steps_keeps_the_earliest_buckets(events):
    """u1 is in A at buckets 0, 1, 2, 3: keeps 0 and 1 (all 3 events of bucket 0)."""
    agg = aggregate(events, EventCaps(max_steps=2))
    assert matrix(agg) == [[3, 1, 0, 1], [1, 2, 0, 0], [1, 0, 1, 0]]
    assert agg.diagnostics["dropped_step_cap"] == 2


def test_max_steps_one(events):
    agg = aggregate(events, EventCaps(max_steps=1))
    assert matrix(agg) == [[3, 0, 0, 1], [1, 2, 0, 0], [1, 0, 1, 0]]
    assert agg.diagnostics["dropped_step_cap"] == 3


def test_max_per_step_keeps_at_most_m_events_per_user_and_bucket(events):
    agg = aggregate(events, EventCaps(max_per_step=1))
    assert matrix(agg) == [[1, 1, 1, 2], [1, 1, 0, 0], [1, 0, 1, 0]]
    assert agg.diagnostics["dropped_per_step_cap"] == 3  # u1 A/0: 3 -> 1, u2 B/1: 2 -> 1
    agg = aggregate(events, EventCaps(max_per_step=2))
    assert matrix(agg) == [[2, 1, 1, 2], [1, 2, 0, 0], [1, 0, 1, 0]]
    assert agg.diagnostics["dropped_per_step_cap"] == 1


def test_all_caps_together(events):
    agg = aggregate(events, EventCaps(max_per_step=2, max_steps=2, series_per_unit=1))
    assert matrix(agg) == [[2, 1, 0, 1], [0, 0, 0, 0], [1, 0, 0, 0]]
    assert agg.diagnostics == {
        "rows_in": 16, "dropped_outside_grid": 3, "dropped_undeclared_series": 1,
        "dropped_series_cap": 4, "dropped_step_cap": 2, "dropped_per_step_cap": 1, "rows_kept": 5,
    }


def test_caps_are_per_user(events):
    """Renaming u2 to u1's id merges them: the caps then bind across their events."""
    merged = events.with_columns(pl.lit("u1").alias("user"))
    agg = aggregate(merged, EventCaps(series_per_unit=1))
    # One user whose first series is A (00:05): only A survives, including u3's event.
    assert matrix(agg) == [[3, 1, 1, 2], [0, 0, 0, 0], [0, 0, 0, 0]]


def test_row_order_does_not_matter(events):
    caps = EventCaps(max_per_step=1, max_steps=2, series_per_unit=1)
    expected = matrix(aggregate(events, caps))
    for seed in range(3):
        assert matrix(aggregate(events.sample(fraction=1.0, shuffle=True, seed=seed), caps)) == expected


def test_output_frame(events):
    table = aggregate(events).table
    assert table.frame.columns == ["series", "ts", "count"]
    assert table.frame.height == 12
    assert table.series_names == KEYS and table.n_steps == 4 and table.grid.freq == "1h"
    assert table.frame["series"].to_list() == [k for k in KEYS for _ in range(4)]
    assert table.frame["ts"].to_list()[:4] == [datetime(2024, 1, 1, h) for h in range(4)]


def test_declared_series_without_events_are_released_as_zero(events):
    agg = aggregate(events, keys=["A", "Z"])
    assert matrix(agg) == [[3, 1, 1, 2], [0, 0, 0, 0]]
    assert agg.diagnostics["dropped_undeclared_series"] == 6  # B x3, C x2, D x1 (inside the grid)


def test_no_series_column(events):
    agg = aggregate_events(events, "user", "ts", "1h", START, END, EventCaps(max_per_step=1))
    # the 13 in-grid events (D included: there are no series), at most one per user and bucket:
    # u1 in buckets 0-3, u2 in buckets 0-2, u3 in bucket 3
    assert agg.table.series_names == ["count"] and agg.table.frame.columns == ["ts", "count"]
    assert matrix(agg) == [[2, 2, 2, 2]]
    assert agg.diagnostics["rows_kept"] == 8 and agg.diagnostics["dropped_per_step_cap"] == 5


def test_end_not_on_the_grid_is_still_exclusive():
    """--end 02:30 makes a 3-bucket grid; an event at 02:45 is after --end and is dropped."""
    df = pl.DataFrame({"user": ["a", "a", "b"],
                       "ts": ["2024-01-01 00:10:00", "2024-01-01 02:45:00", "2024-01-01 02:10:00"]})
    agg = aggregate_events(df, "user", "ts", "1h", START, "2024-01-01 02:30:00", EventCaps())
    assert matrix(agg) == [[1, 0, 1]]
    assert agg.diagnostics["dropped_outside_grid"] == 1


# ---------------------------------------------------------------------------------------------
# Values
# ---------------------------------------------------------------------------------------------


@pytest.fixture
def valued() -> pl.DataFrame:
    return pl.DataFrame({
        "user": ["u1", "u1", "u1", "u2", "u2"],
        "ts": ["2024-01-01 00:20:00", "2024-01-01 00:10:00", "2024-01-01 01:00:00",
               "2024-01-01 00:30:00", "2024-01-01 01:59:59"],
        "amount": [100.0, 1.0, -2.0, 0.5, 3.0],
    })


def test_values_are_clipped_to_the_bound(valued):
    agg = aggregate_events(valued, "user", "ts", "1h", START, "2024-01-01 02:00:00",
                           EventCaps(value_bound=3.0), value_col="amount")
    # bucket 0: min(100, 3) + 1 + 0.5; bucket 1: max(-2, 0) + 3
    assert matrix(agg) == [[4.5, 3.0]]
    assert agg.diagnostics["values_clipped"] == 2
    assert agg.table.frame.columns == ["ts", "amount"]


def test_rows_are_chosen_by_time_never_by_value(valued):
    """u1 keeps its earliest event of bucket 0 (value 1 at 00:10), not the larger one at 00:20."""
    agg = aggregate_events(valued, "user", "ts", "1h", START, "2024-01-01 02:00:00",
                           EventCaps(max_per_step=1, value_bound=10.0), value_col="amount")
    assert matrix(agg) == [[1.5, 3.0]]


def test_value_errors(valued):
    with pytest.raises(UsageError, match="--value-bound is required"):
        aggregate_events(valued, "user", "ts", "1h", START, END, EventCaps(), value_col="amount")
    with pytest.raises(UsageError, match="--value-bound must be > 0, got 0"):
        aggregate_events(valued, "user", "ts", "1h", START, END, EventCaps(value_bound=0.0), value_col="amount")
    bad = valued.with_columns(pl.Series("amount", [1.0, None, 2.0, 3.0, 4.0]))
    with pytest.raises(DataError, match="column 'amount': missing value at row 2") as info:
        aggregate_events(bad, "user", "ts", "1h", START, END, EventCaps(value_bound=1.0), value_col="amount")
    assert "--fill-missing" not in str(info.value)
    nan = valued.with_columns(pl.Series("amount", [1.0, float("nan"), 2.0, 3.0, 4.0]))
    with pytest.raises(DataError, match="non-finite value nan at row 2"):
        aggregate_events(nan, "user", "ts", "1h", START, END, EventCaps(value_bound=1.0), value_col="amount")


# ---------------------------------------------------------------------------------------------
# Grid and schema checks
# ---------------------------------------------------------------------------------------------


def test_monthly_grid():
    df = pl.DataFrame({"user": ["a", "a", "b", "c"],
                       "ts": ["2024-01-15", "2024-02-29 13:00:00", "2024-03-01", "2023-12-31 23:59:59"]})
    agg = aggregate_events(df, "user", "ts", "1mo", "2024-01-01", "2024-03-01", EventCaps())
    assert matrix(agg) == [[1, 1]]
    assert agg.table.frame["ts"].to_list() == [datetime(2024, 1, 1), datetime(2024, 2, 1)]
    assert agg.diagnostics["dropped_outside_grid"] == 2


def test_monthly_grid_on_a_date_column():
    df = pl.DataFrame({"user": ["a", "b", "b"], "day": [date(2024, 1, 3), date(2024, 4, 30), date(2024, 7, 1)]})
    agg = aggregate_events(df, "user", "day", "1q", "2024-01-01", "2024-07-01", EventCaps())
    assert matrix(agg) == [[1, 1]]
    assert agg.table.frame["day"].to_list() == [date(2024, 1, 1), date(2024, 4, 1)]


@pytest.mark.parametrize("start", ["2024-01-15", "2024-01-01 06:00:00"])
def test_monthly_grid_needs_a_month_aligned_start(events, start):
    with pytest.raises(UsageError, match="--start .* must be the first instant of a month"):
        aggregate_events(events, "user", "ts", "1mo", start, "2024-06-01", EventCaps())


def test_integer_time_column():
    df = pl.DataFrame({"user": ["a", "a", "b", "b"], "t": [0, 4, 5, 12]})
    agg = aggregate_events(df, "user", "t", "5", "0", "10", EventCaps(max_per_step=1))
    assert matrix(agg) == [[1, 1]]
    assert agg.diagnostics["dropped_outside_grid"] == 1 and agg.diagnostics["dropped_per_step_cap"] == 1


def test_schema_and_option_errors(events):
    with pytest.raises(DataError, match="--user-col: column 'who' not found; the input has columns: user, ts, series"):
        aggregate_events(events, "who", "ts", "1h", START, END, EventCaps())
    with pytest.raises(UsageError, match="--series-keys is required with --series-col"):
        aggregate(events, keys=None)
    with pytest.raises(UsageError, match="--series-keys: duplicate keys"):
        aggregate(events, keys=["A", "A"])
    nulls = events.with_columns(pl.when(pl.int_range(pl.len()) == 4).then(None).otherwise(pl.col("user")).alias("user"))
    with pytest.raises(DataError, match="column 'user': missing user id at row 5"):
        aggregate(nulls)
    with pytest.raises(UsageError, match="--end .* must be after --start"):
        aggregate_events(events, "user", "ts", "1h", END, START, EventCaps())
    with pytest.raises(UsageError, match="--freq"):
        aggregate_events(events, "user", "ts", "hourly-ish", START, END, EventCaps())


def test_integer_series_ids_match_string_keys():
    df = pl.DataFrame({"user": ["a", "b", "c"], "ts": ["2024-01-01 00:00:00"] * 3, "series": [1, 2, 7]})
    agg = aggregate_events(df, "user", "ts", "1h", START, "2024-01-01 01:00:00", EventCaps(), "series", ["1", "2"])
    assert matrix(agg) == [[1], [1]]
    assert agg.diagnostics["dropped_undeclared_series"] == 1
    assert np.issubdtype(agg.table.values_flat().dtype, np.floating)

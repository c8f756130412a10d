"""The user order of plan_runs (spec mean.md 2.0 rule 4) by one stable argsort of a combined key."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from tsdp.mean.algorithms import _user_order


@given(st.lists(st.tuples(st.integers(0, 5), st.integers(1, 9)), min_size=1, max_size=60))
@settings(max_examples=150, derandomize=True, deadline=None)
def test_user_order_is_the_lexicographic_order(rows):
    """Runs by group, then count descending, ties in the given order, as np.lexsort gives it, also
    where the combined key would overflow (then it is the lexsort)."""
    gid = np.sort(np.array([g for g, _ in rows], dtype=np.int64))
    counts = np.array([c for _, c in rows], dtype=np.int64)
    np.testing.assert_array_equal(_user_order(counts, gid), np.lexsort((-counts, gid)))
    huge = counts + 2**40
    np.testing.assert_array_equal(_user_order(huge, gid * 2**30), np.lexsort((-huge, gid * 2**30)))

"""The truncated run sums of the mean-estimate core (BESTFIT packing: tests/mean/test_grouping.py)."""

from __future__ import annotations

import numpy as np

from tsdp.mean.algorithms import _trunc_sums


def test_truncated_sums_including_runs_that_end_the_array():
    rng = np.random.default_rng(6)
    for _ in range(300):
        n = int(rng.integers(1, 30))
        values = rng.random(n)
        starts = rng.integers(0, n, int(rng.integers(1, 6)))
        t = np.array([rng.integers(1, n - s + 1) for s in starts])
        t[0] = n - starts[0]  # at least one run reaches the last value
        expected = [values[s:s + k].sum() for s, k in zip(starts, t)]
        assert np.allclose(_trunc_sums(values, starts, t), expected, rtol=0, atol=1e-12)

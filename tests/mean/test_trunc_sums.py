"""The two piece sums of every run (BESTFIT packing: tests/mean/test_grouping.py)."""

from __future__ import annotations

import numpy as np

from tsdp.mean.algorithms import run_piece_sums


def test_piece_sums_including_empty_pieces_and_runs_that_end_the_array():
    rng = np.random.default_rng(6)
    for _ in range(300):
        counts = rng.integers(1, 8, int(rng.integers(1, 6)))
        starts = np.concatenate(([0], np.cumsum(counts)))
        values = rng.random(int(starts[-1]))
        cut2 = np.array([rng.integers(0, c + 1) for c in counts])
        cut2[-1] = counts[-1]  # the last run reaches the last value
        cut1 = np.array([rng.integers(0, c2 + 1) for c2 in cut2])
        first, second = run_piece_sums(values, starts, cut1, cut2)
        s = starts[:-1]
        np.testing.assert_allclose(first, [values[a:a + k].sum() for a, k in zip(s, cut1)], rtol=0, atol=1e-12)
        np.testing.assert_allclose(second, [values[a + k:a + j].sum() for a, k, j in zip(s, cut1, cut2)],
                                   rtol=0, atol=1e-12)



def test_one_cut_and_whole_runs_sum_as_the_general_path():
    """Equal cuts (BESTFIT, private participation) and whole runs take shorter paths; every piece is
    still numpy's reduceat sum of exactly its slice, bit for bit (the order reduceat adds in is not
    np.add.reduce's), so seeded outputs do not depend on the path taken."""
    rng = np.random.default_rng(7)
    for _ in range(300):
        counts = rng.integers(1, 40, int(rng.integers(1, 7)))
        starts = np.concatenate(([0], np.cumsum(counts)))
        values = rng.random(int(starts[-1])) * 1e3
        cut = np.array([rng.integers(0, c + 1) for c in counts])
        if rng.random() < 0.5:
            cut[-1] = counts[-1]  # the last piece ends the array
        for cuts in ((cut, cut), (cut, cut.copy()), (counts, counts)):
            first, second = run_piece_sums(values, starts, *cuts)
            want = [float(_reduceat_piece(values, a, k)) for a, k in zip(starts[:-1], cuts[0])]
            assert first.tolist() == want and not second.any()


def _reduceat_piece(values, a: int, k: int) -> float:
    if k == 0:
        return 0.0
    return np.add.reduceat(values, [a, a + k] if a + k < values.size else [a])[0]

"""bench/stream.py's core at a small size: figures agree with the closed forms within sampling error."""

import numpy as np
import pytest

from tests.conftest import REPO_ROOT, load_script


@pytest.fixture(scope="module")
def figures():
    bench = load_script(REPO_ROOT / "bench" / "stream.py", "stream_bench")
    return bench, bench.run(n_series=60, horizon=40, seed=1, user_k=(3, 40))


def test_empirical_rmse_matches_the_closed_form(figures):
    _, f = figures
    assert set(f["event"]) >= {"independent", "tree", "toeplitz"}
    for name, v in f["event"].items():
        for output in ("cumulative", "daily"):
            rmse, se = v["empirical"][output]
            # a 5 standard-error band (the per-series MSEs are independent across series)
            assert abs(rmse - v["closed"][output]) <= 5 * se, (name, output, rmse, v["closed"][output], se)


def test_checks_of_the_bench_hold_at_small_size(figures):
    bench, f = figures
    results = dict(bench.checks(f))
    assert f["daily_only"]["auto"] == "independent"
    assert all(passed for text, passed in results.items() if "daily only" in text or "user" in text)
    assert f["user"][40]["auto"] == "independent"  # a user in every step: independent noise wins


def test_panel_is_deterministic_counts(figures):
    bench, _ = figures
    a, b = bench.panel(200, 365, 0), bench.panel(200, 365, 0)
    assert a.shape == (200, 365) and np.array_equal(a, b) and np.all(a >= 0) and np.all(a == np.rint(a))

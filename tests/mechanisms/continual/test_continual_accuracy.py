"""accuracy and choose: the s.d. per step against an independent dense computation, and auto's rules."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.mechanisms.continual.conftest import BASE, setting
from tsdp.mechanisms.continual import accuracy, choose, privacy_map
from tsdp.mechanisms.continual.factorization import factorization
from tsdp.mechanisms.continual.toeplitz import matrix
from tsdp.mechanisms.continual.workloads import workload_column

PUBLIC = {k: v for k, v in BASE.items() if k not in ("strategy", "band")}


@pytest.mark.parametrize("strategy, band", [("independent", None), ("toeplitz", None), ("banded", 5), ("tree", None)])
@pytest.mark.parametrize("output", ["daily", "cumulative", "window:4"])
def test_sd_is_sigma_times_the_row_norm_of_an_online_least_squares_decoder(strategy, band, output):
    """Independent computation: for each t, the best linear unbiased estimate of A_t x from the rows of C
    released by t (dense least squares, numpy.linalg.pinv), whose variance is ||B_t||^2 sigma^2; for a
    square invertible C it is A C^{-1}."""
    T = 23
    s = setting(horizon=T, strategy=strategy, band=band, outputs=(output,))
    fac = factorization(strategy, T, band)
    C = fac.tree.matrix() if fac.tree is not None else matrix(fac.column, T)
    last = C.shape[1] - 1 - np.argmax(C[:, ::-1] != 0, axis=1)  # step at which each row is released
    A = matrix(workload_column(output, T), T)
    expected = []
    for t in range(T):
        rows = C[last <= t][:, :t + 1]
        b = A[t, :t + 1] @ np.linalg.pinv(rows)
        assert np.allclose(b @ rows, A[t, :t + 1], atol=1e-9)
        expected.append(np.linalg.norm(b))
    acc = accuracy(s, alpha=0.05)[output]
    assert np.allclose(acc["sd"], privacy_map(s).sigma * np.array(expected), rtol=1e-9)
    assert np.allclose(acc["half_width"], 1.959963984540054 * acc["sd"], rtol=1e-12)


def test_daily_alone_keeps_independent_noise():
    for unit in (dict(unit="event"), dict(unit="user", max_steps=7), dict(unit="w-event", w=3)):
        chosen, table = choose(**{**PUBLIC, **unit, "outputs": ("daily",)})
        assert chosen.strategy == "independent"
        assert [r["strategy"] for r in table if r["chosen"]] == ["independent"]


def test_running_totals_choose_the_square_root_at_event_level():
    chosen, _ = choose(**{**PUBLIC, "outputs": ("cumulative",)})
    assert chosen.strategy == "toeplitz"


def test_a_user_in_every_step_gets_independent_noise():
    chosen, _ = choose(**{**PUBLIC, "unit": "user", "max_steps": 365, "outputs": ("cumulative",)})
    assert chosen.strategy == "independent"


def test_an_explicit_strategy_is_kept():
    chosen, table = choose(**{**PUBLIC, "outputs": ("daily",)}, strategy="tree")
    assert chosen.strategy == "tree" and sum(r["chosen"] for r in table) == 1
    chosen, _ = choose(**{**PUBLIC, "outputs": ("cumulative",)}, strategy="banded")
    assert chosen.strategy == "banded" and chosen.band is not None


@settings(max_examples=15, deadline=None)
@given(outputs=st.lists(st.sampled_from(["daily", "cumulative", "window:7", "window:30"]), min_size=1, max_size=3,
                        unique=True),
       unit=st.sampled_from([dict(unit="event"), dict(unit="w-event", w=5), dict(unit="user", max_steps=10),
                             dict(unit="user", max_steps=60, min_separation=3)]),
       horizon=st.sampled_from([2, 30, 100]))
def test_auto_is_never_worse_than_independent(outputs, unit, horizon):
    chosen, table = choose(**{**PUBLIC, **unit, "horizon": horizon, "outputs": tuple(outputs)})
    independent = next(r for r in table if r["strategy"] == "independent")
    best = next(r for r in table if r["chosen"])
    total = lambda r: sum(v["rmse"] ** 2 for v in r["outputs"].values())  # noqa: E731
    assert total(best) <= total(independent) and best["score"] == min(r["score"] for r in table)
    if len(outputs) == 1:
        (o,) = outputs
        assert best["outputs"][o]["rmse"] <= independent["outputs"][o]["rmse"]


def test_weights_decide_who_pays():
    """Daily + running totals: a heavy weight on daily pulls the choice towards C = I."""
    outputs = ("daily", "cumulative")
    plain, _ = choose(**{**PUBLIC, "outputs": outputs})
    daily_heavy, table = choose(**{**PUBLIC, "outputs": outputs}, weights={"daily": 1000.0})
    assert plain.strategy != "independent"
    rmse = {(r["strategy"], r["band"]): r["outputs"]["daily"]["rmse"] for r in table}
    assert rmse[(daily_heavy.strategy, daily_heavy.band)] < rmse[(plain.strategy, plain.band)]
    with pytest.raises(Exception, match="weights"):
        choose(**{**PUBLIC, "outputs": outputs}, weights={"window:7": 1.0})

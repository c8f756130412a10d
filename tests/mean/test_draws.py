"""Mean estimation's draws per sampler (tsdp.mean.draws, issue #28 item 4): chosen once from the sampler
object or its name; the Laplace step of each checked against its formula with the same seed."""

from __future__ import annotations

import numpy as np
import pytest

from tsdp.accounting.samplers import Float, Hardened
from tsdp.errors import UsageError
from tsdp.mean.draws import ExactDraws, FloatDraws, draws_for
from tsdp.mechanisms.noise import laplace_noise, snap

STAT = np.array([0.25, 3.5, -1.75, 10.0])
SENS = np.array([0.5, 2.0, 0.125, 0.0])  # the last group is degenerate: no noise


def test_the_draws_are_chosen_from_the_sampler_or_its_name():
    assert draws_for("float") is draws_for(Float()) is FloatDraws
    assert draws_for("hardened") is draws_for(Hardened(2.0 ** -8)) is draws_for(None) is ExactDraws
    with pytest.raises(UsageError, match="--sampler must be one of hardened, float"):
        draws_for("exact")


def test_the_float_laplace_step_is_stat_plus_scale_times_numpys_laplace():
    estimate, scale, g, step = FloatDraws.laplace(np.random.default_rng(5), STAT, SENS, 0.5, None)
    want = STAT + SENS / 0.5 * laplace_noise(np.random.default_rng(5), 1.0, STAT.size)
    np.testing.assert_array_equal(estimate, want)
    np.testing.assert_array_equal(scale, SENS / 0.5)
    assert g is None and step is None
    with pytest.raises(ValueError, match="hardened sampler only"):
        FloatDraws.laplace(np.random.default_rng(5), STAT, SENS, 0.5, 2.0 ** -10)


def test_the_exact_laplace_step_stays_on_the_lattice_with_the_rounded_sensitivity():
    g0 = 2.0 ** -10
    estimate, scale, g, step = ExactDraws.laplace(np.random.default_rng(5), STAT, SENS, 0.5, g0)
    np.testing.assert_array_equal(g, np.full(STAT.size, g0))
    live = SENS > 0
    np.testing.assert_array_equal(step[live], (np.floor(SENS[live] / g0) + 1) * g0)  # (floor(D / g) + 1) g
    assert step[~live].tolist() == [0.0] and estimate[~live].tolist() == STAT[~live].tolist()
    np.testing.assert_array_equal(scale, step / 0.5)
    offsets = (estimate[live] - snap(STAT[live], g0)) / g0
    assert np.all(offsets == np.round(offsets))  # g times an integer draw

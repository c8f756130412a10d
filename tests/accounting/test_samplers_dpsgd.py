"""The sampler objects answer DP-SGD's sampler-specific questions (issue #28 item 4): the lattice of the
gradient sum, Theorem G.1's tau for label/context noise and the theorem words, each checked against the
formula it must give; a DP-SGD setting holds the object whether it was given the object or its name."""

from __future__ import annotations

import math

import pytest
from scipy import stats

from tsdp.accounting import dpsgd_lattice as dl
from tsdp.accounting.samplers import Float, Hardened, sampler_of
from tsdp.accounting.structured import DpSgdSetting, composition_profile
from tsdp.errors import UsageError

GEOMETRY = dict(n_series=50, length=40, context=8, horizon=4, batch_size=8, noise_multiplier=1.3)


@pytest.mark.parametrize("name, cls", [("float", Float), ("hardened", Hardened)])
def test_a_setting_holds_the_sampler_object_given_its_name_or_itself(name, cls):
    lattice = {} if name == "float" else {"parameters": 100, "clip_norm": 1.0}
    by_name = DpSgdSetting(**GEOMETRY, sampler=name, **lattice)
    by_object = DpSgdSetting(**GEOMETRY, sampler=sampler_of(name), **lattice)
    assert isinstance(by_name.sampler, cls) and by_name == by_object
    assert by_name.sampler.name == name  # what reports and settings serialise


def test_the_hardened_lattice_is_the_gradient_lattice_of_sigma_c_on_p_coordinates():
    s = DpSgdSetting(**GEOMETRY, sampler="hardened", parameters=100, clip_norm=0.5)
    lattice = s.lattice
    assert lattice == dl.GradientLattice(1.3, 0.5, 100, s.max_batch_windows)
    assert lattice.granularity == 2.0 ** (math.floor(math.log2(1.3 * 0.5)) - 28)
    assert s.accounted_noise_multiplier == 1.3 * 0.5 / (0.5 * lattice.sum_factor + lattice.granularity * 10)
    assert DpSgdSetting(**GEOMETRY).lattice is None
    assert DpSgdSetting(**GEOMETRY).accounted_noise_multiplier == 1.3


def test_each_sampler_refuses_the_other_ones_lattice_options():
    with pytest.raises(UsageError, match="--sampler hardened needs --parameters"):
        DpSgdSetting(**GEOMETRY, sampler="hardened", clip_norm=1.0)
    with pytest.raises(UsageError, match="--parameters and --clip-norm apply to --sampler hardened only"):
        DpSgdSetting(**GEOMETRY, sampler="float", parameters=10)
    with pytest.raises(UsageError, match="--sampler must be one of hardened, float, got 'exact'"):
        DpSgdSetting(**GEOMETRY, sampler="exact")


@pytest.mark.parametrize("noise", [0.0, 0.05, 0.7, 3.0])
def test_theorem_g1_tau_per_sampler(noise):
    # float: TV(N(0, s^2), N(1, s^2)) = 2 Phi(1 / (2 s)) - 1, from scipy's normal cdf
    want = 1.0 if noise == 0 else 2 * stats.norm.cdf(1 / (2 * noise)) - 1
    assert Float().input_tau(noise, 2.0) == pytest.approx(want, rel=1e-12, abs=1e-15)
    assert Hardened().input_tau(noise, 2.0) == dl.hardened_tau(noise, 2.0)
    assert Hardened().input_tau(noise, 2.0) >= Float().input_tau(noise, 2.0)  # the lattice can only cost


def test_the_hardened_theorem_names_the_lattice_and_drops_tight():
    common = dict(GEOMETRY, instances=1)
    _, cont = composition_profile(DpSgdSetting(**common), "upper")
    _, hard = composition_profile(DpSgdSetting(**common, sampler="hardened", parameters=100, clip_norm=1.0), "upper")
    assert cont.tight and "; tight)" in cont.theorem
    assert not hard.tight and dl.THEOREM in hard.theorem and "tight" not in hard.theorem.split(";")[0]

"""The mechanism registry and protocol (tsdp.mechanisms.registry, .protocol) and the sampler objects
(tsdp.accounting.samplers): one entry per --mechanism choice, privacy maps that are pure functions of
the public setting and give exactly the release's claim, and samplers that own the lattice."""

from __future__ import annotations

import math

import numpy as np
import pytest

from tsdp.accounting import discrete as disc
from tsdp.accounting.sensitivity import ContributionBounds
from tsdp.errors import UsageError
from tsdp.mechanisms.baseline import Panel
from tsdp.mechanisms.noise import FLOAT_WARNING
from tsdp.mechanisms.protocol import Setting
from tsdp.mechanisms.registry import CELLWISE, MECHANISMS, NAMES, SUMMABLE
from tsdp.accounting.samplers import Float, Hardened, sampler_of

PANEL = Panel(3, 40, ContributionBounds("user", 2.0, max_steps=5, series_per_unit=2))
_FILTER = {"p": 0.3, "delta_split": 0.5, "alpha": None, "kernel": "gaussian", "filter_sigma": 2.0,
           "filter_width": None, "filter_kernel": None}
MAPPED = {  # every mechanism (and accounting) with its options
    "gaussian": (1e-6, {"calibration": "analytic"}),
    "laplace": (None, {}),
    "dft": (1e-6, {"dft_k": 5, "noise": "gaussian"}),
    "fast": (None, {"noise": "laplace", "max_samples": 8}),
    "subsample": (1e-3, {"p": 0.3, "accounting": "exact", "delta_split": 0.5}),
    "subsample/paper": (1e-3, {"p": 0.3, "accounting": "paper", "delta_split": 0.5}),
    "filter-subsample": (1e-3, {**_FILTER, "accounting": "paper"}),
    "filter-subsample/conditional": (1e-3, {**_FILTER, "accounting": "conditional"}),
}
RELEASE_ONLY = {"subsample": ("subsampling",), "filter-subsample": ("subsampling",)}  # the drawn J's block


def test_the_registry_is_the_command_lines_choice_list():
    from tsdp.cli.release import Mechanism

    assert NAMES == ("gaussian", "laplace", "dft", "fast", "subsample", "filter-subsample")
    assert [m.value for m in Mechanism] == list(NAMES)
    assert CELLWISE == ("gaussian", "laplace") and SUMMABLE == ("gaussian", "laplace", "dft")
    for name, mechanism in MECHANISMS.items():
        assert mechanism.name == name and mechanism.describes and mechanism.remedy.startswith("a larger --epsilon")
        for field, (keyword, _default) in mechanism.options.items():
            assert isinstance(field, str) and isinstance(keyword, str)


def test_every_mechanism_has_a_privacy_map():
    assert {case.split("/")[0] for case in MAPPED} == set(NAMES)
    assert all(callable(getattr(m, "privacy_map", None)) for m in MECHANISMS.values())


@pytest.mark.parametrize("case", list(MAPPED))
@pytest.mark.parametrize("sampler", ["hardened", "float"])
def test_the_privacy_map_is_pure_and_is_the_release_claim(case, sampler):
    delta, options = MAPPED[case]
    name = case.split("/")[0]
    mechanism = MECHANISMS[name]
    setting = Setting(1.0, delta, PANEL, sampler_of(sampler), options)
    values = np.random.default_rng(1).uniform(0, 2, (PANEL.n_series, PANEL.n_steps))
    chunks = [values.ravel()] if mechanism.cellwise else values
    released = mechanism.release(chunks, PANEL, np.random.default_rng(2), setting)
    claim = released.claim.to_dict()
    for key in RELEASE_ONLY.get(name, ()):
        del claim["parameters"][key]
    if case == "filter-subsample/conditional":  # its sigmas depend on the released sampled steps
        p = released.claim.parameters
        setting = Setting(1.0, delta, PANEL, setting.sampler, options,
                          {"s_J": p["sensitivity"]["s_J"], "n_sampled": p["subsampling"]["n_sampled"]})
    first, second = mechanism.privacy_map(setting), mechanism.privacy_map(setting)
    assert first.claim(name, PANEL).to_dict() == second.claim(name, PANEL).to_dict()
    assert claim == first.claim(name, PANEL).to_dict()
    assert (FLOAT_WARNING in released.warnings) == (sampler == "float")
    assert all(e.kind.startswith("discrete-") == (sampler == "hardened") for e in released.claim.events)


def test_the_hardened_gaussian_sequence_pays_the_slack_out_of_delta():
    """Calibrate, pick the lattice, subtract the slack, recalibrate: the final sigma covers the rounded
    sensitivity at delta minus the slack, and the slack it reports is below delta / 2."""
    from tsdp.accounting import gaussian as gauss

    l2, coords, epsilon, delta = 3.0, 50, 1.0, 1e-6
    calls = []

    def calibrate(budget, g):
        calls.append((budget, g))
        return gauss.analytic_sigma(epsilon, budget, l2 if g is None else disc.rounded_l2(l2, coords, g)), None

    fixed, sigma, _ = Hardened().calibrate_gaussian(epsilon, delta, l2, coords, calibrate)
    g = fixed.granularity
    assert calls[0] == (delta, None) and calls[1][1] == g and calls[1][0] < delta
    assert math.frexp(g)[0] == 0.5 and sigma / g >= disc.MIN_LATTICE_SCALE
    slack = fixed.slack(epsilon, sigma, coords)
    assert 0 < slack < delta / 2
    assert gauss.delta_for_epsilon(epsilon, fixed.rounded_l2(l2, coords) / sigma) + slack <= delta * (1 + 1e-9)
    same, sigma_float, _ = Float().calibrate_gaussian(epsilon, delta, l2, coords, calibrate)
    assert same.granularity is None and sigma_float == gauss.analytic_sigma(epsilon, delta, l2)


def test_verify_names_the_theorem_words_of_the_registry():
    from tsdp.verify.checks import _THEOREM_WORDS

    for name, mechanism in MECHANISMS.items():
        assert _THEOREM_WORDS.get(name, ()) == mechanism.theorem_words, name


def test_sampler_of_refuses_what_the_command_line_refuses():
    with pytest.raises(UsageError, match="--granularity applies to --sampler hardened only"):
        sampler_of("float", 2.0 ** -10)
    with pytest.raises(UsageError, match="power of two"):
        sampler_of("hardened", 0.3)
    with pytest.raises(UsageError, match="--sampler must be one of"):
        sampler_of("exact")
    assert sampler_of(None) == Hardened() and sampler_of("hardened", 0.5).granularity == 0.5


def test_an_option_of_another_mechanism_is_refused_by_name():
    from tsdp.api.series import ReleaseOptions

    with pytest.raises(UsageError, match=r"--dft-k applies only to --mechanism dft, not --mechanism laplace"):
        ReleaseOptions(epsilon=1.0, unit="event", mechanism="laplace", dft_k=5).plan()
    with pytest.raises(UsageError, match=r"--sampling-rate applies to --mechanism subsample and filter-subsample"):
        ReleaseOptions(epsilon=1.0, unit="event", mechanism="gaussian", delta=1e-6, sampling_rate=0.2).plan()
    with pytest.raises(UsageError, match=r"--filter-sigma applies only to --mechanism filter-subsample"):
        ReleaseOptions(epsilon=1.0, unit="event", mechanism="subsample", delta=1e-6, filter_sigma=3.0).plan()

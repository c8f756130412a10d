"""The privacy maps of ``subsample`` and ``filter-subsample`` (tsdp.mechanisms.subsample.maps).

The map is a pure function of the public setting; a seeded release's claim is exactly the map's claim
for the setting a verifier rebuilds from the report alone (its command parameters, and for the
conditional filter accounting the released figures ``sensitivity.s_J`` and ``subsampling.n_sampled``,
or the released sampled indices), after a JSON round trip as the report file makes it."""

from __future__ import annotations

import json

import numpy as np
import pytest

from tsdp.accounting.samplers import sampler_of
from tsdp.accounting.sensitivity import ContributionBounds
from tsdp.errors import UsageError
from tsdp.mechanisms import subsample as sm
from tsdp.mechanisms.baseline import Panel
from tsdp.mechanisms.protocol import Setting
from tsdp.mechanisms.registry import MECHANISMS

EPS, DELTA = 1.0, 1e-3
UNITS = {
    "event": ContributionBounds("event", 2.0),
    "user": ContributionBounds("user", 2.0, max_steps=6, series_per_unit=2),
    "w-event": ContributionBounds("w-event", 1.5, w=4),
    "user-substitute": ContributionBounds("user", 1.0, max_steps=5, neighbouring="substitute"),
}
CASES = [  # (mechanism, accounting, sampler, unit)
    ("subsample", "exact", "hardened", "user"), ("subsample", "exact", "float", "event"),
    ("subsample", "paper", "hardened", "w-event"), ("subsample", "paper", "float", "user"),
    ("subsample", "exact", "hardened", "user-substitute"),
    ("filter-subsample", "conditional", "hardened", "user"), ("filter-subsample", "conditional", "float", "w-event"),
    ("filter-subsample", "conditional", "hardened", "event"), ("filter-subsample", "paper", "hardened", "user"),
    ("filter-subsample", "paper", "float", "event"),
]


def options(mechanism: str, accounting: str, p: float = 0.3) -> dict:
    o = {"p": p, "accounting": accounting, "delta_split": 0.5}
    if mechanism == "filter-subsample":
        o.update(alpha=None, kernel="gaussian", filter_sigma=2.0, filter_width=None, filter_kernel=None)
    return o


def run(mechanism, accounting, sampler, unit, seed=3, p=0.3, S=3, T=40, emit_indices=False):
    panel = Panel(S, T, UNITS[unit])
    x = np.random.default_rng(seed).uniform(0, 2, (S, T))
    rng = np.random.default_rng(seed + 1)
    if mechanism == "subsample":
        rel = sm.release_subsample(x, panel, EPS, DELTA, rng, p, accounting, emit_indices=emit_indices,
                                   sampler=sampler)
    else:
        rel = sm.release_filter_subsample(x, panel, EPS, DELTA, rng, p, "gaussian", accounting, filter_sigma=2.0,
                                          emit_indices=emit_indices, sampler=sampler)
    return panel, rel


def report_claim(rel) -> dict:
    """The claim as a report file carries it (JSON round trip)."""
    return json.loads(json.dumps(rel.claim.to_dict()))


def released_from_report(claim: dict) -> dict:
    """What a verifier reads from a report for the conditional filter accounting."""
    return {"s_J": claim["parameters"]["sensitivity"]["s_J"], "n_sampled": claim["parameters"]["subsampling"]["n_sampled"]}


def map_claim(mechanism, panel, setting) -> dict:
    return json.loads(json.dumps(MECHANISMS[mechanism].privacy_map(setting).claim(mechanism, panel).to_dict()))


@pytest.mark.parametrize("mechanism,accounting,sampler,unit", CASES)
def test_the_release_claim_is_the_map_of_the_reports_public_figures(mechanism, accounting, sampler, unit):
    panel, rel = run(mechanism, accounting, sampler, unit)
    claim = report_claim(rel)
    released = released_from_report(claim) if accounting == "conditional" else {}
    setting = Setting(EPS, DELTA, panel, sampler_of(sampler), options(mechanism, accounting), released)
    mapped = map_claim(mechanism, panel, setting)
    sampling = claim["parameters"].pop("subsampling")
    assert "subsampling" not in mapped["parameters"] and sampling["n_sampled"]
    assert mapped == claim  # events, every parameter, epsilon, delta, theorem, unit, definition
    m = MECHANISMS[mechanism].privacy_map(setting)
    assert list(rel.warnings[:len(m.warnings)]) == list(m.warnings)  # the rest are about the drawn J


def test_the_conditional_map_from_the_released_indices_is_the_same_claim():
    panel, rel = run("filter-subsample", "conditional", "hardened", "user", emit_indices=True)
    claim = report_claim(rel)
    mask = np.zeros((panel.n_series, panel.n_steps), dtype=bool)
    for s, idx in enumerate(claim["parameters"]["subsampling"]["indices"]):
        mask[s, idx] = True
    setting = Setting(EPS, DELTA, panel, sampler_of("hardened"), options("filter-subsample", "conditional"),
                      {"sampled": mask})
    claim["parameters"].pop("subsampling")
    assert map_claim("filter-subsample", panel, setting) == claim


def test_the_conditional_map_depends_on_the_released_figures_and_needs_them():
    panel = Panel(3, 40, UNITS["user"])
    base = Setting(EPS, DELTA, panel, sampler_of("float"), options("filter-subsample", "conditional"))
    with pytest.raises(UsageError, match="released sampled steps"):
        MECHANISMS["filter-subsample"].privacy_map(base)
    with pytest.raises(UsageError, match="must list 3 figures"):
        MECHANISMS["filter-subsample"].privacy_map(Setting(EPS, DELTA, panel, base.sampler, base.options,
                                                           {"s_J": [0.5, 0.5], "n_sampled": [4, 4]}))
    low = Setting(EPS, DELTA, panel, base.sampler, base.options, {"s_J": [0.3, 0.4, 0.5], "n_sampled": [9, 12, 14]})
    high = Setting(EPS, DELTA, panel, base.sampler, base.options, {"s_J": [0.3, 0.4, 0.6], "n_sampled": [9, 12, 14]})
    sig_low = MECHANISMS["filter-subsample"].privacy_map(low).parameters["noise"]["sigma_per_series"]
    sig_high = MECHANISMS["filter-subsample"].privacy_map(high).parameters["noise"]["sigma_per_series"]
    # sigma_s is proportional to s_J(s) (spec 4.1): a larger s_J in one series means more noise there only
    assert sig_low[2] / 0.5 == pytest.approx(sig_low[0] / 0.3, rel=1e-12)
    assert sig_high[2] > sig_low[2] and sig_high[:2] == sig_low[:2]


@pytest.mark.parametrize("mechanism,accounting,sampler,unit", CASES[:1] + CASES[3:4] + CASES[5:6] + CASES[8:9])
def test_the_map_is_pure(mechanism, accounting, sampler, unit):
    panel = Panel(3, 40, UNITS[unit])
    released = {"s_J": [0.31, 0.42, 0.5], "n_sampled": [9, 12, 14]} if accounting == "conditional" else {}
    setting = Setting(EPS, DELTA, panel, sampler_of(sampler), options(mechanism, accounting), released)
    state = np.random.get_state()
    first, second = (MECHANISMS[mechanism].privacy_map(setting) for _ in range(2))
    assert first == second
    assert json.dumps(first.claim(mechanism, panel).to_dict()) == json.dumps(second.claim(mechanism, panel).to_dict())
    assert first.warnings == second.warnings and first.scale == second.scale and first.sampler == second.sampler
    assert all(a == b for a, b in zip(np.random.get_state()[1], state[1]))  # numpy's global stream untouched


@pytest.mark.parametrize("mechanism,accounting", [("subsample", "paper"), ("filter-subsample", "conditional")])
def test_at_rate_one_the_map_is_the_gaussian_fallbacks(mechanism, accounting):
    panel, rel = run(mechanism, accounting, "hardened", "user", p=1.0)
    setting = Setting(EPS, DELTA, panel, sampler_of("hardened"), options(mechanism, accounting, p=1.0))
    m = MECHANISMS[mechanism].privacy_map(setting)
    assert rel.claim.mechanism == "gaussian" and m.claim("gaussian", panel).to_dict() == rel.claim.to_dict()
    assert m.warnings == rel.warnings


def test_the_map_refuses_a_custom_kernel_given_as_a_file():
    panel = Panel(1, 40, UNITS["event"])
    o = {**options("filter-subsample", "paper"), "kernel": "custom", "filter_kernel": "taps.txt"}
    with pytest.raises(UsageError, match="taps as numbers"):
        MECHANISMS["filter-subsample"].privacy_map(Setting(EPS, DELTA, panel, sampler_of("float"), o))
    o["filter_kernel"] = [1.0, 2.0, 1.0]
    assert MECHANISMS["filter-subsample"].privacy_map(
        Setting(EPS, DELTA, panel, sampler_of("float"), o)).parameters["filter"]["type"] == "custom"

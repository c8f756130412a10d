"""Issue #28 item 2: ``tsdp account verify`` rechecks subsample and filter-subsample releases by calling
their own privacy maps (:mod:`tsdp.mechanisms.subsample.maps`).

Real seeded releases (``tsdp release`` in-process) of both mechanisms, every accounting, both samplers
and event/user units verify (their claim checks all pass; the seeded run itself is refused by the
randomness check, not by the claim); one figure edited alone (the noise, a per-series sigma, an s_J,
delta_noise, I', the lattice, the theorem, an event's noise) fails a claim check whose detail names it.
A custom kernel, recorded by its statistics only, verifies from them; s_J is recomputed from recorded
sampled steps.
"""

from __future__ import annotations

import copy
import json

import numpy as np
import pytest

from tsdp.accounting.sensitivity import ContributionBounds
from tsdp.cli.app import main
from tsdp.mechanisms import subsample as sm
from tsdp.mechanisms.baseline import Panel
from tsdp.report import Report
from tsdp.verify import claim_checks

MECHANISMS = {  # name -> options of `tsdp release`
    "subsample-exact": ["--mechanism", "subsample", "--accounting", "exact"],
    "subsample-paper": ["--mechanism", "subsample", "--accounting", "paper"],
    "filter-conditional": ["--mechanism", "filter-subsample", "--filter-sigma", "3"],
    "filter-paper": ["--mechanism", "filter-subsample", "--accounting", "paper", "--filter-sigma", "3"],
}
UNITS = {"user": ["--unit", "user", "--max-steps", "6", "--series-per-user", "2"], "event": ["--unit", "event"]}
SAMPLERS = ("hardened", "float")
CASES = [(m, u, s) for m in MECHANISMS for u in UNITS for s in SAMPLERS]
T = 120


def _panel_csv(where) -> str:
    rng = np.random.default_rng(3)
    rows = ["time," + ",".join(f"s{i}" for i in range(4))]
    for hour in range(T):
        rows.append(f"2024-01-{1 + hour // 24:02d}T{hour % 24:02d}:00:00," +
                    ",".join(str(int(v)) for v in rng.integers(0, 5, 4)))
    path = where / "panel.csv"
    path.write_text("\n".join(rows) + "\n")
    return str(path)


def _release(where, stem: str, options: list[str]) -> dict:
    argv = ["release", str(where / "panel.csv"), *options, "--epsilon", "1", "--delta", "1e-3",
            "--sampling-rate", "0.2", "--seed", "11", "-o", str(where / f"{stem}.csv"), "--quiet"]
    assert main(argv) == 0, stem
    return json.loads((where / f"{stem}.report.json").read_text())


@pytest.fixture(scope="module")
def where(tmp_path_factory):
    path = tmp_path_factory.mktemp("subsampling_map")
    _panel_csv(path)
    return path


@pytest.fixture(scope="module")
def reports(where) -> dict[tuple[str, str, str], dict]:
    return {(m, u, s): _release(where, f"{m}-{u}-{s}", [*MECHANISMS[m], *UNITS[u], "--sampler", s])
            for m, u, s in CASES}


def failures(data: dict) -> dict[str, str]:
    return {c.name: c.detail for c in claim_checks(data) if not c.passed}


def _named(failed: dict[str, str], word: str) -> bool:
    return any(word in detail for detail in failed.values())


@pytest.mark.parametrize("name, unit, sampler", CASES)
def test_a_real_release_verifies(reports, name, unit, sampler):
    data = reports[(name, unit, sampler)]
    assert data["claim"]["parameters"].get("sampler") == sampler
    assert failures(copy.deepcopy(data)) == {}


def _params(d: dict) -> dict:
    return d["claim"]["parameters"]


def _times(path: tuple, factor: float):
    def apply(d):
        node = _params(d)
        for key in path[:-1]:
            node = node[key]
        node[path[-1]] *= factor
    return apply


def _event_noise(d):
    d["claim"]["events"][0]["noise"] *= 2


def _granularity(d):
    _params(d)["granularity"] *= 2


def _theorem(d):
    d["claim"]["theorem"] += " (edited)"


def _i_prime(d):
    _params(d)["sensitivity"]["I_prime"] += 1


# edit -> (apply(data), the key the failing detail names, the mechanisms it applies to)
EDITS = {
    "sigma": (_times(("sigma",), 1.5), "parameters.sigma is", tuple(MECHANISMS)),
    "noise.sigma": (_times(("noise", "sigma"), 1.5), "parameters.noise.sigma is", tuple(MECHANISMS)),
    "sigma_per_series": (lambda d: _params(d)["noise"]["sigma_per_series"].__setitem__(
        1, _params(d)["noise"]["sigma_per_series"][1] * 1.5), "parameters.noise.sigma_per_series.1 is",
        ("filter-conditional",)),
    "s_J": (lambda d: _params(d)["sensitivity"]["s_J"].__setitem__(0, _params(d)["sensitivity"]["s_J"][0] * 0.5),
            "parameters.sensitivity.s_J.0 (l2_conditional / l2_worst_case) is", ("filter-conditional",)),
    "delta_noise": (_times(("privacy", "delta_noise"), 0.5), "parameters.privacy.delta_noise is",
                    ("subsample-paper", "filter-paper")),
    "I_prime": (_i_prime, "parameters.sensitivity.I_prime is", ("subsample-paper",)),
    "alpha": (_times(("sensitivity", "alpha"), 0.99), "parameters.sensitivity.alpha is", ("filter-paper",)),
    "theorem": (_theorem, "claim.theorem is", tuple(MECHANISMS)),
    "event noise": (_event_noise, "event 0 noise", ("subsample-exact", "filter-conditional")),
}
EDIT_CASES = [(m, u, s, e) for m, u, s in CASES for e, (_, _, where) in EDITS.items() if m in where]


@pytest.mark.parametrize("name, unit, sampler, edit", EDIT_CASES)
def test_a_figure_edited_alone_is_rejected_naming_its_key(reports, name, unit, sampler, edit):
    data = copy.deepcopy(reports[(name, unit, sampler)])
    apply, word, _ = EDITS[edit]
    apply(data)
    failed = failures(data)
    assert failed, f"{name} {unit} {sampler}: {edit} went unnoticed"
    assert _named(failed, word), failed


@pytest.mark.parametrize("name, unit", [(m, u) for m in MECHANISMS for u in UNITS])
def test_a_lattice_edited_alone_is_rejected_by_name(reports, name, unit):
    data = copy.deepcopy(reports[(name, unit, "hardened")])
    _granularity(data)
    assert "parameters.granularity is" in failures(data)["command"]


@pytest.mark.parametrize("name", list(MECHANISMS))
def test_a_sampling_rate_edited_alone_is_rejected(reports, name):
    """p is stated in the drawn sample's block, which the map does not make: the rule reads it from there,
    so an edited p fails probability_empty and is recomputed (sigma, theorem, events move)."""
    data = copy.deepcopy(reports[(name, "user", "hardened")])
    _params(data)["subsampling"]["p"] = 0.3
    failed = failures(data)
    assert _named(failed, "probability_empty") and "parameters" in failed, failed


@pytest.mark.parametrize("field, value", [("s_J", 1.5), ("n_sampled", 0)])
def test_a_released_figure_out_of_range_is_rejected(reports, field, value):
    data = copy.deepcopy(reports[("filter-conditional", "user", "hardened")])
    block = "sensitivity" if field == "s_J" else "subsampling"
    _params(data)[block][field][0] = value
    assert f"parameters.{block}.{field} must list" in failures(data)["parameters"]


def test_a_custom_kernel_verifies_from_its_recorded_statistics(where):
    (where / "kernel.txt").write_text("1\n2\n3\n2\n1\n")
    for accounting in ("conditional", "paper"):
        data = _release(where, f"custom-{accounting}", ["--mechanism", "filter-subsample", "--filter", "custom",
                                                       "--filter-kernel", str(where / "kernel.txt"),
                                                       "--accounting", accounting, *UNITS["user"]])
        block = _params(data)["filter"]
        assert block["type"] == "custom" and block["taps"] == 5  # the tap count only: the taps are not recorded
        assert failures(copy.deepcopy(data)) == {}
        for key, factor in (("L", 0.5), ("srank", 1.1)):
            edited = copy.deepcopy(data)
            _params(edited)["filter"][key] *= factor
            assert f"parameters.filter.{key} is" in failures(edited)["parameters"], (accounting, key)


def _api_report(emit_indices: bool) -> dict:
    b = ContributionBounds("user", 2.0, max_steps=6, series_per_unit=None)
    x = np.random.default_rng(0).uniform(0, 10, (3, 60))
    claim = sm.release_filter_subsample(x, Panel(3, 60, b), 1.0, 1e-5, np.random.default_rng(1), 0.2,
                                        filter_sigma=3.0, emit_indices=emit_indices).claim
    params = {"mechanism": "filter-subsample", "epsilon": 1.0, "delta": 1e-5, "unit": "user", "max_per_step": 2.0,
              "max_steps": 6, "w": None, "series_per_user": None, "neighbouring": "add-remove",
              "assume_none": False, "layout": "wide", "sampling_rate": None}
    return Report(command="release", parameters=params, claim=claim,
                  output={"file": "out.csv", "format": "csv", "sha256": "0" * 64}, randomness="os-entropy",
                  grid={"n_series": 3, "n_steps": 60}).to_dict()


def test_s_J_is_recomputed_from_recorded_sampled_steps():
    data = _api_report(emit_indices=True)
    assert failures(copy.deepcopy(data)) == {}
    edited = copy.deepcopy(data)
    _params(edited)["sensitivity"]["s_J"][1] *= 0.9
    assert "parameters.sensitivity.s_J.1 (from the recorded indices) is" in failures(edited)["parameters"]
    moved = copy.deepcopy(data)
    row = _params(moved)["subsampling"]["indices"][0]
    row.append(next(t for t in range(60) if t not in row))
    assert "the recorded indices give" in failures(moved)["parameters"]

"""Issue #28 item 2: ``tsdp account verify`` rechecks a release by calling its mechanism's own privacy map.

Real seeded releases (``tsdp release`` in-process on a small panel) of every additive mechanism, noise,
sampling variant and sampler verify (their claim checks all pass; the seeded run itself is refused by the
randomness check, not by the claim); a figure of the map edited alone (the noise, a sensitivity, the
lattice, an event's noise, epsilon, the theorem) fails a claim check whose detail names it.
"""

from __future__ import annotations

import copy
import json

import numpy as np
import pytest

from tsdp.cli.app import main
from tsdp.verify import claim_checks

MECHANISMS = {  # name -> options of `tsdp release`
    "gaussian": ["--mechanism", "gaussian", "--delta", "1e-6"],
    "laplace": ["--mechanism", "laplace"],
    "dft-gaussian": ["--mechanism", "dft", "--dft-k", "6", "--delta", "1e-6"],
    "dft-laplace": ["--mechanism", "dft", "--noise", "laplace", "--dft-k", "6"],
    "fast-adaptive-laplace": ["--mechanism", "fast", "--fast-max-samples", "8"],
    "fast-adaptive-gaussian": ["--mechanism", "fast", "--noise", "gaussian", "--delta", "1e-6"],
    "fast-fixed-laplace": ["--mechanism", "fast", "--fast-fixed-interval", "5"],
    "fast-fixed-gaussian": ["--mechanism", "fast", "--noise", "gaussian", "--delta", "1e-6",
                            "--fast-fixed-interval", "4"],
}
SAMPLERS = ("hardened", "float")
CASES = [(m, s) for m in MECHANISMS for s in SAMPLERS]


@pytest.fixture(scope="module")
def reports(tmp_path_factory) -> dict[tuple[str, str], dict]:
    where = tmp_path_factory.mktemp("against_map")
    rng = np.random.default_rng(3)
    rows = ["time," + ",".join(f"s{i}" for i in range(4))]
    for day in range(40):
        rows.append(f"2024-01-{1 + day // 24:02d}T{day % 24:02d}:00:00," +
                    ",".join(str(int(v)) for v in rng.integers(0, 5, 4)))
    (where / "panel.csv").write_text("\n".join(rows) + "\n")
    out = {}
    for name, options in MECHANISMS.items():
        for sampler in SAMPLERS:
            stem = f"{name}-{sampler}"
            argv = ["release", str(where / "panel.csv"), *options, "--epsilon", "1", "--unit", "user",
                    "--max-steps", "6", "--series-per-user", "2", "--sampler", sampler, "--seed", "11",
                    "-o", str(where / f"{stem}.csv"), "--quiet"]
            assert main(argv) == 0, stem
            out[(name, sampler)] = json.loads((where / f"{stem}.report.json").read_text())
    return out


def failures(data: dict) -> dict[str, str]:
    return {c.name: c.detail for c in claim_checks(data) if not c.passed}


@pytest.mark.parametrize("name, sampler", CASES)
def test_a_real_release_verifies(reports, name, sampler):
    data = reports[(name, sampler)]
    assert data["claim"]["parameters"].get("sampler") == sampler
    assert failures(copy.deepcopy(data)) == {}


def _noise_key(params: dict) -> str:
    return "sigma" if "sigma" in params else "scale"


def _sensitivity_key(params: dict) -> str:
    return next(k for k in ("l2_sensitivity", "l1_sensitivity", "sensitivity_per_timestamp") if k in params)


def _scale(data: dict, key: str, factor: float) -> None:
    data["claim"]["parameters"][key] *= factor


EDITS = {  # edit -> (apply(data), words the failing detail names)
    "noise": (lambda d: _scale(d, _noise_key(d["claim"]["parameters"]), 1.5), lambda d: _noise_key(
        d["claim"]["parameters"])),
    "sensitivity": (lambda d: _scale(d, _sensitivity_key(d["claim"]["parameters"]), 0.5),
                    lambda d: _sensitivity_key(d["claim"]["parameters"])),
    "event noise": (lambda d: d["claim"]["events"][0].update(noise=d["claim"]["events"][0]["noise"] * 2)
                    if d["claim"]["events"] else _scale(d, _noise_key(d["claim"]["parameters"]), 2),
                    lambda d: "event 0 noise" if d["claim"]["events"] else _noise_key(d["claim"]["parameters"])),
    "epsilon": (lambda d: d["claim"].update(epsilon=d["claim"]["epsilon"] * 0.5), lambda d: "epsilon"),
    "theorem": (lambda d: d["claim"].update(theorem=d["claim"]["theorem"] + " (edited)"), lambda d: "theorem"),
}


# The Gaussian mechanism's rule is pure Python (tsdp/verify/release.py: a Gaussian verify loads no numerical
# library), not its map: it checks that the theorem names the right result (its words), not the text exactly.
MAPPED_EDITS = [(m, s, e) for m, s in CASES for e in EDITS if (m, e) != ("gaussian", "theorem")]


@pytest.mark.parametrize("name, sampler, edit", MAPPED_EDITS)
def test_a_figure_of_the_map_edited_alone_is_rejected_by_name(reports, name, sampler, edit):
    data = copy.deepcopy(reports[(name, sampler)])
    apply, named = EDITS[edit]
    word = named(data)
    apply(data)
    failed = failures(data)
    assert failed, f"{name} {sampler}: {edit} went unnoticed"
    assert any(word in detail for detail in failed.values()), failed


@pytest.mark.parametrize("name", list(MECHANISMS))
def test_a_lattice_edited_alone_is_rejected_by_name(reports, name):
    data = copy.deepcopy(reports[(name, "hardened")])
    data["claim"]["parameters"]["granularity"] *= 2
    failed = failures(data)
    if name == "gaussian":  # rechecked in pure Python: the lattice's choice needs the map's scipy calibration
        assert "events" in failed and "parameters" in failed, failed
    else:
        assert "parameters.granularity is" in failed["command"], failed


@pytest.mark.parametrize("name", [n for n in MECHANISMS if n != "gaussian"])
def test_a_map_parameter_edited_alone_names_its_dotted_path(reports, name):
    """Any key of the map's parameters, nested ones too: here the one series' sensitivity of the
    composition record (FAST), the kept coefficients (DFT), the cells (Laplace)."""
    data = copy.deepcopy(reports[(name, "hardened")])
    params = data["claim"]["parameters"]
    path = ("composition", "series_per_unit") if name.startswith("fast") else \
        ("kept_real_coefficients",) if name.startswith("dft") else ("cells_per_unit",)
    node = params
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] += 1
    failed = failures(data)
    assert any(f"parameters.{'.'.join(path)} is" in detail for detail in failed.values()), failed


@pytest.mark.parametrize("name", ["dft-gaussian", "fast-adaptive-laplace"])
def test_an_option_stated_otherwise_than_the_command_line_is_rejected(reports, name):
    """k / M edited in the claim: the command line gives another value, and the claim recomputed at the
    edited value does not match its own events and noise either."""
    data = copy.deepcopy(reports[(name, "hardened")])
    key = "k" if name.startswith("dft") else "max_samples_M"
    data["claim"]["parameters"][key] = 4  # FAST: below the 6 steps a user touches, so c = min(M, 6) drops
    failed = failures(data)
    assert f"parameters.{key} is" in failed["command"] and "events" in failed, failed


def test_a_map_that_refuses_the_recorded_setting_is_a_failed_check_not_a_crash(reports):
    data = copy.deepcopy(reports[("dft-gaussian", "hardened")])
    data["command"]["parameters"]["dft_k"] = 10_000
    data["claim"]["parameters"]["k"] = 10_000
    failed = failures(data)
    assert "refuses the recorded setting" in failed["parameters"] and "--dft-k" in failed["parameters"], failed

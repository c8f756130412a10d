"""End to end (issue 17): ``tsdp release`` with a hardened subsampling mechanism at a coarse
``--granularity`` states the rounded sensitivities; ``tsdp account verify`` accepts the report and
fails it (exit 3) once one rounded figure is set back to the unrounded one; ``--granularity`` with
``--sampler float`` is a usage error (exit 2) that writes nothing."""

from __future__ import annotations

import json

import numpy as np
import pytest

from tsdp.cli.app import main

# The discrete noise's rounding slack (tsdp.accounting.discrete) must stay below half of --delta for EVERY
# draw of J (these releases are unseeded): a unit changes T K = 32 filtered values, whose slack at the
# smallest lattice scale the bound uses (8) is 0.0465 < 0.1 / 2, and sigma / G >= 9.1 even for a J of one
# step (s_J >= a filter row's norm); without filter it changes I K = 8. G = 1/8 keeps the lattice coarse
# (sigma / G about 10 to 27) and the rounding visible (M' = 1.125 M).
T, G, M, DELTA = 16, 0.125, 1.0, "0.1"


@pytest.fixture
def small(tmp_path):
    """A wide CSV of two series of T steps (unseeded releases of it verify as publishable)."""
    rng = np.random.default_rng(0)
    rows = [f"2024-01-01T{t // 60:02d}:{t % 60:02d}:00,{a:.3f},{b:.3f}" for t, (a, b) in
            enumerate(rng.uniform(0, 10, (T, 2)))]
    path = tmp_path / "small.csv"
    path.write_text("time,a,b\n" + "\n".join(rows) + "\n")
    return path


def release_args(small, mechanism, out, *extra):
    args = ["release", str(small), "--mechanism", mechanism, "--epsilon", "1", "--delta", DELTA, "--unit", "user",
            "--max-steps", "4", "--max-per-step", str(M), "--sampling-rate", "0.5", "-o", str(out), "--quiet", *extra]
    return args + (["--filter-sigma", "3"] if mechanism == "filter-subsample" else [])


def unround_step(params):
    params["sensitivity"]["rounded_per_step"] = M


def unround_conditional(params):
    sens = params["sensitivity"]
    s = int(np.argmin(sens["rounded_l2_conditional"]))
    sens["rounded_l2_conditional"][s] = sens["l2_conditional"][s]


@pytest.mark.parametrize("mechanism,edit", [("subsample", unround_step),
                                            ("filter-subsample", unround_conditional)])
def test_coarse_hardened_release_verifies_and_an_unrounded_figure_fails(tmp_path, small, mechanism, edit):
    out = tmp_path / "out.csv"
    assert main(release_args(small, mechanism, out, "--granularity", str(G))) == 0
    report_path = tmp_path / "out.report.json"
    report = json.loads(report_path.read_text())
    params = report["claim"]["parameters"]
    assert params["sampler"] == "hardened" and params["granularity"] == G
    if mechanism == "subsample":
        assert params["sensitivity"]["rounded_per_step"] == (M // G + 1) * G
    else:
        assert all(r > s for r, s in zip(params["sensitivity"]["rounded_l2_conditional"],
                                         params["sensitivity"]["l2_conditional"]))
    assert main(["account", "verify", str(report_path), "--released", str(out), "--quiet"]) == 0
    edit(params)
    tampered = tmp_path / "tampered.report.json"
    tampered.write_text(json.dumps(report))
    assert main(["account", "verify", str(tampered), "--quiet"]) == 3


@pytest.mark.parametrize("mechanism", ["subsample", "filter-subsample"])
def test_granularity_with_the_float_sampler_is_a_usage_error(tmp_path, small, capsys, mechanism):
    out = tmp_path / "out.csv"
    assert main(release_args(small, mechanism, out, "--sampler", "float", "--granularity", str(G))) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error:") and "--granularity" in err[0]
    assert not out.exists() and not (tmp_path / "out.report.json").exists()

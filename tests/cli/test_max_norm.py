"""``--max-norm C|auto`` (issue 33): each user's cell totals scaled to an L2 norm C on raw events,
released by the Gaussian mechanism with L2 sensitivity min(M sqrt(cells), C); with ``auto`` C is
chosen privately where the bias it removes balances the noise it adds (tsdp.mechanisms.bounds.Balance).
The report states C in its unit; verify rechecks the sensitivity, the selection's public constants and
refuses the edits below."""

from __future__ import annotations

import copy
import json
import math
from pathlib import Path

import pytest

from tests.cli.test_auto_bounds import README_CAPS
from tsdp.report import load_report

ROOT = Path(__file__).resolve().parents[2]
EVENTS = [str(ROOT / "sample_data/events.csv"), "--layout", "events", "--user-col", "user_id", "--time-col",
          "timestamp", "--series-col", "station", "--series-keys", "st1,st2,st3,st4,st5", "--start",
          "2024-03-04", "--end", "2024-03-18", "--freq", "1d", "--epsilon", "1", "--delta", "1e-6",
          "--unit", "user"]


@pytest.fixture(scope="module")
def norm_release(tmp_path_factory):
    """An unseeded release of the README events example with --max-norm auto (verifiable)."""
    from tsdp.cli.app import main

    out = tmp_path_factory.mktemp("norm") / "norm.csv"
    assert main(["release", *EVENTS, "--max-norm", "auto", "-o", str(out), "-q"]) == 0
    return out, out.with_name("norm.report.json")


def test_the_report_states_the_norm_and_the_selection(norm_release):
    _, report_path = norm_release
    report = load_report(report_path)  # valid against the JSON schema
    claim = report["claim"]
    record = claim["parameters"]["bound_selection"]["max_norm"]
    chosen = record["chosen"]
    assert chosen in record["candidates"] and record["rule"] == "balance"
    assert claim["unit"]["max_norm"] == chosen and claim["unit"]["max_per_step"] == chosen  # no per-step cap
    assert claim["unit"]["max_steps"] == 14 and claim["unit"]["series_per_unit"] == 5
    assert claim["parameters"]["l2_sensitivity"] == pytest.approx(chosen)  # min(sqrt(70) C, C)
    assert claim["epsilon"] == pytest.approx(1.0) and claim["events"][-1]["kind"] == "exponential"
    assert claim["events"][-1]["sensitivity"] == record["weight_bound"] == 32
    assert report["command"]["parameters"]["max_norm"] == "auto"


def test_verify_passes_and_refuses_every_edit(tsdp_cli, tmp_path, norm_release):
    released, report_path = norm_release
    run = tsdp_cli("account", "verify", report_path, "--released", released)
    assert run.code == 0, run.out + run.err
    original = json.loads(report_path.read_text())
    record = ["claim", "parameters", "bound_selection", "max_norm"]

    def at(doc, path):
        for key in path:
            doc = doc[key]
        return doc

    edits = {
        "unit norm": lambda d: d["claim"]["unit"].update(max_norm=d["claim"]["unit"]["max_norm"] * 2),
        "unit norm dropped": lambda d: d["claim"]["unit"].pop("max_norm"),
        "target": lambda d: at(d, record).update(target=at(d, record)["target"] // 2),
        "weight bound": lambda d: at(d, record).update(weight_bound=1),
        "candidates": lambda d: at(d, record).update(candidates=at(d, record)["candidates"][:20]),
        "selection event": lambda d: d["claim"]["events"][-1].update(sensitivity=1.0, noise=20.0),
        "delta of the balance": lambda d: d["command"]["parameters"].update(delta=1e-3),
    }
    for name, edit in edits.items():
        doc = copy.deepcopy(original)
        edit(doc)
        path = tmp_path / f"{name.replace(' ', '_')}.report.json"
        path.write_text(json.dumps(doc))
        assert tsdp_cli("account", "verify", path, "--released", released).code == 3, f"verify accepted: {name}"


def test_a_fixed_norm_with_caps_verifies_and_states_the_smaller_bound(tsdp_cli, tmp_path):
    run = tsdp_cli("release", *EVENTS, "--max-norm", "20", "--max-per-step", "4", "--max-steps", "10",
                   "--series-per-user", "1", "-o", "n.csv", "-q")
    assert run.code == 0, run.err
    claim = json.loads((tmp_path / "n.report.json").read_text())["claim"]
    assert claim["unit"]["max_norm"] == 20 and claim["unit"]["max_per_step"] == 4
    assert claim["parameters"]["l2_sensitivity"] == pytest.approx(min(4 * math.sqrt(10), 20))
    assert tsdp_cli("account", "verify", tmp_path / "n.report.json", "--released", tmp_path / "n.csv").code == 0
    loose = tsdp_cli("release", *EVENTS, "--max-norm", "1000", "--max-per-step", "2", "--max-steps", "14",
                     "-o", "l.csv", "-q")
    assert loose.code == 0, loose.err
    claim = json.loads((tmp_path / "l.report.json").read_text())["claim"]
    assert claim["parameters"]["l2_sensitivity"] == pytest.approx(2 * math.sqrt(70))  # the box is smaller


@pytest.mark.parametrize("args, needle", [
    (["--max-norm", "5", "--mechanism", "laplace"], "--max-norm"),
    (["--max-norm", "5", "--noise", "laplace", "--mechanism", "dft"], "--max-norm"),
    (["--max-norm", "5", "--unit", "event"], "--unit user"),
    (["--max-norm", "5", "--unit", "w-event", "--w", "3"], "--unit user"),
    (["--max-norm", "-1"], "--max-norm"),
    (["--max-norm", "abc"], "--max-norm"),
    (["--max-norm", "auto", "--dry-run"], "--max-norm auto"),
    (["--max-norm", "auto", "--bound-quantile", "0.5"], "--bound-quantile"),
])
def test_refusals(refuse, args, needle):
    base = list(EVENTS)
    if "--unit" in args:
        i = base.index("--unit")
        del base[i:i + 2]
    if "--mechanism" in args and "laplace" in args:
        i = base.index("--delta")
        del base[i:i + 2]
    refuse(["release", *base, *args, "-o", "x.csv"], 2, needle)


def test_series_input_is_refused(refuse, tmp_path):
    path = tmp_path / "s.csv"
    path.write_text("time,value\n2024-01-01,1\n2024-01-02,2\n")
    refuse(["release", str(path), "--epsilon", "1", "--delta", "1e-6", "--unit", "user", "--max-steps", "2",
            "--max-norm", "3", "-o", "x.csv"], 2, "--max-norm")


def test_norm_auto_cuts_the_evaluated_total_error_of_the_readme_caps(tsdp_cli, capsys):
    """Issue 33's target, measured with the norm: the evaluated total error (bias + noise against the raw
    events) at the same total epsilon 1. bench/bound_selection.py measured 1.89x (MAE 265 -> 140); any
    per-step and step caps, even the best known for free, stay at or below 1.84x. The test asserts what
    is reached, with margin for the runs' noise."""
    def total(caps, runs):
        run = tsdp_cli("release", *EVENTS, *caps, "--evaluate", runs, "--json", "--custodian", "ev.json", "--force")
        assert run.code == 0, run.err
        return json.loads(Path("ev.json").read_text())["figures"]["evaluation"]["error"]["total"]

    fixed = total([*README_CAPS, "--series-per-user", "1"], 6)
    norm = total(["--max-norm", "auto"], 12)
    ratio = fixed["mae"]["mean"] / norm["mae"]["mean"]
    with capsys.disabled():
        print(f"\nevaluated total MAE: README caps {fixed['mae']['mean']:.1f}, --max-norm auto "
              f"{norm['mae']['mean']:.1f}: {ratio:.2f}x")
    assert ratio >= 1.6


def test_compose_states_the_strictest_norm(tsdp_cli, norm_release, tmp_path):
    _, report_path = norm_release
    run = tsdp_cli("release", *EVENTS, "--max-norm", "5", "-o", "five.csv", "-q")
    assert run.code == 0, run.err
    composed = tsdp_cli("account", "compose", report_path, tmp_path / "five.report.json", "--json")
    assert composed.code == 0, composed.err
    unit = json.loads(composed.out)["unit"]
    assert unit["max_norm"] == 5.0 and "max_norm" in unit["covers"]

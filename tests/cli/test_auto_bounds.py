"""``--max-per-step auto`` / ``--max-steps auto``: caps chosen privately on raw events (issue 33).

The selection spends a stated share of --epsilon (the exponential mechanism on a quantile of the
users' contributions, tsdp.mechanisms.bounds); the report publishes the chosen caps, names the
theorem and carries one ``exponential`` event per cap; verify rechecks the release at its share and
the selection against the recorded options, and refuses every edit below.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import polars as pl
import pytest

from tsdp.mechanisms import bounds
from tsdp.report import load_report

ROOT = Path(__file__).resolve().parents[2]
EVENTS = [str(ROOT / "sample_data/events.csv"), "--layout", "events", "--user-col", "user_id", "--time-col",
          "timestamp", "--series-col", "station", "--series-keys", "st1,st2,st3,st4,st5", "--start",
          "2024-03-04", "--end", "2024-03-18", "--freq", "1d", "--epsilon", "1", "--delta", "1e-6",
          "--unit", "user", "--series-per-user", "1"]
README_CAPS = ["--max-per-step", "2", "--max-steps", "14"]


@pytest.fixture(scope="module")
def auto_release(tmp_path_factory):
    """An unseeded release of the README events example with --max-per-step auto (verifiable)."""
    from tsdp.cli.app import main

    out = tmp_path_factory.mktemp("auto") / "auto.csv"
    assert main(["release", *EVENTS, "--max-per-step", "auto", "--max-steps", "14", "-o", str(out), "-q"]) == 0
    return out, out.with_name("auto.report.json")


def test_the_report_publishes_the_chosen_cap_and_the_selection(auto_release):
    _, report_path = auto_release
    report = load_report(report_path)  # valid against the JSON schema
    claim = report["claim"]
    selection = claim["parameters"]["bound_selection"]
    chosen = selection["max_per_step"]["chosen"]
    assert claim["epsilon"] == pytest.approx(1.0) and selection["epsilon"] == pytest.approx(0.1)
    from tsdp.accounting.discrete import SLACK_SHARE

    split = bounds.Split.of(1.0, 1e-6, 0.1, 1, exact=True, slack_share=SLACK_SHARE)  # the default lattice
    assert selection["release_epsilon"] == split.release_epsilon and "max_steps" not in selection
    assert selection["release_epsilon"] > 0.97 and selection["composition"].startswith("exact")
    assert chosen in selection["max_per_step"]["candidates"] and claim["unit"]["max_per_step"] == chosen
    assert claim["unit"]["max_steps"] == 14 and claim["unit"]["enforced"] is True
    assert [e["kind"] for e in claim["events"]][-1] == "exponential"
    assert "McSherry and Talwar 2007, Theorem 6" in claim["theorem"]
    assert report["command"]["parameters"]["max_per_step"] == "auto"


def test_verify_passes_and_refuses_every_edit(tsdp_cli, tmp_path, auto_release):
    released, report_path = auto_release
    run = tsdp_cli("account", "verify", report_path, "--released", released, "--json")
    assert run.code == 0, run.out
    names = {c["name"] for c in json.loads(run.out)["reports"][0]["checks"]}
    assert "bound_selection" in names
    original = json.loads(report_path.read_text())
    sel = ["claim", "parameters", "bound_selection"]

    def at(doc, path):
        for key in path:
            doc = doc[key]
        return doc

    def other_candidate(doc):
        record = at(doc, sel)["max_per_step"]
        record["chosen"] = 4096 if record["chosen"] != 4096 else 1  # unit and panel no longer match

    edits = {
        "chosen cap": other_candidate,
        "selection epsilon": lambda d: at(d, sel).update(epsilon=0.01),
        "release epsilon": lambda d: at(d, sel).update(release_epsilon=0.99),
        "composition rule": lambda d: at(d, sel).update(composition=bounds.RULES[bounds.BASIC]),
        "composition unknown": lambda d: at(d, sel).update(composition="exact"),
        "lattice set by hand": lambda d: d["command"]["parameters"].update(granularity=2.0 ** -10),
        "composition theorem": lambda d: d["claim"].update(theorem=d["claim"]["theorem"].split("; selections")[0]),
        "claim epsilon": lambda d: d["claim"].update(epsilon=0.9),
        "share": lambda d: d["command"]["parameters"].update(bound_selection_share=0.05),
        "candidates": lambda d: at(d, sel)["max_per_step"].update(candidates=[1, 2, 4, 8]),
        "selection event dropped": lambda d: d["claim"].update(events=d["claim"]["events"][:-1]),
        "selection event noise": lambda d: d["claim"]["events"][-1].update(noise=1.0),
        "not auto": lambda d: d["command"]["parameters"].update(max_per_step=8),
        "record dropped": lambda d: at(d, ["claim", "parameters"]).pop("bound_selection"),
    }
    for name, edit in edits.items():
        doc = copy.deepcopy(original)
        edit(doc)
        path = tmp_path / f"{name.replace(' ', '_')}.report.json"
        path.write_text(json.dumps(doc))
        run = tsdp_cli("account", "verify", path, "--released", released)
        assert run.code == 3, f"verify accepted the edit: {name}"


def test_compose_is_basic_for_caps_chosen_privately(tsdp_cli, auto_release):
    _, report_path = auto_release
    run = tsdp_cli("account", "compose", report_path, report_path, "--json")
    assert run.code == 0, run.err
    out = json.loads(run.out)
    assert out["epsilon"] == pytest.approx(2.0) and "basic" in out["method"]
    assert any("chosen privately" in w["message"] for w in out["warnings"])


@pytest.mark.parametrize("args, needle", [
    (["--max-steps", "auto"], "--max-steps auto"),  # with --max-per-step auto too: both split 0.2
    (["--max-per-step", "auto", "--max-steps", "14", "--bound-selection-share", "0.3"], "0.3"),
])
def test_both_caps_and_a_given_share_verify(tsdp_cli, tmp_path, args, needle):
    extra = ["--max-per-step", "auto"] if args[0] == "--max-steps" else []
    run = tsdp_cli("release", *EVENTS, *extra, *args, "-o", "a.csv", "-q")
    assert run.code == 0, run.err
    report = json.loads((tmp_path / "a.report.json").read_text())
    share = report["claim"]["parameters"]["bound_selection"]["share"]
    assert share == pytest.approx(0.2 if extra else 0.3)
    assert tsdp_cli("account", "verify", tmp_path / "a.report.json", "--released", tmp_path / "a.csv").code == 0


@pytest.mark.parametrize("args, needle", [
    (["--layout", "long"], "--layout events"),
    (["--unit", "event"], "--unit event"),
    (["--unit", "w-event", "--w", "3", "--max-steps", "auto"], "--unit user only"),
    (["--dry-run"], "--dry-run"),
    (["--bound-selection-share", "1.5"], "--bound-selection-share"),
    (["--bound-quantile", "0"], "--bound-quantile"),
])
def test_refusals(refuse, args, needle):
    base = [a for a in EVENTS]
    for option in ("--layout", "--unit"):
        if option in args:
            i = base.index(option)
            del base[i:i + 2]
    extra = [] if "--max-steps" in args else ["--max-steps", "14"]
    refuse(["release", *base, "--max-per-step", "auto", *extra, *args, "-o", "x.csv"], 2, needle)


def test_selection_options_need_an_auto_cap(refuse):
    refuse(["release", *EVENTS, *README_CAPS, "--bound-quantile", "0.5", "-o", "x.csv"], 2, "--bound-quantile",
           "auto")


def test_python_api_chooses_the_cap_too():
    import tsdp

    df = pl.read_csv(ROOT / "sample_data/events.csv")
    released, report = tsdp.release(df, epsilon=1.0, delta=1e-6, unit="user", layout="events", user_col="user_id",
                                    time_col="timestamp", series_col="station",
                                    series_keys="st1,st2,st3,st4,st5", start="2024-03-04", end="2024-03-18",
                                    freq="1d", max_per_step="auto", max_steps=14, series_per_user=1, seed=2)
    claim = report.claim
    assert claim.epsilon == pytest.approx(1.0) and claim.unit.max_per_step == \
        claim.parameters["bound_selection"]["max_per_step"]["chosen"]
    assert report.to_dict()["command"]["parameters"]["max_per_step"] == "auto"


def evaluated_total(tsdp_cli, caps: list[str], runs: int) -> dict:
    run = tsdp_cli("release", *EVENTS, *caps, "--evaluate", runs, "--json", "--custodian", "ev.json", "--force")
    assert run.code == 0, run.err
    return json.loads(Path("ev.json").read_text())["figures"]["evaluation"]["error"]["total"]


def test_auto_cap_cuts_the_evaluated_total_error_of_the_readme_caps(tsdp_cli, capsys):
    """Issue 33's target: the evaluated total error (bias + noise, against the raw events) at the same
    total epsilon 1. Measured: MAE 266.6 with the README's caps (M = 2), about 153 with --max-per-step
    auto (M = 8 nearly always): 1.74x. The issue asked for 2x; no choice of M and I reaches it here
    (bench/bound_selection.py: the best (M, I) chosen with the raw data in hand and the whole epsilon
    gives 144, 1.85x), so the test asserts what is reached, with margin for the runs' noise."""
    fixed = evaluated_total(tsdp_cli, README_CAPS, 6)
    auto = evaluated_total(tsdp_cli, ["--max-per-step", "auto", "--max-steps", "14"], 6)
    ratio = fixed["mae"]["mean"] / auto["mae"]["mean"]
    with capsys.disabled():
        print(f"\nevaluated total MAE: README caps {fixed['mae']['mean']:.1f}, --max-per-step auto "
              f"{auto['mae']['mean']:.1f}: {ratio:.2f}x; RMSE {fixed['rmse']['mean']:.1f} vs {auto['rmse']['mean']:.1f}")
    assert ratio >= 1.5


@pytest.mark.parametrize("extra, rule", [(["--granularity", "0.0009765625"], "basic"), (["--sampler", "float"], "exact")])
def test_a_hand_set_lattice_composes_basically_and_verifies(tsdp_cli, tmp_path, extra, rule):
    """--max-norm auto with a --granularity given by hand: the slack has no bound for every cap, so the
    selection composes basically (release epsilon 0.9 at the 0.1 default share of that rule); the float
    sampler has no slack and composes exactly. Both verify (apart from the float sampler's own check)."""
    run = tsdp_cli("release", *EVENTS[:-2], "--max-norm", "auto", *extra, "-o", "n.csv", "-q")
    assert run.code == 0, run.err
    report = json.loads((tmp_path / "n.report.json").read_text())
    selection = report["claim"]["parameters"]["bound_selection"]
    assert selection["composition"].startswith(rule)
    if rule == "basic":
        assert selection["share"] == pytest.approx(0.15) and selection["release_epsilon"] == pytest.approx(0.85)
    run = tsdp_cli("account", "verify", tmp_path / "n.report.json", "--json")
    checks = {c["name"]: c for c in json.loads(run.out)["reports"][0]["checks"]}
    assert checks["bound_selection"]["passed"] and checks["privacy_loss"]["passed"], checks

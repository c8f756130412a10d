"""``tsdp ledger`` and ``tsdp release --ledger``: budgets charged, refusals clean, processes racing.

Refusals are checked as in test_release_errors.py: the documented exit code, one ``error:`` line
naming what is wrong, nothing on stdout, and no file in the directory changed (ledger included).
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import jsonschema
import pytest

from tsdp.accounting import ledger as core
from tsdp.report import schema

TSDP = [sys.executable, "-m", "tsdp"]
SAMPLE = Path(__file__).resolve().parents[2] / "sample_data"
WIDE = SAMPLE / "traffic_hourly_wide.csv"  # 2000 hours x 20 sensors, wide layout


@pytest.fixture
def ok(tsdp_cli):
    def run(*args):
        result = tsdp_cli(*args)
        assert result.code == 0, result.err
        return result

    return run


@pytest.fixture
def db(ok, tmp_path) -> Path:
    ok("ledger", "init", "budget.db", "--dataset", "traffic", "--epsilon", "1", "--delta", "1e-5", "-q")
    return tmp_path / "budget.db"


def status(path, dataset="traffic") -> core.DatasetStatus:
    (s,) = core.status(path, dataset)
    return s


def release_args(out: str, epsilon: str = "0.25", *extra: str, mechanism: str = "gaussian") -> list[str]:
    noise = ["--delta", "1e-6"] if mechanism == "gaussian" else []
    return ["release", str(WIDE), "--mechanism", mechanism, "--epsilon", epsilon, *noise,
            "--unit", "event", "-o", out, "--seed", "7", "-q", *extra]


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


# ---------------------------------------------------------------------------------------------
# init, show, spend, cancel
# ---------------------------------------------------------------------------------------------


def test_init_then_show(ok, db):
    run = ok("ledger", "show", "budget.db", "--json")
    data = json.loads(run.out)
    assert data["schema"] == "tsdp.ledger.show.summary/1" and data["ledger_schema"] == "tsdp-ledger/1"
    assert data["ledger"] == "budget.db"
    (d,) = data["datasets"]
    assert (d["dataset"], d["epsilon_total"], d["delta_total"], d["epsilon_remaining"], d["entries"]) == \
        ("traffic", 1.0, 1e-5, 1.0, [])
    human = ok("ledger", "show", "budget.db").out
    assert "dataset 'traffic'" in human and "remaining" in human


def test_init_json_summary_and_a_second_dataset(ok, db):
    run = ok("ledger", "init", "budget.db", "--dataset", "events", "--epsilon", "2", "--delta", "0", "--json")
    summary = json.loads(run.out)
    assert (summary["dataset"], summary["epsilon_total"], summary["delta_remaining"]) == ("events", 2.0, 0.0)
    assert [s.dataset for s in core.status(db)] == ["events", "traffic"]
    assert ok("ledger", "init", "other.db", "--dataset", "x", "--epsilon", "1", "--delta", "0", "-q").out == ""


@pytest.mark.parametrize("args, needles", [
    (["--dataset", "traffic", "--epsilon", "5", "--delta", "0"], ["'traffic' already has a budget"]),
    (["--dataset", "", "--epsilon", "1", "--delta", "0"], ["--dataset", "''"]),
    (["--dataset", "new", "--epsilon", "nan", "--delta", "0"], ["--epsilon", "nan"]),
    (["--dataset", "new", "--epsilon", "-1", "--delta", "0"], ["--epsilon", "-1"]),
    (["--dataset", "new", "--epsilon", "inf", "--delta", "0"], ["--epsilon", "inf"]),
    (["--dataset", "new", "--epsilon", "1", "--delta", "1"], ["--delta", "1"]),
    (["--dataset", "new", "--epsilon", "1", "--delta", "-0.1"], ["--delta", "-0.1"]),
    (["--dataset", "new", "--epsilon", "abc", "--delta", "0"], ["--epsilon", "abc"]),
    (["--epsilon", "1", "--delta", "0"], ["--dataset"]),
])
def test_init_refusals(refuse, db, args, needles):
    refuse(["ledger", "init", "budget.db", *args], 2, *needles)


def test_init_refuses_paths(refuse, tmp_path):
    (tmp_path / "data.csv").write_text("time,value\n2024-01-01,1\n")
    args = ["--dataset", "d", "--epsilon", "1", "--delta", "0"]
    refuse(["ledger", "init", "nodir/l.db", *args], 2, "nodir", "does not exist")
    refuse(["ledger", "init", "data.csv", *args], 4, "'data.csv'", "not a")
    refuse(["ledger", "init", ".", *args], 2, "is a directory")


def test_spend_and_show(ok, db):
    run = ok("ledger", "spend", "budget.db", "--dataset", "traffic", "--epsilon", "0.3", "--delta", "2e-6",
             "--description", "published elsewhere", "--json")
    summary = json.loads(run.out)
    assert (summary["entry"], summary["epsilon_spent"], summary["epsilon_remaining"]) == (1, 0.3, 0.7)
    ok("ledger", "spend", "budget.db", "--dataset", "traffic", "--epsilon", "0.7", "--delta", "8e-6", "-q")
    s = status(db)
    assert (s.epsilon_remaining, s.delta_remaining) == (0.0, 0.0)  # exactly the total is allowed
    assert [e.description for e in s.entries] == ["published elsewhere", ""]
    human = ok("ledger", "show", "budget.db", "--dataset", "traffic").out
    assert "published elsewhere" in human and "spent" in human


def test_spend_over_budget_is_exit_3_and_changes_nothing(ok, refuse, db):
    ok("ledger", "spend", "budget.db", "--dataset", "traffic", "--epsilon", "0.7", "--delta", "0", "-q")
    refuse(["ledger", "spend", "budget.db", "--dataset", "traffic", "--epsilon", "0.30000000000000004",
            "--delta", "0"], 3, "dataset 'traffic'", "exceeded", "requested epsilon 0.30000000000000004",
           "only epsilon 0.3")
    refuse(["ledger", "spend", "budget.db", "--dataset", "traffic", "--epsilon", "0", "--delta", "1.1e-5"],
           3, "requested epsilon 0.0, delta 1.1e-05", "delta 1e-05 remain")


@pytest.mark.parametrize("args, code, needles", [
    (["--dataset", "traffic"], 2, ["--epsilon and --delta"]),
    (["--dataset", "traffic", "--epsilon", "0.1"], 2, ["--epsilon and --delta"]),
    (["--dataset", "traffic", "--delta", "0"], 2, ["--epsilon and --delta"]),
    (["--dataset", "traffic", "--epsilon", "0.1", "--delta", "0", "--from-report", "r.json"], 2, ["--from-report", "drop"]),
    (["--dataset", "nope", "--epsilon", "0.1", "--delta", "0"], 2, ["'nope'", "known: 'traffic'"]),
    (["--dataset", "traffic", "--epsilon", "-0.1", "--delta", "0"], 2, ["--epsilon", "-0.1"]),
    (["--dataset", "traffic", "--epsilon", "0.1", "--delta", "nan"], 2, ["--delta", "nan"]),
    (["--dataset", "traffic", "--from-report", "missing.json"], 2, ["--from-report", "'missing.json'", "does not exist"]),
])
def test_spend_refusals(refuse, db, args, code, needles):
    refuse(["ledger", "spend", "budget.db", *args], code, *needles)


def test_commands_refuse_a_missing_or_foreign_ledger(refuse, tmp_path):
    (tmp_path / "data.csv").write_text("time,value\n2024-01-01,1\n")
    for args in (["spend", "{}", "--dataset", "d", "--epsilon", "0.1", "--delta", "0"], ["show", "{}"],
                 ["cancel", "{}", "1"]):
        refuse(["ledger", *[a.format("nope.db") for a in args]], 2, "'nope.db' does not exist", "tsdp ledger init")
        refuse(["ledger", *[a.format("data.csv") for a in args]], 4, "'data.csv'", "not a")
    assert not (tmp_path / "nope.db").exists()


def test_show_unknown_dataset(refuse, db):
    refuse(["ledger", "show", "budget.db", "--dataset", "nope"], 2, "'nope'", "known: 'traffic'")


def test_cancel_frees_a_pending_reservation_only(ok, refuse, db):
    rid = core.reserve(db, "traffic", 0.6, 0.0, "killed release")
    refuse(["ledger", "spend", "budget.db", "--dataset", "traffic", "--epsilon", "0.5", "--delta", "0"], 3,
           "reserved by commands still running")
    summary = json.loads(ok("ledger", "cancel", "budget.db", str(rid), "--json").out)
    assert (summary["entry"], summary["action"], summary["epsilon_remaining"]) == (rid, "cancelled", 1.0)
    spent = core.spend(db, "traffic", 0.5, 0.0)
    refuse(["ledger", "cancel", "budget.db", str(spent)], 2, f"entry {spent}", "already spent", "cannot be cancelled")
    refuse(["ledger", "cancel", "budget.db", str(rid)], 2, f"no entry {rid}")
    refuse(["ledger", "cancel", "budget.db", "x"], 2, "'x'")


def test_config_file_sections(ok, db, tmp_path):
    (tmp_path / "jobs").mkdir()
    (tmp_path / "jobs" / "ledger.toml").write_text(textwrap.dedent("""
        [ledger.spend]
        ledger = "../budget.db"
        dataset = "traffic"
        epsilon = 0.5
        delta = 0.0
        description = "from a config"
    """))
    (tmp_path / "jobs" / "flat.toml").write_text('dataset = "traffic"\nepsilon = 0.25\ndelta = 0\n')
    ok("ledger", "spend", "budget.db", "--config", "jobs/ledger.toml", "-q")
    ok("ledger", "spend", "budget.db", "--config", "jobs/flat.toml", "--epsilon", "0.125", "-q")
    assert [(e.epsilon, e.description) for e in status(db).entries] == [(0.5, "from a config"), (0.125, "")]


def test_config_unknown_setting_names_the_subcommand(refuse, db, tmp_path):
    (tmp_path / "bad.toml").write_text('[ledger.spend]\nepsilom = 0.5\n')
    refuse(["ledger", "spend", "budget.db", "--dataset", "traffic", "--config", "bad.toml"], 2,
           "'epsilom'", "tsdp ledger spend")


# ---------------------------------------------------------------------------------------------
# spend --report with real reports
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("mechanism", ["gaussian", "laplace"])
def test_spend_from_a_release_report(ok, refuse, db, tmp_path, mechanism):
    ok(*release_args("out.csv", "0.25", mechanism=mechanism))
    report = json.loads((tmp_path / "out.report.json").read_text())
    ok("ledger", "spend", "budget.db", "--dataset", "traffic", "--from-report", "out.report.json", "-q")
    (entry,) = status(db).entries
    assert (entry.epsilon, entry.delta) == (report["claim"]["epsilon"], report["claim"]["delta"])
    assert entry.delta == (1e-6 if mechanism == "gaussian" else 0.0)
    assert (entry.output_name, entry.output_sha256) == ("out.csv", sha256(tmp_path / "out.csv"))
    assert "tsdp release traffic_hourly_wide.csv -> out.csv" in entry.description
    refuse(["ledger", "spend", "budget.db", "--dataset", "traffic", "--from-report", "out.report.json"], 2,
           "'out.csv' is already recorded", "entry 1")


def test_spend_report_over_budget(ok, refuse, db):
    ok(*release_args("big.csv", "1.5"))
    refuse(["ledger", "spend", "budget.db", "--dataset", "traffic", "--from-report", "big.report.json"], 3,
           "requested epsilon 1.5")


@pytest.mark.parametrize("edit, code, needles", [
    (lambda r: r["claim"].update(definition="lip", epsilon=None, delta=None), 2, ["LIP", "not an (epsilon, delta)"]),
    (lambda r: r["claim"].update(bound="lower"), 2, ["lower bound"]),
    (lambda r: r.update(schema="something/1"), 4, ["not a tsdp report"]),
    (lambda r: r["claim"].pop("unit"), 4, ["no valid privacy claim"]),
    (lambda r: r["claim"].update(epsilon=-1.0), 4, ["no valid privacy claim"]),
])
def test_spend_refuses_reports_that_are_not_dp_guarantees(ok, refuse, db, tmp_path, edit, code, needles):
    ok(*release_args("out.csv"))
    report = json.loads((tmp_path / "out.report.json").read_text())
    edit(report)
    (tmp_path / "edited.json").write_text(json.dumps(report))
    refuse(["ledger", "spend", "budget.db", "--dataset", "traffic", "--from-report", "edited.json"], code, *needles)


def test_spend_refuses_a_report_that_is_not_json(refuse, db, tmp_path):
    (tmp_path / "r.json").write_text("{not json")
    refuse(["ledger", "spend", "budget.db", "--dataset", "traffic", "--from-report", "r.json"], 4, "'r.json'", "not JSON")


# ---------------------------------------------------------------------------------------------
# tsdp release --ledger --dataset
# ---------------------------------------------------------------------------------------------


def test_release_charges_the_ledger_then_is_refused(ok, refuse, db, tmp_path):
    run = ok(*release_args("a.csv", "0.75", "--ledger", "budget.db", "--dataset", "traffic", "--json"))
    summary = json.loads(run.out)
    assert summary["ledger"] == {"dataset": "traffic", "entry": 1}
    s = status(db)
    (entry,) = s.entries
    assert (entry.state, entry.epsilon, entry.delta) == ("spent", 0.75, 1e-6)
    assert (entry.output_name, entry.output_sha256) == ("a.csv", sha256(tmp_path / "a.csv"))
    assert (s.epsilon_remaining, s.epsilon_pending) == (0.25, 0.0)
    report = json.loads((tmp_path / "a.report.json").read_text())
    jsonschema.validate(report, schema())
    params = report["command"]["parameters"]
    assert (params["ledger"], params["dataset"], params["ledger_entry"]) == ("budget.db", "traffic", 1)

    line = refuse(release_args("b.csv", "0.5", "--ledger", "budget.db", "--dataset", "traffic"), 3,
                  "dataset 'traffic'", "requested epsilon 0.5", "only epsilon 0.25")
    assert not (tmp_path / "b.csv").exists() and "b.csv" not in line
    assert len(status(db).entries) == 1
    # a pure-DP release charges delta 0, and the rest of the budget fits exactly
    ok(*release_args("c.csv", "0.25", "--ledger", "budget.db", "--dataset", "traffic", mechanism="laplace"))
    assert [(e.epsilon, e.delta) for e in status(db).entries] == [(0.75, 1e-6), (0.25, 0.0)]
    assert status(db).epsilon_remaining == 0.0


def test_release_ledger_path_is_recorded_by_name_only(ok, tmp_path):
    (tmp_path / "books").mkdir()
    ok("ledger", "init", "books/budget.db", "--dataset", "t", "--epsilon", "1", "--delta", "1e-5", "-q")
    ok(*release_args("a.csv", "0.5", "--ledger", str(tmp_path / "books" / "budget.db"), "--dataset", "t"))
    report_text = (tmp_path / "a.report.json").read_text()
    assert json.loads(report_text)["command"]["parameters"]["ledger"] == "budget.db"
    assert "books" not in report_text


def test_failed_release_leaves_no_pending_reservation(tsdp_cli, refuse, db, tmp_path):
    run = tsdp_cli("release", str(WIDE), "--epsilon", "0.5", "--delta", "1e-6", "--unit", "event",
                   "--series-cols", "s01,nope", "-o", "out.csv", "--ledger", "budget.db", "--dataset", "traffic")
    assert run.code == 4 and "'nope'" in run.error_line and run.out == ""
    assert sorted(p.name for p in tmp_path.iterdir()) == ["budget.db"]  # reserved, then cancelled
    s = status(db)
    assert s.entries == () and s.epsilon_remaining == 1.0
    (tmp_path / "out.csv").write_text("already here\n")  # refused before the reservation: no --force
    refuse(release_args("out.csv", "0.5", "--ledger", "budget.db", "--dataset", "traffic"), 2, "out.csv")
    assert status(db).entries == ()


def test_budget_is_checked_before_the_input_is_read(ok, refuse, db, tmp_path):
    ok("ledger", "spend", "budget.db", "--dataset", "traffic", "--epsilon", "1", "--delta", "0", "-q")
    (tmp_path / "broken.csv").write_bytes(b"\xff\xfe not a table \x00")
    refuse(["release", "broken.csv", "--epsilon", "0.1", "--delta", "1e-6", "--unit", "event", "-o", "o.csv",
            "--ledger", "budget.db", "--dataset", "traffic"], 3, "exceeded")


@pytest.mark.parametrize("extra, needles", [
    (["--ledger", "budget.db"], ["--ledger needs --dataset"]),
    (["--dataset", "traffic"], ["--dataset needs --ledger"]),
    (["--ledger", "nope.db", "--dataset", "traffic"], ["'nope.db' does not exist"]),
    (["--ledger", "budget.db", "--dataset", "nope"], ["'nope'", "known: 'traffic'"]),
])
def test_release_ledger_option_refusals(refuse, db, extra, needles):
    refuse(release_args("out.csv", "0.5", *extra), 2, *needles)


def test_release_to_stdout_is_charged(ok, db, tmp_path):
    run = ok("release", str(WIDE), "--epsilon", "0.5", "--delta", "1e-6", "--unit", "event", "-o", "-",
             "--report", "r.json", "--seed", "1", "-q", "--ledger", "budget.db", "--dataset", "traffic")
    (entry,) = status(db).entries
    assert entry.output_name == "<stdout>"
    assert entry.output_sha256 == hashlib.sha256(run.out.encode()).hexdigest()


# ---------------------------------------------------------------------------------------------
# Processes racing through the command line
# ---------------------------------------------------------------------------------------------


def test_concurrent_cli_spends_never_overspend(db, tmp_path):
    n = 12
    procs = [subprocess.Popen([*TSDP, "ledger", "spend", str(db), "--dataset", "traffic", "--epsilon", "0.1",
                               "--delta", "1e-6", "--description", f"job {i}", "--json"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for i in range(n)]
    results = [(p.wait(timeout=120), *p.communicate()) for p in procs]
    codes = sorted(code for code, _, _ in results)
    assert codes == [0] * 10 + [3] * 2, results
    for code, out, err in results:
        if code == 3:
            assert out == "" and err.startswith("error: privacy budget of dataset 'traffic' exceeded")
            assert len(err.strip().splitlines()) == 1
        else:
            assert json.loads(out)["dataset"] == "traffic"
    s = status(db)
    assert (s.epsilon_spent, s.delta_spent, s.epsilon_remaining, s.delta_remaining) == (1.0, 1e-5, 0.0, 0.0)
    assert sorted(e.description for e in s.entries) == sorted(
        f"job {i}" for i, (code, _, _) in enumerate(results) if code == 0)

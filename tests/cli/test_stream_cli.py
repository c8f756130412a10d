"""``tsdp stream init|append|status`` end to end (issue 32): the state file's guarantees, the errors,
the ledger charged once, verify of genuine and tampered reports, and no private figure in a report."""

from __future__ import annotations

import json
import os
import shutil
import stat
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from tsdp.cli.app import main

KEYS = ["a", "b", "c"]
START = "2026-01-01"


def _init(*extra: str, state: str = "s.state", horizon: int = 10, keys=KEYS) -> int:
    return main(["stream", "init", state, "--freq", "1d", "--start", START, "--horizon", str(horizon),
                 "--epsilon", "1", "--delta", "1e-6", "--unit", "event", "--series-keys", ",".join(keys),
                 "--series-col", "series", "--value-col", "value", "--outputs", "daily,cumulative",
                 "--quiet", *extra])


def _day(path: str, first: int, days: int = 1, keys=KEYS, scale: float = 10.0, seed: int = 0) -> str:
    """Panel rows of steps first..first+days-1 (1-based) for ``keys``."""
    rng = np.random.default_rng(seed + first)
    dates = pl.date_range(pl.date(2026, 1, 1), pl.date(2026, 12, 31), "1d", eager=True)[first - 1:first - 1 + days]
    frame = pl.DataFrame({"time": np.repeat(dates.to_numpy(), len(keys)),
                          "series": np.tile(keys, days),
                          "value": rng.integers(0, int(scale) + 1, days * len(keys))})
    frame.write_csv(path)
    return path


def _append(state: str, input: str, out: str, *extra: str) -> int:
    return main(["stream", "append", state, input, "-o", out, "--quiet", *extra])


def _snapshot(directory: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(directory.iterdir()) if p.is_file()}


def test_init_writes_report_accuracy_and_private_state(in_tmp, capsys):
    assert _init() == 0
    state = in_tmp / "s.state"
    assert stat.S_IMODE(state.stat().st_mode) == 0o600
    report = json.loads((in_tmp / "s.stream.report.json").read_text())
    assert report["command"]["name"] == "stream init"
    assert report["grid"]["n_steps"] == 10 and report["grid"]["n_series"] == 3
    sd = report["accuracy"]["per_step_sd"]
    assert set(sd) == {"daily", "cumulative"} and all(len(v) == 10 for v in sd.values())
    table = pl.read_csv(in_tmp / "s.stream.accuracy.csv")
    assert table.height == 20 and table["sd"].to_list() == sd["daily"] + sd["cumulative"]
    text = json.dumps(report)
    assert "s.state" not in text and "secret" not in text  # the custodian file is never named or quoted


def test_dry_run_writes_nothing_and_compares_strategies(in_tmp, capsys):
    assert _init("--dry-run", "--json") == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["comparison"] and summary["strategy"] != "auto"
    assert list(in_tmp.iterdir()) == []


def test_appends_advance_and_status(in_tmp, capsys):
    assert _init("--seed", "1") == 0
    assert _append("s.state", _day("d1.csv", 1), "o1.csv") == 0
    assert _append("s.state", _day("d23.csv", 2, 2), "o23.csv") == 0
    out = pl.read_csv("o23.csv")
    assert out["step"].to_list() == [2, 2, 2, 3, 3, 3] and out["series"].to_list() == KEYS * 2
    report = json.loads(Path("o23.report.json").read_text())
    assert report["command"]["parameters"]["first_step"] == 2 and report["command"]["parameters"]["last_step"] == 3
    capsys.readouterr()
    assert main(["stream", "status", "s.state", "--json"]) == 0
    status = json.loads(capsys.readouterr().out)
    assert status["position"] == 3 and status["horizon"] == 10 and status["remaining_steps"] == 7
    assert [e["output"] for e in status["expected_error"]] == ["daily", "cumulative"]


def test_interrupted_append_rerun_reproduces_its_values(in_tmp):
    """Outputs published but the state not advanced (a kill between the two): re-running with --force
    writes the very same values (the noise of a position is fixed by the state's secret)."""
    assert _init("--seed", "5") == 0
    shutil.copy("s.state", "before.state")
    assert _append("s.state", _day("d1.csv", 1), "o1.csv") == 0
    first = Path("o1.csv").read_bytes()
    shutil.copy("before.state", "s.state")  # as if the state rename never happened
    assert _append("s.state", "d1.csv", "o1.csv", "--force") == 0
    assert Path("o1.csv").read_bytes() == first


def _errors(capsys) -> list[str]:
    return [line for line in capsys.readouterr().err.splitlines() if line.strip()]


@pytest.mark.parametrize("case", ["twice", "skipped", "past_horizon", "off_grid", "unknown_key", "missing_key"])
def test_bad_steps_exit_4_nothing_written_state_unchanged(in_tmp, capsys, case):
    assert _init("--seed", "2", horizon=3) == 0
    assert _append("s.state", _day("d1.csv", 1), "o1.csv") == 0
    if case == "twice":
        _day("bad.csv", 1)
    elif case == "skipped":
        _day("bad.csv", 3)
    elif case == "past_horizon":
        _day("bad.csv", 2, 3)  # steps 2..4 of a 3-step stream
    elif case == "off_grid":
        pl.DataFrame({"time": ["2026-01-02 12:00:00"] * 3, "series": KEYS, "value": [1, 2, 3]}).write_csv("bad.csv")
    elif case == "unknown_key":
        _day("bad.csv", 2, keys=["a", "b", "zz"])
    else:
        _day("bad.csv", 2, keys=["a", "b"])
    capsys.readouterr()
    before = _snapshot(in_tmp)
    assert _append("s.state", "bad.csv", "o2.csv") == 4
    errors = _errors(capsys)
    assert len(errors) == 1 and errors[0].startswith("error: ")
    assert _snapshot(in_tmp) == before  # no output, no report, no temporary file; the state's bytes unchanged


def test_complete_stream_refuses_more(in_tmp, capsys):
    assert _init("--seed", "2", horizon=1) == 0
    assert _append("s.state", _day("d1.csv", 1), "o1.csv") == 0
    before = _snapshot(in_tmp)
    assert _append("s.state", _day("d2.csv", 2), "o2.csv") == 4
    assert "past its horizon" in _errors(capsys)[-1]
    assert _snapshot(in_tmp) == {**before, "d2.csv": Path("d2.csv").read_bytes()}


def test_locked_state_is_refused(in_tmp, capsys):
    import fcntl

    assert _init("--seed", "2") == 0
    _day("d1.csv", 1)
    fd = os.open("s.state.lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        before = _snapshot(in_tmp)
        assert _append("s.state", "d1.csv", "o1.csv") == 2
        assert "locked by another tsdp process" in _errors(capsys)[-1]
        assert _snapshot(in_tmp) == before
    finally:
        os.close(fd)
    assert _append("s.state", "d1.csv", "o1.csv") == 0


@pytest.mark.parametrize("where", ["state", "output"])
def test_disk_full_leaves_state_unchanged(in_tmp, capsys, monkeypatch, where):
    import errno

    assert _init("--seed", "2") == 0
    _day("d1.csv", 1)
    before = _snapshot(in_tmp)

    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    if where == "state":
        monkeypatch.setattr("tsdp.io.statefile.os.write", full)
    else:
        monkeypatch.setattr("tsdp.io.publish.os.link", full)
    assert _append("s.state", "d1.csv", "o1.csv") == 5
    assert "No space left" in _errors(capsys)[-1]
    assert _snapshot(in_tmp) == before
    monkeypatch.undo()
    monkeypatch.chdir(in_tmp)
    assert _append("s.state", "d1.csv", "o1.csv") == 0  # the state is usable


def test_ledger_is_charged_once(in_tmp, capsys):
    assert main(["ledger", "init", "l.db", "--dataset", "visits", "--epsilon", "3", "--delta", "1e-5", "--quiet"]) == 0
    assert _init("--ledger", "l.db", "--dataset", "visits") == 0
    for day in (1, 2, 3):
        assert _append("s.state", _day(f"d{day}.csv", day), f"o{day}.csv") == 0
    capsys.readouterr()
    assert main(["ledger", "show", "l.db", "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    text = json.dumps(shown)
    assert text.count("tsdp stream init") == 1
    report = json.loads(Path("s.stream.report.json").read_text())
    assert report["command"]["parameters"]["ledger_entry"] >= 1


def _genuine(in_tmp) -> list[str]:
    assert _init() == 0  # OS entropy: a report that may be published
    assert _append("s.state", _day("d1.csv", 1), "o1.csv") == 0
    assert _append("s.state", _day("d2.csv", 2), "o2.csv") == 0
    return ["s.stream.report.json", "o1.report.json", "o2.report.json"]


def test_verify_passes_genuine_reports(in_tmp, capsys):
    reports = _genuine(in_tmp)
    assert main(["account", "verify", *reports, "--quiet"]) == 0
    capsys.readouterr()
    assert main(["account", "compose", *reports, "--json", "--quiet"]) == 0
    composed = json.loads(capsys.readouterr().out)
    stream_epsilon = json.loads(Path(reports[0]).read_text())["claim"]["epsilon"]
    assert composed["reports"] == 1 and composed["epsilon"] <= stream_epsilon * (1 + 1e-9)


def _edit(path: str, change) -> None:
    data = json.loads(Path(path).read_text())
    change(data)
    Path(path).write_text(json.dumps(data, indent=2))


def _lower_sigma(data):
    claim = data["claim"]
    for key in ("sigma", "noise_multiplier"):
        if key in claim["parameters"]:
            claim["parameters"][key] *= 0.5
    for event in claim["events"]:
        event["noise"] *= 0.5


@pytest.mark.parametrize("tamper", ["epsilon", "sigma", "outside_horizon", "hash", "accuracy"])
def test_verify_fails_tampered_reports(in_tmp, capsys, tamper):
    reports = _genuine(in_tmp)
    target = "o2.report.json"
    if tamper == "epsilon":
        _edit(target, lambda d: d["claim"].update(epsilon=d["claim"]["epsilon"] / 2))
    elif tamper == "sigma":
        _edit(target, _lower_sigma)
    elif tamper == "outside_horizon":
        def outside(d):
            d["command"]["parameters"].update(first_step=11, last_step=11)
            d["grid"]["first_step"] = 11
        _edit(target, outside)
    elif tamper == "hash":
        out = pl.read_csv("o2.csv").with_columns(pl.col("daily") + 1)
        out.write_csv("o2.csv")
    else:
        _edit(target, lambda d: d["accuracy"]["per_step_sd"]["daily"].__setitem__(0, 0.01))
    capsys.readouterr()
    assert main(["account", "verify", *reports, "--quiet"]) == 3
    error = _errors(capsys)[-1]
    assert error.startswith("error: verification of 'o2.report.json' failed")


def _run_pair(root: Path, scale: float) -> dict:
    root.mkdir()
    os.chdir(root)
    assert _init() == 0
    assert _append("s.state", _day("d1.csv", 1, scale=scale), "o1.csv") == 0
    return {name: json.loads(Path(name).read_text()) for name in ("s.stream.report.json", "o1.report.json")}


def _public(report: dict) -> dict:
    report = json.loads(json.dumps(report))
    report.pop("created")
    report["output"].pop("sha256")
    for key in ("stream_id", "definition_sha256"):
        report["command"]["parameters"].pop(key)
    report["command"]["parameters"]["definition"].pop("stream_id")
    return report


def test_reports_hold_no_private_figure(in_tmp):
    """Two inputs of the same public shape with very different values: the reports differ only in
    what is released (the output's hash), the stream's random id and the time stamps."""
    small, large = _run_pair(in_tmp / "small", 1), _run_pair(in_tmp / "large", 100000)
    for name in small:
        assert _public(small[name]) == _public(large[name])


def test_ledger_spend_charges_the_stream_report_once_never_an_append(in_tmp, capsys):
    reports = _genuine(in_tmp)
    assert main(["ledger", "init", "l.db", "--dataset", "visits", "--epsilon", "3", "--delta", "1e-5", "--quiet"]) == 0
    assert main(["ledger", "spend", "l.db", "--dataset", "visits", "--from-report", reports[1], "--quiet"]) == 2
    assert "part of its stream's one spend" in _errors(capsys)[-1]
    assert main(["ledger", "spend", "l.db", "--dataset", "visits", "--from-report", reports[0], "--quiet"]) == 0


def test_json_summaries_with_a_window_output(in_tmp, capsys):
    """Output names such as window:7 are values of a --json summary, never its keys."""
    args = ["--outputs", "daily,window:7", "--json"]
    assert main(["stream", "init", "s.state", "--freq", "1d", "--start", START, "--horizon", "30", "--epsilon", "1",
                 "--unit", "event", "--series-keys", "a", "--series-col", "series", "--value-col", "value", "--dry-run",
                 *args]) == 0
    dry = json.loads(capsys.readouterr().out)
    assert {e["output"] for e in dry["comparison"][0]["outputs"]} == {"daily", "window:7"}
    assert main(["plan", "stream", "--freq", "1d", "--start", START, "--horizon", "30,365", "--epsilon", "1", "--unit",
                 "event", "--series-keys", "a", "--series-col", "series", "--value-col", "value", *args]) == 0
    plans = json.loads(capsys.readouterr().out)["plans"]
    assert [p["horizon"] for p in plans] == [30, 365] and all(p["comparison"] for p in plans)

"""Outputs under concurrency and signals: one writer wins, a killed run leaves nothing behind.

Real ``tsdp`` processes are started with a small driver that wraps two tsdp functions to make the
race deterministic: every process waits at a barrier after its up-front path check (so all of them
have passed it) and again once its files are staged (so all of them commit at the same moment).
The SIGTERM tests stop a process while its files are staged and its ledger reservation is held.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from tsdp.accounting import ledger as core

SAMPLE = Path(__file__).resolve().parents[2] / "sample_data"
WIDE = SAMPLE / "traffic_hourly_wide.csv"

DRIVER = textwrap.dedent("""
    import os, sys, time
    from pathlib import Path

    import tsdp.io.outputs as outputs
    import tsdp.io.files as files

    here = Path(os.environ["TSDP_TEST_DIR"])
    parties = int(os.environ.get("TSDP_TEST_PARTIES", "1"))
    pause = float(os.environ.get("TSDP_TEST_PAUSE", "0"))

    def barrier(name):
        (here / f"{name}.{os.getpid()}").touch()
        deadline = time.monotonic() + 60
        while len(list(here.glob(f"{name}.*"))) < parties and time.monotonic() < deadline:
            time.sleep(0.01)

    checked = outputs.resolve_outputs
    def resolve_outputs(*args, **kwargs):
        paths = checked(*args, **kwargs)
        barrier("checked")
        return paths
    outputs.resolve_outputs = resolve_outputs

    commit = files.AtomicOutputs.commit
    def staged(self, *args, **kwargs):
        barrier("staged")
        time.sleep(pause)  # the SIGTERM tests stop the process here
        return commit(self, *args, **kwargs)
    files.AtomicOutputs.commit = staged

    from tsdp.cli.app import run
    run()  # as the tsdp executable does (sys.argv[1:] are the arguments)
""")


def start(tmp_path: Path, args: list[str], parties: int = 1, pause: float = 0.0) -> subprocess.Popen:
    driver = tmp_path / "driver.py"
    if not driver.exists():
        driver.write_text(DRIVER)
    env = {**os.environ, "TSDP_TEST_DIR": str(tmp_path / "sync"), "TSDP_TEST_PARTIES": str(parties),
           "TSDP_TEST_PAUSE": str(pause)}
    (tmp_path / "sync").mkdir(exist_ok=True)
    return subprocess.Popen([sys.executable, str(driver), *args], cwd=tmp_path, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def release_args(out: str, *extra: str) -> list[str]:
    return ["release", str(WIDE), "--epsilon", "0.25", "--delta", "1e-6", "--unit", "event", "-o", out,
            "--seed", "7", "-q", *extra]


@pytest.fixture
def ledger_db(tmp_path) -> Path:
    path = tmp_path / "budget.db"
    core.init_ledger(path, "traffic", 1.0, 1e-5)
    return path


def entries(path: Path) -> list[core.LedgerEntry]:
    (status,) = core.status(path, "traffic")
    return list(status.entries)


def hidden(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir() if p.name.startswith(".") and p.name != ".sync")


def test_concurrent_releases_to_one_output_exactly_one_wins(tmp_path, ledger_db):
    """Three releases, all past the up-front check before any publishes: one wins, two exit 2,
    the winner's output and report are a pair, and the ledger charges the winner only."""
    procs = [start(tmp_path, release_args("out.csv", "--ledger", "budget.db", "--dataset", "traffic"), parties=3)
             for _ in range(3)]
    results = [(p.wait(timeout=300), *p.communicate()) for p in procs]
    codes = sorted(code for code, _, _ in results)
    assert codes == [0, 2, 2], results
    for code, _, err in results:
        if code == 2:
            lines = err.strip().splitlines()
            assert len(lines) == 1 and lines[0].startswith("error: --output: "), lines
            assert "appeared while this run was working" in lines[0] and "--force" in lines[0]
    report = json.loads((tmp_path / "out.report.json").read_text())
    import hashlib

    assert report["output"]["sha256"] == hashlib.sha256((tmp_path / "out.csv").read_bytes()).hexdigest()
    spent = [e for e in entries(ledger_db)]
    assert [e.state for e in spent] == ["spent"], spent
    assert spent[0].output_sha256 == report["output"]["sha256"]
    assert hidden(tmp_path) == []


def test_concurrent_writers_of_one_report_never_leave_a_mixed_pair(tmp_path):
    """Different outputs, the same report: one wins, and the loser published neither file."""
    procs = [start(tmp_path, release_args(f"out{k}.csv", "--report", "shared.report.json"), parties=3)
             for k in range(3)]
    codes = [p.wait(timeout=300) for p in procs]
    for p in procs:
        p.communicate()
    assert sorted(codes) == [0, 2, 2]
    winner = codes.index(0)
    names = sorted(p.name for p in tmp_path.iterdir() if p.suffix in (".csv", ".json"))
    assert names == sorted([f"out{winner}.csv", f"out{winner}.custodian.NOT-FOR-PUBLICATION.json",
                            "shared.report.json"])
    report = json.loads((tmp_path / "shared.report.json").read_text())
    assert report["output"]["file"] == f"out{winner}.csv"


def test_force_lets_a_later_writer_replace_the_pair(tmp_path):
    procs = [start(tmp_path, release_args("out.csv", "--force"), parties=2) for _ in range(2)]
    assert [p.wait(timeout=300) for p in procs] == [0, 0]
    for p in procs:
        p.communicate()
    report = json.loads((tmp_path / "out.report.json").read_text())
    import hashlib

    assert report["output"]["sha256"] == hashlib.sha256((tmp_path / "out.csv").read_bytes()).hexdigest()
    assert hidden(tmp_path) == []


def wait_for(path_glob: Path, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while not list(path_glob.parent.glob(path_glob.name)):
        assert time.monotonic() < deadline, f"{path_glob} never appeared"
        time.sleep(0.02)


def test_sigterm_cleans_up_like_sigint(tmp_path, ledger_db):
    """SIGTERM while the files are staged and the budget reserved: exit 143, one error line, no
    temporary file, no output, no pending reservation."""
    proc = start(tmp_path, release_args("out.csv", "--ledger", "budget.db", "--dataset", "traffic"), pause=60)
    wait_for(tmp_path / "sync" / "staged.*")
    assert len(hidden(tmp_path)) == 3  # the staged output, report and custodian file
    assert [e.state for e in entries(ledger_db)] == ["pending"]
    proc.send_signal(signal.SIGTERM)
    code = proc.wait(timeout=60)
    out, err = proc.communicate()
    assert code == 143
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: terminated by SIGTERM"), lines
    assert "Traceback" not in err and out == ""
    assert hidden(tmp_path) == []
    assert not (tmp_path / "out.csv").exists() and not (tmp_path / "out.report.json").exists()
    assert entries(ledger_db) == []


def test_sigterm_while_working_cleans_up(tmp_path, ledger_db):
    """SIGTERM while the run reads and computes (no pause; the budget is already reserved): nothing
    is left half-done: either the run finished (exit 0, charged once) or it left no file and no entry."""
    proc = start(tmp_path, release_args("out.csv", "--ledger", "budget.db", "--dataset", "traffic"))
    wait_for(tmp_path / "sync" / "checked.*")
    time.sleep(0.1)
    proc.send_signal(signal.SIGTERM)
    code = proc.wait(timeout=60)
    proc.communicate()
    assert code in (0, 143)
    assert hidden(tmp_path) == []
    if code == 143:
        assert not (tmp_path / "out.csv").exists() and entries(ledger_db) == []
    else:
        assert [e.state for e in entries(ledger_db)] == ["spent"]


AFTER_MAIN = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    import tsdp.cli.app as app

    real = app.main
    def main():
        code = real(["--version"])
        Path(sys.argv[1]).touch()  # the run is over; the process has yet to exit
        time.sleep(3)
        return code
    app.main = main
    app.run()
""")


def test_sigterm_after_the_run_does_not_kill_a_finished_process(tmp_path):
    """A SIGTERM that lands after main() returned (outputs published, exit code decided) leaves
    the exit code as it was instead of killing the process (-15)."""
    done = tmp_path / "done"
    proc = subprocess.Popen([sys.executable, "-c", AFTER_MAIN, str(done)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    wait_for(done)
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=60) == 0


SIGTERM_AT = textwrap.dedent("""
    import os, signal, sys

    import tsdp.io.outputs as outputs
    import tsdp.io.publish as publish

    where = sys.argv.pop(1)
    if where == "moving":  # between the ledger's confirmation and the first file's move
        move = publish._move
        def _move(*args, **kwargs):
            os.kill(os.getpid(), signal.SIGTERM)
            return move(*args, **kwargs)
        publish._move = _move
    else:  # the pair is published; the summary is yet to be printed
        real = outputs.publish
        def published(*args, **kwargs):
            described = real(*args, **kwargs)
            os.kill(os.getpid(), signal.SIGTERM)
            return described
        outputs.publish = published
        for name in ("tsdp.cli.release",):
            module = __import__(name, fromlist=["publish"])
            if hasattr(module, "publish"):
                module.publish = published

    from tsdp.cli.app import run
    run()
""")


@pytest.mark.parametrize("where", ["moving", "published"])
def test_sigterm_after_the_commit_point_lets_the_run_complete(tmp_path, ledger_db, where):
    """A SIGTERM that lands once the ledger has confirmed the spend (while the files are moved into
    place, or after they are) does not stop the run: exit 0, the pair published, charged once, and a
    warning that says so, never "terminated ... nothing was published" about a published pair."""
    driver = tmp_path / "sigterm_at.py"
    driver.write_text(SIGTERM_AT)
    proc = subprocess.run([sys.executable, str(driver), where,
                           *release_args("out.csv", "--ledger", "budget.db", "--dataset", "traffic")],
                          cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "SIGTERM arrived after the output and report were published" in proc.stderr
    assert (tmp_path / "out.csv").exists() and (tmp_path / "out.report.json").exists()
    assert [e.state for e in entries(ledger_db)] == ["spent"]
    assert hidden(tmp_path) == []


def test_ctrl_c_after_the_commit_point_names_a_ledger_command_that_exists(tsdp_cli, monkeypatch):
    """The message sends the steward to a real command ('tsdp ledger status' never existed)."""
    import re

    from tsdp.cli import app as cli_app
    from tsdp.cli.lazy import load_subcommand

    def interrupted(**_):
        raise KeyboardInterrupt

    monkeypatch.setattr(cli_app, "app", interrupted)
    monkeypatch.setattr(cli_app, "committed", lambda: True)
    run = tsdp_cli("ledger", "show", "budget.db")
    assert run.code == 130
    named = re.findall(r"'tsdp ledger (\w+)'", run.error_line)
    ledger = load_subcommand("ledger", cli_app._SETTINGS)
    assert named and all(name in ledger.commands for name in named), run.error_line

"""SIGTERM during ``tsdp stream append`` (issue 32): at every point the state is as before or fully
advanced, never between; no temporary file remains; the interrupted step can be appended again and
gives the values an uninterrupted run gives."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tsdp.cli.app import main

KEYS = "a,b"


def _tsdp(*args: str, env: dict | None = None) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "tsdp", *args], env={**os.environ, **(env or {})},
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _setup(root: Path) -> None:
    assert main(["stream", "init", "s.state", "--freq", "1d", "--start", "2026-01-01", "--horizon", "5",
                 "--epsilon", "1", "--unit", "event", "--series-keys", KEYS, "--series-col", "series",
                 "--value-col", "value", "--seed", "9", "--quiet"]) == 0
    (root / "d1.csv").write_text("time,series,value\n2026-01-01,a,3\n2026-01-01,b,4\n")


@pytest.mark.parametrize("point,advanced", [("read", False), ("staged", False), ("published", True)])
def test_sigterm_at_each_point(in_tmp, point, advanced):
    _setup(in_tmp)
    shutil.copy("s.state", "reference.state")
    before = (in_tmp / "s.state").read_bytes()
    marker = in_tmp / "paused"
    run = _tsdp("stream", "append", "s.state", "d1.csv", "-o", "o1.csv", "--quiet",
                env={"TSDP_STREAM_PAUSE_AT": point, "TSDP_STREAM_PAUSE_FILE": str(marker),
                     "TSDP_STREAM_PAUSE_SECONDS": "2"})
    deadline = time.monotonic() + 120
    while not marker.exists():
        assert run.poll() is None, run.communicate()
        assert time.monotonic() < deadline
        time.sleep(0.05)
    run.send_signal(signal.SIGTERM)
    _, err = run.communicate(timeout=120)
    leftovers = [p.name for p in in_tmp.iterdir() if p.name.startswith(".")]
    assert leftovers == []
    assert main(["stream", "append", "reference.state", "d1.csv", "-o", "reference.csv", "--quiet"]) == 0
    if advanced:  # past the commit point the run completes; SIGTERM is noted
        assert run.returncode == 0, err
        assert "SIGTERM arrived after" in err
        assert (in_tmp / "o1.csv").read_bytes() == (in_tmp / "reference.csv").read_bytes()
        assert (in_tmp / "s.state").read_bytes() != before
        assert main(["stream", "status", "s.state", "--quiet"]) == 0
    else:
        assert run.returncode == 143, err
        assert err.startswith("error: terminated by SIGTERM")
        assert (in_tmp / "s.state").read_bytes() == before
        assert not (in_tmp / "o1.csv").exists() and not (in_tmp / "o1.report.json").exists()
        assert main(["stream", "append", "s.state", "d1.csv", "-o", "o1.csv", "--quiet"]) == 0
        assert (in_tmp / "o1.csv").read_bytes() == (in_tmp / "reference.csv").read_bytes()

from dataclasses import dataclass
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]


def load_script(path: Path, name: str):
    """Import a script that is not part of the package (a bench or the sample-data generator)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="session")
def repo_root() -> Path:
    return REPO_ROOT


# --------------------------------------------------------------------------------------------
# CLI helpers for tests/cli/test_release_*.py: run ``tsdp`` in-process and capture its output
# --------------------------------------------------------------------------------------------


@dataclass
class CliRun:
    """The result of one in-process ``tsdp`` run."""

    code: int
    out: str
    err: str

    @property
    def err_lines(self) -> list[str]:
        return [line for line in self.err.splitlines() if line.strip()]

    @property
    def error_line(self) -> str:
        """The single ``error:`` line on stderr (asserts there is exactly one stderr line)."""
        lines = self.err_lines
        assert len(lines) == 1, f"expected exactly one stderr line, got {lines!r}"
        assert lines[0].startswith("error: "), lines[0]
        return lines[0]


@pytest.fixture
def tsdp_cli(capsys):
    """``run(*args) -> CliRun``: call ``tsdp.cli.app.main`` in-process and capture its output."""
    from tsdp.cli.app import main

    def run(*args) -> CliRun:
        capsys.readouterr()
        code = main([str(a) for a in args])
        out, err = capsys.readouterr()
        return CliRun(code, out, err)

    return run


# --------------------------------------------------------------------------------------------
# Refusals: a refused command changes nothing on disk and prints exactly one error line
# --------------------------------------------------------------------------------------------


def snapshot(directory: Path) -> dict[str, tuple[bytes, int] | None]:
    """Every path under ``directory`` (hidden ones too): files with bytes and mtime, dirs as None."""
    return {
        str(p.relative_to(directory)): (p.read_bytes(), p.stat().st_mtime_ns) if p.is_file() else None
        for p in sorted(directory.rglob("*"))
    }


@pytest.fixture
def dir_snapshot():
    """The :func:`snapshot` function, for tests that compare a directory before and after."""
    return snapshot


@pytest.fixture
def refuse(tsdp_cli, tmp_path):
    """``refuse(args, code, *needles) -> error line``, checking everything a refusal must do."""

    def check(args, code: int, *needles: str) -> str:
        before = snapshot(tmp_path)
        run = tsdp_cli(*args)
        assert "Traceback" not in run.err
        line = run.error_line
        assert run.code == code, f"exit {run.code}, expected {code}: {line}"
        for needle in needles:
            assert needle in line, f"{needle!r} not in {line!r}"
        assert run.out == ""
        assert snapshot(tmp_path) == before, "the refused run changed files in the directory"
        return line

    return check


def dpsgd_sampler_options(parameters: dict) -> list:
    """``tsdp account dpsgd`` options that reproduce a forecast-train report's noise sampler: the
    hardened lattice needs the parameter count and the clipping norm; a float run needs none."""
    if parameters.get("sampler") != "hardened":
        return []
    return ["--sampler", "hardened", "--parameters", parameters["parameters"], "--clip-norm",
            repr(parameters["clip_norm"])]


def dpsgd_sampler_setting(parameters: dict) -> dict:
    """The DpSgdSetting fields of a forecast-train report's sampler (see :func:`dpsgd_sampler_options`)."""
    if parameters.get("sampler") != "hardened":
        return {}
    return {"sampler": "hardened", "parameters": parameters["parameters"], "clip_norm": parameters["clip_norm"]}


def custodian_diagnostics(summary: dict) -> dict:
    """The input's counts a release wrote to its custodian file (named in the --json summary), which
    is readable by the owner only and marked not for publication."""
    import json
    import os
    import stat
    from pathlib import Path

    path = Path(summary["custodian"])
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    document = json.loads(path.read_text())
    assert document["publish"] is False and document["command"] == "release"
    return document["figures"]["diagnostics"]


def hourly_panel_csv(path, series: str, steps: int = 60):
    """A small long CSV panel (columns id, time, v) of hourly series from 2024-01-01, one per
    character of ``series``, with values 10 + (7 t + 3 k) mod 13: for the forecast-train CLI tests."""
    from datetime import datetime, timedelta

    start = datetime(2024, 1, 1)
    rows = [f"{sid},{start + timedelta(hours=t):%Y-%m-%d %H:%M:%S},{10 + (7 * t + 3 * k) % 13}"
            for k, sid in enumerate(series) for t in range(steps)]
    path.write_text("id,time,v\n" + "\n".join(rows) + "\n")
    return path

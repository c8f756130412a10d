from dataclasses import dataclass
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]


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

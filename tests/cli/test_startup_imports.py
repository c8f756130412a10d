"""Start-up stays light: the CLI and its help load no numerical library (issue 14).

Cron jobs and CI gates start tsdp many times; these tests check what gets imported (in a fresh
interpreter, through ``sys.modules``), not how long it takes - timings are bench/startup.py's job.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

# Libraries that `import tsdp.cli.app`, option parsing and `tsdp --help` must not load.
HEAVY = ("numpy", "polars", "pyarrow", "scipy", "dp_accounting", "jax", "pyspark", "jsonschema", "rich", "matplotlib")


def loaded_after(code: str) -> list[str]:
    """The HEAVY modules present after running ``code`` in a fresh interpreter."""
    probe = (f"{code}\nimport json, sys\n"
             f"print(json.dumps(sorted(m for m in {HEAVY!r} if m in sys.modules)))")
    run = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    return json.loads(run.stdout.strip().splitlines()[-1])


def test_importing_the_cli_loads_no_numerical_library():
    assert loaded_after("import tsdp.cli.app") == []


def test_help_loads_no_numerical_library():
    assert loaded_after("from tsdp.cli.app import main\nassert main(['--help']) == 0") == []


@pytest.mark.parametrize("args", [["account", "--help"], ["account", "verify", "--help"], ["ledger", "--help"],
                                  ["plan", "--help"]])
def test_help_of_light_commands_loads_no_numerical_library(args):
    assert loaded_after(f"from tsdp.cli.app import main\nassert main({args!r}) == 0") == []


def test_verify_of_a_gaussian_release_loads_no_numerical_library(tsdp_cli, tmp_path):
    """CI gates run `tsdp account verify` on every report: a Gaussian claim is rechecked in pure Python."""
    (tmp_path / "tiny.csv").write_text("time,value\n2024-01-01,1\n2024-01-02,2\n2024-01-03,3\n")
    release = tsdp_cli("release", tmp_path / "tiny.csv", "--epsilon", "1", "--delta", "1e-6", "--unit", "event",
                       "--clip-min", "0", "--clip-max", "10", "-o", tmp_path / "out.csv", "-q")
    assert release.code == 0, release.err
    report = str(tmp_path / "out.report.json")
    code = f"from tsdp.cli.app import main\nassert main(['account', 'verify', {report!r}, '-q']) == 0"
    assert loaded_after(code) == ["jsonschema"]  # the report's schema check, nothing numerical


def test_the_command_list_matches_the_commands():
    """`tsdp --help` lists the subcommands from a table; it must say what each command says."""
    import typer

    from tsdp.cli.app import _SETTINGS
    from tsdp.cli.lazy import SUBCOMMANDS, load_subcommand

    for name, (_, _, text) in SUBCOMMANDS.items():
        command = load_subcommand(name, _SETTINGS)
        assert command.name == name
        assert command.get_short_help_str(10**6) == text, name
    assert isinstance(typer.main.get_command(__import__("tsdp.cli.app").cli.app.app), typer.core.TyperGroup)


def test_help_lists_every_command_and_an_unknown_one_is_a_usage_error(tsdp_cli):
    from tsdp.cli.lazy import SUBCOMMANDS

    run = tsdp_cli("--help")
    assert run.code == 0
    commands = run.out.split("Commands:")[1].strip("\n").split("\n\n")[0]  # the epilog follows a blank line
    listed = [line.split()[0] for line in commands.splitlines()]
    assert listed == list(SUBCOMMANDS)
    wrong = tsdp_cli("acount", "verify")
    assert wrong.code == 2 and "Did you mean 'account'" in wrong.error_line

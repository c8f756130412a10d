"""Shell completion is on: `tsdp --install-completion` / `--show-completion` exist (issue 13).

Run in a fresh interpreter through the console-script function, as a shell would run `tsdp`:
completion prints its script or candidates and exits on its own (not through ``main()``'s codes).
Completing a subcommand's name reads the lazy table, so it loads no numerical library.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tsdp.cli.lazy import SUBCOMMANDS

HEAVY = ("numpy", "polars", "pyarrow", "scipy")


def tsdp(*args: str, **env: str) -> subprocess.CompletedProcess:
    """`tsdp ARGS` in a fresh interpreter with extra environment ``env``; ``loaded:`` lists HEAVY modules
    imported by then (printed at exit, so also after completion's own exit)."""
    probe = ("import atexit, sys\n"
             f"atexit.register(lambda: print('loaded:', [m for m in {HEAVY!r} if m in sys.modules], file=sys.stderr))\n"
             "from tsdp.cli.app import run\n"
             f"sys.argv = ['tsdp', *{list(args)!r}]\n"
             "run()\n")
    return subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120,
                          env={**os.environ, **env})


def test_help_lists_the_completion_options():
    run = tsdp("--help")
    assert run.returncode == 0, run.stderr
    assert "--install-completion" in run.stdout and "--show-completion" in run.stdout


@pytest.mark.parametrize("shell", ["bash", "zsh", "fish"])
def test_show_completion_prints_a_script_for_the_shell(shell):
    run = tsdp("--show-completion", shell, SHELL=f"/bin/{shell}")
    assert run.returncode == 0, run.stderr
    assert "_TSDP_COMPLETE" in run.stdout  # the script calls tsdp back with this variable
    if shell == "bash":
        assert "complete -o default -F _tsdp_completion tsdp" in run.stdout


def test_subcommands_are_completed_from_the_table_without_loading_them():
    run = tsdp(_TSDP_COMPLETE="complete_bash", COMP_WORDS="tsdp ", COMP_CWORD="1")
    assert run.returncode == 0, run.stderr
    assert run.stdout.split() == list(SUBCOMMANDS)
    assert "loaded: []" in run.stderr
    prefix = tsdp(_TSDP_COMPLETE="complete_bash", COMP_WORDS="tsdp fo", COMP_CWORD="1")
    assert prefix.stdout.split() == ["forecast-train"]


def test_options_of_the_root_and_of_a_subcommand_are_completed():
    root = tsdp(_TSDP_COMPLETE="complete_bash", COMP_WORDS="tsdp --v", COMP_CWORD="1")
    assert root.stdout.split() == ["--version"]
    verify = tsdp(_TSDP_COMPLETE="complete_bash", COMP_WORDS="tsdp account verify --j", COMP_CWORD="3")
    assert verify.returncode == 0, verify.stderr
    assert verify.stdout.split() == ["--json"]


def test_subcommands_offer_no_completion_options_of_their_own():
    run = tsdp("release", "--help")
    assert run.returncode == 0, run.stderr
    assert "--show-completion" not in run.stdout

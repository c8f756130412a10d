"""The README's shell examples, as a new user runs them: top to bottom, in one directory.

Two promises are checked without running the slow examples: no example writes a file an earlier
one wrote (the second would stop with 'already exists'), and every figure a release example shows
as its accuracy is the one tsdp prints for that command (from its ``--dry-run``, which reads only
the public shape), worded as tsdp words it. The README's Python example is run by
``tests/api/test_python_api.py``.
"""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text()
ACCURACY = re.compile(r"# accuracy: each (?:cell|released value) within ±([0-9.]+) with (at least )?95% probability")


def examples() -> list[tuple[list[str], list[str]]]:
    """(tsdp's arguments, the comment lines that follow) of each ``tsdp`` command in a sh block."""
    found: list[tuple[list[str], list[str]]] = []
    for block in re.findall(r"```sh\n(.*?)```", README, re.S):
        command = None
        for line in block.replace("\\\n", " ").splitlines():
            if line.startswith("tsdp "):
                command = (shlex.split(line)[1:], [])
                found.append(command)
            elif line.lstrip().startswith("#") and command is not None:
                command[1].append(line)
    return found


def output_of(args: list[str]) -> str | None:
    for flag in ("-o", "--output"):
        if flag in args:
            return args[args.index(flag) + 1]
    return None


def test_the_examples_are_found():
    commands = [args[0] for args, _ in examples()]
    for name in ("release", "account", "mean-estimate", "flip", "forecast-train", "ledger", "plan"):
        assert name in commands


def test_no_example_writes_what_an_earlier_one_wrote():
    """Run in order in one directory, every example writes its output and report afresh. The
    Python example's ``result.write`` counts too: it refuses an existing file as the CLI does."""
    written: dict[str, str] = {}
    python = re.search(r"## Python API.*?```python\n(.*?)```", README, re.S).group(1)
    outputs = [(output_of(args), " ".join(args[:3])) for args, _ in examples() if "--dry-run" not in args]
    outputs += [(path, "the Python example") for path in re.findall(r"\.write\(\"([^\"]+)\"\)", python)]
    for output, where in outputs:
        if output is None:
            continue
        stem = re.sub(r"\.(csv|parquet)$", "", output)
        for path in (output, stem + ".report.json"):
            assert path not in written, f"{where} writes {path!r}, which {written[path]} already wrote"
            written[path] = where


ACCURACY_EXAMPLES = [(args, m) for args, comments in examples() if args[0] == "release"
                     for m in [ACCURACY.search(" ".join(comments))] if m is not None]


def test_the_accuracy_examples_are_found():
    assert len(ACCURACY_EXAMPLES) >= 5


@pytest.mark.parametrize("args, shown", ACCURACY_EXAMPLES, ids=[" ".join(a[:2]) + " " + (output_of(a) or "")
                                                                 for a, _ in ACCURACY_EXAMPLES])
def test_the_accuracy_a_release_example_shows_is_what_tsdp_prints(tsdp_cli, tmp_path, args, shown):
    for name in ("sample_data", "configs"):
        (tmp_path / name).symlink_to(ROOT / name)
    run = tsdp_cli(*args, "--dry-run", "--json")
    assert run.code == 0, run.err
    accuracy = json.loads(run.out)["accuracy"]
    assert f"{accuracy['half_width']:.4g}" == shown.group(1)
    assert bool(shown.group(2)) == (not accuracy["exact"]), "'at least' exactly when the interval is a bound"


def test_help_lists_the_readme_exit_codes(tsdp_cli):
    """A cron job or CI script reads the exit codes in ``tsdp --help``: the README's table, code for code."""
    table = re.search(r"## Exit codes\n\n\| code \| meaning \|\n\|---\|---\|\n((?:\|.*\n)+)", README).group(1)
    rows = [re.match(r"\| (\d) \| ([^:(|]*)", row).groups() for row in table.splitlines()]
    assert [code for code, _ in rows] == ["0", "1", "2", "3", "4", "5"]
    run = tsdp_cli("--help")
    text = " ".join(run.out.split("Commands:")[1].split())
    for code, meaning in rows:
        assert f"{code} {meaning.strip()}" in text, (code, meaning)


@pytest.mark.parametrize("name", ["release", "mean-estimate", "flip", "forecast-train"])
def test_every_input_help_names_the_formats_the_readme_names(name):
    """The README: inputs are CSV (also .csv.gz or .tsv) or Parquet, or - for stdin; every command's
    INPUT help says the same."""
    from tsdp.cli.app import _SETTINGS
    from tsdp.cli.lazy import load_subcommand

    assert "(also gzipped, `.csv.gz`, or tab-separated, `.tsv`) or Parquet, or `-` for stdin" in README
    text = next(p.help for p in load_subcommand(name, _SETTINGS).params if p.name == "input")
    for needle in (".csv", ".csv.gz", ".tsv", "Parquet", "- "):
        assert needle in text, (name, needle, text)


def test_quiet_help_does_not_promise_silence_the_readme_denies(tsdp_cli):
    """The README: an old option's warning prints 'also under `--quiet`'; -q's help says so too."""
    assert "new option, also under `--quiet`" in README
    run = tsdp_cli("release", "--help")
    text = " ".join(run.out.split("--quiet")[1].split("--config")[0].split())
    assert "deprecated option's warning still prints" in text, text

"""Seeded runs give byte-identical outputs, reports and summaries to the recorded ``golden.json``.

A restructuring must change no behaviour: every case of :mod:`tests.golden.cases` (each release
mechanism x unit x sampler, the layouts, every example config, mean-estimate, flip, forecast-train,
account) is run with a fixed seed and its exit code, stdout, stderr and the sha256 of every file it
writes are compared with the recording. A deliberate change of behaviour re-records them:
``TSDP_RECORD_GOLDEN=1 .venv/bin/python -m pytest tests/golden`` (and the commit says why).
Reports are compared without their ``created`` time; the temporary input directory is written
``{data}`` wherever it appears.
"""

from __future__ import annotations

import hashlib
import json
import os
import tomllib
from pathlib import Path

import pytest

from tests.golden.cases import all_cases, make_inputs
from tsdp.cli.app import main

GOLDEN = Path(__file__).with_name("golden.json")
RECORD = os.environ.get("TSDP_RECORD_GOLDEN") == "1"
SEEDED = {"release", "mean-estimate", "flip", "forecast-train"}
CASES = all_cases()


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    directory = tmp_path_factory.mktemp("golden-inputs")
    make_inputs(directory)
    return directory


@pytest.fixture(scope="module")
def recorded():
    found = json.loads(GOLDEN.read_text()) if GOLDEN.exists() else {}
    yield found
    if RECORD:
        GOLDEN.write_text(json.dumps(dict(sorted(found.items())), indent=1) + "\n")


def command_line(argv: list[str], data: Path) -> list[str]:
    """The argv to run: placeholders filled, a config case expanded, --seed and --json added."""
    if argv[0] == "--config-case":
        config = Path(argv[1])
        tables = tomllib.loads(config.read_text())
        path, settings = [], tables
        while len(settings) == 1 and isinstance(next(iter(settings.values())), dict):
            key = next(iter(settings))
            path.append(key)
            settings = settings[key]
        argv = [*path, "--config", str(config)]
        if "output" in settings:
            argv += ["-o", "out." + settings["output"].rsplit(".", 1)[-1]]
    argv = [a.replace("{data}", str(data)) for a in argv]
    if argv[0] in SEEDED:
        argv += ["--seed", "7"]
    return [*argv, "--json"]


def commands(argv: list[str]) -> list[list[str]]:
    """A case's command lines (split at ``"&&"``)."""
    parts: list[list[str]] = [[]]
    for a in argv:
        if a == "&&":
            parts.append([])
        else:
            parts[-1].append(a)
    return parts


def normalised(text: str, data: Path) -> str:
    return text.replace(str(data), "{data}").replace(str(Path.cwd()), "{cwd}")


def file_digest(path: Path, data: Path) -> str:
    raw = path.read_bytes()
    if path.name.endswith(".json"):
        document = json.loads(raw)
        if isinstance(document, dict):
            document.pop("created", None)
        raw = normalised(json.dumps(document, sort_keys=True), data).encode()
    return hashlib.sha256(raw).hexdigest()


@pytest.mark.slow
@pytest.mark.parametrize("name,argv", CASES, ids=[c[0] for c in CASES])
def test_seeded_run_matches_golden(name, argv, data_dir, recorded, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    codes, out, err = [], [], []
    for command in commands(argv):
        codes.append(main(command_line(command, data_dir)))
        captured = capsys.readouterr()
        out.append(normalised(captured.out, data_dir))
        err.append(normalised(captured.err, data_dir))
    got = {
        "exit": codes if len(codes) > 1 else codes[0],
        "stdout": "\n".join(out),
        "stderr": "\n".join(err),
        "files": {p.name: file_digest(p, data_dir) for p in sorted(tmp_path.iterdir()) if p.is_file()},
    }
    if RECORD:
        recorded[name] = got
        return
    assert name in recorded, f"no golden recording for {name}: record with TSDP_RECORD_GOLDEN=1"
    want = recorded[name]
    assert got["exit"] == want["exit"]
    assert got["stderr"] == want["stderr"]
    assert got["stdout"] == want["stdout"]
    assert got["files"] == want["files"]

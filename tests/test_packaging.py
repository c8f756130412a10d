"""Packaging metadata says what the code needs (issue 13: 3.10 was advertised, tomllib needs 3.11).

No second interpreter is installed here, so the floor is checked three ways that need none: the
declared floor is at least 3.11, the modules the floor stands for import, and every source file
parses with the grammar of the floor (``ast.parse(feature_version=...)``), so syntax newer than the
floor cannot slip in unnoticed.
"""

from __future__ import annotations

import ast
import re
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def declared_floor() -> tuple[int, int]:
    """The (major, minor) of ``requires-python``, which must be a single ``>=X.Y`` bound."""
    match = re.fullmatch(r">=\s*(\d+)\.(\d+)", PROJECT["requires-python"].strip())
    assert match, f"requires-python should be one '>=X.Y' bound, got {PROJECT['requires-python']!r}"
    return int(match.group(1)), int(match.group(2))


def test_python_floor_covers_tomllib():
    assert declared_floor() >= (3, 11)
    assert sys.version_info[:2] >= declared_floor()
    import tomllib as module  # the configs are read with it (tsdp/cli/common.py)

    assert callable(module.loads)


def test_classifiers_name_no_python_below_the_floor():
    versions = [tuple(int(p) for p in c.rsplit("::", 1)[1].strip().split("."))
                for c in PROJECT["classifiers"] if re.fullmatch(r"Programming Language :: Python :: 3\.\d+", c)]
    assert versions, "classifiers should name the supported Python versions"
    assert min(versions) == declared_floor()


def test_sources_parse_with_the_grammar_of_the_floor():
    floor = declared_floor()
    sources = sorted((ROOT / "tsdp").rglob("*.py"))
    assert sources
    for path in sources:
        ast.parse(path.read_text(), filename=str(path), feature_version=floor)


def test_the_declared_license_file_is_shipped():
    assert PROJECT["license"] == "Apache-2.0"
    assert PROJECT["license-files"] == ["LICENSE"]
    text = (ROOT / "LICENSE").read_text()
    assert text.lstrip().startswith("Apache License") and "Version 2.0, January 2004" in text
    assert "END OF TERMS AND CONDITIONS" in text

"""Reading a JSON document that a user points tsdp at (a report, a model's metadata)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tsdp.errors import DataError, UsageError


def read_json(path: str | Path, label: str) -> Any:
    """The parsed file; UsageError if it does not exist, DataError if it is not JSON.

    ``label`` names the file in messages, e.g. ``"--report"`` or ``"model metadata"``.
    """
    p = Path(path)
    if not p.is_file():
        raise UsageError(f"{label}: file {str(path)!r} does not exist")
    try:
        return json.loads(p.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise DataError(f"{label}: {str(path)!r} is not JSON ({exc})") from None

"""Red-team audit of ``tsdp forecast-train``: what the run prints (specs/audit.md, DESIGN.md section 2).

The report, stdout (``--json`` and the human table) and stderr may hold only publishable figures. The
held-out metrics (CRPS and MASE of the DP model and of seasonal naive on each series' test tail) and the
validation history are functions of the private series that no mechanism protects: they belong in the
custodian file only (README: "never to the report"; ``--custodian -`` is refused because custodian
figures "go to a file only, never to stdout"; ``mean-estimate`` moved its data-dependent epsilon off
stdout for the same reason). Seasonal naive's scores are exact, deterministic functions of the test tail.
"""

from __future__ import annotations

import json
import math
from datetime import datetime, timedelta
from pathlib import Path

import pytest

START = datetime(2024, 1, 1)
ARGS = ["--time-col", "time", "--value-col", "v", "--series-col", "id", "--context-length", "4",
        "--forecast-length", "2", "--batch-size", "2", "--model", "linear", "--delta", "1e-5",
        "--noise-multiplier", "1", "--steps", "5", "--seed", "7"]
CUSTODIAN = ".custodian.NOT-FOR-PUBLICATION.json"


@pytest.fixture
def panel(tmp_path) -> Path:
    rows = [f"{sid},{(START + timedelta(hours=t)).strftime('%Y-%m-%d %H:%M:%S')},{10 + (7 * t + 3 * k) % 13}"
            for k, sid in enumerate("abcdef") for t in range(60)]
    path = tmp_path / "panel.csv"
    path.write_text("id,time,v\n" + "\n".join(rows) + "\n")
    return path


def private_figures(custodian: dict) -> list[float]:
    """Every held-out score the custodian file holds (model and seasonal naive, CRPS and MASE)."""
    return [value for scores in custodian["figures"]["scores"].values() for value in scores.values()
            if isinstance(value, float) and math.isfinite(value)]


def shows(text: str, value: float) -> bool:
    """Whether ``value`` appears in ``text`` as JSON prints it or rounded as the human table prints it."""
    return repr(value) in text or f"{value:.6g}" in text or f"{value:.4g}" in text


@pytest.mark.parametrize("json_mode", [True, False], ids=["json", "table"])
def test_held_out_metrics_stay_in_the_custodian_file(tsdp_cli, panel, tmp_path, json_mode):
    """The summary on stdout names the custodian file but prints none of its figures (nor stderr).

    Caught before the fix: ``crps_model``, ``crps_seasonal_naive``, ``mase_model`` and
    ``mase_seasonal_naive`` were printed on stdout (--json and the table) by every run."""
    run = tsdp_cli("forecast-train", panel, *ARGS, "-o", tmp_path / "fc.csv", *(["--json"] if json_mode else []))
    assert run.code == 0, run.err
    custodian = json.loads((tmp_path / f"fc{CUSTODIAN}").read_text())
    figures = private_figures(custodian)
    assert len(figures) == 4
    for value in figures:
        assert not shows(run.out, value), f"held-out score {value!r} printed on stdout"
        assert not shows(run.err, value), f"held-out score {value!r} printed on stderr"
    assert "crps" not in run.out.lower() and "mase" not in run.out.lower()
    if json_mode:
        summary = json.loads(run.out)
        assert summary["custodian"].endswith(CUSTODIAN)  # where the custodian finds the figures

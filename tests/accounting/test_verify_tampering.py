"""Issue 33: three edits of a report that ``tsdp account verify`` passed (exit 0) before, and now rejects.

* the relation in words (``claim.unit.neighbouring``) of a forecast-train or FLIP report accepted any
  text, so an edited report verified, composed with another report and was charged by ``ledger
  spend``: the text is now recomputed from the unit (every release mechanism's already was);
* a seeded report relabelled ``"randomness": "os-entropy"`` with its seeded-run warning deleted
  verified: the report also records ``command.parameters.seeded``, and the three must agree;
* a report whose released file is not at hand verified with ``output_sha256: not checked`` (exit 0),
  so a mean-estimate report edited from 25 groups at epsilon 12.5 to 5 groups at 2.5 passed: verify
  now fails it (exit 3) unless ``--no-output-check`` asks for the claim alone, and says so.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tsdp.cli.app import main

REPO = Path(__file__).resolve().parents[2]
SAMPLE = REPO / "sample_data"
FORECAST = [str(SAMPLE / "traffic_hourly.parquet"), "--series-col", "sensor", "--value-col", "count",
            "--context-length", "24", "--forecast-length", "12", "--model", "linear", "--batch-size", "8",
            "--noise-multiplier", "1.5", "--delta", "1e-5", "--steps", "5"]
RELEASE = [str(SAMPLE / "traffic_hourly_wide.csv"), "--mechanism", "laplace", "--epsilon", "1", "--unit", "event"]
FLIP = [str(SAMPLE / "qwi_quarterly.csv"), "--time-col", "quarter", "--value-cols", "ca_asian", "--aux-cols",
        "ca_white", "--trend-order", "3", "--filter-half-length", "25", "--lip-delta", "0.1", "--grid", "2048"]
MEAN = ["--config", str(REPO / "configs" / "mean_itms_cells.toml")]


@pytest.fixture(scope="module")
def made(tmp_path_factory) -> dict[str, Path]:
    """name -> report of one run of each command (in one directory, next to its released file)."""
    where = tmp_path_factory.mktemp("made")
    runs = {"forecast": ["forecast-train", *FORECAST], "forecast2": ["forecast-train", *FORECAST],
            "release": ["release", *RELEASE], "seeded": ["release", *RELEASE, "--seed", "7"],
            "flip": ["flip", *FLIP], "mean": ["mean-estimate", *MEAN]}
    for name, args in runs.items():
        assert main([*args, "-o", str(where / f"{name}.csv"), "--quiet"]) == 0, name
    return {name: where / f"{name}.report.json" for name in runs}


def edited(made, tmp_path, name: str, edit, keep_output: bool = True) -> Path:
    """A copy of ``name``'s report edited by ``edit(data)``, next to a copy of its released file."""
    data = json.loads(made[name].read_text())
    edit(data)
    if keep_output:
        shutil.copy(made[name].with_name(f"{name}.csv"), tmp_path / f"{name}.csv")
    path = tmp_path / f"{name}.report.json"
    path.write_text(json.dumps(data))
    return path


def verify(tsdp_cli, *args) -> tuple[int, dict]:
    run = tsdp_cli("account", "verify", *args, "--json")
    return run.code, json.loads(run.out)


def failed_checks(summary: dict) -> set[str]:
    return {c["name"] for r in summary["reports"] for c in r["checks"] if not c["passed"]}


# -- the relation in words -------------------------------------------------------------------------------


BOUNDED = ("substitution: the datasets differ in one value of one series, by at most 1 per value; the set of "
           "series and their lengths are public")


def test_genuine_reports_verify(made, tsdp_cli):
    for name in ("forecast", "release", "flip", "mean"):
        code, summary = verify(tsdp_cli, made[name])
        assert code == 0 and summary["passed"], (name, failed_checks(summary))


def test_a_forecast_report_with_another_relation_text_is_rejected_everywhere(made, tsdp_cli, tmp_path):
    """The run protects one value changed by any amount; the edited text claims a bounded change."""
    def relabel(data):
        data["claim"]["unit"]["neighbouring"] = BOUNDED

    path = edited(made, tmp_path, "forecast", relabel)
    code, summary = verify(tsdp_cli, path)
    assert code == 3 and "unit" in failed_checks(summary)
    detail = next(c["detail"] for r in summary["reports"] for c in r["checks"] if c["name"] == "unit")
    assert "by any amount" in detail  # the text the unit gives
    assert tsdp_cli("account", "compose", path, made["forecast2"]).code == 3
    db = tmp_path / "budget.db"
    assert tsdp_cli("ledger", "init", db, "--dataset", "d", "--epsilon", "100", "--delta", "0.5").code == 0
    run = tsdp_cli("ledger", "spend", db, "--dataset", "d", "--from-report", path)
    assert run.code == 3 and "neighbouring" in run.err


@pytest.mark.parametrize("field, value", [("id_column", "sensor"), ("max_steps", 3), ("series_per_unit", 1)])
def test_a_forecast_unit_with_bounds_of_another_relation_is_rejected(made, tsdp_cli, tmp_path, field, value):
    def bound(data):
        data["claim"]["unit"][field] = value

    code, summary = verify(tsdp_cli, edited(made, tmp_path, "forecast", bound))
    assert code == 3 and "unit" in failed_checks(summary)


def test_a_flip_report_with_another_relation_text_is_rejected(made, tsdp_cli, tmp_path):
    def relabel(data):
        data["claim"]["unit"]["neighbouring"] = "add or remove one event"

    code, summary = verify(tsdp_cli, edited(made, tmp_path, "flip", relabel))
    assert code == 3 and "unit" in failed_checks(summary)


def test_every_release_mechanism_already_rechecks_its_relation_text(made, tsdp_cli, tmp_path):
    def relabel(data):
        data["claim"]["unit"]["neighbouring"] = "add or remove one user"

    code, summary = verify(tsdp_cli, edited(made, tmp_path, "release", relabel))
    assert code == 3 and "unit" in failed_checks(summary)


# -- a seeded run relabelled ------------------------------------------------------------------------------


def _relabel(data):
    data["randomness"] = "os-entropy"


def _drop_warning(data):
    data["warnings"] = [w for w in data["warnings"] if "fixed --seed" not in w]


def _unseed(data):
    data["command"]["parameters"]["seeded"] = False


def _forget(data):
    del data["command"]["parameters"]["seeded"]


@pytest.mark.parametrize("edits", [
    (_relabel,), (_drop_warning,), (_unseed,), (_relabel, _drop_warning), (_relabel, _drop_warning, _forget),
    (_relabel, _unseed), (_drop_warning, _unseed),
], ids=lambda edits: "+".join(e.__name__.strip("_") for e in edits))
def test_a_seeded_report_edited_to_look_unseeded_fails(made, tsdp_cli, tmp_path, edits):
    code, summary = verify(tsdp_cli, edited(made, tmp_path, "seeded", lambda d: [e(d) for e in edits]))
    assert code == 3 and failed_checks(summary) == {"randomness"}


def test_the_seed_itself_is_never_recorded(made):
    data = json.loads(made["seeded"].read_text())
    assert data["command"]["parameters"]["seeded"] is True and "seed" not in data["command"]["parameters"]
    assert "7" not in json.dumps(data["command"]["parameters"])


def test_an_unseeded_report_records_that_it_was_not_seeded(made):
    data = json.loads(made["release"].read_text())
    assert data["randomness"] == "os-entropy" and data["command"]["parameters"]["seeded"] is False


# -- a report whose released file is not checked -------------------------------------------------------------


def _fewer_groups(data):
    """25 groups at epsilon 0.5 (12.5 in all) edited consistently into 5 groups (2.5 in all)."""
    data["grid"]["n_groups"] = 5
    data["claim"]["parameters"]["n_groups"] = 5
    data["claim"]["parameters"]["epsilon_total_bound"] = 2.5
    data["claim"]["epsilon"] = 2.5


def test_a_report_without_its_released_file_fails_unless_asked_not_to_check(made, tsdp_cli, tmp_path):
    assert json.loads(made["mean"].read_text())["grid"]["n_groups"] == 25
    path = edited(made, tmp_path, "mean", _fewer_groups, keep_output=False)
    code, summary = verify(tsdp_cli, path)
    assert code == 3 and "output_sha256" in failed_checks(summary) and summary["output_checked"] is True
    run = tsdp_cli("account", "verify", path, "--quiet")
    assert run.code == 3 and "--no-output-check" in run.err

    code, summary = verify(tsdp_cli, path, "--no-output-check")
    assert summary["output_checked"] is False
    assert "output_not_checked" in {w["code"] for w in summary["warnings"]}
    sha = next(c for r in summary["reports"] for c in r["checks"] if c["name"] == "output_sha256")
    assert sha["passed"] and sha["detail"].startswith("not checked (--no-output-check)")
    run = tsdp_cli("account", "verify", path, "--no-output-check")
    assert "--no-output-check" in run.err  # the human summary says so too (stderr warning)


def test_the_edit_is_caught_once_the_released_file_is_given(made, tsdp_cli, tmp_path):
    path = edited(made, tmp_path, "mean", _fewer_groups, keep_output=False)
    code, summary = verify(tsdp_cli, path, "--released", made["mean"].with_name("mean.csv"))
    assert code == 3 and "output_shape" in failed_checks(summary)


def test_no_output_check_with_released_files_is_a_usage_error(made, tsdp_cli):
    run = tsdp_cli("account", "verify", made["mean"], "--released", made["mean"].with_name("mean.csv"),
                   "--no-output-check")
    assert run.code == 2 and "--no-output-check" in run.err

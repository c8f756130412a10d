"""``--json`` everywhere: one JSON object on stdout with a ``schema`` id, snake_case keys at every
depth, and every warning printed on stderr as a ``{"code", "message"}`` item."""

import json
import re
from pathlib import Path

import pytest

from tsdp.cli.app import main
from tsdp.cli.summary import non_snake_keys, schema_id, warning_code

REPO = Path(__file__).resolve().parents[2]
SAMPLE = REPO / "sample_data"
CONFIGS = REPO / "configs"
SCHEMA = re.compile(r"^tsdp(\.[a-z_]+)+\.summary/\d+$")
SMALL = ["--series", "320", "--length", "20", "--context-length", "1", "--forecast-length", "1",
         "--batch-size", "32", "--delta", "1e-5"]
WIDE = [str(SAMPLE / "traffic_hourly_wide.csv"), "--mechanism", "laplace", "--epsilon", "1", "--unit", "event"]
FORECAST = [str(SAMPLE / "traffic_hourly.parquet"), "--series-col", "sensor", "--value-col", "count",
            "--context-length", "24", "--forecast-length", "12", "--model", "linear", "--batch-size", "8",
            "--noise-multiplier", "1.5", "--delta", "1e-5", "--steps", "5", "--seed", "1"]
MEAN = ["--config", str(CONFIGS / "mean_itms_cells.toml"), "--seed", "1"]
FLIP = ["--config", str(CONFIGS / "flip_qwi_asian_given_white.toml"), "--seed", "1"]


def summary(capsys, *args) -> tuple[dict, str]:
    code = main([str(a) for a in args] + ["--json"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    return json.loads(captured.out), captured.err


def check_shape(data: dict, err: str) -> None:
    assert SCHEMA.match(data["schema"]), data["schema"]
    assert non_snake_keys(data) == []
    assert isinstance(data["warnings"], list)
    assert all(set(w) == {"code", "message"} and re.match(r"^[a-z_]+$", w["code"]) for w in data["warnings"])
    printed = [line.removeprefix("warning: ") for line in err.splitlines() if line.startswith("warning: ")]
    assert printed == [w["message"] for w in data["warnings"]]


@pytest.fixture
def released(capsys, tmp_path):
    """An unseeded release (verifiable) and its report."""
    out = tmp_path / "r.csv"
    assert main(["release", *WIDE, "-o", str(out), "--quiet"]) == 0
    capsys.readouterr()
    return out, tmp_path / "r.report.json"


CASES = {
    "release": (["release", *WIDE, "--seed", "1", "-o", "out.csv"], "tsdp.release.summary/1", True),
    "release --evaluate": (["release", *WIDE, "--seed", "1", "--evaluate", "2"],
                           "tsdp.release.evaluate.summary/1", True),
    "mean-estimate": (["mean-estimate", *MEAN, "-o", "m.csv"], "tsdp.mean_estimate.summary/1", True),
    "mean-estimate --evaluate": (["mean-estimate", *MEAN, "--evaluate", "2"],
                                 "tsdp.mean_estimate.evaluate.summary/1", True),
    "flip": (["flip", *FLIP, "-o", "f.csv"], "tsdp.flip.summary/1", True),
    "forecast-train": (["forecast-train", *FORECAST, "-o", "fc.csv"], "tsdp.forecast_train.summary/1", True),
    "forecast-train --evaluate-only": (["forecast-train", *FORECAST, "--evaluate-only", "unclipped"],
                                       "tsdp.forecast_train.evaluate_only.summary/1", True),
    "account dpsgd": (["account", "dpsgd", *SMALL, "--noise-multiplier", "1", "--steps", "10", "--checkpoints", "3",
                       "--compare-standard"], "tsdp.account.dpsgd.summary/1", True),
    "account dpsgd lower": (["account", "dpsgd", *SMALL, "--noise-multiplier", "1", "--steps", "10", "--instances",
                             "2", "--bound", "lower"], "tsdp.account.dpsgd.summary/1", True),
    "account dpsgd deprecated": (["account", "dpsgd", "--series", "320", "--length", "20", "--context", "1",
                                  "--horizon", "1", "--batch-size", "32", "--delta", "1e-5", "--noise-multiplier", "1",
                                  "--steps", "10"], "tsdp.account.dpsgd.summary/1", True),
    "account dpsgd record": (["account", "dpsgd", "--unit", "record", "--sampling-rate", "0.01", "--noise-multiplier",
                              "1", "--steps", "100", "--delta", "1e-5"], "tsdp.account.dpsgd.summary/1", False),
    "account calibrate noise": (["account", "calibrate", "dpsgd", *SMALL, "--epsilon", "5", "--steps", "10"],
                                "tsdp.account.calibrate.dpsgd.summary/1", False),
    "account calibrate length": (["account", "calibrate", "dpsgd", *SMALL, "--epsilon", "0.01", "--noise-multiplier",
                                  "1"], "tsdp.account.calibrate.dpsgd.summary/1", True),
    "account calibrate record": (["account", "calibrate", "dpsgd", "--unit", "record", "--sampling-rate", "0.01",
                                  "--epsilon", "3", "--noise-multiplier", "1", "--delta", "1e-5"],
                                 "tsdp.account.calibrate.dpsgd.summary/1", False),
}


@pytest.mark.parametrize("name", list(CASES))
def test_every_summary_has_one_shape(capsys, name):
    args, schema, warns = CASES[name]
    data, err = summary(capsys, *args)
    check_shape(data, err)
    assert data["schema"] == schema
    if warns:
        assert data["warnings"], "this run prints warnings: they must be in the JSON"


def test_quiet_keeps_the_warnings_in_the_json(capsys):
    data, err = summary(capsys, "release", *WIDE, "--seed", "1", "-o", "out.csv", "--quiet")
    assert err == "" and "seeded_run" in {w["code"] for w in data["warnings"]}


def test_compose_verify_and_ledger(capsys, released):
    out, report = released
    data, err = summary(capsys, "account", "compose", report, report)
    check_shape(data, err)
    assert data["schema"] == "tsdp.account.compose.summary/1"
    data, err = summary(capsys, "account", "verify", report)
    check_shape(data, err)
    assert data["schema"] == "tsdp.account.verify.summary/1" and data["passed"] is True
    db = out.parent / "budget.db"
    for args, schema in ((["init", db, "--dataset", "d", "--epsilon", "5", "--delta", "1e-3"], "init"),
                         (["spend", db, "--dataset", "d", "--from-report", report], "spend"),
                         (["show", db], "show")):
        data, err = summary(capsys, "ledger", *args)
        check_shape(data, err)
        assert data["schema"] == f"tsdp.ledger.{schema}.summary/1"


def test_deprecation_warning_is_coded(capsys):
    data, _ = summary(capsys, *CASES["account dpsgd deprecated"][0])
    deprecated = [w for w in data["warnings"] if w["code"] == "deprecated_option"]
    assert [w["message"].split()[0] for w in deprecated] == ["--context", "--horizon"]


def test_non_finite_numbers_are_null_and_prose_keys_are_refused():
    from tsdp.cli.summary import document

    assert json.loads(document({"epsilon": float("inf")}, "tsdp x", []))["epsilon"] is None
    with pytest.raises(RuntimeError, match="snake_case"):
        document({"crps model (DP-SGD)": 1.0}, "tsdp x", [])


def test_schema_ids_and_codes():
    assert schema_id("tsdp account calibrate dpsgd --unit record") == "tsdp.account.calibrate.dpsgd.summary/1"
    assert schema_id("tsdp forecast-train --evaluate-only") == "tsdp.forecast_train.evaluate_only.summary/1"
    from tsdp.caveats import Caveat
    from tsdp.rng import SEEDED_WARNING

    assert warning_code(SEEDED_WARNING) == "seeded_run"  # a warning's own code, not read off its text
    assert warning_code(Caveat("seeded_run", "anything")) == "seeded_run"
    assert warning_code("something new") == "warning"


@pytest.mark.parametrize("name", ["release", "mean-estimate", "flip", "forecast-train"])
def test_every_publishing_command_states_its_accuracy(capsys, name):
    """Issue 15: the summary of every command that writes a release carries an accuracy block (a
    half-width, or the statement why there is no noise interval), with its alpha."""
    args, _, _ = CASES[name]
    data, _ = summary(capsys, *args)
    accuracy = data["accuracy"]
    assert 0 < accuracy["alpha"] < 1 and "covers" in accuracy
    assert accuracy["half_width"] is not None or accuracy["statement"].startswith("no noise interval")

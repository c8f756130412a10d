"""Every report tsdp writes validates against the shipped JSON Schema, which has teeth."""

import copy
import json

import jsonschema
import pytest

from tsdp.cli.app import main
from tsdp.report import schema

RUNS = {
    "gaussian-long-user": ["sample_data/traffic_hourly.parquet", "--value-col", "count", "--series-col",
                           "sensor", "--epsilon", "1", "--delta", "1e-6", "--unit", "user", "--max-steps", "24"],
    "laplace-wide-event": ["sample_data/traffic_hourly_wide.csv", "--mechanism", "laplace", "--epsilon", "0.5",
                           "--unit", "event"],
    "classic-w-event": ["sample_data/qwi_quarterly.csv", "--time-col", "quarter", "--epsilon", "2",
                        "--delta", "1e-5", "--unit", "w-event", "--w", "4", "--calibration", "classic", "--max-per-step", "1"],
    "events": ["sample_data/events.csv", "--user-col", "user_id", "--time-col", "timestamp", "--freq", "1d",
               "--start", "2024-03-04", "--end", "2024-03-18", "--epsilon", "1", "--delta", "1e-6",
               "--unit", "user", "--max-steps", "3", "--max-per-step", "2"],
}


@pytest.fixture(scope="module")
def validator():
    s = schema()
    jsonschema.Draft202012Validator.check_schema(s)
    return jsonschema.Draft202012Validator(s, format_checker=jsonschema.FormatChecker())


def run_release(args, tmp_path, repo_root, seed=True):
    out = tmp_path / "out.parquet"
    argv = ["release", str(repo_root / args[0]), *args[1:], "-o", str(out), "--quiet"]
    if seed:
        argv += ["--seed", "4"]
    assert main(argv) == 0
    return json.loads((tmp_path / "out.report.json").read_text())


@pytest.mark.parametrize("name", sorted(RUNS))
def test_reports_validate(name, tmp_path, repo_root, validator):
    report = run_release(RUNS[name], tmp_path, repo_root)
    validator.validate(report)
    assert report["randomness"] == "seeded"
    assert "seed" not in report["command"]["parameters"]


def test_schema_rejects_broken_reports(tmp_path, repo_root, validator):
    good = run_release(RUNS["gaussian-long-user"], tmp_path, repo_root, seed=False)
    validator.validate(good)
    assert good["randomness"] == "os-entropy"
    breakers = [
        lambda r: r.update(schema="tsdp-report/2"),
        lambda r: r["command"]["parameters"].update(seed=4),
        lambda r: r["output"].update(sha256="abc"),
        lambda r: r["claim"].update(epsilon=-1),
        lambda r: r["claim"].update(definition="lip"),  # a LIP claim may not carry epsilon
        lambda r: r["claim"]["unit"].update(level="household"),
        lambda r: r.pop("warnings"),
        lambda r: r.update(raw_values=[1, 2, 3]),
    ]
    for breaker in breakers:
        bad = copy.deepcopy(good)
        breaker(bad)
        with pytest.raises(jsonschema.ValidationError):
            validator.validate(bad)

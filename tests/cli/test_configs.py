"""Every example config in configs/ runs, and its report validates."""

import json
import tomllib

import jsonschema
import polars as pl
import pytest

from tsdp.cli.app import main
from tsdp.report import schema

CONFIGS = sorted((__import__("pathlib").Path(__file__).resolve().parents[2] / "configs").glob("*.toml"))


def test_there_are_example_configs():
    assert len(CONFIGS) >= 4


def command_of(config):
    """The command a config is for: its table path, e.g. [release] or [account.dpsgd]."""
    tables = tomllib.loads(config.read_text())
    path, settings = [], tables
    while len(settings) == 1 and isinstance(next(iter(settings.values())), dict):
        key = next(iter(settings))
        path.append(key)
        settings = settings[key]
    return path, settings


def test_account_config_runs(capsys):
    ran = 0
    for config in CONFIGS:
        path, settings = command_of(config)
        if path[0] != "account":
            continue
        assert main([*path, "--config", str(config), "--json"]) == 0
        out = json.loads(capsys.readouterr().out)
        assert out["delta"] == settings["delta"] and out["epsilon"] > 0
        ran += 1
    assert ran >= 1


@pytest.mark.parametrize("config", [c for c in CONFIGS if command_of(c)[0] == ["release"]], ids=lambda p: p.stem)
def test_config_runs(config, tmp_path):
    settings = command_of(config)[1]
    suffix = "." + settings["output"].rsplit(".", 1)[-1]
    out = tmp_path / f"released{suffix}"
    code = main(["release", "--config", str(config), "-o", str(out), "--seed", "1", "--quiet"])
    assert code == 0
    frame = pl.read_parquet(out) if suffix == ".parquet" else pl.read_csv(out)
    assert frame.height > 0
    report = json.loads((tmp_path / "released.report.json").read_text())
    jsonschema.validate(report, schema())
    for key in ("epsilon", "delta"):
        if key in settings:
            assert report["claim"][key] == settings[key]
    assert report["command"]["parameters"]["unit"] == settings["unit"]


@pytest.mark.parametrize("config", [c for c in CONFIGS if command_of(c)[0] == ["mean-estimate"]],
                         ids=lambda p: p.stem)
def test_mean_config_runs(config, tmp_path):
    settings = command_of(config)[1]
    suffix = "." + settings["output"].rsplit(".", 1)[-1]
    out = tmp_path / f"estimates{suffix}"
    code = main(["mean-estimate", "--config", str(config), "-o", str(out), "--seed", "1", "--quiet"])
    assert code == 0
    frame = pl.read_parquet(out) if suffix == ".parquet" else pl.read_csv(out)
    assert frame.height > 0 and "estimate" in frame.columns
    report = json.loads((tmp_path / "estimates.report.json").read_text())
    jsonschema.validate(report, schema())
    assert report["claim"]["epsilon"] == settings["epsilon"] * frame.height
    assert report["claim"]["unit"]["id_column"] == settings["user-col"]


@pytest.mark.parametrize("config", [c for c in CONFIGS if command_of(c)[0] == ["flip"]], ids=lambda p: p.stem)
def test_flip_config_runs(config, tmp_path):
    settings = command_of(config)[1]
    out = tmp_path / "flipped.csv"
    code = main(["flip", "--config", str(config), "-o", str(out), "--seed", "1", "--quiet"])
    assert code == 0
    frame = pl.read_csv(out)
    assert frame.height > 0
    report = json.loads((tmp_path / "flipped.report.json").read_text())
    jsonschema.validate(report, schema())
    assert report["claim"]["definition"] == "lip" and "epsilon" not in report["claim"]
    custodian = json.loads((tmp_path / "flipped.custodian.NOT-FOR-PUBLICATION.json").read_text())
    assert custodian["figures"]["lip_series"]
    for row in custodian["figures"]["lip_series"]:
        assert row["lip_ideal"] >= 1 - settings["lip-delta"]
        assert row["lip_budget_delta"] == settings["lip-delta"]


@pytest.mark.parametrize("config", [c for c in CONFIGS if command_of(c)[0] == ["forecast-train"]],
                         ids=lambda p: p.stem)
def test_forecast_config_runs(config, tmp_path):
    settings = command_of(config)[1]
    out = tmp_path / "forecasts.parquet"
    code = main(["forecast-train", "--config", str(config), "-o", str(out), "--seed", "1", "--quiet"])
    assert code == 0
    frame = pl.read_parquet(out)
    assert frame.height == 20 * settings["forecast-length"]
    report = json.loads((tmp_path / "forecasts.report.json").read_text())
    jsonschema.validate(report, schema())
    assert 0 < report["claim"]["epsilon"] <= settings["epsilon"] and report["claim"]["delta"] == settings["delta"]
    assert (tmp_path / "forecasts.model.npz").is_file() and (tmp_path / "forecasts.model.json").is_file()

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


@pytest.mark.parametrize("config", CONFIGS, ids=lambda p: p.stem)
def test_config_runs(config, tmp_path):
    settings = next(iter(tomllib.loads(config.read_text()).values()))
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

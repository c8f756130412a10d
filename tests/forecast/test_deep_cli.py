"""``tsdp forecast-train --model deepar|itransformer`` end to end (JAX, extra tsdp[deep]): the report's
epsilon is ``tsdp account dpsgd``'s for the receptive field DeepAR reads, the model file reloads and
forecasts, the refusals, and the usage error naming the extra when it is missing.

Here rather than in tests/cli so that JAX (multithreaded) is imported after the Spark tests, which start
processes with fork.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from tests.conftest import dpsgd_sampler_options, hourly_panel_csv

# series a, b, c of 60 hourly steps
SMALL_ARGS = ["--time-col", "time", "--value-col", "v", "--series-col", "id", "--context-length", "4",
              "--forecast-length", "2", "--batch-size", "2", "--model", "linear", "--delta", "1e-5",
              "--noise-multiplier", "1", "--steps", "5", "--quiet"]


@pytest.fixture(autouse=True)
def in_tmp(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.fixture
def small(tmp_path) -> Path:
    return hourly_panel_csv(tmp_path / "small.csv", "abc")


def run_ok(tsdp_cli, *args):
    result = tsdp_cli("forecast-train", *args)
    assert result.code == 0, result.err
    return result


def read_json(path) -> dict:
    return json.loads(Path(path).read_text())


def account_for(tsdp_cli, claim: dict) -> dict:
    """``tsdp account dpsgd --json`` for the setting and count a report's claim states."""
    p = claim["parameters"]
    result = tsdp_cli(
        "account", "dpsgd", "--series", p["series"], "--length", p["train_length"], "--context-length", p["context"],
        "--forecast-length", p["horizon"], "--batch-size", p["batch_size"], "--noise-multiplier", repr(p["noise_multiplier"]),
        "--steps", p["compositions"], "--delta", repr(claim["delta"]), "--top", p["top"], "--bottom", p["bottom"],
        "--instances", p["instances"], "--discretization", repr(p["discretization"]), *dpsgd_sampler_options(p), "--json",
    )
    assert result.code == 0, result.err
    return json.loads(result.out)


def _deep_extra_missing() -> str | None:
    from tsdp.forecast.deep import missing_extra

    return missing_extra()


needs_deep = pytest.mark.skipif(_deep_extra_missing() is not None,
                                reason=f"needs the optional extra tsdp[deep]: {_deep_extra_missing()}")
# the small panel: 60 - 2 * (7 + 5) = 36 training steps; DeepAR reads 4 + 24 - 1 = 27 values per window
DEEP_ARGS = {"deepar": ["--model", "deepar", "--lags", "1-3,24"], "itransformer": ["--model", "itransformer"]}


@needs_deep
@pytest.mark.parametrize("name", list(DEEP_ARGS))
def test_deep_model_report_epsilon_equals_account_dpsgd_and_the_model_reloads(tsdp_cli, small, tmp_path, name):
    from tsdp.forecast import persist
    from tsdp.forecast.timefeatures import Calendar

    args = list(SMALL_ARGS)
    args[args.index("--model") + 1] = name
    run_ok(tsdp_cli, small, *args, *DEEP_ARGS[name][2:], "--seed", "3", "-o", "fc.csv")
    report = read_json(tmp_path / "fc.report.json")
    claim = report["claim"]
    p = claim["parameters"]
    window = 4 + 24 - 1 if name == "deepar" else 4
    assert p["context"] == window and p["k"] == window + 2  # the accountant sees the receptive field
    account = account_for(tsdp_cli, claim)
    assert claim["epsilon"] == account["epsilon"] and p["compositions"] == account["compositions"] == 5
    assert any("float32 with JAX on cpu" in n for n in report["notes"])
    meta = read_json(tmp_path / "fc.model.json")
    assert meta["training"]["engine"] == "jax" and meta["training"]["dtype"] == "float32"
    assert meta["training"]["context"] == window and meta["model"]["context"] == 4

    model, theta, meta = persist.load_model(tmp_path / "fc.model.json")
    assert model.name == name and model.receptive_field == window
    frame = pl.read_csv(tmp_path / "fc.csv")
    values = pl.read_csv(small).pivot(on="id", index="time", values="v").sort("time").drop("time").to_numpy().T
    cal = Calendar.from_label(meta["input"]["start"], meta["input"]["freq"])  # the grid the model file records
    assert cal.origin == np.datetime64("2024-01-01T00:00") and cal.step_us == 3_600_000_000
    extra = ({"feats": cal.window_features(model.time_features, np.full(3, 60), window, 2)}
             if model.time_features else {})
    mean, q = model.forecast(theta, values[:, -window:].astype(float), [0.1, 0.5, 0.9], **extra)
    assert np.all(np.isfinite(q)) and q.shape == (3, 2, 3)
    if name == "itransformer":  # no sampling: the reloaded model gives the published forecasts
        np.testing.assert_allclose(frame["q0.5"].to_numpy(), q[:, :, 1].ravel(), rtol=1e-12)
        np.testing.assert_allclose(frame["mean"].to_numpy(), mean.ravel(), rtol=1e-12)


@needs_deep
def test_deep_model_refusals(refuse, small):
    args = [a for a in SMALL_ARGS]
    args[args.index("--model") + 1] = "itransformer"
    try:
        import jax

        has_gpu = bool(jax.devices("gpu"))
    except RuntimeError:
        has_gpu = False
    if not has_gpu:
        refuse(["forecast-train", small, *args, "--device", "gpu", "-o", "fc.csv"], 2, "--device gpu", "no GPU")
    refuse(["forecast-train", small, *args, "--lags", "1-3", "-o", "fc.csv"], 2, "--lags", "itransformer")
    refuse(["forecast-train", small, *args, "--num-samples", "50", "-o", "fc.csv"], 2, "--num-samples 50")
    refuse(["forecast-train", small, *args, "--clip-norm", "1e-30", "-o", "fc.csv"], 2, "--clip-norm 1e-30")
    refuse(["forecast-train", small, *SMALL_ARGS, "--dtype", "float64", "-o", "fc.csv"], 2, "--dtype float64",
           "linear")
    refuse(["forecast-train", small, *SMALL_ARGS, "--device", "cpu", "-o", "fc.csv"], 2, "--device cpu")
    args[args.index("--model") + 1] = "deepar"
    refuse(["forecast-train", small, *args, "--lags", "1-3,48", "-o", "fc.csv"], 4, "--lags", "51", "36")
    refuse(["forecast-train", small, *args, "--lags", "1-x", "-o", "fc.csv"], 2, "--lags", "1-x")


@pytest.mark.parametrize("name", ["deepar", "itransformer"])
def test_deep_model_without_the_extra_is_a_usage_error_naming_it(refuse, small, monkeypatch, name):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda mod, *a: None if mod == "jax" else real(mod, *a))
    args = [a for a in SMALL_ARGS]
    args[args.index("--model") + 1] = name
    refuse(["forecast-train", small, *args, "-o", "fc.csv"], 2, f"--model {name}", "tsdp[deep]", "jax")


@needs_deep
@pytest.mark.parametrize("name", ["deepar", "itransformer"])
def test_deep_model_report_verifies(tsdp_cli, small, tmp_path, name):
    """verify rebuilds the accountant's context length of a JAX model's report: DeepAR's receptive field
    (--context-length plus its largest lag minus 1), not --context-length (such reports failed verify)."""
    args = list(SMALL_ARGS)
    args[args.index("--model") + 1] = name
    run_ok(tsdp_cli, small, *args, *DEEP_ARGS[name][2:], "-o", "fc.csv")
    verify = tsdp_cli("account", "verify", tmp_path / "fc.report.json", "--json")
    checks = {c["name"]: c for c in json.loads(verify.out)["reports"][0]["checks"]}
    assert verify.code == 0 and all(c["passed"] for c in checks.values()), checks
    report = read_json(tmp_path / "fc.report.json")
    report["claim"]["parameters"]["context"] -= 1  # a receptive field one value shorter: the accountant's k shrinks
    (tmp_path / "edited.json").write_text(json.dumps(report))
    verify = tsdp_cli("account", "verify", tmp_path / "edited.json", "--json")
    checks = {c["name"]: c for c in json.loads(verify.out)["reports"][0]["checks"]}
    assert verify.code == 3 and not checks["command"]["passed"]
    report = read_json(tmp_path / "fc.report.json")
    report["claim"]["parameters"]["parameters"] //= 2  # the lattice's cost depends on the count: rebuilt, not read
    (tmp_path / "edited.json").write_text(json.dumps(report))
    verify = tsdp_cli("account", "verify", tmp_path / "edited.json", "--json")
    checks = {c["name"]: c for c in json.loads(verify.out)["reports"][0]["checks"]}
    assert verify.code == 3 and "parameter count" in checks["parameters"]["detail"]


@pytest.mark.parametrize("freq, lags, window", [
    ("1h", "1-3,24", 4 + 24 - 1),
    ("1h", None, 4 + 721 - 1),  # GluonTS's defaults for hourly data reach 721
    ("1d", None, None),
    ("1", None, 4 + 7 - 1),  # integer time: no calendar, lags 1-7
])
def test_verify_rebuilds_deepars_receptive_field(freq, lags, window):
    from tsdp.verify.forecast import _receptive_field
    from tsdp.forecast.timefeatures import default_lags

    if window is None:  # daily data: the defaults GluonTS takes for that step
        window = 4 + max(default_lags(86_400_000_000)) - 1
    assert _receptive_field({"model": "deepar", "context_length": 4, "lags": lags}, {"freq": freq}) == window
    assert _receptive_field({"model": "simple-ff", "context_length": 4, "lags": None}, {"freq": freq}) == 4


@pytest.mark.parametrize("freq, context, lags, largest", [
    ("1h", 4, "1-3,24", 24),  # given lags are kept whatever the context
    ("1h", 48, None, 169),  # since issue 31 the defaults reach at most 4 contexts: the paper's traffic lags
    ("1d", 28, None, 84),  # daily: up to 112 -> 1-8, 13-15, 20-22, 27-31, 56, 84
])
def test_verify_rebuilds_the_bounded_default_lags_of_new_reports(freq, context, lags, largest):
    from tsdp.verify.forecast import _receptive_field

    cmd = {"model": "deepar", "context_length": context, "lags": lags, "test_windows": 7}
    assert _receptive_field(cmd, {"freq": freq}) == context + largest - 1


# ------------------------------------------------------------------------------ count heads (issue 31)


@needs_deep
@pytest.mark.parametrize("distribution", ["negbin", "poisson"])
def test_deepar_count_head_forecasts_counts_at_the_accountants_epsilon(tsdp_cli, small, tmp_path, distribution):
    args = list(SMALL_ARGS)
    args[args.index("--model") + 1] = "deepar"
    run_ok(tsdp_cli, small, *args, "--lags", "1-3,24", "--distribution", distribution, "--seed", "3", "-o", "fc.csv")
    fc = pl.read_csv(tmp_path / "fc.csv")
    q = fc.select([c for c in fc.columns if c.startswith("q")]).to_numpy()
    assert q.min() >= 0 and fc["mean"].min() >= 0  # quantiles and means of non-negative integer paths
    report = read_json(tmp_path / "fc.report.json")
    assert report["claim"]["epsilon"] == account_for(tsdp_cli, report["claim"])["epsilon"]
    assert any(f"output {distribution}" in n and "L_C = 27" in n for n in report["notes"])
    meta = read_json(tmp_path / "fc.model.json")
    assert meta["model"]["distribution"] == distribution


@needs_deep
def test_count_head_refuses_negative_values(tsdp_cli, tmp_path, refuse):
    path = hourly_panel_csv(tmp_path / "neg.csv", "abc")
    text = path.read_text().splitlines()
    first = text[5].split(",")
    text[5] = ",".join(first[:2] + ["-3"])
    path.write_text("\n".join(text) + "\n")
    args = list(SMALL_ARGS)
    args[args.index("--model") + 1] = "deepar"
    line = refuse(["forecast-train", str(path), *args, "--lags", "1-3", "--distribution", "negbin", "-o", "fc.csv"],
                  4, "'v'", "-3", "--distribution negbin")
    assert "row 5" in line
    assert not (tmp_path / "fc.csv").exists()


@needs_deep
def test_default_lags_are_bounded_by_the_context_and_the_claim_uses_the_receptive_field(tsdp_cli, tmp_path):
    """Without --lags DeepAR takes GluonTS's hourly lags up to 4 x --context-length (context 12: 1-7,
    23-25, 47-48): the window the sampler draws and the accountant charges is 12 + 48 - 1 = 59 values."""
    from tsdp.forecast.timefeatures import default_lags

    path = hourly_panel_csv(tmp_path / "long.csv", "abc", steps=200)
    args = [a for a in SMALL_ARGS]
    args[args.index("--model") + 1] = "deepar"
    args[args.index("--context-length") + 1] = "12"
    run_ok(tsdp_cli, path, *args, "--seed", "3", "-o", "fc.csv")
    meta = read_json(tmp_path / "fc.model.json")
    assert meta["model"]["lags"] == [1, 2, 3, 4, 5, 6, 7, 23, 24, 25, 47, 48]
    assert meta["model"]["lags"] == list(default_lags(3_600_000_000, context=12))
    report = read_json(tmp_path / "fc.report.json")
    assert report["claim"]["parameters"]["context"] == 12 + 48 - 1
    assert report["claim"]["epsilon"] == account_for(tsdp_cli, report["claim"])["epsilon"]
    assert any("L_C = 59" in n and "lags 1-7,23-25,47-48" in n for n in report["notes"])


@needs_deep
def test_a_count_head_report_with_default_lags_verifies(tsdp_cli, tmp_path):
    """verify rebuilds the parameter count of the count head (2 outputs, not the Student-t's 3) and the
    bounded default lags; an unseeded run, so that every check can pass."""
    path = hourly_panel_csv(tmp_path / "long.csv", "abc", steps=200)
    args = [a for a in SMALL_ARGS]
    args[args.index("--model") + 1] = "deepar"
    args[args.index("--context-length") + 1] = "12"
    run_ok(tsdp_cli, path, *args, "--distribution", "negbin", "-o", "fc.csv")
    verify = tsdp_cli("account", "verify", tmp_path / "fc.report.json", "--json")
    checks = {c["name"]: c for c in json.loads(verify.out)["reports"][0]["checks"]}
    assert verify.code == 0 and all(c["passed"] for c in checks.values()), checks

"""``tsdp forecast-train`` end to end: the report's epsilon is exactly ``tsdp account dpsgd``'s for the
same setting and count, training stops at the accountant's K (spec 6.2 item 10), the outputs
(forecasts, model files, metrics, report) and every refusal of spec section 5.4 / DESIGN.md section 4
(exit code, one ``error:`` line naming the option or column and the value, nothing written: the
``refuse`` fixture).

Runs are kept small (--model linear, L_C = 24, L_F = 12 on the 20 x 2000 sample panel, or a 3 x 60
inline panel for the refusals).
"""

from __future__ import annotations

import hashlib
import json
import math
import stat
import shutil
from datetime import datetime, timedelta
from pathlib import Path

import jsonschema
import numpy as np
import polars as pl
import pytest

from tsdp.accounting.pld import pld_from_profile
from tsdp.accounting.structured import DpSgdSetting, composition_profile, epsilon_of, max_compositions
from tsdp.report import schema
from tests.conftest import dpsgd_sampler_options, dpsgd_sampler_setting

SAMPLE_DIR = Path(__file__).resolve().parents[2] / "sample_data"
LONG = ["--time-col", "time", "--value-col", "count", "--series-col", "sensor"]
SMALL_MODEL = ["--context-length", "24", "--forecast-length", "12", "--batch-size", "8", "--model", "linear"]
LEVELS = ["q0.1", "q0.2", "q0.3", "q0.4", "q0.5", "q0.6", "q0.7", "q0.8", "q0.9"]
SEED = 918273645  # distinctive, so that it cannot appear in a report by accident

# ---- the inline panel for the refusals: series a, b, c of 60 hourly steps --------------------------
START = datetime(2024, 1, 1)
SMALL_ARGS = ["--time-col", "time", "--value-col", "v", "--series-col", "id", "--context-length", "4",
              "--forecast-length", "2", "--batch-size", "2", "--model", "linear", "--delta", "1e-5",
              "--noise-multiplier", "1", "--steps", "5", "--quiet"]


def small_rows(steps: int = 60) -> list[list[str]]:
    return [[sid, (START + timedelta(hours=t)).strftime("%Y-%m-%d %H:%M:%S"), str(10 + (7 * t + 3 * k) % 13)]
            for k, sid in enumerate("abc") for t in range(steps)]


def write_rows(path: Path, rows: list[list[str]], header: str = "id,time,v") -> Path:
    path.write_text(header + "\n" + "".join(",".join(r) + "\n" for r in rows))
    return path


@pytest.fixture
def traffic(tmp_path) -> Path:
    return Path(shutil.copy(SAMPLE_DIR / "traffic_hourly.parquet", tmp_path / "traffic.parquet"))


@pytest.fixture
def traffic_wide(tmp_path) -> Path:
    return Path(shutil.copy(SAMPLE_DIR / "traffic_hourly_wide.csv", tmp_path / "traffic_wide.csv"))


@pytest.fixture
def small(tmp_path) -> Path:
    return write_rows(tmp_path / "small.csv", small_rows())


def run_ok(tsdp_cli, *args):
    result = tsdp_cli("forecast-train", *args)
    assert result.code == 0, result.err
    return result


def read_json(path) -> dict:
    return json.loads(Path(path).read_text())


def account_for(tsdp_cli, claim: dict) -> dict:
    """``tsdp account dpsgd --json`` for the setting and count a report's claim states."""
    p = claim["parameters"]
    count = "--steps" if p["accounting_unit"] == "step" else "--epochs"
    result = tsdp_cli(
        "account", "dpsgd", "--series", p["series"], "--length", p["train_length"], "--context-length", p["context"],
        "--forecast-length", p["horizon"], "--batch-size", p["batch_size"], "--noise-multiplier", repr(p["noise_multiplier"]),
        count, p["compositions"], "--delta", repr(claim["delta"]), "--top", p["top"], "--bottom", p["bottom"],
        "--instances", p["instances"], "--unit", "w-user" if claim["unit"]["level"] == "user" else "w-event",
        "--w", claim["unit"]["w"], "--discretization", repr(p["discretization"]), *dpsgd_sampler_options(p), "--json",
    )
    assert result.code == 0, result.err
    return json.loads(result.out)


def setting_of(claim: dict) -> DpSgdSetting:
    p = claim["parameters"]
    return DpSgdSetting(n_series=p["series"], length=p["train_length"], context=p["context"], horizon=p["horizon"],
                        batch_size=p["batch_size"], noise_multiplier=p["noise_multiplier"], top=p["top"],
                        bottom=p["bottom"], instances=p["instances"],
                        unit="user" if claim["unit"]["level"] == "user" else "event", w=claim["unit"]["w"],
                        **dpsgd_sampler_setting(p))


# ----------------------------------------------------------------- epsilon == tsdp account dpsgd


RUNS = {
    "budget": (["--noise-multiplier", "1.5", "--epsilon", "4", "--delta", "1e-5"], "budget", "step"),
    "steps": (["--noise-multiplier", "1.5", "--delta", "1e-5", "--steps", "40"], "steps", "step"),
    "shuffle-epochs": (["--noise-multiplier", "1.5", "--delta", "1e-5", "--top", "shuffle", "--epochs", "6"],
                       "epochs", "epoch"),
    "user-w2": (["--noise-multiplier", "2", "--delta", "1e-5", "--unit", "w-user", "--w", "2", "--steps", "30"],
                "steps", "step"),
}


@pytest.mark.parametrize("name", list(RUNS))
def test_report_epsilon_equals_account_dpsgd(tsdp_cli, traffic, tmp_path, name):
    extra, stopped_by, unit = RUNS[name]
    run_ok(tsdp_cli, traffic, *LONG, *SMALL_MODEL, *extra, "--seed", "1", "--quiet", "-o", "fc.csv")
    report = read_json(tmp_path / "fc.report.json")
    claim = report["claim"]
    p = claim["parameters"]
    assert p["series"] == 20 and p["train_length"] == 2000 - 12 * (7 + 5) == report["grid"]["train_length"]
    assert p["stopped_by"] == stopped_by and p["accounting_unit"] == unit
    account = account_for(tsdp_cli, claim)
    assert claim["epsilon"] == account["epsilon"]
    assert p["compositions"] == account["compositions"]
    assert account["theorem"] == claim["theorem"]
    if name == "steps":
        assert p["steps"] == p["compositions"] == 40
    if name == "shuffle-epochs":
        assert p["compositions"] == 6 and p["steps"] == 6 * p["steps_per_epoch"] == 12
        assert "Theorem 4.2" in claim["theorem"]
    if name == "user-w2":
        assert claim["unit"]["level"] == "user" and claim["unit"]["w"] == 2
        assert p["k"] == 2 * (24 + 12)


def test_budget_stops_at_the_accountants_max_compositions(tsdp_cli, traffic, tmp_path):
    run_ok(tsdp_cli, traffic, *LONG, *SMALL_MODEL, *RUNS["budget"][0], "--seed", "2", "--json", "-o", "fc.csv")
    claim = read_json(tmp_path / "fc.report.json")["claim"]
    setting = setting_of(claim)
    k, _ = max_compositions(setting, 4.0, 1e-5)
    assert claim["parameters"]["compositions"] == claim["parameters"]["steps"] == k
    base = pld_from_profile(composition_profile(setting)[0])
    assert epsilon_of(setting, base, k, 1e-5) == claim["epsilon"] <= 4.0 < epsilon_of(setting, base, k + 1, 1e-5)
    assert any("stopped before the budget" in n for n in read_json(tmp_path / "fc.report.json")["notes"])


def test_noise_multiplier_auto_fits_epochs_in_epsilon(tsdp_cli, traffic, tmp_path):
    result = run_ok(tsdp_cli, traffic, *LONG, *SMALL_MODEL, "--noise-multiplier", "auto", "--epsilon", "2",
                    "--delta", "1e-5", "--epochs", "20", "--seed", "3", "--json", "-o", "fc.csv")
    summary = json.loads(result.out)
    report = read_json(tmp_path / "fc.report.json")
    claim = report["claim"]
    sigma = claim["parameters"]["noise_multiplier"]
    assert summary["noise_multiplier"] == sigma == report["command"]["parameters"]["noise_multiplier"]
    assert claim["parameters"]["compositions"] == 40 and claim["parameters"]["stopped_by"] == "epochs"
    assert 2.0 * 0.99 <= claim["epsilon"] <= 2.0
    assert account_for(tsdp_cli, claim)["epsilon"] == claim["epsilon"]


# ---------------------------------------------------------------------------------------- outputs


def expected_times(last: datetime, horizon: int) -> list[datetime]:
    return [last + timedelta(hours=h) for h in range(1, horizon + 1)]


def test_outputs_forecasts_model_metrics_and_report(tsdp_cli, traffic, tmp_path):
    result = run_ok(tsdp_cli, traffic, *LONG, *SMALL_MODEL, "--noise-multiplier", "1.5", "--delta", "1e-5",
                    "--steps", "60", "--seed", SEED, "--json", "-o", "fc.parquet")
    summary = json.loads(result.out)
    data = pl.read_parquet(traffic)
    names = sorted(data["sensor"].unique().to_list())

    # forecasts: one row per series x L_F timestamps continuing the hourly grid
    fc = pl.read_parquet(tmp_path / "fc.parquet")
    assert fc.columns == ["sensor", "time", "mean", *LEVELS]
    assert fc.height == 20 * 12
    last = data["time"].max()
    for name in names:
        rows = fc.filter(pl.col("sensor") == name)
        assert rows["time"].to_list() == expected_times(last, 12)
    q = fc.select(LEVELS).to_numpy()
    assert np.all(np.isfinite(q)) and np.all(np.diff(q, axis=1) >= 0)

    # model files load again and reproduce the forecasts from each series' last L_C values
    from tsdp.forecast.metrics import QUANTILE_LEVELS
    from tsdp.forecast.persist import load_model

    model, theta, meta = load_model(tmp_path / "fc.model.json")
    assert (tmp_path / "fc.model.npz").is_file() and meta["weights_file"] == "fc.model.npz"
    values = np.stack([data.filter(pl.col("sensor") == n).sort("time")["count"].to_numpy() for n in names])
    ctx = values[:, -24:].astype(float)
    np.testing.assert_array_equal(model.predict_quantiles(theta, ctx, QUANTILE_LEVELS).reshape(-1, 9), q)
    np.testing.assert_array_equal(model.distribution(theta, ctx)[0].ravel(), fc["mean"].to_numpy())

    # metrics: CRPS and MASE of the model and of seasonal naive (recomputed independently here)
    from tsdp.forecast import trainer

    custodian = read_json(tmp_path / "fc.custodian.NOT-FOR-PUBLICATION.json")
    assert custodian["publish"] is False and stat.S_IMODE((tmp_path / "fc.custodian.NOT-FOR-PUBLICATION.json").stat().st_mode) == 0o600
    scores = custodian["figures"]["scores"]
    model_key = next(k for k in scores if "model" in k)
    naive_key = next(k for k in scores if "seasonal naive" in k)
    split = trainer.split_panel(values.astype(float), 24, 12, 5, test_windows=7)
    assert scores["seasonal naive (season 24)"] == trainer.evaluate_seasonal_naive(split, 24)
    assert sorted(scores) == ["model (DP-SGD)", "seasonal naive (season 1)", "seasonal naive (season 168)",
                              "seasonal naive (season 24)"]
    assert custodian["figures"]["season"] == 24 and custodian["figures"]["test_origins"] == 7
    assert scores[model_key]["origins"] == 7 and len(scores[model_key]["crps_by_origin"]) == 7
    assert scores[model_key]["crps"] == pytest.approx(np.mean(scores[model_key]["crps_by_origin"]), rel=1e-12)
    assert all(np.isfinite([scores[model_key]["crps"], scores[model_key]["mase"]]))

    # report
    text = (tmp_path / "fc.report.json").read_text()
    report = json.loads(text)
    jsonschema.Draft202012Validator(schema()).validate(report)
    claim = report["claim"]
    assert claim["definition"] == "approx-dp" and claim["delta"] == 1e-5
    assert "Schuchardt et al." in claim["theorem"] and "Theorem 4.4" in claim["theorem"]
    assert claim["epsilon"] == summary["epsilon"] == meta["privacy"]["epsilon"]
    assert report["output"]["sha256"] == hashlib.sha256((tmp_path / "fc.parquet").read_bytes()).hexdigest()
    unaccounted = " ".join(claim["parameters"]["unaccounted"])
    assert "hyper-parameter" in unaccounted and "checkpoint" not in unaccounted  # the last iterate is released
    assert claim["parameters"]["checkpoint"] == "last" and claim["parameters"]["guarantee_covers_released_weights"]
    # audit item 5: the unit says "by any amount" and carries no per-value bound (it used to hold the clip norm)
    assert claim["unit"]["max_per_step"] is None and "by any amount" in claim["unit"]["neighbouring"]
    assert meta["privacy"]["guarantee_covers_these_weights"] is True and "best_step" not in json.dumps(meta)
    # held-out metrics and the validation history are figures of the private data: custodian only
    assert "crps" not in text and "val_loss" not in text and "best_step" not in text
    notes = " ".join(report["notes"])
    assert "not privacy-accounted" in notes and "last iterate" in notes and "hyper-parameter" in notes
    assert "own last context-length values" in notes and "does not cover" in notes
    assert report["randomness"] == "seeded"
    assert any("--seed" in w and "must not be published" in w for w in report["warnings"])
    # the seed never appears: not as a parameter, nor anywhere in the report or the model files
    assert "seed" not in report["command"]["parameters"]
    for path in ("fc.report.json", "fc.model.json", "fc.custodian.NOT-FOR-PUBLICATION.json"):
        assert str(SEED) not in (tmp_path / path).read_text(), path


def test_best_validation_checkpoint_is_an_opt_in_marked_as_not_covered(tsdp_cli, traffic, tmp_path):
    """Audit regression (issue 11, item 4): releasing the best checkpoint on private validation windows is
    not covered by the claim; it is an explicit opt-in, marked in the report and in the model file."""
    run_ok(tsdp_cli, traffic, *LONG, *SMALL_MODEL, "--noise-multiplier", "1.5", "--delta", "1e-5",
           "--steps", "20", "--checkpoint", "best-validation", "--quiet", "-o", "fc.csv")
    report = read_json(tmp_path / "fc.report.json")
    params = report["claim"]["parameters"]
    assert params["checkpoint"] == "best-validation" and params["guarantee_covers_released_weights"] is False
    assert "checkpoint" in " ".join(params["unaccounted"])
    assert any("does NOT cover these weights" in w for w in report["warnings"])
    meta = read_json(tmp_path / "fc.model.json")
    assert meta["privacy"]["guarantee_covers_these_weights"] is False
    assert any("does NOT cover" in c for c in meta["privacy"]["caveats"])


def test_report_parameters_are_the_commands_public_options(tsdp_cli, traffic, tmp_path):
    """The report's parameters are the command's options (plus the documented additions) as plain values;
    no Python objects (reprs of modules or functions) leak into them."""
    from tsdp.cli.app import app

    run_ok(tsdp_cli, traffic, *LONG, *SMALL_MODEL, "--noise-multiplier", "1.5", "--delta", "1e-5",
           "--steps", "5", "--seed", "4", "--quiet", "-o", "fc.csv")
    params = read_json(tmp_path / "fc.report.json")["command"]["parameters"]
    import typer.main

    command = typer.main.get_command(app).commands["forecast-train"]
    options = {p.name for p in command.params}
    allowed = options | {"model_files", "custodian_file", "seeded", "training", "training_plan"}  # seeded: issue 33
    assert set(params) <= allowed, f"unexpected report parameters: {sorted(set(params) - allowed)}"
    assert not any(isinstance(v, str) and v.startswith("<") for v in params.values()), params


def test_unseeded_run_reports_os_entropy(tsdp_cli, traffic, tmp_path):
    run_ok(tsdp_cli, traffic, *LONG, *SMALL_MODEL, "--noise-multiplier", "1.5", "--delta", "1e-5",
           "--steps", "5", "--quiet", "-o", "fc.csv")
    report = read_json(tmp_path / "fc.report.json")
    assert report["randomness"] == "os-entropy"
    assert not any("--seed" in w for w in report["warnings"])


def test_same_seed_gives_identical_outputs(tsdp_cli, traffic, tmp_path):
    args = [traffic, *LONG, *SMALL_MODEL, "--noise-multiplier", "1.5", "--delta", "1e-5", "--steps", "30",
            "--seed", "77", "--quiet"]
    run_ok(tsdp_cli, *args, "-o", "a.csv")
    run_ok(tsdp_cli, *args, "-o", "b.csv")
    assert (tmp_path / "a.csv").read_bytes() == (tmp_path / "b.csv").read_bytes()
    custodian = ".custodian.NOT-FOR-PUBLICATION.json"
    assert (tmp_path / f"a{custodian}").read_bytes() == (tmp_path / f"b{custodian}").read_bytes()
    with np.load(tmp_path / "a.model.npz") as a, np.load(tmp_path / "b.model.npz") as b:
        np.testing.assert_array_equal(a["theta"], b["theta"])
    ra, rb = read_json(tmp_path / "a.report.json"), read_json(tmp_path / "b.report.json")
    assert ra["claim"] == rb["claim"] and ra["notes"] == rb["notes"]
    # and a different seed gives different noise
    run_ok(tsdp_cli, *args[:-3], "--seed", "78", "--quiet", "-o", "c.csv")
    assert (tmp_path / "a.csv").read_bytes() != (tmp_path / "c.csv").read_bytes()


def test_wide_layout_gives_the_same_forecasts_as_long(tsdp_cli, traffic, traffic_wide, tmp_path):
    common = [*SMALL_MODEL, "--noise-multiplier", "1.5", "--delta", "1e-5", "--steps", "20", "--seed", "5",
              "--quiet"]
    run_ok(tsdp_cli, traffic_wide, "--time-col", "time", "--layout", "wide", *common, "-o", "wide.parquet")
    run_ok(tsdp_cli, traffic, *LONG, *common, "-o", "long.parquet")
    wide = pl.read_parquet(tmp_path / "wide.parquet")
    long = pl.read_parquet(tmp_path / "long.parquet")
    assert wide.columns == ["series", "time", "mean", *LEVELS]
    assert wide["series"].unique(maintain_order=True).to_list() == [f"s{i:02d}" for i in range(1, 21)]
    assert wide["series"].to_list() == long["sensor"].to_list()
    assert wide["time"].cast(pl.String).to_list() == long["time"].cast(pl.String).to_list()
    np.testing.assert_array_equal(wide.select(["mean", *LEVELS]).to_numpy(), long.select(["mean", *LEVELS]).to_numpy())
    report = read_json(tmp_path / "wide.report.json")
    assert report["grid"]["series"] == 20 and report["claim"]["epsilon"] == read_json(
        tmp_path / "long.report.json")["claim"]["epsilon"]


@pytest.mark.parametrize("mode", ["clipped", "unclipped"])
def test_evaluate_only_prints_non_private_metrics_and_writes_nothing(tsdp_cli, traffic, tmp_path, dir_snapshot,
                                                                      monkeypatch, mode):
    from tsdp.forecast import trainer
    from tsdp.forecast.models import ForecastModel

    def forbidden(*args, **kwargs):
        raise AssertionError("--evaluate-only must train without noise")

    clipped_calls = []
    clipped_grad_sum = ForecastModel.clipped_grad_sum

    def counting(self, theta, ctx, tgt, clip, **kw):
        clipped_calls.append(clip)
        return clipped_grad_sum(self, theta, ctx, tgt, clip, **kw)

    monkeypatch.setattr(trainer, "dp_gradient", forbidden)
    monkeypatch.setattr(ForecastModel, "clipped_grad_sum", counting)
    before = dir_snapshot(tmp_path)
    result = run_ok(tsdp_cli, traffic, *LONG, *SMALL_MODEL, "--evaluate-only", mode, "--steps", "30", "--seed", "6",
                    "--clip-norm", "0.01", "--json")
    assert dir_snapshot(tmp_path) == before
    # clipped: every one of the 30 steps clips at --clip-norm (DP-SGD's step without its noise); unclipped: none
    assert clipped_calls == ([0.01] * 30 if mode == "clipped" else [])
    summary = json.loads(result.out)
    metric_keys = [k for k in summary if k.startswith(("crps", "mase"))]
    assert sorted(metric_keys) == ["crps_model_reference", "crps_seasonal_naive", "crps_seasonal_naive_1",
                                   "crps_seasonal_naive_168", "crps_seasonal_naive_24", "mase_model_reference",
                                   "mase_seasonal_naive"]
    assert summary["model"] == "linear" and summary["release_written"] is False
    assert summary["reference"] == ("clipped, without noise" if mode == "clipped" else "without clipping or noise")
    assert summary["test_origins"] == 7
    assert "not_private_diagnostic" in {w["code"] for w in summary["warnings"]}
    assert "NOT private" in result.err or "not private" in result.err or "NON-private" in result.err
    values = pl.read_parquet(traffic).sort("sensor", "time")["count"].to_numpy().reshape(20, 2000).astype(float)
    split = trainer.split_panel(values, 24, 12, 5, test_windows=7)
    naive = trainer.evaluate_seasonal_naive(split, 24)
    assert summary["crps_seasonal_naive"] == summary["crps_seasonal_naive_24"] == naive["crps"]
    assert summary["mase_seasonal_naive"] == naive["mase"]
    # the weekly naive, scored from each of the 7 origins' own past
    weekly = np.concatenate([values[:, o - 168:o - 156] for o in range(2000 - 7 * 12, 2000, 12)])
    assert summary["crps_seasonal_naive_168"] == pytest.approx(np.mean(
        [np.abs(weekly[j * 20:(j + 1) * 20] - values[:, o:o + 12]).sum() / np.abs(values[:, o:o + 12]).sum()
         for j, o in enumerate(range(2000 - 7 * 12, 2000, 12))]), rel=1e-12)


# -------------------------------------------------------------------------------------- refusals


def test_small_panel_runs(tsdp_cli, small, tmp_path):
    """The baseline of the refusals below is itself a valid run."""
    run_ok(tsdp_cli, small, *SMALL_ARGS, "-o", "fc.csv")
    fc = pl.read_csv(tmp_path / "fc.csv")
    assert fc.height == 3 * 2 and fc["id"].to_list() == ["a", "a", "b", "b", "c", "c"]
    assert fc["time"].unique().sort().to_list() == ["2024-01-03 12:00:00", "2024-01-03 13:00:00"]


def test_refuses_context_plus_horizon_longer_than_training_part(refuse, small):
    # 60 steps - 5 * (1 + 5) held out (1 test window, 5 validation windows) = 30 for training < 40 + 5
    args = [a for a in SMALL_ARGS] + ["--test-windows", "1"]
    args[args.index("--context-length") + 1] = "40"
    args[args.index("--forecast-length") + 1] = "5"
    refuse(["forecast-train", small, *args, "-o", "fc.csv"], 4, "--context-length", "--forecast-length", "45", "30")


def test_refuses_batch_larger_than_the_number_of_series(refuse, small):
    args = [a for a in SMALL_ARGS]
    args[args.index("--batch-size") + 1] = "4"
    line = refuse(["forecast-train", small, *args, "-o", "fc.csv"], 4, "--batch-size 4", "3")
    assert "only 3" in line


@pytest.mark.parametrize("cell", ["", "NaN"])
def test_refuses_missing_value_inside_a_series(refuse, tmp_path, cell):
    rows = small_rows()
    rows[9][2] = cell  # data row 10: series a at 09:00
    path = write_rows(tmp_path / "gap.csv", rows)
    line = refuse(["forecast-train", path, *SMALL_ARGS, "-o", "fc.csv"], 4, "'v'", "row 10")
    assert "--fill-missing zero" not in line  # forecast-train has no zero filling: the hint names its own policy
    assert ("--fill-missing null" in line) == (cell == "")  # an empty cell is missing; NaN is a non-finite value


def test_refuses_missing_value_in_wide_layout(refuse, tmp_path):
    lines = ["time,a,b"] + [f"{(START + timedelta(hours=t)):%Y-%m-%d %H:%M:%S},{t % 5 + 1},{'' if t == 20 else 3}"
                            for t in range(60)]
    path = tmp_path / "wide.csv"
    path.write_text("\n".join(lines) + "\n")
    args = ["--time-col", "time", "--layout", "wide", "--context-length", "4", "--forecast-length", "2",
            "--batch-size", "1", "--model", "linear", "--delta", "1e-5", "--noise-multiplier", "1",
            "--steps", "5", "--quiet"]
    line = refuse(["forecast-train", path, *args, "-o", "fc.csv"], 4, "'b'", "row 21")
    assert "--fill-missing zero" not in line and "--fill-missing null" in line  # forecast-train's own policy


@pytest.mark.parametrize("drop", ["one series", "all series"])
def test_refuses_a_missing_time_step(refuse, tmp_path, drop):
    rows = small_rows()
    stamp = "2024-01-01 05:00:00"
    rows = [r for r in rows if not (r[1] == stamp and (drop == "all series" or r[0] == "b"))]
    path = write_rows(tmp_path / "gap.csv", rows)
    line = refuse(["forecast-train", path, *SMALL_ARGS, "-o", "fc.csv"], 4, "'time'", "2024-01-01 05:00")
    assert "--fill-missing zero" not in line and "--fill-missing null" in line  # forecast-train's own policy


@pytest.mark.parametrize("args, code, needles", [
    (["--epsilon", "2"], 2, ["--epsilon", "--delta"]),
    (["--noise-multiplier", "auto", "--steps", "5"], 2, ["--noise-multiplier", "--epsilon", "--epochs"]),
    (["--time-budget", "10m", "--steps", "5"], 2, ["--time-budget", "--steps"]),
    (["--time-budget", "soon"], 2, ["--time-budget", "'soon'"]),
    (["--distribution", "negbin"], 2, ["--distribution negbin", "--model deepar", "--nonnegative"]),
    (["--noise-multiplier", "-1"], 2, ["--noise-multiplier", "-1"]),
    (["--noise-multiplier", "abc"], 2, ["--noise-multiplier", "abc"]),
    (["--noise-multiplier", "0"], 2, ["--noise-multiplier", "0"]),
    (["--clip-norm", "0"], 2, ["--clip-norm", "0"]),
    (["--epochs", "2"], 2, ["--epochs", "--steps"]),
    (["--label-noise", "0.5"], 2, ["--label-noise", "--value-bound"]),
    (["--model", "foo"], 2, ["--model", "foo"]),
    (["--epsilon", "0.001", "--delta", "1e-5"], 3, ["--epsilon 0.001"]),
    (["--sampler", "exact"], 2, ["--sampler", "'exact'"]),
])
def test_refuses_bad_options(refuse, small, args, code, needles):
    base = list(SMALL_ARGS)
    if args[0] == "--epsilon" and "--delta" not in args:  # --epsilon without --delta
        i = base.index("--delta")
        del base[i:i + 2]
    if args[:2] == ["--noise-multiplier", "auto"]:  # auto without a length to calibrate for
        i = base.index("--steps")
        del base[i:i + 2]
    if args[0] == "--noise-multiplier":
        i = base.index("--noise-multiplier")
        del base[i:i + 2]
    refuse(["forecast-train", small, *base, *args, "-o", "fc.csv"], code, *needles)


def test_refuses_noise_multiplier_auto_without_epsilon(refuse, small):
    base = list(SMALL_ARGS)
    i = base.index("--noise-multiplier")
    del base[i:i + 2]
    refuse(["forecast-train", small, *base, "--noise-multiplier", "auto", "-o", "fc.csv"], 2,
           "--noise-multiplier", "--epsilon")


@pytest.mark.parametrize("existing, needles", [
    ("fc.csv", ["fc.csv", "--force"]),
    ("fc.report.json", ["fc.report.json", "--force"]),
    ("fc.model.json", ["--model-out", "fc.model.json", "--force"]),
    ("fc.custodian.NOT-FOR-PUBLICATION.json", ["--custodian", "fc.custodian.NOT-FOR-PUBLICATION.json", "--force"]),
])
def test_refuses_to_overwrite_without_force(tsdp_cli, refuse, small, tmp_path, existing, needles):
    (tmp_path / existing).write_text("keep me\n")
    refuse(["forecast-train", small, *SMALL_ARGS, "-o", "fc.csv"], 2, *needles)
    assert (tmp_path / existing).read_text() == "keep me\n"
    run_ok(tsdp_cli, small, *SMALL_ARGS, "-o", "fc.csv", "--force")
    assert (tmp_path / existing).read_text() != "keep me\n"


def test_report_states_the_hardened_gradient_noise(tsdp_cli, small, tmp_path):
    """forecast-train draws exact discrete noise on a lattice by default (issue 17): the claim states the
    lattice, the parameter count, the rounded clip and what the lattice cost; verify's sampler check passes
    it as hardened."""
    run = run_ok(tsdp_cli, small, *[a for a in SMALL_ARGS if a != "--quiet"], "-o", "fc.csv")
    assert "--sampler float" not in run.err and "floating-point" not in run.err
    report = json.loads((tmp_path / "fc.report.json").read_text())
    params = report["claim"]["parameters"]
    assert params["sampler"] == "hardened" and "float_noise_reason" not in params
    g, c = params["granularity"], params["clip_norm"]
    assert math.frexp(g)[0] == 0.5 and 2.0 ** 28 <= params["noise_multiplier"] * c / g < 2.0 ** 29
    c_rounded = params["rounded_clip_norm"] - g * math.sqrt(params["parameters"])  # C F: the float64 sum's margin
    assert c < c_rounded < c * (1 + 1e-9)
    assert 0 < params["rounding_slack"] < 1e-12 and 0 < params["epsilon_shift"] < 1e-9
    assert "hardened" in report["claim"]["theorem"]
    verify = tsdp_cli("account", "verify", tmp_path / "fc.report.json", "--json")
    checks = {c["name"]: c for c in json.loads(verify.out)["reports"][0]["checks"]}
    assert verify.code == 0 and all(c["passed"] for c in checks.values())
    assert checks["sampler"]["detail"].startswith("exact discrete noise")


def test_float_sampler_warns_and_fails_verify(tsdp_cli, small, tmp_path):
    run = run_ok(tsdp_cli, small, *[a for a in SMALL_ARGS if a != "--quiet"], "--sampler", "float", "-o", "fc.csv")
    assert "--sampler float" in run.err
    report = json.loads((tmp_path / "fc.report.json").read_text())
    assert report["claim"]["parameters"]["sampler"] == "float"
    assert any("--sampler float" in w for w in report["warnings"])
    verify = tsdp_cli("account", "verify", tmp_path / "fc.report.json", "--json")
    checks = {c["name"]: c for c in json.loads(verify.out)["reports"][0]["checks"]}
    assert verify.code == 3 and not checks["sampler"]["passed"] and checks["privacy_loss"]["passed"]


# ------------------------------------------------------------------ training plan, counts (issue 31)

PLAN_ARGS = ["--time-col", "time", "--value-col", "v", "--series-col", "id", "--context-length", "4",
             "--forecast-length", "2", "--model", "linear", "--delta", "1e-5", "--epsilon", "2", "--quiet"]


def test_dry_run_shows_the_training_plan_with_the_default_batch(tsdp_cli, small):
    """No --batch-size on 3 series: batch 3 (min(256, N)); no length with --noise-multiplier auto: the plan's
    recommended step count, the one with the highest run signal-to-noise ratio of the batch's rows."""
    from tsdp.forecast.plan import STEP_GRID

    run = tsdp_cli("forecast-train", small, *PLAN_ARGS, "--dry-run", "--json")
    assert run.code == 0, run.err
    summary = json.loads(run.out)
    assert summary["batch_size"] == 3 and summary["batch_size_rule"] == "min(256, series x --instances)"
    plan = summary["training_plan"]
    assert {(r["batch_size"], r["steps"]) for r in plan["rows"]} == {(b, t) for b in (1, 3) for t in STEP_GRID}
    mine = [r for r in plan["rows"] if r["batch_size"] == 3]
    best = max(mine, key=lambda r: r["run_snr"])
    assert plan["recommended"] == best and summary["steps"] == best["steps"]
    assert summary["noise_multiplier"] == best["noise_multiplier"]
    assert all(r["seconds"] > 0 and r["noise_sd"] == pytest.approx(r["noise_multiplier"] * 1e-4 / r["batch_size"])
               for r in plan["rows"])


def test_time_budget_trains_the_plans_step_count_and_the_report_says_so(tsdp_cli, small, tmp_path):
    run_ok(tsdp_cli, small, *PLAN_ARGS, "--time-budget", "2h", "--seed", "2", "-o", "fc.csv")
    report = read_json(tmp_path / "fc.report.json")
    params = report["command"]["parameters"]
    plan = params["training_plan"]
    assert plan["time_budget_seconds"] == 7200.0 and plan["recommended"]["seconds"] <= 7200.0
    assert report["claim"]["parameters"]["steps"] == plan["recommended"]["steps"] == params["steps"]
    assert any("from the training plan" in n and "7200 s" in n for n in report["notes"])
    assert any("batch size 3 (the default" in n for n in report["notes"])


def test_plan_forecast_tabulates_the_training_plan_per_epsilon(tsdp_cli, small):
    at = PLAN_ARGS.index("--epsilon")
    run = tsdp_cli("plan", "forecast", small, *PLAN_ARGS[:at], *PLAN_ARGS[at + 2:], "--epsilon", "1,4", "--json")
    assert run.code == 0, run.err
    plans = json.loads(run.out)["plans"]
    assert [p["epsilon"] for p in plans] == [1, 4]
    sigma = [{(r["batch_size"], r["steps"]): r["noise_multiplier"] for r in p["training_plan"]["rows"]} for p in plans]
    assert all(sigma[0][key] > sigma[1][key] for key in sigma[0])  # a larger budget needs less noise


def test_nonnegative_forecasts_no_negative_quantile_and_refuses_negative_values(tsdp_cli, small, tmp_path, refuse):
    run_ok(tsdp_cli, small, *SMALL_ARGS, "--nonnegative", "--seed", "1", "-o", "fc.csv")
    fc = pl.read_csv(tmp_path / "fc.csv")
    assert fc.select(pl.min_horizontal(pl.all().exclude("id", "time")).min()).item() >= 0
    assert read_json(tmp_path / "fc.model.json")["model"]["nonnegative"] is True
    rows = small_rows()
    rows[7][2] = "-1"
    bad = write_rows(tmp_path / "neg.csv", rows)
    line = refuse(["forecast-train", bad, *SMALL_ARGS, "--nonnegative", "-o", "neg_fc.csv"], 4, "'v'", "-1",
                  "--nonnegative")
    assert "row 8" in line


def test_a_run_whose_length_the_plan_chose_verifies(tsdp_cli, small, tmp_path):
    """The report records the step count the plan chose (--steps was not given), so that verify can
    recompute the claim from the recorded command; an unseeded run, so that every check can pass."""
    run_ok(tsdp_cli, small, *PLAN_ARGS, "--time-budget", "3s", "-o", "fc.csv")
    report = read_json(tmp_path / "fc.report.json")
    assert report["command"]["parameters"]["steps"] == report["claim"]["parameters"]["steps"]
    verify = tsdp_cli("account", "verify", tmp_path / "fc.report.json", "--json")
    checks = {c["name"]: c for c in json.loads(verify.out)["reports"][0]["checks"]}
    assert verify.code == 0 and all(c["passed"] for c in checks.values()), checks


def test_time_budget_needs_auto_noise(refuse, small):
    refuse(["forecast-train", small, *PLAN_ARGS, "--noise-multiplier", "2", "--time-budget", "1h", "-o", "fc.csv"], 2,
           "--time-budget", "--noise-multiplier auto")

"""The Python API (tsdp.release, tsdp.mean_estimate, tsdp.account): the same results as the command
line with the same options and seed, polars and pandas frames, and tsdp's errors (never SystemExit)."""

import json
from pathlib import Path

import numpy as np
import pandas as pd
import polars as pl
import pytest

import tsdp
from tsdp.cli.app import main
from tsdp.errors import BudgetError, DataError, TsdpError, UsageError
from tsdp.io.files import serialise_table

SAMPLE = Path(__file__).resolve().parents[2] / "sample_data"
TRAFFIC = SAMPLE / "traffic_hourly.parquet"
USER = dict(unit="user", max_per_step=1, max_steps=24, series_per_user=2)


@pytest.fixture(autouse=True)
def in_tmp(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)


def cli(*args) -> None:
    assert main([str(a) for a in args] + ["--quiet", "--force"]) == 0


def cli_args(options: dict) -> list[str]:
    """Keyword arguments as command-line options (the same names, with dashes)."""
    out = []
    for key, value in options.items():
        flag = "--" + ("round" if key == "round" else key.replace("_", "-"))
        if value is True:
            out.append(flag)
        elif isinstance(value, (list, tuple)):
            out += [flag, ",".join(str(v) for v in value)]
        else:
            out += [flag, str(value)]
    return out


# ------------------------------------------------------------------------------------- release

RELEASES = {
    "long gaussian user": (TRAFFIC, dict(series_col="sensor", time_col="time", value_col="count", epsilon=1,
                                         delta=1e-6, clip_min=0, round=True, **USER)),
    "wide laplace event": (SAMPLE / "traffic_hourly_wide.csv", dict(mechanism="laplace", epsilon=0.5, unit="event")),
    "long dft": (TRAFFIC, dict(series_col="sensor", value_col="count", mechanism="dft", epsilon=1, delta=1e-6,
                               **USER)),
    "events": (SAMPLE / "events.csv", dict(user_col="user_id", time_col="timestamp", series_col="station",
                                          series_keys=["st1", "st2", "st3", "st4", "st5"], start="2024-03-04 00:00:00",
                                          end="2024-03-18 00:00:00", freq="1h", epsilon=0.5, delta=1e-6, unit="user",
                                          max_per_step=2, max_steps=24, series_per_user=1)),
}


def read(path: Path) -> pl.DataFrame:
    return pl.read_parquet(path) if path.suffix == ".parquet" else pl.read_csv(path)


@pytest.mark.parametrize("name", list(RELEASES))
def test_release_equals_the_command_line(name, tmp_path):
    source, options = RELEASES[name]
    out = tmp_path / f"cli{source.suffix}"
    cli("release", source, *cli_args(options), "--seed", 7, "-o", out)
    frame, report = tsdp.release(read(source), seed=7, **options)
    if source.suffix == ".parquet":
        assert frame.equals(pl.read_parquet(out)), name
    else:  # the bytes tsdp writes for the frame are the command line's output
        assert serialise_table(frame, "csv") == out.read_bytes(), name
    cli_report = json.loads((tmp_path / "cli.report.json").read_text())
    assert report.to_dict()["claim"] == cli_report["claim"]
    assert report.to_dict()["grid"] == cli_report["grid"]
    assert report.to_dict()["warnings"] == cli_report["warnings"]


def test_pandas_and_polars_frames_give_the_same_release():
    source, options = RELEASES["long gaussian user"]
    df = pl.read_parquet(source)
    from_polars, _ = tsdp.release(df, seed=3, **options)
    from_pandas, report = tsdp.release(df.to_pandas(), seed=3, **options)
    assert isinstance(from_pandas, pd.DataFrame) and isinstance(from_polars, pl.DataFrame)
    assert pl.from_pandas(from_pandas).equals(from_polars)
    assert report.claim.epsilon == 1.0


def test_pandas_time_index_is_the_time_column():
    df = pl.read_csv(SAMPLE / "traffic_hourly_wide.csv", try_parse_dates=True).to_pandas().set_index("time")
    frame, _ = tsdp.release(df, epsilon=1, unit="event", mechanism="laplace", seed=1)
    assert "time" in frame.columns and len(frame) == len(df)
    with pytest.raises(UsageError, match="unnamed"):
        tsdp.release(df.rename_axis(None), epsilon=1, unit="event", mechanism="laplace")


def test_release_keeps_the_inputs_counts_for_the_custodian_only():
    """The input's counts (rows dropped outside the grid) are in ``result.custodian``, never in the report."""
    events = pl.DataFrame({"user": ["u1", "u1", "u2", "u3"], "t": [0, 0, 1, 9], "s": ["a", "a", "b", "a"]})
    result = tsdp.release(events, epsilon=1.0, unit="event", delta=1e-6, layout="events", user_col="user",
                          time_col="t", series_col="s", series_keys=["a", "b"], start="0", end="4", freq="1", seed=0)
    assert result.custodian == {"diagnostics": {"rows_in": 4, "dropped_outside_grid": 1,
                                                "dropped_undeclared_series": 0, "rows_kept": 3}}
    assert "dropped" not in json.dumps(result.report.to_dict())
    wide = pl.DataFrame({"time": [0, 1, 2], "a": [1.0, 2.0, 3.0]})
    assert tsdp.release(wide, epsilon=1.0, unit="event", delta=1e-6, seed=0).custodian is None


def test_unseeded_release_written_by_the_api_verifies(capsys, tmp_path):
    result = tsdp.release(pl.read_parquet(TRAFFIC), series_col="sensor", value_col="count", epsilon=1, delta=1e-6,
                          **USER)
    assert result.report.randomness != "seeded" and result.report.output["file"] == "<in-memory>"
    written = result.write(tmp_path / "api.parquet")
    assert written.output["file"] == "api.parquet"
    assert main(["account", "verify", str(tmp_path / "api.report.json"), "--quiet"]) == 0
    with pytest.raises(UsageError, match="already exists"):
        result.write(tmp_path / "api.parquet")


def test_in_memory_report_hashes_the_frame_as_tsdp_writes_it(tmp_path):
    result = tsdp.release(pl.read_csv(SAMPLE / "traffic_hourly_wide.csv"), epsilon=1, unit="event",
                          mechanism="laplace", seed=2)
    written = result.write(tmp_path / "o.csv")
    assert written.output["sha256"] == result.report.output["sha256"]


@pytest.mark.parametrize("call, error, needle", [
    (lambda df: tsdp.release(df, epsilon=1, unit="event", mechanism="laplace", max_stesp=3), UsageError,
     "max_stesp"),
    (lambda df: tsdp.release(df, epsilon=-1, unit="event", mechanism="laplace"), UsageError, "epsilon"),
    (lambda df: tsdp.release(df, epsilon=1, unit="person", mechanism="laplace"), UsageError, "--unit 'person'"),
    (lambda df: tsdp.release(df, epsilon=1, unit="event"), UsageError, "--delta"),
    (lambda df: tsdp.release(df, epsilon=1, unit="user", mechanism="laplace", max_steps=0), UsageError,
     "--max-steps"),
    (lambda df: tsdp.release(df, epsilon=1, unit="event", mechanism="laplace", value_col="nope"), DataError, "nope"),
    (lambda df: tsdp.release(df.to_numpy(), epsilon=1, unit="event", mechanism="laplace"), UsageError, "ndarray"),
    (lambda df: tsdp.release(df, epsilon=1, unit="event", mechanism="laplace", seed=-1), UsageError, "--seed"),
    (lambda df: tsdp.release(df.with_columns(pl.lit(None).alias("s01")), epsilon=1, unit="event",
                             mechanism="laplace"), DataError, "s01"),
])
def test_bad_input_raises_tsdp_errors(call, error, needle):
    df = pl.read_csv(SAMPLE / "traffic_hourly_wide.csv")
    with pytest.raises(error) as info:
        call(df)
    assert needle in str(info.value) and isinstance(info.value, TsdpError)


# --------------------------------------------------------------------------------- mean-estimate

CELLS = [f"c{i:02d}_{j:02d}" for i in range(5) for j in range(5)]
MEAN = dict(user_col="bus_id", value_col="speed", time_col="timestamp", cell_col="cell_id", slot_length="1h",
            group_by=["cell", "slot"], epsilon_per_group_ok=True, upper=65, epsilon=1.0,
            group_keys=CELLS[:10], start="2024-05-06", end="2024-05-09", arrays=10, m_ub=5)


def test_mean_estimate_equals_the_command_line(tmp_path):
    source = SAMPLE / "itms_speeds.parquet"
    cli("mean-estimate", source, *cli_args(MEAN), "--seed", 5, "-o", tmp_path / "m.csv")
    frame, report = tsdp.mean_estimate(pl.read_parquet(source), seed=5, **MEAN)
    expected = pl.read_csv(tmp_path / "m.csv")
    assert np.array_equal(frame["estimate"].to_numpy(), expected["estimate"].to_numpy())
    assert frame.columns == expected.columns
    cli_report = json.loads((tmp_path / "m.report.json").read_text())
    assert report.to_dict()["claim"] == cli_report["claim"]


def test_mean_estimate_pandas_and_custodian_figures():
    df = pl.read_parquet(SAMPLE / "itms_speeds.parquet")
    a = tsdp.mean_estimate(df, seed=9, **MEAN)
    b = tsdp.mean_estimate(df.to_pandas(), seed=9, **MEAN)
    assert isinstance(b.frame, pd.DataFrame)
    assert np.array_equal(a.frame["estimate"].to_numpy(), b.frame["estimate"].to_numpy())
    # private participation: the records outside the declared groups, and no participation figure
    assert a.custodian == {"records_outside_declared_groups": int((~df["cell_id"].is_in(CELLS[:10])).sum())}
    assert a.frame.height == 10 * 72 and "users" not in a.frame.columns
    public = tsdp.mean_estimate(df, seed=9, **{**MEAN, "participation": "public", "arrays": None, "m_ub": None})
    assert "participation" in public.custodian and "users" in public.frame.columns
    assert "max_groups_per_user" not in json.dumps(public.report.to_dict())


def test_mean_estimate_errors():
    df = pl.read_parquet(SAMPLE / "itms_speeds.parquet")
    with pytest.raises(UsageError, match="--epsilon-per-group-ok"):
        tsdp.mean_estimate(df, **{**MEAN, "epsilon_per_group_ok": False})
    with pytest.raises(DataError, match="outside the public bounds"):
        tsdp.mean_estimate(df, **{**MEAN, "upper": 10})
    with pytest.raises(UsageError, match="--gamma"):
        tsdp.mean_estimate(df, gamma=0.1, **MEAN)


# ------------------------------------------------------------------------------------- account

SMALL = dict(series=320, length=20, context_length=1, forecast_length=1, batch_size=32, delta=1e-5)


def cli_json(capsys, *args) -> dict:
    assert main([str(a) for a in args] + ["--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_account_equals_the_command_line(capsys):
    out = tsdp.account.dpsgd(noise_multiplier=1, steps=10, unit="w-user", w=2, **SMALL)
    printed = cli_json(capsys, "account", "dpsgd", *cli_args(SMALL), "--noise-multiplier", 1, "--steps", 10,
                       "--unit", "w-user", "--w", 2)
    assert out["epsilon"] == printed["epsilon"] and out["geometry"] == printed["geometry"]
    calibrated = tsdp.account.calibrate_dpsgd(epsilon=5, steps=10, **SMALL)
    printed = cli_json(capsys, "account", "calibrate", "dpsgd", *cli_args(SMALL), "--epsilon", 5, "--steps", 10)
    assert calibrated["noise_multiplier"] == printed["noise_multiplier"]


def test_account_errors_are_tsdp_errors(tmp_path):
    with pytest.raises(UsageError, match="--unit w-user"):
        tsdp.account.dpsgd(noise_multiplier=1, steps=10, unit="user", **SMALL)
    with pytest.raises(UsageError, match="--sampling-rate"):
        tsdp.account.dpsgd(noise_multiplier=1, steps=10, sampling_rate=0.1, **SMALL)
    with pytest.raises(UsageError, match="contex_length"):
        tsdp.account.dpsgd(noise_multiplier=1, steps=10, contex_length=1, **SMALL)
    frame, report = tsdp.release(pl.read_csv(SAMPLE / "traffic_hourly_wide.csv"), epsilon=1, unit="event",
                                 mechanism="laplace", seed=1)
    path = tmp_path / "seeded.report.json"
    path.write_bytes(report.to_json())
    ((_, verification),) = tsdp.account.verify([path])
    assert not verification.passed  # a seeded run is never publishable
    assert tsdp.account.compose([path, path])["epsilon"] == pytest.approx(2.0)
    with pytest.raises(UsageError, match="delta"):
        tsdp.account.compose([path, path], delta=1.5)
    ((_, failing),) = tsdp.account.verify([path], max_epsilon=0.5)
    assert any("max-epsilon" in check.detail for check in failing.failures)
    with pytest.raises(BudgetError, match="different unit"):
        other = tmp_path / "user.report.json"
        other.write_bytes(tsdp.release(pl.read_parquet(TRAFFIC), series_col="sensor", value_col="count",
                                       epsilon=1, delta=1e-6, seed=1, **USER).report.to_json())
        tsdp.account.compose([path, other])


def test_readme_python_example_runs(tmp_path):
    """The README's Python API example runs as written, on the shipped sample data."""
    import re

    readme = (SAMPLE.parent / "README.md").read_text()
    code = re.search(r"## Python API.*?```python\n(.*?)```", readme, re.S).group(1)
    (tmp_path / "sample_data").symlink_to(SAMPLE)
    exec(compile(code, "README.md", "exec"), {})
    assert (tmp_path / "traffic_released_api.parquet").exists()
    assert (tmp_path / "traffic_released_api.report.json").exists()


# ------------------------------------------------------------------------------------- flip

QWI = SAMPLE / "qwi_quarterly.csv"
FLIP = dict(time_col="quarter", value_cols="ca_asian", aux_cols=["ca_white"], trend_order=1, filter_half_length=10,
            lip_delta=0.1)


def test_flip_filter_equals_the_command_line(tmp_path):
    cli("flip", QWI, *cli_args(FLIP), "--seed", 3, "-o", tmp_path / "f.csv")
    cli_report = json.loads((tmp_path / "f.report.json").read_text())
    for frame in (pl.read_csv(QWI), pd.read_csv(QWI)):
        result = tsdp.flip_filter(frame, seed=3, **FLIP)
        report = result.report.to_dict()
        assert type(result.frame) is type(frame)
        # the same bytes as the command line wrote, the same claim, notes, warnings and withheld dates
        assert report["output"]["sha256"] == cli_report["output"]["sha256"]
        for key in ("claim", "notes", "warnings", "lip", "grid"):
            assert report[key] == cli_report[key], key
        assert report["output"]["withheld"] == cli_report["output"]["withheld"]
        parameters = report["command"]["parameters"]
        assert parameters["input"] == "<dataframe>" and "r_params" not in parameters
        assert {k: v for k, v in parameters.items() if k not in ("input", "output")} == {
            k: v for k, v in cli_report["command"]["parameters"].items()
            if k not in ("input", "output", "secrets_written", "custodian_file")}
        custodian = json.loads((tmp_path / "f.custodian.NOT-FOR-PUBLICATION.json").read_text())
        from tsdp.report import json_ready

        figures = json_ready(result.custodian, nonfinite_as_null=True)
        assert json.loads(json.dumps(figures, default=str)) == custodian["figures"]


def test_flip_filter_errors():
    df = pl.read_csv(QWI)
    with pytest.raises(UsageError, match="--cepstral-terms"):
        tsdp.flip_filter(df, cepstral_terms=10, **FLIP)
    with pytest.raises(UsageError, match="unknown option 'epsilon'"):
        tsdp.flip_filter(df, epsilon=1.0, **FLIP)
    with pytest.raises(UsageError, match="--r-range"):
        tsdp.flip_filter(df, r_range="1", **FLIP)
    with pytest.raises(DataError):
        tsdp.flip_filter(df, **{**FLIP, "value_cols": "nope"})


# ------------------------------------------------------------------------------------- forecast-train

FORECAST = dict(series_col="sensor", time_col="time", value_col="count", context_length=24, forecast_length=6,
                model="linear", batch_size=4, noise_multiplier="1.5", epsilon=8, delta=1e-5, steps=20)


def small_traffic() -> pl.DataFrame:
    traffic = pl.read_parquet(TRAFFIC)
    sensors = sorted(traffic["sensor"].unique().to_list())[:6]
    hours = sorted(traffic["time"].unique().to_list())[:240]
    return traffic.filter(pl.col("sensor").is_in(sensors) & pl.col("time").is_in(hours)).sort("sensor", "time")


def test_forecast_train_equals_the_command_line(tmp_path):
    df = small_traffic()
    df.write_parquet(tmp_path / "t.parquet")
    cli("forecast-train", tmp_path / "t.parquet", *cli_args(FORECAST), "--seed", 4, "-o", tmp_path / "f.csv")
    cli_report = json.loads((tmp_path / "f.report.json").read_text())
    result = tsdp.forecast_train(df, seed=4, **FORECAST)
    report = result.report.to_dict()
    # the same forecasts (bytes), claim, notes, warnings, grid and accuracy as the command line
    assert report["output"]["sha256"] == cli_report["output"]["sha256"]
    for key in ("claim", "notes", "warnings", "grid", "accuracy"):
        assert report[key] == cli_report[key], key
    parameters = report["command"]["parameters"]
    assert parameters["input"] == "<dataframe>" and parameters["training"] == cli_report["command"]["parameters"][
        "training"]
    assert "model_files" not in parameters
    custodian = json.loads((tmp_path / "f.custodian.NOT-FOR-PUBLICATION.json").read_text())
    from tsdp.report import json_ready

    assert json.loads(json.dumps(json_ready(result.custodian, nonfinite_as_null=True))) == custodian["figures"]
    assert result.model.weights() == (tmp_path / "f.model.npz").read_bytes()
    pandas = tsdp.forecast_train(df.to_pandas(), seed=4, **FORECAST)
    assert isinstance(pandas.frame, pd.DataFrame)
    assert np.array_equal(pandas.frame["mean"].to_numpy(), result.frame["mean"].to_numpy())


def test_forecast_train_errors():
    df = small_traffic()
    with pytest.raises(UsageError, match="--lags is an option of --model deepar"):
        tsdp.forecast_train(df, lags="1-3", **FORECAST)
    with pytest.raises(UsageError, match="unknown option 'epsilons'"):
        tsdp.forecast_train(df, epsilons=1, **FORECAST)
    with pytest.raises(UsageError, match="--min-scale"):
        tsdp.forecast_train(df, min_scale=0, **FORECAST)
    with pytest.raises(DataError):
        tsdp.forecast_train(df, **{**FORECAST, "value_col": "nope"})

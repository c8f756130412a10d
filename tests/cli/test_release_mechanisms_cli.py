"""`tsdp release` with the time-series mechanisms, and the --evaluate diagnostic."""

import json

import numpy as np
import polars as pl
import pytest

from tsdp.cli.app import main

WIDE = "sample_data/traffic_hourly_wide.csv"


def test_dft_release_keeps_layout_and_is_smooth(tmp_path, repo_root):
    out = tmp_path / "dft.csv"
    assert main(["release", str(repo_root / WIDE), "--mechanism", "dft", "--dft-k", "50", "--epsilon", "1",
                 "--delta", "1e-6", "--unit", "event", "-o", str(out), "--seed", "3", "--quiet"]) == 0
    released = pl.read_csv(out)
    source = pl.read_csv(repo_root / WIDE)
    assert released.columns == source.columns and released.height == source.height
    spectrum = np.fft.rfft(released.drop("time").to_numpy().T, axis=1, norm="ortho")
    assert np.allclose(spectrum[:, 50:], 0, atol=1e-8)
    report = json.loads((tmp_path / "dft.report.json").read_text())
    assert report["claim"]["mechanism"] == "dft" and report["claim"]["parameters"]["k"] == 50


def test_dft_laplace_is_pure_and_refuses_delta(capsys, tmp_path, repo_root):
    args = ["release", str(repo_root / WIDE), "--mechanism", "dft", "--noise", "laplace", "--epsilon", "1",
            "--unit", "event", "-o", str(tmp_path / "l.csv"), "--quiet"]
    assert main(args) == 0
    assert json.loads((tmp_path / "l.report.json").read_text())["claim"]["definition"] == "pure-dp"
    assert main([*args, "--delta", "1e-6", "--force"]) == 2
    assert "--delta does not apply" in capsys.readouterr().err


def test_dft_k_out_of_range_is_a_usage_error(capsys, tmp_path, repo_root):
    code = main(["release", str(repo_root / WIDE), "--mechanism", "dft", "--dft-k", "5000", "--epsilon", "1",
                 "--delta", "1e-6", "--unit", "event", "-o", str(tmp_path / "x.csv")])
    err = capsys.readouterr().err
    assert code == 2 and "--dft-k" in err and "5000" in err
    assert not (tmp_path / "x.csv").exists()


@pytest.mark.parametrize("mechanism", ["gaussian", "laplace", "dft"])
def test_evaluate_writes_nothing_and_reports_errors(capsys, tmp_path, repo_root, mechanism, monkeypatch):
    monkeypatch.chdir(tmp_path)
    extra = [] if mechanism == "laplace" else ["--delta", "1e-6"]
    code = main(["release", str(repo_root / WIDE), "--mechanism", mechanism, "--epsilon", "1", *extra,
                 "--unit", "event", "--evaluate", "4", "--json"])
    captured = capsys.readouterr()
    assert code == 0 and list(tmp_path.iterdir()) == []
    out = json.loads(captured.out)
    assert out["runs"] == 4 and out["mae"]["mean"] > 0 and out["mae"]["min"] <= out["mae"]["max"]
    assert "NOT private" in captured.err


def test_evaluate_gaussian_mae_matches_sigma(capsys, repo_root):
    """For the Gaussian baseline MAE concentrates at sigma sqrt(2/pi) (Koga spec 5.2 item 3)."""
    assert main(["release", str(repo_root / WIDE), "--epsilon", "1", "--delta", "1e-6", "--unit", "user",
                 "--max-steps", "24", "--evaluate", "3", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    from tsdp.accounting.gaussian import analytic_sigma

    sigma = analytic_sigma(1.0, 1e-6, np.sqrt(24 * 20))
    cells = 20 * 2000
    # each run's MAE is a mean of 40,000 |N(0, sigma^2)|: sd sigma sqrt(1 - 2/pi) / sqrt(cells)
    tolerance = 5 * sigma * np.sqrt(1 - 2 / np.pi) / np.sqrt(cells)
    assert abs(out["mae"]["mean"] - sigma * np.sqrt(2 / np.pi)) <= tolerance


def test_fast_release_laplace_by_default(tmp_path, repo_root):
    out = tmp_path / "fast.parquet"
    assert main(["release", str(repo_root / "sample_data/traffic_hourly.parquet"), "--value-col", "count",
                 "--series-col", "sensor", "--mechanism", "fast", "--epsilon", "1", "--unit", "user",
                 "--max-steps", "2000", "--series-per-user", "1", "-o", str(out), "--seed", "2", "--quiet"]) == 0
    report = json.loads((tmp_path / "fast.report.json").read_text())
    claim = report["claim"]
    assert claim["definition"] == "pure-dp" and "Fan and Xiong" in claim["theorem"]
    event = claim["events"][0]
    assert event["kind"] == "laplace" and event["noise"] == event["count"] * 1.0 / 1.0  # scale M / epsilon
    assert pl.read_parquet(out).height == 40_000


def test_fast_gaussian_needs_delta_and_fast_options_need_fast(capsys, tmp_path, repo_root):
    base = ["release", str(repo_root / WIDE), "--epsilon", "1", "--unit", "user", "--max-steps", "24",
            "-o", str(tmp_path / "x.csv")]
    assert main([*base, "--mechanism", "fast", "--noise", "gaussian"]) == 2
    assert "--delta is required" in capsys.readouterr().err
    assert main([*base, "--delta", "1e-6", "--fast-xi", "5"]) == 2
    assert "--fast-xi applies only to --mechanism fast" in capsys.readouterr().err
    assert main([*base, "--mechanism", "fast", "--fast-gains", "0.5,0.2,0.1"]) == 2
    assert "--fast-gains" in capsys.readouterr().err
    assert main([*base, "--mechanism", "laplace", "--noise", "laplace"]) == 2
    assert "--noise applies to" in capsys.readouterr().err
    assert not (tmp_path / "x.csv").exists()

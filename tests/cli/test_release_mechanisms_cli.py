"""`tsdp release` with the time-series mechanisms, and the --evaluate diagnostic."""

import json
import math

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


CUSTODIAN = "traffic_hourly_wide.evaluate.custodian.NOT-FOR-PUBLICATION.json"


@pytest.mark.parametrize("mechanism", ["gaussian", "laplace", "dft"])
def test_evaluate_writes_no_release_and_reports_errors(capsys, tmp_path, repo_root, mechanism, monkeypatch):
    monkeypatch.chdir(tmp_path)
    extra = [] if mechanism == "laplace" else ["--delta", "1e-6"]
    code = main(["release", str(repo_root / WIDE), "--mechanism", mechanism, "--epsilon", "1", *extra,
                 "--unit", "event", "--evaluate", "4", "--json"])
    captured = capsys.readouterr()
    assert code == 0 and [p.name for p in tmp_path.iterdir()] == [CUSTODIAN]  # its figures, no release
    out = json.loads(captured.out)
    assert out["runs"] == 4 and out["custodian"] == CUSTODIAN and "mae" not in out  # no private figure on stdout
    total = json.loads((tmp_path / CUSTODIAN).read_text())["figures"]["evaluation"]["error"]["total"]
    assert total["mae"]["mean"] > 0 and total["mae"]["min"] <= total["mae"]["max"]
    assert "NOT private" in captured.err


def test_evaluate_gaussian_mae_matches_sigma(capsys, repo_root):
    """For the Gaussian baseline MAE concentrates at sigma sqrt(2/pi) (Koga spec 5.2 item 3)."""
    assert main(["release", str(repo_root / WIDE), "--epsilon", "1", "--delta", "1e-6", "--unit", "user",
                 "--max-steps", "24", "--evaluate", "3", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    mae = json.loads(open(out["custodian"]).read())["figures"]["evaluation"]["error"]["total"]["mae"]
    from tsdp.accounting.gaussian import analytic_sigma

    sigma = analytic_sigma(1.0, 1e-6, np.sqrt(24 * 20))
    cells = 20 * 2000
    # each run's MAE is a mean of 40,000 |N(0, sigma^2)|: sd sigma sqrt(1 - 2/pi) / sqrt(cells)
    tolerance = 5 * sigma * np.sqrt(1 - 2 / np.pi) / np.sqrt(cells)
    assert abs(mae["mean"] - sigma * np.sqrt(2 / np.pi)) <= tolerance


def test_fast_release_laplace_by_default(tmp_path, repo_root):
    out = tmp_path / "fast.parquet"
    assert main(["release", str(repo_root / "sample_data/traffic_hourly.parquet"), "--value-col", "count",
                 "--series-col", "sensor", "--mechanism", "fast", "--epsilon", "1", "--unit", "user",
                 "--max-steps", "2000", "--series-per-user", "1", "-o", str(out), "--seed", "2", "--quiet"]) == 0
    report = json.loads((tmp_path / "fast.report.json").read_text())
    claim = report["claim"]
    assert claim["definition"] == "pure-dp" and "Fan and Xiong" in claim["theorem"]
    event = claim["events"][0]
    # hardened by default: each sample rounded to multiples of g moves by at most (floor(M/g) + 1) g
    g = claim["parameters"]["granularity"]
    step = (math.floor(1.0 / g) + 1) * g
    assert claim["parameters"]["sampler"] == "hardened" and event["granularity"] == g
    assert event["kind"] == "discrete-laplace" and event["sensitivity"] == step
    assert event["noise"] == event["count"] * step / 1.0  # scale = count x step / epsilon
    assert pl.read_parquet(out).height == 40_000


def test_fast_release_float_sampler_warns_and_keeps_the_closed_form(capsys, tmp_path, repo_root):
    out = tmp_path / "fast.parquet"
    assert main(["release", str(repo_root / "sample_data/traffic_hourly.parquet"), "--value-col", "count",
                 "--series-col", "sensor", "--mechanism", "fast", "--epsilon", "1", "--unit", "user",
                 "--max-steps", "2000", "--series-per-user", "1", "-o", str(out), "--seed", "2",
                 "--sampler", "float"]) == 0
    assert "--sampler float" in capsys.readouterr().err
    report = json.loads((tmp_path / "fast.report.json").read_text())
    event = report["claim"]["events"][0]
    assert event["kind"] == "laplace" and event["noise"] == event["count"] * 1.0 / 1.0  # scale M / epsilon
    assert any("--sampler float" in w for w in report["warnings"])


EVENTS = ["sample_data/events.csv", "--layout", "events", "--user-col", "user_id", "--time-col", "timestamp",
          "--series-col", "station", "--series-keys", "st1,st2,st3,st4,st5", "--start", "2024-03-04 00:00:00",
          "--end", "2024-03-18 00:00:00", "--freq", "1h"]


@pytest.mark.parametrize("source", ["events", "long"])
def test_fast_claims_exactly_the_declared_event_unit(tmp_path, repo_root, source):
    """Audit regression (issue 11, item 2): `--mechanism fast --unit event` used to report 'add or remove
    one user ... enforced: true' with no per-user cap enforced (users in the bundled events have up to
    10 events in one station-hour; empirical epsilon >= 3.38 for a claimed 1). The claim must be for one
    event, and on pre-aggregated input it must not say the bounds were enforced."""
    if source == "events":
        args = [str(repo_root / EVENTS[0]), *EVENTS[1:]]
    else:
        args = [str(repo_root / "sample_data/traffic_hourly.parquet"), "--value-col", "count", "--series-col", "sensor"]
    out = tmp_path / "fast.csv"
    assert main(["release", *args, "--mechanism", "fast", "--epsilon", "1", "--unit", "event",
                 "-o", str(out), "--quiet"]) == 0
    claim = json.loads((tmp_path / "fast.report.json").read_text())["claim"]
    unit = claim["unit"]
    assert unit["level"] == "event" and unit["max_steps"] is None and "user" not in unit["neighbouring"]
    assert unit["neighbouring"] == "add or remove one event"
    assert unit["enforced"] is (source == "events")
    # one event changes one cell by 1, and at most one sample can fall on it: discrete Laplace of
    # scale (floor(1/g) + 1) g / epsilon once the sample is rounded to the granularity g
    g = claim["parameters"]["granularity"]
    step = (math.floor(1.0 / g) + 1) * g
    assert claim["parameters"]["samples_per_unit"] == 1 and claim["parameters"]["scale"] == step
    event = claim["events"][0]
    assert (event["kind"], event["sensitivity"], event["count"]) == ("discrete-laplace", step, 1)


def test_fast_user_level_on_events_enforces_and_covers_the_caps(tmp_path, repo_root):
    """A user-level FAST release on events: the caps are enforced and the noise covers min(M, I) samples in
    each of the K series a user may touch, each of sensitivity M_per_step."""
    out = tmp_path / "fast.csv"
    assert main(["release", str(repo_root / EVENTS[0]), *EVENTS[1:], "--mechanism", "fast", "--epsilon", "1",
                 "--unit", "user", "--max-per-step", "2", "--max-steps", "3", "--series-per-user", "1",
                 "-o", str(out), "--quiet"]) == 0
    claim = json.loads((tmp_path / "fast.report.json").read_text())["claim"]
    assert claim["unit"]["level"] == "user" and claim["unit"]["enforced"] is True
    assert claim["unit"]["max_steps"] == 3 and claim["unit"]["series_per_unit"] == 1
    assert claim["parameters"]["samples_per_unit"] == 3 and claim["parameters"]["scale"] == pytest.approx(2 * 3 / 1)


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


TRAFFIC = "sample_data/traffic_hourly.parquet"


def koga_args(repo_root, tmp_path, name, *extra):
    return ["release", str(repo_root / TRAFFIC), "--value-col", "count", "--series-col", "sensor",
            "--epsilon", "0.5", "--delta", "1e-4", "--unit", "user", "--max-steps", "180",
            "--series-per-user", "1", "-o", str(tmp_path / f"{name}.parquet"), "--quiet", *extra]


def test_subsample_exact_needs_at_most_half_the_papers_noise_and_verifies(tmp_path, repo_root):
    assert main(koga_args(repo_root, tmp_path, "exact", "--mechanism", "subsample")) == 0
    assert main(koga_args(repo_root, tmp_path, "paper", "--mechanism", "subsample", "--accounting", "paper")) == 0
    exact = json.loads((tmp_path / "exact.report.json").read_text())["claim"]
    paper = json.loads((tmp_path / "paper.report.json").read_text())["claim"]
    assert exact["events"][0]["kind"] == "discrete-gaussian-mixture" and not paper["events"]
    assert exact["parameters"]["sampler"] == paper["parameters"]["sampler"] == "hardened"
    assert exact["parameters"]["sigma"] <= 0.5 * paper["parameters"]["sigma"]
    # the exact claim is rechecked from its event, and composes tightly with another release
    assert main(["account", "verify", str(tmp_path / "exact.report.json"), "--max-epsilon", "0.5",
                 "--released", str(tmp_path / "exact.parquet"), "--quiet"]) == 0
    assert main(["account", "compose", str(tmp_path / "exact.report.json"),
                 str(tmp_path / "exact.report.json"), "--quiet"]) == 0


def test_filter_subsample_with_custom_kernel_file(tmp_path, repo_root):
    (tmp_path / "taps.txt").write_text("0.25\n0.5\n0.25\n")
    assert main(koga_args(repo_root, tmp_path, "f", "--mechanism", "filter-subsample", "--filter", "custom",
                          "--filter-kernel", str(tmp_path / "taps.txt"))) == 0
    claim = json.loads((tmp_path / "f.report.json").read_text())["claim"]
    assert claim["mechanism"] == "filter-subsample" and claim["events"][0]["kind"] == "discrete-gaussian"
    assert main(["account", "verify", str(tmp_path / "f.report.json"), "--released", str(tmp_path / "f.parquet"),
                 "--quiet"]) == 0
    assert pl.read_parquet(tmp_path / "f.parquet").height == 40_000


@pytest.mark.parametrize("extra,needle", [
    (["--mechanism", "subsample", "--sampling-rate", "0"], "--sampling-rate"),
    (["--mechanism", "subsample", "--filter", "boxcar"], "--filter"),
    (["--mechanism", "gaussian", "--accounting", "paper"], "--accounting"),
    (["--mechanism", "filter-subsample", "--filter", "custom"], "--filter-kernel"),
    (["--mechanism", "filter-subsample", "--filter-alpha", "0.7"], "--filter-alpha"),
    (["--mechanism", "subsample", "--accounting", "paper", "--delta-split", "1.5"], "split"),
])
def test_subsampling_option_errors(capsys, tmp_path, repo_root, extra, needle):
    assert main(koga_args(repo_root, tmp_path, "bad", *extra)) == 2
    err = capsys.readouterr().err
    assert err.startswith("error:") and needle in err
    assert not (tmp_path / "bad.parquet").exists()


def test_assume_none_sets_i_to_t(tmp_path, repo_root):
    args = koga_args(repo_root, tmp_path, "none", "--mechanism", "subsample")
    i = args.index("--max-steps")
    del args[i:i + 2]
    assert main([*args, "--assume-none"]) == 0
    unit = json.loads((tmp_path / "none.report.json").read_text())["claim"]["unit"]
    assert unit["max_steps"] == 2000


def test_granularity_option_reaches_every_hardened_mechanism(capsys, tmp_path, repo_root):
    base = ["release", str(repo_root / WIDE), "--epsilon", "1", "--unit", "event", "--quiet"]
    out = tmp_path / "d.csv"
    assert main([*base, "--mechanism", "dft", "--delta", "1e-6", "--granularity", "0.0009765625", "-o", str(out)]) == 0
    params = json.loads((tmp_path / "d.report.json").read_text())["claim"]["parameters"]
    assert params["granularity"] == 2.0 ** -10 and params["sampler"] == "hardened"
    assert main([*base, "--mechanism", "fast", "--granularity", "0.125", "-o", str(tmp_path / "f.csv")]) == 0
    assert json.loads((tmp_path / "f.report.json").read_text())["claim"]["parameters"]["granularity"] == 0.125
    for mechanism in ("subsample", "filter-subsample"):
        assert main([*base, "--mechanism", mechanism, "--delta", "1e-2", "--granularity", "0.0009765625",
                     "-o", str(tmp_path / f"{mechanism}.csv")]) == 0
        params = json.loads((tmp_path / f"{mechanism}.report.json").read_text())["claim"]["parameters"]
        assert params["granularity"] == 2.0 ** -10 and params["sampler"] == "hardened"
    code = main([*base, "--mechanism", "subsample", "--delta", "1e-6", "--sampler", "float", "--granularity",
                 "0.125", "-o", str(tmp_path / "s.csv")])
    assert code == 2 and "--granularity" in capsys.readouterr().err and not (tmp_path / "s.csv").exists()
    code = main([*base, "--mechanism", "fast", "--granularity", "0.3", "-o", str(tmp_path / "g.csv")])
    err = capsys.readouterr().err
    assert code == 2 and "--granularity" in err and "0.3" in err


def test_release_alpha_is_the_accuracy_level_and_filter_alpha_kogas(tmp_path, repo_root, capsys):
    """--alpha sets the accuracy level in release as in every command; with filter-subsample's paper
    accounting and no --filter-alpha, an explicit --alpha (Koga et al.'s parameter before) warns."""
    args = [a for a in koga_args(repo_root, tmp_path, "fa", "--mechanism", "filter-subsample", "--accounting",
                                 "paper", "--alpha", "0.1") if a != "--quiet"]
    assert main(args) == 0
    err = capsys.readouterr().err
    assert "--alpha 0.1 is the accuracy level" in err and "--filter-alpha" in err
    report = json.loads((tmp_path / "fa.report.json").read_text())
    assert report["accuracy"]["alpha"] == 0.1
    assert main(["release", str(repo_root / TRAFFIC), "--value-col", "count", "--series-col", "sensor",
                 "--epsilon", "0.5", "--delta", "1e-4", "--unit", "event", "--alpha", "1.5",
                 "-o", str(tmp_path / "x.csv")]) == 2
    assert "--alpha must be in (0, 1)" in capsys.readouterr().err


@pytest.mark.parametrize("mechanism", ["subsample", "filter-subsample"])
def test_subsampling_mechanisms_are_hardened_by_default_and_float_only_on_request(capsys, tmp_path, repo_root,
                                                                                  mechanism):
    """The subsampling mechanisms draw exact discrete noise by default (issue 17), the report names the sampler,
    the lattice and the theorem, and verify accepts it; --sampler float warns, and verify refuses to pass it."""
    base = ["release", str(repo_root / WIDE), "--epsilon", "1", "--delta", "1e-6", "--unit", "event",
            "--mechanism", mechanism]
    assert main([*base, "-o", str(tmp_path / "h.csv")]) == 0
    err = capsys.readouterr().err
    assert "no hardened sampler" not in err and "--sampler float" not in err
    claim = json.loads((tmp_path / "h.report.json").read_text())["claim"]
    params = claim["parameters"]
    assert params["sampler"] == "hardened" and math.frexp(params["granularity"])[0] == 0.5
    assert "float_noise_reason" not in params and "Canonne, Kamath and Steinke" in claim["theorem"]
    assert main(["account", "verify", str(tmp_path / "h.report.json"), "--released", str(tmp_path / "h.csv"),
                 "--quiet"]) == 0
    assert main([*base, "--sampler", "float", "-o", str(tmp_path / "f.csv")]) == 0
    assert "--sampler float" in capsys.readouterr().err
    assert json.loads((tmp_path / "f.report.json").read_text())["claim"]["parameters"]["sampler"] == "float"
    assert main(["account", "verify", str(tmp_path / "f.report.json"), "--quiet"]) == 3

"""End-to-end tests of `tsdp account`: dpsgd, calibrate, compose and verify."""

import json
import math

import pytest

from tsdp.cli.app import main

TRAFFIC = ["--series", "862", "--length", "14000", "--context-length", "192", "--forecast-length", "24",
           "--batch-size", "128", "--delta", "1e-7"]
SMALL = ["--series", "320", "--length", "20", "--context-length", "1", "--forecast-length", "1", "--batch-size", "32",
         "--delta", "1e-5"]


def run_json(capsys, *args):
    code = main([*args, "--json"])
    captured = capsys.readouterr()
    return code, (json.loads(captured.out) if code == 0 else None), captured.err


def test_dpsgd_traffic_setting(capsys):
    code, out, _ = run_json(capsys, "account", "dpsgd", *TRAFFIC, "--noise-multiplier", "2", "--steps", "1000")
    assert code == 0
    assert out["epsilon"] == pytest.approx(0.6186, rel=0.005)
    assert "Theorem 4.4" in out["theorem"] and out["is_privacy_guarantee"] is True
    assert out["geometry"]["windows_per_series"] == 13977 and out["geometry"]["k"] == 216


def test_lower_bound_is_labelled_and_never_a_guarantee(capsys):
    code, out, _ = run_json(capsys, "account", "dpsgd", *SMALL, "--noise-multiplier", "1", "--steps", "10",
                            "--instances", "2", "--bound", "lower")
    assert code == 0
    assert out["is_privacy_guarantee"] is False
    assert "epsilon" not in out and "epsilon_lower_bound" in out
    assert "lower_bound" in {w["code"] for w in out["warnings"]}
    code, upper, _ = run_json(capsys, "account", "dpsgd", *SMALL, "--noise-multiplier", "1", "--steps", "10",
                              "--instances", "2")
    lower_eps = out["epsilon_lower_bound"]
    assert lower_eps <= upper["epsilon"] and "F.1" in upper["theorem"]


def test_checkpoints_are_monotone(capsys):
    code, out, _ = run_json(capsys, "account", "dpsgd", *SMALL, "--noise-multiplier", "1", "--steps", "200",
                            "--checkpoints", "5")
    eps = [c["epsilon"] for c in sorted(out["checkpoints"], key=lambda c: c["compositions"])]
    assert len(eps) == 5 and eps == sorted(eps) and eps[-1] == out["epsilon"]


def test_epochs_for_iteration_compose_per_epoch(capsys):
    _, out, _ = run_json(capsys, "account", "dpsgd", *SMALL, "--noise-multiplier", "1", "--epochs", "3",
                         "--top", "shuffle")
    assert out["compositions"] == 3 and "Theorem 4.2" in out["theorem"]
    _, wor, _ = run_json(capsys, "account", "dpsgd", *SMALL, "--noise-multiplier", "1", "--epochs", "3")
    assert wor["compositions"] == 30  # floor(320 / 32) steps per epoch


def test_calibrate_noise_and_steps(capsys):
    code, out, _ = run_json(capsys, "account", "calibrate", "dpsgd", *SMALL, "--epsilon", "2",
                            "--steps", "100")
    assert code == 0 and out["epsilon"] <= 2.0
    sigma = out["noise_multiplier"]
    _, check, _ = run_json(capsys, "account", "dpsgd", *SMALL, "--noise-multiplier", str(sigma * 0.995),
                           "--steps", "100")
    assert check["epsilon"] > 2.0  # calibrated to within 0.5%, on the safe side
    code, out, _ = run_json(capsys, "account", "calibrate", "dpsgd", *SMALL, "--epsilon", "5",
                            "--noise-multiplier", "1")
    k = out["steps"]
    assert k > 1
    _, at_k, _ = run_json(capsys, "account", "dpsgd", *SMALL, "--noise-multiplier", "1", "--steps", str(k))
    _, past_k, _ = run_json(capsys, "account", "dpsgd", *SMALL, "--noise-multiplier", "1", "--steps", str(k + 1))
    assert at_k["epsilon"] <= 5.0 < past_k["epsilon"]


@pytest.mark.parametrize("args,needle", [
    (["--series", "10", "--length", "50", "--context-length", "60", "--forecast-length", "5", "--batch-size", "4"], "--context-length"),
    (["--series", "10", "--length", "50", "--context-length", "5", "--forecast-length", "5", "--batch-size", "40"], "--batch-size"),
    (["--series", "10", "--length", "50", "--context-length", "5", "--forecast-length", "5", "--batch-size", "5",
      "--instances", "2"], "--instances"),
    (["--series", "10", "--length", "50", "--context-length", "5", "--forecast-length", "5", "--batch-size", "4",
      "--label-noise", "1", "--value-bound", "1", "--w", "2"], "--w"),
    (["--series", "10", "--length", "50", "--context-length", "5", "--forecast-length", "5", "--batch-size", "4",
      "--label-noise", "1"], "--value-bound"),
])
def test_bad_arguments_are_usage_errors(capsys, args, needle):
    code = main(["account", "dpsgd", *args, "--noise-multiplier", "1", "--steps", "5", "--delta", "1e-5"])
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("error:") and needle in err and "Traceback" not in err


@pytest.mark.parametrize("extra", [["--noise-multiplier", "0"], ["--noise-multiplier", "-1"],
                                   ["--noise-multiplier", "1", "--epochs", "2"], ["--noise-multiplier", "1", "--delta", "1"]])
def test_bad_noise_steps_delta(capsys, extra):
    args = ["account", "dpsgd", *SMALL, "--steps", "5", *extra]
    assert main(args) == 2
    assert capsys.readouterr().err.startswith("error:")


@pytest.mark.parametrize("sigma,delta", [(0.3, 1e-15), (0.2, 1e-10), (5.0, 1e-15)])
def test_extreme_budgets_answer_or_exit_5(capsys, sigma, delta):
    code = main(["account", "dpsgd", *SMALL[:-2], "--delta", str(delta), "--noise-multiplier", str(sigma),
                 "--steps", "50", "--json"])
    captured = capsys.readouterr()
    assert code in (0, 5), captured.err
    if code == 0:
        eps = json.loads(captured.out)["epsilon"]
        assert math.isfinite(eps) and eps >= 0
    else:
        assert captured.err.startswith("error:") and ("--discretization" in captured.err or "--delta" in captured.err)


@pytest.fixture
def reports(tmp_path, repo_root):
    out = {}
    common = [str(repo_root / "sample_data/traffic_hourly.parquet"), "--value-col", "count", "--series-col",
              "sensor", "--unit", "user", "--max-steps", "24", "--quiet"]
    for name, extra in {"g1": ["--epsilon", "0.5", "--delta", "1e-6"], "g2": ["--epsilon", "0.5", "--delta", "1e-6"],
                        "lap": ["--mechanism", "laplace", "--epsilon", "0.3"]}.items():
        path = tmp_path / f"{name}.parquet"
        assert main(["release", *common, *extra, "-o", str(path)]) == 0
        out[name] = (tmp_path / f"{name}.report.json", path)
    return out


def test_compose_is_tighter_than_basic(capsys, reports):
    code, out, _ = run_json(capsys, "account", "compose", str(reports["g1"][0]), str(reports["g2"][0]),
                            str(reports["lap"][0]))
    assert code == 0 and out["delta"] == pytest.approx(2e-6)
    assert out["basic_composition_epsilon"] == pytest.approx(1.3)
    assert out["epsilon"] < 1.3 and "PLD" in out["method"]


def test_compose_falls_back_to_basic_without_events(capsys, reports, tmp_path, repo_root):
    """A mechanism that emits no events (the Laplace DFT) composes by basic composition."""
    out = tmp_path / "dft.parquet"
    assert main(["release", str(repo_root / "sample_data/traffic_hourly.parquet"), "--value-col", "count",
                 "--series-col", "sensor", "--unit", "user", "--max-steps", "24", "--mechanism", "dft",
                 "--noise", "laplace", "--epsilon", "0.5", "-o", str(out), "--quiet"]) == 0
    code, out, _ = run_json(capsys, "account", "compose", str(tmp_path / "dft.report.json"), str(reports["g2"][0]))
    assert code == 0 and out["epsilon"] == pytest.approx(1.0) and "basic" in out["method"]


def test_compose_refuses_a_report_whose_events_were_removed(capsys, reports, tmp_path):
    """Emptying a Gaussian claim's events used to fall back to basic composition; such a claim no
    longer verifies (its mechanism must carry them), so compose refuses it (exit 3)."""
    data = json.loads(reports["g1"][0].read_text())
    data["claim"]["events"] = []
    bare = tmp_path / "bare.json"
    bare.write_text(json.dumps(data))
    assert main(["account", "compose", str(bare), str(reports["g2"][0])]) == 3
    err = capsys.readouterr().err
    assert err.startswith("error:") and "does not verify" in err and "events" in err


def test_compose_refuses_lip_and_lower_bounds(capsys, reports, tmp_path):
    data = json.loads(reports["g1"][0].read_text())
    data["claim"]["bound"] = "lower"
    low = tmp_path / "low.json"
    low.write_text(json.dumps(data))
    assert main(["account", "compose", str(low), str(reports["g2"][0])]) == 2
    assert "lower bound" in capsys.readouterr().err


def test_verify_passes_and_fails(capsys, reports, tmp_path):
    report, output = reports["g1"]
    # seeded runs may not be published; these fixtures are not seeded
    assert main(["account", "verify", str(report), "--max-epsilon", "0.5", "--max-delta", "1e-6",
                 "--released", str(output), "--quiet"]) == 0
    assert main(["account", "verify", str(report), "--max-epsilon", "0.4", "--quiet"]) == 3
    assert "exceeds --max-epsilon" in capsys.readouterr().err
    assert main(["account", "verify", str(report), "--released", str(reports["g2"][1]), "--quiet"]) == 3
    assert "sha256" in capsys.readouterr().err
    tampered = json.loads(report.read_text())
    tampered["claim"]["epsilon"] = 0.1  # claims more privacy than its noise gives
    fake = tmp_path / "fake.json"
    fake.write_text(json.dumps(tampered))
    assert main(["account", "verify", str(fake), "--quiet"]) == 3
    capsys.readouterr()
    assert main(["account", "verify", str(fake), "--json"]) == 3
    checks = json.loads(capsys.readouterr().out)["reports"][0]["checks"]
    # the recomputed loss refutes it (and the stated rounding slack, which depends on epsilon, no longer matches)
    assert {c["name"] for c in checks if not c["passed"]} >= {"privacy_loss", "parameters"}
    (tmp_path / "junk.json").write_text("{not json")
    assert main(["account", "verify", str(tmp_path / "junk.json")]) == 4
    broken = dict(tampered)
    broken.pop("output")
    (tmp_path / "broken.json").write_text(json.dumps(broken))
    assert main(["account", "verify", str(tmp_path / "broken.json")]) == 4


def test_verify_fails_seeded_release(capsys, tmp_path, repo_root):
    out = tmp_path / "s.parquet"
    assert main(["release", str(repo_root / "sample_data/traffic_hourly.parquet"), "--value-col", "count",
                 "--series-col", "sensor", "--unit", "event", "--epsilon", "1", "--delta", "1e-6",
                 "--seed", "1", "-o", str(out), "--quiet"]) == 0
    assert main(["account", "verify", str(tmp_path / "s.report.json"), "--quiet"]) == 3
    assert "seed" in capsys.readouterr().err


# -- standard DP-SGD: --unit record ------------------------------------------------------------

RECORD = ["--unit", "record", "--noise-multiplier", "1", "--delta", "1e-5"]


def test_record_level_dpsgd_is_the_standard_epsilon(capsys):
    code, out, _ = run_json(capsys, "account", "dpsgd", *RECORD, "--sampling-rate", "0.01", "--steps", "10000")
    assert code == 0
    assert out["epsilon"] == pytest.approx(6.191, abs=5e-4)
    assert "Zhu, Dong and Wang 2022" in out["theorem"] and "PoissonSampledDpEvent" in out["theorem"]
    assert "connect-the-dots" in out["accountant"] and out["bound"] == "upper"
    assert out["is_privacy_guarantee"] is True and "add/remove" in out["unit"]


def test_record_level_epochs_from_batch_and_dataset_size(capsys):
    code, out, _ = run_json(capsys, "account", "dpsgd", *RECORD, "--batch-size", "100", "--dataset-size", "10000",
                            "--epochs", "100")
    assert code == 0 and out["steps"] == 10_000 and out["sampling_rate"] == 0.01
    assert out["epsilon"] == pytest.approx(6.191, abs=5e-4)


def test_record_level_substitution_with_fixed_batches(capsys):
    code, out, _ = run_json(capsys, "account", "dpsgd", *RECORD, "--sampling-rate", "0.01", "--steps", "100",
                            "--sampling", "fixed", "--relation", "substitution")
    assert code == 0 and out["epsilon"] == pytest.approx(6.6408, rel=2e-3)
    assert "Prop. C.1" in out["theorem"] and "substitution" in out["unit"]


def test_record_level_calibration_both_ways(capsys):
    base = ["account", "calibrate", "dpsgd", "--unit", "record", "--sampling-rate", "0.01", "--delta", "1e-5",
            "--epsilon", "3"]
    code, out, _ = run_json(capsys, *base, "--steps", "2000")
    assert code == 0 and out["epsilon"] <= 3 and 0.5 < out["noise_multiplier"] < 2
    sigma = out["noise_multiplier"]
    code, again, _ = run_json(capsys, *base, "--noise-multiplier", str(sigma))
    assert code == 0 and again["steps"] >= 2000 and again["epsilon"] <= 3
    assert again["epochs"] == again["steps"] // 100


@pytest.mark.parametrize("extra, needle", [
    (["--sampling-rate", "0.01", "--steps", "10", "--series", "5"], "--series applies to --unit w-event/w-user/event"),
    (["--sampling-rate", "0.01", "--steps", "10", "--top", "poisson"], "--top applies to --unit w-event/w-user/event"),
    (["--steps", "10"], "--sampling-rate Q, or --batch-size B with --dataset-size N"),
    (["--sampling-rate", "0.01", "--batch-size", "5", "--dataset-size", "500", "--steps", "10"], "not both"),
    (["--sampling-rate", "0.01", "--steps", "10", "--relation", "substitution"], "--sampling fixed"),
    (["--sampling-rate", "0.01", "--steps", "10", "--sampling", "fixed"], "--relation substitution"),
    (["--sampling-rate", "2", "--steps", "10"], "--sampling-rate must be in (0, 1]"),
])
def test_record_level_refusals(capsys, extra, needle):
    code = main(["account", "dpsgd", *RECORD, *extra])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and needle in err[0]


def test_series_options_are_still_required_for_series_units(capsys):
    code = main(["account", "dpsgd", "--noise-multiplier", "1", "--steps", "10", "--delta", "1e-5",
                 "--series", "5", "--length", "20", "--context-length", "1", "--forecast-length", "1"])
    err = capsys.readouterr().err
    assert code == 2 and "missing option --batch-size (required with --unit w-event)" in err
    code = main(["account", "dpsgd", *SMALL, "--noise-multiplier", "1", "--steps", "10", "--sampling-rate", "0.1"])
    assert code == 2 and "--sampling-rate applies to --unit record" in capsys.readouterr().err


# ------------------------------------------------------------------- extreme but valid calibrations

RECORD_Q = ["--unit", "record", "--delta", "1e-5"]


@pytest.mark.parametrize("rate", ["0.01", "1"])
def test_calibrate_a_huge_epsilon_gives_small_noise_that_account_confirms(capsys, rate):
    """epsilon 1000 needs sigma near 0.025, where e^loss overflowed a float (exit 5 before)."""
    args = [*RECORD_Q, "--sampling-rate", rate, "--steps", "1"]
    code, out, err = run_json(capsys, "account", "calibrate", "dpsgd", *args, "--epsilon", "1000")
    assert code == 0, err
    sigma = out["noise_multiplier"]
    assert 0.02 < sigma < 0.03 and out["epsilon"] <= 1000 and not out["warnings"]
    _, check, _ = run_json(capsys, "account", "dpsgd", *args, "--noise-multiplier", repr(sigma))
    assert check["epsilon"] == out["epsilon"] <= 1000
    _, less, _ = run_json(capsys, "account", "dpsgd", *args, "--noise-multiplier", repr(sigma / 1.002))
    assert less["epsilon"] > 1000  # the smallest such sigma, to rtol
    if rate == "1":  # no subsampling: the exact Gaussian profile says the same
        from tsdp.accounting.gaussian import analytic_sigma
        assert analytic_sigma(1000, 1e-5, 1.0) <= sigma <= analytic_sigma(1000, 1e-5, 1.0) * 1.01


def test_calibrate_below_the_grid_limit_is_the_smallest_accountable_noise_and_says_so(capsys):
    """q = 1e-6 < delta: every sigma meets epsilon 1000, down to where the loss grid outgrows its
    limit; that sigma is returned (on the safe side) with a warning, not exit 5."""
    args = [*RECORD_Q, "--sampling-rate", "1e-6", "--steps", "1"]
    code, out, err = run_json(capsys, "account", "calibrate", "dpsgd", *args, "--epsilon", "1000")
    assert code == 0, err
    assert out["epsilon"] <= 1000 and out["noise_multiplier"] < 0.01
    assert any("smallest tsdp can account at --discretization" in w["message"] for w in out["warnings"])
    _, check, _ = run_json(capsys, "account", "dpsgd", *args, "--noise-multiplier", repr(out["noise_multiplier"]))
    assert check["epsilon"] == out["epsilon"]


@pytest.mark.parametrize("unit", [RECORD_Q + ["--sampling-rate", "0.01"], SMALL])
def test_calibrate_an_epsilon_below_the_grid_step_is_met_and_says_the_grid_costs_noise(capsys, unit):
    """epsilon 1e-5 with --discretization 1e-3: noise beyond the old cap of 1e4 (exit 5 before)."""
    args = [*unit, "--steps", "100"]
    code, out, err = run_json(capsys, "account", "calibrate", "dpsgd", *args, "--epsilon", "1e-5")
    assert code == 0, err
    assert out["epsilon"] <= 1e-5 and out["noise_multiplier"] > 1e4
    assert any("finer --discretization" in w["message"] for w in out["warnings"])
    _, check, _ = run_json(capsys, "account", "dpsgd", *args, "--noise-multiplier", repr(out["noise_multiplier"]))
    assert check["epsilon"] == out["epsilon"]


def test_calibrate_a_tiny_epsilon_with_a_fine_grid_matches_the_gaussian(capsys):
    """Beyond noise multiplier 1e4 (the old cap, exit 5): epsilon 1e-4 at delta 1e-15 needs 6e4."""
    from tsdp.accounting.gaussian import analytic_sigma

    code, out, err = run_json(capsys, "account", "calibrate", "dpsgd", "--unit", "record", "--delta", "1e-15",
                              "--sampling-rate", "1", "--steps", "1", "--epsilon", "1e-4", "--discretization", "1e-6")
    assert code == 0, err
    assert analytic_sigma(1e-4, 1e-15, 1.0) <= out["noise_multiplier"] <= analytic_sigma(1e-4, 1e-15, 1.0) * 1.01


@pytest.mark.parametrize("command", [["account", "dpsgd", "--noise-multiplier", "1.5"],
                                     ["account", "calibrate", "dpsgd", "--epsilon", "1"]])
@pytest.mark.parametrize("unit", [["--unit", "record", "--sampling-rate", "0.01"], SMALL[:-2]])
def test_a_delta_below_the_fft_resolution_is_refused_once_composed(capsys, command, unit):
    """At delta 1e-15 a composed PLD's epsilon is FFT rounding (it moved 20% with the grid step)."""
    code, _, err = run_json(capsys, *command, *unit, "--delta", "1e-15", "--steps", "100")
    assert code == 5 and err.count("\n") == 1 and "--delta 1e-15 is below 1e-10" in err
    code, out, _ = run_json(capsys, *command, *unit, "--delta", "1e-15", "--steps", "1")  # nothing composed
    assert code == 0

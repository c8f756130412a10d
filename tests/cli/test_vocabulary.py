"""One vocabulary: renamed options, their deprecated aliases (one warning line) and refused old
spellings that now mean something else (exit 2 naming the new options), on the command line and
in config files."""

import json
from pathlib import Path

import pytest

from tsdp.cli.app import main
from tsdp.cli.vocabulary import REFUSED, RENAMED

SAMPLE = Path(__file__).resolve().parents[2] / "sample_data"
SMALL = ["--series", "320", "--length", "20", "--batch-size", "32", "--delta", "1e-5"]
GEOMETRY = ["--context-length", "1", "--forecast-length", "1"]
FORECAST = [str(SAMPLE / "traffic_hourly.parquet"), "--series-col", "sensor", "--value-col", "count",
            "--context-length", "24", "--forecast-length", "12", "--model", "linear", "--batch-size", "8",
            "--noise-multiplier", "1.5", "--delta", "1e-5", "--quiet", "--seed", "1"]


def run(capsys, *args):
    code = main([str(a) for a in args])
    out = capsys.readouterr()
    return code, out.out, out.err


def run_json(capsys, *args):
    code, out, err = run(capsys, *args, "--json")
    assert code == 0, err
    return json.loads(out), err


def deprecation_lines(err: str) -> list[str]:
    return [line for line in err.splitlines() if line.startswith("warning:") and "deprecated" in line]


# ------------------------------------------------------------------- renamed: same concept, new name


@pytest.mark.parametrize("path,old,new,extra", [
    ("account dpsgd", ["--context", "1", "--horizon", "1"], GEOMETRY, ["--noise-multiplier", "1", "--steps", "10"]),
    ("account calibrate dpsgd", ["--context", "1", "--horizon", "1", "--target-epsilon", "5"],
     [*GEOMETRY, "--epsilon", "5"], ["--steps", "10"]),
])
def test_account_aliases_give_the_same_answer_with_one_warning_each(capsys, path, old, new, extra):
    command = [*path.split(), *extra]
    renamed, err_new = run_json(capsys, *command, *SMALL, *new)
    assert deprecation_lines(err_new) == []
    aliased, err_old = run_json(capsys, *command, *SMALL, *old)
    assert aliased["epsilon"] == renamed["epsilon"]
    lines = deprecation_lines(err_old)
    olds = [a for a in old if a.startswith("--")]
    assert len(lines) == len(olds)
    for alias, line in zip(olds, lines):
        assert alias in line and RENAMED[path][alias] in line


def test_alias_with_equals_sign_and_in_quiet_mode(capsys):
    """--quiet silences warnings about the data, not the notice that the command line will break."""
    code, _, err = run(capsys, "account", "dpsgd", *SMALL, "--context=1", "--horizon=1", "--noise-multiplier", "1",
                       "--steps", "10", "--quiet")
    assert code == 0
    assert len(deprecation_lines(err)) == 2 and "--context-length" in err and "--forecast-length" in err


def test_flip_k_and_m_aliases(capsys, tmp_path):
    args = ["flip", SAMPLE / "qwi_quarterly.csv", "--time-col", "quarter", "--value-cols", "ca_asian",
            "--aux-cols", "ca_white", "--seed", "3", "--quiet", "--coef-method", "cepstral-unwrapped"]
    code, _, err = run(capsys, *args, "--filter-half-length", "20", "--cepstral-terms", "20",
                       "-o", tmp_path / "new.csv")
    assert code == 0 and deprecation_lines(err) == []
    code, _, err = run(capsys, *args, "--M", "20", "--K", "20", "-o", tmp_path / "old.csv")
    assert code == 0
    lines = deprecation_lines(err)
    assert len(lines) == 2 and "--filter-half-length" in lines[0] and "--cepstral-terms" in lines[1]
    assert (tmp_path / "new.csv").read_bytes() == (tmp_path / "old.csv").read_bytes()
    new = json.loads((tmp_path / "new.report.json").read_text())["command"]["parameters"]
    assert new["filter_half_length"] == 20 and new["cepstral_terms"] == 20 and "M" not in new


@pytest.mark.parametrize("old,new", [("--value-col", "--value-cols"), ("--aux-col", "--aux-cols")])
def test_flip_singular_column_options_are_aliases(capsys, tmp_path, old, new):
    args = {"--value-cols": "ca_asian", "--aux-cols": "ca_white"}
    given = [x for k, v in args.items() for x in ((old if k == new else k), v)]
    code, _, err = run(capsys, "flip", SAMPLE / "qwi_quarterly.csv", "--time-col", "quarter", *given,
                       "--seed", "3", "-o", tmp_path / "o.csv")
    assert code == 0 and f"{old} is deprecated" in err and new in err


def test_verify_released_and_its_output_alias(capsys, tmp_path):
    out = tmp_path / "r.csv"
    assert main(["release", str(SAMPLE / "traffic_hourly_wide.csv"), "--mechanism", "laplace", "--epsilon", "1",
                 "--unit", "event", "-o", str(out), "--quiet"]) == 0
    report = str(tmp_path / "r.report.json")
    elsewhere = tmp_path / "moved.csv"
    out.rename(elsewhere)
    capsys.readouterr()
    code, _, err = run(capsys, "account", "verify", report, "--released", elsewhere, "--quiet")
    assert code == 0 and deprecation_lines(err) == []
    code, _, err = run(capsys, "account", "verify", report, "--output", elsewhere, "--quiet")
    assert code == 0 and "--output is deprecated" in err and "--released" in err


def test_ledger_spend_from_report_and_its_report_alias(capsys, tmp_path):
    db = str(tmp_path / "budget.db")
    for dataset in ("d", "e"):
        assert main(["ledger", "init", db, "--dataset", dataset, "--epsilon", "10", "--delta", "1e-3", "-q"]) == 0
    out = tmp_path / "r.csv"
    assert main(["release", str(SAMPLE / "traffic_hourly_wide.csv"), "--mechanism", "laplace", "--epsilon", "1",
                 "--unit", "event", "-o", str(out), "--quiet"]) == 0
    capsys.readouterr()
    spent, err = run_json(capsys, "ledger", "spend", db, "--dataset", "d", "--from-report", tmp_path / "r.report.json")
    assert spent["epsilon_spent"] == 1.0 and deprecation_lines(err) == []
    spent, err = run_json(capsys, "ledger", "spend", db, "--dataset", "e", "--report", tmp_path / "r.report.json")
    assert spent["epsilon_spent"] == 1.0 and "--report is deprecated" in err and "--from-report" in err


# -------------------------------------------------------- refused: the old name means something else now


def test_forecast_max_steps_is_refused_naming_steps(capsys):
    code, _, err = run(capsys, "forecast-train", *FORECAST, "--max-steps", "5", "-o", "fc.csv")
    assert code == 2 and err.startswith("error:") and "--steps" in err and "participation bound" in err
    assert not Path("fc.csv").exists()


def test_forecast_steps_trains_that_long(capsys):
    code, _, err = run(capsys, "forecast-train", *FORECAST, "--steps", "5", "-o", "fc.csv")
    assert code == 0, err
    report = json.loads(Path("fc.report.json").read_text())
    assert report["claim"]["parameters"]["steps"] == 5 and report["claim"]["parameters"]["stopped_by"] == "steps"


@pytest.mark.parametrize("command", [["account", "dpsgd", *SMALL, *GEOMETRY, "--noise-multiplier", "1",
                                      "--steps", "10"],
                                     ["forecast-train", *FORECAST, "--steps", "5", "-o", "fc.csv"]])
def test_unit_user_is_refused_for_series_accounting(capsys, command):
    code, _, err = run(capsys, *command, "--unit", "user", "--w", "2")
    assert code == 2 and "--unit w-user" in err and "whole user" in err
    code, _, err = run(capsys, *command, "--unit", "event", "--w", "2")
    assert code == 2 and "--unit w-event" in err


def test_w_user_is_what_user_meant(capsys):
    """--unit w-user gives the epsilon the accountant gives for any w steps of one series."""
    from tsdp.accounting import structured as st

    out, _ = run_json(capsys, "account", "dpsgd", *SMALL, *GEOMETRY, "--noise-multiplier", "1", "--steps", "10",
                      "--unit", "w-user", "--w", "2")
    setting = st.DpSgdSetting(n_series=320, length=20, context=1, horizon=1, batch_size=32, noise_multiplier=1.0,
                              unit="user", w=2)
    assert out["epsilon"] == st.account_dpsgd(setting, 1e-5, 10, None).epsilon
    event, _ = run_json(capsys, "account", "dpsgd", *SMALL, *GEOMETRY, "--noise-multiplier", "1", "--steps", "10",
                        "--unit", "w-event", "--w", "2")
    assert event["epsilon"] < out["epsilon"]  # contiguous steps touch fewer windows than arbitrary ones
    one, _ = run_json(capsys, "account", "dpsgd", *SMALL, *GEOMETRY, "--noise-multiplier", "1", "--steps", "10",
                      "--unit", "event")
    default, _ = run_json(capsys, "account", "dpsgd", *SMALL, *GEOMETRY, "--noise-multiplier", "1", "--steps", "10")
    assert one["epsilon"] == default["epsilon"]


def test_unknown_unit_is_a_usage_error(capsys):
    code, _, err = run(capsys, "account", "dpsgd", *SMALL, *GEOMETRY, "--noise-multiplier", "1", "--steps", "10",
                       "--unit", "person")
    assert code == 2 and "'person'" in err and "w-event" in err


# ------------------------------------------------------------------------------------ config files


def test_config_old_key_is_read_with_a_warning(capsys, tmp_path):
    (tmp_path / "a.toml").write_text("[account.dpsgd]\ncontext = 1\nhorizon = 1\n")
    out, err = run_json(capsys, "account", "dpsgd", *SMALL, "--noise-multiplier", "1", "--steps", "10",
                        "--config", tmp_path / "a.toml")
    plain, _ = run_json(capsys, "account", "dpsgd", *SMALL, *GEOMETRY, "--noise-multiplier", "1", "--steps", "10")
    assert out["epsilon"] == plain["epsilon"]
    assert "config key 'context'" in err and "context-length" in err and "deprecated" in err


def test_config_refused_key_is_a_usage_error(capsys, tmp_path):
    (tmp_path / "f.toml").write_text("[forecast-train]\nmax-steps = 5\n")
    code, _, err = run(capsys, "forecast-train", *FORECAST, "--config", tmp_path / "f.toml", "-o", "fc.csv")
    assert code == 2 and "max-steps" in err and "--steps" in err


def test_config_flip_k_m_keys(capsys, tmp_path):
    (tmp_path / "f.toml").write_text('[flip]\ntime-col = "quarter"\nvalue-cols = "ca_asian"\nM = 20\nK = 20\ncoef-method = "cepstral-unwrapped"\n')
    code, _, err = run(capsys, "flip", SAMPLE / "qwi_quarterly.csv", "--config", tmp_path / "f.toml", "--seed", "3",
                       "--lip-floor", "0", "-o", tmp_path / "o.csv")  # (every date: a trending series at d = 0)
    assert code == 0 and "'M'" in err and "filter-half-length" in err and "'K'" in err
    params = json.loads((tmp_path / "o.report.json").read_text())["command"]["parameters"]
    assert params["filter_half_length"] == 20 and params["cepstral_terms"] == 20


# ------------------------------------------------------------------------------------- the table itself


def test_time_col_defaults_to_time_wherever_a_time_column_is_required():
    from tsdp.cli.lazy import load_subcommand
    from tsdp.cli.app import _SETTINGS

    for name in ("release", "flip", "forecast-train"):
        command = load_subcommand(name, _SETTINGS)
        (param,) = [p for p in command.params if p.name == "time_col"]
        assert param.default == "time", name


def test_no_old_spelling_is_an_option_of_its_command():
    """An alias lives only in the table: the command itself no longer declares the old spelling."""
    from tsdp.cli.app import _SETTINGS
    from tsdp.cli.lazy import load_subcommand

    def command(path: str):
        parts = path.split()
        cmd = load_subcommand(parts[0], _SETTINGS)
        for part in parts[1:]:
            cmd = cmd.commands[part]
        return cmd

    for path, table in {**RENAMED, **REFUSED}.items():
        declared = {opt for p in command(path).params for opt in getattr(p, "opts", [])}
        assert not declared & set(table), path
        if path in RENAMED:
            assert set(RENAMED[path].values()) <= declared, path

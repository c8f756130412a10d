"""``tsdp account verify`` and ``compose`` end to end: genuine reports of every command verify, every
tampering found by the audit (issue 11 items 3 and 5a) fails with the right exit code, and compose
refuses reports about different units and states the unit it covers.

Genuine reports are made once per module by running the CLI on ``sample_data/`` (unseeded, so that
they are publishable), then copied into each test's directory and edited there.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tsdp.cli.app import main
from tests.conftest import dpsgd_sampler_options

SAMPLE = Path(__file__).resolve().parents[2] / "sample_data"
TRAFFIC = ["--value-col", "count", "--series-col", "sensor"]
USER24 = ["--unit", "user", "--max-steps", "24"]
KOGA = [*TRAFFIC, "--epsilon", "0.5", "--delta", "1e-4", "--unit", "user", "--max-steps", "180",
        "--series-per-user", "2"]

RELEASES = {  # name -> (input, output suffix, options)
    "gaussian": ("traffic_hourly.parquet", "parquet", [*TRAFFIC, *USER24, "--epsilon", "0.5", "--delta", "1e-6"]),
    "laplace": ("traffic_hourly.parquet", "parquet", [*TRAFFIC, *USER24, "--mechanism", "laplace", "--epsilon", "0.3"]),
    "dft-gaussian": ("traffic_hourly_wide.csv", "csv", ["--mechanism", "dft", "--dft-k", "20", "--epsilon", "1",
                                                        "--delta", "1e-6", "--unit", "event"]),
    "dft-laplace": ("traffic_hourly_wide.csv", "csv", ["--mechanism", "dft", "--noise", "laplace", "--dft-k", "20",
                                                       "--epsilon", "1", "--unit", "w-event", "--w", "3"]),
    "fast-laplace": ("traffic_hourly.parquet", "parquet", [*TRAFFIC, "--mechanism", "fast", "--epsilon", "1",
                                                           "--unit", "user", "--max-steps", "2000",
                                                           "--series-per-user", "1"]),
    "fast-gaussian": ("traffic_hourly.parquet", "parquet", [*TRAFFIC, *USER24, "--mechanism", "fast", "--noise",
                                                            "gaussian", "--epsilon", "1", "--delta", "1e-6",
                                                            "--series-per-user", "2"]),
    "fast-event": ("traffic_hourly_wide.csv", "csv", ["--mechanism", "fast", "--epsilon", "1", "--unit", "event",
                                                      "--neighbouring", "substitute"]),
    "subsample": ("traffic_hourly.parquet", "parquet", [*KOGA, "--mechanism", "subsample"]),
    "subsample-paper": ("traffic_hourly.parquet", "parquet", [*KOGA, "--mechanism", "subsample",
                                                              "--accounting", "paper"]),
    "subsample-p1": ("traffic_hourly.parquet", "parquet", [*KOGA, "--mechanism", "subsample",
                                                           "--sampling-rate", "1"]),
    "filter-subsample": ("traffic_hourly.parquet", "parquet", [*KOGA, "--mechanism", "filter-subsample"]),
    "filter-subsample-paper": ("traffic_hourly.parquet", "parquet", [*KOGA, "--mechanism", "filter-subsample",
                                                                     "--accounting", "paper"]),
    "events": ("events.csv", "csv", ["--layout", "events", "--user-col", "user_id", "--time-col", "timestamp",
                                     "--series-col", "station", "--series-keys", "st1,st2,st3,st4,st5",
                                     "--start", "2024-03-04", "--end", "2024-03-18", "--freq", "1h",
                                     "--epsilon", "0.5", "--delta", "1e-6", "--unit", "user", "--max-per-step", "2",
                                     "--max-steps", "24", "--series-per-user", "1"]),
}
OTHERS = {  # name -> (command, input, output, options)
    "mean-estimate": ("mean-estimate", "itms_speeds.parquet", "csv",
                      ["--user-col", "bus_id", "--value-col", "speed", "--time-col", "timestamp", "--cell-col",
                       "cell_id", "--slot-length", "1h", "--group-by", "cell,slot", "--epsilon-per-group-ok",
                       "--epsilon", "0.1", "--upper", "65", "--algorithm", "levy",
                       # --participation private: the groups declared, K arrays and m_UB public
                       "--group-keys", ",".join(f"c{i:02d}_{j:02d}" for i in range(5) for j in range(5)),
                       "--start", "2024-05-06", "--end", "2024-05-09", "--arrays", "20", "--m-ub", "10"]),
    "mean-estimate-public": ("mean-estimate", "itms_speeds.parquet", "csv",
                             ["--user-col", "bus_id", "--value-col", "speed", "--time-col", "timestamp", "--cell-col",
                              "cell_id", "--slot-length", "1h", "--group-by", "cell,slot", "--epsilon-per-group-ok",
                              "--epsilon", "0.1", "--upper", "65", "--algorithm", "levy", "--participation", "public"]),
    "mean-estimate-aa": ("mean-estimate", "itms_speeds.parquet", "csv",
                         ["--user-col", "bus_id", "--value-col", "speed", "--time-col", "timestamp", "--cell-col",
                          "cell_id", "--slot-length", "1h", "--group-by", "cell,slot", "--epsilon-per-group-ok",
                          "--epsilon", "0.1", "--upper", "65", "--algorithm", "array-averaging",
                          "--participation", "public"]),
    "forecast-train": ("forecast-train", "traffic_hourly.parquet", "csv",
                       ["--time-col", "time", *TRAFFIC, "--context-length", "24", "--forecast-length", "12",
                        "--model", "linear", "--batch-size", "8", "--noise-multiplier", "1.5", "--delta", "1e-5",
                        "--steps", "20"]),
    "flip": ("flip", "qwi_quarterly.csv", "csv", ["--time-col", "quarter", "--value-cols", "ca_asian", "--aux-cols",
                                                  "ca_white", "--trend-order", "3", "--M", "25", "--lip-delta", "0.1"]),
}


@pytest.fixture(scope="module")
def genuine(tmp_path_factory) -> dict[str, tuple[Path, Path]]:
    """name -> (report, released file) of one unseeded run of every mechanism and command."""
    where = tmp_path_factory.mktemp("genuine")
    out = {}
    runs = {name: ("release", source, suffix, options) for name, (source, suffix, options) in RELEASES.items()}
    runs.update(OTHERS)
    for name, (command, source, suffix, options) in runs.items():
        released = where / f"{name}.{suffix}"
        code = main([command, str(SAMPLE / source), *options, "-o", str(released), "--quiet"])
        assert code == 0, name
        out[name] = (where / f"{name}.report.json", released)
    return out


@pytest.fixture
def copy(genuine, tmp_path):
    """``copy(name) -> (report data, write)``: a genuine report and its output copied to tmp_path;
    ``write(data)`` saves edited data as the report and returns its path."""

    def make(name: str):
        report, released = genuine[name]
        shutil.copy(released, tmp_path / released.name)
        path = tmp_path / report.name

        def write(data) -> Path:
            path.write_text(data if isinstance(data, str) else json.dumps(data))
            return path

        write(report.read_text())
        return json.loads(report.read_text()), write

    return make


def verify_json(tsdp_cli, *args):
    run = tsdp_cli("account", "verify", *args, "--json")
    return run, (json.loads(run.out) if run.out else None)


# ------------------------------------------------------------------------------ genuine reports




def test_every_genuine_report_verifies_and_the_json_has_one_shape(tsdp_cli, genuine):
    """Every check passes; the sampler check of the float-only path (forecast-train) passes naming their floating-point exposure and why they have no hardened sampler."""
    paths = [genuine[name][0] for name in genuine]
    run, out = verify_json(tsdp_cli, *paths)
    assert run.code == 0, run.err
    assert set(out) == {"schema", "passed", "output_checked", "reports", "warnings"} and out["passed"] is True
    assert out["output_checked"] is True
    assert out["schema"] == "tsdp.account.verify.summary/1" and out["warnings"] == []
    assert [r["path"] for r in out["reports"]] == [str(p) for p in paths]
    for name, report in zip(genuine, out["reports"]):
        assert set(report) == {"path", "passed", "checks"} and report["passed"] is True, report
        names = [c["name"] for c in report["checks"]]
        assert len(names) == len(set(names))
        for check in report["checks"]:
            assert set(check) == {"name", "passed", "detail"}
            assert check["passed"] is True, (name, check)
            assert check["name"].isidentifier() and check["name"] == check["name"].lower()
            assert isinstance(check["detail"], str) and check["detail"]
        sampler = {c["name"]: c["detail"] for c in report["checks"]}.get("sampler")
        if name != "flip":
            assert sampler.startswith("exact discrete noise"), name
        # the released file sits next to its report: it is hashed without --output
        sha = next(c for c in report["checks"] if c["name"] == "output_sha256")
        assert sha["detail"] == "the released file matches the report's sha256"
        assert {"schema", "mechanism", "definition", "bound", "unit", "events", "parameters", "privacy_loss",
                "command", "budget", "randomness"} <= set(names)


def test_every_release_mechanism_has_a_rule():
    from tsdp.verify import RULES
    from tsdp.cli.release import Mechanism

    assert {m.value for m in Mechanism} <= set(RULES)
    assert all(any(name.startswith(m.value) for name in RELEASES) for m in Mechanism)  # and a genuine run of each


def test_flip_verifies_as_lip_without_epsilon(tsdp_cli, genuine):
    run, out = verify_json(tsdp_cli, genuine["flip"][0])
    checks = {c["name"]: c["detail"] for c in out["reports"][0]["checks"]}
    assert run.code == 0 and "NOT differential privacy" in checks["definition"]
    assert "no epsilon" in checks["privacy_loss"]
    for budget in (["--max-epsilon", "1"], ["--max-delta", "1e-6"]):  # a DP budget is never met by LIP
        run = tsdp_cli("account", "verify", genuine["flip"][0], *budget, "--quiet")
        assert run.code == 3 and "no epsilon" in run.error_line


def test_dpsgd_epsilon_is_the_accountants(tsdp_cli, genuine):
    claim = json.loads(genuine["forecast-train"][0].read_text())["claim"]
    p = claim["parameters"]
    run = tsdp_cli("account", "dpsgd", "--series", p["series"], "--length", p["train_length"], "--context-length",
                   p["context"], "--forecast-length", p["horizon"], "--batch-size", p["batch_size"], "--noise-multiplier",
                   repr(p["noise_multiplier"]), "--steps", p["compositions"], "--delta", repr(claim["delta"]),
                   *dpsgd_sampler_options(p), "--json")
    assert run.code == 0 and json.loads(run.out)["epsilon"] == claim["epsilon"]
    _, out = verify_json(tsdp_cli, genuine["forecast-train"][0])
    loss = next(c for c in out["reports"][0]["checks"] if c["name"] == "privacy_loss")
    assert f"{claim['epsilon']:.6g}" in loss["detail"] and "tsdp account dpsgd" in loss["detail"]


# ------------------------------------------------------------------------------ tampering


def _set(path: str, value):
    keys = path.split(".")

    def edit(data):
        node = data
        for key in keys[:-1]:
            node = node[int(key)] if isinstance(node, list) else node[key]
        last = int(keys[-1]) if isinstance(node, list) else keys[-1]
        node[last] = value(node[last]) if callable(value) else value

    return edit


def _lighter_mixture(data):
    """Move the heaviest mixture component's weight onto sensitivity 0 (weights still sum to 1)."""
    mixture = data["claim"]["events"][0]["mixture"]
    j = max(range(len(mixture)), key=lambda i: mixture[i][0])
    mixture[0][0] += mixture[j][0]
    mixture[j][0] = 0.0


def _all(*edits):
    def edit(data):
        for e in edits:
            e(data)

    return edit


TAMPERING = {  # id -> (report, edit, a check that must fail)
    "gaussian relabelled pure-dp, delta 0, epsilon 0.01": (
        "gaussian", _all(_set("claim.definition", "pure-dp"), _set("claim.delta", 0), _set("claim.epsilon", 0.01)),
        "definition"),
    "events emptied and epsilon lowered 100x": (
        "gaussian", _all(_set("claim.events", []), _set("claim.epsilon", lambda e: e / 100)), "events"),
    "event noise x30, parameters.sigma unchanged": (
        "gaussian", _set("claim.events.0.noise", lambda n: n * 30), "events"),
    "unit I 24 -> 2000, event sensitivity unchanged": ("gaussian", _set("claim.unit.max_steps", 2000), "events"),
    "series per unit 20 -> 1": ("gaussian", _set("claim.unit.series_per_unit", 1), "events"),
    "max per step halved": ("gaussian", _set("claim.unit.max_per_step", 0.5), "parameters"),
    "relation changed": ("gaussian", _set("claim.unit.relation", "substitute"), "unit"),
    "grid shrunk": ("gaussian", _set("grid.n_steps", 100), "parameters"),
    "epsilon lowered": ("gaussian", _set("claim.epsilon", 0.1), "privacy_loss"),
    "lower bound": ("gaussian", _set("claim.bound", "lower"), "bound"),
    "unknown mechanism": ("gaussian", _set("claim.mechanism", "magic"), "mechanism"),
    "declared bounds presented as enforced": ("gaussian", _set("claim.unit.enforced", True), "command"),
    "seeded run relabelled os-entropy": ("gaussian", _set("warnings", ["this run used a fixed --seed: anyone ..."]),
                              "randomness"),
    "laplace count lowered": ("laplace", _set("claim.events.0.count", 1), "events"),
    "laplace epsilon lowered": ("laplace", _set("claim.epsilon", 0.03), "privacy_loss"),
    "laplace DFT given forged events": (
        "dft-laplace", _set("claim.events", [{"kind": "laplace", "sensitivity": 1, "noise": 1e9, "count": 1}]),
        "events"),
    "laplace DFT epsilon lowered": ("dft-laplace", _set("claim.epsilon", 0.5), "privacy_loss"),
    "FAST I lowered": ("fast-laplace", _set("claim.unit.max_steps", 10), "events"),
    "FAST M lowered": ("fast-gaussian", _set("claim.parameters.max_samples_M", 10), "events"),
    "hardened DFT granularity doubled": ("dft-gaussian", _set("claim.parameters.granularity", lambda g: 2 * g),
                                         "parameters"),
    "hardened DFT rounding left out of the event": (
        "dft-gaussian", _set("claim.events.0.sensitivity", lambda s: s - 1e-3 * s), "events"),
    "hardened Laplace DFT rounding left out": (
        "dft-laplace", _all(_set("claim.parameters.scale", lambda b: b * 0.9999),
                            _set("claim.parameters.rounded_l1_sensitivity", lambda s: s * 0.9999)), "parameters"),
    "hardened FAST rounding left out of the event": ("fast-laplace", _set("claim.events.0.sensitivity", 1.0),
                                                     "events"),
    "hardened FAST event granularity changed": (
        "fast-gaussian", _set("claim.events.0.granularity", lambda g: g / 2), "events"),
    "hardened FAST relabelled float": ("fast-gaussian", _set("claim.parameters.sampler", "float"), "sampler"),
    "hardened gaussian changed values lowered": ("gaussian", _set("claim.events.0.lattice_coords", 1), "events"),
    "hardened gaussian rounding slack understated": (
        "gaussian", _set("claim.parameters.rounding_slack", lambda x: x / 10), "parameters"),
    "hardened filter-subsample rounding slack understated": (
        "filter-subsample", _set("claim.parameters.rounding_slack", lambda x: x / 10), "parameters"),
    "hardened subsample relabelled float": ("subsample", _set("claim.parameters.sampler", "float"), "sampler"),
    "hardened subsample lattice halved": ("subsample", _set("claim.parameters.granularity", lambda g: g / 2),
                                          "parameters"),
    "hardened subsample mixture relabelled continuous": (
        "subsample", _all(_set("claim.events.0.kind", "gaussian-mixture"), lambda d: d["claim"]["events"][0].pop(
            "granularity"), lambda d: d["claim"]["events"][0].pop("lattice_coords")), "events"),
    "hardened paper subsample rounding dropped": (
        "subsample-paper", _set("claim.parameters.sensitivity.rounded_per_step", lambda m: 1.0), "parameters"),
    "hardened filter-subsample rounding dropped": (
        "filter-subsample", _set("claim.parameters.sensitivity.rounded_l2_conditional",
                                 lambda xs: [x * (1 - 1e-3) for x in xs]), "parameters"),
    "hardened filter-subsample theorem dropped": (
        "filter-subsample", _set("claim.theorem", lambda t: t.split("; discrete Gaussian")[0]), "parameters"),
    "hardened DP-SGD relabelled float": ("forecast-train", _set("claim.parameters.sampler", "float"), "sampler"),
    "hardened DP-SGD lattice halved": ("forecast-train", _set("claim.parameters.granularity", lambda g: g / 2),
                                       "parameters"),
    "hardened DP-SGD rounded clip dropped": ("forecast-train", _set("claim.parameters.rounded_clip_norm",
                                                                    lambda c: c * (1 - 1e-6)), "parameters"),
    "hardened DP-SGD slack understated": ("forecast-train", _set("claim.parameters.rounding_slack", 0.0),
                                          "parameters"),
    "hardened DP-SGD theorem dropped": ("forecast-train", _set("claim.theorem", lambda t: t.split("; hardened")[0]),
                                        "parameters"),
    "subsample epsilon lowered": ("subsample", _set("claim.epsilon", 0.3), "privacy_loss"),
    "subsample mixture made lighter": ("subsample", _lighter_mixture, "events"),
    "paper subsample delta lowered": ("subsample-paper", _set("claim.delta", 1e-6), "privacy_loss"),
    "paper filter delta lowered": ("filter-subsample-paper", _set("claim.delta", 1e-6), "privacy_loss"),
    "conditional filter sensitivity halved": ("filter-subsample", _set("claim.events.0.sensitivity",
                                                                       lambda s: s / 2), "events"),
    "mean epsilon lowered": ("mean-estimate", _set("claim.epsilon", 1.0), "privacy_loss"),
    "mean value range narrowed": ("mean-estimate", _set("claim.unit.max_per_step", 10), "unit"),
    "release grid series understated (wide CSV)": ("dft-laplace", _set("grid.n_series", lambda n: n - 1),
                                                   "output_shape"),
    "release grid steps understated (long Parquet)": ("subsample", _set("grid.n_steps", lambda n: n - 1),
                                                      "output_shape"),
    "release grid steps understated (long CSV)": ("events", _set("grid.n_steps", lambda n: n - 1), "output_shape"),
    # every figure of the group count rewritten together: only the released estimates (one row a group) tell
    "mean groups understated with their epsilon": ("mean-estimate-public", _all(
        _set("grid.n_groups", lambda n: n - 1), _set("claim.parameters.n_groups", lambda n: n - 1),
        _set("claim.parameters.epsilon_total_bound", lambda e: round(e - 0.1, 12)),
        _set("claim.epsilon", lambda e: round(e - 0.1, 12))), "output_shape"),
    # declared groups (--participation private): their count is in the report too
    "mean declared groups understated with their epsilon": ("mean-estimate", _all(
        _set("grid.n_groups", lambda n: n - 1), _set("claim.parameters.n_groups", lambda n: n - 1),
        _set("claim.parameters.epsilon_total_bound", lambda e: round(e - 0.1, 12)),
        _set("claim.epsilon", lambda e: round(e - 0.1, 12))), "parameters"),
    "mean relation words edited": ("mean-estimate", _set("claim.unit.neighbouring", "add or remove one user"), "unit"),
    "hardened mean event scale lowered": ("mean-estimate-aa", _set("claim.events.0.noise", lambda b: b / 2),
                                          "events"),
    "hardened mean event off its lattice": (
        "mean-estimate-aa", _set("claim.events.0.sensitivity", lambda s: s * (1 + 2.0 ** -30)), "events"),
    "hardened mean event granularity not a power of two": (
        "mean-estimate-aa", _set("claim.events.0.granularity", lambda g: 3 * g), "events"),
    "hardened mean group left out of the events": (
        "mean-estimate-aa", _set("claim.events.0.count", lambda n: n - 1 if n > 1 else 2), "events"),
    "hardened mean events dropped": ("mean-estimate-aa", _set("claim.events", []), "events"),
    "hardened mean relabelled float": ("mean-estimate-aa", _set("claim.parameters.sampler", "float"), "sampler"),
    "DP-SGD noise multiplier alone": ("forecast-train", _set("claim.parameters.noise_multiplier", 5.0),
                                      "privacy_loss"),
    "DP-SGD epsilon lowered": ("forecast-train", _set("claim.epsilon", 0.1), "privacy_loss"),
    "DP-SGD bounded change claimed": ("forecast-train", _set("claim.unit.max_per_step", 1.0), "unit"),
    "DP-SGD given forged events": (
        "forecast-train", _set("claim.events", [{"kind": "gaussian", "sensitivity": 1, "noise": 1e9, "count": 1}]),
        "events"),
    "FLIP presented as DP": (
        "flip", _all(_set("claim.definition", "approx-dp"), _set("claim.epsilon", 1.0), _set("claim.delta", 1e-6)),
        "definition"),
    "FLIP withheld dates rewritten": ("flip", _set("claim.parameters.withhold_ends", 45), "command"),
    "FLIP floor of the released dates raised": ("flip", _set("claim.parameters.lip_floor", 0.95), "command"),
    "FLIP guarantee sentence raised": ("flip", _set("claim.parameters.guarantee",
                                                    lambda g: g.replace("lip_floor = 0.9;", "lip_floor = 0.99;")),
                                       "privacy_loss"),
    "gaussian claim presented as FLIP's": (
        "gaussian", _set("claim.mechanism", "FLIP all-pass filtering (McElroy, Roy & Hore 2022)"), "definition"),
}


@pytest.mark.parametrize("case", list(TAMPERING))
def test_tampering_fails_verification(tsdp_cli, copy, case):
    name, edit, check = TAMPERING[case]
    data, write = copy(name)
    edit(data)
    run, out = verify_json(tsdp_cli, write(data))
    assert run.code == 3, run.err
    assert run.error_line.startswith("error: verification of")
    failed = {c["name"] for c in out["reports"][0]["checks"] if not c["passed"]}
    assert out["passed"] is False and check in failed, failed
    if case == "mean groups understated with their epsilon":  # a consistent edit: only the released file tells
        assert failed == {"output_shape"}, failed


def test_csv_shape_counts_quoted_line_ends_once(tmp_path):
    """A release's CSV is counted without numerical libraries; a quoted series name holding a line end
    (or a comma) is one row, not two."""
    from tsdp.api.accounting import _csv_shape

    path = tmp_path / "out.csv"
    path.write_text('series,time,value\n"a\nb",0,1.5\n"a\nb",1,2.5\n"c,d",0,3\n"c,d",1,4\n')
    assert _csv_shape(path) == {"rows": 4, "columns": ["series", "time", "value"], "distinct": {}}
    path.write_text("time,a,b\n0,1,2\n1,3,4")  # no final line end
    assert _csv_shape(path)["rows"] == 2


@pytest.mark.parametrize("text,needle", [
    ('"epsilon": NaN', "NaN"), ('"epsilon": Infinity', "Infinity"), ('"epsilon": -Infinity', "Infinity"),
    ('"epsilon": 1e999', "does not fit a float"),
])
def test_non_finite_numbers_are_bad_input(tsdp_cli, copy, text, needle):
    data, write = copy("gaussian")
    raw = json.dumps(data).replace(f'"epsilon": {data["claim"]["epsilon"]!r}', text, 1)
    assert text in raw
    run = tsdp_cli("account", "verify", write(raw))
    assert run.code == 4 and needle in run.error_line and "REPORT" in run.error_line


@pytest.mark.parametrize("make,needle", [
    (lambda raw: raw.replace('"claim": {', '"deep": ' + "[" * 100_000 + "]" * 100_000 + ', "claim": {', 1),
     "nested too deeply"),
    (lambda raw: raw.replace('"claim": {', '"claim": {"epsilon": 0.001, ', 1), "twice"),
    (lambda raw: "[" + raw + "]", "not a valid"),
    (lambda raw: raw[:-20], "not JSON"),
])
def test_malformed_reports_are_bad_input(tsdp_cli, copy, make, needle):
    data, write = copy("gaussian")
    run = tsdp_cli("account", "verify", write(make(json.dumps(data))))
    assert run.code == 4 and needle in run.error_line, run.err


@pytest.mark.parametrize("option,value", [
    ("--max-epsilon", "nan"), ("--max-epsilon", "-1"), ("--max-epsilon", "inf"),
    ("--max-delta", "nan"), ("--max-delta", "-0.1"), ("--max-delta", "2"), ("--max-delta", "inf"),
])
def test_meaningless_thresholds_are_usage_errors(tsdp_cli, genuine, option, value):
    run = tsdp_cli("account", "verify", genuine["gaussian"][0], option, value)
    assert run.code == 2 and option in run.error_line


def test_missing_report_and_output_count_are_usage_errors(tsdp_cli, genuine, tmp_path):
    assert tsdp_cli("account", "verify", tmp_path / "absent.json").code == 2
    run = tsdp_cli("account", "verify", genuine["gaussian"][0], genuine["laplace"][0],
                   "--released", genuine["gaussian"][1])
    assert run.code == 2 and "--released" in run.error_line


# ------------------------------------------------------------------------------ the released file


def test_changed_output_next_to_the_report_is_detected_without_output_option(tsdp_cli, copy, tmp_path):
    data, write = copy("gaussian")
    report = write(data)
    released = tmp_path / data["output"]["file"]
    assert tsdp_cli("account", "verify", report, "--quiet").code == 0
    with open(released, "ab") as fh:
        fh.write(b"\0")
    run, out = verify_json(tsdp_cli, report)
    assert run.code == 3 and "output_sha256" in run.error_line
    sha = next(c for c in out["reports"][0]["checks"] if c["name"] == "output_sha256")
    assert sha["passed"] is False and "not the file this report covers" in sha["detail"]


def test_output_not_next_to_the_report_fails_unless_not_checking_is_asked(tsdp_cli, genuine, tmp_path):
    """Issue 33: a report whose released file is not at hand used to pass ('not checked', exit 0), so
    any report verified in CI without its file; now it fails (exit 3) unless --no-output-check."""
    lonely = tmp_path / "alone" / "g.report.json"
    lonely.parent.mkdir()
    shutil.copy(genuine["gaussian"][0], lonely)
    run, out = verify_json(tsdp_cli, lonely)
    assert run.code == 3 and out["passed"] is False and out["output_checked"] is True
    sha = next(c for c in out["reports"][0]["checks"] if c["name"] == "output_sha256")
    assert not sha["passed"] and "not next to the report" in sha["detail"] and "--released" in sha["detail"]
    assert "--no-output-check" in sha["detail"]
    run, out = verify_json(tsdp_cli, lonely, "--no-output-check")
    assert run.code == 0 and out["output_checked"] is False
    assert [w["code"] for w in out["warnings"]] == ["output_not_checked"]
    sha = next(c for c in out["reports"][0]["checks"] if c["name"] == "output_sha256")
    assert sha["passed"] and sha["detail"].startswith("not checked (--no-output-check)")
    assert tsdp_cli("account", "verify", lonely, "--released", genuine["gaussian"][1], "--quiet").code == 0
    run = tsdp_cli("account", "verify", lonely, "--released", genuine["laplace"][1], "--quiet")
    assert run.code == 3 and "sha256" in run.error_line


def test_several_reports_one_failing(tsdp_cli, genuine, copy):
    data, write = copy("laplace")
    data["claim"]["epsilon"] = 0.01
    bad = write(data)
    run, out = verify_json(tsdp_cli, genuine["gaussian"][0], bad, genuine["flip"][0])
    assert run.code == 3 and out["passed"] is False
    assert [r["passed"] for r in out["reports"]] == [True, False, True]
    assert str(bad) in run.error_line


# ------------------------------------------------------------------------------ compose and units


def _released_with(tmp_path, name, *options):
    out = tmp_path / f"{name}.parquet"
    assert main(["release", str(SAMPLE / "traffic_hourly.parquet"), *TRAFFIC, "--epsilon", "0.5", "--delta", "1e-6",
                 *options, "-o", str(out), "--quiet"]) == 0
    return tmp_path / f"{name}.report.json"


def test_compose_states_the_strictest_unit(tsdp_cli, tmp_path):
    wide = _released_with(tmp_path, "wide", "--unit", "user", "--max-steps", "24", "--series-per-user", "2")
    narrow = _released_with(tmp_path, "narrow", "--unit", "user", "--max-steps", "4", "--series-per-user", "1")
    run = tsdp_cli("account", "compose", wide, narrow, "--json")
    assert run.code == 0, run.err
    unit = json.loads(run.out)["unit"]
    assert unit["level"] == "user" and unit["relation"] == "add-remove"
    assert unit["max_steps"] == 4 and unit["series_per_unit"] == 1 and unit["max_per_step"] == 1.0
    assert "strictest" in unit["covers"]
    assert "strictest" in tsdp_cli("account", "compose", wide, narrow).err  # warned in the human form too


@pytest.mark.parametrize("other", [
    ["--unit", "event"],
    ["--unit", "user", "--max-steps", "24", "--neighbouring", "substitute"],
])
def test_compose_refuses_different_levels_and_relations(tsdp_cli, refuse, tmp_path, other):
    base = _released_with(tmp_path, "base", "--unit", "user", "--max-steps", "24")
    different = _released_with(tmp_path, "different", *other)
    line = refuse(["account", "compose", base, different], 3)
    assert "different unit" in line


def test_compose_refuses_different_id_columns(tsdp_cli, refuse, copy):
    g, write_g = copy("gaussian")
    data, write = copy("events")
    assert data["claim"]["unit"]["id_column"] == "user_id" and g["claim"]["unit"]["id_column"] is None
    line = refuse(["account", "compose", write(data), write_g(g)], 3)
    assert "id column" in line


def test_compose_refuses_a_tampered_claim(tsdp_cli, refuse, copy, genuine):
    data, write = copy("laplace")
    data["claim"]["events"][0]["noise"] *= 100  # would make the composed epsilon 100 times too small
    line = refuse(["account", "compose", write(data), genuine["gaussian"][0]], 3)
    assert "does not verify" in line and "events" in line


@pytest.mark.parametrize("name", ["dft-gaussian", "dft-laplace", "fast-laplace", "fast-gaussian"])
def test_hardened_dft_and_fast_reports_name_the_lattice_and_verify(tsdp_cli, genuine, name):
    report, _ = genuine[name]
    claim = json.loads(report.read_text())["claim"]
    params = claim["parameters"]
    assert params["sampler"] == "hardened" and params["granularity"] > 0
    assert "Canonne" in claim["theorem"] or "discrete Laplace" in claim["theorem"]
    run, out = verify_json(tsdp_cli, report)
    assert run.code == 0 and out["passed"], run.out


@pytest.mark.parametrize("options", [RELEASES["dft-gaussian"][2], RELEASES["fast-laplace"][2]])
def test_float_sampler_releases_fail_the_sampler_check(tsdp_cli, tmp_path, options):
    """--sampler float: the release runs (experiments) with the warning, and verify refuses it for
    publication; the accounting itself (continuous events) still checks out."""
    source = RELEASES["dft-gaussian"][0] if "dft" in options else RELEASES["fast-laplace"][0]
    out = tmp_path / ("f." + source.rsplit(".", 1)[1])
    assert main(["release", str(SAMPLE / source), *options, "--sampler", "float", "-o", str(out), "--quiet"]) == 0
    report = tmp_path / "f.report.json"
    data = json.loads(report.read_text())
    assert data["claim"]["events"][0]["kind"] in ("gaussian", "laplace") or not data["claim"]["events"]
    run, result = verify_json(tsdp_cli, report)
    checks = {c["name"]: c["passed"] for c in result["reports"][0]["checks"]}
    assert run.code == 3 and checks["sampler"] is False
    assert all(ok for name, ok in checks.items() if name != "sampler"), checks


def test_compose_rebuilds_hardened_events_of_cellwise_and_fast_releases(tsdp_cli, genuine):
    """The discrete-gaussian events of a hardened baseline and a hardened FAST release compose
    tightly (as PLDs): below the sum of the two epsilons at the sum of the deltas."""
    reports = [genuine["gaussian"][0], genuine["fast-gaussian"][0]]
    claims = [json.loads(r.read_text())["claim"] for r in reports]
    assert [c["events"][0]["kind"] for c in claims] == ["discrete-gaussian", "discrete-gaussian"]
    run = tsdp_cli("account", "compose", *reports, "--json")
    assert run.code == 0, run.err
    out = json.loads(run.out)
    assert out["epsilon"] < sum(c["epsilon"] for c in claims)

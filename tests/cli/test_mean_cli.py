"""``tsdp mean-estimate`` end to end: happy paths on the ITMS-like sample and every refusal of
spec ``mean.md`` section 4 (exit code, one ``error:`` line naming the option/column/group and the
value, no output, input untouched: the ``refuse`` fixture)."""

from __future__ import annotations

import json
import stat
import shutil
from pathlib import Path

import jsonschema
import polars as pl
import pytest

from tsdp.report import schema

SAMPLE = Path(__file__).resolve().parents[2] / "sample_data" / "itms_speeds.parquet"
# the paper's relation (per-group participation public): its algorithms, caps and packings as published
BASE = ["--user-col", "bus_id", "--value-col", "speed", "--upper", "65", "--epsilon", "1",
        "--time-col", "timestamp", "--cell-col", "cell_id", "--participation", "public"]
HAT = ["--cell", "c02_02", "--slot", "2024-05-06T09:00"]
GROUPED = ["--group-by", "cell,slot", "--epsilon-per-group-ok"]

SMALL = """\
user,ts,cell,v
a,2024-01-01 09:00:00,x,1
a,2024-01-01 09:10:00,x,2
b,2024-01-01 09:20:00,x,3
b,2024-01-01 09:30:00,y,4
c,2024-01-01 09:40:00,y,5
"""
SMALL_ARGS = ["--user-col", "user", "--value-col", "v", "--upper", "10", "--epsilon", "1",
              "--time-col", "ts", "--cell-col", "cell", "--participation", "public"]


@pytest.fixture
def itms(tmp_path) -> Path:
    return Path(shutil.copy(SAMPLE, tmp_path / "itms.parquet"))


@pytest.fixture
def small(tmp_path) -> Path:
    path = tmp_path / "small.csv"
    path.write_text(SMALL)
    return path


def run_ok(tsdp_cli, *args):
    result = tsdp_cli("mean-estimate", *args)
    assert result.code == 0, result.err
    return result


# ------------------------------------------------------------------------------- happy paths


def test_single_hat(tsdp_cli, itms, tmp_path):
    result = run_ok(tsdp_cli, itms, *BASE, *HAT, "-o", "hat.csv", "--seed", "3", "--json")
    summary = json.loads(result.out)
    table = pl.read_csv(tmp_path / "hat.csv")
    assert table.columns == ["cell_id", "slot", "estimate", "laplace_scale", "algorithm", "num_arrays",
                             "m_ub", "users", "records_used"]
    assert table.height == 1 and table["cell_id"][0] == "c02_02"
    assert summary["groups"] == 1 and summary["estimate"] == table["estimate"][0]
    report = json.loads((tmp_path / "hat.report.json").read_text())
    jsonschema.validate(report, schema())
    assert report["claim"]["epsilon"] == 1.0 and report["claim"]["definition"] == "pure-dp"
    assert report["claim"]["unit"]["id_column"] == "bus_id"
    assert report["randomness"] == "seeded"
    assert any("replace all values of one user" in n for n in report["notes"])
    assert any("'bus_id'" in n and "protects whatever this column identifies" in n for n in report["notes"])


@pytest.mark.parametrize("suffix", [".csv", ".parquet"])
def test_group_by_cell_and_slot(tsdp_cli, itms, tmp_path, suffix):
    run_ok(tsdp_cli, itms, *BASE, *GROUPED, "-o", f"est{suffix}", "--seed", "1", "--quiet")
    table = pl.read_parquet(tmp_path / f"est{suffix}") if suffix == ".parquet" else pl.read_csv(tmp_path / f"est{suffix}")
    source = pl.read_parquet(SAMPLE)
    groups = source.select("cell_id", pl.col("timestamp").dt.truncate("1h")).unique().height
    assert table.height == groups
    assert table.select("cell_id", "slot").is_unique().all()
    assert table["users"].min() >= 1 and table["records_used"].sum() <= source.height
    report = json.loads((tmp_path / "est.report.json").read_text())
    jsonschema.validate(report, schema())
    params = report["claim"]["parameters"]
    assert report["claim"]["epsilon"] == groups == params["n_groups"]
    # audit item 5: eps x the number of groups one user appears in is a figure of the data: custodian only
    assert "max_groups_per_user" not in json.dumps(report) and "if_participation" not in json.dumps(report)
    assert any("custodian file" in n and "participation" in n for n in report["notes"])
    custodian = tmp_path / "est.custodian.NOT-FOR-PUBLICATION.json"
    assert stat.S_IMODE(custodian.stat().st_mode) == 0o600
    figures = json.loads(custodian.read_text())
    assert figures["publish"] is False
    participation = figures["figures"]["participation"]
    assert 1 <= participation["epsilon_total_if_participation_public"] < groups
    assert participation["epsilon_total_if_participation_public"] == participation["max_groups_per_user"] * 1.0
    assert any("fewer than 10 arrays" in w for w in report["warnings"])
    assert any("single user" in w for w in report["warnings"])


def test_report_never_holds_the_true_mean(tsdp_cli, itms, tmp_path):
    run_ok(tsdp_cli, itms, *BASE, *HAT, "-o", "hat.csv", "--quiet")
    source = pl.read_parquet(SAMPLE).filter(
        (pl.col("cell_id") == "c02_02") & (pl.col("timestamp").dt.truncate("1h") == pl.datetime(2024, 5, 6, 9)))
    true_mean = source["speed"].mean()
    text = (tmp_path / "hat.report.json").read_text() + (tmp_path / "hat.csv").read_text()
    for digits in (f"{true_mean:.4f}", f"{true_mean:.6g}", repr(true_mean)):
        assert digits not in text
    report = json.loads((tmp_path / "hat.report.json").read_text())
    assert "seed" not in report["command"]["parameters"] and report["randomness"] == "os-entropy"


def test_seeded_runs_are_deterministic(tsdp_cli, itms, tmp_path):
    for name in ("a", "b"):
        run_ok(tsdp_cli, itms, *BASE, *GROUPED, "-o", f"{name}.parquet", "--seed", "11", "--quiet")
    assert pl.read_parquet(tmp_path / "a.parquet").equals(pl.read_parquet(tmp_path / "b.parquet"))
    run_ok(tsdp_cli, itms, *BASE, *GROUPED, "-o", "c.parquet", "--seed", "12", "--quiet")
    assert not pl.read_parquet(tmp_path / "a.parquet")["estimate"].equals(
        pl.read_parquet(tmp_path / "c.parquet")["estimate"])


@pytest.mark.parametrize("algorithm", ["baseline", "array-averaging", "levy", "quantile"])
def test_every_algorithm(tsdp_cli, itms, tmp_path, algorithm):
    run_ok(tsdp_cli, itms, *BASE, "--cell", "c02_02", "--algorithm", algorithm, "-o", "o.csv", "--seed", "2", "--quiet")
    table = pl.read_csv(tmp_path / "o.csv")
    assert table["algorithm"][0] == algorithm and table.height == 1


def test_clip_warns(tsdp_cli, itms, tmp_path):
    run_ok(tsdp_cli, itms, *BASE[:5], "40", *BASE[6:], *HAT, "--value-out-of-range", "clip", "-o", "o.csv",
           "--quiet")
    report = json.loads((tmp_path / "o.report.json").read_text())
    assert any("clip" in w for w in report["warnings"])


def test_evaluate_writes_nothing(tsdp_cli, itms, tmp_path, dir_snapshot):
    before = dir_snapshot(tmp_path)
    result = tsdp_cli("mean-estimate", itms, *BASE, "--cell", "c02_02", "--evaluate", "20", "--seed", "1", "--json")
    assert result.code == 0, result.err
    summary = json.loads(result.out)
    assert summary["runs"] == 20 and summary["mae_per_group"]["mean"] > 0
    assert "NOT private" in result.err and "nothing was written" in result.err
    assert dir_snapshot(tmp_path) == before


def test_existing_output_needs_force(tsdp_cli, refuse, small, tmp_path):
    run_ok(tsdp_cli, small, *SMALL_ARGS, "-o", "o.csv", "--quiet")
    refuse(["mean-estimate", small, *SMALL_ARGS, "-o", "o.csv"], 2, "--output", "o.csv", "--force")
    run_ok(tsdp_cli, small, *SMALL_ARGS, "-o", "o.csv", "--quiet", "--force")


# ----------------------------------------------------------------- refusals (spec section 4)


@pytest.mark.parametrize("args, code, needles", [
    # rule 1: file unreadable / unknown type; missing columns listing the existing ones
    (["missing.csv"], 2, ["INPUT", "missing.csv"]),
    (["small.txt"], 2, ["INPUT", "small.txt"]),
    (["small.csv", "--user-col", "driver"], 4, ["--user-col", "'driver'", "user, ts, cell, v"]),
    (["small.csv", "--value-col", "speed"], 4, ["--value-col", "'speed'", "user, ts, cell, v"]),
    (["small.csv", "--time-col", "when"], 4, ["--time-col", "'when'", "user, ts, cell, v"]),
    (["small.csv", "--cell-col", "h3"], 4, ["--cell-col", "'h3'"]),
    # rule 3: U absent, not finite, <= lower
    (["small.csv", "--upper", "inf"], 2, ["--upper", "inf"]),
    (["small.csv", "--upper", "nan"], 2, ["--upper", "nan"]),
    (["small.csv", "--upper", "0"], 2, ["--upper 0", "--lower 0"]),
    (["small.csv", "--lower", "5", "--upper", "3"], 2, ["--upper 3", "--lower 5"]),
    # rule 4: values outside [lower, U]
    (["small.csv", "--upper", "4.5"], 4, ["'v'", "1 value(s)", "[0, 4.5]", "the first 5"]),
    (["small.csv", "--lower", "2"], 4, ["'v'", "1 value(s)", "the first 1"]),
    (["small.csv", "--upper", "3", "--group-by", "cell", "--epsilon-per-group-ok"], 4,
     ["2 value(s)", "the first 4", "group cell='y'"]),
    # rule 6: epsilon, gamma, m_ub
    (["small.csv", "--epsilon", "0"], 2, ["--epsilon", "0"]),
    (["small.csv", "--epsilon", "-1"], 2, ["--epsilon", "-1"]),
    (["small.csv", "--epsilon", "inf"], 2, ["--epsilon", "inf"]),
    (["small.csv", "--algorithm", "levy", "--gamma", "1.5"], 2, ["--gamma", "1.5"]),
    (["small.csv", "--algorithm", "levy", "--gamma", "0"], 2, ["--gamma", "0"]),
    (["small.csv", "--m-ub", "many"], 2, ["--m-ub", "many"]),
    (["small.csv", "--m-ub", "0"], 2, ["--m-ub", "0"]),
    (["small.csv", "--m-ub", "9"], 2, ["--m-ub", "9"]),
    # rule 7: quantile levels
    (["small.csv", "--quantiles", "0.9,0.1"], 2, ["--quantiles", "0.9", "0.1"]),
    (["small.csv", "--quantiles", "0.1,1.5"], 2, ["--quantiles", "0.1", "1.5"]),
    (["small.csv", "--quantiles", "0.1"], 2, ["--quantiles", "0.1"]),
    (["small.csv", "--quantiles", "a,b"], 2, ["--quantiles", "a,b"]),
    (["small.csv", "--quantile-mode", "eps-dependent"], 2, ["eps-dependent", "fixed"]),
    # rule 8: flags of another algorithm; unknown enum values
    (["small.csv", "--algorithm", "levy", "--quantiles", "0.1,0.9"], 2, ["--quantiles", "levy"]),
    (["small.csv", "--algorithm", "levy", "--quantile-mode", "fixed"], 2, ["--quantile-mode", "levy"]),
    (["small.csv", "--gamma", "0.3"], 2, ["--gamma", "quantile"]),
    (["small.csv", "--tau-k", "k"], 2, ["--tau-k", "quantile"]),
    (["small.csv", "--algorithm", "baseline", "--m-ub", "2"], 2, ["--m-ub", "baseline"]),
    (["small.csv", "--algorithm", "baseline", "--grouping", "wraparound"], 2, ["--grouping", "baseline"]),
    (["small.csv", "--quantile-mode", "eps-dependent", "--quantiles", "0.2,0.8"], 2, ["--quantiles", "eps-dependent"]),
    (["small.csv", "--algorithm", "median"], 2, ["--algorithm", "median"]),
    (["small.csv", "--grouping", "firstfit"], 2, ["--grouping", "firstfit"]),
    (["small.csv", "--value-out-of-range", "drop"], 2, ["--value-out-of-range", "drop"]),
    # rule 9: --group-by needs the per-group acknowledgement
    (["small.csv", "--group-by", "cell,slot"], 2, ["--group-by cell,slot", "--epsilon-per-group-ok"]),
    # slots and cells need their columns
    (["small.csv", "--time-col", "ts", "--group-by", "h3", "--epsilon-per-group-ok"], 4, ["--group-by", "'h3'"]),
    (["small.csv", "--slot", "2024-01-01T09:10"], 2, ["--slot", "2024-01-01T09:10", "not the start"]),
    (["small.csv", "--slot-length", "fortnight"], 2, ["--slot-length", "fortnight"]),
    # issue 17: the sampler options
    (["small.csv", "--sampler", "exact"], 2, ["--sampler", "'exact'"]),
    (["small.csv", "--granularity", "0.3"], 2, ["--granularity", "0.3", "power of two"]),
    (["small.csv", "--sampler", "float", "--granularity", "0.25"], 2, ["--granularity", "--sampler hardened"]),
    (["small.csv", "--algorithm", "array-averaging", "--granularity", "64"], 2,
     ["group", "--granularity 64", "Laplace scale"]),
])
def test_refusals(refuse, small, args, code, needles):
    Path("small.txt").write_text("x")  # an input of unknown type (rule 1)
    args = list(args)
    rest = SMALL_ARGS.copy()
    for flag in [a for a in args if a.startswith("--")]:
        if flag in rest:  # the test's value replaces the default one
            i = rest.index(flag)
            del rest[i:i + 2]
    refuse(["mean-estimate", args[0], *rest, *args[1:], "-o", "o.csv"], code, *needles)


@pytest.mark.parametrize("selection", [["--cell", "zz"], ["--slot", "2025-01-01T00:00"]])
def test_a_selected_hat_without_records_is_an_empty_row(tsdp_cli, small, tmp_path, selection):
    """Rule 5 under declared groups: --cell/--slot declare the one group, which gets its row even
    without records (public participation: an empty estimate, 0 users; the warning says so)."""
    result = run_ok(tsdp_cli, small, *SMALL_ARGS, *selection, "-o", "o.csv", "--json")
    table = pl.read_csv(tmp_path / "o.csv")
    assert table.height == 1 and table["estimate"][0] is None and table["users"][0] == 0
    assert "no records" in result.err and json.loads(result.out)["groups"] == 1


def test_missing_upper_is_refused(refuse, small):
    args = [a for a in SMALL_ARGS]
    i = args.index("--upper")
    del args[i:i + 2]
    refuse(["mean-estimate", small, *args, "-o", "o.csv"], 2, "--upper")


def test_null_user_and_nan_value(refuse, tmp_path):
    (tmp_path / "nulls.csv").write_text(SMALL.replace("b,2024-01-01 09:20:00", ",2024-01-01 09:20:00"))
    refuse(["mean-estimate", "nulls.csv", *SMALL_ARGS, "-o", "o.csv"], 4, "--user-col", "'user'", "row 3")
    (tmp_path / "nan.csv").write_text(SMALL.replace("x,3", "x,NaN"))
    refuse(["mean-estimate", "nan.csv", *SMALL_ARGS, "-o", "o.csv"], 4, "'v'", "nan", "row 3")
    (tmp_path / "text.csv").write_text(SMALL.replace("x,3", "x,fast"))
    refuse(["mean-estimate", "text.csv", *SMALL_ARGS, "-o", "o.csv"], 4, "'v'", "'fast'", "row 3")
    (tmp_path / "time.csv").write_text(SMALL.replace("2024-01-01 09:20:00", "yesterday"))
    refuse(["mean-estimate", "time.csv", *SMALL_ARGS, "-o", "o.csv"], 4, "'ts'", "'yesterday'", "row 3")


def test_per_group_failure_names_the_group(refuse, tmp_path):
    # eps-dependent quantiles need ceil(2/eps) < K-bar/2: infeasible in group cell='x' (K-bar = 2)
    (tmp_path / "few.csv").write_text(SMALL)
    refuse(["mean-estimate", "few.csv", *SMALL_ARGS, "--quantile-mode", "eps-dependent", "--group-by", "cell",
            "--epsilon-per-group-ok", "-o", "o.csv"], 2, "group cell='x'", "fixed")


@pytest.mark.parametrize("algorithm", ["array-averaging", "levy", "quantile"])
def test_sampler_float_warns_and_hardened_states_its_lattice(tsdp_cli, itms, tmp_path, algorithm):
    """--sampler float: the do-not-publish warning (stderr and report), verify fails its sampler check;
    the default hardened run names sampler, granularity rule and theorem, its estimates lie on their
    groups' lattices; LEVY's private median and QUANTILE's private quantiles are sampled exactly and
    say so."""
    base = [itms, *BASE, *HAT, "--algorithm", algorithm]
    flt = run_ok(tsdp_cli, *base, "-o", "f.csv", "--sampler", "float")
    assert "--sampler float" in flt.err and "must not be published" in flt.err
    report = json.loads((tmp_path / "f.report.json").read_text())
    assert report["claim"]["parameters"]["sampler"] == "float"
    assert any("--sampler float" in w for w in report["warnings"])
    assert tsdp_cli("account", "verify", tmp_path / "f.report.json").code == 3
    hard = run_ok(tsdp_cli, *base, "-o", "h.csv", "--no-clip")
    assert "--sampler float" not in hard.err
    report = json.loads((tmp_path / "h.report.json").read_text())
    params = report["claim"]["parameters"]
    assert params["sampler"] == "hardened" and "2^-20" in params["granularity_rule"]
    assert "Canonne, Kamath and Steinke 2020" in report["claim"]["theorem"]
    assert "floating-point" not in hard.err
    assert params.get("selection_sampler", "").split(":")[0] == {"levy": "exact", "quantile": "exact"}.get(
        algorithm, "")
    assert ("sampled exactly" in report["claim"]["theorem"]) == (algorithm in ("levy", "quantile"))
    if algorithm == "quantile":
        assert params["selection_lattice"] == 2.0 ** -14  # the largest power of two <= 65 / 2^20
    table = pl.read_csv(tmp_path / "h.csv")
    if algorithm == "array-averaging":
        (event,) = report["claim"]["events"]
        assert event["kind"] == "discrete-laplace" and event["noise"] == table["laplace_scale"][0]
        assert (table["estimate"][0] / event["granularity"]).is_integer()
    assert report["accuracy"]["exact"] is False
    assert tsdp_cli("account", "verify", tmp_path / "h.report.json").code == 0
    # one edited field of the selection statement fails verify
    edits = [("selection_sampler", "float: edited"), ("selection_sampler", None)]
    if algorithm == "quantile":
        edits.append(("selection_lattice", 0.5))
    if algorithm == "array-averaging":
        edits = [("selection_sampler", "exact: edited")]
    for field, value in edits:
        edited = json.loads((tmp_path / "h.report.json").read_text())
        edited["claim"]["parameters"][field] = value
        (tmp_path / "e.report.json").write_text(json.dumps(edited))
        assert tsdp_cli("account", "verify", tmp_path / "e.report.json").code == 3, (field, value)

"""Accuracy a steward can see (issue 15): summaries, reports, dry runs, plans, the noisy warning,
plots, and mean-estimate's post-processing."""

from __future__ import annotations

import json
from datetime import datetime, timedelta

import numpy as np
import polars as pl
import pytest

from tsdp.report import load_report

T0 = datetime(2024, 1, 1)
GAUSS = ["--epsilon", "1", "--delta", "1e-6", "--unit", "event", "--max-per-step", "1"]  # the panels hold non-integer values
LONG = ["--series-col", "sensor", "--value-col", "count"]
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def unwrapped(out: str) -> str:
    """The human summary's text with the table's borders and line wrapping taken out."""
    return " ".join(out.replace("│", " ").split())


def panel(path, scale: float, seed: int = 0, n_series: int = 3, n_steps: int = 48):
    """A long panel whose counts are around ``scale``."""
    rng = np.random.default_rng(seed)
    rows = [(f"s{s}", T0 + timedelta(hours=h), float(scale * (1 + rng.random())))
            for s in range(n_series) for h in range(n_steps)]
    pl.DataFrame(rows, schema=["sensor", "time", "count"], orient="row").write_csv(path)
    return path


def test_release_summary_json_and_report_carry_the_accuracy(tsdp_cli, tmp_path):
    panel(tmp_path / "in.csv", 1000)
    human = tsdp_cli("release", "in.csv", *GAUSS, *LONG, "-o", "a.csv")
    assert human.code == 0, human.err
    # the default hardened sampler's lattice makes the interval a bound ("at least"), wider by g
    text = unwrapped(human.out)  # the table wraps long values at the terminal's width
    assert "each cell within ±" in text and "with at least 95% probability (noise only)" in text
    run = tsdp_cli("release", "in.csv", *GAUSS, *LONG, "-o", "b.csv", "--json", "--alpha", "0.1")
    summary = json.loads(run.out)
    sigma = summary["noise"]["sigma"]
    report = load_report(str(tmp_path / "b.report.json"))  # validates against the schema
    g = report["claim"]["parameters"]["granularity"]
    assert summary["accuracy"]["half_width"] == pytest.approx(1.6448536269514722 * sigma + g, rel=1e-12)
    assert summary["accuracy"]["alpha"] == 0.1 and summary["accuracy"]["exact"] is False
    assert report["accuracy"]["half_width"] == summary["accuracy"]["half_width"]
    assert report["accuracy"]["covers"].startswith("noise only")
    verify = tsdp_cli("account", "verify", "b.report.json", "--output", "b.csv", "-q")
    assert verify.code == 0, verify.err


def test_accuracy_for_sum_and_its_refusal(tsdp_cli, tmp_path, refuse):
    panel(tmp_path / "in.csv", 1000)
    run = tsdp_cli("release", "in.csv", *GAUSS, *LONG, "-o", "a.csv", "--json", "--accuracy-for", "sum")
    summary = json.loads(run.out)
    assert summary["accuracy"]["target"] == "sum"
    g = json.loads((tmp_path / "a.report.json").read_text())["claim"]["parameters"]["granularity"]
    assert summary["accuracy"]["half_width"] == pytest.approx(
        1.959963984540054 * summary["noise"]["sigma"] * 48 ** 0.5 + 48 * g, rel=1e-12)
    refuse(["release", "in.csv", "--mechanism", "fast", "--epsilon", "1", "--unit", "event", *LONG,
            "--accuracy-for", "sum", "-o", "f.csv"], 2, "--accuracy-for sum")
    refuse(["release", "in.csv", *GAUSS, *LONG, "--alpha", "1.5", "-o", "f.csv"], 2, "--alpha")


@pytest.mark.parametrize("extra", [[], ["--mechanism", "dft", "--dft-k", "5"],
                                   ["--mechanism", "subsample", "--sampling-rate", "0.5", "--unit", "user",
                                    "--max-steps", "4"]])
def test_dry_run_reads_no_values_and_writes_nothing(tsdp_cli, tmp_path, dir_snapshot, extra):
    """Same schema, series and grid, different values: identical output; no file appears."""
    panel(tmp_path / "one.csv", 5)
    panel(tmp_path / "two.csv", 5000, seed=9)
    base = ["--epsilon", "1", "--delta", "1e-6", *LONG] + (extra or ["--unit", "event"])
    if "--unit" not in base:
        base += ["--unit", "event"]
    before = dir_snapshot(tmp_path)
    outs = [tsdp_cli("release", name, *base, "--dry-run", "--json", "-o", "x.csv") for name in ("one.csv", "two.csv")]
    assert all(r.code == 0 for r in outs), [r.err for r in outs]
    assert outs[0].out == outs[1].out and outs[0].err == outs[1].err
    assert json.loads(outs[0].out)["accuracy"]["half_width"] > 0
    assert dir_snapshot(tmp_path) == before


def test_dry_run_charges_no_ledger(tsdp_cli, tmp_path):
    panel(tmp_path / "in.csv", 100)
    assert tsdp_cli("ledger", "init", "b.db", "--dataset", "d", "--epsilon", "1", "--delta", "1e-5").code == 0
    run = tsdp_cli("release", "in.csv", *GAUSS, *LONG, "--dry-run", "--ledger", "b.db", "--dataset", "d")
    assert run.code == 0, run.err
    shown = tsdp_cli("ledger", "show", "b.db", "--json")
    assert "release" not in shown.out


def test_dry_run_of_events_does_not_open_the_input(tsdp_cli, tmp_path):
    args = ["--layout", "events", "--user-col", "u", "--time-col", "t", "--series-col", "st", "--series-keys", "a,b",
            "--start", "2024-03-04", "--end", "2024-03-05", "--freq", "1h", "--epsilon", "1", "--delta", "1e-6",
            "--unit", "user", "--max-steps", "3", "--dry-run", "--json"]
    run = tsdp_cli("release", "missing.csv", *args)
    assert run.code == 0, run.err
    summary = json.loads(run.out)
    assert summary["series"] == 2 and summary["steps"] == 24


def test_mean_and_forecast_dry_runs_are_value_free(tsdp_cli, tmp_path):
    for name, shift in (("a.csv", 0.0), ("b.csv", 30.0)):
        rows = [(f"u{u}", T0 + timedelta(minutes=m), 10.0 + shift + (u * m) % 7) for u in range(20) for m in range(5)]
        pl.DataFrame(rows, schema=["user", "time", "speed"], orient="row").write_csv(tmp_path / name)
    mean = ["--user-col", "user", "--value-col", "speed", "--upper", "65", "--epsilon", "1", "--dry-run", "--json",
            "--participation", "public"]
    a, b = (tsdp_cli("mean-estimate", n, *mean) for n in ("a.csv", "b.csv"))
    assert a.code == 0 and a.out == b.out
    assert "for a group of n arrays" in json.loads(a.out)["accuracy"]["statement"]
    panel(tmp_path / "p1.csv", 5, n_steps=200)
    panel(tmp_path / "p2.csv", 500, seed=3, n_steps=200)
    fc = ["--time-col", "time", *LONG, "--context-length", "12", "--forecast-length", "4", "--model", "linear",
          "--batch-size", "1", "--noise-multiplier", "5", "--epsilon", "8", "--delta", "1e-4", "--dry-run", "--json"]
    a, b = (tsdp_cli("forecast-train", n, *fc) for n in ("p1.csv", "p2.csv"))
    assert a.code == 0, a.err
    # the training plan's step times are measured on this machine (synthetic windows, no data): the rest is equal
    untimed = [_without_timing(json.loads(r.out)) for r in (a, b)]
    assert untimed[0] == untimed[1] and untimed[0]["steps"] > 0
    assert untimed[0]["training_plan"]["rows"]
    assert not list(tmp_path.glob("*.report.json"))


def _without_timing(summary: dict) -> dict:
    plan = summary.get("training_plan")
    if plan:
        assert all(t.pop("seconds") > 0 for t in plan["step_times"])
        for row in plan["rows"] + [plan["recommended"]]:
            assert row.pop("seconds") > 0
    return summary


def test_plan_release_tabulates_accuracy_against_epsilon(tsdp_cli, tmp_path):
    panel(tmp_path / "in.csv", 100)
    run = tsdp_cli("plan", "release", "in.csv", "--delta", "1e-6", "--unit", "event", *LONG,
                   "--epsilon", "0.1,0.5,1,2,4", "--json")
    assert run.code == 0, run.err
    rows = json.loads(run.out)["rows"]
    assert [r["epsilon"] for r in rows] == [0.1, 0.5, 1, 2, 4]
    widths = [r["half_width"] for r in rows]
    assert widths == sorted(widths, reverse=True)  # more budget, less noise
    single = json.loads(tsdp_cli("release", "in.csv", *GAUSS, *LONG, "--dry-run", "--json").out)
    assert rows[2]["half_width"] == single["accuracy"]["half_width"]
    table = tsdp_cli("plan", "release", "in.csv", "--delta", "1e-6", "--unit", "event", *LONG, "--epsilon", "1,2")
    assert table.code == 0 and "half-width" in table.out
    assert not [p for p in tmp_path.iterdir() if p.name != "in.csv"]


def test_plan_refuses_bad_budgets(refuse, tmp_path):
    panel(tmp_path / "in.csv", 100)
    refuse(["plan", "release", "in.csv", "--delta", "1e-6", "--unit", "event", *LONG, "--epsilon", "1,x"], 2, "--epsilon")
    refuse(["plan", "release", "in.csv", "--delta", "1e-6", "--unit", "event", *LONG, "--epsilon", "1", "-o", "a.csv"],
           2, "-o")
    # an option of the command planned for: the error points to that command's help, as it would alone
    refuse(["plan", "release", "in.csv", "--delta", "1e-6", "--unit", "event", *LONG, "--epsilon", "1",
            "--alpah", "0.1"], 2, "--alpah", "--alpha", "(see 'tsdp release --help')")


def test_noisy_finding_goes_to_the_custodian_file_only(tsdp_cli, tmp_path):
    """Issue 33: whether the noise swamps the input's values is a function of the private data: the
    finding (with the input's median absolute cell) is in the custodian file, and stdout, stderr and
    the report are the same whichever way it comes out."""
    panel(tmp_path / "small.csv", 2)
    panel(tmp_path / "large.csv", 1000)
    noisy = tsdp_cli("release", "small.csv", *GAUSS, *LONG, "-o", "a.csv", "--json")
    clean = tsdp_cli("release", "large.csv", *GAUSS, *LONG, "-o", "b.csv", "--json")
    assert noisy.code == clean.code == 0 and noisy.err == clean.err == ""
    summaries = [json.loads(run.out) for run in (noisy, clean)]
    assert [s["warnings"] for s in summaries] == [[], []]
    assert [s["custodian_checks"] for s in summaries] == [["noisy"], ["noisy"]]
    findings = [json.loads((tmp_path / s["custodian"]).read_text())["warnings"] for s in summaries]
    assert [w["code"] for w in findings[0]] == ["noisy"] and findings[1] == []
    assert "noise swamps the signal" in findings[0][0]["message"] and "--epsilon" in findings[0][0]["message"]
    assert 2 <= findings[0][0]["figures"]["median_absolute_value"] <= 4  # counts 2 (1 + U(0, 1))
    report = (tmp_path / "a.report.json").read_text()
    assert "swamps" not in report and "median absolute" not in report
    human = tsdp_cli("release", "small.csv", *GAUSS, *LONG, "-o", "c.csv")
    assert human.code == 0 and "swamps" not in human.out + human.err and "noisy" in human.out


def test_fail_on_noisy_exits_3_and_writes_nothing(refuse, tsdp_cli, tmp_path):
    panel(tmp_path / "small.csv", 2)
    refuse(["release", "small.csv", *GAUSS, *LONG, "-o", "a.csv", "--fail-on-noisy"], 3, "--fail-on-noisy")
    panel(tmp_path / "smaller.csv", 1)  # its message names the public half-width, not the private median
    messages = [tsdp_cli("release", name, *GAUSS, *LONG, "-o", "a.csv", "--fail-on-noisy").err
                for name in ("small.csv", "smaller.csv")]
    assert messages[0] == messages[1] and "not shown" in messages[0]
    panel(tmp_path / "large.csv", 1000)
    assert tsdp_cli("release", "large.csv", *GAUSS, *LONG, "-o", "b.csv", "--fail-on-noisy", "-q").code == 0


def test_plot_is_a_png_and_is_refused_next_to_the_output(tsdp_cli, refuse, tmp_path):
    pytest.importorskip("matplotlib")
    panel(tmp_path / "in.csv", 100)
    (tmp_path / "figs").mkdir()
    (tmp_path / "out").mkdir()
    run = tsdp_cli("release", "in.csv", *GAUSS, *LONG, "-o", "out/r.csv", "--plot", "figs/r.png", "-q")
    assert run.code == 0, run.err
    assert (tmp_path / "figs" / "r.png").read_bytes()[:8] == PNG_MAGIC
    assert (tmp_path / "figs" / "r.png").stat().st_mode & 0o077 == 0  # owner only: unprotected data
    refuse(["release", "in.csv", *GAUSS, *LONG, "-o", "out/s.csv", "--plot", "out/s.png"], 2, "--plot", "UNPROTECTED")
    refuse(["release", "in.csv", *GAUSS, *LONG, "-o", "out/s.csv", "--plot", "out/s.report.json"], 2, "--plot")
    ok = tsdp_cli("release", "in.csv", *GAUSS, *LONG, "-o", "out/t.csv", "--plot", "out/t.unprotected.png", "-q")
    assert ok.code == 0 and (tmp_path / "out" / "t.unprotected.png").read_bytes()[:8] == PNG_MAGIC
    plan = tsdp_cli("plan", "release", "in.csv", "--delta", "1e-6", "--unit", "event", *LONG, "--epsilon", "1,4",
                    "--plot", "figs/plan.png", "-q")
    assert plan.code == 0 and (tmp_path / "figs" / "plan.png").read_bytes()[:8] == PNG_MAGIC


def test_plot_without_matplotlib_names_the_extra(refuse, tmp_path, monkeypatch):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "matplotlib" else real(name, *a))
    panel(tmp_path / "in.csv", 100)
    refuse(["release", "in.csv", *GAUSS, *LONG, "-o", "a.csv", "--plot", "elsewhere.unprotected.png"], 2, "tsdp[plot]")


def _records(path, n_users=40):
    rows = [(f"u{u}", T0 + timedelta(minutes=m), 30.0 + (u % 5)) for u in range(n_users) for m in range(10)]
    pl.DataFrame(rows, schema=["user", "time", "speed"], orient="row").write_csv(path)


def test_mean_estimate_clips_rounds_and_states_accuracy(tsdp_cli, tmp_path):
    _records(tmp_path / "r.csv", n_users=3)  # few users: large noise, so clipping matters
    args = ["r.csv", "--user-col", "user", "--value-col", "speed", "--upper", "65", "--epsilon", "0.05",
            "--algorithm", "array-averaging", "--seed", "1", "--participation", "public"]
    raw = tsdp_cli("mean-estimate", *args, "--no-clip", "-o", "raw.csv", "--json")
    clipped = tsdp_cli("mean-estimate", *args, "-o", "clipped.csv", "--json")
    assert raw.code == 0 and clipped.code == 0, raw.err
    raw_value = pl.read_csv(tmp_path / "raw.csv")["estimate"][0]
    value = pl.read_csv(tmp_path / "clipped.csv")["estimate"][0]
    assert value == min(max(raw_value, 0.0), 65.0) and not (0 <= raw_value <= 65)
    accuracy = json.loads(clipped.out)["accuracy"]
    assert accuracy["half_width"] == pytest.approx(pl.read_csv(tmp_path / "raw.csv")["laplace_scale"][0] * np.log(20))
    assert load_report(str(tmp_path / "clipped.report.json"))["accuracy"]["target"] == "group"
    rounded = tsdp_cli("mean-estimate", *args, "-o", "round.parquet", "--round", "-q")
    assert rounded.code == 0
    column = pl.read_parquet(tmp_path / "round.parquet")["estimate"]
    assert column.dtype == pl.Int64
    assert tsdp_cli("mean-estimate", *args, "-o", "round2.csv", "--round", "-q").code == 0
    assert "." not in (tmp_path / "round2.csv").read_text().splitlines()[1].split(",")[0]


def test_release_round_writes_integers(tsdp_cli, tmp_path):
    """--round writes whole numbers as integers (Int64), not 11.0, in Parquet and in CSV."""
    panel(tmp_path / "in.csv", 1000)
    for name in ("r.parquet", "r.csv"):
        run = tsdp_cli("release", "in.csv", *GAUSS, *LONG, "--round", "-o", name, "--report", name + ".report.json",
                       "--custodian", name + ".custodian.NOT-FOR-PUBLICATION.json")
        assert run.code == 0, run.err
    assert pl.read_parquet(tmp_path / "r.parquet").schema["count"] == pl.Int64
    counts = [line.split(",")[-1] for line in (tmp_path / "r.csv").read_text().splitlines()[1:]]
    assert counts and all(c.lstrip("-").isdigit() for c in counts), counts[:5]

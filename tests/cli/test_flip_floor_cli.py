"""``tsdp flip`` never publishes a date below the floor its report states (issue 33, part 1).

On real public data (statsmodels' macrodata: US real consumption given real GDP, 203 quarters) and on
the README's own FLIP example: every released date's same-date LIP (the custodian file's
``lip_applied``, the lowest over the released dates) is at least the claim's ``lip_floor``; the dates
written empty are the ones the report lists (``output.withheld``); a series with no date at the floor is
refused, naming the option that releases dates below it knowingly; ``account verify`` rejects a report
whose stated floor was raised; and nothing computed from the private series reaches stderr, stdout or
the report (two inputs of the same shape print and report the same apart from the released values).
"""

from __future__ import annotations

import datetime as dt
import json
import re
import shlex
from pathlib import Path

import numpy as np
import polars as pl
import pytest

ROOT = Path(__file__).resolve().parents[2]
ISSUE_RUN = ["--time-col", "date", "--value-cols", "realcons", "--aux-cols", "realgdp", "--lip-delta", "0.1",
             "--withhold-ends", "45"]


@pytest.fixture
def macro(tmp_path, monkeypatch) -> Path:
    """statsmodels' macrodata as the issue wrote it: date (quarter starts), realcons, realgdp."""
    from statsmodels.datasets import macrodata

    data = macrodata.load_pandas().data
    dates = [dt.date(int(y), 3 * int(q) - 2, 1) for y, q in zip(data["year"], data["quarter"])]
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "macro.csv"
    pl.DataFrame({"date": dates, "realcons": data["realcons"].to_numpy(),
                  "realgdp": data["realgdp"].to_numpy()}).write_csv(path)
    return path


def read(path) -> dict:
    return json.loads(Path(path).read_text())


def stated_floor(report: dict) -> float:
    """The same-date LIP floor the report's claim states (a report without lip_floor claimed the ideal
    filter's 1 - lip_budget_delta for every date it released)."""
    params = report["claim"]["parameters"]
    return params.get("lip_floor", 1.0 - params["lip_budget_delta"])


def assert_no_released_date_below_the_stated_floor(output: str, value_col: str = "realcons") -> None:
    stem = output.removesuffix(".csv")
    report, rows = read(f"{stem}.report.json"), read(f"{stem}.custodian.NOT-FOR-PUBLICATION.json")
    floor = stated_floor(report)
    for row in rows["figures"]["lip_series"]:
        assert row["lip_applied"] >= floor, (
            f"a released date of {row['column']!r} has same-date LIP {row['lip_applied']:.4f} (date "
            f"{row['lip_applied_date']}) below the stated floor {floor:g}")
    # the report lists exactly the dates the output leaves empty
    table = pl.read_csv(output, try_parse_dates=True)
    empty = table.filter(pl.col(value_col).is_null())[table.columns[0]].to_list()
    listed = [entry for s in report["output"]["withheld"] for entry in s["withheld"]]
    times = [str(t) for t in table[table.columns[0]].to_list()]
    expanded = [t for first, last in listed for t in times[times.index(first):times.index(last) + 1]]
    assert expanded == [str(t) for t in empty]


def test_the_issue_run_publishes_nothing_it_cannot_back(tsdp_cli, macro):
    """Trend order 3: every date between the withheld ends is below 0.9 (the lowest 0.73 at date 138;
    the released cubic trend explains 24-61 % of each date's conditional variance), so there is nothing
    to release at the floor: exit 3, nothing written, the error names --lip-floor and --trend-order.
    (Main released all 113 dates with the claim LIP >= 0.9.)"""
    run = tsdp_cli("flip", macro, *ISSUE_RUN, "--trend-order", "3", "--seed", "1", "-o", "out.csv")
    assert run.code == 3, run.err
    assert "--lip-floor" in run.error_line and "--trend-order 3" in run.error_line
    assert not Path("out.csv").exists() and not Path("out.report.json").exists()
    assert not re.search(r"0\.[0-8]\d", run.error_line)  # no figure of the data, only the floor 0.9


def test_the_issue_run_at_trend_order_one_releases_only_dates_at_the_floor(tsdp_cli, macro):
    """Trend order 1: the 14 dates inside the released range below 0.9 are withheld too, not only the
    ends (main released them under the claim LIP >= 0.9: lowest 0.82)."""
    run = tsdp_cli("flip", macro, *ISSUE_RUN, "--trend-order", "1", "--seed", "1", "-o", "out.csv", "-q")
    assert run.code == 0, run.err
    assert_no_released_date_below_the_stated_floor("out.csv")
    report = read("out.report.json")
    assert report["claim"]["parameters"]["lip_floor"] == 0.9
    (series,) = report["output"]["withheld"]
    assert series["dates"] == 203 and 0 < series["released"] < 203 - 90


def test_a_lower_floor_releases_knowingly_and_the_claim_says_so(tsdp_cli, macro):
    """--lip-floor 0.7 at trend order 3: the dates at or above 0.7 are released, the claim states 0.7
    and says it is below the theorem's bound."""
    run = tsdp_cli("flip", macro, *ISSUE_RUN, "--trend-order", "3", "--lip-floor", "0.7", "--seed", "1",
                   "-o", "low.csv", "-q")
    assert run.code == 0, run.err
    assert_no_released_date_below_the_stated_floor("low.csv")
    claim = read("low.report.json")["claim"]["parameters"]
    assert claim["lip_floor"] == 0.7 and "BELOW the ideal filter's bound" in claim["guarantee"]


def test_a_raised_floor_is_rejected_by_verify(tsdp_cli, macro):
    run = tsdp_cli("flip", macro, *ISSUE_RUN, "--trend-order", "1", "-o", "out.csv", "-q")
    assert run.code == 0, run.err
    assert tsdp_cli("account", "verify", "out.report.json", "--released", "out.csv", "-q").code == 0
    report = read("out.report.json")
    for floor, words in ((0.95, False), (0.95, True), (0.8, True)):
        edited = json.loads(json.dumps(report))
        edited["claim"]["parameters"]["lip_floor"] = floor
        if words:  # the sentence rewritten to match: the recorded command still holds the dates to 0.9
            from tsdp.flip.withholding import guarantee

            edited["claim"]["parameters"]["guarantee"] = edited["lip"]["guarantee"] = guarantee(floor, 0.1, False)
        Path("edited.report.json").write_text(json.dumps(edited))
        check = tsdp_cli("account", "verify", "edited.report.json", "--released", "out.csv", "--json", "-q")
        assert check.code == 3, (floor, words, check.err)
        failed = {c["name"]: c["detail"] for c in json.loads(check.out)["reports"][0]["checks"] if not c["passed"]}
        assert "command" in failed, failed
        if floor > 0.9:
            assert "exceeds 0.9" in failed["command"]


def readme_flip_example() -> list[str]:
    readme = (ROOT / "README.md").read_text()
    for block in re.findall(r"```sh\n(.*?)```", readme, re.S):
        for line in block.replace("\\\n", " ").splitlines():
            if line.startswith("tsdp flip "):
                return shlex.split(line)[1:]
    raise AssertionError("the README has no tsdp flip example")


def test_the_readme_example_publishes_no_date_below_its_stated_floor(tsdp_cli, tmp_path, monkeypatch):
    """The README's FLIP example (QWI, trend order 3, M = 25, lip_delta 0.1): main released 12 dates
    below 0.9 (the lowest 0.58) under the claim LIP >= 0.9."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "sample_data").symlink_to(ROOT / "sample_data")
    args = readme_flip_example()
    run = tsdp_cli(*args, "-q")
    assert run.code == 0, run.err
    output = args[args.index("-o") + 1]
    assert_no_released_date_below_the_stated_floor(output, "ca_asian")
    rows = read(output.removesuffix(".csv") + ".custodian.NOT-FOR-PUBLICATION.json")["figures"]["lip_series"]
    assert rows[0]["lip_dates_below_floor"] > 0  # (the example does withhold dates)


# ------------------------------------------------------------------- nothing private in public outputs


def two_inputs(root: Path) -> list[Path]:
    """The same public shape (120 quarters, the same names) in two directories, other values: a
    persistent trending series with a seasonal pattern (dates below the floor, model warnings) and
    near-white noise."""
    quarters = [dt.date(1990 + k // 4, 3 * (k % 4) + 1, 1) for k in range(120)]
    rng = np.random.default_rng(33)
    trend = np.linspace(0, 6, 120) ** 2
    persistent = 50 + trend + np.cumsum(rng.normal(size=120)) * 0.5 + 3 * np.tile([1.0, -1.0, 1.0, -1.0], 30)
    white = 50 + rng.normal(size=120)
    paths = []
    for name, values in (("private0", persistent), ("private1", white)):
        (root / name).mkdir()
        aux = 0.5 * values + rng.normal(size=120)
        pl.DataFrame({"quarter": quarters, "v": values, "z": aux}).write_csv(root / name / "in.csv")
        paths.append(root / name)
    return paths


@pytest.mark.parametrize("mode", [["--json", "--quiet"], []], ids=["json-quiet", "human"])
def test_stdout_stderr_and_report_do_not_depend_on_the_private_values(tsdp_cli, tmp_path, monkeypatch, mode):
    """Main printed each series' warnings with their figures (dates below the floor, the lowest LIP and
    its date, the seasonal peak ratio) on stderr and in --json, and the report counted the series
    carrying warnings."""
    monkeypatch.setenv("COLUMNS", "300")
    seen = []
    for where in two_inputs(tmp_path):
        monkeypatch.chdir(where)
        run = tsdp_cli("flip", "in.csv", "--time-col", "quarter", "--value-cols", "v", "--aux-cols", "z",
                       "--trend-order", "1", "--lip-delta", "0.1", "--seed", "3",
                       "-o", "out.csv", *mode)
        assert run.code == 0, run.err
        report = read("out.report.json")
        report.pop("created")
        report["output"].pop("sha256")
        report["output"].pop("withheld", None)  # the release's missing pattern (the output's empty cells)
        custodian = read("out.custodian.NOT-FOR-PUBLICATION.json")
        seen.append((run.out.replace(str(where), "<dir>"), run.err.replace(str(where), "<dir>"),
                     json.dumps(report, sort_keys=True, indent=1),
                     [w for row in custodian["figures"]["lip_series"] for w in row["warnings"]]))
    (out_a, err_a, report_a, found_a), (out_b, err_b, report_b, found_b) = seen
    assert found_a != found_b  # the custodian files record other findings: the comparison is not vacuous
    assert err_a == err_b
    assert out_a == out_b
    assert report_a == report_b

"""A release of values that are not counts needs an explicit per-step bound (issue 33, section 3).

``--max-per-step`` used to default to 1 whatever the values' scale, so a level series in ppm or
thousands of jobs was released protecting "one event", a unit that means nothing for it. Without
``--max-per-step``, series input must hold whole numbers (counts, one per unit and cell); otherwise
the run stops with exit 2 naming the option, before any noise is drawn, and its message carries no
figure of the data (two inputs of one shape give the same error line).
"""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest

from tsdp.engine import series_stream
from tsdp.errors import UsageError

ROOT = Path(__file__).resolve().parents[2]
QWI = str(ROOT / "sample_data/qwi_quarterly.csv")
GAUSS = ["--epsilon", "1", "--delta", "1e-6", "--unit", "event"]


def long_panel(path: Path, values: list[float]) -> Path:
    n = len(values) // 2
    times = [f"2024-01-01 {h:02d}:00:00" for h in range(n)]
    pl.DataFrame({"sensor": ["a"] * n + ["b"] * n, "time": times * 2, "count": values}).write_csv(path)
    return path


def test_a_level_series_without_max_per_step_is_refused(refuse):
    line = refuse(["release", QWI, "--time-col", "quarter", "--freq", "1q", *GAUSS, "-o", "q.csv"], 2,
                  "--max-per-step", "not all whole numbers", "Choosing your unit")
    assert "ca_white" not in line  # which column holds fractions is not said


@pytest.mark.parametrize("fmt", ["csv", "parquet"])
def test_float_values_are_refused_with_the_same_line_whatever_they_are(refuse, tmp_path, fmt):
    lines = []
    for k, values in enumerate(([1.5, 2.0, 3.0, 4.0, 5.0, 6.0], [1.0, 2.0, 3.0, 4.0, 5.0, 1e6 + 0.25])):
        path = long_panel(tmp_path / f"p{k}.csv", values)
        if fmt == "parquet":
            pl.read_csv(path).write_parquet(tmp_path / f"p{k}.parquet")
            path.unlink()
            path = tmp_path / f"p{k}.parquet"
        lines.append(refuse(["release", path, "--series-col", "sensor", "--value-col", "count", *GAUSS,
                             "-o", f"o{k}.csv"], 2, "--max-per-step", "--value-col 'count'"))
    assert lines[0] == lines[1].replace("p1", "p0")


def test_counts_need_no_bound_and_the_report_records_the_default(tsdp_cli, tmp_path):
    """Whole numbers are counts, in a float column too (CSV numbers are read as floats)."""
    path = long_panel(tmp_path / "c.csv", [1.0, 2.0, 3.0, 4.0, 5.0, 6.0])
    run = tsdp_cli("release", path, "--series-col", "sensor", "--value-col", "count", *GAUSS, "-o", "c_out.csv")
    assert run.code == 0, run.err
    report = json.loads((tmp_path / "c_out.report.json").read_text())
    assert report["command"]["parameters"]["max_per_step"] == 1.0 and report["claim"]["unit"]["max_per_step"] == 1.0
    verify = tsdp_cli("account", "verify", tmp_path / "c_out.report.json", "--released", tmp_path / "c_out.csv")
    assert verify.code == 0, verify.out


def test_an_explicit_bound_releases_a_level_series(tsdp_cli, tmp_path):
    run = tsdp_cli("release", QWI, "--time-col", "quarter", "--freq", "1q", *GAUSS, "--max-per-step", "5",
                   "-o", "q.csv", "--json")
    assert run.code == 0, run.err
    assert json.loads((tmp_path / "q.report.json").read_text())["claim"]["unit"]["max_per_step"] == 5.0


def test_allow_negative_needs_a_bound_before_the_data_is_read(refuse, tmp_path):
    path = long_panel(tmp_path / "n.csv", [1.0, 2.0, 3.0, 4.0, 5.0, 6.0])
    refuse(["release", path, "--series-col", "sensor", "--value-col", "count", *GAUSS, "--allow-negative",
            "-o", "n_out.csv"], 2, "--max-per-step", "--allow-negative")


def test_streamed_release_refuses_too(refuse, tmp_path, monkeypatch):
    monkeypatch.setattr(series_stream, "streamable", lambda *args: True)
    path = long_panel(tmp_path / "s.csv", [1.5, 2.0, 3.0, 4.0, 5.0, 6.0])
    refuse(["release", path, "--series-col", "sensor", "--value-col", "count", *GAUSS, "-o", "s_out.csv"], 2,
           "--max-per-step")


def test_events_and_integer_columns_need_no_bound(tsdp_cli, tmp_path):
    traffic = ["release", str(ROOT / "sample_data/traffic_hourly_wide.csv"), "--mechanism", "laplace",
               "--epsilon", "0.5", "--unit", "event", "-q"]
    assert tsdp_cli(*traffic, "-o", "w.csv").code == 0
    events = ["release", str(ROOT / "sample_data/events.csv"), "--user-col", "user_id", "--time-col", "timestamp",
              "--start", "2024-03-04", "--end", "2024-03-18", "--freq", "1d", *GAUSS, "-q", "-o", "e.csv"]
    assert tsdp_cli(*events).code == 0


def test_dry_run_states_its_assumption(tsdp_cli):
    run = tsdp_cli("release", QWI, "--time-col", "quarter", "--freq", "1q", *GAUSS, "--dry-run", "--json")
    assert run.code == 0, run.err
    messages = [w["message"] for w in json.loads(run.out)["warnings"]]
    assert any("--max-per-step not given" in m and "assumes counts" in m for m in messages)
    explicit = tsdp_cli("release", QWI, "--time-col", "quarter", "--freq", "1q", *GAUSS, "--max-per-step", "5",
                        "--dry-run", "--json")
    assert not any("--max-per-step" in w["message"] for w in json.loads(explicit.out)["warnings"])


def test_python_api_refuses_floats_without_a_bound():
    import tsdp

    frame = pl.DataFrame({"time": [1, 2, 3, 4], "level": [0.5, 1.25, 2.0, 3.0]})
    with pytest.raises(UsageError, match="--max-per-step is required"):
        tsdp.release(frame, epsilon=1.0, delta=1e-6, unit="event", freq="1")
    released, report = tsdp.release(frame, epsilon=1.0, delta=1e-6, unit="event", freq="1", max_per_step=2.0,
                                    seed=1)
    assert report.claim.unit.max_per_step == 2.0


def guide_examples() -> list[list[str]]:
    import re
    import shlex

    readme = (ROOT / "README.md").read_text()
    section = readme.split("### Choosing your unit", 1)[1].split("\n### ", 1)[0]
    blocks = re.findall(r"```sh\n(.*?)```", section, re.S)
    return [shlex.split(line)[1:] for block in blocks for line in block.replace("\\\n", " ").splitlines()
            if line.startswith("tsdp ")]


def test_the_readme_guide_runs_one_example_per_kind(tsdp_cli, tmp_path):
    """Counts, a level series and totals of firms: each README example releases, and the level series
    without its --max-per-step is refused."""
    for name in ("sample_data", "configs"):
        (tmp_path / name).symlink_to(ROOT / name)
    examples = guide_examples()
    assert len(examples) == 3
    for args in examples:
        run = tsdp_cli(*args, "-q")
        assert run.code == 0, (args, run.err)
    level = examples[1]
    i = level.index("--max-per-step")
    refused = tsdp_cli(*level[:i], *level[i + 2:], "--force")
    assert refused.code == 2 and "--max-per-step is required" in refused.error_line

"""Series with gaps (issue 29): the policies of release, flip and forecast-train, and the dry runs.

* release ``--fill-missing null``: the cells the input lacks are published as missing; the cells
  present get exactly the noise a ``--fill-missing zero`` release would give them (the claim is the
  same), and the missing pattern is stated in the claim as treated-as-public.
  ``--interpolate-released``: interior missing steps hold the linear interpolation of the released
  values around them (post-processing), never of the raw data.
* ``--dry-run`` and ``plan`` see missing steps in the public shape: refused as the release would
  refuse them under ``--fill-missing error``, stated with the policy otherwise.
* flip ``--fill-missing null``: each series is cut at its gaps and every stretch is filtered alone:
  the release of a stretch does not depend on the data of another.
* forecast-train ``--fill-missing null``: no window touching a missing step is trained on, and the
  accountant's length is set by the fewest admissible windows (tests/forecast/test_sampling_gaps.py
  checks the sampler and the accountant's assumption).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import polars as pl
import pytest

REPO = Path(__file__).resolve().parents[2]
HOURS = [f"2024-01-01 {h:02d}:00:00" for h in range(24)]
GAUSS = ["--mechanism", "gaussian", "--epsilon", "1", "--delta", "1e-6", "--unit", "event"]
ABSENT = (5, 6, 11)  # hours without a row in the wide file


def wide_with_gaps(path="gap.csv", empty=()):
    """Hourly levels of two series with the hours ABSENT missing and the (hour, column) ``empty``
    cells left empty."""
    lines = ["time,a,b"]
    for h, t in enumerate(HOURS):
        if h in ABSENT:
            continue
        a = "" if (h, "a") in empty else 400 + h
        b = "" if (h, "b") in empty else 300 - h
        lines.append(f"{t},{a},{b}")
    Path(path).write_text("\n".join(lines) + "\n")
    return path


def released(tsdp_cli, *args):
    run = tsdp_cli("release", *args, "--seed", "5", "-q")
    assert run.code == 0, run.err
    return run


# ---------------------------------------------------------------------------------------------
# release --fill-missing null
# ---------------------------------------------------------------------------------------------


def test_null_publishes_the_missing_cells_as_missing_and_the_others_as_zero_filling_would(tsdp_cli, tmp_path):
    wide_with_gaps(empty={(2, "b")})
    released(tsdp_cli, "gap.csv", *GAUSS, "--fill-missing", "zero", "-o", "zero.csv")
    released(tsdp_cli, "gap.csv", *GAUSS, "--fill-missing", "null", "-o", "null.csv")
    zero, null = pl.read_csv(tmp_path / "zero.csv"), pl.read_csv(tmp_path / "null.csv")
    assert null.height == 24 and null["time"].to_list() == zero["time"].to_list()
    missing = {(h, c) for h in ABSENT for c in "ab"} | {(2, "b")}
    for c in "ab":
        for h in range(24):
            if (h, c) in missing:
                assert null[c][h] is None
            else:
                assert null[c][h] == zero[c][h]  # the same noise on every cell present
    zero_claim = json.loads((tmp_path / "zero.report.json").read_text())["claim"]
    report = json.loads((tmp_path / "null.report.json").read_text())
    stated = report["claim"]["parameters"].pop("missing_cells")
    assert report["claim"] == zero_claim  # the noise, the unit and the budget are the zero release's
    assert stated["count"] == 7 and stated["policy"] == "null" and "treated as public" in stated["pattern"]
    assert "NOT protected" in stated["pattern"]
    assert any("7 cell(s) of the grid had no value" in n for n in report["notes"])


def test_null_release_verifies(tsdp_cli, tmp_path):
    wide_with_gaps()
    run = tsdp_cli("release", "gap.csv", *GAUSS, "--fill-missing", "null", "-o", "out.csv", "-q")
    assert run.code == 0, run.err
    verify = tsdp_cli("account", "verify", "out.report.json", "--released", "out.csv", "-q")
    assert verify.code == 0, verify.err


def test_interpolation_is_of_the_released_values(tsdp_cli, tmp_path):
    """Interior missing steps: the linear interpolation (by grid step) of the released neighbours;
    a leading or trailing gap stays empty; --round rounds the interpolated values too."""
    lines = ["series,time,value"]
    for s in "xy":
        for h, t in enumerate(HOURS):
            if (s == "x" and h in (0, 5, 6)) or (s == "y" and h in (22, 23)):
                continue
            lines.append(f"{s},{t},{100 + h}")
    (tmp_path / "long.csv").write_text("\n".join(lines) + "\n")
    common = ["long.csv", "--series-col", "series", "--value-col", "value", *GAUSS, "--fill-missing", "null"]
    released(tsdp_cli, *common, "-o", "null.csv")
    released(tsdp_cli, *common, "--interpolate-released", "-o", "interp.csv")
    released(tsdp_cli, *common, "--interpolate-released", "--round", "-o", "rounded.csv")
    null, interp = pl.read_csv(tmp_path / "null.csv"), pl.read_csv(tmp_path / "interp.csv")
    rounded = pl.read_csv(tmp_path / "rounded.csv")
    x_null, x_int = null["value"][:24].to_numpy(), interp["value"][:24].to_numpy()
    assert np.isnan(x_int[0])  # leading gap: nothing to interpolate from
    for h in (5, 6):
        expected = x_null[4] + (x_null[7] - x_null[4]) * (h - 4) / 3
        assert x_int[h] == pytest.approx(expected, rel=1e-12)
    present = ~np.isnan(x_null)
    np.testing.assert_array_equal(x_int[present], x_null[present])
    y_int = interp["value"][24:].to_numpy()
    assert np.isnan(y_int[22]) and np.isnan(y_int[23])  # trailing gap
    assert rounded["value"].dtype == pl.Int64
    assert rounded["value"][5] == round(float(x_int[5])) or abs(rounded["value"][5] - x_int[5]) <= 0.5 + 1e-9
    report = json.loads((tmp_path / "interp.report.json").read_text())
    assert "interpolation of the released values" in report["claim"]["parameters"]["missing_cells"]["released"]


def test_null_release_streamed_in_chunks_is_the_in_memory_one(tsdp_cli, tmp_path, monkeypatch):
    from tsdp.engine import series_stream

    lines = ["series,time,value"]
    for s in "pqrs":
        for h, t in enumerate(HOURS):
            if (s, h) not in (("q", 3), ("s", 0), ("s", 23)):
                lines.append(f"{s},{t},{h + ord(s)}")
    (tmp_path / "long.csv").write_text("\n".join(lines) + "\n")
    args = ["long.csv", "--series-col", "series", "--value-col", "value", *GAUSS, "--fill-missing", "null",
            "--interpolate-released"]
    released(tsdp_cli, *args, "-o", "memory.csv")
    monkeypatch.setattr(series_stream, "streamable", lambda *a, **k: True)
    monkeypatch.setattr(series_stream, "CHUNK_BYTES_PER_ROW", 1 << 40)  # as many chunks as it may cut
    released(tsdp_cli, *args, "-o", "streamed.csv")
    assert pl.read_csv(tmp_path / "streamed.csv").equals(pl.read_csv(tmp_path / "memory.csv"))
    report = json.loads((tmp_path / "streamed.report.json").read_text())
    assert report["claim"]["parameters"]["missing_cells"]["count"] == 3


@pytest.mark.parametrize("options, needles", [
    (["--mechanism", "dft", "--epsilon", "1", "--delta", "1e-6"], ["--fill-missing null", "--mechanism dft"]),
    (["--mechanism", "fast", "--epsilon", "1"], ["--fill-missing null", "--mechanism fast"]),
    ([*GAUSS[:6], "--interpolate-released", "--accuracy-for", "sum"], ["--accuracy-for sum", "--interpolate-released"]),
], ids=["dft", "fast", "sum"])
def test_null_refusals(refuse, tmp_path, options, needles):
    wide_with_gaps()
    refuse(["release", "gap.csv", *options, "--unit", "event", "--fill-missing", "null", "-o", "out.csv"], 2,
           *needles)


def test_interpolate_needs_null_and_raw_interpolation_is_refused(refuse, tmp_path):
    wide_with_gaps()
    refuse(["release", "gap.csv", *GAUSS, "--interpolate-released", "-o", "out.csv"], 2, "--interpolate-released",
           "--fill-missing null")
    refuse(["release", "gap.csv", *GAUSS, "--fill-missing", "interpolate", "-o", "out.csv"], 2, "--fill-missing",
           "'interpolate'")
    import tsdp
    from tsdp.errors import UsageError

    frame = pl.read_csv(tmp_path / "gap.csv", try_parse_dates=True)
    with pytest.raises(UsageError, match="before the noise.*--interpolate-released"):
        tsdp.release(frame, mechanism="gaussian", epsilon=1, delta=1e-6, unit="event", fill_missing="interpolate")


def test_null_is_refused_for_events(refuse, tmp_path):
    (tmp_path / "events.csv").write_text("user,time\nu1,2024-01-01 00:10:00\n")
    refuse(["release", "events.csv", "--layout", "events", "--user-col", "user", "--start", "2024-01-01", "--end",
            "2024-01-01 03:00:00", "--freq", "1h", *GAUSS[:-1], "user", "--max-steps", "2", "--fill-missing", "null",
            "-o", "out.csv"], 2, "--fill-missing null", "events")


# ---------------------------------------------------------------------------------------------
# dry runs and plan state the gaps
# ---------------------------------------------------------------------------------------------


def test_dry_run_refuses_missing_steps_as_the_release_does(tsdp_cli, refuse, tmp_path):
    """Before: the dry run reported the filled shape and exit 0, and the release then exited 4."""
    wide_with_gaps()
    real = tsdp_cli("release", "gap.csv", *GAUSS, "-o", "out.csv")
    assert real.code == 4
    line = refuse(["release", "gap.csv", *GAUSS, "--dry-run"], 4, "missing step")
    assert line == real.error_line
    plan = tsdp_cli("plan", "release", "--epsilon", "0.5,1", "--", "gap.csv", *GAUSS[:2], "--delta", "1e-6",
                    "--unit", "event")
    assert plan.code == 4 and plan.error_line == real.error_line


@pytest.mark.parametrize("policy", ["zero", "null"])
def test_dry_run_states_the_gaps_and_the_policy(tsdp_cli, tmp_path, policy):
    wide_with_gaps()
    run = tsdp_cli("release", "gap.csv", *GAUSS, "--fill-missing", policy, "--dry-run", "--json")
    assert run.code == 0, run.err
    summary = json.loads(run.out)
    assert summary["missing_cells"] == 6 and summary["fill_missing"] == policy
    [warning] = [w["message"] for w in summary["warnings"] if w["code"] == "missing_cells"]
    assert "misses 6 cell(s)" in warning and f"--fill-missing {policy}" in warning
    plan = tsdp_cli("plan", "release", "--epsilon", "0.5,1,2", "--json", "--", "gap.csv", *GAUSS[:2], "--delta",
                    "1e-6", "--unit", "event", "--fill-missing", policy)
    assert plan.code == 0, plan.err
    assert [w["message"] for w in json.loads(plan.out)["warnings"] if w["code"] == "missing_cells"] == [warning]  # once


def test_dry_run_of_a_complete_panel_says_nothing_of_gaps(tsdp_cli, tmp_path):
    (tmp_path / "full.csv").write_text("time,a\n" + "".join(f"{t},{h}\n" for h, t in enumerate(HOURS)))
    run = tsdp_cli("release", "full.csv", *GAUSS, "--dry-run", "--json")
    summary = json.loads(run.out)
    assert summary["missing_cells"] == 0 and not [w for w in summary["warnings"] if w["code"] == "missing_cells"]


# ---------------------------------------------------------------------------------------------
# flip --fill-missing null
# ---------------------------------------------------------------------------------------------


def qwi_with_gaps(path, drop=(40, 41), empty=70, change=None):
    """The sample QWI file with the dates at (0-based) data rows ``drop`` removed and ca_asian empty
    at row ``empty``; returns the dates kept."""
    rows = (REPO / "sample_data" / "qwi_quarterly.csv").read_text().splitlines()
    head, body = rows[0], [r.split(",") for r in rows[1:]]
    if change is not None:
        row, factor = change
        body[row][2] = str(float(body[row][2]) * factor)
    if empty is not None:
        body[empty][2] = ""
    kept = [",".join(r) for i, r in enumerate(body) if i not in drop]
    Path(path).write_text("\n".join([head, *kept]) + "\n")
    return [r[0] for i, r in enumerate(body) if i not in drop]


def quarter(i: int) -> str:
    return f"{1995 + i // 4}-{1 + 3 * (i % 4):02d}-01"


FLIP = ["--time-col", "quarter", "--value-cols", "ca_asian", "--aux-cols", "ca_white", "--seed", "3", "-q",
        "--lip-floor", "0"]  # every date released: the gaps alone decide what is empty


def test_flip_gaps_are_refused_naming_the_policy(refuse, tmp_path):
    qwi_with_gaps(tmp_path / "q.csv")
    refuse(["flip", "q.csv", *FLIP, "-o", "out.csv"], 4, "gap", "--fill-missing null")


def test_flip_null_releases_each_stretch_alone(tsdp_cli, tmp_path):
    """Dates 2005Q1-Q2 absent, 2012Q3 empty: three stretches, the empty date written empty, and a
    change of the data in the last stretch leaves the first two stretches' release unchanged."""
    dates = qwi_with_gaps(tmp_path / "q.csv")
    qwi_with_gaps(tmp_path / "q2.csv", change=(90, 1.5))
    for name in ("q", "q2"):
        run = tsdp_cli("flip", f"{name}.csv", *FLIP, "--fill-missing", "null", "-o", f"{name}_out.csv")
        assert run.code == 0, run.err
    one, two = pl.read_csv(tmp_path / "q_out.csv"), pl.read_csv(tmp_path / "q2_out.csv")
    assert one["quarter"].to_list() == dates and one.columns == ["quarter", "ca_asian"]
    empty = dates.index(quarter(70))
    assert one["ca_asian"][empty] is None and one["ca_asian"].null_count() == 1
    np.testing.assert_array_equal(one["ca_asian"][:empty].to_numpy(), two["ca_asian"][:empty].to_numpy())
    assert not np.allclose(one["ca_asian"][empty + 1:].to_numpy(), two["ca_asian"][empty + 1:].to_numpy())
    custodian = json.loads((tmp_path / "q_out.custodian.NOT-FOR-PUBLICATION.json").read_text())
    stretches = [(r["entity"], r["T"]) for r in custodian["figures"]["lip_series"]]
    assert stretches == [(f"[{quarter(0)} .. {quarter(39)}]", 40), (f"[{quarter(42)} .. {quarter(69)}]", 28),
                         (f"[{quarter(71)} .. {quarter(99)}]", 29)]
    report = json.loads((tmp_path / "q_out.report.json").read_text())
    assert any("cut at its gaps" in n and "treated as public" in n for n in report["notes"])


def test_flip_null_writes_a_stretch_too_short_empty(tsdp_cli, tmp_path):
    """2002Q3 absent and 2005Q1 empty leave a stretch of 9 dates between them: written empty."""
    dates = qwi_with_gaps(tmp_path / "q.csv", drop=(30,), empty=40)
    run = tsdp_cli("flip", "q.csv", *FLIP, "--fill-missing", "null", "-o", "out.csv")
    assert run.code == 0, run.err
    out = pl.read_csv(tmp_path / "out.csv")
    short = [dates.index(quarter(i)) for i in range(31, 40)]
    assert all(out["ca_asian"][i] is None for i in short)
    assert out["ca_asian"].null_count() == 10
    notes = json.loads((tmp_path / "out.report.json").read_text())["notes"]
    assert any("10 row(s) are written empty" in n for n in notes)


def test_flip_null_with_aux_entity_is_refused(refuse, tmp_path):
    (tmp_path / "p.csv").write_text("e,quarter,v\n" + "".join(f"{e},{1995 + i // 4}-{1 + 3 * (i % 4):02d}-01,{i}\n"
                                                             for e in "xy" for i in range(60)))
    refuse(["flip", "p.csv", "--time-col", "quarter", "--value-cols", "v", "--entity-col", "e", "--aux-entity", "x",
            "--fill-missing", "null", "-o", "out.csv"], 2, "--fill-missing null", "--aux-entity")


# ---------------------------------------------------------------------------------------------
# forecast-train --fill-missing null
# ---------------------------------------------------------------------------------------------


def panel_with_gaps(path, absent=((1, 30), (1, 31), (1, 77)), empty=((2, 50),), steps=240):
    lines = ["series,time,value"]
    for s in range(4):
        for h in range(steps):
            if (s, h) in absent:
                continue
            value = "" if (s, h) in empty else (h * (s + 3)) % 17
            lines.append(f"s{s},2024-01-{1 + h // 24:02d} {h % 24:02d}:00:00,{value}")
    Path(path).write_text("\n".join(lines) + "\n")


FORECAST = ["--series-col", "series", "--value-col", "value", "--context-length", "12", "--forecast-length", "6",
            "--model", "linear", "--batch-size", "2", "--noise-multiplier", "1.5", "--epsilon", "5", "--delta", "1e-5",
            "--steps", "20", "--test-windows", "1", "-q"]


def test_forecast_null_accounts_the_fewest_admissible_windows(tsdp_cli, tmp_path):
    """Series s1 misses hours 30, 31 and 77 and s2 hour 50: no training window touches them, and the
    accountant's length is T + L_F - 1 for the smallest number T of windows left (counted here by
    brute force); verify recomputes epsilon from it, and the dry run finds the same length."""
    panel_with_gaps(tmp_path / "p.csv")
    run = tsdp_cli("forecast-train", "p.csv", *FORECAST, "--fill-missing", "null", "-o", "fc.csv")
    assert run.code == 0, run.err
    train = 240 - 6 * (1 + 5)
    windows = []
    for s, holes in ((0, ()), (1, (30, 31, 77)), (2, (50,)), (3, ())):
        windows.append(sum(1 for start in range(train - 6 + 1)
                           if not any(max(0, start - 12) <= h < start + 6 for h in holes)))
    report = json.loads((tmp_path / "fc.report.json").read_text())
    assert report["grid"]["train_length"] == min(windows) + 6 - 1 < train
    assert report["claim"]["parameters"]["train_length"] == min(windows) + 6 - 1
    assert any("no training window touches one" in n and "treated as public" in n for n in report["notes"])
    verify = tsdp_cli("account", "verify", "fc.report.json", "-q")
    assert verify.code == 0, verify.err
    dry = tsdp_cli("forecast-train", "p.csv", *FORECAST, "--fill-missing", "null", "--dry-run", "--json")
    assert dry.code == 0, dry.err
    # the dry run sees the absent rows only (not the empty value of s2): its length is at least training's
    assert json.loads(dry.out)["train_length"] >= report["grid"]["train_length"]


def test_forecast_null_needs_the_held_out_steps_complete(refuse, tmp_path):
    panel_with_gaps(tmp_path / "p.csv", absent=((3, 230),), empty=())
    refuse(["forecast-train", "p.csv", *FORECAST, "--fill-missing", "null", "-o", "fc.csv"], 4, "'s3'",
           "held-out")


def test_forecast_gaps_without_a_policy_name_it(refuse, tmp_path):
    panel_with_gaps(tmp_path / "p.csv")
    refuse(["forecast-train", "p.csv", *FORECAST, "-o", "fc.csv"], 4, "--fill-missing null")
    refuse(["forecast-train", "p.csv", *FORECAST, "--dry-run"], 4, "--fill-missing null")

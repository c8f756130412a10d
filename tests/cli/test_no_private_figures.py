"""Issue 33: no figure computed from the private input reaches stdout, stderr or the report.

Every command runs twice, on two inputs of the same public shape (the same schema, series keys, time
grid, user set and per-user counts where the unit makes them public) whose values differ, chosen so
that the data-dependent checks come out differently (the noise swamps one input's values and not
the other's; one FLIP series has a seasonal peak and a near unit root, the other is white noise). Its
stdout, stderr and report must be identical apart from what is released (the values, their hashes),
timestamps and the directory: whatever the data made tsdp find is in the custodian file only. Each
run is made with ``--json --quiet`` (what CI keeps) and with the human summary and warnings.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from tsdp.caveats import CODES
from tsdp.cli.app import main

SEED = ["--seed", "3"]
HEX = re.compile(r"\b(?=[0-9a-f]*[a-f])[0-9a-f]{12,64}\b")  # a hash, not the digits of a number
STAMP = re.compile(r"\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(\.\d+)?([+-]\d\d:\d\d|Z)?")
# report keys whose values are released figures (noisy, or functions of the noise alone); FLIP's
# output.withheld is the release's missing pattern, which the output file shows anyway
RELEASED_KEYS = {"sha256", "created", "withheld"}


def _inputs(root: Path, variant: int) -> None:
    """The private inputs of one variant (0 or 1) under ``root``: same public shape, other values."""
    rng = np.random.default_rng(100 + variant)
    scale = (2, 5000)[variant]  # variant 0: values far below the noise; variant 1: far above it
    steps, series = 48, ["s1", "s2", "s3"]
    times = pl.datetime_range(pl.datetime(2024, 1, 1), pl.datetime(2024, 1, 2, 23), "1h", eager=True)
    wide = pl.DataFrame({"time": times, **{s: rng.poisson(scale, steps).astype(np.int64) for s in series}})
    wide.write_csv(root / "wide.csv")
    wide.unpivot(index="time", variable_name="sensor", value_name="count").write_csv(root / "long.csv")

    # events: the same users, each with the same number of events, at other times and stations
    users = np.repeat([f"u{i:02d}" for i in range(30)], 8)
    offsets = rng.integers(0, steps * 3600, users.size)
    stations = rng.choice(series, users.size)
    if variant:  # pile most events into a few busy hours: other counts, the same users and rows per user
        offsets = (offsets % (4 * 3600)) + 3600 * 10
    stamps = (np.datetime64("2024-01-01T00:00:00", "s") + offsets.astype("timedelta64[s]")).astype("datetime64[us]")
    pl.DataFrame({"user": users, "time": stamps, "station": stations}).write_csv(root / "events.csv")

    # FLIP: one entity; variant 0 a seasonal random walk (seasonal peak, near unit root), variant 1 white noise
    T = 120
    quarters = pl.date_range(pl.date(1990, 1, 1), pl.date(2019, 10, 1), "1q", eager=True)
    aux = rng.normal(size=T).cumsum() if not variant else rng.normal(size=T)
    value = (np.cumsum(rng.normal(size=T)) + 4 * np.tile([1.0, -1.0, 1.0, -1.0], T // 4)) if not variant \
        else rng.normal(size=T) + 0.3 * aux
    pl.DataFrame({"quarter": quarters, "value": value, "aux": aux}).write_csv(root / "flip.csv")

    # mean-estimate: the same users with the same records in the same cells (public counts), other values
    cells = np.tile(np.repeat(["c1", "c2", "c3"], 4), 20)
    buses = np.repeat([f"b{i:02d}" for i in range(20)], 12)
    speeds = rng.uniform(0, 2, buses.size) if not variant else rng.uniform(40, 60, buses.size)
    pl.DataFrame({"bus": buses, "cell": cells, "speed": speeds}).write_csv(root / "records.csv")

    # forecasting: 6 series of 60 hourly steps
    fc_times = pl.datetime_range(pl.datetime(2024, 1, 1), pl.datetime(2024, 1, 3, 11), "1h", eager=True)
    base = rng.normal(size=(6, 60)).cumsum(axis=1) * (1 + 50 * variant)
    pl.DataFrame({"time": fc_times, **{f"f{i}": base[i] for i in range(6)}}).write_csv(root / "panel.csv")


WIDE = ["wide.csv", "--unit", "event"]
LONG = ["long.csv", "--series-col", "sensor", "--value-col", "count", "--unit", "event"]
EVENTS = ["events.csv", "--layout", "events", "--user-col", "user", "--series-col", "station",
          "--series-keys", "s1,s2,s3", "--start", "2024-01-01T00:00:00", "--end", "2024-01-03T00:00:00",
          "--freq", "1h", "--unit", "user", "--max-per-step", "2", "--max-steps", "6"]
FLIP = ["flip.csv", "--time-col", "quarter", "--value-cols", "value", "--aux-cols", "aux", "--lip-delta", "0.1",
        "--grid", "1024"]
MEAN = ["records.csv", "--user-col", "bus", "--value-col", "speed", "--cell-col", "cell", "--group-by", "cell",
        "--epsilon-per-group-ok", "--upper", "65", "--epsilon", "0.2"]
FORECAST = ["panel.csv", "--layout", "wide", "--context-length", "6", "--forecast-length", "3", "--model", "linear",
            "--batch-size", "4", "--noise-multiplier", "1.0", "--delta", "1e-3", "--steps", "4", "--val-windows", "1"]

# name -> (command line, the report it writes or None)
RUNS: dict[str, tuple[list[str], str | None]] = {
    "release gaussian wide": (["release", *WIDE, "--epsilon", "0.5", "--delta", "1e-6", "-o", "g.csv", *SEED],
                              "g.report.json"),
    "release laplace long": (["release", *LONG, "--mechanism", "laplace", "--epsilon", "0.5", "-o", "l.csv", *SEED],
                             "l.report.json"),
    "release gaussian events": (["release", *EVENTS, "--epsilon", "0.5", "--delta", "1e-6", "-o", "e.csv", *SEED],
                                "e.report.json"),
    "release dft": (["release", *WIDE, "--mechanism", "dft", "--dft-k", "5", "--epsilon", "0.5", "--delta", "1e-6",
                     "-o", "d.csv", *SEED], "d.report.json"),
    "release fast": (["release", *WIDE, "--mechanism", "fast", "--epsilon", "0.5", "-o", "fa.csv", *SEED],
                     "fa.report.json"),
    "release subsample": (["release", *WIDE, "--mechanism", "subsample", "--sampling-rate", "0.3", "--epsilon", "1",
                           "--delta", "1e-6", "-o", "s.csv", *SEED], "s.report.json"),
    "release filter-subsample": (["release", *WIDE, "--mechanism", "filter-subsample", "--sampling-rate", "0.3",
                                  "--epsilon", "1", "--delta", "1e-6", "-o", "fs.csv", *SEED], "fs.report.json"),
    "release dry run": (["release", *EVENTS, "--epsilon", "0.5", "--delta", "1e-6", "--dry-run"], None),
    "plan release": (["plan", "release", *WIDE, "--delta", "1e-6", "--epsilon", "0.1,1"], None),
    "flip": (["flip", *FLIP, "-o", "fl.csv", *SEED], "fl.report.json"),
    "mean-estimate": (["mean-estimate", *MEAN, "-o", "m.csv", *SEED], "m.report.json"),
    "mean-estimate baseline": (["mean-estimate", *MEAN, "--algorithm", "baseline", "-o", "mb.csv", *SEED],
                               "mb.report.json"),
    "mean-estimate dry run": (["mean-estimate", *MEAN, "--dry-run"], None),
    "plan mean-estimate": (["plan", "mean-estimate", *MEAN[:-2], "--epsilon", "0.1,1"], None),
    "forecast-train": (["forecast-train", *FORECAST, "-o", "fc.csv", *SEED], "fc.report.json"),
    "forecast-train dry run": (["forecast-train", *FORECAST, "--dry-run"], None),
    "account verify": (["account", "verify", "l.report.json", "fc.report.json", "--no-output-check"], None),
    "account compose": (["account", "compose", "l.report.json", "g.report.json"], None),
    "account dpsgd": (["account", "dpsgd", "--series", "6", "--length", "45", "--context-length", "6",
                       "--forecast-length", "3", "--batch-size", "4", "--noise-multiplier", "1", "--steps", "4",
                       "--delta", "1e-3"], None),
    "ledger init": (["ledger", "init", "budget.db", "--dataset", "d", "--epsilon", "10", "--delta", "1e-3"], None),
    "ledger spend": (["ledger", "spend", "budget.db", "--dataset", "d", "--from-report", "l.report.json"], None),
    "ledger show": (["ledger", "show", "budget.db"], None),
}
# Runs whose accuracy is a function of released figures: QUANTILE's noise scale is set by its privately
# selected interval, released in the laplace_scale column (the interval in the summary and report
# follows from it, not from the private data directly).
RELEASED = {"mean-estimate": {"accuracy"}}
# the runs are seeded (the same noise for both inputs), so verify fails them on that alone (exit 3)
EXIT = {"account verify": 3}
MODES = {"json quiet": ["--json", "--quiet"], "human": []}


def _masked(node, keys: set[str]):
    if isinstance(node, dict):
        return {k: ("<released>" if k in keys else _masked(v, keys)) for k, v in node.items()}
    if isinstance(node, list):
        return [_masked(v, keys) for v in node]
    return node


def _normalised_text(text: str, root: Path, released: set[str]) -> str:
    """``text`` without the run's directory, hashes and timestamps; with ``released`` (keys whose values
    are released figures), those values masked: in a JSON document by key, in a table every ``±x``."""
    text = STAMP.sub("<time>", HEX.sub("<hash>", text.replace(str(root), "<dir>")))
    if released:
        try:
            return json.dumps(_masked(json.loads(text), released), indent=1)
        except ValueError:
            masked = re.sub(r"±[0-9.eE+-]+", "±<released>", text)
            return re.sub(r"[─\s]+", " ", masked)  # (a table's width follows its longest cell)
    return text


def _run_all(root: Path, mode: list[str], capsys, monkeypatch) -> dict[str, tuple]:
    """Every run of RUNS in ``root``: name -> (exit code, stdout, stderr, report)."""
    monkeypatch.chdir(root)
    monkeypatch.setenv("COLUMNS", "300")  # the human tables unwrapped
    seen = {}
    for name, (args, report) in RUNS.items():
        code = main([*args, *mode])
        out, err = capsys.readouterr()
        if "--json" in mode:  # every warning carries one of the documented codes
            codes = {w["code"] for w in json.loads(out)["warnings"]}
            assert codes <= set(CODES), f"{name}: warnings without a documented code: {codes - set(CODES)}"
        released = RELEASED.get(name, set())
        seen[name] = (code, _normalised_text(out, root, released), _normalised_text(err, root, released),
                      _masked(json.loads((root / report).read_text()), RELEASED_KEYS | released) if report else None)
        assert code == EXIT.get(name, 0), f"{name}: exit {code}: {err}"
    return seen


@pytest.fixture(scope="module")
def two_inputs(tmp_path_factory):
    roots = [tmp_path_factory.mktemp(f"private{v}") for v in (0, 1)]
    for variant, root in enumerate(roots):
        _inputs(root, variant)
    return roots


@pytest.mark.parametrize("mode", list(MODES))
def test_outputs_do_not_depend_on_the_private_values(two_inputs, mode, capsys, monkeypatch, tmp_path):
    runs = []
    for root in two_inputs:
        work = tmp_path / root.name
        work.mkdir()
        for f in root.iterdir():
            (work / f.name).write_bytes(f.read_bytes())
        runs.append(_run_all(work, MODES[mode], capsys, monkeypatch))
    first, second = runs
    for name in RUNS:
        for what, a, b in zip(("exit code", "stdout", "stderr", "report"), first[name], second[name]):
            assert a == b, f"{name} ({mode}): the {what} depends on the private values:\n{a}\n---\n{b}"


def test_the_inputs_do_differ_in_what_the_checks_find(two_inputs, capsys, monkeypatch, tmp_path):
    """The comparison above is not vacuous: the custodian files of the two inputs record other findings."""
    found = []
    for root in two_inputs:
        work = tmp_path / root.name
        work.mkdir()
        for f in root.iterdir():
            (work / f.name).write_bytes(f.read_bytes())
        monkeypatch.chdir(work)
        codes = set()
        for name in ("release gaussian wide", "flip", "mean-estimate baseline"):
            args, report = RUNS[name]
            assert main([*args, "--quiet"]) == 0
            custodian = json.loads((work / report.replace(".report.json", ".custodian.NOT-FOR-PUBLICATION.json"))
                                   .read_text())
            codes |= {f"{name}: {w['code']}" for w in custodian["warnings"]}
        capsys.readouterr()
        found.append(codes)
    assert found[0] != found[1], found
    assert any(c.endswith(": noisy") for c in found[0]) and any(c.endswith(": flip_model") for c in found[0])


def test_every_warning_code_is_documented():
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    missing = [code for code in CODES if f"`{code}`" not in readme]
    assert not missing, f"README lists no meaning for the warning codes {missing}"


def test_every_warning_code_is_emitted_by_the_code():
    """No code is listed that nothing emits (a code's meaning is fixed by the place that emits it)."""
    source = "\n".join(p.read_text() for p in (Path(__file__).resolve().parents[2] / "tsdp").rglob("*.py")
                       if p.name != "caveats.py")
    assert [code for code in CODES if f'"{code}"' not in source] == []

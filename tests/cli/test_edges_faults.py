"""Hostile and malformed invocations (issue 13): no silent wrong answer, no exit code outside the
contract, one bounded ``error:`` line without a traceback, nothing written.

Each class of the issue has its own section. Refusals go through the ``refuse`` fixture of
tests/conftest.py: the documented exit code, exactly one ``error:`` line naming the option or
column, nothing on stdout, and the directory unchanged.
"""

from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from tsdp.cli.messages import MAX_LINE, MAX_VALUE, one_line
from tsdp.errors import NumericalError

REPO = Path(__file__).resolve().parents[2]
SAMPLE = REPO / "sample_data"
TSDP = [sys.executable, "-m", "tsdp"]
GAUSS = ["--epsilon", "1", "--delta", "1e-6"]
EVENT_GRID = ["--start", "2024-01-01", "--end", "2024-01-01 03:00:00", "--freq", "1h"]
CONTRACT = {0, 2, 3, 4, 5}


def write(path: str | Path, text: str) -> Path:
    path = Path(path)
    path.write_text(textwrap.dedent(text).lstrip("\n"))
    return path


def wide(path: str = "wide.csv", rows: int = 3, values=None) -> Path:
    values = values or [[1, 4], [2, 5], [3, 6]]
    lines = ["time,a,b"] + [f"2024-01-01 {h:02d}:00:00,{a},{b}" for h, (a, b) in zip(range(rows), values)]
    return write(path, "\n".join(lines) + "\n")


def ok(tsdp_cli, *args):
    run = tsdp_cli(*args)
    assert run.code == 0, run.err
    return run


# ---------------------------------------------------------------------------------------------
# flip publishes only protected columns
# ---------------------------------------------------------------------------------------------


def test_flip_readme_example_publishes_only_the_time_and_the_released_column(tsdp_cli, tmp_path):
    """The README example: md_montgomery, md_baltimore (unnamed) and ca_white (auxiliary) stay behind."""
    ok(tsdp_cli, "flip", SAMPLE / "qwi_quarterly.csv", "--time-col", "quarter", "--value-cols", "ca_asian",
       "--aux-cols", "ca_white", "--trend-order", "3", "--M", "25", "--lip-delta", "0.1", "-o", "qwi_flip.csv",
       "--seed", "1", "-q")
    out = pl.read_csv(tmp_path / "qwi_flip.csv")
    assert out.columns == ["quarter", "ca_asian"]
    report = json.loads((tmp_path / "qwi_flip.report.json").read_text())
    assert report["output"]["columns"] == ["quarter", "ca_asian"]


def test_flip_handles_values_near_the_float_range_exactly(tsdp_cli, tmp_path):
    """Scaling a series by 1e300 scales its release by 1e300 (no overflow, no 'constant series')."""
    source = pl.read_csv(SAMPLE / "qwi_quarterly.csv").select("quarter", "ca_asian")
    source.write_csv(tmp_path / "plain.csv")
    source.with_columns(pl.col("ca_asian") * 1e300).write_csv(tmp_path / "huge.csv")
    # every date released (--lip-floor 0): without a trend order this trending series reaches no LIP floor
    args = ["--time-col", "quarter", "--value-cols", "ca_asian", "--seed", "4", "-q", "--lip-floor", "0"]
    ok(tsdp_cli, "flip", "plain.csv", *args, "-o", "plain_out.csv")
    ok(tsdp_cli, "flip", "huge.csv", *args, "-o", "huge_out.csv")
    plain = pl.read_csv(tmp_path / "plain_out.csv")["ca_asian"].to_numpy()
    huge = pl.read_csv(tmp_path / "huge_out.csv")["ca_asian"].to_numpy()
    assert np.isfinite(huge).all()
    np.testing.assert_allclose(huge / 1e300, plain, rtol=1e-9)


# ---------------------------------------------------------------------------------------------
# NaN ids, repeated headers, typed config values, --season 0, --w with --unit event
# ---------------------------------------------------------------------------------------------


EVENTS_NAN = """
user,ts,v
1.5,2024-01-01 00:10:00,1
NaN,2024-01-01 01:30:00,2
NaN,2024-01-01 02:40:00,3
"""


def test_nan_user_ids_are_refused_in_events(refuse, tmp_path):
    write("events.csv", EVENTS_NAN)
    refuse(["release", "events.csv", *GAUSS, "--unit", "user", "--max-steps", "2", "--user-col", "user",
            "--time-col", "ts", *EVENT_GRID, "-o", "out.csv"], 4, "column 'user'", "row 2", "NaN")


def test_nan_user_ids_are_refused_in_parquet_events(refuse, tmp_path):
    pl.DataFrame({"user": [1.0, float("nan"), float("nan")],
                  "ts": ["2024-01-01 00:10:00", "2024-01-01 01:30:00", "2024-01-01 02:40:00"]}
                 ).write_parquet(tmp_path / "events.parquet")
    refuse(["release", "events.parquet", *GAUSS, "--unit", "user", "--max-steps", "2", "--user-col", "user",
            "--time-col", "ts", *EVENT_GRID, "-o", "out.csv"], 4, "column 'user'", "row 2")


def test_nan_user_ids_are_refused_in_shards(refuse, tmp_path, monkeypatch):
    """The sharded route reads ids as text: the text NaN is refused too, naming the input row."""
    import tsdp.engine.local as local

    monkeypatch.setattr(local, "BYTES_PER_ROW", 1 << 40)  # any input is 'too large': shard it
    write("events.csv", EVENTS_NAN)
    refuse(["release", "events.csv", *GAUSS, "--unit", "user", "--max-steps", "2", "--user-col", "user",
            "--time-col", "ts", *EVENT_GRID, "-o", "out.csv"], 4, "column 'user'", "row 2", "NaN")


def test_nan_user_ids_are_refused_in_mean_records(refuse, tmp_path):
    write("records.csv", EVENTS_NAN)
    refuse(["mean-estimate", "records.csv", "--user-col", "user", "--value-col", "v", "--epsilon", "1",
            "--upper", "5", "--participation", "public", "-o", "out.csv"], 4, "column 'user'", "row 2")


def test_nan_series_ids_are_refused(refuse, tmp_path):
    write("long.csv", """
        sensor,time,count
        1.5,2024-01-01 00:00:00,1
        NaN,2024-01-01 00:00:00,2
        NaN,2024-01-01 01:00:00,3
    """)
    refuse(["release", "long.csv", *GAUSS, "--unit", "event", "--series-col", "sensor", "--value-col", "count",
            "-o", "out.csv"], 4, "column 'sensor'", "series id", "row 2")


@pytest.mark.parametrize("how", ["file", "stdin"])
def test_repeated_csv_header_is_refused(tsdp_cli, refuse, tmp_path, monkeypatch, how):
    write("dup.csv", "time,a,a\n2024-01-01 00:00:00,1,2\n2024-01-01 01:00:00,3,4\n")
    if how == "stdin":
        import io

        monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO((tmp_path / "dup.csv").read_bytes())))
    refuse(["release", "dup.csv" if how == "file" else "-", *GAUSS, "--unit", "event", "-o", "out.csv",
            "--report", "out.report.json"], 4, "column 'a'", "more than once", "a_duplicated_0")


def test_repeated_header_is_refused_for_events(refuse, tmp_path):
    write("dup.csv", "user,ts,user\nu1,2024-01-01 00:10:00,x\n")
    refuse(["release", "dup.csv", *GAUSS, "--unit", "user", "--max-steps", "1", "--user-col", "user",
            "--time-col", "ts", *EVENT_GRID, "-o", "out.csv"], 4, "column 'user'", "more than once")


@pytest.mark.parametrize("setting, needles", [
    ("epsilon = true", ["'epsilon'", "boolean true"]),
    ("epsilon = 1\nquiet = 1", ["'quiet'", "true or false"]),
    ("epsilon = 1\nclip-min = nan", ["'clip-min'", "nan"]),
    ("epsilon = 1\ntime-col = false", ["'time-col'", "boolean false"]),
    ("epsilon = 1\nx = " + "[" * 3000 + "]" * 3000, ["nested too deeply"]),
], ids=["bool-for-number", "int-for-flag", "nan", "bool-for-text", "deep"])
def test_config_values_of_the_wrong_type_are_refused(refuse, tmp_path, setting, needles):
    wide()
    write("job.toml", f'delta = 1e-6\nunit = "event"\n{setting}\n')
    refuse(["release", "wide.csv", "--config", "job.toml", "-o", "out.csv"], 2, "--config", *needles)


def test_season_zero_is_refused(refuse, tmp_path):
    refuse(["forecast-train", SAMPLE / "traffic_hourly.parquet", "--time-col", "time", "--series-col", "sensor",
            "--value-col", "count", "--context-length", "48", "--forecast-length", "24", "--epsilon", "4",
            "--delta", "1e-5", "--steps", "5", "--season", "0", "-o", "f.parquet"], 2, "--season")


@pytest.mark.parametrize("unit, extra, option", [
    ("event", ["--w", "4"], "--w"), ("user", ["--max-steps", "2", "--w", "4"], "--w"),
    ("event", ["--max-steps", "4"], "--max-steps"), ("w-event", ["--w", "2", "--max-steps", "4"], "--max-steps"),
])
def test_unit_options_that_do_not_apply_are_refused(refuse, tmp_path, unit, extra, option):
    wide()
    refuse(["release", "wide.csv", *GAUSS, "--unit", unit, *extra, "-o", "out.csv"], 2, option, "applies to")


# ---------------------------------------------------------------------------------------------
# Numbers float64 cannot carry; budgets and bounds out of range
# ---------------------------------------------------------------------------------------------


def test_huge_values_are_a_data_error_not_a_raw_release(refuse, tmp_path):
    """1.7e308 + noise is 1.7e308: the value would be published without noise."""
    wide(values=[[1.7e308, -1.7e308], [1.7e308, 4], [3, 4]])
    refuse(["release", "wide.csv", *GAUSS, "--unit", "event", "--allow-negative", "--max-per-step", "1", "-o", "out.csv"], 4,
           "column 'a'", "row 1", "2**53")


def test_integers_beyond_64_bits_are_a_data_error(refuse, tmp_path):
    write("big.csv", "time,a\n1,9223372036854775808\n2,18446744073709551616\n3,3\n")
    refuse(["release", "big.csv", *GAUSS, "--unit", "event", "-o", "out.csv"], 4, "column 'a'", "row 1")


@pytest.mark.parametrize("kind", ["csv-i128", "parquet-u64"])
def test_integer_times_beyond_int64_are_a_data_error(refuse, tmp_path, kind):
    if kind == "csv-i128":
        write("t.csv", "time,a\n9223372036854775808,1\n9223372036854775809,2\n")
        name = "t.csv"
    else:
        pl.DataFrame({"time": pl.Series([2**63, 2**63 + 1], dtype=pl.UInt64), "a": [1, 2]}).write_parquet("t.parquet")
        name = "t.parquet"
    refuse(["release", name, *GAUSS, "--unit", "event", "-o", "out.csv"], 4, "column 'time'", "row 1", "64-bit")


def test_small_wide_integer_types_are_released(tsdp_cli, tmp_path):
    pl.DataFrame({"time": pl.Series([1, 2, 3], dtype=pl.UInt64), "a": pl.Series([7, 5, 3], dtype=pl.Int128)}
                 ).write_parquet(tmp_path / "ints.parquet")
    ok(tsdp_cli, "release", "ints.parquet", *GAUSS, "--unit", "event", "-o", "out.csv", "--seed", "1", "-q")
    assert pl.read_csv(tmp_path / "out.csv").height == 3


@pytest.mark.parametrize("args, code, needles", [
    (["--max-per-step", "1e308"], 2, ["--max-per-step", "2**53"]),
    (["--clip-min", "nan"], 2, ["--clip-min", "finite"]),
    (["--clip-max", "inf"], 2, ["--clip-max", "finite"]),
    (["--epsilon", "1e300"], 2, ["--epsilon", "1e+06"]),
], ids=["max-per-step", "clip-nan", "clip-inf", "epsilon-1e300"])
def test_public_numbers_out_of_range_are_usage_errors(refuse, tmp_path, args, code, needles):
    wide()
    base = {"--epsilon": "1"}
    given = dict(zip(args[::2], args[1::2]))
    budget = ["--epsilon", given.pop("--epsilon", base["--epsilon"]), "--delta", "1e-6"]
    rest = [x for kv in given.items() for x in kv]
    refuse(["release", "wide.csv", *budget, "--unit", "event", *rest, "-o", "out.csv"], code, *needles)


@pytest.mark.parametrize("mechanism", ["gaussian", "dft", "subsample", "filter-subsample"])
def test_epsilon_1e300_is_refused_without_solver_noise(refuse, tmp_path, mechanism):
    wide()
    refuse(["release", "wide.csv", "--mechanism", mechanism, "--epsilon", "1e300", "--delta", "1e-6",
            "--unit", "event", "-o", "out.csv"], 2, "--epsilon")


def test_mean_estimate_bounds_near_the_float_range_are_refused(refuse, tmp_path):
    write("big.csv", "u,v\n1,1e308\n2,1.5e308\n3,1e308\n4,1.7e308\n")
    refuse(["mean-estimate", "big.csv", "--user-col", "u", "--value-col", "v", "--epsilon", "1", "--upper",
            "1.7e308", "-o", "m.csv"], 2, "--upper", "2**53")


def test_noise_multiplier_extremes(refuse):
    base = ["account", "dpsgd", "--series", "10", "--length", "100", "--context-length", "10", "--forecast-length", "5",
            "--batch-size", "4", "--steps", "10", "--delta", "1e-5"]
    refuse([*base, "--noise-multiplier", "1e300"], 2, "--noise-multiplier")
    refuse([*base, "--noise-multiplier", "1e-300"], 5, "--noise-multiplier", "unbounded")


def test_forecast_epsilon_is_named_as_its_own_option(refuse):
    refuse(["forecast-train", SAMPLE / "traffic_hourly.parquet", "--time-col", "time", "--series-col", "sensor",
            "--value-col", "count", "--context-length", "48", "--forecast-length", "24", "--epsilon", "1e300",
            "--delta", "1e-5", "--steps", "5", "-o", "f.parquet"], 2, "--epsilon 1e+300")


def test_outputs_and_reports_never_hold_non_finite_numbers():
    from tsdp.io.magnitudes import require_finite_output
    from tsdp.report import json_ready

    with pytest.raises(NumericalError, match="column 'estimate' would hold inf at row 2"):
        require_finite_output(pl.DataFrame({"estimate": [1.0, float("inf")], "users": [3, 4]}))
    require_finite_output(pl.DataFrame({"estimate": [1.0, None], "name": ["a", "b"]}))
    with pytest.raises(NumericalError, match=r"at parameters\.noise\[1\]"):
        json_ready({"noise": [1.0, float("nan")]}, where="parameters")


# ---------------------------------------------------------------------------------------------
# Hangs and resources: FIFO input, tiny sampling rates, huge FLIP grids
# ---------------------------------------------------------------------------------------------


def run_cli(args, cwd, timeout=120, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run([*TSDP, *map(str, args)], cwd=cwd, capture_output=True, text=True, timeout=timeout,
                          **kwargs)


def one_error(result: subprocess.CompletedProcess, code: int, *needles: str) -> str:
    lines = result.stderr.strip().splitlines()
    assert result.returncode == code, result.stderr
    assert len(lines) == 1 and lines[0].startswith("error: "), lines
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])
    return lines[0]


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no named pipes")
@pytest.mark.parametrize("layout", ["series", "events"])
def test_fifo_input_is_refused_before_it_blocks(tmp_path, layout):
    os.mkfifo(tmp_path / "pipe.csv")
    extra = (["--unit", "event"] if layout == "series" else
             ["--unit", "user", "--max-steps", "1", "--user-col", "u", "--time-col", "t", *EVENT_GRID])
    result = run_cli(["release", "pipe.csv", *GAUSS, *extra, "-o", "out.csv"], tmp_path, timeout=60)
    one_error(result, 2, "INPUT", "named pipe")


def test_stdin_stays_allowed(tmp_path):
    data = wide(tmp_path / "wide.csv").read_text()
    result = run_cli(["release", "-", *GAUSS, "--unit", "event", "-o", "-", "--report", "r.json", "--seed", "1"],
                     tmp_path, input=data)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("time,a,b")


@pytest.mark.parametrize("mechanism", ["subsample", "filter-subsample"])
def test_tiny_sampling_rate_is_refused_up_front(tmp_path, mechanism):
    wide(tmp_path / "wide.csv", rows=10, values=[[i, i + 1] for i in range(10)])
    result = run_cli(["release", "wide.csv", *GAUSS, "--mechanism", mechanism, "--sampling-rate", "1e-300",
                      "--unit", "event", "-o", "out.csv"], tmp_path, timeout=60)
    one_error(result, 2, "--sampling-rate 1e-300", "p*T", "draws")


def test_sampling_mask_redraws_are_bounded(monkeypatch):
    """Even past the up-front check, the redraw loop ends (with a numerical error)."""
    from tsdp.mechanisms import subsample

    monkeypatch.setattr(subsample.sampling, "MIN_NONEMPTY", 0.0)
    monkeypatch.setattr(subsample.sampling, "MAX_REDRAW_ROUNDS", 5)
    with pytest.raises(NumericalError, match="still had an empty sample"):
        subsample.draw_sample_mask(np.random.default_rng(1), 3, 10, 1e-300)


def test_flip_grid_that_does_not_fit_in_memory_is_refused_up_front(tmp_path):
    result = run_cli(["flip", SAMPLE / "qwi_quarterly.csv", "--time-col", "quarter", "--value-cols", "ca_asian",
                      "--grid", "1000000000", "-o", "out.csv"], tmp_path, timeout=60)
    one_error(result, 5, "--grid 1000000000", "GiB")
    assert not any(tmp_path.iterdir())


# ---------------------------------------------------------------------------------------------
# Strict JSON wherever JSON is read
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("text, needle", [
    ('{"epsilon": NaN}', "NaN"), ('{"epsilon": Infinity}', "Infinity"), ("[" * 100000 + "]" * 100000, "nested"),
], ids=["nan", "infinity", "deep"])
def test_ledger_spend_reads_reports_strictly(refuse, tmp_path, text, needle):
    from tsdp.accounting import ledger

    ledger.init_ledger(tmp_path / "l.db", "d", 1.0, 1e-5)
    (tmp_path / "r.json").write_text(text)
    refuse(["ledger", "spend", "l.db", "--dataset", "d", "--from-report", "r.json"], 4, "--from-report", needle)


@pytest.mark.parametrize("text", ['{"alpha": [NaN], "a": [1], "b": [2]}', "[" * 100000 + "]" * 100000],
                         ids=["nan", "deep"])
def test_flip_r_params_are_strict_json(refuse, text):
    refuse(["flip", SAMPLE / "qwi_quarterly.csv", "--time-col", "quarter", "--value-cols", "ca_asian",
            "--r-params", text, "-o", "out.csv"], 2, "--r-params")


# ---------------------------------------------------------------------------------------------
# Write failures name the option
# ---------------------------------------------------------------------------------------------


@pytest.fixture
def unwritable(tmp_path, monkeypatch) -> Path:
    """A directory tsdp cannot write into (also when the tests run as root, where chmod does not bite)."""
    import tempfile

    locked = tmp_path / "locked"
    locked.mkdir()
    real = tempfile.mkstemp

    def mkstemp(*args, **kwargs):
        if Path(kwargs.get("dir") or ".").resolve() == locked.resolve():
            raise PermissionError(13, "Permission denied")
        return real(*args, **kwargs)

    monkeypatch.setattr(tempfile, "mkstemp", mkstemp)
    return locked


def test_output_in_an_unwritable_directory_is_a_usage_error(refuse, tmp_path, unwritable):
    wide()
    refuse(["release", "wide.csv", *GAUSS, "--unit", "event", "-o", "locked/out.csv"], 2, "--output",
           "locked/out.csv", "Permission denied")


def test_secrets_in_an_unwritable_directory_is_a_usage_error(refuse, tmp_path, unwritable):
    refuse(["flip", SAMPLE / "qwi_quarterly.csv", "--time-col", "quarter", "--value-cols", "ca_asian",
            "--lip-floor", "0", "-o", "out.csv", "--secrets", "locked/s.json"], 2, "--secrets", "locked/s.json")


def test_read_only_directory_is_refused_before_any_work(refuse, tmp_path, monkeypatch):
    wide()
    (tmp_path / "ro").mkdir()
    real = os.access
    monkeypatch.setattr(os, "access", lambda p, mode, **kw: False if Path(p).name == "ro" else real(p, mode, **kw))
    refuse(["release", "wide.csv", *GAUSS, "--unit", "event", "-o", "ro/out.csv"], 2, "--output", "not writable")


# ---------------------------------------------------------------------------------------------
# Error lines: bounded, one line, no traceback, options that exist
# ---------------------------------------------------------------------------------------------


def test_one_line_caps_echoed_values_and_joins_lines():
    value = "x" * 5_000_000
    line = one_line(f"column 'a': non-numeric value {value!r} at row 1\nsecond line")
    assert len(line) < MAX_VALUE + 200 and "\n" not in line
    assert line.startswith("column 'a': non-numeric value 'xxx") and line.endswith("at row 1 second line")
    assert "more characters" in line
    assert one_line("keeps  inner  spacing") == "keeps  inner  spacing"
    assert len(one_line("y " * 10_000)) <= MAX_LINE + 100


def test_a_5mb_field_gives_a_short_error_line(refuse, tmp_path):
    (tmp_path / "huge.csv").write_text("time,a\n2024-01-01 00:00:00," + "x" * 5_000_000 + "\n"
                                       "2024-01-01 01:00:00,1\n")
    line = refuse(["release", "huge.csv", *GAUSS, "--unit", "event", "-o", "out.csv"], 4, "column 'a'", "row 1")
    assert len(line) < 600


HOSTILE = [
    ["release", "{dir}/huge.csv", *GAUSS, "--unit", "event", "--time-col", "t" * 5000],
    ["release", "{dir}/multi.csv", *GAUSS, "--unit", "event"],
    ["release", "{dir}/big_time.csv", *GAUSS, "--unit", "event"],
    ["release", "{dir}/big_value.csv", *GAUSS, "--unit", "event"],
    ["release", "{dir}/nope.csv", *GAUSS, "--unit", "event"],
    ["release", "{dir}/huge.csv", "--epsilon", "x" * 100_000, "--unit", "event"],
    ["mean-estimate", "{dir}/huge.csv", "--user-col", "time", "--value-col", "a", "--epsilon", "1", "--upper", "1",
     "--participation", "public"],
    ["flip", "{dir}/huge.csv", "--time-col", "time", "--value-cols", "a"],
    ["account", "compose", "{dir}/deep.json"],
]


def test_hostile_invocations_give_one_bounded_error_line(tmp_path):
    """Every hostile call: an exit code of the contract, one error line of bounded length, no
    traceback, nothing on stdout, no file written."""
    (tmp_path / "huge.csv").write_text("time,a\n2024-01-01 00:00:00," + "x" * 1_000_000 + "\n")
    (tmp_path / "multi.csv").write_text('time,a\n2024-01-01 00:00:00,"1\n2\n3"\n')
    (tmp_path / "big_time.csv").write_text("time,a\n9223372036854775808,1\n9223372036854775809,2\n")
    (tmp_path / "big_value.csv").write_text("time,a\n1,1e308\n2,3\n")
    (tmp_path / "deep.json").write_text("[" * 100000 + "]" * 100000)
    before = sorted(p.name for p in tmp_path.iterdir())
    for args in HOSTILE:
        result = run_cli([a.format(dir=tmp_path) for a in args] + ["-o", str(tmp_path / "out.csv")]
                         if args[0] != "account" else [a.format(dir=tmp_path) for a in args], tmp_path)
        lines = result.stderr.strip().splitlines()
        assert result.returncode in CONTRACT - {0}, (args[:2], result.stderr[-500:])
        assert len(lines) == 1 and lines[0].startswith("error: "), (args[:2], lines[:3])
        assert len(lines[0]) <= MAX_LINE + 100 and "Traceback" not in result.stderr
        assert result.stdout == ""
    assert sorted(p.name for p in tmp_path.iterdir()) == before


TOKEN = re.compile(r"(?<![\w-])--[a-z][a-z0-9]*(?:-[a-z0-9]+)*(?![\w-])")


def _options(command) -> set[str]:
    found = set()
    for param in command.params:
        found.update(o for o in param.opts + param.secondary_opts if o.startswith("--"))
    for sub in getattr(command, "commands", {}).values():
        found |= _options(sub)
    return found


def _message_tokens(path: Path) -> list[tuple[int, str]]:
    """``--option`` tokens of the string constants of a module, docstrings and the patterns of
    ``str.replace`` (text being removed from a message) left out."""
    tree = ast.parse(path.read_text())
    skip = set()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
            skip.add(id(body[0].value))
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "replace" \
                and node.args:
            skip.add(id(node.args[0]))
    return [(node.lineno, token) for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in skip
            for token in TOKEN.findall(node.value)]


def test_messages_name_only_options_that_exist():
    """Every ``--option`` in a message of tsdp exists in some command; in a command's own module,
    in that command (no --fast-cp, --fast-interval or --fast-sampling)."""
    import typer

    from tsdp.cli.app import app

    root = typer.main.get_command(app)
    everywhere = _options(root) | {"--help", "--debug", "--version"}
    from tsdp.cli.vocabulary import REFUSED, RENAMED

    # the vocabulary module alone names the old spellings it translates or refuses
    old = {name for table in (RENAMED, REFUSED) for names in table.values() for name in names}
    unknown = [(str(path.relative_to(REPO)), line, token) for path in sorted((REPO / "tsdp").rglob("*.py"))
               for line, token in _message_tokens(path)
               if token not in everywhere and not (path.name == "vocabulary.py" and token in old)]
    assert unknown == []
    for module, name in (("release", "release"), ("mean", "mean-estimate"), ("flip", "flip"),
                         ("forecast", "forecast-train")):
        own = _options(root.commands[name]) | {"--help", "--debug", "--version"}
        wrong = [(line, token) for line, token in _message_tokens(REPO / "tsdp" / "cli" / f"{module}.py")
                 if token not in own]
        assert wrong == [], module

"""``tsdp release`` refuses bad options and bad data cleanly (DESIGN.md section 4).

Every refusal is checked the same way (:func:`refuse`): the documented exit code, exactly one
stderr line, starting with ``error:`` and naming the option or column and the offending value, no
traceback, nothing on stdout, and the working directory untouched: no output, no report, no hidden
temporary file, and the input's bytes and mtime unchanged.
"""

from __future__ import annotations

import io
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import polars as pl
import pytest
from tests.conftest import custodian_diagnostics

TSDP = [sys.executable, "-m", "tsdp"]
GAUSS = ["--epsilon", "1", "--delta", "1e-6", "--unit", "event"]

LONG = """
sensor,time,count
a,2024-01-01 00:00:00,1
a,2024-01-01 01:00:00,2
a,2024-01-01 02:00:00,3
b,2024-01-01 00:00:00,4
b,2024-01-01 01:00:00,5
b,2024-01-01 02:00:00,6
"""
WIDE = """
time,a,b
2024-01-01 00:00:00,1,4
2024-01-01 01:00:00,2,5
2024-01-01 02:00:00,3,6
"""
EVENTS = """
user,ts,station
u1,2024-01-01 00:10:00,st1
u1,2024-01-01 00:20:00,st1
u2,2024-01-01 01:30:00,st2
u3,2024-01-01 02:59:59,st1
"""
EVENT_GRID = ["--start", "2024-01-01", "--end", "2024-01-01 03:00:00", "--freq", "1h"]
EVENT_ARGS = ["--user-col", "user", "--time-col", "ts", *EVENT_GRID]


def write(path: Path, text: str) -> Path:
    path.write_text(textwrap.dedent(text).lstrip("\n"))
    return path


@pytest.fixture
def long_csv(tmp_path):
    return write(tmp_path / "data.csv", LONG)


@pytest.fixture
def wide_csv(tmp_path):
    return write(tmp_path / "wide.csv", WIDE)


@pytest.fixture
def events_csv(tmp_path):
    return write(tmp_path / "events.csv", EVENTS)


def long_args(path="data.csv", *extra):
    return ["release", str(path), *GAUSS, "--series-col", "sensor", "--value-col", "count",
            "-o", "out.csv", *extra]


def wide_args(path="wide.csv", *extra):
    return ["release", str(path), *GAUSS, "-o", "out.csv", *extra]


# ---------------------------------------------------------------------------------------------
# Files and paths
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("with_output", [True, False])
def test_missing_input_file(refuse, with_output):
    args = ["release", "nope.csv", *GAUSS, "--value-col", "count"]
    if with_output:
        args += ["-o", "out.csv"]
    refuse(args, 2, "INPUT", "'nope.csv'", "does not exist")


def test_input_is_a_directory(refuse, tmp_path):
    (tmp_path / "d.csv").mkdir()
    refuse(["release", "d.csv", *GAUSS, "--value-col", "count", "-o", "out.csv"], 2, "INPUT", "'d.csv'")


@pytest.mark.parametrize("with_output", [True, False])
def test_unknown_input_extension(refuse, tmp_path, with_output):
    write(tmp_path / "data.txt", LONG)
    args = ["release", "data.txt", *GAUSS, "--series-col", "sensor", "--value-col", "count"]
    if with_output:
        args += ["-o", "out.csv"]
    # Without -o the default output name derives from the input: the error must still blame INPUT.
    refuse(args, 2, "INPUT", "'data.txt'", ".csv", ".parquet")


@pytest.mark.parametrize("name", ["data.csv", "data.tsv"])
def test_parquet_named_as_text_is_named_as_parquet(refuse, tmp_path, name):
    """A Parquet file saved under a .csv/.tsv name: the error says what the file is and what to do
    (the CSV parser alone said 'invalid utf-8 sequence')."""
    pl.read_csv(io.StringIO(LONG.strip())).write_parquet(tmp_path / name)
    args = ["release", name, *GAUSS, "--series-col", "sensor", "--value-col", "count", "-o", "out.csv"]
    refuse(args, 4, "INPUT", f"'{name}'", "is a Parquet file", ".parquet")


def test_a_csv_whose_first_column_is_named_par1_is_still_csv(tsdp_cli, tmp_path):
    """Only a file that begins and ends with Parquet's magic bytes is taken for Parquet."""
    write(tmp_path / "par.csv", LONG.replace("sensor", "PAR1"))
    run = tsdp_cli("release", "par.csv", *GAUSS, "--series-col", "PAR1", "--value-col", "count", "-o", "out.csv", "-q")
    assert run.code == 0, run.err


@pytest.mark.parametrize("separator, needle", [(";", "semicolons"), ("\t", "tabs: name it .tsv")])
def test_a_csv_with_another_separator_is_named(refuse, tmp_path, separator, needle):
    """A semicolon- or tab-separated .csv reads as one column; the error says why, not only which
    column is missing."""
    write(tmp_path / "data.csv", LONG.replace(",", separator))
    refuse(long_args(), 4, "--time-col", "'time'", "one column", needle)


@pytest.mark.parametrize("command, option, value, fixed", [
    (long_args(), "--epsilon", "0,5", "0.5"),
    (long_args(), "--delta", "1,5e-6", "1.5e-6"),
    (long_args(), "--epsilon", "1;5", None),
    (["ledger", "spend", "budget.db", "--dataset", "d", "--epsilon", "1"], "--delta", "0,000001", "0.000001"),
])
def test_a_decimal_comma_is_named_and_corrected(refuse, long_csv, command, option, value, fixed):
    """'0,5' (a decimal comma, as typed in much of Europe) names the option, the value and the fix."""
    line = refuse([*command, option, value], 2, option, repr(value))
    assert (f"write decimals with a point: {fixed}" in line) if fixed else ("decimals" not in line)


def test_unknown_output_extension(refuse, long_csv):
    args = long_args()
    args[args.index("out.csv")] = "out.txt"
    refuse(args, 2, "--output", "'out.txt'", ".csv", ".parquet")


def test_unknown_report_extension(refuse, long_csv):
    refuse(long_args("data.csv", "--report", "r.txt"), 2, "--report", "'r.txt'", ".json")


def test_existing_output_needs_force(refuse, tsdp_cli, long_csv, tmp_path):
    old = b"old contents\n"
    (tmp_path / "out.csv").write_bytes(old)
    refuse(long_args(), 2, "--output", "'out.csv'", "already exists", "--force")
    assert not (tmp_path / "out.report.json").exists()

    run = tsdp_cli(*long_args("data.csv", "--force", "-q"))
    assert run.code == 0, run.err
    assert run.out == run.err == ""
    new = pl.read_csv(tmp_path / "out.csv")
    assert new.columns == ["sensor", "time", "count"] and new.height == 6
    assert (tmp_path / "out.report.json").exists()
    assert not list(tmp_path.glob(".*.tmp"))


def test_existing_report_needs_force(refuse, long_csv, tmp_path):
    (tmp_path / "out.report.json").write_text("{}\n")
    refuse(long_args(), 2, "--report", "'out.report.json'", "already exists", "--force")
    assert not (tmp_path / "out.csv").exists()


def test_failed_forced_run_keeps_the_old_output(refuse, tmp_path):
    write(tmp_path / "data.csv", LONG.replace("a,2024-01-01 01:00:00,2", "a,2024-01-01 01:00:00,NaN"))
    (tmp_path / "out.csv").write_bytes(b"old\n")
    (tmp_path / "out.report.json").write_bytes(b"{}\n")
    refuse(long_args("data.csv", "--force"), 4, "'count'", "nan")  # snapshot: both files unchanged


@pytest.mark.parametrize("spelling", ["data.csv", "./data.csv", "ABSOLUTE"])
def test_output_equal_to_input_is_refused_even_with_force(refuse, long_csv, spelling):
    target = str(long_csv) if spelling == "ABSOLUTE" else spelling
    args = long_args()
    args[args.index("out.csv")] = target
    refuse(args + ["--force"], 2, "--output", "is the input file")


def test_output_directory_must_exist(refuse, long_csv, tmp_path):
    args = long_args()
    args[args.index("out.csv")] = "nodir/out.csv"
    refuse(args, 2, "--output", "'nodir'", "does not exist")
    assert not (tmp_path / "nodir").exists()


def test_report_directory_must_exist(refuse, long_csv, tmp_path):
    refuse(long_args("data.csv", "--report", "nodir/r.json"), 2, "--report", "'nodir'", "does not exist")
    assert not (tmp_path / "nodir").exists()


def test_output_parent_that_is_a_file(refuse, long_csv, tmp_path):
    (tmp_path / "plain").write_text("x\n")
    args = long_args()
    args[args.index("out.csv")] = "plain/out.csv"
    refuse(args, 2, "--output", "'plain'", "not a directory")


def test_output_that_is_a_directory(refuse, long_csv, tmp_path):
    (tmp_path / "out.csv").mkdir()
    refuse(long_args("data.csv", "--force"), 2, "--output", "'out.csv'", "is a directory")


def test_report_must_be_json(refuse, long_csv):
    refuse(long_args("data.csv", "--report", "out.csv"), 2, "--report", "'out.csv'", ".json")


def test_stdout_output_needs_a_report(refuse, long_csv):
    args = long_args()
    args[args.index("out.csv")] = "-"
    refuse(args, 2, "--report", "-o -")


def test_json_summary_cannot_share_stdout_with_the_data(refuse, long_csv):
    args = long_args("data.csv", "--report", "r.json")
    args[args.index("out.csv")] = "-"
    refuse(args + ["--json"], 2, "--json", "-o -")


def test_report_cannot_share_stdout(refuse, long_csv):
    args = long_args("data.csv", "--report", "-")
    refuse(args + ["--json"], 2, "--report -", "--json")
    args[args.index("out.csv")] = "-"
    refuse(args, 2, "--report -", "-o -")


def test_unparseable_input_file(refuse, tmp_path):
    (tmp_path / "broken.parquet").write_bytes(b"this is not parquet")
    refuse(["release", "broken.parquet", *GAUSS, "--value-col", "count", "-o", "out.csv"], 4,
           "INPUT", "'broken.parquet'", "parquet")


def test_empty_input_file(refuse, tmp_path):
    (tmp_path / "empty.csv").write_bytes(b"")
    refuse(["release", "empty.csv", *GAUSS, "--value-col", "count", "-o", "out.csv"], 4, "'empty.csv'")


def test_unexpected_failure_while_writing_leaves_nothing(refuse, long_csv, monkeypatch):
    """A crash after the output was staged: exit 1, one line, no traceback, no file, no temp."""
    from tsdp.report import Report

    def boom(self):
        raise RuntimeError("disk on fire")

    monkeypatch.setattr(Report, "to_json", boom)
    refuse(long_args(), 1, "unexpected RuntimeError", "disk on fire", "--debug")


# ---------------------------------------------------------------------------------------------
# Missing columns
# ---------------------------------------------------------------------------------------------

LONG_COLUMNS = "the input has columns: sensor, time, count"


@pytest.mark.parametrize("option, missing", [
    ("--time-col", "when"), ("--value-col", "total"), ("--series-col", "station"),
])
def test_missing_column_long(refuse, long_csv, option, missing):
    args = ["release", "data.csv", *GAUSS, "--series-col", "sensor", "--value-col", "count",
            "-o", "out.csv", option, missing]
    refuse(args, 4, option, repr(missing), "not found", LONG_COLUMNS)


@pytest.mark.parametrize("option, missing, extra", [
    ("--time-col", "when", []),
    ("--series-cols", "zz", []),
])
def test_missing_column_wide(refuse, wide_csv, option, missing, extra):
    value = "a,zz" if option == "--series-cols" else missing
    refuse(wide_args("wide.csv", option, value, *extra), 4, option, repr(missing), "not found",
           "the input has columns: time, a, b")


@pytest.mark.parametrize("option", ["--user-col", "--time-col", "--series-col", "--value-col"])
def test_missing_column_events(refuse, events_csv, option):
    args = ["release", "events.csv", *GAUSS, *EVENT_ARGS, "--series-keys", "st1,st2", "-o", "out.csv"]
    args += [option, "nothere"] + (["--value-bound", "1"] if option == "--value-col" else [])  # values only
    refuse(args, 4, option, "'nothere'", "the input has columns: user, ts, station")


@pytest.mark.parametrize("extra, first, second, column", [
    (["--series-col", "count"], "--value-col", "--series-col", "count"),
    (["--time-col", "count"], "--time-col", "--value-col", "count"),
    (["--series-col", "time"], "--time-col", "--series-col", "time"),
])
def test_one_column_for_two_roles(refuse, long_csv, extra, first, second, column):
    refuse(long_args("data.csv", *extra), 2, first, second, repr(column))


def test_series_cols_listed_twice(refuse, wide_csv):
    refuse(wide_args("wide.csv", "--series-cols", "a,b,a"), 2, "--series-cols", "'a'", "twice")


def test_event_user_col_used_as_time_col(refuse, events_csv):
    args = event_args()
    args[args.index("--time-col") + 1] = "user"
    refuse(args, 2, "--user-col", "--time-col", "'user'")


# ---------------------------------------------------------------------------------------------
# Bad values
# ---------------------------------------------------------------------------------------------

BAD_VALUES = [
    ("abc", ["non-numeric", "'abc'"]),
    ("NaN", ["non-finite", "nan"]),
    ("inf", ["non-finite", "inf"]),
    ("-inf", ["non-finite", "-inf"]),
    ("-3", ["negative value -3", "--allow-negative"]),
]


def long_with(value: str) -> str:
    return LONG.replace("b,2024-01-01 01:00:00,5", f"b,2024-01-01 01:00:00,{value}")


def wide_with(value: str) -> str:
    return WIDE.replace("2024-01-01 01:00:00,2,5", f"2024-01-01 01:00:00,2,{value}")


@pytest.mark.parametrize("value, needles", BAD_VALUES, ids=[v for v, _ in BAD_VALUES])
def test_bad_value_long(refuse, tmp_path, value, needles):
    write(tmp_path / "data.csv", long_with(value))
    refuse(long_args(), 4, "column 'count'", "row 5", *needles)


@pytest.mark.parametrize("value, needles", BAD_VALUES, ids=[v for v, _ in BAD_VALUES])
def test_bad_value_wide(refuse, tmp_path, value, needles):
    write(tmp_path / "wide.csv", wide_with(value))
    refuse(wide_args(), 4, "column 'b'", "row 2", *needles)


def test_allow_negative_accepts_negative_values(tsdp_cli, tmp_path):
    write(tmp_path / "data.csv", long_with("-3"))
    run = tsdp_cli(*long_args("data.csv", "--allow-negative", "--max-per-step", "1", "-q"))
    assert run.code == 0, run.err
    assert pl.read_csv(tmp_path / "out.csv").height == 6


@pytest.mark.parametrize("kind", ["long", "wide"])
def test_missing_value_needs_fill_missing(refuse, tmp_path, kind):
    if kind == "long":
        write(tmp_path / "data.csv", long_with(""))
        refuse(long_args(), 4, "column 'count'", "missing value", "row 5", "--fill-missing zero")
    else:
        write(tmp_path / "wide.csv", wide_with(""))
        refuse(wide_args(), 4, "column 'b'", "missing value", "row 2", "--fill-missing zero")


@pytest.mark.parametrize("kind", ["long", "wide"])
def test_missing_value_is_filled_with_zero_before_noise(tsdp_cli, tmp_path, kind):
    """Laplace noise of scale 1e-4: each released value is its input value (0 for the gap)."""
    budget = ["--mechanism", "laplace", "--epsilon", "10000", "--unit", "event"]
    if kind == "long":
        write(tmp_path / "data.csv", long_with(""))
        args = ["release", "data.csv", *budget, "--series-col", "sensor", "--value-col", "count"]
    else:
        write(tmp_path / "wide.csv", wide_with(""))
        args = ["release", "wide.csv", *budget]
    run = tsdp_cli(*args, "-o", "out.csv", "--fill-missing", "zero", "--json", "--seed", "1")
    assert run.code == 0, run.err
    summary = json.loads(run.out)
    assert custodian_diagnostics(summary)["filled_cells"] == 1
    out = pl.read_csv(tmp_path / "out.csv")
    if kind == "long":
        got = out.sort("sensor", "time")["count"].to_list()
    else:
        got = out.select("a").to_series().to_list() + out.select("b").to_series().to_list()
    assert got == pytest.approx([1, 2, 3, 4, 0, 6], abs=0.01)
    report = json.loads((tmp_path / "out.report.json").read_text())
    assert "filled_cells" not in json.dumps(report)  # data-dependent and not private


# ---------------------------------------------------------------------------------------------
# Time column
# ---------------------------------------------------------------------------------------------


def test_duplicate_timestamp_long_with_series(refuse, tmp_path):
    write(tmp_path / "data.csv", LONG + "a,2024-01-01 01:00:00,7\n")
    refuse(long_args(), 4, "column 'time'", "duplicate timestamp", "2024-01-01 01:00:00", "'a'")


def test_duplicate_timestamp_long_without_series(refuse, tmp_path):
    write(tmp_path / "one.csv", "time,count\n2024-01-01 00:00:00,1\n2024-01-01 01:00:00,2\n"
                                "2024-01-01 01:00:00,3\n")
    refuse(["release", "one.csv", *GAUSS, "--value-col", "count", "-o", "out.csv"], 4,
           "column 'time'", "duplicate timestamp", "2024-01-01 01:00:00")


def test_duplicate_timestamp_wide(refuse, tmp_path):
    write(tmp_path / "wide.csv", WIDE + "2024-01-01 02:00:00,9,9\n")
    refuse(wide_args(), 4, "column 'time'", "duplicate timestamp", "2024-01-01 02:00:00")


@pytest.mark.parametrize("bad", ["yesterday", "2024-13-01 00:00:00", "2024-01-01 25:00:00"])
def test_unparseable_timestamp(refuse, tmp_path, bad):
    write(tmp_path / "wide.csv", WIDE.replace("2024-01-01 01:00:00", bad))
    refuse(wide_args(), 4, "column 'time'", "cannot parse", repr(bad), "row 2")


def test_no_parseable_timestamp_at_all(refuse, tmp_path):
    write(tmp_path / "wide.csv", "time,a\nsoon,1\nlater,2\n")
    refuse(wide_args(), 4, "column 'time'", "cannot parse", "'soon'", "row 1")


def test_missing_timestamp(refuse, tmp_path):
    write(tmp_path / "wide.csv", WIDE.replace("2024-01-01 01:00:00", ""))
    refuse(wide_args(), 4, "column 'time'", "missing timestamp", "row 2")


def test_irregular_steps(refuse, tmp_path):
    write(tmp_path / "wide.csv", WIDE.replace("2024-01-01 02:00:00", "2024-01-01 02:30:00"))
    refuse(wide_args(), 4, "column 'time'", "irregular", "2024-01-01 02:30:00", "--freq")


def test_time_off_the_declared_freq(refuse, wide_csv):
    refuse(wide_args("wide.csv", "--freq", "2h"), 4, "column 'time'", "2024-01-01 01:00:00",
           "not on the grid", "2h")


GAPPY_WIDE = """
time,a,b
2024-01-01 00:00:00,1,4
2024-01-01 01:00:00,2,5
2024-01-01 03:00:00,3,6
2024-01-01 05:00:00,3,6
"""


def test_gap_is_an_error_without_fill_missing(refuse, tmp_path):
    write(tmp_path / "wide.csv", GAPPY_WIDE)
    refuse(wide_args(), 4, "column 'time'", "2 missing step(s)", "first missing: 2024-01-01 02:00:00",
           "--fill-missing zero")


def test_gap_is_filled_with_fill_missing_zero(tsdp_cli, tmp_path):
    write(tmp_path / "wide.csv", GAPPY_WIDE)
    run = tsdp_cli(*wide_args("wide.csv", "--fill-missing", "zero", "--json"))
    assert run.code == 0, run.err
    assert custodian_diagnostics(json.loads(run.out))["filled_cells"] == 4
    out = pl.read_csv(tmp_path / "out.csv")
    assert out.height == 6
    assert out["time"].to_list() == [f"2024-01-01 0{h}:00:00" for h in range(6)]
    report = json.loads((tmp_path / "out.report.json").read_text())
    assert report["grid"]["n_steps"] == 6 and report["grid"]["freq"] == "1h"


def test_gap_in_one_series_of_a_long_table(refuse, tsdp_cli, tmp_path):
    """Every time occurs in some series, but series b lacks 01:00: still a gap."""
    write(tmp_path / "data.csv", LONG.replace("b,2024-01-01 01:00:00,5\n", ""))
    refuse(long_args(), 4, "column 'time'", "series 'b'", "first missing: 2024-01-01 01:00:00",
           "--fill-missing zero")
    run = tsdp_cli(*long_args("data.csv", "--fill-missing", "zero", "-q"))
    assert run.code == 0, run.err
    out = pl.read_csv(tmp_path / "out.csv")
    assert out.height == 6
    assert out.select("sensor", "time").sort("sensor", "time").rows() == [
        (s, f"2024-01-01 0{h}:00:00") for s in "ab" for h in range(3)
    ]


# ---------------------------------------------------------------------------------------------
# Budget and privacy-unit options
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("value, shown", [
    ("0", "got 0"), ("-1", "got -1"), ("nan", "got nan"), ("inf", "got inf"), ("-inf", "got -inf"),
    ("abc", "'abc'"),
])
def test_bad_epsilon(refuse, long_csv, value, shown):
    args = long_args()
    args[args.index("--epsilon") + 1] = value
    refuse(args, 2, "--epsilon", shown)


@pytest.mark.parametrize("value, shown", [
    ("0", "got 0"), ("-1e-6", "got -1e-06"), ("1", "got 1"), ("1.5", "got 1.5"),
    ("nan", "got nan"), ("inf", "got inf"),
])
def test_bad_delta(refuse, long_csv, value, shown):
    args = long_args()
    args[args.index("--delta") + 1] = value
    refuse(args, 2, "--delta", shown)


def test_gaussian_needs_delta(refuse, long_csv):
    refuse(["release", "data.csv", "--epsilon", "1", "--unit", "event", "--value-col", "count",
            "--series-col", "sensor", "-o", "out.csv"], 2, "--delta", "gaussian")


def test_laplace_refuses_delta(refuse, long_csv):
    refuse(long_args("data.csv", "--mechanism", "laplace"), 2, "--delta", "laplace", "remove it")


@pytest.mark.parametrize("option, value", [
    ("--mechanism", "exponential"), ("--unit", "household"), ("--neighbouring", "swap"),
    ("--calibration", "magic"), ("--layout", "tall"), ("--fill-missing", "mean"),
])
def test_unknown_choice(refuse, long_csv, option, value):
    refuse(long_args("data.csv", option, value), 2, option, repr(value))


def test_unit_user_needs_max_steps(refuse, long_csv):
    args = long_args()
    args[args.index("--unit") + 1] = "user"
    refuse(args, 2, "--max-steps", "--unit user")


def test_unit_w_event_needs_w(refuse, long_csv):
    args = long_args()
    args[args.index("--unit") + 1] = "w-event"
    refuse(args, 2, "--w", "--unit w-event")


@pytest.mark.parametrize("value, shown", [("0", "got 0"), ("-1", "got -1"), ("nan", "got nan"),
                                          ("inf", "got inf")])
def test_bad_max_per_step(refuse, long_csv, value, shown):
    refuse(long_args("data.csv", "--max-per-step", value), 2, "--max-per-step", shown)


@pytest.mark.parametrize("option", ["--max-steps", "--w", "--series-per-user"])
def test_counts_must_be_positive(refuse, long_csv, option):
    refuse(long_args("data.csv", option, "0"), 2, option, "'0'")


def test_negative_seed(refuse, long_csv):
    refuse(long_args("data.csv", "--seed", "-5"), 2, "--seed", "'-5'")


def test_clip_bounds_in_wrong_order(refuse, long_csv):
    refuse(long_args("data.csv", "--clip-min", "5", "--clip-max", "1"), 2, "--clip-min", "--clip-max", "5")


def test_missing_required_option(refuse, long_csv):
    refuse(["release", "data.csv", "--delta", "1e-6", "--unit", "event", "--value-col", "count",
            "--series-col", "sensor", "-o", "out.csv"], 2, "--epsilon")


def test_missing_input_argument(refuse):
    refuse(["release", *GAUSS], 2, "Missing argument", "input")


def test_unknown_command(refuse):
    refuse(["relase", "data.csv"], 2, "No such command", "'relase'")


def test_bare_tsdp_shows_the_help_on_stderr(tsdp_cli):
    run = tsdp_cli()
    assert run.code == 2 and run.out == ""
    assert run.err.startswith("Usage: tsdp") and "release" in run.err and "error:" not in run.err


def test_unknown_option(refuse, long_csv):
    refuse(long_args("data.csv", "--epsilonn", "1"), 2, "--epsilonn")


# ---------------------------------------------------------------------------------------------
# Event layout
# ---------------------------------------------------------------------------------------------


def event_args(*extra, drop=()):
    args = ["release", "events.csv", *GAUSS, "--user-col", "user", "--time-col", "ts", "-o", "out.csv"]
    grid = dict(zip(EVENT_GRID[::2], EVENT_GRID[1::2]))
    for option, value in grid.items():
        if option not in drop:
            args += [option, value]
    return args + list(extra)


@pytest.mark.parametrize("drop", [("--start",), ("--end",), ("--freq",), ("--start", "--end", "--freq")])
def test_event_grid_must_be_given(refuse, events_csv, drop):
    line = refuse(event_args(drop=drop), 2, *drop, "required", "public")
    named = line.split("required")[0]
    for option in {"--start", "--end", "--freq"} - set(drop):
        assert option not in named


def test_event_series_col_needs_series_keys(refuse, events_csv):
    refuse(event_args("--series-col", "station"), 2, "--series-keys", "--series-col")


def test_event_duplicate_series_keys(refuse, events_csv):
    refuse(event_args("--series-col", "station", "--series-keys", "st1,st1"), 2, "--series-keys", "duplicate")


def test_event_null_user_id(refuse, tmp_path):
    write(tmp_path / "events.csv", EVENTS.replace("u2,", ","))
    refuse(event_args(), 4, "column 'user'", "missing user id", "row 3")


def test_event_value_col_needs_value_bound(refuse, tmp_path):
    write(tmp_path / "events.csv", "user,ts,amount\nu1,2024-01-01 00:10:00,2.5\n")
    refuse(event_args("--value-col", "amount"), 2, "--value-bound", "--value-col")


@pytest.mark.parametrize("bound", ["0", "-1", "nan"])
def test_event_value_bound_must_be_positive(refuse, tmp_path, bound):
    write(tmp_path / "events.csv", "user,ts,amount\nu1,2024-01-01 00:10:00,2.5\n")
    refuse(event_args("--value-col", "amount", "--value-bound", bound), 2, "--value-bound", bound)


def test_event_null_value(refuse, tmp_path):
    write(tmp_path / "events.csv", "user,ts,amount\nu1,2024-01-01 00:10:00,2.5\nu2,2024-01-01 00:20:00,\n")
    line = refuse(event_args("--value-col", "amount", "--value-bound", "3"), 4,
                  "column 'amount'", "missing value", "row 2")
    assert "--fill-missing" not in line  # that option does not apply to event input


def test_event_monthly_grid_needs_month_aligned_start(refuse, events_csv):
    args = ["release", "events.csv", *GAUSS, "--user-col", "user", "--time-col", "ts",
            "--start", "2024-01-15", "--end", "2024-06-01", "--freq", "1mo", "-o", "out.csv"]
    refuse(args, 2, "--start", "2024-01-15", "first instant of a month", "1mo")


@pytest.mark.parametrize("option, value", [("--start", "soon"), ("--end", "later")])
def test_event_unparseable_grid_bounds(refuse, events_csv, option, value):
    args = event_args(drop=(option,)) + [option, value]
    refuse(args, 2, option, repr(value))


def test_event_end_before_start(refuse, events_csv):
    args = event_args(drop=("--end",)) + ["--end", "2023-12-31"]
    refuse(args, 2, "--end", "--start", "2023-12-31")


def test_event_bad_freq(refuse, events_csv):
    refuse(event_args(drop=("--freq",)) + ["--freq", "fortnightly"], 2, "--freq", "'fortnightly'")


def test_event_grid_too_large(refuse, events_csv):
    args = event_args(drop=("--end", "--freq")) + ["--end", "2124-01-01", "--freq", "1s"]
    refuse(args, 5, "--freq 1s", "2124-01-01", "steps")


def test_event_max_per_step_must_be_whole(refuse, events_csv):
    args = event_args("--max-per-step", "1.5")
    args[args.index("--unit") + 1] = "w-event"
    refuse(args + ["--w", "2"], 2, "--max-per-step", "1.5")


def test_user_col_needs_event_layout(refuse, long_csv):
    refuse(long_args("data.csv", "--layout", "long", "--user-col", "sensor"), 2, "--user-col", "--layout events")


def test_event_layout_needs_user_col(refuse, events_csv):
    args = event_args("--layout", "events")
    i = args.index("--user-col")
    del args[i:i + 2]
    refuse(args, 2, "--user-col", "--layout events")


# ---------------------------------------------------------------------------------------------
# Config files
# ---------------------------------------------------------------------------------------------


def test_config_with_unknown_key(refuse, long_csv, tmp_path):
    write(tmp_path / "job.toml", '[release]\nepsilon = 1.0\nepsilom = 2.0\n')
    refuse(long_args("data.csv", "--config", "job.toml"), 2, "--config", "'epsilom'", "unknown setting")


def test_config_run_only_key_is_refused(refuse, long_csv, tmp_path):
    write(tmp_path / "job.toml", 'config = "other.toml"\n')
    refuse(long_args("data.csv", "--config", "job.toml"), 2, "--config", "'config'")


def test_config_that_is_not_toml(refuse, long_csv, tmp_path):
    write(tmp_path / "job.toml", "[release\nepsilon = = 1\n")
    refuse(long_args("data.csv", "--config", "job.toml"), 2, "--config", "'job.toml'", "not valid TOML")


def test_config_file_missing(refuse, long_csv):
    refuse(long_args("data.csv", "--config", "absent.toml"), 2, "--config", "'absent.toml'", "does not exist")


def test_config_value_of_the_wrong_type(refuse, long_csv, tmp_path):
    write(tmp_path / "job.toml", 'epsilon = "lots"\n')
    args = long_args("data.csv", "--config", "job.toml")
    i = args.index("--epsilon")
    del args[i:i + 2]
    refuse(args, 2, "--epsilon", "'lots'")


def test_config_bad_value_is_checked_like_a_flag(refuse, long_csv, tmp_path):
    write(tmp_path / "job.toml", "[release]\ndelta = 2.0\n")
    args = long_args("data.csv", "--config", "job.toml")
    i = args.index("--delta")
    del args[i:i + 2]
    refuse(args, 2, "--delta", "got 2")


# ---------------------------------------------------------------------------------------------
# End to end, in a separate process: exit codes and a single error line, never a traceback
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("args, code, needle", [
    (["release", "nope.csv", *GAUSS, "--value-col", "count", "-o", "out.csv"], 2, "'nope.csv'"),
    (long_args("data.csv", "--value-col", "total"), 4, "'total'"),
    (long_args("data.csv", "--epsilon", "nan"), 2, "--epsilon"),
])
def test_subprocess_errors_have_no_traceback(long_csv, tmp_path, args, code, needle, dir_snapshot):
    before = dir_snapshot(tmp_path)
    proc = subprocess.run(TSDP + args, cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert proc.returncode == code, proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: ") and needle in lines[0], proc.stderr
    assert "Traceback" not in proc.stderr
    assert proc.stdout == ""
    assert dir_snapshot(tmp_path) == before


def test_debug_shows_the_traceback(tsdp_cli, long_csv):
    """--debug re-raises (the one case where a traceback is wanted)."""
    from tsdp.errors import DataError

    with pytest.raises(DataError):
        tsdp_cli(*long_args("data.csv", "--value-col", "total", "--debug"))


def test_refusal_exit_codes_are_documented():
    from tsdp.errors import BudgetError, DataError, NumericalError, TsdpError, UsageError

    assert (TsdpError.exit_code, UsageError.exit_code, BudgetError.exit_code,
            DataError.exit_code, NumericalError.exit_code) == (1, 2, 3, 4, 5)


@pytest.mark.parametrize("mechanism", ["gaussian", "subsample"])
def test_signed_contributions_under_substitution_are_refused(refuse, tmp_path, mechanism):
    """A contribution in [-M, M] replaced by another in the same cell moves it by 2 M: the L2 of
    substitution (twice the cells, M each: M sqrt(2 I)) would understate it by sqrt(2) (found after
    the red-team audit: --allow-negative --neighbouring substitute claimed 2.83 where 4 is reached)."""
    write(tmp_path / "data.csv", long_with("-3"))
    extra = ["--mechanism", mechanism] + (["--sampling-rate", "0.5"] if mechanism == "subsample" else [])
    refuse(long_args("data.csv", "--allow-negative", "--neighbouring", "substitute", *extra), 2,
           "--allow-negative", "--neighbouring substitute", "2 M")

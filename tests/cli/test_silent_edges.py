"""No silent wrong answer at the edges (issue 29): config files, headers, big integers, closed pipes,
signals, full disks, close timestamps, the hardened lattice at a large epsilon, verify's error line.

Each section is one class of the issue; every test here failed on the code before the fix (exit 0
with a wrong answer, a wrong exit code, or a reservation left pending). Refusals go through the
``refuse`` fixture of tests/conftest.py (the documented exit code, one ``error:`` line naming the
option or column, nothing on stdout, the directory unchanged).
"""

from __future__ import annotations

import gzip
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import polars as pl
import pytest

from tsdp.accounting import ledger as ledger_mod

REPO = Path(__file__).resolve().parents[2]
HOURS = [f"2024-01-01 {h:02d}:00:00" for h in range(24)]
LAPLACE = ["--mechanism", "laplace", "--epsilon", "1", "--unit", "event"]
GAUSS = ["--mechanism", "gaussian", "--epsilon", "1", "--delta", "1e-6", "--unit", "event"]


def wide(path="wide.csv", rows=None, sep=","):
    rows = rows if rows is not None else [(t, h % 5, (3 * h) % 7) for h, t in enumerate(HOURS)]
    text = sep.join(("time", "a", "b")) + "\n" + "".join(sep.join(map(str, r)) + "\n" for r in rows)
    Path(path).write_text(text)
    return path


def big_wide(path, columns=40):
    """Four weeks of hourly values in ``columns`` series (a release of a few hundred KB)."""
    times = [f"2024-01-{1 + h // 24:02d} {h % 24:02d}:00:00" for h in range(24 * 28)]
    Path(path).write_text("time," + ",".join(f"s{k}" for k in range(columns)) + "\n" + "".join(
        t + "," + ",".join(str((h * k) % 9) for k in range(columns)) + "\n" for h, t in enumerate(times)))


def tsdp_process(*args, **kwargs):
    return subprocess.Popen([sys.executable, "-m", "tsdp", *map(str, args)], **kwargs)


def ledger_entries(path) -> list[tuple[int, str]]:
    return [(e.id, e.state) for s in ledger_mod.status(path) for e in s.entries]


# ---------------------------------------------------------------------------------------------
# config files: everything a file says takes effect, or the run is refused naming it
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("text, needles", [
    ("[release]\nmax-per-step = 1\nmax_per_step = 2\n", ["'max-per-step'", "'max_per_step'", "same option"]),
    ("[relase]\nround = true\n", ["[relase]", "names no tsdp command"]),
    ("round = true\n[release]\nclip-min = 0\n", ["'round'", "outside"]),
    ("debug = true\n", ["'debug'", "--debug"]),
    ("[flip]\nlip-delta = 0.1\n", ["no table for 'tsdp release'", "[flip]"]),
    ("[release]\n[release.extra]\nround = true\n", ["[extra]"]),
], ids=["two-spellings", "misspelt-table", "key-beside-table", "debug", "only-other-tables", "nested-table"])
def test_config_settings_that_would_not_apply_are_refused(refuse, tmp_path, text, needles):
    wide()
    (tmp_path / "job.toml").write_text(text)
    refuse(["release", "wide.csv", *LAPLACE, "--config", "job.toml", "-o", "out.csv"], 2, "--config", *needles)


def test_config_old_and_new_spelling_of_one_key_are_refused(refuse, tmp_path):
    (tmp_path / "job.toml").write_text("context = 1\ncontext-length = 2\n")
    line = refuse(["account", "dpsgd", "--series", "320", "--length", "20", "--batch-size", "32", "--delta", "1e-5",
                   "--forecast-length", "1", "--noise-multiplier", "1", "--steps", "10", "--config", "job.toml"],
                  2, "'context'", "'context-length'")
    assert "same option" in line


@pytest.mark.parametrize("text, needle", [
    ("[account]\ndelta = 1e-5\n[account.dpsgd]\nseries = 320\n", "'delta' in table [account]"),
    ("[account.dpsgs]\nseries = 320\n", "[account.dpsgs]"),
])
def test_config_group_tables_hold_only_subcommand_tables(refuse, tmp_path, text, needle):
    (tmp_path / "job.toml").write_text(text)
    refuse(["account", "dpsgd", "--length", "20", "--batch-size", "32", "--context-length", "1", "--delta", "1e-5",
            "--forecast-length", "1", "--noise-multiplier", "1", "--steps", "10", "--config", "job.toml"], 2, needle)


def test_config_with_tables_for_several_commands_applies_the_commands_own(tsdp_cli, tmp_path):
    """[release] and [flip] in one file: release takes its table (round and clip-min apply)."""
    wide(rows=[(t, 3, 4) for t in HOURS])
    (tmp_path / "job.toml").write_text("[release]\nround = true\nclip-min = 0\nclip-max = 9\n"
                                       "[flip]\nlip-delta = 0.1\n[account.dpsgd]\nseries = 3\n")
    run = tsdp_cli("release", "wide.csv", *LAPLACE, "--config", "job.toml", "-o", "out.csv", "--seed", "1", "-q")
    assert run.code == 0, run.err
    out = pl.read_csv(tmp_path / "out.csv")
    assert out["a"].dtype == pl.Int64 and out["a"].min() >= 0 and out["a"].max() <= 9


# ---------------------------------------------------------------------------------------------
# duplicate headers in every text reader
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["dup.tsv", "dup.csv.gz", "dup.tsv.gz"])
def test_a_repeated_column_name_is_refused_in_every_text_format(refuse, tmp_path, name):
    sep = "\t" if ".tsv" in name else ","
    text = sep.join(("time", "a", "a")) + "\n" + "".join(f"{t}{sep}1{sep}2\n" for t in HOURS)
    data = gzip.compress(text.encode()) if name.endswith(".gz") else text.encode()
    (tmp_path / name).write_bytes(data)
    refuse(["release", name, *LAPLACE, "-o", "out.csv"], 4, "column 'a'", "more than once", name)


# ---------------------------------------------------------------------------------------------
# integers beyond 2**53, judged exactly
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("value", ["9007199254740993", "-9007199254740993", "9007199254740992.5"])
def test_csv_numbers_just_beyond_2p53_are_refused(refuse, tmp_path, value):
    """float64 reads 2**53 + 1 as 2**53: the digits decide, not the rounded float."""
    wide(rows=[(t, value if h == 3 else 1, 2) for h, t in enumerate(HOURS)])
    refuse(["release", "wide.csv", *LAPLACE, "--allow-negative", "--max-per-step", "1", "-o", "out.csv"], 4, "column 'a'", "row 4",
           value, "2**53")


@pytest.mark.parametrize("value", [2**53 + 1, -(2**53) - 1, 2**62])
def test_parquet_int64_beyond_2p53_is_refused(refuse, tmp_path, value):
    times = pl.datetime_range(pl.datetime(2024, 1, 1), pl.datetime(2024, 1, 1, 23), "1h", eager=True)
    pl.DataFrame({"time": times, "a": [value] + [1] * 23}).write_parquet(tmp_path / "big.parquet")
    refuse(["release", "big.parquet", *LAPLACE, "--allow-negative", "--max-per-step", "1", "-o", "out.csv"], 4, "column 'a'", "row 1",
           str(value))


def test_long_layout_text_values_beyond_2p53_are_refused(refuse, tmp_path):
    """A value column read as text (a bad cell elsewhere made it so) is judged by its digits too."""
    (tmp_path / "long.csv").write_text("series,time,value\n" + "".join(
        f"x,{t},{'9007199254740993' if h == 0 else h}\n" for h, t in enumerate(HOURS)))
    refuse(["release", "long.csv", "--series-col", "series", "--value-col", "value", *LAPLACE, "-o", "out.csv"],
           4, "column 'value'", "9007199254740993")


def test_2p53_itself_is_released(tsdp_cli, tmp_path):
    times = pl.datetime_range(pl.datetime(2024, 1, 1), pl.datetime(2024, 1, 1, 23), "1h", eager=True)
    pl.DataFrame({"time": times, "a": [2**53] + [1] * 23}).write_parquet(tmp_path / "edge.parquet")
    wide(rows=[(t, 9007199254740992 if h == 0 else 1, 2) for h, t in enumerate(HOURS)])
    for name in ("edge.parquet", "wide.csv"):
        run = tsdp_cli("release", name, *LAPLACE, "-o", f"{name}.out.csv", "--seed", "1", "-q")
        assert run.code == 0, run.err


# ---------------------------------------------------------------------------------------------
# -o - into a closed pipe: nothing published, nothing charged
# ---------------------------------------------------------------------------------------------


def _init_ledger(tmp_path, epsilon="5"):
    from tsdp.cli.app import main

    assert main(["ledger", "init", str(tmp_path / "b.db"), "--dataset", "d", "--epsilon", epsilon, "--delta",
                 "1e-5", "-q"]) == 0


def test_stdout_closed_before_writing_publishes_and_charges_nothing(tmp_path):
    wide()
    _init_ledger(tmp_path)
    read, write = os.pipe()
    os.close(read)  # the reader is gone before tsdp writes a byte
    proc = tsdp_process("release", "wide.csv", *LAPLACE, "-o", "-", "--report", "out.report.json",
                        "--ledger", "b.db", "--dataset", "d", cwd=tmp_path, stdout=write, stderr=subprocess.PIPE,
                        text=True)
    os.close(write)
    err = proc.communicate(timeout=120)[1]
    lines = [line for line in err.splitlines() if line.strip()]
    assert proc.returncode == 5, err
    assert len(lines) == 1 and lines[0].startswith("error: stdout") and "nothing was charged" in lines[0], lines
    assert not (tmp_path / "out.report.json").exists()
    assert ledger_entries(tmp_path / "b.db") == []
    assert sorted(p.name for p in tmp_path.iterdir()) == ["b.db", "wide.csv"]  # no temporary file left


def test_stdout_closed_after_part_of_the_release_keeps_the_charge(tmp_path):
    """The reader took part of the release and stopped: the values went out, so the spend stays
    recorded (the safe side), but the report, which describes the whole file, is not published."""
    import select

    big_wide(tmp_path / "wide.csv")  # about 300 KB released: more than a pipe holds
    _init_ledger(tmp_path)
    read, write = os.pipe()
    proc = tsdp_process("release", "wide.csv", *LAPLACE, "-o", "-", "--report", "out.report.json",
                        "--ledger", "b.db", "--dataset", "d", cwd=tmp_path, stdout=write, stderr=subprocess.PIPE,
                        text=True)
    os.close(write)
    assert select.select([read], [], [], 120)[0], "tsdp wrote nothing"
    assert os.read(read, 10)  # the reader takes ten bytes of a release larger than the pipe, and stops
    os.close(read)
    err = proc.communicate(timeout=120)[1]
    assert proc.returncode == 5, err
    assert "part of the release went out" in err and "charge for it stands" in err
    assert not (tmp_path / "out.report.json").exists()
    assert [state for _, state in ledger_entries(tmp_path / "b.db")] == ["spent"]


# ---------------------------------------------------------------------------------------------
# signals: one error line for Ctrl-C; the ledger never left pending
# ---------------------------------------------------------------------------------------------


def test_ctrl_c_prints_one_error_line(tsdp_cli, tmp_path, monkeypatch):
    """A real SIGINT while the input is read: exit 130 and one error line (it was a silent 130)."""
    import tsdp.cli.release as release_cli

    wide()

    def interrupted_read(*args, **kwargs):
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(1)  # the handler raises at the next bytecode

    monkeypatch.setattr(release_cli, "read_table", interrupted_read)
    run = tsdp_cli("release", "wide.csv", *LAPLACE, "-o", "out.csv")
    assert run.code == 130
    assert run.error_line.startswith("error: interrupted; nothing was published")
    assert not (tmp_path / "out.csv").exists()


def _hold_a_read_transaction(path) -> sqlite3.Connection:
    reader = sqlite3.connect(path, isolation_level=None)
    reader.execute("BEGIN")
    reader.execute("SELECT count(*) FROM entries").fetchone()  # a SHARED lock: a writer's COMMIT must wait
    return reader


@pytest.mark.parametrize("signum, code", [(signal.SIGTERM, 143), (signal.SIGINT, 130)], ids=["SIGTERM", "SIGINT"])
def test_a_signal_while_the_reservation_waits_on_a_reader_leaves_nothing_pending(tmp_path, signum, code):
    """Another process holds a read transaction on the ledger, so the reservation's COMMIT waits;
    the signal arrives then. Once the reader lets go the reservation commits, and the run must
    cancel it (before the fix its id was lost on the way back and the entry stayed pending)."""
    wide()
    _init_ledger(tmp_path)
    reader = _hold_a_read_transaction(tmp_path / "b.db")
    proc = tsdp_process("release", "wide.csv", *LAPLACE, "-o", "out.csv", "--ledger", "b.db", "--dataset", "d",
                        cwd=tmp_path, stderr=subprocess.PIPE, text=True)
    started = time.monotonic()
    while not (tmp_path / "b.db-journal").exists():  # the writer has written its pages: it is committing
        assert proc.poll() is None and time.monotonic() - started < 60, proc.stderr.read()
        time.sleep(0.01)
    time.sleep(0.3)
    proc.send_signal(signum)
    time.sleep(0.3)
    reader.execute("COMMIT")
    reader.close()
    err = proc.communicate(timeout=120)[1]
    lines = [line for line in err.splitlines() if line.strip()]
    assert proc.returncode == code, err
    assert len(lines) == 1 and "reservation, if any, was cancelled" in lines[0], lines
    assert ledger_entries(tmp_path / "b.db") == []
    assert not (tmp_path / "out.csv").exists()


def test_a_cancel_that_cannot_run_names_the_entry_left_pending(tsdp_cli, tmp_path, monkeypatch):
    """The reader holds on for longer than the ledger waits: the error line says the entry is still
    pending and how to free it, instead of claiming it was cancelled."""
    import tsdp.cli.release as release_cli

    wide()
    _init_ledger(tmp_path)
    monkeypatch.setattr(ledger_mod, "BUSY_TIMEOUT", 0.2)
    readers = []

    def interrupted_read(*args, **kwargs):
        readers.append(_hold_a_read_transaction(tmp_path / "b.db"))
        raise KeyboardInterrupt

    monkeypatch.setattr(release_cli, "read_table", interrupted_read)
    run = tsdp_cli("release", "wide.csv", *LAPLACE, "-o", "out.csv", "--ledger", "b.db", "--dataset", "d")
    assert run.code == 130
    assert "ledger entry 1 of" in run.error_line and "still pending" in run.error_line
    assert f"tsdp ledger cancel {tmp_path / 'b.db'} 1" in run.error_line or "tsdp ledger cancel b.db 1" in run.error_line
    readers[0].execute("COMMIT")
    assert ledger_entries(tmp_path / "b.db") == [(1, "pending")]
    assert tsdp_cli("ledger", "cancel", "b.db", "1", "-q").code == 0
    assert ledger_entries(tmp_path / "b.db") == []


def test_a_ledger_locked_too_long_is_a_resource_error(refuse, tmp_path, monkeypatch):
    _init_ledger(tmp_path)
    monkeypatch.setattr(ledger_mod, "BUSY_TIMEOUT", 0.2)
    writer = sqlite3.connect(tmp_path / "b.db", isolation_level=None)
    writer.execute("BEGIN IMMEDIATE")
    try:
        refuse(["ledger", "spend", "b.db", "--dataset", "d", "--epsilon", "1", "--delta", "0"], 5, "b.db",
               "stayed locked")
    finally:
        writer.execute("ROLLBACK")


# ---------------------------------------------------------------------------------------------
# resources: exit 5 naming what is full
# ---------------------------------------------------------------------------------------------


def _disk_full(*args, **kwargs):
    raise OSError("No space left on device (os error 28)")  # what polars' Rust writer raises


def _parquet_disk_full(*args, **kwargs):
    raise pl.exceptions.ComputeError("parquet: File out of specification: underlying IO error: No space left on "
                                     "device (os error 28)")


@pytest.mark.parametrize("output, method, fault", [("out.csv", "write_csv", _disk_full),
                                                   ("out.parquet", "write_parquet", _parquet_disk_full)])
def test_a_full_disk_under_the_output_is_a_resource_error(refuse, tmp_path, monkeypatch, output, method, fault):
    wide()
    monkeypatch.setattr(pl.DataFrame, method, fault)
    refuse(["release", "wide.csv", *LAPLACE, "-o", output], 5, "--output", output, "No space left")


def test_a_full_tmpfs_under_the_output_is_a_resource_error(refuse, tmp_path):
    """The same on a real 64 KiB file system (root only: it mounts a tmpfs)."""
    full = tmp_path / "full"
    full.mkdir()
    if os.geteuid() != 0 or subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(full)],
                                           capture_output=True).returncode != 0:
        pytest.skip("mounting a small tmpfs needs root")
    try:
        big_wide(tmp_path / "wide.csv")
        refuse(["release", "wide.csv", *LAPLACE, "-o", "full/out.csv"], 5, "full/out.csv", "No space left")
        assert list(full.iterdir()) == []
    finally:
        subprocess.run(["umount", str(full)], check=True)


EVENTS = ["--layout", "events", "--user-col", "user", "--series-col", "station", "--series-keys", "s1,s2",
          "--start", "2024-01-01", "--end", "2024-01-01 03:00:00", "--freq", "1h", *LAPLACE[:4], "--unit", "user",
          "--max-steps", "3"]


def _events(path="events.csv"):
    Path(path).write_text("user,time,station\n" + "".join(
        f"u{i % 7},2024-01-01 {i % 3:02d}:{(i * 7) % 60:02d}:00,s{1 + i % 2}\n" for i in range(40)))


def test_a_full_work_dir_is_a_resource_error_naming_it(refuse, tmp_path, monkeypatch):
    """Before: exit 4 blaming the INPUT."""
    import tsdp.engine.local as local

    _events()
    (tmp_path / "scratch").mkdir()
    monkeypatch.setattr(local, "shard_count", lambda *args, **kwargs: 4)
    monkeypatch.setattr(pl.LazyFrame, "sink_parquet", _parquet_disk_full)
    line = refuse(["release", "events.csv", *EVENTS, "--work-dir", "scratch", "-o", "out.csv"], 5,
                  "--work-dir", "scratch", "No space left")
    assert "INPUT" not in line


def test_an_unwritable_work_dir_is_refused_naming_it(refuse, tmp_path, monkeypatch):
    """Before: exit 1 ('unexpected PermissionError')."""
    import tempfile

    import tsdp.engine.local as local

    _events()
    (tmp_path / "scratch").mkdir()
    monkeypatch.setattr(local, "shard_count", lambda *args, **kwargs: 4)

    def denied(*args, **kwargs):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(tempfile, "mkdtemp", denied)
    refuse(["release", "events.csv", *EVENTS, "--work-dir", "scratch", "-o", "out.csv"], 2, "--work-dir",
           "scratch", "Permission denied")


@pytest.mark.parametrize("command", ["mean-estimate", "release-events"])
def test_a_truncated_gzip_input_names_the_file(refuse, tmp_path, command):
    """Before: exit 1 'error: aborted' (Typer turned the EOFError into an abort)."""
    text = "user,time,station,value\n" + "".join(
        f"u{i % 7},2024-01-01 {i % 3:02d}:{(i * 7) % 60:02d}:00,s{1 + i % 2},{i % 5}\n" for i in range(4000))
    data = gzip.compress(text.encode())
    (tmp_path / "in.csv.gz").write_bytes(data[:len(data) // 2])
    args = (["mean-estimate", "in.csv.gz", "--user-col", "user", "--value-col", "value", "--upper", "10",
             "--epsilon", "1", "--participation", "public"] if command == "mean-estimate"
            else ["release", "in.csv.gz", *EVENTS])
    refuse([*args, "-o", "out.csv"], 4, "in.csv.gz")


# ---------------------------------------------------------------------------------------------
# timestamps closer than the grid, integer times across the int64 range
# ---------------------------------------------------------------------------------------------


def test_csv_times_100ns_apart_are_refused_as_finer_than_the_grid(refuse, tmp_path):
    """Before: 'duplicate timestamp' (parsing at microseconds had merged them)."""
    (tmp_path / "t.csv").write_text("time,a\n2024-01-01 00:00:00.0000001,1\n2024-01-01 00:00:00.0000002,2\n"
                                    "2024-01-01 00:00:00.0000003,3\n")
    line = refuse(["release", "t.csv", *LAPLACE, "-o", "out.csv"], 4, "column 'time'", "row 1", "microsecond")
    assert "duplicate" not in line


def test_parquet_nanosecond_times_100ns_apart_are_refused(refuse, tmp_path):
    """Before: exit 5 with a ZeroDivisionError."""
    times = pl.Series("time", [0, 100, 200]).cast(pl.Datetime("ns"))
    pl.DataFrame({"time": times, "a": [1.0, 2.0, 3.0]}).write_parquet(tmp_path / "t.parquet")
    line = refuse(["release", "t.parquet", *LAPLACE, "-o", "out.csv"], 4, "column 'time'", "row 2",
                  "100 ns past a whole microsecond")
    assert "ZeroDivision" not in line


def test_nanosecond_times_on_whole_microseconds_are_released(tsdp_cli, tmp_path):
    times = pl.Series("time", [0, 1000, 2000]).cast(pl.Datetime("ns"))
    pl.DataFrame({"time": times, "a": [1.0, 2.0, 3.0]}).write_parquet(tmp_path / "t.parquet")
    (tmp_path / "t.csv").write_text("time,a\n2024-01-01 00:00:00.000000000,1\n2024-01-01 00:00:01.000000000,2\n")
    for name in ("t.parquet", "t.csv"):
        run = tsdp_cli("release", name, *LAPLACE, "-o", f"{name}.out.csv", "--seed", "1", "-q")
        assert run.code == 0, run.err


def test_event_times_with_nanoseconds_are_bucketed(tsdp_cli, tmp_path):
    """Raw events are only floored into buckets: digits below a microsecond change nothing."""
    Path("events.csv").write_text("user,time,station\nu1,2024-01-01 00:10:00.123456789,s1\n"
                                  "u2,2024-01-01 01:59:59.999999999,s2\n")
    run = tsdp_cli("release", "events.csv", *EVENTS, "-o", "out.csv", "--seed", "1", "-q")
    assert run.code == 0, run.err


@pytest.mark.parametrize("kind", ["csv", "parquet"])
def test_integer_times_spanning_the_int64_range_are_a_grid_size_error(refuse, tmp_path, kind):
    """Before: exit 1 (numpy's differences overflowed) or 'irregular time steps'."""
    values = [-(2**63), 2**63 - 1, *range(22)]
    if kind == "csv":
        (tmp_path / "t.csv").write_text("time,a\n" + "".join(f"{v},1\n" for v in values))
    else:
        pl.DataFrame({"time": values, "a": [1.0] * len(values)}).write_parquet(tmp_path / "t.parquet")
    refuse(["release", f"t.{kind}", *LAPLACE, "-o", "out.csv"], 5, "column 'time'", "-9223372036854775808",
           "--freq")


# ---------------------------------------------------------------------------------------------
# the hardened Gaussian at a large epsilon; verify's error line
# ---------------------------------------------------------------------------------------------


def test_a_gaussian_release_at_epsilon_20_adapts_its_lattice(tsdp_cli, tmp_path):
    """Before: refused naming --granularity, which the user never set. The default lattice is refined
    until the rounding slack is at most 2^-10 of delta, and that slack is still accounted (verify
    recomputes it from the report's granularity)."""
    from tsdp.accounting import discrete as disc

    wide()
    run = tsdp_cli("release", "wide.csv", "--mechanism", "gaussian", "--epsilon", "20", "--delta", "1e-6",
                   "--unit", "event", "-o", "out.csv", "-q")
    assert run.code == 0, run.err
    params = json.loads((tmp_path / "out.report.json").read_text())["claim"]["parameters"]
    g, sigma = params["granularity"], params["sigma"]
    assert params["rounding_slack"] == pytest.approx(disc.rounding_slack(20, disc.slack_rate(sigma / g, 1)))
    assert params["rounding_slack"] <= 1e-6 * 2**-10
    assert sigma / g > 2**24  # finer than the default lattice of a small epsilon
    verify = tsdp_cli("account", "verify", "out.report.json", "--released", "out.csv", "-q")
    assert verify.code == 0, verify.err


def test_an_epsilon_no_lattice_can_serve_names_epsilon_not_granularity(refuse, tmp_path):
    wide()
    line = refuse(["release", "wide.csv", "--mechanism", "gaussian", "--epsilon", "60", "--delta", "1e-6", "--unit",
                   "event", "-o", "out.csv"], 2, "--epsilon 60", "--delta")
    assert "--granularity" not in line


def test_the_default_lattice_is_unchanged_where_the_slack_was_already_small():
    from tsdp.accounting import discrete as disc

    for epsilon, delta, cells in ((0.1, 1e-6, 1), (1, 1e-6, 48), (5, 1e-5, 2), (10, 1e-6, 1)):
        plain = disc.choose_granularity(4.2, 1.0, cells, "l2")
        assert disc.choose_granularity(4.2, 1.0, cells, "l2", (epsilon, delta)) == plain
    g = disc.choose_granularity(0.3, 1.0, 1, "l2", (20, 1e-6))
    assert disc.rounding_slack(20, 0.025 * (g / 0.3) ** 2) <= 1e-6 * disc.SLACK_SHARE
    assert disc.rounding_slack(20, 0.025 * (2 * g / 0.3) ** 2) > 1e-6 * disc.SLACK_SHARE  # the coarsest such


@pytest.mark.parametrize("edit, options, needle", [
    (0.5, [], "privacy_loss"), (5.0, ["--max-epsilon", "2"], "budget: epsilon 5 exceeds --max-epsilon 2"),
], ids=["lowered", "raised-over-budget"])
def test_verify_error_line_names_the_epsilon(tsdp_cli, tmp_path, edit, options, needle):
    """Before: the line named parameters.rounding_slack, a by-product of the edited epsilon."""
    wide()
    assert tsdp_cli("release", "wide.csv", *GAUSS, "-o", "out.csv", "-q").code == 0
    report = json.loads((tmp_path / "out.report.json").read_text())
    report["claim"]["epsilon"] = edit
    (tmp_path / "out.report.json").write_text(json.dumps(report))
    run = tsdp_cli("account", "verify", "out.report.json", "--released", "out.csv", "-q", *options)
    assert run.code == 3
    assert needle in run.error_line and f"epsilon {edit:g}" in run.error_line
    assert "rounding_slack" not in run.error_line.split("(and")[0]

"""Publishing staged files as a set (tsdp.io.publish): no clobbering, both or neither, synced.

Races are injected deterministically: another "process" creates a target between the up-front
check and the moment tsdp publishes, either before the locked check (the set is refused before
anything is moved or charged) or between two links (the moved file is taken back and the ledger
spend reopened and cancelled).
"""

from __future__ import annotations

import os

import polars as pl
import pytest

from tsdp.accounting import ledger
from tsdp.io import outputs
from tsdp.io import publish
from tsdp.io.files import AtomicOutputs
from tsdp.io.publish import OutputRaced

FRAME = pl.DataFrame({"time": [1, 2], "value": [1.5, 2.0]})


def listing(directory) -> list[str]:
    return sorted(p.name for p in directory.iterdir())


def test_a_target_that_appeared_refuses_the_set_before_anything_moves(tmp_path):
    called = []
    with pytest.raises(OutputRaced, match="--report: .*appeared while this run was working.*--force"):
        with AtomicOutputs() as outputs:
            outputs.stage_table(FRAME, tmp_path / "out.csv")
            outputs.stage_bytes(b"{}", tmp_path / "out.report.json", option="--report")
            (tmp_path / "out.report.json").write_bytes(b"theirs")  # another process published it
            outputs.commit(before_publish=lambda: called.append(True))
    assert called == []  # nothing charged
    assert listing(tmp_path) == ["out.report.json"]
    assert (tmp_path / "out.report.json").read_bytes() == b"theirs"


def test_a_target_raced_between_two_links_takes_the_first_back(tmp_path, monkeypatch):
    real_link = os.link

    def racing_link(src, dst, *args, **kwargs):
        if str(dst).endswith("out.report.json"):
            with open(dst, "wb") as fh:  # a program that takes no lock wins the name just now
                fh.write(b"theirs")
        return real_link(src, dst, *args, **kwargs)

    monkeypatch.setattr(publish.os, "link", racing_link)
    called = []
    with pytest.raises(OutputRaced, match="out.report.json"):
        with AtomicOutputs() as outputs:
            outputs.stage_table(FRAME, tmp_path / "out.csv")
            outputs.stage_bytes(b"{}", tmp_path / "out.report.json", option="--report")
            outputs.commit(before_publish=lambda: called.append(True))
    assert called == [True]
    assert listing(tmp_path) == ["out.report.json"]  # our out.csv was taken back
    assert (tmp_path / "out.report.json").read_bytes() == b"theirs"


def test_replace_restores_the_previous_pair_when_the_second_move_fails(tmp_path, monkeypatch):
    (tmp_path / "out.csv").write_bytes(b"old output")
    (tmp_path / "out.report.json").write_bytes(b"old report")
    real_replace = os.replace

    def failing_replace(src, dst, *args, **kwargs):
        if str(dst).endswith("out.report.json") and not str(src).endswith(".previous"):
            raise OSError(5, "Input/output error")
        return real_replace(src, dst, *args, **kwargs)

    monkeypatch.setattr(publish.os, "replace", failing_replace)
    with pytest.raises(Exception, match="--report: cannot write .*Input/output error"):
        with AtomicOutputs(replace=True) as outputs:
            outputs.stage_table(FRAME, tmp_path / "out.csv")
            outputs.stage_bytes(b"{}", tmp_path / "out.report.json", option="--report")
            outputs.commit()
    assert listing(tmp_path) == ["out.csv", "out.report.json"]
    assert (tmp_path / "out.csv").read_bytes() == b"old output"
    assert (tmp_path / "out.report.json").read_bytes() == b"old report"


def test_files_and_directories_are_synced_before_and_after_publishing(tmp_path, monkeypatch):
    synced = []
    real_fsync = os.fsync

    def spy(fd):
        synced.append(os.readlink(f"/proc/self/fd/{fd}") if os.path.exists("/proc/self/fd") else fd)
        return real_fsync(fd)

    monkeypatch.setattr(publish.os, "fsync", spy)
    with AtomicOutputs() as outputs:
        outputs.stage_bytes(b"x", tmp_path / "r.json")
        outputs.commit()
    if os.path.exists("/proc/self/fd"):
        assert any(name.endswith(".tmp") for name in synced)  # the file, under its temporary name
        assert str(tmp_path) in synced  # then its directory
    else:
        assert len(synced) == 2


def test_publish_reopens_and_cancels_the_spend_of_a_raced_output(tmp_path, monkeypatch):
    """The ledger is confirmed just before the files move; if a move then loses a race, the entry
    is reopened and the reservation cancelled: a refused writer is never charged."""
    db = tmp_path / "l.db"
    ledger.init_ledger(db, "d", 1.0, 1e-5)
    real_link = os.link

    def racing_link(src, dst, *args, **kwargs):
        if str(dst).endswith("out.report.json"):
            (tmp_path / "out.report.json").write_bytes(b"theirs")
        return real_link(src, dst, *args, **kwargs)

    monkeypatch.setattr(publish.os, "link", racing_link)
    class FakeReport:
        def to_json(self):
            return b"{}"

    with pytest.raises(OutputRaced):
        with outputs.ledger_reservation(str(db), "d", 0.5, 0.0, "test") as held:
            assert [e.state for e in ledger.status(db, "d")[0].entries] == ["pending"]
            outputs.publish(FRAME, str(tmp_path / "out.csv"), str(tmp_path / "out.report.json"),
                           lambda described: FakeReport(), before_commit=outputs.confirm_reservation(held))
    assert ledger.status(db, "d")[0].entries == ()
    assert listing(tmp_path) == ["l.db", "out.report.json"]


def test_a_file_system_without_hard_links_still_publishes(tmp_path, monkeypatch):
    import errno

    def no_links(*args, **kwargs):
        raise OSError(errno.EPERM, "Operation not permitted")

    monkeypatch.setattr(publish.os, "link", no_links)
    with AtomicOutputs() as outputs:
        outputs.stage_table(FRAME, tmp_path / "out.csv")
        outputs.stage_bytes(b"{}", tmp_path / "out.report.json")
        outputs.commit()
    assert listing(tmp_path) == ["out.csv", "out.report.json"]
    with pytest.raises(OutputRaced):
        with AtomicOutputs() as outputs:
            outputs.stage_bytes(b"{}", tmp_path / "out.report.json")
            outputs.commit()
    assert (tmp_path / "out.report.json").read_bytes() == b"{}"

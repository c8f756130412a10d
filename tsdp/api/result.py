"""What the Python API returns: the released frame and its privacy report, and a way to publish both.

``frame, report = tsdp.release(...)`` unpacks like a pair. The report describes the frame as tsdp
would write it to CSV (``output.file`` is ``<in-memory>``, ``output.sha256`` the digest of those
bytes); :meth:`Result.write` publishes the frame and a report naming the written file, atomically
and together, exactly as the command line does (an existing file is refused unless ``force``).
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any, Callable, Iterator

IN_MEMORY = "<in-memory>"


def describe_in_memory(df: Any) -> dict[str, Any]:
    """The report's ``output`` for a frame not yet written: its CSV bytes' sha256."""
    from tsdp.io.files import serialise_table

    return {"file": IN_MEMORY, "format": "csv", "sha256": hashlib.sha256(serialise_table(df, "csv")).hexdigest()}


class Result:
    """``(frame, report)``: the released frame (polars or pandas, as given) and its
    :class:`tsdp.report.Report` (``report.to_dict()`` / ``report.to_json()`` for the document)."""

    def __init__(self, frame: Any, report: Any, released: Any, make_report: Callable[[dict], Any]) -> None:
        self.frame = frame
        self.report = report
        self._released = released  # the polars frame, as written
        self._make_report = make_report
        self.custodian: dict | None = None  # figures of the private data (NOT for publication), if any

    def __iter__(self) -> Iterator[Any]:
        return iter((self.frame, self.report))

    def __len__(self) -> int:
        return 2

    def __getitem__(self, i: int) -> Any:
        return (self.frame, self.report)[i]

    def __repr__(self) -> str:
        claim = self.report.claim
        return (f"Result({type(self.frame).__module__.split('.')[0]} frame {tuple(self.frame.shape)}, "
                f"{claim.definition} epsilon={claim.epsilon} delta={claim.delta})")

    def write(self, output: str | Path, report: str | Path | None = None, force: bool = False) -> Any:
        """Publish the frame to ``output`` (.csv or .parquet) and its report (default: OUTPUT with
        .report.json) atomically, both or neither; returns the report written."""
        from tsdp.errors import UsageError
        from tsdp.io.files import AtomicOutputs, check_output_path, table_format

        output = str(output)
        if output == "-":
            raise UsageError("output: write() publishes files; '-' (stdout) is for the command line")
        fmt = table_format(output, "output")
        report = str(report) if report is not None else str(Path(output).with_name(Path(output).stem + ".report.json"))
        table_format(report, "report", allowed=("json",))
        if Path(output).resolve() == Path(report).resolve():
            raise UsageError("report must differ from output")
        for path, option in ((output, "output"), (report, "report")):
            check_output_path(path, force, (), option)
        with AtomicOutputs(replace=force) as outputs:
            digest = outputs.stage_table(self._released, output, "output")
            written = self._make_report({"file": Path(output).name, "format": fmt, "sha256": digest})
            outputs.stage_bytes(written.to_json(), report, option="report")
            outputs.commit()
        return written

"""Where ``tsdp release --evaluate`` puts its figures, all of which are functions of the PRIVATE input.

``--evaluate N`` is a diagnostic the custodian asks for explicitly; it writes no release and no
report. Its figures (:mod:`tsdp.accuracy.evaluation`: the error against the raw input split into
bounding, approximation, noise and post-processing; the input's dropped, clipped and filled counts;
the signal's median and spread) are:

* printed as human tables on stdout, for the person at the terminal who asked for them (not under
  ``--quiet``), headed NOT PRIVATE;
* written to the custodian file (mode 0600, strict JSON, ``publish: false``) whenever ``--json`` or
  ``--custodian`` is given: the ``--json`` summary on stdout, which scripts and CI keep in their
  logs, carries no figure of the data, only the public parameters and the file's path.

The warnings printed on stderr are public texts (no figure of the data) whatever the mode; the
evaluated error exceeding the signal's spread is shown in the human table and recorded in the
custodian file, never on stderr or in ``--json``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tsdp.cli import common
from tsdp.caveats import Caveat
from tsdp.errors import UsageError
from tsdp.io.files import AtomicOutputs, check_output_path, table_format

EVALUATE_SUFFIX = ".evaluate" + common.CUSTODIAN_SUFFIX
DIAGNOSTIC_WARNING = Caveat("not_private_diagnostic", "--evaluate compares releases with the raw input: its figures "
                             "are NOT private, are for choosing parameters only, and no release was written")

# the input's counts (tsdp.io.events, tsdp.io.load), in the order the rows meet them
_COUNTS = (("rows_in", "rows read"), ("dropped_outside_grid", "dropped: outside the public grid"),
           ("dropped_undeclared_series", "dropped: undeclared series"),
           ("dropped_series_cap", "dropped: --series-per-user cap"), ("dropped_step_cap", "dropped: --max-steps cap"),
           ("dropped_per_step_cap", "dropped: --max-per-step cap"), ("rows_kept", "rows kept"),
           ("values_clipped", "values clipped to [0, --value-bound]"),
           ("filled_cells", "cells filled by --fill-missing zero (no true value: left out of the errors)"))


def custodian_path(custodian: str | None, input_path: str, json_mode: bool, force: bool) -> str | None:
    """The custodian file ``--evaluate`` writes (checked before any data is read), or None: given
    ``--custodian``, or with ``--json`` by default ``INPUT_NAME.evaluate.custodian.NOT-FOR-PUBLICATION.json``
    in the current directory."""
    if custodian is None and not json_mode:
        return None
    if custodian is None:
        stem = "stdin" if input_path == "-" else Path(input_path).name.split(".")[0]
        custodian = stem + EVALUATE_SUFFIX
    if custodian == "-":
        raise UsageError("--custodian -: custodian-only figures go to a file only, never to stdout")
    table_format(custodian, "--custodian", allowed=("json",))
    check_output_path(custodian, force, (input_path,), "--custodian")
    return custodian


def write_custodian(path: str, figures: dict[str, Any], force: bool) -> None:
    """The custodian file, atomically and readable by its owner only (mode 0600)."""
    with AtomicOutputs(replace=force) as outputs:
        outputs.stage_bytes(common.custodian_document("release --evaluate", figures), path, private=True,
                            option="--custodian")
        outputs.commit()


def counts(diagnostics: dict[str, int]) -> list[tuple[str, int]]:
    """The input's counts that apply, labelled, in order."""
    return [(label, int(diagnostics[key])) for key, label in _COUNTS if key in diagnostics]


def print_tables(evaluation: dict[str, Any], diagnostics: dict[str, int], public: dict[str, Any]) -> None:
    """The human tables on stdout: what ran, the input's counts, the error by part."""
    from rich.console import Console
    from rich.table import Table

    console = Console(soft_wrap=True)
    head = Table(title="tsdp release --evaluate: NOT PRIVATE (figures of the raw input, for you only)",
                 show_header=False, title_justify="left")
    head.add_column("field", style="bold")
    head.add_column("value")
    for key, value in public.items():
        if value is not None:
            head.add_row(key.replace("_", " "), _fmt(value))
    for label, count in counts(diagnostics):
        head.add_row(label, f"{count:,}")
    signal = evaluation["signal"]
    head.add_row("raw cells compared", f"{signal['cells']:,}")
    head.add_row("raw cell median", _fmt(signal["median"]))
    head.add_row("raw spread (within-series s.d.)", _fmt(signal["spread"]))
    head.add_row("r2 (share of the spread explained)", _fmt(evaluation["r2"]))
    console.print(head)

    parts = Table(title=f"error against the raw input, mean (s.d.) over {evaluation['runs']} runs",
                  title_justify="left")
    for column in ("part", "mean signed error", "MAE", "RMSE"):
        parts.add_column(column, justify="left" if column == "part" else "right")
    for name, figures in evaluation["error"].items():
        parts.add_row(name, *(f"{_fmt(figures[f]['mean'])} ({_fmt(figures[f]['sd'])})"
                              for f in ("mean", "mae", "rmse")),
                      style="bold" if name == "total" else None)
    console.print(parts)
    console.print("The parts' mean signed errors add up to the total's; MAE and RMSE do not add up.")
    if evaluation["error_exceeds_spread"]:
        console.print(f"[bold]The evaluated error (RMSE {_fmt(evaluation['rmse'])}) exceeds the signal's spread "
                      f"({_fmt(signal['spread'])}): each series' own mean would be closer to the input than "
                      "this release.[/bold] Look at the largest part above: bounding (raise the caps, or "
                      "--max-per-step auto), approximation (more coefficients or samples) or noise (a larger "
                      "--epsilon, smaller caps).")


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)

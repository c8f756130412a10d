"""Machinery shared by every subcommand: config files, output naming, progress and summaries.

Every option can come from ``--config FILE.toml`` (DESIGN.md section 4). The file holds top-level
``key = value`` pairs, or a table named after the command (``[release]``; ``[ledger.spend]`` or
``[spend]`` for a subcommand of a group), with option names spelled as on the command line
(``max-steps``) or with underscores; a spelling of an earlier version is read with a warning, or
refused where it now means something else (:mod:`tsdp.cli.vocabulary`). Command-line flags win because
the file only supplies defaults. Relative paths in the file are relative to the file itself.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import sys
import tomllib
from pathlib import Path
from typing import Any, Iterator

import typer

from tsdp.cli import vocabulary
from tsdp.cli.messages import one_line
from tsdp.errors import UsageError
from tsdp.io.files import check_output_path, table_format
from tsdp.report import json_ready

PATH_KEYS = {"input", "output", "report", "ledger", "secrets"}
SUMMARY_ONLY = {"config"}


def load_config(ctx: typer.Context, param: typer.CallbackParam, value: str | None) -> str | None:
    """Eager ``--config`` callback: install the file's settings as the command's defaults.

    Anything the file says that would not take effect is a usage error naming it, never ignored:
    an unknown key, one option spelled twice (``max-per-step`` and ``max_per_step``, or an old and a
    new spelling), a table that names no tsdp command (``[relase]``), a key outside the command's
    table in a file that has tables, a file whose tables are all for other commands, and ``debug``
    (read from the command line only, before any file: it decides how a failure is printed).
    """
    if not value:
        return value
    path = Path(value)
    if not path.is_file():
        raise typer.BadParameter(f"file {value!r} does not exist", ctx=ctx, param=param)
    try:
        data = tomllib.loads(path.read_text())
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise typer.BadParameter(f"{value!r} is not valid TOML: {exc}", ctx=ctx, param=param)
    except RecursionError:
        raise typer.BadParameter(f"{value!r} is nested too deeply to be a tsdp config", ctx=ctx, param=param)

    def refuse(message: str):
        return typer.BadParameter(f"{value!r}: {message}", ctx=ctx, param=param)

    settings = _command_settings(data, ctx, refuse)
    names = _setting_names(ctx.command.params)
    params = {p.name: p for p in ctx.command.params}
    command = ctx.command_path.partition(" ")[2]
    spelled: dict[str, str] = {}  # parameter name -> the key that set it
    for given, val in settings.items():  # every key checked before any deprecation warning is printed
        if isinstance(val, dict):
            raise refuse(f"table [{given}] inside the settings of '{ctx.command_path}' is not a tsdp command or "
                         "option; option values are plain keys (epsilon = 1)")
        name = names.get(vocabulary.config_key(command, given, ctx, warn=False).replace("-", "_"))
        if name == "debug":
            raise refuse("setting 'debug' is read from the command line only (it decides how a failure is "
                         "printed, before any file is read); pass --debug instead")
        if name is None or name in SUMMARY_ONLY:
            raise refuse(f"unknown setting {given!r} for '{ctx.command_path}'")
        if name in spelled:
            raise refuse(f"settings {spelled[name]!r} and {given!r} are the same option (--{name.replace('_', '-')}); "
                         "which value counts would be a guess: keep one")
        spelled[name] = given
    defaults: dict[str, Any] = {}
    for name, given in spelled.items():
        vocabulary.config_key(command, given, ctx)  # an old spelling: its warning
        val = settings[given]
        problem = _setting_type_problem(val, params.get(name))
        if problem:
            raise refuse(f"setting {given!r} {problem}")
        if name in PATH_KEYS and isinstance(val, str) and val != "-" and not Path(val).is_absolute():
            val = os.path.normpath(path.parent / val)
        if isinstance(val, list):
            val = ",".join(str(v) for v in val)
        defaults[name] = val
    ctx.default_map = {**(ctx.default_map or {}), **defaults}
    return value


def _command_settings(data: dict[str, Any], ctx: typer.Context, refuse) -> dict[str, Any]:
    """The settings of the running command in a parsed config file (``refuse(message)`` makes the
    usage error).

    A file without tables is one command's settings. A file with tables holds a table per command:
    ``[release]``, and for a subcommand of a group its path or any end of it (``[account.dpsgd]``,
    ``[dpsgd]``; ``[account.calibrate.dpsgd]``). Then every top-level entry must be a table named
    after a tsdp command, and the running command must have one.
    """
    tables = [k for k, v in data.items() if isinstance(v, dict)]
    if not tables:
        return data
    loose = [k for k, v in data.items() if not isinstance(v, dict)]
    if loose:
        raise refuse(f"setting {loose[0]!r} stands outside the file's tables ([{'], ['.join(tables)}]), where it "
                     "applies to no command; move it into the command's table")
    path = ctx.command_path.split(" ")[1:]  # 'tsdp account dpsgd' -> ['account', 'dpsgd']
    known = _command_names(ctx)
    for name in tables:
        if name not in known:
            raise refuse(f"table [{name}] names no tsdp command (a table is named after its command, e.g. "
                         "[release] or [account.dpsgd]); check its spelling")
    if len(path) > 1 and isinstance(data.get(path[0]), dict):  # [account] around [account.dpsgd]
        _check_group_tables(data, path, ctx, refuse)
    for start in range(len(path)):  # the full path first, then shorter ends of it
        node: Any = data
        for part in path[start:]:
            node = node.get(part) if isinstance(node, dict) else None
        if isinstance(node, dict):
            return node
    raise refuse(f"no table for '{ctx.command_path}' (the file has [{'], ['.join(tables)}]); add "
                 f"[{'.'.join(path)}] or give this command its own file")


def _check_group_tables(data: dict[str, Any], path: list[str], ctx: typer.Context, refuse) -> None:
    """In ``[account]`` around ``[account.dpsgd]``, every entry is a table of a subcommand."""
    node: Any = data
    context = ctx
    groups = []
    while context.parent is not None and context.parent.parent is not None:
        context = context.parent
        groups.insert(0, context)
    for depth, group in enumerate(groups):
        node = node.get(path[depth])
        if not isinstance(node, dict):
            return
        commands = set(getattr(group.command, "commands", {}) or {})
        for key, val in node.items():
            label = ".".join(path[:depth + 1])
            if not isinstance(val, dict):
                raise refuse(f"setting {key!r} in table [{label}] applies to no command; move it into the "
                             f"table of the subcommand, e.g. [{label}.{path[depth + 1]}]")
            if commands and key not in commands:
                raise refuse(f"table [{label}.{key}] names no subcommand of 'tsdp {' '.join(path[:depth + 1])}' "
                             f"(its subcommands: {', '.join(sorted(commands))})")


def _command_names(ctx: typer.Context) -> set[str]:
    """Every name a config table may have: the commands, and the subcommands of every group (the
    groups on the running command's path are loaded already; the others only when needed)."""
    from tsdp.cli.lazy import SUBCOMMANDS

    names = set(SUBCOMMANDS)
    context = ctx
    while context.parent is not None:
        context = context.parent
        names.update(getattr(context.command, "commands", {}) or {})
    return _NamesWithGroups(names)


class _NamesWithGroups(set):
    """The command names, and on a miss the subcommands of every group (imported only then)."""

    def __contains__(self, name) -> bool:
        if super().__contains__(name):
            return True
        self.update(_all_subcommand_names())
        return super().__contains__(name)


def _all_subcommand_names() -> set[str]:
    from tsdp.cli.app import _SETTINGS
    from tsdp.cli.lazy import SUBCOMMANDS, load_subcommand

    names: set[str] = set()
    pending = [load_subcommand(name, _SETTINGS) for name in SUBCOMMANDS]
    while pending:
        command = pending.pop()
        for name, sub in (getattr(command, "commands", {}) or {}).items():
            names.add(name)
            pending.append(sub)
    return names


def _setting_type_problem(value: Any, param) -> str | None:
    """Why a TOML value cannot stand for ``param`` (None when it can).

    TOML values are typed, and Typer would convert some of them silently: ``epsilon = true`` would
    become 1.0 and ``quiet = 1`` a true flag. A boolean goes only to a flag, a flag takes only a
    boolean, and NaN goes nowhere. Other conversions (``epsilon = "0.5"``) are left to the option.
    """
    annotation = getattr(getattr(param, "type_descriptor", None), "annotation", None)
    values = value if isinstance(value, list) else [value]
    if any(isinstance(v, float) and math.isnan(v) for v in values):
        return "is nan, which is never a valid setting"
    if annotation is bool:
        if not isinstance(value, bool):
            return f"must be true or false, got {value!r}"
    elif any(isinstance(v, bool) for v in values):
        kind = {int: "an integer", float: "a number"}.get(annotation, "a value")
        return f"must be {kind}, got the boolean {str(value).lower()}"
    return None


def _setting_names(params) -> dict[str, str]:
    """Config keys -> parameter names: the parameter's own name and its long option spellings.

    ``--round`` is stored as ``round_values``, so both ``round`` and ``round_values`` are accepted.
    """
    names: dict[str, str] = {}
    for p in params:
        names[p.name] = p.name
        for opt in getattr(p, "opts", []):
            if opt.startswith("--"):
                names.setdefault(opt[2:].replace("-", "_"), p.name)
    return names


ConfigOption = typer.Option(
    None, "--config", help="TOML file with option values (command-line flags win).",
    is_eager=True, callback=load_config, metavar="FILE",
)
OutputOption = typer.Option(
    None, "-o", "--output",
    help="Output file (.csv/.parquet, or - for stdout) [default: INPUT_NAME.released.EXT in the current directory].",
)
ReportOption = typer.Option(None, "--report", help="Privacy report path [default: OUTPUT with .report.json].")
CustodianOption = typer.Option(
    None, "--custodian",
    help="File for the custodian-only figures (functions of the private data: NOT for publication; "
         "written with mode 0600) [default: OUTPUT with .custodian.NOT-FOR-PUBLICATION.json].")
SeedOption = typer.Option(None, "--seed", help="Fixed seed for tests and experiments; such output must not be published.", min=0)
SamplerOption = typer.Option(None, "--sampler", help="Noise sampler: hardened (exact discrete noise on a power-of-two granularity; the default) or float (numpy's floating-point samplers, for experiments and paper reproduction only; such output must not be published).")
GranularityOption = typer.Option(None, "--granularity", help="--sampler hardened: power of two whose multiples the release takes [default: chosen from sigma and the sensitivity, about sigma x 2^-20].")
ForceOption = typer.Option(False, "--force", help="Overwrite existing output files.")
JsonOption = typer.Option(False, "--json", help="Print a machine-readable summary on stdout.")
QuietOption = typer.Option(False, "--quiet", "-q", help="No progress bar, human summary or warnings (a deprecated option's warning still prints).")


def _check_timezone(value: str | None) -> str | None:
    from tsdp.io.timezones import check_zone

    return check_zone(value)  # an unknown zone is a usage error before any data is read


TimezoneOption = typer.Option(
    None, "--timezone", metavar="ZONE", callback=_check_timezone,
    help="Time zone (IANA name, e.g. Europe/Berlin) of timestamps written without a UTC offset; a local "
         "time skipped or repeated by a clock change is then an error. Times with offsets and zone-aware "
         "Parquet columns need none [default: such times have no zone].")


RUN_ONLY = {"config", "seed", "force", "json_summary", "quiet", "output", "report", "custodian",
            "dry_run", "fail_on_noisy", "plot"}


def public_parameters(arguments: dict[str, Any]) -> dict[str, Any]:
    """The command's parameters that describe the release (not how this run was driven).

    The seed is never among them: a published seed lets anyone remove the noise.
    """
    return {k: (v.value if hasattr(v, "value") else v) for k, v in arguments.items() if k not in RUN_ONLY}


CUSTODIAN_SUFFIX = ".custodian.NOT-FOR-PUBLICATION.json"
CUSTODIAN_NOTE = ("NOT FOR PUBLICATION: every figure in this file is a function of the private input and is "
                  "not privacy-protected. It is for the data custodian only; the release and its report are "
                  "what may be published.")


def resolve_custodian(custodian: str | None, input_path: str, output: str, report: str, force: bool) -> str:
    """Default and check the custodian file's path (next to the output, or the report with ``-o -``)."""
    if custodian is None:
        base = Path(output if output != "-" else report)
        stem = base.name[:-len(".report.json")] if base.name.endswith(".report.json") else base.stem
        custodian = str(base.with_name(stem + CUSTODIAN_SUFFIX))
    if custodian == "-":
        raise UsageError("--custodian -: custodian-only figures go to a file only, never to stdout")
    table_format(custodian, "--custodian", allowed=("json",))
    for other, option in ((output, "--output"), (report, "--report")):
        if other != "-" and Path(other).resolve() == Path(custodian).resolve():
            raise UsageError(f"--custodian must differ from {option}")
    check_output_path(custodian, force, (input_path,), "--custodian")
    return custodian


def custodian_document(command: str, figures: dict[str, Any], findings=()) -> bytes:
    """The custodian file: figures that are functions of the private data, marked not for publication,
    and the findings about the private data (:class:`tsdp.caveats.PrivateCaveat`: ``warnings``, each
    ``{"code", "message", "figures"}``), which no public output mentions.

    Strict JSON: a non-finite float becomes ``null``.
    """
    data = {"schema": "tsdp-custodian/1", "publish": False, "note": CUSTODIAN_NOTE, "command": command,
            "figures": json_ready(figures, nonfinite_as_null=True),
            "warnings": json_ready([f.to_dict() for f in findings], nonfinite_as_null=True)}
    return (json.dumps(data, indent=2, allow_nan=False, default=str) + "\n").encode()


class Console:
    """Where a command's human messages go: stderr, or nowhere under ``--quiet``.

    Every warning is a :class:`tsdp.caveats.Caveat` (a code and a public text), also kept for the
    ``--json`` summary (even under ``--quiet``), after the deprecation warnings the command line or
    config file gave (:mod:`tsdp.cli.vocabulary`). A finding about the private data
    (:class:`tsdp.caveats.PrivateCaveat`) is refused: it goes to the custodian file only.
    """

    def __init__(self, quiet: bool, json_mode: bool, stdout_taken: bool) -> None:
        self.quiet = quiet
        self.json_mode = json_mode
        self.stdout_taken = stdout_taken
        self.warnings: list[str] = []

    def warn(self, message: str) -> None:
        from tsdp.caveats import Caveat, code_of, require_public

        require_public([message], "stderr and the --json summary")
        kept = one_line(message)
        code = code_of(message)
        self.warnings.append(Caveat(code, kept) if code != "warning" else kept)
        if not self.quiet:
            print(f"warning: {kept}", file=sys.stderr)

    def json_document(self, data: dict[str, Any], title: str, schema: str | None = None) -> str:
        """``data`` as the command's ``--json`` summary (:mod:`tsdp.cli.summary`)."""
        from tsdp.cli.summary import document

        return document(data, title, vocabulary.deprecations() + self.warnings, schema)

    @contextlib.contextmanager
    def progress(self, total: int) -> Iterator:
        """A rich progress bar on stderr (only on a terminal and without --quiet).

        Yields ``advance(description)``, to be called as each stage starts.
        """
        if self.quiet or not sys.stderr.isatty():
            yield lambda description: None
            return
        from rich.console import Console as RichConsole
        from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

        bar = Progress(TextColumn("{task.description}"), BarColumn(), TimeElapsedColumn(),
                       console=RichConsole(stderr=True), transient=True)
        with bar:
            task = bar.add_task("starting", total=total)
            started = [False]

            def advance(description: str) -> None:
                if started[0]:
                    bar.advance(task)
                started[0] = True
                bar.update(task, description=description)

            yield advance

    def summary(self, data: dict[str, Any], title: str) -> None:
        """JSON on stdout with ``--json``; otherwise a table (stderr when stdout holds data)."""
        if self.json_mode:
            print(self.json_document(data, title))
            return
        if self.quiet:
            return
        from rich.console import Console as RichConsole
        from rich.table import Table

        table = Table(title=title, show_header=False, title_justify="left")
        table.add_column("field", style="bold")
        table.add_column("value")
        def fmt(val: Any) -> str:
            if isinstance(val, dict):
                return ", ".join(f"{k}={fmt(v)}" for k, v in val.items())
            if isinstance(val, (list, tuple)):
                return ", ".join(fmt(v) for v in val) or "none"
            return f"{val:.6g}" if isinstance(val, float) else str(val)

        for key, val in data.items():
            if val is not None:  # (a file not written, a figure that does not apply: JSON keeps it as null)
                table.add_row(key.replace("_", " "), fmt(val))
        RichConsole(stderr=self.stdout_taken, soft_wrap=True).print(table)

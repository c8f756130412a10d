"""One vocabulary: every option means the same thing in every command.

Earlier versions spelled some concepts differently per command (``--context`` in ``account``,
``--context-length`` in ``forecast-train``) and used some spellings for different concepts
(``--max-steps``: the participation bound in ``release``, the training length in
``forecast-train``). This module holds what changed, so that the command line and config files
handle old spellings in one place:

* :data:`RENAMED`: an old spelling of the same concept keeps working for one release as a hidden
  alias; it prints one ``warning:`` line naming the new option (also under ``--quiet``: a cron job
  must learn that its command line will stop working) and the warning appears in ``--json``.
* :data:`REFUSED`: an old spelling that now means something else is a usage error (exit 2) naming
  the new options; it is never silently reinterpreted.

Option *values* that changed meaning (``account dpsgd --unit user``) are refused by the command
that reads them (see :func:`tsdp.api.accounting.series_unit`).
"""

from __future__ import annotations

import sys
from typing import Any

import functools

import typer
from typer._click.globals import get_current_context
from typer.core import TyperCommand

from tsdp.cli.messages import one_line
from tsdp.errors import UsageError

# command path after "tsdp" -> {old option: new option}
_SERIES_GEOMETRY = {"--context": "--context-length", "--horizon": "--forecast-length"}
RENAMED: dict[str, dict[str, str]] = {
    "account dpsgd": {**_SERIES_GEOMETRY},
    "account calibrate dpsgd": {**_SERIES_GEOMETRY, "--target-epsilon": "--epsilon"},
    "account verify": {"--output": "--released"},
    "flip": {"--K": "--cepstral-terms", "--M": "--filter-half-length", "--value-col": "--value-cols",
             "--aux-col": "--aux-cols", "--series-col": "--entity-col"},
    "ledger spend": {"--report": "--from-report"},
}

# command path -> {old option: why it is refused and what to use instead}
REFUSED: dict[str, dict[str, str]] = {
    "forecast-train": {
        "--max-steps": "--max-steps now means the participation bound of 'tsdp release' (steps of a series one "
                       "user may contribute to) in every command; the training length of forecast-train is "
                       "--steps (or --epochs)",
    },
}

DEPRECATIONS_KEY = "tsdp.deprecations"
DEBUG_HELP = "Print a traceback instead of the one-line error (may appear anywhere on the command line)."


def deprecation_message(old: str, new: str) -> str:
    return f"{old} is deprecated and will be removed in the next release; use {new}"


def _command(path: str) -> str:
    """``tsdp account dpsgd`` -> ``account dpsgd``."""
    return path.split(" ", 1)[1] if " " in path else ""


def translate(command: str, args: list[str], ctx: Any = None) -> list[str]:
    """``args`` with old option spellings of ``command`` replaced (warning once per spelling), or
    UsageError for a refused spelling. Tokens after ``--`` are left alone."""
    renamed, refused = RENAMED.get(command, {}), REFUSED.get(command, {})
    if not renamed and not refused:
        return args
    options = set()
    for token in args:
        if token == "--":
            break
        options.add(token.partition("=")[0])
    for old_name, new_name in renamed.items():  # both spellings: which value counts would be a guess
        if old_name in options and new_name in options:
            raise UsageError(f"{old_name} and {new_name} are the same option (the first is its deprecated "
                             f"spelling); give {new_name} only")
    out: list[str] = []
    warned: set[str] = set()
    for i, token in enumerate(args):
        if token == "--":
            out.extend(args[i:])
            break
        name, sep, value = token.partition("=")
        if name in refused:
            raise UsageError(f"{name}: {refused[name]}")
        if name in renamed:
            if name not in warned:
                warn_deprecated(name, renamed[name], ctx)
                warned.add(name)
            token = renamed[name] + sep + value
        out.append(token)
    return out


def config_key(command: str, key: str, ctx: Any = None, warn: bool = True) -> str:
    """A config file's key with an old spelling replaced (warning, unless ``warn`` is false), or
    UsageError if refused."""
    option = "--" + key.replace("_", "-")
    for old, message in REFUSED.get(command, {}).items():
        if old.lower() == option.lower():
            raise UsageError(f"config key {key!r}: {message}")
    for old, new in RENAMED.get(command, {}).items():
        if old == option or (old.lower() == option.lower() and len(old) > 3):
            if warn:
                warn_deprecated(f"config key {key!r} ({old})", f"{new[2:]} ({new})", ctx)
            return new[2:]
    return key


def warn_deprecated(old: str, new: str, ctx: Any = None) -> None:
    """Print the deprecation warning now and keep it for the command's ``--json`` summary."""
    from tsdp.caveats import Caveat

    message = Caveat("deprecated_option", deprecation_message(old, new))
    print(f"warning: {one_line(message)}", file=sys.stderr)
    ctx = ctx if ctx is not None else get_current_context(silent=True)
    if ctx is not None:
        ctx.meta.setdefault(DEPRECATIONS_KEY, []).append(message)


def deprecations() -> list[str]:
    """The deprecation warnings of the command being run (for its ``--json`` summary)."""
    ctx = get_current_context(silent=True)
    return list(ctx.meta.get(DEPRECATIONS_KEY, [])) if ctx is not None else []


class VocabularyCommand(TyperCommand):
    """A subcommand that reads old option spellings (:func:`translate`) and lists ``--debug``,
    which :func:`tsdp.cli.app.main` takes off the command line before any command parses it."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.params.append(_debug_option())

    def parse_args(self, ctx, args: list[str]) -> list[str]:
        return super().parse_args(ctx, translate(_command(ctx.command_path), list(args), ctx))

    def invoke(self, ctx):
        """Run the command; a Ctrl-C, once it has unwound the command, leaves as
        :class:`tsdp.cli.termination.Interrupted` (Typer would swallow a KeyboardInterrupt)."""
        from tsdp.cli.termination import Interrupted

        try:
            return super().invoke(ctx)
        except KeyboardInterrupt as exc:
            raise Interrupted.of(exc) from exc


@functools.cache
def _debug_option():
    """``--debug`` as Typer builds an option, for the help listing only (``main`` removes the flag)."""
    probe = typer.Typer()

    @probe.command()
    def _(debug: bool = typer.Option(False, "--debug", help=DEBUG_HELP)) -> None:
        """Probe."""

    option = typer.main.get_command(probe).params[0]
    option.expose_value = False
    return option

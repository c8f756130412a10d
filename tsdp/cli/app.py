"""The ``tsdp`` command: a Typer app with one module per subcommand.

``main()`` runs the app without Click's standalone handling so that every failure becomes one
``error:`` line on stderr and the exit code of DESIGN.md section 4 (tracebacks only with
``--debug``, which may appear anywhere on the command line).
"""

from __future__ import annotations

import sys

import typer

from tsdp import __version__
from tsdp.cli.lazy import lazy_group
from tsdp.errors import MEMORY_HINT, ResourceError, TsdpError

# Subcommands are imported only when invoked (tsdp/cli/lazy.py): --help and option parsing load
# no numerical library.
_SETTINGS = dict(
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
    context_settings={"help_option_names": ["-h", "--help"]},
)
app = typer.Typer(
    name="tsdp",
    help="Privatize time series held in CSV and Parquet files, with an auditable privacy report.",
    no_args_is_help=True,
    cls=lazy_group(_SETTINGS),
    **_SETTINGS,
)


def _version(value: bool) -> None:
    if value:
        print(f"tsdp {__version__}")
        raise typer.Exit(0)


@app.callback()
def root(
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True,
                                 help="Print the version and exit."),
) -> None:
    """Private release of time series: release, account, flip, mean-estimate, forecast-train."""


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    debug = "--debug" in args
    args = [a for a in args if a != "--debug"]
    try:
        result = app(args=args, prog_name="tsdp", standalone_mode=False)
        code = result if isinstance(result, int) else 0
    except TsdpError as exc:
        if debug:
            raise
        print(f"error: {exc}", file=sys.stderr)
        code = exc.exit_code
    except typer.Exit as exc:
        code = exc.exit_code
    except typer.Abort:
        print("error: aborted", file=sys.stderr)
        code = 1
    except typer.TyperException as exc:  # Typer's (vendored Click's) usage errors
        if debug:
            raise
        if type(exc).__name__ == "NoArgsIsHelpError":  # bare `tsdp`: the help itself, on stderr
            exc.show()
        else:
            print(f"error: {_usage_message(exc)}", file=sys.stderr)
        code = exc.exit_code
    except KeyboardInterrupt:
        print("error: interrupted", file=sys.stderr)
        code = 130
    except MemoryError:
        if debug:
            raise
        print(f"error: out of memory; {MEMORY_HINT}", file=sys.stderr)
        code = ResourceError.exit_code
    except Exception as exc:  # anything unexpected: exit 1, one line unless --debug
        if debug:
            raise
        print(f"error: unexpected {type(exc).__name__}: {exc} (rerun with --debug for a traceback)",
              file=sys.stderr)
        code = 1
    sys.stdout.flush()
    return code


def _usage_message(exc: typer.TyperException) -> str:
    # Typer validates choices through pydantic, whose messages start with "Value error, ".
    message = exc.format_message().replace("\n", " ").replace("Value error, ", "")
    value = _rejected_value(exc)
    if value is not None and repr(value) not in message:
        message += f" (got {value!r})"
    ctx = getattr(exc, "ctx", None)
    if exc.exit_code == 2 and ctx is not None:
        message += f" (see '{ctx.command_path} --help')"
    return message


def _rejected_value(exc: BaseException):
    """The raw value behind a Typer conversion error (its message from pydantic omits it)."""
    errors = getattr(exc.__cause__, "errors", None)
    if not callable(errors):
        return None
    try:
        first = errors()[0]
    except Exception:  # not a pydantic ValidationError after all
        return None
    return first.get("input") if isinstance(first, dict) else None


def run() -> None:
    sys.exit(main())

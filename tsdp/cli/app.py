"""The ``tsdp`` command: a Typer app with one module per subcommand.

``main()`` runs the app without Click's standalone handling so that every failure becomes one
``error:`` line on stderr and the exit code of DESIGN.md section 4 (tracebacks only with
``--debug``, which may appear anywhere on the command line).
"""

from __future__ import annotations

import contextlib
import re
import signal
import sys
import threading
import warnings

import typer

from tsdp import __version__
from tsdp.cli.lazy import lazy_group
from tsdp.cli.messages import one_line
from tsdp.cli.termination import INTERRUPTED, Interrupted, Terminated, terminate_on_sigterm
from tsdp.signals import committed, deferred_sigterm
from tsdp.cli.vocabulary import DEBUG_HELP
from tsdp.errors import MEMORY_HINT, NumericalError, ResourceError, TsdpError

# Subcommands are imported only when invoked (tsdp/cli/lazy.py): --help and option parsing load
# no numerical library. _SETTINGS also builds each subcommand, so completion stays off there: the
# root app alone carries --install-completion/--show-completion.
_SETTINGS = dict(
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
    context_settings={"help_option_names": ["-h", "--help"]},
)
app = typer.Typer(
    name="tsdp",
    help="Privatize time series held in CSV and Parquet files, with an auditable privacy report.",
    epilog="Exit codes: 0 success; 1 unexpected failure (rerun with --debug); 2 usage error (bad option or "
           "value, missing input file, existing output without --force); 3 budget exceeded or verification "
           "failed; 4 bad input data; 5 numerical failure or resources.",
    no_args_is_help=True,
    cls=lazy_group(_SETTINGS),
    **{**_SETTINGS, "add_completion": True},
)


def _version(value: bool) -> None:
    if value:
        print(f"tsdp {__version__}")
        raise typer.Exit(0)


@app.callback()
def root(
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True,
                                 help="Print the version and exit."),
    debug: bool = typer.Option(False, "--debug", help=DEBUG_HELP),  # listed here; main() takes it off argv
) -> None:
    """Private release of time series: release, account, flip, mean-estimate, forecast-train."""


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    debug = "--debug" in args
    args = [a for a in args if a != "--debug"]
    with terminate_on_sigterm(), _numeric_warnings(debug):
        try:
            result = app(args=args, prog_name="tsdp", standalone_mode=False)
            code = result if isinstance(result, int) else 0
            if code == INTERRUPTED:  # Ctrl-C outside a command's body: Typer returns 130 without a word
                _interrupted(None)
        except TsdpError as exc:
            if debug:
                raise
            _error("; ".join([str(exc), *getattr(exc, "__notes__", ())]))
            code = exc.exit_code
        except typer.Exit as exc:
            code = exc.exit_code
        except typer.Abort as exc:
            if isinstance(exc.__cause__, EOFError) and debug:  # Typer turns an EOFError into Abort
                raise exc.__cause__
            _error(_aborted_message(exc.__cause__))
            code = 1
        except typer.TyperException as exc:  # Typer's (vendored Click's) usage errors
            if debug:
                raise
            if type(exc).__name__ == "NoArgsIsHelpError":  # bare `tsdp`: the help itself, on stderr
                exc.show()
            else:
                _error(_usage_message(exc))
            code = exc.exit_code
        except (KeyboardInterrupt, Interrupted) as exc:
            _interrupted(exc)
            code = INTERRUPTED
        except Terminated as exc:
            _error("terminated by SIGTERM; nothing was published and " + _reservation_fate(exc))
            code = 143
        except (OverflowError, FloatingPointError, ZeroDivisionError) as exc:  # arithmetic out of range
            if debug:
                raise
            _error(f"numerical failure ({type(exc).__name__}: {exc}); the options or the data put a computation "
                   "outside the float range (rerun with --debug for a traceback)")
            code = NumericalError.exit_code
        except MemoryError:
            if debug:
                raise
            _error(f"out of memory; {MEMORY_HINT}")
            code = ResourceError.exit_code
        except Exception as exc:  # anything unexpected: exit 1, one line unless --debug
            if debug:
                raise
            _error(f"unexpected {type(exc).__name__}: {exc} (rerun with --debug for a traceback)")
            code = 1
        if deferred_sigterm() and committed():
            print("warning: SIGTERM arrived after the output and report were published; the run completed",
                  file=sys.stderr)
    with contextlib.suppress(OSError, ValueError):  # stdout closed by the reader: nothing to flush to
        sys.stdout.flush()
    return code


def _interrupted(exc: BaseException | None) -> None:
    """The one ``error:`` line of a run stopped by Ctrl-C (SIGINT), exit 130."""
    if committed():  # Ctrl-C while the files were being moved into place or after it
        _error("interrupted after the commit point; check whether the output and report were published "
               "(they appear together or not at all) and 'tsdp ledger show' for the charge")
    else:
        _error("interrupted; nothing was published and " + _reservation_fate(exc))


def _reservation_fate(exc: BaseException) -> str:
    """What became of a ledger reservation when a signal stopped the run: cancelled, unless the
    cancel failed and left a note on the exception (:func:`tsdp.accounting.ledger.reservation`)."""
    notes = getattr(exc, "__notes__", ()) if exc is not None else ()
    return "; ".join(notes) if notes else "the ledger reservation, if any, was cancelled"


def _aborted_message(cause: BaseException | None) -> str:
    """Typer turns an ``EOFError`` escaping a command into ``Abort``; say what ended early."""
    if isinstance(cause, EOFError):
        return (f"unexpected end of a file ({one_line(str(cause)) or 'EOFError'}); a compressed or streamed input "
                "may be truncated (rerun with --debug for a traceback)")
    return "aborted"


def _error(message: str) -> None:
    """Print the one ``error:`` line (see :func:`tsdp.cli.messages.one_line`)."""
    print(f"error: {one_line(message)}", file=sys.stderr)


@contextlib.contextmanager
def _numeric_warnings(debug: bool):
    """Floating-point warnings (overflow, invalid value) stay off stderr unless ``--debug``.

    Outputs and reports are checked for non-finite numbers before they are published, so such a
    warning never stands for a silently wrong result; it would only add lines to the one-line error.
    """
    if debug:
        yield
        return
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        yield


def _usage_message(exc: typer.TyperException) -> str:
    # Typer validates choices through pydantic, whose messages start with "Value error, ".
    message = exc.format_message().replace("\n", " ").replace("Value error, ", "")
    value = _rejected_value(exc)
    if value is not None and repr(value) not in message:
        message += f" (got {value!r})"
    if isinstance(value, str) and re.fullmatch(r"[+-]?\d*,\d+([eE][+-]?\d+)?", value.strip()):  # a decimal comma: 0,5
        message += f"; write decimals with a point: {value.strip().replace(',', '.')}"
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
    """The ``tsdp`` executable. Outside :func:`main`'s own handler SIGTERM is ignored: before it, as
    nothing has started; after it, as the run is complete (its files published, its exit code
    decided) and a SIGTERM landing during interpreter shutdown must not turn exit 0 into a kill."""
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    sys.exit(main())

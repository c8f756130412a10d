"""Options and messages shared by the commands that state their accuracy (issue 15).

What goes where:

* the ``accuracy`` block (report, ``--json`` summary, the human summary's one line) is computed
  from public parameters only (:mod:`tsdp.accuracy`) and is publishable;
* the noisy-release check compares the half-width with a robust scale of the PRIVATE input (the
  median absolute value of its cells). Its outcome, whichever it is, is a function of the private
  data: the finding (code ``"noisy"``, with both figures) goes to the custodian file only, and
  nothing on stdout, stderr or in the report says whether the check fired (the summary names the
  custodian file and the checks it holds, under ``custodian_checks``). ``--fail-on-noisy`` turns it
  into exit 3 before anything is written (no output, no report, no ledger charge), with a message
  that quotes the public half-width only. Note that such a gate is itself a (one-bit) function of
  the data: whether a release appears at all tells that bit.
"""

from __future__ import annotations

import contextlib
import contextvars
from enum import Enum
from typing import Optional

import typer

from tsdp.errors import BudgetError, UsageError


class AccuracyFor(str, Enum):
    cell = "cell"
    sum = "sum"


_PLANNING = contextvars.ContextVar("tsdp_planning", default=False)


def planning() -> bool:
    """True when the current command runs inside ``tsdp plan``, which tabulates its dry runs: the
    command then returns its dry-run summary instead of printing it."""
    return _PLANNING.get()


@contextlib.contextmanager
def plan_mode():
    """Run commands as ``tsdp plan`` does (see :func:`planning`)."""
    token = _PLANNING.set(True)
    try:
        yield
    finally:
        _PLANNING.reset(token)


DEFAULT_ALPHA = 0.05
AlphaOption = typer.Option(DEFAULT_ALPHA, "--alpha", help="Accuracy: the interval of the noise of each released value holds with probability 1 - alpha.")
# `tsdp release` notices an explicit --alpha (it was Koga et al.'s filter parameter, now --filter-alpha).
ReleaseAlphaOption = typer.Option(None, "--alpha", help="Accuracy: the interval of the noise of each released value holds with probability 1 - alpha [default: 0.05]. (Koga et al.'s filter parameter is --filter-alpha.)")
AccuracyForOption = typer.Option(AccuracyFor.cell, "--accuracy-for", help="Accuracy of each released cell, or of each series' sum over its steps (gaussian, laplace, dft).")
DryRunOption = typer.Option(False, "--dry-run", help="Read only what is public (schema, grid, series keys, declared bounds), print the noise scale, accuracy and epsilon, and write nothing.")
FailOnNoisyOption = typer.Option(False, "--fail-on-noisy", help="Exit 3 and write nothing when the noise interval exceeds the median absolute value of the input (a CI gate).")
PlotOption = typer.Option(None, "--plot", help="PNG of a few input series and their release with the noise band (UNPROTECTED data; needs tsdp[plot]; not next to the output unless named *.unprotected.png).", metavar="FILE.png")

NOISY_CODE = "noisy"


def check_level(alpha: float, option: str = "--alpha") -> float:
    """The accuracy level, checked before any data is read."""
    if not (0.0 < alpha < 1.0):
        raise UsageError(f"{option} must be in (0, 1), got {alpha:g}")
    return alpha


def accuracy_or_usage(compute):
    """``compute()``, turning the accuracy module's ValueError into a usage error."""
    try:
        return compute()
    except ValueError as exc:
        raise UsageError(str(exc)) from None


def shown(acc, json_mode: bool):
    """The accuracy in a summary: the whole block with ``--json``, its one line for people."""
    return acc.to_dict() if json_mode else acc.line()


def typical_width(acc) -> Optional[float]:
    """The half-width of a typical released value: the median over series or groups when it varies."""
    return acc.summary["median"] if acc.summary else acc.half_width


def noisy(acc, scale: Optional[float]) -> bool:
    """True when the (typical) noise half-width exceeds the private robust scale (None: not computable)."""
    width = typical_width(acc)
    return width is not None and scale is not None and width > scale


def noisy_check(acc, scale: Optional[float], what: str, remedy: str, fail: bool) -> list:
    """The finding for the custodian file when the noise swamps the signal (empty when it does not),
    or exit 3 under --fail-on-noisy, raised before anything is written with a public message (the
    half-width only: the private scale is not quoted)."""
    from tsdp.caveats import PrivateCaveat

    if not noisy(acc, scale):
        return []
    if fail:
        raise BudgetError(f"--fail-on-noisy: the noise interval ({acc.line()}) exceeds the median absolute value "
                          f"of {what} (a figure of the PRIVATE data, not shown); nothing was written. To publish "
                          f"something useful, try {remedy}")
    return [PrivateCaveat(NOISY_CODE, f"the noise swamps the signal: {acc.line()}, but the median absolute value "
                                      f"of {what} is {scale:.4g}. To publish something useful, try {remedy}",
                          typical_half_width=typical_width(acc), median_absolute_value=scale)]

"""Error types shared by every layer, each carrying the exit code of DESIGN.md section 4.

Core packages raise these with a message that names the offending option or column and its
value; the CLI prints ``error: <message>`` and exits with ``exit_code``.
"""

from __future__ import annotations


class TsdpError(Exception):
    """Base class: an expected failure with a one-line, user-facing message."""

    exit_code = 1


class UsageError(TsdpError):
    """A bad option or option value (exit 2)."""

    exit_code = 2


class BudgetError(TsdpError):
    """A privacy budget would be exceeded, or a verification failed (exit 3)."""

    exit_code = 3


class DataError(TsdpError):
    """Bad input data: missing column, NaN, out-of-range value, unparseable file (exit 4)."""

    exit_code = 4


class NumericalError(TsdpError):
    """A solver did not converge or a computation would be too large (exit 5)."""

    exit_code = 5


class GridTooLarge(NumericalError):
    """A privacy-loss grid would exceed its size limit, or the loss is unbounded (exit 5): the noise
    is too small to account at this --discretization. Calibrations treat such a noise level as one
    they cannot certify and search above it."""


class ResourceError(NumericalError):
    """Memory or disk ran out, or would (exit 5, as a computation too large for this machine)."""

MEMORY_HINT = ("lower --memory-limit so that tsdp shards the input (--engine local), or run on a cluster "
               "with --engine spark")


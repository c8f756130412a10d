"""Workloads: the linear queries a stream answers at each step, as lower-triangular Toeplitz rows.

Every supported output is a lower-triangular Toeplitz matrix A (T x T), given by its first column
``a`` (``A[t, s] = a[t - s]`` for ``s <= t``):

* ``daily``: A = I, ``a = (1, 0, 0, ...)``;
* ``cumulative`` (running totals): A = L, the all-ones lower triangle, ``a = (1, 1, 1, ...)``;
* ``window:k`` (sum of the last k steps): ``a = (1, ..., 1, 0, ...)`` with k ones.

Several outputs stack their workloads; the strategy is chosen for the stack (:mod:`.accuracy`).
"""

from __future__ import annotations

import re

import numpy as np

from tsdp.errors import UsageError

_WINDOW = re.compile(r"^window:([1-9][0-9]*)$")


def parse_outputs(outputs) -> tuple[str, ...]:
    """The outputs as a tuple of canonical names, each once, in the order given."""
    if isinstance(outputs, str):
        outputs = [part.strip() for part in outputs.split(",")]
    names = tuple(str(o).strip() for o in outputs)
    if not names:
        raise UsageError("stream outputs must name at least one of daily, cumulative, window:K")
    for name in names:
        if name not in ("daily", "cumulative") and not _WINDOW.match(name):
            raise UsageError(f"stream outputs: unknown output {name!r}; use daily, cumulative or window:K (K >= 1)")
    if len(set(names)) != len(names):
        raise UsageError(f"stream outputs name an output twice: {','.join(names)}")
    return names


def window_length(output: str) -> int | None:
    """k for ``window:k``; None for the other outputs."""
    match = _WINDOW.match(output)
    return int(match.group(1)) if match else None


def workload_column(output: str, horizon: int) -> np.ndarray:
    """First column ``a`` (length T) of the output's Toeplitz workload matrix."""
    a = np.zeros(horizon)
    if output == "daily":
        a[0] = 1.0
    elif output == "cumulative":
        a[:] = 1.0
    else:
        a[:window_length(output)] = 1.0
    return a


def memory(output: str) -> int:
    """Past decoded steps the output needs besides the current one (cumulative keeps a running sum)."""
    k = window_length(output)
    return k - 1 if k is not None else 0

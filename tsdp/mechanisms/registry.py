"""The release mechanisms of ``tsdp release``, by their ``--mechanism`` name: one line each.

Each entry implements :class:`tsdp.mechanisms.protocol.Mechanism`; the command line's choices, the
option checks of :class:`tsdp.api.series.ReleaseOptions`, ``tsdp plan``, the accuracy block and
``tsdp verify`` read this table, so adding a mechanism is its module and one line here.
"""

from __future__ import annotations

from tsdp.accuracy.intervals import DEFAULT_ALPHA, check_alpha
from tsdp.accuracy.mechanisms import TARGETS
from tsdp.accuracy.result import Accuracy
from tsdp.mechanisms.dft import DFT
from tsdp.mechanisms.fast import FAST
from tsdp.mechanisms.gaussian import GAUSSIAN
from tsdp.mechanisms.laplace import LAPLACE
from tsdp.mechanisms.protocol import Mechanism
from tsdp.mechanisms.subsample.entries import FILTER_SUBSAMPLE, SUBSAMPLE

MECHANISMS: dict[str, Mechanism] = {m.name: m for m in (
    GAUSSIAN,
    LAPLACE,
    DFT,
    FAST,
    SUBSAMPLE,
    FILTER_SUBSAMPLE,
)}
NAMES = tuple(MECHANISMS)
CELLWISE = tuple(n for n, m in MECHANISMS.items() if m.cellwise)  # cells released independently, in file order
SUMMABLE = tuple(n for n, m in MECHANISMS.items() if m.summable)  # --accuracy-for sum holds
LINEAR = tuple(n for n, m in MECHANISMS.items() if m.linear)  # release = A_w(values) + N_w


def owners(option: str) -> tuple[str, ...]:
    """The mechanisms a ``ReleaseOptions`` field applies to."""
    return tuple(n for n, m in MECHANISMS.items() if option in m.options)


def for_claim(claim, alpha: float = DEFAULT_ALPHA, target: str = "cell", sampled=None) -> Accuracy:
    """The accuracy of the release a (time-series) claim describes, by its mechanism's ``accuracy``;
    ValueError for unknown targets or mechanisms.

    ``sampled``: FAST's released sampling pattern (series x steps, bool), public once released; with
    it the block also states the exact noise s.d. of every released value and the Kalman filter's
    posterior variance at the sampled steps (:func:`tsdp.accuracy.mechanisms.fast_given_pattern`)."""
    alpha = check_alpha(alpha)
    if target not in TARGETS:
        raise ValueError(f"--accuracy-for must be one of {', '.join(TARGETS)}, got {target!r}")
    mechanism = MECHANISMS.get(claim.mechanism)
    if target == "sum" and (mechanism is None or not mechanism.summable):
        raise ValueError(f"--accuracy-for sum is available for --mechanism {', '.join(SUMMABLE[:-1])} and "
                         f"{SUMMABLE[-1]}, not {claim.mechanism}: its per-series sums depend on the released "
                         "sampling pattern")
    if mechanism is None:
        raise ValueError(f"no accuracy model for mechanism {claim.mechanism!r}")
    return mechanism.accuracy(claim, alpha, target, sampled)

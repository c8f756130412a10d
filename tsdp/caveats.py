"""Warnings as tsdp states them: a stable machine code and a text, public or for the custodian only.

Every warning a command prints on stderr, lists in its ``--json`` summary or writes into a report is
a :class:`Caveat`: its text (a ``str``, so that mechanisms, reports and tests keep handling warnings
as strings) and a ``code`` from :data:`CODES`, stable across versions, which scripts and CI act on.
Its text quotes options and public parameters only (the epsilon, the grid's length, the number of
series), never a figure computed from the private input, and whether it appears at all depends on
public parameters only: two inputs of the same public shape print the same warnings.

A finding about the private data (the noise swamps the input's values, a FLIP series' periodogram has
a seasonal peak, records were clipped) is a :class:`PrivateCaveat`: its text may quote the figures
that explain it, and it goes to the custodian file (``*.custodian.NOT-FOR-PUBLICATION.json``) under
its code, never to stdout, stderr or the report (:func:`tsdp.cli.common.Console.warn` and
:class:`tsdp.report.Report` refuse it). Even its presence is a bit of the private data, so nothing
public says whether one was found; the summary names the custodian file and the checks it holds.
"""

from __future__ import annotations

from typing import Any, Iterable

# code -> what it means (README, "Warnings and their codes"). A code, once published, keeps its meaning.
CODES: dict[str, str] = {
    # the release must not be published, or publishes less than the claim covers
    "seeded_run": "a fixed --seed was used: anyone who knows it can remove the noise; do not publish",
    "float_sampler": "the noise came from floating-point samplers (--sampler float); do not publish",
    "fixed_filter": "FLIP's filter was fixed by --r-params (a function of public or guessable figures); do not publish",
    "secrets_written": "a --secrets file was written: whoever holds it can invert the release",
    "unprotected_columns": "the output keeps original sensitive columns (--suffix): internal QA only",
    "not_covered_by_guarantee": "part of what is written is not covered by the privacy claim (the warning says which)",
    "not_private_diagnostic": "a diagnostic mode (--evaluate, --evaluate-only) printed figures of the raw data",
    "output_not_checked": "account verify --no-output-check: the claims were verified without their released files",
    # budget and accounting
    "budget_too_small": "the budget does not allow a single composition at these settings",
    "delta_too_large": "delta is not small against the number of records, steps or series it protects",
    "classical_calibration": "--calibration classic is proven only for epsilon < 1; the exact profile was used",
    "paper_accounting": "an assumption of the paper's own accounting (--accounting paper) is stretched here",
    "no_amplification": "subsampling or filtering gives no amplification at this budget",
    "lower_bound": "the figure is an optimistic LOWER BOUND, never a privacy guarantee",
    "standard_dpsgd_not_event_level": "the 'standard DP-SGD' epsilon is record-level only",
    "bounds_differ": "composed reports state different bounds: the composition covers the strictest",
    "basic_composition_only": "delta is below what the tight composition can resolve: basic composition only",
    "grid_limit": "the accountant's grid, not the target, decided the calibrated figure",
    "step_cap": "training stops at tsdp's step cap before the budget is spent",
    "short_series": "a series is shorter than one training window (the paper's tightness assumes longer)",
    # mechanism settings
    "mechanism_fallback": "the options reduce the mechanism to another one, which was released instead",
    "few_sampled_steps": "the sampling rate keeps very few steps per series",
    "single_sampled_step": "some series kept a single sampled step (their release is constant)",
    "filter_wraps": "the circular filter is wide against the series and wraps around",
    "filter_identity": "--filter identity: use --mechanism subsample instead",
    "fast_parameters": "FAST's control parameters are outside common practice",
    "selection_sampler": "a selection step of --algorithm stays floating-point under the hardened sampler",
    "epsilon_per_group": "mean-estimate spends --epsilon per group: the total depends on the number of groups",
    "alpha_renamed": "--alpha is the accuracy level; Koga et al.'s filter parameter is --filter-alpha",
    "assumed_counts": "a dry run without --max-per-step assumed counts (the release refuses other values)",
    "dry_run_one_draw": "a dry run shows one fixed draw of what the release draws at random",
    "missing_cells": "a dry run found cells of the grid without a row (read from the time column, the public "
                     "shape): it states how many and what the run's --fill-missing does with them",
    "flip_short_series": "a FLIP series is short for its spectral estimate or its filter length",
    "deprecated_option": "an option or config key of an earlier version was used",
    # (mean-estimate: from the per-group user and record counts, public under its relation)
    "few_arrays": "groups with fewer than 10 arrays: the private selection step is unreliable",
    "single_user": "groups with a single user: a user-level mean of one user is mostly noise",
    "empty_groups": "declared groups without records (--participation public): their estimate is empty",
    "values_clipped": "input values outside the public bounds are clipped record by record",
    # findings about the private data: custodian file only (PrivateCaveat)
    "noisy": "the noise interval exceeds the median absolute value of the input (custodian file)",
    "flip_model": "a FLIP series' estimated model is doubtful: seasonal peak, unit root, flat spectrum, "
                  "unstable VAR or a filter far from all-pass (custodian file)",
    "flip_dates_below_floor": "released FLIP dates have a same-date LIP below the stated floor (custodian file)",
}


class Caveat(str):
    """A public warning: its text (this ``str``) and its stable ``code`` (a key of :data:`CODES`)."""

    private = False
    code: str

    def __new__(cls, code: str, message: str) -> "Caveat":
        if code not in CODES:
            raise ValueError(f"unknown warning code {code!r}: add it to tsdp.caveats.CODES")
        self = super().__new__(cls, message)
        self.code = code
        return self

    def __reduce__(self):
        return (type(self), (self.code, str(self)))

    def to_dict(self) -> dict[str, Any]:
        return {"code": self.code, "message": str(self)}


class PrivateCaveat(Caveat):
    """A finding about the PRIVATE data: its text may quote figures of the data, and ``figures`` holds
    them; it belongs in the custodian file only (never stdout, stderr or a report)."""

    private = True
    figures: dict[str, Any]

    def __new__(cls, code: str, message: str, **figures: Any) -> "PrivateCaveat":
        self = super().__new__(cls, code, message)
        self.figures = figures
        return self

    def __reduce__(self):
        return (_private, (self.code, str(self), self.figures))

    def to_dict(self) -> dict[str, Any]:
        return {"code": self.code, "message": str(self), **({"figures": self.figures} if self.figures else {})}


def _private(code: str, message: str, figures: dict[str, Any]) -> PrivateCaveat:
    return PrivateCaveat(code, message, **figures)


def code_of(message: str) -> str:
    """The code of a warning: its own, or ``"warning"`` for a plain string (which no tsdp command emits:
    tests/cli/test_no_private_figures.py checks that every command's warnings carry a code)."""
    return getattr(message, "code", "warning")


def is_private(message: Any) -> bool:
    return bool(getattr(message, "private", False))


def public(warnings: Iterable[str]) -> list[str]:
    """The warnings that may be printed and reported (the private ones left out)."""
    return [w for w in warnings if not is_private(w)]


def private(warnings: Iterable[str]) -> list[PrivateCaveat]:
    """The private findings among ``warnings`` (for the custodian file)."""
    return [w for w in warnings if is_private(w)]


def require_public(warnings: Iterable[Any], where: str) -> None:
    """RuntimeError if a private finding is about to reach ``where`` (a programming error: its text
    may quote figures of the private data)."""
    leaked = [w for w in warnings if is_private(w)]
    if leaked:
        raise RuntimeError(f"a private finding (code {leaked[0].code!r}) was sent to {where}; it belongs in the "
                           "custodian file only")

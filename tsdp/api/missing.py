"""``--fill-missing null`` of ``tsdp release``: the policy's checks, the released frame with the missing
cells null again (or interpolated from the released values), and what the claim and report say about
the missing pattern."""

from __future__ import annotations

from dataclasses import replace

from tsdp.api.options import choice
from tsdp.errors import UsageError

FILL_POLICIES = ("error", "zero", "null")
MISSING_PATTERN = ("the pattern of missing cells is published as given and treated as public, like the series "
                   "and the time grid: the noise covers the values present, and a neighbouring dataset is assumed "
                   "to miss the same cells; where a unit's data decides whether a cell is missing (a step absent "
                   "because no one contributed), that pattern is NOT protected: use --fill-missing zero for counts")


def fill_policy(value) -> str:
    value = getattr(value, "value", value)
    if value == "interpolate":  # refused with the reason, not only as an unknown choice
        raise UsageError("--fill-missing interpolate: interpolating the input before the noise would make "
                         "released values depend on their neighbours' raw values (outside the sensitivity); use "
                         "--fill-missing null --interpolate-released to interpolate the released values instead")
    return choice("fill-missing", value, FILL_POLICIES)


def check_policy(fill: str, interpolate: bool, mechanism, layout: str, accuracy_for) -> None:
    """``--fill-missing null`` releases the cells present one by one: the cellwise mechanisms only."""
    if interpolate and fill != "null":
        raise UsageError("--interpolate-released fills the missing steps of the release: it needs "
                         f"--fill-missing null (got --fill-missing {fill})")
    if fill != "null":
        return
    if layout == "events":
        raise UsageError("--fill-missing null applies to series input (--layout long or wide): events are counted "
                         "on the public grid, where a step without events is a true 0")
    if not mechanism.cellwise:
        raise UsageError(f"--fill-missing null keeps missing cells out of the release, which --mechanism {mechanism.name} "
                         "cannot do (it transforms whole series): use --mechanism gaussian or laplace, or "
                         "--fill-missing zero for counts")
    if interpolate and getattr(accuracy_for, "value", accuracy_for) == "sum":
        raise UsageError("--accuracy-for sum with --interpolate-released: an interpolated step repeats the noise of "
                         "its neighbours, so a series' sum no longer has independent noise per step; use "
                         "--accuracy-for cell")


def finish(table, frame, interpolate: bool, round_values: bool):
    """The released frame with ``--fill-missing null`` applied: the cells the input lacked (the
    mechanism saw 0 there and its noisy value is dropped) are null again, and with
    ``--interpolate-released`` the interior ones of each series take the linear interpolation,
    by grid step, of the released values around them (post-processing of the release and of the
    missing pattern, both published: no privacy cost); a series' leading and trailing missing
    steps stay null. Clipping holds for an interpolated value (a convex combination of clipped
    ones); ``--round`` is applied to it again."""
    mask = getattr(table, "filled_mask", None)
    if mask is None:
        return frame
    import polars as pl

    columns = table.value_cols
    by_column = mask.reshape(frame.height, len(columns))  # values_flat order: row by row, columns within
    frame = frame.with_columns([pl.when(pl.Series(by_column[:, j])).then(None).otherwise(pl.col(c)).alias(c)
                                for j, c in enumerate(columns)])
    if not interpolate:
        return frame
    filled = [pl.col(c).cast(pl.Float64).interpolate() for c in columns]
    if table.layout == "long" and table.series_col is not None:  # rows: series by series, in grid order
        filled = [f.over(table.series_col) for f in filled]
    if round_values:
        filled = [f.round(0) for f in filled]
    return frame.with_columns([f.alias(c) for f, c in zip(filled, columns)])


def with_missing(claim, count: int, interpolate: bool):
    """The claim with the missing-cells assumption of ``--fill-missing null`` stated in its
    parameters (``count`` cells of the grid were missing in the input and are published so)."""
    return replace(claim, parameters={**claim.parameters, "missing_cells": {
        "policy": "null", "count": int(count), "pattern": MISSING_PATTERN,
        "released": ("linear interpolation of the released values (post-processing)"
                     if interpolate else "null")}})


def notes(count: int, interpolate: bool) -> list[str]:
    """The report's notes on the missing cells of a ``--fill-missing null`` release."""
    notes = [f"--fill-missing null: {count} cell(s) of the grid had no value in the input; {MISSING_PATTERN}"]
    if interpolate:
        notes.append("--interpolate-released: each series' interior missing steps hold the linear interpolation "
                     "(by grid step) of its released values around them, a post-processing of the release "
                     "that costs no privacy; its leading and trailing missing steps stay empty. The accuracy "
                     "interval covers an interpolated value's noise too (a convex combination of independent "
                     "noises is more concentrated), not the interpolation's own error")
    return notes

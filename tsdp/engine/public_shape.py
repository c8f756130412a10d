"""The public shape of a panel (series x steps) for ``--dry-run``: no value is read.

* events: the grid is ``--start/--end/--freq`` and the series are ``--series-keys`` (both public
  parameters); the file is not opened at all.
* long: the distinct series ids and the grid spanned by the time column; the value column is never
  looked at.
* wide: the series are the columns (``--series-cols`` or every column but time), the grid as for
  long.

The grid and series names of pre-aggregated input are treated as public (the release says so too).
The steps missing from a series (its rows absent from the grid) are part of that shape, so a dry run
finds them as the release would (:func:`public_panel`): refused under ``--fill-missing error``, as the
release would refuse them, else counted. Empty values in rows that exist are found by the release
only, since the value column is not read.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl

from tsdp.errors import DataError, UsageError
from tsdp.io.load import InputSpec


@dataclass(frozen=True)
class PublicShape:
    """What a dry run may know of the input: its panel's size, what was read, and the missing cells
    (rows absent from the grid: ``missing`` cells in all, the first at series ``first_series`` and
    time ``first_time``)."""

    n_series: int
    n_steps: int
    read: str
    missing: int = 0
    first_series: object = None
    first_time: object = None
    absent: np.ndarray | None = None  # (n_series, n_steps), true where a row is absent (when asked for)


def public_shape(path: str, spec: InputSpec) -> tuple[int, int, str]:
    """(n_series, n_steps, what was read) of the panel ``spec`` describes (missing steps filled)."""
    shape = public_panel(path, spec, refuse_gaps=False)
    return shape.n_series, shape.n_steps, shape.read


def public_panel(path: str, spec: InputSpec, refuse_gaps: bool | None = None, absent: bool = False) -> PublicShape:
    """The :class:`PublicShape` of the panel ``spec`` describes. ``refuse_gaps`` (default: unless
    ``spec.fill_missing``) raises the release's own DataError for the first series with missing steps;
    ``absent`` asks for the matrix of absent rows (series in sorted order; not for events)."""
    refuse_gaps = (not spec.fill_missing) if refuse_gaps is None else refuse_gaps
    layout = spec.resolved_layout
    if layout == "events":
        from tsdp.engine.events import EventCaps, event_job

        job = event_job(spec, EventCaps())
        if spec.series_col is not None and not spec.series_keys:
            raise UsageError("--dry-run with --layout events and --series-col needs --series-keys: the series "
                             "of a dry run must be public, not read off the events")
        like = pl.Datetime("us", spec.timezone) if spec.timezone else pl.Datetime("us")
        grid, _ = job.grid(like)
        n_series = len(spec.series_keys) if spec.series_col is not None else 1
        return PublicShape(n_series, grid.n_steps,
                           "the public grid (--start, --end, --freq) and --series-keys; the input was not opened")
    from tsdp.io.files import read_table
    from tsdp.io.timegrid import MISSING_STEPS_HINT, build_grid
    from tsdp.io.timeparse import parse_time_column

    kinds = {spec.time_col: "time"}
    if layout == "long" and spec.series_col is not None:
        kinds[spec.series_col] = "text"
    df = read_table(path, kinds, None)
    if spec.time_col not in df.columns:
        raise UsageError(f"--time-col {spec.time_col!r} is not a column of the input")
    times = parse_time_column(df.select(spec.time_col), spec.time_col, spec.timezone)[spec.time_col]
    grid = build_grid(times, spec.time_col, spec.freq, not refuse_gaps)  # a step absent from every series
    if layout == "wide" or spec.series_col is None:
        names = (spec.series_cols or [c for c in df.columns if c != spec.time_col]) if layout == "wide" else [None]
        gone = grid.n_steps - times.n_unique()
        first = _first_absent(grid, times) if gone else None
        read = ("the column names and the time column; no value was read" if layout == "wide" else
                "the time column; no value was read")
        matrix = np.repeat(_absent_row(grid, times)[None, :], len(names), axis=0) if absent else None
        return PublicShape(len(names), grid.n_steps, read, gone * len(names), None if first is None else names[0],
                           first, matrix)
    if spec.series_col not in df.columns:
        raise UsageError(f"--series-col {spec.series_col!r} is not a column of the input")
    ids = df[spec.series_col]
    frame = pl.DataFrame({"id": ids, "t": times})
    counts = frame.group_by("id").agg(pl.col("t").n_unique().alias("n")).sort("id")
    short = counts.filter(pl.col("n") < grid.n_steps)
    read = "the series ids and the time column; no value was read"
    matrix = None
    if absent:
        matrix = np.ones((counts.height, grid.n_steps), dtype=bool)
        rows = frame.join(counts.with_row_index("_r").select("id", "_r"), on="id", how="left")
        matrix[rows["_r"].to_numpy(), grid.positions(rows["t"])] = False
    if short.height == 0:
        return PublicShape(counts.height, grid.n_steps, read, absent=matrix)
    series = short["id"][0]
    first = _first_absent(grid, frame.filter(pl.col("id") == series)["t"])
    if refuse_gaps:
        raise DataError(f"column {spec.time_col!r}: series {series!r} has {grid.n_steps - short['n'][0]} missing "
                        f"step(s) (first missing: {first}); {MISSING_STEPS_HINT}")
    missing = int((grid.n_steps - short["n"]).sum())
    return PublicShape(counts.height, grid.n_steps, read, missing, series, first, matrix)


def _absent_row(grid, present: pl.Series) -> np.ndarray:
    mask = np.ones(grid.n_steps, dtype=bool)
    mask[grid.positions(present.unique())] = False
    return mask


def _first_absent(grid, present: pl.Series):
    return grid.points[int(np.flatnonzero(_absent_row(grid, present))[0])]

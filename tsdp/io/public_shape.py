"""The public shape of a panel (series x steps) for ``--dry-run``: no value is read.

* events: the grid is ``--start/--end/--freq`` and the series are ``--series-keys`` (both public
  parameters); the file is not opened at all.
* long: the distinct series ids and the grid spanned by the time column (missing steps filled, as
  ``--fill-missing zero`` would); the value column is never looked at.
* wide: the series are the columns (``--series-cols`` or every column but time), the grid as for
  long.
The grid and series names of pre-aggregated input are treated as public (the release says so too).
"""

from __future__ import annotations

import polars as pl

from tsdp.errors import UsageError
from tsdp.io.load import InputSpec


def public_shape(path: str, spec: InputSpec) -> tuple[int, int, str]:
    """(n_series, n_steps, what was read) of the panel ``spec`` describes."""
    layout = spec.resolved_layout
    if layout == "events":
        from tsdp.io.events import EventCaps
        from tsdp.io.load import event_job

        job = event_job(spec, EventCaps())
        if spec.series_col is not None and not spec.series_keys:
            raise UsageError("--dry-run with --layout events and --series-col needs --series-keys: the series "
                             "of a dry run must be public, not read off the events")
        like = pl.Datetime("us", spec.timezone) if spec.timezone else pl.Datetime("us")
        grid, _ = job.grid(like)
        n_series = len(spec.series_keys) if spec.series_col is not None else 1
        return n_series, grid.n_steps, "the public grid (--start, --end, --freq) and --series-keys; the input was not opened"
    from tsdp.io.files import read_table
    from tsdp.io.timegrid import build_grid, parse_time_column

    kinds = {spec.time_col: "time"}
    if layout == "long" and spec.series_col is not None:
        kinds[spec.series_col] = "text"
    df = read_table(path, kinds, None)
    if spec.time_col not in df.columns:
        raise UsageError(f"--time-col {spec.time_col!r} is not a column of the input")
    times = parse_time_column(df.select(spec.time_col), spec.time_col, spec.timezone)[spec.time_col]
    n_steps = build_grid(times, spec.time_col, spec.freq, True).n_steps
    if layout == "wide":
        names = spec.series_cols or [c for c in df.columns if c != spec.time_col]
        return len(names), n_steps, "the column names and the time column; no value was read"
    if spec.series_col is None:
        return 1, n_steps, "the time column; no value was read"
    if spec.series_col not in df.columns:
        raise UsageError(f"--series-col {spec.series_col!r} is not a column of the input")
    return df[spec.series_col].n_unique(), n_steps, "the series ids and the time column; no value was read"

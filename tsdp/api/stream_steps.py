"""The steps of one ``tsdp stream append``: reading them from panel rows or raw events (release's
caps), checking that they are exactly the next steps of the stream's grid, counting each user's
participations over the horizon, and shaping the released values into the output table
(:mod:`tsdp.api.stream`)."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime

import numpy as np

from tsdp.errors import DataError, UsageError
from tsdp.mechanisms.continual.definition import Definition


def stream_points(d: Definition, like, count: int):
    """The first ``count`` points of the stream's public grid, as a column of dtype ``like``."""
    import polars as pl

    from tsdp.io.timegrid import TimeGrid, following_points, parse_freq, parse_instant

    start = parse_instant(d.start, "--start", like)
    first = pl.Series(d.layout["time_col"], [start], dtype=like)
    if count == 1:
        return first
    return pl.concat([first, following_points(TimeGrid(first, parse_freq(d.freq, like.is_integer())), count - 1)])


def _iso(value) -> str:
    if hasattr(value, "isoformat"):
        return value.isoformat(sep=" ") if isinstance(value, datetime) else value.isoformat()
    return str(value)


def _outside(what: str, index: int, p: int, horizon: int, when, k: int | None) -> DataError:
    """The error for data of 0-based step ``index`` when the append covers ``p .. p+k-1``."""
    if index < 0:
        return DataError(f"INPUT: {what} at {_iso(when)} is before the stream's first step; nothing was written")
    if index >= horizon:
        return DataError(f"INPUT: {what} at {_iso(when)} is past the stream's horizon of {horizon} steps; nothing "
                         "was written and the state is unchanged")
    if index < p:
        return DataError(f"INPUT: {what} at {_iso(when)} belongs to step {index + 1}, which was already appended (the "
                         f"stream is at step {p} of {horizon}; a step is never published twice); nothing was written")
    if k is None:
        return DataError(f"INPUT: {what} at {_iso(when)} is step {index + 1}, but the next step is {p + 1}: a step "
                         "would be skipped; nothing was written and the state is unchanged")
    return DataError(f"INPUT: {what} at {_iso(when)} belongs to step {index + 1}, outside the steps {p + 1}.."
                     f"{p + k} of this append (--steps {k}); nothing was written and the state is unchanged")


def read_steps(input: str, d: Definition, p: int, steps: int | None, participation: dict[str, np.ndarray]):
    """(x: (n_series, k) values of steps p..p+k-1 in the order of the declared keys, their grid
    points, the participation counters after them)."""
    from tsdp.io.files import read_table
    from tsdp.io.load import InputSpec

    lay = d.layout
    spec = InputSpec(layout=lay["layout"], time_col=lay["time_col"], value_col=lay.get("value_col"),
                     series_col=lay.get("series_col"), series_cols=lay.get("series_cols"),
                     user_col=lay.get("user_col"), freq=d.freq, timezone=lay.get("timezone"))
    df = read_table(input, *spec.read_schema())
    if spec.resolved_layout == "events":
        return _event_steps(df, spec, d, p, steps or 1, participation)
    return (*_panel_steps(df, spec, d, p, steps), participation)


def _panel_steps(df, spec, d: Definition, p: int, steps: int | None):
    import polars as pl

    from tsdp.engine.panel import load_input

    table = load_input(df, spec).table
    horizon = d.setting.horizon
    points = table.grid.points
    grid = stream_points(d, points.dtype, horizon + 1)
    index = pl.DataFrame({"t": grid, "i": np.arange(horizon + 1)})
    found = pl.DataFrame({"t": points}).join(index, on="t", how="left", maintain_order="left")["i"]
    if found.null_count():
        bad = points.filter(found.is_null())[0]
        raise DataError(f"INPUT: time {_iso(bad)} in column {spec.time_col!r} is not a step of the stream's grid "
                        f"(start {d.start}, every {d.freq}); nothing was written")
    positions = found.to_numpy()
    first = int(positions[0])
    if first != p:
        raise _outside("the first row", first, p, horizon, points[0], None)
    last = int(positions[-1])
    if last >= horizon:
        raise _outside("a row", last, p, horizon, points[-1], None)
    k = len(positions)
    if steps is not None and steps != k:
        raise DataError(f"INPUT: holds {k} step(s) ({p + 1}..{p + k}), but --steps {steps} was given; nothing was "
                        "written")
    names = [str(n) for n in table.series_names]
    unknown = [n for n in names if n not in set(d.series_keys)]
    if unknown:
        raise DataError(f"INPUT: series {unknown[0]!r} is not one of the stream's public series keys (declared at "
                        "'stream init'); nothing was written and the state is unchanged")
    missing = [key for key in d.series_keys if key not in set(names)]
    if missing:
        raise DataError(f"INPUT: series {missing[0]!r} has no rows for steps {p + 1}..{p + k}; every declared series "
                        "needs a value at every step; nothing was written")
    matrix = np.asarray(table.values_matrix(), dtype=float)
    order = [names.index(key) for key in d.series_keys]
    return matrix[order], points


def _event_steps(df, spec, d: Definition, p: int, k: int, participation: dict[str, np.ndarray]):
    import polars as pl

    from tsdp.accounting.sensitivity import ContributionBounds
    from tsdp.engine.panel import event_caps
    from tsdp.engine.panel import load_input
    from tsdp.io.timeparse import parse_time_column

    horizon, setting = d.setting.horizon, d.setting
    if p + k > horizon:
        raise DataError(f"--steps {k}: steps {p + 1}..{p + k} go past the stream's horizon of {horizon} steps; "
                        "nothing was written and the state is unchanged")
    raw = df
    df = parse_time_column(df, spec.time_col, spec.timezone)
    times = df[spec.time_col]
    grid = stream_points(d, times.dtype, horizon + 1)
    edges = grid.to_physical().to_numpy()
    index = np.searchsorted(edges, times.to_physical().to_numpy(), side="right") - 1
    inside = (index >= p) & (index < p + k)
    if not inside.all():
        j = int(np.flatnonzero(~inside)[0])
        raise _outside("an event", int(index[j]) if index[j] < horizon else horizon, p, horizon, times[j], k)
    keys = d.series_keys
    if spec.series_col is not None:
        seen = df[spec.series_col].cast(pl.String).unique()
        unknown = seen.filter(~seen.is_in(keys) | seen.is_null())
        if unknown.len():
            raise DataError(f"INPUT: series {unknown[0]!r} in column {spec.series_col!r} is not one of the stream's "
                            "public series keys (declared at 'stream init'); nothing was written")
    elif len(keys) != 1:
        raise UsageError("--series-col is required: the stream has several series keys")
    counters = participation
    if setting.unit == "user":
        counters = _participation(df, spec, keys, index, participation, setting.max_steps, setting.series_per_user)
    bounds = ContributionBounds(setting.unit, setting.max_per_step,
                                setting.max_steps if setting.unit == "user" else None,
                                setting.w if setting.unit == "w-event" else None, setting.series_per_user)
    window = replace(spec, series_keys=keys if spec.series_col else None, start=_iso(grid[p]), end=_iso(grid[p + k]))
    table = load_input(raw, window, event_caps(bounds, d.layout.get("value_bound"))).table
    names = [str(n) for n in table.series_names]
    matrix = np.asarray(table.values_matrix(), dtype=float)
    if spec.series_col is None:
        return matrix.reshape(1, -1), grid[p:p + k], counters
    return matrix[[names.index(key) for key in keys]], grid[p:p + k], counters


def _participation(df, spec, keys: list[str], index: np.ndarray, counters: dict[str, np.ndarray],
                   max_steps: int, series_per_user: int) -> dict[str, np.ndarray]:
    """The (user, series) participation counters after this append; DataError if a user would take
    part in more than I steps of a series, or in more than K series, over the horizon."""
    import polars as pl

    series = (df[spec.series_col].cast(pl.String).replace_strict(keys, list(range(len(keys))), return_dtype=pl.Int64)
              if spec.series_col else pl.Series(np.zeros(df.height, dtype=np.int64)))
    now = (pl.DataFrame({"users": df[spec.user_col].cast(pl.String), "series": series, "step": index})
           .unique().group_by("users", "series").agg(pl.len().cast(pl.Int64).alias("steps")))
    before = pl.DataFrame({"users": counters.get("users", np.array([], dtype=str)).astype(str),
                           "series": counters.get("series", np.array([], dtype=np.int64)).astype(np.int64),
                           "steps": counters.get("steps", np.array([], dtype=np.int64)).astype(np.int64)},
                          schema={"users": pl.String, "series": pl.Int64, "steps": pl.Int64})
    total = pl.concat([before, now]).group_by("users", "series").agg(pl.col("steps").sum()).sort("users", "series")
    spread = total.group_by("users").agg(pl.len().alias("series")).filter(pl.col("series") > series_per_user)
    if spread.height:
        raise DataError(f"INPUT: {spread.height} user(s) would contribute to more than --series-per-user "
                        f"{series_per_user} series over the stream's horizon; drop their events in the other series "
                        "before appending; nothing was written and the state is unchanged")
    over = total.filter(pl.col("steps") > max_steps)
    if over.height:
        raise DataError(f"INPUT: {over.height} user(s) would take part in more than --max-steps {max_steps} steps of "
                        f"one series over the stream's horizon (the participation the claim covers); drop their "
                        "extra events before appending; nothing was written and the state is unchanged")
    return {"users": total["users"].to_numpy().astype(str), "series": total["series"].to_numpy(),
            "steps": total["steps"].to_numpy()}


def output_frame(d: Definition, times, p: int, values: dict[str, np.ndarray]):
    """The released steps, step-major (so that appended files concatenate to one long file):
    step (1-based), time, series, then one column per output."""
    import polars as pl

    n = len(d.series_keys)
    k = len(times)
    columns = {"step": np.repeat(np.arange(p + 1, p + k + 1, dtype=np.int64), n),
               d.layout["time_col"]: times.gather(np.repeat(np.arange(k), n)),
               "series": np.tile(np.asarray(d.series_keys, dtype=object), k).astype(str)}
    for name in d.setting.outputs:
        columns[name] = np.asarray(values[name], dtype=float).T.ravel()
    return pl.DataFrame(columns)

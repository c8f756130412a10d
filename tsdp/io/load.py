"""How to read series input in any layout (:class:`InputSpec`), and the loading of pre-aggregated series.

:func:`load_series` checks that the options fit the long or wide layout, loads and checks the table,
and says what the guarantee may assume about it: the declared contribution bounds are trusted, not
enforced (raw events are aggregated, their bounds enforced, by :func:`tsdp.engine.panel.load_input`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import polars as pl

from tsdp.errors import UsageError
from tsdp.io.layouts import SeriesTable, load_long, load_wide


@dataclass(frozen=True)
class InputSpec:
    """How to read the input table (all names are column names of the input)."""

    layout: str | None = None
    time_col: str = "time"
    value_col: str | None = None
    series_col: str | None = None
    series_cols: list[str] | None = None
    user_col: str | None = None
    series_keys: list[str] | None = None
    start: str | None = None
    end: str | None = None
    freq: str | None = None
    fill_missing: bool = False  # missing cells become 0 for the mechanism (else they are an error)
    keep_missing: bool = False  # ... and are published as missing (--fill-missing null), not as noisy 0
    allow_negative: bool = False
    timezone: str | None = None  # --timezone: the zone of timestamps written without an offset

    def read_schema(self) -> tuple[dict[str, str], str | None]:
        """(kind of each column the layout reads, kind of every other column) for
        :func:`tsdp.io.files.read_table`: values are numbers, ids are text, times are parsed later."""
        layout = self.resolved_layout
        if layout == "wide":
            kinds = {self.time_col: "time", **{c: "number" for c in self.series_cols or ()}}
            return kinds, (None if self.series_cols else "number")
        kinds = {self.time_col: "time"}
        for column, kind in ((self.value_col, "number"), (self.series_col, "text"), (self.user_col, "text")):
            if column is not None:
                kinds[column] = kind
        return kinds, None

    @property
    def resolved_layout(self) -> str:
        """The layout given, or: events with a user column, long with a value column, else wide."""
        if self.layout:
            return self.layout
        return "events" if self.user_col else "long" if self.value_col else "wide"


@dataclass
class LoadedInput:
    table: SeriesTable
    enforced: bool
    notes: list[str] = field(default_factory=list)
    diagnostics: dict = field(default_factory=dict)  # not private: for the operator only


SERIES_NOTE = "the series names and the time grid of the input are treated as public"


def load_series(df: pl.DataFrame, spec: InputSpec) -> LoadedInput:
    """Load ``df``, pre-aggregated series in the long or wide layout, as a complete panel (event
    input is aggregated by :func:`tsdp.engine.panel.load_input`)."""
    layout = spec.resolved_layout
    if spec.user_col is not None:
        raise UsageError("--user-col needs --layout events")
    if layout == "long":
        if spec.value_col is None:
            raise UsageError("--value-col is required for --layout long")
        table = load_long(df, spec.time_col, spec.value_col, spec.series_col, spec.freq,
                          spec.fill_missing, spec.allow_negative, timezone=spec.timezone)
    elif layout == "wide":
        table = load_wide(df, spec.time_col, spec.series_cols, spec.freq, spec.fill_missing, spec.allow_negative,
                          timezone=spec.timezone)
    else:
        raise UsageError(f"--layout must be one of long, wide, events, got {layout!r}")
    diagnostics = {"filled_cells": table.filled_cells} if table.filled_cells else {}
    notes = [SERIES_NOTE]
    return LoadedInput(table, False, notes, diagnostics)

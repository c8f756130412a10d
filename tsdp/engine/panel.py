"""The panel a release mechanism protects, derived from the declared privacy unit.

:func:`load_panel` is the one route from an input table to ``(loaded input, Panel, notes)`` that
``tsdp release`` and the neighbour tests share: it turns the declared contribution bounds into the
caps tsdp enforces on raw events (:func:`event_caps`), aggregates, and states the sensitivity the
mechanism must cover. For events the per-cell bound is the enforced one (M events of value at most
V); for pre-aggregated series it is the declared one, and a note says it is trusted, not enforced.
"""

from __future__ import annotations

from dataclasses import replace

import polars as pl

from tsdp.accounting.sensitivity import ContributionBounds
from tsdp.errors import UsageError
from tsdp.engine.engines import engine_for
from tsdp.engine.options import EngineOptions
from tsdp.engine.events import EventAggregation, EventCaps, assemble, event_job, loaded_events, partial_cell_sums
from tsdp.io.inputs import check_input
from tsdp.io.layouts import SeriesTable
from tsdp.io.load import InputSpec, LoadedInput, load_series
from tsdp.mechanisms.baseline import Panel

ALL_STEPS = 2**62  # "no participation bound": replaced by the series length T once the data is loaded

TRUSTED_NOTE = ("contribution bounds were declared by the data steward and not enforced: the input is "
                "pre-aggregated, so the guarantee holds only if they are true")


def event_caps(declared: ContributionBounds, value_bound: float | None) -> EventCaps:
    """The caps tsdp enforces on raw events for the declared unit (see :mod:`tsdp.engine.events`).

    With a norm bound C whose cell bound M V is at least C, the per-bucket cap is implied by the
    norm (a user's cell holds at most C once scaled): no event is dropped for it."""
    if not declared.unit.per_user_caps:
        return EventCaps(value_bound=value_bound, level=declared.level)
    per_step = declared.max_per_step
    if declared.max_norm is not None and per_step * (value_bound or 1.0) >= declared.max_norm * (1 - 1e-12):
        per_step = None
    elif per_step != int(per_step):
        raise UsageError(
            f"--max-per-step must be a whole number of events for event input, got {declared.max_per_step}"
        )
    return EventCaps(
        max_per_step=None if per_step is None else int(per_step),
        max_steps=declared.max_steps if declared.unit.uses_max_steps else None,
        series_per_unit=declared.series_per_unit,
        value_bound=value_bound,
        level=declared.level,
        max_norm=declared.max_norm,
    )


def load_event_panel(path: str, spec: InputSpec, declared: ContributionBounds, options: EngineOptions,
                     value_bound: float | None = None, stage=None) -> tuple[LoadedInput, Panel, list[str]]:
    """:func:`load_panel` for event input read from ``path`` by the engine of ``options``."""
    caps = event_caps(declared, value_bound)
    agg = aggregate_job(path, event_job(spec, caps), options, stage)
    return _panel(loaded_events(agg, caps), spec, declared, caps)


def raw_event_panel(path: str, spec: InputSpec, declared: ContributionBounds, options: EngineOptions,
                    value_bound: float | None = None, stage=None) -> SeriesTable:
    """The events of ``path`` aggregated on the same public grid and series keys as
    :func:`load_event_panel`, but with no cap and no value clip (:meth:`EventJob.unbounded`): the
    panel the release approximates, for ``--evaluate`` only (it has no sensitivity bound and is
    never released)."""
    job = event_job(spec, event_caps(declared, value_bound)).unbounded()
    return aggregate_job(path, job, options, stage).table


def aggregate_job(path: str, job, options: EngineOptions, stage=None) -> EventAggregation:
    """``job`` run on the events of ``path`` by the engine of ``options``."""
    if "://" not in path:
        check_input(path)  # before any engine opens it: a FIFO would block, a repeated column mislead
    return engine_for(options).aggregate(path, job, stage)


def load_input(df: pl.DataFrame, spec: InputSpec, caps: EventCaps | None = None) -> LoadedInput:
    """Load ``df`` as a complete panel; for events, enforce ``caps`` while aggregating."""
    if spec.resolved_layout == "events":
        caps = caps or EventCaps()
        job = event_job(spec, caps)
        return loaded_events(assemble(job, [partial_cell_sums(df, job)]), caps)
    return load_series(df, spec)


def load_panel(df: pl.DataFrame, spec: InputSpec, declared: ContributionBounds,
               caps: EventCaps | None = None, value_bound: float | None = None,
               ) -> tuple[LoadedInput, Panel, list[str]]:
    """Load ``df`` and derive the panel the mechanism protects, with the report's notes.

    ``caps`` defaults to :func:`event_caps` of ``declared`` for event input (``value_bound`` is
    the V of the per-event value clip) and is ignored for series input.
    """
    if spec.resolved_layout == "events":
        caps = caps or event_caps(declared, value_bound)
    else:
        caps = None
    return _panel(load_input(df, spec, caps), spec, declared, caps)


def _panel(loaded: LoadedInput, spec: InputSpec, declared: ContributionBounds, caps: EventCaps | None):
    table = loaded.table
    panel, notes = panel_of(table.n_series, table.n_steps, spec, declared, caps, loaded.enforced, loaded.notes)
    return loaded, panel, notes


def panel_of(n_series: int, n_steps: int, spec: InputSpec, declared: ContributionBounds, caps: EventCaps | None,
             enforced: bool, notes: list[str]) -> tuple[Panel, list[str]]:
    """The panel of ``n_series`` x ``n_steps`` cells the mechanism protects, and the report's notes
    (also for a long input released in chunks of series, whose panel is the whole input's)."""
    if declared.max_steps == ALL_STEPS:
        declared = replace(declared, max_steps=n_steps)
    bounds = replace(declared, max_per_step=caps.cell_bound()) if caps else declared
    notes = list(notes)
    if not enforced:
        notes.insert(0, TRUSTED_NOTE)
    return Panel(n_series, n_steps, bounds, spec.user_col, enforced=enforced), notes

"""The record spec and estimator settings the engine equality tests share (bus speeds per cell and hour)."""

from __future__ import annotations

from tsdp.io.records import RecordSpec
from tsdp.mean import MeanSettings


def spec(**kw) -> RecordSpec:
    """Bus speeds in [0, 65] per (cell, 1h slot), with the time column ``ts``; ``kw`` overrides."""
    base = dict(user_col="bus", value_col="speed", lower=0.0, upper=65.0, time_col="ts", cell_col="cell",
                slot_length="1h", group_by=("cell", "slot"))
    return RecordSpec(**{**base, **kw})


SETTINGS = [
    MeanSettings(epsilon=1.0, upper=65.0, algorithm="baseline"),
    MeanSettings(epsilon=1.0, upper=65.0, algorithm="array-averaging"),
    MeanSettings(epsilon=1.0, upper=65.0, algorithm="array-averaging", grouping="wraparound", m_ub="median"),
    MeanSettings(epsilon=1.0, upper=65.0, algorithm="levy"),
    MeanSettings(epsilon=1.0, upper=65.0, algorithm="quantile", grouping="wraparound", m_ub="opt"),
]

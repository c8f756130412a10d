"""FLIP: privacy by secret random all-pass filtering (McElroy, Roy & Hore 2022), with its own privacy
measure, Linear Incremental Privacy. It is not differential privacy. See ``specs/flip.md``."""

from tsdp.flip.mechanism import (
    NOT_DP,
    FlipSettings,
    SeriesFlip,
    claim_for,
    flip_many,
    flip_series,
    series_generator,
)
from tsdp.flip.phase import BetaMixture

__all__ = ["NOT_DP", "BetaMixture", "FlipSettings", "SeriesFlip", "claim_for", "flip_many",
           "flip_series", "series_generator"]

"""Accuracy a steward can see before publishing: (1 - alpha) intervals of the noise of released
values, from public parameters only (issue 15). Core mathematics; the CLI only prints it."""

from tsdp.accuracy.intervals import DEFAULT_ALPHA, check_alpha
from tsdp.accuracy.mechanisms import TARGETS
from tsdp.accuracy.result import COVERS, Accuracy

__all__ = ["Accuracy", "COVERS", "DEFAULT_ALPHA", "TARGETS", "check_alpha"]

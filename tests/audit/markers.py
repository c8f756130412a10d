"""Shared set-up of the DP-SGD sampler audits: a panel that is 0 except one marked value."""

from __future__ import annotations

import numpy as np

from tsdp.forecast import sampling


def marker_panel(series: int, length: int, value_at: int, context: int, horizon: int) -> sampling.PaddedPanel:
    """Series 0 holds 1 at time ``value_at``, every other cell 0: a window's sum says whether it holds the value."""
    marker = np.zeros((series, length))
    marker[0, value_at] = 1.0
    return sampling.PaddedPanel(marker, context, horizon)

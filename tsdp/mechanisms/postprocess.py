"""Post-processing of released values: free of privacy cost (Dwork and Roth 2014, Prop. 2.1)."""

from __future__ import annotations

import numpy as np

from tsdp.errors import UsageError


def postprocess(values: np.ndarray, clip_min: float | None = None, clip_max: float | None = None,
                round_values: bool = False) -> np.ndarray:
    """Clip to [clip_min, clip_max] and optionally round to integers, in place where possible."""
    if clip_min is not None and clip_max is not None and clip_min > clip_max:
        raise UsageError(f"--clip-min ({clip_min}) must not exceed --clip-max ({clip_max})")
    if clip_min is not None or clip_max is not None:
        np.clip(values, clip_min, clip_max, out=values)
    if round_values:
        np.rint(values, out=values)
    return values


def describe(clip_min: float | None, clip_max: float | None, round_values: bool) -> list[str]:
    steps = []
    if clip_min is not None or clip_max is not None:
        steps.append(f"clipped to [{clip_min if clip_min is not None else '-inf'}, "
                     f"{clip_max if clip_max is not None else 'inf'}]")
    if round_values:
        steps.append("rounded to integers")
    return steps

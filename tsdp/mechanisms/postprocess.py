"""Post-processing of released values: free of privacy cost (Dwork and Roth 2014, Prop. 2.1)."""

from __future__ import annotations

import math

import numpy as np

from tsdp.errors import UsageError


def check_clip(clip_min: float | None = None, clip_max: float | None = None) -> None:
    """UsageError unless each given bound is a finite number and ``clip_min <= clip_max``.

    A NaN bound would turn every released value into NaN; an infinite one is the same as leaving
    the option out, so it is refused rather than guessed at.
    """
    for option, bound in (("--clip-min", clip_min), ("--clip-max", clip_max)):
        if bound is not None and not math.isfinite(bound):
            raise UsageError(f"{option} {bound}: must be a finite number (leave the option out for no bound)")
    if clip_min is not None and clip_max is not None and clip_min > clip_max:
        raise UsageError(f"--clip-min ({clip_min}) must not exceed --clip-max ({clip_max})")


def postprocess(values: np.ndarray, clip_min: float | None = None, clip_max: float | None = None,
                round_values: bool = False) -> np.ndarray:
    """Clip to [clip_min, clip_max] and optionally round to integers, in place where possible."""
    check_clip(clip_min, clip_max)
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

"""Noise samplers: the one place where tsdp draws additive noise.

Kept together so that a hardened sampler (discrete, floating-point-safe) can replace them
in one place (DESIGN.md section 5). Both return float64 arrays of the requested size.
"""

from __future__ import annotations

import numpy as np


def gaussian_noise(rng: np.random.Generator, sigma: float, size: int) -> np.ndarray:
    """Independent N(0, sigma^2) draws."""
    out = rng.standard_normal(size)
    out *= sigma
    return out


def laplace_noise(rng: np.random.Generator, scale: float, size: int) -> np.ndarray:
    """Independent Laplace(0, scale) draws (density exp(-|x|/scale) / (2 scale))."""
    return rng.laplace(0.0, scale, size)

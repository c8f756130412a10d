"""Noise samplers: the one place where tsdp draws additive noise.

Kept together so that a hardened sampler (discrete, floating-point-safe) can replace them
in one place (DESIGN.md section 5). Both return float64 arrays of the requested size.

Large draws are split into fixed-size chunks, each filled by its own child generator spawned from
the caller's generator (numpy's SeedSequence spawning, which gives independent streams), and the
chunks are filled by a thread pool. The chunking does not depend on the number of threads, so a
seeded run draws the same numbers on any machine.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor

import numpy as np

CHUNK = 1 << 20


def _fill_chunked(rng: np.random.Generator, size: int, fill) -> np.ndarray:
    out = np.empty(size, dtype=np.float64)
    if size <= CHUNK:
        fill(rng, out)
        return out
    starts = range(0, size, CHUNK)
    children = rng.spawn(len(starts))
    workers = min(len(children), os.cpu_count() or 1)

    def work(k: int) -> None:
        fill(children[k], out[starts[k]:starts[k] + CHUNK])

    with ThreadPoolExecutor(max_workers=workers) as pool:
        list(pool.map(work, range(len(children))))
    return out


def gaussian_noise(rng: np.random.Generator, sigma: float, size: int) -> np.ndarray:
    """Independent N(0, sigma^2) draws."""

    def fill(gen: np.random.Generator, buf: np.ndarray) -> None:
        gen.standard_normal(out=buf)
        buf *= sigma

    return _fill_chunked(rng, size, fill)


def laplace_noise(rng: np.random.Generator, scale: float, size: int) -> np.ndarray:
    """Independent Laplace(0, scale) draws (density exp(-|x|/scale) / (2 scale))."""

    def fill(gen: np.random.Generator, buf: np.ndarray) -> None:
        # Laplace(0, b) = b * (E1 - E2) with E1, E2 independent standard exponentials.
        gen.standard_exponential(out=buf)
        buf -= gen.standard_exponential(buf.size)
        buf *= scale

    return _fill_chunked(rng, size, fill)

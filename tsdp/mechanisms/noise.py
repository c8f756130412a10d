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


def _start_chunked(rng: np.random.Generator, size: int, fill):
    """Start filling a new float64 array of ``size`` by chunks; return it and the pending work."""
    out = np.empty(size, dtype=np.float64)
    if size <= CHUNK:
        fill(rng, out)
        return out, None
    starts = range(0, size, CHUNK)
    children = rng.spawn(len(starts))
    pool = ThreadPoolExecutor(max_workers=min(len(children), os.cpu_count() or 1))
    futures = [pool.submit(fill, child, out[k:k + CHUNK]) for child, k in zip(children, starts)]
    pool.shutdown(wait=False)
    return out, futures


def _finish(futures) -> None:
    for future in futures or ():
        future.result()


def _fill_chunked(rng: np.random.Generator, size: int, fill) -> np.ndarray:
    out, futures = _start_chunked(rng, size, fill)
    _finish(futures)
    return out


def _standard_normal(gen: np.random.Generator, buf: np.ndarray) -> None:
    gen.standard_normal(out=buf)


class PrefetchedNormals:
    """Standard normal draws started in background threads before they are needed.

    The draws do not depend on the data, so they can be made while the data is read and checked.
    :meth:`take` waits for them. If the number of cells turns out different from the one expected
    (missing steps were filled), the draws are discarded and :meth:`take` draws afresh.
    """

    def __init__(self, rng: np.random.Generator, size: int) -> None:
        self._rng = rng
        self._out, self._futures = _start_chunked(rng, size, _standard_normal)

    def take(self, size: int) -> np.ndarray:
        _finish(self._futures)
        out, self._out = self._out, None
        if out is None or out.size != size:
            return _fill_chunked(self._rng, size, _standard_normal)
        return out


def gaussian_noise(rng: np.random.Generator, sigma: float, size: int,
                   prefetched: PrefetchedNormals | None = None) -> np.ndarray:
    """Independent N(0, sigma^2) draws (from ``prefetched`` standard normals when given)."""
    if prefetched is not None:
        out = prefetched.take(size)
        out *= sigma
        return out

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

"""Noise samplers: the one place where tsdp draws additive noise.

Two samplers. ``hardened`` (the default; ``granularity=g`` below): ``g`` times exact discrete
Gaussian or discrete Laplace draws (:mod:`tsdp.mechanisms.discrete`), to be added to values
rounded to multiples of ``g`` (:func:`snap`), so every released value is an exact multiple of
``g`` (:mod:`tsdp.accounting.discrete` for the privacy). ``float`` (``granularity=None``): numpy's
floating-point Gaussian and Laplace samplers, for experiments and paper reproduction only: their
outputs can leak the input through their low-order bits (Mironov 2012), see :data:`FLOAT_WARNING`.
Both return float64 arrays of the requested size.

Large draws are split into fixed-size chunks, each filled by its own child generator spawned from
the caller's generator (numpy's SeedSequence spawning, which gives independent streams), and the
chunks are filled by a thread pool. The chunking does not depend on the number of threads, so a
seeded run draws the same numbers on any machine.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from tsdp.accounting.samplers import FLOAT_WARNING  # noqa: F401  (defined by the float sampler; imported from here too)

CHUNK = 1 << 20


def snap(values: np.ndarray, granularity: float | None) -> np.ndarray:
    """``values`` rounded to the nearest multiple of ``granularity`` (a power of two; ties to even);
    ``values`` itself when ``granularity`` is None (float sampler)."""
    if granularity is None:
        return values
    out = np.multiply(values, 1.0 / granularity)  # exact: a power of two
    np.rint(out, out=out)
    out *= granularity
    return out


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


class NoiseStream:
    """The draws a sampler makes for ``total`` cells, handed out in consecutive pieces.

    ``take(n, fill)`` returns the next ``n`` of exactly the numbers ``_fill_chunked(rng, total,
    fill)`` would return at once (the same chunks, each from the same spawned child), so a panel
    released series chunk by series chunk gets the noise it would get in one piece. Only one
    chunk of draws is held at a time.
    """

    def __init__(self, rng: np.random.Generator, total: int) -> None:
        self._rng, self._total = rng, int(total)
        self._children = rng.spawn(-(-self._total // CHUNK)) if self._total > CHUNK else None
        self._next = 0            # index of the next chunk to draw
        self._buf = np.empty(0)   # the current chunk's draws not yet handed out
        self.taken = 0

    def take(self, n: int, fill) -> np.ndarray:
        if self.taken + n > self._total:
            raise ValueError(f"noise stream of {self._total} draws asked for {self.taken + n}")
        out = np.empty(n, dtype=np.float64)
        done = 0
        while done < n:
            if not self._buf.size:
                self._buf = self._draw(fill)
            k = min(n - done, self._buf.size)
            out[done:done + k] = self._buf[:k]
            self._buf = self._buf[k:]
            done += k
        self.taken += n
        return out

    def _draw(self, fill) -> np.ndarray:
        start = self._next * CHUNK
        buf = np.empty(min(CHUNK, self._total - start) if self._children else self._total, dtype=np.float64)
        fill(self._children[self._next] if self._children else self._rng, buf)
        self._next += 1
        return buf


def gaussian_fill(sigma: float):
    """Fill a buffer with N(0, sigma^2) draws."""
    def fill(gen: np.random.Generator, buf: np.ndarray) -> None:
        gen.standard_normal(out=buf)
        buf *= sigma

    return fill


def laplace_fill(scale: float):
    """Fill a buffer with Laplace(0, scale) draws (density exp(-|x|/scale) / (2 scale))."""
    def fill(gen: np.random.Generator, buf: np.ndarray) -> None:
        # Laplace(0, b) = b * (E1 - E2) with E1, E2 independent standard exponentials.
        gen.standard_exponential(out=buf)
        buf -= gen.standard_exponential(buf.size)
        buf *= scale

    return fill


def discrete_gaussian_fill(sigma: float, granularity: float):
    """Fill a buffer with ``granularity`` times discrete Gaussian draws of parameter sigma/granularity."""
    from tsdp.mechanisms.discrete import discrete_gaussian

    def fill(gen: np.random.Generator, buf: np.ndarray) -> None:
        discrete_gaussian(gen, sigma / granularity, buf.size, out=buf, multiplier=granularity)

    return fill


def discrete_laplace_fill(scale: float, granularity: float):
    """Fill a buffer with ``granularity`` times discrete Laplace draws of scale scale/granularity."""
    from tsdp.mechanisms.discrete import discrete_laplace

    def fill(gen: np.random.Generator, buf: np.ndarray) -> None:
        discrete_laplace(gen, scale / granularity, buf.size, out=buf, multiplier=granularity)

    return fill


def gaussian_noise(rng: np.random.Generator, sigma: float, size: int,
                   prefetched: PrefetchedNormals | None = None,
                   stream: NoiseStream | None = None, granularity: float | None = None) -> np.ndarray:
    """Independent N(0, sigma^2) draws (from ``prefetched`` standard normals, or the next ones of
    ``stream``, when given); with ``granularity``, the hardened sampler's discrete Gaussian draws
    on that lattice instead (``prefetched`` is then not used)."""
    if granularity is not None:
        fill = discrete_gaussian_fill(sigma, granularity)
        return stream.take(size, fill) if stream is not None else _fill_chunked(rng, size, fill)
    if stream is not None:
        return stream.take(size, gaussian_fill(sigma))
    if prefetched is not None:
        out = prefetched.take(size)
        out *= sigma
        return out
    return _fill_chunked(rng, size, gaussian_fill(sigma))


def laplace_noise(rng: np.random.Generator, scale: float, size: int,
                  stream: NoiseStream | None = None, granularity: float | None = None) -> np.ndarray:
    """Independent Laplace(0, scale) draws (the next ones of ``stream`` when given); with
    ``granularity``, the hardened sampler's discrete Laplace draws on that lattice instead."""
    fill = laplace_fill(scale) if granularity is None else discrete_laplace_fill(scale, granularity)
    if stream is not None:
        return stream.take(size, fill)
    return _fill_chunked(rng, size, fill)

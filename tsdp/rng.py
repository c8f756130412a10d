"""The randomness policy (DESIGN.md section 5).

Every run gets a fresh ``numpy.random.Generator`` seeded from OS entropy through :mod:`secrets`.
``--seed N`` makes a run reproducible for tests and experiments only; the report then says
``"randomness": "seeded"`` and carries a warning that the release must not be published.
Noise samplers live in :mod:`tsdp.mechanisms.noise` so that a hardened sampler can replace them in
one place.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass

import numpy as np

from tsdp.caveats import Caveat

SEEDED_WARNING = Caveat(
    "seeded_run",
    "this run used a fixed --seed: anyone who knows the seed can remove the noise, "
    "so its output must not be published",
)


@dataclass(frozen=True)
class RandomSource:
    """A generator plus how it was seeded (the seed itself is never reported)."""

    generator: np.random.Generator
    seeded: bool

    @property
    def label(self) -> str:
        return "seeded" if self.seeded else "os-entropy"


def make_random_source(seed: int | None = None) -> RandomSource:
    """Return a generator seeded from ``seed``, or from 128 bits of OS entropy when ``None``."""
    if seed is None:
        return RandomSource(np.random.Generator(np.random.PCG64(secrets.randbits(128))), False)
    if seed < 0:
        from tsdp.errors import UsageError

        raise UsageError(f"--seed must be a non-negative integer, got {seed}")
    return RandomSource(np.random.Generator(np.random.PCG64(seed)), True)

"""One resolved strategy as a factorization: its sensitivity by unit and its decoder row norms.

``factorization(strategy, horizon, band)`` returns a :class:`Factorization` (cached: the tree's
decoders and the Toeplitz decoder columns are computed once per process). It answers the two
public questions the privacy map and the accuracy ask of a strategy:

* ``sensitivity(unit, ...)``: s(C) per series in units of M (:mod:`.sensitivity`); ``column_support``
  and ``n_rows`` bound the noisy values a unit can change (the hardened sampler's rounding slack);
* ``row_norms(output)``: ``||B_t||_2`` for every step t of an output's workload A = B C.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from tsdp.mechanisms.continual import sensitivity as sens
from tsdp.mechanisms.continual import toeplitz as tz
from tsdp.mechanisms.continual.tree import BinaryTree
from tsdp.mechanisms.continual.workloads import workload_column


@dataclass(frozen=True, eq=False)
class Factorization:
    """A strategy on a horizon: Toeplitz (first column ``column``) or the binary tree (``tree``)."""

    strategy: str
    horizon: int
    band: int | None
    column: np.ndarray | None = None
    tree: BinaryTree | None = None

    @property
    def n_rows(self) -> int:
        """Noisy values per series over the horizon (rows of C)."""
        return self.tree.n_nodes if self.tree is not None else self.horizon

    @property
    def column_support(self) -> int:
        """Most rows of C one step reaches (the band of a Toeplitz C; the levels of the tree)."""
        return self.tree.levels if self.tree is not None else int(min(self.column.size, self.horizon))

    def sensitivity(self, unit: str, w: int | None, max_steps: int | None, min_separation: int | None) -> float:
        """s(C) / M of one series for the unit (:mod:`.sensitivity`)."""
        if self.tree is None:
            return sens.toeplitz_sensitivity(self.column, self.horizon, unit, w, max_steps, min_separation)
        if unit == "event":
            return math.sqrt(self.tree.levels)
        count = sens.participation_count(self.horizon, max_steps, min_separation) if unit == "user" else None
        return sens.dense_sensitivity(self.tree.matrix(), unit, w, count)

    def decoder_column(self, output: str) -> np.ndarray:
        """First column of the Toeplitz decoder B = A C^{-1} of ``output``."""
        return _decoder_column(self.strategy, self.horizon, self.band, output)

    def row_norms(self, output: str) -> np.ndarray:
        """``||B_t||_2`` for t = 0..T-1 (per unit noise)."""
        return _row_norms(self.strategy, self.horizon, self.band, output)


@lru_cache(maxsize=64)
def factorization(strategy: str, horizon: int, band: int | None = None) -> Factorization:
    if strategy == "tree":
        return Factorization(strategy, horizon, None, tree=BinaryTree(horizon))
    return Factorization(strategy, horizon, band, column=tz.strategy_column(strategy, horizon, band))


@lru_cache(maxsize=256)
def _decoder_column(strategy: str, horizon: int, band: int | None, output: str) -> np.ndarray:
    fac = factorization(strategy, horizon, band)
    return tz.decoder_column(workload_column(output, horizon), _inverse_column(strategy, horizon, band), horizon)


@lru_cache(maxsize=64)
def _inverse_column(strategy: str, horizon: int, band: int | None) -> np.ndarray:
    return tz.strategy_inverse(strategy, horizon, factorization(strategy, horizon, band).column)


@lru_cache(maxsize=256)
def _row_norms(strategy: str, horizon: int, band: int | None, output: str) -> np.ndarray:
    fac = factorization(strategy, horizon, band)
    if fac.tree is None:
        b = _decoder_column(strategy, horizon, band, output)
        norms = np.sqrt(np.cumsum(b * b))
    else:
        a = workload_column(output, horizon)
        norms = np.sqrt([fac.tree.row_norm_squared(a[t::-1], t) for t in range(horizon)])
    norms.setflags(write=False)
    return norms

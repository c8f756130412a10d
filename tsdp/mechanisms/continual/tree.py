"""The binary-tree mechanism with least-squares decoding, as a factorization A = B C.

Rows of C are the dyadic nodes that fit in the horizon: node (l, q) sums steps
``[q 2^l, (q + 1) 2^l)`` and exists when ``(q + 1) 2^l <= T`` (Dwork, Naor, Pitassi and Rothblum 2010;
Chan, Shi and Song 2011). It is released at its last step, so C is online. Nodes are numbered in
release order (by last step, then level), which makes the nodes of any aligned perfect subtree a
contiguous block of ids, in the same relative order as in a stand-alone tree of that height.

Decoding (Honaker 2015, least squares). At step t the released nodes are those of the perfect
subtrees of the binary decomposition of t + 1 (a forest); they observe disjoint blocks of steps with
independent noise, so the best linear unbiased estimate of any ``w^T x`` is the sum over the forest
of the per-subtree estimates ``w_block^T E_h y_block``, with ``E_h = (C_h^T C_h)^{-1} C_h^T`` the
least-squares leaf estimator of a perfect tree of height h, and its variance (per unit noise) is
``sum w_block^T (C_h^T C_h)^{-1} w_block``. Each step is in one node per level, so the event-level
sensitivity is ``sqrt(levels)`` with ``levels = floor(log2 T) + 1`` (the spec's ``ceil(log2 T) + 1``
counts the level of a root that never completes within T when T is not a power of two).
"""

from __future__ import annotations

from functools import cached_property

import numpy as np

from tsdp.errors import UsageError

MAX_TREE_HORIZON = 4096


class BinaryTree:
    """The dyadic nodes of a horizon, their release order and the least-squares decoders."""

    def __init__(self, horizon: int) -> None:
        if horizon > MAX_TREE_HORIZON:
            raise UsageError(f"the tree strategy supports a horizon of at most {MAX_TREE_HORIZON} steps, got {horizon}; "
                             "use the toeplitz or banded strategy")
        self.horizon = horizon
        self.levels = int(horizon).bit_length()  # levels l with 2^l <= T
        steps = np.arange(horizon)
        # levels released at step t: l with 2^l dividing t + 1 (and 2^l <= T, automatic)
        trailing = np.array([((t + 1) & -(t + 1)).bit_length() for t in range(horizon)])  # = 1 + v2(t + 1)
        self.released_at = trailing  # nodes released at step t: levels 0 .. trailing[t] - 1
        self.first_id = np.concatenate(([0], np.cumsum(trailing)))  # ids of step t: first_id[t] ...
        self.n_nodes = int(self.first_id[-1])

    def nodes(self) -> tuple[np.ndarray, np.ndarray]:
        """(level, first step) of every node, in id order."""
        level = np.concatenate([np.arange(k) for k in self.released_at])
        last = np.repeat(np.arange(self.horizon), self.released_at)
        return level, last + 1 - 2 ** level

    def matrix(self) -> np.ndarray:
        """The dense (nodes x T) 0/1 matrix C."""
        level, first = self.nodes()
        steps = np.arange(self.horizon)
        return ((steps[None, :] >= first[:, None]) & (steps[None, :] < (first + 2 ** level)[:, None])).astype(float)

    @cached_property
    def _perfect(self) -> list[tuple[np.ndarray, np.ndarray]]:
        """(E_h, P_h) for every height h: the least-squares leaf estimator and the inverse Gram."""
        out = []
        for h in range(self.levels):
            C = BinaryTree(2 ** h).matrix()
            P = np.linalg.inv(C.T @ C)
            out.append((P @ C.T, P))
        return out

    def forest(self, t: int) -> list[tuple[int, int]]:
        """(first step, height) of the perfect subtrees released by step t (decomposition of t + 1)."""
        out, start, n = [], 0, t + 1
        for h in range(n.bit_length() - 1, -1, -1):
            if n >> h & 1:
                out.append((start, h))
                start += 2 ** h
        return out

    def decoder_row(self, weights: np.ndarray, t: int) -> np.ndarray:
        """Coefficients over the nodes released by step t (ids 0 .. first_id[t + 1] - 1) of the
        least-squares estimate of ``weights^T x`` (``weights`` over steps 0..t)."""
        parts = [weights[start:start + 2 ** h] @ self._perfect[h][0] for start, h in self.forest(t)]
        return np.concatenate(parts)

    def row_norm_squared(self, weights: np.ndarray, t: int) -> float:
        """``||B_t||^2``: the variance, per unit noise, of the least-squares estimate of ``weights^T x``."""
        total = 0.0
        for start, h in self.forest(t):
            block = weights[start:start + 2 ** h]
            total += float(block @ self._perfect[h][1] @ block)
        return total

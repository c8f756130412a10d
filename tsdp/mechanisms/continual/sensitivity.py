"""L2 sensitivity s(C) of the encoded stream C x, per series, for one unit (in units of M).

Let ``d`` be the change a unit makes to one series (``|d_t| <= M``, supported on the steps the unit
can touch). The encoded release ``C x`` moves by ``C d``, and the sensitivity is the largest
``||C d||_2``. For a non-negative C the Gram matrix ``G = C^T C`` is non-negative, so
``d^T G d <= |d|^T G |d|`` and the worst ``d`` is ``M 1_S`` for a set S of touched steps:

* event: ``s = M max_j ||C e_j||`` (largest column norm);
* w-event: ``s = M max_W ||C 1_W||`` over windows W of w consecutive steps;
* user: ``s = M max_S ||C 1_S||`` over sets S of at most I steps (``min_separation`` b apart).

A unit reaching K series changes each of them this way, and the panel's sensitivity is ``sqrt(K)``
times the per-series one. For a user (K series, at most I steps in each) that is immediate. A
w-event unit picks at most K series per step afresh: with A_s its steps in series s and n_i <= K the
series it touches at step i, ``sum_s 1_{A_s}^T G 1_{A_s} = sum_{i,j in W} G_ij #{s: i, j in A_s}
<= sum_{i,j in W} G_ij min(n_i, n_j) <= K 1_W^T G 1_W`` (G >= 0), so packing its cells into K whole
series is the worst spread for the L2 norm (spreading is the worst for the count of changed values,
:func:`changed_values`).

Toeplitz C with non-negative, non-increasing coefficients: every one of these maxima is exact in
O(T I). Shifting a set S to the left only lengthens the tail of the same vector ``C 1_S``, so W and
S start at step 0; and among sets of at most I steps at least b apart the worst is I steps exactly b
apart (Dvijotham, McMahan, Pillutla, Steinke and Thakurta 2024, "Efficient and near-optimal noise
generation for streaming differential privacy", arXiv:2405.13763, Theorem 2; jax-privacy's
``toeplitz.minsep_sensitivity_squared``).

Any other non-negative C (the binary tree): event and w-event exactly (all columns, all windows);
user level by the upper bound of Choquette-Choo, Ganesh, McKenna, McMahan, Rush, Thakurta and Xu
(2023, "(Amplified) banded matrix factorization", arXiv:2306.08153, Algorithm 4): for each row i of
G take the largest sum of I of its entries, then the largest sum of I of those row maxima. The maximum over sets is
``max_S sum_{i in S} sum_{j in S} G_ij`` and this bound enlarges the space of choices, so it is an
upper bound; it ignores ``min_separation`` (separated sets are a subset of all sets), which can only
make it larger.
"""

from __future__ import annotations

import math

import numpy as np

from tsdp.errors import UsageError


def participation_count(horizon: int, max_steps: int, min_separation: int | None) -> int:
    """The most steps a user can occupy: ``min(I, ceil(T / b))``."""
    sep = min_separation or 1
    return min(max_steps, -(-horizon // sep))


def toeplitz_set_vector(c: np.ndarray, horizon: int, count: int, sep: int) -> np.ndarray:
    """``C 1_S`` for S = {0, sep, 2 sep, ..., (count - 1) sep}, as a length-T vector."""
    c = np.concatenate((c[:horizon], np.zeros(max(0, horizon - c.size))))
    out = np.zeros(horizon)
    for i in range(count):
        start = i * sep
        if start >= horizon:
            break
        out[start:] += c[:horizon - start]
    return out


def toeplitz_sensitivity(c: np.ndarray, horizon: int, unit: str, w: int | None = None,
                         max_steps: int | None = None, min_separation: int | None = None) -> float:
    """Per-series s(C) / M for a lower-triangular Toeplitz C of first column ``c`` (exact; module doc)."""
    _check_monotone(c)
    if unit == "event":
        count, sep = 1, 1
    elif unit == "w-event":
        count, sep = min(w, horizon), 1
    else:
        count, sep = participation_count(horizon, max_steps, min_separation), min_separation or 1
    v = toeplitz_set_vector(c, horizon, count, sep)
    return float(math.sqrt(np.dot(v, v)))


def dense_sensitivity(C: np.ndarray, unit: str, w: int | None = None, max_steps: int | None = None) -> float:
    """Per-series s(C) / M for a non-negative (N x T) C: exact at event and w-event level, the
    Algorithm 4 upper bound at user level (module docstring)."""
    if np.any(C < 0):
        raise ValueError("dense_sensitivity needs a non-negative C")
    horizon = C.shape[1]
    if unit == "event":
        return float(np.sqrt((C * C).sum(axis=0)).max())
    if unit == "w-event":
        w = min(w, horizon)
        prefix = np.concatenate((np.zeros((C.shape[0], 1)), np.cumsum(C, axis=1)), axis=1)
        windows = prefix[:, w:] - prefix[:, :-w]  # column a: C 1_[a, a + w)
        return float(np.sqrt((windows * windows).sum(axis=0)).max())
    k = min(max_steps, horizon)
    gram = C.T @ C
    row_best = -np.sort(-gram, axis=1)[:, :k].sum(axis=1)
    return float(math.sqrt(np.sort(row_best)[::-1][:k].sum()))


def changed_values(support: int, n_rows: int, unit: str, horizon: int, n_series: int, series_per_user: int,
                   w: int | None, max_steps: int | None, min_separation: int | None = None) -> int:
    """m: the noisy values (all series) a unit can change, which the hardened sampler's rounding
    slack counts. A changed step of a series changes at most ``support`` rows of C in that series (the
    band of a Toeplitz C, the levels of the tree) and a series has ``n_rows`` rows. An event changes one
    step; a user ``min(I, ceil(T / b))`` steps in each of its K series; a w-event unit ``K w`` cells in
    K series per step chosen afresh, so in up to ``min(S, K w)`` series: spreading them maximises m
    (while packing them maximises the L2 norm), hence ``min(K w support, min(S, K w) n_rows)``."""
    if unit == "event":
        return int(min(support, n_rows))
    if unit == "user":
        steps = participation_count(horizon, max_steps, min_separation)
        return int(min(series_per_user, n_series) * min(n_rows, steps * support))
    cells = min(series_per_user, n_series) * min(w, horizon)
    return int(min(cells * support, min(n_series, cells) * n_rows))


def _check_monotone(c: np.ndarray) -> None:
    if np.any(c < 0) or np.any(np.diff(c) > 0):
        raise UsageError("the exact Toeplitz sensitivity needs non-negative, non-increasing coefficients")

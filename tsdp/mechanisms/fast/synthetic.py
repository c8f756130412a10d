"""Synthetic stand-ins of spec section 3.5 (for tests and benchmarks; never used by a release)."""

from __future__ import annotations

import numpy as np

SYNTHETIC = ("random_walk", "regime", "seasonal", "constant")


def synthetic(kind: str, rng: np.random.Generator, n_series: int = 1, n_steps: int | None = None,
              **params) -> np.ndarray:
    """``n_series`` independent series (n_series x T) from a generator of spec section 3.5.

    * ``random_walk``: x_0 = c, x_k = max(0, x_{k-1} + N(0, s^2)); c=20000, s=500, T=540.
    * ``regime``: the same walk with s=1500 on steps [20, 100) and s=200 elsewhere (Fig. 4).
    * ``seasonal`` (Flu-like): round(b + A exp(-((k mod 52) - c)^2 / (2 w^2))) + N(0, s^2), clipped
      at 0; b=500, A=5000, c=5, w=6, s=50, T=209.
    * ``constant``: x_k = c; c=20000, T=540.
    """
    if kind in ("random_walk", "regime"):
        n_steps = 540 if n_steps is None else n_steps
        c = params.get("c", 20000.0)
        if kind == "random_walk":
            sd = np.full(n_steps, params.get("s", 500.0))
        else:
            sd = np.full(n_steps, params.get("s_calm", 200.0))
            lo, hi = params.get("volatile", (20, 100))
            sd[lo:hi] = params.get("s_volatile", 1500.0)
        steps = rng.standard_normal((n_steps, n_series)) * sd[:, None]
        x = np.empty((n_steps, n_series))
        x[0] = c
        for k in range(1, n_steps):
            x[k] = np.maximum(0.0, x[k - 1] + steps[k])
        return np.ascontiguousarray(x.T)
    if kind == "seasonal":
        n_steps = 209 if n_steps is None else n_steps
        b, a, c, w, s = (params.get(key, d) for key, d in
                         (("b", 500.0), ("A", 5000.0), ("c", 5.0), ("w", 6.0), ("s", 50.0)))
        k = np.arange(n_steps)
        base = np.round(b + a * np.exp(-(((k % 52) - c) ** 2) / (2 * w * w)))
        return np.maximum(0.0, base[None, :] + s * rng.standard_normal((n_series, n_steps)))
    if kind == "constant":
        n_steps = 540 if n_steps is None else n_steps
        return np.full((n_series, n_steps), float(params.get("c", 20000.0)))
    raise ValueError(f"unknown synthetic series {kind!r}; one of {', '.join(SYNTHETIC)}")

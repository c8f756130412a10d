"""The scalar Kalman filter of FAST (Fan and Xiong 2012), vectorised over independent series.

State-space model (spec section 2.2; equation bodies rebuilt, [R]):

* process model, Eq. 4 [R]:      x_{k+1} = x_k + w_k,   w_k ~ N(0, Q)   (the "constant" model);
* measurement model, Eq. 5 [R]:  z_k = x_k + v_k,       v_k the DP noise (Laplace or Gaussian);
* Gaussian approximation, Eq. 6 [R]: the filter treats v_k as N(0, R).

Prediction (every step, Fig. 3 [R]):  xhat^-_k = xhat_{k-1},   P^-_k = P_{k-1} + Q.
Across g steps without an observation the posterior is carried unchanged, so
P^-_k = P_{k_last} + g Q with g = k - k_last (:func:`predict_variance`).

Correction (sampling points only, Fig. 3 / Eq. 9 [R]):

    K_k = P^-_k / (P^-_k + R),   xhat_k = xhat^-_k + K_k (z_k - xhat^-_k),   P_k = (1 - K_k) P^-_k.

``P_k`` is computed as ``K_k R``, which equals ``(1 - K_k) P^-_k`` exactly in real arithmetic and
keeps its relative accuracy when ``K_k`` is close to 1 (tiny R).

Every function takes numpy arrays (one entry per series) or scalars and works elementwise.
"""

from __future__ import annotations

import numpy as np


def predict_variance(p_post, gap, q: float):
    """P^-_k = P_{k_last} + (k - k_last) Q: the prior variance after ``gap`` >= 1 prediction steps."""
    return p_post + gap * q


def correct(prior, p_prior, z, r: float):
    """Kalman correction (Eq. 9 [R]); returns ``(posterior, posterior variance, gain)``."""
    gain = p_prior / (p_prior + r)
    posterior = prior + gain * (z - prior)
    return posterior, gain * r, gain


def steady_state_prior_variance(q: float, r: float) -> float:
    """P^-_inf = (Q + sqrt(Q^2 + 4 Q R)) / 2: the fixed point of P^- -> P^- R / (P^- + R) + Q,
    reached when every step is observed (spec F-T4)."""
    return float((q + np.sqrt(q * q + 4.0 * q * r)) / 2.0)


def filter_given_pattern(observations, sampled, q: float, r: float, p0: float):
    """FAST's release rule run on ``observations`` (series x steps) at the sampling points ``sampled``
    (series x steps, booleans; step 0 is always a sampling point): ``xhat_0 = z_0``, ``P_0 = P0``; at
    a sampling point k the correction of :func:`correct` with ``P^-_k = P_{k_last} + (k - k_last) Q``;
    elsewhere the last posterior. Returns the released trajectory (series x steps).

    The gains depend on the pattern, Q, R and P0 only, so given the pattern the release is linear
    in the observations: FAST's release of ``x + noise`` is this filter applied to ``x`` plus this
    filter applied to the noise. ``--evaluate`` uses the first term (the noiseless trajectory at the
    released pattern) to split FAST's error into the filter's approximation and the noise.
    """
    z = np.asarray(observations, dtype=np.float64)
    flags = np.asarray(sampled, dtype=bool)
    if z.shape != flags.shape or z.ndim != 2:
        raise ValueError(f"observations {z.shape} and sampled {flags.shape} must be the same (series x steps)")
    if z.shape[1] and not flags[:, 0].all():
        raise ValueError("FAST samples every series at step 0")
    n_series, n_steps = z.shape
    out = np.empty((n_series, n_steps))
    if not n_steps:
        return out
    xhat = z[:, 0].copy()
    p_post = np.full(n_series, float(p0))
    k_last = np.zeros(n_series, dtype=np.int64)
    out[:, 0] = xhat
    for k in range(1, n_steps):
        rows = np.flatnonzero(flags[:, k])
        if rows.size:
            p_prior = predict_variance(p_post[rows], k - k_last[rows], q)
            xhat[rows], p_post[rows], _ = correct(xhat[rows], p_prior, z[rows, k], r)
            k_last[rows] = k
        out[:, k] = xhat
    return out

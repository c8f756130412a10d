"""One LSTM layer over a sequence, with a hand-written backward pass that keeps per-window gradients cheap.

Forward (PyTorch's gate order i, f, g, o; ``pre_t`` = the input projection ``x_t W_x + b``):

    a_t = pre_t + h_{t-1} W_h,  i, f, o = sigmoid(a), g = tanh(a),  c_t = f c_{t-1} + i g,  h_t = o tanh(c_t)

from ``h_{-1} = c_{-1} = 0``. Differentiating ``lax.scan`` directly makes JAX accumulate the gradient of
the loop-invariant ``W_h`` in the loop's carry; under ``vmap`` (per-window gradients for clipping) that
carry is a ``(B, hidden, 4 hidden)`` array read and written at every step. Here the backward scan
carries only ``(dh, dc)`` and emits the gate gradients ``dA_t``; the weight gradient is then one
product ``dW_h = sum_t h_{t-1}^T dA_t`` (a batched matmul under ``vmap``), and ``d pre = dA``.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp


def _forward(pre, w_h):
    hidden = w_h.shape[0]
    zero = jnp.zeros(pre.shape[:-2] + (hidden,), dtype=pre.dtype)

    def step(carry, a_in):
        h, c = carry
        i, f, g, o = jnp.split(a_in + h @ w_h, 4, axis=-1)
        i, f, g, o = jax.nn.sigmoid(i), jax.nn.sigmoid(f), jnp.tanh(g), jax.nn.sigmoid(o)
        c_new = f * c + i * g
        tanh_c = jnp.tanh(c_new)
        h_new = o * tanh_c
        return (h_new, c_new), (h_new, c, i, f, g, o, tanh_c)

    _, (hs, c_prev, i, f, g, o, tanh_c) = jax.lax.scan(step, (zero, zero), pre)
    return hs, (hs, c_prev, i, f, g, o, tanh_c)


@jax.custom_vjp
def lstm_sequence(pre, w_h):
    """Hidden states ``(T, hidden)`` of one layer for input projections ``pre`` ``(T, 4 hidden)``."""
    return _forward(pre, w_h)[0]


def _fwd(pre, w_h):
    hs, residuals = _forward(pre, w_h)
    return hs, (residuals, w_h)


def _bwd(saved, d_hs):
    (hs, c_prev, i, f, g, o, tanh_c), w_h = saved
    hidden = w_h.shape[0]

    def step(carry, inputs):
        dh_next, dc_next = carry
        dh_out, c0, i_t, f_t, g_t, o_t, tc = inputs
        dh = dh_out + dh_next
        do = dh * tc
        dc = dc_next + dh * o_t * (1.0 - tc * tc)
        da = jnp.concatenate([dc * g_t * i_t * (1.0 - i_t), dc * c0 * f_t * (1.0 - f_t), dc * i_t * (1.0 - g_t * g_t),
                              do * o_t * (1.0 - o_t)], axis=-1)
        return (da @ w_h.T, dc * f_t), da

    zero = jnp.zeros(d_hs.shape[:-2] + (hidden,), dtype=d_hs.dtype)
    _, d_a = jax.lax.scan(step, (zero, zero), (d_hs, c_prev, i, f, g, o, tanh_c), reverse=True)
    h_prev = jnp.concatenate([jnp.zeros_like(hs[:1]), hs[:-1]], axis=0)
    return d_a, h_prev.T @ d_a


lstm_sequence.defvjp(_fwd, _bwd)

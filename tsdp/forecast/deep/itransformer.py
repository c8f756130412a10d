"""iTransformer (Liu et al. 2024) as GluonTS builds it, in JAX: the fourth model of Schuchardt et al.
(2025; spec ``schuchardt.md`` section 3.2: d_model 32, 4 heads, feed-forward 128, 2 encoder layers,
dropout 0, ReLU, mean scaling).

"Inverted" tokens: every variate's whole context is one token. A window of L_C values is one
variate (tsdp's series are univariate), scaled by ``s = max(mean |context|, min_scale)`` (public
floor); its token ``[x / s, log s]`` is embedded linearly to d_model, passed through post-norm
Transformer encoder layers (PyTorch ``TransformerEncoderLayer``: ``x = LN(x + MHA(x))``,
``x = LN(x + W2 relu(W1 x))``) and a final LayerNorm, projected to ``L_F`` vectors of size
``d_model / heads`` and mapped to Student-t parameters per step (GluonTS ``ITransformerModel``; its
``log1p |loc|`` input is always 0 with mean scaling and is left out). With one token per window the
attention weights are all 1; the layers are still the paper's. The loss of a window is the mean NLL
over its forecast steps in data units (``nll(y / s) + log s``); forecasts are the Student-t quantiles
(exact) and mean.

Initialisation as PyTorch: linear layers ``U(+-1/sqrt(fan_in))``, the attention input projection
Xavier-uniform with zero bias, the attention output bias zero, LayerNorm weights 1 and biases 0.
"""

from __future__ import annotations

import math

import numpy as np

from tsdp.errors import UsageError
from tsdp.forecast.deep.base import DeepForecastModel, positive_int
from tsdp.forecast.deep.ghost import Taps, factored_grads
from tsdp.forecast import studentt as np_studentt

LAYER_NORM_EPS = 1e-5


class ITransformerModel(DeepForecastModel):
    name = "itransformer"

    def __init__(self, context: int, horizon: int, d_model: int = 32, heads: int = 4, feedforward: int = 128,
                 layers: int = 2, **options):
        self.d_model = positive_int(d_model, "d_model")
        self.heads = positive_int(heads, "heads")
        if self.d_model % self.heads:
            raise UsageError(f"d_model {self.d_model} must be a multiple of heads {self.heads}")
        self.feedforward = positive_int(feedforward, "feedforward")
        self.layers = positive_int(layers, "layers")
        super().__init__(context, horizon, **options)

    def _options(self):
        return {"d_model": self.d_model, "heads": self.heads, "feedforward": self.feedforward, "layers": self.layers}

    def _param_specs(self):
        d, ff, dh, tokens_in = self.d_model, self.feedforward, self.d_model // self.heads, self.context + 1

        def linear(name, fan_in, fan_out):
            bound = 1.0 / math.sqrt(fan_in)
            return [(f"{name}.W", (fan_in, fan_out), ("uniform", bound)), (f"{name}.b", (fan_out,), ("uniform", bound))]

        def norm(name):
            return [(f"{name}.g", (d,), ("const", 1.0)), (f"{name}.b", (d,), ("const", 0.0))]

        specs = linear("embed", tokens_in, d)
        for k in range(1, self.layers + 1):
            specs += [(f"enc{k}.qkv.W", (d, 3 * d), ("uniform", math.sqrt(6.0 / (4 * d)))),
                      (f"enc{k}.qkv.b", (3 * d,), ("const", 0.0)),
                      (f"enc{k}.out.W", (d, d), ("uniform", 1.0 / math.sqrt(d))),
                      (f"enc{k}.out.b", (d,), ("const", 0.0))]
            specs += norm(f"enc{k}.norm1") + linear(f"enc{k}.ff1", d, ff) + linear(f"enc{k}.ff2", ff, d)
            specs += norm(f"enc{k}.norm2")
        return specs + norm("norm") + linear("proj", d, self.horizon * dh) + linear("head", dh, 3)

    # -- the network ---------------------------------------------------------------------------
    @staticmethod
    def _layer_norm(taps, p, name, x):
        import jax.numpy as jnp

        mean = jnp.mean(x, axis=-1, keepdims=True)
        var = jnp.mean(jnp.square(x - mean), axis=-1, keepdims=True)
        return taps.scale(p, name, (x - mean) / jnp.sqrt(var + LAYER_NORM_EPS))

    def _attention(self, taps, p, k, x):
        """Multi-head self-attention over the tokens ``x`` ``(T, d)``."""
        import jax
        import jax.numpy as jnp

        t, d, heads = x.shape[0], self.d_model, self.heads
        q, kk, v = jnp.split(taps.affine(p, f"enc{k}.qkv", x), 3, axis=-1)
        split = lambda a: a.reshape(t, heads, d // heads).transpose(1, 0, 2)  # noqa: E731
        scores = split(q) @ jnp.swapaxes(split(kk), 1, 2) / math.sqrt(d // heads)
        out = jax.nn.softmax(scores, axis=-1) @ split(v)  # (heads, T, d/heads)
        return taps.affine(p, f"enc{k}.out", out.transpose(1, 0, 2).reshape(t, d))

    def _raw(self, p, ctx, taps=None):
        """Raw Student-t outputs ``(L_F, 3)`` and the scale of one window; every weight is applied through
        ``taps`` (:class:`tsdp.forecast.deep.ghost.Taps`, a fresh one when None), which the clipping uses to
        obtain each window's gradient in factored form."""
        import jax
        import jax.numpy as jnp

        taps = Taps() if taps is None else taps
        s = jnp.maximum(jnp.mean(jnp.abs(ctx)), self.min_scale)
        tokens = jnp.concatenate([ctx / s, jnp.log(s)[None]])[None, :]  # one variate: (1, L_C + 1)
        x = taps.affine(p, "embed", tokens)
        for k in range(1, self.layers + 1):
            x = self._layer_norm(taps, p, f"enc{k}.norm1", x + self._attention(taps, p, k, x))
            hidden = jax.nn.relu(taps.affine(p, f"enc{k}.ff1", x))
            x = self._layer_norm(taps, p, f"enc{k}.norm2", x + taps.affine(p, f"enc{k}.ff2", hidden))
        x = self._layer_norm(taps, p, "norm", x)
        steps = taps.affine(p, "proj", x).reshape(self.horizon, self.d_model // self.heads)
        return taps.affine(p, "head", steps), s

    def _tapped_loss(self, p, taps, ctx, tgt, feats):
        import jax.numpy as jnp

        from tsdp.forecast.deep import studentt

        raw, s = self._raw(p, ctx, taps)
        return jnp.mean(studentt.nll(tgt / s, raw)) + jnp.log(s)

    def _window_loss(self, p, ctx, tgt, feats):
        return self._tapped_loss(p, Taps(), ctx, tgt, feats)

    def _clip_pieces(self, p, ctx, tgt, feats):
        """Every weight is applied once per window, on its single token (the head on its L_F steps): the
        weight matrices' per-window gradients stay factored (:func:`tsdp.forecast.deep.ghost.factored_grads`)."""
        return factored_grads(self._tapped_loss, p, [n for n, _ in self.layout], (ctx, tgt, feats))

    def _distribution_fn(self):
        import jax

        from tsdp.forecast.deep import studentt

        def distribution(p, ctx):
            raw, s = jax.vmap(self._raw, in_axes=(None, 0))(p, ctx)
            loc, scale, df = studentt.domain(raw)
            return loc * s[:, None], scale * s[:, None], df

        return jax.jit(distribution)

    def distribution(self, theta, ctx):
        """Student-t forecast ``(loc, scale, df)``, each ``(B, L_F)``, in data units."""
        with self._scope():
            flat, c, _, _, _, n = self._inputs(theta, ctx, None, None)
            out = self._fn("distribution", self._distribution_fn)(self._fn("tree", self._tree_fn)(flat), c)
            return tuple(np.asarray(a, dtype=np.float64)[:n] for a in out)

    def _predict(self, p, ctx, feats, levels, key):
        loc, scale, df = (np.asarray(a, dtype=np.float64) for a in self._fn("distribution", self._distribution_fn)(p, ctx))
        if self.nonnegative:  # the forecast of max(Y, 0)
            return np_studentt.nonnegative_forecast(loc, scale, df, levels)
        return loc, np_studentt.quantiles(loc, scale, df, levels)

"""DeepAR (Salinas et al. 2020) as GluonTS builds it, in JAX: the best private forecaster of
Schuchardt et al. (2025; spec ``schuchardt.md`` section 3.2, ``deep.md``).

A window is ``R = L + max(lags) - 1`` past values followed by ``H`` forecast values (``L`` = the
unrolled context length, GluonTS ``context_length``; ``R`` is GluonTS's ``past_length`` after its
``lag - 1`` shift and the receptive field the accountant is given as L_C). Write ``z_0 .. z_{R+H-1}``
for the window and ``s = max(mean |z_{R-L} .. z_{R-1}|, min_scale)`` for its mean scale over the
context (GluonTS ``MeanScaler``; the floor is public). The network is unrolled over the positions
``t = R - L + 1 .. R + H - 1`` (teacher forcing); at position t its input is

    [z_{t-l} / s for l in lags] ++ time features of t ++ [log s]

fed through ``layers`` LSTM layers (PyTorch's gate equations, one bias per layer) of ``hidden`` units
and a linear map to the parameters of the output distribution (``distribution``: Student-t of
``z_t / s`` by default, or, for counts, negative binomial or Poisson of ``z_t`` with the scale in
the parameters; :mod:`tsdp.forecast.deep.distributions`). The loss of a window is GluonTS's
training loss: the mean over all unrolled positions (context and forecast) of the NLL of ``z_t`` in
data units (Student-t: ``nll(z_t / s) + log s``). Dropout is 0, as in the paper (GluonTS: 0.1).

Forecasts: the context positions are unrolled with the observed values, then ``num_samples`` sample
paths continue for H steps, each step's draw feeding the later steps' lags (GluonTS
``DeepARModel.forward``); the forecast is their mean and empirical quantiles. A count head draws
non-negative integers; ``nonnegative=True`` clips the Student-t paths at 0 (the forecast of
``max(Y, 0)``, post-processing).

Defaults: 2 layers, hidden 40 (GluonTS and the paper); lags 1..7 here (the CLI derives GluonTS's
default set from the grid step, :func:`tsdp.forecast.timefeatures.default_lags`); no time features
unless given (the CLI passes GluonTS's for the step, :mod:`tsdp.forecast.timefeatures`).
"""

from __future__ import annotations

import numpy as np

from tsdp.errors import UsageError
from tsdp.forecast.deep.base import DeepForecastModel, positive_int
from tsdp.forecast.timefeatures import FEATURES


class DeepARModel(DeepForecastModel):
    name = "deepar"

    def __init__(self, context: int, horizon: int, lags=(1, 2, 3, 4, 5, 6, 7), hidden: int = 40, layers: int = 2,
                 time_features=(), distribution: str = "studentt", **options):
        from tsdp.forecast.deep.distributions import head

        self.distribution = distribution
        self._head = head(distribution)
        if isinstance(lags, (int, np.integer)) or not hasattr(lags, "__iter__"):
            raise UsageError(f"lags must be a list of positive integers, got {lags!r}")
        lags = tuple(sorted({positive_int(lag, "lags") for lag in lags}))
        if not lags:
            raise UsageError("lags must not be empty")
        self.lags = lags
        self.hidden = positive_int(hidden, "hidden")
        self.layers = positive_int(layers, "layers")
        if isinstance(time_features, str):
            time_features = (time_features,)
        unknown = [f for f in time_features if f not in FEATURES]
        if unknown:
            raise UsageError(f"unknown time feature {unknown[0]!r}; known: {', '.join(FEATURES)}")
        self.time_features = tuple(time_features)
        super().__init__(context, horizon, **options)
        r, h = self.receptive_field, self.horizon
        self._positions = np.arange(r - self.context + 1, r + h)  # unrolled positions t
        self._lag_index = self._positions[:, None] - np.asarray(self.lags)[None, :]
        self._n_inputs = len(self.lags) + len(self.time_features) + 1

    @property
    def receptive_field(self) -> int:
        return self.context + max(self.lags) - 1

    def _options(self):
        return {"lags": list(self.lags), "hidden": self.hidden, "layers": self.layers,
                "time_features": list(self.time_features), "distribution": self.distribution}

    def _param_specs(self):
        bound = 1.0 / np.sqrt(self.hidden)  # PyTorch nn.LSTM and nn.Linear(hidden, .) initialisation
        n_in = len(self.lags) + len(self.time_features) + 1
        specs = []
        for k in range(1, self.layers + 1):
            width = (n_in if k == 1 else self.hidden) + self.hidden
            specs += [(f"lstm{k}.W", (width, 4 * self.hidden), ("uniform", bound)),
                      (f"lstm{k}.b", (4 * self.hidden,), ("uniform", bound))]
        args = self._head.args
        return specs + [("head.W", (self.hidden, args), ("uniform", bound)), ("head.b", (args,), ("uniform", bound))]

    # -- the network ---------------------------------------------------------------------------
    @staticmethod
    def _cell(gates, c):
        import jax
        import jax.numpy as jnp

        i, f, g, o = jnp.split(gates, 4, axis=-1)
        c = jax.nn.sigmoid(f) * c + jax.nn.sigmoid(i) * jnp.tanh(g)
        return jax.nn.sigmoid(o) * jnp.tanh(c), c

    def _unroll(self, p, x):
        """The LSTM over one window's inputs ``x`` ``(n, inputs)``: the last layer's hidden states
        ``(n, hidden)`` and every layer's final (h, c)."""
        import jax
        import jax.numpy as jnp

        states = []
        for k in range(1, self.layers + 1):
            w, b = p[f"lstm{k}.W"], p[f"lstm{k}.b"]
            n_in = x.shape[-1]
            pre = x @ w[:n_in] + b  # input projections of all positions at once
            w_h = w[n_in:]

            def step(carry, g_in, w_h=w_h):
                h, c = self._cell(g_in + carry[0] @ w_h, carry[1])
                return (h, c), h

            zero = jnp.zeros((self.hidden,), dtype=x.dtype)
            final, x = jax.lax.scan(step, (zero, zero), pre)
            states.append(final)
        return x, states

    def _unroll_batch(self, p, x, perturb):
        """The LSTM over a batch, time-major: inputs ``x`` ``(n, B, inputs)`` -> the last layer's hidden
        states ``(n, B, hidden)`` and, per layer, its inputs ``(n, B, width_k)`` and previous hidden states
        ``h_{t-1}`` ``(n, B, hidden)`` (zero at the first position). Each layer's input projection is one
        matrix product over all positions and windows before its recurrence; ``perturb`` (one
        ``(n, B, 4 hidden)`` array per layer) is added to the gate pre-activations (see :meth:`_backprop`)."""
        import jax
        import jax.numpy as jnp

        inputs, previous = [], []
        for k in range(1, self.layers + 1):
            w, b = p[f"lstm{k}.W"], p[f"lstm{k}.b"]
            n_in = x.shape[-1]
            pre = x @ w[:n_in] + b + perturb[k - 1]
            w_h = w[n_in:]

            def step(carry, g_in, w_h=w_h):
                h, c = self._cell(g_in + carry[0] @ w_h, carry[1])
                return (h, c), h

            zero = jnp.zeros(x.shape[1:2] + (self.hidden,), dtype=x.dtype)
            _, hs = jax.lax.scan(step, (zero, zero), pre)
            inputs.append(x)
            previous.append(jnp.concatenate([zero[None], hs[:-1]]))
            x = hs
        return x, inputs, previous

    def _step(self, p, x, states):
        """One position for a batch: inputs ``(N, inputs)``, per-layer (h, c) ``(N, hidden)``."""
        new = []
        for k in range(1, self.layers + 1):
            w, b = p[f"lstm{k}.W"], p[f"lstm{k}.b"]
            n_in = x.shape[-1]
            h, c = self._cell(x @ w[:n_in] + states[k - 1][0] @ w[n_in:] + b, states[k - 1][1])
            new.append((h, c))
            x = h
        return x, new

    def _scale(self, past):
        import jax.numpy as jnp

        return jnp.maximum(jnp.mean(jnp.abs(past[..., -self.context:]), axis=-1), self.min_scale)

    def _inputs_of(self, ctx, tgt, feats):
        """One window's network inputs ``(n, inputs)``, scaled targets ``z_t / s`` ``(n,)`` and ``log s``."""
        import jax.numpy as jnp

        s = self._scale(ctx)
        z = jnp.concatenate([ctx, tgt]) / s
        log_s = jnp.log(s)
        x = jnp.concatenate([z[self._lag_index], feats[self._positions],
                             jnp.full((self._positions.size, 1), log_s, dtype=z.dtype)], axis=-1)
        return x, z[self._positions], log_s

    def _nll(self, p, hs, y, log_s):
        import jax.numpy as jnp

        return jnp.mean(self._head.nll(y, hs @ p["head.W"] + p["head.b"], log_s))

    def _window_loss(self, p, ctx, tgt, feats):
        x, y, log_s = self._inputs_of(ctx, tgt, feats)
        return self._nll(p, self._unroll(p, x)[0], y, log_s)

    def _backprop(self, p, ctx, tgt, feats, weights=None):
        """Losses and gradients of a padded batch of windows by JAX's autodiff, arranged so that every weight
        gradient is one matrix product after the recurrence.

        A zero perturbation ``e_t`` is added to each layer's gate pre-activations
        ``a_t = x_t W_x + b + e_t + h_{t-1} W_h``, and JAX's reverse mode (``jax.vjp`` of the batched LSTM with
        the weights held fixed) gives ``dL/de_t = dL/da_t`` for every window and position. The windows do not
        interact, so these are each window's own derivatives, and since the layer's weights enter ``a_t`` only
        through those products, a window's gradient of ``W = [W_x; W_h]`` is
        ``sum_t [x_t, h_{t-1}]^T dL/da_t`` and of ``b`` ``sum_t dL/da_t`` (the per-sample gradient of a linear
        layer, as Opacus's hooks compute it). The head's gradients and ``dL/dh_t`` are JAX's ``value_and_grad``
        of :meth:`_nll` per window. Nothing is accumulated inside the loops, and the recurrence runs once for
        the whole batch. Tests check the result against ``jax.grad`` of :meth:`_window_loss`.

        ``weights`` None: per-window losses ``(B,)`` and gradients (leaves with a leading batch axis); else
        ``sum_i weights_i loss_i`` and its gradient (padding has weight 0 and is masked)."""
        import jax
        import jax.numpy as jnp

        x, y, log_s = jax.vmap(self._inputs_of)(ctx, tgt, feats)  # (B, n, inputs), (B, n), (B,)
        x = jnp.swapaxes(x, 0, 1)
        n, batch = x.shape[:2]
        zeros = [jnp.zeros((n, batch, 4 * self.hidden), dtype=x.dtype)] * self.layers

        def lstm(perturb):
            last, inputs, previous = self._unroll_batch(p, x, perturb)
            return last, (inputs, previous)

        hs, backward, (inputs, previous) = jax.vjp(lstm, zeros, has_aux=True)
        head = {name: value for name, value in p.items() if name.startswith("head.")}
        values, (g_head, d_hs) = jax.vmap(jax.value_and_grad(self._nll, argnums=(0, 1)),
                                          in_axes=(None, 1, 0, 0))(head, hs, y, log_s)
        if weights is not None:
            real = weights > 0

            def weighted(a):  # weights_i a_i, padding's entries masked (they could be NaN)
                shape = (-1,) + (1,) * (a.ndim - 1)
                return jnp.where(real.reshape(shape), a * weights.reshape(shape), 0.0)

            values = jnp.sum(weighted(values))
            g_head = {name: jnp.sum(weighted(g), axis=0) for name, g in g_head.items()}
            d_hs = weighted(d_hs)
        (d_gates,) = backward(jnp.swapaxes(d_hs, 0, 1))
        grads = dict(g_head)
        for k in range(1, self.layers + 1):
            fed = jnp.concatenate([inputs[k - 1], previous[k - 1]], axis=-1)  # (n, B, width)
            d = d_gates[k - 1]  # (n, B, 4 hidden)
            if weights is None:  # window-major operands: XLA's batched products and sums are fast that way round
                d = jnp.swapaxes(d, 0, 1)
                grads[f"lstm{k}.W"] = jnp.einsum("bti,btj->bij", jnp.swapaxes(fed, 0, 1), d)
                grads[f"lstm{k}.b"] = jnp.sum(d, axis=1)
            else:
                grads[f"lstm{k}.W"] = fed.reshape(n * batch, -1).T @ d.reshape(n * batch, -1)
                grads[f"lstm{k}.b"] = jnp.sum(d, axis=(0, 1))
        return values, grads

    def _window_grads(self, p, ctx, tgt, feats):
        return self._backprop(p, ctx, tgt, feats)

    def _weighted_value_and_grad(self, p, ctx, tgt, feats, weights):
        return self._backprop(p, ctx, tgt, feats, weights)

    # -- forecasting ---------------------------------------------------------------------------
    def _sampler(self):
        import jax
        import jax.numpy as jnp

        r, h, m = self.receptive_field, self.horizon, max(self.lags)
        lags = np.asarray(self.lags)
        warm = self._positions[self._positions < r]  # teacher-forced context positions
        warm_lags = self._lag_index[: warm.size]
        n_paths = self.num_samples

        def encode(p, ctx, feats):  # one window: states after the context
            s = self._scale(ctx)
            z = ctx / s
            log_s = jnp.log(s)
            x = jnp.concatenate([z[warm_lags], feats[warm], jnp.full((warm.size, 1), log_s, dtype=z.dtype)], axis=-1)
            _, states = self._unroll(p, x)
            return states, s, z[r - m:]

        def sample(p, ctx, feats, key):
            states, s, history = jax.vmap(encode, in_axes=(None, 0, 0))(p, ctx, feats)
            batch = ctx.shape[0]
            tile = lambda a: jnp.repeat(a, n_paths, axis=0)  # noqa: E731  (B, .) -> (B S, .)
            states = [(tile(hh), tile(cc)) for hh, cc in states]
            history = tile(history)  # (B S, m): z_{t-m} .. z_{t-1}
            scale = tile(s)
            log_s = jnp.log(scale)[:, None]
            future = jnp.swapaxes(tile(feats[:, r:]), 0, 1)  # (H, B S, F)

            def step(carry, inputs):
                states, history = carry
                feat, k = inputs
                x = jnp.concatenate([history[:, m - lags], feat, log_s], axis=-1)
                out, states = self._step(p, x, states)
                draw = self._head.sample(k, out @ p["head.W"] + p["head.b"], scale)
                return (states, jnp.concatenate([history[:, 1:], draw[:, None]], axis=1)), draw

            _, draws = jax.lax.scan(step, (states, history), (future, jax.random.split(key, h)))
            return jnp.swapaxes(draws, 0, 1).reshape(batch, n_paths, h) * s[:, None, None]

        return jax.jit(sample)

    def _predict(self, p, ctx, feats, levels, key):
        paths = self._clipped(np.asarray(self._fn("sampler", self._sampler)(p, ctx, feats, key), dtype=np.float64))
        quantiles = np.moveaxis(np.quantile(paths, levels, axis=1), 0, -1)
        return paths.mean(axis=1), quantiles

    def sample_paths(self, theta, ctx, feats=None, rng: np.random.Generator | None = None) -> np.ndarray:
        """``num_samples`` forecast sample paths per window, ``(B, num_samples, L_F)``, in data units."""
        import jax

        seed = self._seed(rng)
        with self._scope():
            flat, c, _, f, _, n = self._inputs(theta, ctx, None, feats)
            tree = self._fn("tree", self._tree_fn)(flat)
            paths = self._fn("sampler", self._sampler)(tree, c, f, jax.random.key(seed))
            return self._clipped(np.asarray(paths, dtype=np.float64)[:n])

    def _clipped(self, paths: np.ndarray) -> np.ndarray:
        """Paths of ``max(Y, 0)`` with ``nonnegative`` (count heads' draws are >= 0 already)."""
        return np.maximum(paths, 0.0) if self.nonnegative else paths

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

    def _unroll(self, p, x, perturb=None, frozen: bool = False):
        """The LSTM over one window's inputs ``x`` ``(n, inputs)``: the last layer's hidden states
        ``(n, hidden)``, every layer's final (h, c), and every layer's previous hidden states
        ``h_{t-1}`` ``(n, hidden)`` (zero at the first position).

        ``perturb`` (one ``(n, 4 hidden)`` array per layer) is added to the gate pre-activations and
        ``frozen`` stops the gradient of the recurrent weights: see :meth:`_window_value_and_grad`."""
        import jax
        import jax.numpy as jnp

        states, previous = [], []
        for k in range(1, self.layers + 1):
            w, b = p[f"lstm{k}.W"], p[f"lstm{k}.b"]
            n_in = x.shape[-1]
            pre = x @ w[:n_in] + b  # input projections of all positions at once
            if perturb is not None:
                pre = pre + perturb[k - 1]
            w_h = jax.lax.stop_gradient(w[n_in:]) if frozen else w[n_in:]

            def step(carry, g_in, w_h=w_h):
                h, c = self._cell(g_in + carry[0] @ w_h, carry[1])
                return (h, c), h

            zero = jnp.zeros((self.hidden,), dtype=x.dtype)
            final, x = jax.lax.scan(step, (zero, zero), pre)
            states.append(final)
            previous.append(jnp.concatenate([zero[None], x[:-1]]))
        return x, states, previous

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

    def _window_value_and_grad(self, p, ctx, tgt, feats):
        """The loss of one window and its gradient, by JAX's autodiff, arranged to be cheap under ``vmap``.

        Differentiated directly, ``lax.scan`` accumulates the gradient of the loop-invariant recurrent
        weights ``W_h`` in the backward loop's carry: under ``vmap`` (per-window gradients) a
        ``(B, hidden, 4 hidden)`` array read and written at every position. Instead, ``W_h`` enters
        the scan through ``stop_gradient`` and a zero perturbation ``e_t`` is added to each layer's
        gate pre-activations ``a_t = x_t W_x + b + e_t + h_{t-1} W_h``; JAX's backward pass then gives
        ``dL/de_t = dL/da_t`` and, since ``W_h`` enters ``a_t`` only through that product, its
        gradient is ``sum_t h_{t-1}^T dL/da_t`` (the per-sample gradient of a linear layer, as
        Opacus' hooks compute it): one batched product after the loop. Every other gradient is
        JAX's own; tests check the whole against ``jax.grad`` of :meth:`_window_loss`.
        """
        import jax
        import jax.numpy as jnp

        x, y, log_s = self._inputs_of(ctx, tgt, feats)

        def loss(p, perturb):
            hs, _, previous = self._unroll(p, x, perturb, frozen=True)
            return self._nll(p, hs, y, log_s), previous

        zeros = [jnp.zeros((x.shape[0], 4 * self.hidden), dtype=x.dtype)] * self.layers
        (value, previous), (grad, d_gates) = jax.value_and_grad(loss, argnums=(0, 1), has_aux=True)(p, zeros)
        grad = dict(grad)
        for k in range(1, self.layers + 1):
            w = grad[f"lstm{k}.W"]
            n_in = w.shape[0] - self.hidden  # rows n_in: are W_h, whose gradient was stopped
            grad[f"lstm{k}.W"] = jnp.concatenate([w[:n_in], previous[k - 1].T @ d_gates[k - 1]])
        return value, grad

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
            _, states, _ = self._unroll(p, x)
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

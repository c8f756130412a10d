"""The trainer contract for JAX models: flat float64 weights on the host, per-window clipped gradients
on the device.

:class:`DeepForecastModel` offers the methods :func:`tsdp.forecast.trainer.train` calls on the numpy
models (``init``, ``loss``, ``clipped_grad_sum``, ``mean_grad``, ``predict_quantiles``, ``forecast``,
``unflatten``, ``layout``, ``config``), so batches come from tsdp's window samplers, the noise from
:mod:`tsdp.mechanisms.noise` (added by the trainer on the host) and epsilon from tsdp's structured-
subsampling accountant, exactly as for the numpy models. A subclass writes its loss for ONE window as
a function of a pytree of parameters (a dict of arrays); this class

* computes per-window gradients by JAX's autodiff (``vmap`` of ``value_and_grad``, a subclass's cheaper
  autodiff formulation of the same gradient, or factored "ghost" pieces for weights applied once per
  window), clips each to L2 norm C and sums them (:mod:`tsdp.forecast.deep.ghost`: the pieces and their
  squares on the device, the clipping factors and the sum in float64 on the host; non-finite entries are
  zeroed before clipping, and the clip is narrowed by a margin that provably covers the device's rounding,
  so every window contributes at most C whatever happens numerically);
* pads every batch to a fixed size with zero windows (weight 0 in the non-private mean, left out of the
  clipped sum), so Poisson batches of varying size reuse the compiled function:
  the padded size only grows, in steps of a quarter octave;
* computes in float32 by default (``dtype="float64"`` for checks); the host keeps the weights and Adam
  in float64 and sends float32 copies;
* runs XLA:CPU inline with glibc keeping freed temporaries (:mod:`tsdp.forecast.deep.runtime`), so a
  step does not fault its ~100 MB of temporaries in afresh.

``theta`` is the flat concatenation of the parameter tensors in ``layout`` order (what
:mod:`tsdp.forecast.persist` saves). Initial weights are drawn on the host from the caller's numpy
generator (PyTorch's default initialisations, named per tensor by the subclass). ``jax.random`` is
used only for forecast sample paths, keyed from the host generator (or a fixed key when none is given).
"""

from __future__ import annotations

import contextlib
import json
import math
from abc import ABC, abstractmethod

import numpy as np

from tsdp.errors import UsageError
from tsdp.forecast.deep import ghost, runtime
from tsdp.forecast.params import FlatParameters, positive_finite, positive_int

DTYPES = ("float32", "float64")
DEVICES = ("auto", "cpu", "gpu")
DEFAULT_NUM_SAMPLES = 100
DEFAULT_FORECAST_SEED = 0  # forecast sample paths without a generator: reproducible
_COMPILED: dict = {}  # (class, configuration, function) -> jitted function


def resolve_device(choice: str):
    """The JAX device for ``choice``: ``gpu`` (UsageError when JAX sees none), ``cpu``, or ``auto``
    (the first GPU if JAX sees one, else the CPU)."""
    import jax

    runtime.configure()  # before JAX creates its CPU client
    if choice not in DEVICES:
        raise UsageError(f"--device must be one of {', '.join(DEVICES)}, got {choice!r}")
    if choice == "cpu":
        return jax.devices("cpu")[0]
    try:
        gpus = jax.devices("gpu")
    except RuntimeError:
        gpus = []
    if choice == "gpu" and not gpus:
        raise UsageError("--device gpu: JAX sees no GPU (install jax with CUDA support, e.g. 'jax[cuda12]'); "
                         "use --device cpu or auto")
    return gpus[0] if gpus else jax.devices("cpu")[0]


def bucket(n: int) -> int:
    """Padded batch size for ``n`` windows: at least 8, rounded up to a quarter of its octave."""
    if n <= 8:
        return 8
    grain = 2 ** max(0, int(math.floor(math.log2(n))) - 2)
    return -(-n // grain) * grain


class DeepForecastModel(FlatParameters, ABC):
    """Base class of the JAX forecasters (see the module docstring)."""

    name = ""
    time_features: tuple[str, ...] = ()

    def __init__(self, context: int, horizon: int, *, min_scale: float = 1e-3, dtype: str = "float32",
                 num_samples: int = DEFAULT_NUM_SAMPLES, device: str = "auto", nonnegative: bool = False):
        if not isinstance(nonnegative, (bool, np.bool_)):
            raise UsageError(f"nonnegative must be true or false, got {nonnegative!r}")
        self.nonnegative = bool(nonnegative)  # forecasts of max(Y, 0) (post-processing)
        self.context = positive_int(context, "context")
        self.horizon = positive_int(horizon, "horizon")
        self.min_scale = positive_finite(min_scale, "min_scale")
        if dtype not in DTYPES:
            raise UsageError(f"--dtype must be one of {', '.join(DTYPES)}, got {dtype!r}")
        self.dtype = dtype
        self.num_samples = positive_int(num_samples, "--num-samples")
        if device not in DEVICES:
            raise UsageError(f"--device must be one of {', '.join(DEVICES)}, got {device!r}")
        self.device_choice = device
        self._device = None
        specs = self._param_specs()
        self._set_layout([(n, s) for n, s, _ in specs])
        self._init = {n: i for n, _, i in specs}
        self._fns: dict = {}
        self._train_capacity = 0

    # -- provided by each model ----------------------------------------------------------------
    @abstractmethod
    def _param_specs(self) -> list[tuple[str, tuple[int, ...], tuple[str, float]]]:
        """(name, shape, init) per tensor; init is ("uniform", bound) or ("const", value)."""

    @abstractmethod
    def _options(self) -> dict:
        """Model-specific options recorded by config()."""

    @abstractmethod
    def _window_loss(self, p, ctx, tgt, feats):
        """Loss of ONE window (a JAX scalar): ctx (R,), tgt (L_F,), feats (R + L_F, F)."""

    @abstractmethod
    def _predict(self, p, ctx, feats, levels, key) -> tuple[np.ndarray, np.ndarray]:
        """(mean (B, L_F), quantiles (B, L_F, K)) in data units for a padded batch."""

    @property
    def receptive_field(self) -> int:
        """L_C for the window sampler and the accountant: every input value a window's loss reads."""
        return self.context

    # -- parameters ----------------------------------------------------------------------------
    def config(self) -> dict:
        return {"name": self.name, "context": self.context, "horizon": self.horizon, **self._options(),
                "min_scale": self.min_scale, "dtype": self.dtype, "num_samples": self.num_samples,
                **({"nonnegative": True} if self.nonnegative else {})}

    def init(self, rng: np.random.Generator) -> np.ndarray:
        """Initial weights drawn on the host, tensor by tensor in ``layout`` order."""
        theta = np.empty(self.n_params)
        for n, (sl, _) in self._slices.items():
            kind, value = self._init[n]
            size = sl.stop - sl.start
            theta[sl] = rng.uniform(-value, value, size=size) if kind == "uniform" else value
        return theta

    @property
    def device(self):
        if self._device is None:
            self._device = resolve_device(self.device_choice)
        return self._device

    def _scope(self):
        import jax

        stack = contextlib.ExitStack()
        enable_x64 = getattr(jax, "enable_x64", None)
        if enable_x64 is None:  # jax < 0.8 has it in jax.experimental
            from jax.experimental import enable_x64
        stack.enter_context(enable_x64(self.dtype == "float64"))
        stack.enter_context(jax.default_device(self.device))
        return stack

    def _tree(self, flat):
        """The parameter pytree from a flat device vector (inside jit)."""
        return {n: flat[sl].reshape(shape) for n, (sl, shape) in self._slices.items()}

    def _ravel(self, tree):
        import jax.numpy as jnp

        return jnp.concatenate([tree[n].reshape(-1) for n, _ in self.layout])

    # -- batches -------------------------------------------------------------------------------
    def _put(self, array):
        import jax

        return jax.device_put(np.asarray(array, dtype=self.dtype), self.device).block_until_ready()

    def _inputs(self, theta, ctx, tgt, feats, training: bool = False):
        ctx = np.asarray(ctx, dtype=np.float64)
        width = self.receptive_field
        if ctx.ndim != 2 or ctx.shape[1] != width:
            raise ValueError(f"context windows must have shape (B, {width}), got {ctx.shape}")
        n = ctx.shape[0]
        if tgt is not None:
            tgt = np.asarray(tgt, dtype=np.float64)
            if tgt.shape != (n, self.horizon):
                raise ValueError(f"targets must have shape ({n}, {self.horizon}), got {tgt.shape}")
        n_feat = len(self.time_features)
        if n_feat and feats is None:
            raise ValueError(f"model {self.name!r} needs its time features {list(self.time_features)}")
        feats = np.zeros((n, width + self.horizon, 0)) if feats is None or not n_feat else np.asarray(feats)
        if feats.shape != (n, width + self.horizon, n_feat):
            raise ValueError(f"time features must have shape ({n}, {width + self.horizon}, {n_feat}), "
                             f"got {feats.shape}")
        size = bucket(n)
        if training:  # the training batch shape only grows: one compilation per size
            size = self._train_capacity if n <= self._train_capacity else size
            self._train_capacity = size
        pad = size - n

        def padded(a):
            return np.concatenate([a, np.zeros((pad,) + a.shape[1:])]) if pad else a

        mask = np.arange(size) >= n
        return (self._put(theta), self._put(padded(ctx)), None if tgt is None else self._put(padded(tgt)),
                self._put(padded(feats)), self._put_mask(mask), n)

    def _put_mask(self, mask):
        import jax

        return jax.device_put(mask, self.device).block_until_ready()

    # -- compiled functions --------------------------------------------------------------------
    def _fn(self, key, build):
        """The compiled function ``key``, shared by every model of the same class and configuration
        (the functions read nothing else of ``self``), so rebuilding a model does not recompile."""
        if key not in self._fns:
            shared = (type(self), json.dumps(self.config(), sort_keys=True), key)
            if shared not in _COMPILED:
                _COMPILED[shared] = build()
            self._fns[key] = _COMPILED[shared]
        return self._fns[key]

    def _losses_fn(self):
        import jax

        def losses(flat, ctx, tgt, feats):
            return jax.vmap(self._window_loss, in_axes=(None, 0, 0, 0))(self._tree(flat), ctx, tgt, feats)

        return jax.jit(losses)

    def _window_value_and_grad(self, p, ctx, tgt, feats):
        """Loss of ONE window and its gradient pytree: JAX's ``value_and_grad`` of :meth:`_window_loss`."""
        import jax

        return jax.value_and_grad(self._window_loss)(p, ctx, tgt, feats)

    def _window_grads(self, p, ctx, tgt, feats):
        """Per-window losses ``(B,)`` and per-window gradients (a pytree whose leaves have a leading batch
        axis) of a padded batch: ``vmap`` of :meth:`_window_value_and_grad`. A subclass may override it with
        a batched formulation of the same gradients (DeepAR does; tests check it against ``jax.grad`` of
        :meth:`_window_loss`)."""
        import jax

        return jax.vmap(self._window_value_and_grad, in_axes=(None, 0, 0, 0))(p, ctx, tgt, feats)

    def _weighted_value_and_grad(self, p, ctx, tgt, feats, weights):
        """``sum_i weights_i loss_i`` over a padded batch and its gradient pytree (padding has weight 0 and
        its losses are masked, so they cannot turn the sum into NaN). A subclass may override it with a
        cheaper formulation of the same gradient (DeepAR does)."""
        import jax
        import jax.numpy as jnp

        def total(p):
            losses = jax.vmap(self._window_loss, in_axes=(None, 0, 0, 0))(p, ctx, tgt, feats)
            return jnp.sum(jnp.where(weights > 0, losses, 0.0) * weights)

        return jax.value_and_grad(total)(p)

    def _clip_pieces(self, p, ctx, tgt, feats):
        """Per-window losses ``(B,)`` and the gradient pieces ``(outer, dense)`` that
        :func:`tsdp.forecast.deep.ghost.clipped_sum` clips and sums: here every tensor's per-window gradient
        (:meth:`_window_grads`) as a dense piece. A subclass may return factored pieces instead (iTransformer
        does, :func:`tsdp.forecast.deep.ghost.factored_grads`)."""
        values, grads = self._window_grads(p, ctx, tgt, feats)
        return values, {}, grads

    def _clipped_fn(self):
        """The device's part of the clipping, compiled: ``(losses, squares, packed, wide)``
        (:func:`tsdp.forecast.deep.ghost.pack`), and where the packed array holds each piece."""
        import jax

        def split(flat, ctx, tgt, feats):
            values, outer, dense = self._clip_pieces(self._tree(flat), ctx, tgt, feats)
            return values, outer, dense

        def pieces(flat, ctx, tgt, feats):
            values, outer, dense = split(flat, ctx, tgt, feats)
            size = ctx.shape[0]
            return (values, ghost.squares(outer, dense, size)) + ghost.pack(outer, dense, size)

        width, n_feat = self.receptive_field, len(self.time_features)
        one = [jax.ShapeDtypeStruct(shape, self.dtype) for shape in
               ((self.n_params,), (1, width), (1, self.horizon), (1, width + self.horizon, n_feat))]
        _, outer, dense = jax.eval_shape(split, *one)
        return jax.jit(pieces), ghost.packing(outer, dense)

    def _per_example_fn(self):
        import jax

        def grads(flat, ctx, tgt, feats):
            values, g = self._window_grads(self._tree(flat), ctx, tgt, feats)
            return values, jax.vmap(self._ravel)(g)

        return jax.jit(grads)

    def _mean_grad_fn(self):
        import jax
        import jax.numpy as jnp

        def mean_grad(flat, ctx, tgt, feats, padding):
            real = jnp.logical_not(padding)
            weights = real / jnp.sum(real)
            value, grad = self._weighted_value_and_grad(self._tree(flat), ctx, tgt, feats, weights.astype(ctx.dtype))
            return value, self._ravel(grad)

        return jax.jit(mean_grad)

    # -- the trainer contract ------------------------------------------------------------------
    def loss(self, theta, ctx, tgt, feats=None) -> np.ndarray:
        """Per-window loss ``(B,)`` (the mean NLL over the window's predicted steps, in data units)."""
        with self._scope():
            flat, c, t, f, _, n = self._inputs(theta, ctx, tgt, feats)
            out = self._fn("losses", self._losses_fn)(flat, c, t, f)
            return np.asarray(out, dtype=np.float64)[:n]

    def clipped_grad_sum(self, theta, ctx, tgt, clip: float, feats=None):
        """Losses ``(B,)``, ``sum_i g_i / max(1, ||g_i|| / C')`` ``(n_params,)`` and the norms ``||g_i||``
        ``(B,)`` (non-finite entries counted as 0, as the clipping does), ``C' = clip (1 - m)``: the per-window
        gradient pieces and their squares computed in the model's precision on a padded batch, the norms,
        clipping factors and sum in float64 on the host (:mod:`tsdp.forecast.deep.ghost` proves every
        contribution at most ``clip`` with the margin m = :func:`~tsdp.forecast.deep.ghost.clip_margin`;
        :mod:`tsdp.accounting.dpsgd_lattice` bounds the sum's error)."""
        clip = float(clip)
        if not (math.isfinite(clip) and clip > 0.0):
            raise UsageError(f"clip norm must be a positive finite number, got {clip!r}")
        least = ghost.min_clip(self.n_params, self.dtype)
        if clip < least:
            raise UsageError(f"--clip-norm {clip:g} is below {least:.3g}, the least the {self.dtype} clipping's "
                             f"rounding bound covers for a model of {self.n_params} parameters; use a larger --clip-norm")
        with self._scope():
            flat, c, t, f, _, n = self._inputs(theta, ctx, tgt, feats, training=True)
            fn, spec = self._fn("clip", self._clipped_fn)
            values, squares, packed, wide = fn(flat, c, t, f)
        inner = clip * (1.0 - ghost.clip_margin(self.n_params, self.dtype))
        total, norms = ghost.clipped_sum(packed, wide, spec, squares, n, inner, self.layout)
        return np.asarray(values, dtype=np.float64)[:n], total, norms

    def per_example_grads(self, theta, ctx, tgt, feats=None):
        """Per-window losses ``(B,)`` and unclipped gradients ``(B, n_params)`` (``vmap`` of the per-window
        gradient that clipped_grad_sum clips)."""
        with self._scope():
            flat, c, t, f, _, n = self._inputs(theta, ctx, tgt, feats)
            values, grads = self._fn("per_example", self._per_example_fn)(flat, c, t, f)
            return np.asarray(values, dtype=np.float64)[:n], np.asarray(grads, dtype=np.float64)[:n]

    def mean_grad(self, theta, ctx, tgt, feats=None) -> tuple[float, np.ndarray]:
        """Batch-mean loss and its gradient (non-private training)."""
        if np.shape(ctx)[0] == 0:
            raise ValueError("mean_grad needs at least one window")
        with self._scope():
            flat, c, t, f, padding, _ = self._inputs(theta, ctx, tgt, feats, training=True)
            value, grad = self._fn("mean_grad", self._mean_grad_fn)(flat, c, t, f, padding)
            return float(value), np.asarray(grad, dtype=np.float64)

    def forecast(self, theta, ctx, levels, feats=None, rng: np.random.Generator | None = None):
        """(mean ``(B, L_F)``, quantiles ``(B, L_F, K)``) in data units for context windows ``ctx``."""
        import jax

        levels = np.asarray(levels, dtype=np.float64)
        if levels.ndim != 1 or np.any(~((levels > 0.0) & (levels < 1.0))):
            raise ValueError(f"quantile levels must lie strictly between 0 and 1, got {levels.tolist()}")
        seed = self._seed(rng)
        with self._scope():
            flat, c, _, f, _, n = self._inputs(theta, ctx, None, feats)
            mean, q = self._predict(self._fn("tree", self._tree_fn)(flat), c, f, levels, jax.random.key(seed))
            return mean[:n], q[:n]

    @staticmethod
    def _seed(rng: np.random.Generator | None) -> int:
        """The key of forecast sample paths: drawn from the host generator, or fixed without one."""
        return DEFAULT_FORECAST_SEED if rng is None else int(rng.integers(0, 2**63 - 1))

    def _tree_fn(self):
        import jax

        return jax.jit(self._tree)

    def predict_quantiles(self, theta, ctx, levels, feats=None, rng: np.random.Generator | None = None):
        """Forecast quantiles ``(B, L_F, K)`` in data units."""
        return self.forecast(theta, ctx, levels, feats, rng)[1]

"""Numpy forecasting models with per-window gradients for DP-SGD (Schuchardt et al., ICML 2025).

Source: ``specs/schuchardt.md`` sections 3.1, 3.2 and 5.2. The paper trains GluonTS 0.15.1 models
with Opacus (one example = one sampled window; per-window gradients are clipped to L2 norm C and
summed). tsdp reimplements three of them in numpy with closed-form, batched per-window gradients:

* ``linear``: ``raw = reshape(W x + b, (L_F, 3))``, ``W`` of shape ``(3 L_F, L_C)``.
* ``dlinear`` (Zeng et al., AAAI 2023, as GluonTS ``DLinearModel``): ``trend = MA_k(x)`` (moving
  average, kernel ``k`` = 25, replicate padding of ``(k-1)/2`` on each side), ``seasonal = x - trend``,
  ``h = W_s seasonal + b_s + W_t trend + b_t`` reshaped ``(L_F, H)`` (H = 20) and
  ``raw_t = h_t P + p`` with ``P`` of shape ``(H, 3)`` shared over the horizon steps.
* ``simple-ff`` (after GluonTS ``SimpleFeedForward``, hidden ``[64, 64]``, no batch norm):
  ``a1 = relu(W1 x + b1)``, ``a2 = relu(W2 a1 + b2)``, ``raw = reshape(W3 a2 + b3, (L_F, 3))``.
  [D] GluonTS' own SimpleFeedForward maps the last hidden layer to ``L_F * 64`` features and applies
  a shared Student-t projection per step; tsdp's variant projects straight to ``3 L_F`` outputs.

Every model outputs raw Student-t parameters per forecast step (:mod:`tsdp.forecast.studentt`).

Scaling (GluonTS ``MeanScaler`` with a *public* floor [D], section 5.2: "mean scaling computed from
the context window only"): per window ``s = max(mean(|context|), min_scale)``, ``x = context / s``,
``y~ = target / s``. GluonTS' batch-dependent default scale is not used, so a window's loss and
gradient depend on that window alone (spec pitfall 6: the receptive field stays inside L_C).
``min_scale`` (default 1e-3) is in data units and is a public parameter: choose it from public
knowledge of the data's units, never from the private data. Windows whose context is all zeros
(front padding, Alg. 1) get ``s = min_scale``.

Per-window loss (the NLL in data units; ``log s`` does not depend on theta):

    loss_i(theta) = (1/L_F) sum_t nll(y~_{i,t}; raw_{i,t}(theta)) + log s_i

Per-window gradients are computed by hand-written backpropagation on the whole batch at once. For a
dense layer ``u = W a + b`` applied once per window with output gradient ``delta``, the per-window
gradients are ``delta a^T`` and ``delta``, so ``||grad_W||^2 + ||grad_b||^2 = ||delta||^2 (||a||^2 + 1)``
("ghost clipping", Goodfellow 2015; Li et al., ICLR 2022): :meth:`ForecastModel.clipped_grad_sum`
obtains the norms without materialising the ``(B, P)`` gradients, then forms the clipped sum
``sum_i c_i g_i`` with ``c_i = 1 / max(1, ||g_i|| / C)`` as matrix products ``delta^T (c * a)``.
DLinear's projection ``P`` is shared over the horizon steps, so its ``(B, H, 3)`` per-window gradients
are formed explicitly (they are small); the norms and weighted sums of its two feature maps are taken
through ``P`` without forming their ``(B, L_F H)`` output gradients (see :class:`_Decomposed`).

Parameters are one flat float64 vector ``theta``; ``model.layout`` lists ``(name, shape)`` in order and
:meth:`ForecastModel.unflatten` returns views. :meth:`ForecastModel.init` draws every weight and bias
from ``U(-1/sqrt(fan_in), 1/sqrt(fan_in))`` (PyTorch's default ``nn.Linear`` initialisation).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
import math
from collections.abc import Mapping, Sequence
from typing import NamedTuple

import numpy as np

from tsdp.errors import DataError, UsageError
from tsdp.forecast import studentt
from tsdp.forecast.deep import make_deep_model
from tsdp.forecast.params import FlatParameters, positive_finite, positive_int

__all__ = [
    "MODELS",
    "DEFAULT_MIN_SCALE",
    "ForecastModel",
    "LinearModel",
    "DLinearModel",
    "SimpleFeedForwardModel",
    "make_model",
    "model_from_config",
    "moving_average",
    "moving_average_matrix",
]

MODELS = ("linear", "dlinear", "simple-ff")
DEEP_MODELS = ("deepar", "itransformer")  # JAX, optional extra tsdp[deep]: tsdp.forecast.deep
DEFAULT_MIN_SCALE = 1e-3


def _flag(value, name: str) -> bool:
    if not isinstance(value, (bool, np.bool_)):
        raise UsageError(f"{name} must be true or false, got {value!r}")
    return bool(value)


# ------------------------------------------------------------------------------------------------
# Moving average (DLinear's series decomposition)
# ------------------------------------------------------------------------------------------------


def moving_average_matrix(length: int, kernel: int) -> np.ndarray:
    """The ``(length, length)`` matrix ``M`` with ``trend = x @ M.T``: a moving average of odd width
    ``kernel`` after replicate padding by ``(kernel - 1)/2`` edge values on each side (GluonTS /
    Autoformer ``MovingAvg``): ``trend_j = (1/k) sum_{m=j-h}^{j+h} x_{clip(m, 0, length-1)}``."""
    if kernel < 1 or kernel % 2 == 0:
        raise UsageError(f"kernel must be a positive odd integer, got {kernel}")
    half = (kernel - 1) // 2
    rows = np.repeat(np.arange(length), kernel)
    cols = np.clip(rows + np.tile(np.arange(-half, half + 1), length), 0, length - 1)
    m = np.zeros((length, length))
    np.add.at(m, (rows, cols), 1.0 / kernel)
    return m


def moving_average(x, kernel: int) -> np.ndarray:
    """Replicate-padded moving average of ``x`` along its last axis (same length); see
    :func:`moving_average_matrix`."""
    x = np.asarray(x, dtype=np.float64)
    return x @ moving_average_matrix(x.shape[-1], kernel).T


# ------------------------------------------------------------------------------------------------
# Backpropagation records
# ------------------------------------------------------------------------------------------------


def _rowsq(a: np.ndarray) -> np.ndarray:
    """Squared L2 norm of every row (all axes but the first)."""
    a = a.reshape(a.shape[0], -1)
    return np.einsum("ij,ij->i", a, a)


def _zero_rows(a: np.ndarray, keep: np.ndarray | None) -> np.ndarray:
    """``a`` with the rows where ``keep`` is False set to zero (``a`` itself when ``keep`` is None)."""
    if keep is None:
        return a
    return np.where(keep.reshape((-1,) + (1,) * (a.ndim - 1)), a, 0.0)


class _Dense(NamedTuple):
    """A dense layer ``u = W a + b`` applied once per window with output gradient ``delta``:
    per-window gradients ``delta_i a_i^T`` (weight) and ``delta_i`` (bias, if any), squared norm
    ``||delta_i||^2 (||a_i||^2 + 1)``."""

    weight: str
    bias: str | None
    delta: np.ndarray  # (B, out)
    a: np.ndarray  # (B, in)

    def norm_sq(self):
        return _rowsq(self.delta) * (_rowsq(self.a) + (1.0 if self.bias is not None else 0.0))

    def fill(self, grads, slices):
        batch = grads.shape[0]
        grads[:, slices[self.weight][0]] = (self.delta[:, :, None] * self.a[:, None, :]).reshape(batch, -1)
        if self.bias is not None:
            grads[:, slices[self.bias][0]] = self.delta

    def add_weighted(self, views, weights, keep):
        # sum_i w_i delta_i a_i^T = delta^T (w * a): the weights go on the smaller factor
        delta = _zero_rows(self.delta, keep)
        np.matmul(delta.T, _zero_rows(self.a, keep) * weights[:, None], out=views[self.weight])
        if self.bias is not None:
            np.matmul(weights, delta, out=views[self.bias])


class _Decomposed(NamedTuple):
    """DLinear's feature maps ``u = W_s seasonal + b_s + W_t trend + b_t`` (``trend = M x``,
    ``seasonal = x - M x``) followed by the per-step projection ``raw_t = u_t P + p``.

    With ``G_i = dloss_i/draw_i`` of shape ``(L_F, 3)`` the output gradient of the feature maps is
    ``delta_i[t] = P G_i[t]`` (length H per step), so, as for two dense layers sharing ``delta``,
    ``||grad_i||^2 = ||delta_i||^2 (||seasonal_i||^2 + ||trend_i||^2 + 2)`` with
    ``||delta_i||^2 = sum_t G_i[t]^T (P^T P) G_i[t]``, and the weighted sum is
    ``sum_i w_i delta_i[t] x_i^T = P Q[t]`` with ``Q = G^T (w * x)`` of shape ``(L_F, 3, L_C)``;
    ``grad_W_t = P (Q M^T)`` and ``grad_W_s = P (Q - Q M^T)``. ``delta`` itself, ``(B, L_F H)``,
    is only formed when the per-window gradients are materialised."""

    names: tuple[str, str, str, str]  # W_s, b_s, W_t, b_t
    g: np.ndarray  # (B, L_F, 3)
    proj: np.ndarray  # P, (H, 3)
    x: np.ndarray  # (B, L_C)
    seasonal: np.ndarray
    trend: np.ndarray
    ma: np.ndarray  # M, (L_C, L_C)

    def norm_sq(self):
        gram = self.proj.T @ self.proj  # (3, 3)
        delta_sq = np.einsum("btk,btk->b", self.g @ gram, self.g)
        return delta_sq * (_rowsq(self.seasonal) + _rowsq(self.trend) + 2.0)

    def fill(self, grads, slices):
        ws, bs, wt, bt = self.names
        delta = (self.g @ self.proj.T).reshape(self.g.shape[0], -1)
        _Dense(ws, bs, delta, self.seasonal).fill(grads, slices)
        _Dense(wt, bt, delta, self.trend).fill(grads, slices)

    def add_weighted(self, views, weights, keep):
        ws, bs, wt, bt = self.names
        batch, horizon, _ = self.g.shape
        g = _zero_rows(self.g, keep).reshape(batch, -1)  # (B, 3 L_F)
        q = g.T @ (_zero_rows(self.x, keep) * weights[:, None])  # (3 L_F, L_C)
        qm = q @ self.ma.T
        q -= qm
        shape = (horizon, self.proj.shape[0], self.x.shape[1])
        np.matmul(self.proj, qm.reshape(horizon, 3, -1), out=views[wt].reshape(shape))
        np.matmul(self.proj, q.reshape(horizon, 3, -1), out=views[ws].reshape(shape))
        np.matmul((weights @ g).reshape(horizon, 3), self.proj.T, out=views[bs].reshape(horizon, -1))
        views[bt][...] = views[bs]


class _Explicit(NamedTuple):
    """Materialised per-window gradients of one parameter, shape ``(B, *shape)``."""

    name: str
    grad: np.ndarray

    def norm_sq(self):
        return _rowsq(self.grad)

    def fill(self, grads, slices):
        grads[:, slices[self.name][0]] = self.grad.reshape(grads.shape[0], -1)

    def add_weighted(self, views, weights, keep):
        views[self.name][...] = np.tensordot(weights, _zero_rows(self.grad, keep), axes=1)


# ------------------------------------------------------------------------------------------------
# Base class
# ------------------------------------------------------------------------------------------------


class ForecastModel(FlatParameters, ABC):
    """Common machinery: parameter layout, mean scaling, Student-t loss, per-window gradients.

    Subclasses define ``name``, ``_params`` (list of ``(name, shape, fan_in)``), ``_forward(p, x)``
    returning raw outputs ``(B, L_F, 3)`` and a cache, ``_backward(p, cache, G)`` returning the list of
    backprop records (:class:`_Dense`, :class:`_Decomposed`, :class:`_Explicit`; each gives per-window
    squared norms, materialised per-window gradients and weighted sums) for ``G = dloss/draw``,
    and ``_options()``.
    """

    name = ""

    def __init__(self, context: int, horizon: int, min_scale: float = DEFAULT_MIN_SCALE, nonnegative: bool = False):
        self.context = positive_int(context, "context")
        self.horizon = positive_int(horizon, "horizon")
        self.min_scale = positive_finite(min_scale, "min_scale")
        self.nonnegative = _flag(nonnegative, "nonnegative")
        params = self._params()
        self._set_layout([(n, s) for n, s, _ in params])
        self._fan_in = {n: f for n, _, f in params}

    # -- provided by each model ----------------------------------------------------------------
    @abstractmethod
    def _params(self) -> list[tuple[str, tuple[int, ...], int]]:
        """(name, shape, fan_in) of every parameter tensor, in flat order."""

    @abstractmethod
    def _options(self) -> dict:
        """The model-specific options that config() records."""

    @abstractmethod
    def _forward(self, p: dict, x: np.ndarray):
        """(raw outputs (B, L_F, 3), cache for _backward) for scaled inputs x."""

    @abstractmethod
    def _backward(self, p: dict, cache, g: np.ndarray) -> list:
        """Per-layer gradient pieces from d loss / d raw outputs g."""

    def _raw(self, p: dict, x: np.ndarray) -> np.ndarray:
        """Raw outputs only (no backprop cache); subclasses may override with a cheaper product."""
        return self._forward(p, x)[0]

    # -- parameters ----------------------------------------------------------------------------
    def config(self) -> dict:
        """JSON-able description from which :func:`model_from_config` rebuilds the model."""
        return {"name": self.name, "context": self.context, "horizon": self.horizon,
                **self._options(), "min_scale": self.min_scale, **({"nonnegative": True} if self.nonnegative else {})}

    def init(self, rng: np.random.Generator) -> np.ndarray:
        """Fresh parameters: every entry of a weight or bias with fan-in ``f`` is drawn from
        ``U(-1/sqrt(f), 1/sqrt(f))`` (PyTorch ``nn.Linear.reset_parameters``), in ``layout`` order."""
        theta = np.empty(self.n_params)
        for n, (sl, _) in self._slices.items():
            bound = 1.0 / math.sqrt(self._fan_in[n])
            theta[sl] = rng.uniform(-bound, bound, size=sl.stop - sl.start)
        return theta

    # -- data ----------------------------------------------------------------------------------
    def _context(self, ctx) -> np.ndarray:
        ctx = np.asarray(ctx, dtype=np.float64)
        if ctx.ndim != 2 or ctx.shape[1] != self.context:
            raise ValueError(f"context windows must have shape (B, {self.context}), got {ctx.shape}")
        return ctx

    def _target(self, tgt, batch: int) -> np.ndarray:
        tgt = np.asarray(tgt, dtype=np.float64)
        if tgt.shape != (batch, self.horizon):
            raise ValueError(f"targets must have shape ({batch}, {self.horizon}), got {tgt.shape}")
        return tgt

    def mean_scale(self, ctx) -> np.ndarray:
        """Per-window scale ``s = max(mean(|context|), min_scale)``, shape ``(B,)``."""
        ctx = self._context(ctx)
        return np.maximum(np.abs(ctx).mean(axis=1), self.min_scale)

    def _prepare(self, theta, ctx, tgt=None):
        p = self.unflatten(theta)
        ctx = self._context(ctx)
        s = np.maximum(np.abs(ctx).mean(axis=1), self.min_scale)
        x = ctx / s[:, None]
        if tgt is None:
            return p, x, s, None
        y = self._target(tgt, ctx.shape[0]) / s[:, None]
        return p, x, s, y

    # -- losses and gradients ------------------------------------------------------------------
    def loss(self, theta, ctx, tgt) -> np.ndarray:
        """Per-window loss ``(1/L_F) sum_t nll(tgt_t / s; raw_t) + log s``, shape ``(B,)``."""
        p, x, s, y = self._prepare(theta, ctx, tgt)
        raw = self._raw(p, x)
        return studentt.nll(y, *studentt.domain(raw)).mean(axis=1) + np.log(s)

    def _loss_and_terms(self, theta, ctx, tgt):
        p, x, s, y = self._prepare(theta, ctx, tgt)
        raw, cache = self._forward(p, x)
        nll, dnll = studentt.nll_and_grad(y, raw)
        loss = nll.mean(axis=1) + np.log(s)
        terms = self._backward(p, cache, dnll * (1.0 / self.horizon))
        return loss, terms

    def per_example_grads(self, theta, ctx, tgt) -> tuple[np.ndarray, np.ndarray]:
        """Per-window losses ``(B,)`` and materialised per-window gradients ``(B, n_params)``."""
        loss, terms = self._loss_and_terms(theta, ctx, tgt)
        grads = np.empty((loss.shape[0], self.n_params))
        for t in terms:
            t.fill(grads, self._slices)
        return loss, grads

    @staticmethod
    def _norms(terms, batch: int) -> np.ndarray:
        sq = np.zeros(batch)
        for t in terms:
            sq += t.norm_sq()
        return np.sqrt(sq)

    def _weighted_sum(self, terms, weights: np.ndarray, keep: np.ndarray | None = None) -> np.ndarray:
        """``sum_i weights_i g_i`` from the backprop records; rows with ``keep == False`` are left out."""
        total = np.zeros(self.n_params)
        views = self.unflatten(total)
        for t in terms:
            t.add_weighted(views, weights, keep)
        return total

    def clipped_grad_sum(self, theta, ctx, tgt, clip: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Losses ``(B,)``, the clipped sum ``sum_i g_i / max(1, ||g_i|| / clip)`` ``(n_params,)`` and the
        per-window norms ``||g_i||_2`` ``(B,)``, without materialising the ``(B, n_params)`` gradients.

        A window whose gradient is not finite contributes nothing to the sum (weight 0, which keeps
        every contribution's norm <= clip); its reported norm is ``inf`` or ``nan``.
        """
        clip = float(clip)
        if not (math.isfinite(clip) and clip > 0.0):
            raise UsageError(f"clip norm must be a positive finite number, got {clip!r}")
        loss, terms = self._loss_and_terms(theta, ctx, tgt)
        norms = self._norms(terms, loss.shape[0])
        finite = np.isfinite(norms)
        keep = None if finite.all() else finite
        with np.errstate(invalid="ignore"):
            weights = np.where(finite, clip / np.maximum(norms, clip), 0.0)
        return loss, self._weighted_sum(terms, weights, keep), norms

    def mean_grad(self, theta, ctx, tgt) -> tuple[float, np.ndarray]:
        """Batch-mean loss and its gradient ``(1/B) sum_i g_i`` (non-private training)."""
        loss, terms = self._loss_and_terms(theta, ctx, tgt)
        batch = loss.shape[0]
        if batch == 0:
            raise ValueError("mean_grad needs at least one window")
        return float(loss.mean()), self._weighted_sum(terms, np.full(batch, 1.0 / batch))

    # -- prediction ----------------------------------------------------------------------------
    def distribution(self, theta, ctx) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Student-t forecast ``(loc, scale, df)``, each ``(B, L_F)``; loc and scale in data units
        (the scaled model's loc and scale times ``s``)."""
        p, x, s, _ = self._prepare(theta, ctx)
        raw = self._raw(p, x)
        loc, scale, df = studentt.domain(raw)
        return loc * s[:, None], scale * s[:, None], df

    def predict_quantiles(self, theta, ctx, levels) -> np.ndarray:
        """Forecast quantiles ``loc + scale * t.ppf(level, df)`` in data units, shape ``(B, L_F, K)``
        (with ``nonnegative``, those of ``max(Y, 0)``: clipped at 0)."""
        return self.forecast(theta, ctx, levels)[1]

    def forecast(self, theta, ctx, levels) -> tuple[np.ndarray, np.ndarray]:
        """(mean ``(B, L_F)``, quantiles ``(B, L_F, K)``) in data units (the Student-t mean is ``loc``; with
        ``nonnegative``, the mean and quantiles of ``max(Y, 0)``, :func:`studentt.nonnegative_forecast`)."""
        loc, scale, df = self.distribution(theta, ctx)
        if self.nonnegative:
            return studentt.nonnegative_forecast(loc, scale, df, levels)
        return loc, studentt.quantiles(loc, scale, df, levels)


# ------------------------------------------------------------------------------------------------
# Models
# ------------------------------------------------------------------------------------------------


class LinearModel(ForecastModel):
    """``raw = reshape(W x + b, (L_F, 3))`` with ``W`` of shape ``(3 L_F, L_C)``."""

    name = "linear"

    def _params(self):
        out = 3 * self.horizon
        return [("W", (out, self.context), self.context), ("b", (out,), self.context)]

    def _options(self):
        return {}

    def _forward(self, p, x):
        out = x @ p["W"].T
        out += p["b"]  # in place: large temporaries are costly (fresh pages) on small VMs
        return out.reshape(x.shape[0], self.horizon, 3), x

    def _backward(self, p, x, g):
        return [_Dense("W", "b", g.reshape(g.shape[0], -1), x)]


class DLinearModel(ForecastModel):
    """DLinear (Zeng et al. 2023; GluonTS ``DLinearModel``): trend/seasonal decomposition by a
    replicate-padded moving average, two linear maps to ``(L_F, H)`` features, and a Student-t
    projection ``raw_t = h_t P + p`` shared over the horizon steps (see the module docstring)."""

    name = "dlinear"

    def __init__(self, context: int, horizon: int, kernel: int = 25, hidden: int = 20,
                 min_scale: float = DEFAULT_MIN_SCALE, nonnegative: bool = False):
        self.kernel = positive_int(kernel, "kernel")
        if self.kernel % 2 == 0:
            raise UsageError(f"kernel must be odd (replicate padding of (kernel-1)/2 per side), got {kernel}")
        self.hidden = positive_int(hidden, "hidden")
        super().__init__(context, horizon, min_scale, nonnegative)
        self._ma = moving_average_matrix(self.context, self.kernel)

    def _params(self):
        lc, feat, h = self.context, self.horizon * self.hidden, self.hidden
        return [("W_s", (feat, lc), lc), ("b_s", (feat,), lc), ("W_t", (feat, lc), lc), ("b_t", (feat,), lc),
                ("P", (h, 3), h), ("p", (3,), h)]

    def _options(self):
        return {"hidden": self.hidden, "kernel": self.kernel}

    def decompose(self, x) -> tuple[np.ndarray, np.ndarray]:
        """``(seasonal, trend)`` of (scaled) context windows ``x`` ``(B, L_C)``: ``trend`` = replicate-
        padded moving average with ``kernel``, ``seasonal = x - trend``."""
        x = np.asarray(x, dtype=np.float64)
        trend = x @ self._ma.T
        return x - trend, trend

    def _forward(self, p, x):
        seasonal, trend = self.decompose(x)
        # W_s seasonal + W_t trend = (W_s + (W_t - W_s) M) x: one product with the batch instead of two
        w_eff = p["W_s"] + (p["W_t"] - p["W_s"]) @ self._ma
        h = x @ w_eff.T
        h += p["b_s"] + p["b_t"]
        h = h.reshape(x.shape[0], self.horizon, self.hidden)
        return h @ p["P"] + p["p"], (x, seasonal, trend, h)

    def _raw(self, p, x):
        # Without the features h (needed only for grad_P) the whole map is linear in x:
        # raw_t = V_t x + c_t with V_t = P^T (W_s,t (I - M) + W_t,t M), c_t = P^T (b_s,t + b_t,t) + p.
        shape = (self.horizon, self.hidden, self.context)
        v_s = np.matmul(p["P"].T, p["W_s"].reshape(shape)).reshape(3 * self.horizon, self.context)
        v_t = np.matmul(p["P"].T, p["W_t"].reshape(shape)).reshape(3 * self.horizon, self.context)
        v = v_s + (v_t - v_s) @ self._ma
        c = (p["b_s"] + p["b_t"]).reshape(self.horizon, self.hidden) @ p["P"] + p["p"]
        out = x @ v.T
        out += c.reshape(-1)
        return out.reshape(x.shape[0], self.horizon, 3)

    def _backward(self, p, cache, g):
        x, seasonal, trend, h = cache
        grad_proj = np.matmul(h.transpose(0, 2, 1), g)  # (B, H, 3): sum_t h_t^T g_t, shared over steps
        grad_bias = g.sum(axis=1)  # (B, 3)
        return [_Decomposed(("W_s", "b_s", "W_t", "b_t"), g, p["P"], x, seasonal, trend, self._ma),
                _Explicit("P", grad_proj), _Explicit("p", grad_bias)]


class SimpleFeedForwardModel(ForecastModel):
    """Multilayer perceptron with ReLU hidden layers (default ``(64, 64)``):
    ``a_0 = x``, ``a_l = relu(W_l a_{l-1} + b_l)``, ``raw = reshape(W_out a_last + b_out, (L_F, 3))``.
    Parameters are named ``W1, b1, ..., Wn, bn`` with ``n = len(hidden) + 1``."""

    name = "simple-ff"

    def __init__(self, context: int, horizon: int, hidden: Sequence[int] = (64, 64),
                 min_scale: float = DEFAULT_MIN_SCALE, nonnegative: bool = False):
        if isinstance(hidden, (int, np.integer)) or not isinstance(hidden, Sequence) or len(hidden) == 0:
            raise UsageError(f"hidden must be a non-empty list of layer sizes, got {hidden!r}")
        self.hidden = tuple(positive_int(h, "hidden") for h in hidden)
        super().__init__(context, horizon, min_scale, nonnegative)

    def _params(self):
        sizes = [self.context, *self.hidden, 3 * self.horizon]
        out = []
        for k, (fan_in, fan_out) in enumerate(zip(sizes[:-1], sizes[1:]), start=1):
            out += [(f"W{k}", (fan_out, fan_in), fan_in), (f"b{k}", (fan_out,), fan_in)]
        return out

    def _options(self):
        return {"hidden": list(self.hidden)}

    def _forward(self, p, x):
        acts = [x]
        n = len(self.hidden) + 1
        for k in range(1, n):
            z = acts[-1] @ p[f"W{k}"].T
            z += p[f"b{k}"]
            acts.append(np.maximum(z, 0.0, out=z))
        out = acts[-1] @ p[f"W{n}"].T
        out += p[f"b{n}"]
        return out.reshape(x.shape[0], self.horizon, 3), acts

    def _backward(self, p, acts, g):
        n = len(self.hidden) + 1
        delta = g.reshape(g.shape[0], -1)
        terms = []
        for k in range(n, 0, -1):
            a = acts[k - 1]
            terms.append(_Dense(f"W{k}", f"b{k}", delta, a))
            if k > 1:
                delta = (delta @ p[f"W{k}"]) * (a > 0.0)  # a = relu(pre-activation): a > 0 <=> pre > 0
        return terms


_CLASSES = {"linear": LinearModel, "dlinear": DLinearModel, "simple-ff": SimpleFeedForwardModel}
_ALIASES = {"mlp": "simple-ff"}  # the spec's CLI name (section 5.2)


def make_model(name: str, context: int, horizon: int, **options) -> ForecastModel:
    """Build model ``name`` (one of :data:`MODELS`; ``mlp`` is accepted for ``simple-ff``) for context
    length ``context`` (L_C) and forecast length ``horizon`` (L_F). Options: ``min_scale`` and
    ``nonnegative`` (forecasts of ``max(Y, 0)``) for every model; ``kernel`` and ``hidden`` (int) for ``dlinear``; ``hidden`` (list of ints) for ``simple-ff``.
    :data:`DEEP_MODELS` are built by :func:`tsdp.forecast.deep.make_deep_model` (a usage error naming
    the extra ``tsdp[deep]`` when JAX is not installed)."""
    key = _ALIASES.get(name, name)
    if key in DEEP_MODELS:
        return make_deep_model(key, context, horizon, **options)
    if key not in _CLASSES:
        raise UsageError(f"unknown model {name!r}; choose one of {', '.join(MODELS + DEEP_MODELS)}")
    cls = _CLASSES[key]
    allowed = {"linear": {"min_scale"}, "dlinear": {"kernel", "hidden", "min_scale"},
               "simple-ff": {"hidden", "min_scale"}}[key] | {"nonnegative"}
    unknown = sorted(set(options) - allowed)
    if unknown:
        raise UsageError(f"model {key!r} has no option {unknown[0]!r}; its options are "
                         f"{', '.join(sorted(allowed))}")
    return cls(context, horizon, **options)


def model_from_config(cfg: Mapping) -> ForecastModel:
    """Rebuild a model from :meth:`ForecastModel.config` (e.g. after a JSON round trip)."""
    if not isinstance(cfg, Mapping):
        raise DataError(f"model config must be a mapping, got {type(cfg).__name__}")
    missing = [k for k in ("name", "context", "horizon") if k not in cfg]
    if missing:
        raise DataError(f"model config lacks {', '.join(repr(k) for k in missing)}")
    rest = {k: v for k, v in cfg.items() if k not in ("name", "context", "horizon")}
    return make_model(cfg["name"], cfg["context"], cfg["horizon"], **rest)

"""Per-window clipped gradient sums of the JAX models: each window's gradient in pieces on the device, in the
model's precision; the clipping factors and the float64 sum on the host.

A window's gradient reaches the clipping as *pieces*, one per parameter tensor:

* dense: the window's gradient of the tensor, ``(B,) + shape`` (any model: ``vmap`` of ``value_and_grad``);
* outer: for an affine map ``u = x W + b`` applied once per window on one row ``x`` (``T = 1``: an
  iTransformer token), the factors ``a = [x, 1]`` ``(B, d_in + 1)`` and ``delta = dL/du`` ``(B, d_out)``;
  the window's gradient of ``[W; b]`` is ``a^T delta``, never formed: ``||a^T delta||_F = ||a|| ||delta||``
  and ``sum_i c_i a_i^T delta_i = A^T (c * Delta)`` is one matrix product ("ghost clipping", Goodfellow 2015;
  Li et al., ICLR 2022; tsdp's numpy models clip the same way, :mod:`tsdp.forecast.models`).

:func:`factored_grads` obtains the factors by JAX's autodiff: every affine map ``x W + b`` and elementwise
scaling ``x * g + b`` of a window's loss goes through a :class:`Taps`, which adds a zero perturbation ``e``
to its output and records its input; ``jax.vjp`` of the batch's per-window losses with respect to the
perturbations gives ``dL_i/de_i = dL_i/du_i`` for every window (windows do not interact).

:func:`squares` sums the squares of every window's pieces on the device in the model's precision (one pass
over the ``(B, P)`` pieces; a float64 pass costs ~7x more on XLA:CPU): the dense entries' squares and, per
outer piece, ``||a||^2 ||delta||^2``. :func:`clipped_sum` does the rest on the host in float64: a window whose
device sum is not finite (a non-finite entry, or an overflow in the model's precision) has its non-finite
entries zeroed and its sum recomputed in float64, so every contribution is a finite function of its window
alone; ``c_i = C' / max(C', ||g_i||)`` with ``C' = C (1 - m)``, ``m`` = :func:`clip_margin`; ``S = sum_i c_i
g_i`` tensor by tensor (:func:`weighted_rows`, ``A^T (c * Delta)`` in float64).

Why every window's exact contribution ``c_i g_i`` has norm at most C, whatever the summation orders of XLA
and numpy. Let u be the model's unit roundoff (2^-24 in float32), u' = 2^-53 and gamma_k = k u / (1 - k u)
(Higham, Accuracy and Stability of Numerical Algorithms, Lemma 3.1 and eq. 4.4: k roundings, in any order).
On the device a dense piece's term is a square (one rounding); an outer piece's is the product of two sums of
squares, ``d_in + 1`` and ``d_out`` terms, at most ``d_in + d_out + 2 <= (d_in + 1) d_out + 2`` roundings; the
pieces' sums are then added, one addition less than there are pieces. So every term of the computed squared
norm carries at most P + 2 roundings (a piece's size plus the other pieces, each of size >= 1, is at most P)
and the computed sum is within (1 +- gamma_{P+2}) of N^2. Underflow adds at most 3 P 2^-150 (float32; 2^-1075
in float64: at most 3P products round below the normal range, additions of subnormals are exact), below
u N^2 whenever N >= C >= :func:`min_clip`; so for a window with N >= C the squared norm is within
(1 +- gamma_{P+3}), and so is a window recomputed on the host (float64 is finer). The host's square root and
quotient round once each in float64, and ``C' = fl(C (1 - m))``: N^ >= N (1 - gamma_{P+3})(1 - u'). If N^ <=
C', c_i = 1 and N <= C (otherwise N^ >= C (1 - gamma_{P+3})(1 - u') > C (1 - m)(1 + u') >= C'). If N^ > C',
``c_i N <= C (1 - m)(1 + u')^2 / ((1 - gamma_{P+3})(1 - u')) <= C`` when N >= C (c_i <= 1 otherwise), as soon
as ``m >= gamma_{P+3} + 3 u' + u'^2``, which ``m = 2 gamma_{P+4}`` satisfies in either precision
(gamma_{P+4} >= (P + 4) u). A float64 square that overflows makes c_i = 0. Each term of the host sum is
formed with at most two roundings (``a_k (c_i delta_j)``) and summed in float64 in some order: the premises
of the float64 sum bound of :mod:`tsdp.accounting.dpsgd_lattice` (``F = (1 + gamma'_{P+4})(1 + 2
gamma'_{n+2} n)``), unchanged.
"""

from __future__ import annotations

import math


class Taps:
    """Where a window's loss uses its weights. ``affine(p, name, x)`` is ``x @ p[name.W] + p[name.b]`` and
    ``scale(p, name, x)`` is ``x * p[name.g] + p[name.b]``, for ``x`` of shape ``(T, d)``; with
    ``perturb`` (name -> ``(T, d_out)``) each output gets its perturbation added. Inputs, kinds and output
    shapes are recorded by name (a tensor pair used twice is refused: its gradient would not be one piece)."""

    def __init__(self, perturb=None):
        self.perturb = perturb
        self.inputs: dict = {}
        self.kinds: dict = {}
        self.shapes: dict = {}

    def affine(self, p, name, x):
        return self._tap(name, "affine", x, x @ p[f"{name}.W"] + p[f"{name}.b"])

    def scale(self, p, name, x):
        return self._tap(name, "scale", x, x * p[f"{name}.g"] + p[f"{name}.b"])

    def _tap(self, name, kind, x, out):
        if name in self.kinds:
            raise ValueError(f"the weights {name!r} are used twice in one window's loss")
        if x.ndim != 2:
            raise ValueError(f"tap {name!r}: inputs must be (T, d), got shape {x.shape}")
        self.inputs[name], self.kinds[name], self.shapes[name] = x, kind, out.shape
        return out if self.perturb is None else out + self.perturb[name]


PARAMETERS = {"affine": ("W", "b"), "scale": ("g", "b")}


def factored_grads(loss, p, names, batch):
    """Per-window losses ``(B,)`` and the gradient pieces ``(outer, dense)`` of ``loss(p, taps, *window)``
    over ``batch`` (a tuple of arrays with a leading window axis). ``names`` lists the parameter tensors;
    each must be reached through exactly one tap."""
    import jax
    import jax.numpy as jnp

    probe = Taps()  # a pass over the first window to learn the taps (XLA drops its unused arithmetic)
    loss(p, probe, *(a[0] for a in batch))
    kinds = probe.kinds
    tapped = {f"{name}.{suffix}" for name, kind in kinds.items() for suffix in PARAMETERS[kind]}
    if tapped != set(names):
        raise ValueError(f"every parameter tensor must be reached through one tap; untapped "
                         f"{sorted(set(names) - tapped)}, unknown {sorted(tapped - set(names))}")
    size = batch[0].shape[0]
    zeros = {name: jnp.zeros((size,) + shape, probe.inputs[name].dtype) for name, shape in probe.shapes.items()}

    def one(perturb, *window):
        taps = Taps(perturb)
        return loss(p, taps, *window), taps.inputs

    def losses(perturb):
        return jax.vmap(one)(perturb, *batch)

    values, backward, inputs = jax.vjp(losses, zeros, has_aux=True)
    (deltas,) = backward(jnp.ones_like(values))
    outer, dense = {}, {}
    for name, kind in kinds.items():
        x, d = inputs[name], deltas[name]  # (B, T, d_in), (B, T, d_out)
        first_param, bias = (f"{name}.{suffix}" for suffix in PARAMETERS[kind])
        if kind == "affine" and x.shape[1] == 1:  # [W; b] has the gradient [x, 1]^T delta
            outer[name] = (jnp.concatenate([x[:, 0], jnp.ones((size, 1), x.dtype)], axis=1), d[:, 0])
            continue
        dense[bias] = jnp.sum(d, axis=1)
        if kind == "scale":
            dense[first_param] = jnp.sum(x * d, axis=1)
        else:
            dense[first_param] = jnp.einsum("bti,btj->bij", x, d)
    return values, outer, dense


UNIT_ROUNDOFF = {"float32": 2.0 ** -24, "float64": 2.0 ** -53}
UNDERFLOW = {"float32": 2.0 ** -150, "float64": 2.0 ** -1075}  # half the smallest subnormal


def clip_margin(parameters: int, dtype: str) -> float:
    """m = 2 gamma_{P+4} in the model's precision: windows are clipped to ``C (1 - m)`` so that the device's
    rounding of their norms cannot take a contribution above C (module docstring)."""
    ku = (parameters + 4) * UNIT_ROUNDOFF[dtype]
    if not ku < 0.25:
        raise ValueError(f"{parameters} parameters are beyond what the {dtype} clipping bounds")
    return 2 * ku / (1 - ku)


def min_clip(parameters: int, dtype: str) -> float:
    """The least clip norm the bound covers: ``2 sqrt(P eta / u)`` (eta: half the smallest subnormal), above
    which the squares' underflow (at most ``3 P eta``) stays below ``u N^2`` for every N >= C (module
    docstring)."""
    return 2.0 * math.sqrt(parameters * UNDERFLOW[dtype] / UNIT_ROUNDOFF[dtype])


def squares(outer, dense, size):
    """Per window ``(B,)``, ``||g_i||^2`` in the pieces' precision: the sum of the squares of its dense pieces
    and ``||a||^2 ||delta||^2`` per outer piece (device side, in one pass over the pieces)."""
    import jax.numpy as jnp

    total = jnp.zeros((size,))
    for a, d in outer.values():
        total = total + jnp.sum(jnp.square(a), axis=1) * jnp.sum(jnp.square(d), axis=1)
    for g in dense.values():
        total = total + jnp.sum(jnp.square(g.reshape(size, -1)), axis=1)
    return total


PACKED_WIDTH = 4096  # pieces at most this wide per window travel to the host in one array


def pack(outer, dense, size):
    """``(packed, wide)``: every outer factor and every dense piece of at most :data:`PACKED_WIDTH` values per
    window concatenated into one ``(B, K)`` array (a single device-to-host conversion instead of dozens), in
    the order :func:`packing` describes (all ``a``, all ``delta``, the dense pieces); the wider dense pieces
    as they are (copying them would cost more)."""
    import jax.numpy as jnp

    names = sorted(outer)  # sorted, as JAX orders a dict's leaves (packing() sees them that way)
    columns = [outer[name][0] for name in names] + [outer[name][1] for name in names]
    wide = {}
    for name, g in sorted(dense.items()):
        flat = g.reshape(size, -1)
        if flat.shape[1] <= PACKED_WIDTH:
            columns.append(flat)
        else:
            wide[name] = g
    packed = jnp.concatenate(columns, axis=1) if columns else jnp.zeros((size, 0))
    return packed, wide


def packing(outer, dense) -> dict:
    """Where :func:`pack` put each piece, for pieces with these shapes (arrays or shape structs): the ends of
    the three blocks of columns (``a``, ``delta``, dense) and, within its block, the columns of each outer
    factor (``outer``: tap name -> (a columns, delta columns)) and dense piece (``dense``: name -> columns)."""
    spec = {"outer": {}, "dense": {}}
    names = sorted(outer)
    a_end = sum(outer[name][0].shape[1] for name in names)
    d_end = a_end + sum(outer[name][1].shape[1] for name in names)
    a_start = d_start = 0
    for name in names:
        a, d = outer[name]
        spec["outer"][name] = (slice(a_start, a_start + a.shape[1]), slice(d_start, d_start + d.shape[1]))
        a_start, d_start = a_start + a.shape[1], d_start + d.shape[1]
    start = 0
    for name, g in sorted(dense.items()):
        width = math.prod(g.shape[1:])
        if width <= PACKED_WIDTH:
            spec["dense"][name] = slice(start, start + width)
            start += width
    spec["blocks"] = (a_end, d_end, d_end + start)
    return spec


ROW_BLOCK = 32  # rows converted to float64 at a time (3 MB for DeepAR's largest tensor): a third faster than np.einsum


def weighted_rows(factors, g):
    """``sum_i factors_i g_i`` in float64 for float32 rows ``g`` ``(n, width)``: each product one rounding,
    the sum in float64 (a matrix-vector product per block of :data:`ROW_BLOCK` rows, then the blocks)."""
    import numpy as np

    total = np.zeros(g.shape[1])
    for start in range(0, g.shape[0], ROW_BLOCK):
        stop = start + ROW_BLOCK
        total += factors[start:stop] @ g[start:stop].astype(np.float64)
    return total


def clipped_sum(packed, wide, spec, squares, n, clip, layout):
    """``(S, norms)`` in float64 on the host (module docstring) over the first ``n`` windows (the rest is
    padding): ``S`` the flat ``sum_i c_i g_i`` in ``layout`` order, ``norms`` the windows' ``||g_i||``
    (non-finite entries counted as 0), ``c_i = clip / max(clip, ||g_i||)``. ``packed``, ``wide`` and
    ``spec`` are the device's pieces as :func:`pack` and :func:`packing` give them, ``squares`` their
    :func:`squares`; an outer piece of tap ``X`` holds ``X.W`` (all rows of ``a^T delta`` but the last) and
    ``X.b`` (the last, ``a``'s column of ones)."""
    import numpy as np

    a_end, d_end, dense_end = spec["blocks"]
    packed = np.asarray(packed)[:n]
    wide = {name: np.asarray(g)[:n].reshape(n, -1) for name, g in wide.items()}
    squares = np.asarray(squares, dtype=np.float64)[:n].copy()
    # a finite sum of squares means finite pieces; the other windows (a non-finite entry, or an overflow in the
    # model's precision) have their pieces zeroed where not finite and their squares summed again in float64
    redo = np.flatnonzero(~np.isfinite(squares))
    if redo.size:
        def zeroed(a):
            a = a.copy()
            a[redo] = np.nan_to_num(a[redo], nan=0.0, posinf=0.0, neginf=0.0)
            return a

        packed = zeroed(packed)
        wide = {name: zeroed(g) for name, g in wide.items()}
        rows = packed[redo].astype(np.float64)
        a_rows, d_rows, dense_rows = rows[:, :a_end], rows[:, a_end:d_end], rows[:, d_end:dense_end]
        again = np.square(dense_rows).sum(axis=1)
        for a_cols, d_cols in spec["outer"].values():
            again += np.square(a_rows[:, a_cols]).sum(axis=1) * np.square(d_rows[:, d_cols]).sum(axis=1)
        for g in wide.values():
            again += np.square(g[redo].astype(np.float64)).sum(axis=1)
        squares[redo] = again
    norms = np.sqrt(squares)
    factors = clip / np.maximum(clip, norms)
    sums = {}
    if spec["outer"]:
        a64 = packed[:, :a_end].T.astype(np.float64)  # A^T, each tap's rows contiguous for the products
        scaled = factors[:, None] * packed[:, a_end:d_end]  # c_i delta_i in float64
        for tap, (a_cols, d_cols) in spec["outer"].items():
            product = a64[a_cols] @ scaled[:, d_cols]
            sums[f"{tap}.W"], sums[f"{tap}.b"] = product[:-1].reshape(-1), product[-1]
    if spec["dense"]:
        small = weighted_rows(factors, packed[:, d_end:dense_end])
        sums.update({name: small[cols] for name, cols in spec["dense"].items()})
    sums.update({name: weighted_rows(factors, g) for name, g in wide.items()})
    return (np.concatenate([sums[name] for name, _ in layout]) if layout else np.zeros(0)), norms

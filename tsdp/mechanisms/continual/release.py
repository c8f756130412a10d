"""Online release: one step at a time, position-keyed noise, a carry between appends.

At step t the stream encodes ``y_t = round_g((C x)_t) + z_t`` (the rows of C released at t; for the
tree, the nodes ending at t) and publishes each output's ``(B_i y)_t``. The noise of step t is drawn
by a generator keyed by ``(secret, t)`` alone (numpy ``SeedSequence(secret, spawn_key=(t,))`` with the
counter-based Philox bit generator), all series in a fixed order, so the noise of position
(series, t) is a function of the secret and the position: appending one step at a time gives, bit
for bit, what one append of all steps gives, and re-running an interrupted append reproduces the
values it may have written. Every step runs the same array operations on arrays of the same shapes
whatever the chunking, so the floating-point results agree bit for bit too.

Toeplitz strategies decode through ``u = C^{-1} y`` (forward substitution) and publish ``A_i u``:
``daily`` is u_t, ``cumulative`` a running sum of u, ``window:k`` the sum of the last k values of u;
this equals ``B_i y`` with ``B_i = A_i C^{-1}``. The carry holds the last ``band - 1`` steps of x and
of u (the longest window's ``k - 1`` at least) and the running sums: ``2 x 8 S (band - 1)`` bytes, so
O(band) per series for ``banded``, but ``2 x 8 S (T - 1)`` for the full square root (58 MB for
10^4 series over a year; choose ``banded`` for long horizons with many series). The tree keeps the last
``2^(levels - 1) - 1`` steps of x (to form node sums) and every released node value (its
least-squares decoders read the whole current forest).

``carry`` is a dict of numpy arrays (``position`` is a 0-d integer array), suitable for ``np.savez``.
"""

from __future__ import annotations

import numpy as np

from tsdp.errors import DataError, UsageError
from tsdp.mechanisms.continual.factorization import Factorization, factorization
from tsdp.mechanisms.continual.privacy import StreamPrivacy, privacy_map
from tsdp.mechanisms.continual.setting import StreamSetting
from tsdp.mechanisms.continual.workloads import memory, window_length, workload_column
from tsdp.mechanisms.noise import gaussian_noise, snap

MIN_SECRET_BYTES = 16


def carry_shapes(setting: StreamSetting) -> dict[str, tuple[int, ...]]:
    """The arrays of a carry and their shapes."""
    S, fac = setting.n_series, factorization(setting.strategy, setting.horizon, setting.band)
    if fac.tree is None:
        return {"position": (), "x_tail": (S, fac.column.size - 1),
                "u_tail": (S, max(fac.column.size - 1, *(memory(o) for o in setting.outputs))), "total": (S,)}
    return {"position": (), "x_tail": (S, 2 ** (fac.tree.levels - 1) - 1), "nodes": (S, fac.tree.n_nodes)}


def new_carry(setting: StreamSetting) -> dict[str, np.ndarray]:
    """The carry before the first step."""
    carry = {key: np.zeros(shape) for key, shape in carry_shapes(setting).items()}
    carry["position"] = np.array(0, dtype=np.int64)
    return carry


def step_noise(setting: StreamSetting, privacy: StreamPrivacy, secret: bytes, t: int, rows: int) -> np.ndarray:
    """The noise of step t: (n_series, rows) values, a function of (secret, t) only."""
    seq = np.random.SeedSequence(int.from_bytes(secret, "big"), spawn_key=(int(t),))
    gen = np.random.Generator(np.random.Philox(seq))
    size = setting.n_series * rows
    return gaussian_noise(gen, privacy.sigma, size, granularity=privacy.granularity).reshape(setting.n_series, rows)


def release_steps(setting: StreamSetting, secret: bytes, carry: dict, x: np.ndarray,
                  start: int) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """Release steps ``start .. start + k - 1`` from ``x`` (n_series, k) of true, bounded values.

    Returns each output's released values (n_series, k) and the new carry (the given carry is not
    modified). DataError when ``start`` is not the carry's position (a step given twice or skipped),
    when the steps pass the horizon, or when x has the wrong number of series or non-finite values.
    """
    if not isinstance(secret, (bytes, bytearray)) or len(secret) < MIN_SECRET_BYTES:
        raise UsageError(f"the stream secret must be at least {MIN_SECRET_BYTES} bytes")
    x = np.asarray(x, dtype=np.float64)
    _check_carry(setting, carry)
    position = int(carry["position"])
    if x.ndim != 2 or x.shape[0] != setting.n_series:
        raise DataError(f"the stream has {setting.n_series} series; the data has shape {x.shape}")
    if start != position:
        what = "was already released" if start < position else f"skips steps {position}..{start - 1}"
        raise DataError(f"step {start} {what}: the stream's next step is {position}")
    if start + x.shape[1] > setting.horizon:
        raise DataError(f"steps {start}..{start + x.shape[1] - 1} pass the horizon of {setting.horizon} steps")
    if not np.all(np.isfinite(x)):
        raise DataError("the data holds a non-finite value (NaN or infinity)")
    privacy = privacy_map(setting)
    fac = factorization(setting.strategy, setting.horizon, setting.band)
    state = {key: np.array(value, copy=True) for key, value in carry.items()}
    outputs = {o: np.empty_like(x) for o in setting.outputs}
    step = _toeplitz_step if fac.tree is None else _tree_step
    for j in range(x.shape[1]):
        values = step(setting, privacy, fac, secret, state, x[:, j], start + j)
        for o in setting.outputs:
            outputs[o][:, j] = values[o]
        state["position"] = np.array(start + j + 1, dtype=np.int64)
    return outputs, state


def _check_carry(setting: StreamSetting, carry: dict) -> None:
    """The carry must be one this setting made: the same arrays, shapes and a position in the horizon."""
    expected = carry_shapes(setting)
    if set(carry) != set(expected) or any(np.shape(carry[k]) != shape for k, shape in expected.items()) \
            or not 0 <= int(carry["position"]) <= setting.horizon:
        raise DataError("the stream state does not belong to this stream's setting (its arrays or position differ)")


def _toeplitz_step(setting, privacy, fac: Factorization, secret, state, xt, t) -> dict[str, np.ndarray]:
    c = fac.column
    lag = c[1:]
    encoded = xt * c[0]
    if lag.size:
        encoded = encoded + (state["x_tail"] * lag).sum(axis=1)
    y = snap(encoded, privacy.granularity) + step_noise(setting, privacy, secret, t, 1)[:, 0]
    u_tail = state["u_tail"]
    u = y if not lag.size else (y - (u_tail[:, :lag.size] * lag).sum(axis=1)) / c[0]
    state["total"] = state["total"] + u
    values = {}
    for o in setting.outputs:
        k = window_length(o)
        if o == "daily":
            values[o] = u
        elif o == "cumulative":
            values[o] = state["total"]
        else:
            values[o] = u + u_tail[:, :k - 1].sum(axis=1) if k > 1 else u
    if lag.size:
        state["x_tail"] = np.concatenate((xt[:, None], state["x_tail"][:, :-1]), axis=1)
    if u_tail.shape[1]:
        state["u_tail"] = np.concatenate((u[:, None], u_tail[:, :-1]), axis=1)
    return values


def _tree_step(setting, privacy, fac: Factorization, secret, state, xt, t) -> dict[str, np.ndarray]:
    tree, tail = fac.tree, state["x_tail"]
    levels = int(tree.released_at[t])
    sums = np.empty((setting.n_series, levels))
    for height in range(levels):  # the node of height h sums the last 2^h steps
        width = 2 ** height - 1
        sums[:, height] = xt + tail[:, :width].sum(axis=1) if width else xt
    y = snap(sums, privacy.granularity) + step_noise(setting, privacy, secret, t, levels)
    first = int(tree.first_id[t])
    state["nodes"][:, first:first + levels] = y
    released = state["nodes"][:, :first + levels]
    values = {}
    for o in setting.outputs:
        row = tree.decoder_row(workload_column(o, setting.horizon)[t::-1], t)
        values[o] = (released * row).sum(axis=1)
    if tail.shape[1]:
        state["x_tail"] = np.concatenate((xt[:, None], tail[:, :-1]), axis=1)
    return values

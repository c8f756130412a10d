"""The JAX models' clipping (tsdp.forecast.deep.ghost): the rounding margin against a worst-case summation
order, the packed pieces against per-window gradients formed explicitly in float64, and non-finite or
overflowing pieces. Skipped when the optional extra tsdp[deep] is not installed."""

from __future__ import annotations

import math

import numpy as np
import pytest

from tsdp.forecast.deep import missing_extra

_MISSING = missing_extra()
pytestmark = pytest.mark.skipif(_MISSING is not None, reason=f"needs the optional extra tsdp[deep]: {_MISSING}")

from tsdp.forecast.deep import ghost  # noqa: E402


def sequential_float32_squares(x: np.ndarray) -> float:
    """The sum of the float32 squares of ``x`` added one by one in float32 (np.cumsum is sequential): the
    order the margin must survive, whatever XLA does."""
    return float(np.cumsum(np.square(x.astype(np.float32)), dtype=np.float32)[-1])


def adversarial(parameters: int) -> np.ndarray:
    """One large entry first, then entries whose float32 squares are just below half an ulp of the running
    sum: each addition rounds down, so the sequential sum misses almost all of them (~gamma_P relative)."""
    x = np.full(parameters, np.float32(0.9999 * 2.0 ** -12), dtype=np.float32)
    x[0] = 1.0
    return x


@pytest.mark.parametrize("parameters", [1_000, 25_083, 33_435, 200_000])
def test_the_margin_covers_a_worst_case_float32_summation_order(parameters):
    x = adversarial(parameters)
    exact = math.sqrt(math.fsum((x.astype(np.float64) ** 2).tolist()))  # float32 squares are exact in float64
    computed = math.sqrt(sequential_float32_squares(x))
    gamma = parameters * 2.0 ** -24 / (1 - parameters * 2.0 ** -24)
    assert 1 - computed**2 / exact**2 <= gamma  # the lemma the margin rests on
    assert computed * (1 + 1e-5) < exact  # adversarial: a fixed 1e-5 margin would not do
    for clip in np.geomspace(0.5 * computed, computed, 9):
        inner = clip * (1 - ghost.clip_margin(parameters, "float32"))
        factor = inner / max(inner, computed)
        assert factor * exact <= clip
        fixed = clip * (1 - 1e-5) / max(clip * (1 - 1e-5), computed)
        if clip == computed:
            assert fixed * exact > clip  # what the margin is for


def test_min_clip_keeps_underflow_below_one_rounding():
    for dtype, eta in (("float32", 2.0 ** -150), ("float64", 2.0 ** -1075)):
        for parameters in (10, 33_435, 10**6):
            least = ghost.min_clip(parameters, dtype)
            # every squared product's underflow (at most 3 P of them) below u N^2 for N >= least
            assert 3 * parameters * eta <= ghost.UNIT_ROUNDOFF[dtype] * least**2


def device_pieces(outer, dense):
    """What the models' compiled function returns for these pieces, and the packing the host reads."""
    import jax

    size = next(iter(outer.values()))[0].shape[0] if outer else next(iter(dense.values())).shape[0]

    def run(outer, dense):
        return (ghost.squares(outer, dense, size),) + ghost.pack(outer, dense, size)

    squares, packed, wide = jax.jit(run)(outer, dense)
    return squares, packed, wide, ghost.packing(*jax.eval_shape(lambda o, d: (o, d), outer, dense))


def explicit(outer, dense, layout):
    """Per-window gradients ``(B, P)`` in layout order, formed in float64 (non-finite entries zeroed): an
    outer piece of tap X gives X.W (``a^T delta`` but its last row) and X.b (the last row)."""
    def zeroed(v):
        return np.nan_to_num(np.asarray(v, dtype=np.float64), nan=0.0, posinf=0.0, neginf=0.0)

    rows = []
    for name, _ in layout:
        tap, _, kind = name.rpartition(".")
        if tap in outer:
            a, d = (zeroed(v) for v in outer[tap])
            full = np.einsum("bi,bj->bij", a, d)
            rows.append((full[:, :-1] if kind == "W" else full[:, -1]).reshape(a.shape[0], -1))
        else:
            rows.append(zeroed(dense[name]).reshape(zeroed(dense[name]).shape[0], -1))
    return np.concatenate(rows, axis=1)


def random_pieces(rng, size):
    """Pieces of a made-up model: affine taps of several widths (``a`` ending in its column of ones), small
    and wide dense pieces, in a layout order unlike both insertion and alphabetical order."""
    outer = {"z": (3, 5), "a": (7, 2), "m": (1, 9)}
    dense = {"b.g": (4, 3), "wide": (ghost.PACKED_WIDTH + 3,), "b.b": (2,)}
    layout = [("m.W", (1, 9)), ("wide", dense["wide"]), ("z.b", (5,)), ("a.W", (7, 2)), ("b.g", (4, 3)),
              ("z.W", (3, 5)), ("a.b", (2,)), ("b.b", (2,)), ("m.b", (9,))]
    o = {}
    for k, (i, j) in outer.items():
        a = np.concatenate([rng.normal(size=(size, i)), np.ones((size, 1))], axis=1).astype(np.float32)
        o[k] = (a, rng.normal(size=(size, j)).astype(np.float32))
    d = {k: rng.normal(size=(size,) + shape).astype(np.float32) for k, shape in dense.items()}
    return o, d, layout


def test_packed_pieces_give_the_clipped_sum_of_the_explicit_gradients():
    rng = np.random.default_rng(3)
    size, n = 12, 10  # the last two windows are padding
    outer, dense, layout = random_pieces(rng, size)
    squares, packed, wide, spec = device_pieces(outer, dense)
    g = explicit(outer, dense, layout)[:n]
    norms = np.linalg.norm(g, axis=1)
    clip = float(np.median(norms))
    total, got = ghost.clipped_sum(packed, wide, spec, squares, n, clip, layout)
    np.testing.assert_allclose(got, norms, rtol=1e-6)
    terms = g * (clip / np.maximum(clip, norms))[:, None]
    # the factors come from float32 squares (relative error ~1e-7), so each term may move by ~1e-7 of itself
    assert np.all(np.abs(total - terms.sum(axis=0)) <= 1e-6 * np.abs(terms).sum(axis=0))


def test_non_finite_and_overflowing_pieces_are_zeroed_and_measured_in_float64():
    rng = np.random.default_rng(4)
    size = 6
    outer, dense, layout = random_pieces(rng, size)
    outer["a"][0][1, 2] = np.inf  # window 1: an infinite factor
    dense["b.g"][2, 0, 0] = np.nan  # window 2: NaN
    dense["wide"][3, :] = 3e19  # window 3: finite, but its float32 squares overflow
    outer["m"][1][4, :] = 1e-30  # window 4: tiny factors
    squares, packed, wide, spec = device_pieces(outer, dense)
    assert not np.isfinite(np.asarray(squares)[[1, 2, 3]]).any()
    g = explicit(outer, dense, layout)
    norms = np.linalg.norm(g, axis=1)
    parameters = g.shape[1]
    for i in range(size):
        clip = 0.5 * norms[i]
        inner = clip * (1 - ghost.clip_margin(parameters, "float32"))
        keep = [i]
        one = ({k: (a[keep], d[keep]) for k, (a, d) in outer.items()}, {k: v[keep] for k, v in dense.items()})
        sq, pk, wd, sp = device_pieces(*one)
        total, got = ghost.clipped_sum(pk, wd, sp, sq, 1, inner, layout)
        assert np.isfinite(total).all()
        np.testing.assert_allclose(got[0], norms[i], rtol=1e-6)
        assert np.linalg.norm(total) <= clip
        np.testing.assert_allclose(total, g[i] * inner / norms[i], rtol=1e-5, atol=1e-9 * clip)

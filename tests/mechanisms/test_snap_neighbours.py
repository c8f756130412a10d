"""The hardened sampler's rounding to the lattice, against worst-case neighbours (issue 17).

The claims cover the rounded values with the sensitivity widened for the rounding: per cell a
change of at most M moves the rounded value by at most (floor(M / g) + 1) g (the Laplace scale's
L1 bound), and a change of L2 norm Delta over n cells moves the rounded vector by at most
Delta + g sqrt(n) (the Gaussian's). Neighbours are built adversarially: each cell moved by exactly
the cap, from values sitting just below or on a rounding boundary.
"""

from __future__ import annotations

import math

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from tsdp.mechanisms.noise import snap

G_EXP = st.integers(min_value=-12, max_value=4)


@settings(max_examples=300, deadline=None, derandomize=True)
@given(g_exp=G_EXP, cap=st.floats(min_value=1e-3, max_value=1e3), n=st.integers(1, 40),
       seed=st.integers(0, 2**31 - 1), boundary=st.booleans())
def test_rounded_cells_move_within_the_widened_bounds(g_exp, cap, n, seed, boundary):
    g = 2.0 ** g_exp
    rng = np.random.default_rng(seed)
    x = rng.uniform(-1e4, 1e4, n)
    if boundary:  # start each cell half a step off the lattice, the worst case for rounding
        x = (np.floor(x / g) + 0.5) * g - g * 2.0 ** -30
    change = cap * rng.choice([-1.0, 1.0], n)
    neighbour = x + change
    moved = np.abs(snap(neighbour, g) - snap(x, g))
    assert np.all(moved <= (math.floor(cap / g) + 1) * g)  # the L1 bound, cell by cell
    delta2 = float(np.linalg.norm(change))
    assert np.linalg.norm(snap(neighbour, g) - snap(x, g)) <= delta2 + g * math.sqrt(n) + 1e-9 * delta2


def test_the_widening_is_needed():
    """Without the + g terms the bounds fail: rounding can add a whole step to a change."""
    g = 1.0
    x = np.array([0.49])
    neighbour = x + 0.02  # a change of 0.02 crosses the boundary at 0.5
    moved = float(abs(snap(neighbour, g) - snap(x, g))[0])
    assert moved == 1.0 > 0.02 and moved <= (math.floor(0.02 / g) + 1) * g

"""Settings of the privacy-loss grids, in a module without numpy (cheap to import at start-up)."""

from __future__ import annotations

DEFAULT_DISCRETIZATION = 1e-3
TAIL_MASS = 1e-15


def tail_mass_for(delta: float) -> float:
    """Tail mass dp-accounting may truncate per composition: the paper's 1e-15, and never more than
    a thousandth of the target delta (truncated right tails go to infinite loss, pessimistically)."""
    return min(TAIL_MASS, delta * 1e-3)

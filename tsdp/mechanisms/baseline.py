"""What every release mechanism shares: the :class:`Panel` (S series x T steps and the declared unit),
the :class:`Release` it returns, and :func:`add_noise`, which adds noise to the (optionally rounded)
cells of a panel held as an array or as the columnar chunks of its flat order.

The additive baselines themselves are :mod:`tsdp.mechanisms.gaussian` and
:mod:`tsdp.mechanisms.laplace`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from tsdp.accounting.claim import PrivacyClaim
from tsdp.accounting.sensitivity import ContributionBounds
from tsdp.mechanisms.noise import snap


@dataclass(frozen=True)
class Panel:
    """Shape of the released panel and who is protected."""

    n_series: int
    n_steps: int
    bounds: ContributionBounds
    id_column: str | None = None
    enforced: bool = False

    @property
    def composition(self) -> dict:
        """How one (epsilon, delta) covers the S series, in data and in words."""
        series = self.bounds.series_reach(self.n_series, self.n_steps)  # a w-event unit: K per step
        if self.n_series == 1:
            how, text = "single", "one series"
        elif series == 1:
            how = "parallel"
            text = (
                "parallel composition: a protected unit affects at most one series, "
                "so the whole panel costs the budget of one series"
            )
        else:
            how = "joint"
            text = (
                f"the budget is shared by the {self.n_series} series: a protected unit may "
                f"affect up to {series} of them, and the panel is released by one mechanism "
                f"whose sensitivity covers all {series} (exact composition across series)"
            )
        return {"across_series": how, "series_per_unit": series, "explanation": text}


@dataclass(frozen=True)
class Release:
    values: np.ndarray
    claim: PrivacyClaim
    warnings: tuple[str, ...] = field(default=())


def panel_size(values) -> int:
    """The number of cells in ``values`` (an array or a sequence of 1-D chunks)."""
    return values.size if isinstance(values, np.ndarray) else sum(len(c) for c in values)


def add_noise(values, noise: np.ndarray, granularity: float | None = None) -> np.ndarray:
    """``values + noise`` computed in the noise buffer (no extra copy of the data), the values
    rounded to multiples of ``granularity`` first when it is given (hardened sampler).

    ``values`` is an array (the result has its shape) or a sequence of 1-D arrays, the columnar
    chunks whose concatenation is the flat panel (the result is then 1-D).
    """
    if isinstance(values, np.ndarray):
        noise = noise.reshape(values.shape)
        noise += snap(values, granularity)
        return noise
    offset = 0
    for chunk in values:
        noise[offset:offset + len(chunk)] += chunk if granularity is None else snap(np.asarray(chunk, dtype=np.float64), granularity)
        offset += len(chunk)
    return noise

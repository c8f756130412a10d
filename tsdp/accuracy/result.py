"""``Accuracy``: what a release's noise does to each released value, stated from public parameters.

It goes into the report (``accuracy`` block), the ``--json`` summary and the human summary's one
line. Everything in it is a function of public parameters (the claim's noise scale, the grid, the
declared bounds, alpha) or of released figures, so it is publishable.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

COVERS = ("noise only: the interval holds the noise the mechanism adds to each released value, computed "
          "from public parameters; it does not include the error from subsampling, filtering, interpolation, "
          "clipping, capping or rounding, which depends on the data (measure it with --evaluate)")


@dataclass(frozen=True)
class Accuracy:
    """A (1 - alpha) interval of the noise of every released value of ``target``.

    ``half_width``: with probability at least 1 - alpha, each released value of the target is within
    +- half_width of what the mechanism would release without noise (the largest over series or
    groups when it varies; ``summary`` then gives min/median/max). None when no released value has a
    noise interval (DP-SGD weights), and ``statement`` says why.
    ``exact``: True when the coverage is exactly 1 - alpha, False when it is a lower bound.
    """

    alpha: float
    target: str               # "cell", "sum", "group" or "model"
    scope: str                # the released values the interval is for, in words
    half_width: float | None
    method: str               # "analytic", "analytic bound", "numerical integration", "simulation, n=..."
    formula: str
    exact: bool = True
    summary: dict[str, float] | None = None
    covers: str = COVERS
    statement: str | None = None
    extra: dict[str, Any] | None = None  # mechanism-specific public figures, e.g. FAST given its sampled steps

    def to_dict(self) -> dict[str, Any]:
        out = {"alpha": self.alpha, "confidence": 1.0 - self.alpha, "target": self.target, "scope": self.scope,
               "half_width": self.half_width, "exact": self.exact, "method": self.method,
               "formula": self.formula, "covers": self.covers}
        if self.summary is not None:
            out["summary"] = dict(self.summary)
        if self.statement is not None:
            out["statement"] = self.statement
        if self.extra is not None:
            out.update(self.extra)
        return out

    def line(self) -> str:
        """One line for the human summary, e.g. 'each cell within ±57.4 with 95% probability (noise only)'."""
        if self.half_width is None:
            return self.statement or "no noise interval"
        level = f"{100 * (1 - self.alpha):.4g}%"
        bound = "" if self.exact else "at least "
        spread = ""
        if self.summary and self.summary["min"] != self.summary["max"]:
            spread = f" (largest; median ±{self.summary['median']:.4g})"
        return f"{self.scope} within ±{self.half_width:.4g}{spread} with {bound}{level} probability (noise only)"

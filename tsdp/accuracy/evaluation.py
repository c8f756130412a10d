"""``--evaluate``: the error of a release against the RAW input, split into its sources.

NOT private: every figure here is a function of the private input. It is a diagnostic for the
custodian, who asked for it; it goes to the custodian file or the custodian's terminal, never into
a report (:mod:`tsdp.cli.evaluation` says where each figure is shown).

Four panels of the same shape (series x steps) describe one run:

* ``raw`` x: the input itself, before any cap, clip or fill (for raw events: every event of a
  declared series on the public grid, aggregated without caps or value clipping);
* ``bounded`` b: the panel the mechanism protects, after the caps, the value clip and the fill;
* ``noiseless`` m: what the mechanism releases from b with its randomness (sampled steps, FAST's
  sampling pattern) but without its noise;
* ``released`` r: the mechanism's output, and ``published`` p: r after ``--clip-min/--clip-max/--round``.

The error of the published value telescopes exactly, cell by cell:

    p - x = (b - x)        bounding: the caps' dropped rows, the clipped values, the filled cells
          + (m - b)        approximation: subsampling and interpolation, filtering, FAST's sampling
                           and Kalman filter, DFT truncation, the sampler's lattice rounding
          + (r - m)        noise
          + (p - r)        post-processing

so the parts' mean signed errors add up to the total's; their MAE and RMSE do not (the RMSE's
squares add up approximately, to within the cross terms, which average out for the noise).

Cells the fill invented (``--fill-missing zero``) have no true value: they are left out of every
figure, and counted. The signal's spread is the pooled within-series standard deviation of the
raw observed cells, ``s = sqrt(sum_series sum_t (x_st - xbar_s)^2 / n)``; ``r2 = 1 - SSE / (n s^2)``
is the share of that variation the published series explain (negative when the error exceeds the
spread: each series' own mean would be closer).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

PARTS = ("bounding", "approximation", "noise", "postprocessing")
PART_MEANING = {
    "bounding": "caps, value clipping and fill (bounded panel minus raw input)",
    "approximation": "the mechanism without its noise minus the bounded panel (subsampling, interpolation, "
                     "filtering, FAST's sampling and Kalman filter, DFT truncation, lattice rounding)",
    "noise": "the released values minus the mechanism without its noise",
    "postprocessing": "--clip-min/--clip-max/--round (published minus released)",
    "total": "published values minus the raw input",
}
MRE_SANITARY_BOUND = 1.0


@dataclass(frozen=True)
class ErrorFigures:
    """One error panel's summary over the observed cells: mean signed error, MAE and RMSE."""

    mean: float
    mae: float
    rmse: float

    @classmethod
    def of(cls, error: np.ndarray) -> "ErrorFigures":
        """``error``: the error of the observed cells, flat."""
        if error.size == 0:
            return cls(float("nan"), float("nan"), float("nan"))
        return cls(float(error.mean()), float(np.abs(error).mean()), float(np.sqrt(np.mean(error * error))))


def signal_figures(raw: np.ndarray, observed: np.ndarray) -> dict[str, float]:
    """The raw input's median cell, its pooled within-series standard deviation (the spread) and
    the number of observed cells."""
    raw = np.asarray(raw, dtype=np.float64)
    n = int(observed.sum())
    if n == 0:
        return {"cells": 0, "median": float("nan"), "spread": float("nan")}
    counts = observed.sum(axis=1)
    means = np.divide(np.where(observed, raw, 0.0).sum(axis=1), counts, out=np.zeros(raw.shape[0]),
                      where=counts > 0)
    centred = np.where(observed, raw - means[:, None], 0.0)
    return {"cells": n, "median": float(np.median(raw[observed])),
            "spread": float(np.sqrt((centred * centred).sum() / n))}


def split_error(raw, bounded, noiseless, released, published, observed) -> dict[str, ErrorFigures]:
    """The four parts of ``published - raw`` and the total (module docstring), over ``observed``."""
    x, b, m, r, p = (np.asarray(a, dtype=np.float64)[observed] for a in (raw, bounded, noiseless, released,
                                                                       published))
    return {"bounding": ErrorFigures.of(b - x), "approximation": ErrorFigures.of(m - b),
            "noise": ErrorFigures.of(r - m), "postprocessing": ErrorFigures.of(p - r),
            "total": ErrorFigures.of(p - x)}


def relative_error(raw, published, observed, sanitary_bound: float = MRE_SANITARY_BOUND) -> float:
    """MRE of the published values against the raw input: mean |p - x| / max(x, s) (Fan and Xiong 2012)."""
    x = np.asarray(raw, dtype=np.float64)[observed]
    p = np.asarray(published, dtype=np.float64)[observed]
    return float(np.mean(np.abs(p - x) / np.maximum(x, sanitary_bound))) if x.size else float("nan")


def _spread(values) -> dict[str, float]:
    arr = np.asarray(values, dtype=np.float64)
    return {"mean": float(arr.mean()), "sd": float(arr.std(ddof=1)) if arr.size > 1 else 0.0,
            "min": float(arr.min()), "max": float(arr.max())}


@dataclass
class Evaluation:
    """The runs of ``--evaluate`` on one input: add each run with :meth:`add`, then :meth:`to_dict`."""

    raw: np.ndarray
    observed: np.ndarray
    runs: list[dict[str, ErrorFigures]] = field(default_factory=list)
    mres: list[float] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.raw = np.asarray(self.raw, dtype=np.float64)
        self.observed = np.asarray(self.observed, dtype=bool)
        if self.raw.shape != self.observed.shape:
            raise ValueError(f"raw {self.raw.shape} and observed {self.observed.shape} differ in shape")
        self.signal = signal_figures(self.raw, self.observed)

    def add(self, bounded, noiseless, released, published) -> None:
        self.runs.append(split_error(self.raw, bounded, noiseless, released, published, self.observed))
        self.mres.append(relative_error(self.raw, published, self.observed))

    def part(self, name: str, figure: str) -> dict[str, float]:
        """Mean, sd, min and max over the runs of one part's ``figure`` (mean, mae or rmse)."""
        return _spread([getattr(run[name], figure) for run in self.runs])

    @property
    def rmse(self) -> float:
        """The total error's RMSE over all runs: sqrt of the mean squared error."""
        return float(np.sqrt(np.mean([run["total"].rmse ** 2 for run in self.runs])))

    @property
    def r2(self) -> float:
        """1 - (mean squared total error) / spread^2 (module docstring), over all runs."""
        spread = self.signal["spread"]
        return float(1.0 - self.rmse ** 2 / spread ** 2) if spread > 0 else float("nan")

    @property
    def exceeds_spread(self) -> bool:
        """True when the total error's RMSE exceeds the signal's spread (r2 < 0)."""
        return bool(self.rmse > self.signal["spread"])

    def to_dict(self) -> dict:
        if not self.runs:
            raise ValueError("no run was evaluated")
        parts = {name: {"meaning": PART_MEANING[name],
                        **{figure: self.part(name, figure) for figure in ("mean", "mae", "rmse")}}
                 for name in (*PARTS, "total")}
        return {"runs": len(self.runs), "against": "the raw input, before caps, value clipping and fill",
                "signal": self.signal, "error": parts, "mre": _spread(self.mres),
                "mre_sanitary_bound": MRE_SANITARY_BOUND, "rmse": self.rmse, "r2": self.r2,
                "error_exceeds_spread": self.exceeds_spread,
                "additivity": "the parts' mean signed errors add up to the total's in every run; MAE and RMSE "
                              "do not add up"}

"""Which dates a FLIP release publishes, and the same-date LIP floor its claim states.

McElroy, Roy & Hore's theorems bound the LIP of the ideal filter (Thm 6: LIP = 1 at lip_delta 0;
Thm 10 with eq. (12): LIP >= 1 - delta), a stationary, infinitely long filter. The release tsdp applies
is a finite map of a finite series, and its same-date LIP (eq. (5) at each date t, for an attacker who
knows the auxiliary series and the released trend: :mod:`tsdp.flip.datewise`) falls below that bound at
some dates. The rule here makes the claim true date by date:

    a date t is released  iff  withhold_ends <= t < T - withhold_ends  and  LIP_t >= lip_floor;

every other date is written empty, and the claim states ``lip_floor``. The floor is a public parameter:
``--lip-floor`` or, by default, ``min(1 - lip_delta, 0.99)`` (the 2M + 1 taps approach the ideal
filter's LIP but never reach exactly 1, so at lip_delta 0 no date would reach the theorem's figure).
A floor below ``1 - lip_delta`` releases dates below the theorem's bound knowingly, and the claim then
says so. The claim never states a floor that a released date misses, and never a figure of the data:
the per-date minimum is a function of the estimated spectrum, so it goes to the custodian file only.

Which dates fall below the floor is itself a function of the estimated spectrum (private data). That
pattern is published anyway, as the empty cells of the output; the report repeats it
(:func:`withheld_runs`) and says where it comes from.

Why dates fall below the floor, measured on statsmodels' macrodata (realcons given realgdp, T = 203,
M = 45, lip_delta 0.1, one fixed R per row of figures; ``lip_applied_interior`` = Def. 4 of the taps):

* the ends, t < M or t >= T - M: the taps run over backcasts and forecasts, projections of the series
  itself (LIP_t down to 0.15 at trend order 3). ``--withhold-ends M`` withholds exactly these dates by
  a public rule.
* dates at least M from both ends, whose taps cover observed dates only: without the trend term their
  LIP_t equals Def. 4 of the taps to four digits (0.9990-1.0000 at trend orders 0-3), so neither the
  taps' reach (they never touch a backcast there; no "2M" effect) nor the filter's distance from
  all-pass (allpass_max_defect 0.10-0.27, yet Def. 4 >= 0.999) is the cause. What lowers them is the
  released trend: FLIP keeps the fitted polynomial trend exactly, so the attacker is given the d + 1
  trend coordinates, and for a persistent residual they explain a large share of X_t (24-61 % of
  Var(X_t | Z) at trend order 3, most near the ends where the Legendre basis is steepest). The ideal
  filter's LIP of 1 rests on the cancellation of int cos(theta) f over the whole spectrum, and the low
  frequencies that the trend coordinates reveal are those where theta is near 0; 1 - LIP_t tracks that
  share (correlation 0.78, 0.88 and 0.91 over these dates at orders 0, 1 and 3), down to LIP_t 0.73 at
  order 3 (all 113 dates between the withheld ends below 0.9) and 0.80 at order 1 (21 dates). On AR(1)
  residuals the shortfall grows with the persistence and the trend order and shrinks with T: at
  phi 0.9 and order 3, 0-41 of these dates were below 0.9 at T = 200 and none at T = 800 and 3200.
  ``--withhold-ends`` does not reach them; a trend order whose residual is closer to stationary, or a
  longer series, raises them.
"""

from __future__ import annotations

from typing import Any

import numpy as np

# The default floor is at most this: a filter of 2M + 1 taps reaches LIP 0.999-0.9999 away from the
# ends on the AR(1), QWI and macrodata series tried, never the ideal filter's exact 1 (Thm 6).
DEFAULT_FLOOR_CAP = 0.99
FLOOR_OPTION = "--lip-floor"


def default_floor(lip_delta: float) -> float:
    """``min(1 - lip_delta, DEFAULT_FLOOR_CAP)``: the floor stated when ``--lip-floor`` is not given."""
    return min(1.0 - lip_delta, DEFAULT_FLOOR_CAP)


def between_ends(T: int, withhold_ends: int) -> np.ndarray:
    """Boolean mask of the dates not among the first or last ``withhold_ends`` of T."""
    inside = np.zeros(T, dtype=bool)
    inside[withhold_ends:T - withhold_ends] = True
    return inside


def released_dates(lip_t: np.ndarray, floor: float, withhold_ends: int) -> np.ndarray:
    """Boolean mask of the released dates (module docstring): not among the first or last
    ``withhold_ends`` dates, and a same-date LIP of at least ``floor``."""
    lip_t = np.asarray(lip_t, dtype=float)
    return between_ends(lip_t.size, withhold_ends) & (lip_t >= floor)


def withheld_runs(released: np.ndarray) -> list[tuple[int, int]]:
    """The withheld dates as maximal runs ``(first, last)``, 0-based and inclusive."""
    held = ~np.asarray(released, dtype=bool)
    edges = np.diff(np.concatenate(([0], held.astype(np.int8), [0])))
    starts, stops = np.flatnonzero(edges == 1), np.flatnonzero(edges == -1) - 1
    return [(int(a), int(b)) for a, b in zip(starts, stops)]


def floor_reason(floor: float, lip_delta: float, given: bool) -> str:
    """How the stated floor relates to the theorem's ``1 - lip_delta`` (public: both are parameters)."""
    bound = 1.0 - lip_delta
    if floor == bound:
        return "the floor is the ideal filter's bound"
    if floor > bound:
        return "the floor is above the ideal filter's bound (--lip-floor)"
    if given:
        return ("the floor is BELOW the ideal filter's bound: --lip-floor released dates under the theorem's "
                "figure knowingly")
    return (f"the default floor is at most {DEFAULT_FLOOR_CAP:g}: a filter of 2M + 1 taps approaches the ideal "
            "filter's LIP but does not reach exactly 1")


def guarantee(floor: float, lip_delta: float, given: bool) -> str:
    """The claim's guarantee sentence for ``floor`` (``given``: it came from ``--lip-floor``)."""
    return (f"every released value's same-date LIP (eq. (5), for the release actually applied, under the "
            f"ESTIMATED spectral model, against a linear attacker who knows the auxiliary series and the released "
            f"trend and uses the released value at the same date only) is at least lip_floor = {floor:.12g}; dates "
            f"below it are withheld (written empty). The ideal filter's LIP is >= 1 - lip_budget_delta = "
            f"{1.0 - lip_delta:.12g} (Thm 6 / Thm 10); {floor_reason(floor, lip_delta, given)}")


def pattern_note() -> str:
    """The report's note on the withheld dates (``output.withheld``)."""
    return ("output.withheld lists, per series, the dates written empty: the first and last --withhold-ends dates "
            "and every date whose same-date LIP is below lip_floor. Which dates fall below the floor depends on the "
            "estimated spectrum, a function of the private data; the pattern is published as the empty cells of "
            "the output itself, and the report repeats it so that the release can be read without it")


def series_pattern(entity: Any, column: str, times, released: np.ndarray) -> dict[str, Any]:
    """One series' entry of ``output.withheld``: its dates, the count released, and the withheld runs
    as ``[first time, last time]`` (``times[k]``: the time of date k, a sequence or a mapping)."""
    return {"entity": entity, "column": column, "dates": int(released.size), "released": int(released.sum()),
            "withheld": [[times[a], times[b]] for a, b in withheld_runs(released)]}

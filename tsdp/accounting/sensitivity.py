"""Sensitivity of a released panel of series, derived from the declared privacy unit.

A panel is S series x T steps. The privacy unit (DESIGN.md section 2) says how much one protected
entity can change it:

* ``event``: one event changes one cell (one series, one step) by at most M;
* ``w-event``: the events of one entity inside any window of ``w`` consecutive steps, at most M
  per step, in at most ``series_per_unit`` series *per step* (default: all of them), so at most
  ``series_per_unit * w`` cells;
* ``user``: everything one user contributes, at most M per step, in at most I steps of each series
  and in at most ``series_per_unit`` series (default: all of them).

Under add/remove neighbours the difference of the two panels has at most ``cells`` non-zero
entries, each of magnitude at most M, so

    L1 = cells * M,    L2 = sqrt(cells) * M.

Under substitution one entity is replaced by another whose cells may be disjoint from the first:
the number of cells doubles. (Koga et al. 2022, Section 3.1 and spec pitfalls 11-12.)

A user unit may also carry a norm bound C (``max_norm``, ``--max-norm``): tsdp scales each user's
non-negative contribution vector x down to ||x||_2 <= C. Then, besides the bounds above,
||x||_2 <= C under add/remove, and under substitution ||x - y||_2^2 = ||x||^2 + ||y||^2 - 2 x.y <=
2 C^2 (x, y >= 0), so L2 <= sqrt(2) C; and ||x||_1 <= sqrt(cells) ||x||_2 (Cauchy-Schwarz on the
cells one unit touches), so L1 <= sqrt(cells) C with the same factor sqrt(2) folded into the doubled
cells. Each bound is the smaller of the two; a cell moves by at most min(M, C) (``max_per_step``
then states that smaller figure).

Mechanisms that treat series separately need more than the cell count: how a unit's cells can
spread over the series. ``series_touched`` is K, the series of one step (w-event) or of the whole
stream (user); a w-event unit picks its K series afresh at every step (the events layout caps
series per bucket), so its ``K w`` cells can lie in ``min(S, K w)`` series (``series_reach``). A
bound that sums, over series, a concave non-decreasing function of a series' changed cells (the
DFT's per-series L1 norm, FAST's samples on changed cells) is largest when the cells spread evenly
over as many series as they can reach (such sums are Schur-concave): ``series_spread`` and
``spread_sum``. Under substitution such a bound is twice the add/remove one (the difference is the
old unit's minus the new unit's, each an add/remove difference: triangle inequality). Bounds that
grow faster than linearly in a series' cells are largest when the cells are packed into as few
series as possible (``concentrated``).
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import asdict, dataclass

from tsdp.errors import UsageError
from tsdp.limits import MAX_MAGNITUDE

NEIGHBOURING = {
    "add-remove": "add or remove one {what}",
    "substitute": "replace one {what} by another",
}


class UnitLevel(ABC):
    """What one privacy unit of a level may contribute: the per-level rules of the module docstring,
    written once. :data:`UNIT_LEVELS` holds one object per level; :class:`ContributionBounds`,
    :class:`~tsdp.accounting.claim.PrivacyUnit` and the engine's caps ask it instead of comparing
    level names."""

    name: str
    per_user_caps = True  # the engine enforces per-user caps (not for an event unit)
    series_cap_per_step = True  # a series cap counts the series of one bucket (w-event), else of the stream
    uses_max_steps = False  # --max-steps belongs to this level (required)
    uses_w = False  # --w belongs to this level (required)
    whole_user = False  # a unit is everything one user contributes (not one event, not a window of them)
    cap_scope = ""  # the rows each enforced cap's choice depends on, in words

    def check(self, bounds: "ContributionBounds") -> None:
        """UsageError for an option the level needs and lacks, or has and does not use."""
        if self.uses_max_steps and (bounds.max_steps is None or bounds.max_steps < 1):
            raise UsageError(f"--max-steps must be an integer >= 1 for --unit {self.name}, got {bounds.max_steps}")
        if self.uses_w and (bounds.w is None or bounds.w < 1):
            raise UsageError(f"--w must be an integer >= 1 for --unit {self.name}, got {bounds.w}")
        if not self.uses_max_steps and bounds.max_steps is not None:
            raise UsageError(f"--max-steps applies to --unit user only; with --unit {self.name} "
                             f"remove --max-steps {bounds.max_steps}")
        if not self.uses_w and bounds.w is not None:
            raise UsageError(f"--w applies to --unit w-event only; with --unit {self.name} remove --w {bounds.w}")

    @abstractmethod
    def steps_per_series(self, bounds: "ContributionBounds", n_steps: int) -> int:
        """Steps of one series a unit can touch, capped by the series length T."""

    def series_touched(self, bounds: "ContributionBounds", n_series: int) -> int:
        """K: the series of one step (w-event) or of the whole stream (user); ``None`` means all."""
        return n_series if bounds.series_per_unit is None else min(bounds.series_per_unit, n_series)

    def series_reach(self, bounds: "ContributionBounds", n_series: int, n_steps: int) -> int:
        return self.series_touched(bounds, n_series)

    @abstractmethod
    def what(self, w: int | None, who: str) -> str:
        """The unit in words (``who``: the user, with their id column when there is one)."""


class EventLevel(UnitLevel):
    """One event: one cell, no per-user caps."""

    name = "event"
    per_user_caps = False
    cap_scope = "the event itself"

    def steps_per_series(self, bounds, n_steps):
        return 1

    def series_touched(self, bounds, n_series):
        return 1

    def what(self, w, who):
        return "event"


class WEventLevel(UnitLevel):
    """A user's events inside any ``w`` consecutive steps, K series per step chosen afresh each step,
    so the ``K w`` cells lie in ``min(S, K w)`` series."""

    name = "w-event"
    uses_w = True
    cap_scope = "the user's events in the same time bucket"

    def steps_per_series(self, bounds, n_steps):
        return min(bounds.w, n_steps)

    def series_reach(self, bounds, n_series, n_steps):
        return min(n_series, self.series_touched(bounds, n_series) * self.steps_per_series(bounds, n_steps))

    def what(self, w, who):
        return f"user's events within any window of {w} consecutive steps"


class UserLevel(UnitLevel):
    """Everything one user contributes: at most I steps of each of K series."""

    name = "user"
    uses_max_steps = True
    whole_user = True
    series_cap_per_step = False
    cap_scope = "all of a user's events"

    def steps_per_series(self, bounds, n_steps):
        return min(bounds.max_steps, n_steps)

    def what(self, w, who):
        return f"{who} with all of their contributions"


UNIT_LEVELS: dict[str, UnitLevel] = {unit.name: unit for unit in (EventLevel(), WEventLevel(), UserLevel())}
LEVELS = tuple(UNIT_LEVELS)


def unit_level(level: str) -> UnitLevel:
    """The :class:`UnitLevel` named ``level`` (UsageError naming --unit otherwise)."""
    unit = UNIT_LEVELS.get(level)
    if unit is None:
        raise UsageError(f"--unit must be one of {', '.join(LEVELS)}, got {level!r}")
    return unit


@dataclass(frozen=True)
class PrivacyUnit:
    """What one neighbouring step changes, stated as data (the report's ``claim.unit``).

    ``relation`` is ``add-remove`` or ``substitute``; ``neighbouring`` says the same in words.
    ``enforced`` tells whether tsdp enforced the contribution bounds itself (event layout) or
    trusted the declared ones (pre-aggregated series).
    """

    level: str
    relation: str
    neighbouring: str
    max_per_step: float | None  # None: a unit may change a value by any amount (DP-SGD substitution)
    max_steps: int | None = None
    w: int | None = None
    series_per_unit: int | None = None
    id_column: str | None = None
    enforced: bool = False
    max_norm: float | None = None  # C: each user's contributions scaled to L2 norm <= C (user level)

    def to_dict(self) -> dict:
        """The report's unit; ``max_norm`` appears only when the unit has one."""
        out = asdict(self)
        if out["max_norm"] is None:
            del out["max_norm"]
        return out

    def bounds(self) -> "ContributionBounds":
        """The contribution bounds this unit states (a ``tsdp release`` unit: event, w-event or user
        with a per-step bound; UsageError otherwise), whose rules give its sensitivities. The stated
        ``series_per_unit`` is the resolved K, which touches the same series as the declared one."""
        if self.max_per_step is None:
            raise UsageError(f"the {self.level} unit states no per-step bound: it has no contribution bounds")
        return ContributionBounds(self.level, self.max_per_step, self.max_steps, self.w, self.series_per_unit,
                                  self.relation, self.max_norm)


@dataclass(frozen=True)
class ContributionBounds:
    """The declared (or enforced) contribution bounds of one privacy unit."""

    level: str
    max_per_step: float
    max_steps: int | None = None
    w: int | None = None
    series_per_unit: int | None = None
    neighbouring: str = "add-remove"
    max_norm: float | None = None  # C (module docstring): user level only

    def __post_init__(self) -> None:
        unit = unit_level(self.level)
        if not (self.max_per_step > 0 and math.isfinite(self.max_per_step)):
            raise UsageError(f"--max-per-step must be positive and finite, got {self.max_per_step}")
        if self.max_per_step > MAX_MAGNITUDE:
            raise UsageError(f"--max-per-step {self.max_per_step:g} (the bound of one cell) is beyond 2**53, where "
                             "float64 cannot carry noise of that scale exactly; rescale the data")
        unit.check(self)
        if self.series_per_unit is not None and self.series_per_unit < 1:
            raise UsageError(f"--series-per-user must be >= 1, got {self.series_per_unit}")
        if self.neighbouring not in NEIGHBOURING:
            raise UsageError(
                f"--neighbouring must be one of {', '.join(NEIGHBOURING)}, got {self.neighbouring!r}"
            )
        if self.max_norm is not None:
            if isinstance(self.max_norm, bool) or not isinstance(self.max_norm, (int, float)) or not (
                    0 < self.max_norm <= MAX_MAGNITUDE):
                raise UsageError(f"--max-norm must be positive and at most 2**53, got {self.max_norm!r}")
            if not unit.whole_user:
                raise UsageError(f"--max-norm bounds everything one user contributes: it applies to --unit user, "
                                 f"not {self.level}")

    @property
    def unit(self) -> UnitLevel:
        return UNIT_LEVELS[self.level]

    def steps_per_series(self, n_steps: int) -> int:
        """Steps of one series a unit can touch, capped by the series length."""
        return self.unit.steps_per_series(self, n_steps)

    def series_touched(self, n_series: int) -> int:
        """Series of the panel one unit can touch (``series_per_unit=None`` means all)."""
        return self.unit.series_touched(self, n_series)

    def series_reach(self, n_series: int, n_steps: int) -> int:
        """Series in which the cells of one unit (add/remove) can lie: 1 for ``event``, K for
        ``user``, ``min(S, K w)`` for ``w-event`` (K series per step, chosen afresh each step)."""
        return self.unit.series_reach(self, n_series, n_steps)

    def series_spread(self, n_series: int, n_steps: int) -> tuple[tuple[int, int], ...]:
        """The worst spread of one unit's cells (add/remove) over the series, for a bound that sums
        a concave non-decreasing function of each series' changed cells: the ``K x steps`` cells
        as evenly as possible over ``series_reach`` series, as ``((series, cells each), ...)``.
        No series gets more than ``steps_per_series`` cells (K <= S), so the spread is attainable."""
        total = self.series_touched(n_series) * self.steps_per_series(n_steps)
        n = min(self.series_reach(n_series, n_steps), total)
        q, r = divmod(total, n)
        return tuple((count, cells) for count, cells in ((r, q + 1), (n - r, q)) if count)

    def spread_sum(self, n_series: int, n_steps: int, per_series: Callable[[int], float]) -> float:
        """The largest sum over series of ``per_series(changed cells)`` for one unit, ``per_series``
        concave and non-decreasing with ``per_series(0) = 0``; twice the add/remove figure under
        substitution (module docstring)."""
        one = sum(count * per_series(cells) for count, cells in self.series_spread(n_series, n_steps))
        return (2 if self.neighbouring == "substitute" else 1) * one

    def series_changed(self, n_series: int, n_steps: int) -> int:
        """Series whose values can differ between neighbours: the reach, doubled under substitution
        (the old and the new unit's series), at most S."""
        factor = 2 if self.neighbouring == "substitute" else 1
        return min(n_series, factor * self.series_reach(n_series, n_steps))

    def changed_cells(self, n_series: int, n_steps: int) -> tuple[int, int]:
        """``(series, cells)``: the most series whose values can differ between neighbours
        (:meth:`series_changed`) and the most changed cells over all of them (:meth:`cells`, at most T
        in each). For accountings that treat the unit's cells jointly and depend on their spread only
        through the number of series (the subsampling mechanisms)."""
        series = self.series_changed(n_series, n_steps)
        return series, min(self.cells(n_series, n_steps), series * n_steps)

    def cells(self, n_series: int, n_steps: int) -> int:
        """Largest number of panel cells in which two neighbouring datasets differ."""
        factor = 2 if self.neighbouring == "substitute" else 1
        return factor * self.series_touched(n_series) * self.steps_per_series(n_steps)

    def l1(self, n_series: int, n_steps: int) -> float:
        cells = self.cells(n_series, n_steps)
        box = cells * self.max_per_step
        return box if self.max_norm is None else min(box, math.sqrt(self._norm_factor() * cells) * self.max_norm)

    def l2(self, n_series: int, n_steps: int) -> float:
        box = math.sqrt(self.cells(n_series, n_steps)) * self.max_per_step
        return box if self.max_norm is None else min(box, math.sqrt(self._norm_factor()) * self.max_norm)

    def _norm_factor(self) -> int:
        """2 under substitution (two non-negative vectors of norm <= C: module docstring), else 1."""
        return 2 if self.neighbouring == "substitute" else 1

    def describe(self, id_column: str | None = None) -> str:
        """The neighbouring relation in words, for the report."""
        return describe_relation(self.level, self.neighbouring, self.w, id_column)

    def privacy_unit(self, n_series: int, id_column: str | None, enforced: bool) -> PrivacyUnit:
        """The report's :class:`PrivacyUnit` for these bounds on ``n_series`` series."""
        return PrivacyUnit(
            level=self.level,
            relation=self.neighbouring,
            neighbouring=self.describe(id_column),
            max_per_step=self.max_per_step,
            max_steps=self.max_steps if self.unit.uses_max_steps else None,
            w=self.w if self.unit.uses_w else None,
            series_per_unit=self.series_touched(n_series),
            id_column=id_column,
            enforced=enforced,
            max_norm=self.max_norm,
        )


def describe_relation(level: str, relation: str, w: int | None = None, id_column: str | None = None) -> str:
    """The words of a release's neighbouring relation (:meth:`ContributionBounds.describe`). Other
    commands (mean-estimate, forecast-train) state relations of their own under the same level
    and relation names; :func:`tsdp.accounting.compose.check_composable` tells them apart by these words."""
    who = f"user (identified by column {id_column!r})" if id_column else "user"
    return NEIGHBOURING[relation].format(what=UNIT_LEVELS[level].what(w, who))

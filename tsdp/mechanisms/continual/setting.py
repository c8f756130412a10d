"""``StreamSetting``: every public parameter of a continual release, validated once.

A stream publishes, at each of ``horizon`` steps, the requested ``outputs`` of ``n_series`` series.
Everything here is public (declared before any data is read); the privacy map
(:mod:`.privacy`), the accuracy (:mod:`.accuracy`) and the release (:mod:`.release`) are functions of
a setting and nothing else (plus the data and the stream's secret for the release).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, fields

from tsdp.accounting.budget import check_delta, check_epsilon
from tsdp.accounting.samplers import sampler_of
from tsdp.accounting.sensitivity import ContributionBounds
from tsdp.errors import UsageError
from tsdp.mechanisms.continual.workloads import parse_outputs

STRATEGIES = ("independent", "tree", "toeplitz", "banded")
MAX_HORIZON = 100_000


@dataclass(frozen=True)
class StreamSetting:
    """The public parameters of one stream.

    ``unit``: ``event`` (one step of one series changed by at most ``max_per_step``), ``w-event``
    (any ``w`` consecutive steps, in at most ``series_per_user`` series per step) or ``user`` (at most
    ``max_steps`` participations per series, optionally ``min_separation`` steps apart, in at most
    ``series_per_user`` series); neighbouring is add/remove. ``strategy`` is resolved (never
    ``auto``: :func:`tsdp.mechanisms.continual.choose` resolves it); ``band`` is the number of
    non-zero diagonals of C for ``banded`` (None otherwise).
    """

    horizon: int
    epsilon: float
    delta: float
    unit: str
    w: int | None
    max_per_step: float
    max_steps: int | None
    min_separation: int | None
    series_per_user: int
    n_series: int
    outputs: tuple[str, ...]
    strategy: str
    sampler: str = "hardened"
    band: int | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "outputs", parse_outputs(self.outputs))
        if isinstance(self.horizon, bool) or not isinstance(self.horizon, int) or not 1 <= self.horizon <= MAX_HORIZON:
            raise UsageError(f"stream horizon must be an integer in [1, {MAX_HORIZON}], got {self.horizon!r}")
        check_epsilon(self.epsilon)
        check_delta(self.delta)
        if not (isinstance(self.n_series, int) and self.n_series >= 1):
            raise UsageError(f"the number of series must be an integer >= 1, got {self.n_series!r}")
        if not (isinstance(self.series_per_user, int) and 1 <= self.series_per_user):
            raise UsageError(f"--series-per-user must be an integer >= 1, got {self.series_per_user!r}")
        self.bounds  # validates unit, w, max_steps, max_per_step
        if self.min_separation is not None:
            if self.unit != "user":
                raise UsageError(f"min_separation applies to --unit user only; with --unit {self.unit} remove it")
            if not (isinstance(self.min_separation, int) and self.min_separation >= 1):
                raise UsageError(f"min_separation must be an integer >= 1, got {self.min_separation!r}")
        if self.strategy not in STRATEGIES:
            raise UsageError(f"stream strategy must be one of auto, {', '.join(STRATEGIES)}, got {self.strategy!r}")
        if (self.strategy == "banded") != (self.band is not None):
            raise UsageError("a band is given exactly for the banded strategy")
        if self.band is not None and not (isinstance(self.band, int) and 1 <= self.band <= self.horizon):
            raise UsageError(f"band must be an integer in [1, horizon={self.horizon}], got {self.band!r}")
        sampler_of(self.sampler)  # a known name (the setting keeps it: its digest and JSON hold the name)
        if not math.isfinite(self.max_per_step):
            raise UsageError(f"--max-per-step must be finite, got {self.max_per_step}")

    @property
    def bounds(self) -> ContributionBounds:
        """The release vocabulary's contribution bounds of this unit (validates them)."""
        return ContributionBounds(
            level=self.unit, max_per_step=float(self.max_per_step),
            max_steps=self.max_steps if self.unit == "user" else None,
            w=self.w if self.unit == "w-event" else None,
            series_per_unit=self.series_per_user)

    @property
    def series_touched(self) -> int:
        """K: series whose values one unit can change (1 for an event)."""
        return self.bounds.series_touched(self.n_series)

    def to_dict(self) -> dict:
        out = asdict(self)
        out["outputs"] = list(self.outputs)
        return out

    @classmethod
    def from_dict(cls, data: dict) -> "StreamSetting":
        names = {f.name for f in fields(cls)}
        unknown = set(data) - names
        if unknown:
            raise UsageError(f"unknown stream setting field(s): {', '.join(sorted(unknown))}")
        return cls(**{**data, "outputs": tuple(data["outputs"])})

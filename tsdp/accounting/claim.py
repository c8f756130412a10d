"""``PrivacyClaim``: the one currency between mechanisms, the accountant and the report.

A claim states what is protected (the unit), under which definition, with which parameters, and
which theorem proves it. It also carries machine-readable mechanism events from which the
accountant can rebuild a dominating privacy-loss distribution, so that reports compose tightly.
Every epsilon in a claim is an upper bound unless ``bound == "lower"``.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import asdict, dataclass, field
from typing import Any

from tsdp.accounting.sensitivity import PrivacyUnit

DEFINITIONS = ("approx-dp", "pure-dp", "lip")
EVENT_KINDS = ("gaussian", "laplace", "gaussian-mixture", "discrete-gaussian", "discrete-laplace",
               "discrete-gaussian-mixture", "exponential")
DISCRETE_KINDS = ("discrete-gaussian", "discrete-laplace", "discrete-gaussian-mixture")
MIXTURE_KINDS = ("gaussian-mixture", "discrete-gaussian-mixture")
LATTICE_GAUSSIAN_KINDS = ("discrete-gaussian", "discrete-gaussian-mixture")


@dataclass(frozen=True)
class MechanismEvent:
    """One additive-noise mechanism, repeated ``count`` times on independent coordinates.

    ``gaussian``: noise N(0, noise^2) on a vector of L2 sensitivity ``sensitivity``.
    ``laplace``: Laplace noise of scale ``noise`` on ``count`` coordinates, each of which a
    neighbour changes by at most ``sensitivity``; the ``count``-fold composition of the 1-D pair
    Laplace(0, b) vs Laplace(sensitivity, b) dominates the release.
    ``gaussian-mixture``: Gaussian noise N(0, noise^2) whose L2 sensitivity is random and public
    after the fact (e.g. it depends on sampled time steps that are released): ``mixture`` lists
    ``(weight, sensitivity)`` pairs and the privacy profile is
    ``sum_k weight_k * deltaGauss(eps; sensitivity_k / noise)``; ``sensitivity`` is the largest one.
    Each of the ``count`` repetitions is independent.
    ``discrete-gaussian`` / ``discrete-laplace``: the hardened sampler's noise, ``granularity`` times
    a discrete Gaussian of parameter ``noise / granularity`` (resp. a discrete Laplace of scale
    ``noise / granularity``) on the integers, added to values rounded to multiples of
    ``granularity``. ``sensitivity`` already includes that rounding (see
    :mod:`tsdp.accounting.discrete`), and for the Laplace it is a whole multiple of the granularity.
    A discrete Gaussian's ``lattice_coords`` is the number m of noisy values a unit can change per
    repetition: its profile is the continuous one plus ``(1 + e^eps) m 0.025 (granularity / noise)^2``
    (:mod:`tsdp.accounting.discrete`).
    ``discrete-gaussian-mixture``: a ``gaussian-mixture`` whose noise is the hardened sampler's
    discrete Gaussian on the ``granularity`` lattice, the mixture's sensitivities covering the
    rounding. Conditionally on the public component the release is a discrete Gaussian mechanism
    changing at most ``lattice_coords`` values per repetition, so its profile is the mixture of
    continuous profiles plus the same rounding slack (:mod:`tsdp.accounting.discrete`).
    ``exponential``: the exponential mechanism (McSherry and Talwar 2007, Theorem 6) choosing among
    public candidates with probabilities proportional to ``exp(-score / noise)`` for a score of
    sensitivity ``sensitivity``: pure ``2 sensitivity / noise``-DP per repetition
    (:mod:`tsdp.mechanisms.bounds`).
    """

    kind: str
    sensitivity: float
    noise: float
    count: int = 1
    mixture: tuple[tuple[float, float], ...] | None = None
    granularity: float | None = None
    lattice_coords: int | None = None

    def __post_init__(self) -> None:
        if self.kind not in EVENT_KINDS:
            raise ValueError(f"unknown mechanism event kind {self.kind!r}")
        if (self.kind in DISCRETE_KINDS) != (self.granularity is not None):
            raise ValueError("a granularity is given exactly for discrete (hardened sampler) events")
        if (self.kind in LATTICE_GAUSSIAN_KINDS) != (self.lattice_coords is not None):
            raise ValueError("lattice_coords (the noisy values a unit changes per repetition) is given exactly for "
                             "discrete-gaussian and discrete-gaussian-mixture events")
        if self.lattice_coords is not None and not (isinstance(self.lattice_coords, int)
                                                    and not isinstance(self.lattice_coords, bool)
                                                    and self.lattice_coords >= 1):
            raise ValueError(f"event lattice_coords must be an integer >= 1, got {self.lattice_coords!r}")
        if self.granularity is not None and not (self.granularity > 0 and math.isfinite(self.granularity)):
            raise ValueError(f"event granularity must be positive, got {self.granularity}")
        if not (self.sensitivity > 0 and self.noise > 0 and self.count >= 1):
            raise ValueError("mechanism event needs positive sensitivity, noise and count")
        if (self.kind in MIXTURE_KINDS) != (self.mixture is not None):
            raise ValueError("a mixture is given exactly for gaussian-mixture and discrete-gaussian-mixture events")
        if self.mixture is not None:
            object.__setattr__(self, "mixture", tuple((float(w), float(s)) for w, s in self.mixture))
            weights = [w for w, _ in self.mixture]
            if min(weights) < 0 or abs(sum(weights) - 1) > 1e-9 or any(s < 0 for _, s in self.mixture):
                raise ValueError("mixture weights must be >= 0 and sum to 1, sensitivities >= 0")


@dataclass(frozen=True)
class PrivacyClaim:
    """A privacy guarantee and the evidence for it."""

    definition: str
    unit: PrivacyUnit
    epsilon: float | None
    delta: float | None
    mechanism: str
    theorem: str
    events: tuple[MechanismEvent, ...] = ()
    parameters: dict[str, Any] = field(default_factory=dict)
    bound: str = "upper"

    def __post_init__(self) -> None:
        if self.definition not in DEFINITIONS:
            raise ValueError(f"unknown privacy definition {self.definition!r}")
        if self.definition == "lip":
            if self.epsilon is not None or self.delta is not None:
                raise ValueError("a LIP claim carries no epsilon or delta")
            return
        for name, value in (("epsilon", self.epsilon), ("delta", self.delta)):
            if isinstance(value, bool) or not (value is None or isinstance(value, numbers.Real)):
                raise ValueError(f"claim {name} must be a number, got {value!r}")  # true is no 1.0
        if self.epsilon is None or not (self.epsilon >= 0 and math.isfinite(self.epsilon)):
            raise ValueError(f"claim epsilon must be finite and >= 0, got {self.epsilon}")
        if self.definition == "pure-dp" and self.delta not in (None, 0, 0.0):
            raise ValueError("a pure-dp claim has delta 0")
        if self.definition == "approx-dp" and not (self.delta is not None and 0 <= self.delta < 1):
            raise ValueError(f"claim delta must be in [0, 1), got {self.delta}")
        if self.bound not in ("upper", "lower"):
            raise ValueError(f"claim bound must be 'upper' or 'lower', got {self.bound!r}")

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["unit"] = self.unit.to_dict()
        out["events"] = [{k: v for k, v in asdict(e).items() if not (k in ("mixture", "granularity", "lattice_coords") and v is None)}
                         for e in self.events]
        if self.definition == "pure-dp":
            out["delta"] = 0.0
        if self.definition == "lip":  # LIP has no epsilon or DP delta: the keys do not appear at all
            del out["epsilon"], out["delta"]
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "PrivacyClaim":
        return cls(
            definition=data["definition"],
            unit=PrivacyUnit(**data["unit"]),
            epsilon=data.get("epsilon"),
            delta=data.get("delta"),
            mechanism=data["mechanism"],
            theorem=data["theorem"],
            events=tuple(MechanismEvent(**e) for e in data.get("events", ())),
            parameters=dict(data.get("parameters", {})),
            bound=data.get("bound", "upper"),
        )

"""What a release mechanism is to tsdp: the protocol every entry of
:data:`tsdp.mechanisms.registry.MECHANISMS` implements (developer documentation).

A mechanism turns private values into a release whose privacy claim follows from public parameters
only. tsdp keeps the two apart:

* :class:`Setting`, the public parameters: the budget (epsilon, delta), the panel (S series x T
  steps and the declared unit's contribution bounds), the noise sampler
  (:mod:`tsdp.accounting.samplers`) and the mechanism's own options (its ``options`` names, resolved
  to their defaults). A mechanism whose claim depends on figures it releases (FAST's and the
  subsampling mechanisms' sampled steps are public once released) takes those figures in
  ``Setting.released``.
* ``privacy_map(setting) -> PrivacyMap``: a pure function (no data, no randomness) from the setting
  to the claim: the events the accountant composes, the claim's parameters as the report records them,
  epsilon and delta, the definition (pure-dp / approx-dp) and the theorem that proves it, and the noise
  scale the release draws with. The release calls it for its claim; ``tsdp verify`` rebuilds the
  setting from a report's recorded parameters and calls the same map, so the release and its check
  cannot drift apart.
* ``release(values, panel, rng, setting) -> Release``: draws the noise the map calibrated and applies
  the mechanism (values: the cellwise mechanisms take the flat chunks of the panel, the others an
  (S, T) matrix).
* ``accuracy(claim, alpha, target, sampled) -> Accuracy``: the (1 - alpha) interval of the released
  values from the claim's public parameters (the interval formulas live in :mod:`tsdp.accuracy`).

Besides, each mechanism states for the command line and the reports: ``name`` (its ``--mechanism``
value), ``describes`` (verify's one-line description), ``theorem_words`` (the words every report of it
names, any one of each tuple), ``remedy`` (the options that shrink a noisy release's noise), the flags
``cellwise`` (cells released independently, in file order) and ``summable`` (``--accuracy-for sum``
holds), ``pure(noise)`` (pure epsilon-DP with that noise, so --delta must be absent) and ``options``
(the ``ReleaseOptions`` fields that apply to it only, each with the keyword its ``Setting.options``
uses and its default: any other mechanism's option given is refused generically).

Optional, where a mechanism needs them: ``linear`` (the release is ``A_w(values) + N_w`` for its
randomness w, so ``--evaluate`` splits off the noise by a run on zeros), ``noiseless(values, result)``
(the noiseless part of a release that is not linear, e.g. FAST given its released pattern),
``prefetches`` (its float noise is standard normals that may be drawn before the data is read),
``dry_run_caveat`` (what a ``--dry-run`` of it cannot show), ``caveats(options, alpha_given)``
(warnings about how its options were given), ``parsers`` (option field -> parser of the command
line's text). A heavy mechanism keeps its registry entry light and imports its release when it
runs (``tsdp.mechanisms.subsample.entries``).

A mechanism with a command of its own (continual release, mean estimation) implements the same
``privacy_map`` / ``release`` pair over its own setting type; ``Setting`` is the one of ``tsdp
release``'s panels. Adding a release mechanism: its module (a class with the attributes above and an
instance) and one line in :mod:`tsdp.mechanisms.registry`, plus its tests.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Mapping, Protocol

from tsdp.accounting.claim import PrivacyClaim

if TYPE_CHECKING:
    import numpy as np

    from tsdp.accounting.claim import MechanismEvent
    from tsdp.accuracy.result import Accuracy
    from tsdp.mechanisms.baseline import Panel, Release
    from tsdp.accounting.samplers import Sampler


@dataclass(frozen=True)
class Setting:
    """The public parameters a release's claim follows from (module docstring)."""

    epsilon: float
    delta: float | None
    panel: "Panel"
    sampler: "Sampler"
    options: Mapping[str, Any] = field(default_factory=dict)
    released: Mapping[str, Any] = field(default_factory=dict)  # public figures the release publishes


@dataclass(frozen=True)
class PrivacyMap:
    """What a mechanism's privacy map gives for a setting: the claim without its unit, and the noise
    the release draws (``scale``: sigma or the Laplace b; ``sampler`` on its lattice)."""

    definition: str
    epsilon: float
    delta: float
    theorem: str
    events: tuple["MechanismEvent", ...]
    parameters: dict
    scale: float
    sampler: "Sampler"
    warnings: tuple = ()

    def claim(self, mechanism: str, panel: "Panel") -> "PrivacyClaim":
        """The claim for exactly ``panel``'s declared unit."""
        return PrivacyClaim(
            definition=self.definition,
            unit=panel.bounds.privacy_unit(panel.n_series, panel.id_column, panel.enforced),
            epsilon=float(self.epsilon), delta=float(self.delta), mechanism=mechanism, theorem=self.theorem,
            events=self.events, parameters=self.parameters,
        )


class Mechanism(Protocol):
    """A release mechanism (module docstring)."""

    name: str
    describes: str
    theorem_words: tuple[tuple[str, ...], ...]
    remedy: str
    cellwise: bool
    summable: bool
    linear: bool
    norm_bounded: bool  # noise calibrated to the panel's L2 sensitivity alone, which a user norm bound caps
    dry_run_caveat: str | None
    options: Mapping[str, tuple[str, Any]]  # ReleaseOptions field -> (keyword in Setting.options, default)

    def pure(self, noise: str | None) -> bool: ...

    def privacy_map(self, setting: Setting) -> PrivacyMap: ...

    def release(self, values: Any, panel: "Panel", rng: "np.random.Generator", setting: Setting,
                **runtime: Any) -> "Release": ...

    def accuracy(self, claim: "PrivacyClaim", alpha: float, target: str = "cell",
                 sampled: Any = None) -> "Accuracy": ...


REMEDY_COMMON = "a larger --epsilon, tighter caps (--max-per-step, --max-steps, --series-per-user)"

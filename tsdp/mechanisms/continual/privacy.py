"""The privacy map of a stream: public setting -> noise scale, sensitivity, events and claim.

Theorem. The stream publishes ``B_i y`` for each output i, where ``y = C x + z`` is released once
over the whole horizon (row by row as steps arrive; C is lower triangular so row t depends on
x_1..x_t only) and ``B_i C = A_i``. The only access to the data is the Gaussian mechanism on ``C x``
(all series stacked), whose L2 sensitivity for the declared unit is ``Delta = sqrt(K) M s(C)``
(:mod:`.sensitivity`); every published value is post-processing of y. So the stream is
(epsilon, delta)-DP for the unit when sigma meets the exact Gaussian profile at ``Delta``
(Balle and Wang 2018, Theorem 8; :func:`tsdp.accounting.gaussian.analytic_sigma`). Continual
observation changes nothing: the adversary sees the rows of one y, and the rows released so far are
a sub-vector of it (post-processing of the whole).

Hardened sampler (default), as :func:`tsdp.mechanisms.baseline.release_gaussian` does: each
encoded value is rounded to the granularity lattice and gets ``g`` times discrete Gaussian noise,
so the sensitivity covers the rounding, ``Delta' = Delta + g sqrt(m)`` for the ``m`` noisy values a
unit can change, and delta pays the rounding slack ``(1 + e^eps) m 0.025 (g / sigma)^2``
(:mod:`tsdp.accounting.discrete`). The event is a ``discrete-gaussian`` (resp. ``gaussian``) of
sensitivity ``Delta'`` (``Delta``) and noise sigma, once: ``account compose`` and the ledger treat
the whole stream as one spend.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import lru_cache

from tsdp.accounting import discrete as disc
from tsdp.accounting import gaussian as gauss
from tsdp.accounting.claim import MechanismEvent, PrivacyClaim
from tsdp.mechanisms.continual.factorization import factorization
from tsdp.mechanisms.continual.sensitivity import changed_values
from tsdp.mechanisms.continual.setting import StreamSetting
from tsdp.accounting.samplers import sampler_of

MECHANISM = "continual-gaussian"
STREAM_THEOREM = ("matrix mechanism for continual release: the Gaussian mechanism on the encoded stream C x "
                  "(L2 sensitivity sqrt(K) M s(C) for the declared unit), each published output B_i (C x + z) with "
                  "B_i C = A_i is post-processing (Li et al. 2015; Denisov, McMahan, Rush, Smith and Thakurta 2022)")
STRATEGY_NAMES = {
    "independent": "independent noise on every step (C = I)",
    "tree": "binary tree (Dwork, Naor, Pitassi and Rothblum 2010; Chan, Shi and Song 2011) with least-squares "
            "decoding (Honaker 2015)",
    "toeplitz": "square-root Toeplitz factorization, c_k = binom(2k, k) / 4^k (Henzinger, Upadhyay and Upadhyay "
                "2023; Fichtenberger, Henzinger and Upadhyay 2023)",
    "banded": "banded square-root factorization (Kalinin and Lampert 2024)",
}


@dataclass(frozen=True)
class StreamPrivacy:
    """What the privacy map proves for a setting (no data, no randomness)."""

    setting: StreamSetting
    sigma: float                      # noise s.d. of every encoded value, in data units
    sensitivity_per_series: float     # s(C): per series, per unit of M
    l2_sensitivity: float             # Delta = sqrt(K) M s(C)
    lattice_coords: int               # m: noisy values a unit can change (all its series)
    granularity: float | None         # hardened lattice g (None: float sampler)
    covered_sensitivity: float        # Delta' (= Delta for the float sampler)
    rounding_slack: float             # delta spent on the discrete noise (0 for float)
    theorem: str
    events: tuple[MechanismEvent, ...]
    parameters: dict = field(default_factory=dict)

    @property
    def epsilon(self) -> float:
        return float(self.setting.epsilon)

    @property
    def delta(self) -> float:
        return float(self.setting.delta)

    def claim(self, id_column: str | None = None, enforced: bool = False) -> PrivacyClaim:
        """The :class:`PrivacyClaim` of the stream (``id_column``/``enforced`` describe how the
        caller aggregated the data: they go in the unit only)."""
        s = self.setting
        return PrivacyClaim(
            definition="approx-dp",
            unit=s.bounds.privacy_unit(s.n_series, id_column, enforced),
            epsilon=self.epsilon, delta=self.delta, mechanism=MECHANISM, theorem=self.theorem,
            events=self.events, parameters=dict(self.parameters))


def privacy_map(setting: StreamSetting) -> StreamPrivacy:
    """The stream's noise scale, sensitivity, events and theorem (module docstring)."""
    return _privacy_map(setting)


@lru_cache(maxsize=256)
def _privacy_map(s: StreamSetting) -> StreamPrivacy:
    fac = factorization(s.strategy, s.horizon, s.band)
    per_series = fac.sensitivity(s.unit, s.w, s.max_steps, s.min_separation)
    K = s.series_touched
    l2 = math.sqrt(K) * float(s.max_per_step) * per_series
    coords = changed_values(fac.column_support, fac.n_rows, s.unit, s.horizon, s.n_series, K, s.w, s.max_steps,
                            s.min_separation)
    eps, delta = float(s.epsilon), float(s.delta)
    theorem = f"{STREAM_THEOREM}; {gauss.ANALYTIC_THEOREM}"
    def calibrate(budget: float, g: float | None):
        covered = l2 if g is None else disc.rounded_l2(l2, coords, g)
        return gauss.analytic_sigma(eps, budget, covered), covered

    # the sampler object owns "calibrate, pick the lattice, pay the slack, recalibrate" (as release does)
    sampler, sigma, covered = sampler_of(s.sampler).calibrate_gaussian(eps, delta, l2, coords, calibrate)
    g = sampler.granularity
    slack = 0.0
    if sampler.hardened:
        slack = sampler.lattice_record(eps, sigma, coords)[1]  # checks that sigma spans the lattice
        theorem = f"{theorem}; {disc.GAUSSIAN_THEOREM} (slack {slack:.3g} of delta)"
    events = (sampler.gaussian_event(l2, covered, sigma, coords),)
    parameters = {
        "noise": "gaussian", "sigma": sigma, "strategy": s.strategy, "strategy_name": STRATEGY_NAMES[s.strategy],
        "band": s.band, "horizon": s.horizon, "n_series": s.n_series, "outputs": list(s.outputs),
        "encoded_values_per_series": fac.n_rows, "sensitivity_per_series": per_series,
        "series_per_unit": K, "l2_sensitivity": l2, "min_separation": s.min_separation,
        "calibration": "analytic", "sampler": s.sampler,
    }
    if g is not None:
        parameters.update(granularity=g, rounded_l2_sensitivity=covered, lattice_coords=coords, rounding_slack=slack)
    return StreamPrivacy(s, sigma, per_series, l2, coords, g, covered, slack, theorem, events, parameters)

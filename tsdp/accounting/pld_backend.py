"""One interface to privacy-loss distributions (PLDs), whichever code composes them.

A PLD here is the pessimistic connect-the-dots PMF of a dominating pair on the grid of losses
``i * d`` plus a mass at +infinity (Doroshenko et al. 2022, Algorithm 1; Schuchardt et al. 2025,
Lemma D.16), one PMF for a symmetric relation (or a switching construction) and two for add/remove
adjacency (the remove and the add direction compose separately, Zhu, Dong and Wang 2022). Every
accountant in tsdp uses it through :class:`Pld` and builds it through a :class:`PldBackend`:

* :data:`DENSE`: numpy only (:mod:`tsdp.accounting.dense`): FFT self-composition with a Chernoff
  window; the fast path of the DP-SGD accountants, which compose one step thousands of times;
* :data:`DP_ACCOUNTING`: Google's dp-accounting (:mod:`tsdp.accounting.pld`), imported only when
  a PLD is built; the composition of release events and of the structured DP-SGD accountant.

Both back ends read epsilon and delta off the same kind of PMF; only the composition differs
(truncation of the tails, both pessimistic). PLDs compose only with PLDs of their own back end.
This module imports neither numpy nor dp-accounting: checking a claim without a PLD needs neither.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol, Sequence

if TYPE_CHECKING:
    import numpy as np

    from tsdp.accounting.profiles import Profile


class Pld(Protocol):
    """A dominating privacy-loss distribution: composition and the two read-offs."""

    def self_compose(self, times: int, tail_mass: float) -> "Pld":
        """The ``times``-fold composition; mass cut from the tails (at most ``tail_mass``) is
        moved to +infinity (pessimistic)."""

    def compose(self, other: "Pld", tail_mass: float) -> "Pld":
        """The composition with ``other`` (a PLD of the same back end)."""

    def epsilon(self, delta: float) -> float:
        """Smallest epsilon >= 0 with delta(epsilon) <= ``delta`` (an upper bound)."""

    def delta(self, epsilon: float) -> float:
        """delta(epsilon), the hockey-stick divergence of the pair at e^epsilon."""


class PldBackend(Protocol):
    """Builds :class:`Pld` objects from a dominating pair's privacy profile or from sampled profiles."""

    name: str

    def from_profile(self, profile: "Profile", discretization: float) -> Pld:
        """The PLD of a symmetric (or switching) ``profile`` on the grid ``i * discretization``."""

    def from_directions(self, remove: "Profile", add: "Profile", discretization: float) -> Pld:
        """The add/remove PLD whose remove and add directions have these profiles."""

    def from_sampled_profiles(self, directions: Sequence[tuple[int, "np.ndarray"]], discretization: float) -> Pld:
        """The PLD of profiles already sampled on the grid: for each direction (one, or remove and
        add), ``(lower, deltas)`` with ``deltas[i] = delta((lower + i) * discretization)``."""


class _Dense:
    """The numpy back end (:class:`tsdp.accounting.dense.DensePld`)."""

    name = "dense"

    def from_profile(self, profile, discretization):
        from tsdp.accounting.dense import DensePld

        return DensePld((self._pmf(profile, discretization),))

    def from_directions(self, remove, add, discretization):
        from tsdp.accounting.dense import DensePld

        return DensePld((self._pmf(remove, discretization), self._pmf(add, discretization)))

    def from_sampled_profiles(self, directions, discretization):
        from tsdp.accounting.dense import DensePld, DensePmf

        return DensePld(tuple(DensePmf.from_profile_deltas(lower, deltas, discretization)
                              for lower, deltas in directions))

    @staticmethod
    def _pmf(profile, discretization):
        from tsdp.accounting.dense import DensePmf
        from tsdp.accounting.pld import discretize

        losses, probs, infinity, _ = discretize(profile, discretization)
        return DensePmf(int(losses[0]), probs, infinity, discretization)


class _DpAccounting:
    """The dp-accounting back end (:class:`tsdp.accounting.pld.DiscretePLD`)."""

    name = "dp-accounting"

    def from_profile(self, profile, discretization):
        from tsdp.accounting.pld import pld_from_profile

        return pld_from_profile(profile, discretization)

    def from_directions(self, remove, add, discretization):
        from tsdp.accounting.pld import pld_from_directions

        return pld_from_directions(remove, add, discretization)

    def from_sampled_profiles(self, directions, discretization):
        from tsdp.accounting.pld import pld_from_sampled_profiles

        return pld_from_sampled_profiles(directions, discretization)


DENSE: PldBackend = _Dense()
DP_ACCOUNTING: PldBackend = _DpAccounting()

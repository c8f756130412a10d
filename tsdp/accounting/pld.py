"""Privacy-loss distributions (PLDs) built from privacy profiles, composed by dp-accounting.

``pld_from_profile`` evaluates a profile on the whole grid ``eps_i = i * d`` at once and turns it
into the pessimistic connect-the-dots PMF of Doroshenko et al. (2022, Algorithm 1; Schuchardt et
al. 2025, Lemma D.16): with ``delta_i = delta(eps_i)`` and ``e = exp(d)``,

    p_first = 1 - delta_1 + (delta_2 - delta_1) / (e - 1)
    p_i     = ((delta_{i+1} - delta_i) - e (delta_i - delta_{i-1})) / (e - 1)
    p_last  = (delta_n - delta_{n-1}) / (1/e - 1),      mass at +infinity = delta_n.

Any finite grid gives a valid dominating PLD; the grid runs from -L to L where L is the loss at
which the profile falls below about 1e-20 (the negative end mirrors it through the identity of
:mod:`tsdp.accounting.profiles`). The PMF goes to dp-accounting through its public
``create_from_rounded_probability``; composition and read-off use ``self_compose``/``compose``
and ``get_epsilon_for_delta``/``get_delta_for_epsilon``. It is the dp-accounting back end of
:mod:`tsdp.accounting.pld_backend`, through which the accountants use it. Sizes are predicted before anything is
built, and a grid that would exhaust memory is refused with the discretization to use instead.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from tsdp.accounting.grid import DEFAULT_DISCRETIZATION, TAIL_MASS, tail_mass_for  # noqa: F401  (re-exported)
from tsdp.accounting.profiles import Profile
from tsdp.errors import GridTooLarge, NumericalError, UsageError

MAX_GRID = 4_000_000  # points of one PMF (32 MB of float64)
MAX_COMPOSED = 40_000_000  # predicted points of a composed PMF before truncation


def grid_bounds(profile: Profile, discretization: float) -> tuple[int, int]:
    """Integer range ``[lo, hi]`` of the rounded privacy losses of the PMF."""
    top = max(profile.max_loss(), discretization)
    if not math.isfinite(top):
        raise GridTooLarge("the privacy loss is unbounded at this noise level (largest loss "
                             f"{top}); raise --noise-multiplier")
    hi = int(math.ceil(top / discretization))
    return -hi, hi


def connect_the_dots(deltas: np.ndarray, discretization: float) -> tuple[np.ndarray, float]:
    """Pessimistic connect-the-dots masses for a non-increasing profile on a regular grid.

    Returns the masses on the grid points and the mass at +infinity.
    """
    deltas = np.maximum.accumulate(deltas[::-1])[::-1]  # enforce monotonicity upwards (pessimistic)
    if deltas.size == 1:
        return np.array([1.0 - deltas[0]]), float(deltas[0])
    e = math.exp(discretization)
    diffs = np.diff(deltas)  # delta_{i+1} - delta_i  (<= 0)
    probs = np.empty_like(deltas)
    probs[0] = 1.0 - deltas[0] + diffs[0] / (e - 1.0)
    probs[1:-1] = (diffs[1:] - e * diffs[:-1]) / (e - 1.0)
    probs[-1] = diffs[-1] / (math.exp(-discretization) - 1.0)
    return np.clip(probs, 0.0, None), float(deltas[-1])


@dataclass(frozen=True)
class DiscretePLD:
    """A dp-accounting PLD together with what is needed to predict the cost of composing it."""

    pld: object
    size: int
    mean: float
    std: float
    discretization: float
    compositions: int = 1

    def self_compose(self, times: int, tail_mass: float = TAIL_MASS) -> "DiscretePLD":
        """The ``times``-fold composition, refused (exit 5) when it would not fit in memory.

        The composed losses concentrate on ``times * mean +- 12 sqrt(times) * std``; dp-accounting
        truncates the tails beyond that (mass 1e-15, pessimistically), so this width plus one PMF
        is what it has to hold.
        """
        if times < 1:
            raise ValueError("compose at least once")
        width = (abs(times * self.mean) + 12 * math.sqrt(times) * self.std) / self.discretization + self.size
        if width > MAX_COMPOSED:
            coarser = self.discretization * width / MAX_COMPOSED
            raise GridTooLarge(
                f"composing {times:,} times would need a privacy-loss grid of about {width:,.0f} "
                f"points; use --discretization {_round_up(coarser)} or coarser"
            )
        composed = self.pld if times == 1 else self.pld.self_compose(times, tail_mass_truncation=tail_mass)
        return replace(self, pld=composed, compositions=self.compositions * times)

    def compose(self, other: "DiscretePLD", tail_mass: float = TAIL_MASS) -> "DiscretePLD":
        return replace(self, pld=self.pld.compose(other.pld, tail_mass_truncation=tail_mass),
                       compositions=self.compositions + other.compositions)

    def epsilon(self, delta: float) -> float:
        """Smallest epsilon >= 0 with delta(epsilon) <= ``delta`` (an upper bound)."""
        eps = self.pld.get_epsilon_for_delta(delta)
        if eps is None or not math.isfinite(eps):
            raise NumericalError(
                f"no finite epsilon reaches delta={delta:g}: the mass at infinite privacy loss "
                "exceeds it; use a larger --delta or more noise"
            )
        return max(0.0, float(eps))

    def delta(self, epsilon: float) -> float:
        return min(1.0, max(0.0, float(self.pld.get_delta_for_epsilon(epsilon))))


def check_discretization(discretization: float) -> None:
    """A UsageError unless the privacy-loss grid step is a finite number > 0."""
    if not (discretization > 0 and math.isfinite(discretization)):
        raise UsageError(f"--discretization must be finite and > 0, got {discretization}")


def discretize(profile: Profile, discretization: float):
    """The connect-the-dots PMF of ``profile`` on its grid: ``(losses, probs, infinity, pmf)``,
    the integer losses, their masses, the mass at +infinity and the positive masses by loss."""
    check_discretization(discretization)
    lo, hi = grid_bounds(profile, discretization)
    size = hi - lo + 1
    if size > MAX_GRID:
        coarser = discretization * size / MAX_GRID
        raise GridTooLarge(
            f"the privacy-loss grid would have {size:,} points (largest loss {hi * discretization:.4g}); "
            f"use --discretization {_round_up(coarser)} or coarser"
        )
    return _sampled(lo, profile.delta(np.arange(lo, hi + 1) * discretization), discretization)


def _sampled(lower: int, deltas: np.ndarray, discretization: float):
    """:func:`discretize`'s tuple for a profile sampled at ``(lower + i) * discretization``."""
    probs, infinity = connect_the_dots(np.asarray(deltas, dtype=float), discretization)
    losses = lower + np.arange(probs.size)
    keep = probs > 0
    return losses, probs, infinity, dict(zip(losses[keep].tolist(), probs[keep].tolist()))


def _round_up(value: float) -> str:
    """``value`` rounded up (never down) to two significant digits: it is a lower limit."""
    scale = 10.0 ** (math.floor(math.log10(value)) - 1)
    return f"{math.ceil(value / scale) * scale:.2g}"


def _moments(losses, probs, discretization) -> tuple[float, float]:
    values = losses * discretization
    total = probs.sum()
    if total <= 0:
        return 0.0, 0.0
    mean = float(probs @ values / total)
    return mean, math.sqrt(max(float(probs @ (values - mean) ** 2 / total), 0.0))


def pld_from_profile(profile: Profile, discretization: float = DEFAULT_DISCRETIZATION) -> DiscretePLD:
    """A dp-accounting PLD that dominates a symmetric (or switching) ``profile``."""
    return _from_parts([discretize(profile, discretization)], discretization)


def pld_from_sampled_profiles(directions, discretization: float) -> DiscretePLD:
    """A dp-accounting PLD of profiles already sampled on the grid: for each direction (one, or
    remove and add), ``(lower, deltas)`` with ``deltas[i] = delta((lower + i) * discretization)``."""
    check_discretization(discretization)
    return _from_parts([_sampled(lower, deltas, discretization) for lower, deltas in directions], discretization)


def _from_parts(parts, discretization: float) -> DiscretePLD:
    """One part ``(losses, probs, infinity, pmf)``: a symmetric PLD; two: the remove and the add direction."""
    from dp_accounting.pld.privacy_loss_distribution import PrivacyLossDistribution

    if len(parts) == 1:
        losses, probs, infinity, pmf = parts[0]
        pld = PrivacyLossDistribution.create_from_rounded_probability(
            pmf, infinity, discretization, pessimistic_estimate=True)
        return DiscretePLD(pld, losses.size, *_moments(losses, probs, discretization), discretization)
    (r_losses, r_probs, r_inf, r_pmf), (a_losses, a_probs, a_inf, a_pmf) = parts
    pld = PrivacyLossDistribution.create_from_rounded_probability(
        r_pmf, r_inf, discretization, pessimistic_estimate=True,
        rounded_probability_mass_function_add=a_pmf, infinity_mass_add=a_inf, symmetric=False)
    moments = [_moments(r_losses, r_probs, discretization), _moments(a_losses, a_probs, discretization)]
    mean = max(abs(m) for m, _ in moments)
    std = max(s for _, s in moments)
    return DiscretePLD(pld, r_losses.size + a_losses.size, mean, std, discretization)


def pld_from_directions(remove: Profile, add: Profile,
                        discretization: float = DEFAULT_DISCRETIZATION) -> DiscretePLD:
    """A PLD for add/remove adjacency, whose two directions compose separately.

    Under add/remove adjacency a neighbouring pair is one or the other for the whole composition,
    so epsilon(delta) is the larger of the two composed directions (dp-accounting's non-symmetric
    PLD does exactly this).
    """
    return _from_parts([discretize(remove, discretization), discretize(add, discretization)], discretization)

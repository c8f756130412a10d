"""Standard (record-level) DP-SGD accounting: subsampled Gaussian steps, composed.

Each step samples records (Poisson with rate q, or a fixed-size batch of B of N records, q = B/N),
clips each record's gradient to norm C and adds N(0, sigma^2 C^2) noise to their sum. In units
of C the per-step dominating pairs are:

* Poisson sampling, add/remove one record (the Opacus / TF-Privacy / dp-accounting default):
  remove ``P = (1-q) N(0, s^2) + q N(1, s^2)`` vs ``Q = N(0, s^2)``, and add with the roles
  swapped - tight dominating pairs of the Poisson-subsampled Gaussian (Zhu, Dong and Wang 2022).
  Under add/remove a neighbouring pair is one direction for the whole training, so the two
  directions are composed separately and epsilon is the larger (as dp-accounting's
  ``PoissonSampledDpEvent(q, GaussianDpEvent(sigma))`` in its PLD accountant). Profiles in closed
  form: ``delta_remove(e) = q delta_G(log(1 + (e^e - 1)/q))`` for ``e > log(1-q)`` and
  ``delta_add(e) = (1 - (1-q) e^e) delta_G(log(q e^e / (1 - (1-q) e^e)))`` for ``e < -log(1-q)``,
  with ``delta_G`` the profile of N(1, s^2) vs N(0, s^2).
* Substitution of one record with fixed-size batches (B of N records drawn without replacement,
  q = B/N): ``(1-q) N(0, s^2) + q N(2, s^2)`` vs ``N(0, s^2)`` (Zhu, Dong and Wang 2022; Schuchardt
  et al. 2025, Prop. C.1), read through their switching construction (Lemma D.10) so that one
  PMF covers both orders of the pair.

Refused: fixed-size batches under add/remove (the batch changes meaning when the dataset size
does), and Poisson sampling under substitution. For the latter tsdp can prove only the pair above
(by advanced joint convexity, Balle, Barthe and Gaboardi 2018, Thm 2), which is several times
looser than the mixture-vs-mixture pair dp-accounting uses for it (epsilon 55 against 11 at
q = 0.01, sigma = 1, 10^4 steps); rather than print a bound that far above the likely truth,
it asks for add/remove (the standard DP-SGD guarantee) or fixed-size sampling.

Each per-step pair becomes a pessimistic connect-the-dots PMF on the grid (Doroshenko et al.
2022), built from the closed-form profiles over the whole grid at once, and is composed by FFT
(:mod:`tsdp.accounting.dense`). Every epsilon returned is an upper bound.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from tsdp.accounting.grid import DEFAULT_DISCRETIZATION, check_composed_delta, tail_mass_for
from tsdp.accounting.pld_backend import DENSE, Pld
from tsdp.accounting.budget import check_delta, check_epsilon
from tsdp.errors import GridTooLarge, NumericalError, TsdpError, UsageError
from tsdp.accounting.calibrate import largest_integer_within
from tsdp.accounting.noise_search import coarse_discretization, smallest_noise_within

SAMPLINGS = ("poisson", "fixed")
RELATIONS = ("add-remove", "substitution")
TAIL_Z = 9.7  # standard-normal quantile of tail mass 1.5e-22: where the grid of losses ends
POISSON_ADD_REMOVE = ("Zhu, Dong and Wang 2022: tight dominating pairs of the Poisson-subsampled Gaussian "
                      "under add/remove, the remove and add directions composed separately "
                      "(as dp_accounting's PLD of PoissonSampledDpEvent(q, GaussianDpEvent(sigma)))")
WITHOUT_REPLACEMENT = ("sampling without replacement under substitution: (1-q)N(0,s^2)+qN(2,s^2) vs N(0,s^2) "
                       "(Zhu, Dong and Wang 2022; Schuchardt et al. 2025, Prop. C.1), switching construction "
                       "(Schuchardt et al. 2025, Lemma D.10)")
ACCOUNTANT = "privacy-loss distribution: pessimistic connect-the-dots grid (Doroshenko et al. 2022), FFT composition"


@dataclass(frozen=True)
class SgdSetting:
    """Record sampling and noise of one DP-SGD step."""

    sampling_rate: float
    noise_multiplier: float
    sampling: str = "poisson"
    relation: str = "add-remove"

    def __post_init__(self) -> None:
        q, sigma = self.sampling_rate, self.noise_multiplier
        if not (isinstance(q, (int, float)) and math.isfinite(q) and 0 < q <= 1):
            raise UsageError(f"--sampling-rate must be in (0, 1], got {q}")
        if not (isinstance(sigma, (int, float)) and math.isfinite(sigma) and sigma > 0):
            raise UsageError(f"--noise-multiplier must be finite and > 0, got {sigma}")
        if self.sampling not in SAMPLINGS:
            raise UsageError(f"--sampling must be one of {', '.join(SAMPLINGS)}, got {self.sampling!r}")
        if self.relation not in RELATIONS:
            raise UsageError(f"--relation must be one of {', '.join(RELATIONS)}, got {self.relation!r}")
        if self.sampling == "fixed" and self.relation == "add-remove":
            raise UsageError("--sampling fixed is accounted under --relation substitution only (a fixed-size "
                             "batch changes meaning when a record is added or removed); use --relation "
                             "substitution, or --sampling poisson for add/remove")
        if self.sampling == "poisson" and self.relation == "substitution":
            raise UsageError("--sampling poisson is accounted under --relation add-remove (the standard DP-SGD "
                             "guarantee); for substitution use --sampling fixed (batches of exactly B records)")

    @property
    def theorem(self) -> str:
        return POISSON_ADD_REMOVE if self.relation == "add-remove" else WITHOUT_REPLACEMENT

    @property
    def relation_text(self) -> str:
        if self.relation == "add-remove":
            return "record level: adding or removing one record (add/remove)"
        return "record level: replacing one record by another (substitution)"

    def pld(self, discretization: float = DEFAULT_DISCRETIZATION) -> Pld:
        """The per-step privacy-loss distribution on the grid ``i * discretization``."""
        if not (math.isfinite(discretization) and discretization > 0):
            raise UsageError(f"--discretization must be > 0, got {discretization}")
        if self.relation == "add-remove":
            return poisson_gaussian_pld(self.sampling_rate, self.noise_multiplier, discretization)
        from tsdp.accounting.profiles import MixtureVsGaussian

        q = self.sampling_rate
        return DENSE.from_profile(MixtureVsGaussian((1 - q, q), (0.0, 2.0), self.noise_multiplier), discretization)


def poisson_gaussian_pld(q: float, sigma: float, discretization: float) -> Pld:
    """Remove and add PMFs of the Poisson-subsampled Gaussian (sensitivity 1, noise ``sigma``)."""
    from tsdp.accounting.gaussian import delta_for_epsilon

    mu = 1.0 / sigma
    log_keep = math.log1p(-q) if q < 1 else -math.inf  # log(1 - q)

    def loss(x: float) -> float:  # remove-direction privacy loss at output x
        z = (x - 0.5) / sigma**2
        # q = 1: no subsampling, the loss is z itself (log1p(expm1(z)) fails once expm1(z) rounds to -1)
        if q == 1:
            return z
        # log(1 - q + q e^z): e^z overflows past z = 709 (sigma below 0.03), so factor it out there
        return z + math.log(q + (1 - q) * math.exp(-z)) if z > 1 else math.log1p(q * math.expm1(z))

    low, high = loss(-sigma * TAIL_Z), loss(1 + sigma * TAIL_Z)

    def grid(lo: float, hi: float) -> tuple[int, np.ndarray]:
        first, last = math.floor(lo / discretization), math.ceil(hi / discretization)
        if last - first + 1 > 8_000_000:
            raise GridTooLarge(f"the privacy-loss grid would have {last - first + 1:,} points; "
                                 f"use --discretization {discretization * 10:g} or coarser")
        return first, np.arange(first, last + 1) * discretization

    first, eps = grid(low, high)
    remove = np.ones_like(eps) - np.exp(np.minimum(eps, 0.0))  # 1 - e^eps below log(1-q)
    live = eps > log_keep
    shifted = _gaussian_loss(eps[live], q)
    remove[live] = q * np.asarray(delta_for_epsilon(shifted, mu), dtype=float)

    first_add, eps_add = grid(-high, -low)
    add = np.zeros_like(eps_add)
    live = eps_add < -log_keep
    e = eps_add[live]
    rest = -np.expm1(e + log_keep) if q < 1 else np.ones_like(e)  # 1 - (1-q) e^eps
    with np.errstate(divide="ignore"):
        beta = math.log(q) + e - np.log(rest)
    add[live] = rest * np.asarray(delta_for_epsilon(beta, mu), dtype=float)
    return DENSE.from_sampled_profiles([(first, remove), (first_add, add)], discretization)


def _gaussian_loss(eps: np.ndarray, q: float) -> np.ndarray:
    """log(1 + (e^eps - 1) / q), the Gaussian's loss where the subsampled one's is ``eps``
    (``eps > log(1 - q)``); for large ``eps`` as ``eps - log q + log(1 - (1 - q) e^-eps)``, since
    e^eps overflows past 709 (an infinite loss would drop the profile's mass there)."""
    out = np.empty_like(eps)
    small = eps <= 1.0
    with np.errstate(divide="ignore"):
        out[small] = np.log1p(np.expm1(eps[small]) / q)
    large = eps[~small]
    out[~small] = large - math.log(q) + np.log1p(-(1 - q) * np.exp(-large))
    return out


def steps_for(steps: int | None, epochs: int | None, sampling_rate: float) -> int:
    """Training steps: ``steps``, or ``epochs`` times ceil(1/q) steps (the safe side of N/B)."""
    if (steps is None) == (epochs is None):
        raise UsageError("give exactly one of --steps or --epochs")
    count, name = (steps, "--steps") if steps is not None else (epochs, "--epochs")
    if not isinstance(count, (int, np.integer)) or isinstance(count, bool) or count < 1:
        raise UsageError(f"{name} must be an integer >= 1, got {count!r}")
    return int(steps) if steps is not None else int(epochs) * steps_per_epoch(sampling_rate)


def steps_per_epoch(sampling_rate: float) -> int:
    """ceil(1 / q), with a guard against 1/q landing a hair above an integer in floating point."""
    inverse = 1.0 / sampling_rate
    return max(1, math.ceil(inverse - 1e-9 * inverse))


def sampling_rate(rate: float | None, batch_size: int | None, dataset_size: int | None) -> float:
    """q from ``--sampling-rate``, or from ``--batch-size`` / ``--dataset-size``."""
    if rate is not None:
        if batch_size is not None or dataset_size is not None:
            raise UsageError("give --sampling-rate, or --batch-size with --dataset-size, not both")
        return rate
    if batch_size is None or dataset_size is None:
        raise UsageError("--unit record needs --sampling-rate Q, or --batch-size B with --dataset-size N (Q = B/N)")
    for name, value in (("--batch-size", batch_size), ("--dataset-size", dataset_size)):
        if not isinstance(value, (int, np.integer)) or value < 1:
            raise UsageError(f"{name} must be an integer >= 1, got {value!r}")
    if batch_size > dataset_size:
        raise UsageError(f"--batch-size {batch_size} exceeds --dataset-size {dataset_size}")
    return batch_size / dataset_size


def epsilon(setting: SgdSetting, steps: int, delta: float,
            discretization: float = DEFAULT_DISCRETIZATION) -> float:
    """Epsilon (an upper bound) after ``steps`` steps at ``delta``."""
    check_delta(delta)
    return _epsilon(setting.pld(discretization), steps, delta)


def _epsilon(step: Pld, steps: int, delta: float) -> float:
    check_composed_delta(delta, steps)
    value = step.self_compose(steps, tail_mass_for(delta)).epsilon(delta)
    if not math.isfinite(value):
        raise NumericalError(f"no finite epsilon reaches delta={delta:g}: the mass at infinite privacy loss "
                             "exceeds it; use a larger --delta or a finer --discretization")
    return value


def calibrate_noise(setting: SgdSetting, target_epsilon: float, steps: int, delta: float,
                    discretization: float = DEFAULT_DISCRETIZATION, rtol: float = 1e-3):
    """Smallest noise multiplier (to ``rtol``, rounded up) whose epsilon is at most the target:
    a :class:`~tsdp.accounting.calibrate.Calibration` ``(sigma, epsilon)`` (the search and its limits:
    :func:`~tsdp.accounting.noise_search.smallest_noise_within`). The same accountant on a coarser
    grid guides the search; the sigma returned is certified at ``discretization``."""
    check_epsilon(target_epsilon, "--epsilon")
    check_delta(delta)
    check_composed_delta(delta, steps)

    def at(grid: float):
        def eps_at(sigma: float) -> float:
            return _epsilon(SgdSetting(setting.sampling_rate, sigma, setting.sampling, setting.relation)
                            .pld(grid), steps, delta)
        return eps_at

    coarse = coarse_discretization(target_epsilon, discretization, steps)
    start = clt_noise_guess(setting, target_epsilon, steps, delta)
    return smallest_noise_within(at(discretization), target_epsilon, start / 4, start, discretization, rtol,
                                 estimate=at(coarse) if coarse else None)


def clt_noise_guess(setting: SgdSetting, target_epsilon: float, steps: int, delta: float) -> float:
    """Where the noise search starts: the noise multiplier at which the central-limit (Gaussian DP)
    approximation of DP-SGD, ``mu = q sqrt(T (e^(s^2/sigma^2) - 1))`` with sensitivity s (1 under
    add/remove, 2 under substitution; Bu et al. 2020), meets the target as a Gaussian mechanism.
    Only a starting point (1.0 when it cannot be computed): the answer is found and certified by
    the accountant itself."""
    from tsdp.accounting.gaussian import analytic_sigma

    sensitivity = 1.0 if setting.relation == "add-remove" else 2.0
    try:
        mu = 1.0 / analytic_sigma(target_epsilon, delta, 1.0)
        excess = (mu / setting.sampling_rate) ** 2 / steps  # e^(s^2/sigma^2) - 1
        guess = sensitivity / math.sqrt(math.log1p(excess))
    except (TsdpError, ArithmeticError, ValueError):
        return 1.0
    return guess if math.isfinite(guess) and 1e-4 < guess < 1e5 else 1.0


def max_steps(setting: SgdSetting, target_epsilon: float, delta: float,
              discretization: float = DEFAULT_DISCRETIZATION, limit: int = 10_000_000) -> tuple[int, float]:
    """Largest number of steps whose epsilon is at most the target: (steps, their epsilon).

    Epsilon grows with the number of steps; doubling then bisection. 0 steps (epsilon 0.0) when
    even one step exceeds the target.
    """
    check_epsilon(target_epsilon, "--epsilon")
    check_delta(delta)
    step = setting.pld(discretization)
    return largest_integer_within(lambda n: _epsilon(step, n, delta), target_epsilon, limit)

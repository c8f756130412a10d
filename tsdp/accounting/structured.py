"""Privacy amplification by structured subsampling for DP-SGD forecasting.

Schuchardt, Dalirrooyfard, Guzelkabaagac, Schneider, Nevmyvaka and Guennemann, "Privacy
Amplification by Structured Subsampling for Deep Differentially Private Time Series Forecasting"
(ICML 2025). A batch takes N' = B / lambda series (top level) and lambda windows of length
L_C + L_F from each (bottom level, after front-padding L_C zeros); a protected unit (w-event or
w-user) lies in at most k windows of its series:

    T = L - L_F + 1,   k = min(L_C + L_F + w - 1, T) (w-event) or min(w (L_C + L_F), T) (w-user),
    r = k / T (WR bottom level),   r_P = min(1, lambda / T) (Poisson bottom level),
    rho = N' / N (top-level inclusion),   phi = L_F / (L_C + L_F).

Per composition (a step for WOR or Poisson top levels, an epoch for deterministic or shuffled
iteration) the dominating pair is, in units of the clipping norm and with sigma the noise
multiplier (table of spec section 2.9):

    top        bottom   lambda  upper bound (guarantee)                 lower bound
    iteration  WR       1       Thm 4.2: (1-r)N(0) + rN(2) vs N(0)      = (tight)
    iteration  WR       >1      Thm E.1: double mixture Bin(j;lambda,r) at +-2j   Thm 4.3
    iteration  Poisson  any     Thm E.8: double mixture Bin(j;k,r_P) at +-j       = (tight)
    WOR        WR       1       Thm 4.4: (1-rho r)N(0) + rho r N(2) vs N(0)       = (tight)
    WOR        WR       >1      Thm F.1: rho E.1 + (1-rho)(1-e^eps)_+            Thm F.7
    WOR        Poisson  any     Thm F.2: rho E.8 + (1-rho)(1-e^eps)_+            Thm F.8
    WOR + label/context noise, WR, lambda=1, w=1: Thm G.1 with rho r [phi tau_F + (1-phi) tau_C]

with mixture-vs-Gaussian pairs read through the switching construction (Lemma D.10). Lower bounds
are optimistic and never a guarantee. A Poisson top level is accounted like WOR with inclusion
probability rho: the conditioning on the modified series being sampled (Lemma F.3) is the same
for independent inclusion.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
from scipy import special

from tsdp.accounting.budget import check_delta, check_epsilon
from tsdp.accounting.grid import DEFAULT_DISCRETIZATION, check_composed_delta, tail_mass_for
from tsdp.accounting.pld_backend import DP_ACCOUNTING, Pld
from tsdp.accounting.profiles import DoubleMixture, MixtureVsGaussian, Profile, Truncated, WeightedWithPerfect
from tsdp.accounting.samplers import Float, Sampler, sampler_of
from tsdp.caveats import Caveat
from tsdp.errors import NumericalError, UsageError
from tsdp.accounting.calibrate import largest_integer_within
from tsdp.accounting.noise_search import coarse_discretization, smallest_noise_within

TOP_LEVELS = ("wor", "poisson", "deterministic", "shuffle")
BOTTOM_LEVELS = ("wr", "poisson")
UNITS = ("event", "user")
BOUNDS = ("upper", "lower")
BINOMIAL_TAIL = 1e-30  # binomial mass dropped from mixtures, accounted as blatant non-privacy
PAPER = "Schuchardt et al. 2025"


# Above this noise multiplier the privacy loss is below float precision; its square would overflow
# long before sigma reached the float range.
MAX_NOISE_MULTIPLIER = 1e6


@dataclass(frozen=True)
class DpSgdSetting:
    """The data geometry, batching and noise of a DP-SGD forecasting run."""

    n_series: int
    length: int
    context: int
    horizon: int
    batch_size: int
    noise_multiplier: float
    top: str = "wor"
    bottom: str = "wr"
    instances: int = 1
    unit: str = "event"
    w: int = 1
    label_noise: float = 0.0
    context_noise: float = 0.0
    value_bound: float | None = None
    sampler: Sampler = Float()  # Hardened: the discrete Gaussian on a lattice (tsdp.accounting.dpsgd_lattice); a
    # name ("hardened", "float") is read by sampler_of
    parameters: int | None = None  # the model's parameter count (hardened only)
    clip_norm: float | None = None  # C (hardened only: the lattice is a power of two below sigma C 2^-28)

    def __post_init__(self) -> None:
        _check_int("--series", self.n_series, 1)
        _check_int("--length", self.length, 1)
        _check_int("--context-length", self.context, 0)
        _check_int("--forecast-length", self.horizon, 1)
        _check_int("--batch-size", self.batch_size, 1)
        _check_int("--instances", self.instances, 1)
        _check_int("--w", self.w, 1)
        if self.top not in TOP_LEVELS:
            raise UsageError(f"--top must be one of {', '.join(TOP_LEVELS)}, got {self.top!r}")
        if self.bottom not in BOTTOM_LEVELS:
            raise UsageError(f"--bottom must be one of {', '.join(BOTTOM_LEVELS)}, got {self.bottom!r}")
        if self.unit not in UNITS:
            raise UsageError(f"--unit must be one of {', '.join(UNITS)}, got {self.unit!r}")
        if self.context > self.length:
            raise UsageError(f"--context-length {self.context} is longer than the series (--length {self.length})")
        if self.horizon > self.length:
            raise UsageError(f"--forecast-length {self.horizon} is longer than the series (--length {self.length})")
        if not (self.noise_multiplier > 0 and math.isfinite(self.noise_multiplier)):
            raise UsageError(f"--noise-multiplier must be finite and > 0, got {self.noise_multiplier}")
        if self.noise_multiplier > MAX_NOISE_MULTIPLIER:
            raise UsageError(f"--noise-multiplier {self.noise_multiplier:g} is beyond {MAX_NOISE_MULTIPLIER:g}: the "
                             "noise would swamp every gradient (epsilon is 0 to float precision already at 1e6)")
        if self.batch_size % self.instances:
            raise UsageError(
                f"--instances {self.instances} must divide --batch-size {self.batch_size} "
                "(the batch holds batch-size / instances series)"
            )
        if self.selected > self.n_series:
            raise UsageError(
                f"--batch-size {self.batch_size} with --instances {self.instances} selects "
                f"{self.selected} series, more than the dataset's {self.n_series}"
            )
        if self.bottom == "poisson" and self.instances > self.windows:
            raise UsageError(
                f"--instances {self.instances} exceeds the {self.windows} window start positions "
                "(Poisson bottom-level rate would exceed 1)"
            )
        self._check_augmentation()
        object.__setattr__(self, "sampler", sampler_of(self.sampler))
        _ = self.lattice  # validates --parameters and --clip-norm for the sampler

    # --- the hardened sampler ---------------------------------------------------------------------
    @property
    def lattice(self):
        """The :class:`~tsdp.accounting.dpsgd_lattice.GradientLattice` of a hardened run, else None."""
        return self.sampler.gradient_lattice(self.noise_multiplier, self.clip_norm, self.parameters,
                                             self.max_batch_windows)

    @property
    def max_batch_windows(self) -> int:
        """The most windows one batch can hold: series (N' or, Poisson top level, all N) times windows
        per series (lambda, or, Poisson bottom level, all T)."""
        series = self.n_series if self.top == "poisson" else self.selected
        return series * (self.instances if self.bottom == "wr" else self.windows)

    @property
    def accounted_noise_multiplier(self) -> float:
        """sigma, or for the hardened sampler sigma C / (C + g sqrt(P)) (the rounded sum's sensitivity)."""
        lattice = self.lattice
        return self.noise_multiplier if lattice is None else lattice.accounted_multiplier

    def noise_draws(self, count: int) -> int:
        """Noisy steps in ``count`` compositions (at most a whole epoch of steps per epoch composition)."""
        return count if self.step_level else count * self.steps_per_epoch

    def lattice_cost(self, count: int) -> tuple[float, float]:
        """(delta slack, epsilon shift) of the hardened sampler after ``count`` compositions; (0, 0) for float."""
        lattice = self.lattice
        if lattice is None:
            return 0.0, 0.0
        draws = self.noise_draws(count)
        return lattice.slack(draws), lattice.shift(draws)

    def _check_augmentation(self) -> None:
        for name, value in (("--label-noise", self.label_noise), ("--context-noise", self.context_noise)):
            if not (value >= 0 and math.isfinite(value)):
                raise UsageError(f"{name} must be finite and >= 0, got {value}")
        if self.value_bound is not None and not (self.value_bound > 0 and math.isfinite(self.value_bound)):
            # also without label/context noise: the bound is stated as the unit's largest change
            raise UsageError(f"--value-bound must be finite and > 0, got {self.value_bound}")
        if not self.augmented:
            return
        if self.value_bound is None or not self.value_bound > 0:
            raise UsageError("--value-bound V > 0 is required with --label-noise/--context-noise")
        if self.top != "wor" or self.bottom != "wr" or self.instances != 1:
            raise UsageError(
                "label/context noise is covered only for --top wor --bottom wr --instances 1 "
                "(Schuchardt et al., Theorem G.1)"
            )
        if self.w != 1:
            raise UsageError(f"label/context noise is covered only for --w 1, got --w {self.w} (Theorem G.1)")

    # --- geometry -------------------------------------------------------------------------------
    @property
    def augmented(self) -> bool:
        return self.label_noise > 0 or self.context_noise > 0

    @property
    def windows(self) -> int:
        """T = L - L_F + 1 admissible window start positions."""
        return self.length - self.horizon + 1

    @property
    def affected_windows(self) -> int:
        """k: windows of its series that contain the protected unit (App. I.2), at most T."""
        span = self.context + self.horizon
        raw = span + self.w - 1 if self.unit == "event" else self.w * span
        return max(0, min(raw, self.windows))

    @property
    def selected(self) -> int:
        """N' = B / lambda series per batch."""
        return self.batch_size // self.instances

    @property
    def step_level(self) -> bool:
        return self.top in ("wor", "poisson")

    @property
    def rho(self) -> float:
        return self.selected / self.n_series if self.step_level else 1.0

    @property
    def steps_per_epoch(self) -> int:
        return max(1, (self.n_series * self.instances) // self.batch_size)

    @property
    def phi(self) -> float:
        return self.horizon / (self.context + self.horizon)

    def geometry(self) -> dict:
        t, k = self.windows, self.affected_windows
        out = {"T": t, "k": k, "r": k / t, "rho": self.rho, "q": self.rho * k / t, "phi": self.phi,
               "series_per_batch": self.selected, "steps_per_epoch": self.steps_per_epoch}
        if self.bottom == "poisson":
            out["r_poisson"] = min(1.0, self.instances / t)
        if self.augmented:
            out["tau_label"] = self.sampler.input_tau(self.label_noise, self.value_bound)
            out["tau_context"] = self.sampler.input_tau(self.context_noise, self.value_bound)
        return out

    def warnings(self) -> list[str]:
        if self.windows < self.context + self.horizon:
            return [Caveat("short_series", f"short series: T = {self.windows} < L_C + L_F = "
                           f"{self.context + self.horizon}; k is clipped to T (Schuchardt et al., App. I.1), and "
                           "the tightness statements of the paper assume T >= L_C + L_F")]
        return []


@dataclass(frozen=True)
class Derivation:
    """Which theorem gives the per-composition pair, and what kind of bound it is."""

    theorem: str
    bound: str  # "upper" or "lower"
    tight: bool
    form: str
    accounting_unit: str  # "step" or "epoch"

    @property
    def is_guarantee(self) -> bool:
        return self.bound == "upper"


def binomial_weights(n: int, p: float) -> tuple[np.ndarray, float]:
    """Bin(j; n, p) for j = 0..J, dropping the upper tail beyond J (mass <= 1e-30), and that mass."""
    j = np.arange(n + 1)
    if p >= 1.0:
        pmf = (j == n).astype(float)
    else:
        log_pmf = (special.gammaln(n + 1) - special.gammaln(j + 1) - special.gammaln(n - j + 1)
                   + special.xlogy(j, p) + special.xlog1py(n - j, -p))
        pmf = np.exp(log_pmf)
    tail = special.bdtrc(j, n, p)  # P(J > j)
    cut = int(np.argmax(tail <= BINOMIAL_TAIL)) if np.any(tail <= BINOMIAL_TAIL) else n
    return pmf[: cut + 1], float(max(tail[cut], 0.0))


def composition_profile(setting: DpSgdSetting, bound: str = "upper") -> tuple[Profile, Derivation]:
    """The per-composition dominating pair of ``setting`` as a privacy profile.

    For the hardened sampler the pair is that of the rounded continuous mechanism (noise multiplier
    :attr:`DpSgdSetting.accounted_noise_multiplier`); the theorem names the lattice, and the delta
    slack is added by :func:`epsilon_of` (:mod:`tsdp.accounting.dpsgd_lattice`)."""
    profile, derivation = _continuous_profile(setting, bound)
    return profile, setting.sampler.sgd_derivation(derivation)


def _continuous_profile(setting: DpSgdSetting, bound: str) -> tuple[Profile, Derivation]:
    if bound not in BOUNDS:
        raise UsageError(f"--bound must be one of {', '.join(BOUNDS)}, got {bound!r}")
    g = setting.geometry()
    sigma, rho, lam = setting.accounted_noise_multiplier, g["rho"], setting.instances
    unit = "step" if setting.step_level else "epoch"
    levels = f"{setting.top} top level, {setting.bottom.upper() if setting.bottom == 'wr' else 'Poisson'} bottom level"

    if setting.augmented:
        if bound == "lower":
            raise UsageError("no lower bound is known with label/context noise (Theorem G.1 is an upper bound)")
        p2 = g["q"] * (g["phi"] * g["tau_label"] + (1 - g["phi"]) * g["tau_context"])
        name = "4.5" if setting.label_noise == setting.context_noise else "G.1"
        return (MixtureVsGaussian((1 - p2, p2), (0.0, 2.0), sigma),
                Derivation(f"{PAPER}, Theorem {name} ({levels}, lambda=1, Gaussian augmentation)",
                           "upper", False, "mixture-vs-gaussian (switching)", unit))

    if setting.bottom == "wr":
        r = g["r"]
        if lam == 1:
            q = rho * r
            name = "4.4" if setting.step_level else "4.2"
            return (MixtureVsGaussian((1 - q, q), (0.0, 2.0), sigma),
                    Derivation(f"{PAPER}, Theorem {name} ({levels}, lambda=1; tight)", "upper", True,
                               "mixture-vs-gaussian (switching)", unit))
        weights, omega = binomial_weights(lam, r)
        means = 2.0 * np.arange(weights.size)
        if bound == "upper":
            inner = _truncated(DoubleMixture(tuple(weights / weights.sum()), tuple(means), sigma), omega)
            if setting.step_level:
                return (WeightedWithPerfect(inner, rho),
                        Derivation(f"{PAPER}, Theorem F.1 ({levels}, lambda={lam}; upper bound)",
                                   "upper", False, "weighted double mixture", unit))
            return inner, Derivation(f"{PAPER}, Theorem E.1 ({levels}, lambda={lam}; upper bound)",
                                     "upper", False, "double mixture", unit)
        w = rho * weights
        w[0] += 1 - rho
        name = "F.7" if setting.step_level else "4.3"
        return (MixtureVsGaussian(tuple(w / w.sum()), tuple(means), sigma),
                Derivation(f"{PAPER}, Theorem {name} ({levels}, lambda={lam}; optimistic LOWER bound, "
                           "not a privacy guarantee)", "lower", False, "mixture-vs-gaussian (switching)", unit))

    # Poisson bottom level
    weights, omega = binomial_weights(g["k"], g["r_poisson"])
    means = np.arange(weights.size, dtype=float)
    if not setting.step_level:
        return (_truncated(DoubleMixture(tuple(weights / weights.sum()), tuple(means), sigma), omega),
                Derivation(f"{PAPER}, Theorem E.8 ({levels}; tight)", "upper", True, "double mixture", unit))
    if bound == "upper":
        inner = _truncated(DoubleMixture(tuple(weights / weights.sum()), tuple(means), sigma), omega)
        return (WeightedWithPerfect(inner, rho),
                Derivation(f"{PAPER}, Theorem F.2 ({levels}; upper bound)", "upper", False,
                           "weighted double mixture", unit))
    w = rho * weights
    w[0] += 1 - rho
    return (DoubleMixture(tuple(w / w.sum()), tuple(means), sigma),
            Derivation(f"{PAPER}, Theorem F.8 ({levels}; optimistic LOWER bound, not a privacy guarantee)",
                       "lower", False, "double mixture", unit))


def standard_dpsgd_profile(setting: DpSgdSetting) -> Profile:
    """Prop. C.1: DP-SGD on the flattened N*T windows with record-level substitution.

    Not valid for event-level privacy: shown only for comparison.
    """
    q = min(1.0, setting.batch_size / (setting.n_series * setting.windows))
    return MixtureVsGaussian((1 - q, q), (0.0, 2.0), setting.noise_multiplier)


def compositions(setting: DpSgdSetting, steps: int | None = None, epochs: int | None = None) -> int:
    """How many times the per-composition pair is composed for ``steps`` or ``epochs`` of training.

    Step-level schemes compose once per step; iteration schemes once per epoch, a started epoch
    counting as a whole one.
    """
    if (steps is None) == (epochs is None):
        raise UsageError("give exactly one of --steps or --epochs")
    count = steps if steps is not None else epochs
    name = "--steps" if steps is not None else "--epochs"
    _check_int(name, count, 1)
    if setting.step_level:
        return steps if steps is not None else epochs * setting.steps_per_epoch
    return epochs if epochs is not None else math.ceil(steps / setting.steps_per_epoch)


@dataclass
class DpSgdAccount:
    epsilon: float
    delta: float
    compositions: int
    derivation: Derivation
    setting: DpSgdSetting
    checkpoints: list[tuple[int, float]] = field(default_factory=list)
    standard_dpsgd_epsilon: float | None = None
    warnings: list[str] = field(default_factory=list)


def account_dpsgd(
    setting: DpSgdSetting,
    delta: float,
    steps: int | None = None,
    epochs: int | None = None,
    bound: str = "upper",
    discretization: float = DEFAULT_DISCRETIZATION,
    checkpoints: int = 0,
    compare_standard: bool = False,
) -> DpSgdAccount:
    """Epsilon after ``steps`` (or ``epochs``) of DP-SGD at ``delta``.

    ``checkpoints`` > 0 also reports epsilon at that many evenly spaced composition counts.
    """
    check_delta(delta)
    count = compositions(setting, steps, epochs)
    check_composed_delta(delta, count)
    profile, derivation = composition_profile(setting, bound)
    base = DP_ACCOUNTING.from_profile(profile, discretization)
    marks = _checkpoint_counts(count, checkpoints)
    history, current, done = [], None, 0
    tail = tail_mass_for(delta)
    for mark in marks:
        step_pld = base.self_compose(mark - done, tail)
        current = step_pld if current is None else current.compose(step_pld, tail)
        done = mark
        history.append((mark, _with_slack(setting, current.epsilon, mark, delta)))
    standard = None
    if compare_standard:  # flattened DP-SGD composes once per step whatever the top level
        std_steps = steps if steps is not None else epochs * setting.steps_per_epoch
        check_composed_delta(delta, std_steps)
        standard = epsilon_after(DP_ACCOUNTING.from_profile(standard_dpsgd_profile(setting), discretization),
                                 std_steps, delta)
    return DpSgdAccount(history[-1][1], delta, count, derivation, setting,
                        history if checkpoints else [], standard, setting.warnings())


def epsilon_after(base: Pld, count: int, delta: float) -> float:
    """Epsilon at ``delta`` of ``count`` compositions of ``base`` (the continuous mechanism's figure)."""
    check_composed_delta(delta, count)
    return base.self_compose(count, tail_mass_for(delta)).epsilon(delta)


def epsilon_of(setting: DpSgdSetting, base: Pld, count: int, delta: float) -> float:
    """Epsilon at ``delta`` after ``count`` compositions of ``base`` = the pair of ``setting``, with the
    hardened sampler's slack (:mod:`tsdp.accounting.dpsgd_lattice`) paid out of delta."""
    check_composed_delta(delta, count)
    return _with_slack(setting, base.self_compose(count, tail_mass_for(delta)).epsilon, count, delta)


def _with_slack(setting: DpSgdSetting, epsilon_at, count: int, delta: float) -> float:
    """``epsilon_at(delta - slack) + shift`` for the hardened sampler's cost after ``count`` compositions
    (:meth:`DpSgdSetting.lattice_cost`); ``epsilon_at(delta)`` for the float sampler."""
    slack, shift = setting.lattice_cost(count)
    if slack == 0 and shift == 0:
        return epsilon_at(delta)
    if not slack < delta / 2:
        raise NumericalError(f"the hardened sampler's delta slack {slack:.3g} after {count} compositions is half of "
                             f"--delta {delta:g} or more")
    return epsilon_at(delta - slack) + shift


def calibrate_noise(setting: DpSgdSetting, target_epsilon: float, delta: float, steps: int | None = None,
                    epochs: int | None = None, discretization: float = DEFAULT_DISCRETIZATION,
                    rtol: float = 1e-3):
    """Smallest noise multiplier (to ``rtol``) whose epsilon is at most ``target_epsilon``.

    Epsilon decreases in sigma; the same accountant on a coarser grid guides the search, and the
    sigma returned is certified at ``discretization``
    (:func:`~tsdp.accounting.noise_search.smallest_noise_within`). Returns a
    :class:`~tsdp.accounting.calibrate.Calibration` ``(sigma, its epsilon)``; the sigma returned is
    always on the safe side of the target (:func:`~tsdp.accounting.calibrate.smallest_within`).
    """
    check_epsilon(target_epsilon, "--epsilon")
    check_delta(delta)
    count = compositions(setting, steps, epochs)
    check_composed_delta(delta, count)

    def at(grid: float):
        def eps_at(sigma: float) -> float:
            s = at_noise_multiplier(setting, sigma)
            return epsilon_of(s, DP_ACCOUNTING.from_profile(composition_profile(s, "upper")[0], grid), count, delta)
        return eps_at

    coarse = coarse_discretization(target_epsilon, discretization, count)
    return smallest_noise_within(at(discretization), target_epsilon, 0.05, 1.0, discretization, rtol,
                                 estimate=at(coarse) if coarse else None)


def at_noise_multiplier(setting: DpSgdSetting, sigma: float) -> DpSgdSetting:
    """``setting`` with noise multiplier ``sigma`` (a hardened lattice follows sigma)."""
    return DpSgdSetting(**{**setting.__dict__, "noise_multiplier": sigma})


def max_compositions(setting: DpSgdSetting, target_epsilon: float, delta: float,
                     discretization: float = DEFAULT_DISCRETIZATION, limit: int = 10_000_000) -> tuple[int, float]:
    """Largest number of compositions (steps or epochs) whose epsilon stays within the target.

    Returns (count, its epsilon); count 0 means even one composition exceeds the target.
    """
    check_epsilon(target_epsilon, "--epsilon")
    check_delta(delta)
    base = DP_ACCOUNTING.from_profile(composition_profile(setting, "upper")[0], discretization)
    return largest_integer_within(lambda n: epsilon_of(setting, base, n, delta), target_epsilon, limit)


def _checkpoint_counts(total: int, checkpoints: int) -> list[int]:
    if checkpoints <= 1:
        return [total]
    marks = np.unique(np.linspace(total / checkpoints, total, checkpoints).round().astype(int))
    return [int(m) for m in marks if m >= 1]


def _truncated(profile: Profile, omega: float) -> Profile:
    return Truncated(profile, omega) if omega > 0 else profile


def _check_int(name: str, value, minimum: int) -> None:
    if not isinstance(value, (int, np.integer)) or isinstance(value, bool) or value < minimum:
        raise UsageError(f"{name} must be an integer >= {minimum}, got {value!r}")

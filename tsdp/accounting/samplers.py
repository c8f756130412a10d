"""The two noise samplers of a release: ``Float`` (numpy's floating-point draws, not for publication)
and ``Hardened`` (discrete noise on a power-of-two granularity lattice, the default).

The choice is made once, by :func:`sampler_of`; a mechanism then asks its sampler, never the
sampler's name, for:

* the lattice (:meth:`Hardened.on_lattice`: the given ``--granularity`` or the default chosen from
  public parameters, :func:`tsdp.accounting.discrete.choose_granularity`);
* the sensitivity of the numbers it perturbs once rounded (``Delta_2 + g sqrt(m)``, ``Delta_1 + g m``
  for ``m`` changed numbers, ``(floor(M / g) + 1) g`` per cell; the float sampler leaves them as they are);
* the Gaussian calibration sequence (:meth:`Hardened.calibrate_gaussian`): calibrate sigma without
  rounding, pick the lattice from it, subtract the rounding slack ``(1 + e^eps) m 0.025 (g / sigma)^2``
  from delta, recalibrate for the rounded sensitivity (Canonne, Kamath and Steinke 2020; the slack
  bound is :mod:`tsdp.accounting.discrete`'s);
* the event kind of the claim (``gaussian`` / ``discrete-gaussian``, ``laplace`` / ``discrete-laplace``),
  the report parameters (``sampler``, ``granularity``, ``rounded_*_sensitivity``, ``rounding_slack``),
  the theorem words and the float sampler's warning;
* DP-SGD's answers (:mod:`tsdp.accounting.structured`): the gradient sum's lattice
  (:class:`~tsdp.accounting.dpsgd_lattice.GradientLattice`, none for float), Theorem G.1's tau for
  label/context noise and the theorem words of the hardened run.

Mean estimation's draws, which need its own selection code, are chosen once from the sampler by
:func:`tsdp.mean.draws.draws_for`.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Callable

from tsdp.accounting import discrete as disc
from tsdp.accounting.claim import MechanismEvent
from tsdp.errors import UsageError
from tsdp.caveats import Caveat

# calibrate(delta budget, lattice g or None) -> (sigma, anything the mechanism wants back)
Calibrate = Callable[[float, "float | None"], "tuple[float, Any]"]

FLOAT_WARNING = Caveat(
    "float_sampler",
    "--sampler float: the noise was drawn by floating-point samplers, whose low-order bits can reveal "
    "the input (Mironov 2012), so this output must not be published; use the default --sampler hardened",
)
CONTINUOUS_LAPLACE_THEOREM = ("Dwork, McSherry, Nissim and Smith 2006; Dwork and Roth 2014, Theorem 3.6 "
                              "(Laplace mechanism)")


@dataclass(frozen=True)
class Float:
    """numpy's floating-point Gaussian and Laplace draws: not hardened against the attack of Mironov
    (2012), so every release made with it carries :data:`FLOAT_WARNING`."""

    name = "float"
    hardened = False
    gaussian_kind, laplace_kind = "gaussian", "laplace"  # the claim's event kinds
    granularity: None = None
    warnings: tuple = (FLOAT_WARNING,)

    def on_lattice(self, scale_for, sensitivity: float, coords: int, norm: str,
                   slack: tuple[float, float] | None = None) -> "Float":
        """No lattice: the float sampler draws on the reals."""
        return self

    def rounded_l2(self, l2: float, coords: int) -> float:
        return l2

    def rounded_l1(self, l1: float, coords: int) -> float:
        return l1

    def rounded_step(self, step: float) -> float:
        return step

    def calibrate_gaussian(self, epsilon: float, delta: float, sensitivity: float, coords: int,
                           calibrate: Calibrate, first=None) -> tuple["Float", Any, Any]:
        """``(self, sigma, extra)`` of ``calibrate(delta, None)``: no rounding, no slack."""
        sigma, extra = calibrate(delta, None)
        return self, sigma, extra

    def gaussian_event(self, sensitivity: float, covered: float, sigma: float, coords: int) -> MechanismEvent:
        return MechanismEvent("gaussian", sensitivity, sigma, 1)

    def laplace_event(self, step: float, rounded_step: float, scale: float, count: int) -> MechanismEvent:
        return MechanismEvent("laplace", step, scale, count)

    def slack(self, epsilon: float, sigma: float, coords: int) -> float:
        return 0.0

    def lattice_record(self, epsilon: float, sigma: float, coords: int) -> tuple[dict, None]:
        """(report parameters, rounding slack) of a Gaussian release whose smallest sigma is ``sigma``."""
        return {"sampler": "float"}, None

    def gaussian_record(self, epsilon: float, sigma: float, covered: float, coords: int, theorem: str
                        ) -> tuple[dict, str]:
        """(report parameters, theorem) of an additive Gaussian release."""
        return {"sampler": "float"}, theorem

    def laplace_record(self, scale: float, covered: float, theorem: str | None = None) -> tuple[dict, str]:
        """(report parameters, theorem) of an additive Laplace release; ``theorem`` None: the Laplace
        mechanism's own."""
        return {"sampler": "float"}, CONTINUOUS_LAPLACE_THEOREM if theorem is None else theorem

    # --- DP-SGD (tsdp.accounting.structured) ------------------------------------------------------
    def gradient_lattice(self, noise_multiplier: float, clip_norm: float | None, parameters: int | None,
                         max_terms: int) -> None:
        """No lattice: continuous Gaussian noise on the gradient sum; ``--parameters`` and ``--clip-norm``,
        which size a lattice, do not apply."""
        if parameters is not None or clip_norm is not None:
            raise UsageError("--parameters and --clip-norm apply to --sampler hardened only")
        return None

    def input_tau(self, noise: float, value_bound: float | None) -> float:
        """tau of Theorem G.1 for continuous label/context noise ``noise`` (in units of the value bound):
        ``TV(N(0, noise^2), N(1, noise^2))``."""
        from tsdp.accounting.dpsgd_lattice import tvd_unit_shift

        return tvd_unit_shift(noise)

    def sgd_derivation(self, derivation):
        """The structured-subsampling theorem as the paper states it (continuous noise)."""
        return derivation


@dataclass(frozen=True)
class Hardened:
    """Discrete Gaussian / Laplace noise (exact integer sampling, :mod:`tsdp.mechanisms.discrete`)
    times ``g`` added to values rounded to multiples of ``g``. ``granularity`` is the requested
    ``--granularity`` (None: chosen from public parameters) until :meth:`on_lattice` fixes it."""

    granularity: float | None = None
    name = "hardened"
    hardened = True
    gaussian_kind, laplace_kind = "discrete-gaussian", "discrete-laplace"
    warnings: tuple = ()

    def on_lattice(self, scale_for, sensitivity: float, coords: int, norm: str,
                   slack: tuple[float, float] | None = None) -> "Hardened":
        """The sampler with its lattice fixed: the requested granularity (a power of two), else the
        default from ``scale_for(sensitivity)``, the public noise scale calibrated without rounding,
        for ``coords`` numbers a unit can change in norm ``norm`` (``slack``: a Gaussian release's
        (epsilon, delta), which pays the rounding slack)."""
        g = (disc.check_granularity(self.granularity) if self.granularity is not None else
             disc.choose_granularity(scale_for(sensitivity), sensitivity, coords, norm, slack))
        return replace(self, granularity=g)

    def rounded_l2(self, l2: float, coords: int) -> float:
        return disc.rounded_l2(l2, coords, self.granularity)

    def rounded_l1(self, l1: float, coords: int) -> float:
        return l1 + self.granularity * coords

    def rounded_step(self, step: float) -> float:
        return disc.rounded_step(step, self.granularity)

    def calibrate_gaussian(self, epsilon: float, delta: float, sensitivity: float, coords: int,
                           calibrate: Calibrate, first=None) -> tuple["Hardened", Any, Any]:
        """Calibrate, pick the lattice, subtract the slack, recalibrate: ``(sampler on its lattice,
        sigma, extra)``. ``sensitivity``: the unrounded L2 sensitivity of the ``coords`` numbers a unit
        can change; ``calibrate(budget, g)`` calibrates for the rounded sensitivity when ``g`` is given
        (``first(delta)``, when given, is the unrounded sigma that sets the lattice and the slack:
        a release with one sigma per series takes its smallest)."""
        sigma0 = calibrate(delta, None)[0] if first is None else first(delta)
        fixed = self.on_lattice(lambda _d: sigma0, sensitivity, coords, "l2", (epsilon, delta))
        g = fixed.granularity
        budget = disc.slack_budget(epsilon, delta, sigma0 / g, coords)
        sigma, extra = calibrate(budget, g)
        return fixed, sigma, extra

    def gaussian_event(self, sensitivity: float, covered: float, sigma: float, coords: int) -> MechanismEvent:
        return MechanismEvent("discrete-gaussian", covered, sigma, 1, granularity=self.granularity,
                              lattice_coords=coords)

    def laplace_event(self, step: float, rounded_step: float, scale: float, count: int) -> MechanismEvent:
        return MechanismEvent("discrete-laplace", rounded_step, scale, count, granularity=self.granularity)

    def slack(self, epsilon: float, sigma: float, coords: int) -> float:
        """``(1 + e^eps) coords TV(sigma / g)``: what the discrete noise may add to delta."""
        return disc.rounding_slack(epsilon, disc.slack_rate(sigma / self.granularity, coords))

    def lattice_record(self, epsilon: float, sigma: float, coords: int) -> tuple[dict, float]:
        """(report parameters, rounding slack), after checking that ``sigma`` spans the lattice."""
        disc.check_lattice_scale(sigma, self.granularity, "sigma")
        slack = self.slack(epsilon, sigma, coords)
        return {"sampler": "hardened", "granularity": self.granularity, "rounding_slack": slack}, slack

    def gaussian_record(self, epsilon: float, sigma: float, covered: float, coords: int, theorem: str
                        ) -> tuple[dict, str]:
        parameters = disc.hardened_parameters(sigma, self.granularity, covered, "l2", "sigma")
        parameters["rounding_slack"] = slack = self.slack(epsilon, sigma, coords)
        return parameters, f"{theorem}; {disc.GAUSSIAN_THEOREM} (slack {slack:.3g} of delta)"

    def laplace_record(self, scale: float, covered: float, theorem: str | None = None) -> tuple[dict, str]:
        parameters = disc.hardened_parameters(scale, self.granularity, covered, "l1", "the Laplace scale")
        return parameters, disc.LAPLACE_THEOREM if theorem is None else f"{theorem}; {disc.LAPLACE_THEOREM}"

    # --- DP-SGD (tsdp.accounting.structured) ------------------------------------------------------
    def gradient_lattice(self, noise_multiplier: float, clip_norm: float | None, parameters: int | None,
                         max_terms: int):
        """The :class:`~tsdp.accounting.dpsgd_lattice.GradientLattice` of the gradient sum: noise
        ``sigma C`` on ``parameters`` coordinates, a batch of at most ``max_terms`` windows."""
        if parameters is None or clip_norm is None:
            raise UsageError("--sampler hardened needs --parameters (the model's parameter count) and --clip-norm: "
                             "the lattice and the rounded sum's sensitivity depend on them")
        from tsdp.accounting.dpsgd_lattice import GradientLattice

        return GradientLattice(noise_multiplier, clip_norm, parameters, max_terms)

    def input_tau(self, noise: float, value_bound: float | None) -> float:
        """tau of Theorem G.1 for label/context noise on a lattice (:func:`~tsdp.accounting.dpsgd_lattice.hardened_tau`)."""
        from tsdp.accounting.dpsgd_lattice import hardened_tau

        return hardened_tau(noise, value_bound)

    def sgd_derivation(self, derivation):
        """The theorem with the lattice's cost named: the paper's "tight" is the continuous mechanism's, the
        lattice's bound is an upper bound only."""
        from tsdp.accounting.dpsgd_lattice import THEOREM

        name = derivation.theorem.replace("; tight)", ")")
        return replace(derivation, theorem=f"{name}; {THEOREM}", tight=False)


Sampler = Float | Hardened


SAMPLER_CLASSES: dict[str, type] = {"hardened": Hardened, "float": Float}  # --sampler's values (default first)


def sampler_of(name: str | Sampler | None = "hardened", granularity: float | None = None) -> Sampler:
    """The sampler called ``name`` (``--sampler``; None: hardened), ``granularity`` its requested lattice
    (``--granularity``, hardened only). A sampler object is returned as it is."""
    if isinstance(name, (Float, Hardened)):
        return name
    name = "hardened" if name is None else name
    kind = SAMPLER_CLASSES.get(name) if isinstance(name, str) else None
    if kind is None:
        raise UsageError(f"--sampler must be one of {', '.join(SAMPLER_CLASSES)}, got {name!r}")
    if granularity is None:
        return kind()
    if kind is Float:
        raise UsageError("--granularity applies to --sampler hardened only")
    disc.check_granularity(granularity)
    return Hardened(granularity)

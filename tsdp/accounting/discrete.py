"""Privacy of the hardened (discrete) sampler: granularity, rounding, and the theorems.

The hardened sampler releases ``round_g(x) + g Z`` where ``g = 2^k`` is the granularity,
``round_g`` rounds each value to the nearest multiple of ``g`` and ``Z`` is integer noise (discrete
Gaussian or discrete Laplace, :mod:`tsdp.mechanisms.discrete`). Every output is a multiple of
``g``, exactly representable in float64, so no floating-point artefact carries the input.

Rounding and sensitivity. If a neighbour changes a value by ``d``, the rounded values differ by a
multiple of ``g`` of at most ``floor(|d| / g) + 1`` steps (each rounding moves a value by at most
``g / 2``, and values a neighbour does not change round identically). Hence, for a unit that
changes at most ``m`` cells:

* L1, per cell bound ``c``: each cell moves by at most ``(floor(c / g) + 1) g <= c + g`` steps
  of the lattice, so ``Delta_1' = m (floor(c / g) + 1) g <= Delta_1 + m g``;
* L2 bound ``Delta_2``: the rounded difference is the true one plus an error of at most ``g`` on
  each of the ``m`` changed cells, so ``Delta_2' <= Delta_2 + g sqrt(m)`` (triangle inequality).

Theorems. Discrete Laplace: on the lattice, ``P(y) / P(y') = exp((|y'| - |y|) g / b) <=
exp(|y - y'| g / b)``, so L1 sensitivity ``Delta_1'`` gives pure ``epsilon = Delta_1' / b`` (Canonne,
Kamath and Steinke 2020, Section 2 / Ghosh, Roughgarden and Sundararajan 2012). Discrete Gaussian:
for integer-valued queries of L2 sensitivity ``Delta`` and independent discrete Gaussian noise of
parameter ``sigma`` on each of ``d`` coordinates, the (epsilon, delta) profile is at most that of
the continuous Gaussian mechanism with the same ``Delta / sigma`` at ``epsilon - tau d``, with
``tau`` exponentially small in ``sigma^2`` (Canonne, Kamath and Steinke 2020, the multivariate
discrete Gaussian's approximate-DP theorem, Theorem 15 in the arXiv version 2004.00010). tsdp
requires ``sigma / g >= 8`` in lattice units (and by default ``sigma / g >= 2^20``).

What was and was not checked. The paper is not in the project's library, so the statement above
is from memory. Its ``tau`` has been quoted as ``10 sum_{k >= 1} exp(-2 pi^2 sigma^2 k / (k + 1))``;
that cannot be the statement as written (the terms tend to ``exp(-2 pi^2 sigma^2) > 0``, so the
series diverges); :func:`tau_bound` uses the convergent reading with ``k^2 / (k + 1)`` in the exponent,
bounded by the geometric series of ``exp(-pi^2 sigma^2 k)``: below 1e-270 at ``sigma = 8``. Any
reading whose terms are at most ``exp(-pi^2 sigma^2)`` each, over as many terms as there are
coordinates, stays below 1e-250 for the panels tsdp handles, so the epsilon shift is immaterial;
the theorem's structure (continuous profile, same ``Delta / sigma``) is what the accounting uses,
and the tests check it from below: for neighbours whose lattice difference is a given integer
vector, the exact epsilon (dp-accounting's 1-D discrete Gaussian PLDs, composed over the
coordinates) never exceeds the reported one (tests/accounting/test_discrete_events.py). An
unconditional, looser bound holds too and is proved here in full: for an integer shift ``mu``,
``D_alpha(N_Z(0, s^2) || N_Z(mu, s^2)) <= alpha mu^2 / (2 s^2)`` (the normalisers agree, and
``sum_y exp(-(y - c)^2 / (2 s^2))`` is largest at ``c = 0`` by Poisson summation, all its Fourier
coefficients being positive), so ``d`` independent coordinates give ``(Delta^2 / (2 sigma^2))``-zCDP.

Granularity (public parameters only). By default ``g`` is the largest power of two with
``g <= sigma_0 2^-20`` and ``g sqrt(m) <= Delta 2^-20`` (Gaussian; ``g m <= Delta 2^-20`` for
Laplace), where ``sigma_0`` is the noise scale calibrated without the rounding, but not below
``sigma_0 2^-24``: the lattice scale stays in [2^20, 2^24] (fine enough to be invisible next to the
noise, coarse enough for the sampler's 52-bit arithmetic), and the rounding adds at most a
fraction 2^-20 to the sensitivity unless the unit spans more than 2^8 cells per lattice refinement.
"""

from __future__ import annotations

import math

from tsdp.errors import UsageError

SAMPLERS = ("hardened", "float")
MIN_LATTICE_SCALE = 8.0
DEFAULT_RESOLUTION = 20
MAX_RESOLUTION = 24
GAUSSIAN_THEOREM = ("discrete Gaussian on the granularity lattice: Canonne, Kamath and Steinke 2020, multivariate "
                    "discrete Gaussian (arXiv 2004.00010, Theorem 15: its profile is the continuous Gaussian's with "
                    "the same Delta/sigma, up to an epsilon shift tau d); rounding to the lattice included in the "
                    "sensitivity")
LAPLACE_THEOREM = ("discrete Laplace on the granularity lattice: pure epsilon = L1 lattice sensitivity / scale "
                   "(Canonne, Kamath and Steinke 2020, Section 2; Ghosh, Roughgarden and Sundararajan 2012); "
                   "rounding to the lattice included in the sensitivity")


FLOAT_ONLY = {
    "forecast-train": (
        "its structured-subsampling accountant composes dominating pairs of the continuous Gaussian mechanism; a "
        "discrete Gaussian on a lattice of the clipped gradient sum (sensitivity C + g sqrt(parameters)) has only an "
        "epsilon-shifted profile bound (Canonne, Kamath and Steinke 2020), which is not a dominating pair the "
        "subsampled composition can use, and carrying it as an extra delta per step has not been derived and "
        "checked; the gradients, clipping and optimiser are floating-point computations in any case"),
}


def float_only_warning(what: str) -> str:
    """The warning of a path whose noise can only be floating-point (:data:`FLOAT_ONLY`)."""
    return (f"{what} has no hardened sampler: its noise is drawn by floating-point samplers, whose low-order bits "
            f"can reveal the input (Mironov 2012), because {FLOAT_ONLY[what]}")


def refuse_hardened(what: str) -> UsageError:
    """The usage error for ``--sampler hardened`` on a path that only draws floating-point noise."""
    return UsageError(f"--sampler hardened: {what} has no hardened sampler, because {FLOAT_ONLY[what]}; "
                      "it draws floating-point noise only (--sampler float, its default), and such output is "
                      "exposed to floating-point attacks")


def float_parameters(what: str) -> dict:
    """The claim parameters that state a float-only path's sampler and why."""
    return {"sampler": "float", "float_noise_reason": FLOAT_ONLY[what]}


def check_sampler(sampler: str) -> str:
    if sampler not in SAMPLERS:
        raise UsageError(f"--sampler must be one of {', '.join(SAMPLERS)}, got {sampler!r}")
    return sampler


def check_granularity(g: float) -> float:
    """A user-given granularity must be a positive power of two (so that multiples of it are exact)."""
    if not (isinstance(g, (int, float)) and math.isfinite(g) and g > 0 and math.frexp(g)[0] == 0.5):
        raise UsageError(f"--granularity must be a positive power of two (e.g. 0.0009765625 = 2^-10), got {g!r}")
    return float(g)


def choose_granularity(scale0: float, sensitivity: float, cells: int, norm: str) -> float:
    """The default granularity from public parameters (module docstring); ``norm`` is ``l1`` or ``l2``."""
    spread = math.sqrt(cells) if norm == "l2" else float(cells)
    target = min(scale0 * 2.0 ** -DEFAULT_RESOLUTION, sensitivity * 2.0 ** -DEFAULT_RESOLUTION / spread)
    floor = scale0 * 2.0 ** -MAX_RESOLUTION
    if target >= floor:
        return 2.0 ** math.floor(math.log2(target))
    return 2.0 ** math.ceil(math.log2(floor))  # the lattice scale stays at most 2^24


def check_lattice_scale(scale: float, g: float, what: str) -> None:
    """The noise must span at least ``MIN_LATTICE_SCALE`` lattice steps (and at most 2^40, the sampler's)."""
    ratio = scale / g
    if ratio < MIN_LATTICE_SCALE:
        raise UsageError(f"--granularity {g:g} is too coarse for {what} {scale:.6g}: it must be at most "
                         f"{what}/{MIN_LATTICE_SCALE:g} = {scale / MIN_LATTICE_SCALE:.6g}")
    if ratio > 2.0 ** 40:
        raise UsageError(f"--granularity {g:g} is too fine for {what} {scale:.6g}: it must be at least "
                         f"{what} x 2^-40 = {scale * 2.0 ** -40:.6g}")


def rounded_l2(l2: float, cells: int, g: float) -> float:
    """L2 sensitivity after rounding to multiples of ``g``, for a unit changing at most ``cells`` cells."""
    return l2 + g * math.sqrt(cells)


def rounded_step(c: float, g: float) -> float:
    """Largest change of one rounded cell whose true change is at most ``c``: (floor(c / g) + 1) g."""
    return (math.floor(c / g) + 1) * g


def tau_bound(sigma_lattice: float) -> float:
    """An upper bound on the multivariate theorem's ``tau`` at lattice parameter ``sigma_lattice``
    (the convergent reading, see the module docstring), in float."""
    # k^2 / (k + 1) >= k / 2, so the sum is at most the geometric series of exp(-pi^2 s2 k).
    r = math.exp(-math.pi ** 2 * sigma_lattice * sigma_lattice)
    return 10 * r / (1 - r)


def lattice(sampler: str, granularity: float | None, scale_for, sensitivity: float, coords: int,
            norm: str) -> tuple[float | None, float]:
    """``(g, covered)`` for a mechanism adding noise to ``coords`` numbers a unit can change.

    ``g`` is None for the float sampler (and ``covered`` the sensitivity itself); for the hardened
    one it is ``granularity`` or the default chosen from ``scale_for(sensitivity)``, the public
    noise scale calibrated without rounding, and ``covered`` is the sensitivity of the rounded
    numbers: ``Delta_2 + g sqrt(coords)`` (``l2``) or ``Delta_1 + g coords`` (``l1``: each rounded
    number moves by at most its true change plus ``g``).
    """
    check_sampler(sampler)
    if sampler == "float":
        if granularity is not None:
            raise UsageError("--granularity applies to --sampler hardened only")
        return None, sensitivity
    g = check_granularity(granularity) if granularity is not None else \
        choose_granularity(scale_for(sensitivity), sensitivity, coords, norm)
    return g, (rounded_l2(sensitivity, coords, g) if norm == "l2" else sensitivity + g * coords)


def hardened_parameters(scale: float, g: float, covered: float, norm: str, what: str) -> dict:
    """The report parameters of a hardened release (after checking the noise spans the lattice)."""
    check_lattice_scale(scale, g, what)
    return {"sampler": "hardened", "granularity": g, f"rounded_{norm}_sensitivity": covered}

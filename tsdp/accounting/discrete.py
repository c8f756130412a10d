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
Kamath and Steinke 2020, Section 2 / Ghosh, Roughgarden and Sundararajan 2012).

Discrete Gaussian: compared with the rounded Gaussian, proved here. Its profile is NOT bounded by
the continuous Gaussian's at the same ``Delta / sigma``: the privacy loss lives on a lattice, and
at sigma / g = 8 the exact 1-D delta exceeds the continuous one by up to about 0.1 % (and more, in
relative terms, far in the tail; tests/accounting/test_discrete_events.py computes both). tsdp
therefore bounds it by comparison with ``R = round(x + N(0, s^2))`` (lattice units, s = sigma / g),
a post-processing of the continuous Gaussian mechanism on the lattice points ``x``, whose profile is
therefore at most the continuous Gaussian's with the same (rounded) sensitivity. Write ``phi`` for
the N(0, s^2) density. Per coordinate the discrete Gaussian has pmf ``phi(k) / N`` with
``N = 1 + 2 sum_{m >= 1} exp(-2 pi^2 s^2 m^2)`` (Poisson summation), and R has pmf
``int_{-1/2}^{1/2} phi(k + t) dt = phi(k) + int_{-1/2}^{1/2} int_0^t (t - u) phi2(k + u) du dt``
(Taylor; the linear term integrates to zero; phi2, phi3 are the second and third derivatives), so

    sum_k |R(k) - phi(k)| <= (int |phi2| + V(phi2)) / 24 = (0.96788 / s^2 + 1.51004 / s^3) / 24

(``sum_k |f(k + u)| <= int |f| + V(f)`` for f of bounded variation V; the double integral of
``|t - u|`` is 1/24; ``int |phi2| = 4 phi_1(1) / s^2`` and ``V(phi2) = int |phi3| =
2 (3 phi_1(sqrt 3) + phi_1(0)) / s^3`` with phi_1 the standard normal density), and
``sum_k |phi(k) - phi(k) / N| <= N - 1 <= 3 exp(-2 pi^2 s^2)``. For s >= 8 the total variation
distance per coordinate, half the sum, is below :data:`LATTICE_TV` / s^2 = 0.025 / s^2 (measured:
0.0202 / s^2). If a unit changes at most ``m`` noisy lattice values, the other coordinates are
identically distributed under both neighbours and independent of these, so they drop out;
replacing the discrete noise by R on the ``m`` changed coordinates moves either neighbour's output
by at most ``m TV`` in total variation, and ``H_{e^eps}(P || Q) <= H_{e^eps}(P~ || Q~) + TV(P, P~)
+ e^eps TV(Q, Q~)`` gives

    delta(eps) <= deltaGauss(eps; Delta' / sigma) + (1 + e^eps) m LATTICE_TV / s^2.

Under composition (adaptive too) the same hybrid argument replaces the noise of the changed values
of every release, so the slacks add (:func:`rounding_slack`; events carry ``m`` as
``lattice_coords``). A public sampled component (the time steps J of subsampling) is conditioned
on, and m bounds the changed values for every J. At the default lattice (s >= 2^20) the slack is
below 2.3e-14 (1 + e^eps) per changed value; tsdp calibrates the noise to ``delta`` minus the slack
(:func:`slack_budget`) and refuses a lattice so coarse that the slack takes half of delta. For
``d`` independent coordinates the unconditional bound ``D_alpha(N_Z(0, s^2) || N_Z(mu, s^2)) <=
alpha mu^2 / (2 s^2)`` for an integer shift ``mu`` (the normalisers agree, and
``sum_y exp(-(y - c)^2 / (2 s^2))`` is largest at ``c = 0`` by Poisson summation, all its Fourier
coefficients being positive) also gives ``(Delta^2 / (2 sigma^2))``-zCDP.

Many coordinates: a Hellinger bound. The slack above grows linearly in the number of noisy values
``n`` that are replaced. DP-SGD replaces every parameter at every step (n = steps x parameters, up
to 10^10 and more), and there a bound that grows like ``sqrt(n)`` is far smaller. Write ``BC`` for
the Bhattacharyya coefficient and ``H^2 = 1 - BC``. Per coordinate (lattice units, x = k / s,
e = 1 / s), ``R(k) / D(k) = N m(k)`` with ``D`` the discrete Gaussian and
``m(k) = E_t exp(-x t e - t^2 e^2 / 2)`` for t uniform on [-1/2, 1/2]; expanding the exponential to
second order (E t^2 = 1/12, E t^4 = 1/80, odd moments 0) with the remainder ``|u|^3 e^|u| / 6``,
``|u| <= (|x| + 1) e / 2`` for e <= 2^-10,

    N m(k) - 1 = e^2 (x^2 - 1) / 24 + r(k),
    |r(k)| <= e^4 / 640 + e^3 (|x| + 1)^3 exp((|x| + 1) / 2^11) / 48 + (N - 1) m(k).

With ``H^2 <= chi^2(R || D) / 2 = E_D[(N m - 1)^2] / 2`` (since ``(sqrt p - sqrt q)^2 <= (p - q)^2 / q``),
Minkowski's inequality, ``E_D (x^2 - 1)^2 <= 2 (1 + 10^-100)`` and ``E_D (|x| + 1)^6 e^((|x|+1)/2^10)
<= 170`` (Gaussian moments; the discrete Gaussian's agree with them up to terms of order
exp(-2 pi^2 s^2), by Poisson summation), for s >= 2^10:
``sqrt(chi^2) <= e^2 (sqrt 2 / 24 + 0.00027) <= 0.0592 e^2``, so ``H <= HELLINGER / s^2`` with
:data:`HELLINGER` = 0.042 (the asymptotic value is 1 / sqrt(2304) = 0.0208; tested against mpmath).
For a mechanism whose every step draws its noise given the past (adaptive composition, random
batches included), add the whole sequence of batches to the output: it has the same law in both
runs, and dropping it at the end can only lower the distance. Given the batches, each step's noise
is centred on the same lattice point in both runs whatever came before, so BC of the joint output
distribution is at least the product of the steps' BCs (induction over steps; BC is jointly
concave, so the mixture over batch sequences keeps the bound, and a lattice shift leaves it
unchanged), hence ``1 - BC_joint <= n H^2`` and, by Le Cam's inequality ``TV <= sqrt(1 - BC^2)``,

    TV(all discrete, all rounded) <= sqrt(2 n) HELLINGER / s^2,

which replaces ``n LATTICE_TV / s^2`` in the slack above (:func:`hellinger_rate`).

Granularity (public parameters only). By default ``g`` is the largest power of two with
``g <= sigma_0 2^-20`` and ``g sqrt(m) <= Delta 2^-20`` (Gaussian; ``g m <= Delta 2^-20`` for
Laplace), where ``sigma_0`` is the noise scale calibrated without the rounding, but not below
``sigma_0 2^-24``: the lattice scale stays in [2^20, 2^24] (fine enough to be invisible next to the
noise, coarse enough for the sampler's 52-bit arithmetic), and the rounding adds at most a
fraction 2^-20 to the sensitivity unless the unit spans more than 2^8 cells per lattice refinement.

A Gaussian release also pays the slack ``(1 + e^eps) m 0.025 (g / sigma)^2`` out of delta, and at a
large epsilon (e^20 is 5 10^8) that slack exceeds delta on the lattice above. The default then
refines the lattice until the slack at ``sigma_0`` is at most :data:`SLACK_SHARE` of delta (the slack
itself is accounted exactly as before, at the final sigma), down to a lattice scale of
:data:`MAX_DEFAULT_SCALE` (below the sampler's 2^40, so that the calibrated sigma, a little larger
than ``sigma_0``, still fits): ``g`` is a public function of (epsilon, delta, sigma_0, m) only. Only
where even that lattice leaves a slack of half of delta or more (epsilon above about 40 at
delta 1e-6) is the release refused, naming --epsilon and --delta, which set it.
"""

from __future__ import annotations

import math

from tsdp.errors import UsageError

SAMPLERS = ("hardened", "float")
MIN_LATTICE_SCALE = 8.0
DEFAULT_RESOLUTION = 20
MAX_RESOLUTION = 24
LATTICE_TV = 0.025  # total variation, discrete vs rounded Gaussian, per coordinate, times s^2 (s >= 8)
HELLINGER = 0.042  # Hellinger distance, discrete vs rounded Gaussian, per coordinate, times s^2 (s >= 2^10)
MIN_HELLINGER_SCALE = 2.0 ** 10
SLACK_SHARE = 2.0 ** -10  # a default lattice keeps the Gaussian rounding slack at most this share of delta
MAX_DEFAULT_SCALE = 2.0 ** 39  # the finest lattice (sigma_0 / g) a default may take
GAUSSIAN_THEOREM = ("discrete Gaussian on the granularity lattice (Canonne, Kamath and Steinke 2020), within total "
                    "variation 0.025 (g/sigma)^2 per changed value of the rounded continuous Gaussian, a "
                    "post-processing of the Gaussian mechanism: delta <= deltaGauss + (1 + e^eps) m 0.025 "
                    "(g/sigma)^2 for m changed values (tsdp.accounting.discrete); rounding to the lattice "
                    "included in the sensitivity")
LAPLACE_THEOREM = ("discrete Laplace on the granularity lattice: pure epsilon = L1 lattice sensitivity / scale "
                   "(Canonne, Kamath and Steinke 2020, Section 2; Ghosh, Roughgarden and Sundararajan 2012); "
                   "rounding to the lattice included in the sensitivity")


# Paths whose noise can only be floating-point, and why (none since forecast-train became hardened).
FLOAT_ONLY: dict[str, str] = {}
# Reasons earlier versions stated (a report states the reason of the version that wrote it).
FLOAT_ONLY_EARLIER = {
    "forecast-train": (
        "its structured-subsampling accountant composes dominating pairs of the continuous Gaussian mechanism; a "
        "discrete Gaussian on a lattice of the clipped gradient sum (sensitivity C + g sqrt(parameters)) has only an "
        "epsilon-shifted profile bound (Canonne, Kamath and Steinke 2020), which is not a dominating pair the "
        "subsampled composition can use, and carrying it as an extra delta per step has not been derived and "
        "checked; the gradients, clipping and optimiser are floating-point computations in any case",
        "its structured-subsampling accountant composes dominating pairs of the continuous Gaussian mechanism; a "
        "discrete Gaussian on a lattice of the clipped gradient sum would need the rounded sum's sensitivity "
        "(C + g sqrt(parameters) between mixture components) carried through that accountant and the rounding "
        "slack of every parameter at every step added to delta, which has not been derived and checked; the "
        "gradients, clipping and optimiser are floating-point computations in any case"),
}


def check_granularity(g: float) -> float:
    """A user-given granularity must be a positive power of two (so that multiples of it are exact)."""
    if not (isinstance(g, (int, float)) and math.isfinite(g) and g > 0 and math.frexp(g)[0] == 0.5):
        raise UsageError(f"--granularity must be a positive power of two (e.g. 0.0009765625 = 2^-10), got {g!r}")
    return float(g)


def choose_granularity(scale0: float, sensitivity: float, cells: int, norm: str,
                       slack: tuple[float, float] | None = None) -> float:
    """The default granularity from public parameters (module docstring); ``norm`` is ``l1`` or ``l2``.

    ``slack``: ``(epsilon, delta)`` of a Gaussian release that pays the rounding slack of ``cells``
    changed values out of delta; the lattice is then refined until that slack, at ``scale0``, is at
    most SLACK_SHARE of delta (UsageError naming --epsilon when no lattice down to MAX_DEFAULT_SCALE
    keeps it below half of delta).
    """
    spread = math.sqrt(cells) if norm == "l2" else float(cells)
    target = min(scale0 * 2.0 ** -DEFAULT_RESOLUTION, sensitivity * 2.0 ** -DEFAULT_RESOLUTION / spread)
    floor = scale0 * 2.0 ** -MAX_RESOLUTION
    if target >= floor:
        g = 2.0 ** math.floor(math.log2(target))
    else:
        g = 2.0 ** math.ceil(math.log2(floor))  # the lattice scale stays at most 2^24
    if slack is None:
        return g
    epsilon, delta = slack
    rate = rounding_slack(epsilon, cells * LATTICE_TV)  # the slack at lattice scale 1; it falls as 1/s^2
    if rate * (g / scale0) ** 2 <= SLACK_SHARE * delta:
        return g
    finest = 2.0 ** math.ceil(math.log2(scale0 / MAX_DEFAULT_SCALE))
    wanted = scale0 * math.sqrt(SLACK_SHARE * delta / rate)
    g = max(2.0 ** math.floor(math.log2(wanted)), finest) if wanted > 0 else finest
    if not rate * (g / scale0) ** 2 < delta / 2:
        raise UsageError(f"--epsilon {epsilon:g} with --delta {delta:g}: the hardened sampler's rounding slack, "
                         f"(1 + e^epsilon) x {cells} changed value(s) x 0.025 (g/sigma)^2, is half of delta or more "
                         f"even on the finest lattice (sigma/g = {scale0 / g:.3g}); lower --epsilon (its guarantee "
                         "is already nearly no noise), raise --delta, or use --sampler float (not for publication)")
    return g


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


def lattice_tv(sigma_lattice: float) -> float:
    """Total variation between the discrete and the rounded Gaussian of parameter ``sigma_lattice``
    (>= :data:`MIN_LATTICE_SCALE`), one coordinate: at most ``LATTICE_TV / sigma_lattice^2``."""
    if not sigma_lattice >= MIN_LATTICE_SCALE:
        raise ValueError(f"the lattice bound needs sigma / g >= {MIN_LATTICE_SCALE:g}, got {sigma_lattice}")
    return LATTICE_TV / (sigma_lattice * sigma_lattice)


def slack_rate(sigma_lattice: float, coords: int) -> float:
    """``m TV``: the rounding slack's factor of ``(1 + e^eps)`` for ``coords`` = m changed values."""
    return coords * lattice_tv(sigma_lattice)


def hellinger_rate(sigma_lattice: float, draws: int) -> float:
    """``sqrt(2 n) HELLINGER / s^2``: the rounding slack's factor of ``(1 + e^eps)`` when all ``n`` =
    ``draws`` noisy lattice values of a run are replaced (module docstring; needs s >= 2^10)."""
    if not sigma_lattice >= MIN_HELLINGER_SCALE:
        raise ValueError(f"the Hellinger bound needs sigma / g >= {MIN_HELLINGER_SCALE:g}, got {sigma_lattice}")
    return math.sqrt(2.0 * draws) * HELLINGER / (sigma_lattice * sigma_lattice)


def rounding_slack(epsilon: float, rate: float) -> float:
    """``(1 + e^eps) rate``: what the discrete Gaussian may add to the continuous profile's delta."""
    return (1.0 + math.exp(min(epsilon, 700.0))) * rate


def slack_budget(epsilon: float, delta: float, sigma_lattice: float, coords: int) -> float:
    """The delta left for the continuous profile once the rounding slack is paid, the slack computed
    at a lattice scale that is a lower bound on the final one (it only shrinks as sigma grows).
    UsageError when the slack would take half of ``delta`` or more (a finer --granularity makes it
    negligible)."""
    slack = rounding_slack(epsilon, slack_rate(max(sigma_lattice, MIN_LATTICE_SCALE), coords))
    if not slack < delta / 2:
        raise UsageError(f"--granularity: at {sigma_lattice:.3g} lattice steps per sigma the discrete noise may add "
                         f"{slack:.3g} to delta (for {coords} changed values), half of --delta {delta:g} or more; "
                         "use a finer --granularity (the default keeps sigma / g >= 2^20)")
    return delta - slack


def hardened_parameters(scale: float, g: float, covered: float, norm: str, what: str) -> dict:
    """The report parameters of a hardened release (after checking the noise spans the lattice)."""
    check_lattice_scale(scale, g, what)
    return {"sampler": "hardened", "granularity": g, f"rounded_{norm}_sensitivity": covered}

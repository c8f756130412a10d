"""DP-SGD with the hardened sampler: the noisy gradient sum on a lattice, and what that costs.

A hardened step releases ``round_g(S) + g Z`` with ``S`` the sum of the clipped window gradients
(each of norm at most C), ``g`` a power of two, ``Z`` a vector of P exact discrete Gaussian draws of
parameter ``s = sigma C / g`` (:mod:`tsdp.mechanisms.discrete`), P the number of parameters.

Why the structured-subsampling accountant still applies. Schuchardt et al. (2025) bound a step by
coupling batches and using only the l2 sensitivity of the batch function ``f`` under inserting or
removing one window (Lemmas D.6 and D.7, the proofs of Theorems 4.2-4.4, E.1, E.8, F.1, F.2 and
G.1: "the underlying function f has l2 sensitivity Delta_2 under insertion/removal"), never its
linearity. For ``f = round_g(S)``: if batches differ by one window, ``||S - S'|| <= C``, and rounding
moves each coordinate by at most g / 2, so ``||f - f'|| <= C + g sqrt(P)`` =: C'. Hence the
rounded continuous run (every step releases ``round_g(f + N(0, sigma^2 C^2 I))``, a post-processing
of the Gaussian mechanism on f) is bounded by every theorem of :mod:`tsdp.accounting.structured`
with noise multiplier ``sigma' = sigma C / C'``: ``P~(E) <= e^eps' Q~(E) + delta~(eps')`` for the
rounded runs P~, Q~ on neighbouring datasets.

Floating-point sums. The sum S is computed, not exact: the windows' clipped gradients are summed in
float64 (the numpy models by their weighted sums, the JAX models by float64 sums of their float32 pieces
on the host, each term formed with at most two roundings, :mod:`tsdp.forecast.deep.ghost`), so for n
terms of norm at most C (1 + gamma_{P+4}) (the norm, the weight and their rounding; the JAX models clip
to C (1 - 2 gamma_{P+4}) in their precision, which keeps each exact term within C) the computed sum is within ``gamma_{n+2} n C (1 + gamma_{P+4})`` of
the exact one in l2 norm (``|fl(sum x) - sum x| <= gamma_{n-1} sum |x|`` per coordinate for any order,
the products adding one rounding each; gamma_k = k u / (1 - k u), u = 2^-53). Neighbouring batches'
computed sums therefore differ by at most ``C F`` with ``F = (1 + gamma_{P+4})(1 + 2 gamma_{n+2} n)``,
n the largest number of windows a batch can hold (:attr:`GradientLattice.max_terms`), and
``C' = C F + g sqrt(P)`` (F - 1 is about 1.5e-11 at n = 256).

From the rounded to the discrete run (P, Q), with n = steps x P noisy values (lattice units,
s = sigma C / g):

* ``P(E) <= P~(E) + TV(P, P~)`` and ``TV(P, P~) <= sqrt(2 n) HELLINGER / s^2``
  (:mod:`tsdp.accounting.discrete`, the Hellinger bound; adaptive steps and batch mixtures included).
* ``Q~(E) <= e^eta Q(E) + e^-800``. Per value the rounded pmf over the discrete one is
  ``N m(k)`` with ``m(k) = E_t exp(-(2 k t + t^2) / (2 s^2)) <= sinh(k / (2 s^2)) / (k / (2 s^2))
  <= exp(k^2 / (24 s^4))`` (t uniform on [-1/2, 1/2]; ``sinh(y) / y <= exp(y^2 / 6)``) and
  ``log N <= 3 exp(-2 pi^2 s^2)``. Fix the batches of every step (Q~ and Q are the same mixture over
  them, so the bound carries over to the mixture): the noise values ``k`` (output minus the rounded
  sum, which depends on earlier outputs only) are i.i.d. under Q~ whatever the adaptivity, the
  likelihood ratio is at most ``exp(sum k^2 / (24 s^4) + n log N)``, and with ``k = round(s G)``,
  ``(k / s)^2 <= (1 + 1/s) G^2 + (1 + s) / (4 s^2)``, the chi-square bound of Laurent and Massart
  (2000), ``P(chi2_n >= n + 2 sqrt(n t) + 2 t) <= e^-t``, at t = 800 gives
  ``sum (k / s)^2 <= K = (1 + 1/s)(n + 2 sqrt(800 n) + 1600) + n / (2 s)`` except on an event of
  Q~-probability e^-800. So ``eta = K / (24 s^2) + 3 n exp(-2 pi^2 s^2)``.

Together, for eps <= 700 (``e^eps e^-800 <= e^-100``):

    P(E) <= e^(eps' + eta) Q(E) + delta~(eps') + sqrt(2 n) HELLINGER / s^2 + e^-100,

so tsdp reports ``eps = eps'(delta - slack) + eta`` with ``slack = sqrt(2 n) 0.042 / s^2 + e^-100``
(:func:`GradientLattice.slack`, :func:`GradientLattice.shift`). Unlike the ``(1 + e^eps)`` slack of
the release paths, neither grows with epsilon. At s = 2^28 and n = 10^10 the slack is below 1e-13
and the shift below 6e-9.

Label and context noise (Theorem G.1) enter that theorem only through tau, the total variation
between the noisy windows of neighbouring datasets (one value changed by at most v). Hardened, a
value is rounded to a lattice g_in and discrete Gaussian noise of parameter ``s_in = tau_noise v / g_in``
added; the rounded values differ by at most ``v + g_in``, and the triangle inequality through the
rounded continuous noise gives ``tau <= TV(N(0, 1), N((v + g_in) / (tau_noise v), 1)) + 2 LATTICE_TV /
s_in^2``, which is used in place of the continuous tau (the bound is increasing in tau). The
comparison above replaces the gradient noise only; the input noise is discrete in both runs.

Lattices (public parameters only): ``g = 2^(floor(log2(sigma C)) - 28)`` (s in [2^28, 2^29); the
sampler costs about 1 ms per 25,000 values there) and ``g_in = 2^(floor(log2(tau_noise v)) - 20)``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from scipy import special

from tsdp.accounting.discrete import LATTICE_TV, hellinger_rate
from tsdp.errors import UsageError

RESOLUTION = 28
INPUT_RESOLUTION = 20
MIN_NOISE = 2.0 ** -960  # below this the lattice's reciprocal 1/g (2^(R+1) / noise) leaves the float range
CHI2_TAIL = 800.0  # t of the chi-square tail bound: e^-t e^eps <= e^-100 for eps <= 700
THEOREM = ("hardened: the clipped gradient sum rounded to a power-of-two lattice g and exact discrete Gaussian "
           "noise (Canonne, Kamath and Steinke 2020); accounted with clip C F + g sqrt(parameters) (F the float64 "
           "batch sum's error factor), delta "
           "slack sqrt(2 steps parameters) 0.042 (g / (sigma C))^2 + e^-100 and an epsilon shift of about steps "
           "parameters (g / (sigma C))^2 / 24 (tsdp.accounting.dpsgd_lattice)")


def _power_of_two_below(x: float, resolution: int) -> float:
    return 2.0 ** (math.floor(math.log2(x)) - resolution)


def granularity_for(noise_multiplier: float, clip_norm: float) -> float:
    """``2^(floor(log2(sigma C)) - 28)``: s = sigma C / g lies in [2^28, 2^29)."""
    return _power_of_two_below(noise_multiplier * clip_norm, RESOLUTION)


@dataclass(frozen=True)
class GradientLattice:
    """The lattice of a hardened DP-SGD run: noise ``sigma C`` on ``parameters`` coordinates."""

    noise_multiplier: float
    clip_norm: float
    parameters: int
    max_terms: int = 1  # the most windows a batch can hold (the float sum's error grows with it)

    def __post_init__(self) -> None:
        p = self.parameters
        if isinstance(p, bool) or not isinstance(p, int) or p < 1:
            raise UsageError(f"--parameters must be an integer >= 1 (the model's parameter count), got {p!r}")
        c = self.clip_norm
        if isinstance(c, bool) or not isinstance(c, (int, float)) or not (math.isfinite(c) and c > 0):
            raise UsageError(f"--clip-norm must be finite and > 0, got {c!r}")
        if not self.noise_multiplier * c >= MIN_NOISE:
            raise UsageError(f"--clip-norm {c:g}: the gradient noise sigma C = {self.noise_multiplier * c:.3g} is below "
                             f"{MIN_NOISE:.3g}, too small for the hardened sampler's lattice; use a larger --clip-norm")

    @property
    def granularity(self) -> float:
        """g: the largest power of two at most ``sigma C 2^-28``."""
        return granularity_for(self.noise_multiplier, self.clip_norm)

    @property
    def scale(self) -> float:
        """s = sigma C / g, in [2^28, 2^29)."""
        return self.noise_multiplier * self.clip_norm / self.granularity

    @property
    def sum_factor(self) -> float:
        """F = (1 + gamma_{P+4})(1 + 2 gamma_{n+2} n): the computed float64 sum's sensitivity over C."""
        return (1 + _gamma(self.parameters + 4)) * (1 + 2 * _gamma(self.max_terms + 2) * self.max_terms)

    @property
    def rounded_clip(self) -> float:
        """C' = C F + g sqrt(P): the sensitivity of the rounded computed sum to one window."""
        return self.clip_norm * self.sum_factor + self.granularity * math.sqrt(self.parameters)

    @property
    def accounted_multiplier(self) -> float:
        """sigma' = sigma C / C': the noise multiplier the accountant is given."""
        return self.noise_multiplier * self.clip_norm / self.rounded_clip

    def slack(self, steps: int) -> float:
        """The delta paid after ``steps`` noisy steps: ``sqrt(2 n) HELLINGER / s^2 + e^-100``, n = steps P."""
        return hellinger_rate(self.scale, steps * self.parameters) + math.exp(-100.0)

    def shift(self, steps: int) -> float:
        """eta, the epsilon added after ``steps`` noisy steps: ``K / (24 s^2) + 3 n e^(-2 pi^2 s^2)``."""
        n, s = float(steps) * self.parameters, self.scale
        k = (1 + 1 / s) * (n + 2 * math.sqrt(CHI2_TAIL * n) + 2 * CHI2_TAIL) + n / (2 * s)
        return k / (24 * s * s) + 3 * n * math.exp(-2 * math.pi ** 2 * s * s)


def _gamma(k: int) -> float:
    """gamma_k = k u / (1 - k u), u = 2^-53 (Higham's bound on k roundings in float64)."""
    ku = k * 2.0 ** -53
    if not ku < 0.5:
        raise UsageError(f"a batch of {k} terms is beyond what tsdp bounds the float64 sum of")
    return ku / (1 - ku)


def tvd_unit_shift(sigma: float) -> float:
    """tau = TV(N(0, sigma^2), N(1, sigma^2)) = 2 Phi(1 / (2 sigma)) - 1 (1 when sigma = 0): Theorem G.1's
    tau for continuous label/context noise, the bound :func:`hardened_tau` replaces on a lattice."""
    if sigma == 0:
        return 1.0
    return float(2 * special.ndtr(1 / (2 * sigma)) - 1)


def input_granularity(noise: float, value_bound: float) -> float:
    """g_in for label or context noise ``noise`` (in units of v = ``value_bound``)."""
    if not noise * value_bound >= MIN_NOISE:
        raise UsageError(f"--value-bound {value_bound:g}: the input noise {noise:g} x {value_bound:g} is below "
                         f"{MIN_NOISE:.3g}, too small for the hardened sampler's lattice; use a larger --value-bound")
    return _power_of_two_below(noise * value_bound, INPUT_RESOLUTION)


def hardened_tau(noise: float, value_bound: float) -> float:
    """tau of Theorem G.1 for hardened label/context noise (module docstring); 1 without noise."""
    if noise == 0:
        return 1.0
    g = input_granularity(noise, value_bound)
    shift = (value_bound + g) / (noise * value_bound)
    s_in = noise * value_bound / g
    return min(1.0, float(2 * special.ndtr(shift / 2) - 1) + 2 * LATTICE_TV / (s_in * s_in))

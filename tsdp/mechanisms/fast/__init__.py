"""FAST: filtering and adaptive sampling for private time-series release (Fan and Xiong 2012).

Source: L. Fan and L. Xiong, "Real-time aggregate monitoring with differential privacy", CIKM 2012
(full study arXiv:1202.3461, IEEE TKDE 26(9), 2014). The contract is ``specs/fast.md``; the equation
numbers below are the spec's. The text extraction of the paper lost every displayed equation, so
most bodies are rebuilt by the spec and marked **[R]**; **[D]** marks a tsdp decision.

Mechanism, per series of known length T (spec section 2.9):

* At most M time stamps are *sampled*: ``z_k = x_k + Lap(lambda)`` with
  ``lambda = Delta_q M / epsilon`` (Eq. 3; each sample is (epsilon/M)-DP). Unsampled time stamps
  are never read. Sampler [D]: by default (hardened) ``x_k`` is rounded to multiples of a
  power-of-two granularity ``g`` and the noise is ``g`` times discrete Laplace (Gaussian) noise,
  the sensitivity per sample being ``(floor(Delta_q / g) + 1) g`` (:mod:`tsdp.accounting.discrete`);
  ``R = auto`` keeps the continuous noise's variance (the discrete noise's is within O(g^2) below).
  ``sampler="float"``: numpy's floating-point noise, not for publication.
* A scalar Kalman filter (Eqs. 4-6, 9 [R]; :mod:`tsdp.mechanisms.kalman`) with process-noise
  variance Q and measurement-noise variance R (``auto`` [D]: the variance of the DP noise,
  ``2 lambda^2`` for Laplace) releases the posterior ``xhat_k`` at sampling points and the prior
  ``xhat^-_k = xhat_{k-1}`` elsewhere, so the release is piecewise constant between samples.
  k = 0 is always sampled and ``xhat_0 = z_0``, ``P_0 = P0`` (``auto`` = R) [D].
* Adaptive sampling (PID control). At the n-th sampling point k_n >= 1 the feedback error is
  (Eq. 10 [R]) ``E_n = |xhat_{k_n} - xhat^-_{k_n}|`` (``absolute``) or that divided by
  ``max(xhat_{k_n}, delta)`` (``relative``); it reads only noisy quantities. The PID error
  (Eq. 11 [R]) is

      Delta_n = Cp E_n + Ci mean(E_{n-Ti+1..n}) + Cd (E_n - E_{n-1}) / (k_n - k_{n-1})

  with gains ``Cp, Ci, Cd >= 0``, ``Cp + Ci + Cd = 1`` (Eq. 12 [R]); the mean runs over the errors
  that exist when fewer than Ti do, and the derivative term is 0 until two errors exist [D].
  The next interval is (Eq. 13 [R], integerised by truncation toward zero as in [X], F-P10)

      I' = max(1, I + trunc(theta (1 - exp(min((Delta - xi)/xi, 50)))))

  (the exponent is clipped before ``exp``, F-P8), and the next sampling point is ``k_n + I'``.
  ``I_0 = 1``; the first W samples (warm-up, ``auto`` = Ti, spec 2.8) are consecutive and do not
  update I. Sampling stops for good once M samples are taken.
* Fixed-rate sampling: k = 0, I, 2I, ...; ``ceil(T/I)`` samples, each with epsilon/ceil(T/I)
  (not the paper's epsilon I / T, which overspends when I does not divide T: F-P12).

Privacy (Theorem 2, spec 1.4, applied to the DECLARED unit). The paper protects a user who may
contribute up to Delta_q to every time stamp of a series. tsdp accounts for exactly the unit that
was declared (and, for event input, enforced): a unit changes at most ``steps_per_series`` time
stamps of each of at most K series (1 for ``event``, ``w`` for ``w-event``, ``I`` for ``user``;
:meth:`ContributionBounds.steps_per_series`), each by at most Delta_q. A series is sampled at most
once per time stamp and at most M times in all, so at most ``c = min(M, steps_per_series)`` of its
samples fall on changed cells; every other sample has the same distribution under both neighbours
(privacy loss exactly 0). The sampling decisions, the filter and the PID controller read only
earlier noisy outputs and are post-processing. Hence:

* Laplace: every privacy-loss term is at most Delta_q / lambda in absolute value and at most n of
  them are non-zero, so ``lambda = Delta_q n / epsilon`` gives pure epsilon-DP (the pointwise bound
  on the privacy-loss sum; Fan and Xiong's Theorem 2 is the case n = c = M, K = 1). n is c K when
  the unit's cells lie in K series (event, user), but a w-event unit keeps K series per step and may
  pick others at every step, so its K w cells can lie in up to min(S, K w) series, a sample each:
  n sums min(M, changed cells) over the series in that worst spread (:func:`changed_samples`);
* Gaussian [D, not in the paper]: the samples that fall on changed cells are chosen adaptively, and
  their squared sensitivities sum to at most ``n Delta_q^2``; by fully adaptive composition of
  Gaussian DP (Smith and Thakurta 2022) the release is (Delta_q sqrt(n) / sigma)-GDP, so
  ``sigma = analytic_sigma(epsilon, delta, Delta_q sqrt(n))`` gives (epsilon, delta)-DP; ``R = auto``
  is then ``sigma^2``.

The guarantee covers the released values and the sampled flags together. The number of samples
actually taken is at most M and depends on the data only through noisy outputs; the guarantee uses
M whatever that number is (unspent budget is not refunded, F-P5), and it is not part of the claim.
When one unit can touch several of the S series (spec 4, F-P15) the Laplace budget splits over
the n samples (a series costs epsilon times its share of them, basic composition). Under
substitution neighbours the per-sample sensitivity is ``2 Delta_q`` with the same n (the difference
is the old unit's minus the new unit's cells, each an add/remove difference; the triangle inequality
holds whether their cells coincide or not, and for signed values too).

The recursion runs over time steps; each step updates all series at once with numpy arrays. The
noise is drawn up front, one value per (series, sample index), through :mod:`.noise`: it does not
depend on the data, and a series' output depends only on its own values and noise.

Floating-point Laplace and Gaussian samplers are not hardened against the attack of Mironov (2012)
(F-P16); see :mod:`tsdp.mechanisms.noise`.

The package: :mod:`.settings` (parameters, presets), :mod:`.sampling` (the recursion and the
samples a unit can reach), :mod:`.accounting` (the privacy map), :mod:`.release` (the mechanism),
:mod:`.synthetic` (test series).
"""

from tsdp.mechanisms.fast.accounting import FAST_GAUSSIAN_THEOREM, FAST_THEOREM, calibrate
from tsdp.mechanisms.fast.release import FAST, Fast, FastRelease, release_fast
from tsdp.mechanisms.fast.sampling import changed_samples, next_interval, run_fast, samples_per_unit
from tsdp.mechanisms.fast.settings import DEFAULTS, PRESETS, FastSettings, resolve_settings
from tsdp.mechanisms.fast.synthetic import SYNTHETIC, synthetic

__all__ = ["DEFAULTS", "FAST", "FAST_GAUSSIAN_THEOREM", "FAST_THEOREM", "PRESETS", "SYNTHETIC", "Fast", "FastRelease",
           "FastSettings", "calibrate", "changed_samples", "next_interval", "release_fast", "resolve_settings",
           "run_fast", "samples_per_unit", "synthetic"]

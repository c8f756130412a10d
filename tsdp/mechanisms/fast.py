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
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import numpy as np

from tsdp.accounting import discrete as disc
from tsdp.accounting import gaussian as gauss
from tsdp.accounting.budget import check_delta, check_epsilon
from tsdp.accounting.claim import MechanismEvent, PrivacyClaim
from tsdp.accounting.sensitivity import ContributionBounds, privacy_unit
from tsdp.caveats import Caveat
from tsdp.errors import DataError, UsageError
from tsdp.mechanisms import kalman
from tsdp.mechanisms.baseline import Panel, Release
from tsdp.mechanisms.noise import FLOAT_WARNING, gaussian_noise, laplace_noise, snap

FAST_THEOREM = ("Fan and Xiong 2012, Theorem 2 for the declared unit: at most n Laplace samples fall on "
                "changed cells (min(M, changed cells) per series, over the series the unit can change), each "
                "with privacy loss at most Delta_q/lambda, all others with loss 0; filtering and sampling "
                "decisions are post-processing")
FAST_GAUSSIAN_THEOREM = (
    "Fan and Xiong 2012, Theorem 2 argument with Gaussian samples for the declared unit: the at most "
    "n adaptively chosen samples that fall on changed cells (min(M, changed cells) per series, over the "
    "series the unit can change) have squared sensitivities summing to at most n*Delta_q^2, so the "
    "release is Delta_q*sqrt(n)/sigma-GDP "
    "by fully adaptive composition of Gaussian DP (Smith and Thakurta 2022); filtering and sampling "
    "decisions are post-processing; " + gauss.ANALYTIC_THEOREM
)
EXPONENT_CLIP = 50.0  # F-P8: exp((Delta - xi)/xi) is evaluated with the exponent clipped at 50
ERROR_MODES = ("absolute", "relative")
NOISES = ("laplace", "gaussian")

# Defaults without a preset (spec section 4 CLI defaults). Provenance in DEFAULT_SOURCES.
DEFAULTS: dict[str, Any] = {
    "q": 1e5, "r": "auto", "p0": "auto", "gains": (0.9, 0.1, 0.0), "ti": 5, "theta": 10.0,
    "xi": 1000.0, "error": "absolute", "error_delta": 1.0, "warmup": "auto", "max_samples_ratio": 0.15,
}
DEFAULT_SOURCES = {
    "q": "streamdp-benchmark [X] (the CIKM value is lost in the text)",
    "r": "tsdp default [D]: variance of the DP noise",
    "p0": "tsdp default [D]: P0 = R",
    "gains": "streamdp-benchmark [X] (the CIKM values are lost in the text)",
    "ti": "streamdp-benchmark [X] (the CIKM value is lost in the text)",
    "theta": "Fan and Xiong 2012 [P]",
    "xi": "Fan and Xiong 2012 [P]",
    "error": "tsdp default [D]: absolute error, matching xi = 1000 (CIKM form)",
    "error_delta": "Fan and Xiong 2012 [P] (sanitary bound 1)",
    "warmup": "tsdp default [D]: W = Ti, as streamdp-benchmark [X]",
    "max_samples_ratio": "streamdp-benchmark [X] ('paper', i.e. the full study), NOT the CIKM text",
}
# spec section 4; explicit arguments override them. A preset's epsilon is used when epsilon=None.
PRESETS: dict[str, dict[str, Any]] = {
    "cikm2012": {"epsilon": 0.01, "theta": 10.0, "xi": 1000.0, "error": "absolute", "q": 1e5, "r": 1e6,
                 "gains": (0.9, 0.1, 0.0), "ti": 5, "max_samples_ratio": 0.15},
    "streamdp": {"epsilon": 0.01, "theta": 5.0, "xi": 0.1, "error": "relative", "q": 1e5, "r": 1e6,
                 "p0": 100.0, "gains": (0.9, 0.1, 0.0), "ti": 5, "max_samples_ratio": 0.15},
}
_X = "streamdp-benchmark [X] (claimed there to match the original FAST binaries)"
PRESET_SOURCES: dict[str, dict[str, str]] = {
    "cikm2012": {"epsilon": "Fan and Xiong 2012 [P]", "q": _X, "r": _X},
    "streamdp": {"epsilon": "Fan and Xiong 2012 [P]", "q": _X, "r": _X, "p0": _X,
                 "theta": "streamdp-benchmark [X]", "xi": "streamdp-benchmark [X]",
                 "error": "streamdp-benchmark [X] (relative error of the full study)"},
}
# Options that only make sense for adaptive sampling (spec 4, rule 8), by the names errors use: the
# option of ``tsdp release`` where there is one, else the keyword argument of :func:`release_fast`.
ADAPTIVE_ONLY = {
    "max_samples": "--fast-max-samples", "max_samples_ratio": "max_samples_ratio",
    "gains": "--fast-gains", "ti": "ti", "theta": "--fast-theta",
    "xi": "--fast-xi", "error": "error", "error_delta": "error_delta", "warmup": "warmup",
}


@dataclass(frozen=True)
class FastRelease(Release):
    """A FAST release: the values, the claim, and the sampled flags.

    ``sampled`` (bool, the shape of ``values``) marks the sampling points; it is post-processing of
    DP outputs and may be released (spec 4, output column ``is_sample``). ``trace`` is filled only
    with ``trace=True`` (tests, ``--debug``): arrays of the shape of ``values`` holding the prior
    ``P^-`` (NaN at k = 0), and at sampling points the noisy observation ``z``, the gain ``K``
    (NaN at k = 0, where ``xhat_0 = z_0``) and the posterior variance ``P`` (NaN elsewhere).
    ``z`` is the output of the Laplace (Gaussian) mechanism and is covered by the same guarantee;
    ``P^-``, ``K`` and ``P`` are post-processing of the sampling pattern.
    """

    sampled: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=bool))
    trace: dict[str, np.ndarray] | None = None


@dataclass(frozen=True)
class FastSettings:
    """Resolved, validated parameters of one FAST run (the public parameters of the claim)."""

    adaptive: bool
    n_steps: int
    max_samples: int
    interval: int | None
    q: float
    r: float | str
    p0: float | str
    gains: tuple[float, float, float]
    ti: int
    theta: float
    xi: float
    error: str
    error_delta: float
    warmup: int
    preset: str | None
    sources: dict[str, str]
    warnings: tuple[str, ...]


def next_interval(interval, pid_error, theta: float, xi: float):
    """Eq. 13 [R]: ``max(1, I + trunc(theta (1 - exp(min((Delta - xi)/xi, 50)))))``, elementwise.

    Delta = xi leaves I unchanged; Delta = 0 adds ``trunc(0.632 theta)``; a large Delta collapses I
    to 1 without overflow (the exponent is clipped before ``exp``, F-P8).
    """
    exponent = np.minimum((np.asarray(pid_error, dtype=float) - xi) / xi, EXPONENT_CLIP)
    step = np.trunc(theta * -np.expm1(exponent))  # theta (1 - e^x), truncated toward zero
    new = np.asarray(interval, dtype=float) + np.clip(step, -2.0**62, 2.0**62)
    return np.clip(new, 1.0, 2.0**62).astype(np.int64)


def resolve_settings(
    n_steps: int,
    *,
    adaptive: bool = True,
    preset: str | None = None,
    max_samples: int | None = None,
    max_samples_ratio: float | None = None,
    interval: int | None = None,
    q: float | None = None,
    r: float | str | None = None,
    p0: float | str | None = None,
    gains: tuple[float, float, float] | None = None,
    ti: int | None = None,
    theta: float | None = None,
    xi: float | None = None,
    error: str | None = None,
    error_delta: float | None = None,
    warmup: int | str | None = None,
) -> FastSettings:
    """Merge explicit arguments, the preset and the defaults, and apply spec section 4's rules 5-12.

    ``None`` means "not given". Raises :class:`UsageError` naming the offending option.
    """
    if n_steps < 2:
        raise DataError(f"FAST needs series of at least 2 time stamps (T >= 2), got T={n_steps}")
    if preset is not None and preset not in PRESETS:
        raise UsageError(f"--fast-preset must be one of {', '.join(PRESETS)}, got {preset!r}")
    explicit = {"max_samples": max_samples, "max_samples_ratio": max_samples_ratio, "q": q, "r": r,
                "p0": p0, "gains": gains, "ti": ti, "theta": theta, "xi": xi, "error": error,
                "error_delta": error_delta, "warmup": warmup}
    if isinstance(adaptive, str) and adaptive in ("adaptive", "fixed"):
        adaptive = adaptive == "adaptive"
    if not isinstance(adaptive, (bool, np.bool_)):
        raise UsageError(f"the sampling (adaptive=) must be adaptive or fixed, got {adaptive!r}")
    if adaptive:
        if interval is not None:
            raise UsageError(f"--fast-fixed-interval applies to fixed sampling only, got {interval!r} "
                             "with adaptive sampling (adaptive=True); remove it or sample at fixed intervals")
        if max_samples is not None and max_samples_ratio is not None:
            raise UsageError(f"--fast-max-samples ({max_samples!r}) and max_samples_ratio "
                             f"({max_samples_ratio!r}) are mutually exclusive; give one")
    else:
        given = [flag for name, flag in ADAPTIVE_ONLY.items() if explicit[name] is not None]
        if given:
            raise UsageError(f"{', '.join(given)} apply to adaptive sampling only; remove them when "
                             "sampling every --fast-fixed-interval steps")
        if interval is None:
            raise UsageError("--fast-fixed-interval is required for fixed sampling (adaptive=False)")
        if not (_is_int(interval) and 1 <= interval <= n_steps):
            raise UsageError(f"--fast-fixed-interval must be an integer in [1, T={n_steps}], got {interval!r}")

    preset_values = PRESETS[preset] if preset else {}
    sources: dict[str, str] = {}

    def pick(name: str):
        if explicit.get(name) is not None:
            sources[name] = "explicit"
            return explicit[name]
        if name in preset_values:
            sources[name] = f"preset {preset}: " + PRESET_SOURCES[preset].get(name, DEFAULT_SOURCES[name])
            return preset_values[name]
        sources[name] = DEFAULT_SOURCES[name]
        return DEFAULTS[name]

    q_val = _positive(pick("q"), "--fast-q")
    r_val = _positive_or_auto(pick("r"), "--fast-r")
    p0_val = _positive_or_auto(pick("p0"), "p0")
    warnings: list[str] = []
    if not adaptive:
        interval = int(interval)
        m = -(-n_steps // interval)
        return FastSettings(False, n_steps, m, interval, q_val, r_val, p0_val, (0.0, 0.0, 0.0), 1, 0.0,
                            0.0, "none", 0.0, 0, preset,
                            {k: v for k, v in sources.items() if k in ("q", "r", "p0")}, ())

    if max_samples is not None:
        if not (_is_int(max_samples) and 1 <= max_samples <= n_steps):
            raise UsageError(f"--fast-max-samples must be an integer in [1, T={n_steps}], got {max_samples!r}")
        m = int(max_samples)
        sources["max_samples"] = "explicit"
    else:
        ratio = pick("max_samples_ratio")
        if not (_is_real(ratio) and 0 < ratio <= 1):
            raise UsageError(f"max_samples_ratio must be in (0, 1], got {ratio!r}")
        # floor of the decimal ratio times T (0.15 * 540 = 81 exactly, whatever the binary rounding)
        m = max(1, math.floor(Fraction(repr(float(ratio))) * n_steps))
        sources["max_samples"] = (f"floor({ratio!r} T), ratio explicit" if sources["max_samples_ratio"] == "explicit"
                                  else f"floor({ratio!r} T), ratio {DEFAULT_SOURCES['max_samples_ratio']}")
    gains_val = pick("gains")
    try:
        cp, ci, cd = (float(g) for g in gains_val)
    except (TypeError, ValueError):
        raise UsageError(f"--fast-gains must be three numbers (Cp, Ci, Cd), got {gains_val!r}") from None
    for name, g in (("Cp", cp), ("Ci", ci), ("Cd", cd)):
        if not (math.isfinite(g) and g >= 0):
            raise UsageError(f"--fast-gains: the PID gain {name} must be finite and >= 0, got {g!r}")
    if abs(cp + ci + cd - 1.0) > 1e-9:
        raise UsageError(f"--fast-gains: the PID gains Cp + Ci + Cd must sum to 1 "
                         f"(Eq. 12), got {cp!r} + {ci!r} + {cd!r} = {cp + ci + cd!r}")
    if not (cp > ci > cd):
        warnings.append(Caveat("fast_parameters", f"PID gains Cp={cp:g}, Ci={ci:g}, Cd={cd:g} do not follow the common practice "
                        "Cp > Ci > Cd (Fan and Xiong 2012, section 4)"))
    ti_val = pick("ti")
    if not (_is_int(ti_val) and ti_val >= 1):
        raise UsageError(f"ti must be an integer >= 1, got {ti_val!r}")
    theta_val = _positive(pick("theta"), "--fast-theta")
    xi_val = _positive(pick("xi"), "--fast-xi")
    error_val = pick("error")
    if error_val not in ERROR_MODES:
        raise UsageError(f"error must be one of {', '.join(ERROR_MODES)}, got {error_val!r}")
    delta_val = _positive(pick("error_delta"), "error_delta")
    if error_val == "relative" and xi_val > 10:
        warnings.append(Caveat("fast_parameters", f"relative errors with --fast-xi {xi_val:g} > 10: xi has the units of the "
                        "error, so the interval will grow at almost every sample (spec F-P2); "
                        "use --fast-preset streamdp or xi around 0.1"))
    if error_val == "absolute" and xi_val < 1:
        warnings.append(Caveat("fast_parameters", f"absolute errors with --fast-xi {xi_val:g} < 1: xi has the units of the "
                        "counts, so the interval will stay at 1 and the budget runs out in the first M "
                        "steps (spec F-P2); use --fast-preset cikm2012 or relative errors"))
    warmup_val = pick("warmup")
    if warmup_val == "auto":
        warmup_val = min(int(ti_val), m)
    elif not (_is_int(warmup_val) and 0 <= warmup_val <= m):
        raise UsageError(f"warmup must be auto or an integer in [0, M={m}], got {warmup_val!r}")
    return FastSettings(True, n_steps, m, None, q_val, r_val, p0_val, (cp, ci, cd), int(ti_val),
                        theta_val, xi_val, error_val, delta_val, int(warmup_val), preset, sources,
                        tuple(warnings))


def release_fast(
    values: np.ndarray,
    panel: Panel,
    epsilon: float | None,
    rng: np.random.Generator,
    delta: float | None = None,
    noise: str = "laplace",
    preset: str | None = None,
    max_samples: int | None = None,
    interval: int | None = None,
    adaptive: bool = True,
    *,
    max_samples_ratio: float | None = None,
    q: float | None = None,
    r: float | str | None = None,
    p0: float | str | None = None,
    gains: tuple[float, float, float] | None = None,
    ti: int | None = None,
    theta: float | None = None,
    xi: float | None = None,
    error: str | None = None,
    error_delta: float | None = None,
    warmup: int | str | None = None,
    trace: bool = False,
    sampler: str = "hardened",
    granularity: float | None = None,
) -> FastRelease:
    """Release each series of ``values`` (n_series x n_steps, time order; or one 1-D series) by FAST.

    ``epsilon`` is the total budget of the panel (``None``: the preset's, 0.01 for both presets).
    The claim is for exactly the unit of ``panel.bounds``.
    ``noise="laplace"`` gives pure epsilon-DP with ``Lap(Delta_q c K / epsilon)`` per sample
    (Theorem 2); ``noise="gaussian"`` gives (epsilon, delta)-DP with
    ``sigma = analytic_sigma(epsilon, delta, Delta_q sqrt(c K))``. ``Delta_q`` is
    ``panel.bounds.max_per_step`` (doubled for substitution neighbours), K the number of series
    one unit can touch and ``c = min(M, steps of a series the unit touches)`` (:func:`samples_per_unit`). Adaptive sampling (default) takes at most M samples per series (M given,
    or ``floor(ratio T)`` with ratio 0.15 by default); ``adaptive=False`` samples every
    ``interval`` steps (M = ceil(T / interval)). The other keyword arguments are the filter and
    controller parameters of the module docstring (``None``: the preset's, else the default);
    errors name the ``--fast-*`` option of ``tsdp release`` where there is one, else the keyword.
    """
    arr = np.asarray(values, dtype=np.float64)
    one_d = arr.ndim == 1
    if one_d:
        arr = arr[None, :]
    if arr.ndim != 2 or arr.shape != (panel.n_series, panel.n_steps):
        raise UsageError(f"values have shape {np.shape(values)}, but the panel is "
                         f"{panel.n_series} series x {panel.n_steps} steps")
    n_series, n_steps = arr.shape
    if preset is not None and preset not in PRESETS:
        raise UsageError(f"--fast-preset must be one of {', '.join(PRESETS)}, got {preset!r}")
    if epsilon is None:
        if preset is None:
            raise UsageError("--epsilon is required (or give --fast-preset cikm2012|streamdp for its epsilon 0.01)")
        epsilon = PRESETS[preset]["epsilon"]
    check_epsilon(epsilon)
    if noise not in NOISES:
        raise UsageError(f"--noise must be one of {', '.join(NOISES)} for --mechanism fast, got {noise!r}")
    if noise == "gaussian":
        if delta is None:
            raise UsageError("--delta is required for --mechanism fast with --noise gaussian")
        check_delta(delta)
    elif delta is not None:
        raise UsageError("--delta does not apply to --mechanism fast with --noise laplace "
                         "(pure epsilon-DP); remove it")
    settings = resolve_settings(
        n_steps, adaptive=adaptive, preset=preset, max_samples=max_samples,
        max_samples_ratio=max_samples_ratio, interval=interval, q=q, r=r, p0=p0, gains=gains, ti=ti,
        theta=theta, xi=xi, error=error, error_delta=error_delta, warmup=warmup,
    )
    if not np.all(np.isfinite(arr)):
        s, k = np.argwhere(~np.isfinite(arr))[0]
        raise DataError(f"values: non-finite value {arr[s, k]} in series {s} at step {k}; "
                        "FAST needs finite values")

    bounds = panel.bounds
    m = settings.max_samples
    reach = bounds.series_reach(n_series, n_steps)
    hits = samples_per_unit(bounds, n_steps, m)  # c: samples of one series that can fall on changed cells
    factor = 2 if bounds.neighbouring == "substitute" else 1
    sensitivity = bounds.max_per_step * factor
    n_hit = changed_samples(bounds, n_series, n_steps, m, None if settings.adaptive else settings.interval)
    coords = factor * n_hit  # samples whose values can differ (the old and the new unit's)
    # Hardened sampler: the sampled values are rounded to multiples of g, so a sample changed by at
    # most Delta_q moves by at most (floor(Delta_q / g) + 1) g (tsdp.accounting.discrete); under
    # substitution twice that covers a cell both units change and two cells one each.
    if noise == "laplace":
        g, _ = disc.lattice(sampler, granularity, lambda d: d / epsilon, sensitivity * n_hit, coords, "l1")
        step = sensitivity if g is None else factor * disc.rounded_step(bounds.max_per_step, g)
        scale = step * n_hit / epsilon
        noise_variance = 2.0 * scale * scale
        draws = laplace_noise(rng, scale, n_series * m, granularity=g)
        event = (MechanismEvent("laplace", sensitivity, scale, n_hit) if g is None else
                 MechanismEvent("discrete-laplace", step, scale, n_hit, granularity=g))
        definition, claim_delta, theorem = "pure-dp", 0.0, FAST_THEOREM
        noise_params = {"noise": "laplace", "scale": scale,
                        "epsilon_per_sample": epsilon / n_hit}
        if g is not None:
            noise_params.update(disc.hardened_parameters(scale, g, step * n_hit, "l1", "the Laplace scale"))
            theorem = f"{theorem}; {disc.LAPLACE_THEOREM}"
    else:
        l2 = sensitivity * math.sqrt(n_hit)
        sigma0 = gauss.analytic_sigma(epsilon, delta, l2)
        g, _ = disc.lattice(sampler, granularity, lambda d: sigma0, l2, coords, "l2", (epsilon, delta))
        covered = l2 if g is None else factor * disc.rounded_step(bounds.max_per_step, g) * math.sqrt(n_hit)
        # hardened: the continuous profile gets delta minus the rounding slack (tsdp.accounting.discrete)
        budget = delta if g is None else disc.slack_budget(epsilon, delta, sigma0 / g, coords)
        scale = gauss.analytic_sigma(epsilon, budget, covered)
        noise_variance = scale * scale
        draws = gaussian_noise(rng, scale, n_series * m, granularity=g)
        event = (MechanismEvent("gaussian", l2, scale, 1) if g is None else
                 MechanismEvent("discrete-gaussian", covered, scale, 1, granularity=g, lattice_coords=coords))
        definition, claim_delta, theorem = "approx-dp", float(delta), FAST_GAUSSIAN_THEOREM
        noise_params = {"noise": "gaussian", "sigma": scale, "l2_sensitivity": l2}
        if g is not None:
            noise_params.update(disc.hardened_parameters(scale, g, covered, "l2", "sigma"))
            noise_params["rounding_slack"] = disc.rounding_slack(epsilon, disc.slack_rate(scale / g, coords))
            theorem = f"{theorem}; {disc.GAUSSIAN_THEOREM} (slack {noise_params['rounding_slack']:.3g} of delta)"
    if g is None:
        noise_params["sampler"] = "float"
    r_val = noise_variance if settings.r == "auto" else float(settings.r)
    p0_val = r_val if settings.p0 == "auto" else float(settings.p0)

    released, sampled, tr = run_fast(
        lambda k, rows: snap(arr[rows, k], g), n_series, n_steps, draws.reshape(n_series, m), settings,
        r_val, p0_val, trace=trace,
    )
    claim = PrivacyClaim(
        definition=definition,
        unit=privacy_unit(bounds, n_series, panel.id_column, panel.enforced),
        epsilon=float(epsilon),
        delta=claim_delta,
        mechanism="fast",
        theorem=theorem,
        events=(event,),
        parameters=_claim_parameters(settings, panel, epsilon, reach, hits, n_hit, sensitivity, r_val, p0_val,
                                     noise_params),
    )
    if one_d:
        released, sampled = released[0], sampled[0]
        tr = None if tr is None else {key: val[0] for key, val in tr.items()}
    warnings = tuple(settings.warnings) + ((FLOAT_WARNING,) if g is None else ())
    return FastRelease(released, claim, warnings, sampled, tr)


def run_fast(
    read: Callable[[int, np.ndarray], np.ndarray],
    n_series: int,
    n_steps: int,
    noise: np.ndarray,
    settings: FastSettings,
    r: float,
    p0: float,
    trace: bool = False,
) -> tuple[np.ndarray, np.ndarray, dict[str, np.ndarray] | None]:
    """The FAST recursion (spec 2.9) for all series at once; returns (released, sampled, trace).

    ``read(k, rows)`` returns the true values of series ``rows`` (an index array) at step ``k``;
    it is the only access to the data and is called only for the series sampled at ``k``.
    ``noise[s, n]`` is the noise of the n-th sample of series s (shape n_series x M). ``r`` and
    ``p0`` are the resolved R and P0. A Python loop runs over the time steps (the filter is
    sequential); every step works on all series as arrays.
    """
    s_all = np.arange(n_series)
    m = settings.max_samples
    q = settings.q
    adaptive = settings.adaptive
    cp, ci, cd = settings.gains
    out = np.empty((n_steps, n_series))  # time-major: each step writes one contiguous row
    flags = np.zeros((n_steps, n_series), dtype=bool)
    if trace:
        tr = {name: np.full((n_steps, n_series), np.nan) for name in ("P_prior", "P", "K", "z")}

    # k = 0 is always a sampling point: xhat_0 = z_0, P_0 = P0 [D].
    z = read(0, s_all) + noise[:, 0]
    xhat = np.array(z, dtype=np.float64)
    p_post = np.full(n_series, float(p0))
    k_last = np.zeros(n_series, dtype=np.int64)  # step of the last sample
    taken = np.ones(n_series, dtype=np.int64)  # samples taken so far (n)
    step = np.ones(n_series, dtype=np.int64) if adaptive else np.full(n_series, settings.interval, dtype=np.int64)
    due_at = step.copy()  # next sampling point
    out[0] = xhat
    flags[0] = True
    if trace:
        tr["z"][0], tr["P"][0] = z, p_post
    if adaptive:
        ti = settings.ti
        errors = np.zeros((n_series, ti))  # ring buffer of the last Ti feedback errors
        n_errors = np.zeros(n_series, dtype=np.int64)
        last_error = np.zeros(n_series)
        last_error_k = np.zeros(n_series, dtype=np.int64)
        relative = settings.error == "relative"

    for k in range(1, n_steps):
        due = due_at == k
        if adaptive:
            due &= taken < m
        rows = np.flatnonzero(due)
        if trace:
            tr["P_prior"][k] = kalman.predict_variance(p_post, k - k_last, q)
        if rows.size:
            prior = xhat[rows]
            p_prior = kalman.predict_variance(p_post[rows], k - k_last[rows], q)
            n = taken[rows]
            z = read(k, rows) + noise[rows, n]
            post, p_new, gain = kalman.correct(prior, p_prior, z, r)
            xhat[rows] = post
            p_post[rows] = p_new
            k_last[rows] = k
            taken[rows] = n + 1
            flags[k, rows] = True
            if trace:
                tr["z"][k, rows], tr["K"][k, rows], tr["P"][k, rows] = z, gain, p_new
            if adaptive:
                err = np.abs(post - prior)  # Eq. 10 [R]: posterior vs prior, never the true value
                if relative:
                    err /= np.maximum(post, settings.error_delta)
                count = n_errors[rows]
                errors[rows, count % ti] = err
                count += 1
                n_errors[rows] = count
                integral = errors[rows].sum(axis=1) / np.minimum(count, ti)
                slope = np.where(count >= 2, (err - last_error[rows]) / (k - last_error_k[rows]), 0.0)
                last_error[rows] = err
                last_error_k[rows] = k
                pid = cp * err + ci * integral + cd * slope  # Eq. 11 [R]
                current = step[rows]
                step[rows] = np.where(n + 1 > settings.warmup,
                                      next_interval(current, pid, settings.theta, settings.xi), current)
            due_at[rows] = k + step[rows]
        out[k] = xhat  # posterior where sampled, prior (= last posterior) elsewhere

    released = np.ascontiguousarray(out.T)
    sampled = np.ascontiguousarray(flags.T)
    if not trace:
        return released, sampled, None
    return released, sampled, {name: np.ascontiguousarray(val.T) for name, val in tr.items()}


def samples_per_unit(bounds: ContributionBounds, n_steps: int, max_samples: int) -> int:
    """c = min(M, steps of one series the unit touches): the most samples of a series that can fall
    on cells one unit changes (1 for ``event``, min(M, w) for ``w-event``, min(M, I) for ``user``)."""
    return min(int(max_samples), bounds.steps_per_series(n_steps))


def changed_samples(bounds: ContributionBounds, n_series: int, n_steps: int, max_samples: int,
                    interval: int | None = None) -> int:
    """The most samples that can fall on cells one unit changes: a series with ``c`` changed cells
    holds at most ``min(M, c)`` of them (once per time stamp, M in all), summed over the series in
    the unit's worst spread (:meth:`ContributionBounds.series_spread`): ``K min(M, I)`` for a user,
    but up to ``K w`` for a w-event unit that picks other series at every step. Fixed sampling
    every ``interval`` steps samples every series at the same steps, and a window of w steps holds
    at most ceil(w / interval) of them with K changed cells each: a w-event unit then has at most
    ``K ceil(w / interval)``. Under substitution the per-sample sensitivity doubles instead
    (2 Delta_q: the old and the new unit's cells)."""
    m = int(max_samples)
    spread = sum(count * min(m, cells) for count, cells in bounds.series_spread(n_series, n_steps))
    if interval is not None and bounds.level == "w-event":
        steps = bounds.steps_per_series(n_steps)
        return min(spread, bounds.series_touched(n_series) * -(-steps // int(interval)))
    return spread


def _claim_parameters(settings: FastSettings, panel: Panel, epsilon: float, touched: int, hits: int,
                      n_hit: int, sensitivity: float, r: float, p0: float, noise_params: dict) -> dict:
    n_series = panel.n_series
    if n_series == 1:
        composition = {"across_series": "single", "series_per_unit": 1, "explanation": "one series"}
    elif touched == 1:
        composition = {"across_series": "parallel", "series_per_unit": 1,
                       "explanation": "a protected unit affects at most one series, so every series "
                                      "gets the whole budget (parallel composition)"}
    elif noise_params["noise"] == "laplace":
        composition = {"across_series": "split", "series_per_unit": touched,
                       "explanation": f"a protected unit may affect {touched} of the {n_series} series: "
                                      f"the budget is split over the {n_hit} samples that can fall on the "
                                      "cells it changes (basic composition)"}
    else:
        composition = {"across_series": "joint", "series_per_unit": touched,
                       "explanation": f"a protected unit may affect {touched} of the {n_series} series: "
                                      f"the noise is calibrated for the {n_hit} Gaussian samples "
                                      "that can fall on the cells it changes (exact composition)"}
    m = settings.max_samples
    most = max(min(m, cells) for _, cells in panel.bounds.series_spread(n_series, panel.n_steps))
    params: dict[str, Any] = {
        "variant": "adaptive" if settings.adaptive else "fixed",
        "preset": settings.preset,
        **noise_params,
        "sensitivity_per_timestamp": sensitivity,
        "series_length_T": panel.n_steps,
        "n_series": n_series,
        "n_steps": panel.n_steps,
        "epsilon_per_series": epsilon * most / n_hit,
        "max_samples_M": m,
        "samples_per_unit": hits,
        "samples_per_unit_rule": "c = min(M, steps of one series the declared unit touches: 1 for event, "
                                 "w for w-event, I for user)",
        "samples_on_changed_cells": n_hit,
        "samples_on_changed_cells_rule": "sum over the series a unit can change, in its worst spread, of "
                                         "min(M, its changed cells): K c for user and event; a w-event unit "
                                         "picks K series at every step, so up to min(S, K w) series",
        "composition": composition,
        "Q": settings.q,
        "R": r,
        "R_mode": "auto (variance of the DP noise)" if settings.r == "auto" else "given",
        "P0": p0,
        "P0_mode": "auto (= R)" if settings.p0 == "auto" else "given",
        "release_rule": "Kalman posterior at sampling points, prior elsewhere (piecewise constant)",
        "initial_interval": 1 if settings.adaptive else settings.interval,
        "min_interval": 1 if settings.adaptive else settings.interval,
    }
    if settings.adaptive:
        cp, ci, cd = settings.gains
        params.update({
            "Cp": cp, "Ci": ci, "Cd": cd, "Ti": settings.ti, "theta": settings.theta, "xi": settings.xi,
            "error_mode": settings.error, "error_delta": settings.error_delta, "warmup": settings.warmup,
            "interval_update": "I' = max(1, I + trunc(theta (1 - exp(min((Delta - xi)/xi, 50)))))",
        })
    else:
        params["interval"] = settings.interval
    params["provenance"] = dict(settings.sources)
    return params


def _is_int(value) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))


def _is_real(value) -> bool:
    return (isinstance(value, (int, float, np.integer, np.floating))
            and not isinstance(value, (bool, np.bool_)) and math.isfinite(value))


def _positive(value, flag: str) -> float:
    if not (_is_real(value) and value > 0):
        raise UsageError(f"{flag} must be a finite number > 0, got {value!r}")
    return float(value)


def _positive_or_auto(value, flag: str) -> float | str:
    if value == "auto":
        return "auto"
    if not (_is_real(value) and value > 0):
        raise UsageError(f"{flag} must be auto or a finite number > 0, got {value!r}")
    return float(value)


# ------------------------------------------------------------------------------------------------
# Synthetic stand-ins of spec section 3.5 (for tests and benchmarks; never used by a release)
# ------------------------------------------------------------------------------------------------

SYNTHETIC = ("random_walk", "regime", "seasonal", "constant")


def synthetic(kind: str, rng: np.random.Generator, n_series: int = 1, n_steps: int | None = None,
              **params) -> np.ndarray:
    """``n_series`` independent series (n_series x T) from a generator of spec section 3.5.

    * ``random_walk``: x_0 = c, x_k = max(0, x_{k-1} + N(0, s^2)); c=20000, s=500, T=540.
    * ``regime``: the same walk with s=1500 on steps [20, 100) and s=200 elsewhere (Fig. 4).
    * ``seasonal`` (Flu-like): round(b + A exp(-((k mod 52) - c)^2 / (2 w^2))) + N(0, s^2), clipped
      at 0; b=500, A=5000, c=5, w=6, s=50, T=209.
    * ``constant``: x_k = c; c=20000, T=540.
    """
    if kind in ("random_walk", "regime"):
        n_steps = 540 if n_steps is None else n_steps
        c = params.get("c", 20000.0)
        if kind == "random_walk":
            sd = np.full(n_steps, params.get("s", 500.0))
        else:
            sd = np.full(n_steps, params.get("s_calm", 200.0))
            lo, hi = params.get("volatile", (20, 100))
            sd[lo:hi] = params.get("s_volatile", 1500.0)
        steps = rng.standard_normal((n_steps, n_series)) * sd[:, None]
        x = np.empty((n_steps, n_series))
        x[0] = c
        for k in range(1, n_steps):
            x[k] = np.maximum(0.0, x[k - 1] + steps[k])
        return np.ascontiguousarray(x.T)
    if kind == "seasonal":
        n_steps = 209 if n_steps is None else n_steps
        b, a, c, w, s = (params.get(key, d) for key, d in
                         (("b", 500.0), ("A", 5000.0), ("c", 5.0), ("w", 6.0), ("s", 50.0)))
        k = np.arange(n_steps)
        base = np.round(b + a * np.exp(-(((k % 52) - c) ** 2) / (2 * w * w)))
        return np.maximum(0.0, base[None, :] + s * rng.standard_normal((n_series, n_steps)))
    if kind == "constant":
        n_steps = 540 if n_steps is None else n_steps
        return np.full((n_series, n_steps), float(params.get("c", 20000.0)))
    raise ValueError(f"unknown synthetic series {kind!r}; one of {', '.join(SYNTHETIC)}")

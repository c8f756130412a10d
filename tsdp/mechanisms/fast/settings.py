"""FAST's parameters (spec section 4): defaults, presets and their provenance, and
:func:`resolve_settings`, which merges them with the explicit options and applies the spec's rules."""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np

from tsdp.caveats import Caveat
from tsdp.errors import DataError, UsageError

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


def parse_gains(value: str | tuple | list | None) -> tuple[float, float, float] | None:
    """``--fast-gains Cp,Ci,Cd`` (text) or three numbers, as a tuple of floats; UsageError otherwise."""
    if value is None:
        return None
    parts = [t.strip() for t in value.split(",") if t.strip()] if isinstance(value, str) else list(value)
    try:
        values = tuple(float(x) for x in parts or ())
    except (TypeError, ValueError):
        raise UsageError(f"--fast-gains must be three numbers Cp,Ci,Cd, got {value!r}") from None
    if len(values) != 3:
        raise UsageError(f"--fast-gains must be three numbers Cp,Ci,Cd, got {value!r}")
    return values

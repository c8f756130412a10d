"""FLIP, step by step (McElroy, Roy & Hore 2022, section 3.3; spec flip.md section 2.8).

For one sensitive series x (length T) and optional auxiliary series z (T x q):

1. standardise x and z (mean 0, SD 1; undone at the end: the filter is linear);
2. remove an OLS polynomial trend of order d from each (``trend.detrend``);
3. estimate the joint spectrum of the residuals (VAR(p) by AIC, or flat-top) and the conditional
   spectrum f = f_{X|Z} (Prop. 3), or f_X without auxiliary series;
4. F = CDF of f on [0, pi]; S = sup |f / <f>_pi - 1|;
5. draw R (symmetrised Beta mixture) and, for delta > 0, the shift Delta ~ U[0, B] (Thm 10, eq. (12));
   H = (1 - alpha) F + alpha lambda / pi and theta = pi R(H);
6. the 2M+1 taps of e^{i theta} (``coefficients``);
7. pad x with M backcasts and forecasts and filter (or filter circularly);
8. add the trend back and undo the standardisation;
9. compute the same-date LIP of the release at every date (``tsdp.flip.datewise``) and write empty the
   first and last ``withhold`` dates and every date whose LIP is below the floor the claim states
   (``tsdp.flip.withholding``).

The diagnostics (LIP of the ideal filter; the lowest same-date LIP over the released dates and its date,
``lip_applied`` and ``lip_applied_date``, and over all dates, ``lip_lowest``; the stationary figure of the
taps ``lip_applied_interior``; the dates withheld below the floor; lagged LIP, the two inversion attacks,
all-pass defect, utility) are figures of the data and go to the custodian file; R, Delta, B, L_R and the
taps are secrets.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable

import numpy as np

from tsdp.accounting.claim import PrivacyClaim
from tsdp.accounting.sensitivity import PrivacyUnit
from tsdp.caveats import Caveat, PrivateCaveat
from tsdp.errors import DataError, NumericalError, UsageError
from tsdp.flip import coefficients, datewise, filtering, lip, phase, spectral, trend, utility, withholding

SPECTRAL = ("var", "flattop")
BOUNDARIES = ("extend", "circular")
MIN_LENGTH = 20
SHORT_LENGTH = 50
DEFAULT_GRID = 8192
DEFAULT_K = 25  # cepstral terms of the cepstral --coef-method
MECHANISM = "FLIP all-pass filtering (McElroy, Roy & Hore 2022)"
NOT_DP = ("FLIP is not differential privacy: it carries no differential-privacy parameters and none "
          "can be derived from it. Given its secret parameters the release is a deterministic, invertible "
          "linear filter of the data.")
THEOREM = ("McElroy, Roy & Hore (2022): Linear Incremental Privacy, Def. 4 / eq. (5), of the filter "
           "Psi_h = exp(i pi R(H)) with R a symmetrised Beta mixture: LIP = 1 by Thm 6 (lip_budget_delta = 0); "
           "LIP >= 1 - delta by Thm 10 and eq. (12) for the shift Delta ~ U[0, B] (lip_budget_delta > 0); "
           "evaluated at the estimated conditional spectrum f_{X|Z} (Prop. 3; delta-FLIP, section 3.2); the release "
           "actually applied is held to lip_floor date by date: eq. (5) at each date for the finite map and the "
           "released trend (tsdp.flip.datewise), every date below lip_floor withheld (tsdp.flip.withholding)")
NEIGHBOURING = ("no neighbouring relation: LIP compares a linear attacker's prediction of the value X_t "
                "from the auxiliary series alone with its prediction from the auxiliary series and the "
                "released value at the same date t")


@dataclass(frozen=True)
class FlipSettings:
    """The public options of ``tsdp flip`` (spec 4.2, with the issue's names); validated on creation."""

    lip_delta: float = 0.0
    trend_order: int = 0
    spectral: str = "var"
    var_order: int | str = "aic"
    K: int = DEFAULT_K
    M: int | None = None
    coef_method: str = "direct"
    boundary: str = "extend"
    bound: str = "paper"
    r_components: int = 2
    r_range: tuple[float, float] | None = None
    r_params: phase.BetaMixture | None = None
    grid: int = DEFAULT_GRID
    acf_lags: int = 24
    withhold: int = 0  # dates withheld (not released) at each end of every series
    floor: float | None = None  # --lip-floor; None: withholding.default_floor(lip_delta)

    def __post_init__(self) -> None:
        if not (0.0 <= self.lip_delta < 1.0) or not math.isfinite(self.lip_delta):
            raise UsageError(f"--lip-delta {self.lip_delta:g}: the LIP budget must be in [0, 1)")
        if self.trend_order < 0:
            raise UsageError(f"--trend-order {self.trend_order}: must be >= 0")
        if self.spectral not in SPECTRAL:
            raise UsageError(f"--spectral {self.spectral!r}: must be one of {', '.join(SPECTRAL)}")
        if self.var_order != "aic" and (not isinstance(self.var_order, int) or self.var_order < 0):
            raise UsageError(f"--var-order {self.var_order!r}: must be 'aic' or an integer >= 0")
        if not 1 <= self.K <= self.grid:
            raise UsageError(f"--cepstral-terms {self.K} (K, the cepstral truncation): must be an integer in "
                             f"[1, --grid {self.grid}]")
        if self.M is not None and self.M < 1:
            raise UsageError(f"--filter-half-length {self.M} (M, the filter half-length): must be an integer >= 1")
        if self.coef_method not in coefficients.METHODS:
            raise UsageError(f"--coef-method {self.coef_method!r}: must be one of {', '.join(coefficients.METHODS)}")
        if self.boundary not in BOUNDARIES:
            raise UsageError(f"--boundary {self.boundary!r}: must be one of {', '.join(BOUNDARIES)}")
        if self.bound not in phase.BOUNDS:
            raise UsageError(f"--bound {self.bound!r}: must be one of {', '.join(phase.BOUNDS)}")
        if self.r_components < 1:
            raise UsageError(f"--r-components {self.r_components}: must be >= 1")
        low, high = self.beta_range
        if not (0 < low <= high) or not math.isfinite(high):
            raise UsageError(f"--r-range {low:g},{high:g}: need 0 < lo <= hi")
        if self.lip_delta > 0 and low < 1:
            raise UsageError(f"--r-range {low:g},{high:g}: with --lip-delta > 0 the Beta parameters must be "
                             ">= 1 (otherwise R is not Lipschitz and the shift bound is 0)")
        if self.grid < 256:
            raise UsageError(f"--grid {self.grid}: must be at least 256 frequencies")
        if self.acf_lags < 1:
            raise UsageError(f"--acf-lags {self.acf_lags}: must be >= 1")
        if self.withhold < 0:
            raise UsageError(f"--withhold-ends {self.withhold}: must be an integer >= 0")
        if self.floor is not None and not (0.0 <= self.floor <= 1.0):  # (NaN fails too)
            raise UsageError(f"--lip-floor {self.floor:g}: the same-date LIP floor must be in [0, 1]")
        if self.r_params is not None:
            phase.check_r(self.r_params, self.lip_delta, self.trend_order)

    @property
    def beta_range(self) -> tuple[float, float]:
        """a_j, b_j ~ U[lo, hi]; default lo = d + 1 (Thm 11), hi = d + 4 (spec 4.2)."""
        if self.r_range is not None:
            return float(self.r_range[0]), float(self.r_range[1])
        return float(self.trend_order + 1), float(self.trend_order + 4)

    @property
    def lip_floor(self) -> float:
        """The same-date LIP every released date reaches, stated by the claim (tsdp.flip.withholding)."""
        return withholding.default_floor(self.lip_delta) if self.floor is None else float(self.floor)

    def padding(self, T: int) -> int:
        """M: given, or min(45, T // 4) (reproduces the paper's Examples 1 and 3)."""
        return self.M if self.M is not None else min(45, T // 4)

    def public(self) -> dict[str, Any]:
        low, high = self.beta_range
        return {
            "lip_budget_delta": self.lip_delta, "trend_order": self.trend_order, "spectral": self.spectral,
            "var_order": self.var_order, "K": self.K, "M": self.M if self.M is not None else "min(45, T // 4)",
            "coef_method": self.coef_method, "boundary": self.boundary, "bound": self.bound,
            "r_family": "symmetrised beta mixture",
            "r_components": len(self.r_params.alpha) if self.r_params else self.r_components,
            "r_range": "fixed by --r-params (secret)" if self.r_params else [low, high],
            "grid": self.grid, "acf_lags": self.acf_lags, "withhold_ends": self.withhold,
            "lip_floor": self.lip_floor,
        }


@dataclass
class SeriesFlip:
    """One released series, its custodian-facing diagnostics and its secrets."""

    released: np.ndarray
    diagnostics: dict[str, Any]
    secrets: dict[str, Any]
    warnings: list[str] = field(default_factory=list)

    @property
    def released_dates(self) -> np.ndarray:
        """Boolean mask of the dates released (the others are withheld: NaN, written empty)."""
        return ~np.isnan(self.released)


def check_length(T: int, settings: FlipSettings, q: int, label: str) -> list[str]:
    """The length rules of spec 4.3: errors name the series; returns warnings."""
    M = settings.padding(T)
    d = settings.trend_order
    if T < MIN_LENGTH:
        raise DataError(f"{label}: {T} observations; FLIP needs at least {MIN_LENGTH}")
    if M >= T:
        raise DataError(f"{label}: padding --filter-half-length {M} needs a series longer than M, but T = {T}")
    if d + 1 > T / 4:
        raise DataError(f"{label}: --trend-order {d} is too high for T = {T} (need d + 1 <= T / 4)")
    if isinstance(settings.var_order, int) and T < q * settings.var_order + d + 10:
        raise DataError(f"{label}: --var-order {settings.var_order} with {q} series needs "
                        f"T >= {q * settings.var_order + d + 10}, but T = {T}")
    warnings = []
    if M > T / 4:
        warnings.append(Caveat("flip_short_series", f"{label}: --filter-half-length {M} exceeds T/4 = {T / 4:g}; "
                               "edge effects shrink the released variance (spec P7)"))
    if T < SHORT_LENGTH:
        warnings.append(Caveat("flip_short_series", f"{label}: only {T} observations; the spectral estimate is "
                               f"unreliable below {SHORT_LENGTH}"))
    return warnings


def stable_key(value: Any) -> int:
    """A 64-bit integer from a value's text, the same in every run and process."""
    return int.from_bytes(hashlib.sha256(str(value).encode()).digest()[:8], "little")


def series_generator(master: int, entity: Any, column: str) -> np.random.Generator:
    """Per-series randomness from the master seed (spec 4.6): independent of row order and of which
    other series are present, so a rerun with the same secret reproduces the same release."""
    seq = np.random.SeedSequence(entropy=master, spawn_key=(stable_key(entity), stable_key(column)))
    return np.random.Generator(np.random.PCG64(seq))


# Peak memory per frequency of the grid: about 200 bytes measured on the QWI example (grids of 2**20
# and 2**22: 0.34 and 0.94 GB), rounded up. The spectra, their CDF and the filter's phase are arrays
# of the grid's length, several alive at once.
BYTES_PER_FREQUENCY = 256


def grid_memory(settings: FlipSettings) -> int:
    """Bytes a run needs for the frequency grid of ``settings`` (before any refinement)."""
    return int(settings.grid) * BYTES_PER_FREQUENCY


def _moments(x: np.ndarray) -> tuple[float, float]:
    """Mean and standard deviation of ``x``, computed on ``x`` divided by a power of two near its
    largest magnitude (exact), so that values near the float range do not overflow the squares."""
    top = float(np.max(np.abs(x))) if x.size else 0.0
    unit = math.ldexp(1.0, math.frexp(top)[1]) if top > 0 and math.isfinite(top) else 1.0
    scaled = x / unit
    return float(np.mean(scaled)) * unit, float(np.std(scaled)) * unit


def _grid_size(settings: FlipSettings, T: int, M: int) -> int:
    """Frequencies on [0, pi]: the requested grid, enlarged so that the autocovariances needed by the
    projection (lags up to min(T, window) + M) and the diagnostics (4M) stay accurate."""
    needed = 4 * (min(T, filtering.PROJECTION_WINDOW) + 4 * M)
    n = settings.grid
    while n < needed:
        n *= 2
    return n


def flip_series(x: np.ndarray, z: np.ndarray | None, settings: FlipSettings, rng: np.random.Generator,
                label: str = "series", period: int | None = None) -> SeriesFlip:
    """Release one series by FLIP (module docstring, steps 1-8); ``period`` (e.g. 4 for quarterly
    data) enables the warning about seasonal peaks, which violate FLIP's stationarity assumption."""
    x = np.asarray(x, dtype=float)
    T = x.size
    z = np.empty((T, 0)) if z is None else np.asarray(z, dtype=float).reshape(T, -1)
    q = 1 + z.shape[1]
    warnings = check_length(T, settings, q, label)
    if not (np.isfinite(x).all() and np.isfinite(z).all()):
        raise DataError(f"{label}: non-finite values; FLIP needs complete series")
    M = settings.padding(T)
    d = settings.trend_order

    center, scale = _moments(x)
    if not (math.isfinite(center) and math.isfinite(scale)):
        raise DataError(f"{label}: values up to {np.max(np.abs(x)):.3g} are too large for float64 arithmetic "
                        "(their mean or spread overflows); rescale the column")
    if not scale > 0:
        raise DataError(f"{label}: the series is constant; there is nothing to filter")
    z_scale = np.array([_moments(z[:, j])[1] for j in range(z.shape[1])])
    if not np.isfinite(z_scale).all():
        raise DataError(f"{label}: an auxiliary series is too large for float64 arithmetic; rescale it")
    if (z_scale == 0).any():
        raise DataError(f"{label}: auxiliary series {int(np.argmin(z_scale)) + 1} is constant")
    resid, fitted = trend.detrend((x - center) / scale, d)
    z_resid = trend.detrend((z - z.mean(axis=0)) / z_scale, d)[0] if z.shape[1] else z
    if not np.var(resid) > 1e-20:
        raise DataError(f"{label}: the series is constant after removing a trend of order {d}")
    # an auxiliary polynomial of order <= d leaves rounding noise that the spectral estimate would fit
    flat_aux = [j for j in range(z.shape[1]) if not np.var(z_resid[:, j]) > 1e-20]
    if flat_aux:
        raise DataError(f"{label}: auxiliary series {flat_aux[0] + 1} is constant after removing a trend of "
                        f"order {d}; drop it from --aux-cols or lower --trend-order")
    if period and period >= 2 and T >= 2 * period:
        peak = utility.seasonal_peak(resid, period)
        if peak > utility.SEASONAL_RATIO:
            warnings.append(PrivateCaveat("flip_model", f"{label}: the periodogram has a seasonal peak ({peak:.0f} times its neighbours at a "
                            f"multiple of 1/{period}); FLIP assumes a stationary series, so seasonally adjust the "
                            "input (spec P8)", series=label, seasonal_peak_ratio=peak))

    joint = np.column_stack([resid, z_resid])
    _refuse_collinear(joint, label, M)
    fit_info: dict[str, Any] = {"method": settings.spectral, "order": None, "stable": True,
                                "flattop_bandwidth": None, "notes": []}
    n = _grid_size(settings, T, M)
    try:
        evaluate = _spectral_estimate(joint, settings, fit_info, warnings, label)
        lam = spectral.frequency_grid(n)
        f_x, f_cond, share = evaluate(lam)
        while _unresolved(f_x, f_cond) and n < MAX_GRID:
            n *= 4
            lam = spectral.frequency_grid(n)
            f_x, f_cond, share = evaluate(lam)
    except NumericalError as exc:
        raise NumericalError(f"{label}: {exc}") from None
    except np.linalg.LinAlgError as exc:
        raise NumericalError(f"{label}: the spectral estimate failed ({exc}); check the auxiliary series for "
                             "exact linear relations, or try the other --spectral estimator") from None
    if n > settings.grid:
        fit_info["notes"].append(f"frequency grid refined to {n} points to resolve a concentrated spectrum")
    if _unresolved(f_x, f_cond):
        warnings.append(PrivateCaveat("flip_model", f"{label}: the estimated spectrum is concentrated at frequency 0 beyond what a grid of "
                        f"{n} frequencies resolves (a near unit root): the series looks non-stationary; remove "
                        "its trend with --trend-order or difference it", series=label))

    F = spectral.spectral_cdf(f_cond)
    S = phase.sup_deviation(f_cond)
    d_ks = phase.ks_distance(F)
    r = settings.r_params or phase.BetaMixture.draw(rng, settings.r_components, *settings.beta_range)
    if settings.r_params is None:
        # R is a secret draw: whether it falls short is for the custodian only
        warnings += [PrivateCaveat("flip_model", f"{label}: {w}", series=label)
                     for w in phase.check_r(r, settings.lip_delta, d)]
    bound = phase.shift_bound(settings.lip_delta, r.lipschitz, S, d_ks, settings.bound)
    shift, capped = phase.draw_shift(rng, bound)
    if capped:
        warnings.append(PrivateCaveat("flip_model", f"{label}: the spectrum is nearly flat (S = {S:.3g}), so every "
                                      "shift is admissible; the shift was capped at 1/pi and barely randomises the "
                                      "filter here (spec P4)", series=label, S_sup=S))
    alpha = phase.mixing_weight(shift)
    theta = math.pi * r(phase.shifted_cdf(F, alpha))
    taps = coefficients.filter_taps(theta, M, settings.coef_method, settings.K)
    defect = coefficients.allpass_defect(taps, n)
    if settings.coef_method == "cepstral-paper":
        warnings.append(PrivateCaveat("flip_model", f"{label}: --coef-method cepstral-paper truncates a winding "
                                      f"phase (pitfall P1): the filter is {defect:.3g} away from all-pass; prefer "
                                      "direct", series=label, allpass_max_defect=defect))

    gamma_x = spectral.acvf(f_x)
    if settings.boundary == "extend":
        def residual_filter(v):
            return filtering.apply_taps(filtering.extend(v, gamma_x, M)[0], taps)

        extended, windowed = filtering.extend(resid, gamma_x, M)
        released_resid = filtering.apply_taps(extended, taps)
        if windowed:
            fit_info["notes"].append(f"backcasts and forecasts use the nearest {filtering.PROJECTION_WINDOW} "
                                     "observations")
    else:
        def residual_filter(v):
            return filtering.circular_filter(v, theta)

        released_resid = residual_filter(resid)
    released = (fitted + released_resid) * scale + center
    if not np.isfinite(released).all():
        raise DataError(f"{label}: the released series overflows float64 (values up to {np.max(np.abs(x)):.3g}); "
                        "rescale the column")

    gamma_c = spectral.acvf(f_cond)
    lip_ideal = lip.ideal_lip_on_cdf(F, alpha, r)
    ideal_floor = 1.0 - settings.lip_delta
    if lip_ideal < ideal_floor - 1e-8:
        raise NumericalError(f"{label}: the ideal filter's LIP {lip_ideal:.10f} is below 1 - lip_delta = "
                             f"{ideal_floor:g}: the spectrum is too concentrated for the grid; raise --grid")
    if settings.withhold and 2 * settings.withhold >= T:
        raise DataError(f"{label}: --withhold-ends {settings.withhold} withholds every one of its {T} dates")
    by_date = datewise.lip_by_date(
        residual_filter, gamma_c, trend.trend_basis(T, d), taps=taps, gamma_x=gamma_x, M=M,
        impulse=residual_filter(np.eye(1, T)[0]) if settings.boundary == "circular" else None)
    floor = settings.lip_floor
    kept = withholding.released_dates(by_date, floor, settings.withhold)  # the dates released
    worst = int(np.argmin(np.where(kept, by_date, np.inf))) if kept.any() else None
    lowest = int(np.argmin(by_date))
    below = (by_date < floor) & withholding.between_ends(T, settings.withhold)
    near_end = np.zeros(T, dtype=bool)
    near_end[:M] = near_end[T - M:] = True
    lagged_min, lagged_at = lip.lagged_lip(taps, gamma_c, M)
    guess = coefficients.filter_taps(math.pi * F, M, "direct")
    diagnostics = {
        "T": T,
        "M": M,
        "grid": n,
        "spectral_fit": fit_info,
        "cond_variance_ratio": share,
        "S_sup": S,
        "lip_budget_delta": settings.lip_delta,
        "lip_lower_bound": ideal_floor,
        "lip_floor": floor,
        "lip_ideal": lip_ideal,
        # the lowest same-date LIP over the released dates and its date (1-based); None: none released
        "lip_applied": None if worst is None else float(by_date[worst]),
        "lip_applied_date": None if worst is None else worst + 1,
        # the lowest over every date, withheld ones included
        "lip_lowest": float(by_date[lowest]),
        "lip_lowest_date": lowest + 1,
        # the stationary figure away from the ends: Def. 4 for the taps; the circular filter's response is
        # the ideal filter's at the Fourier frequencies
        "lip_applied_interior": lip_ideal if settings.boundary == "circular" else lip.taps_lip(taps, gamma_c),
        # dates (outside --withhold-ends) withheld because their same-date LIP is below the floor: within M
        # dates of an end, and farther in (tsdp.flip.withholding: the released trend)
        "lip_dates_below_floor": int(np.count_nonzero(below)),
        "below_floor_near_ends": int(np.count_nonzero(below & near_end)),
        "below_floor_inside": int(np.count_nonzero(below & ~near_end)),
        "below_floor_lowest": float(by_date[below].min()) if below.any() else None,
        "below_floor_lowest_date": int(np.argmin(np.where(below, by_date, np.inf))) + 1 if below.any() else None,
        "released_dates": int(np.count_nonzero(kept)),
        "withheld_dates": int(T - np.count_nonzero(kept)),
        "withheld_runs": [[a + 1, b + 1] for a, b in withholding.withheld_runs(kept)],
        "lip_lagged_min": lagged_min,
        "lip_lagged_argmax_lag": lagged_at,
        "lip_guess_inversion": lip.inversion_lip(taps, guess, gamma_c),
        "lip_known_filter_inversion": lip.inversion_lip(taps, taps, gamma_c),
        "allpass_max_defect": defect,
        "psi_sum": float(taps.sum()),
        "trend_moments": coefficients.moments(taps, d)[1:].tolist() if d else [],
        "utility": utility.utility_figures(resid, released_resid, settings.acf_lags),
    }
    warnings += _shortfall_warnings(diagnostics, settings, label)
    secrets = {
        "r_params": r.as_dict(), "lipschitz": r.lipschitz, "shift_bound": bound if math.isfinite(bound) else None,
        "shift": shift, "alpha": alpha, "taps": taps.tolist(),
    }
    released[~kept] = np.nan  # withheld: written empty
    return SeriesFlip(released, diagnostics, secrets, warnings)


# A stationary (Def. 4) LIP of the taps this far below 1 - delta, or an all-pass defect above ALLPASS_WARN,
# gets a warning.
SHORTFALL_WARN = 0.01
ALLPASS_WARN = 0.05
# A lagged LIP below this (the best single lag explains more than 75 % of X_t's conditional variance)
# gets a warning: the spec's AR(1) 0.6 and Example-1 releases sit near 0.4, a white-noise input near 0.
LAGGED_WARN = 0.25


def _shortfall_warnings(diagnostics: dict[str, Any], settings: FlipSettings, label: str) -> list[str]:
    """Say when the finite filter falls short of the ideal one (a trend, a near unit root or strong
    seasonality puts the spectrum's mass in features narrower than 2M+1 taps resolve)."""
    out = []
    floor = diagnostics["lip_lower_bound"]
    interior = diagnostics["lip_applied_interior"]
    if interior < floor - SHORTFALL_WARN:
        out.append(PrivateCaveat(
            "flip_model", f"{label}: the applied {2 * diagnostics['M'] + 1}-tap filter reaches LIP {interior:.4g}, "
            f"well below the ideal filter's {floor:g}: the estimated spectrum has features narrower than the filter "
            "resolves; remove the trend (--trend-order), seasonally adjust, or raise --filter-half-length",
            series=label, lip_applied_interior=interior))
    if diagnostics["lip_dates_below_floor"]:
        out.append(PrivateCaveat("flip_dates_below_floor", _withheld_warning(diagnostics, settings, label), series=label,
                                 lip_dates_below_floor=diagnostics["lip_dates_below_floor"],
                                 below_floor_lowest=diagnostics["below_floor_lowest"],
                                 below_floor_lowest_date=diagnostics["below_floor_lowest_date"]))
    if diagnostics["lip_lagged_min"] < LAGGED_WARN:
        lag = diagnostics["lip_lagged_argmax_lag"]
        which = ("at the same date" if lag == 0 else
                 f"{abs(lag)} date{'s' if abs(lag) != 1 else ''} {'later' if lag > 0 else 'earlier'}")
        out.append(PrivateCaveat("flip_model", f"{label}: the release is close to a shifted copy of the series: under the estimated model the "
                   f"released value {which} predicts each value with squared correlation "
                   f"{1.0 - diagnostics['lip_lagged_min']:.3g} (LIP covers the same date only; spec section 7). A "
                   "nearly white spectrum makes the filter nearly a pure shift; do not publish this series",
                   series=label, lip_lagged_min=diagnostics["lip_lagged_min"]))
    if diagnostics["allpass_max_defect"] > ALLPASS_WARN:
        out.append(PrivateCaveat("flip_model", f"{label}: the applied filter is {diagnostics['allpass_max_defect']:.3g} away from all-pass, so "
                   "the spectrum and autocorrelations are only roughly kept (D_ACF "
                   f"{diagnostics['utility']['D_ACF']:.3g}); raise --filter-half-length", series=label,
                   allpass_max_defect=diagnostics["allpass_max_defect"]))
    return out


def _withheld_warning(diagnostics: dict[str, Any], settings: FlipSettings, label: str) -> str:
    """The custodian's account of the dates withheld for a same-date LIP below the floor, with the
    cause measured in :mod:`tsdp.flip.withholding` and the option that acts on each part."""
    M, T, d = diagnostics["M"], diagnostics["T"], settings.trend_order
    near, inside = diagnostics["below_floor_near_ends"], diagnostics["below_floor_inside"]
    parts = []
    if near:
        where = ("the filter wraps the two ends of the series together (--boundary circular)"
                 if settings.boundary == "circular" else
                 "the taps run over backcasts and forecasts, projections of the series itself")
        advice = (f"; --withhold-ends {M} would withhold every date within M of an end by a public rule, so that "
                  "which of them are empty no longer depends on the data" if settings.withhold < M else "")
        parts.append(f"{near} within M = {M} dates of an end, where {where}{advice}")
    if inside:
        parts.append(f"{inside} farther in, where the taps cover observed dates only: there the attacker is given the "
                     f"released trend (order {d}), which the release keeps exactly and which explains much of a "
                     "persistent series' value at each date; --withhold-ends does not reach these, a trend order whose "
                     "residual is closer to stationary or a longer series raises them")
    return (f"{label}: {diagnostics['lip_dates_below_floor']} of {T} dates are withheld (written empty) because their "
            f"same-date LIP is below the floor {diagnostics['lip_floor']:g} (the lowest "
            f"{diagnostics['below_floor_lowest']:.4g} at date {diagnostics['below_floor_lowest_date']}): "
            + "; ".join(parts))


MAX_GRID = 1 << 20
# Largest share of the spectral mass one grid cell may hold before the grid is refined: the CDF, the
# filter's phase and the autocovariances all need the spectrum's peak resolved.
MAX_CELL_MASS = 0.02


def _unresolved(*spectra: np.ndarray) -> bool:
    return any(float(np.max(np.diff(spectral.spectral_cdf(f)))) > MAX_CELL_MASS for f in spectra)


def _spectral_estimate(joint: np.ndarray, settings: FlipSettings, fit_info: dict[str, Any], warnings: list[str],
                       label: str) -> Callable[[np.ndarray], tuple[np.ndarray, np.ndarray, float]]:
    """Fit the spectral model once; return ``lam -> (f_X, f_{X|Z}, <f_{X|Z}>/<f_X>)``."""
    if settings.spectral == "var":
        fit = spectral.fit_var(joint, settings.var_order, settings.trend_order)
        fit_info.update(order=fit.order, stable=fit.stable, method=fit.method, notes=fit.notes)
        if fit.method == "var-yule-walker":
            warnings.append(PrivateCaveat("flip_model", f"{label}: the least-squares VAR({fit.order}) was not stable; "
                                          "refitted by Yule-Walker", series=label))

        def var_spectra(lam: np.ndarray):
            f_x, f_cond = fit.marginal_and_conditional(lam)
            return (f_x, *spectral.checked_conditional(f_x, f_cond))

        return var_spectra

    def flattop_spectra(lam: np.ndarray):
        fmat, bandwidth, notes = spectral.flattop_spectrum(joint, lam)
        fit_info.update(flattop_bandwidth=bandwidth, notes=notes)
        return (np.maximum(fmat[:, 0, 0].real, 0.0), *spectral.conditional_spectrum(fmat))

    return flattop_spectra


# Leads and lags of the auxiliary series searched for an exact linear copy of the sensitive series.
COLLINEAR_LAGS = 24


def _refuse_collinear(joint: np.ndarray, label: str, M: int) -> None:
    """An auxiliary set that reproduces the sensitive series linearly, at the same dates or shifted
    (a copy, a rescaled copy, a lagged copy: Z_t = X_{t-1}), predicts it perfectly: LIP is undefined
    (Prop. 3). X is regressed on Z's values up to L = min(M, 24) dates apart, fewer when the series is
    short (at most a quarter as many regressors as rows, so that an ordinary fit stays far from exact)."""
    if joint.shape[1] < 2:
        return
    x, z = joint[:, 0], joint[:, 1:]
    T, q = z.shape
    L = max(0, min(M, COLLINEAR_LAGS, int((T / (4 * q) - 1) // 2)))
    design = np.column_stack([z[L + k:T - L + k] for k in range(-L, L + 1)])
    target = x[L:T - L]
    beta, *_ = np.linalg.lstsq(design, target, rcond=None)
    x_given_z = float(np.var(target - design @ beta) / np.var(target))
    if not x_given_z > spectral.DEGENERATE_SHARE:
        apart = "at the same dates" if L == 0 else f"from their values up to {L} dates apart"
        raise DataError(f"{label}: the auxiliary series predict the sensitive series (almost) perfectly {apart} "
                        f"(unexplained variance share {max(x_given_z, 0.0):.2e}); LIP is undefined (paper Prop. 3)")


def flip_many(items: Iterable[tuple[Any, str, np.ndarray, np.ndarray | None]], settings: FlipSettings,
              master: int, on_series: Callable[[], None] | None = None, period: int | None = None) -> list[SeriesFlip]:
    """FLIP each ``(entity, column, x, z)`` with its own generator derived from ``master``."""
    out = []
    for entity, column, x, z in items:
        label = f"entity {entity!r}, column {column!r}" if entity is not None else f"column {column!r}"
        out.append(flip_series(x, z, settings, series_generator(master, entity, column), label, period))
        if on_series is not None:
            on_series()
    return out


def claim_for(settings: FlipSettings, entity_col: str | None) -> PrivacyClaim:
    """The LIP claim of a FLIP release: no epsilon, no DP delta; the LIP budget and the floor every
    released date reaches (``lip_floor``, with its guarantee sentence) as parameters."""
    return PrivacyClaim(
        definition="lip",
        unit=PrivacyUnit(level="value", relation="none", neighbouring=NEIGHBOURING, max_per_step=1.0,
                         id_column=entity_col),
        epsilon=None,
        delta=None,
        mechanism=MECHANISM,
        theorem=THEOREM,
        parameters={**settings.public(),
                    "guarantee": withholding.guarantee(settings.lip_floor, settings.lip_delta, settings.floor is not None),
                    "differential_privacy": False,
                    "statement": NOT_DP},
    )

"""Public covariates of a regular time grid for the deep forecasters: calendar features and lags.

Both follow GluonTS (the library Schuchardt et al. 2025 trained with; spec ``deep.md``), derived from
the grid step alone, never from the data:

* Time features (GluonTS ``time_features_from_frequency_str``), each scaled to [-0.5, 0.5]:
  sub-minute steps: second of minute, minute of hour, hour of day, day of week, day of month, day of
  year; minutes: the same without seconds; hours: hour of day, day of week, day of month, day of year;
  days: day of week, day of month, day of year; weeks: day of month, week of year (ISO); months and
  quarters: month of year; years and integer time: none. Plus GluonTS's ``age`` feature,
  ``log10(2 + position)`` with position 0 at the first observation.
  Positions before the first observation (the front padding of the window sampler) get 0 for every
  feature, as GluonTS pads them.
* Default lags (GluonTS ``get_lags_for_frequency``): 1..7 plus the neighbours (+-1, +-2 for minutes)
  of the same season in earlier cycles (days, weeks, a month, years) up to 1200 steps. For hourly data
  that is 40 lags up to 721. The paper's traffic configuration uses 1-7, 23-25, ..., 167-169 instead.
  Given the context length L, tsdp keeps those up to ``LAG_REACH L`` (4 L), so that the receptive
  field ``L + max lag - 1`` (the accountant's L_C, which sets the noise) stays below 5 L: for hourly
  data and L = 48 that is exactly the paper's traffic set.
* Natural seasons of the step (:func:`natural_seasons`): the hour, day, week and year in steps when
  they are whole multiples of it (hourly: 24 and 168; daily: 7 and 365; weekly: 52; monthly: 12;
  quarterly: 4); the seasonal naive baselines use them.

A :class:`Calendar` maps positions (index on the grid, 0 = the series' first value; all series share
the grid) to feature rows. It is public information: the grid's start and step.
"""

from __future__ import annotations

import math

import numpy as np

from tsdp.errors import UsageError

__all__ = ["Calendar", "FEATURES", "LAG_REACH", "default_time_features", "default_lags", "headline_season",
           "natural_seasons", "parse_lags"]

US_PER = {"s": 1_000_000, "m": 60_000_000, "h": 3_600_000_000, "d": 86_400_000_000, "w": 604_800_000_000}
FEATURES = ("second_of_minute", "minute_of_hour", "hour_of_day", "day_of_week", "day_of_month", "day_of_year",
            "week_of_year", "month_of_year", "age")
LAG_LIMIT = 1200  # GluonTS lag_ub
LAG_REACH = 4  # default lags reach back at most 4 context lengths


def default_time_features(step_us: int | None = None, step_months: int | None = None) -> tuple[str, ...]:
    """GluonTS's time features for a grid step of ``step_us`` microseconds or ``step_months`` months
    (neither: integer time, only ``age``)."""
    if step_months:
        calendar = () if step_months % 12 == 0 else ("month_of_year",)
    elif not step_us:
        calendar = ()
    elif step_us < US_PER["m"]:
        calendar = ("second_of_minute", "minute_of_hour", "hour_of_day", "day_of_week", "day_of_month", "day_of_year")
    elif step_us < US_PER["h"]:
        calendar = ("minute_of_hour", "hour_of_day", "day_of_week", "day_of_month", "day_of_year")
    elif step_us < US_PER["d"]:
        calendar = ("hour_of_day", "day_of_week", "day_of_month", "day_of_year")
    elif step_us < US_PER["w"]:
        calendar = ("day_of_week", "day_of_month", "day_of_year")
    else:
        calendar = ("day_of_month", "week_of_year")
    return (*calendar, "age")


def _around(middle: float, delta: int) -> list[float]:
    return [middle + k for k in range(-delta, delta + 1)]


def default_lags(step_us: int | None = None, step_months: int | None = None,
                 context: int | None = None) -> tuple[int, ...]:
    """GluonTS's default lags for the step: 1..7, then the seasonal neighbours in (7, 1200]; with
    ``context`` L, only those up to ``LAG_REACH L`` (the receptive field stays below (LAG_REACH + 1) L)."""
    seasonal: list[float] = []
    if step_months:
        if step_months < 12:  # months and quarters: previous 3 years
            seasonal += [v for k in (1, 2, 3) for v in _around(k * 12 // step_months, 1)]
    elif step_us:
        per_hour = US_PER["h"] / step_us
        per_day = US_PER["d"] / step_us
        per_week = US_PER["w"] / step_us
        if step_us < US_PER["h"]:  # previous 3 hours, +-2 steps
            seasonal += [v for k in (1, 2, 3) for v in _around(math.floor(k * per_hour), 2)]
        if step_us < US_PER["d"]:  # previous 7 days
            seasonal += [v for k in range(1, 8) for v in _around(math.floor(k * per_day), 1)]
        if step_us < US_PER["w"]:  # previous 4 weeks and a month
            seasonal += [v for k in range(1, 5) for v in _around(math.floor(k * per_week), 1)]
            seasonal += _around(math.floor(30 * per_day), 1)
        # previous 3 years in weeks, and 4, 8, 12 weeks back
        seasonal += [v for k in (1, 2, 3) for v in _around(math.floor(k * 52 * per_week), 1)]
        seasonal += [math.floor(4 * per_week), math.floor(8 * per_week), math.floor(12 * per_week)]
    extra = sorted({int(v) for v in seasonal if 7 < v <= LAG_LIMIT})
    lags = tuple(range(1, 8)) + tuple(extra)
    if context is None:
        return lags
    reach = LAG_REACH * int(context)
    return tuple(lag for lag in lags if lag <= reach) or (1,)


def natural_seasons(step_us: int | None = None, step_months: int | None = None) -> tuple[int, ...]:
    """The seasons (in steps) a grid step implies: the hour, day, week and (for steps of a day or
    more) year when each is a whole number > 1 of steps; 52 for weeks; 12 / months for monthly and
    quarterly steps. Integer time: none."""
    if step_months:
        return (12 // step_months,) if step_months < 12 and 12 % step_months == 0 else ()
    if not step_us:
        return ()
    if step_us == US_PER["w"]:
        return (52,)
    periods = [US_PER["h"], US_PER["d"], US_PER["w"]] + ([365 * US_PER["d"]] if step_us >= US_PER["d"] else [])
    return tuple(p // step_us for p in periods if p % step_us == 0 and p // step_us > 1)


def headline_season(seasons, reach: int) -> int:
    """The longest of ``seasons`` that a model reading ``reach`` values covers (seasonal naive's headline
    baseline and the MASE scale), else the shortest, else 1."""
    seasons = sorted(int(m) for m in seasons)
    covered = [m for m in seasons if m <= reach]
    return covered[-1] if covered else (seasons[0] if seasons else 1)


MAX_LAGS = 10_000  # lags of one model (DeepAR's defaults for any step are a few dozen)


def parse_lags(text: str, option: str = "--lags") -> tuple[int, ...]:
    """``1-7,23-25,168`` -> (1, ..., 7, 23, 24, 25, 168): sorted, unique, each >= 1."""
    lags: set[int] = set()
    for item in str(text).split(","):
        item = item.strip()
        if not item:
            continue
        lo, sep, hi = item.partition("-")
        try:
            first, last = int(lo), int(hi) if sep else int(lo)
        except ValueError:
            raise UsageError(f"{option} {text!r}: {item!r} is not a lag or a range such as 23-25") from None
        if first < 1 or last < first:
            raise UsageError(f"{option} {text!r}: lags must be integers >= 1 and ranges ascending, got {item!r}")
        if last - first + 1 + len(lags) > MAX_LAGS:  # checked before the set is built: 1-1000000000 is 1e9 ints
            raise UsageError(f"{option}: {item!r} makes more than {MAX_LAGS:,} lags, each an input of the model; "
                             "give fewer, e.g. the seasonal ones such as 1-7,23-25,167-169")
        lags.update(range(first, last + 1))
    if not lags:
        raise UsageError(f"{option} {text!r}: give at least one lag, e.g. 1-7,23-25")
    return tuple(sorted(lags))


class Calendar:
    """Time features of the grid ``origin + position * step`` (positions may be negative: padding).

    ``origin`` is a ``numpy.datetime64`` (or ``None`` for integer time, where only ``age`` exists); the
    step is ``step_us`` microseconds or ``step_months`` months.
    """

    def __init__(self, origin=None, step_us: int | None = None, step_months: int | None = None) -> None:
        self.origin = None if origin is None else np.datetime64(origin, "us")
        self.step_us = int(step_us) if step_us else None
        self.step_months = int(step_months) if step_months else None
        if self.origin is not None and (self.step_us is None) == (self.step_months is None):
            raise ValueError("a calendar with an origin needs exactly one of step_us and step_months")
        self._table: np.ndarray | None = None
        self._names: tuple[str, ...] = ()
        self._lo = 0

    @classmethod
    def from_label(cls, start: str | None, freq: str | None) -> "Calendar":
        """The calendar of a grid starting at ``start`` (ISO date-time) with step ``freq`` as tsdp labels
        it (``15m``, ``1h``, ``1d``, ``1w``, ``1mo``, ``1q``, ``1y``, ``500ms``; an integer: integer time),
        e.g. the ``input`` block of a saved model's metadata."""
        if start is None or freq is None or str(freq).isdigit():
            return cls()
        text = str(freq).strip().lower()
        digits = len(text) - len(text.lstrip("0123456789"))
        amount, unit = int(text[:digits] or 1), text[digits:]
        months = {"mo": 1, "q": 3, "y": 12}
        micro = {"us": 1, "ms": 1_000, **US_PER}
        if unit in months:
            return cls(np.datetime64(start), step_months=amount * months[unit])
        if unit not in micro:
            raise UsageError(f"cannot read the time step {freq!r}; expected e.g. 15m, 1h, 1d, 1w, 1mo")
        return cls(np.datetime64(start), step_us=amount * micro[unit])

    def default_features(self) -> tuple[str, ...]:
        return default_time_features(self.step_us if self.origin is not None else None,
                                     self.step_months if self.origin is not None else None)

    def features(self, names, positions) -> np.ndarray:
        """Feature values ``(..., len(names))`` at integer ``positions`` (0 where a position is < 0)."""
        names = tuple(names)
        positions = np.asarray(positions, dtype=np.int64)
        out = np.zeros(positions.shape + (len(names),))
        if not names:
            return out
        flat = positions.ravel()
        cols = [self._feature(name, flat) for name in names]
        values = np.stack(cols, axis=-1).reshape(out.shape)
        return np.where((positions >= 0)[..., None], values, 0.0)

    def window_features(self, names, positions, context: int, horizon: int) -> np.ndarray:
        """Rows ``(B, context + horizon, F)`` for windows whose forecast starts at ``positions`` (B,):
        the context covers positions ``p - context .. p - 1``, the forecast ``p .. p + horizon - 1``."""
        names = tuple(names)
        positions = np.asarray(positions, dtype=np.int64).ravel()
        if not names:
            return np.zeros((positions.size, context + horizon, 0))
        idx = positions[:, None] + np.arange(-context, horizon, dtype=np.int64)
        if idx.size == 0:
            return np.zeros((positions.size, context + horizon, len(names)))
        lo, hi = int(idx.min()), int(idx.max()) + 1
        if (self._table is None or names != self._names or lo < self._lo
                or hi > self._lo + self._table.shape[0]):
            lo = min(lo, self._lo) if self._table is not None and names == self._names else lo
            hi = max(hi, self._lo + self._table.shape[0]) if self._table is not None and names == self._names else hi
            self._table = self.features(names, np.arange(lo, hi))
            self._names, self._lo = names, lo
        return self._table[idx - self._lo]

    # --- the features --------------------------------------------------------------------------
    def _feature(self, name: str, positions: np.ndarray) -> np.ndarray:
        if name == "age":
            return np.log10(2.0 + np.maximum(positions, 0))
        if name not in FEATURES:
            raise UsageError(f"unknown time feature {name!r}; known: {', '.join(FEATURES)}")
        if self.origin is None:
            raise UsageError(f"time feature {name!r} needs a date-time grid; integer time has only 'age'")
        if self.step_months:
            months = self.origin.astype("datetime64[M]").astype(np.int64) + positions * self.step_months
            if name != "month_of_year":
                raise UsageError(f"time feature {name!r} is not defined for a grid of months")
            return (months % 12) / 11.0 - 0.5
        times = self.origin + (positions * self.step_us).astype("timedelta64[us]")
        days = times.astype("datetime64[D]")
        if name == "second_of_minute":
            return (times.astype("datetime64[s]").astype(np.int64) % 60) / 59.0 - 0.5
        if name == "minute_of_hour":
            return (times.astype("datetime64[m]").astype(np.int64) % 60) / 59.0 - 0.5
        if name == "hour_of_day":
            return (times.astype("datetime64[h]").astype(np.int64) % 24) / 23.0 - 0.5
        if name == "day_of_week":  # Monday = 0; 1970-01-01 was a Thursday
            return ((days.astype(np.int64) + 3) % 7) / 6.0 - 0.5
        if name == "day_of_month":
            return (days - days.astype("datetime64[M]")).astype(np.int64) / 30.0 - 0.5
        if name == "day_of_year":
            return (days - days.astype("datetime64[Y]")).astype(np.int64) / 365.0 - 0.5
        if name == "week_of_year":
            return (_iso_week(days) - 1) / 52.0 - 0.5
        return (days.astype("datetime64[M]").astype(np.int64) % 12) / 11.0 - 0.5  # month_of_year


def _iso_week(days: np.ndarray) -> np.ndarray:
    """ISO 8601 week number (1..53) of ``datetime64[D]`` dates: the week of the date's Thursday."""
    weekday = (days.astype(np.int64) + 3) % 7  # Monday = 0
    thursday = days - weekday.astype("timedelta64[D]") + np.timedelta64(3, "D")
    jan1 = thursday.astype("datetime64[Y]").astype("datetime64[D]")
    return (thursday - jan1).astype(np.int64) // 7 + 1

"""Deterministic generator for the sample datasets bundled with ``tsdp``.

Every dataset here is **synthetic**. Nothing was taken from real sensors,
transit operators or the U.S. Census Bureau. The files are small (each is
under 2 MB) and are meant for examples, documentation and tests.

Run ``python sample_data/generate.py [--out DIR]`` to (re)write the files. The
default output folder is the folder holding this script. You can also import
the module and call the per-dataset functions; each returns a
``polars.DataFrame``. All randomness comes from ``numpy.random.default_rng``
seeded from :data:`SEED` (20261122). Each dataset gets its own child
``SeedSequence`` (see :func:`_rng`), so changing one dataset's code does not
change the data of the others. Running the script again gives exactly the same
values.

Datasets
--------
``traffic_hourly.parquet`` / ``traffic_hourly_wide.csv`` (built by :func:`traffic_hourly`)
    Hourly vehicle counts for 20 road sensors ``s01``..``s20``, 2000 hourly
    steps from 2024-01-01 00:00:00 (a Monday) to 2024-03-24 07:00:00, with no
    gaps. Each series has its own level (log-uniform between 20 and 400
    vehicles/hour on weekdays). The mean follows a weekday profile with a
    morning (~08:00) and an evening (~17:30) rush-hour peak. The weights of the
    two peaks differ per sensor, like inbound and outbound roads. Weekends
    have a single, lower midday hump. On top of the mean there is a small
    day-to-day multiplicative factor. Counts are negative-binomial draws
    (gamma-Poisson with shape 40, so mild overdispersion). Long layout
    (Parquet): ``sensor`` (str), ``time`` (Datetime[us]), ``count`` (Int64),
    sorted by sensor and then time. Wide layout (CSV): ``time``
    ("YYYY-MM-DD HH:MM:SS") plus one Int64 column per sensor. Both layouts hold
    the same numbers.
    *Intended use:* the baseline release of a multi-series count panel (the
    Laplace/Gaussian release of each hourly value, with seasonality to keep).

``events.csv`` (built by :func:`events`)
    A raw event log, such as card taps at stations. Hourly counts are
    aggregated from it. Columns: ``user_id`` ("u00000".."u01999"),
    ``timestamp`` ("YYYY-MM-DD HH:MM:SS"), ``station`` ("st1".."st5"). It
    spans the 14 days from 2024-03-04 00:00:00 and is sorted by timestamp. The
    number of events per user is heavy-tailed (discretised lognormal with a
    median of about 6, clipped to [1, 500]). Most users have a handful of
    events and a few have hundreds. About 25% of events are follow-ups within
    minutes of the user's previous event, so many users have several events in
    the same hour. Each user has a home station, drawn with unequal station
    popularity. About 10% of users (among those with at least two events) also
    use a second station for 15-50% of their events. Event hours follow a
    daily pattern, with rush hours on weekdays and a flatter, lower daytime
    level at weekends.
    *Intended use:* event-level aggregation into hourly counts with per-user
    contribution bounding (user-level DP). Contributions per user, per hour
    and across stations are all unbounded in the raw data.

``itms_speeds.parquet`` (built by :func:`itms_speeds`)
    An ITMS-like (intelligent transport management system) table of bus GPS
    pings. Columns: ``bus_id`` (plate-style strings such as "GJ05-1234"),
    ``timestamp`` (Datetime[us]), ``cell_id`` (a cell of a 5x5 grid,
    "c00_00".."c04_04"), ``speed`` (Float64 km/h, rounded to 0.01). There are
    560 buses over the 3 days from 2024-05-06 00:00:00. The number of records
    per bus is heavy-tailed: a lognormal with median 46 and sigma 0.76,
    rounded and clipped to [1, 417], and the busiest bus is set to exactly
    417. Within a bus the timestamps strictly increase. A bus reports every
    30-120 s during a trip, and trips are separated by gaps of 10 min to 2 h.
    Cells follow a reflecting random walk on the grid. Speeds are
    Normal(20.67, 12) clipped to [0, 65], so about 4% are exactly 0. Rows are
    sorted by bus_id and then timestamp.
    *Intended use:* a bounded-domain DP mean estimate of speed (overall or per
    cell) with per-bus contribution bounding. The heavy tail of records per
    bus is what makes the bounding matter.

``qwi_quarterly.csv`` (built by :func:`qwi_quarterly`)
    Four quarterly employment-like series (levels in thousands) over 100
    quarters, 1995-01-01..2019-10-01. Columns: ``quarter`` (Date, first day of
    the quarter), ``ca_white`` (~5000-8000), ``ca_asian`` (~1500-3000),
    ``md_montgomery`` (~400-550), ``md_baltimore`` (~300-400), all Float64
    rounded to 0.001. Each series is a smooth cubic trend times a recession
    dip centred on 2009Q2, a quarterly seasonal factor and exp(AR(1) noise).
    The two Maryland counties share most of their AR innovations
    (correlation 0.9), so their quarter-over-quarter changes are strongly
    correlated. These are synthetic stand-ins shaped roughly like Quarterly
    Workforce Indicators (QWI) series. They are **not** real Census data.
    *Intended use:* examples and tests of the FLIP mechanism (and of
    other per-quarter releases) on smooth, seasonal, correlated series.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import polars as pl
from scipy.signal import lfilter

SEED = 20261122
MAX_BYTES = 2_000_000  # "under 2 MB", counted in decimal megabytes to be safe

# Child seed index per dataset: append new datasets at the end, never reorder.
_DATASETS = ("traffic", "events", "itms", "qwi")

TRAFFIC_START = np.datetime64("2024-01-01T00:00:00", "us")
TRAFFIC_SERIES = 20
TRAFFIC_STEPS = 2000

EVENTS_START = np.datetime64("2024-03-04T00:00:00", "us")
EVENTS_DAYS = 14
EVENTS_USERS = 2000
EVENTS_STATIONS = 5

ITMS_START = np.datetime64("2024-05-06T00:00:00", "us")
ITMS_DAYS = 3
ITMS_BUSES = 560
ITMS_MAX_RECORDS = 417
ITMS_GRID = 5
ITMS_SPEED_MAX = 65.0

QWI_START_YEAR = 1995
QWI_QUARTERS = 100

DATETIME_FORMAT = "%Y-%m-%d %H:%M:%S"


def _rng(name: str) -> np.random.Generator:
    """Return the independent generator for one dataset, derived from SEED."""
    child = np.random.SeedSequence(SEED).spawn(len(_DATASETS))[_DATASETS.index(name)]
    return np.random.default_rng(child)


def _bump(x: np.ndarray, centre: float, width: float) -> np.ndarray:
    return np.exp(-0.5 * ((x - centre) / width) ** 2)


# --------------------------------------------------------------------------
# 1. traffic panel
# --------------------------------------------------------------------------
def traffic_hourly_wide() -> pl.DataFrame:
    """Hourly counts, wide layout: ``time`` plus Int64 columns ``s01``..``s20``."""
    rng = _rng("traffic")
    n, k = TRAFFIC_STEPS, TRAFFIC_SERIES
    hours = np.arange(n)
    hod = (hours % 24)[:, None] + 0.5  # hour-of-day at the middle of the hour
    day = hours // 24
    weekend = ((day % 7) >= 5)[:, None]  # 2024-01-01 is a Monday

    level = np.exp(rng.uniform(np.log(20), np.log(400), k))  # weekday mean per hour
    w_morning = rng.uniform(0.6, 1.4, k)
    w_evening = 2.0 - w_morning + rng.uniform(-0.2, 0.2, k)
    weekend_factor = rng.uniform(0.5, 0.8, k)

    daytime = 1.0 / (1.0 + np.exp(-(hod - 6.0))) / (1.0 + np.exp(hod - 21.0))
    weekday_profile = (
        0.12
        + 0.55 * daytime
        + w_morning * _bump(hod, 8.0, 1.3)
        + w_evening * _bump(hod, 17.5, 1.6)
    )
    weekday_profile = weekday_profile / weekday_profile[:24].mean(axis=0)  # mean 1
    weekend_profile = 0.15 + 2.0 * _bump(hod, 13.5, 3.5)
    weekend_profile = weekend_profile / weekend_profile[:24].mean(axis=0)
    profile = np.where(weekend, weekend_factor * weekend_profile, weekday_profile)

    daily = np.exp(rng.normal(0.0, 0.06, (day[-1] + 1, k)))[day]  # day-to-day factor
    mean = level * profile * daily
    shape = 40.0  # gamma-Poisson (negative binomial): mild overdispersion
    counts = rng.poisson(rng.gamma(shape, mean / shape)).astype(np.int64)

    time = TRAFFIC_START + hours.astype("timedelta64[h]")
    return pl.DataFrame(
        {"time": pl.Series(time, dtype=pl.Datetime("us"))}
        | {f"s{j + 1:02d}": pl.Series(counts[:, j], dtype=pl.Int64) for j in range(k)}
    )


def traffic_hourly(wide: pl.DataFrame | None = None) -> pl.DataFrame:
    """Hourly counts, long layout: ``sensor``, ``time``, ``count``, sorted by sensor and time."""
    if wide is None:
        wide = traffic_hourly_wide()
    return (
        wide.unpivot(index="time", variable_name="sensor", value_name="count")
        .select("sensor", "time", "count")
        .sort("sensor", "time")
    )


# --------------------------------------------------------------------------
# 2. raw events
# --------------------------------------------------------------------------
def _within_group_index(group_sizes: np.ndarray) -> np.ndarray:
    """0, 1, ..., size-1 for each group, concatenated."""
    starts = np.repeat(np.cumsum(group_sizes) - group_sizes, group_sizes)
    return np.arange(group_sizes.sum()) - starts


def events() -> pl.DataFrame:
    """Raw event log: ``user_id``, ``timestamp``, ``station``, sorted by timestamp."""
    rng = _rng("events")
    n_users, n_st = EVENTS_USERS, EVENTS_STATIONS

    # Heavy-tailed events per user.
    per_user = np.clip(np.ceil(rng.lognormal(np.log(6.0), 1.5, n_users)), 1, 500)
    per_user = per_user.astype(np.int64)
    user = np.repeat(np.arange(n_users), per_user)
    j = _within_group_index(per_user)  # event index within the user
    n = user.size

    # Stations: a home station plus, for ~10% of users, a second one.
    popularity = np.array([0.30, 0.25, 0.20, 0.15, 0.10])
    home = rng.choice(n_st, size=n_users, p=popularity)
    second = (home + rng.integers(1, n_st, n_users)) % n_st  # != home
    multi = (rng.random(n_users) < 0.10) & (per_user >= 2)
    p_second = rng.uniform(0.15, 0.50, n_users)
    use_second = rng.random(n) < p_second[user]
    use_second = np.where(j == 0, True, np.where(j == 1, False, use_second))  # both seen
    station = np.where(multi[user] & use_second, second[user], home[user])

    # Hour slots weighted by a daily pattern (weekday rush hours, flatter weekends).
    slot_hour = np.arange(24 * EVENTS_DAYS)
    hod = (slot_hour % 24) + 0.5
    weekend = (slot_hour // 24) % 7 >= 5  # 2024-03-04 is a Monday
    base = 0.05 + 1.0 / (1.0 + np.exp(-(hod - 6.5))) / (1.0 + np.exp(hod - 22.0))
    weekday_w = base + 1.5 * _bump(hod, 8.0, 1.2) + 1.3 * _bump(hod, 17.5, 1.5)
    weekend_w = 1.2 * (0.05 + _bump(hod, 14.0, 3.5))
    w = np.where(weekend, weekend_w, weekday_w)
    slot = rng.choice(slot_hour.size, size=n, p=w / w.sum())
    base_sec = slot * 3600 + rng.integers(0, 3600, n)

    # ~25% of events follow the user's previous event within minutes.
    follow = (rng.random(n) < 0.25) & (j > 0)
    prev = np.concatenate(([0], base_sec[:-1]))
    gap = 1 + np.floor(rng.exponential(600.0, n)).astype(np.int64)
    span = EVENTS_DAYS * 86400
    sec = np.minimum(np.where(follow, prev + gap, base_sec), span - 1)

    return pl.DataFrame(
        {
            "user_id": pl.Series(np.char.add("u", np.char.zfill(user.astype(str), 5))),
            "timestamp": pl.Series(EVENTS_START + sec.astype("timedelta64[s]"), dtype=pl.Datetime("us")),
            "station": pl.Series(np.char.add("st", (station + 1).astype(str))),
        }
    ).sort("timestamp", "user_id", "station")


# --------------------------------------------------------------------------
# 3. ITMS bus speeds
# --------------------------------------------------------------------------
def itms_speeds() -> pl.DataFrame:
    """Bus GPS pings: ``bus_id``, ``timestamp``, ``cell_id``, ``speed``, sorted by bus and time."""
    rng = _rng("itms")
    n_bus = ITMS_BUSES

    per_bus = np.clip(np.rint(rng.lognormal(np.log(46.0), 0.76, n_bus)), 1, ITMS_MAX_RECORDS)
    per_bus = per_bus.astype(np.int64)
    per_bus[np.argmax(per_bus)] = ITMS_MAX_RECORDS
    bus = np.repeat(np.arange(n_bus), per_bus)
    j = _within_group_index(per_bus)
    first = j == 0
    n = bus.size

    # Plates "GJ05-1234": unique 4-digit numbers, so plates are unique.
    district = rng.choice([1, 3, 5, 6, 18, 27], size=n_bus)
    number = rng.choice(np.arange(1000, 10000), size=n_bus, replace=False)
    plates = np.char.add(
        np.char.add("GJ", np.char.zfill(district.astype(str), 2)),
        np.char.add("-", number.astype(str)),
    )

    # Time: 30-120 s between pings in a trip, 10 min - 2 h between trips.
    step = rng.integers(30, 121, n)
    new_trip = rng.random(n) < 1.0 / 35.0
    step = step + np.where(new_trip, rng.integers(600, 7201, n), 0)
    step[first] = 0
    elapsed = np.cumsum(step)
    elapsed = elapsed - elapsed[first][bus]  # restart at 0 for each bus
    duration = elapsed[np.cumsum(per_bus) - 1]
    span = ITMS_DAYS * 86400
    assert duration.max() < span
    start = np.floor(rng.random(n_bus) * (span - duration)).astype(np.int64)
    sec = start[bus] + elapsed

    # Cells: a reflecting random walk on the 5x5 grid (moves with prob. 0.3).
    g = ITMS_GRID
    period = 2 * (g - 1)
    moves = rng.integers(-1, 2, (n, 2)) * (rng.random((n, 1)) < 0.3)
    moves[first] = rng.integers(0, g, (int(first.sum()), 2))  # starting cell
    walk = np.cumsum(moves, axis=0)
    walk = walk - (walk - moves)[first][bus]  # per-bus cumulative sum
    walk = walk % period
    pos = np.where(walk > g - 1, period - walk, walk)

    speed = np.round(np.clip(rng.normal(20.67, 12.0, n), 0.0, ITMS_SPEED_MAX), 2)

    cell = np.char.add(
        np.char.add("c", np.char.zfill(pos[:, 0].astype(str), 2)),
        np.char.add("_", np.char.zfill(pos[:, 1].astype(str), 2)),
    )
    return pl.DataFrame(
        {
            "bus_id": pl.Series(plates[bus]),
            "timestamp": pl.Series(ITMS_START + sec.astype("timedelta64[s]"), dtype=pl.Datetime("us")),
            "cell_id": pl.Series(cell),
            "speed": pl.Series(speed, dtype=pl.Float64),
        }
    ).sort("bus_id", "timestamp")


# --------------------------------------------------------------------------
# 4. QWI-like quarterly series
# --------------------------------------------------------------------------
def qwi_quarterly() -> pl.DataFrame:
    """Quarterly employment-like levels (thousands): ``quarter`` plus four Float64 series."""
    rng = _rng("qwi")
    n = QWI_QUARTERS
    q = np.arange(n)
    t = q / (n - 1)
    year = QWI_START_YEAR + q / 4.0
    quarter_of_year = q % 4

    # name: (start level, end level, share of the rise that is S-shaped, recession depth)
    spec = {
        "ca_white": (5400.0, 7500.0, 0.6, 0.055),
        "ca_asian": (1650.0, 2800.0, 0.3, 0.050),
        "md_montgomery": (425.0, 525.0, 0.5, 0.040),
        "md_baltimore": (330.0, 372.0, 0.4, 0.040),
    }
    seasonal = np.array([-0.010, 0.003, 0.008, -0.001])  # Q1..Q4, sums to 0
    recession = _bump(year, 2009.25, 0.75)
    phi, sd = 0.7, 0.004

    # AR(1) innovations; the two MD counties share most of theirs (corr 0.9).
    z = rng.standard_normal((n, 4))
    rho = 0.9
    z[:, 3] = rho * z[:, 2] + np.sqrt(1 - rho**2) * z[:, 3]
    noise = lfilter([1.0], [1.0, -phi], sd * z, axis=0)

    cols = {}
    for i, (name, (lo, hi, s_share, depth)) in enumerate(spec.items()):
        cubic = (1 - s_share) * t + s_share * (3 * t**2 - 2 * t**3)  # 0 -> 1
        trend = lo + (hi - lo) * cubic
        level = trend * (1 - depth * recession) * (1 + seasonal[quarter_of_year]) * np.exp(noise[:, i])
        cols[name] = pl.Series(np.round(level, 3), dtype=pl.Float64)

    quarter = pl.date_range(
        pl.date(QWI_START_YEAR, 1, 1),
        pl.date(QWI_START_YEAR + n // 4 - 1, 10, 1),
        interval="3mo",
        eager=True,
    ).alias("quarter")
    return pl.DataFrame({"quarter": quarter} | cols)


# --------------------------------------------------------------------------
# writing
# --------------------------------------------------------------------------
FILES = (
    "traffic_hourly.parquet",
    "traffic_hourly_wide.csv",
    "events.csv",
    "itms_speeds.parquet",
    "qwi_quarterly.csv",
)


def build_all() -> dict[str, pl.DataFrame]:
    """Every bundled dataset, keyed by file name."""
    wide = traffic_hourly_wide()
    return {
        "traffic_hourly.parquet": traffic_hourly(wide),
        "traffic_hourly_wide.csv": wide,
        "events.csv": events(),
        "itms_speeds.parquet": itms_speeds(),
        "qwi_quarterly.csv": qwi_quarterly(),
    }


def write_frame(df: pl.DataFrame, path: Path) -> None:
    """Write one frame. CSV datetimes are written as "YYYY-MM-DD HH:MM:SS"."""
    if path.suffix == ".parquet":
        df.write_parquet(path, compression="zstd", statistics=True)
    else:
        df.write_csv(path, datetime_format=DATETIME_FORMAT, date_format="%Y-%m-%d")


def read_frame(path: str | Path) -> pl.DataFrame:
    """Read a bundled file back with the dtypes that the generator produced."""
    path = Path(path)
    if path.suffix == ".parquet":
        return pl.read_parquet(path)
    return pl.read_csv(path, try_parse_dates=True)


def write_all(out_dir: str | Path) -> dict[str, Path]:
    """Generate and write every dataset into ``out_dir``. Returns the paths written."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = {}
    for name, df in build_all().items():
        path = out / name
        write_frame(df, path)
        size = path.stat().st_size
        if size >= MAX_BYTES:
            raise RuntimeError(f"{path} is {size} bytes, over the 2 MB limit")
        paths[name] = path
    return paths


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Generate the tsdp sample datasets.")
    parser.add_argument(
        "--out",
        type=Path,
        default=Path(__file__).resolve().parent,
        help="output folder (default: the folder of this script)",
    )
    args = parser.parse_args(argv)
    for name, path in write_all(args.out).items():
        df = read_frame(path)
        print(f"{name:28s} {df.height:>7d} rows {path.stat().st_size / 1024:>8.1f} KiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())

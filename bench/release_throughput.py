"""Throughput of `tsdp release` on a large panel, against plain polars I/O of the same file.

Builds a 10,000-series x 2,000-step hourly count panel in the long layout (20 million rows) as
Parquet, then times, in the same process and run:

* reference: polars reading the Parquet file and writing it back (read + write);
* tsdp: the whole `tsdp release` command (read, validate, grid checks, calibration, noise,
  atomic write of the Parquet output and the JSON report), called in-process.

Prints both times and their ratio; the target is ratio <= 2. Exit status 1 if it is missed.
Usage: python bench/release_throughput.py [--series N] [--steps T] [--repeat R]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from datetime import datetime, timedelta
from pathlib import Path

import numpy as np
import polars as pl

from tsdp.cli.app import main as tsdp_main
from timing import best_of  # noqa: E402  (bench/timing.py, beside this script)

TARGET_RATIO = 2.0


def make_panel(n_series: int, n_steps: int, seed: int = 0) -> pl.DataFrame:
    rng = np.random.default_rng(seed)
    start = datetime(2024, 1, 1)
    times = pl.datetime_range(start, start + timedelta(hours=n_steps - 1), interval="1h", eager=True)
    hours = np.arange(n_steps) % 24
    daily = 1.0 + 0.8 * np.sin(2 * np.pi * (hours - 6) / 24)
    level = rng.uniform(20, 400, n_series)
    counts = rng.poisson(np.outer(level, daily)).astype(np.int64)
    ids = pl.Series("sensor", [f"s{i:05d}" for i in range(n_series)])
    return pl.DataFrame({
        "sensor": ids.gather(np.repeat(np.arange(n_series), n_steps)),
        "time": pl.concat([times] * n_series),
        "count": counts.ravel(),
    })


def run(n_series: int, n_steps: int, repeat: int) -> float:
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        src = tmp / "panel.parquet"
        make_panel(n_series, n_steps).write_parquet(src)
        size_mb = src.stat().st_size / 1e6

        def polars_io():
            pl.read_parquet(src).write_parquet(tmp / "copy.parquet")

        def release():
            code = tsdp_main([
                "release", str(src), "--value-col", "count", "--series-col", "sensor", "--time-col", "time",
                "--epsilon", "1", "--delta", "1e-6", "--unit", "user", "--max-steps", "24",
                "--series-per-user", "1", "-o", str(tmp / "released.parquet"), "--force", "--quiet",
            ])
            assert code == 0, code

        release()  # warm-up: imports, page cache
        polars_io()
        t_io = best_of(repeat, polars_io)
        t_release = best_of(repeat, release)
    ratio = t_release / t_io
    print(f"panel: {n_series} series x {n_steps} steps = {n_series * n_steps:,} rows, Parquet {size_mb:.0f} MB")
    print(f"reference  polars read + write : {t_io:7.3f} s")
    print(f"tsdp release (whole command)   : {t_release:7.3f} s")
    print(f"ratio release / polars I/O     : {ratio:7.2f}  (target <= {TARGET_RATIO})")
    return ratio


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--series", type=int, default=10_000)
    parser.add_argument("--steps", type=int, default=2_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    sys.exit(0 if run(args.series, args.steps, args.repeat) <= TARGET_RATIO else 1)

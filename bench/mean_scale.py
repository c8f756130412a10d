"""Scale of `tsdp mean-estimate --group-by`, against a plain polars group-by mean of the same file.

Builds an ITMS-like table of 10 million records (user id, timestamp, cell, value in [0, 65]) in
100 cells x 100 hourly slots = 10,000 groups, with heavy-tailed (lognormal) record counts per user,
as Parquet. Then times, in the same process and run:

* reference: polars reading the Parquet file and computing the (non-private) mean per
  (cell, hour) (read + group_by.mean);
* tsdp: the whole `tsdp mean-estimate ... --group-by cell,slot` command, its groups declared and
  under the default --participation private (read, validate, slots,
  sort into per-user runs, grouping, per-group estimates, atomic write of the output and the
  JSON report), called in-process.

The two run interleaved (polars, tsdp, polars, tsdp, ...); the bench prints their medians and the
median of the per-round ratios with its spread. The target is a median ratio <= 3. Exit status 1
if it is missed.
Usage: python bench/mean_scale.py [--records N] [--cells C] [--slots S] [--rounds R]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from datetime import datetime, timedelta
from pathlib import Path

import numpy as np
import polars as pl

from tsdp.cli.app import main as tsdp_main
from timing import load_average, paired, verdict  # noqa: E402  (bench/timing.py, beside this script)

TARGET_RATIO = 3.0
UPPER = 65.0


def make_records(n_records: int, n_cells: int, n_slots: int, seed: int = 0) -> pl.DataFrame:
    """Users with lognormal record counts, each driving through the cells over time."""
    rng = np.random.default_rng(seed)
    n_users = max(1, n_records // 50)
    counts = np.maximum(1, np.round(rng.lognormal(np.log(30), 1.0, n_users))).astype(np.int64)
    counts = np.maximum(1, np.floor(counts * (n_records / counts.sum()))).astype(np.int64)
    counts[0] += n_records - counts.sum()  # exact total (the first user absorbs the rounding)
    if counts[0] < 1:
        raise SystemExit("rounding left the first user without records; use more records")
    user = np.repeat(np.arange(n_users), counts)
    first = np.concatenate(([0], np.cumsum(counts)[:-1]))
    index_in_user = np.arange(n_records) - first[user]
    # Each user drives from a random start, one record every 30-120 s, moving to the next cell
    # every 20 records (a bus crossing the grid).
    home = rng.integers(0, n_cells, n_users)
    cell = (home[user] + index_in_user // 20) % n_cells
    gaps = rng.integers(30_000_000, 120_000_001, n_records)
    elapsed = np.cumsum(gaps) - np.cumsum(gaps)[first][user]
    start = int(datetime(2024, 5, 6).timestamp() * 1_000_000)
    user_start = rng.integers(0, n_slots * 3_600_000_000, n_users)
    offset_us = (user_start[user] + elapsed) % (n_slots * 3_600_000_000)
    speed = np.round(np.clip(rng.normal(20.67, 12.0, n_records), 0.0, UPPER), 2)
    ids = pl.Series("bus_id", [f"u{i:07d}" for i in range(n_users)])
    return pl.DataFrame({
        "bus_id": ids.gather(user),
        "timestamp": pl.Series(start + offset_us).cast(pl.Datetime("us")),
        "cell_id": pl.Series([f"c{i:03d}" for i in range(n_cells)]).gather(cell),
        "speed": speed,
    })


def run(n_records: int, n_cells: int, n_slots: int, rounds: int) -> float:
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        src = tmp / "records.parquet"
        make_records(n_records, n_cells, n_slots).write_parquet(src)
        size_mb = src.stat().st_size / 1e6

        def polars_mean():
            frame = pl.read_parquet(src)
            return frame.group_by("cell_id", pl.col("timestamp").dt.truncate("1h")).agg(pl.col("speed").mean())

        def estimate():
            code = tsdp_main([
                "mean-estimate", str(src), "--user-col", "bus_id", "--value-col", "speed",
                "--time-col", "timestamp", "--cell-col", "cell_id", "--slot-length", "1h",
                "--group-by", "cell,slot", "--epsilon-per-group-ok", "--epsilon", "1",
                "--group-keys", ",".join(f"c{i:03d}" for i in range(n_cells)),  # the declared groups
                "--start", "2024-05-06", "--end", str(datetime(2024, 5, 6) + timedelta(hours=n_slots)),
                "--arrays", "64", "--m-ub", "40",  # --participation private: public parameters
                "--upper", str(UPPER), "-o", str(tmp / "estimates.parquet"), "--force", "--quiet",
            ])
            assert code == 0, code

        groups = polars_mean().height
        before = load_average()
        result = paired({"polars": polars_mean, "tsdp": estimate}, rounds)  # one warm-up round first
        after = load_average()
    ratio = result.ratio("tsdp", "polars")
    print(f"records: {n_records:,} in {groups:,} groups ({n_cells} cells x {n_slots} hourly slots), "
          f"Parquet {size_mb:.0f} MB; {rounds} interleaved rounds (medians)")
    print(f"reference  polars read + group_by.mean : {result.median('polars'):7.3f} s")
    print(f"tsdp mean-estimate --group-by (whole)  : {result.median('tsdp'):7.3f} s")
    print(f"ratio mean-estimate / polars           : {ratio:7.2f}  ({result.spread('tsdp', 'polars')}; "
          f"target <= {TARGET_RATIO:g}: {verdict(ratio <= TARGET_RATIO)})")
    print(f"{before} before the rounds; {after} after ({os.cpu_count()} cores)")
    return ratio


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=10_000_000)
    parser.add_argument("--cells", type=int, default=100)
    parser.add_argument("--slots", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    sys.exit(0 if run(args.records, args.cells, args.slots, args.rounds) <= TARGET_RATIO else 1)

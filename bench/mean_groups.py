"""`tsdp mean-estimate` with very many groups (issue 30): 10^6 (cell, hour) groups at 10^7 records.

Builds (once, cached in --workdir) bus records over a month, as a new user's data would look:
--cells cells x 720 hourly slots (about 10^6 groups at the default 1,400 cells), buses with
lognormal activity that stay in one or two cells an hour, so a (group, bus) run holds a few records
and a group a few buses. Parquet, written in chunks.

Then times, each in a FRESH process and interleaved (A B A B ...), medians of --rounds and the
spread of the per-round ratios, with each process's peak RSS (GNU time's %M, as bench/scale.py):

* tsdp: `tsdp mean-estimate --group-by cell,slot` with the groups declared (--group-keys FILE of
  the cells, --start/--end of the month), under --participation private (the default) and, with
  --public, also public (the paper's BESTFIT packing);
* reference: a polars group-by over (cell, hour, bus) of the same file counting and summing the
  records (the per-(group, user) reduction every estimator needs), read with the same reader.

Targets (issue 30): tsdp within 3x of the reference and peak RSS <= 2 GiB. Exit status 1 if missed.
Usage: python bench/mean_groups.py [--records 1e7] [--cells 1400] [--rounds 3] [--workdir DIR] [--public]
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import sys
from pathlib import Path

HERE = Path(__file__).resolve()
sys.path.insert(0, str(HERE.parent))

from scale import GIB, measure, rss_method  # noqa: E402  (bench/scale.py, beside this script)
from timing import load_average, verdict  # noqa: E402

TARGET_RATIO = 3.0
RSS_TARGET = 2 * GIB
SLOTS = 720  # hourly slots of 30 days
START, END = "2024-05-01", "2024-05-31"
UPPER = 65.0
CHUNK = 2_000_000


def records(n_records: int, n_cells: int, seed: int = 0):
    """Record chunks (bus_id, ts, cell, speed): each bus (lognormal activity) is active in random
    hours of the month and stays in its cell of that hour (a walk from its home cell, one cell on
    in one record in four), pinging every 10-60 s."""
    import numpy as np
    import polars as pl

    rng = np.random.default_rng(seed)
    n_buses = max(10, n_records // 2000)
    activity = rng.lognormal(0.0, 1.0, n_buses)
    cdf = np.cumsum(activity) / activity.sum()
    home = rng.integers(0, n_cells, n_buses)
    buses = pl.Series("bus_id", [f"b{i:06d}" for i in range(n_buses)])
    cells = pl.Series("cell", [f"c{i:05d}" for i in range(n_cells)])
    start_us = int(np.datetime64(START, "us").astype(np.int64))
    for first in range(0, n_records, CHUNK):
        m = min(CHUNK, n_records - first)
        bus = np.minimum(np.searchsorted(cdf, rng.random(m)), n_buses - 1)
        slot = (rng.integers(0, SLOTS // 3, m) * 3 + (bus % 3)) % SLOTS  # a bus drives in a third of the hours
        drift = (slot * 7 + (rng.random(m) < 0.25)) % n_cells
        cell = (home[bus] + drift) % n_cells
        second = slot.astype(np.int64) * 3600 + rng.integers(0, 3600, m)
        yield pl.DataFrame({
            "bus_id": buses.gather(bus),
            "ts": pl.Series(start_us + second * 1_000_000).cast(pl.Datetime("us")),
            "cell": cells.gather(cell),
            "speed": np.round(np.clip(rng.normal(20.67, 12.0, m), 0.0, UPPER), 2),
        })


def dataset(n_records: int, n_cells: int, workdir: Path) -> tuple[Path, Path]:
    """(the records' Parquet file, the CSV of the declared cells), built once per size."""
    import polars as pl
    import pyarrow.parquet as pq

    workdir.mkdir(parents=True, exist_ok=True)
    path = workdir / f"groups_{n_records}_{n_cells}.parquet"
    cells = workdir / f"cells_{n_cells}.csv"
    if not cells.exists():
        pl.DataFrame({"cell": [f"c{i:05d}" for i in range(n_cells)]}).write_csv(cells)
    if not path.exists():
        tmp = path.with_suffix(".tmp")
        writer = None
        for chunk in records(n_records, n_cells):
            table = chunk.to_arrow()
            writer = writer or pq.ParquetWriter(tmp, table.schema)
            writer.write_table(table)
        writer.close()
        tmp.rename(path)
    return path, cells


def mean_command(path: Path, cells: Path, out: Path, participation: str) -> list[str]:
    extra = (["--arrays", "4", "--m-ub", "8"] if participation == "private" else ["--participation", "public"])
    return ["mean-estimate", str(path), "--user-col", "bus_id", "--value-col", "speed", "--time-col", "ts",
            "--cell-col", "cell", "--group-by", "cell,slot", "--group-keys-file", str(cells), "--start", START,
            "--end", END, "--epsilon-per-group-ok", "--epsilon", "1", "--upper", str(UPPER), "-o", str(out),
            "--force", "--quiet", *extra]


def reference(path: str) -> None:
    """The per-(group, user) reduction: count and sum per (cell, hour, bus), polars."""
    import polars as pl

    out = (pl.scan_parquet(path).group_by("cell", pl.col("ts").dt.truncate("1h"), "bus_id")
           .agg(pl.len(), pl.col("speed").sum()).collect())
    print(out.height)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=float, default=1e7)
    parser.add_argument("--cells", type=int, default=1400)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--workdir", type=Path, default=Path(os.environ.get("TMPDIR", "/tmp")) / "tsdp_mean_groups")
    parser.add_argument("--public", action="store_true", help="also time --participation public")
    parser.add_argument("--reference", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.reference:
        reference(args.reference)
        return 0
    n = int(args.records)
    path, cells = dataset(n, args.cells, args.workdir)
    tsdp = [str(Path(sys.executable).with_name("tsdp"))]
    plan = {"polars group-by (cell, hour, bus): count, sum": [sys.executable, str(HERE), "--reference", str(path)]}
    for participation in (["private", "public"] if args.public else ["private"]):
        plan[f"tsdp mean-estimate --participation {participation}"] = [
            *tsdp, *mean_command(path, cells, args.workdir / f"means_{participation}.parquet", participation)]
    import polars as pl

    groups = args.cells * SLOTS
    print(f"records: {n:,} in {groups:,} declared groups ({args.cells} cells x {SLOTS} hourly slots), Parquet "
          f"{path.stat().st_size / 1e6:,.0f} MB; {args.rounds} interleaved rounds, each command in a fresh process")
    print(rss_method())
    runs: dict[str, list] = {name: [] for name in plan}
    before = load_average()
    names = list(plan)
    for r in range(args.rounds):
        for name in names[r % len(names):] + names[:r % len(names)]:
            run = measure(plan[name])
            if run.code != 0:
                raise SystemExit(f"error: {name} exited {run.code}: {run.err}")
            runs[name].append(run)
    after = load_average()
    ref = names[0]
    for name in names:
        walls = [r.wall for r in runs[name]]
        peak = max(r.peak for r in runs[name])
        print(f"{name:55s} {statistics.median(walls):7.2f} s [{min(walls):.2f} - {max(walls):.2f}]  "
              f"peak RSS {peak / GIB:.2f} GiB")
    ok = True
    for name in names[1:]:
        ratios = sorted(a.wall / b.wall for a, b in zip(runs[name], runs[ref]))
        ratio = statistics.median(ratios)
        peak = max(r.peak for r in runs[name])
        print(f"ratio {name} / reference: {ratio:.2f} (range {ratios[0]:.2f}-{ratios[-1]:.2f}; target <= "
              f"{TARGET_RATIO:g}: {verdict(ratio <= TARGET_RATIO)}); peak RSS {peak / GIB:.2f} GiB (target <= 2 GiB: "
              f"{verdict(peak <= RSS_TARGET)})")
        ok = ok and ratio <= TARGET_RATIO and peak <= RSS_TARGET
    out = pl.read_parquet(args.workdir / "means_private.parquet")
    print(f"output rows {out.height:,} (declared groups {groups:,}); {before} before, {after} after "
          f"({os.cpu_count()} cores)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

"""BESTFIT packing of `tsdp mean-estimate` (issues 12/14): the all-groups-at-once packing against the
per-group reference loop it replaced in `plan_runs`.

Inputs (caps from the rule `plan_runs` uses for LEVY/QUANTILE, `opt`, and for ARRAY-AVERAGING,
`median`):

* synthetic: 10^4 groups of 500-1000 users each, lognormal counts (sigma 1) with a per-group
  median drawn from [2, 20];
* real (with --real): the per-(cell, hour) runs of bench/mean_scale.py's 10^7-record table
  (100 cells x 100 slots), read as `tsdp mean-estimate --group-by cell,slot` reads them.

Times, interleaved round by round: the reference (lists out of the arrays, `bestfit_pack` per
group, the labels back into an array, as `plan_runs` did) and `bestfit_pack_groups`; checks that
they agree exactly, and prints medians and the median of the per-round ratios. Target: >= 3x.
Usage: python bench/bestfit_pack.py [--real] [--rounds 5]
"""

from __future__ import annotations

import argparse
import sys

import numpy as np

from tsdp.mean import algorithms as alg
from tsdp.mean.grouping import bestfit_pack, bestfit_pack_groups
from timing import load_average, paired, verdict  # noqa: E402  (bench/timing.py, beside this script)

TARGET = 3.0


def synthetic(n_groups: int = 10_000, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    runs = rng.integers(500, 1001, n_groups)
    median = np.repeat(rng.uniform(2, 20, n_groups), runs)
    counts = np.maximum(1, np.rint(rng.lognormal(np.log(median), 1.0))).astype(np.int64)
    return counts, np.concatenate(([0], np.cumsum(runs)))


def real() -> tuple[np.ndarray, np.ndarray]:
    from mean_scale import make_records  # bench/mean_scale.py

    from tsdp.io.records import RecordSpec, load_records

    spec = RecordSpec(user_col="bus_id", value_col="speed", lower=0.0, upper=65.0, time_col="timestamp",
                      cell_col="cell_id", slot_length="1h", group_by=("cell", "slot"))
    rec = load_records(make_records(10_000_000, 100, 100), spec)
    return rec.counts, rec.group_starts


def reference(c: np.ndarray, gs: np.ndarray, caps: np.ndarray):
    c_list, cap_list, gsl = c.tolist(), caps.tolist(), gs.tolist()
    assign: list[int] = []
    n_arr = np.empty(gs.size - 1, dtype=np.int64)
    for g in range(gs.size - 1):
        a, k = bestfit_pack(c_list[gsl[g]:gsl[g + 1]], cap_list[g])
        assign.extend(a)
        n_arr[g] = k
    return np.asarray(assign, dtype=np.int64), n_arr


def main(use_real: bool, rounds: int) -> bool:
    inputs = {"synthetic": synthetic()}
    if use_real:
        inputs["real"] = real()
    ok = True
    for name, (counts, gs) in inputs.items():
        gid = np.repeat(np.arange(gs.size - 1), np.diff(gs))
        c = counts[np.lexsort((-counts, gid))]  # plan_runs' order: count descending within groups
        for algorithm, rule in (("levy", "opt"), ("array-averaging", "median")):
            caps = alg.plan_runs(counts, gs, algorithm=algorithm, grouping="bestfit", m_ub=rule).structure.m_ub
            res = paired({"reference": lambda: reference(c, gs, caps),
                          "fast": lambda: bestfit_pack_groups(c, gs, caps)}, rounds)
            (ra, rk), (fa, fk) = res.values["reference"], res.values["fast"]
            same = np.array_equal(ra, fa) and np.array_equal(rk, fk)
            speedup = 1.0 / res.ratio("fast", "reference")
            ok &= same and speedup >= TARGET
            print(f"{name:9s} m_UB {rule:6s} {c.size:>9,} users {gs.size - 1:,} groups  "
                  f"reference {res.median('reference'):6.3f} s  fast {res.median('fast'):6.3f} s  "
                  f"speed-up {speedup:5.1f}x ({res.spread('reference', 'fast')})  "
                  f"identical: {same}  {verdict(same and speedup >= TARGET)}")
    print(load_average())
    return ok


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--real", action="store_true", help="also the mean_scale table (builds 10^7 records)")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    sys.exit(0 if main(args.real, args.rounds) else 1)

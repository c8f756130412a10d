"""Time of one budget-ledger spend against the ledger's size, with a bare SQLite insert as reference.

Ledgers of 10^3, 10^4, 10^5 and 2 * 10^5 entries are built directly in SQLite (building them spend
by spend would take the very time measured here), then one untimed spend lets tsdp bring the file
to its current layout. Then, interleaved round by round: ``ledger.spend`` (its own BEGIN IMMEDIATE
transaction, the whole budget check, the insert, the commit) and the reference, a bare ``INSERT``
of one row into a scratch table of the same database file in its own BEGIN IMMEDIATE transaction
(connect, insert, commit, close: the floor any spend pays). Printed: the median of 5 rounds of each
and the median per-round ratio spend / insert. Target: the ratio does not grow with the size
(a spend independent of the number of entries); exit 1 if it grows more than 3-fold from 10^3 to
2 * 10^5.

Usage: python bench/ledger.py [--rounds 5] [--sizes 1000,10000,100000,200000]
"""

from __future__ import annotations

import argparse
import sqlite3
import sys
import tempfile
from pathlib import Path

from timing import paired  # noqa: E402  (bench/timing.py, beside this script)

from tsdp.accounting import ledger


def build(path: Path, entries: int) -> None:
    """A ledger of dataset 'd' (epsilon 1e9) with ``entries`` spent entries of epsilon 0.001."""
    ledger.init_ledger(path, "d", 1e9, 0.5)
    db = sqlite3.connect(path)
    db.executemany(
        "INSERT INTO entries (dataset, created, epsilon, delta, state, description, output_name, output_sha256, "
        "confirmed) VALUES ('d', '2024-01-01T00:00:00+00:00', 0.001, 0.0, 'spent', 'bench', NULL, ?, "
        "'2024-01-01T00:00:00+00:00')", ((f"{i:064x}",) for i in range(entries)))
    db.execute("CREATE TABLE scratch (x INTEGER)")
    db.commit()
    db.close()
    ledger.spend(path, "d", 0.001, 0.0, "warm-up")  # also brings an older layout up to date


def insert_reference(path: Path):
    def run() -> None:
        db = sqlite3.connect(path, isolation_level=None, timeout=ledger.BUSY_TIMEOUT)
        db.execute("BEGIN IMMEDIATE")
        db.execute("INSERT INTO scratch VALUES (1)")
        db.execute("COMMIT")
        db.close()
    return run


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--sizes", default="1000,10000,100000,200000")
    args = parser.parse_args()
    ratios = {}
    print(f"{'entries':>8} {'spend (ms)':>11} {'insert (ms)':>12} {'ratio':>7}")
    with tempfile.TemporaryDirectory() as work:
        for size in (int(s) for s in args.sizes.split(",")):
            path = Path(work) / f"ledger_{size}.db"
            build(path, size)
            run = paired({"spend": lambda: ledger.spend(path, "d", 0.001, 0.0, "bench"),
                          "insert": insert_reference(path)}, args.rounds)
            ratios[size] = run.ratio("spend", "insert")
            print(f"{size:>8} {run.median('spend') * 1e3:>11.2f} {run.median('insert') * 1e3:>12.2f} "
                  f"{ratios[size]:>7.2f}  ({run.spread('spend', 'insert')})")
    first, last = ratios[min(ratios)], ratios[max(ratios)]
    growth = last / first
    print(f"ratio growth from {min(ratios):,} to {max(ratios):,} entries: {growth:.2f}x (target <= 3)")
    return 0 if growth <= 3 else 1


if __name__ == "__main__":
    sys.exit(main())

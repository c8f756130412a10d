"""Scale of `tsdp flip`: 1,000 entities of length 500 in under 10 seconds (issue 6).

Builds a long panel (entity, day, value, aux) of 1,000 entities x 500 daily steps: each entity is a
bivariate VAR(1) (sensitive value and one auxiliary series) with its own coefficients, plus a linear
trend, as Parquet. Then times, in the same process:

* reference: polars reading the Parquet file and writing it back (the I/O any command pays);
* tsdp: the whole `tsdp flip --entity-col entity --value-cols value --aux-cols aux --trend-order 1`
  command (read, validate, per-series VAR fit by AIC, conditional spectrum, filter draw, taps,
  extension, filtering, every diagnostic, atomic write of the output and the report), in-process.

Prints both times and their ratio; the target is tsdp < 10 s. Exit status 1 if it is missed.
Usage: python bench/flip_scale.py [--entities N] [--length T] [--repeat R]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from datetime import date
from pathlib import Path

import numpy as np
import polars as pl

from tsdp.cli.app import main as tsdp_main
from timing import best_of  # noqa: E402  (bench/timing.py, beside this script)

TARGET_SECONDS = 10.0


def make_panel(n_entities: int, length: int, seed: int = 0) -> pl.DataFrame:
    """Per-entity bivariate VAR(1) with diagonal coefficients in [0.3, 0.9], coupling 0.1, plus a trend."""
    rng = np.random.default_rng(seed)
    burn = 100
    a = rng.uniform(0.3, 0.9, (n_entities, 2))
    c = 0.1
    state = np.zeros((n_entities, 2))
    out = np.empty((length, n_entities, 2))
    for t in range(burn + length):  # vectorised over entities
        shock = rng.normal(size=(n_entities, 2))
        state = np.stack([a[:, 0] * state[:, 0] + c * state[:, 1], a[:, 1] * state[:, 1] + c * state[:, 0]], 1) + shock
        if t >= burn:
            out[t - burn] = state
    level = rng.uniform(50, 500, n_entities)
    slope = rng.uniform(-0.05, 0.05, n_entities)
    steps = np.arange(length)
    value = level[None, :] + slope[None, :] * steps[:, None] + 5 * out[:, :, 0]
    aux = 2 * level[None, :] + 5 * out[:, :, 1]
    days = pl.date_range(date(2020, 1, 1), date(2020, 1, 1) + (length - 1) * (date(2020, 1, 2) - date(2020, 1, 1)),
                         "1d", eager=True)
    return pl.DataFrame({
        "entity": np.repeat([f"e{i:04d}" for i in range(n_entities)], length),
        "day": pl.concat([days] * n_entities),
        "value": value.T.ravel(),
        "aux": aux.T.ravel(),
    })


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--entities", type=int, default=1000)
    parser.add_argument("--length", type=int, default=500)
    parser.add_argument("--repeat", type=int, default=2)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "panel.parquet"
        make_panel(args.entities, args.length).write_parquet(src)
        copy = Path(tmp) / "copy.parquet"
        reference = best_of(args.repeat, lambda: pl.read_parquet(src).write_parquet(copy))
        out = Path(tmp) / "flipped.parquet"
        argv = ["flip", str(src), "--time-col", "day", "--entity-col", "entity", "--value-cols", "value",
                "--aux-cols", "aux", "--trend-order", "1", "-o", str(out), "--force", "--quiet"]

        def run() -> None:
            if tsdp_main(argv) != 0:
                raise SystemExit("tsdp flip failed")

        seconds = best_of(args.repeat, run)
    print(f"panel: {args.entities} entities x {args.length} steps, one value and one aux column")
    print(f"reference (polars read + write): {reference:.3f} s")
    print(f"tsdp flip (whole command):       {seconds:.3f} s   ratio {seconds / reference:.0f}x")
    print(f"target: under {TARGET_SECONDS:g} s -> {'PASS' if seconds < TARGET_SECONDS else 'MISS'}")
    return 0 if seconds < TARGET_SECONDS else 1


if __name__ == "__main__":
    sys.exit(main())

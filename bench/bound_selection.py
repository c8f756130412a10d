"""Caps chosen privately against the README's fixed caps, on the README's events example (issue 33).

The figure is the evaluated total error of the released station-day counts against the RAW events
(`tsdp release --evaluate`: caps' bias plus noise, plus the selection's randomness for `auto`), at the
same total epsilon 1 and delta 1e-6. Interleaved round by round (one seed per round for both), it
prints the mean MAE and RMSE of

* the README's caps: --max-per-step 2 --max-steps 14 (the reference);
* --max-per-step auto --max-steps 14 (0.1 of epsilon chooses M);
* --max-per-step auto --max-steps auto (0.2 of epsilon chooses both);
* --max-norm auto (each user's cell totals scaled to an L2 norm C; 0.15 of epsilon chooses C, no
  series cap: the norm bounds all of a user's series at once);

(with the Gaussian mechanism the selections compose exactly with the release, so the release keeps
more than the rest of epsilon: tsdp.accounting.bounded_range)

and their ratios to the reference. It then prints the floors no choice of caps can beat: for every
(M, I) on a fine grid, and for every norm C on the candidates' grid, the exact expected MAE
E|b_c + N(0, sigma^2)| averaged over the cells, with the bias b_c of the caps computed from the raw
events and sigma the analytic Gaussian's for the whole epsilon (as if the best caps were known for
free), and for --max-norm auto its exact expectation over the selection's distribution. The issue
asked for a 2x cut; the floors say whether a cap could give it. Exit status 1 when the auto caps do
not beat the fixed ones.
Usage: python bench/bound_selection.py [--rounds R] [--runs N]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

import numpy as np
import polars as pl
from scipy.stats import norm

from tsdp.accounting.gaussian import analytic_sigma
from tsdp.cli.app import main as tsdp_main
from tsdp.engine.events import EventCaps, aggregate_events
from tsdp.mechanisms.bounds import NORM_SHARE, Split

ROOT = Path(__file__).resolve().parents[1]
EVENTS = [str(ROOT / "sample_data/events.csv"), "--layout", "events", "--user-col", "user_id", "--time-col",
          "timestamp", "--series-col", "station", "--series-keys", "st1,st2,st3,st4,st5", "--start",
          "2024-03-04", "--end", "2024-03-18", "--freq", "1d", "--epsilon", "1", "--delta", "1e-6",
          "--unit", "user"]
ONE_SERIES = ["--series-per-user", "1"]  # the README's series cap (a norm bounds every series of a user at once)
VARIANTS = {
    "README caps (M 2, I 14)": ["--max-per-step", "2", "--max-steps", "14", *ONE_SERIES],
    "--max-per-step auto, I 14": ["--max-per-step", "auto", "--max-steps", "14", *ONE_SERIES],
    "--max-per-step auto --max-steps auto": ["--max-per-step", "auto", "--max-steps", "auto", *ONE_SERIES],
    "--max-norm auto": ["--max-norm", "auto"],
}
KEYS = ["st1", "st2", "st3", "st4", "st5"]


def evaluated(args: list[str], runs: int, seed: int, workdir: Path) -> dict:
    custodian = workdir / "ev.json"
    code = tsdp_main(["release", *EVENTS, *args, "--evaluate", str(runs), "--seed", str(seed), "--quiet",
                      "--custodian", str(custodian), "--force"])
    if code != 0:
        raise SystemExit(f"tsdp release --evaluate exited {code}")
    return json.loads(custodian.read_text())["figures"]["evaluation"]["error"]["total"]


def panel(df: pl.DataFrame, caps: EventCaps) -> np.ndarray:
    return aggregate_events(df, "user_id", "timestamp", "1d", "2024-03-04", "2024-03-18", caps, "station",
                            KEYS).table.values_matrix()


def expected_mae(b: np.ndarray, s: float) -> float:
    """E|b + N(0, s^2)| averaged over the cells (the folded normal's mean)."""
    return float(np.mean(s * np.sqrt(2 / np.pi) * np.exp(-b ** 2 / (2 * s * s))
                         + np.abs(b) * (1 - 2 * norm.cdf(-np.abs(b) / s))))


def norm_floor(epsilon: float = 1.0, delta: float = 1e-6) -> list[tuple[float, float, float, float]]:
    """(expected MAE, C, mean bias, sigma) of every norm on --max-norm auto's grid up to 256, best first."""
    from tsdp.mechanisms.bounds import norm_grid

    df = pl.read_csv(ROOT / "sample_data/events.csv")
    raw = panel(df, EventCaps(level="event"))
    rows = []
    for c in (c for c in norm_grid() if 4 <= c <= 256):
        b = panel(df, EventCaps(max_norm=c)) - raw
        s = analytic_sigma(epsilon, delta, c)
        rows.append((expected_mae(b, s), c, float(b.mean()), float(s)))
    return sorted(rows)


def floor(epsilon: float = 1.0, delta: float = 1e-6) -> list[tuple[float, int, int, float, float]]:
    """(expected MAE, M, I, mean bias, sigma) of every cap on the grid, best first."""
    df = pl.read_csv(ROOT / "sample_data/events.csv")
    raw = panel(df, EventCaps(level="event"))
    rows = []
    for steps in (4, 7, 10, 12, 14):
        for per_step in (1, 2, 3, 4, 5, 6, 8, 10, 12, 16, 24, 32):
            b = panel(df, EventCaps(max_per_step=per_step, max_steps=steps, series_per_unit=1)) - raw
            s = analytic_sigma(epsilon, delta, per_step * np.sqrt(steps))
            rows.append((expected_mae(b, s), per_step, steps, float(b.mean()), float(s)))
    return sorted(rows)


def norm_expected(split) -> float:
    """The expected MAE of --max-norm auto: the exact expected MAE of each candidate C (its bias from
    the raw events, the release's sigma) weighted by the probability the selection picks C (its exact
    distribution, :meth:`tsdp.mechanisms.bounds.Balance.log_probabilities`, on the events' histogram)."""
    from tsdp.api.series import ReleaseOptions
    from tsdp.engine.events import assemble, partial_cell_sums, profile_histograms
    from tsdp.mechanisms.bounds import norm_grid

    df = pl.read_csv(ROOT / "sample_data/events.csv")
    options = ReleaseOptions(epsilon=1.0, delta=1e-6, unit="user", layout="events", user_col="user_id",
                             time_col="timestamp", series_col="station", series_keys=",".join(KEYS),
                             start="2024-03-04", end="2024-03-18", freq="1d", max_norm="auto")
    plan = options.plan()
    job, grids = plan.profile_job()
    histogram = profile_histograms(assemble(job, [partial_cell_sums(df, job)]).diagnostics, grids)["max_norm"]
    probabilities = np.exp(plan.balance().log_probabilities(histogram, split.selection_epsilon))
    raw = panel(df, EventCaps(level="event"))
    total = 0.0
    for p, c in zip(probabilities, norm_grid()):
        if p > 1e-9:
            bias = panel(df, EventCaps(max_norm=float(c))) - raw
            total += p * expected_mae(bias, analytic_sigma(split.release_epsilon, 1e-6, c))
    return total


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--runs", type=int, default=10, help="--evaluate runs per variant and round")
    args = parser.parse_args()
    results: dict[str, list[dict]] = {name: [] for name in VARIANTS}
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(args.rounds):
            for name, caps in VARIANTS.items():
                results[name].append(evaluated(caps, args.runs, 1000 + r, Path(tmp)))
    reference = None
    print(f"evaluated total error against the raw events, epsilon 1 in all ({args.rounds} rounds x {args.runs} runs)")
    for name, rounds in results.items():
        mae = float(np.mean([x["mae"]["mean"] for x in rounds]))
        rmse = float(np.mean([x["rmse"]["mean"] for x in rounds]))
        reference = reference or (mae, rmse)
        print(f"  {name:40s} MAE {mae:7.1f}  RMSE {rmse:7.1f}   ratio to the README caps: "
              f"MAE {reference[0] / mae:4.2f}x  RMSE {reference[1] / rmse:4.2f}x")
    best = floor()
    mae, m, i, bias, s = best[0]
    print(f"floor (best caps known for free, whole epsilon 1): M {m}, I {i}: expected MAE {mae:.1f} "
          f"(bias {bias:.1f}, sigma {s:.1f}), {reference[0] / mae:.2f}x the README caps")
    print("  next best: " + "; ".join(f"M {b[1]}, I {b[2]}: {b[0]:.1f}" for b in best[1:5]))
    best_norm = norm_floor()
    mae, c, bias, s = best_norm[0]
    print(f"floor of the norm (best C known for free, whole epsilon 1): C {c:.1f}: expected MAE {mae:.1f} "
          f"(bias {bias:.1f}, sigma {s:.1f}), {reference[0] / mae:.2f}x the README caps")
    split = Split.for_release(1.0, 1e-6, NORM_SHARE, 1, True, True, None, len(KEYS) * 14)  # as the release runs
    at_release = min(r[0] for r in norm_floor(split.release_epsilon))
    print(f"  at the release's epsilon {split.release_epsilon:.4f} (the best C known, a selection of "
          f"{split.selection_epsilon:g} composed exactly): expected MAE {at_release:.1f}, "
          f"{reference[0] / at_release:.2f}x the README caps")
    expected = norm_expected(split)
    print(f"--max-norm auto in expectation over its selection's exact distribution: MAE {expected:.1f}, "
          f"{reference[0] / expected:.2f}x the README caps (measured above: "
          f"{reference[0] / float(np.mean([x['mae']['mean'] for x in results['--max-norm auto']])):.2f}x)")
    auto = float(np.mean([x["mae"]["mean"] for x in results["--max-per-step auto, I 14"]]))
    return 0 if auto < reference[0] else 1


if __name__ == "__main__":
    sys.exit(main())

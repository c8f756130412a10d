"""Reproduce the Synth experiment of Koga, Meehan and Chaudhuri 2022 (Figure 2), spec koga.md 3.2-3.5.

Signal (authors' ``get_signal``): for each relative sampling frequency f in {1, 1/2, ..., 1/64},
``t = 0, 1/f, 2/f, ... < 10000`` (T = ceil(10000 f)), ``y = 200 sin(0.01 t) + 500 + 0.1 t``; the
panel "with observation noise" releases ``x = y + 100 N(0, 1)`` (drawn once per f), the other
releases y itself. The MAE is always measured against the noiseless y. Parameters:
(epsilon, delta) = (0.5, 1e-4), I = 100 for every f, p = 0.1 (1 + log2(1/f)/4), Gaussian filter
sigma_g = 10 / (1 + log2(1/f)/4), DFT with k = 30 retained coefficients.

Mechanisms, under both accountings:

* ``paper``: Gaussian with the classical sigma, subsample by Corollary 3, filter-subsample by
  Corollary 2 (delta split 50/50): the calibrations of the paper and its code;
* ``exact``: Gaussian with the analytic sigma, subsample with the exact profile of the released
  pair (J, noisy samples), filter-subsample with the conditional sigma_max(A_J) accounting;
* DFT (tsdp's real-valued FPA_k, analytic Gaussian; the same in both tables). Note that tsdp keeps
  the first k rfft coefficients (DC + k-1 frequencies), the authors' code 16 + 14 of the full
  spectrum; the DFT column is skipped with a note if ``tsdp.mechanisms.dft`` is missing.

The paper ran 1000 trials per configuration (``trial = 1000`` in the authors' notebook); the
default here is 40, which runs in well under a minute. Trials are the rows of one panel in which a
unit touches one series (parallel composition), so each row is an independent release. Printed:
mean +- std (ddof 0, as the paper) of the per-trial MAE; the ratio of each mechanism's MAE to the
Gaussian baseline measured in the same run; the spec's [R] re-run of the official code for the
paper accounting (1000 trials) with the ratio measured / reference; and the four trends the paper
states. Exit status 1 if a stated trend fails in the paper accounting.

Usage: python bench/reproduce_koga.py [--trials N] [--seed S] [--f 1,1/2,...]
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from fractions import Fraction

import numpy as np
from scipy import stats

from tsdp.mechanisms import subsample as sm
from tsdp.mechanisms.baseline import Panel
from tsdp.mechanisms.gaussian import release_gaussian

try:
    from tsdp.mechanisms.dft import release_dft
except ImportError:  # pragma: no cover - depends on what is installed
    release_dft = None

EPS, DELTA, I, DFT_K = 0.5, 1e-4, 100, 30
FS = [Fraction(1, d) for d in (1, 2, 4, 8, 16, 32, 64)]
MECHANISMS = ("gaussian", "dft", "subsample", "filter")
LABELS = {"gaussian": "Gauss", "dft": "DFT", "subsample": "w/o F", "filter": "w/ F"}
BATCH_CELLS = 2_000_000  # cells of the trial panel released at once

# spec koga.md section 3.5, [R]: official logic, 1000 trials (Gauss, DFT, w/o F, w/ F)
REFERENCE = {
    (obs, Fraction(1, d)): values
    for d, no_obs, with_obs in [
        (1, (69.33, 122.22, 28.15, 42.52), (105.66, 122.30, 70.93, 44.06)),
        (2, (69.28, 122.95, 30.68, 47.17), (105.42, 123.06, 72.06, 49.34)),
        (4, (69.29, 124.34, 33.05, 52.20), (107.04, 124.46, 74.87, 54.34)),
        (8, (69.31, 126.99, 37.36, 60.05), (104.53, 127.30, 74.96, 61.59)),
        (16, (69.39, 131.92, 49.94, 78.52), (104.16, 133.03, 83.31, 80.32)),
        (32, (69.27, 141.55, 75.68, 114.37), (100.74, 143.06, 100.09, 115.75)),
        (64, (69.09, 159.00, 109.56, 138.43), (104.16, 161.63, 129.72, 140.01)),
    ]
    for obs, values in ((False, no_obs), (True, with_obs))
}


def signal(f: Fraction, observation_noise: bool, rng: np.random.Generator):
    t = np.arange(0, 10_000, 1 / float(f))
    y = 200 * np.sin(0.01 * t) + 500 + 0.1 * t
    x = y + 100 * rng.standard_normal(t.size) if observation_noise else y
    return y, x


def release(mechanism: str, accounting: str, x: np.ndarray, f: Fraction, rng: np.random.Generator):
    n, T = x.shape
    panel = Panel(n, T, sm.participation_bounds(T, I, series_per_unit=1))
    scale = 1 + math.log2(1 / float(f)) / 4
    p, sigma_g = 0.1 * scale, 10 / scale
    if mechanism == "gaussian":
        return release_gaussian(x, panel, EPS, DELTA, rng,
                                calibration="classic" if accounting == "paper" else "analytic").values
    if mechanism == "dft":
        return release_dft(x, panel, EPS, DELTA, rng, k=DFT_K, noise="gaussian").values
    if mechanism == "subsample":
        return sm.release_subsample(x, panel, EPS, DELTA, rng, p, accounting=accounting).values
    return sm.release_filter_subsample(x, panel, EPS, DELTA, rng, p, filter_sigma=sigma_g,
                                       accounting="paper" if accounting == "paper" else "conditional").values


def mae_runs(mechanism, accounting, f, observation_noise, trials, rng):
    y, x = signal(f, observation_noise, np.random.default_rng(12345))  # drawn once per f
    batch = max(1, BATCH_CELLS // y.size)
    maes = []
    for start in range(0, trials, batch):
        rows = min(batch, trials - start)
        out = release(mechanism, accounting, np.tile(x, (rows, 1)), f, rng)
        maes.append(np.abs(out - y).mean(axis=1))
    return np.concatenate(maes)


def fmt(m):
    return f"{m.mean():7.2f}±{m.std():5.2f}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=40, help="trials per configuration (paper: 1000)")
    parser.add_argument("--seed", type=int, default=12345, help="seed of the mechanisms' generator")
    parser.add_argument("--f", default=",".join(str(f) for f in FS), help="comma-separated f values, e.g. 1,1/4")
    args = parser.parse_args()
    fs = [Fraction(v) for v in args.f.split(",")]
    mechanisms = [m for m in MECHANISMS if m != "dft" or release_dft is not None]
    if release_dft is None:
        print("note: tsdp.mechanisms.dft is not available; the DFT column is skipped\n")
    start = time.perf_counter()
    results = {}
    for accounting in ("paper", "exact"):
        rng = np.random.default_rng(args.seed)
        print(f"== accounting: {accounting}  ({args.trials} trials; MAE mean±std; paper: 1000 trials)")
        header = f"{'f':>5} {'T':>6} | " + " | ".join(
            f"{LABELS[m] + (' (obs)' if obs else ''):>13}" for obs in (False, True) for m in mechanisms)
        print(header)
        for f in fs:
            T = math.ceil(10_000 * f)
            cells = []
            for obs in (False, True):
                for m in mechanisms:
                    maes = mae_runs(m, accounting, f, obs, args.trials, rng)
                    results[(accounting, obs, f, m)] = maes
                    cells.append(fmt(maes))
            print(f"{str(f):>5} {T:>6} | " + " | ".join(cells))
        print()
        print(f"   ratio to the Gaussian baseline measured in the same run ({accounting})")
        for f in fs:
            ratios = [results[(accounting, obs, f, m)].mean() / results[(accounting, obs, f, "gaussian")].mean()
                      for obs in (False, True) for m in mechanisms]
            print(f"{str(f):>5}        | " + " | ".join(f"{r:13.3f}" for r in ratios))
        print()
    print("== paper accounting against the spec's re-run of the official code (1000 trials): measured / reference")
    for f in fs:
        parts = []
        for obs in (False, True):
            ref = REFERENCE.get((obs, f))
            for i, m in enumerate(MECHANISMS):
                if m in mechanisms and ref is not None and m != "dft":  # tsdp's DFT is not the code's
                    ratio = results[("paper", obs, f, m)].mean() / ref[i]
                    parts.append(f"{LABELS[m] + (' (obs)' if obs else '')}: {ratio:.3f}")
        print(f"{str(f):>5}  " + ", ".join(parts))
    print()

    def mean_se(acc, obs, f, m):
        r = results[(acc, obs, f, m)]
        return r.mean(), r.std(ddof=1) / math.sqrt(r.size)

    def below(a, b, z=3.0):
        return b[0] - a[0] > z * math.hypot(a[1], b[1])

    ok = True
    # Several comparisons per check: "no significant change" uses a Bonferroni-corrected z at a
    # family-wise 1e-3 level; "clearly below" uses 3 standard errors of the difference.
    z_family = float(stats.norm.isf(1e-3 / (2 * max(len(fs) - 1, 1))))
    print("== trends stated by the paper (Figure 2); 'clearly' = 3 standard errors, 'no reversal' and "
          f"'flat' = within {z_family:.2f} standard errors (Bonferroni over {len(fs) - 1} comparisons)")
    ordered = sorted(fs, reverse=True)
    top, bottom = ordered[0], ordered[-1]
    for acc in ("paper", "exact"):
        for obs in (False, True):
            tag = f"{acc:5} {'obs' if obs else 'no obs':6}"
            sub = {f: mean_se(acc, obs, f, "subsample") for f in fs}
            gau = {f: mean_se(acc, obs, f, "gaussian") for f in fs}
            no_reversal = all(sub[a][0] < sub[b][0] + z_family * math.hypot(sub[a][1], sub[b][1])
                              for a, b in zip(ordered, ordered[1:]))
            improves = no_reversal and (len(fs) < 2 or below(sub[top], sub[bottom]))
            flat = all(abs(gau[a][0] - gau[top][0]) <= z_family * math.hypot(gau[a][1], gau[top][1]) for a in fs)
            beats = below(sub[top], gau[top])
            fil = mean_se(acc, obs, top, "filter")
            filt = below(fil, sub[top]) if obs else below(sub[top], fil)
            checks = {
                f"1. ours (w/o F) improves as f grows (clearly from f={bottom} to f={top}, no reversal)": improves,
                "2. Gaussian flat in f": flat,
                f"3. ours (w/o F) clearly beats Gaussian at f={top}": beats,
                f"4. at f={top} the filter clearly {'helps' if obs else 'does not help'}": filt,
            }
            if bottom <= Fraction(1, 32):  # the paper: slow sampling of a fast signal, interpolation dominates
                name = f"5. at f={bottom} ours (w/o F) is clearly worse than Gaussian"
                checks[name] = below(gau[bottom], sub[bottom])
            for name, passed in checks.items():
                print(f"{tag} {'PASS' if passed else 'FAIL'}  {name}")
                if acc == "paper" and not passed:
                    ok = False
    print(f"\ntotal time {time.perf_counter() - start:.1f} s")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

"""Reproduce Example 1 of McElroy, Roy & Hore (2022) (specs/flip.md section 3.1).

Bivariate VAR(1), sigma^2 = 0.5, rho in {0.1, 0.7} (low and high attacker knowledge), T = 200,
500 replicates, FLIP with K = 25, M = 45, lip_delta = 0, VAR order by AIC, the default direct
coefficients and tsdp's default R sampler (2-component symmetrised Beta mixture, a, b ~ U[1, 4]).
For each rho it prints the mean (and 10%/90% quantiles) of:

* LIP of the applied filter under the estimated model (the paper's "sample version": > 0.99),
  and under the TRUE conditional spectrum (not in the paper; the spec's prototype gives 0.979/0.989);
* D_path (paper: > 1 in at least 50% of runs, > 0.64 in more than 60%, for both rho; the spec could
  only reproduce this at rho = 0.1, section 3.1) and D_ACF (paper: "close", histograms only).
  D_path is shown twice: normalised by the true Var X_t = v, as Example 1 defines it, and by the
  sample variance of the series, as tsdp's report does for real data (pitfall P16). For a persistent
  series of length 200 the sample variance is biased low, which raises the second figure;
* the attack diagnostics of spec section 7: LIP after guess-inversion with R(x) = x, and the
  minimum over lags |l| <= M of the lagged LIP.

Usage: python bench/reproduce_flip.py [--reps 500] [--seed 0] [--rho 0.1 0.7]
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np

from tsdp.flip import FlipSettings, flip_series, series_generator
from tsdp.flip.examples import example1_model, simulate_example1, stationary_covariance
from tsdp.flip.lip import taps_lip
from tsdp.flip.spectral import acvf, frequency_grid

SETTINGS = FlipSettings(lip_delta=0.0, K=25, M=45)
T = 200


def run_example1(rho: float, reps: int, seed: int = 0) -> dict[str, np.ndarray]:
    """Per-replicate figures of Example 1 at ``rho``."""
    rng = np.random.default_rng([seed, int(rho * 1000)])
    paths = simulate_example1(rho, T, rng, reps)
    true_fx, true_cond = example1_model(rho).marginal_and_conditional(frequency_grid(8192))
    true_gamma = acvf(true_cond)
    keys = ("lip_est", "lip_dates_min", "lip_true", "D_path", "D_path_sample", "D_ACF", "guess", "lagged", "var_ratio")
    rows = {k: np.empty(reps) for k in keys}
    variance = stationary_covariance(rho)[0, 0]
    for i in range(reps):
        result = flip_series(paths[i, :, 0], paths[i, :, 1:], SETTINGS, series_generator(seed, i, rho))
        d = result.diagnostics
        rows["lip_est"][i] = d["lip_applied_interior"]  # the paper's figure: Def. 4 for the taps
        rows["lip_dates_min"][i] = d["lip_lowest"]  # the lowest same-date LIP over every date (the ends)
        rows["lip_true"][i] = taps_lip(np.asarray(result.secrets["taps"]), true_gamma)
        rows["D_path_sample"][i] = d["utility"]["D_path"]
        rows["D_path"][i] = d["utility"]["D_path"] * np.var(paths[i, :, 0]) / variance
        rows["D_ACF"][i] = d["utility"]["D_ACF"]
        rows["var_ratio"][i] = d["utility"]["var_ratio"]
        rows["guess"][i] = d["lip_guess_inversion"]
        rows["lagged"][i] = d["lip_lagged_min"]
    return rows


def _describe(values: np.ndarray) -> str:
    q10, q90 = np.quantile(values, [0.1, 0.9])
    return f"{values.mean():.4g} ({q10:.4g}, {q90:.4g})"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=500)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--rho", type=float, nargs="+", default=[0.1, 0.7])
    args = parser.parse_args()
    ok = True
    for rho in args.rho:
        start = time.perf_counter()
        rows = run_example1(rho, args.reps, args.seed)
        elapsed = time.perf_counter() - start
        print(f"rho = {rho}: {args.reps} replicates, T = {T}, K = 25, M = 45 ({elapsed:.1f} s)")
        print(f"  LIP applied, estimated model  mean (q10, q90): {_describe(rows['lip_est'])}   paper: > 0.99")
        print(f"  LIP applied, true model       mean (q10, q90): {_describe(rows['lip_true'])}")
        print(f"  LIP at the worst date (ends)  mean (q10, q90): {_describe(rows['lip_dates_min'])}   "
              "(not in the paper: the taps run over forecasts there)")
        for key, name in (("D_path", "D_path, true Var X_t"), ("D_path_sample", "D_path, sample variance")):
            print(f"  {name:<30}mean (q10, q90): {_describe(rows[key])}")
            print(f"    P(D_path > 1) = {np.mean(rows[key] > 1):.3f} (paper >= 0.5);  "
                  f"P(D_path > 0.64) = {np.mean(rows[key] > 0.64):.3f} (paper > 0.6)")
        print(f"  D_ACF (H = 24)                mean (q10, q90): {_describe(rows['D_ACF'])}")
        print(f"  var(Xhat)/var(X)              mean (q10, q90): {_describe(rows['var_ratio'])}")
        print(f"  attack: LIP after guessing R(x)=x, median: {np.median(rows['guess']):.3f}; "
              f"min lagged LIP, median: {np.median(rows['lagged']):.3f}")
        lip_ok = rows["lip_est"].mean() > 0.99
        ok &= lip_ok
        print(f"  mean LIP > 0.99: {'PASS' if lip_ok else 'FAIL'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

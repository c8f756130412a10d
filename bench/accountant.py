"""Speed and accuracy of the accountant, against dp-accounting and prv_accountant in the same run.

Every comparison runs interleaved (tsdp, reference, tsdp, reference, ...) in this process, with the
libraries already imported (their import, paid once per process, is printed separately); the bench
prints median times, the median of the per-round time ratios and their spread.

1. Standard DP-SGD, the case every Opacus / TF-Privacy user knows: Poisson q = 0.01, sigma = 1,
   10,000 steps, delta = 1e-5, add/remove of one record (`tsdp account dpsgd --unit record`).
   tsdp (closed-form profiles on the grid, FFT composition) against dp-accounting's PLD accountant
   (PoissonSampledDpEvent(q, GaussianDpEvent(sigma)) composed 10,000 times) at grids 1e-3 and 1e-4,
   and prv_accountant (eps_error 0.01). Targets: same epsilon as dp-accounting to 1e-6 and no
   slower than it (median ratio <= 1) at both grids; epsilon inside prv_accountant's bounds.
2. Traffic-like structured-subsampling setting of Schuchardt et al. (N=862, L=14000, L_C=192,
   L_F=24, B=128, sigma=2, WOR top, WR bottom, lambda=1, event level, delta=1e-7, 1000 steps; the
   authors' code takes about 4 s to build that PLD and reports epsilon 0.6186). Targets: <= 0.4 s,
   epsilon within 0.5% of 0.6186. Reference: dp-accounting's ``from_mixture_gaussian_mechanism``
   (per-point construction of the same mixture, add/remove directions) plus the same composition.

Exit status 1 if a target is missed.
Usage: python bench/accountant.py [--rounds 7]
"""

from __future__ import annotations

import argparse
import sys
import time

from timing import paired, verdict  # noqa: E402  (bench/timing.py, beside this script)

Q, SIGMA, STEPS, DELTA = 0.01, 1.0, 10_000, 1e-5


def standard(rounds: int) -> bool:
    from dp_accounting import dp_event
    from dp_accounting.pld.pld_privacy_accountant import PLDAccountant
    from prv_accountant import PoissonSubsampledGaussianMechanism, PRVAccountant

    from tsdp.accounting import sgd

    def prv():
        mechanism = PoissonSubsampledGaussianMechanism(noise_multiplier=SIGMA, sampling_probability=Q)
        accountant = PRVAccountant(prvs=mechanism, max_self_compositions=STEPS, eps_error=0.01, delta_error=1e-8)
        return accountant.compute_epsilon(delta=DELTA, num_self_compositions=[STEPS])

    print(f"1. standard DP-SGD: Poisson q {Q}, sigma {SIGMA:g}, {STEPS:,} steps, delta {DELTA:g}, add/remove")
    ok = True
    bounds = None
    for grid in (1e-3, 1e-4):
        def ours():
            return sgd.epsilon(sgd.SgdSetting(Q, SIGMA), STEPS, DELTA, grid)

        def dp_accounting():
            accountant = PLDAccountant(value_discretization_interval=grid)
            accountant.compose(dp_event.PoissonSampledDpEvent(Q, dp_event.GaussianDpEvent(SIGMA)), STEPS)
            return accountant.get_epsilon(DELTA)

        runs = {"tsdp": ours, "dp-accounting": dp_accounting}
        if bounds is None:
            runs["prv_accountant"] = prv
        result = paired(runs, rounds)
        eps, ref = result.values["tsdp"], result.values["dp-accounting"]
        same = abs(eps - ref) <= 1e-6
        faster = result.ratio("tsdp", "dp-accounting") <= 1.0
        print(f"   grid {grid:g}:")
        print(f"     tsdp           epsilon {eps:.7f}   median {result.median('tsdp'):.4f} s")
        print(f"     dp-accounting  epsilon {ref:.7f}   median {result.median('dp-accounting'):.4f} s   "
              f"(|difference| {abs(eps - ref):.1e}, target <= 1e-6: {verdict(same)})")
        print(f"     time ratio tsdp / dp-accounting: {result.ratio('tsdp', 'dp-accounting'):.2f} "
              f"({result.spread('tsdp', 'dp-accounting')}); target <= 1: {verdict(faster)}")
        if "prv_accountant" in runs:
            bounds = result.values["prv_accountant"]
            print(f"     prv_accountant (eps_error 0.01): epsilon {bounds[1]:.4f} in [{bounds[0]:.4f}, {bounds[2]:.4f}]"
                  f"   median {result.median('prv_accountant'):.4f} s   "
                  f"(tsdp / prv_accountant time {result.ratio('tsdp', 'prv_accountant'):.3f}, "
                  f"{result.spread('tsdp', 'prv_accountant')})")
        inside = bounds[0] <= eps <= bounds[2]
        print(f"     tsdp inside prv_accountant's bounds: {verdict(inside)}")
        ok &= same and faster and inside
    return ok


def structured(rounds: int) -> bool:
    from dp_accounting.pld import privacy_loss_distribution as dpa

    from tsdp.accounting.structured import DpSgdSetting, account_dpsgd

    setting = DpSgdSetting(n_series=862, length=14000, context=192, horizon=24, batch_size=128,
                           noise_multiplier=2.0)
    q = setting.geometry()["q"]

    def reference():
        pld = dpa.from_mixture_gaussian_mechanism(2.0, [0.0, 2.0], [1 - q, q], value_discretization_interval=1e-3)
        return pld.self_compose(1000).get_epsilon_for_delta(1e-7)

    result = paired({"tsdp": lambda: account_dpsgd(setting, 1e-7, steps=1000).epsilon,
                     "dp-accounting": reference}, max(3, rounds // 2))
    eps, err = result.values["tsdp"], abs(result.values["tsdp"] / 0.6186 - 1)
    ok = err <= 0.005 and result.median("tsdp") <= 0.4
    print("2. traffic setting, Schuchardt et al. Thm 4.4, 1000 steps, delta 1e-7")
    print(f"   tsdp:          epsilon {eps:.5f}   median {result.median('tsdp'):.3f} s   "
          f"(target 0.6186 +-0.5%: error {err:.3%}; <= 0.4 s: {verdict(ok)})")
    print(f"   dp-accounting: epsilon {result.values['dp-accounting']:.5f}   median "
          f"{result.median('dp-accounting'):.3f} s   (add/remove composition, not the paper's switching)")
    print(f"   time ratio tsdp / dp-accounting: {result.ratio('tsdp', 'dp-accounting'):.2f} "
          f"({result.spread('tsdp', 'dp-accounting')})")
    return ok


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    start = time.perf_counter()
    import dp_accounting.pld.privacy_loss_distribution  # noqa: F401
    import prv_accountant  # noqa: F401

    import tsdp.accounting.sgd  # noqa: F401
    import tsdp.accounting.structured  # noqa: F401
    print(f"import of dp-accounting, prv_accountant and tsdp.accounting: {time.perf_counter() - start:.3f} s "
          "(once per process)\n")
    ok = standard(args.rounds)
    print()
    ok &= structured(args.rounds)
    print("\nall targets met" if ok else "\nTARGET MISSED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

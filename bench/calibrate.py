"""Speed of ``tsdp account calibrate dpsgd`` against one accounting evaluation at its answer.

``tsdp account calibrate`` has one target kind, ``dpsgd``: the series units (w-event, w-user,
event; structured subsampling) and ``--unit record`` with Poisson sampling under add/remove or
fixed-size batches under substitution. Release mechanisms and mean-estimate calibrate their noise
in closed form inside their own commands (no ``account calibrate`` target), so they are not here.

Each case runs in this process (the libraries imported once, before timing), through
``tsdp.account`` (what the command line calls), for ``--rounds`` rounds; a round times the
calibration and then, interleaved, ONE ``tsdp.account.dpsgd`` evaluation at the calibrated noise
multiplier (the reference: what ``tsdp account dpsgd`` costs at that sigma). The bench prints the
median of each and the median of the per-round ratios calibration / evaluation, i.e. how many
evaluations a calibration costs; the target is a ratio <= 30. It also checks that the evaluation
at the calibrated sigma gives the epsilon the calibration printed, within the target.

Usage: python bench/calibrate.py [--rounds 3] [--only SUBSTRING]   (exit 1 if a target is missed)
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

from timing import load_average, verdict  # noqa: E402  (bench/timing.py, beside this script)

TARGET_RATIO = 30.0
SERIES = {"series": 320, "length": 20, "context_length": 1, "forecast_length": 1, "batch_size": 32}

# (name, options of tsdp.account, target epsilon, delta)
CASES = [
    ("record poisson  ordinary eps 1, 1000 steps", {"unit": "record", "sampling_rate": 0.01, "steps": 1000}, 1.0, 1e-5),
    ("record poisson  eps 1000, 1 step", {"unit": "record", "sampling_rate": 0.01, "steps": 1}, 1000.0, 1e-5),
    ("record poisson  eps 1e-3, 1000 steps", {"unit": "record", "sampling_rate": 0.01, "steps": 1000}, 1e-3, 1e-5),
    ("record poisson  delta 1e-10, 1e5 steps", {"unit": "record", "sampling_rate": 1e-4, "steps": 100_000}, 1.0, 1e-10),
    ("record fixed    ordinary eps 1, 1000 steps",
     {"unit": "record", "sampling_rate": 0.01, "steps": 1000, "sampling": "fixed", "relation": "substitution"}, 1.0, 1e-5),
    ("record fixed    eps 1000, 1 step",
     {"unit": "record", "sampling_rate": 0.01, "steps": 1, "sampling": "fixed", "relation": "substitution"}, 1000.0, 1e-5),
    ("record fixed    eps 1000, 100 steps",
     {"unit": "record", "sampling_rate": 0.01, "steps": 100, "sampling": "fixed", "relation": "substitution"},
     1000.0, 1e-5),
    ("record fixed    eps 1e-3, 1000 steps",
     {"unit": "record", "sampling_rate": 0.01, "steps": 1000, "sampling": "fixed", "relation": "substitution"},
     1e-3, 1e-5),
    ("record fixed    delta 1e-10, 1e5 steps",
     {"unit": "record", "sampling_rate": 1e-4, "steps": 100_000, "sampling": "fixed", "relation": "substitution"},
     1.0, 1e-10),
    ("w-event         ordinary eps 1, 100 steps", {**SERIES, "steps": 100}, 1.0, 1e-5),
    ("w-event         eps 1000, 1 step", {**SERIES, "steps": 1}, 1000.0, 1e-5),
    ("w-event         eps 1e-3, 100 steps", {**SERIES, "steps": 100}, 1e-3, 1e-5),
    ("w-event         delta 1e-10, 1e4 steps", {**SERIES, "steps": 10_000}, 1.0, 1e-10),
    ("w-user w=2      ordinary eps 1, 100 steps", {**SERIES, "unit": "w-user", "w": 2, "steps": 100}, 1.0, 1e-5),
]


def run_case(options: dict, target: float, delta: float, rounds: int) -> tuple[list[float], list[float], dict, dict]:
    import tsdp

    calibrations, evaluations = [], []
    calibrated = evaluated = None
    for _ in range(rounds):
        start = time.perf_counter()
        calibrated = tsdp.account.calibrate_dpsgd(epsilon=target, delta=delta, **options)
        calibrations.append(time.perf_counter() - start)
        start = time.perf_counter()
        evaluated = tsdp.account.dpsgd(noise_multiplier=calibrated["noise_multiplier"], delta=delta, **options)
        evaluations.append(time.perf_counter() - start)
    return calibrations, evaluations, calibrated, evaluated


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--only", default="", help="run the cases whose name contains this text")
    args = parser.parse_args(argv)

    start = time.perf_counter()
    import dp_accounting.pld.privacy_loss_distribution  # noqa: F401  (paid once, not timed below)
    import scipy.special  # noqa: F401

    import tsdp

    print(f"imports: {time.perf_counter() - start:.2f} s; in-process, median of {args.rounds} rounds; "
          f"{load_average()}")
    print(f"tsdp from {tsdp.__file__}")
    print(f"{'case':44} {'sigma':>12} {'epsilon':>10} {'calibrate s':>12} {'1 eval s':>9} {'ratio':>7}  verdict")
    ok = True
    for name, options, target, delta in CASES:
        if args.only not in name:
            continue
        calibrations, evaluations, calibrated, evaluated = run_case(options, target, delta, args.rounds)
        ratio = statistics.median(c / e for c, e in zip(calibrations, evaluations))
        agrees = evaluated["epsilon"] == calibrated["epsilon"] <= target
        passed = agrees and ratio <= TARGET_RATIO
        ok &= passed
        note = "" if agrees else f" (evaluation gives epsilon {evaluated['epsilon']!r})"
        print(f"{name:44} {calibrated['noise_multiplier']:12.6g} {calibrated['epsilon']:10.4g} "
              f"{statistics.median(calibrations):12.3f} {statistics.median(evaluations):9.3f} {ratio:7.1f}  "
              f"{verdict(passed)}{note}", flush=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

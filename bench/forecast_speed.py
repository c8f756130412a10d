"""Speed of DP-SGD steps in `tsdp forecast-train` (issue 7 target: >= 60 steps/s on 2 cores).

SimpleFeedForward (2 x 64 ReLU, Student-t head), L_C = 96, L_F = 24, batch 256, on a traffic-like
panel of 300 hourly series. Every figure is measured in this run, interleaved round by round:

* tsdp DP-SGD: `tsdp.forecast.trainer.train` for the requested steps: WOR/WR batch sampling, gathering
  the windows, per-window gradients clipped to C and summed (ghost clipping), Gaussian noise, Adam,
  the accountant's epsilon and validation as in a real run;
* reference: the same loop without privacy (mean gradient of the batch, no clipping or noise) - the
  cost of ordinary minibatch training of the same model in numpy;
* Opacus (hooks: per-sample gradients; ghost: ghost clipping) on one CPU thread running the same
  model and loss (bench/opacus_worker.py), in the bench-only environment made by `make bench-env`
  (torch CPU + opacus; its location from $TSDP_BENCH_ENV, default .bench-venv in the checkout).
  Without that environment Opacus is reported as not measured, with the reason, and no number.

Prints median steps/s of each, the median per-round ratios with their spread, and PASS/FAIL.
Exit 1 if tsdp is below 60 steps/s.
Both run on one thread (tsdp's BLAS and torch), unless OPENBLAS_NUM_THREADS says otherwise.
Usage: python bench/forecast_speed.py [--steps 2000] [--rounds 3]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import warnings
from pathlib import Path

# One BLAS thread, as Opacus gets one torch thread: the comparison is per core, and on a shared
# machine a multi-threaded BLAS spinning against other work can run several times slower.
# Set OPENBLAS_NUM_THREADS (etc.) to measure another configuration.
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import numpy as np  # noqa: E402

from timing import paired, verdict  # noqa: E402  (bench/timing.py, beside this script)
from tsdp.forecast import trainer  # noqa: E402
from tsdp.forecast.models import make_model  # noqa: E402
from tsdp.forecast.synthetic import traffic_panel  # noqa: E402

TARGET = 60.0
HERE = Path(__file__).resolve().parent


class Opacus:
    """A persistent Opacus worker in the bench environment; ``run(mode, steps)`` -> wall seconds."""

    def __init__(self, python: Path) -> None:
        self.proc = subprocess.Popen([str(python), "-W", "ignore", str(HERE / "opacus_worker.py")],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     text=True)
        line = self.proc.stdout.readline().strip()
        if line != "ready":
            raise RuntimeError(self.proc.stderr.read()[-400:] or "the worker did not start")

    def run(self, mode: str, steps: int) -> float:
        self.proc.stdin.write(f"{mode} {steps}\n")
        self.proc.stdin.flush()
        return float(self.proc.stdout.readline())

    def close(self) -> None:
        self.proc.stdin.write("quit\n")
        self.proc.stdin.flush()
        self.proc.wait(timeout=30)


def opacus_worker() -> tuple[Opacus | None, str]:
    """(the worker, '') or (None, why Opacus is not measured)."""
    env = Path(os.environ.get("TSDP_BENCH_ENV", HERE.parent / ".bench-venv"))
    python = env / "bin" / "python"
    if not python.exists():
        return None, f"no bench environment at {env} (run `make bench-env`, or set TSDP_BENCH_ENV)"
    try:
        return Opacus(python), ""
    except (OSError, RuntimeError) as exc:
        return None, f"the worker failed in {env}: {str(exc).strip().splitlines()[-1] if str(exc).strip() else exc}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    split = trainer.split_panel(traffic_panel(300, 24 * 7 * 12, seed=0), 96, 24, 5)
    net = make_model("simple-ff", 96, 24)
    base = dict(context=96, horizon=24, model="simple-ff", batch_size=256, clip_norm=1e-4, steps=args.steps)
    private = trainer.TrainConfig(**base, noise_multiplier=1.0, delta=1e-7)
    plain = trainer.TrainConfig(**base, private=False)
    runs = {"tsdp DP-SGD": lambda: trainer.train(net, split, private, np.random.default_rng(0)),
            "numpy, no privacy": lambda: trainer.train(net, split, plain, np.random.default_rng(0))}
    worker, why = opacus_worker()
    opacus_times: dict[str, list[float]] = {}
    if worker is not None:
        for mode in ("hooks", "ghost"):
            name = f"Opacus {mode}"
            opacus_times[name] = []
            runs[name] = (lambda m=mode, n=name: opacus_times[n].append(worker.run(m, args.steps)))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = paired(runs, args.rounds)
    if worker is not None:
        worker.close()
        for name, times in opacus_times.items():  # the steps alone, without the pipe round trip
            result.times[name] = times[-args.rounds:]
    rate = {name: args.steps / result.median(name) for name in result.names}
    print(f"SimpleFeedForward, L_C = 96, L_F = 24, batch 256, {args.steps} steps a run, "
          f"{args.rounds} interleaved rounds (medians); BLAS threads {os.environ['OPENBLAS_NUM_THREADS']}, "
          "torch threads 1")
    print(f"reference numpy, no privacy (minibatch Adam): {rate['numpy, no privacy']:8.0f} steps/s")
    print(f"tsdp DP-SGD (clip + noise + accountant):      {rate['tsdp DP-SGD']:8.0f} steps/s   time "
          f"{result.ratio('tsdp DP-SGD', 'numpy, no privacy'):.2f}x the reference "
          f"({result.spread('tsdp DP-SGD', 'numpy, no privacy')})")
    if worker is None:
        print(f"Opacus: not measured ({why})")
    for name in opacus_times:
        print(f"{name + ' (torch CPU, 1 thread):':<46}{rate[name]:8.0f} steps/s   tsdp is "
              f"{result.ratio(name, 'tsdp DP-SGD'):.2f}x as fast ({result.spread(name, 'tsdp DP-SGD')})")
    passed = rate["tsdp DP-SGD"] >= TARGET
    print(f"target: tsdp >= {TARGET:g} steps/s -> {verdict(passed)}")
    return 0 if passed else 1


if __name__ == "__main__":
    sys.exit(main())

"""Speed of DP-SGD steps in `tsdp forecast-train` (issue 7 target: >= 60 steps/s on 2 cores).

SimpleFeedForward (2 x 64 ReLU, Student-t head), L_C = 96, L_F = 24, batch 256, on a traffic-like
panel of 300 hourly series. Times, in the same run:

* tsdp DP-SGD: `tsdp.forecast.trainer.train` for the requested steps: WOR/WR batch sampling, gathering
  the windows, per-window gradients clipped to C and summed (ghost clipping), Gaussian noise, Adam,
  the accountant's epsilon and validation as in a real run;
* reference: the same loop without privacy (mean gradient of the batch, no clipping or noise) - the
  cost of ordinary minibatch training of the same model in numpy.

Prints steps/s of both and their ratio. For context only (not measured here): Opacus on CPU does about
21 steps/s for this configuration on this machine class (issue 7). Exit 1 if below 60 steps/s.
Usage: python bench/forecast_speed.py [--steps 2000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import sys

import numpy as np

from tsdp.forecast import trainer
from tsdp.forecast.models import make_model
from tsdp.forecast.synthetic import traffic_panel
from timing import best_of  # noqa: E402  (bench/timing.py, beside this script)

TARGET = 60.0
OPACUS_CPU = 21.0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    split = trainer.split_panel(traffic_panel(300, 24 * 7 * 12, seed=0), 96, 24, 5)
    net = make_model("simple-ff", 96, 24)
    base = dict(context=96, horizon=24, model="simple-ff", batch_size=256, clip_norm=1e-4, steps=args.steps)
    private = trainer.TrainConfig(**base, noise_multiplier=1.0, delta=1e-7)
    plain = trainer.TrainConfig(**base, private=False)
    dp_time = best_of(args.repeat, lambda: trainer.train(net, split, private, np.random.default_rng(0)))
    plain_time = best_of(args.repeat, lambda: trainer.train(net, split, plain, np.random.default_rng(0)))
    dp_rate, plain_rate = args.steps / dp_time, args.steps / plain_time
    print(f"SimpleFeedForward, L_C = 96, L_F = 24, batch 256, {args.steps} steps (best of {args.repeat})")
    print(f"reference (non-private minibatch Adam, numpy): {plain_rate:8.0f} steps/s")
    print(f"tsdp DP-SGD (clip + noise + accountant):       {dp_rate:8.0f} steps/s   "
          f"ratio {dp_time / plain_time:.2f}x the reference time")
    print(f"Opacus on CPU (issue 7, not measured here):    {OPACUS_CPU:8.0f} steps/s")
    print(f"target: >= {TARGET:g} steps/s -> {'PASS' if dp_rate >= TARGET else 'MISS'}")
    return 0 if dp_rate >= TARGET else 1


if __name__ == "__main__":
    sys.exit(main())

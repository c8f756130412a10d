"""Opacus reference for bench/forecast_speed.py, run in the bench-only environment (torch + opacus).

The same step as tsdp's `simple-ff` DP-SGD: SimpleFeedForward (L_C -> 64 -> 64 -> 3 L_F, ReLU),
per-window mean scaling with a floor, Student-t NLL per forecast step (softplus maps for scale and
df), per-window gradients clipped to C, Gaussian noise, Adam, on one CPU thread. Two Opacus modes:
``hooks`` (GradSampleModule + DPOptimizer: per-sample gradients materialised) and ``ghost``
(GradSampleModuleFastGradientClipping + DPOptimizerFastGradientClipping: ghost clipping).

Protocol (stdin/stdout, one line each): the worker prints ``ready``; then for each line
``MODE STEPS`` it runs that many steps and prints the wall time of the steps alone; ``quit`` ends.
Windows are drawn at random from a synthetic positive panel of the bench's shape: the time of a
step does not depend on the values.
"""

from __future__ import annotations

import math
import sys
import time

import numpy as np
import torch
from torch import nn

CONTEXT, HORIZON, BATCH, CLIP, SIGMA = 96, 24, 256, 1e-4, 1.0
MIN_SCALE, SCALE_FLOOR = 1e-3, 1e-6


class SimpleFeedForward(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.l1, self.l2, self.l3 = nn.Linear(CONTEXT, 64), nn.Linear(64, 64), nn.Linear(64, 3 * HORIZON)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.l3(torch.relu(self.l2(torch.relu(self.l1(x))))).view(-1, HORIZON, 3)


def per_window_loss(raw: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Mean Student-t NLL over the horizon, per window (scaled units)."""
    loc = raw[..., 0]
    scale = nn.functional.softplus(raw[..., 1]) + SCALE_FLOOR
    df = 2.0 + nn.functional.softplus(raw[..., 2])
    z = (y - loc) / scale
    nll = (torch.lgamma(df / 2) - torch.lgamma((df + 1) / 2) + 0.5 * torch.log(df * math.pi)
           + torch.log(scale) + (df + 1) / 2 * torch.log1p(z * z / df))
    return nll.mean(dim=1)


def windows(rng: np.random.Generator, count: int = 50_000):
    t = np.arange(CONTEXT + HORIZON)
    base = rng.uniform(50, 500, (count, 1)) * (1.2 + np.sin(2 * np.pi * (t + rng.integers(0, 24, (count, 1))) / 24))
    data = np.maximum(base + rng.normal(0, 20, base.shape), 0).astype(np.float32)
    ctx, tgt = data[:, :CONTEXT], data[:, CONTEXT:]
    s = np.maximum(np.abs(ctx).mean(axis=1, keepdims=True), MIN_SCALE)
    return torch.from_numpy(ctx / s), torch.from_numpy(tgt / s)


def trainer(mode: str):
    from opacus import GradSampleModule
    from opacus.grad_sample.grad_sample_module_fast_gradient_clipping import GradSampleModuleFastGradientClipping
    from opacus.optimizers import DPOptimizer
    from opacus.optimizers.optimizer_fast_gradient_clipping import DPOptimizerFastGradientClipping
    from opacus.utils.fast_gradient_clipping_utils import DPTensorFastGradientClipping

    torch.manual_seed(0)
    net = SimpleFeedForward()
    if mode == "hooks":
        model = GradSampleModule(net)
        opt = DPOptimizer(torch.optim.Adam(model.parameters(), lr=1e-3), noise_multiplier=SIGMA,
                          max_grad_norm=CLIP, expected_batch_size=BATCH)

        def step(x, y):
            opt.zero_grad()
            per_window_loss(model(x), y).mean().backward()
            opt.step()
    else:
        model = GradSampleModuleFastGradientClipping(net, max_grad_norm=CLIP, use_ghost_clipping=True)
        opt = DPOptimizerFastGradientClipping(torch.optim.Adam(model.parameters(), lr=1e-3),
                                              noise_multiplier=SIGMA, max_grad_norm=CLIP,
                                              expected_batch_size=BATCH)

        def step(x, y):
            opt.zero_grad()
            DPTensorFastGradientClipping(model, opt, per_window_loss(model(x), y), "mean").backward()
            opt.step()
    return step


def main() -> int:
    torch.set_num_threads(1)
    rng = np.random.default_rng(0)
    ctx, tgt = windows(rng)
    steps = {mode: trainer(mode) for mode in ("hooks", "ghost")}
    for step in steps.values():  # warm-up
        idx = torch.from_numpy(rng.choice(ctx.shape[0], BATCH, replace=False))
        step(ctx[idx], tgt[idx])
    print("ready", flush=True)
    for line in sys.stdin:
        parts = line.split()
        if not parts or parts[0] == "quit":
            break
        mode, count = parts[0], int(parts[1])
        picks = [torch.from_numpy(rng.choice(ctx.shape[0], BATCH, replace=False)) for _ in range(count)]
        start = time.perf_counter()
        for idx in picks:
            steps[mode](ctx[idx], tgt[idx])
        print(f"{time.perf_counter() - start:.6f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

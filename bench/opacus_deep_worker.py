"""Opacus reference for bench/forecast_deep.py, run in the bench-only environment (torch CPU + opacus).

The same DP-SGD steps as tsdp's ``deepar`` and ``itransformer`` at the bench's sizes, with Opacus's
per-sample gradients (GradSampleModule's hooks) and DPOptimizer around Adam (clip, Gaussian noise):

* DeepAR: ``opacus.layers.DPLSTM`` (2 layers, hidden 40; PyTorch's two biases per layer) over 71
  unrolled positions of 36 inputs (28 lags, 5 time features, log scale; the inputs' gathering is not
  timed), a linear Student-t head, the mean NLL over positions per window;
* iTransformer: one token of L_C + 1 = 49 values per window embedded to d_model 32, two post-norm
  encoder layers (``opacus.layers.DPMultiheadAttention`` with 4 heads, feed-forward 128, ReLU,
  LayerNorm), a final LayerNorm, a projection to 24 x 8 and the Student-t head, the mean NLL over the
  24 forecast steps per window.

Protocol (stdin/stdout, one line each): the worker prints ``ready``; then for each line ``MODEL STEPS``
it runs that many steps and prints the wall time of every step, space-separated; ``quit`` ends. The
torch thread count is the first argument (the bench pins both libraries to the same count). Inputs
are random: a step's time does not depend on the values.
"""

from __future__ import annotations

import math
import sys
import time
import warnings

import torch
from torch import nn

BATCH, CONTEXT, HORIZON, CLIP, SIGMA = 256, 48, 24, 1e-4, 1.0
DEEPAR_INPUTS, HIDDEN = 28 + 5 + 1, 40
ITRANS_CONTEXT, D_MODEL, HEADS, FEEDFORWARD = 48, 32, 4, 128


def student_t_nll(raw: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Student-t NLL per element (softplus maps for scale and df, as tsdp's head)."""
    loc = raw[..., 0]
    scale = nn.functional.softplus(raw[..., 1]) + 1e-6
    df = 2.0 + nn.functional.softplus(raw[..., 2])
    z = (y - loc) / scale
    return (torch.lgamma(df / 2) - torch.lgamma((df + 1) / 2) + 0.5 * torch.log(df * math.pi)
            + torch.log(scale) + (df + 1) / 2 * torch.log1p(z * z / df))


class DeepAR(nn.Module):
    def __init__(self) -> None:
        from opacus.layers import DPLSTM

        super().__init__()
        self.lstm = DPLSTM(DEEPAR_INPUTS, HIDDEN, num_layers=2, batch_first=True)
        self.head = nn.Linear(HIDDEN, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.lstm(x)[0])


class EncoderLayer(nn.Module):
    def __init__(self) -> None:
        from opacus.layers import DPMultiheadAttention

        super().__init__()
        self.attention = DPMultiheadAttention(D_MODEL, HEADS, batch_first=True)
        self.norm1, self.norm2 = nn.LayerNorm(D_MODEL), nn.LayerNorm(D_MODEL)
        self.ff1, self.ff2 = nn.Linear(D_MODEL, FEEDFORWARD), nn.Linear(FEEDFORWARD, D_MODEL)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.norm1(x + self.attention(x, x, x, need_weights=False)[0])
        return self.norm2(x + self.ff2(torch.relu(self.ff1(x))))


class ITransformer(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Linear(ITRANS_CONTEXT + 1, D_MODEL)
        self.layers = nn.ModuleList([EncoderLayer(), EncoderLayer()])
        self.norm = nn.LayerNorm(D_MODEL)
        self.proj = nn.Linear(D_MODEL, HORIZON * (D_MODEL // HEADS))
        self.head = nn.Linear(D_MODEL // HEADS, 3)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:  # (B, 1, L_C + 1)
        x = self.embed(tokens)
        for layer in self.layers:
            x = layer(x)
        steps = self.proj(self.norm(x)).reshape(x.shape[0], HORIZON, D_MODEL // HEADS)
        return self.head(steps)


def trainer(name: str):
    """A closure running one Opacus DP-SGD step of model ``name`` on fresh random inputs."""
    from opacus import GradSampleModule
    from opacus.optimizers import DPOptimizer

    torch.manual_seed(0)
    module = GradSampleModule(DeepAR() if name == "deepar" else ITransformer())  # loss_reduction "mean"
    optimizer = DPOptimizer(torch.optim.Adam(module.parameters(), lr=1e-3, weight_decay=1e-8),
                            noise_multiplier=SIGMA, max_grad_norm=CLIP, expected_batch_size=BATCH)
    if name == "deepar":
        positions = CONTEXT + HORIZON - 1
        x, y = torch.randn(BATCH, positions, DEEPAR_INPUTS), torch.randn(BATCH, positions)
    else:
        x, y = torch.randn(BATCH, 1, ITRANS_CONTEXT + 1), torch.randn(BATCH, HORIZON)

    def step() -> None:
        optimizer.zero_grad()
        student_t_nll(module(x), y).mean(dim=1).mean().backward()
        optimizer.step()

    return step


def main() -> int:
    torch.set_num_threads(int(sys.argv[1]))
    warnings.filterwarnings("ignore")  # "Full backward hook is firing": the inputs need no gradient
    steps = {name: trainer(name) for name in ("deepar", "itransformer")}
    for step in steps.values():  # warm-up: the first steps allocate
        step()
        step()
    print("ready", flush=True)
    for line in sys.stdin:
        parts = line.split()
        if not parts or parts[0] == "quit":
            break
        name, count = parts[0], int(parts[1])
        times = []
        for _ in range(count):
            start = time.perf_counter()
            steps[name]()
            times.append(time.perf_counter() - start)
        print(" ".join(f"{t:.6f}" for t in times), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Speed of DP-SGD steps of `tsdp forecast-train --model deepar|itransformer` (issue 16 target: DeepAR at
least 50x faster than Opacus on CPU).

Sizes (spec deep.md): batch 256, context 48 + horizon 24 (DeepAR unrolls 48 + 24 - 1 = 71 positions),
the paper's 28 traffic lags (largest 169, so windows of 216 + 24 values), 5 hourly time features, a 2-layer
LSTM of hidden size 40 and a Student-t head (25,083 parameters); iTransformer d_model 32, 4 heads,
feed-forward 128, 2 layers, context 48. Data: a traffic-like panel of 300 hourly series.

Times, in the same run:
* tsdp DP-SGD: `tsdp.forecast.trainer.train` for the requested steps (WOR/WR batches from tsdp's sampler,
  per-window gradients by JAX clipped and summed by jax-privacy's clipped_fun, Gaussian noise from
  tsdp.mechanisms.noise on the host, Adam, the accountant), after a warm-up run that compiles;
* reference: Opacus 1.6 (GradSampleModule with its per-layer hooks + DPOptimizer around Adam) on
  `opacus.layers.DPLSTM` of the same size (2 layers, hidden 40, PyTorch's two biases per layer: 25,403
  parameters) with the same inputs and Student-t loss, where torch and opacus are installed (a CPU
  torch wheel); otherwise "Opacus: not measured" and the ratio is taken against the non-private JAX
  step (`mean_grad`, no clipping or noise), which is always printed. Opacus is timed with one torch
  thread and with torch's default thread count, and the faster of the two is the reference.

Why the issue's Opacus figure (21.9 s per step) is not the reference: that time is torch's OpenMP threads
on busy cores, not per-example gradients. With torch's default of one thread per core, the Opacus
DPLSTM step took 0.21 s on the idle 2-core development machine, but 4.1 s at load ~5, 10.1 s at load ~8
and 51 s at load ~13; with one thread it took 0.33 to 0.70 s at loads 3 to 8. Non-private nn.LSTM
behaves the same (0.09 s on one thread, 1.6 s on two, at load ~5), and so does the issue's own table
(non-private nn.LSTM 0.41 s, torch.func vmap 6.6 s; here, on one thread, 0.09 s and 0.44 s). Opacus's
functorch mode (0.78 s) and a sequence-first layout (0.33 s) are not slower by more than that. Against
Opacus at its best thread count tsdp's DeepAR step is 1.5x faster on the idle machine (0.144 vs 0.211 s;
that tsdp time is from the former hand-written LSTM backward pass, whose clipped step the JAX-differentiated
one matches: 0.10-0.11 s each, idle) and 1.3x to 1.9x at loads 3 to 8 (JAX slows down under load too:
0.37 to 0.54 s), far from the 50x target, which the bench reports as missed.

Why no implementation reaches 50x here: the bench also prints an arithmetic floor, measured in the same
run. A step by back-propagation needs at least 2 x (2 |W| + |W_h|) x positions x batch float operations
(each weight used once per position and window forward, again for each window's own gradient, and the
matrices fed by hidden states once more to carry the gradient back; 2.5 GFLOP at these sizes), and this
CPU's best float32 matrix product (a jitted 1024 x 1024 JAX matmul, the most favourable kernel) runs at
220-474 GFLOP/s (474 is the two cores' AVX-512 peak), so no step is faster than about 5 ms: about 31x an
Opacus step of 0.16 s, before the recurrence, which keeps the LSTM's products small and sequential, is
counted.

Usage: python bench/forecast_deep.py [--steps 100] [--opacus-steps 5]
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

from tsdp.forecast import trainer
from tsdp.forecast.deep import missing_extra
from tsdp.forecast.models import make_model
from tsdp.forecast.synthetic import traffic_panel
from tsdp.forecast.timefeatures import Calendar, default_time_features, parse_lags

TARGET = 50.0
BATCH, CONTEXT, HORIZON = 256, 48, 24
HOUR_US = 3_600_000_000
LAGS = parse_lags("1-7,23-25,47-49,71-73,95-97,119-121,143-145,167-169")
CALENDAR = Calendar(np.datetime64("2024-01-01T00:00"), step_us=HOUR_US)


def build(name: str):
    if name == "deepar":
        return make_model(name, CONTEXT, HORIZON, lags=LAGS, time_features=default_time_features(HOUR_US))
    return make_model(name, CONTEXT, HORIZON)


def dp_seconds_per_step(name: str, values: np.ndarray, steps: int) -> tuple[float, int]:
    """Seconds per DP-SGD step of tsdp's trainer (compiled by a warm-up run first) and the model size."""
    net = build(name)
    window = trainer.model_context(net)
    split = trainer.split_panel(values, window, HORIZON, 5, calendar=CALENDAR)
    config = dict(context=window, horizon=HORIZON, model=name, batch_size=BATCH, clip_norm=1e-4,
                  noise_multiplier=1.0, delta=1e-7)
    trainer.train(net, split, trainer.TrainConfig(**config, steps=2, val_every=2), np.random.default_rng(0))
    started = time.perf_counter()
    trainer.train(net, split, trainer.TrainConfig(**config, steps=steps, val_every=steps), np.random.default_rng(1))
    return (time.perf_counter() - started) / steps, net.n_params


def plain_seconds_per_step(values: np.ndarray, steps: int) -> float:
    """Seconds per non-private DeepAR step (mean gradient of the batch + Adam), same trainer loop."""
    net = build("deepar")
    window = trainer.model_context(net)
    split = trainer.split_panel(values, window, HORIZON, 5, calendar=CALENDAR)
    config = dict(context=window, horizon=HORIZON, model="deepar", batch_size=BATCH, private=False)
    trainer.train(net, split, trainer.TrainConfig(**config, steps=2, val_every=2), np.random.default_rng(0))
    started = time.perf_counter()
    trainer.train(net, split, trainer.TrainConfig(**config, steps=steps, val_every=steps), np.random.default_rng(1))
    return (time.perf_counter() - started) / steps


def deepar_step_flops() -> float:
    """A lower bound on the float operations of one DeepAR DP-SGD step by back-propagation, whatever
    the implementation.

    Per unrolled position of every window: every weight matrix W (LSTM layers and head) is used once
    in the forward pass (|W| multiply-adds); each window's own gradient of W is a sum over positions of
    outer products (|W| again), which per-example clipping needs before windows are summed; and reverse
    mode carries the gradient back through every matrix whose input is a hidden state (the recurrent
    blocks, the input blocks of layers 2.., the head: their |W| once more). Counted: 2 x (2 |W| + |W_h|)
    x positions x batch. Not counted (so the bound stays below the truth): gate nonlinearities, biases,
    the Student-t loss, the clipping and the noise."""
    net = build("deepar")
    n_in = net._n_inputs
    weights = back = 0
    for name, shape, _ in net._param_specs():
        if len(shape) != 2:
            continue
        weights += int(np.prod(shape))
        fed_by_hidden = shape[0] - n_in if name == "lstm1.W" else shape[0]
        back += fed_by_hidden * shape[1]
    return 2.0 * (2 * weights + back) * len(net._positions) * BATCH


def matmul_flops_per_second(size: int = 1024, repeats: int = 7) -> float:
    """This CPU's float32 throughput: the best of `repeats` jitted JAX size x size matrix products, the
    most favourable kernel there is (large, dense, no recurrence)."""
    import jax
    import jax.numpy as jnp

    rng = np.random.default_rng(0)
    a, b = (jnp.asarray(rng.random((size, size), dtype=np.float32)) for _ in range(2))
    product = jax.jit(lambda x, y: x @ y)
    product(a, b).block_until_ready()
    best = float("inf")
    for _ in range(repeats):
        started = time.perf_counter()
        product(a, b).block_until_ready()
        best = min(best, time.perf_counter() - started)
    return 2.0 * size**3 / best


def opacus_seconds_per_step(steps: int) -> tuple[dict[int, float] | None, str]:
    """Seconds per Opacus DP-SGD step of a DPLSTM DeepAR of the same size, by torch thread count
    (1 and torch's default), or (None, why not)."""
    try:
        import torch
        from opacus import GradSampleModule
        from opacus.layers import DPLSTM
        from opacus.optimizers import DPOptimizer
    except ImportError as exc:
        return None, f"torch/opacus not installed ({exc.name})"
    import warnings

    warnings.filterwarnings("ignore", message="Full backward hook is firing")  # inputs need no gradient
    torch.manual_seed(0)
    n_in = len(LAGS) + len(default_time_features(HOUR_US)) + 1
    positions = CONTEXT + HORIZON - 1

    class DeepAR(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lstm = DPLSTM(n_in, 40, num_layers=2, batch_first=True)
            self.head = torch.nn.Linear(40, 3)

        def forward(self, x):
            return self.head(self.lstm(x)[0])

    module = GradSampleModule(DeepAR())  # loss_reduction "mean", as the loss below
    optimizer = DPOptimizer(torch.optim.Adam(module.parameters(), lr=1e-3, weight_decay=1e-8), noise_multiplier=1.0,
                            max_grad_norm=1e-4, expected_batch_size=BATCH)
    x = torch.randn(BATCH, positions, n_in)
    y = torch.randn(BATCH, positions)

    def step():
        optimizer.zero_grad()
        raw = module(x)
        df = 2.0 + torch.nn.functional.softplus(raw[..., 2])
        scale = torch.nn.functional.softplus(raw[..., 1]) + 1e-6
        nll = -torch.distributions.StudentT(df, raw[..., 0], scale).log_prob(y)
        nll.mean(dim=1).mean().backward()
        optimizer.step()

    default_threads = torch.get_num_threads()
    times = {}
    try:
        for threads in sorted({1, default_threads}):
            torch.set_num_threads(threads)
            step()  # warm-up (the first steps allocate)
            step()
            started = time.perf_counter()
            for _ in range(steps):
                step()
            times[threads] = (time.perf_counter() - started) / steps
    finally:
        torch.set_num_threads(default_threads)
    return times, f"Opacus {__import__('opacus').__version__}, torch {torch.__version__}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--opacus-steps", type=int, default=5)
    args = parser.parse_args()
    reason = missing_extra()
    if reason:
        print(f"tsdp[deep] is not usable here ({reason}): nothing to measure")
        return 1
    values = traffic_panel(300, 24 * 7 * 12, seed=0)
    print("load average (1, 5, 15 min) before: " + ", ".join(f"{v:.2f}" for v in os.getloadavg()))
    print(f"batch {BATCH}, context {CONTEXT} + horizon {HORIZON}; DeepAR: {len(LAGS)} lags up to {max(LAGS)}, "
          f"2 x LSTM(40), Student-t; {args.steps} steps after a compiling warm-up; float32 on CPU")
    deepar, n_deepar = dp_seconds_per_step("deepar", values, args.steps)
    itrans, n_itrans = dp_seconds_per_step("itransformer", values, args.steps)
    plain = plain_seconds_per_step(values, args.steps)
    print(f"tsdp DeepAR DP-SGD ({n_deepar:,} parameters):      {deepar:8.3f} s/step  {1 / deepar:7.2f} steps/s")
    print(f"tsdp iTransformer DP-SGD ({n_itrans:,} parameters): {itrans:8.3f} s/step  {1 / itrans:7.2f} steps/s")
    print(f"JAX DeepAR non-private (mean gradient):        {plain:8.3f} s/step  {1 / plain:7.2f} steps/s")
    opacus, note = opacus_seconds_per_step(args.opacus_steps)
    print("load average (1, 5, 15 min) after:  " + ", ".join(f"{v:.2f}" for v in os.getloadavg()))
    if opacus is None:
        print(f"Opacus: not measured ({note}); reference: the non-private JAX step")
        print(f"DeepAR DP-SGD costs {deepar / plain:.2f}x the non-private JAX step")
        return 0
    for threads, seconds in opacus.items():
        print(f"Opacus DPLSTM DP-SGD, {threads} torch thread{'s' if threads > 1 else ''} ({note}): "
              f"{seconds:8.3f} s/step  {1 / seconds:7.3f} steps/s")
    best = min(opacus, key=opacus.get)
    ratio = opacus[best] / deepar
    flops, peak = deepar_step_flops(), matmul_flops_per_second()
    floor = flops / peak
    print(f"arithmetic floor: a DeepAR DP-SGD step needs at least {flops / 1e9:.2f} GFLOP (forward, per-window "
          f"weight gradients, back-propagation through the hidden states); at this CPU's best float32 matmul rate, {peak / 1e9:.0f} GFLOP/s measured now, "
          f"no implementation steps faster than {floor * 1e3:.1f} ms, i.e. at most {opacus[best] / floor:.0f}x the "
          f"Opacus step above")
    print(f"DeepAR: tsdp is {ratio:.1f}x faster than Opacus at its best thread count ({best}); target >= "
          f"{TARGET:g}x -> {'PASS' if ratio >= TARGET else 'MISS'}")
    return 0 if ratio >= TARGET else 1


if __name__ == "__main__":
    sys.exit(main())

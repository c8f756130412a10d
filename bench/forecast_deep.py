"""Speed of the DP-SGD steps of `tsdp forecast-train --model deepar|itransformer` against the non-private
step of the same model and against Opacus (issue 30 targets, this 2-core machine, paired medians, two
consecutive runs: the DP-SGD step within 1.25x of the non-private JAX step, for DeepAR and iTransformer,
and DeepAR's at least 2x faster than Opacus DPLSTM with the same thread count).

Sizes (spec deep.md): batch 256, context 48 + horizon 24 (DeepAR unrolls 48 + 24 - 1 = 71 positions),
the paper's 28 traffic lags (largest 169, so windows of 216 + 24 values), 5 hourly time features, a 2-layer
LSTM of hidden size 40 and a Student-t head (25,083 parameters); iTransformer d_model 32, 4 heads,
feed-forward 128, 2 layers, context 48 (33,435 parameters). Data: a traffic-like panel of 300 hourly series.

Measured in one run, interleaved round by round (the order rotates), each a median of per-step wall times:

* tsdp DP-SGD: `tsdp.forecast.trainer.train` (WOR/WR batches from tsdp's sampler, per-window gradient pieces
  by JAX, their clipping and float64 sum on the host (tsdp.forecast.deep.ghost), tsdp's hardened discrete
  Gaussian noise on the host, Adam, the accountant), after a warm-up run that compiles;
* tsdp non-private: the same loop with ``private=False`` (the batch-mean gradient, no clipping or noise);
* Opacus 1.6 (GradSampleModule hooks + DPOptimizer around Adam) on the same models in the bench-only
  environment (`make bench-env`: CPU torch and opacus; bench/opacus_deep_worker.py), DeepAR as
  ``opacus.layers.DPLSTM``, iTransformer with ``DPMultiheadAttention``; once as a user runs it, and once
  with glibc's allocator set as tsdp sets it for JAX (MALLOC_* variables; see
  tsdp/forecast/deep/runtime.py): torch also frees and re-faults its large buffers every step, and a page
  fault costs about 4 us on this virtual machine (printed below).

A step's time is the wall time between the trainer's progress calls (Opacus: around its step), and each
run's median over its steps is taken; the steps at which the trainer evaluates the running epsilon or
validates (a fixed number per run, whatever its length: 20 and 2) are left out, and the mean including
them is printed as well. Both
libraries are pinned to the same cores (``--threads``: CPU affinity of this process and of the Opacus
worker, and torch.set_num_threads).

The arithmetic floor: a step by back-propagation needs at least 2 x (2 |W| + |W_h|) multiply-adds per
position (or token) of every window (each weight matrix used forward, again for the window's own gradient,
and once more for the matrices whose input is a hidden state, to carry the gradient back), run at this
CPU's best float32 matrix-product rate (a jitted 1024 x 1024 JAX product, measured now, on the same
threads). Not counted: nonlinearities, the loss, clipping, noise, and the recurrence's small sequential
products, so no implementation reaches it.

Usage: python bench/forecast_deep.py [--steps 60] [--opacus-steps 5] [--rounds 3] [--threads 1]
Exit 1 if a target is missed.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
RATIO_TARGET = 1.25  # DP-SGD step / non-private step, at most
OPACUS_TARGET = 2.0  # Opacus step / tsdp DP-SGD step (DeepAR), at least
BATCH, CONTEXT, HORIZON = 256, 48, 24
HOUR_US = 3_600_000_000
MODELS = ("deepar", "itransformer")


def pin(threads: int) -> str:
    """Restrict this process (and the workers it starts) to ``threads`` CPUs, before JAX or torch start."""
    cpus = sorted(os.sched_getaffinity(0))[:threads]
    os.sched_setaffinity(0, cpus)
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[var] = str(threads)
    return ",".join(map(str, cpus))


class JaxRun:
    """A tsdp training run of one model, private or not; ``run(steps)`` -> per-step wall times."""

    def __init__(self, name: str, private: bool, values):
        import numpy as np

        from tsdp.forecast import trainer
        from tsdp.forecast.models import make_model
        from tsdp.forecast.timefeatures import Calendar, default_time_features, parse_lags

        self.np, self.trainer = np, trainer
        if name == "deepar":
            lags = parse_lags("1-7,23-25,47-49,71-73,95-97,119-121,143-145,167-169")
            self.net = make_model(name, CONTEXT, HORIZON, lags=lags, time_features=default_time_features(HOUR_US))
        else:
            self.net = make_model(name, CONTEXT, HORIZON)
        window = trainer.model_context(self.net)
        calendar = Calendar(np.datetime64("2024-01-01T00:00"), step_us=HOUR_US)
        self.split = trainer.split_panel(values, window, HORIZON, 5, calendar=calendar)
        extra = dict(clip_norm=1e-4, noise_multiplier=1.0, delta=1e-7) if private else dict(private=False)
        self.config = dict(context=window, horizon=HORIZON, model=name, batch_size=BATCH, **extra)
        self.total = 0.0
        self.run(2)  # compiles

    def run(self, steps: int) -> list[float]:
        """Wall times of steps 2 .. steps - 1, less those at which the trainer re-evaluated epsilon (its
        running figure changed; 20 a run whatever its length) and the last, which validates."""
        marks = []
        config = self.trainer.TrainConfig(**self.config, steps=steps, val_every=steps)
        start = time.perf_counter()
        self.trainer.train(self.net, self.split, config, self.np.random.default_rng(0),
                           progress=lambda step, total, loss, eps: marks.append((time.perf_counter(), eps)))
        self.total = (time.perf_counter() - start) / steps
        return [b[0] - a[0] for a, b in zip(marks[:-2], marks[1:-1]) if b[1] == a[1]]


class Opacus:
    """A persistent Opacus worker in the bench environment; ``run(model, steps)`` -> per-step wall times."""

    def __init__(self, python: Path, threads: int, env: dict | None = None):
        self.proc = subprocess.Popen([str(python), "-W", "ignore", str(HERE / "opacus_deep_worker.py"), str(threads)],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     text=True, env=env)
        line = self.proc.stdout.readline().strip()
        if line != "ready":
            raise RuntimeError(self.proc.stderr.read()[-400:] or "the worker did not start")

    def run(self, name: str, steps: int) -> list[float]:
        self.proc.stdin.write(f"{name} {steps}\n")
        self.proc.stdin.flush()
        return [float(t) for t in self.proc.stdout.readline().split()]

    def close(self) -> None:
        self.proc.stdin.write("quit\n")
        self.proc.stdin.flush()
        self.proc.wait(timeout=60)


def opacus_workers(threads: int) -> tuple[dict[str, Opacus], str]:
    """({label: worker}, '') or ({}, why Opacus is not measured)."""
    env_dir = Path(os.environ.get("TSDP_BENCH_ENV", HERE.parent / ".bench-venv"))
    python = env_dir / "bin" / "python"
    if not python.exists():
        return {}, f"no bench environment at {env_dir} (run `make bench-env`, or set TSDP_BENCH_ENV)"
    tuned = dict(os.environ, MALLOC_ARENA_MAX="1", MALLOC_MMAP_THRESHOLD_=str(1 << 30),
                 MALLOC_TRIM_THRESHOLD_=str(1 << 30))
    try:
        return {"Opacus": Opacus(python, threads), "Opacus, glibc as tsdp's": Opacus(python, threads, tuned)}, ""
    except (OSError, RuntimeError) as exc:
        text = str(exc).strip()
        return {}, f"the worker failed in {env_dir}: {text.splitlines()[-1] if text else exc}"


def step_flops(net) -> float:
    """A lower bound on the float operations of one DP-SGD step by back-propagation (module docstring):
    2 x (2 |W| + |W_h|) per position (DeepAR) or per use of a matrix (iTransformer), times the batch."""
    import numpy as np

    total = 0.0
    for name, shape, _ in net._param_specs():
        if len(shape) != 2:
            continue
        size = int(np.prod(shape))
        if net.name == "deepar":
            fed_by_hidden = (shape[0] - net._n_inputs) * shape[1] if name == "lstm1.W" else size
            total += (2 * size + fed_by_hidden) * len(net._positions)
        else:  # one token per window; the head maps each of the horizon's steps
            uses = net.horizon if name == "head.W" else 1
            total += (2 * size + (0 if name == "embed.W" else size)) * uses
    return 2.0 * total * BATCH


def matmul_flops_per_second(size: int = 1024, repeats: int = 7) -> float:
    """This CPU's float32 throughput on the pinned threads: the best of ``repeats`` jitted JAX products."""
    import jax
    import jax.numpy as jnp
    import numpy as np

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


def page_fault_seconds(megabytes: int = 64, repeats: int = 5) -> float:
    """Seconds per first touch of a fresh 4 KiB page (what a freed-and-reallocated buffer costs)."""
    import mmap

    import numpy as np

    best = float("inf")
    for _ in range(repeats):
        region = mmap.mmap(-1, megabytes << 20)
        view = np.frombuffer(region, dtype=np.uint8)
        started = time.perf_counter()
        view[::4096] = 1
        best = min(best, time.perf_counter() - started)
        del view
        region.close()
    return best / ((megabytes << 20) // 4096)


def noise_seconds(parameters: int, repeats: int = 7) -> float:
    """Seconds of the host's noise for one hardened step on ``parameters`` coordinates (the trainer's
    ``dp_gradient``: exact discrete Gaussian draws on the lattice, the sum rounded to it): the part of the
    private overhead that is neither the device's per-window gradients nor the clipping."""
    import numpy as np

    from tsdp.accounting.dpsgd_lattice import granularity_for
    from tsdp.forecast.trainer import dp_gradient

    rng = np.random.default_rng(0)
    total = rng.random(parameters)
    granularity = granularity_for(1.0, 1e-4)  # the bench's sigma and C
    best = float("inf")
    for _ in range(repeats):
        started = time.perf_counter()
        dp_gradient(total, 1.0, 1e-4, BATCH, rng, granularity)
        best = min(best, time.perf_counter() - started)
    return best


def spread(values: list[float]) -> str:
    return f"[{min(values):.2f}-{max(values):.2f}]" if len(values) > 1 else ""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=60, help="tsdp steps per run (default 60)")
    parser.add_argument("--opacus-steps", type=int, default=5, help="Opacus steps per run (default 5)")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds, at least 3 (default 3)")
    parser.add_argument("--threads", type=int, default=1, help="CPUs for JAX and torch alike (default 1)")
    args = parser.parse_args()
    if args.rounds < 3 or args.steps < 3 or args.opacus_steps < 1 or args.threads < 1:
        parser.error("--rounds >= 3, --steps >= 3, --opacus-steps >= 1 and --threads >= 1")
    cpus = pin(args.threads)

    from tsdp.forecast.deep import missing_extra

    reason = missing_extra()
    if reason:
        print(f"tsdp[deep] is not usable here ({reason}): nothing to measure")
        return 1
    from tsdp.forecast.synthetic import traffic_panel

    print("load average (1, 5, 15 min) before: " + ", ".join(f"{v:.2f}" for v in os.getloadavg()))
    values = traffic_panel(300, 24 * 7 * 12, seed=0)
    runs = {(name, private): JaxRun(name, private, values) for name in MODELS for private in (True, False)}
    workers, why = opacus_workers(args.threads)
    jobs = {}
    for name in MODELS:
        jobs[(name, "tsdp DP-SGD")] = lambda n=name: runs[(n, True)].run(args.steps)
        jobs[(name, "tsdp non-private")] = lambda n=name: runs[(n, False)].run(args.steps)
        for label, worker in workers.items():
            jobs[(name, label)] = lambda n=name, w=worker: w.run(n, args.opacus_steps)
    medians: dict = {key: [] for key in jobs}
    means: dict = {key: [] for key in jobs}
    keys = list(jobs)
    for r in range(args.rounds):
        for key in keys[r % len(keys):] + keys[:r % len(keys)]:
            times = jobs[key]()
            medians[key].append(statistics.median(times))
            if key[1].startswith("tsdp"):
                means[key].append(runs[(key[0], key[1] == "tsdp DP-SGD")].total)
    for worker in workers.values():
        worker.close()
    peak = matmul_flops_per_second()
    fault = page_fault_seconds()
    print("load average (1, 5, 15 min) after:  " + ", ".join(f"{v:.2f}" for v in os.getloadavg()))
    print(f"batch {BATCH}, context {CONTEXT} + horizon {HORIZON}, float32 on CPU; {args.threads} thread(s) for JAX "
          f"and torch (CPUs {cpus}); medians of per-step wall times, {args.rounds} interleaved rounds of "
          f"{args.steps} tsdp / {args.opacus_steps} Opacus steps")
    print(f"this CPU now: best float32 matmul {peak / 1e9:.0f} GFLOP/s; a page fault {fault * 1e6:.1f} us")
    passed = True
    for name in MODELS:
        net = runs[(name, True)].net
        private, plain = medians[(name, "tsdp DP-SGD")], medians[(name, "tsdp non-private")]
        print(f"\n{name} ({net.n_params:,} parameters)")
        for key in [k for k in keys if k[0] == name]:
            extra = (f"   (mean with the trainer's validation and epsilon evaluations: "
                     f"{statistics.median(means[key]):.4f} s)") if means[key] else ""
            print(f"  {key[1]:<26} {statistics.median(medians[key]):8.4f} s/step{extra}")
        ratios = [a / b for a, b in zip(private, plain)]
        ratio = statistics.median(ratios)
        ok = ratio <= RATIO_TARGET
        passed &= ok
        print(f"  DP-SGD / non-private: {ratio:.2f}x {spread(ratios)} (target <= {RATIO_TARGET}x -> "
              f"{'PASS' if ok else 'MISS'})")
        for label in workers:
            faster = [o / p for o, p in zip(medians[(name, label)], private)]
            line = f"  {label} / tsdp DP-SGD: {statistics.median(faster):.2f}x {spread(faster)}"
            if name == "deepar" and label == "Opacus":
                ok = statistics.median(faster) >= OPACUS_TARGET
                passed &= ok
                line += f" (target >= {OPACUS_TARGET}x -> {'PASS' if ok else 'MISS'})"
            print(line)
        if not workers:
            print(f"  Opacus: not measured ({why})")
            passed = False
        noise = noise_seconds(net.n_params)
        print(f"  the host's hardened noise for {net.n_params:,} parameters alone: {noise * 1e3:.2f} ms (best of 7), "
              f"{noise / statistics.median(plain):.0%} of the non-private step")
        flops = step_flops(net)
        floor = flops / peak
        print(f"  arithmetic floor: at least {flops / 1e9:.3f} GFLOP per DP-SGD step, so no step is faster than "
              f"{floor * 1e3:.2f} ms here; tsdp's is {statistics.median(private) / floor:.0f}x that")
    print(f"\ntargets: {'PASS' if passed else 'MISS'}")
    return 0 if passed else 1


if __name__ == "__main__":
    sys.exit(main())

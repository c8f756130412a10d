"""``--plot FILE.png`` (optional extra ``tsdp[plot]``, matplotlib): figures for the steward.

A release plot shows UNPROTECTED input next to the release, so it must never be mistaken for a
publishable file. The rule (checked before any data is read, exit 2 otherwise):

* the name ends in ``.png`` and is neither the output nor the report;
* it is not in the output's directory, unless its name ends in ``.unprotected.png``;
* it is written with mode 0600 (owner only), atomically, and an existing file is replaced only
  with ``--force``.

The ``tsdp plan`` plot (accuracy against epsilon) holds public figures only; the same naming rule
applies for simplicity. matplotlib is imported only when a plot is drawn, never by ``tsdp --help``.
"""

from __future__ import annotations

import importlib.util
import io
from pathlib import Path

from tsdp.errors import UsageError

UNPROTECTED_SUFFIX = ".unprotected.png"
MAX_SERIES = 3
MAX_STEPS = 500


def require_matplotlib() -> None:
    if importlib.util.find_spec("matplotlib") is None:
        raise UsageError("--plot needs matplotlib, the optional extra tsdp[plot]: pip install 'tsdp[plot]'")


def check_plot_path(plot: str, published: tuple[str, ...], force: bool = True) -> None:
    """Refuse a plot path that could pass for a publishable file (see the module docstring)."""
    require_matplotlib()
    path = Path(plot)
    if path.suffix.lower() != ".png":
        raise UsageError(f"--plot {plot!r}: the figure is a PNG; name it FILE.png")
    for other in published:
        if other in (None, "-"):
            continue
        other_path = Path(other)
        if path.resolve() == other_path.resolve():
            raise UsageError(f"--plot {plot!r} is the path of the release's output or report")
        if path.resolve().parent == other_path.resolve().parent and not path.name.endswith(UNPROTECTED_SUFFIX):
            raise UsageError(f"--plot {plot!r} sits next to the release {other_path.name!r} under a publishable "
                             f"name: the figure shows UNPROTECTED data; put it in another directory or name it "
                             f"*{UNPROTECTED_SUFFIX}")
    if not force and path.exists():
        raise UsageError(f"--plot {plot!r} exists; pass --force to replace it")


def _write(fig, plot: str, force: bool) -> None:
    from tsdp.io.files import AtomicOutputs

    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=100)
    with AtomicOutputs(replace=force) as outputs:
        outputs.stage_bytes(buffer.getvalue(), plot, private=True, option="--plot")
        outputs.commit()


def _figure(rows: int):
    import matplotlib

    matplotlib.use("Agg", force=True)
    from matplotlib.figure import Figure

    return Figure(figsize=(10, 2.6 * rows + 0.6), layout="constrained")


def plot_release(truth, released, half_width: float, names, plot: str, title: str, force: bool) -> None:
    """Up to 3 series (first 500 steps): the input, the release and the noise band around the release."""
    import numpy as np

    n = min(MAX_SERIES, truth.shape[0])
    steps = min(MAX_STEPS, truth.shape[1])
    fig = _figure(n)
    fig.suptitle(f"UNPROTECTED DATA, NOT FOR PUBLICATION: input and release ({title})", color="darkred")
    axes = fig.subplots(n, 1, squeeze=False)[:, 0]
    t = np.arange(steps)
    for k, ax in enumerate(axes):
        ax.plot(t, truth[k, :steps], color="black", lw=0.8, label="input (not private)")
        ax.plot(t, released[k, :steps], color="tab:blue", lw=0.8, label="release")
        ax.fill_between(t, released[k, :steps] - half_width, released[k, :steps] + half_width,
                        color="tab:blue", alpha=0.2, lw=0, label=f"release ± {half_width:.3g} (noise interval)")
        ax.set_title(str(names[k]) if names is not None else f"series {k}", loc="left", fontsize=9)
    axes[0].legend(loc="upper right", fontsize=8)
    _write(fig, plot, force)


def plot_plan(rows: list[dict], plot: str, command: str, force: bool = True) -> None:
    """Half-width against epsilon (public figures only)."""
    fig = _figure(1)
    ax = fig.subplots()
    points = [(r["epsilon"], r["half_width"]) for r in rows if r["half_width"] is not None]
    if not points:
        raise UsageError(f"--plot: tsdp plan {command} has no numeric half-width to draw (see its table)")
    xs, ys = zip(*points)
    ax.plot(xs, ys, marker="o")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("epsilon")
    alpha = rows[0]["alpha"]
    ax.set_ylabel(f"half-width of the {100 * (1 - alpha):.4g}% noise interval")
    ax.set_title(f"tsdp plan {command}: {rows[0]['scope']} (noise only)", loc="left")
    ax.grid(True, which="both", alpha=0.3)
    _write(fig, plot, force)

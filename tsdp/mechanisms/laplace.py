"""The Laplace mechanism on a panel of S series x T steps (``--mechanism laplace``, pure epsilon-DP).

Every cell gets Lap(b) with ``b = Delta_1 / epsilon``, ``Delta_1`` the panel's L1 sensitivity for the
privacy unit (:mod:`tsdp.accounting.sensitivity`); the L1 sensitivity adds over the series, which is
basic composition of the per-series budgets (Dwork and Roth 2014, Theorem 3.6).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from tsdp.accounting.budget import check_epsilon
from tsdp.mechanisms.baseline import Panel, Release, add_noise, panel_size
from tsdp.mechanisms.noise import NoiseStream, laplace_noise
from tsdp.mechanisms.protocol import REMEDY_COMMON, PrivacyMap, Setting
from tsdp.accounting.samplers import CONTINUOUS_LAPLACE_THEOREM as LAPLACE_THEOREM
from tsdp.accounting.samplers import Sampler, sampler_of

__all__ = ["LAPLACE", "LAPLACE_THEOREM", "Laplace", "release_laplace"]


class Laplace:
    """Lap(b) on every cell (hardened: g times a discrete Laplace on the rounded cells)."""

    name = "laplace"
    describes = "Laplace mechanism on the panel (L1 sensitivity of the unit)"
    theorem_words = (("Dwork and Roth 2014, Theorem 3.6 (Laplace mechanism)",
                      "discrete Laplace on the granularity lattice"),)
    remedy = (f"{REMEDY_COMMON}, --mechanism gaussian (L2 rather than L1 sensitivity) or a mechanism that smooths "
              "(--mechanism dft)")
    cellwise = True
    summable = True
    linear = True
    norm_bounded = False  # --max-norm does not apply
    dry_run_caveat = None
    options: dict = {}

    def pure(self, noise: str | None) -> bool:
        return True

    def privacy_map(self, setting: Setting) -> PrivacyMap:
        """``b = Delta_1 / epsilon``; hardened: ``Delta_1 = cells x (floor(M/g) + 1) g``, the L1
        sensitivity of the rounded cells (:mod:`tsdp.accounting.discrete`)."""
        epsilon, panel = setting.epsilon, setting.panel
        check_epsilon(epsilon)
        cells = panel.bounds.cells(panel.n_series, panel.n_steps)
        l1 = panel.bounds.l1(panel.n_series, panel.n_steps)
        sampler = setting.sampler.on_lattice(lambda d: d / epsilon, l1, cells, "l1")
        step = sampler.rounded_step(panel.bounds.max_per_step)
        noisy_l1 = cells * step if sampler.hardened else l1
        scale = noisy_l1 / epsilon
        parameters = {
            "noise": "laplace",
            "scale": scale,
            "l1_sensitivity": l1,
            "cells_per_unit": cells,
            "n_series": panel.n_series,
            "n_steps": panel.n_steps,
            "composition": panel.composition,
        }
        record, theorem = sampler.laplace_record(scale, noisy_l1)
        parameters.update(record)
        event = sampler.laplace_event(panel.bounds.max_per_step, step, scale, cells)
        return PrivacyMap("pure-dp", epsilon, 0.0, theorem, (event,), parameters, scale, sampler, sampler.warnings)

    def release(self, values, panel: Panel, rng: np.random.Generator, setting: Setting, prefetched=None,
                stream: NoiseStream | None = None) -> Release:
        """``values`` plus the noise the privacy map calibrated (``stream``: a panel released in chunks)."""
        m = self.privacy_map(setting)
        g = m.sampler.granularity
        noise = laplace_noise(rng, m.scale, panel_size(values), stream, g)
        return Release(add_noise(values, noise, g), m.claim(self.name, panel), m.warnings)

    def accuracy(self, claim, alpha: float, target: str = "cell", sampled=None):
        from tsdp.accuracy import mechanisms as acc

        return acc.cellwise_release("laplace", claim.parameters, alpha, target)


LAPLACE = Laplace()


def release_laplace(
    values: np.ndarray | Sequence[np.ndarray], panel: Panel, epsilon: float, rng: np.random.Generator,
    stream: NoiseStream | None = None, sampler: str | Sampler = "hardened", granularity: float | None = None,
) -> Release:
    """Add Laplace noise of scale ``b = L1 / epsilon`` to every cell (pure epsilon-DP).

    ``sampler="hardened"`` (default): cells rounded to multiples of the granularity ``g`` get ``g``
    times discrete Laplace noise, and L1 is that of the rounded cells, ``cells x (floor(M/g) + 1) g``
    (:mod:`tsdp.accounting.discrete`); ``sampler="float"``: numpy's Laplace (not for publication).
    ``values`` is an array, or a sequence of 1-D chunks of the flat panel
    (:func:`tsdp.mechanisms.baseline.add_noise`); ``stream``: as for
    :func:`tsdp.mechanisms.gaussian.release_gaussian`.
    """
    setting = Setting(epsilon, None, panel, sampler_of(sampler, granularity))
    return LAPLACE.release(values, panel, rng, setting, stream=stream)

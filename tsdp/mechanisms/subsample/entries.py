"""The registry entries of ``--mechanism subsample`` and ``filter-subsample`` (:mod:`tsdp.mechanisms.registry`).

Light on purpose: the options and flags every command line reads are here, and the releases and
their accounting (which load scipy.stats) are imported when a release runs.
"""

from __future__ import annotations

import numpy as np

from tsdp.caveats import Caveat
from tsdp.mechanisms.baseline import Panel, Release
from tsdp.mechanisms.protocol import REMEDY_COMMON, PrivacyMap, Setting


class Subsample:
    """Koga et al.'s time subsampling: Bernoulli(p) sampled steps, Gaussian noise, interpolation."""

    name = "subsample"
    describes = "time subsampling with Gaussian noise (Koga et al.; exact or paper accounting)"
    theorem_words = ()  # the rule compares the theorem itself (it depends on the accounting)
    remedy = f"{REMEDY_COMMON} or --mechanism filter-subsample"
    cellwise = False
    summable = False
    linear = True
    norm_bounded = False  # --max-norm does not apply
    filtered = False
    dry_run_caveat = None
    # ReleaseOptions field -> (keyword, default)
    options = {"sampling_rate": ("p", 0.1), "accounting": ("accounting", "exact"), "delta_split": ("delta_split", 0.5)}

    def pure(self, noise: str | None) -> bool:
        return False

    def privacy_map(self, setting: Setting) -> PrivacyMap:
        """The claim for the public setting (:mod:`tsdp.mechanisms.subsample.maps`, which also documents the
        ``Setting.released`` figures filter-subsample's conditional accounting reads)."""
        from tsdp.mechanisms.subsample import maps  # (scipy.stats: loaded when used)

        return (maps.filter_subsample_map if self.filtered else maps.subsample_map)(setting)

    def release(self, values, panel: Panel, rng: np.random.Generator, setting: Setting, **_runtime) -> Release:
        from tsdp.mechanisms.subsample.release import release_subsample  # (scipy.stats: loaded when used)

        o = setting.options
        return release_subsample(values, panel, setting.epsilon, setting.delta, rng, o["p"], o["accounting"],
                                 delta_split=o["delta_split"], sampler=setting.sampler)

    def accuracy(self, claim, alpha: float, target: str = "cell", sampled=None):
        from tsdp.accuracy import mechanisms as acc

        p = claim.parameters
        sigmas = (p.get("noise") or {}).get("sigma_per_series") or [p["sigma"]]
        # an interpolated value's noise is w X_1 + (1 - w) X_2: lattice weights sum to 1
        return acc.on_lattice(acc.subsample(sigmas, alpha, self.filtered), acc.lattice_of(p), 1.0)


class FilterSubsample(Subsample):
    """Koga et al.'s filtered time subsampling: a low-pass filter, then :class:`Subsample`'s release."""

    name = "filter-subsample"
    describes = "filtered time subsampling (Koga et al.; conditional or paper accounting)"
    remedy = f"{REMEDY_COMMON} or a wider filter (--filter-sigma)"
    filtered = True
    dry_run_caveat = ("--dry-run: filter-subsample's sigma depends on the sampled steps drawn at release; shown "
                      "for one fixed draw")
    options = {"sampling_rate": ("p", 0.1), "accounting": ("accounting", "conditional"),
               "delta_split": ("delta_split", 0.5), "filter_alpha": ("alpha", None), "filter": ("kernel", "gaussian"),
               "filter_sigma": ("filter_sigma", 10.0), "filter_width": ("filter_width", None),
               "filter_kernel": ("filter_kernel", None)}

    def caveats(self, options, alpha_given: bool) -> list:
        """``--alpha`` once meant Koga et al.'s filter parameter: say what it is now, where it could mislead."""
        if alpha_given and options.filter_alpha is None and options.accounting == "paper":
            return [Caveat("alpha_renamed", f"--alpha {options.alpha:g} is the accuracy level (1 - alpha intervals); "
                           "Koga et al.'s filter parameter is now --filter-alpha, and without it --accounting paper "
                           "solves for it")]
        return []

    def release(self, values, panel: Panel, rng: np.random.Generator, setting: Setting, read_numbers=None,
                **_runtime) -> Release:
        """``read_numbers(path, option)``: how a ``--filter-kernel`` file is read (the caller's I/O)."""
        from tsdp.mechanisms.subsample.maps import kernel_of  # (scipy.stats: loaded when used)
        from tsdp.mechanisms.subsample.release import release_filter_subsample

        o = setting.options
        kernel = kernel_of(o, read_numbers)
        return release_filter_subsample(
            values, panel, setting.epsilon, setting.delta, rng, o["p"], kernel, o["accounting"],
            filter_sigma=o["filter_sigma"], filter_width=o["filter_width"], delta_split=o["delta_split"],
            alpha=o["alpha"], sampler=setting.sampler)


SUBSAMPLE = Subsample()


FILTER_SUBSAMPLE = FilterSubsample()

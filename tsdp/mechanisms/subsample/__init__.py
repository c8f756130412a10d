"""Subsampling in time, with and without a smoothing filter (Koga, Meehan and Chaudhuri 2022).

Koga, Meehan and Chaudhuri, "Privacy Amplification by Subsampling in Time Domain" (AISTATS 2022,
arXiv:2201.04762), Algorithm 1, for every series x (length T) of a panel:

1. (``filter-subsample`` only) y = A x, a circular non-negative filter with unit row sums
   (:mod:`tsdp.mechanisms.filters`); otherwise y = x;
2. J ~ Bernoulli(p)^T, drawn independently per series and independently of the data
   (an empty J is redrawn, which is data-independent too; the accounting conditions each series
   on J != {});
3. z = y_J + N(0, sigma^2 I_|J|);
4. the release is the linear interpolation of (J, z) over 0..T-1, constant before min J and after
   max J (``numpy.interp``); optional clipping. Both are post-processing given the public J.

Accounting. ``I`` = the unit's changed cells over all series (the participation bound of
Assumption 1 times the series it touches, doubled under substitution, at most T per series;
:meth:`ContributionBounds.changed_cells`), ``n`` = the series they can lie in, ``M`` = per-step
cap. All series share sigma and are sampled independently, so given every J the touched series
are one Gaussian mechanism with sensitivity ``M sqrt(k)``, k the sampled changed cells: the
accountings take the unit's cells jointly; the spread over the n series matters only through the
redraw of empty samples (:mod:`tsdp.accounting.timesubsampling`, module docstring):

* ``subsample``, ``exact`` (default): the released pair (J, noisy samples) has the privacy profile
  ``delta(eps) = sum_k w_k deltaGauss(eps; M sqrt(k) / sigma)``, w dominating the law of k for
  every spread (for n = 1 the exactly conditioned ``Bin(k; I, p)``); sigma is the smallest that
  meets (epsilon, delta).
* ``subsample``, ``paper``: Corollary 3 (corrected exponent) with Theorem 2's exact binomial tail,
  ``sigma = c(delta_noise) M sqrt(I') / epsilon``, applied to the unit's I cells jointly.
* ``filter-subsample``, ``conditional`` (default; spec section 4.1, not in the paper): given J, a
  series' change is at most ``s_J ||change||``, ``s_J = sigma_max(A_J)``; each series gets
  ``sigma_s = M s_J(s) sqrt(I) / mu*`` (analytic mu* of (epsilon, delta)), so the touched series'
  joint mu is ``sqrt(sum_s c_s) / sqrt(I) mu* <= mu*`` for any c_s cells per series summing to at
  most I: (epsilon, delta), no failure term.
* ``filter-subsample``, ``paper``: Corollary 2 with Theorem 4 (alpha solved as in the authors'
  ``find_alpha_log``), ``sigma = c(delta_noise) M alpha sqrt(I) / epsilon``, the failure
  probability delta' summed over the n series.

``p = 1`` is no subsampling: the plain Gaussian baseline is released instead (with a warning).

Noise (``sampler``). ``hardened`` (default): the sampled values are rounded to multiples of a
power-of-two granularity g (chosen from public parameters, :mod:`tsdp.accounting.discrete`) and get
g times exact discrete Gaussian noise of parameter sigma / g; the sensitivities above are those of
the rounded values (``M' = (floor(M/g) + 1) g`` per kept cell without filter; after the filter,
which spreads a change over a whole series, ``+ g sqrt(n_s)`` in each touched series). Given the
public J the release is then a discrete Gaussian mechanism, whose profile is the continuous one with
the same sensitivity plus a rounding slack that the calibration pays out of delta
(:mod:`tsdp.accounting.discrete`).
``float``: numpy's N(0, sigma^2), for experiments only.

The package: :mod:`.settings` (accountings, participation bounds, kernels, checks), :mod:`.sampling`
(the sampled steps, the noise, the interpolation), :mod:`.accounting` (theorems and claim parts),
:mod:`.maps` (the privacy maps: public setting -> claim), :mod:`.release` (the two releases, which call the
maps), :mod:`.entries` (the registry entries).
"""

import importlib

# name -> the submodule that defines it; loaded on first use (PEP 562), so that the registry's light
# entries (.entries) do not load the accounting and scipy.stats with them
_HOMES = {
    **dict.fromkeys(("THEOREM_CONDITIONAL", "THEOREM_EXACT", "THEOREM_PAPER_FILTER", "THEOREM_PAPER_SUBSAMPLE",
                     "_analytic_sigma", "_paper_delta"), "accounting"),
    **dict.fromkeys(("release_filter_subsample", "release_subsample"), "release"),
    **dict.fromkeys(("filter_subsample_map", "subsample_map"), "maps"),
    **dict.fromkeys(("FILTER_SUBSAMPLE", "SUBSAMPLE", "FilterSubsample", "Subsample"), "entries"),
    **dict.fromkeys(("_noisy_interpolation", "check_sample_size", "draw_sample_mask", "interpolate",
                     "nonempty_probability"), "sampling"),
    **dict.fromkeys(("FILTER_ACCOUNTING", "SUBSAMPLE_ACCOUNTING", "ContributionBounds", "participation_bounds",
                     "resolve_kernel"), "settings"),
}
_SUBMODULES = ("accounting", "entries", "maps", "release", "sampling", "settings")

__all__ = sorted(n for n in _HOMES if not n.startswith("_"))


def __getattr__(name: str):
    if name in _SUBMODULES:
        return importlib.import_module(f"{__name__}.{name}")
    if name in _HOMES:
        return getattr(importlib.import_module(f"{__name__}.{_HOMES[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

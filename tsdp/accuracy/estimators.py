"""Accuracy of the user-level mean estimators (Gupta et al.) and what DP-SGD training releases.

Mean estimators: every released estimate is ``stat_g + Lap(b_g)``, ``b_g`` the group's Laplace
scale (the ``laplace_scale`` column of the output, public). For LEVY and QUANTILE the private
median or quantiles (exponential mechanism) choose the clipping interval [a, b] first, and
``b_g = 2 Delta_s (b - a) / (n eps)``: given the released scale, the estimate's noise is exactly
Lap(b_g), so ``b_g ln(1/alpha)`` is an exact (1 - alpha) half-width per group. The selection step's
randomness reaches the estimate only through the interval: it sets the noise scale (accounted
above) and the clipping bias, which depends on the data (``--evaluate``). Before any data is read,
``b - a <= upper - lower`` bounds the scale for a group of n arrays (:func:`mean_plan`).
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np

from tsdp.accuracy import intervals as iv
from tsdp.accounting.samplers import Sampler, sampler_of
from tsdp.accuracy.result import Accuracy

MEAN_COVERS = ("noise only: the Laplace noise of each estimate given its released scale (laplace_scale column); "
               "the clipping of values to the private interval [a, b] (levy, quantile) or of counts to m_ub "
               "adds a bias that depends on the data (measure it with --evaluate)")


def mean_groups(scales, alpha: float, granularities=None) -> Accuracy:
    """Half-width of each group's estimate: ``laplace_scale x ln(1/alpha)`` (exact), plus the group's
    lattice step g for the hardened sampler (``granularities``): its noise is g times a discrete
    Laplace, and |X| - g is dominated by the continuous Laplace of the same scale
    (:func:`tsdp.accuracy.mechanisms.on_lattice`), so the sum is a bound."""
    alpha = iv.check_alpha(alpha)
    widths = np.asarray(scales, dtype=np.float64) * math.log(1.0 / alpha)
    formula = "b_g ln(1/alpha), b_g the group's laplace_scale (Laplace mechanism, Gupta et al. Thm. II.1)"
    exact, method = True, "analytic"
    if granularities is not None:
        g = np.asarray(granularities, dtype=np.float64)
        widths = widths + g
        formula += (f"; + g_g, the group's lattice step (hardened sampler, largest {float(g.max()):.6g}): a bound, "
                    "exact coverage to within one lattice step")
        exact, method = False, "analytic bound"
    summary = None
    if widths.size > 1:
        summary = {"min": float(widths.min()), "median": float(np.median(widths)), "max": float(widths.max())}
    return Accuracy(alpha, "group", "each group estimate", float(widths.max()), method, formula,
                    exact=exact, summary=summary, covers=MEAN_COVERS)


def mean_plan(algorithm: str, grouping: str, epsilon: float, lower: float, upper: float, alpha: float,
              sampler: "str | Sampler" = "float", arrays: int | None = None) -> Accuracy:
    """Before the data is read: the half-width for a group of n arrays is at most C / n (bound).

    C = ln(1/alpha) x {Delta_s R / eps (array-averaging), 2 Delta_s R / eps (levy, quantile)},
    R = upper - lower, Delta_s = 1 (bestfit) or 2 (wraparound); the private interval can only
    narrow R. BASELINE's scale R m_max / (eps sum m_l) depends on per-user counts, stated as such.
    The hardened sampler adds at most (ln(1/alpha) / eps_mean + 1) g per group, g its lattice step
    (the scale grows from Delta / eps_mean to at most (Delta + g) / eps_mean, and :func:`mean_groups`
    adds g), which the statement names; exact coverage is then a bound.
    ``arrays`` (private participation: K public arrays in every group) fixes n = K.
    """
    acc = _mean_plan(algorithm, grouping, epsilon, lower, upper, alpha, arrays)
    if not sampler_of(sampler).hardened:  # no lattice: the Laplace interval as it is
        return acc
    eps_mean = epsilon if algorithm in ("baseline", "array-averaging") else epsilon / 2
    extra = (f"; hardened sampler: plus at most (ln(1/alpha) / {eps_mean:g} + 1) g per group, g the group's "
             "lattice step (by default at most 2^-20 of its noise scale)")
    return replace(acc, formula=acc.formula + extra, exact=False,
                   statement=acc.statement.replace(" with ", " with at least ", 1).replace(" (noise only)", extra + " (noise only)"))


def _mean_plan(algorithm: str, grouping: str, epsilon: float, lower: float, upper: float, alpha: float,
               arrays: int | None = None) -> Accuracy:
    alpha = iv.check_alpha(alpha)
    width = upper - lower
    log = math.log(1.0 / alpha)
    ds = 2 if grouping == "wraparound" else 1  # (hash: private participation, one array per user)
    if algorithm == "baseline":
        return Accuracy(alpha, "group", "each group estimate", None, "analytic",
                        "b = R m_max / (eps sum_l m_l): ln(1/alpha) R / eps times the largest user's share "
                        "of the group's records", covers=MEAN_COVERS,
                        statement=(f"each group estimate within ±{log * width / epsilon:.4g} x (largest user's "
                                   "records / group's records) with "
                                   f"{100 * (1 - alpha):.4g}% probability (noise only)"))
    c = log * ds * width / epsilon * (1.0 if algorithm == "array-averaging" else 2.0)
    if arrays is not None:
        k = int(arrays)
        return Accuracy(alpha, "group", "each group estimate", c / k, "analytic" if algorithm == "array-averaging"
                        else "analytic bound",
                        f"C / K, C = ln(1/alpha) x {'R / eps' if algorithm == 'array-averaging' else '2 R / eps'} "
                        f"= {c:.6g}, K = --arrays {k}", exact=algorithm == "array-averaging", covers=MEAN_COVERS,
                        statement=(f"each group estimate within ±{c / k:.4g} (K = {k} arrays) with "
                                   f"{100 * (1 - alpha):.4g}% probability (noise only)"))
    return Accuracy(alpha, "group", "each group estimate", None, "analytic bound",
                    f"C / n, C = ln(1/alpha) x {'Delta_s R / eps' if algorithm == 'array-averaging' else '2 Delta_s R / eps'} "
                    f"= {c:.6g} (n: arrays in the group)", exact=algorithm == "array-averaging", covers=MEAN_COVERS,
                    statement=(f"each group estimate within ±{c:.4g}/n for a group of n arrays (±{c / 10:.4g} at "
                               f"n = 10, ±{c / 100:.4g} at n = 100) with {100 * (1 - alpha):.4g}% probability "
                               "(noise only)"))


def forecast_model(alpha: float) -> Accuracy:
    """DP-SGD releases model weights and forecasts, neither of which is 'value + noise'."""
    return no_interval(alpha, "model", "the trained model", "DP-SGD (noisy clipped gradients)",
                       "no noise interval: the release is a trained model and its forecasts; the gradient noise is "
                       "not a released value, and the forecasts' accuracy is measured on held-out data (custodian "
                       "file, --evaluate-only), which is not publishable")


def flip_filter(alpha: float) -> Accuracy:
    """FLIP (McElroy et al.) releases the series passed through a secret random all-pass filter: no
    value is 'value + noise', so there is no noise interval (and FLIP is not differential privacy)."""
    return no_interval(alpha, "series", "each filtered series", "all-pass filtering (McElroy et al.)",
                       "no noise interval: FLIP releases each series passed through a secret random all-pass "
                       "filter (no additive noise; not differential privacy); its distortion is data-dependent and "
                       "measured by the D_path and D_ACF figures (steward only)")


def no_interval(alpha: float, target: str, scope: str, how: str, text: str) -> Accuracy:
    """The accuracy block of a release that has no per-value noise distribution, saying why."""
    alpha = iv.check_alpha(alpha)
    return Accuracy(alpha, target, scope, None, "not applicable", f"{how}; no per-value noise distribution",
                    covers=text, statement=text)

"""Accuracy from public parameters, and the choice of strategy (``auto``).

The noise of output i at step t is ``(B_i z)_t`` with z independent of s.d. sigma on every encoded
value, so its standard deviation is exactly ``sigma ||B_{i,t}||_2`` (for the hardened sampler the
discrete Gaussian's variance is at most sigma^2, Canonne, Kamath and Steinke 2020, and the lattice
rounding of each encoded value moves it by at most g/2, a fraction ~2^-21 of sigma). The
(1 - alpha) half-width is the normal quantile times that s.d.

``choose`` compares candidates on the requested outputs only: for each the RMSE over the horizon,
``sigma sqrt(mean_t ||B_{i,t}||^2)``, and the expected squared error of the stacked workload,
``sum_i w_i RMSE_i^2`` (the outputs are counts in the same unit; weights ``w_i`` default to 1; the
score reported is that total relative to independent noise's). Independent noise (score 1) is always a candidate, so ``auto`` is never worse than it on
the total, and with a single output never worse on that output. Requesting ``daily`` alone keeps C = I (no factorization beats it there).
Ties go to the simpler strategy (the order of :data:`CANDIDATE_ORDER`).
"""

from __future__ import annotations

import numpy as np
from scipy import special

from tsdp.errors import UsageError
from tsdp.mechanisms.continual.factorization import factorization
from tsdp.mechanisms.continual.privacy import privacy_map
from tsdp.mechanisms.continual.setting import STRATEGIES, StreamSetting
from tsdp.mechanisms.continual.toeplitz import BAND_CANDIDATES
from tsdp.mechanisms.continual.tree import MAX_TREE_HORIZON

CANDIDATE_ORDER = ("independent", "toeplitz", "banded", "tree")
AUTO_TREE_HORIZON = 512  # auto considers the tree up to this horizon (its decoders cost O(T^2) to plan)


def normal_quantile(alpha: float) -> float:
    if not 0 < alpha < 1:
        raise UsageError(f"--alpha must be in (0, 1), got {alpha}")
    return float(-special.ndtri(alpha / 2))


def accuracy(setting: StreamSetting, alpha: float = 0.05) -> dict[str, dict[str, np.ndarray]]:
    """Per output: ``{"sd": s.d. at each step (T,), "half_width": (1 - alpha) half-width (T,)}``."""
    sigma = privacy_map(setting).sigma
    z = normal_quantile(alpha)
    fac = factorization(setting.strategy, setting.horizon, setting.band)
    out = {}
    for output in setting.outputs:
        sd = sigma * fac.row_norms(output)
        out[output] = {"sd": sd, "half_width": z * sd}
    return out


def summary(setting: StreamSetting, alpha: float = 0.05) -> dict[str, dict[str, float]]:
    """Per output: RMSE over the horizon, s.d. at the last step, and the RMS half-width."""
    z = normal_quantile(alpha)
    out = {}
    for output, acc in accuracy(setting, alpha).items():
        rmse = float(np.sqrt(np.mean(acc["sd"] ** 2)))
        out[output] = {"rmse": rmse, "final_sd": float(acc["sd"][-1]), "half_width_rms": z * rmse}
    return out


def candidates(base: dict) -> list[StreamSetting]:
    """Every strategy auto compares for these public parameters (independent first)."""
    horizon = base["horizon"]
    out = [StreamSetting(**{**base, "strategy": "independent", "band": None})]
    if horizon > 1:
        out.append(StreamSetting(**{**base, "strategy": "toeplitz", "band": None}))
        out += [StreamSetting(**{**base, "strategy": "banded", "band": b}) for b in BAND_CANDIDATES if b < horizon]
    if 1 < horizon <= min(AUTO_TREE_HORIZON, MAX_TREE_HORIZON):
        out.append(StreamSetting(**{**base, "strategy": "tree", "band": None}))
    return out


def choose(*, strategy: str = "auto", band: int | None = None, alpha: float = 0.05,
           weights: dict[str, float] | None = None, **public) -> tuple[StreamSetting, list[dict]]:
    """Resolve ``strategy`` (``auto``: the smallest score, module docstring) and return the resolved
    setting with the comparison table (one row per candidate: strategy, band, sigma, score, chosen,
    and per output its RMSE, last-step s.d. and RMS (1 - alpha) half-width). ``public`` are the other
    :class:`StreamSetting` fields; an explicit strategy is returned as given (``banded`` without a
    band takes the auto band). ``weights``: optional weight per output in the stacked objective."""
    if strategy not in ("auto", *STRATEGIES):
        raise UsageError(f"stream strategy must be one of auto, {', '.join(STRATEGIES)}, got {strategy!r}")
    base = {**public, "outputs": public["outputs"]}
    settings = candidates(base)
    if strategy != "auto" and not any(c.strategy == strategy and (band is None or c.band == band) for c in settings):
        settings.append(StreamSetting(**{**base, "strategy": strategy, "band": band}))
    weight = _weights(weights, settings[0].outputs)
    rows = []
    reference = summary(settings[0], alpha)
    for cand in settings:
        figures = summary(cand, alpha)
        score = float(sum(weight[o] * figures[o]["rmse"] ** 2 for o in cand.outputs)
                      / sum(weight[o] * reference[o]["rmse"] ** 2 for o in cand.outputs))
        rows.append({"strategy": cand.strategy, "band": cand.band, "sigma": privacy_map(cand).sigma,
                     "l2_sensitivity": privacy_map(cand).l2_sensitivity, "score": score,
                     "outputs": figures, "chosen": False})
    pool = [i for i, c in enumerate(settings)
            if strategy == "auto" or (c.strategy == strategy and (band is None or c.band == band))]
    best = min(pool, key=lambda i: (rows[i]["score"], CANDIDATE_ORDER.index(settings[i].strategy)))
    rows[best]["chosen"] = True
    return settings[best], rows


def _weights(weights: dict[str, float] | None, outputs: tuple[str, ...]) -> dict[str, float]:
    if weights is None:
        return {o: 1.0 for o in outputs}
    unknown = set(weights) - set(outputs)
    if unknown:
        raise UsageError(f"weights name output(s) not requested: {', '.join(sorted(unknown))}")
    out = {o: float(weights.get(o, 1.0)) for o in outputs}
    bad = {o: w for o, w in out.items() if not (w > 0 and np.isfinite(w))}
    if bad:
        raise UsageError(f"weights must be positive and finite, got {bad}")
    return out

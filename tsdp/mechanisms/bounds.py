"""Contribution bounds chosen privately: ``--max-per-step auto`` and ``--max-steps auto`` (issue 33).

A steward who guesses the caps of raw events can drop half the data (the README's events example:
18,556 of 35,668 rows at M = 2). Like PipelineDP's and Tumult's tuners, tsdp instead spends a stated
share of the budget on a private quantile of the users' contributions and enforces the cap it
selects.

Statistics (one per user, from that user's rows only, once the caps that are fixed hold; see
:func:`tsdp.engine.kernel.contribution_profile`): for M the most events the user has in one
(series, bucket) cell, for I the most buckets the user has in one series.

Selection: the exponential mechanism (McSherry and Talwar 2007, Theorem 6) over a public grid of
candidates c_1 < ... < c_k (M: the powers of two 1 .. 4096; I: the powers of two below T, and T).
For the level q = a/b (a fraction) the score of c_j is how far the q-quantile of the statistics
lies outside the bin (c_{j-1}, c_j], in users (c_0 = 0):

    s_j = max(b L_j - a n, a n - b R_j, 0),   L_j = #{stat <= c_{j-1}},  R_j = #{stat <= c_j},

n the number of users; s_j = 0 for the candidate whose bin holds the quantile, and it grows with
every user between. ``Pr[c_j] proportional to 2^-j exp(-eps s_j / (2 b))``: the public base measure
2^-j (each candidate doubles the cap, and with it the release's noise) prefers the smaller cap
among near ties, above all among the candidates above every user's statistic, whose scores are
equal; a data-independent base measure cancels in the ratio of two neighbours' probabilities. One
user added, removed or substituted moves L_j, R_j and n by at most 1 each, so each term of s_j by
at most max(a, b - a) <= b: the selection is eps-DP (pure). It is sampled exactly: a candidate is
proposed from the base measure (fair bits), and accepted with probability
exp(-eps (s_j - min s) / (2 b)) by an exact Bernoulli (:func:`tsdp.mechanisms.discrete.bernoulli_exp`).

Composition: the release that follows is (eps_release, delta)-DP for every cap it may be given (its
noise is calibrated to the selected cap, which it then enforces), so by basic composition, which
holds for adaptively chosen mechanisms (Dwork and Roth 2014, Theorem 3.16), selection and release
together are (eps_release + eps_selection, delta)-DP; two auto caps split eps_selection evenly. The
claim states exactly that sum (:func:`with_selection`) and records the selection as ``exponential``
mechanism events; the selected caps are outputs of the mechanism and are published in the report.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from fractions import Fraction
from typing import TYPE_CHECKING

from tsdp.accounting.claim import MechanismEvent, PrivacyClaim

THEOREM = ("contribution bounds chosen privately: exponential mechanism (McSherry and Talwar 2007, Theorem 6) "
           "on Smith's quantile score over a public grid; basic composition with the release, adaptively "
           "(Dwork and Roth 2014, Theorem 3.16)")
PER_STEP_GRID = tuple(2 ** k for k in range(13))  # 1 .. 4096 events per cell
CAPS = ("max_per_step", "max_steps")
DEFAULT_SHARE = 0.1  # of epsilon, per cap chosen (0.2 when both are)
DEFAULT_QUANTILE = 0.9
QUANTILE_DENOMINATOR = 1000  # q is used as the nearest fraction a/b with b <= 1000
if TYPE_CHECKING:  # numpy loads when a selection runs: account verify checks a record without it
    import numpy as np

STATISTIC = {"max_per_step": "the most events the user keeps in one (series, bucket) cell",
             "max_steps": "the most buckets the user keeps in one series"}


def steps_grid(n_steps: int) -> tuple[int, ...]:
    """The candidates of --max-steps auto: the powers of two below T, and T."""
    if n_steps < 1:
        raise ValueError(f"a grid of {n_steps} buckets has no candidate")
    return tuple(2 ** k for k in range(max(0, math.ceil(math.log2(n_steps))) + 1) if 2 ** k < n_steps) + (n_steps,)


def grid_for(cap: str, n_steps: int) -> tuple[int, ...]:
    """The public candidate grid of ``cap``."""
    return PER_STEP_GRID if cap == "max_per_step" else steps_grid(n_steps)


def quantile_fraction(q: float) -> Fraction:
    """``q`` as the fraction a/b (b <= 1000) the score uses; ValueError outside (0, 1)."""
    if isinstance(q, bool) or not isinstance(q, (int, float)) or not 0.0 < float(q) < 1.0:
        raise ValueError(f"--bound-quantile must be in (0, 1), got {q!r}")
    f = Fraction(float(q)).limit_denominator(QUANTILE_DENOMINATOR)
    if not 0 < f < 1:
        raise ValueError(f"--bound-quantile {q!r} rounds to {f}, outside (0, 1)")
    return f


def scores(histogram: np.ndarray, q: Fraction) -> np.ndarray:
    """Integer scores ``max(b L_j - a n, a n - b R_j, 0)`` of the k candidates from the (k + 1)-bin
    histogram (module docstring)."""
    import numpy as np

    histogram = np.asarray(histogram, dtype=np.int64)
    n = int(histogram.sum())
    at_most = np.cumsum(histogram[:-1])  # R_j
    below = at_most - histogram[:-1]  # L_j
    a, b = q.numerator, q.denominator
    return np.maximum(np.maximum(b * below - a * n, a * n - b * at_most), 0)


def log_probabilities(histogram: np.ndarray, q: Fraction, epsilon: float) -> np.ndarray:
    """The exact selection probabilities (log) of every candidate, for tests and audits."""
    import numpy as np
    from scipy.special import logsumexp

    s = scores(histogram, q)
    logits = -np.arange(s.size) * math.log(2.0) - epsilon * s / (2.0 * q.denominator)
    return logits - logsumexp(logits)


def choose(histogram: np.ndarray, q: Fraction, epsilon: float, rng: np.random.Generator) -> int:
    """Index of the candidate the exponential mechanism selects, sampled exactly (module docstring):
    propose j with probability proportional to 2^-j (the number of fair bits 0 before the first 1,
    redrawn beyond the grid), accept with probability exp(-c (s_j - min s)), c = eps / (2 b)."""
    from tsdp.mechanisms.discrete import bernoulli_exp

    s = scores(histogram, q)
    excess = s - s.min()
    c = epsilon / (2.0 * q.denominator)
    while True:
        j = 0
        while j < s.size and rng.integers(0, 2) == 0:
            j += 1
        if j < s.size and bernoulli_exp(rng, c, excess[j:j + 1])[0]:
            return j


@dataclass(frozen=True)
class Choice:
    """One cap chosen privately: its grid, quantile, budget and the candidate selected."""

    cap: str
    grid: tuple[int, ...]
    quantile: Fraction
    epsilon: float
    chosen: int

    def event(self) -> MechanismEvent:
        """The selection as a mechanism event: score sensitivity b, weights exp(-s / t), t = 2 b / eps."""
        return selection_event(self.epsilon, self.quantile)

    def to_dict(self) -> dict:
        return {"chosen": self.chosen, "candidates": list(self.grid), "quantile": float(self.quantile),
                "quantile_fraction": f"{self.quantile.numerator}/{self.quantile.denominator}",
                "epsilon": self.epsilon, "statistic": STATISTIC[self.cap]}


def selection_event(epsilon: float, q: Fraction) -> MechanismEvent:
    """``exponential`` event of an eps-DP selection with score sensitivity b: noise t = 2 b / eps."""
    b = float(q.denominator)
    return MechanismEvent("exponential", b, 2.0 * b / epsilon, 1)


def select(histograms: dict[str, np.ndarray], grids: dict[str, tuple[int, ...]], q: Fraction, epsilon: float,
           rng: np.random.Generator) -> dict[str, Choice]:
    """One :class:`Choice` per cap in ``histograms``; ``epsilon`` (the selection's share) split evenly."""
    each = epsilon / len(histograms)
    return {cap: Choice(cap, grids[cap], q, each, grids[cap][choose(histograms[cap], q, each, rng)])
            for cap in CAPS if cap in histograms}


def with_selection(claim: PrivacyClaim, choices: dict[str, Choice], share: float) -> PrivacyClaim:
    """The release's claim composed with the selection of its caps (module docstring): epsilon is the
    release's plus the selection's, the events gain one ``exponential`` event per cap, the theorem
    names the selection, and ``parameters.bound_selection`` records what was chosen (public)."""
    spent = sum(c.epsilon for c in choices.values())
    record = {"share": share, "epsilon": spent, "release_epsilon": claim.epsilon,
              "composition": "basic: epsilon = release_epsilon + epsilon (the selection is pure DP)",
              **{cap: choice.to_dict() for cap, choice in choices.items()}}
    return replace(claim, epsilon=claim.epsilon + spent,
                   events=claim.events + tuple(choices[c].event() for c in CAPS if c in choices),
                   theorem=f"{claim.theorem}; {THEOREM}",
                   parameters={**claim.parameters, "bound_selection": record})

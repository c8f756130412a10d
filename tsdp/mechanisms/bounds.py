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

``--max-norm auto`` (the L2 norm C of each user's cell totals, :mod:`tsdp.engine.events` rule 4)
aims not at a quantile but at the cap where the error it removes balances the noise it adds. Raising
C by dC adds |N(0, (sigma_1 dC)^2)| noise to each of the K released cells, about sqrt(2/pi) sigma_1 K dC
in total (sigma_1: the release's noise per unit of L2 sensitivity), and shrinks the vector x_u of each
user above C less, giving back r_u dC of their total (r_u = ||x_u||_1 / ||x_u||_2) to the cells. The
first-order optimum is where the users above C weigh sum r_u = m0 = sqrt(2/pi) sigma_1 K. In integer
units (weights w_u = floor(8 min(r_u, 4)), target t = round(8 m0)), with G_j the weight of the users
whose norm exceeds c_j (G_{-1} all users'), the score of c_j is

    s_j = max(G_j - t, t - G_{j-1}, 0),

0 where the balance point lies in (c_{j-1}, c_j]. One user added, removed or substituted moves each
G_j by at most Delta = floor(8 min(sqrt(n), 4)) for the n cells one user may touch (r_u <= sqrt(n_u)
by Cauchy-Schwarz; the cap 4 keeps Delta small at the price of under-weighing users spread evenly
over more than 16 cells, which makes the rule choose a smaller C, never a larger one). The
candidates are c_j = V 2^(j/4), j = 0 .. 64 (V: --value-bound, 1 for counts), with the public base
measure 2^(-3 j / 4), proportional to c_j^-3: the noise grows with C while the bias it removes
shrinks, so among candidates the score cannot tell apart (above all, those above every user) the
smaller is preferred. ``Pr[c_j] proportional to 2^(-3j/4) exp(-eps s_j / (2 Delta))`` is eps-DP (a
data-independent base measure cancels in the ratio of neighbours' probabilities); it is sampled
exactly: j proposed uniformly, accepted with probability 2^(-3j/4) exp(-eps (s_j - min s) / (2 Delta))
by two exact Bernoullis. t and Delta are public: they follow from the release's epsilon, delta and
relation, the public grid and the fixed caps.

Composition: the release that follows is (eps_release, delta)-DP for every cap it may be given (its
noise is calibrated to the selected cap, which it then enforces). For the Gaussian mechanism the
selections and the release compose exactly (:mod:`tsdp.accounting.bounded_range`: the exponential
mechanism is bounded-range, so dominated by generalized randomized response, and the release's
Gaussian pair is the same for every cap): the release is calibrated at the epsilon
:func:`tsdp.accounting.bounded_range.release_epsilon` gives, which with eps_selection = 0.1 of
epsilon 1 at delta 1e-6 is 0.976 with the default lattice (0.9 by basic composition), and the
claim states --epsilon. For every cap the selection may choose, the release's mu is at most the
one calibrated at that epsilon, and a hardened sampler's rounding slack must be bounded too
(:func:`lattice_slack_share`: the composed pair lies within that total variation of the continuous
one), which the calibration reserves out of delta (:meth:`Split.of`). Every other release composes
basically, which holds for adaptively chosen mechanisms (Dwork and Roth
2014, Theorem 3.16): (eps_release + eps_selection, delta)-DP with eps_release = epsilon minus the
selection's. Two auto caps split eps_selection evenly. The claim records the rule
(:func:`with_selection`) and the selection as ``exponential`` mechanism events; the selected caps are
outputs of the mechanism and are published in the report.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from fractions import Fraction
from typing import TYPE_CHECKING

from tsdp.accounting import discrete as disc
from tsdp.accounting.claim import MechanismEvent, PrivacyClaim
from tsdp.accounting.compose import claim_backed_by_events
from tsdp.errors import NumericalError

THEOREM = ("contribution bounds chosen privately: exponential mechanism (McSherry and Talwar 2007, Theorem 6) "
           "on Smith's quantile score over a public grid")
BASIC_THEOREM = "basic composition with the release, adaptively (Dwork and Roth 2014, Theorem 3.16)"
PER_STEP_GRID = tuple(2 ** k for k in range(13))  # 1 .. 4096 events per cell
DEFAULT_SHARE = 0.1  # of epsilon, per quantile cap chosen (0.2 when both are)
NORM_SHARE = 0.15  # of epsilon, for --max-norm auto (composed exactly, a sharper choice pays: bench/bound_selection.py)
EXACT = "exact"
BASIC = "basic"
RULES = {EXACT: "exact: the selections are bounded-range and compose with the Gaussian release as dominating pairs "
                "(tsdp.accounting.bounded_range); epsilon = --epsilon",
         BASIC: "basic: epsilon = release_epsilon + epsilon (the selection is pure DP)"}
DEFAULT_QUANTILE = 0.9
QUANTILE_DENOMINATOR = 1000  # q is used as the nearest fraction a/b with b <= 1000
if TYPE_CHECKING:  # numpy loads when a selection runs: account verify checks a record without it
    import numpy as np

STATISTIC = {"max_per_step": "the most events the user keeps in one (series, bucket) cell",
             "max_steps": "the most buckets the user keeps in one series",
             "max_norm": "the L2 norm of the user's kept cell totals, weighed by floor(8 L1 / L2)"}
CAPS = ("max_per_step", "max_steps", "max_norm")
NORM_STEPS = 64  # candidates V 2^(j/4), j = 0 .. 64
WEIGHT_SCALE = 8  # = tsdp.engine.kernel.NORM_WEIGHT_SCALE (checked by the tests)
WEIGHT_CAP = 4.0  # = tsdp.engine.kernel.NORM_WEIGHT_CAP
PRIOR_RATE = 0.75 * math.log(2.0)  # base measure exp(-PRIOR_RATE j) = 2^(-3j/4) = c_j^-3 / V^-3


def steps_grid(n_steps: int) -> tuple[int, ...]:
    """The candidates of --max-steps auto: the powers of two below T, and T."""
    if n_steps < 1:
        raise ValueError(f"a grid of {n_steps} buckets has no candidate")
    return tuple(2 ** k for k in range(max(0, math.ceil(math.log2(n_steps))) + 1) if 2 ** k < n_steps) + (n_steps,)


def norm_grid(value_bound: float | None = None) -> tuple[float, ...]:
    """The candidates of --max-norm auto: V 2^(j/4), j = 0 .. 64 (V = ``value_bound``, 1 for counts)."""
    v = 1.0 if value_bound is None else float(value_bound)
    return tuple(v * 2.0 ** (j / 4) for j in range(NORM_STEPS + 1))


def grid_for(cap: str, n_steps: int, value_bound: float | None = None) -> tuple:
    """The public candidate grid of ``cap``."""
    if cap == "max_norm":
        return norm_grid(value_bound)
    return PER_STEP_GRID if cap == "max_per_step" else steps_grid(n_steps)


@dataclass(frozen=True)
class Balance:
    """The public constants of --max-norm auto's score (module docstring): target t and sensitivity Delta."""

    target: int
    weight_bound: int

    @classmethod
    def of(cls, sigma_per_unit: float, released_cells: int, cells_per_user: int) -> "Balance":
        """t = round(8 sqrt(2/pi) sigma_1 K) for K released cells, Delta = floor(8 min(sqrt(n), 4))."""
        if not (sigma_per_unit > 0 and math.isfinite(sigma_per_unit)) or released_cells < 1 or cells_per_user < 1:
            raise ValueError("the balance needs a positive noise scale and at least one cell")
        target = round(WEIGHT_SCALE * math.sqrt(2.0 / math.pi) * sigma_per_unit * released_cells)
        return cls(max(1, target), max(1, math.floor(WEIGHT_SCALE * min(math.sqrt(cells_per_user), WEIGHT_CAP))))

    @classmethod
    def for_release(cls, release_epsilon: float, delta: float, substitute: bool, n_series: int, n_steps: int,
                    series_per_user: int | None, max_steps: int | None) -> "Balance":
        """The constants for a Gaussian release of ``release_epsilon``, ``delta`` (sigma_1 the analytic
        Gaussian's per unit of L2 sensitivity, times sqrt(2) under substitution) on S x T released
        cells, one user touching at most min(K, S) series x min(I, T) steps (None: all)."""
        from tsdp.accounting.gaussian import analytic_sigma

        sigma = analytic_sigma(release_epsilon, delta, 1.0) * (math.sqrt(2.0) if substitute else 1.0)
        series = n_series if series_per_user is None else min(series_per_user, n_series)
        steps = n_steps if max_steps is None else min(max_steps, n_steps)
        return cls.of(sigma, n_series * n_steps, series * steps)

    def scores(self, histogram: np.ndarray) -> np.ndarray:
        """``max(G_j - t, t - G_{j-1}, 0)`` from the (k + 1)-bin weighted histogram."""
        import numpy as np

        histogram = np.asarray(histogram, dtype=np.int64)
        above = int(histogram.sum()) - np.cumsum(histogram[:-1])  # G_j
        before = np.concatenate(([int(histogram.sum())], above[:-1]))  # G_{j-1}
        return np.maximum(np.maximum(above - self.target, self.target - before), 0)

    def log_probabilities(self, histogram: np.ndarray, epsilon: float) -> np.ndarray:
        """The exact selection probabilities (log) of every candidate, for tests and audits."""
        from scipy.special import logsumexp

        import numpy as np

        s = self.scores(histogram)
        logits = -PRIOR_RATE * np.arange(s.size) - epsilon * s / (2.0 * self.weight_bound)
        return logits - logsumexp(logits)

    def choose(self, histogram: np.ndarray, epsilon: float, rng: np.random.Generator) -> int:
        """Index of the candidate selected (module docstring): proposed uniformly, accepted with
        probability exp(-PRIOR_RATE j) exp(-c (s_j - min s)), c = eps / (2 Delta), by exact Bernoullis."""
        import numpy as np

        from tsdp.mechanisms.discrete import bernoulli_exp

        s = self.scores(histogram)
        excess = s - s.min()
        c = epsilon / (2.0 * self.weight_bound)
        while True:
            j = int(rng.integers(0, s.size))
            if bernoulli_exp(rng, PRIOR_RATE, np.array([j]))[0] and bernoulli_exp(rng, c, excess[j:j + 1])[0]:
                return j


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
    grid: tuple
    quantile: Fraction
    epsilon: float
    chosen: float
    balance: Balance | None = None  # max_norm: the balance rule instead of the quantile

    def event(self) -> MechanismEvent:
        """The selection as a mechanism event: score sensitivity b, weights exp(-s / t), t = 2 b / eps."""
        if self.balance is not None:
            return exponential_event(self.epsilon, self.balance.weight_bound)
        return selection_event(self.epsilon, self.quantile)

    def to_dict(self) -> dict:
        out = {"chosen": self.chosen, "candidates": list(self.grid), "epsilon": self.epsilon,
               "statistic": STATISTIC[self.cap]}
        if self.balance is not None:
            return {**out, "rule": "balance", "target": self.balance.target,
                    "weight_bound": self.balance.weight_bound}
        return {**out, "quantile": float(self.quantile),
                "quantile_fraction": f"{self.quantile.numerator}/{self.quantile.denominator}"}


def exponential_event(epsilon: float, sensitivity: float) -> MechanismEvent:
    """``exponential`` event of an eps-DP selection with score sensitivity b: noise t = 2 b / eps."""
    return MechanismEvent("exponential", float(sensitivity), 2.0 * float(sensitivity) / epsilon, 1)


def selection_event(epsilon: float, q: Fraction) -> MechanismEvent:
    """The quantile selection's event: score sensitivity b, the quantile's denominator."""
    return exponential_event(epsilon, q.denominator)


def select(histograms: dict[str, np.ndarray], grids: dict[str, tuple], q: Fraction, epsilon: float,
           rng: np.random.Generator, balance: Balance | None = None) -> dict[str, Choice]:
    """One :class:`Choice` per cap in ``histograms``; ``epsilon`` (the selection's share) split evenly;
    ``balance`` scores the max_norm candidates."""
    each = epsilon / len(histograms)
    out = {}
    for cap in CAPS:
        if cap not in histograms:
            continue
        if cap == "max_norm":
            index = balance.choose(histograms[cap], each, rng)
            out[cap] = Choice(cap, grids[cap], q, each, grids[cap][index], balance)
        else:
            out[cap] = Choice(cap, grids[cap], q, each, grids[cap][choose(histograms[cap], q, each, rng)])
    return out


def composes_exactly(mechanism, noise: str | None) -> bool:
    """Whether a release of ``mechanism`` (a registry entry) with ``noise`` composes exactly with the
    selections (module docstring): one Gaussian mechanism on the panel's L2 sensitivity alone."""
    return bool(mechanism.norm_bounded and not mechanism.pure(noise))


def lattice_slack_share(hardened: bool, granularity: float | None, epsilon: float, delta: float,
                        cells: int) -> float | None:
    """The share of delta that bounds the release's rounding slack at its own epsilon for EVERY cap the
    selection may choose, or None when no such public bound holds (then the release composes basically).

    The float sampler has none (0). The hardened sampler's default lattice keeps the slack at most
    :data:`tsdp.accounting.discrete.SLACK_SHARE` of delta for each cap's own noise scale, unless even
    its finest lattice (sigma / g < 2^38) cannot, which no release of ``cells`` (the panel's, at least
    the values any cap lets a unit change) at ``epsilon`` meets when
    (1 + e^eps) cells 0.025 2^-76 <= SLACK_SHARE delta. A --granularity given by hand fixes g for every
    cap, so the slack grows as the chosen cap's noise shrinks: no bound."""
    if not hardened:
        return 0.0
    if granularity is not None:
        return None
    worst = disc.rounding_slack(epsilon, cells * disc.LATTICE_TV * 2.0 ** -76)
    return disc.SLACK_SHARE if worst <= disc.SLACK_SHARE * delta else None


def default_share(caps: tuple[str, ...], exact: bool) -> float:
    """The share of --epsilon spent choosing ``caps`` when --bound-selection-share is not given: 0.1 per
    cap, 0.15 for --max-norm before a release that may compose ``exact``-ly (:func:`composes_exactly`)."""
    return sum(NORM_SHARE if cap == "max_norm" and exact else DEFAULT_SHARE for cap in caps)


@dataclass(frozen=True)
class Split:
    """How --epsilon is split between the selections of the auto caps and the release."""

    rule: str  # EXACT or BASIC
    selection_epsilon: float  # the selections' total: share x --epsilon
    release_epsilon: float  # the epsilon the release is calibrated at
    caps: int  # the number of selections (the selection epsilon split evenly)

    @classmethod
    def of(cls, epsilon: float, delta: float | None, share: float, caps: int, exact: bool,
           slack_share: float | None = 0.0) -> "Split":
        """The split for a release at (``epsilon``, ``delta``) after ``caps`` selections of ``share`` x
        ``epsilon`` in all: exact when the release composes ``exact``-ly (:func:`composes_exactly`) and its
        rounding slack has a bound for every cap (``slack_share`` of delta at the release's epsilon,
        :func:`lattice_slack_share`; None: no bound). The exact calibration reserves
        RESERVE + slack_share e^eps_selection of delta: the slack at --epsilon is at most
        (1 + e^eps) / (1 + e^eps_release) <= e^eps_selection times the slack at the release's epsilon."""
        spent = epsilon * share
        if exact and delta and slack_share is not None:
            from tsdp.accounting.bounded_range import RESERVE, release_epsilon

            reserve = RESERVE + slack_share * math.exp(spent)
            if reserve < 0.5:
                return cls(EXACT, spent, release_epsilon(epsilon, delta, (spent / caps,) * caps, reserve), caps)
        return cls(BASIC, spent, epsilon - spent, caps)

    @classmethod
    def for_release(cls, epsilon: float, delta: float | None, share: float, caps: int, exact: bool,
                    hardened: bool, granularity: float | None, cells: int) -> "Split":
        """:meth:`of` with the rounding slack's bound of the release's sampler (``hardened``, a
        --granularity given or None) on a panel of ``cells`` cells (:func:`lattice_slack_share`): the
        split the release runs with and the one ``account verify`` recomputes."""
        slack = lattice_slack_share(hardened, granularity, epsilon, delta or 1.0, cells)
        return cls.of(epsilon, delta, share, caps, exact, slack)

    def claim_epsilon(self, release_claim_epsilon: float, epsilon: float) -> float:
        """The composed claim's epsilon: --epsilon when exact, the release's plus the selections' else."""
        return epsilon if self.rule == EXACT else release_claim_epsilon + self.selection_epsilon


def with_selection(claim: PrivacyClaim, choices: dict[str, Choice], share: float, split: Split,
                   epsilon: float) -> PrivacyClaim:
    """The release's claim composed with the selection of its caps (module docstring): epsilon by the
    split's rule (``epsilon``: --epsilon), the events gain one ``exponential`` event per cap, the theorem
    names the selection and the composition, and ``parameters.bound_selection`` records what was chosen
    (public). NumericalError if the events do not give the composed claim
    (:func:`tsdp.accounting.compose.claim_backed_by_events`)."""
    from tsdp.accounting import bounded_range

    spent = sum(c.epsilon for c in choices.values())
    record = {"share": share, "epsilon": spent, "release_epsilon": claim.epsilon, "composition": RULES[split.rule],
              **{cap: choice.to_dict() for cap, choice in choices.items()}}
    theorem = f"{claim.theorem}; {THEOREM}; " + (bounded_range.THEOREM if split.rule == EXACT else BASIC_THEOREM)
    composed = replace(claim, epsilon=split.claim_epsilon(claim.epsilon, epsilon),
                       events=claim.events + tuple(choices[c].event() for c in CAPS if c in choices),
                       theorem=theorem, parameters={**claim.parameters, "bound_selection": record})
    ok, detail = claim_backed_by_events(composed)
    if not ok:  # (the exact rule's calibration leaves a reserve of delta for a sampler's slack: never expected)
        raise NumericalError(f"the claim composed with the selection of the caps does not follow from its events: {detail}")
    return composed

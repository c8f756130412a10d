"""User-level mean estimation: settings, per-group release and claim (for :mod:`tsdp.api.means`).

User-level private means of Gupta, Rameshwar, Tandon and Chakraborty, "Mean Estimation with
User-Level Privacy for Spatio-Temporal IoT Datasets" (SPCOM 2024, arXiv:2401.15906); spec
``specs/mean.md``. Each group (HAT) gets one pure user-level eps-DP estimate (Def. II.1) under the
replacement relation of spec 1.2; releasing n groups is bounded by basic composition, eps * n.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from tsdp.accounting.budget import check_epsilon
from tsdp.accounting.claim import MechanismEvent, PrivacyClaim
from tsdp.accounting.discrete import LAPLACE_THEOREM, check_granularity
from tsdp.accounting.samplers import Hardened, Sampler, sampler_of
from tsdp.accounting.sensitivity import PrivacyUnit
from tsdp.caveats import Caveat
from tsdp.errors import UsageError
from tsdp.limits import MAX_MAGNITUDE
from tsdp.mean import algorithms as alg
from tsdp.mean.lattice_quantile import selection_lattice

MAX_M_UB = 2**31 - 1

ALGORITHMS = ("baseline", "array-averaging", "levy", "quantile")
GROUPINGS = ("bestfit", "wraparound", "hash")  # hash: private participation only
QUANTILE_MODES = ("fixed", "eps-dependent")
TAU_KS = ("kbar", "k")
PARTICIPATIONS = ("private", "public")
NEIGHBOURING_PRIVATE = ("add or remove one user with all of their records, or replace all records of one user by any "
                        "others (any number, in any of the declared groups); which users appear in which groups, and "
                        "with how many records, is private")
NEIGHBOURING_PUBLIC = ("replace all values of one user; the user set, the groups each user appears in and the user's "
                       "record count in each group (per-group participation) are public")
NEIGHBOURING = NEIGHBOURING_PUBLIC  # the paper's relation (Def. II.1), which the core functions assume
RELATIONS = {"private": "add-remove", "public": "substitute"}
MAX_ARRAYS = 2**24  # arrays per group under private participation (K x groups array means are held)


def neighbouring(participation: str) -> str:
    """The neighbouring relation in words that a run with ``--participation`` states (and verify expects)."""
    return NEIGHBOURING_PRIVATE if participation == "private" else NEIGHBOURING_PUBLIC
DEFAULT_QUANTILES = (0.1, 0.9)
DEFAULT_GAMMA = 0.2


def _finite(x) -> bool:
    try:
        return math.isfinite(float(x))
    except (TypeError, ValueError):
        return False


@dataclass(frozen=True)
class MeanSettings:
    """Public parameters of one ``mean-estimate`` run; validated on construction (spec 4 rules
    3, 6, 7, 8), raising :class:`UsageError` naming the option.

    Options that only some algorithms read are errors with the others when set to a non-default
    value (rule 8): ``quantile_mode``/``quantiles`` (quantile only; ``quantiles`` in fixed mode
    only), ``gamma``/``tau_k`` (levy only), ``m_ub`` and ``grouping`` (not baseline)."""

    epsilon: float
    upper: float
    lower: float = 0.0
    algorithm: str = "quantile"
    grouping: str = "bestfit"
    m_ub: str | int = "auto"
    quantile_mode: str = "fixed"
    quantiles: tuple[float, float] = DEFAULT_QUANTILES
    gamma: float = DEFAULT_GAMMA
    tau_k: str = "kbar"
    sampler: Sampler = Hardened()  # a --sampler name is read by sampler_of (with granularity)
    granularity: float | None = None
    participation: str = "public"  # the core functions' default: the paper's relation (per-run counts given)
    arrays: int | None = None      # private participation: K, the public number of arrays per group

    def __post_init__(self) -> None:
        def bad(option: str, value, hint: str) -> UsageError:
            return UsageError(f"{option} {value!r}: {hint}")

        if isinstance(self.epsilon, bool) or not _finite(self.epsilon) or float(self.epsilon) <= 0:
            raise bad("--epsilon", self.epsilon, "must be a finite number > 0")
        check_epsilon(float(self.epsilon))  # the range every command calibrates for
        if isinstance(self.upper, bool) or not _finite(self.upper):
            raise bad("--upper", self.upper, "must be a finite public bound (never derived from the data)")
        if isinstance(self.lower, bool) or not _finite(self.lower):
            raise bad("--lower", self.lower, "must be a finite public bound")
        for option, bound in (("--upper", self.upper), ("--lower", self.lower)):
            if abs(float(bound)) > MAX_MAGNITUDE:
                raise bad(option, bound, "must lie within ±2**53, where float64 holds the sums and the noise "
                                         "exactly; rescale the values")
        if float(self.upper) <= float(self.lower):
            raise UsageError(f"--upper {self.upper!r} must be greater than --lower {self.lower!r}")
        object.__setattr__(self, "epsilon", float(self.epsilon))
        object.__setattr__(self, "upper", float(self.upper))
        object.__setattr__(self, "lower", float(self.lower))
        for option, value, allowed in (("--algorithm", self.algorithm, ALGORITHMS),
                                       ("--grouping", self.grouping, GROUPINGS),
                                       ("--quantile-mode", self.quantile_mode, QUANTILE_MODES),
                                       ("--tau-k", self.tau_k, TAU_KS)):
            if value not in allowed:
                raise bad(option, value, "must be one of " + ", ".join(allowed))
        m_ub = self.m_ub
        if isinstance(m_ub, str) and m_ub.strip().lstrip("+").isdigit():
            m_ub = int(m_ub.strip())
        if isinstance(m_ub, (int, np.integer)) and not isinstance(m_ub, bool):
            if m_ub < 1:
                raise bad("--m-ub", self.m_ub, "an integer cap must be >= 1")
            if m_ub > MAX_M_UB:  # records of one user; larger caps overflow the C integers of the grouping
                raise bad("--m-ub", self.m_ub, f"an integer cap must be at most {MAX_M_UB:,} records per user")
            m_ub = int(m_ub)
        elif m_ub not in ("auto", "median", "opt"):
            raise bad("--m-ub", self.m_ub, "must be auto, median, opt or a positive integer")
        object.__setattr__(self, "m_ub", m_ub)
        try:
            q = tuple(float(v) for v in self.quantiles)
        except (TypeError, ValueError):
            raise bad("--quantiles", self.quantiles, "must be two levels q_lo,q_hi") from None
        if len(q) != 2 or not all(map(math.isfinite, q)) or not (0.0 <= q[0] < q[1] <= 1.0):
            raise bad("--quantiles", self.quantiles, "levels must satisfy 0 <= q_lo < q_hi <= 1")
        object.__setattr__(self, "quantiles", q)
        if isinstance(self.gamma, bool) or not _finite(self.gamma) or not 0 < float(self.gamma) < 1:
            raise bad("--gamma", self.gamma, "must lie in (0, 1)")
        object.__setattr__(self, "gamma", float(self.gamma))
        algo = self.algorithm
        if algo != "quantile":
            if self.quantile_mode != "fixed":
                raise UsageError(f"--quantile-mode is only used by --algorithm quantile, not {algo}")
            if q != DEFAULT_QUANTILES:
                raise UsageError(f"--quantiles is only used by --algorithm quantile, not {algo}")
        elif self.quantile_mode == "eps-dependent" and q != DEFAULT_QUANTILES:
            raise UsageError("--quantiles is only used with --quantile-mode fixed, not eps-dependent")
        if algo != "levy":
            if self.gamma != DEFAULT_GAMMA:
                raise UsageError(f"--gamma is only used by --algorithm levy, not {algo}")
            if self.tau_k != "kbar":
                raise UsageError(f"--tau-k is only used by --algorithm levy, not {algo}")
        object.__setattr__(self, "sampler", sampler_of(self.sampler, self.granularity))
        if self.granularity is not None:
            object.__setattr__(self, "granularity", check_granularity(self.granularity))
        if self.participation not in PARTICIPATIONS:
            raise bad("--participation", self.participation, "must be private or public")
        if self.participation == "private":
            self._check_private()
        elif self.arrays is not None:
            raise UsageError("--arrays is only used with --participation private (public participation packs "
                             "users into arrays by their record counts: --grouping)")
        elif self.grouping == "hash":
            raise bad("--grouping", self.grouping, "hash is the grouping of --participation private")
        if algo == "baseline":
            if self.m_ub != "auto":
                raise UsageError("--m-ub is not used by --algorithm baseline (it does not cap counts)")
            if self.grouping != "bestfit":
                raise UsageError("--grouping is not used by --algorithm baseline (it forms no arrays)")

    def _check_private(self) -> None:
        """--participation private: no rule may read the per-user counts (module docstring of
        :mod:`tsdp.mean.algorithms`): BASELINE, the median/opt caps, BESTFIT/WRAPAROUND and tau's K
        are refused; K (--arrays) and an integer m_UB are public parameters."""
        algo = self.algorithm
        if algo == "baseline":
            raise UsageError("--algorithm baseline needs --participation public: its sensitivity U m_max / sum m_l "
                             "reads the per-user record counts; use array-averaging, levy or quantile")
        if not isinstance(self.m_ub, int):
            raise UsageError(f"--m-ub {self.m_ub!r}: with --participation private the per-user cap is a public "
                             "integer (the median and opt rules read the per-user record counts); give e.g. "
                             "--m-ub 10, or --participation public")
        k = self.arrays
        if k is None:
            raise UsageError("--arrays is required with --participation private: the public number K of arrays "
                             "per group, over which users are spread by a hash of their id (e.g. --arrays 20)")
        if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or not 1 <= int(k) <= MAX_ARRAYS:
            raise UsageError(f"--arrays {k!r}: must be an integer in [1, {MAX_ARRAYS:,}]")
        object.__setattr__(self, "arrays", int(k))
        if self.grouping not in ("bestfit", "hash"):
            raise UsageError(f"--grouping {self.grouping} packs users by their record counts, which --participation "
                             "private keeps private; drop it (users go to arrays by a hash of their id) or use "
                             "--participation public")
        object.__setattr__(self, "grouping", "hash")
        if self.tau_k != "kbar":
            raise UsageError("--tau-k k reads WRAPAROUND's K, a function of the counts: with --participation "
                             "private tau uses the public --arrays")
        if algo == "quantile" and self.quantile_mode == "eps-dependent":
            from tsdp.mean.algorithms import eps_dependent_rank

            r = eps_dependent_rank(self.epsilon)
            if r >= self.arrays / 2.0:
                raise UsageError(f"--arrays {self.arrays}: too few arrays for eps-dependent quantiles (ceil(2/eps) = "
                                 f"{r} >= K/2); use --quantile-mode fixed or more --arrays")

    def budget_split(self) -> dict[str, float]:
        """Spec 1.3: the sub-budgets, which sum to epsilon exactly (powers-of-two fractions)."""
        e = self.epsilon
        if self.algorithm == "levy":
            return {"median": e / 2, "mean": e / 2}
        if self.algorithm == "quantile":
            return {"quantile_low": e / 4, "quantile_high": e / 4, "mean": e / 2}
        return {"mean": e}


@dataclass
class GroupEstimate:
    estimate: float
    laplace_scale: float
    sensitivity: float
    m_ub: int
    m_ub_rule: str
    num_arrays: int
    k_wraparound: int
    users: int
    records_total: int
    records_used: int
    m_max: int
    m_min: int
    interval: tuple[float, float] | None
    budget_split: dict[str, float]
    warnings: list[str] = field(default_factory=list)
    tau: float | None = None
    granularity: float | None = None          # hardened sampler: the group's lattice step
    rounded_sensitivity: float | None = None  # hardened sampler: (floor(sensitivity / g) + 1) g


def prepare_groups(values: np.ndarray, user_starts: np.ndarray, group_starts: np.ndarray,
                   settings: MeanSettings) -> alg.Prepared:
    """The data-dependent, non-random stage (structure and array means); see :func:`estimate_groups`."""
    return alg.prepare(values, user_starts, group_starts, algorithm=settings.algorithm,
                       grouping=settings.grouping, m_ub=settings.m_ub)


def prepare_from_runs(counts: np.ndarray, group_starts: np.ndarray, piece_sums, settings: MeanSettings,
                      user_hashes: np.ndarray | None = None) -> alg.Prepared:
    """:func:`prepare_groups` when the records are held by an engine: the public plan from the
    per-run counts (:func:`tsdp.mean.algorithms.plan_runs`), then ``piece_sums(cut1, cut2)``, the
    two piece sums of every run, which the engine computes where the records are.

    Private participation: ``user_hashes`` (a 64-bit hash of each run's user id, a function of the id
    alone) place each run in array ``hash mod K`` of its group (:func:`tsdp.mean.algorithms.plan_buckets`);
    groups may then have no runs."""
    if settings.participation == "private":
        buckets = (np.asarray(user_hashes, dtype=np.uint64) % np.uint64(settings.arrays)).astype(np.int64)
        plan = alg.plan_buckets(counts, group_starts, buckets, algorithm=settings.algorithm, m_ub=settings.m_ub,
                                arrays=settings.arrays, lower=settings.lower, upper=settings.upper)
    else:
        plan = alg.plan_runs(counts, group_starts, algorithm=settings.algorithm, grouping=settings.grouping,
                             m_ub=settings.m_ub)
    return alg.finish_plan(plan, *piece_sums(plan.cut1, plan.cut2))


def release_prepared(prep: alg.Prepared, settings: MeanSettings,
                     rng: np.random.Generator) -> alg.Released:
    return alg.release(prep, rng, epsilon=settings.epsilon, lower=settings.lower,
                       upper=settings.upper, quantile_mode=settings.quantile_mode,
                       quantiles=settings.quantiles, gamma=settings.gamma, tau_k=settings.tau_k,
                       sampler=settings.sampler, granularity=settings.granularity)


def estimate_groups(values: np.ndarray, user_starts: np.ndarray, group_starts: np.ndarray,
                    settings: MeanSettings, rng: np.random.Generator) -> list[GroupEstimate]:
    """One user-level eps-DP mean per group.

    ``values``: float64, all records sorted by group, then user, then timestamp (never by value).
    ``user_starts``: int64 offsets into ``values`` of each user run (one user's records within one
    group), length n_user_runs + 1; within a group, runs come in ascending user-id order.
    ``group_starts``: int64 offsets into ``user_starts`` of each group's first run, length
    n_groups + 1. Values must already lie in [lower, upper].

    Per-group failures raise :class:`~tsdp.mean.errors.GroupUsageError` /
    :class:`~tsdp.mean.errors.GroupDataError` with ``group_index``."""
    return estimate_prepared(prepare_groups(values, user_starts, group_starts, settings), settings, rng)


def estimate_prepared(prep: alg.Prepared, settings: MeanSettings, rng: np.random.Generator) -> list[GroupEstimate]:
    """:func:`estimate_groups` from the prepared structure and array means."""
    rel = release_prepared(prep, settings, rng)
    split = settings.budget_split()
    selection = settings.algorithm in ("levy", "quantile")
    out = []
    est = rel.estimate.tolist()
    scale = rel.laplace_scale.tolist()
    sens = rel.sensitivity.tolist()
    box = rel.interval.tolist() if rel.interval is not None else None
    tau = rel.tau.tolist() if rel.tau is not None else None
    gran = rel.granularity.tolist() if rel.granularity is not None else None
    step = rel.rounded_sensitivity.tolist() if rel.rounded_sensitivity is not None else None
    cols = [getattr(prep, k).tolist() for k in ("m_ub", "num_arrays", "k_wraparound", "users",
                                                 "records_total", "records_used", "m_max", "m_min")]
    for g in range(prep.n_groups):
        m_ub, n_arr, k_wrap, users, total, used, m_max, m_min = (col[g] for col in cols)
        warnings = []
        if selection and n_arr < 10:
            warnings.append(Caveat("few_arrays", f"only {n_arr} arrays (fewer than 10): the private "
                                   f"{'median' if settings.algorithm == 'levy' else 'quantiles'} "
                                   "and hence the clipping interval are unreliable"))
        if users == 1:
            warnings.append(Caveat("single_user", "a single user: a user-level private mean of one user is mostly noise"))
        out.append(GroupEstimate(
            estimate=est[g], laplace_scale=scale[g], sensitivity=sens[g], m_ub=m_ub,
            m_ub_rule=prep.m_ub_rule, num_arrays=n_arr, k_wraparound=k_wrap, users=users,
            records_total=total, records_used=used, m_max=m_max, m_min=m_min,
            interval=None if box is None else (box[g][0], box[g][1]),
            budget_split=dict(split), warnings=warnings,
            tau=None if tau is None else tau[g],
            granularity=None if gran is None else gran[g], rounded_sensitivity=None if step is None else step[g]))
    return out


_THEOREMS = {
    "baseline": "Gupta et al. 2024 Thm. II.1 (Laplace mechanism, user-level sensitivity "
                "U m_max / sum m_l)",
    "array-averaging": "Gupta et al. 2024 Thm. II.1 (Laplace mechanism on the array average, "
                       "sensitivity U/K-bar bestfit, U/K wraparound: one user's at most m_UB kept records "
                       "fill at most m_UB places of the two arrays they span)",
    "levy": "Gupta et al. 2024 Thm. II.1 (Laplace mechanism, eps/2) + exponential mechanism "
            "(McSherry-Talwar; private median over tau-bins, Levy et al. 2021 Alg. 6, eps/2) "
            "+ basic sequential composition (Dwork-Roth Cor. 3.15)",
    "quantile": "Gupta et al. 2024 Thm. II.1 (Laplace mechanism, eps/2) + exponential mechanism "
                "(Smith 2011 Alg. 2 private quantiles, eps/4 each) + basic sequential composition "
                "(Dwork-Roth Cor. 3.15)",
}


PRIVATE_ARRAYS = ("private participation: K = --arrays public arrays per group, a user's first m_UB records in array "
                  "hash(user id) mod K, an empty array's mean the midpoint (lower + U)/2; one user added, removed "
                  "or replaced moves one array mean of each group by at most U - lower, so Delta = (U - lower)/K for "
                  "the array average, (b - a)/K clipped, and the selection scores change by 1")


# Selection steps of a hardened run that stay floating-point (none since QUANTILE's is exact too);
# the warning below names them and what of them reaches the output.
SELECTION_FLOAT: dict[str, str] = {}


def selection_warning(algorithm: str) -> str | None:
    """What stays floating-point in a hardened run's selection step, and what of it reaches the output
    (LEVY's private median and QUANTILE's private quantiles are sampled exactly:
    :func:`tsdp.mean.selection.exact_em_argmax`, :func:`tsdp.mean.lattice_quantile.lattice_quantile`)."""
    if algorithm not in SELECTION_FLOAT:
        return None
    return (f"--algorithm {algorithm}: {SELECTION_FLOAT[algorithm]}, not by the hardened sampler; only the "
            "Laplace noise of the estimates is hardened. The selection's output is not released itself, but the "
            "clipping interval [a, b] it picks sets each estimate's laplace_scale and clipping, so the "
            "floating-point draws reach the output, quantised to the group's lattice step")


EXACT_EM = ("the exponential mechanism sampled exactly by rejection: a centre proposed uniformly (exact bounded "
            "integers) is accepted with probability exp(-(eps/2) (s_j - min s) / (2 Delta_s)) by an exact Bernoulli "
            "(uniform bits against the exactly evaluated exponential; Canonne, Kamath and Steinke 2020, Alg. 1's "
            "role), so Pr[j] is exactly proportional to exp(-(eps/2) s_j / (2 Delta_s)): eps/2-DP (McSherry-Talwar)")
EXACT_QUANTILE = ("Smith's private quantile (utility -|rank(x) - q n|) over the public lattice points x = k g in "
                  "[lower, upper), g the largest power of two <= (upper - lower) / 2^20: the exponential mechanism "
                  "over a finite public range, eps/4-DP for each quantile (McSherry-Talwar); sampled exactly, the "
                  "rank by inversion of uniform bits against exactly bounded cumulative weights (decimal fallback), "
                  "then a point uniform among its lattice points (exact bounded integers)")
GRANULARITY_RULE = ("per group: the largest power of two g <= 2^-20 min(b_0, Delta), but at least b_0 2^-24, "
                    "where Delta is the group's sensitivity and b_0 = Delta / eps_mean (public parameters only)")


def _events(settings: MeanSettings, estimates) -> tuple[MechanismEvent, ...]:
    """One Laplace event per distinct (sensitivity, scale, granularity) of the groups, with its count.

    Only for BASELINE and ARRAY-AVERAGING, whose whole release is the Laplace step: the exponential
    mechanism of LEVY/QUANTILE is not an additive-noise event, so their claims carry none (and compose
    by basic composition)."""
    if settings.algorithm not in ("baseline", "array-averaging") or estimates is None:
        return ()
    noise = estimates if isinstance(estimates, GroupNoise) else GroupNoise.of(estimates)
    hardened = settings.sampler.hardened  # its events state the rounded sensitivity and each group's lattice
    rows = np.column_stack((noise.rounded_sensitivity, noise.laplace_scale, noise.granularity) if hardened
                           else (noise.sensitivity, noise.laplace_scale))
    if rows.shape[0] == 0:
        return ()
    # distinct rows in order of first appearance, with their counts
    unique, first, counts = np.unique(rows, axis=0, return_index=True, return_counts=True)
    order = np.argsort(first, kind="stable")
    kind = settings.sampler.laplace_kind
    return tuple(MechanismEvent(kind, float(unique[i, 0]), float(unique[i, 1]), int(counts[i]),
                                granularity=float(unique[i, 2]) if hardened else None) for i in order.tolist())


@dataclass
class GroupNoise:
    """The public parameters of the released groups' Laplace noise, one entry per group: what the
    claim's events and the accuracy block need."""

    sensitivity: np.ndarray
    laplace_scale: np.ndarray
    rounded_sensitivity: np.ndarray | None = None  # hardened sampler
    granularity: np.ndarray | None = None          # hardened sampler

    @classmethod
    def of(cls, estimates) -> "GroupNoise":
        """From objects with those attributes (e.g. :class:`GroupEstimate`)."""
        def column(name):
            values = [getattr(e, name, None) for e in estimates]
            return None if any(v is None for v in values) else np.asarray(values, dtype=np.float64)

        return cls(column("sensitivity"), column("laplace_scale"), column("rounded_sensitivity"),
                   column("granularity"))

    @classmethod
    def concat(cls, parts: list["GroupNoise"]) -> "GroupNoise":
        def joined(name):
            arrays = [getattr(p, name) for p in parts]
            return None if any(a is None for a in arrays) or not arrays else np.concatenate(arrays)

        if not parts:
            return cls(np.zeros(0), np.zeros(0))
        return cls(joined("sensitivity"), joined("laplace_scale"), joined("rounded_sensitivity"), joined("granularity"))


def claim_for(settings: MeanSettings, n_groups: int, user_column: str, estimates=None, declared: dict | None = None,
              empty_groups: int = 0) -> PrivacyClaim:
    """The pure user-level claim for releasing ``n_groups`` estimates, each eps-DP.

    epsilon = eps * n_groups by basic composition (a data-independent bound: under private
    participation one user may appear in every declared group). The smaller figure that holds when
    participation is public (:func:`participation_epsilon`) is a function of the data and never part
    of the claim. ``estimates`` (the released groups: objects with ``sensitivity``, ``laplace_scale``,
    ``rounded_sensitivity`` and ``granularity``, or :class:`GroupNoise`) give the mechanism events of
    BASELINE and ARRAY-AVERAGING: their per-group sensitivities and scales are published.
    ``declared``: the declared groups' description (keys, slots), recorded in the parameters;
    ``empty_groups``: declared groups without records, released empty (public participation only)."""

    eps = settings.epsilon
    private = settings.participation == "private"
    unit = PrivacyUnit(level="user", relation=RELATIONS[settings.participation],
                       neighbouring=neighbouring(settings.participation),
                       max_per_step=settings.upper - settings.lower, id_column=user_column,
                       enforced=False)
    params = {
        "algorithm": settings.algorithm,
        "participation": settings.participation,
        "grouping": None if settings.algorithm == "baseline" else settings.grouping,
        "m_ub": None if settings.algorithm == "baseline" else settings.m_ub,
        "U": settings.upper,
        "lower": settings.lower,
        "epsilon_per_group": eps,
        "n_groups": int(n_groups),
        "epsilon_total_bound": eps * n_groups,
        "budget_split": settings.budget_split(),
        "composition": "basic sequential",
        "public_inputs": (["U", "lower", "the declared groups", "m_ub", "arrays", "each user's array: a hash of the "
                           "user id"] if private else
                          ["U", "lower", "L", "per-user counts", "per-group participation", "m_ub", "grouping"]),
        "sampler": settings.sampler.name,
    }
    if private:
        params["arrays"] = settings.arrays
    if declared is not None:
        params["declared_groups"] = dict(declared)
    if empty_groups:
        params["groups_without_records"] = int(empty_groups)
    theorem = _THEOREMS[settings.algorithm]
    if private:
        theorem += "; " + PRIVATE_ARRAYS
    if settings.sampler.hardened:
        params["granularity"] = settings.granularity
        params["granularity_rule"] = ("--granularity, the same for every group" if settings.granularity is not None
                                      else GRANULARITY_RULE)
        params["rounding"] = ("each group's statistic is rounded to a multiple of its g, so a user moves it by at "
                              "most (floor(Delta / g) + 1) g, the rounded sensitivity; laplace_scale is that over "
                              "the Laplace step's epsilon")
        theorem += "; the Laplace step: " + LAPLACE_THEOREM
        if settings.algorithm in SELECTION_FLOAT:
            params["selection_sampler"] = "float: " + SELECTION_FLOAT[settings.algorithm]
        if settings.algorithm == "levy":
            params["selection_sampler"] = "exact: " + EXACT_EM
            theorem += "; the private median: " + EXACT_EM
        if settings.algorithm == "quantile":
            params["selection_sampler"] = "exact: " + EXACT_QUANTILE
            params["selection_lattice"] = selection_lattice(settings.lower, settings.upper)
            theorem += "; the private quantiles: " + EXACT_QUANTILE
    else:
        theorem += "; numpy floating-point Laplace noise (--sampler float: not for publication)"
    if settings.algorithm == "quantile":
        params["quantile_mode"] = settings.quantile_mode
        params["quantiles"] = (list(settings.quantiles) if settings.quantile_mode == "fixed" else None)
    if settings.algorithm == "levy":
        params["gamma"] = settings.gamma
        params["tau_k"] = settings.tau_k
    return PrivacyClaim(definition="pure-dp", unit=unit, epsilon=eps * n_groups, delta=0.0,
                        mechanism=f"user-level-mean/{settings.algorithm}",
                        theorem=theorem, events=_events(settings, estimates), parameters=params)


def participation_epsilon(settings: MeanSettings, max_groups_per_user: int) -> dict:
    """eps x the largest number of groups one user appears in: the total that holds only under the
    paper's assumption that participation (which users appear in which groups, with how many
    records) is public. Both numbers are functions of the data: custodian-only, never in a report."""
    return {"max_groups_per_user": int(max_groups_per_user),
            "epsilon_total_if_participation_public": settings.epsilon * int(max_groups_per_user),
            "assumption": "valid only under the paper's assumption that participation (which users appear "
                          "in which groups, with how many records) is public"}

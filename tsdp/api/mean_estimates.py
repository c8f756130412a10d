"""The estimates of ``tsdp mean-estimate``, chunk of whole groups by chunk, and what its report says of
them: the output table, the warnings, the notes, the claim and the accuracy (:class:`ChunkedEstimates`,
used by :class:`tsdp.api.means.MeanPlan`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from tsdp.caveats import Caveat
from tsdp.mean import MeanSettings, claim_for, participation_epsilon
from tsdp.io.records import RecordSpec
from tsdp.mean.estimation import GroupNoise, neighbouring


class EstimationPlan(Protocol):
    """What the estimates need of their plan (:class:`tsdp.api.means.MeanPlan`, which builds them)."""

    options: Any
    settings: MeanSettings
    spec: RecordSpec

    @property
    def slot_length(self) -> str | None: ...

    def prepare(self, runs): ...

    def release(self, runs, prep, present, rng): ...


RECOMMENDATION = ("the paper recommends --algorithm quantile (fixed quantiles, the default) when there "
                  "are many users, and --algorithm levy when each user contributes many samples")

@dataclass(frozen=True)
class Estimated:
    """What an estimation produced: the output table, the claim, the report's warnings and notes,
    and the custodian-only figures (None when there are none)."""

    table: Any
    n_groups: int
    claim: Any
    warnings: list[str]
    notes: list[str]
    custodian: dict | None
    accuracy: Any = None  # tsdp.accuracy.Accuracy of the estimates' noise (public parameters only)
    first: tuple[float, float] | None = None  # (estimate, laplace_scale) of the first group

    @property
    def participation(self) -> dict | None:
        """The participation-dependent epsilon (custodian only), or None."""
        return (self.custodian or {}).get("participation")


class ChunkedEstimates:
    """The estimates of the records, chunk of whole groups by chunk (one chunk in memory).

    ``frames()`` yields each chunk's output table as it is estimated; once it is exhausted,
    ``estimated()`` gives the :class:`Estimated` of the whole input (its ``table`` empty: the rows
    were written chunk by chunk), with the claim, warnings, notes, custodian figures and accuracy
    over every group, and ``true_means`` the PRIVATE per-group means (for the steward's checks; NaN
    for groups without records).

    With declared groups (:func:`tsdp.io.records.declared_groups`) every declared group gets a row,
    in the declared order: the groups of a chunk are placed among the declared ones, and the
    declared groups between chunks (or after the last) are estimated without records."""

    def __init__(self, plan: EstimationPlan, chunks, rng, stage=lambda name: None) -> None:
        self.plan, self.chunks, self.rng, self.stage = plan, chunks, rng, stage
        self.tally = WarningTally(plan.settings)
        self.noise: list[GroupNoise] = []  # the estimated groups' public noise parameters (claim events, accuracy)
        self.means: list[np.ndarray] = []
        self.first = None
        self.empty = None
        self.n_groups = 0
        self.next = 0  # the next declared group to estimate
        self.declared = None
        self.key_columns: list[str] = []

    @property
    def true_means(self) -> np.ndarray:
        return np.concatenate(self.means) if self.means else np.zeros(0)

    def frames(self):
        from tsdp.engine.records import declared_positions, empty_declared, expand_declared, n_declared

        last = None
        for runs in self.chunks:
            last = runs
            self.key_columns = runs.key_columns
            if runs.declared is None:
                if runs.n_groups:
                    yield self._chunk(runs)
                continue
            self.declared = runs.declared
            positions = declared_positions(runs)
            if positions.size == 0:
                continue
            stop = int(positions[-1]) + 1
            yield self._chunk(expand_declared(runs, positions, self.next, stop))
            self.next = stop
        if last is not None and last.declared is not None and self.next < n_declared(last):
            yield self._chunk(empty_declared(last, self.next, n_declared(last)))
            self.next = n_declared(last)

    def _chunk(self, runs):
        o, settings = self.plan.options, self.plan.settings
        self.stage("estimating")
        prep, present = self.plan.prepare(runs)
        rel = self.plan.release(runs, prep, present, self.rng)
        self.tally.add(runs, prep, present)
        if rel is not None:
            self.noise.append(GroupNoise(rel.sensitivity, rel.laplace_scale, rel.rounded_sensitivity,
                                         rel.granularity))
        self.means.append(np.asarray(runs.true_means(), dtype=np.float64))
        table = _output_table(runs, prep, rel, present, settings, o.clip, o.round_values)
        if self.first is None and table.height:
            self.first = (table["estimate"][0], table["laplace_scale"][0])
        self.n_groups += runs.n_groups
        self.empty = table.clear()
        return table

    def estimated(self) -> Estimated:
        chunks, settings, user_col, o = self.chunks, self.plan.settings, self.plan.spec.user_col, self.plan.options
        noise = GroupNoise.concat(self.noise)
        declared = _declared_description(self.declared, self.key_columns, self.plan) if self.declared is not None \
            else None
        empty = self.tally.empty if settings.participation == "public" else 0
        claim = claim_for(settings, self.n_groups, user_col, noise, declared=declared, empty_groups=empty)
        custodian = {}
        if (settings.participation == "public" and chunks.max_groups_per_user is not None and self.n_groups > 1):
            custodian["participation"] = participation_epsilon(settings, chunks.max_groups_per_user)
        if self.declared is not None and getattr(chunks, "dropped", None) is not None:
            custodian["records_outside_declared_groups"] = int(chunks.dropped)
        notes = (_notes(self.n_groups, self.declared is not None, settings, user_col, claim, "participation" in custodian)
                 + list(chunks.notes) + [f"recommendation: {RECOMMENDATION}"]
                 + _post_notes(settings, o.clip, o.round_values))
        accuracy = _accuracy(settings, noise, o.alpha) if noise.laplace_scale.size else None
        empty_table = self.empty if self.empty is not None else _output_table(None, None, None, None, settings)
        return Estimated(empty_table, self.n_groups, claim,
                         self.tally.warnings(self.n_groups, self.plan.spec.out_of_range == "clip") + sampler_warnings(settings), notes,
                         custodian or None, accuracy, self.first)


def _declared_description(declared, key_columns: list[str], plan: EstimationPlan) -> dict:
    """What the report says of the declared groups: the non-slot key columns and how many
    combinations of them are declared, the slot grid and its number of slots (the groups are their
    product)."""
    from tsdp.io.records import SLOT

    spec = plan.spec
    slot_key = SLOT in key_columns and SLOT in declared.columns and (spec.slot is not None or spec.start is not None)
    others = [k for k in key_columns if not (k == SLOT and slot_key)]
    out: dict[str, Any] = {"key_columns": others,
                           "key_values": declared.select(others).n_unique() if others and declared.height else
                           (0 if others else 1)}
    if slot_key:
        out.update(slots=declared[SLOT].n_unique(), slot_start=spec.start or spec.slot, slot_end=spec.end,
                   slot_length=plan.slot_length)
    else:
        out["slots"] = 1
    return out


def _accuracy(settings: MeanSettings, noise: GroupNoise, alpha: float):
    """The estimated groups' accuracy, with each group's lattice step under the hardened sampler."""
    from tsdp.accuracy.estimators import mean_groups

    return mean_groups(noise.laplace_scale, alpha, noise.granularity)  # None under the float sampler


def sampler_warnings(settings: MeanSettings) -> list[str]:
    """--sampler float: do not publish; hardened LEVY/QUANTILE: what stays floating-point."""
    from tsdp.mean.estimation import selection_warning

    if settings.sampler.warnings:  # float: its own warning says it all
        return list(settings.sampler.warnings)
    selection = selection_warning(settings.algorithm)
    return [Caveat("selection_sampler", selection)] if selection else []


def _post_notes(settings: MeanSettings, clip: bool, round_values: bool) -> list[str]:
    notes = [] if not clip else [
        f"post-processing: estimates clipped to the public bounds [{settings.lower:g}, {settings.upper:g}] "
        "(no privacy cost; a clipped estimate is never farther from the group's statistic than the raw one, "
        "so the accuracy interval still holds)"]
    if round_values:
        notes.append("post-processing: estimates rounded to integers (no privacy cost; adds up to 0.5, "
                     "which the accuracy interval does not include)")
    return notes


def _output_table(runs, prep, rel, present, settings: MeanSettings, clip: bool = True, round_values: bool = False):
    """One row per group of ``runs``: its keys, the estimate (clipped to the public bounds unless
    ``clip`` is False; Int64 with ``round_values``), its Laplace scale, the algorithm, the number of
    arrays and the cap, and under public participation its users and records used. ``present``
    (public participation): which groups were estimated (None: all); the others, without records,
    get an empty estimate and scale, 0 arrays, users and records. ``runs`` None: the empty table."""
    import polars as pl

    from tsdp.mechanisms.postprocess import postprocess

    public = settings.participation == "public"
    n = 0 if runs is None else runs.n_groups
    estimate = np.full(n, np.nan)
    scale = np.full(n, np.nan)
    arrays = np.zeros(n, dtype=np.int64)
    m_ub = np.zeros(n, dtype=np.int64)
    users = np.zeros(n, dtype=np.int64)
    used = np.zeros(n, dtype=np.int64)
    if rel is not None:
        at = slice(None) if present is None else np.flatnonzero(present)
        estimate[at] = postprocess(np.asarray(rel.estimate, dtype=np.float64), settings.lower if clip else None,
                                   settings.upper if clip else None, round_values)
        scale[at] = rel.laplace_scale
        arrays[at], m_ub[at], users[at], used[at] = prep.num_arrays, prep.m_ub, prep.users, prep.records_used
    missing = None if present is None else ~present
    columns = {
        "estimate": pl.Series(estimate, dtype=pl.Float64).fill_nan(None).cast(pl.Int64 if round_values else pl.Float64),
        "laplace_scale": pl.Series(scale, dtype=pl.Float64).fill_nan(None),
        "algorithm": pl.repeat(settings.algorithm, n, eager=True, dtype=pl.String),
        "num_arrays": pl.Series(arrays, dtype=pl.Int64),
        "m_ub": pl.Series(m_ub, dtype=pl.Int64).scatter(np.flatnonzero(missing), None) if missing is not None
        else pl.Series(m_ub, dtype=pl.Int64),
    }
    if public:
        columns["users"] = pl.Series(users, dtype=pl.Int64)
        columns["records_used"] = pl.Series(used, dtype=pl.Int64)
    frame = pl.DataFrame(columns)
    if runs is not None and runs.key_columns:
        frame = pl.concat([runs.groups, frame], how="horizontal")
    return frame


FEW_ARRAYS = 10


class WarningTally:
    """What the spec's warnings need (fewer than 10 arrays, a single user, no records), gathered
    chunk by chunk in group order. Under private participation only the public --arrays decides a
    warning: per-group counts are private."""

    def __init__(self, settings: MeanSettings) -> None:
        self.settings = settings
        self.few = self.single = self.empty = 0
        self.first_few = self.first_single = self.first_empty = None
        self.first_warnings: list[str] | None = None  # the first group's own warnings

    def _selection(self) -> bool:
        return self.settings.algorithm in ("levy", "quantile")

    def add(self, runs, prep, present) -> None:
        if self.settings.participation == "private":
            return
        index = np.arange(runs.n_groups) if present is None else np.flatnonzero(present)
        if present is not None and (~present).any():
            self.empty += int((~present).sum())
            self.first_empty = self.first_empty or runs.group_label(int(np.flatnonzero(~present)[0]))
        if prep is None:
            if self.first_warnings is None and runs.n_groups:
                self.first_warnings = []
            return
        few = np.flatnonzero(prep.num_arrays < FEW_ARRAYS) if self._selection() else np.zeros(0, dtype=np.int64)
        single = np.flatnonzero(prep.users == 1)
        if few.size:
            self.few += few.size
            self.first_few = self.first_few or runs.group_label(int(index[few[0]]))
        if single.size:
            self.single += single.size
            self.first_single = self.first_single or runs.group_label(int(index[single[0]]))
        if self.first_warnings is None and runs.n_groups:
            self.first_warnings = [] if index.size == 0 or index[0] != 0 else self._own(int(prep.num_arrays[0]),
                                                                                     int(prep.users[0]))

    def _own(self, n_arrays: int, users: int) -> list[str]:
        """The warnings of one group (a run of one group names no group)."""
        out = []
        if self._selection() and n_arrays < FEW_ARRAYS:
            out.append(Caveat("few_arrays", f"only {n_arrays} arrays (fewer than 10): the private "
                              f"{'median' if self.settings.algorithm == 'levy' else 'quantiles'} "
                              "and hence the clipping interval are unreliable"))
        if users == 1:
            out.append(Caveat("single_user", "a single user: a user-level private mean of one user is mostly noise"))
        return out

    def warnings(self, n_groups: int, clipping: bool) -> list[str]:
        """The warnings of the groups seen; ``clipping``: --value-out-of-range clip was given (whether a
        value was clipped is a bit of the private data: the warning says what the option does)."""
        settings = self.settings
        out: list[str] = []
        what = "median" if settings.algorithm == "levy" else "quantiles"
        if settings.participation == "private":
            if self._selection() and settings.arrays < FEW_ARRAYS:
                out.append(Caveat("few_arrays", f"--arrays {settings.arrays} (fewer than 10): the private {what} of each "
                                  "group and hence its clipping interval are unreliable"))
        elif n_groups == 1:
            out.extend(self.first_warnings or [])
        else:
            if self.few:
                out.append(Caveat("few_arrays", f"{self.few} of {n_groups} groups have fewer than 10 arrays (first: "
                                  f"{self.first_few}): their private {what} and hence the clipping interval are "
                                  "unreliable"))
            if self.single:
                out.append(Caveat("single_user", f"{self.single} of {n_groups} groups have a single user (first: "
                                  f"{self.first_single}): a user-level private mean of one user is mostly noise"))
        if settings.participation == "public" and self.empty:
            out.append(Caveat("empty_groups", f"{self.empty} of {n_groups} declared groups have no records (first: "
                              f"{self.first_empty}): their estimate is empty (public under --participation public)"))
        if clipping:
            out.append(Caveat("values_clipped", f"--value-out-of-range clip: values outside the public bounds "
                              f"[{settings.lower:g}, {settings.upper:g}] are clipped record by record; the estimates "
                              "are of the clipped data"))
        return out


def _notes(n: int, declared: bool, settings: MeanSettings, user_col: str, claim, custodian_figures: bool) -> list[str]:
    eps = settings.epsilon
    public = settings.participation == "public"
    notes = [
        f"neighbouring relation: {neighbouring(settings.participation)}"
        + (" (adding or removing users is not covered)" if public else ""),
        f"privacy unit: one value of column {user_col!r}; the guarantee protects whatever this column "
        "identifies (a plate protects a vehicle; a plate-day only one day of it)",
        f"each of the {n} estimate(s) is pure user-level {eps:g}-DP; releasing all of them is "
        f"{claim.epsilon:g}-DP by basic sequential composition (epsilon x {n} groups, data-independent)",
    ]
    if declared:
        notes.append(f"the groups are the {n} declared group(s) (public parameters); records outside them are dropped "
                     "(how many is in the custodian file)")
    if custodian_figures:
        notes.append("the smaller total that holds only if participation (which users appear in which groups) "
                     "is public depends on the data; it is in the custodian file, not in this report")
    if public:
        notes.append("users, records_used, num_arrays and m_ub in the output are public under --participation "
                     "public: the paper's assumption that the user set and each user's record count in each group "
                     "are public")
    else:
        notes.append(f"--participation private: the output holds no per-group participation; num_arrays is the public "
                     f"--arrays {settings.arrays} and m_ub the public --m-ub {settings.m_ub}. A user's first m_ub "
                     "records in a group go to array hash(user id) mod K, an array without records counts as the "
                     f"midpoint {0.5 * (settings.lower + settings.upper):g} of [lower, upper], and a group without "
                     "records is released as that midpoint plus noise")
    return notes

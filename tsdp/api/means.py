"""``tsdp.mean_estimate``: user-level private means per cell and time slot (Gupta et al. 2024).

The pipeline ``tsdp mean-estimate`` runs, without files: :class:`MeanOptions` validates the options
(the command line's names) before any data is read; :class:`MeanPlan` estimates from the records
reduced to runs (in memory here, by an engine on the command line) and assembles the output table,
the claim, the warnings and the notes; :func:`mean_estimate` returns the estimates and the report.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, NamedTuple, Sequence

import numpy as np

from tsdp.caveats import Caveat
from tsdp.errors import DataError, UsageError
from tsdp.io.records import RecordSpec
from tsdp.mean import NEIGHBOURING, MeanSettings, claim_for, estimate_prepared, participation_epsilon, prepare_from_runs
from tsdp.mean.api import DEFAULT_GAMMA, DEFAULT_QUANTILES
from tsdp.mean.errors import GroupDataError, GroupUsageError

RECOMMENDATION = ("the paper recommends --algorithm quantile (fixed quantiles, the default) when there "
                  "are many users, and --algorithm levy when each user contributes many samples")
OUTPUT_COLUMNS = ("estimate", "laplace_scale", "algorithm", "num_arrays", "m_ub", "users", "records_used")
ALGORITHMS = ("baseline", "array-averaging", "levy", "quantile")


def _value(x: Any) -> Any:
    return getattr(x, "value", x)  # an Enum of the command line, or the plain string


@dataclass(frozen=True)
class MeanOptions:
    """Every option of ``tsdp mean-estimate`` that shapes the estimates, named as on the command line."""

    user_col: str
    value_col: str
    upper: float
    epsilon: float
    lower: float = 0.0
    time_col: str | None = None
    timezone: str | None = None
    cell_col: str | None = None
    slot_length: str | None = None
    cell: str | None = None
    slot: str | None = None
    group_by: str | Sequence[str] | None = None
    epsilon_per_group_ok: bool = False
    algorithm: str = "quantile"
    grouping: str | None = None
    m_ub: str | int | None = None
    quantile_mode: str | None = None
    quantiles: str | Sequence[float] | None = None
    gamma: float | None = None
    tau_k: str | None = None
    value_out_of_range: str = "error"
    alpha: float = 0.05
    clip: bool = True
    round_values: bool = False
    sampler: str | None = None  # hardened by default
    granularity: float | None = None

    def parameters(self) -> dict[str, Any]:
        return {k: _value(v) for k, v in asdict(self).items()}

    def plan(self) -> "MeanPlan":
        """Validate every option (UsageError naming it) before the data is read."""
        from tsdp.io.timezones import check_zone

        check_zone(self.timezone)
        group_by = self.group_by
        keys = tuple((group_by.split(",") if isinstance(group_by, str) else group_by) or ())
        keys = tuple(str(k).strip() for k in keys if str(k).strip())
        if group_by is not None and not keys:
            raise UsageError(f"--group-by {group_by!r} names no column; give e.g. cell,slot")
        if keys and not self.epsilon_per_group_ok:
            raise UsageError(f"--group-by {','.join(keys)} releases one estimate per group, each spending --epsilon "
                             f"{self.epsilon:g}, so the total is {self.epsilon:g} x the number of groups; pass "
                             "--epsilon-per-group-ok to confirm")
        algorithm = _value(self.algorithm)
        if algorithm not in ALGORITHMS:
            raise UsageError(f"--algorithm {algorithm!r}: must be one of {', '.join(ALGORITHMS)}")
        settings = MeanSettings(  # validates every option (UsageError) before the data is read
            epsilon=self.epsilon, upper=self.upper, lower=self.lower, algorithm=algorithm,
            grouping=_value(self.grouping) or "bestfit", m_ub=self.m_ub if self.m_ub is not None else "auto",
            quantile_mode=_value(self.quantile_mode) or "fixed", quantiles=_quantiles(self.quantiles),
            gamma=DEFAULT_GAMMA if self.gamma is None else self.gamma, tau_k=_value(self.tau_k) or "kbar",
            sampler=self.sampler or "hardened", granularity=self.granularity,
        )
        _check_algorithm_flags(algorithm, self.quantiles, _value(self.quantile_mode), self.gamma, self.tau_k)
        if isinstance(self.alpha, bool) or not isinstance(self.alpha, (int, float)) or not 0.0 < self.alpha < 1.0:
            raise UsageError(f"--alpha must be in (0, 1), got {self.alpha!r}")
        spec = RecordSpec(user_col=self.user_col, value_col=self.value_col, lower=settings.lower,
                          upper=settings.upper, time_col=self.time_col, cell_col=self.cell_col,
                          slot_length=self.slot_length, cell=self.cell, slot=self.slot, group_by=keys,
                          out_of_range=_value(self.value_out_of_range), timezone=self.timezone)
        return MeanPlan(self, settings, spec)


@dataclass(frozen=True)
class Estimated:
    """What an estimation produced: the output table, the claim, the report's warnings and notes,
    and the custodian-only participation figures (None when there are none)."""

    table: Any
    estimates: list
    claim: Any
    warnings: list[str]
    notes: list[str]
    participation: dict | None
    accuracy: Any = None  # tsdp.accuracy.Accuracy of the estimates' noise (public parameters only)


@dataclass(frozen=True)
class MeanPlan:
    options: MeanOptions
    settings: MeanSettings
    spec: RecordSpec

    @property
    def slot_length(self) -> str | None:
        """The slot length the report records (1h when slots are used without --slot-length)."""
        uses_slots = self.spec.slot is not None or "slot" in self.spec.group_by
        return self.spec.slot_length or ("1h" if uses_slots else None)

    def prepare(self, records):
        with named_groups(records):
            return prepare_from_runs(records.counts, records.group_starts, records.piece_sums, self.settings)

    def estimate(self, records, rng: np.random.Generator) -> Estimated:
        """Estimate every group of ``records`` (:class:`tsdp.engine.records.RecordRuns`)."""
        prep = self.prepare(records)
        with named_groups(records):
            estimates = estimate_prepared(prep, self.settings, rng)
        from tsdp.accuracy.estimators import mean_groups

        settings, user_col, o = self.settings, self.spec.user_col, self.options
        claim = claim_for(settings, records.n_groups, user_col, estimates)
        participation = (participation_epsilon(settings, records.max_groups_per_user)
                         if records.max_groups_per_user is not None and records.n_groups > 1 else None)
        accuracy = _accuracy(settings, estimates, o.alpha)
        return Estimated(_output_table(records, estimates, settings, o.clip, o.round_values), estimates, claim,
                         _warnings(records, estimates, settings, self.spec.out_of_range == "clip")
                         + sampler_warnings(settings),
                         _notes(records, settings, user_col, claim, participation is not None)
                         + _post_notes(settings, o.clip, o.round_values), participation, accuracy)

    def estimate_chunks(self, chunks, rng: np.random.Generator, stage=lambda name: None) -> "ChunkedEstimates":
        """Estimate :class:`tsdp.engine.records.RecordChunks` chunk by chunk (groups are independent;
        one generator in group order): see :class:`ChunkedEstimates`."""
        return ChunkedEstimates(self, chunks, rng, stage)

    def dry_run_accuracy(self):
        """The per-group noise bound from the public parameters alone (no record read)."""
        from tsdp.accuracy.estimators import mean_plan

        s = self.settings
        return mean_plan(s.algorithm, s.grouping, s.epsilon, s.lower, s.upper, self.options.alpha, s.sampler)

    def report(self, records, estimated: Estimated, randomness, described: dict, warnings: list[str],
               parameters: dict[str, Any]):
        from tsdp.report import Report

        return Report(
            command="mean-estimate",
            parameters={**parameters, "slot_length": self.slot_length},
            claim=estimated.claim,
            output={**described, "columns": estimated.table.columns},
            randomness=randomness.label,
            grid={"n_groups": records.n_groups, "key_columns": records.key_columns},
            notes=estimated.notes, warnings=warnings,
            accuracy=None if estimated.accuracy is None else estimated.accuracy.to_dict(),
        )


class ChunkedEstimates:
    """The estimates of an input too large for memory, chunk of whole groups by chunk.

    ``frames()`` yields each chunk's output table as it is estimated; once it is exhausted,
    ``estimated()`` gives the :class:`Estimated` of the whole input (its ``table`` empty: the rows
    were written chunk by chunk), with the claim, warnings, notes, custodian figures and accuracy
    over every group, and ``true_means`` the PRIVATE per-group means (for the steward's checks)."""

    def __init__(self, plan: MeanPlan, chunks, rng, stage) -> None:
        self.plan, self.chunks, self.rng, self.stage = plan, chunks, rng, stage
        self.tally = WarningTally(plan.settings)
        self.released: list = []  # per group: the public sensitivity, scale and lattice (claim events, accuracy)
        self.true_means: list[float] = []
        self.first = None
        self.empty = None

    def frames(self):
        o, settings = self.plan.options, self.plan.settings
        for records in self.chunks:
            self.stage("estimating")
            prep = self.plan.prepare(records)
            with named_groups(records):
                estimates = estimate_prepared(prep, settings, self.rng)
            self.tally.add(records, estimates)
            self.released.extend(_Released(e.sensitivity, getattr(e, "rounded_sensitivity", None), e.laplace_scale,
                                           getattr(e, "granularity", None)) for e in estimates)
            self.true_means.extend(np.asarray(records.true_means(), dtype=np.float64).tolist())
            if self.first is None and estimates:
                self.first = estimates[0]
            table = _output_table(records, estimates, settings, o.clip, o.round_values)
            self.empty = table.clear()
            yield table

    def estimated(self) -> Estimated:
        chunks, settings, user_col, o = self.chunks, self.plan.settings, self.plan.spec.user_col, self.plan.options
        claim = claim_for(settings, chunks.n_groups, user_col, self.released)
        participation = (participation_epsilon(settings, chunks.max_groups_per_user)
                         if chunks.max_groups_per_user is not None and chunks.n_groups > 1 else None)
        notes = (_notes(chunks, settings, user_col, claim, participation is not None)
                 + _post_notes(settings, o.clip, o.round_values))
        return Estimated(self.empty, [self.first] if self.first is not None else [], claim,
                         self.tally.warnings(chunks.n_groups, self.plan.spec.out_of_range == "clip")
                         + sampler_warnings(settings), notes,
                         participation, _accuracy(settings, self.released, o.alpha))


class _Released(NamedTuple):
    """What a group's claim event and accuracy need (public parameters of its noise)."""

    sensitivity: float
    rounded_sensitivity: float | None
    laplace_scale: float
    granularity: float | None


def _accuracy(settings: MeanSettings, estimates, alpha: float):
    """The groups' accuracy, with each group's lattice step under the hardened sampler."""
    from tsdp.accuracy.estimators import mean_groups

    return mean_groups([e.laplace_scale for e in estimates], alpha,
                       [e.granularity for e in estimates] if settings.sampler == "hardened" else None)


def sampler_warnings(settings: MeanSettings) -> list[str]:
    """--sampler float: do not publish; hardened LEVY/QUANTILE: what stays floating-point."""
    from tsdp.mean.api import selection_warning
    from tsdp.mechanisms.noise import FLOAT_WARNING

    if settings.sampler == "float":
        return [FLOAT_WARNING]
    selection = selection_warning(settings.algorithm)
    return [Caveat("selection_sampler", selection)] if selection else []


def mean_estimate(frame, *, user_col: str, value_col: str, upper: float, epsilon: float, seed: int | None = None,
                  **options):
    """User-level private means of ``frame``'s records (polars or pandas), as ``tsdp mean-estimate``.

    The keyword arguments are the command line's options with underscores (``lower``, ``time_col``,
    ``cell_col``, ``slot_length``, ``group_by`` (a list or ``"cell,slot"``), ``epsilon_per_group_ok``,
    ``algorithm``, ``m_ub``, ``quantiles``, ...; see ``tsdp mean-estimate --help``). ``upper`` and
    ``lower`` are PUBLIC bounds, never derived from the data. Returns
    :class:`tsdp.api.result.Result`: ``(estimates frame, report)``; ``result.custodian`` holds the
    figures that depend on the private data (NOT for publication), or None.
    """
    from tsdp.api.frames import from_polars, to_polars
    from tsdp.api.result import Result, describe_in_memory
    from tsdp.api.series import IN_MEMORY_INPUT, _check_seed
    from tsdp.engine.records import runs_from_records
    from tsdp.io.magnitudes import require_finite_output
    from tsdp.io.records import load_records
    from tsdp.rng import SEEDED_WARNING, make_random_source

    known = set(MeanOptions.__dataclass_fields__)
    unknown = sorted(set(options) - known)
    if unknown:
        raise UsageError(f"tsdp.mean_estimate: unknown option {unknown[0]!r}; the options are those of "
                         "'tsdp mean-estimate --help' with underscores (e.g. cell_col for --cell-col)")
    plan = MeanOptions(user_col=user_col, value_col=value_col, upper=upper, epsilon=epsilon, **options).plan()
    _check_seed(seed)
    df, kind = to_polars(frame)
    randomness = make_random_source(seed)
    records = runs_from_records(load_records(df, plan.spec))
    estimated = plan.estimate(records, randomness.generator)
    require_finite_output(estimated.table)
    warnings = estimated.warnings + ([SEEDED_WARNING] if randomness.seeded else [])
    parameters = {**plan.options.parameters(), "input": IN_MEMORY_INPUT}

    def make_report(described: dict):
        return plan.report(records, estimated, randomness, described, warnings,
                           {**parameters, "output": described["file"]})

    result = Result(from_polars(estimated.table, kind), make_report(describe_in_memory(estimated.table)),
                    estimated.table, make_report)
    result.custodian = None if estimated.participation is None else {"participation": estimated.participation}
    return result


def _quantiles(value) -> tuple[float, float]:
    if value is None:
        return DEFAULT_QUANTILES
    parts = value.split(",") if isinstance(value, str) else list(value)
    try:
        pair = tuple(float(p) for p in parts if str(p).strip())
    except (TypeError, ValueError):
        pair = ()
    if len(pair) != 2:
        raise UsageError(f"--quantiles {value!r}: must be two numbers such as 0.1,0.9")
    return pair  # type: ignore[return-value]


def _check_algorithm_flags(name: str, quantiles, quantile_mode, gamma, tau_k) -> None:
    """A flag given explicitly to an algorithm that does not read it (even at its default)."""
    if name != "quantile":
        for flag, value in (("--quantiles", quantiles), ("--quantile-mode", quantile_mode)):
            if value is not None:
                raise UsageError(f"{flag} is only used by --algorithm quantile, not {name}")
    elif quantiles is not None and quantile_mode == "eps-dependent":
        raise UsageError("--quantiles is only used with --quantile-mode fixed, not eps-dependent")
    if name != "levy":
        for flag, value in (("--gamma", gamma), ("--tau-k", tau_k)):
            if value is not None:
                raise UsageError(f"{flag} is only used by --algorithm levy, not {name}")


class named_groups:
    """Re-raise the algorithms' per-group errors naming the group by its keys, not its index."""

    def __init__(self, records) -> None:
        self.records = records

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        if isinstance(exc, (GroupUsageError, GroupDataError)):
            cls = DataError if isinstance(exc, DataError) else UsageError
            raise cls(f"group {self.records.group_label(exc.group_index)}: {exc.detail}") from None
        return False


def _post_notes(settings: MeanSettings, clip: bool, round_values: bool) -> list[str]:
    notes = [] if not clip else [
        f"post-processing: estimates clipped to the public bounds [{settings.lower:g}, {settings.upper:g}] "
        "(no privacy cost; a clipped estimate is never farther from the group's statistic than the raw one, "
        "so the accuracy interval still holds)"]
    if round_values:
        notes.append("post-processing: estimates rounded to integers (no privacy cost; adds up to 0.5, "
                     "which the accuracy interval does not include)")
    return notes


def _output_table(records, estimates, settings: MeanSettings, clip: bool = True, round_values: bool = False):
    """The estimates, clipped to the public bounds unless ``clip`` is False, as Int64 with ``round_values``."""
    import polars as pl

    from tsdp.mechanisms.postprocess import postprocess

    raw = np.array([e.estimate for e in estimates], dtype=np.float64)
    values = postprocess(raw, settings.lower if clip else None, settings.upper if clip else None, round_values)
    columns = {
        "estimate": pl.Series(values, dtype=pl.Float64).cast(pl.Int64 if round_values else pl.Float64),
        "laplace_scale": pl.Series([e.laplace_scale for e in estimates], dtype=pl.Float64),
        "algorithm": pl.repeat(settings.algorithm, len(estimates), eager=True, dtype=pl.String),
        "num_arrays": pl.Series([e.num_arrays for e in estimates], dtype=pl.Int64),
        "m_ub": pl.Series([e.m_ub for e in estimates], dtype=pl.Int64),
        "users": pl.Series([e.users for e in estimates], dtype=pl.Int64),
        "records_used": pl.Series([e.records_used for e in estimates], dtype=pl.Int64),
    }
    frame = pl.DataFrame(columns)
    if records.key_columns:
        frame = pl.concat([records.groups, frame], how="horizontal")
    return frame


def _warnings(records, estimates, settings: MeanSettings, clipping: bool) -> list[str]:
    """The spec's warnings (K-bar < 10, L = 1, clipping), one line per kind, naming a group."""
    tally = WarningTally(settings)
    tally.add(records, estimates)
    return tally.warnings(records.n_groups, clipping)


class WarningTally:
    """What the spec's warnings need, gathered group chunk by group chunk (in group order)."""

    KNOWN = ("arrays (fewer than 10)", "a single user")

    def __init__(self, settings: MeanSettings) -> None:
        self.settings = settings
        self.few = self.single = 0
        self.first_few = self.first_single = None
        self.extra: set[str] = set()
        self.first_warnings: list[str] | None = None  # the first group's own warnings

    def add(self, records, estimates) -> None:
        selection = self.settings.algorithm in ("levy", "quantile")
        for i, e in enumerate(estimates):
            if selection and e.num_arrays < 10:
                self.few += 1
                self.first_few = self.first_few or records.group_label(i)
            if e.users == 1:
                self.single += 1
                self.first_single = self.first_single or records.group_label(i)
            self.extra.update(w for w in e.warnings if not any(k in w for k in self.KNOWN))
        if self.first_warnings is None and estimates:
            self.first_warnings = list(estimates[0].warnings)

    def warnings(self, n_groups: int, clipping: bool) -> list[str]:
        """The warnings of the groups seen; ``clipping``: --value-out-of-range clip was given (whether a
        value was clipped is a bit of the private data: the warning says what the option does)."""
        settings = self.settings
        out: list[str] = []
        if n_groups == 1:
            out.extend(self.first_warnings or [])
        else:
            if self.few:
                out.append(Caveat("few_arrays", f"{self.few} of {n_groups} groups have fewer than 10 arrays (first: "
                                  f"{self.first_few}): their private "
                                  f"{'median' if settings.algorithm == 'levy' else 'quantiles'} and hence the "
                                  "clipping interval are unreliable"))
            if self.single:
                out.append(Caveat("single_user", f"{self.single} of {n_groups} groups have a single user (first: "
                                  f"{self.first_single}): a user-level private mean of one user is mostly noise"))
            out.extend(sorted(self.extra))
        if clipping:
            out.append(Caveat("values_clipped", f"--value-out-of-range clip: values outside the public bounds "
                              f"[{settings.lower:g}, {settings.upper:g}] are clipped record by record; the estimates "
                              "are of the clipped data"))
        return out


def _notes(records, settings: MeanSettings, user_col: str, claim, custodian_figures: bool) -> list[str]:
    n = records.n_groups
    eps = settings.epsilon
    notes = [
        f"neighbouring relation: {NEIGHBOURING} (adding or removing users is not covered)",
        f"privacy unit: one value of column {user_col!r}; the guarantee protects whatever this column "
        "identifies (a plate protects a vehicle; a plate-day only one day of it)",
        f"each of the {n} estimate(s) is pure user-level {eps:g}-DP; releasing all of them is "
        f"{claim.epsilon:g}-DP by basic sequential composition (epsilon x {n} groups, data-independent)",
    ]
    if custodian_figures:
        notes.append("the smaller total that holds only if participation (which users appear in which groups) "
                     "is public depends on the data; it is in the custodian file, not in this report")
    notes.append("users, records_used, num_arrays and m_ub in the output are public by the paper's "
                 "assumption that the user set and per-user record counts are public")
    notes.extend(records.notes)
    notes.append(f"recommendation: {RECOMMENDATION}")
    return notes

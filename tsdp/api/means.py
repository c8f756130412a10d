"""``tsdp.mean_estimate``: user-level private means per cell and time slot (Gupta et al. 2024).

The pipeline ``tsdp mean-estimate`` runs, without files: :class:`MeanOptions` validates the options
(the command line's names) before any data is read; :class:`MeanPlan` estimates from the records
reduced to runs (in memory here, by an engine on the command line) and assembles the output table,
the claim, the warnings and the notes; :func:`mean_estimate` returns the estimates and the report.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from typing import Any, Sequence

import numpy as np

from tsdp.caveats import Caveat
from tsdp.errors import DataError, UsageError
from tsdp.io.records import RecordSpec
from tsdp.mean import MeanSettings, claim_for, participation_epsilon, prepare_from_runs, release_prepared
from tsdp.mean.api import DEFAULT_GAMMA, DEFAULT_QUANTILES, PARTICIPATIONS, GroupNoise, neighbouring
from tsdp.mean.errors import GroupDataError, GroupUsageError

RECOMMENDATION = ("the paper recommends --algorithm quantile (fixed quantiles, the default) when there "
                  "are many users, and --algorithm levy when each user contributes many samples")
OUTPUT_COLUMNS = ("estimate", "laplace_scale", "algorithm", "num_arrays", "m_ub")
PARTICIPATION_COLUMNS = ("users", "records_used")  # --participation public only
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
    participation: str = "private"
    arrays: int | None = None
    group_keys: str | Sequence[str] | None = None
    group_keys_file: str | None = None
    start: str | None = None
    end: str | None = None

    def parameters(self) -> dict[str, Any]:
        out = {k: _value(v) for k, v in asdict(self).items()}
        if isinstance(out.get("group_keys"), str):
            out["group_keys"] = _split(out["group_keys"])
        return out

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
        participation = _value(self.participation) or "private"
        if participation not in PARTICIPATIONS:
            raise UsageError(f"--participation {participation!r}: must be private or public")
        if participation == "private" and self.grouping is not None:
            raise UsageError(f"--grouping {_value(self.grouping)} packs users by their record counts, which "
                             "--participation private keeps private; drop it (users go to --arrays arrays by a hash "
                             "of their id) or use --participation public")
        settings = MeanSettings(  # validates every option (UsageError) before the data is read
            epsilon=self.epsilon, upper=self.upper, lower=self.lower, algorithm=algorithm,
            grouping=_value(self.grouping) or "bestfit", m_ub=self.m_ub if self.m_ub is not None else "auto",
            quantile_mode=_value(self.quantile_mode) or "fixed", quantiles=_quantiles(self.quantiles),
            gamma=DEFAULT_GAMMA if self.gamma is None else self.gamma, tau_k=_value(self.tau_k) or "kbar",
            sampler=self.sampler or "hardened", granularity=self.granularity,
            participation=participation, arrays=self.arrays,
        )
        _check_algorithm_flags(algorithm, self.quantiles, _value(self.quantile_mode), self.gamma, self.tau_k)
        if isinstance(self.alpha, bool) or not isinstance(self.alpha, (int, float)) or not 0.0 < self.alpha < 1.0:
            raise UsageError(f"--alpha must be in (0, 1), got {self.alpha!r}")
        group_keys, table = _declared_keys(self.group_keys, self.group_keys_file)
        if (self.start is None) != (self.end is None):
            raise UsageError("--start and --end declare the slot grid together: give both")
        spec = RecordSpec(user_col=self.user_col, value_col=self.value_col, lower=settings.lower,
                          upper=settings.upper, time_col=self.time_col, cell_col=self.cell_col,
                          slot_length=self.slot_length, cell=self.cell, slot=self.slot, group_by=keys,
                          out_of_range=_value(self.value_out_of_range), timezone=self.timezone,
                          group_keys=group_keys, group_keys_table=table, start=self.start, end=self.end)
        if participation == "private":
            _require_declared(spec)
        return MeanPlan(self, settings, spec)


def _split(text: str) -> list[str]:
    return [part.strip() for part in text.split(",") if part.strip()]


def _declared_keys(group_keys, group_keys_file) -> tuple[tuple[str, ...] | None, Any]:
    """(--group-keys as a tuple of texts, --group-keys-file read as a table of texts), each or None."""
    if group_keys is not None and group_keys_file is not None:
        raise UsageError("--group-keys and --group-keys-file both declare the groups: give one of them")
    values = None
    if group_keys is not None:
        values = tuple(_split(group_keys) if isinstance(group_keys, str) else (str(v).strip() for v in group_keys))
        if not values:
            raise UsageError(f"--group-keys {group_keys!r} declares no group; give e.g. c00_00,c00_01")
        if len(set(values)) != len(values):
            raise UsageError("--group-keys: duplicate keys")
    table = None
    if group_keys_file is not None:
        import polars as pl

        from tsdp.io.files import read_table

        try:
            table = read_table(str(group_keys_file))
        except UsageError:
            raise
        except Exception as exc:  # a missing or unreadable file: a usage error naming the option
            raise UsageError(f"--group-keys-file {group_keys_file!r}: cannot read it ({exc}); give a CSV or Parquet "
                             "file with one column per group key and one declared group per row") from None
        if table.height == 0:
            raise UsageError(f"--group-keys-file {group_keys_file!r} declares no group")
        table = table.select(pl.all().cast(pl.String))
    return values, table


def _require_declared(spec: RecordSpec) -> None:
    """--participation private: every group key is declared (the groups are public parameters)."""
    for name in spec.group_by:
        if name == "slot" and spec.time_col is not None:
            if spec.slot is None and spec.start is None:
                raise UsageError("--group-by slot with --participation private needs the declared slot grid "
                                 "--start and --end (with --slot-length): the groups must be public parameters, not "
                                 "read off the records")
        elif not ((name in ("cell", spec.cell_col) and spec.cell is not None)
                  or spec.group_keys is not None or spec.group_keys_table is not None):
            raise UsageError(f"--group-by {name} with --participation private needs the declared groups: "
                             "--group-keys v1,v2,... (or --group-keys-file FILE); they must be public parameters, "
                             "not read off the records (or pass --participation public)")


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

    def declared_count(self) -> int | None:
        """The number of declared groups, from the options alone (None when some key is not declared)."""
        import polars as pl

        from tsdp.io.record_groups import slot_grid

        spec = self.spec
        n = 1
        uses_slot = spec.time_col is not None and ("slot" in spec.group_by or spec.slot is not None)
        others = [k for k in spec.group_by if not (k == "slot" and uses_slot)
                  and not (spec.cell is not None and k in ("cell", spec.cell_col))]
        if others:
            if spec.group_keys is not None:
                n *= len(spec.group_keys)
            elif spec.group_keys_table is not None:
                n *= spec.group_keys_table.height
            else:
                return None
        if uses_slot and spec.slot is None:
            if spec.start is None:
                return None
            integer = spec.start.strip().lstrip("+-").isdigit()
            like = pl.Int64 if integer else pl.Datetime("us", spec.timezone)
            n *= slot_grid(spec, like).len()
        return n

    def estimate(self, records, rng: np.random.Generator) -> Estimated:
        """Estimate every group of ``records`` (:class:`tsdp.engine.runs.RecordRuns`)."""
        import polars as pl

        from tsdp.engine.records import RecordChunks

        chunked = self.estimate_chunks(RecordChunks.of(records), rng)
        tables = list(chunked.frames())
        estimated = chunked.estimated()
        return replace(estimated, table=pl.concat(tables, how="vertical") if tables else estimated.table)

    def estimate_chunks(self, chunks, rng: np.random.Generator, stage=lambda name: None) -> "ChunkedEstimates":
        """Estimate :class:`tsdp.engine.records.RecordChunks` chunk by chunk (groups are independent;
        one generator in group order): see :class:`ChunkedEstimates`."""
        return ChunkedEstimates(self, chunks, rng, stage)

    def prepare(self, runs):
        """The prepared groups of ``runs`` that are estimated, and which of its groups they are (None: all)."""
        settings = self.settings
        if settings.participation == "private":
            return prepare_from_runs(runs.counts, runs.group_starts, runs.piece_sums, settings,
                                     runs.user_hashes()), None
        present = np.diff(runs.group_starts) > 0
        if present.all():
            with named_groups(runs):
                return prepare_from_runs(runs.counts, runs.group_starts, runs.piece_sums, settings), None
        if not present.any():
            return None, present
        starts = np.concatenate((runs.group_starts[:-1][present], runs.group_starts[-1:]))
        with named_groups(runs, np.flatnonzero(present)):
            return prepare_from_runs(runs.counts, starts, runs.piece_sums, settings), present

    def release(self, runs, prep, present, rng):
        """The released groups of :meth:`prepare` (None when no group is estimated)."""
        if prep is None:
            return None
        with named_groups(runs, None if present is None else np.flatnonzero(present)):
            return release_prepared(prep, self.settings, rng)

    def dry_run_accuracy(self):
        """The per-group noise bound from the public parameters alone (no record read)."""
        from tsdp.accuracy.estimators import mean_plan

        s = self.settings
        return mean_plan(s.algorithm, s.grouping, s.epsilon, s.lower, s.upper, self.options.alpha, s.sampler,
                         arrays=s.arrays)

    def report(self, records, estimated: Estimated, randomness, described: dict, warnings: list[str],
               parameters: dict[str, Any]):
        from tsdp.report import Report

        return Report(
            command="mean-estimate",
            parameters={**parameters, "slot_length": self.slot_length},
            claim=estimated.claim,
            output={**described, "columns": estimated.table.columns},
            randomness=randomness.label,
            grid={"n_groups": estimated.n_groups, "key_columns": records.key_columns},
            notes=estimated.notes, warnings=warnings,
            accuracy=None if estimated.accuracy is None else estimated.accuracy.to_dict(),
        )


class ChunkedEstimates:
    """The estimates of the records, chunk of whole groups by chunk (one chunk in memory).

    ``frames()`` yields each chunk's output table as it is estimated; once it is exhausted,
    ``estimated()`` gives the :class:`Estimated` of the whole input (its ``table`` empty: the rows
    were written chunk by chunk), with the claim, warnings, notes, custodian figures and accuracy
    over every group, and ``true_means`` the PRIVATE per-group means (for the steward's checks; NaN
    for groups without records).

    With declared groups (:func:`tsdp.io.record_groups.declared_groups`) every declared group gets a row,
    in the declared order: the groups of a chunk are placed among the declared ones, and the
    declared groups between chunks (or after the last) are estimated without records."""

    def __init__(self, plan: MeanPlan, chunks, rng, stage=lambda name: None) -> None:
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


def _declared_description(declared, key_columns: list[str], plan: MeanPlan) -> dict:
    """What the report says of the declared groups: the non-slot key columns and how many
    combinations of them are declared, the slot grid and its number of slots (the groups are their
    product)."""
    from tsdp.io.record_spec import SLOT

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

    return mean_groups(noise.laplace_scale, alpha, noise.granularity if settings.sampler == "hardened" else None)


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
    result.custodian = estimated.custodian
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
    """Re-raise the algorithms' per-group errors naming the group by its keys, not its index
    (``index``: the group of ``records`` behind each index the algorithms saw, when they saw a subset)."""

    def __init__(self, records, index: np.ndarray | None = None) -> None:
        self.records, self.index = records, index

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        if isinstance(exc, (GroupUsageError, GroupDataError)):
            cls = DataError if isinstance(exc, DataError) else UsageError
            group = exc.group_index if self.index is None else int(self.index[exc.group_index])
            raise cls(f"group {self.records.group_label(group)}: {exc.detail}") from None
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

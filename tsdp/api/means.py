"""``tsdp.mean_estimate``: user-level private means per cell and time slot (Gupta et al. 2024).

The pipeline ``tsdp mean-estimate`` runs, without files: :class:`MeanOptions` validates the options
(the command line's names) before any data is read; :class:`MeanPlan` estimates from the records
reduced to runs (in memory here, by an engine on the command line), chunk by chunk through
:class:`tsdp.api.mean_estimates.ChunkedEstimates`, which assembles the output table, the claim, the
warnings and the notes; :func:`mean_estimate` returns the estimates and the report.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from typing import Any, Sequence

import numpy as np

from tsdp.errors import DataError, UsageError
from tsdp.io.records import RecordSpec
from tsdp.api.mean_estimates import ChunkedEstimates, Estimated
from tsdp.api.parsing import enum_value, number_pair, split_list
from tsdp.mean import MeanSettings, prepare_from_runs, release_prepared
from tsdp.mean.estimation import DEFAULT_GAMMA, DEFAULT_QUANTILES, PARTICIPATIONS
from tsdp.mean.errors import GroupDataError, GroupUsageError

OUTPUT_COLUMNS = ("estimate", "laplace_scale", "algorithm", "num_arrays", "m_ub")
PARTICIPATION_COLUMNS = ("users", "records_used")  # --participation public only
ALGORITHMS = ("baseline", "array-averaging", "levy", "quantile")


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
        out = {k: enum_value(v) for k, v in asdict(self).items()}
        if isinstance(out.get("group_keys"), str):
            out["group_keys"] = split_list(out["group_keys"]) or []
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
        algorithm = enum_value(self.algorithm)
        if algorithm not in ALGORITHMS:
            raise UsageError(f"--algorithm {algorithm!r}: must be one of {', '.join(ALGORITHMS)}")
        participation = enum_value(self.participation) or "private"
        if participation not in PARTICIPATIONS:
            raise UsageError(f"--participation {participation!r}: must be private or public")
        if participation == "private" and self.grouping is not None:
            raise UsageError(f"--grouping {enum_value(self.grouping)} packs users by their record counts, which "
                             "--participation private keeps private; drop it (users go to --arrays arrays by a hash "
                             "of their id) or use --participation public")
        settings = MeanSettings(  # validates every option (UsageError) before the data is read
            epsilon=self.epsilon, upper=self.upper, lower=self.lower, algorithm=algorithm,
            grouping=enum_value(self.grouping) or "bestfit", m_ub=self.m_ub if self.m_ub is not None else "auto",
            quantile_mode=enum_value(self.quantile_mode) or "fixed",
            quantiles=DEFAULT_QUANTILES if self.quantiles is None else number_pair(self.quantiles, "--quantiles",
                                                                                   "0.1,0.9"),
            gamma=DEFAULT_GAMMA if self.gamma is None else self.gamma, tau_k=enum_value(self.tau_k) or "kbar",
            sampler=self.sampler or "hardened", granularity=self.granularity,
            participation=participation, arrays=self.arrays,
        )
        _check_algorithm_flags(algorithm, self.quantiles, enum_value(self.quantile_mode), self.gamma, self.tau_k)
        if isinstance(self.alpha, bool) or not isinstance(self.alpha, (int, float)) or not 0.0 < self.alpha < 1.0:
            raise UsageError(f"--alpha must be in (0, 1), got {self.alpha!r}")
        group_keys, table = _declared_keys(self.group_keys, self.group_keys_file)
        if (self.start is None) != (self.end is None):
            raise UsageError("--start and --end declare the slot grid together: give both")
        spec = RecordSpec(user_col=self.user_col, value_col=self.value_col, lower=settings.lower,
                          upper=settings.upper, time_col=self.time_col, cell_col=self.cell_col,
                          slot_length=self.slot_length, cell=self.cell, slot=self.slot, group_by=keys,
                          out_of_range=enum_value(self.value_out_of_range), timezone=self.timezone,
                          group_keys=group_keys, group_keys_table=table, start=self.start, end=self.end)
        if participation == "private":
            _require_declared(spec)
        return MeanPlan(self, settings, spec)


def _declared_keys(group_keys, group_keys_file) -> tuple[tuple[str, ...] | None, Any]:
    """(--group-keys as a tuple of texts, --group-keys-file read as a table of texts), each or None."""
    if group_keys is not None and group_keys_file is not None:
        raise UsageError("--group-keys and --group-keys-file both declare the groups: give one of them")
    values = None
    if group_keys is not None:
        values = tuple((split_list(group_keys) or []) if isinstance(group_keys, str)
                       else (str(v).strip() for v in group_keys))
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


"""``tsdp.release``: private release of a series or a panel held in a polars or pandas frame.

The pipeline ``tsdp release`` runs, without files: :class:`ReleaseOptions` validates the options
(the command line's names, as keyword arguments) before any data is read and builds the
mechanism; :func:`release_table` loads a frame, derives the protected panel and adds the noise;
:func:`release` returns the released frame and its :class:`~tsdp.report.Report`. The command line
reads its file (or streams it, or aggregates events with an engine) and calls the same pieces, so
the same options and seed give the same release.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace
from typing import Any, Callable, NamedTuple, Sequence

from tsdp.accounting.budget import check_delta, check_epsilon
from tsdp.accounting.sensitivity import ContributionBounds
from tsdp.api import missing
from tsdp.api.norm_bound import auto_option, check_norm_options
from tsdp.api.options import cap_value, check_alpha, choice, names
from tsdp.errors import UsageError
from tsdp.io.load import InputSpec
from tsdp.mechanisms.registry import MECHANISMS, NAMES, SUMMABLE, owners
from tsdp.accounting.samplers import sampler_of

ALL_STEPS_NOTE = "no participation bound: a user may appear in every step (I = T)"
UNIT_HINT = ("give --max-per-step: the largest amount one protected unit can add to or remove from one cell, in "
             "the values' own unit (see 'Choosing your unit' in the README)")


@dataclass(frozen=True)
class ReleaseOptions:
    """Every option of ``tsdp release`` that shapes the release, named as on the command line
    (``--max-per-step`` -> ``max_per_step``; ``--round`` -> ``round_values``)."""

    epsilon: float
    unit: str
    mechanism: str = "gaussian"
    delta: float | None = None
    max_per_step: float | str | None = None  # None: counts, 1 per unit and cell (series: refused for non-counts)
    max_steps: int | str | None = None  # "auto" (either): chosen privately (tsdp.mechanisms.bounds)
    max_norm: float | str | None = None  # events, --unit user, Gaussian: each user's cells scaled to L2 <= C
    w: int | None = None
    series_per_user: int | None = None
    neighbouring: str = "add-remove"
    calibration: str = "analytic"
    noise: str | None = None
    dft_k: int | None = None  # --mechanism dft only; 30 when not given
    sampling_rate: float | None = None
    accounting: str | None = None
    delta_split: float | None = None
    filter_alpha: float | None = None
    filter: str | None = None
    filter_sigma: float | None = None
    filter_width: int | None = None
    filter_kernel: str | Sequence[float] | None = None
    assume_none: bool = False
    fast_preset: str | None = None
    fast_max_samples: int | None = None
    fast_fixed_interval: int | None = None
    fast_gains: str | Sequence[float] | None = None
    fast_theta: float | None = None
    fast_xi: float | None = None
    fast_q: float | None = None
    fast_r: float | None = None
    layout: str | None = None
    time_col: str = "time"
    value_col: str | None = None
    series_col: str | None = None
    series_cols: str | Sequence[str] | None = None
    user_col: str | None = None
    series_keys: str | Sequence[str] | None = None
    start: str | None = None
    end: str | None = None
    freq: str | None = None
    timezone: str | None = None
    fill_missing: str = "error"
    interpolate_released: bool = False
    allow_negative: bool = False
    value_bound: float | None = None
    clip_min: float | None = None
    clip_max: float | None = None
    round_values: bool = False
    sampler: str | None = None  # the mechanism's own: hardened where it has one, else float
    granularity: float | None = None
    alpha: float = 0.05
    accuracy_for: str = "cell"
    bound_selection_share: float | None = None  # with an "auto" cap: share of epsilon spent choosing it [0.1; 0.15 norm]
    bound_quantile: float | None = None  # with an "auto" cap: the quantile of the users' contributions [0.9]

    def parameters(self) -> dict[str, Any]:
        """The public parameters the report records (enum values as their strings)."""
        return {k: getattr(v, "value", v) for k, v in asdict(self).items()}

    def plan(self) -> "ReleasePlan":
        """Validate every option (UsageError naming it) and build the mechanism: before any data is read.

        With a cap "auto" the plan releases at the epsilon :class:`tsdp.mechanisms.bounds.Split` leaves
        once :meth:`ReleasePlan.resolve` has chosen the caps with the rest (:mod:`tsdp.mechanisms.bounds`)."""
        caps = {"max_per_step": cap_value("max-per-step", self.max_per_step, integer=False),
                "max_steps": cap_value("max-steps", self.max_steps, integer=True),
                "max_norm": cap_value("max-norm", self.max_norm, integer=False)}
        auto = tuple(cap for cap, value in caps.items() if value == "auto")
        if not auto:
            for option, value in (("bound-selection-share", self.bound_selection_share),
                                  ("bound-quantile", self.bound_quantile)):
                if value is not None:
                    raise UsageError(f"--{option} {value!r} applies only with --max-per-step, --max-steps or "
                                     "--max-norm auto")
            return replace(self, **caps)._plan()
        return self._auto_plan(caps, auto)

    def _auto_plan(self, caps: dict, auto: tuple[str, ...]) -> "ReleasePlan":
        """The plan of a release whose caps in ``auto`` are chosen privately: every other option is
        validated by planning with placeholders (1) at the release's share of epsilon."""
        from tsdp.api.norm_bound import selection_budget, selection_split
        from tsdp.mechanisms.bounds import EXACT

        share, quantile, exact = selection_budget(self, auto)
        layout = InputSpec(layout=getattr(self.layout, "value", self.layout), value_col=self.value_col,
                           user_col=self.user_col).resolved_layout
        first = auto_option(auto)
        if self.bound_quantile is not None and auto == ("max_norm",):
            raise UsageError(f"--bound-quantile {self.bound_quantile!r} applies to --max-per-step and --max-steps "
                             "auto; --max-norm auto balances the cap's bias against the noise instead")
        if layout != "events":
            raise UsageError(f"{first} auto needs raw events (--layout events, --user-col): tsdp chooses and "
                             "enforces the cap only where it aggregates the events itself")
        unit = getattr(self.unit, "value", self.unit)
        if "max_per_step" in auto and unit == "event":
            raise UsageError("--max-per-step auto: --unit event keeps every event (no per-user cap to choose)")
        if "max_steps" in auto and unit != "user":
            raise UsageError(f"--max-steps auto applies to --unit user only, not {unit}")
        placeholder = replace(self, **{cap: (1 if cap in auto else value) for cap, value in caps.items()},
                              epsilon=self.epsilon * (1.0 - share), bound_selection_share=None, bound_quantile=None)
        plan = placeholder._plan()
        split = selection_split(self, share, len(auto), exact, plan)
        if split.rule == EXACT:
            plan = replace(placeholder, epsilon=split.release_epsilon)._plan()
        plan.auto = AutoBounds(replace(self, **caps), auto, share, quantile, split)
        return plan

    def _plan(self) -> "ReleasePlan":
        from tsdp.engine.panel import ALL_STEPS, event_caps
        from tsdp.io.timezones import check_zone
        from tsdp.mechanisms import postprocess as post

        for option, value in (("round", self.round_values), ("allow-negative", self.allow_negative),
                              ("assume-none", self.assume_none), ("interpolate-released", self.interpolate_released)):
            if type(value).__name__ not in ("bool", "bool_"):  # "no" is truthy: a flag takes True/False only
                raise UsageError(f"--{option} is a flag: True or False, got {value!r}")
        mechanism = choice("mechanism", self.mechanism, NAMES)
        unit = choice("unit", self.unit, ("event", "w-event", "user"))
        noise = choice("noise", self.noise, ("gaussian", "laplace"))
        choice("neighbouring", self.neighbouring, ("add-remove", "substitute"))
        choice("calibration", self.calibration, ("analytic", "classic"))
        fill = missing.fill_policy(self.fill_missing)
        choice("accounting", self.accounting, ("exact", "paper", "conditional"))
        choice("filter", self.filter, ("gaussian", "triangle", "boxcar", "custom"))
        layout = choice("layout", self.layout, ("long", "wide", "events"))
        check_zone(self.timezone)
        post.check_clip(self.clip_min, self.clip_max)
        if self.allow_negative and self.neighbouring == "substitute" and layout != "events":
            # a contribution in [-M, M] replaced by another in the same cell moves it by up to 2 M; the
            # sensitivities of substitution count twice the cells at M each (non-negative contributions)
            raise UsageError("--allow-negative with --neighbouring substitute: a user contributing -M to a cell "
                             "replaced by one contributing +M changes it by 2 M, which the substitution "
                             "sensitivities (twice the cells, M each) do not cover; use --neighbouring "
                             "add-remove, or declare --max-per-step as twice the largest contribution")
        mech = MECHANISMS[mechanism]
        own = self._own_options(mech)
        noise = own.get("noise", "gaussian")
        if self.max_norm is not None:
            check_norm_options(self, mech, unit, noise)
        if self.assume_none and (unit != "user" or self.max_steps is not None):
            raise UsageError("--assume-none needs --unit user and no --max-steps (it sets I = T)")
        pure = mech.pure(noise)
        if not pure and self.delta is None:
            raise UsageError(f"--delta is required for --mechanism {mechanism}")
        if pure and self.delta is not None:
            raise UsageError(f"--delta does not apply to --mechanism {mechanism} with Laplace noise "
                             "(pure epsilon-DP); remove it")
        for option, value in (("max-steps", self.max_steps), ("w", self.w), ("series-per-user", self.series_per_user)):
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
                raise UsageError(f"--{option} {value!r}: must be an integer >= 1")
        spec = InputSpec(
            layout=layout, time_col=self.time_col, value_col=self.value_col, series_col=self.series_col,
            series_cols=names(self.series_cols), user_col=self.user_col, series_keys=names(self.series_keys),
            start=self.start, end=self.end, freq=self.freq, fill_missing=fill in ("zero", "null"),
            keep_missing=fill == "null", allow_negative=self.allow_negative, timezone=self.timezone,
        )
        missing.check_policy(fill, self.interpolate_released, MECHANISMS[mechanism], spec.resolved_layout,
                             self.accuracy_for)
        counts_assumed = self.max_per_step is None and spec.resolved_layout != "events"
        if counts_assumed and self.allow_negative:
            raise UsageError("--max-per-step is required with --allow-negative: values that may be negative are "
                             "not counts, and the default bound (one unit adds at most 1 to a cell) means nothing "
                             f"for them; {UNIT_HINT}")
        per_step = 1.0 if self.max_per_step is None else self.max_per_step
        if self.max_norm is not None and self.max_per_step is None:  # the norm alone bounds a cell
            per_step = self.max_norm / (self.value_bound or 1.0)
        declared = ContributionBounds(
            level=unit, max_per_step=per_step,
            max_steps=ALL_STEPS if self.assume_none or (self.max_norm is not None and self.max_steps is None)
            else self.max_steps,
            w=self.w, series_per_unit=self.series_per_user, neighbouring=self.neighbouring_value,
            max_norm=self.max_norm,
        )
        if self.value_bound is not None and (spec.resolved_layout != "events" or self.value_col is None):
            raise UsageError(f"--value-bound {self.value_bound!r} clips each event's value: it applies only to "
                             f"--layout events with --value-col, not to the {spec.resolved_layout} layout"
                             + ("" if spec.resolved_layout != "events" else " without --value-col"))
        if spec.resolved_layout != "events":
            # the long and wide loaders take the grid and the series from the input; ignoring these
            # would release series (and steps) the steward declared were not public
            for option, value in (("start", self.start), ("end", self.end), ("series-keys", self.series_keys)):
                if value is not None:
                    raise UsageError(f"--{option} {value!r} declares the public grid or series keys of --layout "
                                     f"events only; the {spec.resolved_layout} layout releases every series and "
                                     "step of its input (treated as public): remove it, or filter the input first")
        caps = event_caps(declared, self.value_bound) if spec.resolved_layout == "events" else None
        sampler = sampler_of(self.sampler, self.granularity)  # hardened by default; float warns itself
        accuracy_for = choice("accuracy-for", self.accuracy_for, ("cell", "sum"))
        check_alpha(self.alpha)
        if accuracy_for == "sum" and not mech.summable:
            raise UsageError(f"--accuracy-for sum is available for --mechanism {', '.join(SUMMABLE)}, not "
                             f"{mechanism}: its per-series sums depend on the released sampling pattern")
        run = mechanism_runner(mech, self.epsilon, self.delta, own, sampler)
        return ReleasePlan(self, mechanism, noise, declared, spec, caps, run, sampler=sampler,
                           accuracy_for=accuracy_for, counts_assumed=counts_assumed)

    def _own_options(self, mechanism) -> dict[str, Any]:
        """The mechanism's own options (its keyword -> value, its defaults for those not given, parsed);
        UsageError naming an option given that applies only to other mechanisms."""
        for name in EXCLUSIVE_OPTIONS:
            if getattr(self, name) is not None and name not in mechanism.options:
                allowed = owners(name)
                scope = (f"only to --mechanism {allowed[0]}" if len(allowed) == 1 else
                         f"to --mechanism {', '.join(allowed[:-1])} and {allowed[-1]}")
                raise UsageError(f"--{name.replace('_', '-')} applies {scope}, not --mechanism {mechanism.name}; "
                                 "remove it")
        parsers = getattr(mechanism, "parsers", {})
        own = {}
        for name, (keyword, default) in mechanism.options.items():
            value = getattr(getattr(self, name), "value", getattr(self, name))
            value = parsers[name](value) if name in parsers else value
            own[keyword] = default if value is None else value
        return own

    @property
    def neighbouring_value(self) -> str:
        return getattr(self.neighbouring, "value", self.neighbouring)


# options that apply to some mechanisms only (not given: None), in the order they are checked
EXCLUSIVE_OPTIONS = tuple(name for name, f in ReleaseOptions.__dataclass_fields__.items()
                          if f.default is None and owners(name))


@dataclass
class ReleasePlan:
    """Validated options: the declared unit, how to read the input, the caps on raw events, and
    ``run(table, panel, rng, prefetched, stream=None) -> (release, as_matrix, rebuild)``."""

    options: ReleaseOptions
    mechanism: str
    noise: str
    declared: ContributionBounds
    spec: InputSpec
    caps: Any
    run: Callable
    notes: list[str] = field(default_factory=list)
    sampler: Any = field(default_factory=sampler_of)
    accuracy_for: str = "cell"
    counts_assumed: bool = False  # series input without --max-per-step: its values must be counts
    auto: "AutoBounds | None" = None  # caps to be chosen privately (then the plan is a placeholder)
    selection: dict | None = None  # the caps chosen (tsdp.mechanisms.bounds.Choice by cap), once resolved

    def profile_job(self):
        """(the event job counting the users' contributions over the candidate grids, the grids): the
        pass that precedes the choice of the ``auto`` caps; fixed caps (series, fixed buckets) hold."""
        from tsdp.engine.events import EventCaps
        from tsdp.engine.events import event_job
        from tsdp.mechanisms import bounds

        options = self.auto.options
        fixed_steps = None if "max_steps" in self.auto.caps else self.declared.max_steps
        fixed = self.caps if "max_norm" in self.auto.caps and "max_per_step" not in self.auto.caps else None
        fixed_per_step = None if fixed is None or options.max_per_step is None else fixed.max_per_step
        caps = EventCaps(series_per_unit=self.declared.series_per_unit, max_steps=fixed_steps,
                         value_bound=options.value_bound, level=self.declared.level, max_per_step=fixed_per_step)
        job = event_job(self.spec, caps)
        n_steps = self.n_steps(job)
        grids = {cap: bounds.grid_for(cap, n_steps, options.value_bound) for cap in self.auto.caps}
        return job.profiling(grids), grids

    def n_steps(self, job=None) -> int:
        """T: the steps of the declared grid of event input."""
        from tsdp.engine.events import event_job

        job = job or event_job(self.spec, self.caps)
        return job.grid(_time_type(self.spec))[0].n_steps

    def balance(self):
        """The public constants of --max-norm auto's score (:func:`tsdp.api.norm_bound.balance_of`)."""
        from tsdp.api.norm_bound import balance_of

        return balance_of(self)

    def resolve(self, histograms: dict, grids: dict, rng) -> "ReleasePlan":
        """The plan of the release at the caps the exponential mechanism chooses from ``histograms``
        (the profile job's, :func:`tsdp.engine.events.profile_histograms`), with ``rng``; its claims are
        composed with the selection (:func:`tsdp.mechanisms.bounds.with_selection`)."""
        from tsdp.mechanisms import bounds

        a = self.auto
        choices = bounds.select(histograms, grids, a.quantile, a.split.selection_epsilon, rng,
                                self.balance() if "max_norm" in a.caps else None)
        resolved = replace(a.options, **{cap: picked.chosen for cap, picked in choices.items()},
                           epsilon=a.split.release_epsilon, bound_selection_share=None,
                           bound_quantile=None)._plan()
        base = resolved.run

        def run(*args, **kwargs):
            result, as_matrix, rebuild = base(*args, **kwargs)
            claim = bounds.with_selection(result.claim, choices, a.share, a.split, a.options.epsilon)
            return replace(result, claim=claim), as_matrix, rebuild

        resolved.run = run
        resolved.selection = choices
        return resolved

    def require_counts(self, table) -> None:
        """UsageError naming --max-per-step when the plan assumed counts (no --max-per-step on series
        input) but ``table`` holds a value that is not a whole number. The check reads the values; its
        outcome only stops the run, and its message holds no figure of the data."""
        if self.counts_assumed and not table.holds_whole_numbers():
            where = (f"the values of --value-col {self.spec.value_col!r}" if self.spec.resolved_layout == "long"
                     else "the series columns")
            raise UsageError(f"--max-per-step is required: {where} are not all whole numbers, so they are not "
                             "counts, and the default bound (one unit adds at most 1 to a cell) means nothing for "
                             f"them; {UNIT_HINT}")

    @property
    def assumption_warning(self) -> str | None:
        """What a dry run of series input without --max-per-step assumes (it reads no value)."""
        if not self.counts_assumed:
            return None
        from tsdp.caveats import Caveat

        return Caveat("assumed_counts", "--max-per-step not given: the dry run assumes counts (one unit adds at most 1 "
                      "to a cell); the release refuses values that are not whole numbers without --max-per-step")

    @property
    def cellwise(self) -> bool:
        return MECHANISMS[self.mechanism].cellwise

    def accuracy(self, result, target: str | None = None, pattern: bool = True):
        """The release's :class:`tsdp.accuracy.Accuracy` at ``--alpha`` (public parameters only);
        with ``pattern``, FAST's also given its released sampling pattern. Computed once per release
        (the DFT-Laplace interval is a simulation)."""
        from tsdp.mechanisms.registry import for_claim

        target = target or self.accuracy_for
        key = (id(result), target, pattern)
        cache = self.__dict__.setdefault("_accuracy", {})
        if key not in cache or cache[key][0] is not result:
            sampled = getattr(result, "sampled", None) if pattern else None
            try:
                cache[key] = (result, for_claim(result.claim, self.options.alpha, target, sampled))
            except ValueError as exc:
                raise UsageError(str(exc)) from None
        return cache[key][1]

    def postprocess(self, values):
        from tsdp.mechanisms import postprocess as post

        o = self.options
        return post.postprocess(values, o.clip_min, o.clip_max, o.round_values)

    def typed(self, frame):
        """The released frame with ``--round``'s values written as integers (Int64), not ``11.0``:
        the values are the only floating-point columns of a released frame."""
        if not self.options.round_values:
            return frame
        import polars as pl

        return frame.with_columns(pl.col(pl.Float32, pl.Float64).cast(pl.Int64))

    def postprocess_notes(self) -> list[str]:
        from tsdp.mechanisms import postprocess as post

        o = self.options
        return [f"post-processing: {s}" for s in post.describe(o.clip_min, o.clip_max, o.round_values)]

    def finish(self, table, frame):
        """The released frame with ``--fill-missing null`` (and ``--interpolate-released``) applied
        (:func:`tsdp.api.missing.finish`)."""
        if not self.spec.keep_missing:
            return frame
        return missing.finish(table, frame, self.options.interpolate_released, self.options.round_values)

    def missing_claim(self, claim, count: int):
        """The claim with the missing-cells assumption of ``--fill-missing null`` stated in its parameters."""
        return missing.with_missing(claim, count, self.options.interpolate_released) if self.spec.keep_missing \
            else claim

    def missing_notes(self, count: int) -> list[str]:
        return missing.notes(count, self.options.interpolate_released) if self.spec.keep_missing else []


def resolve_frame(plan: "ReleasePlan", df, rng) -> "ReleasePlan":
    """The plan at the caps chosen privately from the events of ``df`` (in memory); ``plan`` itself
    when it has no ``auto`` cap."""
    if plan.auto is None:
        return plan
    from tsdp.engine.events import assemble, partial_cell_sums, profile_histograms

    job, grids = plan.profile_job()
    histograms = profile_histograms(assemble(job, [partial_cell_sums(df, job)]).diagnostics, grids)
    return plan.resolve(histograms, grids, rng)


@dataclass(frozen=True)
class AutoBounds:
    """The caps of a release to be chosen privately, with the options that asked for them."""

    options: ReleaseOptions
    caps: tuple[str, ...]
    share: float
    quantile: Any  # fractions.Fraction
    split: Any  # tsdp.mechanisms.bounds.Split: the selections' epsilon and the release's


def _time_type(spec: InputSpec):
    """The time type the public grid of event input is built in (as --dry-run builds it)."""
    import polars as pl

    return pl.Datetime("us", spec.timezone) if spec.timezone else pl.Datetime("us")


class Loaded(NamedTuple):
    """A frame loaded for release: the loaded input, the protected panel, the report's notes and
    (Gaussian noise on long input) normal draws started while the data was checked."""

    loaded: Any
    panel: Any
    notes: list[str]
    prefetched: Any


def load_frame(df, plan: ReleasePlan, generator=None, stage: Callable[[str], None] = lambda name: None) -> Loaded:
    """Check ``df`` (a polars DataFrame) against the plan and derive the panel; ``generator`` starts
    the Gaussian noise draws while the data is checked (they do not depend on it)."""
    from tsdp.engine.panel import load_panel
    from tsdp.mechanisms.noise import PrefetchedNormals

    prefetched = None
    if (generator is not None and getattr(MECHANISMS[plan.mechanism], "prefetches", False)
            and not plan.sampler.hardened and plan.spec.resolved_layout == "long"):
        prefetched = PrefetchedNormals(generator, df.height)
    stage("checking")
    loaded = Loaded(*load_panel(df, plan.spec, plan.declared, plan.caps), prefetched)
    plan.require_counts(loaded.loaded.table)
    return loaded


class Released(NamedTuple):
    """The released frame (polars), the mechanism's release (claim, warnings) and the notes."""

    frame: Any
    result: Any
    notes: list[str]


def release_loaded(plan: ReleasePlan, loaded: Loaded, generator) -> Released:
    """Add the noise to a loaded panel and post-process: the release ``tsdp release`` writes."""
    table = loaded.loaded.table
    result, _, rebuild = plan.run(table, loaded.panel, generator, loaded.prefetched)
    frame = plan.typed(plan.finish(table, rebuild(plan.postprocess(result.values))))
    return Released(frame, result, [*loaded.notes, *plan.postprocess_notes()])


def report_for(plan: ReleasePlan, table, result, randomness, described: dict, notes: list[str],
               warnings: list[str], parameters: dict[str, Any], missing: int | None = None):
    """The privacy report of a release (``described``: the output's file, format and sha256;
    ``missing``: the cells the input lacked, when ``table`` does not hold the count)."""
    from tsdp.report import Report

    missing = getattr(table, "filled_cells", 0) if missing is None else missing
    if parameters.get("max_per_step") is None:  # the default the plan resolved (counts: 1)
        parameters = {**parameters, "max_per_step": plan.declared.max_per_step}
    return Report(
        command="release",
        parameters={**parameters, "layout": plan.spec.resolved_layout},
        claim=plan.missing_claim(result.claim, missing),
        output={**described, "layout": table.layout},
        randomness=randomness.label,
        grid={"n_series": table.n_series, "n_steps": table.n_steps, "freq": table.grid.freq,
              "start": table.grid.points[0], "end": table.grid.points[-1]},
        notes=[*notes, *plan.missing_notes(missing)], warnings=warnings,
        accuracy=plan.accuracy(result).to_dict(),
    )


def mechanism_runner(mechanism, epsilon: float, delta: float | None, own: dict, sampler):
    """Validate the budget up front and return ``run(table, panel, rng, prefetched, stream=None)``,
    which gives the release of ``mechanism`` (:mod:`tsdp.mechanisms.registry`) with its options
    ``own``, its values as an (n_series, n_steps) matrix (a function) and a function rebuilding the
    output frame from the released values."""
    from tsdp.mechanisms.protocol import Setting

    check_epsilon(epsilon)
    if delta is not None:
        check_delta(delta)

    def run(table, panel, rng, prefetched, stream=None):
        """``stream``: the noise of a panel released in chunks of series (cellwise mechanisms)."""
        setting = Setting(epsilon, delta, panel, sampler, own)
        if mechanism.cellwise:
            result = mechanism.release(table.value_chunks(), panel, rng, setting, prefetched=prefetched, stream=stream)
            return result, lambda: table.flat_to_matrix(result.values), table.with_values_flat
        result = mechanism.release(table.values_matrix(), panel, rng, setting, read_numbers=_read_numbers)
        return result, lambda: result.values, table.with_values_matrix

    return run


def _read_numbers(path: str, option: str):
    from tsdp.io.files import read_numbers

    return read_numbers(path, option)


def release(frame, *, epsilon: float, unit: str, seed: int | None = None, **options) -> "Result":
    """Release the series in ``frame`` (polars or pandas) with calibrated noise, as ``tsdp release`` does.

    The keyword arguments are the command line's options with underscores (``max_per_step``,
    ``max_steps``, ``series_per_user``, ``mechanism``, ``delta``, ``time_col``, ``value_col``,
    ``series_col``, ``layout``, ``clip_min``, ``round``, ...; lists may be Python lists): see
    ``tsdp release --help`` and :class:`ReleaseOptions`. Raw events (``layout="events"`` or
    ``user_col``) are bounded and aggregated in memory. ``seed`` makes a run reproducible for
    tests; such a release must not be published (the report says so).

    Returns :class:`tsdp.api.result.Result`, which unpacks as ``(released frame, report)``;
    ``result.custodian`` holds the input's counts (rows kept, clipped, dropped, filled: NOT for
    publication), None when there are none. Bad options raise :class:`tsdp.errors.UsageError`, bad data :class:`tsdp.errors.DataError`
    (both :class:`tsdp.errors.TsdpError`), before any noise is drawn.
    """
    from tsdp.api.frames import from_polars, to_polars
    from tsdp.api.result import Result, describe_in_memory
    from tsdp.io.magnitudes import require_finite_output
    from tsdp.rng import SEEDED_WARNING, make_random_source

    requested = options_from(epsilon=epsilon, unit=unit, **options)
    plan = requested.plan()
    _check_seed(seed)
    df, kind = to_polars(frame)
    randomness = make_random_source(seed)
    plan = resolve_frame(plan, df, randomness.generator)  # caps chosen privately first ("auto")
    loaded = load_frame(df, plan, randomness.generator)
    released = release_loaded(plan, loaded, randomness.generator)
    require_finite_output(released.frame)
    warnings = list(released.result.warnings) + ([SEEDED_WARNING] if randomness.seeded else [])
    parameters = {**requested.parameters(), "input": IN_MEMORY_INPUT}

    def make_report(described: dict):
        return report_for(plan, loaded.loaded.table, released.result, randomness, described, released.notes,
                          warnings, {**parameters, "output": described["file"]})

    result = Result(from_polars(released.frame, kind), make_report(describe_in_memory(released.frame)),
                    released.frame, make_report)
    diagnostics = loaded.loaded.diagnostics
    result.custodian = {"diagnostics": dict(diagnostics)} if diagnostics else None
    return result


IN_MEMORY_INPUT = "<dataframe>"


def options_from(**options) -> ReleaseOptions:
    """:class:`ReleaseOptions` from keyword arguments; ``round`` is ``--round``. An unknown name is
    a UsageError naming it (a typo must not be ignored)."""
    if "round" in options:
        options["round_values"] = options.pop("round")
    known = set(ReleaseOptions.__dataclass_fields__)
    unknown = sorted(set(options) - known)
    if unknown:
        raise UsageError(f"tsdp.release: unknown option {unknown[0]!r}; the options are those of 'tsdp release "
                         "--help' with underscores (e.g. max_steps for --max-steps)")
    return ReleaseOptions(**options)


def _check_seed(seed) -> None:
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int) or seed < 0):
        raise UsageError(f"--seed {seed!r}: must be an integer >= 0")

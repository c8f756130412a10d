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
from tsdp.errors import UsageError
from tsdp.io.load import InputSpec

MECHANISMS = ("gaussian", "laplace", "dft", "fast", "subsample", "filter-subsample")
DEFAULT_DFT_K = 30  # Fourier coefficients kept by --mechanism dft when --dft-k is not given
CELLWISE = ("gaussian", "laplace")  # cells released independently, in file order (no sorting)
SUMMABLE = ("gaussian", "laplace", "dft")  # --accuracy-for sum: per-series sums independent of sampling
ALL_STEPS_NOTE = "no participation bound: a user may appear in every step (I = T)"
UNIT_HINT = ("give --max-per-step: the largest amount one protected unit can add to or remove from one cell, in "
             "the values' own unit (see 'Choosing your unit' in the README)")


def _choice(option: str, value: Any, allowed: Sequence[str]) -> str | None:
    """``value`` (a string or an Enum of the command line) checked against ``allowed``."""
    if value is None:
        return None
    value = getattr(value, "value", value)
    if value not in allowed:
        raise UsageError(f"--{option} {value!r}: must be one of {', '.join(allowed)}")
    return value


def _names(value: str | Sequence[str] | None) -> list[str] | None:
    """Column names given as ``a,b`` (command line) or a list (Python)."""
    if value is None:
        return None
    items = str(value).split(",") if isinstance(value, str) else [str(v) for v in value]
    return [t.strip() for t in items if t.strip()] or None


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
    bound_selection_share: float | None = None  # with an "auto" cap: share of epsilon spent choosing it [0.1]
    bound_quantile: float | None = None  # with an "auto" cap: the quantile of the users' contributions [0.9]

    def parameters(self) -> dict[str, Any]:
        """The public parameters the report records (enum values as their strings)."""
        return {k: getattr(v, "value", v) for k, v in asdict(self).items()}

    def plan(self) -> "ReleasePlan":
        """Validate every option (UsageError naming it) and build the mechanism: before any data is read.

        With ``max_per_step`` or ``max_steps`` "auto" the plan releases with ``epsilon x (1 - share)``
        once :meth:`ReleasePlan.resolve` has chosen the caps with the rest (:mod:`tsdp.mechanisms.bounds`)."""
        caps = {"max_per_step": _cap_value("max-per-step", self.max_per_step, integer=False),
                "max_steps": _cap_value("max-steps", self.max_steps, integer=True)}
        auto = tuple(cap for cap, value in caps.items() if value == "auto")
        if not auto:
            for option, value in (("bound-selection-share", self.bound_selection_share),
                                  ("bound-quantile", self.bound_quantile)):
                if value is not None:
                    raise UsageError(f"--{option} {value!r} applies only with --max-per-step auto or --max-steps auto")
            return replace(self, **caps)._plan()
        return self._auto_plan(caps, auto)

    def _auto_plan(self, caps: dict, auto: tuple[str, ...]) -> "ReleasePlan":
        """The plan of a release whose caps in ``auto`` are chosen privately: every other option is
        validated by planning with placeholders (1) at the release's share of epsilon."""
        from tsdp.mechanisms import bounds

        share = bounds.DEFAULT_SHARE * len(auto) if self.bound_selection_share is None else self.bound_selection_share
        if isinstance(share, bool) or not isinstance(share, (int, float)) or not 0.0 < share < 1.0:
            raise UsageError(f"--bound-selection-share must be in (0, 1), got {share!r}")
        try:
            quantile = bounds.quantile_fraction(bounds.DEFAULT_QUANTILE if self.bound_quantile is None
                                                else self.bound_quantile)
        except ValueError as exc:
            raise UsageError(str(exc)) from None
        check_epsilon(self.epsilon)
        layout = InputSpec(layout=getattr(self.layout, "value", self.layout), value_col=self.value_col,
                           user_col=self.user_col).resolved_layout
        first = "--max-per-step" if "max_per_step" in auto else "--max-steps"
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
        plan.auto = AutoBounds(replace(self, **caps), auto, share, quantile)
        return plan

    def _plan(self) -> "ReleasePlan":
        from tsdp.engine.panel import ALL_STEPS, event_caps
        from tsdp.io.timezones import check_zone
        from tsdp.mechanisms import postprocess as post

        for option, value in (("round", self.round_values), ("allow-negative", self.allow_negative),
                              ("assume-none", self.assume_none), ("interpolate-released", self.interpolate_released)):
            if type(value).__name__ not in ("bool", "bool_"):  # "no" is truthy: a flag takes True/False only
                raise UsageError(f"--{option} is a flag: True or False, got {value!r}")
        mechanism = _choice("mechanism", self.mechanism, MECHANISMS)
        unit = _choice("unit", self.unit, ("event", "w-event", "user"))
        noise = _choice("noise", self.noise, ("gaussian", "laplace"))
        _choice("neighbouring", self.neighbouring, ("add-remove", "substitute"))
        calibration = _choice("calibration", self.calibration, ("analytic", "classic"))
        fill = _fill_policy(self.fill_missing)
        accounting = _choice("accounting", self.accounting, ("exact", "paper", "conditional"))
        kernel = _choice("filter", self.filter, ("gaussian", "triangle", "boxcar", "custom"))
        layout = _choice("layout", self.layout, ("long", "wide", "events"))
        check_zone(self.timezone)
        post.check_clip(self.clip_min, self.clip_max)
        if self.allow_negative and self.neighbouring == "substitute" and layout != "events":
            # a contribution in [-M, M] replaced by another in the same cell moves it by up to 2 M; the
            # sensitivities of substitution count twice the cells at M each (non-negative contributions)
            raise UsageError("--allow-negative with --neighbouring substitute: a user contributing -M to a cell "
                             "replaced by one contributing +M changes it by 2 M, which the substitution "
                             "sensitivities (twice the cells, M each) do not cover; use --neighbouring "
                             "add-remove, or declare --max-per-step as twice the largest contribution")
        if noise is not None and mechanism in CELLWISE:
            raise UsageError(f"--noise applies to --mechanism dft and fast; --mechanism {mechanism} "
                             "is the noise itself")
        noise = noise or ("laplace" if mechanism == "fast" else "gaussian")
        fast = {"preset": self.fast_preset, "max_samples": self.fast_max_samples,
                "interval": self.fast_fixed_interval, "gains": _gains(self.fast_gains), "theta": self.fast_theta,
                "xi": self.fast_xi, "q": self.fast_q, "r": self.fast_r}
        if mechanism != "fast" and any(v is not None for v in fast.values()):
            given = next(k for k, v in fast.items() if v is not None)
            flag = {"interval": "fixed-interval"}.get(given, given.replace("_", "-"))
            raise UsageError(f"--fast-{flag} applies only to --mechanism fast")
        koga = {"p": self.sampling_rate, "accounting": accounting, "delta_split": self.delta_split,
                "alpha": self.filter_alpha, "kernel": kernel, "filter_sigma": self.filter_sigma,
                "filter_width": self.filter_width, "filter_kernel": self.filter_kernel}
        subsampling = mechanism in ("subsample", "filter-subsample")
        if not subsampling and any(v is not None for v in koga.values()):
            first = next(k for k, v in koga.items() if v is not None)
            flag = {"p": "sampling-rate", "kernel": "filter", "alpha": "filter-alpha"}.get(first, first.replace("_", "-"))
            raise UsageError(f"--{flag} applies only to --mechanism subsample or filter-subsample")
        if mechanism != "dft" and self.dft_k is not None:
            raise UsageError(f"--dft-k {self.dft_k!r} applies only to --mechanism dft, not {mechanism}; remove it")
        if mechanism == "subsample" and any(koga[k] is not None for k in ("alpha", "kernel", "filter_sigma",
                                                                          "filter_width", "filter_kernel")):
            raise UsageError("the --filter options and --filter-alpha apply only to --mechanism filter-subsample")
        if self.assume_none and (unit != "user" or self.max_steps is not None):
            raise UsageError("--assume-none needs --unit user and no --max-steps (it sets I = T)")
        pure = mechanism == "laplace" or (mechanism in ("dft", "fast") and noise == "laplace")
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
            series_cols=_names(self.series_cols), user_col=self.user_col, series_keys=_names(self.series_keys),
            start=self.start, end=self.end, freq=self.freq, fill_missing=fill in ("zero", "null"),
            keep_missing=fill == "null", allow_negative=self.allow_negative, timezone=self.timezone,
        )
        _check_missing_policy(fill, self.interpolate_released, mechanism, spec.resolved_layout, self.accuracy_for)
        counts_assumed = self.max_per_step is None and spec.resolved_layout != "events"
        if counts_assumed and self.allow_negative:
            raise UsageError("--max-per-step is required with --allow-negative: values that may be negative are "
                             "not counts, and the default bound (one unit adds at most 1 to a cell) means nothing "
                             f"for them; {UNIT_HINT}")
        declared = ContributionBounds(
            level=unit, max_per_step=1.0 if self.max_per_step is None else self.max_per_step,
            max_steps=ALL_STEPS if self.assume_none else self.max_steps,
            w=self.w, series_per_unit=self.series_per_user, neighbouring=self.neighbouring_value,
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
        sampling = _sampling(mechanism, self.sampler, self.granularity)
        accuracy_for = _choice("accuracy-for", self.accuracy_for, ("cell", "sum"))
        _check_alpha(self.alpha)
        if accuracy_for == "sum" and mechanism not in SUMMABLE:
            raise UsageError(f"--accuracy-for sum is available for --mechanism {', '.join(SUMMABLE)}, not "
                             f"{mechanism}: its per-series sums depend on the released sampling pattern")
        dft_k = DEFAULT_DFT_K if self.dft_k is None else self.dft_k
        run = mechanism_runner(mechanism, self.epsilon, self.delta, calibration, noise, dft_k, fast, koga,
                               sampling)
        return ReleasePlan(self, mechanism, noise, declared, spec, caps, run, sampling=sampling,
                           accuracy_for=accuracy_for, counts_assumed=counts_assumed)

    @property
    def neighbouring_value(self) -> str:
        return getattr(self.neighbouring, "value", self.neighbouring)


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
    sampling: dict = field(default_factory=lambda: {"sampler": "hardened", "granularity": None})
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
        caps = EventCaps(series_per_unit=self.declared.series_per_unit, max_steps=fixed_steps,
                         value_bound=options.value_bound, level=self.declared.level)
        job = event_job(self.spec, caps)
        n_steps = job.grid(_time_type(self.spec))[0].n_steps
        grids = {cap: bounds.grid_for(cap, n_steps) for cap in self.auto.caps}
        return job.profiling(grids), grids

    def resolve(self, histograms: dict, grids: dict, rng) -> "ReleasePlan":
        """The plan of the release at the caps the exponential mechanism chooses from ``histograms``
        (the profile job's, :func:`tsdp.engine.events.profile_histograms`), with ``rng``; its claims are
        composed with the selection (:func:`tsdp.mechanisms.bounds.with_selection`)."""
        from tsdp.mechanisms import bounds

        a = self.auto
        epsilon = a.options.epsilon * a.share
        choices = bounds.select(histograms, grids, a.quantile, epsilon, rng)
        resolved = replace(a.options, **{cap: choice.chosen for cap, choice in choices.items()},
                           epsilon=a.options.epsilon - epsilon, bound_selection_share=None,
                           bound_quantile=None)._plan()
        base = resolved.run

        def run(*args, **kwargs):
            result, as_matrix, rebuild = base(*args, **kwargs)
            claim = bounds.with_selection(result.claim, choices, a.share)
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
        return self.mechanism in CELLWISE

    def accuracy(self, result, target: str | None = None, pattern: bool = True):
        """The release's :class:`tsdp.accuracy.Accuracy` at ``--alpha`` (public parameters only);
        with ``pattern``, FAST's also given its released sampling pattern. Computed once per release
        (the DFT-Laplace interval is a simulation)."""
        from tsdp.accuracy import for_claim

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
        """The released frame with ``--fill-missing null`` applied: the cells the input lacked (the
        mechanism saw 0 there and its noisy value is dropped) are null again, and with
        ``--interpolate-released`` the interior ones of each series take the linear interpolation,
        by grid step, of the released values around them (post-processing of the release and of the
        missing pattern, both published: no privacy cost); a series' leading and trailing missing
        steps stay null. Clipping holds for an interpolated value (a convex combination of clipped
        ones); ``--round`` is applied to it again."""
        mask = getattr(table, "filled_mask", None)
        if not self.spec.keep_missing or mask is None:
            return frame
        import polars as pl

        columns = table.value_cols
        by_column = mask.reshape(frame.height, len(columns))  # values_flat order: row by row, columns within
        frame = frame.with_columns([pl.when(pl.Series(by_column[:, j])).then(None).otherwise(pl.col(c)).alias(c)
                                    for j, c in enumerate(columns)])
        if not self.options.interpolate_released:
            return frame
        filled = [pl.col(c).cast(pl.Float64).interpolate() for c in columns]
        if table.layout == "long" and table.series_col is not None:  # rows: series by series, in grid order
            filled = [f.over(table.series_col) for f in filled]
        if self.options.round_values:
            filled = [f.round(0) for f in filled]
        return frame.with_columns([f.alias(c) for f, c in zip(filled, columns)])

    def missing_claim(self, claim, count: int):
        """The claim with the missing-cells assumption of ``--fill-missing null`` stated in its
        parameters (``count`` cells of the grid were missing in the input and are published so)."""
        if not self.spec.keep_missing:
            return claim
        from dataclasses import replace

        return replace(claim, parameters={**claim.parameters, "missing_cells": {
            "policy": "null", "count": int(count), "pattern": MISSING_PATTERN,
            "released": ("linear interpolation of the released values (post-processing)"
                         if self.options.interpolate_released else "null")}})

    def missing_notes(self, count: int) -> list[str]:
        if not self.spec.keep_missing:
            return []
        notes = [f"--fill-missing null: {count} cell(s) of the grid had no value in the input; {MISSING_PATTERN}"]
        if self.options.interpolate_released:
            notes.append("--interpolate-released: each series' interior missing steps hold the linear interpolation "
                         "(by grid step) of its released values around them, a post-processing of the release "
                         "that costs no privacy; its leading and trailing missing steps stay empty. The accuracy "
                         "interval covers an interpolated value's noise too (a convex combination of independent "
                         "noises is more concentrated), not the interpolation's own error")
        return notes


MISSING_PATTERN = ("the pattern of missing cells is published as given and treated as public, like the series "
                   "and the time grid: the noise covers the values present, and a neighbouring dataset is assumed "
                   "to miss the same cells; where a unit's data decides whether a cell is missing (a step absent "
                   "because no one contributed), that pattern is NOT protected: use --fill-missing zero for counts")


def _fill_policy(value) -> str:
    value = getattr(value, "value", value)
    if value == "interpolate":  # refused with the reason, not only as an unknown choice
        raise UsageError("--fill-missing interpolate: interpolating the input before the noise would make "
                         "released values depend on their neighbours' raw values (outside the sensitivity); use "
                         "--fill-missing null --interpolate-released to interpolate the released values instead")
    return _choice("fill-missing", value, ("error", "zero", "null"))


def _check_missing_policy(fill: str, interpolate: bool, mechanism: str, layout: str, accuracy_for) -> None:
    """``--fill-missing null`` releases the cells present one by one: the cellwise mechanisms only."""
    if interpolate and fill != "null":
        raise UsageError("--interpolate-released fills the missing steps of the release: it needs "
                         f"--fill-missing null (got --fill-missing {fill})")
    if fill != "null":
        return
    if layout == "events":
        raise UsageError("--fill-missing null applies to series input (--layout long or wide): events are counted "
                         "on the public grid, where a step without events is a true 0")
    if mechanism not in CELLWISE:
        raise UsageError(f"--fill-missing null keeps missing cells out of the release, which --mechanism {mechanism} "
                         "cannot do (it transforms whole series): use --mechanism gaussian or laplace, or "
                         "--fill-missing zero for counts")
    if interpolate and getattr(accuracy_for, "value", accuracy_for) == "sum":
        raise UsageError("--accuracy-for sum with --interpolate-released: an interpolated step repeats the noise of "
                         "its neighbours, so a series' sum no longer has independent noise per step; use "
                         "--accuracy-for cell")


LINEAR = ("gaussian", "laplace", "dft", "subsample", "filter-subsample")  # release = A_w(values) + N_w


class ZerosLike:
    """A panel of zeros laid out as ``table`` (same cells, chunks and flat order): a linear
    mechanism run on it with the same randomness releases its noise alone."""

    def __init__(self, table) -> None:
        import numpy as np

        self.table = table
        self.n_series, self.n_steps = table.n_series, table.n_steps
        self._chunks = [np.zeros(len(c)) for c in table.value_chunks()]

    def value_chunks(self):
        return self._chunks

    def values_matrix(self):
        import numpy as np

        return np.zeros((self.n_series, self.n_steps))

    def flat_to_matrix(self, flat):
        return self.table.flat_to_matrix(flat)

    with_values_flat = with_values_matrix = None  # nothing is written


def run_split(plan: "ReleasePlan", table, panel, rng):
    """One release of ``table`` and, from the same randomness, its noiseless part:
    ``(result, released matrix, noiseless matrix)``, both (n_series, n_steps), before post-processing.

    The mechanisms of :data:`LINEAR` release ``A_w(b) + N_w`` for their randomness w (sampled steps
    and noise, drawn in an order that never depends on the values), with ``A_w`` linear (identity,
    rfft truncation, filter and interpolation; the hardened sampler's lattice rounding is applied to b
    first). Running the mechanism on zeros with a copy of the generator gives ``N_w`` alone, and
    ``A_w(b)`` is the difference. FAST's sampling pattern depends on the noisy values, but given the
    released pattern its Kalman filter is linear in the observations
    (:func:`tsdp.mechanisms.kalman.filter_given_pattern`), so the noiseless part is that filter run
    on the (lattice-rounded) values at the released pattern."""
    import copy

    if plan.mechanism == "fast":
        from tsdp.mechanisms.kalman import filter_given_pattern
        from tsdp.mechanisms.noise import snap

        result, as_matrix, _ = plan.run(table, panel, rng, None)
        p = result.claim.parameters
        g = p.get("granularity") if p.get("sampler") == "hardened" else None
        sampled = result.sampled.reshape(table.n_series, table.n_steps)
        noiseless = filter_given_pattern(snap(table.values_matrix(), g), sampled, p["Q"], p["R"], p["P0"])
        return result, as_matrix().reshape(table.n_series, table.n_steps), noiseless
    if plan.mechanism not in LINEAR:
        raise ValueError(f"no noiseless part known for mechanism {plan.mechanism!r}")
    twin = copy.deepcopy(rng)
    result, as_matrix, _ = plan.run(table, panel, rng, None)
    _, noise_matrix, _ = plan.run(ZerosLike(table), panel, twin, None)
    released = as_matrix().reshape(table.n_series, table.n_steps)
    return result, released, released - noise_matrix().reshape(table.n_series, table.n_steps)


def evaluate_loaded(plan: "ReleasePlan", loaded: "Loaded", raw, observed, rng, repeats: int):
    """``repeats`` releases of the loaded panel, each split against the raw input
    (:class:`tsdp.accuracy.evaluation.Evaluation`; NOT private, nothing is written).

    ``raw``: the input before caps, clipping and fill (n_series x n_steps); ``observed``: the cells
    whose true value the input gives (False where --fill-missing zero filled one)."""
    import numpy as np

    from tsdp.accuracy.evaluation import Evaluation

    table = loaded.loaded.table
    bounded = table.values_matrix()
    evaluation = Evaluation(raw, observed)
    result = None
    for _ in range(repeats):  # each run is a full release of the whole panel
        result, released, noiseless = run_split(plan, table, loaded.panel, rng)
        evaluation.add(bounded, noiseless, released, np.asarray(plan.postprocess(released.copy())))
    return evaluation, result


def evaluate_auto(plan: "ReleasePlan", histograms: dict, grids: dict, load, raw, observed, rng, repeats: int):
    """:func:`evaluate_loaded` for caps chosen privately: every run chooses its caps anew from the
    profile ``histograms`` (so the selection's randomness is in the evaluated error) and releases the
    panel ``load(resolved plan)`` gives at those caps."""
    import numpy as np

    from tsdp.accuracy.evaluation import Evaluation

    evaluation = Evaluation(raw, observed)
    result = None
    for _ in range(repeats):
        resolved = plan.resolve(histograms, grids, rng)
        loaded = load(resolved)
        table = loaded.loaded.table
        result, released, noiseless = run_split(resolved, table, loaded.panel, rng)
        evaluation.add(table.values_matrix(), noiseless, released,
                       np.asarray(resolved.postprocess(released.copy())))
    return evaluation, result


def resolve_frame(plan: "ReleasePlan", df, rng) -> "ReleasePlan":
    """The plan at the caps chosen privately from the events of ``df`` (in memory); ``plan`` itself
    when it has no ``auto`` cap."""
    if plan.auto is None:
        return plan
    from tsdp.engine.events import assemble, partial_cell_sums, profile_histograms

    job, grids = plan.profile_job()
    histograms = profile_histograms(assemble(job, [partial_cell_sums(df, job)]).diagnostics, grids)
    return plan.resolve(histograms, grids, rng)


def raw_input(df, plan: "ReleasePlan", loaded: "Loaded"):
    """(the raw panel, the observed cells) of an in-memory input: for events the unbounded
    aggregation on the public grid (:meth:`tsdp.engine.events.EventJob.unbounded`), for series the
    input itself, whose filled cells are not observed."""
    table = loaded.loaded.table
    if plan.spec.resolved_layout != "events":
        return table.values_matrix(), table.observed_matrix()
    import numpy as np

    from tsdp.engine.events import assemble, partial_cell_sums
    from tsdp.engine.events import event_job

    job = event_job(plan.spec, plan.caps).unbounded()
    raw = assemble(job, [partial_cell_sums(df, job)]).table.values_matrix()
    return raw, np.ones(raw.shape, dtype=bool)


@dataclass(frozen=True)
class AutoBounds:
    """The caps of a release to be chosen privately, with the options that asked for them."""

    options: ReleaseOptions
    caps: tuple[str, ...]
    share: float
    quantile: Any  # fractions.Fraction


def _cap_value(option: str, value, integer: bool):
    """A cap option: None, "auto", or a number (``integer``: a whole number >= 1); text from the
    command line is parsed. UsageError naming ``--option`` otherwise."""
    if value is None or value == "auto":
        return value
    given = value
    if isinstance(value, str):
        try:
            value = int(value) if integer else float(value)
        except ValueError:
            raise UsageError(f"--{option} {value!r}: must be a {'whole number >= 1' if integer else 'number'} "
                             "or auto") from None
    if integer and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
        raise UsageError(f"--{option} {given!r}: must be an integer >= 1 or auto")
    if not integer and (isinstance(value, bool) or not isinstance(value, (int, float))):
        raise UsageError(f"--{option} {given!r}: must be a number or auto")
    return value


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
    if (generator is not None and plan.mechanism == "gaussian" and plan.sampling["sampler"] == "float"
            and plan.spec.resolved_layout == "long"):
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


def _gains(value: str | Sequence[float] | None) -> tuple[float, float, float] | None:
    if value is None:
        return None
    parts = _names(value) if isinstance(value, str) else list(value)
    try:
        values = tuple(float(x) for x in parts or ())
    except (TypeError, ValueError):
        raise UsageError(f"--fast-gains must be three numbers Cp,Ci,Cd, got {value!r}") from None
    if len(values) != 3:
        raise UsageError(f"--fast-gains must be three numbers Cp,Ci,Cd, got {value!r}")
    return values


def _check_alpha(alpha) -> None:
    if isinstance(alpha, bool) or not isinstance(alpha, (int, float)) or not (0.0 < alpha < 1.0):
        raise UsageError(f"--alpha must be in (0, 1), got {alpha!r}")


def _sampling(mechanism: str, sampler: str | None, granularity: float | None) -> dict:
    """Check --sampler/--granularity up front: hardened by default for every mechanism (each warns
    itself about float noise)."""
    from tsdp.accounting import discrete as disc

    sampler = disc.check_sampler("hardened" if sampler is None else sampler)
    if granularity is not None:
        if sampler != "hardened":
            raise UsageError("--granularity applies to --sampler hardened only")
        disc.check_granularity(granularity)
    return {"sampler": sampler, "granularity": granularity}


def mechanism_runner(mechanism: str, epsilon: float, delta: float | None, calibration: str, noise: str,
                     dft_k: int, fast: dict, koga: dict, sampling: dict | None = None):
    """Validate the budget up front and return ``run(table, panel, rng, prefetched, stream=None)``,
    which gives the release, its values as an (n_series, n_steps) matrix (a function) and a
    function rebuilding the output frame from the released values."""
    check_epsilon(epsilon)
    if delta is not None:
        check_delta(delta)

    def run(table, panel, rng, prefetched, stream=None):
        """``stream``: the noise of a panel released in chunks of series (cellwise mechanisms)."""
        from tsdp.mechanisms.baseline import release_gaussian, release_laplace

        how = {"sampler": "hardened", "granularity": None, **(sampling or {})}
        if mechanism in CELLWISE:
            values = table.value_chunks()
            if mechanism == "gaussian":
                result = release_gaussian(values, panel, epsilon, delta, rng, calibration, prefetched, stream,
                                          how["sampler"], how["granularity"])
            else:
                result = release_laplace(values, panel, epsilon, rng, stream, how["sampler"], how["granularity"])
            return result, lambda: table.flat_to_matrix(result.values), table.with_values_flat
        matrix = table.values_matrix()
        if mechanism in ("subsample", "filter-subsample"):
            result = _koga(mechanism, matrix, panel, epsilon, delta, rng, koga, how)
        elif mechanism == "fast":
            from tsdp.mechanisms.fast import release_fast

            options = {k: v for k, v in fast.items() if k not in ("interval",) and v is not None}
            fixed = fast["interval"]
            result = release_fast(matrix, panel, epsilon, rng, delta=delta, noise=noise,
                                  interval=fixed, adaptive=fixed is None, sampler=how["sampler"],
                                  granularity=how["granularity"], **options)
        else:
            from tsdp.mechanisms.dft import release_dft

            result = release_dft(matrix, panel, epsilon, delta, rng, dft_k, noise, how["sampler"], how["granularity"])
        return result, lambda: result.values, table.with_values_matrix

    return run


def _koga(mechanism: str, matrix, panel, epsilon, delta, rng, koga: dict, how: dict):
    from tsdp.io.files import read_numbers
    from tsdp.mechanisms import subsample as ss

    p = 0.1 if koga["p"] is None else koga["p"]
    split = 0.5 if koga["delta_split"] is None else koga["delta_split"]
    if mechanism == "subsample":
        return ss.release_subsample(matrix, panel, epsilon, delta, rng, p, koga["accounting"] or "exact",
                                    delta_split=split, sampler=how["sampler"], granularity=how["granularity"])
    kernel = koga["kernel"] or "gaussian"
    taps = koga["filter_kernel"]
    if kernel == "custom":
        if taps is None:
            raise UsageError("--filter custom needs --filter-kernel FILE")
        kernel = read_numbers(taps, "--filter-kernel") if isinstance(taps, str) else [float(t) for t in taps]
    elif taps is not None:
        raise UsageError("--filter-kernel needs --filter custom")
    return ss.release_filter_subsample(
        matrix, panel, epsilon, delta, rng, p, kernel, koga["accounting"] or "conditional",
        filter_sigma=10.0 if koga["filter_sigma"] is None else koga["filter_sigma"],
        filter_width=koga["filter_width"], delta_split=split, alpha=koga["alpha"], sampler=how["sampler"],
        granularity=how["granularity"])


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

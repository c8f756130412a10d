"""``tsdp.forecast_train``: DP-SGD training of forecasting models, accounted with structured subsampling
(Schuchardt et al. 2025).

The pipeline ``tsdp forecast-train`` runs, without files: :class:`ForecastOptions` (the command line's
options) validates every option before the data is read and gives the :class:`ForecastPlan`; the plan
loads the panel (:meth:`ForecastPlan.load`), builds the model and the split, plans the run with the
accountant (:meth:`ForecastPlan.prepare`), trains (:meth:`ForecastPlan.train`: the forecasts, the
model files, the claim, the report and the custodian's figures, held-out metrics and the validation
history: NOT for publication) or trains a NON-private reference (:meth:`ForecastPlan.reference`).
With a budget, :meth:`ForecastPlan.dry_run` gives the training plan from the public shape alone
(:mod:`tsdp.forecast.plan`: noise, signal-to-noise and timed wall time per step count and batch
size); without ``steps``/``epochs`` (and ``noise_multiplier="auto"``, or with ``time_budget``) the run
trains for the plan's recommendation. The held-out tail is scored at ``test_windows`` origins against
seasonal naive forecasts at the natural seasons of the step.

``model="deepar"|"itransformer"`` (JAX, extra ``tsdp[deep]``) plug into the same trainer: for DeepAR
the window the sampler draws and the accountant charges is its receptive field, ``context_length``
plus its largest lag minus one; its time features and default lags come from the grid step.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from typing import Any, Callable, Sequence

import numpy as np

from tsdp.accounting.samplers import sampler_of
from tsdp.accuracy.intervals import DEFAULT_ALPHA
from tsdp.api.accounting import SERIES_UNITS, series_unit
from tsdp.api.forecast_report import (BATCH_RULE, BEST_CHECKPOINT_CAVEAT, DEEP, FORECAST_NOTE, METRICS_NOTE,
                                      gap_notes, model_inputs, notes, training_summary)
from tsdp.api import forecast_panel as panel
from tsdp.api.parsing import enum_value, names
from tsdp.caveats import Caveat
from tsdp.errors import DataError, UsageError
from tsdp.forecast.deep.heads import COUNT_DISTRIBUTIONS as COUNTS  # DeepAR's count heads (no JAX import)

DEFAULT_BATCH = 256
MISSING_HINT = ("forecast-train needs complete series, or --fill-missing null to train only on windows without a "
                "missing step")


@dataclass(frozen=True)
class ForecastOptions:
    """Every option of ``tsdp forecast-train`` that shapes the model and its release, named as on the
    command line (choices as their names; ``series_cols`` as ``"a,b"`` or a sequence)."""

    context_length: int
    forecast_length: int
    time_col: str = "time"
    value_col: str | None = None
    series_col: str | None = None
    layout: str = "long"
    series_cols: str | Sequence[str] | None = None
    freq: str | None = None
    timezone: str | None = None
    fill_missing: str = "error"
    model: str = "simple-ff"
    lags: str | None = None
    distribution: str = "studentt"
    nonnegative: bool = False
    num_samples: int = 100
    device: str = "auto"
    dtype: str = "float32"
    batch_size: int | None = None
    instances: int = 1
    top: str = "wor"
    bottom: str = "wr"
    clip_norm: float = 1e-4
    noise_multiplier: str | float = "auto"
    epsilon: float | None = None
    delta: float | None = None
    epochs: int | None = None
    steps: int | None = None
    time_budget: str | None = None
    lr: float = 1e-3
    weight_decay: float = 1e-8
    val_windows: int = 5
    test_windows: int = 7
    val_every: int | None = None
    checkpoint: str = "last"
    unit: str = "w-event"
    w: int = 1
    label_noise: float = 0.0
    context_noise: float = 0.0
    value_bound: float | None = None
    season: int | None = None
    min_scale: float = 1e-3
    discretization: float = 1e-3
    alpha: float = DEFAULT_ALPHA
    sampler: str | None = None  # hardened by default

    def parameters(self) -> dict[str, Any]:
        """The report's parameters as the command line records them (lists as ``"a,b"``)."""
        return {k: ",".join(str(x) for x in v) if isinstance(v, (list, tuple)) else enum_value(v)
                for k, v in asdict(self).items()}

    def plan(self, reference: str | None = None) -> "ForecastPlan":
        """Validate every option (UsageError naming it) before the data is read. ``reference``
        (``clipped``/``unclipped``): plan a NON-private reference run instead (``--evaluate-only``)."""
        from tsdp.forecast import trainer

        model, distribution = enum_value(self.model), enum_value(self.distribution)
        device, dtype = enum_value(self.device), enum_value(self.dtype)
        sigma = _noise_multiplier(self.noise_multiplier)
        if self.unit not in SERIES_UNITS + ("user",):
            raise UsageError(f"--unit {self.unit!r}: must be one of w-event, w-user or event")
        accounted_unit = series_unit(self.unit, self.w)
        sampler = sampler_of(self.sampler)  # hardened by default
        if self.lags is not None and model != "deepar":
            raise UsageError(f"--lags is an option of --model deepar, not of --model {model}")
        if self.num_samples != 100 and model != "deepar":
            raise UsageError(f"--num-samples {self.num_samples}: only --model deepar forecasts by sample paths")
        if distribution != "studentt" and model != "deepar":
            raise UsageError(f"--distribution {distribution} is an option of --model deepar; the other models have "
                             "a Student-t output: use --nonnegative for data that cannot be negative")
        if model not in DEEP and (device != "auto" or dtype != "float32"):
            raise UsageError(f"--device {device} / --dtype {dtype}: options of the JAX models (deepar, "
                             f"itransformer); --model {model} computes in numpy float64 on the CPU")
        budget_seconds = None
        if self.time_budget is not None:
            from tsdp.forecast.plan import parse_duration

            budget_seconds = parse_duration(self.time_budget)
            if self.steps is not None or self.epochs is not None:
                raise UsageError("--time-budget picks the number of steps: give it or --steps/--epochs, not both")
            if self.epsilon is None or sigma is not None:
                raise UsageError("--time-budget picks the step count with the best signal-to-noise ratio for the "
                                 "budget and calibrates the noise for it: it needs --epsilon and --noise-multiplier "
                                 "auto")
        # --noise-multiplier auto with a budget but no length: the training plan's recommended step count
        from_plan = budget_seconds is not None or (sigma is None and self.epsilon is not None and self.steps is None
                                                   and self.epochs is None)
        if model in DEEP:
            from tsdp.forecast.deep import require

            require(model)
        lags = None if self.lags is None else _lags(self.lags)
        config = trainer.TrainConfig(  # context: the model's receptive field, set once the model is built
            context=self.context_length, horizon=self.forecast_length, model=model,
            batch_size=self.batch_size if self.batch_size is not None else DEFAULT_BATCH, instances=self.instances,
            top=enum_value(self.top), bottom=enum_value(self.bottom), clip_norm=self.clip_norm,
            noise_multiplier=sigma, epsilon=self.epsilon, delta=self.delta,
            steps=1 if from_plan else self.steps,  # from the plan: set below, once the shape is known
            epochs=self.epochs, lr=self.lr, weight_decay=self.weight_decay,
            val_windows=self.val_windows, val_every=self.val_every, unit=accounted_unit, w=self.w,
            label_noise=self.label_noise, context_noise=self.context_noise, value_bound=self.value_bound,
            discretization=self.discretization, checkpoint=enum_value(self.checkpoint), sampler=sampler,
            # a reference without a length trains for as long as the private run would
            private=reference is None or (self.epochs is None and self.steps is None),
        )
        if not (0.0 < self.alpha < 1.0):
            raise UsageError(f"--alpha must be in (0, 1), got {self.alpha:g}")
        return ForecastPlan(self, config, lags, budget_seconds, from_plan, enum_value(reference))


@dataclass(frozen=True)
class Prepared:
    """A panel ready to train on: the model, the run's configuration (batch size, receptive field,
    steps), the split, the seasons of the baselines, the training plan (or None) and the
    accountant's plan."""

    table: Any
    net: Any
    config: Any
    split: Any
    seasons: dict[str, Any]
    training_plan: dict[str, Any] | None
    accountant: Any

    @property
    def n_series(self) -> int:
        return len(self.table.series_names)


@dataclass(frozen=True)
class ForecastPlan:
    """Validated options: :meth:`start`, :meth:`load` the panel, :meth:`prepare` it, then :meth:`train`
    (or :meth:`reference`); :meth:`dry_run` reads the public shape alone."""

    options: ForecastOptions
    config: Any  # tsdp.forecast.trainer.TrainConfig, before the model and the panel size it
    lags: tuple[int, ...] | None
    budget_seconds: float | None
    from_plan: bool
    reference_kind: str | None = None  # clipped/unclipped: a NON-private reference run (--evaluate-only)

    @property
    def model(self) -> str:
        return self.config.model

    def start(self, seed: int | None):
        """The run's checks beyond the options, and its randomness (:func:`tsdp.rng.make_random_source`)."""
        from tsdp.rng import make_random_source

        if not (self.options.min_scale > 0):
            raise UsageError(f"--min-scale must be > 0, got {self.options.min_scale}")
        return make_random_source(seed)

    def column_kinds(self) -> tuple[dict[str, str], str | None]:
        """The columns to read and their kinds, and the kind of the others (:func:`tsdp.io.files.read_table`)."""
        o = self.options
        if enum_value(o.layout) == "wide":
            named = names(o.series_cols)
            return {o.time_col: "time", **{c: "number" for c in named or ()}}, None if named else "number"
        return {o.time_col: "time", **({o.value_col: "number"} if o.value_col else {}),
                **({o.series_col: "text"} if o.series_col else {})}, None

    def load(self, df):
        """The panel of the table ``df`` (:mod:`tsdp.io.layouts`); a negative value is an input error when
        the output distribution or --nonnegative requires it."""
        from tsdp.io.layouts import load_long, load_wide
        from tsdp.io.timegrid import MISSING_STEPS_HINT

        o = self.options
        nonnegative = _nonnegative_reason(enum_value(o.distribution), o.nonnegative)
        keep = enum_value(o.fill_missing) == "null"  # missing cells become 0, marked in table.missing
        try:
            if enum_value(o.layout) == "wide":
                if o.value_col or o.series_col:
                    raise UsageError("--value-col/--series-col are for --layout long; use --series-cols with wide")
                return load_wide(df, o.time_col, names(o.series_cols), o.freq, keep,
                                 allow_negative=nonnegative is None, null_hint=MISSING_HINT, timezone=o.timezone)
            if o.value_col is None:
                raise UsageError("--value-col is required with --layout long")
            return load_long(df, o.time_col, o.value_col, o.series_col, o.freq, keep,
                             allow_negative=nonnegative is None, null_hint=MISSING_HINT, timezone=o.timezone)
        except DataError as exc:
            message = str(exc).replace(f"; {MISSING_STEPS_HINT}", f"; {MISSING_HINT}")
            message = message.replace("counts must be >= 0 (pass --allow-negative for series that may be negative)",
                                      f"values must be >= 0: {nonnegative}")
            raise DataError(message) from None

    def prepare(self, table) -> Prepared:
        """The model, the split (training windows touching a missing step marked inadmissible), the
        seasons, the training plan (timed only when a time budget is to be met) and the accountant's plan."""
        from tsdp.forecast import trainer

        o = self.options
        values = table.values_matrix()  # 0 where a step is missing: no window that touches one is ever sampled
        n_series = values.shape[0]
        calendar = panel.calendar(table.grid)
        net = self.make_net(calendar)
        window = trainer.model_context(net)
        config = panel.sized(trainer.with_model(replace(self.config, context=window), net), o.batch_size, n_series)
        if window != o.context_length:
            panel.check_receptive_field(values.shape[1], window, o.context_length, o.forecast_length, o.val_windows,
                                   o.test_windows)
        split = trainer.split_panel(values, window, o.forecast_length, o.val_windows, calendar=calendar,
                                    test_windows=o.test_windows)
        split = panel.skip_gaps(split, table, window, o.forecast_length, o.val_windows + o.test_windows)
        seasons = panel.seasons(calendar, split, o.season, window)
        training_plan = None
        if self.from_plan:
            training_plan = panel.training_plan(net, config, n_series, split.accounted_length, calendar,
                                           self.budget_seconds, timed=self.budget_seconds is not None)
            config = replace(config, steps=training_plan["recommended"]["steps"])
        accountant = trainer.plan_training(config, n_series, split.accounted_length)
        return Prepared(table, net, config, split, seasons, training_plan, accountant)

    def make_net(self, calendar):
        """The model for the options; DeepAR's lags default to GluonTS's for the step up to 4 contexts
        (:func:`tsdp.forecast.timefeatures.default_lags`) and its time features to GluonTS's for the step."""
        from tsdp.forecast.models import make_model
        from tsdp.forecast.timefeatures import default_lags

        o, model = self.options, self.model
        common_options = dict(min_scale=o.min_scale, nonnegative=o.nonnegative)
        if model not in DEEP:
            return make_model(model, o.context_length, o.forecast_length, **common_options)
        deep = dict(common_options, device=enum_value(o.device), dtype=enum_value(o.dtype))
        if model == "deepar":
            lags = self.lags
            if lags is None:
                lags = default_lags(calendar.step_us, calendar.step_months, context=o.context_length) \
                    if calendar.origin is not None else default_lags(context=o.context_length)
            deep.update(lags=lags, time_features=calendar.default_features(), num_samples=o.num_samples,
                        distribution=enum_value(o.distribution))
        net = make_model(model, o.context_length, o.forecast_length, **deep)
        _ = net.device  # resolve --device now: a missing GPU is a usage error before any work
        return net

    def train(self, prepared: Prepared, rng: np.random.Generator, progress=None, *, seeded: bool) -> "Trained":
        """DP-SGD training (:func:`tsdp.forecast.trainer.train`), the held-out scores and the forecasts."""
        from tsdp.forecast import trainer
        from tsdp.forecast.claim import dpsgd_claim
        from tsdp.rng import SEEDED_WARNING

        p = prepared
        config, accountant, split, net = p.config, p.accountant, p.split, p.net
        result = trainer.train(net, split, config, rng, progress, accountant)
        scores = {"model (DP-SGD)": trainer.evaluate(net, result.theta, split, p.seasons["headline"]),
                  **trainer.seasonal_baselines(split, p.seasons["baselines"], p.seasons["headline"])}
        claim = dpsgd_claim(config, accountant, result)
        covered = config.checkpoint == "last"
        forecasts = panel.forecast_table(net, result.theta, split, p.table, p.table.series_names, rng)
        noise_caveats = list(config.sampler.warnings)
        warnings = [*accountant.warnings, FORECAST_NOTE, *noise_caveats] + (
            [] if covered else [BEST_CHECKPOINT_CAVEAT]) + ([SEEDED_WARNING] if seeded else [])
        training = training_summary(config, accountant, result, p.n_series, split, p.seasons, net,
                                    self.options.batch_size is None)
        return Trained(self, prepared, result, scores, claim, forecasts, warnings, noise_caveats, training)

    def reference(self, prepared: Prepared, rng: np.random.Generator) -> dict[str, Any]:
        """NON-private references: the seasonal naive forecasts, and the model trained without noise, with
        clipping (``clipped``: DP-SGD's step without its noise) or without (``unclipped``); their scores."""
        from tsdp.forecast import trainer

        p = prepared
        steps, seasons, config = p.accountant.steps, p.seasons, p.config
        clipped = self.reference_kind == "clipped"
        reference = trainer.TrainConfig(**{**config.__dict__, "private": False, "clipped": clipped, "steps": steps,
                                           "epochs": None})
        result = trainer.train(p.net, p.split, reference, rng)
        label = "clipped, without noise" if clipped else "without clipping or noise"
        model_scores = trainer.evaluate(p.net, result.theta, p.split, seasons["headline"])
        naive = trainer.seasonal_baselines(p.split, seasons["baselines"], seasons["headline"])
        headline = naive[f"seasonal naive (season {seasons['headline']})"]
        return {"steps": steps, "season": seasons["headline"], "model": config.model, "reference": label,
                "test_origins": model_scores["origins"],
                "crps_seasonal_naive": headline["crps"], "crps_model_reference": model_scores["crps"],
                "mase_seasonal_naive": headline["mase"], "mase_model_reference": model_scores["mase"],
                **{f"crps_seasonal_naive_{m}": naive[f"seasonal naive (season {m})"]["crps"]
                   for m in seasons["baselines"]},
                "release_written": False}

    def dry_run(self, input: str, warn: Callable[[Any], None]) -> tuple[dict[str, Any], Any]:
        """The accountant's plan (noise multiplier, steps, budget) from the public shape (series ids and the
        time column; no value is read) and with a budget the training plan (:mod:`tsdp.forecast.plan`):
        noise, signal-to-noise and timed wall time for several step counts and batch sizes; nothing is
        trained on the data. Steps absent from a series are refused as training would refuse them, or
        under --fill-missing null set the accountant's length as in training (empty values in rows that
        exist are found by training only). Returns (summary, the accountant's plan); ``warn`` receives
        the warnings as they arise."""
        from tsdp.accuracy.estimators import forecast_model
        from tsdp.forecast import trainer
        from tsdp.io.load import InputSpec
        from tsdp.engine.public_shape import public_panel
        from tsdp.io.timegrid import MISSING_STEPS_HINT

        o = self.options
        keep = enum_value(o.fill_missing) == "null"
        spec = InputSpec(layout=enum_value(o.layout), time_col=o.time_col, value_col=o.value_col,
                         series_col=o.series_col, series_cols=names(o.series_cols), freq=o.freq,
                         timezone=o.timezone, fill_missing=keep)
        try:
            shape = public_panel(input, spec, absent=keep)
        except DataError as exc:
            raise DataError(str(exc).replace(f"; {MISSING_STEPS_HINT}", f"; {MISSING_HINT}")) from None
        n_series, length, read = shape.n_series, shape.n_steps, shape.read
        calendar = panel.public_calendar(input, spec)
        net = self.make_net(calendar)
        window = trainer.model_context(net)
        config = panel.sized(trainer.with_model(replace(self.config, context=window), net), o.batch_size, n_series)
        horizon = o.forecast_length
        train_length = length - horizon * (o.test_windows + o.val_windows)
        if train_length < window + horizon:
            raise DataError(f"series of {length} steps are too short: {train_length} remain for training after "
                            f"{o.test_windows} test windows and {o.val_windows} validation windows of {horizon}, "
                            f"fewer than the window {window} + --forecast-length {horizon}")
        accounted = train_length
        if shape.missing:
            from tsdp.forecast import sampling

            if shape.absent[:, max(0, train_length - window):].any():
                raise DataError(f"a series misses a step among its last {length - max(0, train_length - window)}, "
                                "which every series needs complete (the last context and the held-out windows)")
            accounted = sampling.accounted_length(
                sampling.admissible_starts(shape.absent[:, :train_length], window, horizon), horizon)
            warn(Caveat("missing_cells", f"the input misses {shape.missing} step(s) (rows absent; first: series "
                        f"{shape.first_series!r} at {shape.first_time}); --fill-missing null: no training window "
                        "touches one, and the accountant takes the fewest windows a series has left (length "
                        f"{accounted} of {train_length})"))
        training_plan = None
        if config.epsilon is not None:
            training_plan = panel.training_plan(net, config, n_series, accounted, calendar, self.budget_seconds)
            if self.from_plan:
                config = replace(config, steps=training_plan["recommended"]["steps"])
        accountant = trainer.plan_training(config, n_series, accounted)
        summary = {
            "dry_run": f"read {read}; nothing trained on the data or written",
            "series": n_series, "train_length": accounted, "receptive_field": window, "missing_steps": shape.missing,
            "batch_size": config.batch_size, "batch_size_rule": BATCH_RULE if o.batch_size is None else "given",
            **model_inputs(net),
            "epsilon_budget": self.config.epsilon, "delta": self.config.delta,
            "noise_multiplier": accountant.noise_multiplier, "steps": accountant.steps,
            "stopped_by": accountant.stopped_by,
            "theorem": accountant.derivation.theorem if accountant.derivation else None,
            **({"training_plan": training_plan} if training_plan else {}),
            "accuracy": forecast_model(o.alpha),
        }
        return summary, accountant


@dataclass(frozen=True)
class Trained:
    """A finished private run: the released forecasts, the claim, the warnings the report states, the
    model files' contents and the custodian's figures (:meth:`custodian`: NOT for publication)."""

    plan: ForecastPlan
    prepared: Prepared
    result: Any  # tsdp.forecast.trainer.TrainResult
    scores: dict[str, Any]
    claim: Any
    forecasts: Any
    warnings: list
    noise_caveats: list
    training: dict[str, Any]

    def weights(self) -> bytes:
        from tsdp.forecast import persist

        return persist.weights_bytes(self.prepared.net, self.result.theta)

    def metadata(self, weights: bytes, weights_name: str) -> bytes:
        """The model file's metadata: the training, the privacy claim of these weights and the input."""
        from tsdp.forecast import persist
        from tsdp.forecast.claim import unaccounted

        claim, config, table = self.claim, self.prepared.config, self.prepared.table
        covered = config.checkpoint == "last"
        calendar = panel.calendar(table.grid)
        return persist.metadata_bytes(self.prepared.net, weights, weights_name, {
            "training": self.training,
            "privacy": {"definition": "approx-dp", "epsilon": claim.epsilon, "delta": claim.delta,
                        "theorem": claim.theorem, "unit": claim.unit.neighbouring,
                        "checkpoint": config.checkpoint, "guarantee_covers_these_weights": covered,
                        "caveats": [FORECAST_NOTE, *self.noise_caveats,
                                    "not privacy-accounted: " + "; ".join(unaccounted(config.checkpoint))]
                        + ([] if covered else [BEST_CHECKPOINT_CAVEAT])},
            "input": {"time_col": self.plan.options.time_col, "series": table.series_names, "freq": table.grid.freq,
                      "start": None if calendar.origin is None else str(calendar.origin)},
        })

    def custodian(self) -> dict[str, Any]:
        """The held-out scores and the validation history: figures of the private series."""
        p, result = self.prepared, self.result
        return {"note": METRICS_NOTE, "season": p.seasons["headline"], "seasons": list(p.seasons["baselines"]),
                "test_origins": len(p.split.test_origins), "scores": self.scores, "history": result.history,
                "best_step": result.best_step, "best_val_loss": result.best_val_loss,
                "released_checkpoint": p.config.checkpoint}

    def report(self, described: dict, parameters: dict[str, Any], files: dict[str, Any], randomness: str):
        """The privacy report of the forecasts written as ``described``: the run's ``parameters``, then the
        ``files`` written with them (model files, custodian file) and the training."""
        from tsdp.accuracy.estimators import forecast_model
        from tsdp.report import Report

        p, config = self.prepared, self.prepared.config
        split, table = p.split, p.table
        return Report(
            command="forecast-train",
            parameters={**parameters, "noise_multiplier": p.accountant.noise_multiplier,
                        "batch_size": config.batch_size, **({"steps": config.steps} if self.plan.from_plan else {}),
                        **files, "training": self.training,
                        **({"training_plan": p.training_plan} if p.training_plan else {})},
            claim=self.claim,
            output={**described, "columns": self.forecasts.columns},
            randomness=randomness,
            grid={"freq": table.grid.freq, "series": p.n_series, "train_length": split.accounted_length,
                  **({} if split.admissible is None else {"train_steps_with_gaps": split.train.shape[1]})},
            notes=notes(config, p.accountant, self.result, p.net, split, p.seasons, self.plan.options.batch_size is None,
                        p.training_plan) + gap_notes(split, table),
            warnings=self.warnings,
            accuracy=forecast_model(self.plan.options.alpha).to_dict(),
        )


def forecast_train(frame, *, context_length: int, forecast_length: int, seed: int | None = None, **options):
    """Train a forecasting model with DP-SGD on ``frame`` (polars or pandas) and forecast every series,
    as ``tsdp forecast-train``.

    The keyword arguments are the command line's options with underscores (``value_col``,
    ``series_col``, ``model``, ``epsilon``, ``delta``, ``steps``, ``noise_multiplier``, ...; see
    ``tsdp forecast-train --help``). Returns :class:`tsdp.api.result.Result`: ``(forecasts, report)``;
    ``result.custodian`` holds the held-out scores and the validation history (NOT for publication),
    ``result.model`` the trained run (:class:`Trained`: ``weights()`` gives the weights file's bytes).
    The forecasts are the model applied to each series' last values, which the guarantee does not cover.
    """
    from tsdp.api.frames import from_polars, to_polars
    from tsdp.api.result import Result, describe_in_memory
    from tsdp.api.series import IN_MEMORY_INPUT, _check_seed

    known = set(ForecastOptions.__dataclass_fields__)
    unknown = sorted(set(options) - known)
    if unknown:
        raise UsageError(f"tsdp.forecast_train: unknown option {unknown[0]!r}; the options are those of "
                         "'tsdp forecast-train --help' with underscores (e.g. clip_norm for --clip-norm)")
    plan = ForecastOptions(context_length=context_length, forecast_length=forecast_length, **options).plan()
    _check_seed(seed)
    randomness = plan.start(seed)
    df, kind = to_polars(frame)
    prepared = plan.prepare(plan.load(df))
    trained = plan.train(prepared, randomness.generator, seeded=randomness.seeded)
    parameters = {**plan.options.parameters(), "input": IN_MEMORY_INPUT}

    def make_report(described: dict):
        return trained.report(described, {**parameters, "output": described["file"]}, {}, randomness.label)

    result = Result(from_polars(trained.forecasts, kind), make_report(describe_in_memory(trained.forecasts)),
                    trained.forecasts, make_report)
    result.custodian = trained.custodian()
    result.model = trained
    return result


def _lags(text: str) -> tuple[int, ...]:
    from tsdp.forecast.timefeatures import parse_lags

    return parse_lags(text)


def _nonnegative_reason(distribution: str, nonnegative: bool) -> str | None:
    """Which option makes negative values an input error (None: they are allowed)."""
    if distribution in COUNTS:
        return f"--distribution {distribution} models counts"
    return "--nonnegative forecasts a quantity that cannot be negative" if nonnegative else None


def _noise_multiplier(text: str | float) -> float | None:
    if str(text).strip().lower() == "auto":
        return None
    try:
        value = float(text)
    except ValueError:
        raise UsageError(f"--noise-multiplier {text!r}: must be a number > 0 or 'auto'") from None
    if not value > 0 or not np.isfinite(value):
        raise UsageError(f"--noise-multiplier {text!r}: must be a number > 0 or 'auto'")
    return value

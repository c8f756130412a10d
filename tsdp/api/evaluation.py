"""``tsdp release --evaluate`` on the API's plans: releases split into their noiseless part and their
noise (:func:`run_split`), repeated against the raw input (:class:`tsdp.accuracy.evaluation.Evaluation`).
NOT private: a diagnostic for the custodian; nothing it computes is published."""

from __future__ import annotations

from tsdp.api.series import Loaded, ReleasePlan
from tsdp.mechanisms.registry import MECHANISMS


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

    mechanism = MECHANISMS[plan.mechanism]
    if hasattr(mechanism, "noiseless"):
        result, as_matrix, _ = plan.run(table, panel, rng, None)
        noiseless = mechanism.noiseless(table.values_matrix(), result)
        return result, as_matrix().reshape(table.n_series, table.n_steps), noiseless
    if not mechanism.linear:
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


def raw_input(df, plan: "ReleasePlan", loaded: "Loaded"):
    """(the raw panel, the observed cells) of an in-memory input: for events the unbounded
    aggregation on the public grid (:meth:`tsdp.io.events.EventJob.unbounded`), for series the
    input itself, whose filled cells are not observed."""
    table = loaded.loaded.table
    if plan.spec.resolved_layout != "events":
        return table.values_matrix(), table.observed_matrix()
    import numpy as np

    from tsdp.engine.events import assemble, event_job, partial_cell_sums

    job = event_job(plan.spec, plan.caps).unbounded()
    raw = assemble(job, [partial_cell_sums(df, job)]).table.values_matrix()
    return raw, np.ones(raw.shape, dtype=bool)

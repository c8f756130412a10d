"""The rules of the time-subsampling mechanisms (Koga et al.): subsample and filter-subsample.

Both are checked against their own privacy maps (:mod:`tsdp.mechanisms.subsample.maps`, through
:func:`tsdp.verify.against_map.check_against_map`). Their claims state the options in nested blocks
(``subsampling.p``, ``filter.sigma_g`` ...), so the rule reads them from there (:data:`STATED_AT`),
checks them against the recorded command line, and gives the map the released figures it reads. The
map does not make the drawn sample J (the ``subsampling`` block), so the rule checks what it can of it:
``probability_empty = (1 - p)^T``, and for filter-subsample's conditional accounting the released
``s_J`` in [0, 1] and ``n_sampled`` in [1, T], recomputed from the sampled steps when the report
records them (``subsampling.indices``).

A custom filter kernel (``--filter custom``) is recorded by its statistics only (``filter.L``,
``filter.srank``, ``filter.sigma_max`` and the tap count), which is all its accounting needs given the
released s_J (conditional) or alpha (paper): the map is called with them
(:func:`tsdp.mechanisms.subsample.maps.stated_kernel`), after checking that they are a kernel's.
"""

from __future__ import annotations

from typing import Any

from tsdp.accounting.sensitivity import UNIT_LEVELS
from tsdp.verify.against_map import check_against_map
from tsdp.verify.parts import _close, _is_int, _is_real, _Outcome, _param, _release_unit, _Report

# ReleaseOptions field -> where a subsampling claim states its value
STATED_AT: dict[str, tuple[str, ...]] = {
    "sampling_rate": ("subsampling", "p"),
    "accounting": ("accounting",),
    "delta_split": ("noise", "delta_split"),
    "filter": ("filter", "type"),
    "filter_sigma": ("filter", "sigma_g"),
    "filter_width": ("filter", "width"),
}
ALIASES = {"analytic": "exact"}  # --accounting analytic is exact (tsdp.mechanisms.subsample.maps)
MISSING = object()


def _stated(r: _Report, path: tuple[str, ...]) -> Any:
    node: Any = r.params
    for key in path:
        if not isinstance(node, dict) or key not in node:
            return MISSING
        node = node[key]
    return node


def _filter_alpha(r: _Report) -> Any:
    """Koga et al.'s alpha when the release was given it (``--filter-alpha``), else None (solved for)."""
    sens = r.params.get("sensitivity")
    return sens.get("alpha") if isinstance(sens, dict) and sens.get("alpha_given") is True else None


def stated_options(r: _Report, out: _Outcome, mechanism, T: int) -> dict[str, Any] | None:
    """The mechanism's options (keyword -> value) as the claim states them, else as the recorded command
    line gives them, else the defaults; a command line that records a value the claim states otherwise
    is a problem of the ``command`` check (the claim is recomputed at what it states). None when a
    custom kernel's recorded statistics are not a kernel's."""
    g = out.group("command")
    options = {}
    for name, (keyword, default) in mechanism.options.items():
        stated = _filter_alpha(r) if name == "filter_alpha" else (_stated(r, STATED_AT[name]) if name in STATED_AT
                                                                       else MISSING)
        given = r.command.get(name)
        if given is not None and stated is not MISSING and ALIASES.get(given, given) != stated:
            g.fail(f"the claim states {name.replace('_', ' ')} {stated!r}, but the recorded command line "
                   f"(--{name.replace('_', '-')}) gives {given!r}")
        value = stated if stated is not MISSING else given
        options[keyword] = default if value is None else value
    if options.get("kernel") == "custom":
        stats = custom_kernel(r, out, T)
        if stats is None:
            return None
        options.update(filter_kernel=None, kernel_stats=stats)
    return options


def custom_kernel(r: _Report, out: _Outcome, T: int) -> dict | None:
    """The recorded statistics of a custom kernel of ``taps`` non-negative taps summing to 1, checked to
    be a kernel's: ``sigma_max = 1``, ``1 / taps <= L <= 1`` and ``srank = T L / sigma_max^2``."""
    p = out.group("parameters")
    f = r.params.get("filter") if isinstance(r.params.get("filter"), dict) else {}
    taps, L, srank, smax = f.get("taps"), f.get("L"), f.get("srank"), f.get("sigma_max")
    if not p.expect(_is_int(taps) and taps >= 1 and _is_int(T) and _is_real(L) and _is_real(srank)
                    and _is_real(smax), f"parameters.filter of a custom kernel must record taps, L, srank and "
                                        f"sigma_max, got {f!r}"):
        return None
    ok = p.expect(_close(smax, 1.0, 1e-9), f"parameters.filter.sigma_max is {smax!r}, not 1 (non-negative taps of "
                                           "sum 1)")
    ok &= p.expect(1 / min(taps, T) * (1 - 1e-9) <= L <= 1 + 1e-9,
                   f"parameters.filter.L is {L!r}, not in [1/taps, 1] for {taps} taps")
    ok &= p.expect(_close(srank, T * L / smax ** 2, 1e-9), f"parameters.filter.srank is {srank!r}, not T L / "
                                                           f"sigma_max^2 = {T * L / smax ** 2!r}")
    return {"taps": int(taps), "L": float(L), "srank": float(srank), "sigma_max": float(smax)} if ok else None


def _koga_setting(r: _Report, out: _Outcome, mechanism: str):
    """``(found, rate, options)`` of a subsampling claim, or None: the unit on the grid, the sampling
    rate in (0, 1) with its ``probability_empty``, the options (:func:`stated_options`)."""
    from tsdp.accounting import timesubsampling as ts
    from tsdp.mechanisms.registry import MECHANISMS

    found = _release_unit(r, out)
    p = out.group("parameters")
    rate = _param(r, "subsampling", "p")
    if not p.expect(_is_real(rate) and 0 < rate < 1, f"parameters.subsampling.p is {rate!r}, not in (0, 1)"):
        return None
    if found is None:
        return None
    T = found[2]
    p.same("parameters.subsampling.probability_empty ((1 - p)^T)", _param(r, "subsampling", "probability_empty"),
           ts.empty_probability(T, float(rate)))
    u = r.claim.unit
    if getattr(UNIT_LEVELS.get(u.level), "uses_max_steps", False):
        out.group("unit").expect(u.max_steps <= T, f"max_steps I = {u.max_steps} exceeds the series length T = {T} "
                                                   "(Assumption 1 needs I <= T)")
    options = stated_options(r, out, MECHANISMS[mechanism], T)
    return None if options is None else (found, float(rate), options)


def _events_in_words(q) -> str:
    """The subsampling maps' events in words, from their parameters."""
    a, n = q["assumption"], q["assumption"]["series"]
    if q["accounting"] == "exact":
        return (f"binomial mixture over the unit's I = {a['I_effective']} cells in up to {n} series "
                f"(p = {q['subsampling_p']:g}, each series' redraw), M sqrt(k)")
    if q["accounting"] == "conditional":
        return f"the series with the largest mu, for the unit's I = {a['I_effective']} cells in up to {n} series jointly"
    return "the paper accounting states no events"


def _subsample(r: _Report, out: _Outcome) -> None:
    """Time subsampling: :func:`tsdp.mechanisms.subsample.maps.subsample_map` (exact or paper accounting)."""
    out.definition = "approx-dp"
    setting = _koga_setting(r, out, "subsample")
    if setting is None:
        return
    found, rate, options = setting
    check_against_map(r, out, "subsample", found, "sigma",
                      lambda q: _events_in_words({**q, "subsampling_p": rate}), options)


def _filter_subsample(r: _Report, out: _Outcome) -> None:
    """Filtered time subsampling: :func:`tsdp.mechanisms.subsample.maps.filter_subsample_map`; the
    conditional accounting's map reads the released ``s_J`` and ``n_sampled``."""
    out.definition = "approx-dp"
    setting = _koga_setting(r, out, "filter-subsample")
    if setting is None:
        return
    found, rate, options = setting
    released = None
    if options.get("accounting") == "conditional":
        released = _released(r, out, found, options)
        if released is None:
            return
    check_against_map(r, out, "filter-subsample", found, "sigma",
                      lambda q: _events_in_words({**q, "subsampling_p": rate}), options, released)


def _released(r: _Report, out: _Outcome, found, options) -> dict | None:
    """The conditional accounting's released figures (``s_J`` in [0, 1], ``n_sampled`` in [1, T]), or None
    when malformed. When the report records the sampled indices, s_J is recomputed from them through
    the map's ``sampled`` route (:func:`tsdp.mechanisms.subsample.maps.released_figures`)."""
    p = out.group("parameters")
    _, S, T = found
    s_J, kept = _param(r, "sensitivity", "s_J"), _param(r, "subsampling", "n_sampled")
    if not p.expect(isinstance(s_J, list) and len(s_J) == S and all(_is_real(x) and 0 <= x <= 1 + 1e-9 for x in s_J),
                    f"parameters.sensitivity.s_J must list {S} numbers in [0, 1] (spectral norms of sampled rows of "
                    f"a unit-norm filter), got {s_J!r}"):
        return None
    if not p.expect(isinstance(kept, list) and len(kept) == S and all(_is_int(k) and 1 <= k <= T for k in kept),
                    f"parameters.subsampling.n_sampled must list {S} sample sizes in [1, T = {T}], got {kept!r}"):
        return None
    indices = _param(r, "subsampling", "indices")
    if indices is not None:
        _recompute_s_J(r, out, found, options, indices, s_J, kept)
    # the stated l2_conditional is M s_J sqrt(I) and l2_worst_case M sqrt(I) (both compared with the map's):
    # an s_J edited alone is named here, before the map recomputes its figures from it
    l2, worst = _param(r, "sensitivity", "l2_conditional"), _param(r, "sensitivity", "l2_worst_case")
    if isinstance(l2, list) and len(l2) == S and all(_is_real(x) for x in l2) and _is_real(worst) and worst > 0:
        for s, (a, b) in enumerate(zip(s_J, l2)):
            p.same(f"parameters.sensitivity.s_J.{s} (l2_conditional / l2_worst_case)", a, b / worst)
    return {"s_J": s_J, "n_sampled": kept}


def _recompute_s_J(r: _Report, out: _Outcome, found, options, indices, s_J, kept) -> None:
    """s_J and n_sampled from the recorded sampled steps, through the map's ``sampled`` route."""
    import numpy as np

    from tsdp.mechanisms.subsample.maps import prepare_filter, released_figures

    p = out.group("parameters")
    _, S, T = found
    if not p.expect(isinstance(indices, list) and len(indices) == S and all(
            isinstance(row, list) and all(_is_int(t) and 0 <= t < T for t in row) for row in indices),
            f"parameters.subsampling.indices must list the sampled steps (in [0, {T})) of {S} series"):
        return
    mask = np.zeros((S, T), dtype=bool)
    for s, row in enumerate(indices):
        mask[s, row] = True
    from tsdp.errors import TsdpError
    from tsdp.mechanisms.baseline import Panel

    bounds = found[0]
    try:
        prep = prepare_filter(r.command.get("epsilon"), r.command.get("delta"),
                              Panel(S, T, bounds, r.claim.unit.id_column, bool(r.claim.unit.enforced)), options)
        want, n = released_figures({"sampled": mask}, prep, S, T)
    except (TsdpError, ValueError, TypeError) as exc:
        p.fail(f"s_J cannot be recomputed from parameters.subsampling.indices: {exc}")
        return
    p.expect(list(n) == list(kept), f"parameters.subsampling.n_sampled is {kept!r}, but the recorded indices give "
                                    f"{[int(k) for k in n]!r}")
    for s, (a, b) in enumerate(zip(s_J, want)):
        p.same(f"parameters.sensitivity.s_J.{s} (from the recorded indices)", a, float(b))

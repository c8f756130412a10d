"""The rules of ``tsdp release``'s mechanisms: gaussian, laplace, dft, fast, subsample, filter-subsample."""

from __future__ import annotations

import math

from tsdp.accounting.samplers import Sampler
from tsdp.verify.parts import (_events_loss, _expect_events, _is_int, _is_real, _noise, _Outcome, _param,
    REL_TOL, _release_unit, _Report)


def _gaussian(r: _Report, out: _Outcome) -> None:
    _cellwise(r, out, "gaussian")


def _laplace(r: _Report, out: _Outcome) -> None:
    _cellwise(r, out, "laplace")


def _lattice(r: _Report, p, value: float) -> "Sampler | None":
    """The sampler the report states (:mod:`tsdp.accounting.samplers`, on its lattice), or None when
    malformed: the same objects round the sensitivities and name the events as at release.

    A report without ``parameters.sampler`` predates the hardened sampler: float. For the hardened
    one the granularity must be a positive power of two and the noise ``value`` must span at least
    :data:`tsdp.accounting.discrete.MIN_LATTICE_SCALE` steps of it.
    """
    from tsdp.accounting import discrete as disc
    from tsdp.accounting.samplers import Hardened, sampler_of

    name = r.params.get("sampler", "float")
    if not p.expect(name in disc.SAMPLERS, f"parameters.sampler is {name!r}, not hardened or float"):
        return None
    sampler = sampler_of(name)
    if not sampler.hardened:
        return sampler
    g = r.params.get("granularity")
    if not p.expect(_is_real(g) and g > 0 and math.frexp(g)[0] == 0.5,
                    f"parameters.granularity is {g!r}, not a positive power of two"):
        return None
    g = float(g)
    p.expect(value / g >= disc.MIN_LATTICE_SCALE,
             f"the noise spans {value / g:.3g} lattice steps, fewer than {disc.MIN_LATTICE_SCALE:g}")
    return Hardened(g)


def _stated_slack(r: _Report, p, sigma: float, g: float, coords: int) -> None:
    """A hardened Gaussian report's ``rounding_slack`` must be the one its sigma, lattice and changed values
    give: ``(1 + e^eps) coords 0.025 (g / sigma)^2`` (:mod:`tsdp.accounting.discrete`)."""
    from tsdp.accounting.discrete import MIN_LATTICE_SCALE, rounding_slack, slack_rate

    if sigma / g >= MIN_LATTICE_SCALE:  # (a coarser lattice is reported by _lattice)
        p.same("parameters.rounding_slack", r.params.get("rounding_slack"),
               rounding_slack(r.claim.epsilon, slack_rate(sigma / g, coords)))


def _cellwise(r: _Report, out: _Outcome, noise: str) -> None:
    """The Gaussian or Laplace mechanism on every cell of the panel, float or hardened sampler.

    Hardened (``parameters.sampler`` is ``hardened``): the cells are rounded to multiples of the
    stated granularity (a power of two) and the sensitivity covers that rounding
    (:mod:`tsdp.accounting.discrete`): L2 + g sqrt(cells), or cells x (floor(M/g) + 1) g for L1.
    """
    gaussian = noise == "gaussian"
    out.definition = "approx-dp" if gaussian else "pure-dp"
    found = _release_unit(r, out)
    value = _noise(r, "sigma" if gaussian else "scale", out)
    if found is None or value is None:
        return
    bounds, S, T = found
    cells = bounds.cells(S, T)
    sens = bounds.l2(S, T) if gaussian else bounds.l1(S, T)
    norm = "l2" if gaussian else "l1"
    p = out.group("parameters")
    p.same(f"parameters.{norm}_sensitivity", r.params.get(f"{norm}_sensitivity"), sens)
    p.equal("parameters.cells_per_unit", r.params.get("cells_per_unit"), cells)
    sampler = _lattice(r, p, value)
    if sampler is None:
        return
    g, unrounded = sampler.granularity, sens
    step = sampler.rounded_step(bounds.max_per_step)
    if sampler.hardened:
        if gaussian:
            sens = sampler.rounded_l2(sens, cells)
            _stated_slack(r, p, value, g, cells)
        else:
            sens = cells * step
        p.same(f"parameters.rounded_{norm}_sensitivity", r.params.get(f"rounded_{norm}_sensitivity"), sens)
    if not p.problems:
        lattice = f" rounded to multiples of {g:g}" if sampler.hardened else ""
        p.ok(f"{'sigma' if gaussian else 'scale'} {value:.6g} on an {norm.upper()} sensitivity of {sens:.6g} "
             f"({cells} cells{lattice}; {sampler.name} sampler)")
    event = (sampler.gaussian_event(unrounded, sens, value, cells) if gaussian else
             sampler.laplace_event(bounds.max_per_step, step, value, cells))
    _expect_events(r, out, (event,), "one Gaussian mechanism on the panel" if gaussian else "Laplace noise on every cell")
    _events_loss(r, out)


def _additive_release(r: _Report, out: _Outcome):
    """``(found, noise, parameters group)`` of a release with Gaussian or Laplace noise (DFT, FAST):
    the definition the noise gives set on ``out``; ``found`` (the unit's bounds and the grid,
    :func:`_release_unit`) None when the unit or the noise is malformed."""
    found = _release_unit(r, out)
    noise = r.params.get("noise")
    out.definition = {"gaussian": "approx-dp", "laplace": "pure-dp"}.get(noise, "approx-dp")
    p = out.group("parameters")
    if not p.expect(noise in ("gaussian", "laplace"), f"parameters.noise is {noise!r}, not gaussian or laplace"):
        return None, noise, p
    return found, noise, p


def _dft(r: _Report, out: _Outcome) -> None:
    from tsdp.mechanisms.dft import laplace_l1

    found, noise, p = _additive_release(r, out)
    if found is None:
        return
    bounds, S, T = found
    k = r.params.get("k")
    if not p.expect(_is_int(k) and 1 <= k <= T // 2 + 1, f"parameters.k is {k!r}, not in [1, {T // 2 + 1}]"):
        return
    n_real = 2 * k - 1 - (1 if T % 2 == 0 and k == T // 2 + 1 else 0)  # DC (and Nyquist) are real
    series_l2, touched = bounds.l2(1, T), bounds.series_touched(S)
    changed = bounds.series_changed(S, T)
    p.equal("parameters.kept_real_coefficients", r.params.get("kept_real_coefficients"), n_real)
    p.same("parameters.series_l2_sensitivity", r.params.get("series_l2_sensitivity"), series_l2)
    p.equal("parameters.series_per_unit", r.params.get("series_per_unit"), touched)
    p.equal("parameters.series_changed", r.params.get("series_changed"), changed)
    coords = n_real * changed  # hardened: each rounded kept number adds at most g to the change
    if noise == "gaussian":
        sigma = _noise(r, "sigma", out)
        sampler = None if sigma is None else _lattice(r, p, sigma)
        if sampler is None:
            return
        l2 = series_l2 * math.sqrt(touched)
        p.same("parameters.l2_sensitivity", r.params.get("l2_sensitivity"), l2)
        covered = sampler.rounded_l2(l2, coords)
        if sampler.hardened:
            p.same("parameters.rounded_l2_sensitivity", r.params.get("rounded_l2_sensitivity"), covered)
            _stated_slack(r, p, sigma, sampler.granularity, coords)
        event = sampler.gaussian_event(l2, covered, sigma, coords)
        _expect_events(r, out, (event,), "Gaussian noise on the first k coefficients (Parseval)")
        _events_loss(r, out)
        return
    scale = _noise(r, "scale", out)
    sampler = None if scale is None else _lattice(r, p, scale)
    if sampler is None:
        return
    l1 = laplace_l1(bounds, S, T, n_real)
    p.same("parameters.l1_sensitivity", r.params.get("l1_sensitivity"), l1)
    if sampler.hardened:
        l1 = sampler.rounded_l1(l1, coords)
        p.same("parameters.rounded_l1_sensitivity", r.params.get("rounded_l1_sensitivity"), l1)
    _expect_events(r, out, (), "the Laplace DFT claims pure epsilon from its parameters")
    g = out.group("privacy_loss")
    needed = l1 / scale
    if g.expect(r.claim.epsilon >= needed * (1 - REL_TOL),
                f"Laplace scale {scale:.6g} on L1 sensitivity {l1:.6g} gives epsilon {needed:.6g}, more than the "
                f"claimed {r.claim.epsilon:g}") and \
            g.expect(r.claim.epsilon <= needed * (1 + REL_TOL),  # scale = L1 / epsilon exactly
                     f"Laplace scale {scale:.6g} on L1 sensitivity {l1:.6g} gives epsilon {needed:.6g}, not the "
                     f"claimed {r.claim.epsilon:g}: the scale is not the one the claim used"):
        rounding = f" + {sampler.granularity:g} x {coords} (rounding)" if sampler.hardened else ""
        g.ok(f"Laplace scale {scale:.6g} on L1 = sqrt({n_real}) x the L2 change of each of up to {changed} "
             f"series{rounding} = {l1:.6g} gives "
             f"epsilon {needed:.6g} (claimed {r.claim.epsilon:g})")


def _fast(r: _Report, out: _Outcome) -> None:
    from tsdp.mechanisms.fast import changed_samples

    found, noise, p = _additive_release(r, out)
    if found is None:
        return
    bounds, S, T = found
    u = r.claim.unit
    dq = u.max_per_step * (2.0 if u.relation == "substitute" else 1.0)
    m = r.params.get("max_samples_M")
    if not p.expect(_is_int(m) and 1 <= m <= T, f"parameters.max_samples_M is {m!r}, not in [1, T={T}]"):
        return
    if r.params.get("variant") == "fixed":
        interval = r.params.get("interval")
        if p.expect(_is_int(interval) and 1 <= interval <= T, f"parameters.interval is {interval!r}, not in [1, {T}]"):
            p.equal("parameters.max_samples_M (fixed sampling: ceil(T / interval))", m, -(-T // interval))
    else:
        p.equal("parameters.variant", r.params.get("variant"), "adaptive")
    c = min(m, bounds.steps_per_series(T))  # samples of one series that can fall on changed cells
    touched = bounds.series_reach(S, T)
    fixed = r.params.get("interval") if r.params.get("variant") == "fixed" else None
    n_hit = changed_samples(bounds, S, T, m, fixed if _is_int(fixed) and fixed >= 1 else None)
    most = max(min(m, cells) for _, cells in bounds.series_spread(S, T))
    p.equal("parameters.samples_per_unit", r.params.get("samples_per_unit"), c)
    p.equal("parameters.samples_on_changed_cells", r.params.get("samples_on_changed_cells"), n_hit)
    p.same("parameters.sensitivity_per_timestamp", r.params.get("sensitivity_per_timestamp"), dq)
    p.equal("parameters.series_length_T", r.params.get("series_length_T"), T)
    p.equal("parameters.composition.series_per_unit", _param(r, "composition", "series_per_unit"), touched)
    epsilon = r.claim.epsilon
    p.same("parameters.epsilon_per_series", r.params.get("epsilon_per_series"), epsilon * most / n_hit)
    scale = _noise(r, "scale" if noise == "laplace" else "sigma", out)
    sampler = None if scale is None else _lattice(r, p, scale)
    if sampler is None:
        return
    gran = sampler.granularity
    # hardened: a rounded sample moves by at most (floor(Delta_q / g) + 1) g; under substitution
    # twice that (a cell both units change, or two cells), on up to 2 n samples
    factor = 2 if u.relation == "substitute" else 1
    step = factor * sampler.rounded_step(u.max_per_step)  # float: Delta_q
    coords = factor * n_hit
    if noise == "laplace":
        p.same("parameters.epsilon_per_sample", r.params.get("epsilon_per_sample"), epsilon / n_hit)
        variance = 2.0 * scale * scale
        if sampler.hardened:
            p.same("parameters.rounded_l1_sensitivity", r.params.get("rounded_l1_sensitivity"), step * n_hit)
        events = (sampler.laplace_event(dq, step, scale, n_hit),)
        how = (f"Laplace samples: at most {n_hit} on the cells one unit changes (c = min(M, steps) = {c} per "
               f"series, over up to {touched} series)")
    else:
        l2 = dq * math.sqrt(n_hit)
        p.same("parameters.l2_sensitivity", r.params.get("l2_sensitivity"), l2)
        variance = scale * scale
        covered = step * math.sqrt(n_hit) if sampler.hardened else l2
        if sampler.hardened:
            p.same("parameters.rounded_l2_sensitivity", r.params.get("rounded_l2_sensitivity"), covered)
            _stated_slack(r, p, scale, gran, coords)
        events = (sampler.gaussian_event(l2, covered, scale, coords),)
        how = f"Gaussian samples: Delta_q sqrt(n), n = {n_hit} samples on changed cells (c = {c}, up to {touched} series)"
    if sampler.hardened:
        how += f"; {sampler.name} sampler, values rounded to multiples of {gran:g}"
    if str(r.params.get("R_mode", "")).startswith("auto"):
        p.same("parameters.R (auto: the variance of the DP noise)", r.params.get("R"), variance)
    _expect_events(r, out, events, how)
    _events_loss(r, out)

"""The rules of the time-subsampling mechanisms (Koga et al.): subsample and filter-subsample."""

from __future__ import annotations

import math

from tsdp.accounting.claim import MechanismEvent
from tsdp.verify.parts import (_close, _events_loss, _expect_events, _is_int, _is_real, _noise, _Outcome, _param,
    REL_TOL, _release_unit, _Report)
from tsdp.verify.release import _lattice, _stated_slack


def _koga_geometry(r: _Report, out: _Outcome, mechanism: str):
    """``(bounds, S, T, I, M, n, p, sigma)`` of a subsampling claim, or None: I the unit's changed
    cells over the n series they can lie in (:meth:`ContributionBounds.changed_cells`)."""
    from tsdp.accounting import timesubsampling as ts

    found = _release_unit(r, out)
    p = out.group("parameters")
    p.equal("parameters.mechanism", r.params.get("mechanism"), mechanism)
    rate = _param(r, "subsampling", "p")
    sigma = _noise(r, "sigma", out)
    if found is None or sigma is None:
        return None
    if not p.expect(_is_real(rate) and 0 < rate < 1, f"parameters.subsampling.p is {rate!r}, not in (0, 1)"):
        return None
    bounds, S, T = found
    p.same("parameters.subsampling.probability_empty ((1 - p)^T)", _param(r, "subsampling", "probability_empty"),
           ts.empty_probability(T, float(rate)))
    u = r.claim.unit
    if u.level == "user":
        out.group("unit").expect(u.max_steps <= T, f"max_steps I = {u.max_steps} exceeds the series length T = {T} "
                                                   "(Assumption 1 needs I <= T)")
    n, I = bounds.changed_cells(S, T)
    M = float(u.max_per_step)
    assumption = r.params.get("assumption") if isinstance(r.params.get("assumption"), dict) else {}
    p.equal("parameters.assumption.I", assumption.get("I"), bounds.steps_per_series(T))
    p.equal("parameters.assumption.I_effective", assumption.get("I_effective"), I)
    p.equal("parameters.assumption.series", assumption.get("series"), n)
    p.same("parameters.assumption.M", assumption.get("M"), M)
    p.equal("parameters.assumption.T", assumption.get("T"), T)
    return bounds, S, T, I, M, n, float(rate), sigma


def _koga_lattice(r: _Report, p, sigma: float):
    """The granularity of a hardened subsampling release, None for the float sampler, False when
    the stated sampler is malformed (:func:`_lattice`); the hardened claim must name the theorem."""
    lattice = _lattice(r, p, sigma)
    if lattice is None:
        return False
    if lattice.hardened:
        from tsdp.accounting.discrete import GAUSSIAN_THEOREM

        p.expect(GAUSSIAN_THEOREM in (r.claim.theorem or ""), "a hardened subsampling claim must name the discrete "
                                                              "Gaussian theorem its rounded sensitivities rest on")
    return lattice.granularity


def _subsample(r: _Report, out: _Outcome) -> None:
    from tsdp.accounting import timesubsampling as ts
    from tsdp.accounting.discrete import rounded_step, slack_rate

    out.definition = "approx-dp"
    geometry = _koga_geometry(r, out, "subsample")
    if geometry is None:
        return
    bounds, S, T, I, M, n, rate, sigma = geometry
    p = out.group("parameters")
    p.same("parameters.noise.sigma", _param(r, "noise", "sigma"), sigma)
    g = _koga_lattice(r, p, sigma)
    if g is False:
        return
    if g is not None:
        _stated_slack(r, p, sigma, g, I)
    M_noise = M if g is None else rounded_step(M, g)  # hardened: a kept cell's change after rounding
    if g is not None:
        p.same("parameters.sensitivity.rounded_per_step", _param(r, "sensitivity", "rounded_per_step"), M_noise)
    accounting = r.params.get("accounting")
    delta = r.claim.delta
    if accounting == "exact":
        if not p.expect(_is_real(delta) and 0 < delta < 1, f"claim delta {delta!r} is not in (0, 1)"):
            return
        mix = ts.subsample_mixture(I, rate, M_noise, T, truncation=ts.MIXTURE_TRUNCATION * delta, series=n)
        event = MechanismEvent("gaussian-mixture" if g is None else "discrete-gaussian-mixture",
                               float(mix.sensitivities.max()), sigma, 1, mixture=mix.pairs(), granularity=g,
                               lattice_coords=None if g is None else I)
        p.same("parameters.sensitivity.l2_worst_case", _param(r, "sensitivity", "l2_worst_case"), M * math.sqrt(I))
        rounded = "" if g is None else f" (M' = {M_noise:.12g}: M rounded to multiples of {g:g})"
        _expect_events(r, out, (event,), f"binomial mixture over the unit's I = {I} cells in up to {n} series "
                                         f"(p = {rate:g}, each series' redraw), M sqrt(k){rounded}")
        _events_loss(r, out)
    elif accounting == "paper":
        _expect_events(r, out, (), "the paper accounting states no events")
        i_prime = _param(r, "sensitivity", "I_prime")
        if not p.expect(_is_int(i_prime) and 1 <= i_prime <= I, f"parameters.sensitivity.I_prime is {i_prime!r}, "
                                                               f"not in [1, I = {I}]"):
            return
        eps = r.claim.epsilon
        term = float(ts.corollary3_failure_term(I, i_prime, eps, rate, T, n)) if i_prime < I else 0.0
        _paper_loss(r, out, eps, M_noise * math.sqrt(i_prime), eps * math.sqrt(I / i_prime),
                    M_noise * math.sqrt(I), sigma, term, f"Corollary 3 with I' = {i_prime} over {n} series",
                    0.0 if g is None else slack_rate(sigma / g, I))
    else:
        p.fail(f"parameters.accounting is {accounting!r}, not exact or paper")


def _filter_subsample(r: _Report, out: _Outcome) -> None:
    from tsdp.accounting import timesubsampling as ts
    from tsdp.accounting.discrete import slack_rate

    out.definition = "approx-dp"
    geometry = _koga_geometry(r, out, "filter-subsample")
    if geometry is None:
        return
    bounds, S, T, I, M, n, rate, sigma = geometry
    p = out.group("parameters")
    p.same("parameters.noise.sigma", _param(r, "noise", "sigma"), sigma)
    p.same("parameters.sensitivity.l2_worst_case", _param(r, "sensitivity", "l2_worst_case"), M * math.sqrt(I))
    accounting = r.params.get("accounting")
    sigmas = _param(r, "noise", "sigma_per_series")
    smallest = min(sigmas) if accounting == "conditional" and isinstance(sigmas, list) and sigmas and \
        all(_is_real(x) and x > 0 for x in sigmas) else sigma
    g = _koga_lattice(r, p, smallest)
    if g is False:
        return
    if g is not None:
        _stated_slack(r, p, smallest, g, T * n)
    if accounting == "conditional":
        s_j = _param(r, "sensitivity", "s_J")
        sens = _param(r, "sensitivity", "l2_conditional")
        sigmas = _param(r, "noise", "sigma_per_series")
        lists = (s_j, sens, sigmas)
        if not p.expect(all(isinstance(v, list) and len(v) == S and all(_is_real(x) for x in v) for v in lists),
                        f"parameters s_J, l2_conditional and sigma_per_series must list {S} numbers"):
            return
        p.expect(all(0 <= s <= 1 + 1e-9 for s in s_j), "an s_J (spectral norm of sampled rows of a unit-norm "
                                                        "filter) is outside [0, 1]")
        p.expect(all(_close(x, M * s * math.sqrt(I)) for x, s in zip(sens, s_j)),
                 "l2_conditional is not M s_J sqrt(I) for every series")
        p.expect(all(x > 0 for x in sigmas), "a sigma_per_series is not positive")
        if g is not None:  # the filter spreads a change over a series: g sqrt(kept steps) in each touched one
            kept = _param(r, "subsampling", "n_sampled")
            rounded = _param(r, "sensitivity", "rounded_l2_conditional")
            if p.expect(isinstance(kept, list) and len(kept) == S and all(_is_int(k) and 1 <= k <= T for k in kept),
                        f"parameters.subsampling.n_sampled must list {S} sample sizes in [1, T]") and \
                    p.expect(isinstance(rounded, list) and len(rounded) == S and all(_is_real(x) for x in rounded),
                             f"parameters.sensitivity.rounded_l2_conditional must list {S} numbers") and \
                    p.expect(all(s > 0 for s in s_j), "an s_J is zero"):
                share = ts.rounding_share([M * s for s in s_j], kept, I, n, g)
                p.expect(all(_close(x, s * (1 + share)) for x, s in zip(rounded, sens)),
                         "rounded_l2_conditional is not M s_J (sqrt(I) + g sqrt(n) max_s sqrt(n_s) / (M s_J)) for "
                         "every series")
                sens = rounded
        if p.problems:
            return
        p.same("parameters.sigma", sigma, sigmas[0] if S == 1 else max(sigmas))
        worst = max(range(S), key=lambda s: sens[s])
        kind = "gaussian" if g is None else "discrete-gaussian"
        mus = [x / s for x, s in zip(sens, sigmas)]
        worst = max(range(S), key=lambda s: mus[s])
        _expect_events(r, out, (MechanismEvent(kind, float(sens[worst]), float(sigmas[worst]), 1, granularity=g,
                                               lattice_coords=None if g is None else n * T),),
                       f"the series with the largest mu, for the unit's I = {I} cells in up to {n} series jointly")
        events = r.claim.events
        if events and events[0].kind == kind:
            mu_event = events[0].sensitivity / events[0].noise
            p.expect(mu_event >= max(mus) * (1 - REL_TOL),
                     f"the event's mu {mu_event:.6g} is below the largest series mu {max(mus):.6g}")
        _events_loss(r, out)
    elif accounting == "paper":
        _expect_events(r, out, (), "the paper accounting states no events")
        L, srank = _param(r, "filter", "L"), _param(r, "filter", "srank")
        alpha = _param(r, "sensitivity", "alpha")
        if not p.expect(_is_real(L) and L > 0 and _is_real(srank) and srank >= 1,
                        f"parameters.filter L {L!r} / srank {srank!r} are not a kernel's statistics"):
            return
        if not p.expect(_is_real(alpha) and math.sqrt(rate) < alpha <= 1 and ts.tropp_condition(alpha, rate, L),
                        f"parameters.sensitivity.alpha {alpha!r} is not in (sqrt(p), 1] with alpha^2 >= p + L"):
            return
        eps = r.claim.epsilon
        term = ts.corollary2_failure_term(alpha, eps, rate, L, srank, T, n)
        # hardened: M' = M + g sqrt(n T) / (alpha sqrt(I)) covers the rounding of up to T filtered values in each
        # of the n touched series on both branches
        M_noise = M if g is None else M + g * math.sqrt(n * T) / (alpha * math.sqrt(I))
        if g is not None:
            p.same("parameters.sensitivity.rounded_per_step", _param(r, "sensitivity", "rounded_per_step"), M_noise)
        rate = 0.0 if g is None else slack_rate(sigma / g, n * T)
        _paper_loss(r, out, eps, M_noise * alpha * math.sqrt(I), eps / alpha, M_noise * math.sqrt(I), sigma,
                    term, f"Corollary 2 with alpha = {alpha:.6g} over {n} series", rate)
    else:
        p.fail(f"parameters.accounting is {accounting!r}, not conditional or paper")


def _paper_loss(r: _Report, out: _Outcome, eps_s: float, sens_success: float, eps_fail: float,
                sens_fail: float, sigma: float, term: float, how: str, rate: float = 0.0) -> None:
    """Koga et al.'s corollaries on the unit's cells jointly: (eps_s, delta_noise + term) when both
    Gaussian branches meet delta_noise under the exact profile (plus, hardened, each branch's rounding
    slack ``(1 + e^eps) rate``, :mod:`tsdp.accounting.discrete`)."""
    from tsdp.accounting import gaussian as gauss
    from tsdp.accounting.discrete import rounding_slack

    g = out.group("privacy_loss")
    d_noise = _param(r, "privacy", "delta_noise")
    if not g.expect(_is_real(d_noise) and 0 < d_noise < 1, f"parameters.privacy.delta_noise is {d_noise!r}"):
        return
    success = float(gauss.delta_for_epsilon(eps_s, sens_success / sigma)) + rounding_slack(eps_s, rate)
    failure = (float(gauss.delta_for_epsilon(eps_fail, sens_fail / sigma)) + rounding_slack(eps_fail, rate)
               if eps_fail > eps_s else 0.0)
    g.expect(success <= d_noise * (1 + REL_TOL) and failure <= d_noise * (1 + REL_TOL),
             f"the Gaussian branches give deltas {success:.3g} and {failure:.3g} > delta_noise {d_noise:.3g} at "
             f"sigma {sigma:.6g}")
    needed = d_noise + term
    delta = r.claim.delta
    if g.expect(_is_real(delta) and delta >= needed * (1 - REL_TOL),
                f"{how} gives delta {needed:.6g} at epsilon {r.claim.epsilon:g}, more than the claimed {delta}"):
        # tsdp claims exactly this delta: a larger one means a stated figure (p, I', alpha, delta_noise) was changed
        g.expect(delta <= needed * (1 + 1e-6), f"{how} gives delta {needed:.6g} from the stated parameters, not "
                                               f"the claimed {delta:g}: the parameters are not the ones the claim used")
    if not g.problems:
        g.ok(f"{how}: epsilon {eps_s:.6g}, delta {d_noise:.3g} + {term:.3g} = {needed:.6g} "
             f"(claimed {delta:g}); both Gaussian branches checked on the exact profile")

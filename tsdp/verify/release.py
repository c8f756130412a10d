"""The rules of ``tsdp release``'s additive mechanisms: gaussian, laplace, dft, fast (the subsampling
mechanisms' are in :mod:`tsdp.verify.subsampling`).

Laplace, DFT and FAST are checked against their own privacy maps (:mod:`tsdp.verify.against_map`); the
Gaussian mechanism is rechecked in pure Python (:func:`_cellwise`), with the stated sampler read as the
maps' checks read it (:func:`tsdp.verify.against_map.stated_sampler`) and :func:`_stated_slack`."""

from __future__ import annotations

from tsdp.verify.against_map import check_against_map, stated_sampler
from tsdp.verify.parts import _events_loss, _expect_events, _noise, _Outcome, _release_unit, _Report


def _gaussian(r: _Report, out: _Outcome) -> None:
    _cellwise(r, out)


def _laplace(r: _Report, out: _Outcome) -> None:
    """Laplace noise on every cell: :meth:`tsdp.mechanisms.laplace.Laplace.privacy_map`."""
    out.definition = "pure-dp"
    found = _release_unit(r, out)
    m = check_against_map(r, out, "laplace", found, "scale", lambda _p: "Laplace noise on every cell")
    p = out.group("parameters")
    if m is not None and not p.problems:
        q = m.parameters
        lattice = f" rounded to multiples of {m.sampler.granularity:g}" if m.sampler.hardened else ""
        p.ok(f"scale {m.scale:.6g} on an L1 sensitivity of {q.get('rounded_l1_sensitivity', q['l1_sensitivity']):.6g} "
             f"({q['cells_per_unit']} cells{lattice}; {m.sampler.name} sampler)")


def _stated_slack(r: _Report, p, sigma: float, g: float, coords: int) -> None:
    """A hardened Gaussian report's ``rounding_slack`` must be the one its sigma, lattice and changed values
    give: ``(1 + e^eps) coords 0.025 (g / sigma)^2`` (:mod:`tsdp.accounting.discrete`)."""
    from tsdp.accounting.discrete import MIN_LATTICE_SCALE, rounding_slack, slack_rate

    if sigma / g >= MIN_LATTICE_SCALE:  # (a coarser lattice is reported by _lattice)
        p.same("parameters.rounding_slack", r.params.get("rounding_slack"),
               rounding_slack(r.claim.epsilon, slack_rate(sigma / g, coords)))


def _cellwise(r: _Report, out: _Outcome) -> None:
    """The Gaussian mechanism on every cell of the panel, float or hardened sampler, rechecked in pure
    Python (``tsdp account verify`` of a Gaussian release loads no numerical library:
    tests/cli/test_startup_imports.py; the privacy map's analytic calibration needs scipy).

    Hardened (``parameters.sampler`` is ``hardened``): the cells are rounded to multiples of the
    stated granularity (a power of two) and the sensitivity covers that rounding
    (:mod:`tsdp.accounting.discrete`): L2 + g sqrt(cells).
    """
    out.definition = "approx-dp"
    found = _release_unit(r, out)
    value = _noise(r, "sigma", out)
    if found is None or value is None:
        return
    bounds, S, T = found
    cells = bounds.cells(S, T)
    sens = bounds.l2(S, T)
    p = out.group("parameters")
    p.same("parameters.l2_sensitivity", r.params.get("l2_sensitivity"), sens)
    p.equal("parameters.cells_per_unit", r.params.get("cells_per_unit"), cells)
    sampler = stated_sampler(r, p, value)
    if sampler is None:
        return
    unrounded = sens
    if sampler.hardened:
        sens = sampler.rounded_l2(sens, cells)
        _stated_slack(r, p, value, sampler.granularity, cells)
        p.same("parameters.rounded_l2_sensitivity", r.params.get("rounded_l2_sensitivity"), sens)
    if not p.problems:
        lattice = f" rounded to multiples of {sampler.granularity:g}" if sampler.hardened else ""
        p.ok(f"sigma {value:.6g} on an L2 sensitivity of {sens:.6g} ({cells} cells{lattice}; {sampler.name} sampler)")
    _expect_events(r, out, (sampler.gaussian_event(unrounded, sens, value, cells),),
                   "one Gaussian mechanism on the panel")
    _events_loss(r, out)


def _additive_release(r: _Report, out: _Outcome):
    """``(found, noise, parameters group)`` of a release with Gaussian or Laplace noise (DFT, FAST):
    the definition the noise gives set on ``out``; ``found`` (the unit's bounds and the grid,
    :func:`_release_unit`) None when the unit or the noise is malformed."""
    found = _release_unit(r, out)
    noise = r.params.get("noise")
    out.definition = {"gaussian": "approx-dp", "laplace": "pure-dp"}.get(noise, "approx-dp")
    p = out.group("parameters")
    if not p.expect(noise in NOISES, f"parameters.noise is {noise!r}, not gaussian or laplace"):
        return None, noise, p
    return found, noise, p


NOISES = {"gaussian": "sigma", "laplace": "scale"}  # the noise of DFT and FAST -> the parameter of its scale


def _dft(r: _Report, out: _Outcome) -> None:
    """The first k Fourier coefficients with Gaussian or Laplace noise: :meth:`tsdp.mechanisms.dft.DFT.privacy_map`."""
    found, noise, p = _additive_release(r, out)
    if noise not in NOISES:
        return
    how = ("Gaussian noise on the first k coefficients (Parseval)" if noise == "gaussian" else
           "the Laplace DFT claims pure epsilon from its parameters")
    check_against_map(r, out, "dft", found, NOISES[noise], lambda _p: how)


def _fast(r: _Report, out: _Outcome) -> None:
    """FAST's noisy samples: :meth:`tsdp.mechanisms.fast.Fast.privacy_map`."""
    found, noise, p = _additive_release(r, out)
    if noise not in NOISES:
        return
    check_against_map(r, out, "fast", found, NOISES[noise], _fast_events)


def _fast_events(q) -> str:
    """FAST's events in words, from its map's parameters."""
    n_hit, c, touched = q["samples_on_changed_cells"], q["samples_per_unit"], q["composition"]["series_per_unit"]
    if q["noise"] == "laplace":
        how = (f"Laplace samples: at most {n_hit} on the cells one unit changes (c = min(M, steps) = {c} per "
               f"series, over up to {touched} series)")
    else:
        how = (f"Gaussian samples: Delta_q sqrt(n), n = {n_hit} samples on changed cells (c = {c}, up to {touched} "
               "series)")
    if q.get("sampler") == "hardened":
        how += f"; {q['sampler']} sampler, values rounded to multiples of {q['granularity']:g}"
    return how

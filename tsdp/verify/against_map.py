"""Check a ``tsdp release`` report against its mechanism's own privacy map (issue #28).

A release mechanism's claim is ``privacy_map(setting)`` (:mod:`tsdp.mechanisms.protocol`), a pure
function of public parameters. Verify rebuilds that :class:`~tsdp.mechanisms.protocol.Setting` from
what the report records and calls the same map, so the release and its check cannot drift apart:

* the budget: ``--epsilon`` and ``--delta`` of the recorded command line;
* the panel: the claim's unit bounds (:func:`tsdp.verify.parts._release_unit`) on the report's grid,
  with the unit's ``id_column`` and ``enforced``;
* the sampler: ``parameters.sampler`` and ``parameters.granularity`` of the claim (a report without
  ``sampler`` predates the hardened sampler: float), checked for a known name, a power-of-two
  granularity and noise spanning :data:`tsdp.accounting.discrete.MIN_LATTICE_SCALE` lattice steps,
  and to be the sampler and lattice the map picks for the recorded ``--sampler``/``--granularity``;
* the mechanism's options (``mechanism.options``: ``ReleaseOptions`` field -> keyword, default) from the
  recorded command line, the default where it records None. A report whose command line does not
  record an option at all (built through the Python API from a mechanism's claim) is checked at the
  value its claim states (:data:`STATED`). A claim that states an option (``k``, ``noise``,
  ``max_samples_M`` ...) otherwise than the command line gives it fails the ``command`` check and is
  recomputed at the stated value, so its events and noise are compared with what that value gives;
* ``Setting.released``: the released figures a map reads (filter-subsample's conditional accounting:
  the sampled steps), given by the rule (``released``); laplace, dft and fast take none.

A rule whose mechanism's claim states its options in nested blocks (the subsampling mechanisms) passes
the options it read from the claim (``options``) instead of :func:`recorded_options`.

The map's answer is then compared with the report: definition, epsilon, delta and theorem exactly (the
numbers to :data:`tsdp.verify.parts.REL_TOL`), every key of its ``parameters`` recursively (floats to
REL_TOL, integers, strings and None exactly; one problem per differing key, named by its dotted path),
its events (:func:`tsdp.verify.parts._expect_events`) and epsilon/delta from those events
(:func:`tsdp.verify.parts._events_loss`). A map that refuses the setting (UsageError, ValueError) is a
failed check naming why. The independence of the check comes from the tests and audits of the maps,
not from a second copy of their mathematics.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

from tsdp.errors import TsdpError
from tsdp.verify.parts import _Group, _Outcome, _Report, _events_loss, _expect_events, _is_real, _noise

# ReleaseOptions field -> (the claim parameter that states its value, a parameter whose presence means
# the value was not an option but derived: FAST's M is ceil(T / interval) with a fixed interval)
STATED: dict[str, tuple[str, str | None]] = {
    "calibration": ("calibration", None),
    "noise": ("noise", None),
    "dft_k": ("k", None),
    "fast_preset": ("preset", None),
    "fast_fixed_interval": ("interval", None),
    "fast_max_samples": ("max_samples_M", "interval"),
}


def stated_sampler(r: _Report, p: _Group, value: float):
    """The sampler the report states (:mod:`tsdp.accounting.samplers`, on its stated lattice), or None
    when malformed: a report without ``parameters.sampler`` predates the hardened sampler (float); a
    hardened granularity must be a positive power of two and the noise ``value`` must span at least
    :data:`tsdp.accounting.discrete.MIN_LATTICE_SCALE` steps of it."""
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


def recorded_options(r: _Report, mechanism) -> dict[str, Any]:
    """The mechanism's options (keyword -> value) as the recorded command line gives them (the default
    where it records None); for an option it does not record at all, the value the claim states
    (:data:`STATED`), else the default. Parsed as the release parses them."""
    parsers = getattr(mechanism, "parsers", {})
    options = {}
    for name, (keyword, default) in mechanism.options.items():
        stated, derived = STATED.get(name, (None, None))
        if name in r.command or stated not in r.params or derived in r.params:
            value = r.command.get(name)
        else:
            value = r.params[stated]
        value = parsers[name](value) if name in parsers else value
        options[keyword] = default if value is None else value
    return options


def stated_overrides(r: _Report, out: _Outcome, mechanism, parameters: Mapping[str, Any]) -> dict[str, Any]:
    """The options (keyword -> value) a claim states otherwise than the map computed from the command
    line gives them, each a problem of the ``command`` check: the claim is then recomputed at the
    stated values, so its events and noise are compared with what those values give."""
    g = out.group("command")
    overrides = {}
    for name, (keyword, _) in mechanism.options.items():
        stated = STATED.get(name, (None, None))[0]
        if name in r.command and stated in r.params and stated in parameters \
                and r.params[stated] != parameters[stated]:
            g.fail(f"parameters.{stated} is {r.params[stated]!r}, but the recorded command line "
                   f"(--{name.replace('_', '-')}) gives {_plain(parameters[stated])!r}")
            overrides[keyword] = r.params[stated]
    return overrides


def requested_sampler(r: _Report, stated):
    """The sampler the recorded command line asks for (``--sampler``, ``--granularity``: None, the
    lattice the map chooses from public parameters), or ``stated`` when it records none."""
    from tsdp.accounting.samplers import sampler_of

    if "sampler" not in r.command:
        return stated
    return sampler_of(r.command.get("sampler"), r.command.get("granularity"))


def same_lattice(out: _Outcome, stated, computed) -> bool:
    """Whether the report's sampler and lattice are those the map chose for the recorded command line;
    if not, a problem of the ``command`` check (the claim is then recomputed on the stated lattice)."""
    g = out.group("command")
    if stated.name != computed.name:
        g.fail(f"parameters.sampler is {stated.name!r}, but the recorded command line (--sampler) gives "
               f"{computed.name!r}")
        return False
    if stated.granularity != computed.granularity:
        g.fail(f"parameters.granularity is {stated.granularity!r}, but the recorded command line gives "
               f"{computed.granularity!r} (--granularity, else the lattice chosen from public parameters)")
        return False
    return True


def setting_of(r: _Report, out: _Outcome, mechanism, found, noise_key: str,
               options: Mapping[str, Any] | None = None, released: Mapping[str, Any] | None = None):
    """The :class:`~tsdp.mechanisms.protocol.Setting` the report records (module docstring), or None
    when its unit, noise or sampler is malformed (the problems are on ``out``). ``options``: the
    mechanism's options as the rule read them (default :func:`recorded_options`); ``released``: the
    released figures the map reads."""
    from tsdp.mechanisms.baseline import Panel
    from tsdp.mechanisms.protocol import Setting

    value = _noise(r, noise_key, out)
    sampler = None if value is None else stated_sampler(r, out.group("parameters"), value)
    if found is None or sampler is None:
        return None
    bounds, S, T = found
    u = r.claim.unit
    panel = Panel(S, T, bounds, u.id_column, bool(u.enforced))
    return Setting(r.command.get("epsilon"), r.command.get("delta"), panel, sampler,
                   recorded_options(r, mechanism) if options is None else dict(options), dict(released or {}))


def check_against_map(r: _Report, out: _Outcome, name: str, found, noise_key: str,
                      how: Callable[[Mapping[str, Any]], str], options: Mapping[str, Any] | None = None,
                      released: Mapping[str, Any] | None = None):
    """Recompute the claim of ``name``'s release with its privacy map and compare (module docstring).

    ``found``: the unit's bounds and the grid (:func:`tsdp.verify.parts._release_unit`, None when
    malformed); ``noise_key``: the claim parameter of the noise (``sigma`` or ``scale``); ``how(parameters)``
    says in words what the events are; ``options`` and ``released``: :func:`setting_of`. Returns the
    map, or None when it could not be computed."""
    from tsdp.mechanisms.registry import MECHANISMS

    mechanism = MECHANISMS[name]
    setting = setting_of(r, out, mechanism, found, noise_key, options, released)
    if setting is None:
        return None
    p = out.group("parameters")
    try:
        m = mechanism.privacy_map(replace(setting, sampler=requested_sampler(r, setting.sampler)))
        overrides = stated_overrides(r, out, mechanism, m.parameters)
        if overrides or not same_lattice(out, setting.sampler, m.sampler):
            m = mechanism.privacy_map(replace(setting, options={**setting.options, **overrides}))
    except (TsdpError, ValueError, TypeError) as exc:
        p.fail(f"the privacy map of {name} refuses the recorded setting: {exc}")
        return None
    out.definition = m.definition
    c = r.claim
    loss = out.group("privacy_loss")
    loss.same("claim epsilon (the privacy map's)", c.epsilon, m.epsilon)
    loss.same("claim delta (the privacy map's)", c.delta, m.delta)
    p.equal("claim.theorem", c.theorem, m.theorem)
    compare_parameters(p, "parameters", r.params, m.parameters)
    _expect_events(r, out, m.events, how(m.parameters))
    if m.events:
        _events_loss(r, out)
    elif not loss.problems:
        loss.ok(f"epsilon {m.epsilon:.6g} as the privacy map of {name} gives for the recorded setting "
                f"(claimed {c.epsilon:g})")
    return m


def compare_parameters(g: _Group, path: str, stated: Any, want: Any) -> None:
    """Every key of ``want`` (the map's parameters) against ``stated`` (the report's), recursively: one
    problem per differing key, named by its dotted path."""
    if isinstance(want, Mapping):
        if not isinstance(stated, Mapping):
            g.fail(f"{path} is {stated!r}, expected a record of {', '.join(map(str, want))}")
            return
        for key, value in want.items():
            here = f"{path}.{key}"
            if key == "sampler" and key not in stated and value == "float":
                continue  # reports older than the hardened sampler state none: float
            if key not in stated:
                g.fail(f"{here} is missing, expected {_plain(value)!r}")
            else:
                compare_parameters(g, here, stated[key], value)
    elif isinstance(want, (list, tuple)):
        if not isinstance(stated, list) or len(stated) != len(want):
            g.fail(f"{path} is {stated!r}, expected {_plain(want)!r}")
            return
        for i, (a, b) in enumerate(zip(stated, want)):
            compare_parameters(g, f"{path}.{i}", a, b)
    elif isinstance(want, numbers.Real) and not isinstance(want, (bool, numbers.Integral)):
        g.same(path, stated, float(want))
    else:
        g.equal(path, stated, _plain(want))


def _plain(value: Any) -> Any:
    """numpy scalars as Python numbers (the report's JSON holds those); tuples as lists."""
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return value
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, numbers.Real):
        return float(value)
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value

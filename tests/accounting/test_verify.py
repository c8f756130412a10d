"""``tsdp.verify``: claims built by the mechanisms themselves verify, every figure is tied
to the others (one edited alone fails a check), epsilon is recomputed from events or parameters;
``compose`` refuses different units and states the strictest one; the strict JSON loader.

Reports are built in memory from the mechanisms' own claims on small synthetic panels (the CLI end to
end is ``tests/cli/test_verify_cli.py``).
"""

from __future__ import annotations

import copy
import json
import math

import numpy as np
import pytest

from tsdp.accounting import gaussian as gauss
from tsdp.accounting import timesubsampling as ts
from tsdp.accounting.claim import MechanismEvent, PrivacyClaim
from tsdp.accounting.sensitivity import PrivacyUnit
from tsdp.accounting.compose import check_composable, compose_claims, composed_unit, events_privacy
from tsdp.accounting.sensitivity import ContributionBounds
from tsdp.verify import RULES, check_thresholds, claim_checks
from tsdp.verify import verify_report as verify_with_output
from tsdp.errors import BudgetError, DataError, UsageError
from tsdp.mechanisms import subsample as sm
from tsdp.mechanisms.baseline import Panel
from tsdp.mechanisms.gaussian import release_gaussian
from tsdp.mechanisms.laplace import release_laplace
from tsdp.mechanisms.dft import release_dft
from tsdp.mechanisms.fast import release_fast
from tsdp.report import Report


def verify_report(data, **options):
    """The report's checks without its released file (these tests check claims; a report verified
    without its file fails unless asked not to check it: test_budget_randomness_and_output_checks)."""
    return verify_with_output(data, output_check=False, **options)

S, T = 3, 60
EPS, DELTA = 1.0, 1e-5


def bounds(level="user", relation="add-remove", M=2.0, I=6, w=4, K=None):
    return ContributionBounds(level, M, max_steps=I if level == "user" else None, w=w if level == "w-event" else None,
                              series_per_unit=K, neighbouring=relation)


def values(n_series=S, n_steps=T):
    return np.random.default_rng(0).uniform(0, 10, (n_series, n_steps))


def release_report(claim: PrivacyClaim, b: ContributionBounds, mechanism: str, n_series=S, n_steps=T,
                   **command) -> dict:
    """A report as ``tsdp release`` writes it for ``claim`` (pre-aggregated wide input)."""
    params = {"mechanism": mechanism, "epsilon": EPS, "delta": None if claim.definition == "pure-dp" else DELTA,
              "unit": b.level, "max_per_step": b.max_per_step, "max_steps": b.max_steps, "w": b.w,
              "series_per_user": b.series_per_unit, "neighbouring": b.neighbouring, "assume_none": False,
              "layout": "wide", "user_col": None, "value_bound": None, "fast_preset": None, "sampling_rate": None,
              **command}
    return Report(command="release", parameters=params, claim=claim,
                  output={"file": "out.csv", "format": "csv", "sha256": "0" * 64}, randomness="os-entropy",
                  grid={"n_series": n_series, "n_steps": n_steps}).to_dict()


def rng():
    return np.random.default_rng(1)


def gaussian_report(b=None):
    b = b or bounds()
    rel = release_gaussian(values(), Panel(S, T, b), EPS, DELTA, rng())
    return release_report(rel.claim, b, "gaussian")


RELEASES = {
    "gaussian user": lambda: gaussian_report(),
    "gaussian event substitute": lambda: gaussian_report(bounds("event", "substitute")),
    "gaussian w-event K=2": lambda: gaussian_report(bounds("w-event", K=2)),
    "laplace user": lambda: release_report(release_laplace(values(), Panel(S, T, bounds()), EPS, rng()).claim,
                                           bounds(), "laplace"),
    "dft gaussian": lambda: release_report(release_dft(values(), Panel(S, T, bounds()), EPS, DELTA, rng(), 5).claim,
                                           bounds(), "dft"),
    "dft laplace even T, k at Nyquist": lambda: release_report(
        release_dft(values(), Panel(S, T, bounds("event")), EPS, None, rng(), T // 2 + 1, "laplace").claim,
        bounds("event"), "dft"),
    **{f"fast {noise} {level}": (lambda noise=noise, level=level: release_report(
        release_fast(values(), Panel(S, T, bounds(level)), EPS, rng(), delta=DELTA if noise == "gaussian" else None,
                     noise=noise, max_samples=10).claim, bounds(level), "fast"))
       for noise in ("laplace", "gaussian") for level in ("event", "w-event", "user")},
    "fast fixed substitute": lambda: release_report(
        release_fast(values(), Panel(S, T, bounds(relation="substitute")), EPS, rng(), interval=7,
                     adaptive=False).claim, bounds(relation="substitute"), "fast"),
    # a unit that can change more series than K (w-event: K per step; substitution: the old and the new
    # user's series; 2 I > T: the cells fill more series than K), found by the red-team audit
    "dft laplace w-event K=1": lambda: release_report(
        release_dft(values(), Panel(S, T, bounds("w-event", K=1)), EPS, None, rng(), 5, "laplace").claim,
        bounds("w-event", K=1), "dft"),
    "dft laplace substitute K=1": lambda: release_report(
        release_dft(values(), Panel(S, T, bounds(relation="substitute", K=1)), EPS, None, rng(), 5, "laplace").claim,
        bounds(relation="substitute", K=1), "dft"),
    "fast gaussian w-event K=1": lambda: release_report(
        release_fast(values(), Panel(S, T, bounds("w-event", K=1)), EPS, rng(), delta=DELTA, noise="gaussian",
                     max_samples=10).claim, bounds("w-event", K=1), "fast"),
    "subsample substitute I=T K=1": lambda: release_report(
        sm.release_subsample(values(), Panel(S, T, bounds(relation="substitute", I=T, K=1)), EPS, DELTA, rng(),
                             0.2).claim, bounds(relation="substitute", I=T, K=1), "subsample"),
    "subsample exact K=3 (PLD)": lambda: release_report(
        sm.release_subsample(values(), Panel(S, T, bounds()), EPS, DELTA, rng(), 0.2).claim, bounds(), "subsample"),
    "subsample exact K=1": lambda: release_report(
        sm.release_subsample(values(), Panel(S, T, bounds(K=1)), EPS, DELTA, rng(), 0.2).claim, bounds(K=1),
        "subsample"),
    "subsample paper": lambda: release_report(
        sm.release_subsample(values(), Panel(S, T, bounds()), EPS, DELTA, rng(), 0.2, accounting="paper").claim,
        bounds(), "subsample"),
    "filter-subsample conditional": lambda: release_report(
        sm.release_filter_subsample(values(), Panel(S, T, bounds()), EPS, DELTA, rng(), 0.2, filter_sigma=3.0).claim,
        bounds(), "filter-subsample"),
    "filter-subsample paper": lambda: release_report(
        sm.release_filter_subsample(values(), Panel(S, T, bounds()), EPS, DELTA, rng(), 0.2, filter_sigma=3.0,
                                    accounting="paper").claim, bounds(), "filter-subsample"),
}


@pytest.fixture(scope="module")
def reports() -> dict[str, dict]:
    return {name: make() for name, make in RELEASES.items()}


def test_fast_samples_count_only_below_the_steps_the_unit_touches(reports):
    """M matters only when it is smaller than the steps a unit touches: c = min(M, w) here (w = 4)."""
    data = copy.deepcopy(reports["fast laplace w-event"])
    data["claim"]["parameters"]["max_samples_M"] *= 2
    assert verify_report(data).passed
    data["claim"]["parameters"]["max_samples_M"] = 2
    assert {c.name for c in verify_report(data).failures} >= {"events", "parameters"}


@pytest.mark.parametrize("name", list(RELEASES))
def test_mechanisms_own_claims_verify(reports, name):
    result = verify_report(copy.deepcopy(reports[name]))
    assert result.passed, [c for c in result.checks if not c.passed]
    names = [c.name for c in result.checks]
    assert names[:4] == ["schema", "mechanism", "bound", "definition"]
    stated = "sampler" in reports[name]["claim"]["parameters"]  # the hardened claims state it (issue 17)
    assert names[-4:] == ["budget", "randomness", "sampler", "output_sha256"] if stated else \
        names[-3:] == ["budget", "randomness", "output_sha256"]


def _edit(path: str, factor=None, value=None):
    def apply(data):
        node = data
        keys = path.split(".")
        for key in keys[:-1]:
            node = node[int(key)] if isinstance(node, list) else node[key]
        last = int(keys[-1]) if isinstance(node, list) else keys[-1]
        node[last] = node[last] * factor if factor is not None else value
    return apply


SINGLE_EDITS = {  # report -> figures that, edited alone by x 0.5 or x 2, must fail verification
    "gaussian user": ["claim.epsilon", "claim.events.0.noise", "claim.events.0.sensitivity", "claim.parameters.sigma",
                      "claim.parameters.l2_sensitivity", "claim.unit.max_per_step", "claim.unit.max_steps",
                      "grid.n_steps", "grid.n_series"],
    "laplace user": ["claim.epsilon", "claim.events.0.noise", "claim.events.0.count", "claim.parameters.scale",
                     "claim.unit.max_steps"],
    "dft laplace even T, k at Nyquist": ["claim.epsilon", "claim.parameters.scale", "claim.parameters.l1_sensitivity",
                                         "claim.parameters.k", "claim.unit.max_per_step"],
    "fast laplace w-event": ["claim.epsilon", "claim.events.0.noise", "claim.events.0.count", "claim.unit.w",
                             "claim.parameters.samples_per_unit", "claim.parameters.scale"],
    "fast gaussian user": ["claim.epsilon", "claim.events.0.noise", "claim.events.0.sensitivity",
                           "claim.parameters.sigma", "claim.unit.max_steps"],
    "subsample paper": ["claim.epsilon", "claim.delta", "claim.parameters.sigma", "claim.unit.max_steps",
                        "claim.parameters.subsampling.p"],
    "filter-subsample paper": ["claim.delta", "claim.parameters.sigma", "claim.parameters.sensitivity.alpha",
                               "claim.parameters.subsampling.p"],
    "subsample exact K=1": ["claim.epsilon", "claim.events.0.noise", "claim.parameters.sigma",
                            "claim.parameters.subsampling.p", "claim.unit.max_steps"],
    "dft laplace w-event K=1": ["claim.parameters.l1_sensitivity", "claim.parameters.scale",
                                "claim.parameters.series_changed", "claim.unit.w"],
    "dft laplace substitute K=1": ["claim.parameters.l1_sensitivity", "claim.parameters.series_changed"],
    "fast gaussian w-event K=1": ["claim.parameters.samples_on_changed_cells", "claim.parameters.l2_sensitivity",
                                  "claim.events.0.sensitivity", "claim.events.0.lattice_coords", "claim.unit.w"],
    "subsample substitute I=T K=1": ["claim.events.0.count", "claim.parameters.sigma", "claim.unit.max_steps"],
}


@pytest.mark.parametrize("name,path", [(n, p) for n, paths in SINGLE_EDITS.items() for p in paths])
@pytest.mark.parametrize("factor", [0.5, 2])
def test_no_figure_can_be_edited_alone(reports, name, path, factor):
    data = copy.deepcopy(reports[name])
    before = json.dumps(data)
    if path.endswith((".p", ".alpha")) and factor == 2:
        factor = 1.25  # a rate stays below 1
    _edit(path, factor=factor)(data)
    assert json.dumps(data) != before
    try:
        result = verify_report(data)
    except DataError:
        return  # e.g. a count that is no longer an integer: not a report at all
    assert not result.passed, f"{name}: {path} x {factor} went unnoticed"


def eval_path(data, path):
    node = data
    for key in path.split("."):
        node = node[int(key)] if isinstance(node, list) else node[key]
    return node


def test_pure_claim_of_gaussian_noise_fails_definition(reports):
    data = copy.deepcopy(reports["gaussian user"])
    data["claim"].update(definition="pure-dp", delta=0.0)
    failed = {c.name: c.detail for c in verify_report(data).failures}
    assert "only (epsilon, delta)-DP" in failed["definition"] and "never give pure DP" in failed["privacy_loss"]


def test_budget_randomness_and_output_checks(reports):
    data = reports["gaussian user"]
    assert {c.name for c in verify_report(data, max_epsilon=0.5).failures} == {"budget"}
    assert verify_report(data, max_epsilon=EPS, max_delta=DELTA).passed
    assert {c.name for c in verify_report({**data, "randomness": "seeded"}).failures} == {"randomness"}
    sha = {c.name: c for c in verify_report(data, output_sha256="1" * 64).checks}["output_sha256"]
    assert not sha.passed
    sha = {c.name: c for c in verify_report(data, output_sha256="0" * 64).checks}["output_sha256"]
    assert sha.passed and "matches" in sha.detail
    sha = {c.name: c for c in verify_report(data, output_note="x is elsewhere").checks}["output_sha256"]
    assert sha.passed and sha.detail.startswith("not checked (--no-output-check): x is elsewhere")
    # without its released file, and without output_check=False, a report fails (issue 33)
    result = verify_with_output(data, output_note="x is elsewhere")
    assert {c.name for c in result.failures} == {"output_sha256"}
    assert "x is elsewhere" in result.failures[0].detail and "--no-output-check" in result.failures[0].detail


def _nan_epsilon(data):
    data["claim"]["epsilon"] = math.nan
    return data


def _nan_deep(data):
    data["claim"]["parameters"]["nested"] = [{"x": [1.0, math.inf]}]
    return data


@pytest.mark.parametrize("make", [_nan_epsilon, _nan_deep, lambda data: [], lambda data: {"claim": {}},
                                  lambda data: {**data, "claim": {**data["claim"], "events": [{"kind": "exp"}]}}])
def test_not_a_report_is_data_error(reports, make):
    with pytest.raises(DataError):
        verify_report(make(copy.deepcopy(reports["gaussian user"])))


@pytest.mark.parametrize("max_epsilon,max_delta", [(math.nan, None), (-1.0, None), (math.inf, None), (None, math.nan),
                                                   (None, -0.1), (None, 1.5), (True, None)])
def test_meaningless_thresholds(max_epsilon, max_delta):
    with pytest.raises(UsageError):
        check_thresholds(max_epsilon, max_delta)


def test_zero_thresholds_are_meaningful():
    check_thresholds(0.0, 0.0)
    check_thresholds(None, 1.0)


def test_mean_claim_verifies_and_epsilon_is_per_group_times_groups():
    from tsdp.mean.estimation import MeanSettings, claim_for

    claim = claim_for(MeanSettings(epsilon=0.2, upper=30.0, lower=-10.0, algorithm="quantile"), 12, "uid")
    data = Report(command="mean-estimate",
                  parameters={"epsilon": 0.2, "upper": 30.0, "lower": -10.0, "algorithm": "quantile",
                              "user_col": "uid"},
                  claim=claim, output={"file": "m.csv", "format": "csv", "sha256": "0" * 64},
                  randomness="os-entropy", grid={"n_groups": 12}).to_dict()
    assert verify_report(data).passed
    for path, value in (("claim.epsilon", 2.0), ("claim.unit.max_per_step", 30.0), ("grid.n_groups", 1),
                        ("claim.parameters.epsilon_per_group", 0.01)):
        bad = copy.deepcopy(data)
        _edit(path, value=value)(bad)
        assert not verify_report(bad).passed, path


@pytest.mark.parametrize("participation", ["public", "private"])
def test_mean_relation_text_is_recomputed(participation):
    """Issue 33: the relation words of a mean-estimate claim follow from --participation; an edited
    text (or relation name) fails verify (on main any text verified, composed and was charged)."""
    from tsdp.mean.estimation import MeanSettings, claim_for

    private = participation == "private"
    settings = MeanSettings(epsilon=0.5, upper=30.0, algorithm="quantile", participation=participation,
                            **({"arrays": 8, "m_ub": 4} if private else {}))
    claim = claim_for(settings, 4, "uid", declared={"key_columns": ["cell"], "key_values": 4, "slots": 1})
    command = {"epsilon": 0.5, "upper": 30.0, "lower": 0.0, "algorithm": "quantile", "user_col": "uid",
               "participation": participation, "group_by": ["cell"], "group_keys": ["a", "b", "c", "d"]}
    if private:
        command.update(arrays=8, m_ub="4")
    data = Report(command="mean-estimate", parameters=command, claim=claim,
                  output={"file": "m.csv", "format": "csv", "sha256": "0" * 64,
                          "columns": ["cell", "estimate", "laplace_scale", "algorithm", "num_arrays", "m_ub"]},
                  randomness="os-entropy", grid={"n_groups": 4}).to_dict()
    assert verify_report(data).passed, verify_report(data).failures
    edits = [("claim.unit.neighbouring", "replace all values of one user; the user set and the per-user record "
                                         "counts are public"),
             ("claim.unit.neighbouring", claim.unit.neighbouring + " "),
             ("claim.unit.relation", "add-remove" if not private else "substitute"),
             ("claim.parameters.participation", "private" if not private else "public"),
             ("claim.parameters.declared_groups.key_values", 3)]
    for path, value in edits:
        bad = copy.deepcopy(data)
        _edit(path, value=value)(bad)
        assert not verify_report(bad).passed, path


def test_flip_claim_is_lip_only():
    from tsdp.flip.mechanism import FlipSettings, claim_for

    claim = claim_for(FlipSettings(lip_delta=0.1), None)
    data = Report(command="flip", parameters={"lip_delta": 0.1}, claim=claim,
                  output={"file": "f.csv", "format": "csv", "sha256": "0" * 64}, randomness="os-entropy",
                  lip={"statement": "not DP", "disclaimer": "..."}).to_dict()
    result = verify_report(data)
    assert result.passed, result.failures
    assert {c.name for c in verify_report(data, max_delta=0.5).failures} == {"budget"}
    assert claim.mechanism in RULES


# ------------------------------------------------------------------------------ recomputing epsilon


def test_gaussian_events_compose_exactly():
    events = (MechanismEvent("gaussian", 1.0, 4.0, 3), MechanismEvent("gaussian", 2.0, 5.0, 1))
    mu = math.sqrt(3 / 16 + 4 / 25)
    eps = gauss.epsilon_for_delta(DELTA, mu)
    assert events_privacy(events, "approx-dp", eps, DELTA)[0]
    assert not events_privacy(events, "approx-dp", eps * 0.99, DELTA)[0]
    assert not events_privacy(events, "pure-dp", 100.0, 0.0)[0]
    assert not events_privacy((), "approx-dp", 100.0, DELTA)[0]


def test_laplace_events_add():
    events = (MechanismEvent("laplace", 2.0, 10.0, 3),)
    assert events_privacy(events, "pure-dp", 0.6, 0.0)[0]
    assert not events_privacy(events, "pure-dp", 0.59, 0.0)[0]


def test_mixture_events_compose_by_pld():
    from tsdp.accounting.pld import pld_from_profile, tail_mass_for
    from tsdp.accounting.profiles import GaussianMixtureProfile

    mix = ts.subsample_mixture(20, 0.2, 1.0, 400)
    sigma = 3.0
    profile = GaussianMixtureProfile(tuple(mix.weights.tolist()), tuple((mix.sensitivities / sigma).tolist()))
    eps = pld_from_profile(profile, 1e-3).self_compose(3, tail_mass_for(DELTA)).epsilon(DELTA)
    event = (MechanismEvent("gaussian-mixture", float(mix.sensitivities.max()), sigma, 3, mixture=mix.pairs()),)
    ok, detail = events_privacy(event, "approx-dp", eps, DELTA)
    assert ok and "PLD" in detail
    assert not events_privacy(event, "approx-dp", eps * 0.9, DELTA)[0]


# ------------------------------------------------------------------------------ compose and units


def claim_of(level="user", relation="add-remove", id_column=None, M=1.0, I=24, K=2, w=None, eps=0.5):
    unit = PrivacyUnit(level, relation, "text", M, max_steps=I, w=w, series_per_unit=K, id_column=id_column)
    return PrivacyClaim("approx-dp", unit, eps, 1e-6, "gaussian", "T", (MechanismEvent("gaussian", 1.0, 5.0),))


@pytest.mark.parametrize("other", [dict(level="event", I=None), dict(relation="substitute"), dict(id_column="uid")])
def test_different_units_do_not_compose(other):
    with pytest.raises(BudgetError, match="different unit"):
        check_composable([claim_of(), claim_of(**other)])


def _with_words(claim, words):
    u = claim.unit
    unit = PrivacyUnit(u.level, u.relation, words, u.max_per_step, max_steps=u.max_steps, w=u.w,
                       series_per_unit=u.series_per_unit, id_column=u.id_column)
    return PrivacyClaim(claim.definition, unit, claim.epsilon, claim.delta, claim.mechanism, claim.theorem,
                        claim.events)


def test_relations_of_other_commands_do_not_compose_with_a_release():
    """mean-estimate and forecast-train name their relations user/substitute too, but mean
    replaces one user's values with the users and counts public, and forecast-train substitutes
    values of one series: neither is a release's 'replace one user by another' (red-team audit:
    compose stated one epsilon for the release's wider relation)."""
    from tsdp.accounting.sensitivity import describe_relation
    from tsdp.mean.estimation import NEIGHBOURING as MEAN_WORDS

    release = _with_words(claim_of(relation="substitute"), describe_relation("user", "substitute"))
    mean = _with_words(claim_of(relation="substitute"), MEAN_WORDS)
    forecast = _with_words(claim_of(relation="substitute"), "substitution: the datasets differ in up to 4 values "
                                                            "(anywhere) of one series, by any amount")
    for other in (mean, forecast):
        with pytest.raises(BudgetError, match="not the same neighbouring datasets"):
            check_composable([release, other])
    check_composable([mean, mean])  # the same relation composes
    w4 = _with_words(claim_of(level="w-event", I=None, w=4), describe_relation("w-event", "add-remove", 4))
    w8 = _with_words(claim_of(level="w-event", I=None, w=8), describe_relation("w-event", "add-remove", 8))
    assert composed_unit([w4, w8])["w"] == 4  # releases with other w compose, for the strictest


def test_composed_unit_is_the_strictest():
    unit = composed_unit([claim_of(M=2.0, I=24, K=None), claim_of(M=1.0, I=4, K=3), claim_of(M=3.0, I=None, K=2)])
    assert (unit["max_per_step"], unit["max_steps"], unit["series_per_unit"]) == (1.0, 4, 2)
    assert "strictest" in unit["covers"] and unit["enforced"] is False
    same = compose_claims([claim_of(), claim_of()])
    assert same.unit["covers"] == "the bounds are the same in every report" and not same.warnings


def test_compose_below_the_composed_delta_floor_states_basic_composition():
    """At a total delta below 1e-10 the FFT composition's rounding is of the order of delta (epsilon moved
    between discretizations, not always the coarse one higher): compose states basic composition only,
    and a --delta below the reports' total there is refused."""
    def claim(delta):
        unit = PrivacyUnit("user", "add-remove", "text", 1.0, max_steps=24, series_per_unit=2)
        return PrivacyClaim("approx-dp", unit, 3.0, delta, "gaussian", "T", (MechanismEvent("gaussian", 1.0, 1.5),))

    low = compose_claims([claim(4e-13), claim(4e-13)])
    assert low.epsilon == 6.0 and low.tight_epsilon is None and "basic" in low.method.lower()
    assert any("below 1e-10" in w for w in low.warnings)
    with pytest.raises(UsageError, match="below 1e-10"):
        compose_claims([claim(4e-13), claim(4e-13)], delta=1e-13)
    high = compose_claims([claim(1e-6), claim(1e-6)])
    assert high.tight_epsilon is not None and high.epsilon < 6.0 and not high.warnings


def test_lip_and_lower_bounds_are_usage_errors():
    lower = claim_of()
    lower = PrivacyClaim(lower.definition, lower.unit, 0.5, 1e-6, "gaussian", "T", lower.events, bound="lower")
    with pytest.raises(UsageError, match="lower bound"):
        check_composable([claim_of(), lower])


def test_compose_requires_verified_claims(reports):
    assert all(c.passed for c in claim_checks(reports["gaussian user"]))
    data = copy.deepcopy(reports["gaussian user"])
    data["claim"]["events"][0]["noise"] *= 10
    assert not all(c.passed for c in claim_checks(data))


# ------------------------------------------------------------------------------ the strict loader


@pytest.mark.parametrize("text,needle", [
    ('{"a": NaN}', "NaN"), ('{"a": Infinity}', "Infinity"), ('{"a": [-Infinity]}', "Infinity"),
    ('{"a": 1e400}', "does not fit"), ('{"a": 1' + "0" * 400 + "}", "too large"), ('{"a": 1, "a": 2}', "twice"),
    ("[" * 50_000 + "]" * 50_000, "nested too deeply"), ("{", "not JSON"),
])
def test_read_json_refuses_what_tsdp_never_writes(tmp_path, text, needle):
    from tsdp.jsonfile import read_json

    path = tmp_path / "x.json"
    path.write_text(text)
    with pytest.raises(DataError, match=needle):
        read_json(path, "REPORT")


def test_read_json_reads_strict_json(tmp_path):
    from tsdp.jsonfile import read_json

    path = tmp_path / "x.json"
    path.write_text('{"a": [1, 2.5e-300, -3], "b": {"c": null}}')
    assert read_json(path, "X") == {"a": [1, 2.5e-300, -3], "b": {"c": None}}
    with pytest.raises(UsageError):
        read_json(tmp_path / "absent.json", "X")


@pytest.mark.parametrize("name", list(RELEASES))
def test_a_claim_naming_another_theorem_fails(reports, name):
    """Every rule rejects a claim that names a theorem other than the one its figures were rechecked
    by (the subsampling rules compare theirs in the rule, the others in the theorem check)."""
    data = copy.deepcopy(reports[name])
    data["claim"]["theorem"] = "Dwork and Roth 2014, Theorem 3.22 (classical Gaussian mechanism)"
    result = verify_report(data)
    assert not result.passed
    if not name.startswith(("subsample", "filter-subsample")):
        assert "theorem" in {c.name for c in result.failures}

"""Red-team audit of ``tsdp account`` (brief rt_account, attacks 2 to 4).

* verify: a mean-estimate or forecast-train report edited to present its unit's bounds as
  enforced by tsdp (``unit.enforced: true``, which those commands never write) must fail.
* compose: reports that must not be published (``--sampler float``, a fixed ``--seed``) are named
  in the composed summary's warnings; the composed epsilon of heterogeneous events (Gaussian and
  Laplace, several counts and deltas) is never below an independent accountant's (dp-accounting,
  optimistic estimate: a lower value than the true epsilon).
* dpsgd / calibrate at the edges: ``--unit record --sampling-rate 1`` (no subsampling) with a small
  noise multiplier gives the plain Gaussian mechanism's epsilon instead of crashing; calibrated
  noise multipliers at extreme targets give an epsilon within the target by an independent
  accountant and by tsdp's own recomputation; a meaningless ``--value-bound`` is a usage error.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.conftest import REPO_ROOT
from tsdp.accounting.claim import MechanismEvent, PrivacyClaim
from tsdp.accounting.sensitivity import PrivacyUnit
from tsdp.accounting.compose import compose_claims
from tsdp.cli.app import main

SAMPLE = REPO_ROOT / "sample_data"
RUNS = {  # name -> command line (output and report land in the module's directory)
    "mean-estimate-aa": ["mean-estimate", SAMPLE / "itms_speeds.parquet", "--user-col", "bus_id", "--value-col",
                         "speed", "--time-col", "timestamp", "--cell-col", "cell_id", "--slot-length", "1h",
                         "--group-by", "cell,slot", "--epsilon-per-group-ok", "--epsilon", "0.1", "--upper", "65",
                         "--algorithm", "array-averaging",
                         # --participation private: the groups declared, K arrays and m_UB public
                         "--group-keys", ",".join(f"c{i:02d}_{j:02d}" for i in range(5) for j in range(5)),
                         "--start", "2024-05-06", "--end", "2024-05-09", "--arrays", "20", "--m-ub", "10",
                         "-o", "mean-estimate-aa.csv"],
    "forecast-train": ["forecast-train", SAMPLE / "traffic_hourly.parquet", "--time-col", "time", "--value-col",
                       "count", "--series-col", "sensor", "--context-length", "24", "--forecast-length", "12",
                       "--model", "linear", "--batch-size", "8", "--noise-multiplier", "1.5", "--delta", "1e-5",
                       "--steps", "20", "-o", "forecast-train.csv"],
    "gaussian": ["release", SAMPLE / "traffic_hourly_wide.csv", "--mechanism", "gaussian", "--epsilon", "0.5",
                 "--delta", "1e-6", "--unit", "event", "-o", "gaussian.csv"],
    "float": ["release", SAMPLE / "traffic_hourly_wide.csv", "--mechanism", "gaussian", "--epsilon", "0.5",
              "--delta", "1e-6", "--unit", "event", "--sampler", "float", "-o", "float.csv"],
    "seeded": ["release", SAMPLE / "traffic_hourly_wide.csv", "--mechanism", "gaussian", "--epsilon", "0.5",
               "--delta", "1e-6", "--unit", "event", "--seed", "3", "-o", "seeded.csv"],
}


@pytest.fixture(scope="module")
def genuine(tmp_path_factory) -> Path:
    where = tmp_path_factory.mktemp("genuine")
    for name, args in RUNS.items():
        out = str(where / args[args.index("-o") + 1])
        args = [str(a) for a in args]
        args[args.index("-o") + 1] = out
        assert main([*args, "--quiet"]) == 0, name
    return where


def run_json(tsdp_cli, *args):
    run = tsdp_cli(*args, "--json")
    return run, (json.loads(run.out) if run.out else None)


# ------------------------------------------------------------------------------ verify


@pytest.mark.parametrize("name", ["mean-estimate-aa", "forecast-train"])
def test_unit_presented_as_enforced_fails_verify(tsdp_cli, genuine, tmp_path, name):
    """Before the fix both edited reports passed 'tsdp account verify' (exit 0): only release reports
    had their ``unit.enforced`` rechecked, and compose would have stated the composed unit as enforced."""
    data = json.loads((genuine / f"{name}.report.json").read_text())
    assert data["claim"]["unit"]["enforced"] is False
    run, out = run_json(tsdp_cli, "account", "verify", genuine / f"{name}.report.json")
    assert run.code == 0 and out["passed"] is True, run.err
    data["claim"]["unit"]["enforced"] = True
    shutil.copy(genuine / f"{name}.csv", tmp_path / f"{name}.csv")
    edited = tmp_path / f"{name}.report.json"
    edited.write_text(json.dumps(data))
    run, out = run_json(tsdp_cli, "account", "verify", edited)
    assert run.code == 3 and run.error_line.startswith("error: verification of"), run.err
    failed = {c["name"]: c["detail"] for c in out["reports"][0]["checks"] if not c["passed"]}
    assert "enforced" in failed.get("unit", ""), failed


# Was a defect, fixed (verify's theorem check): verify did not check the theorem a claim names for the
# cellwise, DFT, FAST, mean-estimate and FLIP rules; a report whose claim.theorem was emptied or replaced passed.
@pytest.mark.parametrize("name", ["gaussian", "mean-estimate-aa"])
@pytest.mark.parametrize("theorem", ["", "Dwork and Roth 2014, Theorem 3.22 (classical Gaussian mechanism)"])
def test_a_claim_that_names_another_theorem_fails_verify(tsdp_cli, genuine, tmp_path, name, theorem):
    data = json.loads((genuine / f"{name}.report.json").read_text())
    data["claim"]["theorem"] = theorem
    shutil.copy(genuine / f"{name}.csv", tmp_path / f"{name}.csv")
    edited = tmp_path / f"{name}.report.json"
    edited.write_text(json.dumps(data))
    run, out = run_json(tsdp_cli, "account", "verify", edited)
    if not theorem:  # an empty theorem is no report at all (the schema): exit 4
        assert run.code == 4 and "theorem" in run.err and "non-empty" in run.err
        return
    assert run.code == 3 and out["passed"] is False
    failed = {c["name"]: c["detail"] for c in out["reports"][0]["checks"] if not c["passed"]}
    assert "theorem" in failed, failed


# ------------------------------------------------------------------------------ compose


def test_compose_names_reports_that_must_not_be_published(tsdp_cli, genuine):
    """Before the fix compose printed the figure of a float-sampler and a seeded release with no
    warning at all, though 'tsdp account verify' fails both (sampler, randomness)."""
    run, out = run_json(tsdp_cli, "account", "compose", genuine / "float.report.json", genuine / "seeded.report.json",
                        genuine / "gaussian.report.json")
    assert run.code == 0, run.err
    codes = {w["code"]: w["message"] for w in out["warnings"]}
    assert "float.report.json" in codes["float_sampler"] and "must not be published" in codes["float_sampler"]
    assert "seeded.report.json" in codes["seeded_run"]
    assert not any("gaussian.report.json" in w["message"] for w in out["warnings"])
    run, out = run_json(tsdp_cli, "account", "compose", genuine / "gaussian.report.json")
    assert run.code == 0 and out["warnings"] == []


UNIT = PrivacyUnit("user", "add-remove", "one user", 1.0, 24)


def _claim(event: MechanismEvent, delta: float) -> PrivacyClaim:
    pure = event.kind == "laplace"
    return PrivacyClaim("pure-dp" if pure else "approx-dp", UNIT, 1e6, 0.0 if pure else delta, "test", "test",
                        (event,))


def _reference(events: list[MechanismEvent], delta: float) -> float:
    """dp-accounting's optimistic (lower) estimate of the composed epsilon."""
    from dp_accounting.pld import privacy_loss_distribution as pld

    total = None
    for e in events:
        make = pld.from_gaussian_mechanism if e.kind == "gaussian" else pld.from_laplace_mechanism
        one = make(e.noise / e.sensitivity, value_discretization_interval=1e-4, pessimistic_estimate=False,
                   use_connect_dots=False)
        one = one.self_compose(e.count) if e.count > 1 else one
        total = one if total is None else total.compose(one)
    return total.get_epsilon_for_delta(delta)


G = lambda sigma, count=1: MechanismEvent("gaussian", 1.0, sigma, count)  # noqa: E731
L = lambda scale, count=1: MechanismEvent("laplace", 1.0, scale, count)  # noqa: E731


@pytest.mark.parametrize("events,delta", [
    ([G(3.0), G(3.0), G(3.0)], 1e-5),
    ([G(0.5), L(2.0, 5)], 1e-6),
    ([L(10.0, 200)], 1e-9),
    ([G(50.0, 1000)], 1e-10),
    ([L(0.1, 3), G(1.0)], 1e-6),
    ([G(1.0), G(1.0)], 0.5),
    ([G(2.0, 7), L(4.0, 2), G(0.8)], 1e-3),
])
def test_composed_epsilon_is_never_below_an_independent_accountant(events, delta):
    """Each event is its own report's claim (the total delta is split between the approximate ones);
    a tight composition must stay above dp-accounting's optimistic estimate (and close to it)."""
    approx = sum(e.kind == "gaussian" for e in events)
    claims = [_claim(e, delta / max(approx, 1)) for e in events]
    result = compose_claims(claims, delta)
    assert result.tight_epsilon is not None and result.epsilon == result.tight_epsilon
    reference = _reference(events, delta)
    assert reference <= result.epsilon <= reference + 0.02 * max(1.0, reference), (result.epsilon, reference)


# ------------------------------------------------------------------------------ dpsgd and calibrate at the edges


def _exact_gaussian_epsilon(sigma: float, delta: float) -> float:
    """The Gaussian mechanism's epsilon at delta (Balle and Wang 2018, Theorem 8), written out here with
    scipy (in logs: e^eps is huge at small sigma), independently of tsdp.accounting."""
    import math

    from scipy.optimize import brentq
    from scipy.stats import norm

    mu = 1.0 / sigma

    def excess(eps: float) -> float:
        first = norm.cdf(-eps / mu + mu / 2)
        second = math.exp(eps + norm.logcdf(-eps / mu - mu / 2))
        return first - second - delta

    return brentq(excess, 0.0, 10 * mu * mu + 50, xtol=1e-12, rtol=1e-12)


@pytest.mark.parametrize("sigma", [0.05, 0.1, 0.5, 2.0])
def test_record_dpsgd_without_subsampling_is_the_gaussian_mechanism(tsdp_cli, sigma):
    """Before the fix, sigma 0.05 and 0.1 at --sampling-rate 1 crashed with exit 1 ('unexpected
    ValueError: math domain error') in the privacy-loss grid."""
    run, out = run_json(tsdp_cli, "account", "dpsgd", "--unit", "record", "--sampling-rate", "1", "--steps", "1",
                        "--noise-multiplier", sigma, "--delta", "1e-5")
    assert run.code == 0, run.err
    exact = _exact_gaussian_epsilon(sigma, 1e-5)
    assert exact * (1 - 1e-6) <= out["epsilon"] <= exact * 1.001 + 1e-3


@pytest.mark.parametrize("q,steps,epsilon,delta", [
    (1.0, 1, 8.0, 1e-5),        # no subsampling, small noise (crashed before the fix)
    (0.01, 1000, 1.0, 1e-5),
    (0.01, 10, 1e-3, 1e-5),     # tiny target: huge noise
    (0.5, 10, 50.0, 1e-5),      # huge target: tiny noise
    (1e-4, 100_000, 1.0, 1e-10),  # the smallest composed delta tsdp reads (tsdp.accounting.grid)
    (0.1, 10, 1.0, 0.5),        # delta far from 0
])
def test_calibrated_noise_meets_the_target_by_two_accountants(tsdp_cli, q, steps, epsilon, delta):
    from dp_accounting.pld import privacy_loss_distribution as pld

    run, out = run_json(tsdp_cli, "account", "calibrate", "dpsgd", "--unit", "record", "--sampling-rate", q,
                        "--steps", steps, "--epsilon", epsilon, "--delta", delta)
    assert run.code == 0, run.err
    sigma = out["noise_multiplier"]
    assert out["epsilon"] <= epsilon
    # tsdp's own recomputation at the printed sigma (what a user would run next)
    run, again = run_json(tsdp_cli, "account", "dpsgd", "--unit", "record", "--sampling-rate", q, "--steps", steps,
                          "--noise-multiplier", repr(sigma), "--delta", delta)
    assert run.code == 0 and again["epsilon"] <= epsilon, (again, epsilon)
    step = pld.from_gaussian_mechanism(sigma, sampling_prob=q, value_discretization_interval=1e-4,
                                       pessimistic_estimate=False, use_connect_dots=False)
    reference = (step.self_compose(steps) if steps > 1 else step).get_epsilon_for_delta(delta)
    assert reference <= again["epsilon"] * (1 + 1e-9) + 1e-12  # tsdp's is an upper bound
    assert reference <= epsilon


@pytest.mark.parametrize("value", ["nan", "inf", "-1", "0"])
def test_meaningless_value_bound_is_a_usage_error(tsdp_cli, value):
    """Before the fix, without --label-noise/--context-noise any --value-bound (NaN, infinite,
    negative) was accepted silently and the epsilon printed as if it meant something."""
    run = tsdp_cli("account", "dpsgd", "--series", "20", "--length", "200", "--context-length", "24",
                   "--forecast-length", "12", "--batch-size", "8", "--steps", "10", "--noise-multiplier", "1",
                   "--delta", "1e-5", "--value-bound", value)
    assert run.code == 2 and "--value-bound" in run.error_line and run.out == ""


@pytest.mark.parametrize("q,sigma,steps,delta", [
    (1.0, 1.0, 1, 1e-5), (0.01, 1.0, 1000, 1e-5), (0.1, 0.8, 100, 1e-5), (0.5, 2.0, 10, 1e-6), (0.2, 5.0, 50, 1e-5),
])
def test_fixed_batches_under_substitution_are_above_dp_accountings_replace_one(q, sigma, steps, delta):
    """--sampling fixed --relation substitution against dp-accounting's tight REPLACE_ONE accountant for
    sampling without replacement (optimistic estimate, a value below the true epsilon): tsdp's pair
    (q N(2) + (1 - q) N(0), N(0)) is an upper bound, equal to it without subsampling and, at
    small q, several times looser (utility, not privacy: noted in the audit's report)."""
    from dp_accounting.pld import privacy_loss_distribution as pld
    from dp_accounting.privacy_accountant import NeighboringRelation

    from tsdp.api import accounting

    ours = accounting.dpsgd(unit="record", sampling="fixed", relation="substitution", sampling_rate=q, steps=steps,
                            noise_multiplier=sigma, delta=delta)["epsilon"]
    step = pld.from_gaussian_mechanism(sigma, sampling_prob=q, neighboring_relation=NeighboringRelation.REPLACE_ONE,
                                       value_discretization_interval=1e-3, pessimistic_estimate=False,
                                       use_connect_dots=False)
    reference = (step.self_compose(steps) if steps > 1 else step).get_epsilon_for_delta(delta)
    assert reference <= ours * (1 + 1e-9)
    if q == 1.0:
        assert ours <= reference * 1.001 + 1e-3


def test_lower_bound_checkpoints_are_labelled_lower_bounds(tsdp_cli):
    """Before the fix, --bound lower relabelled the final figure epsilon_lower_bound but printed every
    checkpoint under "epsilon": a CI job reading checkpoints[-1]["epsilon"] took an optimistic
    lower bound for a guarantee."""
    args = ["account", "dpsgd", "--series", "20", "--length", "200", "--context-length", "24",
            "--forecast-length", "12", "--batch-size", "8", "--steps", "100", "--noise-multiplier", "1",
            "--delta", "1e-5", "--instances", "2", "--checkpoints", "2"]
    run, lower = run_json(tsdp_cli, *args, "--bound", "lower")
    assert run.code == 0 and lower["is_privacy_guarantee"] is False and "epsilon" not in lower
    assert all(set(c) == {"compositions", "epsilon_lower_bound"} for c in lower["checkpoints"])
    assert lower["checkpoints"][-1]["epsilon_lower_bound"] == lower["epsilon_lower_bound"]
    run, upper = run_json(tsdp_cli, *args)
    assert run.code == 0 and upper["is_privacy_guarantee"] is True
    assert all(set(c) == {"compositions", "epsilon"} for c in upper["checkpoints"])
    assert upper["checkpoints"][-1]["epsilon"] == upper["epsilon"] >= lower["epsilon_lower_bound"]


def test_composing_one_hardened_release_three_times_meets_delta_by_the_exact_profile(genuine):
    """The same release composed three times (as compose does not deduplicate): the composed epsilon,
    fed back into the exact Gaussian profile of mu = sqrt(3) sensitivity / sigma (written out here with
    scipy) plus the lattice's rounding slack (1 + e^eps) 3 m 0.025 (g / sigma)^2 (the event's own
    statement), must give at most the composed delta."""
    import math

    from scipy.stats import norm

    from tsdp.api import accounting

    report = genuine / "gaussian.report.json"
    (event,) = json.loads(report.read_text())["claim"]["events"]
    assert event["kind"] == "discrete-gaussian" and event["count"] == 1
    out = accounting.compose([report, report, report])
    eps = out["epsilon"]
    assert out["method"].startswith("PLD composition") and out["delta"] == pytest.approx(3e-6, rel=1e-12)
    mu = math.sqrt(3) * event["sensitivity"] / event["noise"]
    continuous = norm.cdf(-eps / mu + mu / 2) - math.exp(eps) * norm.cdf(-eps / mu - mu / 2)
    slack = (1 + math.exp(eps)) * 3 * event["lattice_coords"] * 0.025 * (event["granularity"] / event["noise"]) ** 2
    assert continuous + slack <= out["delta"]
    assert eps >= json.loads(report.read_text())["claim"]["epsilon"]

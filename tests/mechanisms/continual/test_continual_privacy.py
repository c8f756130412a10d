"""privacy_map and the claim: the events back the claimed (epsilon, delta), compose as one spend,
and the hardened lattice covers the rounding; StreamSetting validates and round-trips."""

import json

import numpy as np
import pytest

from tests.mechanisms.continual.conftest import setting
from tsdp.accounting import gaussian as gauss
from tsdp.accounting.claim import PrivacyClaim
from tsdp.accounting.compose import claim_backed_by_events, compose_claims
from tsdp.errors import UsageError
from tsdp.mechanisms.continual import StreamSetting, privacy_map
from tsdp.mechanisms.continual.factorization import factorization

CASES = [dict(strategy="independent"), dict(strategy="toeplitz"), dict(strategy="banded", band=8),
         dict(strategy="tree"), dict(strategy="toeplitz", unit="w-event", w=7, series_per_user=3, n_series=5),
         dict(strategy="toeplitz", unit="user", max_steps=30, min_separation=7, series_per_user=2, n_series=4)]


@pytest.mark.parametrize("sampler", ["float", "hardened"])
@pytest.mark.parametrize("case", CASES)
def test_claim_is_backed_by_its_events(case, sampler):
    s = setting(sampler=sampler, **case)
    priv = privacy_map(s)
    claim = priv.claim()
    ok, why = claim_backed_by_events(claim)
    assert ok, why
    (event,) = claim.events
    assert event.kind == ("discrete-gaussian" if sampler == "hardened" else "gaussian")
    assert event.noise == priv.sigma and event.count == 1
    K = s.series_touched
    per_series = factorization(s.strategy, s.horizon, s.band).sensitivity(s.unit, s.w, s.max_steps, s.min_separation)
    assert priv.l2_sensitivity == pytest.approx(np.sqrt(K) * s.max_per_step * per_series, rel=1e-15)
    if sampler == "float":
        assert event.sensitivity == priv.l2_sensitivity
        assert gauss.delta_for_epsilon(s.epsilon, priv.l2_sensitivity / priv.sigma) <= s.delta
    else:
        g = priv.granularity
        assert event.sensitivity == pytest.approx(priv.l2_sensitivity + g * np.sqrt(priv.lattice_coords), rel=1e-15)
        assert priv.sigma / g >= 2 ** 19 and event.lattice_coords == priv.lattice_coords
        assert gauss.delta_for_epsilon(s.epsilon, event.sensitivity / priv.sigma) + priv.rounding_slack <= s.delta
    assert "Gaussian mechanism on the encoded stream C x" in claim.theorem and "post-processing" in claim.theorem
    assert claim.unit.level == s.unit and claim.unit.series_per_unit == K
    assert PrivacyClaim.from_dict(json.loads(json.dumps(claim.to_dict()))) == claim


@pytest.mark.slow
def test_a_stream_composes_as_one_spend():
    claim = privacy_map(setting(strategy="toeplitz", sampler="hardened")).claim()
    one = compose_claims([claim])
    assert one.epsilon <= claim.epsilon * (1 + 1e-6)
    two = compose_claims([claim, claim])
    assert claim.epsilon < two.epsilon <= 2 * claim.epsilon


def test_noise_scales_with_the_unit_and_the_series_per_user():
    event = privacy_map(setting(strategy="toeplitz")).sigma
    user = privacy_map(setting(strategy="toeplitz", unit="user", max_steps=7)).sigma
    joint = privacy_map(setting(strategy="toeplitz", unit="user", max_steps=7, series_per_user=4, n_series=9)).sigma
    assert user / event == pytest.approx(10.336702242778163 / 1.7158244520427024, rel=1e-9)
    assert joint / user == pytest.approx(2.0, rel=1e-12)


def test_setting_round_trips_through_json():
    s = setting(strategy="banded", band=16, unit="user", max_steps=3, min_separation=2, outputs=("daily", "window:7"))
    assert StreamSetting.from_dict(json.loads(json.dumps(s.to_dict()))) == s


@pytest.mark.parametrize("changes, message", [
    (dict(strategy="auto"), "strategy"),
    (dict(strategy="banded"), "band"),
    (dict(strategy="toeplitz", band=4), "band"),
    (dict(unit="user"), "--max-steps"),
    (dict(unit="w-event"), "--w"),
    (dict(min_separation=3), "min_separation"),
    (dict(outputs=("weekly",)), "outputs"),
    (dict(outputs=("daily", "daily")), "outputs"),
    (dict(outputs=("window:0",)), "outputs"),
    (dict(horizon=0), "horizon"),
    (dict(epsilon=-1.0), "epsilon"),
    (dict(max_per_step=0.0), "--max-per-step"),
    (dict(sampler="exact"), "--sampler"),
    (dict(strategy="tree", horizon=5000), "horizon"),
])
def test_bad_settings_are_usage_errors(changes, message):
    with pytest.raises(UsageError, match=message):
        privacy_map(setting(**changes))

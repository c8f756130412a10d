import math

import pytest

from tsdp.accounting.claim import MechanismEvent, PrivacyClaim
from tsdp.accounting.sensitivity import PrivacyUnit

UNIT = PrivacyUnit("user", "add-remove", "add or remove one user", 1.0, max_steps=3)


def claim(**kw):
    base = dict(definition="approx-dp", unit=UNIT, epsilon=1.0, delta=1e-6, mechanism="gaussian",
                theorem="T", events=(MechanismEvent("gaussian", 1.0, 2.0),), parameters={"sigma": 2.0})
    return PrivacyClaim(**{**base, **kw})


def test_round_trip():
    c = claim()
    assert PrivacyClaim.from_dict(c.to_dict()) == c


@pytest.mark.parametrize("kw", [
    dict(definition="dp"), dict(epsilon=-1.0), dict(epsilon=math.inf), dict(epsilon=None),
    dict(delta=1.0), dict(delta=None), dict(definition="pure-dp", delta=1e-6),
    dict(definition="lip"), dict(bound="tight"),
])
def test_invalid_claims_are_refused(kw):
    with pytest.raises(ValueError):
        claim(**kw)


def test_lip_claim_has_no_epsilon():
    """A LIP claim carries no epsilon or DP delta: the keys are absent (issue 6), and it round-trips."""
    c = claim(definition="lip", epsilon=None, delta=None, events=())
    data = c.to_dict()
    assert "epsilon" not in data and "delta" not in data
    assert PrivacyClaim.from_dict(data) == c


@pytest.mark.parametrize("args", [("exp", 1, 1), ("gaussian", 0, 1), ("laplace", 1, 0), ("laplace", 1, 1, 0)])
def test_invalid_events(args):
    with pytest.raises(ValueError):
        MechanismEvent(*args)

import pytest

from tsdp.mechanisms.continual import StreamSetting

BASE = dict(horizon=365, epsilon=1.0, delta=1e-6, unit="event", w=None, max_per_step=1.0, max_steps=None,
            min_separation=None, series_per_user=1, n_series=1, outputs=("cumulative",), strategy="independent",
            sampler="float", band=None)


def setting(**changes) -> StreamSetting:
    return StreamSetting(**{**BASE, **changes})


@pytest.fixture
def make_setting():
    return setting

"""Each command builds its API options dataclass from its parsed parameters (tsdp.cli.options):
every field must be a parameter of the command, or the command would silently drop that option."""

import inspect
from dataclasses import fields

import pytest

from tsdp.api.flip import FlipOptions
from tsdp.api.forecast import ForecastOptions
from tsdp.api.means import MeanOptions
from tsdp.cli.flip import flip
from tsdp.cli.forecast import forecast_train
from tsdp.cli.mean import mean_estimate
from tsdp.cli.options import options_from

# fields the command computes from a parameter of another name
GIVEN = {MeanOptions: {"clip"}}  # --no-clip


@pytest.mark.parametrize("cls,command", [(FlipOptions, flip), (ForecastOptions, forecast_train),
                                         (MeanOptions, mean_estimate)], ids=["flip", "forecast-train", "mean"])
def test_every_option_field_is_a_command_parameter(cls, command):
    parameters = set(inspect.signature(command).parameters)
    missing = {f.name for f in fields(cls)} - parameters - GIVEN.get(cls, set())
    assert not missing, f"{cls.__name__} fields without a command-line parameter: {sorted(missing)}"


def test_options_from_takes_the_fields_and_enum_values():
    from enum import Enum

    class Spectral(str, Enum):
        flattop = "flattop"

    options = options_from(FlipOptions, {"value_cols": "a", "spectral": Spectral.flattop, "seed": 3, "json": True},
                           lip_delta=0.2)
    assert options == FlipOptions(value_cols="a", spectral="flattop", lip_delta=0.2)

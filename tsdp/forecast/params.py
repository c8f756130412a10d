"""What the numpy and the JAX forecasting models share: one flat parameter vector split into named
tensors, and the checks of the constructor options every model takes.

``theta`` is a flat float64 vector; ``layout`` lists ``(name, shape)`` of its tensors in order (what
:mod:`tsdp.forecast.persist` saves). :class:`FlatParameters` is the mixin of
:class:`tsdp.forecast.models.ForecastModel` and :class:`tsdp.forecast.deep.base.DeepForecastModel`.
"""

from __future__ import annotations

import math

import numpy as np

from tsdp.errors import UsageError


def param_slices(layout: list[tuple[str, tuple[int, ...]]]) -> tuple[dict[str, tuple[slice, tuple[int, ...]]], int]:
    """Where each named parameter array lives in the flat parameter vector (θ), and its length."""
    slices: dict[str, tuple[slice, tuple[int, ...]]] = {}
    offset = 0
    for name, shape in layout:
        size = math.prod(shape)
        slices[name] = (slice(offset, offset + size), shape)
        offset += size
    return slices, offset


def positive_int(value, option: str) -> int:
    """``value`` as an int, or a UsageError naming ``option`` (bools and non-integers are refused)."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise UsageError(f"{option} must be a positive integer, got {value!r}")
    return int(value)


def positive_finite(value, option: str) -> float:
    """``value`` as a float, or a UsageError naming ``option`` unless it is positive and finite."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise UsageError(f"{option} must be a positive number, got {value!r}") from None
    if not (math.isfinite(number) and number > 0.0):
        raise UsageError(f"{option} must be a positive finite number, got {value!r}")
    return number


class FlatParameters:
    """Mixin: the named views of a flat parameter vector, and a ``repr`` from the model's ``config()``.

    The class calls :meth:`_set_layout` in its constructor and defines ``config()`` (a dict whose
    ``name`` entry is the model's name)."""

    layout: list[tuple[str, tuple[int, ...]]]
    n_params: int

    def _set_layout(self, layout) -> None:
        self.layout = [(n, tuple(s)) for n, s in layout]
        self._slices, self.n_params = param_slices(self.layout)

    def __repr__(self) -> str:
        opts = ", ".join(f"{k}={v!r}" for k, v in self.config().items() if k != "name")
        return f"{type(self).__name__}({opts}; n_params={self.n_params})"

    def unflatten(self, theta) -> dict[str, np.ndarray]:
        """Views of the flat parameter vector ``theta`` (length ``n_params``) shaped as in ``layout``."""
        theta = np.asarray(theta, dtype=np.float64)
        if theta.shape != (self.n_params,):
            raise ValueError(f"theta must have shape ({self.n_params},), got {theta.shape}")
        return {n: theta[sl].reshape(shape) for n, (sl, shape) in self._slices.items()}

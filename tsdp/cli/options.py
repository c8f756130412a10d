"""A command's options dataclass built from its parsed parameters, in one place.

Each option is spelled once as a Typer parameter and once as a field of the API's options
dataclass (:class:`tsdp.api.flip.FlipOptions`, :class:`tsdp.api.means.MeanOptions`, ...): the
command passes ``locals()`` and every parameter named like a field fills it (a Typer Enum as its
value), so that no option is forwarded by hand.
"""

from __future__ import annotations

from dataclasses import fields
from typing import Any, TypeVar

T = TypeVar("T")


def options_from(cls: type[T], parameters: dict[str, Any], **given: Any) -> T:
    """``cls`` built from the command's ``parameters`` (its fields found there, an Enum as its value);
    ``given`` sets the fields the command computes or renames."""
    names = {f.name for f in fields(cls)}  # type: ignore[arg-type]
    values = {k: getattr(v, "value", v) for k, v in parameters.items() if k in names}
    return cls(**{**values, **given})

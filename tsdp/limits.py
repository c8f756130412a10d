"""Numeric limits shared by every layer.

``MAX_MAGNITUDE`` bounds the values tsdp adds noise to, and the public bounds that scale that noise
(``--max-per-step``, ``--value-bound``, ``--upper``/``--lower``). Beyond 2**53 float64 no longer
holds every integer: the spacing between neighbouring floats exceeds 1, so noise of the usual scale
is rounded away in part or in whole (a released 1.7e308 is the input itself, published without
noise) and sums of such values overflow to infinity. Values and bounds are therefore refused above
it, with a hint to rescale (a count in thousands, an amount in millions).
"""

from __future__ import annotations

MAX_MAGNITUDE = float(2**53)  # 9007199254740992: the largest range where float64 holds every integer

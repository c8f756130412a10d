"""A stream's public definition (what its reports state and ``tsdp account verify`` recomputes from):
the setting, the grid, the declared series and layout, and the two figures the reports derive from it
through the core's own maps: the claim (:func:`stream_claim`, the privacy map) and the per-step
accuracy (:func:`accuracy_of`). The command (:mod:`tsdp.api.stream`) and the verify rule
(:mod:`tsdp.verify.stream`) both read them from here."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any

import numpy as np

from tsdp.mechanisms.continual.accuracy import accuracy
from tsdp.mechanisms.continual.privacy import privacy_map
from tsdp.mechanisms.continual.setting import StreamSetting


@dataclass
class Definition:
    """Every public parameter of a stream (what its reports state and verify recomputes from)."""

    stream_id: str
    setting: Any  # tsdp.mechanisms.continual.StreamSetting
    start: str
    freq: str
    series_keys: list[str]
    layout: dict[str, Any]
    alpha: float

    def to_dict(self) -> dict[str, Any]:
        return {"stream_id": self.stream_id, "setting": self.setting.to_dict(), "start": self.start,
                "freq": self.freq, "series_keys": list(self.series_keys), "layout": dict(self.layout),
                "alpha": self.alpha}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "Definition":
        setting = StreamSetting.from_dict(data["setting"])
        return cls(data["stream_id"], setting, data["start"], data["freq"], list(data["series_keys"]),
                   dict(data["layout"]), float(data["alpha"]))

    def digest(self) -> str:
        """sha256 of the canonical JSON of the definition: binds the stream's reports together."""
        return definition_digest(self.to_dict())


def definition_digest(definition: dict[str, Any]) -> str:
    text = json.dumps(definition, sort_keys=True, separators=(",", ":"), allow_nan=False)
    return hashlib.sha256(text.encode()).hexdigest()


def accuracy_of(setting, alpha: float) -> dict[str, np.ndarray]:
    """Per output, the exact s.d. of its noise at each step 1..T (public: sigma s(C) ||B_t||)."""
    raw = accuracy(setting, alpha)
    out = {}
    for name in setting.outputs:
        value = raw[name]
        sd = value["sd"] if isinstance(value, dict) else value
        out[name] = np.asarray(sd, dtype=float)
    return out


def stream_claim(setting, layout: dict[str, Any]):
    """The stream's PrivacyClaim: the core's privacy map (the same map verify calls)."""
    privacy = privacy_map(setting)
    claim = getattr(privacy, "claim", None)
    if callable(claim):
        claim = claim(id_column=layout.get("user_col"), enforced=layout.get("layout") == "events")
    return claim

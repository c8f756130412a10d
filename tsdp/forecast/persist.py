"""Saving and loading trained forecasting models: weights as ``.npz`` plus a JSON metadata file.

The JSON (``"format": "tsdp-forecast-model/1"``) holds the model's configuration (enough to rebuild
it with :func:`tsdp.forecast.models.model_from_config`), the parameter layout, the sha256 of the
weights file and free-form metadata (training settings, the privacy claim). The ``.npz`` holds the
flat parameter vector ``theta`` and, for inspection, every tensor under its layout name.
"""

from __future__ import annotations

import hashlib
import io
import json
from pathlib import Path
from typing import Any

import numpy as np

from tsdp.errors import DataError
from tsdp.jsonfile import read_json

FORMAT = "tsdp-forecast-model/1"


def weights_bytes(model, theta: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    tensors = {f"param/{name}": value for name, value in model.unflatten(theta).items()}
    np.savez(buffer, theta=theta, **tensors)
    return buffer.getvalue()


def metadata_bytes(model, weights: bytes, weights_name: str, extra: dict[str, Any]) -> bytes:
    data = {
        "format": FORMAT,
        "model": model.config(),
        "n_params": int(model.n_params),
        "layout": [[name, list(shape)] for name, shape in model.layout],
        "weights_file": weights_name,
        "weights_sha256": hashlib.sha256(weights).hexdigest(),
        **extra,
    }
    return (json.dumps(data, indent=2, allow_nan=False, default=str) + "\n").encode()


def load_model(metadata_path: str | Path):
    """(model, theta, metadata) from a metadata JSON and the weights file it names (same folder)."""
    from tsdp.forecast.models import model_from_config

    path = Path(metadata_path)
    meta = read_json(path, "model metadata")
    if meta.get("format") != FORMAT:
        raise DataError(f"{str(path)!r} is not a {FORMAT} file")
    weights_path = path.parent / meta["weights_file"]
    raw = weights_path.read_bytes()
    if hashlib.sha256(raw).hexdigest() != meta["weights_sha256"]:
        raise DataError(f"{str(weights_path)!r} does not match the sha256 recorded in {str(path)!r}")
    with np.load(io.BytesIO(raw)) as archive:
        theta = archive["theta"].copy()
    model = model_from_config(meta["model"])
    if theta.shape != (model.n_params,):
        raise DataError(f"{str(weights_path)!r} holds {theta.size} parameters; the model needs {model.n_params}")
    return model, theta, meta

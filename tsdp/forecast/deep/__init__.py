"""DeepAR and iTransformer in JAX, behind the optional extra ``tsdp[deep]`` (jax, optax, jax-privacy >= 2).

The models plug into the numpy models' trainer contract (:mod:`tsdp.forecast.deep.base`): tsdp's
window samplers draw the batches, tsdp's structured-subsampling accountant charges them, and the noise
comes from :mod:`tsdp.mechanisms.noise` on the host, never from ``jax.random``. This package imports
JAX only when a model is built, so tsdp works without the extra; asking for a deep model without it
is a usage error naming the extra.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util

from tsdp.errors import UsageError
from tsdp.forecast.deep.heads import COUNT_DISTRIBUTIONS, DISTRIBUTIONS  # noqa: F401  (DeepAR's output heads)

DEEP_MODELS = ("deepar", "itransformer")
EXTRA = "tsdp[deep]"
_REQUIRED = (("jax", "jax", None), ("optax", "optax", None), ("jax_privacy", "jax-privacy", 2))


def missing_extra() -> str | None:
    """Why the extra is unusable (a sentence), or None when jax, optax and jax-privacy >= 2 import."""
    for module, dist, major in _REQUIRED:
        if importlib.util.find_spec(module) is None:
            return f"{dist} is not installed"
        if major is not None:
            try:
                version = importlib.metadata.version(dist)
            except importlib.metadata.PackageNotFoundError:
                continue
            if int(version.split(".")[0]) < major:
                return f"{dist} {version} is installed, {major} or newer is needed"
    return None


def require(name: str) -> None:
    """UsageError naming the extra when ``--model name`` cannot run here."""
    reason = missing_extra()
    if reason:
        raise UsageError(f"--model {name} needs the optional extra {EXTRA} ({reason}); install it with "
                         f"pip install '{EXTRA}'")


def make_deep_model(name: str, context: int, horizon: int, **options):
    """Build ``deepar`` or ``itransformer`` (see their modules for the options)."""
    require(name)
    common = {"min_scale", "dtype", "num_samples", "device", "nonnegative"}
    allowed = common | ({"lags", "hidden", "layers", "time_features", "distribution"} if name == "deepar"
                        else {"d_model", "heads", "feedforward", "layers"})
    unknown = sorted(set(options) - allowed)
    if name in DEEP_MODELS and unknown:
        raise UsageError(f"model {name!r} has no option {unknown[0]!r}; its options are {', '.join(sorted(allowed))}")
    if name == "deepar":
        from tsdp.forecast.deep.deepar import DeepARModel

        return DeepARModel(context, horizon, **options)
    if name == "itransformer":
        from tsdp.forecast.deep.itransformer import ITransformerModel

        return ITransformerModel(context, horizon, **options)
    raise UsageError(f"unknown deep model {name!r}; choose one of {', '.join(DEEP_MODELS)}")

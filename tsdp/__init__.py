"""tsdp: differentially private release of time series.

``tsdp.release(frame, ...)``, ``tsdp.mean_estimate(frame, ...)``, ``tsdp.flip_filter(frame, ...)``,
``tsdp.forecast_train(frame, ...)``, ``tsdp.account.dpsgd(...)`` and ``tsdp.stream.init/append/status(...)``
are the Python API (:mod:`tsdp.api`); they load on first use, so that ``import tsdp`` (and the command
line's start) stays free of numerical libraries.
"""
__version__ = "0.1.0"

_API = {"release": ("tsdp.api.series", "release"), "mean_estimate": ("tsdp.api.means", "mean_estimate"),
        "flip_filter": ("tsdp.api.flip", "flip_filter"), "forecast_train": ("tsdp.api.forecast", "forecast_train"),
        "account": ("tsdp.api.accounting", None), "stream": ("tsdp.api.stream", None),
        "Result": ("tsdp.api.result", "Result")}
__all__ = ["__version__", *_API]


def __getattr__(name: str):
    if name in _API:
        import importlib

        module, attribute = _API[name]
        value = importlib.import_module(module)
        return value if attribute is None else getattr(value, attribute)
    raise AttributeError(f"module 'tsdp' has no attribute {name!r}")

"""The documented Python API of tsdp, for notebooks and scripts: frames in, (frame, report) out.

* :func:`tsdp.release` (:func:`tsdp.api.series.release`): private release of series or raw events;
* :func:`tsdp.mean_estimate` (:func:`tsdp.api.means.mean_estimate`): user-level private means;
* :func:`tsdp.flip_filter` (:func:`tsdp.api.flip.flip_filter`): FLIP all-pass filtering (LIP, not DP);
* :func:`tsdp.forecast_train` (:func:`tsdp.api.forecast.forecast_train`): DP-SGD forecasting models;
* :mod:`tsdp.account` (:mod:`tsdp.api.accounting`): ``dpsgd``, ``calibrate_dpsgd``, ``compose``, ``verify``.

Every option is a keyword argument named as on the command line (``--max-steps`` is
``max_steps``); polars and pandas frames are accepted and the released frame comes back in the
same library. The command line runs the same pipeline, so the same options and ``seed`` give the
same release. Errors are :class:`tsdp.errors.TsdpError` subclasses (``UsageError`` for options,
``DataError`` for data, ``BudgetError`` for budgets), never ``SystemExit``.
"""

# Loaded on first use: the command line imports single modules of this package (tsdp account
# verify must not pay for numpy through tsdp.api.means).
_NAMES = {"release": ("tsdp.api.series", "release"), "mean_estimate": ("tsdp.api.means", "mean_estimate"),
          "flip_filter": ("tsdp.api.flip", "flip_filter"), "forecast_train": ("tsdp.api.forecast", "forecast_train"),
          "Result": ("tsdp.api.result", "Result"), "accounting": ("tsdp.api.accounting", None)}
__all__ = list(_NAMES)


def __getattr__(name: str):
    if name in _NAMES:
        import importlib

        module, attribute = _NAMES[name]
        value = importlib.import_module(module)
        return value if attribute is None else getattr(value, attribute)
    raise AttributeError(f"module 'tsdp.api' has no attribute {name!r}")

"""Identifier columns (user, series, entity ids): a NaN is not an id.

Polars groups every NaN with every other NaN, so NaN user ids would merge unrelated records into
one "user" (whose contribution bounds then cut the wrong rows) and NaN series ids would merge
series. A float NaN, and the text ``NaN``/``nan`` that tools write for it, are refused with the
column and the input row. Missing ids (nulls) are checked by the loaders, with their own hints.
"""

from __future__ import annotations

import polars as pl

from tsdp.errors import DataError

NAN_TEXTS = ("NaN", "nan", "NAN")


def reject_nan_ids(ids: pl.Series, column: str, what: str = "user id", distinct: pl.Series | None = None) -> None:
    """DataError naming ``column`` and the first row whose ``what`` is NaN. ``distinct``: the
    distinct values of ``ids`` when the caller has them already (text ids are checked on them)."""
    if ids.dtype.is_float():
        bad = ids.is_nan()
    elif ids.dtype == pl.String:
        if not (ids.unique() if distinct is None else distinct).str.strip_chars().is_in(list(NAN_TEXTS)).any():
            return  # the distinct ids are few: check them, and locate a bad row only if there is one
        bad = ids.str.strip_chars().is_in(list(NAN_TEXTS))
    else:
        return
    if bad.any():
        row = int(bad.fill_null(False).arg_true()[0])
        raise DataError(f"column {column!r}: {what} {ids[row]!r} at row {row + 1} is not a number, and every "
                        f"NaN would count as one and the same {what.split()[0]}; give each row a real {what} "
                        "or drop such rows")

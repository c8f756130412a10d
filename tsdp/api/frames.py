"""Frames in and out of the Python API: polars or pandas, returned in the library they came in.

tsdp computes on polars. A pandas frame is converted with its columns (and its index, when the
index is named or not a plain range: a DatetimeIndex named ``time`` becomes the ``time`` column),
and the released frame goes back to pandas. Anything else is a usage error naming the argument.
"""

from __future__ import annotations

from typing import Any

from tsdp.errors import DataError, UsageError


def to_polars(frame: Any, argument: str = "frame") -> tuple[Any, str]:
    """``(polars DataFrame, "polars" or "pandas")`` for a polars DataFrame/LazyFrame or a pandas DataFrame."""
    import polars as pl

    if isinstance(frame, pl.DataFrame):
        return frame, "polars"
    if isinstance(frame, pl.LazyFrame):
        return frame.collect(), "polars"
    if _is_pandas(frame):
        index = frame.index
        plain = index.name is None and type(index).__name__ == "RangeIndex"
        if not plain and index.name is None:
            raise UsageError(f"{argument}: the pandas frame has an unnamed {type(index).__name__}; name it "
                             "(frame.index.name = 'time') or reset it (frame.reset_index())")
        try:
            return pl.from_pandas(frame, include_index=not plain), "pandas"
        except (TypeError, ValueError, pl.exceptions.PolarsError) as exc:
            raise DataError(f"{argument}: the pandas frame cannot be read ({exc})") from None
    raise UsageError(f"{argument}: expected a polars or pandas DataFrame, got {type(frame).__name__}")


def from_polars(df: Any, kind: str) -> Any:
    """``df`` in the library the input came in."""
    return df.to_pandas() if kind == "pandas" else df


def _is_pandas(frame: Any) -> bool:
    return type(frame).__module__.startswith("pandas") and type(frame).__name__ == "DataFrame"

"""The shape of every line tsdp prints about a problem: one line, of bounded length.

Error and warning messages quote the offending value, and that value comes from the user's data or
command line: a 5 MB CSV field, a column name of 3,000 characters, a library message spanning ten
lines. :func:`one_line` makes any message fit a terminal and a log: line breaks become spaces, and
each quoted value or unbroken run longer than :data:`MAX_VALUE` characters keeps its start and end
around an ellipsis that says how much was left out; the whole line is capped at :data:`MAX_LINE`.
"""

from __future__ import annotations

import re

MAX_VALUE = 200  # characters kept of one echoed value
MAX_LINE = 2000  # characters kept of the whole message

# A quoted value ('...' or "...", as repr() writes it) or a run without spaces, longer than MAX_VALUE.
_BREAKS = re.compile(r"[ \t]*[\r\n\v\f]+[ \t]*")
_LONG = re.compile(r"""'[^'\n]{%d,}'|"[^"\n]{%d,}"|\S{%d,}""" % (MAX_VALUE, MAX_VALUE, MAX_VALUE + 1))


def shorten(value: str, keep: int = MAX_VALUE) -> str:
    """``value`` itself, or its first and last characters around ``...[N characters]...``."""
    if len(value) <= keep:
        return value
    head, tail = value[: keep * 3 // 4], value[-(keep // 4):]
    return f"{head}...[{len(value) - len(head) - len(tail):,} more characters]...{tail}"


def one_line(message: str) -> str:
    """``message`` on one line, each long echoed value shortened, at most about MAX_LINE long."""
    text = _BREAKS.sub(" ", str(message).strip())
    text = _LONG.sub(lambda m: shorten(m.group(0)), text)
    return shorten(text, MAX_LINE)

"""Per-group errors: the message starts with ``group <i>: `` and the index is exposed as
``group_index`` (and the message without the prefix as ``detail``) so that the CLI can name the
group by its keys instead."""

from __future__ import annotations

from tsdp.errors import DataError, UsageError


class _GroupError:
    group_index: int
    detail: str


class GroupUsageError(UsageError, _GroupError):
    """A per-group usage error (exit 2): e.g. --m-ub outside [m_min, m_max], eps-dependent infeasible."""

    def __init__(self, group_index: int, detail: str) -> None:
        self.group_index = int(group_index)
        self.detail = detail
        super().__init__(f"group {self.group_index}: {detail}")


class GroupDataError(DataError, _GroupError):
    """A per-group data error (exit 4): e.g. no records, K-bar (or K) = 0."""

    def __init__(self, group_index: int, detail: str) -> None:
        self.group_index = int(group_index)
        self.detail = detail
        super().__init__(f"group {self.group_index}: {detail}")

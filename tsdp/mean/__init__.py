"""User-level private mean estimation (Gupta, Rameshwar, Tandon, Chakraborty; SPCOM 2024,
arXiv:2401.15906): grouping, cap rules, private selection and the four algorithms.
See ``specs/mean.md``."""

from tsdp.mean.estimation import (
    ALGORITHMS,
    GROUPINGS,
    NEIGHBOURING,
    GroupEstimate,
    MeanSettings,
    claim_for,
    estimate_groups,
    estimate_prepared,
    participation_epsilon,
    prepare_from_runs,
    prepare_groups,
    release_prepared,
)
from tsdp.mean.errors import GroupDataError, GroupUsageError

__all__ = [
    "ALGORITHMS", "GROUPINGS", "NEIGHBOURING", "GroupEstimate", "MeanSettings", "claim_for",
    "estimate_groups", "estimate_prepared", "participation_epsilon", "prepare_from_runs", "prepare_groups", "release_prepared", "GroupDataError", "GroupUsageError",
]

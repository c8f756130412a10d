"""Red-team audit of Koga et al.'s paper accounting (brief rt_account, attack 3: every figure a
report claims must be an upper bound, to the last bit).

Corollary 2's failure term ``delta'(alpha) (e^{eps/alpha} - e^eps)`` must not exceed its share of
delta: tsdp solves ``alpha`` in logs, and before the fix the term computed from that alpha could
exceed the share by a few ulps; the filter-subsample release then clamped its claimed delta to
--delta (``min(delta, K delta_total)``), so the report claimed delta 1e-4 while its own
``parameters.privacy.delta_total`` said 1.0000000000000005e-4.
"""

from __future__ import annotations

import itertools
import json

import pytest

from tests.conftest import REPO_ROOT
from tsdp.accounting import timesubsampling as ts
from tsdp.cli.app import main

GRID = list(itertools.product((0.1, 0.25, 1.0, 3.0), (2.5e-5, 1e-7), (0.05, 0.1, 0.3), (0.001, 0.02),
                              (3.0, 40.0)))


def test_the_solved_failure_term_never_exceeds_its_share():
    over = []
    for epsilon, share, p, L, srank in GRID:
        sol = ts.solve_alpha(epsilon, share, p, L, srank, 2000)
        if sol.failure_term > share:
            over.append((epsilon, share, p, L, srank, sol.failure_term))
    assert not over, over[:3]


def test_paper_filter_total_is_within_delta():
    over = []
    for epsilon, share, p, L, srank in GRID:
        cal = ts.paper_filter(epsilon, 2 * share, 24, p, L, srank, 1.0, 0.5, 2000)
        if cal.delta_total > 2 * share:
            over.append((epsilon, share, p, L, srank, cal.delta_total))
    assert not over, over[:3]


def test_filter_subsample_paper_claims_at_least_its_own_delta_total(tmp_path):
    out = tmp_path / "fsp.parquet"
    assert main(["release", str(REPO_ROOT / "sample_data" / "traffic_hourly.parquet"), "--value-col", "count",
                 "--series-col", "sensor", "--epsilon", "0.5", "--delta", "1e-4", "--unit", "user", "--max-steps",
                 "180", "--series-per-user", "2", "--mechanism", "filter-subsample", "--accounting", "paper",
                 "-o", str(out), "--quiet"]) == 0
    claim = json.loads((tmp_path / "fsp.report.json").read_text())["claim"]
    privacy = claim["parameters"]["privacy"]
    assert privacy["delta_failure_term"] <= privacy["delta_fail_budget"]
    assert claim["delta"] >= privacy["delta_total"]

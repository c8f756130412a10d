"""Red-team audit of ``tsdp mean-estimate`` (Gupta et al. 2024; specs/mean.md, specs/audit.md).

The claim: each group's estimate is pure user-level epsilon-DP when one user's values are replaced
(the user set and per-user counts public). The neighbours below are record tables that differ in
one user's values only, built for the worst case of each algorithm and loaded through
``tsdp.io.records.load_records`` (the route of the command line, ``--value-out-of-range clip``:
the replacing values lie far outside the public bounds and are clipped record by record):

* a heavy user (more records than the cap m_UB, the largest count) whose values go from the lower
  to the upper bound: it fills its own array, so BASELINE's and ARRAY-AVERAGING (BESTFIT)'s
  statistic moves by exactly the reported sensitivity;
* a user split by WRAPAROUND across two arrays, both of whose means cross the clipping interval:
  the clipped average of LEVY/QUANTILE moves by 2 (b - a) / K, the reported sensitivity.

Each audit draws N releases per side through :func:`tsdp.mean.algorithms.release` (the randomised
part ``tsdp mean-estimate`` runs, hardened sampler by default) on the group tiled N times
(``Prepared.repeat``: each copy an independent release), takes the released estimate as the
attacker's statistic and asserts that the Clopper-Pearson LOWER bound on epsilon stays below the
claim. Where the claim is attained the bound must also reach most of it, so that an audit that
lost its power fails too.
"""

from __future__ import annotations

from datetime import datetime, timedelta

import numpy as np
import polars as pl
import pytest

from tsdp.accounting.audit import epsilon_lower_bound
from tsdp.io.records import RecordSpec, load_records
from tsdp.mean import MeanSettings, claim_for, prepare_groups
from tsdp.mean.algorithms import release

U, EPS = 100.0, 1.0
N = 20_000  # releases per side
START = datetime(2024, 3, 4, 9)
SPEC = RecordSpec(user_col="user", value_col="v", lower=0.0, upper=U, time_col="ts", out_of_range="clip")


def frame(users: dict[str, list[float]]) -> pl.DataFrame:
    """One row per record; a user's records one minute apart, users interleaved in the input."""
    rows = [(u, START + timedelta(minutes=j), float(v)) for u, vals in users.items() for j, v in enumerate(vals)]
    rows.sort(key=lambda r: (r[1], r[0]))
    return pl.DataFrame(rows, schema={"user": pl.String, "ts": pl.Datetime("us"), "v": pl.Float64}, orient="row")


def heavy_neighbours() -> tuple[pl.DataFrame, pl.DataFrame]:
    """40 users with 3-9 records of values in [20, 80], and a heavy user 'zz' with 20 records (the
    largest count) at 0 under D and at 10 U (clipped to U) under D'."""
    rng = np.random.default_rng(5)
    users = {f"u{i:02d}": rng.uniform(20, 80, int(rng.integers(3, 10))).tolist() for i in range(40)}
    return frame({**users, "zz": [0.0] * 20}), frame({**users, "zz": [10 * U] * 20})


def split_neighbours() -> tuple[pl.DataFrame, pl.DataFrame]:
    """WRAPAROUND with --m-ub 10: five users of 10 records fill arrays 0-4, 'a' (9 records) starts
    array 5, so the target 't' (8 records, the next in count order) is split 1 / 7 over arrays 5
    and 6; 20 users of 3 records follow. Every value is 30 but the target's: 0 under D, 10 U
    (clipped to U) under D'. With the interval [30, 35], array 5's mean goes 27 -> 37 and array
    6's 9 -> 79: both cross the interval, so the clipped average moves by 2 (b - a) / K."""
    users = {**{f"h{i}": [30.0] * 10 for i in range(5)}, "a": [30.0] * 9,
             **{f"s{i:02d}": [30.0] * 3 for i in range(20)}}
    return frame({**users, "t": [0.0] * 8}), frame({**users, "t": [10 * U] * 8})


def prepared(df: pl.DataFrame, settings: MeanSettings):
    r = load_records(df, SPEC)
    assert r.n_groups == 1
    return prepare_groups(r.values, r.user_starts, r.group_starts, settings)


def draws(df_d, df_dp, settings: MeanSettings, seed: int, interval=None, scale_factor: float = 1.0):
    """N released estimates per side; the group's reported sensitivity under D and D'."""
    out, sens = [], []
    for df, s in ((df_d, seed), (df_dp, seed + 1)):
        prep = prepared(df, settings)
        rel = release(prep.repeat(N), np.random.default_rng(s), epsilon=settings.epsilon * scale_factor,
                      lower=settings.lower, upper=settings.upper, interval=interval)
        out.append(rel.estimate)
        sens.append(rel)
    return out, sens


def test_the_neighbours_differ_in_one_users_values_only():
    """Same users, same counts, same public structure (caps, arrays): a neighbour under the claim's
    relation; the out-of-range replacement is clipped to the upper bound record by record."""
    for make, settings in ((heavy_neighbours, MeanSettings(EPS, U, algorithm="array-averaging")),
                           (split_neighbours, MeanSettings(EPS, U, algorithm="levy", grouping="wraparound", m_ub=10))):
        df_d, df_dp = make()
        a, b = load_records(df_d, SPEC), load_records(df_dp, SPEC)
        assert np.array_equal(a.user_starts, b.user_starts) and np.array_equal(a.group_starts, b.group_starts)
        changed = a.values != b.values
        assert set(a.values[changed]) == {0.0} and set(b.values[changed]) == {U}
        users = a.run_users.to_list()
        assert {users[i] for i in np.searchsorted(a.user_starts, np.flatnonzero(changed), side="right") - 1} \
            <= {"zz", "t"}
        pa, pb = prepared(df_d, settings), prepared(df_dp, settings)
        for key in ("m_ub", "num_arrays", "k_wraparound", "records_used", "arr_starts"):
            assert np.array_equal(getattr(pa, key), getattr(pb, key))


@pytest.mark.parametrize("algorithm", ["baseline", "array-averaging"])
def test_heavy_user_moves_the_statistic_by_exactly_the_sensitivity_and_the_audit_holds(algorithm):
    """BASELINE (Delta = U m_max / sum m) and ARRAY-AVERAGING with BESTFIT (Delta = U / K-bar): the
    heavy user attains the sensitivity, so the Laplace step's claim is tight; the audit must stay
    below epsilon and see most of it (seeds 1-4: 0.93-0.97 both). Mutation caught: halving
    ``sens`` in :func:`tsdp.mean.algorithms.release` gives eps_lo ~ 1.9 > 1."""
    settings = MeanSettings(EPS, U, algorithm=algorithm)
    (d, dp), (rel_d, rel_dp) = draws(*heavy_neighbours(), settings, seed=1)
    bound = epsilon_lower_bound(d, dp)
    assert bound.eps_lower <= EPS, bound.describe()
    assert bound.eps_lower > 0.8, bound.describe()
    assert np.array_equal(rel_d.sensitivity, rel_dp.sensitivity)
    moved = abs(rel_d.statistic[0] - rel_dp.statistic[0])
    assert moved == pytest.approx(rel_d.sensitivity[0], rel=1e-12)


@pytest.mark.parametrize("algorithm", ["levy", "quantile"])
@pytest.mark.parametrize("grouping", ["bestfit", "wraparound"])
def test_whole_release_of_levy_and_quantile_stays_below_epsilon(algorithm, grouping):
    """The whole randomised part (private interval at eps/2, clipped average + Laplace at eps/2) on
    the heavy-user neighbours, hardened sampler: eps_lo <= epsilon (seeds 3-5: 0.43-0.49 BESTFIT,
    0.14-0.25 WRAPAROUND: a heavy user fills one array and does not attain WRAPAROUND's 2 (b - a) / K,
    see the split-user test). Mutation caught: the Laplace step's ``eps_mean`` epsilon / 2 written
    epsilon * 2 (a quarter of the noise) gives eps_lo 1.3-2.0 > 1 with BESTFIT (and fails the
    split-user test for WRAPAROUND)."""
    settings = MeanSettings(EPS, U, algorithm=algorithm, grouping=grouping)
    (d, dp), _ = draws(*heavy_neighbours(), settings, seed=3)
    bound = epsilon_lower_bound(d, dp)
    assert bound.eps_lower <= EPS, bound.describe()


@pytest.mark.parametrize("algorithm", ["levy", "quantile"])
def test_wraparound_split_user_needs_and_gets_twice_the_laplace_sensitivity(algorithm):
    """WRAPAROUND, interval forced to [30, 35] (the Laplace step alone, eps/2): the split user moves
    the clipped average by 2 (b - a) / K = the reported sensitivity, so the step's eps/2 is attained
    (seeds 7-10: 0.45-0.49). Mutation caught: Delta_s = 1 for WRAPAROUND in the Laplace step gives
    eps_lo ~ 0.9 > eps/2."""
    settings = MeanSettings(EPS, U, algorithm=algorithm, grouping="wraparound", m_ub=10)
    (d, dp), (rel_d, rel_dp) = draws(*split_neighbours(), settings, seed=7, interval=(30.0, 35.0))
    bound = epsilon_lower_bound(d, dp)
    assert bound.eps_lower <= EPS / 2, bound.describe()
    assert bound.eps_lower > 0.35, bound.describe()
    k = prepared(split_neighbours()[0], settings).num_arrays[0]
    assert rel_d.sensitivity[0] == rel_dp.sensitivity[0] == pytest.approx(2 * 5.0 / k)
    assert abs(rel_d.statistic[0] - rel_dp.statistic[0]) == pytest.approx(2 * 5.0 / k, rel=1e-12)


def test_wraparound_array_average_moves_by_at_most_u_over_k_and_the_audit_agrees():
    """ARRAY-AVERAGING, WRAPAROUND: tsdp claims U/K (the paper 2U/K). The split user 't' (8 of the
    m_UB = 10 places of arrays 5 and 6) moves the average by U 8 / (10 K) <= U/K; the audit of the
    whole release on these neighbours stays below epsilon (seeds 11-17: 0.72-0.79 at N = 20,000), and
    noise for half the sensitivity (the mutation U/(2K)) is refuted (1.6). A user with m_UB records
    (here one whole array: users come in count order, so only users with fewer can be split) moves
    it by U/K exactly: the bound is attained."""
    settings = MeanSettings(EPS, U, algorithm="array-averaging", grouping="wraparound", m_ub=10)
    k = prepared(split_neighbours()[0], settings).num_arrays[0]
    (d, dp), (rel_d, rel_dp) = draws(*split_neighbours(), settings, seed=11)
    assert rel_d.sensitivity[0] == pytest.approx(U / k, rel=1e-9)
    assert abs(rel_d.statistic[0] - rel_dp.statistic[0]) == pytest.approx(U * 8 / (10 * k), rel=1e-12)
    bound = epsilon_lower_bound(d, dp)
    assert bound.eps_lower <= EPS, bound.describe()
    (d, dp), _ = draws(*split_neighbours(), settings, seed=13, scale_factor=2.0)
    assert epsilon_lower_bound(d, dp).refutes(EPS)
    # a full user (10 records): the bound is attained
    users = {**{f"h{i}": [30.0] * 10 for i in range(5)}, "a": [30.0] * 9, "b": [30.0] * 10,
             **{f"s{i:02d}": [30.0] * 3 for i in range(20)}}
    full_d, full_dp = frame({**users, "t": [0.0] * 10}), frame({**users, "t": [10 * U] * 10})
    pd_, pdp = prepared(full_d, settings), prepared(full_dp, settings)
    moved = abs(pd_.array_means.sum() - pdp.array_means.sum()) / pd_.num_arrays[0]
    assert moved == pytest.approx(U / pd_.num_arrays[0], rel=1e-12)


def test_negative_control_noise_for_twice_epsilon_is_refuted():
    """The audit can fail: ARRAY-AVERAGING released with the noise of 2 epsilon but claimed at
    epsilon is refuted on the heavy-user neighbours."""
    settings = MeanSettings(EPS, U, algorithm="array-averaging")
    (d, dp), _ = draws(*heavy_neighbours(), settings, seed=5, scale_factor=2.0)
    bound = epsilon_lower_bound(d, dp)
    assert bound.refutes(claim_for(settings, 1, "user").epsilon), bound.describe()


def test_a_user_in_several_groups_costs_epsilon_per_group_it_is_in():
    """--group-by cell, the heavy user in 3 of 4 cells, its values at 0 (D) or 10 U (D') in all of
    them. The joint release of the 4 estimates (statistic: the sum of the groups' exact Laplace
    log-likelihood ratios) is refuted at the per-group epsilon (a report that claimed epsilon for
    the whole release would be wrong: seeds 51, 53, 55, 57 give eps_lo 2.63-2.74), and stays below both
    the report's data-independent epsilon x 4 groups and the custodian's epsilon x 3 (the user's
    groups: valid when participation is public, as here). Mutation caught: ``claim_for`` claiming
    epsilon instead of epsilon x n_groups."""
    from tsdp.accounting.audit import laplace_llr
    from tsdp.mean import participation_epsilon

    rng = np.random.default_rng(9)
    rows_d, rows_dp = [], []
    for c, cell in enumerate("wxyz"):
        others = {f"u{c}{i:02d}": rng.uniform(20, 80, int(rng.integers(3, 10))).tolist() for i in range(30)}
        heavy = {} if cell == "z" else {"zz": [0.0] * 20}
        moved = {} if cell == "z" else {"zz": [10 * U] * 20}
        rows_d.append(frame({**others, **heavy}).with_columns(pl.lit(cell).alias("cell")))
        rows_dp.append(frame({**others, **moved}).with_columns(pl.lit(cell).alias("cell")))
    spec = RecordSpec(user_col="user", value_col="v", lower=0.0, upper=U, time_col="ts", out_of_range="clip",
                      group_by=("cell",))
    settings = MeanSettings(EPS, U, algorithm="array-averaging")
    rels, stats = [], []
    for rows, seed in ((rows_d, 51), (rows_dp, 52)):
        r = load_records(pl.concat(rows), spec)
        assert r.n_groups == 4 and r.max_groups_per_user == 3
        prep = prepare_groups(r.values, r.user_starts, r.group_starts, settings)
        rel = release(prep.repeat(N), np.random.default_rng(seed), epsilon=EPS, lower=0.0, upper=U)
        rels.append(rel)
    stat_d, stat_dp = rels[0].statistic[:4], rels[1].statistic[:4]
    scale = rels[0].laplace_scale[:4]
    assert np.array_equal(scale, rels[1].laplace_scale[:4])
    assert stat_d[3] == stat_dp[3]  # the cell without the user
    for rel in rels:
        stats.append(laplace_llr(rel.estimate.reshape(N, 4), stat_d, stat_dp, scale))
    bound = epsilon_lower_bound(*stats)
    claim = claim_for(settings, 4, "user")
    custodian = participation_epsilon(settings, 3)["epsilon_total_if_participation_public"]
    assert (claim.epsilon, custodian) == (4 * EPS, 3 * EPS)
    assert bound.eps_lower <= min(claim.epsilon, custodian), bound.describe()
    assert bound.refutes(EPS), bound.describe()


# ---------------------------------------------------------------------------------------------
# floating point: public bounds far from zero
# ---------------------------------------------------------------------------------------------

# Every sum of the estimators is taken at the magnitude of the values, so when the public range is
# narrow and far from zero the rounding of the sums, not the data, can move the statistic by more than
# its sensitivity. A seeded search over tables of one record per user found the computed (lattice-
# rounded) statistic moving by up to 2.4-3.9 x the rounded step for |lower| / (upper - lower) around
# 1e12-1e13 with 1000-5000 users, none below 1 x at 1e9 (lower 1e9, width 1, 5000 users). The case
# below is the smallest: 31 integers, all exactly representable.
OFFSET = 2.0 ** 52  # --lower: within the accepted +-2**53, where every integer value is exact
# 31 users of one record each (integers in [OFFSET, OFFSET + 8]); the neighbour replaces user 24's
# value 3 by the upper bound 8 (found by a seeded search over such tables)
OFFSET_VALUES = [1, 1, 7, 4, 5, 5, 6, 0, 4, 1, 3, 8, 4, 0, 4, 1, 6, 8, 8, 5, 7, 3, 1, 4, 3, 5, 8, 2, 7, 1, 3]
OFFSET_USER = 24


def offset_neighbours():
    a = list(OFFSET_VALUES)
    b = a.copy()
    b[OFFSET_USER] = 8
    make = lambda vals: frame({f"u{i:02d}": [OFFSET + v] for i, v in enumerate(vals)})  # noqa: E731
    return make(a), make(b)


def offset_spec() -> RecordSpec:
    return RecordSpec(user_col="user", value_col="v", lower=OFFSET, upper=OFFSET + 8, time_col="ts")


def _offset_prepared(df, settings):
    r = load_records(df, offset_spec())
    return prepare_groups(r.values, r.user_starts, r.group_starts, settings)


def _offset_settings_or_refused():
    """The settings, or None when tsdp refuses such bounds (a usage error is an acceptable fix)."""
    from tsdp import mean_estimate
    from tsdp.errors import UsageError

    try:
        mean_estimate(offset_neighbours()[0], user_col="user", value_col="v", lower=OFFSET, upper=OFFSET + 8,
                      epsilon=EPS, time_col="ts", algorithm="array-averaging", seed=0)
    except UsageError:
        return None
    return MeanSettings(EPS, OFFSET + 8, lower=OFFSET, algorithm="array-averaging")


# Was a defect, fixed (mean.algorithms.float_error): the statistic is summed in float64 at the values'
# magnitude, so bounds far from zero let rounding move it by several sensitivities; the rounding error is
# now charged to the sensitivity, and refused (usage error naming --lower/--upper) when it would dominate.
def test_offset_bounds_keep_the_statistic_within_the_sensitivity():
    settings = _offset_settings_or_refused()
    if settings is None:
        return
    d, dp = offset_neighbours()
    rels = [release(_offset_prepared(df, settings), np.random.default_rng(0), epsilon=EPS, lower=OFFSET,
                    upper=OFFSET + 8) for df in (d, dp)]
    assert rels[0].sensitivity[0] == pytest.approx(8 / 31)
    moved = abs(rels[0].statistic[0] - rels[1].statistic[0])
    assert moved <= rels[0].sensitivity[0], (moved, rels[0].sensitivity[0])


# Was a defect, fixed (mean.algorithms.float_error): the statistic is summed in float64 at the values'
# magnitude, so bounds far from zero let rounding move it by several sensitivities; the rounding error is
# now charged to the sensitivity, and refused (usage error naming --lower/--upper) when it would dominate.
def test_offset_bounds_audit():
    settings = _offset_settings_or_refused()
    if settings is None:
        return
    out = [release(_offset_prepared(df, settings).repeat(N), np.random.default_rng(seed), epsilon=EPS, lower=OFFSET,
                   upper=OFFSET + 8).estimate for df, seed in zip(offset_neighbours(), (41, 42))]
    bound = epsilon_lower_bound(*out)
    assert bound.eps_lower <= EPS, bound.describe()


# ---------------------------------------------------------------------------------------------
# composing a mean-estimate report with a release about the same users
# ---------------------------------------------------------------------------------------------


# Was a defect, fixed (compose.check_composable tells relations apart by their words): mean-estimate
# names its relation user/substitute, as a release does, though it holds only with the users and their
# record counts public; compose stated one epsilon for the release's wider relation.
def test_compose_does_not_widen_the_mean_estimate_relation(tmp_path, tsdp_cli):
    """A composed guarantee must hold for the unit it states: either compose refuses (exit 3) to mix
    a values-only replacement with counts public and a full substitution, or its unit says that the
    counts are public."""
    rng = np.random.default_rng(0)
    n = 400
    pl.DataFrame({"bus_id": [f"b{int(i)}" for i in rng.integers(0, 40, n)],
                  "ts": [START + timedelta(minutes=int(m)) for m in rng.integers(0, 240, n)],
                  "cell": rng.choice(["a", "b"], n), "speed": rng.uniform(0, 65, n).round(1)},
                 ).write_csv(tmp_path / "rec.csv")
    rec = tmp_path / "rec.csv"
    mean = tsdp_cli("mean-estimate", rec, "--user-col", "bus_id", "--value-col", "speed", "--upper", "65",
                    "--epsilon", "1", "--time-col", "ts", "--algorithm", "array-averaging", "--participation", "public",
                    "-o", tmp_path / "mean.csv", "--quiet")
    rel = tsdp_cli("release", rec, "--layout", "events", "--user-col", "bus_id", "--time-col", "ts",
                   "--series-col", "cell", "--series-keys", "a,b", "--start", str(START),
                   "--end", str(START + timedelta(hours=4)), "--freq", "1h", "--unit", "user", "--max-steps", "4",
                   "--max-per-step", "2", "--neighbouring", "substitute", "--mechanism", "laplace",
                   "--epsilon", "1", "-o", tmp_path / "rel.csv", "--quiet")
    assert mean.code == 0 and rel.code == 0, (mean.err, rel.err)
    composed = tsdp_cli("account", "compose", tmp_path / "mean.report.json", tmp_path / "rel.report.json", "--json")
    if composed.code == 3:
        return
    import json

    unit = json.loads(composed.out)["unit"]
    assert "public" in json.dumps(unit), unit

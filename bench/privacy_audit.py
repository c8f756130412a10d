"""Empirical privacy audit: every release mechanism against worst-case neighbours (specs/audit.md).

For each mechanism and privacy unit the script builds two event tables D and D' that differ by
exactly one protected unit, the worst case the unit allows:

* ``event``: one event removed (substitution: moved to another cell);
* ``w-event``: one user's events inside one window of w buckets removed, the same user's events
  everywhere else kept (the scope where stream-wide caps break);
* ``user``: a user whose events exceed every cap (M per bucket, I buckets, K series) removed
  (substitution: replaced by the same pattern on disjoint buckets),

loads both through ``tsdp.engine.panel.load_panel``, the route ``tsdp release`` takes, and checks
the deterministic part first: the aggregated panels differ by at most the claimed L1 and L2
sensitivity (and, the neighbours being worst cases, by exactly that much). It then draws N seeded
releases per side in-process through the mechanism's core function, computes the exact
log-likelihood ratio of what an attacker sees (``tsdp.accounting.audit``) and runs the split-sample
threshold test. The table prints the claimed epsilon beside the empirical LOWER bound (a claim is
refuted when the lower bound exceeds it) and the wall time.

Statistics (each a function of the public release):

* gaussian, laplace: the release itself; exact LLR over the changed cells;
* subsample (exact accounting), filter-subsample (conditional): the public sampled steps J and the
  released values at J (= the noisy samples); exact LLR given J (J has the same law under D, D');
* dft: the noisy Fourier coefficients, recovered exactly by the orthonormal rfft of the release;
* fast: the noisy observations z at the sampling points (``trace``: they are a function of the
  release, z = prior + (posterior - prior)/gain); the sampling decisions read only earlier outputs,
  so the LLR of the transcript is the sum of the per-sample terms on changed cells.

Repetitions are drawn in batches. gaussian and laplace treat cells independently: a batch is one
call on a values array of shape (batch, S, T) with the real panel (the claim is checked identical
to the one of a single release). The other mechanisms release series independently: a batch
stacks copies of the one changed series as rows of one panel, only where one unit touches one
series (K = 1), and the calibrated noise is checked identical to that of the release of the real
panel (spec audit.md section 3).

Usage: python bench/privacy_audit.py [--n 1000000] [--seed 0] [--only gaussian,fast]   (make audit)
tests/audit/test_mechanism_audit.py runs the same cases with small N.
"""

import argparse
import math
import sys
import time
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta

import numpy as np
import polars as pl

from tsdp.accounting.audit import EpsilonLowerBound, epsilon_lower_bound, gaussian_llr, laplace_llr
from tsdp.accounting.claim import PrivacyClaim
from tsdp.accounting.sensitivity import ContributionBounds
from tsdp.engine.panel import load_panel
from tsdp.io.load import InputSpec
from tsdp.mechanisms.baseline import Panel
from tsdp.mechanisms.gaussian import release_gaussian
from tsdp.mechanisms.laplace import release_laplace
from tsdp.mechanisms.dft import kept_real_count, release_dft
from tsdp.mechanisms.fast import release_fast
from tsdp.mechanisms.filters import circular_filter
from tsdp.mechanisms.subsample import release_filter_subsample, release_subsample, resolve_kernel

START = datetime(2024, 1, 1)
TARGET = "target"  # the user whose unit differs between D and D'
BATCH_CELLS = 1 << 22  # cells released per call (bounds the memory of a batch)
FAMILY_CONFIDENCE = 0.95  # all rows' lower bounds hold together with this probability


# ---------------------------------------------------------------------------------------------
# worst-case neighbours through the loading and aggregation code of the CLI
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Case:
    """One privacy unit and the shape of the synthetic event tables.

    ``series_per_unit`` is K (``--series-per-user``), ``max_per_step`` M, ``max_steps`` I (user
    level), ``w`` the window (w-event level; the removed window starts at ``window_start``).
    """

    level: str
    relation: str = "add-remove"
    n_series: int = 3
    n_steps: int = 24
    max_per_step: int = 2
    max_steps: int = 3
    w: int = 3
    window_start: int = 0
    series_per_unit: int | None = 2
    background_users: int = 6

    @property
    def label(self) -> str:
        unit = {"event": "event", "w-event": f"w-event w={self.w}", "user": f"user I={self.max_steps}"}[self.level]
        if self.level != "event":
            unit += f" M={self.max_per_step} K={self.series_per_unit or self.n_series}"
        return unit + (" subst" if self.relation == "substitute" else "")

    @property
    def keys(self) -> list[str]:
        return [f"s{i}" for i in range(self.n_series)]

    def declared(self) -> ContributionBounds:
        """The bounds the data steward declares (``tsdp release --unit ... --max-per-step ...``)."""
        if self.level == "event":
            return ContributionBounds("event", 1.0, neighbouring=self.relation)
        return ContributionBounds(
            self.level, float(self.max_per_step),
            max_steps=self.max_steps if self.level == "user" else None,
            w=self.w if self.level == "w-event" else None,
            series_per_unit=self.series_per_unit, neighbouring=self.relation)

    def spec(self) -> InputSpec:
        """Event layout on a public hourly grid of ``n_steps`` buckets."""
        end = START + timedelta(hours=self.n_steps)
        return InputSpec(layout="events", time_col="time", series_col="series", user_col="user",
                         series_keys=self.keys, start=str(START), end=str(end), freq="1h")


@dataclass
class Neighbours:
    """Two aggregated panels that differ by one protected unit, and what the panel claims."""

    case: Case
    d: np.ndarray
    d_prime: np.ndarray
    panel: Panel
    l1: float
    l2: float
    claimed_l1: float
    claimed_l2: float
    notes: list[str] = field(default_factory=list)

    @property
    def changed(self) -> np.ndarray:
        """Boolean (S, T) mask of the cells in which the panels differ."""
        return self.d != self.d_prime

    @property
    def within_claim(self) -> bool:
        tol = 1e-9 * max(1.0, self.claimed_l1)
        return self.l1 <= self.claimed_l1 + tol and self.l2 <= self.claimed_l2 + tol

    @property
    def attains_claim(self) -> bool:
        """True when the neighbours are worst cases: the differences reach the claimed sensitivity."""
        return math.isclose(self.l1, self.claimed_l1, rel_tol=1e-12) and math.isclose(
            self.l2, self.claimed_l2, rel_tol=1e-12)

    def single_row(self) -> int:
        """The one series that differs (batched mechanisms need K = 1)."""
        rows = np.flatnonzero(self.changed.any(axis=1))
        if rows.size != 1:
            raise ValueError(f"the neighbours differ in {rows.size} series; stacking needs exactly one")
        return int(rows[0])


def _events(user: str, series: int, bucket: int, count: int, minute0: int) -> list[tuple]:
    """``count`` events of ``user`` in series ``series`` and hour ``bucket``, one minute apart."""
    return [(user, START + timedelta(hours=bucket, minutes=minute0 + e), f"s{series}") for e in range(count)]


def _background(case: Case, rng: np.random.Generator) -> list[tuple]:
    """Users with a few random events (they make the panel non-trivial; their caps are their own)."""
    rows = []
    for u in range(case.background_users):
        n = int(rng.integers(case.n_steps, 3 * case.n_steps))
        buckets = rng.integers(0, case.n_steps, n)
        series = rng.integers(0, case.n_series, n)
        minutes = rng.integers(0, 60, n)
        rows += [(f"b{u}", START + timedelta(hours=int(h), minutes=int(m)), f"s{int(s)}")
                 for h, s, m in zip(buckets, series, minutes)]
    return rows


def _over_cap(user: str, case: Case, buckets) -> list[tuple]:
    """A user who exceeds every cap in ``buckets``: one series more than K (appearing last within
    each bucket, so it is the one dropped) and M + 2 events per series and bucket."""
    k = case.series_per_unit or case.n_series
    rows = []
    for h in buckets:
        for s in range(min(k + 1, case.n_series)):
            rows += _events(user, s, h, case.max_per_step + 2, 1 + 10 * s)
    return rows


def neighbour_tables(case: Case, seed: int = 0) -> tuple[pl.DataFrame, pl.DataFrame]:
    """The event tables D and D' of the worst-case neighbours of ``case`` (see the module doc)."""
    base = _background(case, np.random.default_rng(seed))
    T, I, w0 = case.n_steps, case.max_steps, case.window_start
    if case.level == "event":
        d = base + _events(TARGET, 0, 0, 1, 30)
        d_prime = base + (_events(TARGET, 1, T - 1, 1, 30) if case.relation == "substitute" else [])
    elif case.level == "w-event":
        window = range(w0, w0 + case.w)
        everywhere = _over_cap(TARGET, case, range(T))
        if case.relation == "substitute":
            raise ValueError("w-event substitution is not among the audited cases (event and user are)")
        d = base + everywhere
        d_prime = base + [r for r in everywhere if (r[1] - START) // timedelta(hours=1) not in window]
    else:  # user: the earliest I buckets are kept, so I + 2 buckets exceed the participation cap
        d = base + _over_cap(TARGET, case, range(I + 2))
        d_prime = base + (_over_cap(TARGET, case, range(I, 2 * I + 2)) if case.relation == "substitute" else [])
    frame = lambda rows: pl.DataFrame(rows, schema=["user", "time", "series"], orient="row")  # noqa: E731
    return frame(d), frame(d_prime)


def neighbours(case: Case, seed: int = 0) -> Neighbours:
    """Load D and D' through :func:`tsdp.engine.panel.load_panel` and measure their difference."""
    df_d, df_dp = neighbour_tables(case, seed)
    loaded_d, panel, notes = load_panel(df_d, case.spec(), case.declared())
    loaded_dp, panel_dp, _ = load_panel(df_dp, case.spec(), case.declared())
    if panel != panel_dp:
        raise AssertionError(f"the two neighbours load as different panels: {panel} != {panel_dp}")
    d, d_prime = loaded_d.table.values_matrix(), loaded_dp.table.values_matrix()
    diff = d - d_prime
    S, T = d.shape
    return Neighbours(case, d, d_prime, panel, float(np.abs(diff).sum()), float(np.sqrt((diff * diff).sum())),
                      panel.bounds.l1(S, T), panel.bounds.l2(S, T), notes)


# ---------------------------------------------------------------------------------------------
# releases from each side and the attacker's statistic
# ---------------------------------------------------------------------------------------------


@dataclass
class Draws:
    """The claim of the release and the statistic under D and under D' (N each)."""

    claim: PrivacyClaim
    stat_d: np.ndarray
    stat_d_prime: np.ndarray


def _llr(x: np.ndarray, a: np.ndarray, b: np.ndarray, claim: PrivacyClaim) -> np.ndarray:
    """Exact LLR of additive noise whose sigma (Gaussian) or scale (Laplace) the claim states."""
    p = claim.parameters
    return gaussian_llr(x, a, b, p["sigma"]) if p["noise"] == "gaussian" else laplace_llr(x, a, b, p["scale"])


def _batches(n: int, cells: int):
    size = max(1, BATCH_CELLS // max(cells, 1))
    for start in range(0, n, size):
        yield min(size, n - start)


def _noise_parameters(claim: PrivacyClaim) -> tuple:
    """What the calibration decided: budget, noise scale, accounting events and the unit."""
    p = claim.parameters
    noise = p.get("sigma", p.get("scale"))
    return claim.definition, claim.epsilon, claim.delta, noise, claim.events, claim.unit


def _same_calibration(batched: PrivacyClaim, single: PrivacyClaim) -> None:
    """Raise unless a batched release has the noise and the claim of a single release."""
    if _noise_parameters(batched) != _noise_parameters(single):
        raise AssertionError(f"the batched release is calibrated differently from a single release: "
                             f"{_noise_parameters(batched)} != {_noise_parameters(single)}")


def draw_cellwise(nb: Neighbours, n: int, rng: np.random.Generator, mechanism: str,
                  epsilon: float, delta: float | None = None) -> Draws:
    """gaussian / laplace: N releases of the real panel per side (batches of shape (b, S, T))."""
    def release(values):
        if mechanism == "gaussian":
            return release_gaussian(values, nb.panel, epsilon, delta, rng)
        return release_laplace(values, nb.panel, epsilon, rng)

    single = release(nb.d)
    cells = nb.changed
    a, b = nb.d[cells], nb.d_prime[cells]
    stats = {}
    for side, x in (("d", nb.d), ("dp", nb.d_prime)):
        parts = []
        for size in _batches(n, x.size):
            rel = release(np.broadcast_to(x, (size,) + x.shape))
            _same_calibration(rel.claim, single.claim)
            y = rel.values.reshape(size, -1)[:, cells.ravel()]
            parts.append(_llr(y, a, b, rel.claim))
        stats[side] = np.concatenate(parts)
    return Draws(single.claim, stats["d"], stats["dp"])


def _stacked(nb: Neighbours, rows: int) -> Panel:
    """The panel of ``rows`` stacked copies of one series; K = 1 keeps the calibration unchanged."""
    if nb.panel.bounds.series_touched(rows) != 1:
        raise ValueError("stacking copies of a series is valid only when one unit touches one series")
    return replace(nb.panel, n_series=rows)


def _sample_mask(claim: PrivacyClaim, rows: int, n_steps: int) -> np.ndarray:
    """The public J of every row, from the release's ``indices`` (``emit_indices=True``)."""
    sampling = claim.parameters["subsampling"]
    counts = np.asarray(sampling["n_sampled"])
    flat = np.fromiter((j for row in sampling["indices"] for j in row), dtype=np.int64, count=int(counts.sum()))
    mask = np.zeros((rows, n_steps), dtype=bool)
    mask[np.repeat(np.arange(rows), counts), flat] = True
    return mask


def _conditional(claim) -> np.ndarray:
    """The conditional sensitivities the noise covers: rounded ones for the hardened sampler."""
    s = claim.parameters["sensitivity"]
    return np.asarray(s.get("rounded_l2_conditional", s["l2_conditional"]))


def draw_subsample(nb: Neighbours, n: int, rng: np.random.Generator, epsilon: float, delta: float,
                   p: float = 0.2, accounting: str = "exact", filtered: bool = False,
                   filter_sigma: float = 2.0) -> Draws:
    """subsample / filter-subsample: stacked copies of the changed series; exact LLR given J."""
    r = nb.single_row()
    T = nb.panel.n_steps

    def release(values, panel, emit=False):
        if filtered:
            return release_filter_subsample(values, panel, epsilon, delta, rng, p, "gaussian", accounting,
                                            filter_sigma=filter_sigma, emit_indices=emit)
        return release_subsample(values, panel, epsilon, delta, rng, p, accounting, emit_indices=emit)

    single = release(nb.d, nb.panel)
    a, b = nb.d[r], nb.d_prime[r]
    if filtered:
        h, _, _ = resolve_kernel("gaussian", T, filter_sigma)
        a, b = circular_filter(a[None], h)[0], circular_filter(b[None], h)[0]
        # sigma of a series is proportional to its conditional sensitivity s_J: same ratio everywhere
        ratio = np.asarray(single.claim.parameters["noise"]["sigma_per_series"]) / _conditional(single.claim)
    stats = {}
    for side, row in (("d", nb.d[r]), ("dp", nb.d_prime[r])):
        parts = []
        for size in _batches(n, T):
            rel = release(np.repeat(row[None], size, axis=0), _stacked(nb, size), emit=True)
            claim = rel.claim
            mask = _sample_mask(claim, size, T)
            z = np.where(mask, rel.values, np.nan)  # the released values at J are the noisy samples
            if filtered:
                sigma = np.asarray(claim.parameters["noise"]["sigma_per_series"])
                mine = sigma / _conditional(claim)
                if not np.allclose(mine, ratio[r], rtol=1e-12, atol=0):
                    raise AssertionError("the stacked filter-subsample release is calibrated differently")
                if (claim.epsilon, claim.delta) != (single.claim.epsilon, single.claim.delta):
                    raise AssertionError("the stacked filter-subsample release claims a different budget")
                parts.append(gaussian_llr(z, a, b, sigma[:, None]))
            else:
                _same_calibration(claim, single.claim)
                parts.append(gaussian_llr(z, a, b, claim.parameters["sigma"]))
        stats[side] = np.concatenate(parts)
    return Draws(single.claim, stats["d"], stats["dp"])


def draw_dft(nb: Neighbours, n: int, rng: np.random.Generator, epsilon: float, delta: float | None,
             k: int = 5, noise: str = "gaussian") -> Draws:
    """dft: stacked copies of the changed series; exact LLR of the noisy kept coefficients."""
    r = nb.single_row()
    T = nb.panel.n_steps
    single = release_dft(nb.d, nb.panel, epsilon, delta, rng, k, noise)

    def coefficients(x):
        spectrum = np.fft.rfft(x, axis=-1, norm="ortho")[..., :k]
        parts = np.stack([spectrum.real, spectrum.imag], axis=-1).reshape(*x.shape[:-1], 2 * k)
        return np.delete(parts, 1, axis=-1)  # the imaginary part of the DC term is 0 on both sides

    if kept_real_count(T, k) != 2 * k - 1:
        raise ValueError("keep k below the Nyquist term for the coefficient LLR")
    a, b = coefficients(nb.d[r]), coefficients(nb.d_prime[r])
    stats = {}
    for side, row in (("d", nb.d[r]), ("dp", nb.d_prime[r])):
        parts = []
        for size in _batches(n, T):
            rel = release_dft(np.repeat(row[None], size, axis=0), _stacked(nb, size), epsilon, delta, rng, k, noise)
            _same_calibration(rel.claim, single.claim)
            y = coefficients(rel.values)
            parts.append(_llr(y, a, b, rel.claim))
        stats[side] = np.concatenate(parts)
    return Draws(single.claim, stats["d"], stats["dp"])


def draw_fast(nb: Neighbours, n: int, rng: np.random.Generator, epsilon: float, delta: float | None = None,
              noise: str = "laplace", **options) -> Draws:
    """fast: stacked copies of the changed series; exact LLR of the transcript (noisy samples z)."""
    r = nb.single_row()
    T = nb.panel.n_steps
    single = release_fast(nb.d, nb.panel, epsilon, rng, delta=delta, noise=noise, **options)
    cols = nb.changed[r]
    a, b = nb.d[r][cols], nb.d_prime[r][cols]
    stats = {}
    for side, row in (("d", nb.d[r]), ("dp", nb.d_prime[r])):
        parts = []
        for size in _batches(n, 5 * T):  # trace: four more (rows, T) arrays
            rel = release_fast(np.repeat(row[None], size, axis=0), _stacked(nb, size), epsilon, rng,
                               delta=delta, noise=noise, trace=True, **options)
            _same_calibration(rel.claim, single.claim)
            z = rel.trace["z"][:, cols]  # NaN where the step was not sampled: no term
            parts.append(_llr(z, a, b, rel.claim))
        stats[side] = np.concatenate(parts)
    return Draws(single.claim, stats["d"], stats["dp"])


# ---------------------------------------------------------------------------------------------
# the audit table
# ---------------------------------------------------------------------------------------------

EPSILON, DELTA = 1.0, 1e-5
STACKED = dict(series_per_unit=1)  # one unit touches one series: stacking is valid
# filter-subsample computes sigma_max of the sampled filter rows series by series (about 0.1 ms
# per release with T = 24), so it gets fewer draws
FILTER_MAX_N = 50_000


@dataclass(frozen=True)
class Audit:
    """One row of the table: a mechanism, its parameters and the unit audited."""

    mechanism: str
    case: Case
    draw: object
    options: dict = field(default_factory=dict)
    label: str = ""
    max_n: int | None = None  # fewer draws for mechanisms whose calibration is per release


def audits() -> list[Audit]:
    """The mechanisms at the unit levels that matter (epsilon 1; delta 1e-5 where it applies)."""
    eps, dlt = EPSILON, DELTA
    cellwise = [Case("event"), Case("event", "substitute"), Case("w-event"), Case("user"),
                Case("user", "substitute")]
    stacked = [Case("event"), Case("w-event", **STACKED), Case("user", **STACKED),
               Case("user", "substitute", **STACKED)]
    rows = [Audit("gaussian", case, draw_cellwise, dict(mechanism="gaussian", epsilon=eps, delta=dlt))
            for case in cellwise]
    rows += [Audit("laplace", case, draw_cellwise, dict(mechanism="laplace", epsilon=eps)) for case in cellwise]
    rows += [Audit("subsample", case, draw_subsample, dict(epsilon=eps, delta=dlt, p=0.2), "exact, p=0.2")
             for case in stacked]
    rows += [Audit("filter-subsample", case, draw_subsample,
                   dict(epsilon=eps, delta=dlt, p=0.2, accounting="conditional", filtered=True),
                   "conditional, gaussian sigma_g=2, p=0.2", max_n=FILTER_MAX_N) for case in stacked[:3]]
    rows += [Audit("dft", case, draw_dft, dict(epsilon=eps, delta=dlt, k=5), "gaussian, k=5") for case in stacked[:3]]
    for case in stacked:
        rows.append(Audit("fast", case, draw_fast, dict(epsilon=eps), "laplace, adaptive, at most 3 samples"))
    # every step sampled (M = T): the substitute's disjoint cells are sampled too, so the doubled
    # per-sample sensitivity of a substitution is attained
    rows += [Audit("fast", case, draw_fast, dict(epsilon=eps, interval=1, adaptive=False), "laplace, fixed interval 1")
             for case in (Case("user", **STACKED), Case("user", "substitute", **STACKED))]
    rows.append(Audit("fast", Case("user", **STACKED), draw_fast, dict(epsilon=eps, delta=dlt, noise="gaussian"),
                      "gaussian, adaptive, at most 3 samples"))
    return rows


def row_confidence(rows: int, family: float = FAMILY_CONFIDENCE) -> float:
    """The level of each one-sided Clopper-Pearson bound so that the lower bounds of all ``rows``
    hold together with probability at least ``family``: a row's bound is valid with probability
    at least 1 - 2 (1 - level) (tsdp.accounting.audit), so the union bound over the table gives
    level = 1 - (1 - family) / (2 rows) (Bonferroni). At a per-row 95 % a claim that is exactly
    tight is refuted by chance in a few percent of the rows, so a table of many tight rows would
    fail a correct implementation more often than not."""
    if rows < 1:
        raise ValueError(f"need at least one row, got {rows}")
    return 1.0 - (1.0 - family) / (2 * rows)


def run(audit: Audit, n: int, seed: int, confidence: float = 0.95) -> tuple[Neighbours, Draws, EpsilonLowerBound]:
    """Neighbours, N draws per side and the lower bound for one row (seeded), its Clopper-Pearson
    bounds at ``confidence``."""
    nb = neighbours(audit.case, seed)
    if not nb.within_claim:
        raise AssertionError(f"{audit.case.label}: the neighbours differ by L1 {nb.l1:g}, L2 {nb.l2:g}, "
                             f"more than the claimed {nb.claimed_l1:g}, {nb.claimed_l2:g}")
    draws = audit.draw(nb, n, np.random.default_rng(seed), **audit.options)
    delta = draws.claim.delta or 0.0
    return nb, draws, epsilon_lower_bound(draws.stat_d, draws.stat_d_prime, delta=delta, confidence=confidence)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1_000_000, help="releases per side")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--only", default=None, help="comma-separated mechanisms")
    args = parser.parse_args()
    only = set(args.only.split(",")) if args.only else None
    rows = [audit for audit in audits() if not only or audit.mechanism in only]
    if not rows:
        raise SystemExit(f"error: --only: no audit rows for {args.only!r}")
    confidence = row_confidence(len(rows))
    print(f"Empirical privacy audit (specs/audit.md): up to {args.n:,} releases per side, seed {args.seed}.\n"
          "eps_lo is a LOWER bound on epsilon at the claimed delta: split-sample threshold test on the exact LLR,\n"
          f"one-sided Clopper-Pearson bounds on p and q at {confidence:.4%} each, so that the lower bounds of all\n"
          f"{len(rows)} rows hold together with probability >= {FAMILY_CONFIDENCE:.0%} (Bonferroni over the table:\n"
          "a correct claim is refuted anywhere in it with probability <= 5%). A claim is refuted when eps_lo > claimed eps.\n"
          "Reference: the claim itself (eps_lo/eps near 1: the claim is tight for this neighbour and N).\n"
          "L1 diff/claimed: the aggregated panels of D and D' differ by this much (worst case: equal).")
    refuted, started = [], time.perf_counter()
    group = None
    for audit in rows:
        if (audit.mechanism, audit.label) != group:
            group = (audit.mechanism, audit.label)
            print(f"\n{audit.mechanism}" + (f" ({audit.label})" if audit.label else ""))
            print(f"  {'unit':<26} {'L1 diff/claimed':>15} {'claimed eps':>11} {'delta':>7} {'eps_lo':>7} "
                  f"{'eps_lo/eps':>10} {'N per side':>10} {'time':>7}")
        n = min(args.n, audit.max_n or args.n)
        t0 = time.perf_counter()
        nb, draws, bound = run(audit, n, args.seed, confidence)
        took = time.perf_counter() - t0
        claim = draws.claim
        flag = "  REFUTED" if bound.refutes(claim.epsilon) else ""
        print(f"  {audit.case.label:<26} {f'{nb.l1:g}/{nb.claimed_l1:g}':>15} {claim.epsilon:>11g} "
              f"{claim.delta or 0:>7g} {bound.eps_lower:>7.3f} {bound.eps_lower / claim.epsilon:>10.2f} "
              f"{bound.n:>10,} {took:>6.1f}s{flag}", flush=True)
        if flag:
            refuted.append(f"{audit.mechanism} {audit.case.label}: {bound.describe()}")
    total = time.perf_counter() - started
    print(f"\ntotal wall time {total:.1f} s")
    if refuted:
        print("REFUTED CLAIMS:\n  " + "\n  ".join(refuted))
        return 1
    print("no claim refuted")
    return 0


if __name__ == "__main__":
    sys.exit(main())

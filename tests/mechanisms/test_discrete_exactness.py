"""The hardened sampler's fast paths: exact at the decision boundaries, right in distribution at
the default lattice scale, and the fallbacks (second pass, exact decimal) reached when they must be."""

import math
from decimal import Decimal, localcontext

import numpy as np
import pytest
from scipy import stats

from tests.mechanisms.test_discrete import count_calls
from tsdp.mechanisms import discrete as d


class CraftedBits:
    """A generator stand-in whose ``bit_generator.random_raw`` hands out given words in order."""

    def __init__(self, *words):
        self.words = [int(w) for w in words]
        self.bit_generator = self

    def random_raw(self, size=None):
        if size is None:
            return np.uint64(self.words.pop(0))
        out, self.words = self.words[:size], self.words[size:]
        assert len(out) == size, "the sampler asked for more words than were crafted"
        return np.array(out, dtype=np.uint64)


def _floor_exact(t, lo, hi):
    """floor(-t ln V) if it is the same at both ends of [lo, hi), else None (60 digits)."""
    with localcontext() as ctx:
        ctx.prec = 60
        a = -Decimal(t) * lo.ln() if lo > 0 else None
        b = -Decimal(t) * hi.ln()
        return int(math.floor(b)) if a is not None and math.floor(a) == math.floor(b) else None


def _u_at(t, k):
    """The 52-bit u with u / 2^52 <= exp(-k / t) < (u + 1) / 2^52: V's boundary between M = k - 1 and k."""
    with localcontext() as ctx:
        ctx.prec = 60
        return int((Decimal(-k) / Decimal(t)).exp() * 2 ** 52)


@pytest.mark.parametrize("t", [0.4, 3.0, 4424991.0, 2.0 ** 22 + 0.37, 2.0 ** 39])
def test_magnitudes_are_exact_next_to_every_boundary(t):
    """Words one or two steps either side of the boundary between M = k - 1 and M = k (well inside
    any float error), the word whose interval holds the boundary (more bits needed), small u
    (second pass) and u = 0: each magnitude is exactly floor(-t ln V)."""
    ks = sorted({1, 2, 7, int(t) + 1, int(3 * t) + 1, int(20 * t) + 1})
    us = [u for k in ks for u in (_u_at(t, k) + j for j in (-2, -1, 1, 2))]
    us += [_u_at(t, ks[-1]), 1, 5, 2 ** 40 + 3, 0]  # a boundary's own word; small u; u = 0
    extra, expected = [], []
    rng = np.random.default_rng(7)
    for u in us:  # the undecided words draw one more word each, in order
        expected.append(_floor_exact(t, Decimal(u) / 2 ** 52, Decimal(u + 1) / 2 ** 52))
        if expected[-1] is None:
            w = int(rng.integers(0, 2 ** 63))
            extra.append(w)
            longer = u * 2 ** 64 + w
            expected[-1] = _floor_exact(t, Decimal(longer) / 2 ** 116, Decimal(longer + 1) / 2 ** 116)
    assert None not in expected and len(extra) >= 2  # the boundary's own word and u = 0 at least
    words = np.array([u << 12 for u in us], dtype=np.uint64)
    gen = CraftedBits(*extra)
    got = d._magnitudes(gen, t, words, d._Scratch(words.size))
    assert got.tolist() == expected
    assert gen.words == []  # exactly the undecided words drew more bits
    # one scale per word (the second pass alone) gives the same
    gen = CraftedBits(*extra)
    assert d._magnitudes(gen, np.full(words.size, t), words, d._Scratch(words.size)).tolist() == expected


def _gamma_exact(sigma, t, m):
    with localcontext() as ctx:
        ctx.prec = 60
        s2 = Decimal(sigma) ** 2
        return (Decimal(m) - s2 / t) ** 2 / (2 * s2)


@pytest.mark.parametrize("sigma", [0.7, 3.0, 4424990.72])
def test_gaussian_acceptance_is_exact_next_to_the_boundary(sigma):
    """V' one step below exp(-gamma) is accepted, one step above rejected, the step holding it draws
    more bits and decides on them; v = 0 is decided too."""
    t = math.floor(sigma) + 1
    for m in sorted({0, 1, t // 2, t, 3 * t}):
        with localcontext() as ctx:
            ctx.prec = 60
            u = int((Decimal(-(m + 0.5)) / t).exp() * 2 ** 52)  # M = m, far from a boundary
            p = (-_gamma_exact(sigma, t, m)).exp()
            vb = int(p * 2 ** 32)
            w = int(np.random.default_rng(m).integers(0, 2 ** 63))
            straddle = Decimal(vb * 2 ** 64 + w + 1) / 2 ** 96 <= p
        cases = [(vb - 1, [], True), (vb + 1, [], False), (vb, [w], straddle), (0, [], p >= Decimal(2) ** -32)]
        for v, extra, accept in cases:
            if not 0 <= v < 2 ** 32:
                continue
            # two proposals: the first is the one under test, the second (m = 0 with v = 2^32 - 1) is rejected
            words = [u << 12, _u_at(t, 0.5) << 12, (v << 32) | (2 ** 32 - 1)]
            gen = CraftedBits(*words, *extra)
            values, keep = d._gaussian_proposals(gen, sigma, t, 2, d._Scratch(2))
            assert values[0] == m and keep.tolist() == [accept, False], (m, v)
            assert gen.words == []


def test_first_margin_covers_its_bound():
    assert 5.6 > 8 * math.log(2) * (1 + 2.0 ** -44)
    for t in [1e-9, 0.4, 3.0, 4424991.0, 2.0 ** 40]:
        margin = d._first_margin(t)
        assert math.log2(margin) == round(math.log2(margin)) and margin >= 2.0 ** -52
        assert margin >= t * 2.0 ** -44 + 5.6 * t * 2 * d._ETA_LOG
        assert 1.0 - margin == float(Decimal(1) - Decimal(margin))


def _binned_pvalue(draws, edges, cdf):
    """Chi-square of the draws in bins [edges[i], edges[i+1]) (integers; open ends) against ``cdf``
    (P(y <= k)) -- with 40 bins the pmf is checked where the mass is."""
    counts = np.bincount(np.searchsorted(edges, draws, side="right"), minlength=edges.size + 1)
    c = np.array([0.0] + [cdf(e - 1) for e in edges] + [1.0])
    return stats.chisquare(counts, np.diff(c) * draws.size).pvalue


def test_gaussian_at_the_default_lattice_scale_matches_the_pmf():
    """sigma ~ 2^22 lattice steps (the bench's): the first-pass margins decide almost every draw."""
    sigma = 4424990.72
    draws = d.discrete_gaussian(np.random.default_rng(31), sigma, 400_000)
    edges = np.unique(np.round(stats.norm.ppf(np.linspace(0, 1, 41)[1:-1]) * sigma)).astype(np.int64)
    # sum of the pmf up to k: the normal cdf at k + 1/2 (Euler-Maclaurin; the error is ~1e-12 here)
    assert _binned_pvalue(draws, edges, lambda k: stats.norm.cdf((k + 0.5) / sigma)) > 1e-3


def test_laplace_at_the_default_lattice_scale_matches_the_pmf():
    t = 4424990.72
    draws = d.discrete_laplace(np.random.default_rng(32), t, 400_000)
    log_q = -1 / t
    one_plus_q = 1 + math.exp(log_q)

    def cdf(k):  # P(y <= k) = q^-k / (1 + q) for k < 0, 1 - q^(k + 1) / (1 + q) otherwise
        return math.exp(-k * log_q) / one_plus_q if k < 0 else 1 - math.exp((k + 1) * log_q) / one_plus_q

    edges = np.unique(np.round(stats.laplace.ppf(np.linspace(0, 1, 41)[1:-1]) * t)).astype(np.int64)
    assert _binned_pvalue(draws, edges, cdf) > 1e-3


def test_magnitude_fallbacks_alone_give_the_same_distribution(monkeypatch):
    """With the log error allowance widened so that many magnitudes go to the second pass and the
    exact decimal fallback, the discrete Laplace still follows its pmf."""
    monkeypatch.setattr(d, "_ETA_LOG", 2.0 ** -6)
    calls = count_calls(monkeypatch, d, "_geometric_exact")
    draws = d.discrete_laplace(np.random.default_rng(33), 2.0, 20_000)
    assert calls["n"] > 1_000
    support = np.arange(-40, 41)
    pmf = np.exp(-np.abs(support) / 2.0)
    pmf /= pmf.sum()
    counts = np.bincount(draws.astype(np.int64) + 40, minlength=support.size)
    keep = pmf * draws.size >= 5
    expected = pmf[keep] * draws.size
    assert stats.chisquare(counts[keep], expected * counts[keep].sum() / expected.sum()).pvalue > 1e-3


def test_out_and_multiplier_store_the_same_draws_scaled():
    g = 2.0 ** -20
    plain = d.discrete_gaussian(np.random.default_rng(34), 5e5, 300_000)
    buf = np.empty(300_000)
    scaled = d.discrete_gaussian(np.random.default_rng(34), 5e5, 300_000, out=buf, multiplier=g)
    assert scaled is buf and np.array_equal(buf, plain * g)
    lap = d.discrete_laplace(np.random.default_rng(35), 5e5, 1000)
    assert np.array_equal(d.discrete_laplace(np.random.default_rng(35), 5e5, 1000, multiplier=g), lap * g)

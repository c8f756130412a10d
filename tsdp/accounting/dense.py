"""Privacy-loss PMFs on a regular grid, composed by FFT and read off vectorised (numpy only).

The same algorithm as dp-accounting's dense PLDs (Doroshenko et al. 2022; Koskela et al. 2020),
written for whole arrays: a PMF holds masses on the losses ``(lower + i) * d`` plus a mass at
``+infinity``.

* :meth:`DensePmf.self_compose` raises the real FFT of the PMF to the ``n``-th power. The output
  window is cut where Chernoff bounds put at most ``tail_mass / 2`` of the composed mass on each
  side; mass outside the window is not lost silently: ``tail_mass`` is added to the mass at
  infinity (pessimistic, as in dp-accounting), which also covers what the circular convolution
  folds back into the window. Rounding noise below zero is clipped (adding mass is pessimistic).
* :meth:`DensePmf.epsilon` and :meth:`DensePmf.delta` evaluate the hockey-stick divergence
  ``delta(eps) = inf + sum_{l > eps} p_l (1 - e^{eps - l})`` from reversed cumulative sums.

* :meth:`DensePmf.compose` (two different PMFs) convolves them whole, without truncation.

A PLD for add/remove adjacency holds two PMFs (the remove and the add direction, composed
separately, Zhu, Dong and Wang 2022); its epsilon is the larger of the two. This is the numpy back
end of :mod:`tsdp.accounting.pld_backend`, through which the accountants use it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from tsdp.errors import GridTooLarge

MAX_FFT = 2**26  # points of one composed PMF (0.5 GB of float64 in the transform)


@dataclass(frozen=True)
class DensePmf:
    """Masses ``probs`` on the losses ``(lower + i) * discretization`` and ``infinity`` at +inf."""

    lower: int
    probs: np.ndarray
    infinity: float
    discretization: float

    @classmethod
    def from_profile_deltas(cls, lower: int, deltas: np.ndarray, discretization: float) -> "DensePmf":
        """The pessimistic connect-the-dots PMF of a profile sampled at ``(lower + i) * d``."""
        from tsdp.accounting.pld import connect_the_dots

        probs, infinity = connect_the_dots(np.asarray(deltas, dtype=float), discretization)
        return cls(lower, probs, infinity, discretization)

    def losses(self) -> np.ndarray:
        return (self.lower + np.arange(self.probs.size)) * self.discretization

    def self_compose(self, times: int, tail_mass: float) -> "DensePmf":
        """The ``times``-fold composition (see the module docstring for the truncation)."""
        if times < 1:
            raise ValueError("compose at least once")
        if times == 1:
            return self
        low, high = _chernoff_window(self.probs, times, tail_mass)
        size = high - low + 1
        length = _fast_length(max(size, self.probs.size))
        if length > MAX_FFT:
            raise GridTooLarge(
                f"composing {times:,} times needs a privacy-loss grid of {size:,} points; "
                f"use --discretization {self.discretization * size / MAX_FFT:.2g} or coarser")
        spectrum = np.fft.rfft(self.probs, length)
        composed = np.fft.irfft(spectrum ** times, length)
        window = np.roll(composed, -low)[:size]
        np.clip(window, 0.0, None, out=window)
        infinity = tail_mass - math.expm1(times * math.log1p(-self.infinity))
        return DensePmf(self.lower * times + low, window, min(1.0, infinity), self.discretization)

    def compose(self, other: "DensePmf", tail_mass: float = 0.0) -> "DensePmf":
        """The composition with ``other`` (on the same grid): the whole linear convolution of the
        two PMFs by FFT, nothing cut (``tail_mass`` is not spent), and the mass at infinity
        ``1 - (1 - a)(1 - b)``. Rounding noise below zero is clipped (pessimistic)."""
        if other.discretization != self.discretization:
            raise ValueError("compose PMFs on the same grid")
        size = self.probs.size + other.probs.size - 1
        length = _fast_length(size)
        if length > MAX_FFT:
            raise GridTooLarge(f"composing needs a privacy-loss grid of {size:,} points; use --discretization "
                               f"{self.discretization * size / MAX_FFT:.2g} or coarser")
        spectrum = np.fft.rfft(self.probs, length) * np.fft.rfft(other.probs, length)
        composed = np.fft.irfft(spectrum, length)[:size]
        np.clip(composed, 0.0, None, out=composed)
        infinity = self.infinity + other.infinity - self.infinity * other.infinity
        return DensePmf(self.lower + other.lower, composed, min(1.0, infinity), self.discretization)

    def delta(self, epsilon: float) -> float:
        """delta(epsilon) of this PMF."""
        losses = self.losses()
        above = losses > epsilon
        p, l = self.probs[above], losses[above]
        return min(1.0, self.infinity + float(np.sum(p * -np.expm1(epsilon - l))))

    def epsilon(self, delta: float) -> float:
        """Smallest epsilon >= 0 with delta(epsilon) <= ``delta`` (inf when no finite one is)."""
        if self.infinity > delta:
            return math.inf
        losses = self.losses()
        start = int(np.searchsorted(losses, 0.0, side="right"))
        p, l = self.probs[start:], losses[start:]  # the losses > 0
        if p.size == 0:
            return 0.0
        # mass and e^{-l}-weighted mass of the losses >= l_k, for every k
        upper = np.cumsum(p[::-1])[::-1]
        lower = np.cumsum((p * np.exp(-l))[::-1])[::-1]
        if self.infinity + upper[0] - lower[0] <= delta:  # delta(0) is small enough
            return 0.0
        # delta at eps = l_k counts the losses > l_k: (upper, lower) from k + 1 on
        nxt_u = np.append(upper[1:], 0.0)
        nxt_w = np.append(lower[1:], 0.0)
        with np.errstate(divide="ignore"):
            at_grid = self.infinity + nxt_u - np.exp(l + np.log(nxt_w))
        k = int(np.argmax(at_grid <= delta))  # the last entry (infinity alone) always qualifies
        # epsilon lies in [l_{k-1}, l_k] (or [0, l_0]); there delta = inf + U_k - e^eps W_k
        if lower[k] <= 0:
            return float(l[k])
        eps = math.log((self.infinity + upper[k] - delta) / lower[k])
        left = l[k - 1] if k > 0 else 0.0
        return float(min(max(eps, left), l[k]))


@dataclass(frozen=True)
class DensePld:
    """One PMF (symmetric relations) or two (add/remove: remove and add direction)."""

    pmfs: tuple[DensePmf, ...]

    def self_compose(self, times: int, tail_mass: float) -> "DensePld":
        return DensePld(tuple(p.self_compose(times, tail_mass) for p in self.pmfs))

    def compose(self, other: "DensePld", tail_mass: float = 0.0) -> "DensePld":
        """Direction by direction; a single PMF (a symmetric pair) serves as both directions."""
        mine, theirs = self.pmfs, other.pmfs
        if len(mine) != len(theirs):
            mine, theirs = mine * (2 // len(mine)), theirs * (2 // len(theirs))
        return DensePld(tuple(a.compose(b, tail_mass) for a, b in zip(mine, theirs)))

    def epsilon(self, delta: float) -> float:
        return max(p.epsilon(delta) for p in self.pmfs)

    def delta(self, epsilon: float) -> float:
        return max(p.delta(epsilon) for p in self.pmfs)


def _chernoff_window(probs: np.ndarray, times: int, tail_mass: float) -> tuple[int, int]:
    """Index range of the ``times``-fold sum outside which each tail holds <= tail_mass / 2.

    Chernoff: P(S >= u) <= exp(times * log M(t) - t u) for t > 0 (and mirrored for the lower tail),
    with the log-MGF of the index distribution taken at orders around the one that is optimal for
    a normal approximation; any order gives a valid bound, the best one is kept.
    """
    n = probs.size
    full = (0, (n - 1) * times)
    if tail_mass <= 0:
        return full
    index = np.arange(n, dtype=float)
    total = probs.sum()
    mean = float(probs @ index) / total
    spread = math.sqrt(max(float(probs @ (index - mean) ** 2) / total, 1e-12))
    log_target = math.log(tail_mass / 2)
    best = math.sqrt(2 * -log_target / times) / spread
    log_p = np.log(np.where(probs > 0, probs, 1.0))
    log_p[probs <= 0] = -np.inf
    low, high = full
    for sign in (1.0, -1.0):
        for factor in 2.0 ** (np.arange(-14, 3) / 2):  # skewed losses want far smaller orders
            t = sign * best * factor
            exponent = t * index + log_p
            top = exponent.max()
            log_mgf = top + math.log(np.exp(exponent - top).sum())
            bound = (times * log_mgf - log_target) / t
            if not math.isfinite(bound):
                continue
            if sign > 0:
                high = min(high, math.ceil(bound))
            else:
                low = max(low, math.floor(bound))
    return low, max(high, low)


def _fast_length(size: int) -> int:
    """A length >= size whose FFT is fast (a product of 2, 3 and 5)."""
    best = 1 << (size - 1).bit_length()
    power3 = 1
    while power3 < best:
        power5 = power3
        while power5 < best:
            candidate = power5
            while candidate < size:
                candidate *= 2
            best = min(best, candidate)
            power5 *= 5
        power3 *= 3
    return best

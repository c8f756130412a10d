"""The randomised phase function R and the delta-LIP shift (McElroy, Roy & Hore 2022, sections 2.3-2.4).

FLIP's filter is ``Psi_h(e^{-i lambda}) = exp{i pi R(H(lambda))}`` on [0, pi] (extended oddly), where
``R`` belongs to ``{R: [0,1] -> [0,1], R(0) = 0, R(x) + R(1-x) = 1}`` (Thm 6) and ``H`` is the CDF of
a surrogate spectral density. The paper suggests a symmetrised Beta mixture,

    R(x) = sum_j (alpha_j / 2) [I_x(a_j, b_j) + I_x(b_j, a_j)],

with ``I_x`` the regularised incomplete beta function. tsdp tabulates this R at ``TABLE_POINTS``
equally spaced x and interpolates linearly: the piecewise-linear function is itself in the family
(the grid is symmetric about 1/2, so the antisymmetry survives), its Lipschitz constant is the
largest secant slope, which is exact and never above sup r(x), and one table serves the whole
frequency grid. Every guarantee below is therefore a statement about the R actually used.

The delta-LIP tuning (Thm 10, eq. (12)): with ``h = A (f~ + Delta)`` the filter's CDF is

    H(lambda) = (1 - alpha) F(lambda) + alpha lambda / pi,   alpha = pi Delta / (1 + pi Delta),

and ``Psi_h`` is delta-LIP for every ``Delta`` in [0, B], ``B = sqrt(delta) / (L_R pi^2 S - pi sqrt(delta))``,
``S = sup |f / <f>_pi - 1|``; B is infinite when ``S <= sqrt(delta) / (pi L_R)``. tsdp draws
``Delta ~ U[0, B]``. The optional ``ks`` bound follows the same proof chain with
``|H - F| = alpha |F - lambda/pi|``: delta-LIP whenever ``alpha <= sqrt(delta) / (pi L_R D_KS)``,
``D_KS = sup |F - lambda/pi|`` (spec flip.md section 2.3).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from tsdp.errors import UsageError

TABLE_POINTS = 1025
# When B is infinite (a near-white spectrum) the shift is capped at 1/pi, i.e. alpha <= 1/2.
SHIFT_CAP = 1.0 / math.pi
BOUNDS = ("paper", "ks")


@dataclass(frozen=True)
class BetaMixture:
    """A symmetrised Beta mixture ``R`` (paper eq. (9)); ``alpha`` sums to 1, ``a, b > 0``."""

    alpha: tuple[float, ...]
    a: tuple[float, ...]
    b: tuple[float, ...]

    def __post_init__(self) -> None:
        alpha, a, b = (tuple(float(v) for v in vals) for vals in (self.alpha, self.a, self.b))
        object.__setattr__(self, "alpha", alpha)
        object.__setattr__(self, "a", a)
        object.__setattr__(self, "b", b)
        if not (len(alpha) == len(a) == len(b) >= 1):
            raise UsageError("--r-params: alpha, a and b must be lists of the same positive length")
        if min(a + b) <= 0 or not all(math.isfinite(v) for v in a + b):
            raise UsageError(f"--r-params: every a_j and b_j must be > 0 and finite, got a={list(a)}, b={list(b)}")
        if min(alpha) <= 0 or abs(sum(alpha) - 1.0) > 1e-9:
            raise UsageError(f"--r-params: alpha must be positive and sum to 1, got {list(alpha)}")

    @classmethod
    def identity(cls) -> "BetaMixture":
        """R(x) = x: Beta(1, 1), the attacker's default guess (spec section 7)."""
        return cls((1.0,), (1.0,), (1.0,))

    @classmethod
    def draw(cls, rng: np.random.Generator, components: int, low: float, high: float) -> "BetaMixture":
        """tsdp's default sampler (spec 4.2): a_j, b_j ~ U[low, high], alpha ~ Dirichlet(1, ..., 1)."""
        a = rng.uniform(low, high, components)
        b = rng.uniform(low, high, components)
        alpha = rng.dirichlet(np.ones(components)) if components > 1 else np.ones(1)
        alpha = np.maximum(alpha, 1e-12)
        return cls(tuple(alpha / alpha.sum()), tuple(a), tuple(b))

    def exact(self, x: np.ndarray) -> np.ndarray:
        """R(x) by the regularised incomplete beta function."""
        from scipy.special import betainc

        x = np.clip(np.asarray(x, dtype=float), 0.0, 1.0)
        out = np.zeros_like(x)
        for w, a, b in zip(self.alpha, self.a, self.b):
            out += 0.5 * w * (betainc(a, b, x) + betainc(b, a, x))
        return out

    def exact_density(self, x: np.ndarray) -> np.ndarray:
        """r(x) = R'(x), the mixture of Beta(a, b) and Beta(b, a) densities."""
        from scipy.stats import beta

        x = np.asarray(x, dtype=float)
        out = np.zeros_like(x)
        for w, a, b in zip(self.alpha, self.a, self.b):
            out += 0.5 * w * (beta.pdf(x, a, b) + beta.pdf(x, b, a))
        return out

    @cached_property
    def _table(self) -> tuple[np.ndarray, np.ndarray]:
        nodes = np.linspace(0.0, 1.0, TABLE_POINTS)
        # betainc is accurate to ~1e-15 and its weighted sum can exceed 1 by an ulp, which the symmetrisation
        # below would turn into a value below 0: clip first, then enforce R(x) + R(1-x) = 1 and the end points.
        values = np.clip(self.exact(nodes), 0.0, 1.0)
        values = np.clip(0.5 * (values + 1.0 - values[::-1]), 0.0, 1.0)
        values[0], values[-1] = 0.0, 1.0
        return nodes, values

    def __call__(self, x: np.ndarray) -> np.ndarray:
        """The tabulated R used by the mechanism (piecewise linear through exact values)."""
        nodes, values = self._table
        return np.interp(x, nodes, values)

    @cached_property
    def lipschitz(self) -> float:
        """L_R of the tabulated R: its largest secant slope (infinite slopes cannot occur, but a
        Beta parameter below 1 makes the exact R non-Lipschitz, which :meth:`check_for` refuses)."""
        nodes, values = self._table
        return float(np.max(np.diff(values) / np.diff(nodes)))

    @property
    def min_parameter(self) -> float:
        return min(self.a + self.b)

    def as_dict(self) -> dict[str, list[float]]:
        return {"alpha": list(self.alpha), "a": list(self.a), "b": list(self.b)}


def check_r(r: BetaMixture, lip_delta: float, trend_order: int) -> list[str]:
    """Refuse an R that voids the delta-LIP bound; return warnings for weaker defects.

    With delta > 0 every a_j, b_j must be >= 1 (otherwise L_R is infinite and B = 0, spec 4.3).
    Thm 11 needs R^(k)(0) = 0 for k <= d, i.e. min(a_j, b_j) >= d + 1; below that only the
    fitted trend's add-back keeps the trend.
    """
    if lip_delta > 0 and r.min_parameter < 1:
        raise UsageError(f"--r-params: with --lip-delta {lip_delta:g} > 0 every a_j and b_j must be >= 1 "
                         f"(got min {r.min_parameter:g}); otherwise R is not Lipschitz and the shift bound is 0")
    if r.min_parameter < trend_order + 1:
        return [f"R's smallest Beta parameter {r.min_parameter:g} is below trend order + 1 = {trend_order + 1}: "
                "the filter is not trend-invariant of that order (Thm 11); the fitted trend is still added back exactly"]
    return []


def sup_deviation(f: np.ndarray) -> float:
    """S = sup_{0<=lambda<=pi} |f / <f>_pi - 1| on an equally spaced grid over [0, pi]."""
    mean = trapezoid_mean(f)
    return float(np.max(np.abs(f / mean - 1.0)))


def ks_distance(F: np.ndarray) -> float:
    """D_KS = sup |F(lambda) - lambda/pi| on an equally spaced grid over [0, pi]."""
    uniform = np.linspace(0.0, 1.0, F.shape[-1])
    return float(np.max(np.abs(F - uniform)))


def trapezoid_mean(f: np.ndarray) -> float:
    """<f>_pi = pi^{-1} int_0^pi f by the trapezoid rule on an equally spaced grid."""
    n = f.shape[-1] - 1
    return float((f.sum() - 0.5 * (f[0] + f[-1])) / n)


def shift_bound(lip_delta: float, lipschitz: float, S: float, d_ks: float, bound: str = "paper") -> float:
    """The largest admissible shift B (``math.inf`` when every shift qualifies).

    ``paper``: eq. (12), ``B = sqrt(delta) / (L_R pi^2 S - pi sqrt(delta))`` if ``S > sqrt(delta) / (pi L_R)``.
    ``ks``: ``alpha_max = sqrt(delta) / (pi L_R D_KS)``, ``B = alpha_max / (pi (1 - alpha_max))``.
    """
    if bound not in BOUNDS:
        raise UsageError(f"--bound {bound!r}: must be one of {', '.join(BOUNDS)}")
    if lip_delta == 0:
        return 0.0
    root = math.sqrt(lip_delta)
    if bound == "paper":
        if S <= root / (math.pi * lipschitz):
            return math.inf
        return root / (lipschitz * math.pi ** 2 * S - math.pi * root)
    if d_ks <= 0:
        return math.inf
    alpha_max = root / (math.pi * lipschitz * d_ks)
    if alpha_max >= 1:
        return math.inf
    return alpha_max / (math.pi * (1.0 - alpha_max))


def mixing_weight(shift: float) -> float:
    """alpha = pi Delta / (1 + pi Delta) (proof of Thm 10)."""
    return math.pi * shift / (1.0 + math.pi * shift)


def draw_shift(rng: np.random.Generator, bound: float) -> tuple[float, bool]:
    """Delta ~ U[0, B] (paper section 3.3 step 3); an infinite B is capped at 1/pi (alpha <= 1/2).

    Returns ``(Delta, capped)``.
    """
    if bound == 0:
        return 0.0, False
    capped = not math.isfinite(bound)
    return float(rng.uniform(0.0, SHIFT_CAP if capped else bound)), capped


def shifted_cdf(F: np.ndarray, alpha: float) -> np.ndarray:
    """H = (1 - alpha) F + alpha lambda / pi: the CDF of the surrogate h = A (f~ + Delta) (Thm 10)."""
    return (1.0 - alpha) * F + alpha * np.linspace(0.0, 1.0, F.shape[-1])

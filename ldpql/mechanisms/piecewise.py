"""The Piecewise Mechanism, PM (Wang et al., ICDE 2019), for a value in [-1, 1].

Privacy: ε-LDP. With t = e^{ε/2} and C = (t+1)/(t-1), the output lies in [-C, C]. Let ℓ(x) = (C+1)x/2 - (C-1)/2
and r(x) = ℓ(x) + C - 1. With probability t/(t+1) the output is uniform on [ℓ, r] (density
(e^ε - t)/(2(t+1))), otherwise uniform on the rest of [-C, C] (density e^-ε times that): the density ratio
between any two inputs is at most e^ε. As it runs: the rare branch, "outside the band", is drawn directly
with probability P_out' ≈ 1/(t+1), rounded up to the 2^-53 grid, so the realised density ratio
(1 − P_out')/(C−1) ÷ P_out'/(C+1) ≤ e^ε with the float C the sampler spreads over. What the realised audit
checks is that ratio of branch probabilities over the lengths; the float positions within a branch
(u·(C−1) + ℓ(x)) are not on a lattice shared by all inputs, which the audit does not cover.
Utility: the output is unbiased for x, with Var = x²/(t-1) + (t+3)/(3(t-1)²) per user; for the mean of n users
Var = (E[x²]/(t-1) + (t+3)/(3(t-1)²))/n ≤ (1/(t-1) + (t+3)/(3(t-1)²))/n (the worst case, |x| = 1). The
summary also keeps Σy², from which E[x²] is estimated without bias (:meth:`Piecewise.second_moment`), so the
interval uses the variance of the data at hand rather than the worst case. Runtime: O(n), three uniforms per user.
No exact-aggregate path (continuous output).
Citations: seed-003-vector.md §4.5 (PM).
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from ldpql.mechanisms.base import Randomizer, below, check_epsilon, register


@register
class Piecewise(Randomizer):
    """Piecewise Mechanism on inputs in [-1, 1]; reports are floats in [-C, C], the summary is their sum."""

    estimates = "mean"
    name = "piecewise"

    def __init__(self, epsilon: float):
        check_epsilon("Piecewise", epsilon)
        self.epsilon = float(epsilon)
        self.t = math.exp(self.epsilon / 2)
        self.C = (self.t + 1) / (self.t - 1)
        # P_out ≈ 1/(t+1), chosen against the float lengths the sampler spreads the branches over so that the
        # realised density ratio (1 - P_out)/(C-1) ÷ P_out/(C+1) ≤ e^ε, on the 2^-53 grid and rounded up
        band, rest = self.C - 1, self.C + 1
        self.outside = float(below(rest / (rest + math.exp(self.epsilon) * band) * (1 + 2.0 ** -50)))

    def _interval(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        left = (self.C + 1) / 2 * x - (self.C - 1) / 2
        return left, left + self.C - 1

    def randomize(self, x: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        big_c = self.C
        left = np.clip(np.asarray(x, dtype=float), -1, 1)
        left *= (big_c + 1) / 2
        left -= (big_c - 1) / 2  # ℓ(x); the band is [ℓ, ℓ + C - 1]
        outside = rng.random(len(x)) < self.outside  # privacy-critical: the low-density branch, drawn directly
        u = rng.random(len(x))
        y = u * (big_c + 1)  # v: a point of the low-density part [-C, ℓ) ∪ (r, C], of total length C + 1
        past = y >= left + big_c
        y -= big_c  # v - C on [-C, ℓ), and v - C + (C - 1) = r + (v - (ℓ + C)) past the band
        np.add(y, big_c - 1, out=y, where=past)
        u *= big_c - 1
        u += left  # uniform on the band
        np.copyto(y, u, where=~outside)
        return y

    def aggregate(self, reports: np.ndarray) -> np.ndarray:
        reports = np.asarray(reports, dtype=float)
        return np.array([reports.sum(), np.dot(reports, reports)])   # Σy, and Σy² for the variance

    def estimate(self, summary: np.ndarray, n: int) -> np.ndarray:
        return np.asarray(summary, dtype=float)[:1] / n

    def second_moment(self, summary: np.ndarray, n: int) -> float | None:
        """Unbiased E[x²] from the release, clipped to [0, 1]: E[y²] = Var + x² = x²·t/(t−1) + (t+3)/(3(t−1)²),
        so (Σy²/n − (t+3)/(3(t−1)²))·(t−1)/t. None without users."""
        if n <= 0 or len(summary) < 2:
            return None
        floor = (self.t + 3) / (3 * (self.t - 1) ** 2)
        return float(np.clip((float(summary[1]) / n - floor) * (self.t - 1) / self.t, 0.0, 1.0))

    def variance(self, truth: np.ndarray, n: int, second_moment: float | None = None) -> np.ndarray:
        m2 = np.ones(np.shape(truth)) if second_moment is None else np.full(np.shape(truth), second_moment)
        return (m2 / (self.t - 1) + (self.t + 3) / (3 * (self.t - 1) ** 2)) / n

    def density(self, x: float, y: np.ndarray) -> np.ndarray:
        left, right = self._interval(np.float64(x))
        high = (math.exp(self.epsilon) - self.t) / (2 * (self.t + 1))
        inside = (y >= left) & (y <= right)
        return np.where(np.abs(y) > self.C, 0.0, np.where(inside, high, high / math.exp(self.epsilon)))

    def realised_density(self, x: float, y: np.ndarray) -> list[Fraction]:
        """The density as drawn: branch probabilities 1 − P_out' (exact: ``outside`` is on the 2^-53 grid) and
        P_out', spread uniformly over the lengths C − 1 and C + 1 computed in floats as :meth:`randomize` does."""
        left, right = self._interval(np.float64(x))
        out = Fraction(self.outside)
        high, low = (1 - out) / Fraction(self.C - 1), out / Fraction(self.C + 1)
        return [Fraction(0) if abs(v) > self.C else high if left <= v <= right else low for v in y]

    @classmethod
    def audit_cases(cls):
        return [cls(e) for e in (0.1, 0.5, 1.0, 2.0, 5.0)]

    @classmethod
    def realised_cases(cls, epsilon: float):
        return [cls(epsilon)]

"""Duchi, Jordan and Wainwright's one-bit mechanism for a value in [-1, 1].

Privacy: ε-LDP as it runs. The user rounds x to a sign b = +1 with probability s(x) ≈ (1+x)/2 (a local,
data-only step), then releases b through the engine's binary randomized response at ε
(:func:`ldpql.mechanisms.rr.flip`, flip probability q' rounded up). The output is +1 with probability
s·(1−q') + (1−s)·q', a mixture of 1−q' and q' for every input, so the ratio over any two inputs is at most
(1−q')/q' ≤ e^ε whatever s realises.
Utility: the report scaled by C = 1/(1 − 2q') ≈ (e^ε+1)/(e^ε-1) is unbiased for x; Var = C² - x² per user, so the mean of n
users has Var = (C² - E[x²])/n ≤ (C² - (E x)²)/n (the bound used when E[x²] is unknown, which is tight for
constant inputs). The release cannot do better: every report is ±C whatever x is, so it carries no
information about E[x²] (the Hybrid Mechanism's PM reports do). Runtime: O(n), two uniforms per user. No exact-aggregate path: the count of +1 reports is
Poisson-binomial in the individual values, not a function of a histogram.
Citations: seed-003-vector.md §4.5 (Duchi et al., one dimension); seed-004-gaussian.md §2.6 (baseline).
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np

from ldpql.mechanisms.base import Randomizer, below, check_epsilon, register
from ldpql.mechanisms.rr import flip, flip_probability, keep_probability


@register
class Duchi(Randomizer):
    """One-bit mechanism on inputs in [-1, 1]; reports are ±1, the summary is their sum."""

    estimates = "mean"
    name = "duchi"

    def __init__(self, epsilon: float):
        check_epsilon("Duchi", epsilon)
        self.epsilon = float(epsilon)
        self.q = flip_probability(self.epsilon)   # the flip probability of the RR that runs
        self.C = 1 / (1 - 2 * self.q)             # 1/(p − q)

    @staticmethod
    def _sign_probability(x: np.ndarray) -> np.ndarray:
        """s(x) = (clip(x) + 1)·0.5, computed exactly as :meth:`randomize` does (the audit reuses it)."""
        half = np.clip(np.asarray(x, dtype=float), -1, 1)
        half += 1
        half *= 0.5
        return half

    def randomize(self, x: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        half = self._sign_probability(x)
        sign_bits = (rng.random(len(x)) < half).view(np.int8)  # unbiased rounding: 1 w.p. (1 + x)/2
        reports = flip(sign_bits, self.epsilon, rng)
        reports *= 2
        reports -= 1
        return reports

    def aggregate(self, reports: np.ndarray) -> np.ndarray:
        return np.array([reports.sum(dtype=np.int64)])

    def estimate(self, summary: np.ndarray, n: int) -> np.ndarray:
        return self.C * np.asarray(summary, dtype=float) / n

    def step(self, n: int) -> float:
        """A report flipping from -1 to +1 moves the estimate by 2C/n."""
        return 2 * self.C / max(n, 1)

    def variance(self, truth: np.ndarray, n: int, second_moment: float | None = None) -> np.ndarray:
        m2 = np.square(truth) if second_moment is None else np.full(np.shape(truth), second_moment)
        return (self.C ** 2 - m2) / n

    def output_distribution(self, x: float) -> np.ndarray:
        p = keep_probability(self.epsilon)
        plus = (1 + x) / 2 * p + (1 - x) / 2 * (1 - p)
        return np.array([1 - plus, plus])

    def realised_distribution(self, x: float) -> list[Fraction]:
        """[P(−1), P(+1)] as drawn: the sign is 1 w.p. ⌈s(x)·2^53⌉/2^53, flipped w.p. q' (RR's realised)."""
        s = below(self._sign_probability(np.array([x]))[0])
        q = Fraction(self.q)
        plus = s * (1 - q) + (1 - s) * q
        return [1 - plus, plus]

    @classmethod
    def audit_cases(cls):
        return [cls(e) for e in (0.1, 0.5, 1.0, 2.0, 5.0)]

    @classmethod
    def realised_cases(cls, epsilon: float):
        return [cls(epsilon)]

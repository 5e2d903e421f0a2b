"""Harmony (Nguyên, Xiao, Yang, Hui, Shin, Shin, "Collecting and Analyzing Data from Smart Device Users with Local
Differential Privacy", 2016) for the mean of a vector in [−1, 1]^d, as spec seed-003 §4.5 restates it: each user
samples one coordinate j uniformly and releases x_j through Duchi et al.'s one-bit mechanism at the full ε.

Privacy: ε-LDP as it runs. The coordinate is drawn by ``rng.integers`` independently of the data, and the bit is
the engine's :class:`~ldpql.mechanisms.duchi.Duchi` (its flip probability rounded up), so for each j the ratio
of any output over two inputs is Duchi's, at most (1 − q')/q' ≤ e^ε.
Utility: x̄̂_j = (d·C/n)·Σ_{i: J_i = j} b_i with C = 1/(1 − 2q') is unbiased; Var x̄̂_j = (d·C² − E[x_j²])/n, at
most (d·C² − x̄_j²)/n: O(d/(nε²)) per coordinate, O(d²/(nε²)) in total (what Collision improves on for sparse
data). Runtime: O(n). Reports are j·2 + (b + 1)/2; the summary counts them.
Citations: spec seed-003-vector.md §4.5; DESIGN §4.5.
"""

from __future__ import annotations

import itertools
from fractions import Fraction

import numpy as np

from ldpql.mechanisms.base import Randomizer, check_epsilon, register
from ldpql.mechanisms.duchi import Duchi


@register
class Harmony(Randomizer):
    """Harmony over [−1, 1]^d; inputs are (n, d) arrays, the estimate is the d coordinate means."""

    name = "harmony"
    estimates = "mean"

    def __init__(self, epsilon: float, d: int):
        check_epsilon("Harmony", epsilon)
        if d < 1:
            raise ValueError(f"Harmony needs d >= 1, got d={d}")
        self.epsilon, self.d, self.duchi = float(epsilon), int(d), Duchi(epsilon)
        self.C = self.duchi.C

    def randomize(self, x: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        x = np.asarray(x, dtype=float).reshape(len(x), self.d)
        j = rng.integers(0, self.d, len(x))
        bits = self.duchi.randomize(x[np.arange(len(x)), j], rng)
        return 2 * j + (bits + 1) // 2

    def aggregate(self, reports: np.ndarray) -> np.ndarray:
        return np.bincount(reports, minlength=2 * self.d)

    def estimate(self, summary: np.ndarray, n: int) -> np.ndarray:
        c = np.asarray(summary, dtype=float).reshape(self.d, 2)
        return self.d * self.C * (c[:, 1] - c[:, 0]) / n

    def variance(self, truth: np.ndarray, n: int, second_moment: np.ndarray | None = None) -> np.ndarray:
        """(d·C² − E[x_j²])/n, with E[x_j²] bounded below by x̄_j² when unknown."""
        m2 = np.square(truth) if second_moment is None else np.asarray(second_moment)
        return (self.d * self.C ** 2 - m2) / n

    # -- the audits: inputs are the points of {−1, 0, 1}^d (tiny d) ---------------------------------------------
    def audit_inputs(self) -> np.ndarray:
        return np.arange(3 ** self.d)

    def _point(self, code: int) -> tuple[float, ...]:
        return list(itertools.product((-1.0, 0.0, 1.0), repeat=self.d))[int(code)]

    def output_distribution(self, x: float) -> np.ndarray:
        return np.concatenate([self.duchi.output_distribution(v) / self.d for v in self._point(x)])

    def realised_distribution(self, x: float) -> list[Fraction]:
        return [p / self.d for v in self._point(x) for p in self.duchi.realised_distribution(v)]

    @classmethod
    def audit_cases(cls):
        return [cls(e, d) for e in (0.1, 1.0, 3.0) for d in (1, 2, 3)]

    @classmethod
    def realised_cases(cls, epsilon: float):
        return [cls(epsilon, 2)]

    def __repr__(self) -> str:
        return f"harmony(epsilon={self.epsilon:g}, d={self.d})"

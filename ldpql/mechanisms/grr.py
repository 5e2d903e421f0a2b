"""Generalized (k-ary) randomized response, GRR / direct encoding / MRR, over d categories.

Privacy: ε-LDP. A user reports its category with probability p = e^ε/(e^ε+d-1) and each other category
with q = 1/(e^ε+d-1); p/q = e^ε exactly. Sampler: keep the true category with probability p - q =
(e^ε-1)/(e^ε+d-1), otherwise report a uniform draw from all d categories (which may be the true one again).
Utility: f̂_i = (c_i/n - q)/(p - q), Var(f̂_i) = [f_i p(1-p) + (1-f_i) q(1-q)]/(n(p-q)²); at f_i = 0 this is
(e^ε+d-2)/(n(e^ε-1)²). Runtime: O(n) (two draws per user).
Exact aggregate: kept_v ~ Bin(h_v, p-q) for each category v; the M = n - Σ kept others are spread by a
uniform Multinomial(M, 1/d).
Citations: seed-002-ksubset.md §3.1 (MRR, Eq. 6) and seed-003-vector.md §4.5 (GRR).
"""

from __future__ import annotations

import math

import numpy as np

from ldpql.mechanisms.base import Randomizer, debias, debiased_variance, register


@register
class GRR(Randomizer):
    """k-ary randomized response on inputs 0..d-1; the summary is the count of reports per category."""

    name = "grr"

    def __init__(self, epsilon: float, d: int):
        if not epsilon > 0 or d < 2:
            raise ValueError(f"GRR needs epsilon > 0 and d >= 2, got epsilon={epsilon}, d={d}")
        self.epsilon, self.input_size = float(epsilon), int(d)
        e = math.exp(self.epsilon)
        self.p, self.q = e / (e + d - 1), 1 / (e + d - 1)

    def randomize(self, x: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        keep = rng.random(len(x)) < self.p - self.q  # privacy-critical: keep w.p. p - q, else uniform on d
        return np.where(keep, x, rng.integers(0, self.input_size, len(x))).astype(np.int64)

    def aggregate(self, reports: np.ndarray) -> np.ndarray:
        return np.bincount(reports, minlength=self.input_size)

    def estimate(self, summary: np.ndarray, n: int) -> np.ndarray:
        return debias(summary, n, self.p, self.q)

    def variance(self, truth: np.ndarray, n: int) -> np.ndarray:
        return debiased_variance(truth, n, self.p, self.q)

    def sample_aggregate(self, counts: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        kept = rng.binomial(np.asarray(counts, dtype=np.int64), self.p - self.q)
        spread = rng.multinomial(int(np.sum(counts) - kept.sum()), np.full(self.input_size, 1 / self.input_size))
        return kept + spread

    def output_distribution(self, x: float) -> np.ndarray:
        out = np.full(self.input_size, self.q)
        out[int(x)] = self.p
        return out

    @classmethod
    def audit_cases(cls):
        return [cls(e, d) for d in (2, 3, 5, 8) for e in (0.1, 1.0, 2.5, 6.0)]

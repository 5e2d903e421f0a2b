"""The identity "randomizer" for EPSILON INF: noise off, the oracle of DESIGN §5.

It is not a local randomizer (ε = ∞) and is deliberately absent from the registry, so the planner only
uses it when a connection opened with ``evaluation=True`` asks for EPSILON INF. With it, every protocol
computes the exact statistic of the clamped, encoded data, which must equal DuckDB's plain SQL.
"""

from __future__ import annotations

import math

import numpy as np

from ldpql.mechanisms.base import Randomizer


class Identity(Randomizer):
    """Reports the input itself; the summary is the histogram (finite inputs) or the sum (continuous)."""

    name = "identity"

    def __init__(self, d: int | None = None):
        self.epsilon, self.input_size = math.inf, d

    def randomize(self, x: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        return np.asarray(x)

    def aggregate(self, reports: np.ndarray) -> np.ndarray:
        if self.input_size is None:
            return np.array([np.sum(reports, dtype=float)])
        return np.bincount(reports, minlength=self.input_size)

    def estimate(self, summary: np.ndarray, n: int) -> np.ndarray:
        return np.asarray(summary, dtype=float) / n

    def variance(self, truth: np.ndarray, n: int, second_moment: float | None = None) -> np.ndarray:
        return np.zeros(np.shape(truth))

    def sample_aggregate(self, counts: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        return np.asarray(counts)

    @classmethod
    def audit_cases(cls):
        return []

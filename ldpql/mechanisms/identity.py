"""The identity "randomizer" for EPSILON INF: noise off, the oracle of DESIGN §5.

It is not a local randomizer (ε = ∞) and is deliberately absent from the registry, so the planner only
uses it when a connection opened with ``evaluation=True`` asks for EPSILON INF. With it, every protocol
computes the exact statistic of the clamped, encoded data, which must equal DuckDB's plain SQL.
"""

from __future__ import annotations

import math

import numpy as np

from ldpql.mechanisms.base import NoiseOff, Randomizer


class Identity(NoiseOff, Randomizer):
    """Reports the input itself. Its estimate has the shape of the randomizer it replaces (``like``): the
    histogram of a finite input, the fraction of ones of a bit, or the mean of a continuous input."""

    name = "identity"

    def __init__(self, d: int | None = None, estimates: str = "histogram"):
        self.epsilon, self.input_size, self.estimates = math.inf, d, estimates

    @classmethod
    def like(cls, r: Randomizer) -> "Identity":
        """The noise-off twin of ``r``: the same input and the same shape of estimate."""
        return cls(r.input_size, r.estimates)

    def randomize(self, x: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        return np.asarray(x)

    def aggregate(self, reports: np.ndarray) -> np.ndarray:
        if self.estimates == "histogram":
            return np.bincount(reports, minlength=self.input_size)
        return np.array([np.sum(reports, dtype=float)])

    def estimate(self, summary: np.ndarray, n: int) -> np.ndarray:
        return np.asarray(summary, dtype=float) / n

    def variance(self, truth: np.ndarray, n: int, second_moment: float | None = None) -> np.ndarray:
        return np.zeros(np.shape(truth))

    def sample_aggregate(self, counts: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        counts = np.asarray(counts)
        return counts if self.estimates == "histogram" else np.array([float(np.dot(counts, np.arange(len(counts))))])

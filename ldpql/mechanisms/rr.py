"""Binary randomized response (Warner 1965): the engine's one binary RR, reused by every bit-based mechanism.

Privacy: ε-LDP as the sampler runs. A user flips its bit with probability q = 1/(e^ε+1) and keeps it
otherwise, so for the two inputs the probability of any output differs by the factor (1-q)/q = e^ε. The flip,
the rare event, is drawn directly (``random() < q``) with q rounded *up* to the 2^-53 grid ``random()`` draws
on, so rounding can only add noise: the realised ratio is (1-q')/q' ≤ e^ε (within ~1e-3 of ε at the cap).
Drawing the keep instead (``random() < 1/(1+e^-ε)``) rounds to certainty from ε ≈ 36.8: no noise at all.
Utility: the fraction π of ones is estimated by π̂ = (c/n - q)/(1 - 2q), with Var(π̂) = q(1-q)/(n(1-2q)²)
for every π, using the realised q (the estimator inverts the sampler that runs).
Runtime: O(n), one uniform per user. Exact aggregate: c = n1 - Bin(n1, q) + Bin(n0, q) (flips drawn directly).
Citations: spec seed-000-min.md §1.5 (as used for min finding), seed-001-quantile.md §1.4; DESIGN §4.5.
"""

from __future__ import annotations

import functools
import math
from fractions import Fraction

import numpy as np

from ldpql.mechanisms.base import UNIFORM_BITS, HitRates, Randomizer, check_epsilon, grid_ceil, register


@functools.lru_cache(maxsize=1024)
def flip_threshold(epsilon: float) -> int:
    """k = ⌈2^53/(e^ε+1)⌉: :func:`flip` flips a bit iff ``random()`` (= j/2^53) is below k/2^53, so w.p. k/2^53
    exactly, never less than 1/(e^ε+1). Zero for ε = ∞ (noise off)."""
    return 0 if math.isinf(epsilon) else grid_ceil(1.0 / (1.0 + math.exp(epsilon)))


def flip_probability(epsilon: float) -> float:
    """q = k/2^53, the realised probability that :func:`flip` flips a bit (exact as a double)."""
    return math.ldexp(flip_threshold(epsilon), -UNIFORM_BITS)


def keep_probability(epsilon: float) -> float:
    """p = 1 - q ≈ e^ε/(e^ε+1): the realised probability that a user reports its true bit (exact as a double)."""
    return 1.0 - flip_probability(epsilon)


def flip(bits: np.ndarray, epsilon: float, rng: np.random.Generator) -> np.ndarray:
    """Each bit (0/1) flipped with probability flip_probability(ε), kept otherwise."""
    flipped = rng.random(len(bits)) < flip_probability(epsilon)  # privacy-critical: the rare event, drawn directly
    return np.not_equal(bits, flipped).view(np.int8)  # a bit differs from the coin iff (1 and kept) or (0 and flipped)


@register
class RandomizedResponse(HitRates, Randomizer):
    """ε-LDP binary randomized response on a 0/1 input; the summary is the count of 1 reports."""

    estimates = "ones"
    name = "rr"

    def __init__(self, epsilon: float):
        check_epsilon("randomized response", epsilon)
        self.epsilon = float(epsilon)
        self.input_size = 2
        self.q = flip_probability(self.epsilon)
        self.p = 1 - self.q   # a 1 is reported w.p. p by holders of a 1, w.p. q by the others (HitRates)

    def randomize(self, x: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        return flip(np.asarray(x, dtype=np.int8), self.epsilon, rng)

    def aggregate(self, reports: np.ndarray) -> np.ndarray:
        return np.array([np.count_nonzero(reports)], dtype=np.int64)

    def sample_aggregate(self, counts: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        n0, n1 = int(counts[0]), int(counts[1])
        return np.array([n1 - rng.binomial(n1, self.q) + rng.binomial(n0, self.q)], dtype=np.int64)

    def output_distribution(self, x: float) -> np.ndarray:
        return np.array([self.q, self.p]) if x == 1 else np.array([self.p, self.q])

    def realised_distribution(self, x: float) -> list[Fraction]:
        q = Fraction(self.q)   # exact: on the 2^-53 grid, fixed at construction with the sampler's threshold
        return [q, 1 - q] if x == 1 else [1 - q, q]

    @classmethod
    def audit_cases(cls):
        return [cls(e) for e in (0.1, 0.5, 1.0, math.log(3), 2.0, 5.0)]

    @classmethod
    def realised_cases(cls, epsilon: float):
        return [cls(epsilon)]


"""Binary randomized response (Warner 1965): the engine's one binary RR, reused by every bit-based mechanism.

Privacy: ε-LDP. A user keeps its bit with probability p = e^ε/(e^ε+1) and flips it otherwise, so for the
two inputs the probability of any output differs by the factor p/(1-p) = e^ε exactly.
Utility: the fraction π of ones is estimated by π̂ = (c/n - (1-p))/(2p-1), with
Var(π̂) = p(1-p)/(n(2p-1)²) for every π (p(1-p) is the same for both inputs).
Runtime: O(n), one uniform per user. Exact aggregate: c ~ Bin(n1, p) + Bin(n0, 1-p).
Citations: spec seed-000-min.md §1.5 (as used for min finding), seed-001-quantile.md §1.4.
"""

from __future__ import annotations

import math

import numpy as np

from ldpql.mechanisms.base import HitRates, Randomizer, register


def keep_probability(epsilon: float) -> float:
    """p = e^ε/(e^ε+1): the probability that a user reports its true bit."""
    return 1.0 if math.isinf(epsilon) else 1.0 / (1.0 + math.exp(-epsilon))


def flip(bits: np.ndarray, epsilon: float, rng: np.random.Generator) -> np.ndarray:
    """Each bit (0/1) kept with probability keep_probability(ε), flipped otherwise."""
    keep = rng.random(len(bits)) < keep_probability(epsilon)  # privacy-critical: the only coin
    return np.equal(bits, keep).view(np.int8)  # a 0/1 bit equals the coin iff (kept and 1) or (flipped and 0)


@register
class RandomizedResponse(HitRates, Randomizer):
    """ε-LDP binary randomized response on a 0/1 input; the summary is the count of 1 reports."""

    estimates = "ones"
    name = "rr"

    def __init__(self, epsilon: float):
        if not epsilon > 0:
            raise ValueError(f"epsilon must be positive, got {epsilon}")
        self.epsilon = float(epsilon)
        self.input_size = 2
        self.p = keep_probability(self.epsilon)
        self.q = 1 - self.p   # a 1 is reported w.p. p by holders of a 1, w.p. 1 - p by the others (HitRates)

    def randomize(self, x: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        return flip(np.asarray(x, dtype=np.int8), self.epsilon, rng)

    def aggregate(self, reports: np.ndarray) -> np.ndarray:
        return np.array([np.count_nonzero(reports)], dtype=np.int64)

    def sample_aggregate(self, counts: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        n0, n1 = int(counts[0]), int(counts[1])
        return np.array([rng.binomial(n1, self.p) + rng.binomial(n0, 1 - self.p)], dtype=np.int64)

    def output_distribution(self, x: float) -> np.ndarray:
        return np.array([1 - self.p, self.p]) if x == 1 else np.array([self.p, 1 - self.p])

    @classmethod
    def audit_cases(cls):
        return [cls(e) for e in (0.1, 0.5, 1.0, math.log(3), 2.0, 5.0)]

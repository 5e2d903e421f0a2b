"""Basic RAPPOR without Bloom filter, a.k.a. BRR (binary randomized response) or SUE, over d categories.

Privacy: ε-LDP, tight. A user one-hot encodes its category and sends every bit through the engine's binary
randomized response (:func:`ldpql.mechanisms.rr.flip`) at ε/2: two inputs differ in two bits, so every
output's probability changes by at most (e^{ε/2})² = e^ε (spec §3.1, Eq. 7; RAPPOR's one-time response). The
flips are RR's, drawn directly with q rounded up, so the realised ratio ((1−q)/q)² ≤ e^ε as it runs.
Utility: the true bit is 1 w.p. p = 1 − q, every other bit w.p. q (RR's realised flip probability at ε/2);
f̂_i = (c_i/n − q)/(p − q) is unbiased (it does not sum to 1), Var(f̂_i) = e^{ε/2}/(n(e^{ε/2} − 1)²) for every
f_i because p(1 − p) = q(1 − q), and E‖f̂ − f‖² = d·e^{ε/2}/(n(e^{ε/2} − 1)²). BRR is a mixture of k-subset
mechanisms over k = 0..d, so ℓ2-optimal k-SS is never worse (spec §4.4, Thm 3.2).
Runtime: O(n·d) coins. Exact aggregate: the bits are independent, so c_i ~ Bin(h_i, p) + Bin(n − h_i, q)
independently over i.
Citations: seed-002-ksubset.md §3.1 (BRR, Eq. 7-8, [C] flip probability 1/(e^{ε/2}+1)), §4.3.
"""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import numpy as np

from ldpql.mechanisms.base import HitRates, Randomizer, check_categorical, register
from ldpql.mechanisms.ksubset import independent_counts
from ldpql.mechanisms.oue import column_counts
from ldpql.mechanisms.rr import flip, keep_probability


@register
class BRR(HitRates, Randomizer):
    """Basic RAPPOR / symmetric unary encoding on inputs 0..d-1; reports are n x d 0/1 matrices."""

    name = "brr"

    def __init__(self, epsilon: float, d: int):
        check_categorical("BRR", epsilon, d)
        self.epsilon, self.input_size, self.report_width = float(epsilon), int(d), int(d)
        self.p = keep_probability(self.epsilon / 2)  # privacy-critical: ε/2 per bit, two bits differ
        self.q = 1 - self.p

    def randomize(self, x: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        n, d = len(x), self.input_size
        one_hot = np.zeros((n, d), dtype=np.int8)
        one_hot[np.arange(n), x] = 1
        return flip(one_hot.reshape(-1), self.epsilon / 2, rng).reshape(n, d).view(np.uint8)

    def aggregate(self, reports: np.ndarray) -> np.ndarray:
        return column_counts(reports)

    def sample_aggregate(self, counts: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        return independent_counts(counts, self.p, self.q, rng)

    def output_distribution(self, x: float) -> np.ndarray:
        """Probability of each of the 2^d bit vectors, in itertools.product order."""
        probs = np.full(self.input_size, self.q)
        probs[int(x)] = self.p
        return np.array([np.prod(np.where(np.array(bits) == 1, probs, 1 - probs))
                         for bits in itertools.product((0, 1), repeat=self.input_size)])

    def realised_distribution(self, x: float) -> list[Fraction]:
        """As :meth:`output_distribution`, with RR's realised flip probability at ε/2 as an exact rational."""
        q = Fraction(self.q)   # RR's flip probability at ε/2, exact on the 2^-53 grid
        probs = [q] * self.input_size
        probs[int(x)] = 1 - q
        return [math.prod(p if b else 1 - p for p, b in zip(probs, bits))
                for bits in itertools.product((0, 1), repeat=self.input_size)]

    @classmethod
    def audit_cases(cls):
        return [cls(e, d) for d in (2, 3, 5) for e in (0.1, 1.0, math.log(3), 2.5, 8.0)]

    @classmethod
    def realised_cases(cls, epsilon: float):
        return [cls(epsilon, d) for d in (2, 3, 5)]

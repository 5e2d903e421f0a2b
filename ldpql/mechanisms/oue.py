"""Optimized unary encoding, OUE (Wang, Blocki, Li, Jha 2017), over d categories.

Privacy: ε-LDP. A user one-hot encodes its category; the true bit is reported as 1 with probability p = 1/2,
every other bit independently with probability q. The worst output ratio is p(1-q)/((1-p)q) = (1-q)/q.
OUE's q is 1/(e^ε+1), the rare event; we draw each bit by comparing a uniform 16-bit integer with a threshold
(32- or 64-bit when q is too small for fewer bits to resolve it within 1e-3 of ε), so q is rounded *up* to
that grid: q = ceil(2^w/(e^ε+1))/2^w. That keeps (1-q)/q ≤ e^ε (conservative by at most ~1e-3 in ε up to the
cap) and everything below (estimator, variance, audit) uses the q that actually runs.
Utility: f̂_i = (c_i/n - q)/(p - q); Var(f̂_i) = [f_i p(1-p) + (1-f_i) q(1-q)]/(n(p-q)²), which at f_i = 0
and the ideal q is 4e^ε/(n(e^ε-1)²). Runtime: O(n·d) 16-bit draws.
Exact aggregate: c_i ~ Bin(h_i, p) + Bin(n - h_i, q), independent over i.
Citations: seed-002-ksubset.md §3.2 (OUE), seed-003-vector.md §4.5; seed-001-quantile.md §2.7 uses it.
"""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import numpy as np

from ldpql.mechanisms.base import HitRates, Randomizer, check_categorical, grid_ceil, register

WORD_TYPES = {16: np.uint16, 32: np.uint32, 64: np.uint64}


def _grid_bits(epsilon: float) -> int:
    """The fewest of 16, 32 or 64 bits per draw that resolve q to 1e-3 of ε (64 from ε ≈ 15 to the cap)."""
    return next((w for w in (16, 32) if math.ldexp(1.0, w) / (math.exp(epsilon) + 1) >= 1000), 64)


def column_counts(bits: np.ndarray) -> np.ndarray:
    """Column sums of an n x d 0/1 uint8 matrix. Row-major: add 255 rows at a time in uint8 (4x faster than
    .sum(0)). Column-major (what :meth:`OUE.randomize` returns): read each column as 64-bit words of 8 byte
    lanes and add 255 words at a time, so no lane can carry into the next (~8x fewer additions)."""
    n, d = bits.shape
    if not bits.flags.f_contiguous or bits.flags.c_contiguous:
        whole = (n // 255) * 255
        out = bits[:whole].reshape(-1, 255, d).sum(axis=1, dtype=np.uint8).sum(axis=0, dtype=np.int64)
        return out + bits[whole:].sum(axis=0, dtype=np.int64)
    rows = bits.T  # d x n, C-contiguous
    whole = (n // 2040) * 2040
    lanes = rows[:, :whole].view(np.uint64).reshape(d, -1, 255).sum(axis=2, dtype=np.uint64)
    out = lanes.view(np.uint8).reshape(d, -1).sum(axis=1, dtype=np.int64)
    return out + rows[:, whole:].sum(axis=1, dtype=np.int64)


@register
class OUE(HitRates, Randomizer):
    """Optimized unary encoding on inputs 0..d-1; reports are n x d 0/1 matrices, the summary counts 1s per bit."""

    name = "oue"

    def __init__(self, epsilon: float, d: int):
        check_categorical("OUE", epsilon, d)
        self.epsilon, self.input_size, self.report_width = float(epsilon), int(d), int(d)
        self.width = _grid_bits(self.epsilon)
        self.threshold = grid_ceil(1 / (math.exp(self.epsilon) + 1), self.width)  # rounds q up: conservative
        self.p, self.q = 0.5, math.ldexp(self.threshold, -self.width)

    def randomize(self, x: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """Privacy-critical: every bit is 1 iff a uniform 16-, 32- or 64-bit integer is below the threshold, so
        w.p. q = threshold/2^width exactly (the rare event, drawn directly); then each user's true bit is
        replaced by a coin that is 1 w.p. p = 1/2 (a uniform byte below 128). Built column by column (d x n,
        so counting is fast) and returned as its n x d transpose: row i is user i's report."""
        n, d = len(x), self.input_size
        per_word = 64 // self.width
        words = rng.bit_generator.random_raw(-(-n * d // per_word))
        uniform = words.view(WORD_TYPES[self.width])[: n * d]
        bits = (uniform < WORD_TYPES[self.width](self.threshold)).reshape(d, n)
        coins = rng.bit_generator.random_raw(-(-n // 8)).view(np.uint8)[:n] < 128
        bits[x, np.arange(n)] = coins
        return bits.T.view(np.uint8)

    def aggregate(self, reports: np.ndarray) -> np.ndarray:
        return column_counts(reports)

    def sample_aggregate(self, counts: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        counts = np.asarray(counts, dtype=np.int64)
        return rng.binomial(counts, self.p) + rng.binomial(counts.sum() - counts, self.q)

    def output_distribution(self, x: float) -> np.ndarray:
        """Probability of each of the 2^d bit vectors, in itertools.product order."""
        probs = np.full(self.input_size, self.q)
        probs[int(x)] = self.p
        return np.array([np.prod(np.where(np.array(bits) == 1, probs, 1 - probs))
                         for bits in itertools.product((0, 1), repeat=self.input_size)])

    def realised_distribution(self, x: float) -> list[Fraction]:
        """As :meth:`output_distribution`, exactly: q = threshold/2^width, p = 128/256."""
        q = Fraction(self.threshold, 1 << self.width)
        probs = [q] * self.input_size
        probs[int(x)] = Fraction(1, 2)
        return [math.prod(p if b else 1 - p for p, b in zip(probs, bits))
                for bits in itertools.product((0, 1), repeat=self.input_size)]

    @classmethod
    def audit_cases(cls):
        return [cls(e, d) for d in (2, 3, 5) for e in (0.1, 1.0, 2.5, 6.0, 12.0)]

    @classmethod
    def realised_cases(cls, epsilon: float):
        return [cls(epsilon, d) for d in (2, 3, 5)]

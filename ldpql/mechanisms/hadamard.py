"""Hadamard response, high-privacy form (Acharya, Sun, Zhang 2019), over d categories.

Privacy: ε-LDP, tight. With K = 2^⌈log₂(d+1)⌉ and the Sylvester matrix H_K (H[r, j] = (−1)^{popcount(r & j)}),
input x owns the K/2 outputs C_x = {j : H[x+1, j] = +1} (row 0, all ones, is skipped). A user reports
j ∈ [K] with probability 2e^ε/(K(e^ε+1)) if j ∈ C_x and 2/(K(e^ε+1)) otherwise: every output's probability
takes one of two values whose ratio is e^ε. Sampler: a uniform j; with probability e^ε/(e^ε+1) it must lie in
C_x, else outside; if it lies on the wrong side, flipping the lowest set bit of x+1 in j moves it across
(a bijection between the two halves), so j is uniform on the wanted side.
Utility: a holder of x reports into C_x w.p. p = e^ε/(e^ε+1), anyone else w.p. q = 1/2 (two distinct rows
agree on exactly K/4 positions of C_x). With c_x = #{users with j_u ∈ C_x}, f̂_x = (c_x/n − 1/2)/(p − 1/2) =
2(e^ε+1)(c_x/n − 1/2)/(e^ε−1) is unbiased, Var(f̂_x) = [f_x p(1−p) + (1−f_x)/4]/(n(p−1/2)²)
≈ (e^ε+1)²/(n(e^ε−1)²), so HR is close to OUE only for small ε; reports have log₂ K bits.
Runtime: O(1) per user; the aggregator keeps the K report counts and gets every c_x at once with a fast
Walsh–Hadamard transform, O(K log K). Exact aggregate: the summary is a sum of independent categorical
draws, so it is drawn from the input histogram (multinomials per input, or users replayed from it).
Citations: seed-002-ksubset.md §3.2 (Hadamard response; "verify against its own paper").
"""

from __future__ import annotations

import math

import numpy as np

from ldpql.mechanisms.base import HitRates, Randomizer, check_categorical, register
from ldpql.mechanisms.information import walsh_hadamard
from ldpql.mechanisms.rr import keep_probability


def hadamard_size(d: int) -> int:
    """K = 2^⌈log₂(d + 1)⌉: enough rows to skip the all-ones row 0."""
    return 1 << max(1, math.ceil(math.log2(d + 1)))


def parity(v: np.ndarray) -> np.ndarray:
    """popcount(v) mod 2, elementwise, for non-negative integers below 2^62 (xor-folding; numpy < 2 has no
    bitwise_count)."""
    v = np.asarray(v, dtype=np.int64)
    for shift in (32, 16, 8, 4, 2, 1):
        v = v ^ (v >> shift)
    return v & 1


@register
class HadamardResponse(HitRates, Randomizer):
    """Hadamard response on inputs 0..d-1; a report is one output index j in 0..K-1."""

    name = "hadamard"

    def __init__(self, epsilon: float, d: int):
        check_categorical("Hadamard response", epsilon, d)
        self.epsilon, self.input_size = float(epsilon), int(d)
        self.size = hadamard_size(self.input_size)
        self.p, self.q = keep_probability(self.epsilon), 0.5   # P(j ∈ C_x | x), P(j ∈ C_x | another x)

    def randomize(self, x: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        row = np.asarray(x, dtype=np.int64) + 1
        j = rng.integers(0, self.size, len(row), dtype=np.int64)
        inside = rng.random(len(row)) < self.p  # privacy-critical: j ∈ C_x w.p. e^ε/(e^ε+1)
        wrong_side = (parity(row & j) == 0) != inside
        return j ^ np.where(wrong_side, row & -row, 0)

    def aggregate(self, reports: np.ndarray) -> np.ndarray:
        return np.bincount(reports, minlength=self.size)

    def hits(self, summary: np.ndarray) -> np.ndarray:
        """c_x = #{reports in C_x} for x = 0..d-1: (n + (H·counts)[x+1])/2."""
        summary = np.asarray(summary, dtype=float)
        return (summary.sum() + walsh_hadamard(summary)[1:self.input_size + 1]) / 2

    def estimate(self, summary: np.ndarray, n: int) -> np.ndarray:
        return super().estimate(self.hits(summary), n)

    def sample_aggregate(self, counts: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """Q(·|x) = (1 − κ)·uniform([K]) + κ·uniform(C_x) with κ = (e^ε−1)/(e^ε+1): per input x, Bin(h_x, κ) users
        go to uniform draws from C_x and the rest to one uniform multinomial over [K]. That costs O(d·K), so when
        it exceeds the users' count the users are replayed from the histogram instead (same distribution)."""
        counts = np.asarray(counts, dtype=np.int64)
        K = self.size
        if self.input_size * K > 4 * counts.sum():
            return self.aggregate(self.randomize(np.repeat(np.arange(self.input_size), counts), rng))
        kept = rng.binomial(counts, (math.exp(self.epsilon) - 1) / (math.exp(self.epsilon) + 1))
        out = rng.multinomial(int(counts.sum() - kept.sum()), np.full(K, 1 / K))
        j = np.arange(K)
        for x in np.flatnonzero(kept):
            members = np.flatnonzero(parity((x + 1) & j) == 0)
            out[members] += rng.multinomial(int(kept[x]), np.full(len(members), 1 / len(members)))
        return out

    def output_distribution(self, x: float) -> np.ndarray:
        """P(j | x) for j = 0..K-1."""
        inside = parity((int(x) + 1) & np.arange(self.size)) == 0
        e = math.exp(self.epsilon)
        return np.where(inside, e, 1.0) * 2 / (self.size * (e + 1))

    @classmethod
    def audit_cases(cls):
        return [cls(e, d) for d in (2, 3, 5, 8) for e in (0.1, 1.0, 2.5, 8.0)]

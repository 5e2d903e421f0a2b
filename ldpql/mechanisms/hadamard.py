"""Hadamard response, high-privacy form (Acharya, Sun, Zhang 2019), over d categories.

Privacy: ε-LDP, tight. With K = 2^⌈log₂(d+1)⌉ and the Sylvester matrix H_K (H[r, j] = (−1)^{popcount(r & j)}),
input x owns the K/2 outputs C_x = {j : H[x+1, j] = +1} (row 0, all ones, is skipped). A user reports
j ∈ [K] with probability 2e^ε/(K(e^ε+1)) if j ∈ C_x and 2/(K(e^ε+1)) otherwise: every output's probability
takes one of two values whose ratio is e^ε. Sampler: a uniform j (``rng.integers``: exact); with RR's flip
probability q = 1/(e^ε+1) (the rare event, drawn directly and rounded up: :func:`~ldpql.mechanisms.rr.flip_probability`)
it must lie outside C_x, else inside; if it lies on the wrong side, flipping the lowest set bit of x+1 in j
moves it across (a bijection between the two halves), so j is uniform on the wanted side. Realised ratio
(1−q')/q' ≤ e^ε.
Utility: a holder of x reports into C_x w.p. p = 1 − q' ≈ e^ε/(e^ε+1), anyone else w.p. 1/2 (two distinct rows
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
from fractions import Fraction

import numpy as np

from ldpql.mechanisms.base import HitRates, Randomizer, check_categorical, register
from ldpql.mechanisms.information import walsh_hadamard
from ldpql.mechanisms.rr import flip_probability, keep_probability


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
        outside = rng.random(len(row)) < flip_probability(self.epsilon)  # privacy-critical: j ∉ C_x w.p. q'
        wrong_side = (parity(row & j) == 0) == outside
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
        """Q(·|x) = (1 − κ)·uniform([K]) + κ·uniform(C_x) with 1 − κ = 2q': per input x, Bin(h_x, 2q') users go to
        one uniform multinomial over [K] and the rest to uniform draws from C_x. That costs O(d·K), so when
        it exceeds the users' count the users are replayed from the histogram instead (same distribution)."""
        counts = np.asarray(counts, dtype=np.int64)
        K = self.size
        if self.input_size * K > 4 * counts.sum():
            return self.aggregate(self.randomize(np.repeat(np.arange(self.input_size), counts), rng))
        moved = rng.binomial(counts, 2 * flip_probability(self.epsilon))  # the rare event, drawn directly
        kept = counts - moved
        out = rng.multinomial(int(moved.sum()), np.full(K, 1 / K))
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

    def realised_distribution(self, x: float) -> list[Fraction]:
        """P(j | x) as drawn: (1 − q')·2/K inside C_x, q'·2/K outside (j uniform on the wanted half)."""
        q, half = 1 - Fraction(self.p), Fraction(2, self.size)   # p = 1 - q' exactly (both on the 2^-53 grid)
        inside = parity((int(x) + 1) & np.arange(self.size)) == 0
        return [(1 - q) * half if i else q * half for i in inside]

    @classmethod
    def audit_cases(cls):
        return [cls(e, d) for d in (2, 3, 5, 8) for e in (0.1, 1.0, 2.5, 8.0)]

    @classmethod
    def realised_cases(cls, epsilon: float):
        return [cls(epsilon, d) for d in (2, 5, 8)]

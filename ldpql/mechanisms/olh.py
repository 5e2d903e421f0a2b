"""Optimized local hashing, OLH (Wang, Blocki, Li, Jha 2017), over d categories.

Privacy: ε-LDP, tight. Each user draws a public hash h: [d] → [g] from a family that does not depend on its
value, and reports (h, y) with y = GRR over [g] of h(x) (the engine's :class:`~ldpql.mechanisms.grr.GRR`).
For a fixed h the probability of y changes by at most e^ε between two inputs, and h carries no information.
The family is Carter–Wegman, h_{a,b}(v) = ((a·v + b) mod P) mod g with a ∈ [1, P−1], b ∈ [0, P−1] and the
Mersenne prime P = 2^31 − 1: plain integer arithmetic, so results do not depend on a hashing library's version.
Utility: c_i = #{users with h_u(i) = y_u}. A holder of i counts w.p. p = e^ε/(e^ε + g − 1); a non-holder
w.p. q = p·γ + (1 − γ)/(e^ε + g − 1), where γ = P(h(i) = h(x)) for i ≠ x is computed exactly for this family
(≈ 1/g, so q ≈ 1/g). f̂_i = (c_i/n − q)/(p − q) is unbiased with Var(f̂_i) = [f_i p(1−p) + (1−f_i)q(1−q)]/(n(p−q)²),
≈ 4e^ε/(n(e^ε−1)²) per bin at g = e^ε + 1 (the OUE variance with O(log d)-bit reports).
Runtime: O(1) per user to report; the aggregator evaluates every report's hash on all d values, O(n·d).
No exact-aggregate path (one user supports about d/g values; the counts have no closed form).
Citations: seed-002-ksubset.md §3.2 (OLH; "verify against its own paper"); Wang et al. USENIX Sec 2017 §4.4.
"""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import numpy as np

from ldpql.mechanisms.base import HitRates, Randomizer, check_epsilon, register
from ldpql.mechanisms.grr import GRR

PRIME = (1 << 31) - 1
HASH_BITS = 62  # (a, b): two 31-bit numbers
AGGREGATE_CELLS = 1 << 21  # reports x values hashed at once by the aggregator


MAX_RANGE = 1 << 20


def hash_range(epsilon: float) -> int:
    """OLH's g = max(2, round(e^ε + 1)), which minimises its variance (capped at 2^20 for huge ε)."""
    return int(min(max(2, round(math.exp(min(epsilon, 30.0)) + 1)), MAX_RANGE))


def collision_probability(g: int, prime: int = PRIME) -> float:
    """γ = P(h(v) = h(w)) for v ≠ w < prime: (a·v + b, a·w + b) mod P is uniform over the P(P−1) pairs of
    distinct residues, and a pair collides when both residues are equal mod g: Σ_j m_j(m_j − 1)/(P(P − 1)),
    where m_j residues are j mod g (P mod g of them have ⌊P/g⌋ + 1, the others ⌊P/g⌋)."""
    whole, extra = divmod(prime, g)
    pairs = extra * (whole + 1) * whole + (g - extra) * whole * (whole - 1)
    return pairs / (prime * (prime - 1))


@register
class OLH(HitRates, Randomizer):
    """Local hashing on inputs 0..d-1; a report is a row (a, b, y); the summary counts supports per value."""

    name = "olh"

    def __init__(self, epsilon: float, d: int, g: int | None = None, prime: int = PRIME):
        check_epsilon("OLH", epsilon)
        g = hash_range(epsilon) if g is None else int(g)
        if d < 2 or g < 2 or prime <= d:
            raise ValueError(f"OLH needs epsilon > 0, d >= 2, g >= 2 and a prime above d, got epsilon={epsilon}, "
                             f"d={d}, g={g}, prime={prime}")
        self.epsilon, self.input_size, self.g, self.prime = float(epsilon), int(d), g, int(prime)
        self.report_width = 3  # (a, b, y); the aggregator bounds its own memory (AGGREGATE_CELLS)
        self.grr = GRR(self.epsilon, g)
        gamma = collision_probability(g, self.prime)
        self.p, self.q = self.grr.p, self.grr.p * gamma + self.grr.q * (1 - gamma)

    def hash(self, a: np.ndarray, b: np.ndarray, v: np.ndarray) -> np.ndarray:
        """h_{a,b}(v) = ((a·v + b) mod P) mod g; a·v + b < 2^62 for v < 2^31, so int64 is exact."""
        return (a * v + b) % self.prime % self.g

    def randomize(self, x: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        n = len(x)
        a = rng.integers(1, self.prime, n, dtype=np.int64)   # the public hash: independent of x
        b = rng.integers(0, self.prime, n, dtype=np.int64)
        y = self.grr.randomize(self.hash(a, b, np.asarray(x, dtype=np.int64)), rng)  # privacy-critical: GRR on h(x)
        return np.stack([a, b, y.astype(np.int64)], axis=1)

    def aggregate(self, reports: np.ndarray) -> np.ndarray:
        values, out = np.arange(self.input_size, dtype=np.int64), np.zeros(self.input_size, dtype=np.int64)
        step = max(1, AGGREGATE_CELLS // self.input_size)   # bounds the reports x values hash table in memory
        for i in range(0, len(reports), step):
            a, b, y = (reports[i:i + step, j, None] for j in range(3))
            out += np.count_nonzero(self.hash(a, b, values) == y, axis=0)
        return out

    def output_distribution(self, x: float) -> np.ndarray:
        """P((a, b, y) | x) for every hash (a, b) and y, in itertools.product order (small primes only)."""
        out = []
        for a, b in itertools.product(range(1, self.prime), range(self.prime)):
            out.extend(self.grr.output_distribution(self.hash(a, b, int(x))))
        return np.array(out) / ((self.prime - 1) * self.prime)

    def realised_distribution(self, x: float) -> list[Fraction]:
        """As :meth:`output_distribution`, with the inner GRR's realised probabilities ((a, b) are drawn by
        ``rng.integers``: exactly uniform)."""
        hashes = (self.prime - 1) * self.prime
        return [p / hashes for a, b in itertools.product(range(1, self.prime), range(self.prime))
                for p in self.grr.realised_distribution(self.hash(a, b, int(x)))]

    @classmethod
    def audit_cases(cls):
        return [cls(e, d, prime=p) for d, p in ((2, 3), (3, 5), (5, 7)) for e in (0.1, 1.0, 2.5, 6.0)]

    @classmethod
    def realised_cases(cls, epsilon: float):
        """Small hash families; g = 2 and 4 (the default g grows to 2^20 at large ε, whose GRR the GRR cases
        audit at the same ε)."""
        return [cls(epsilon, d, g=g, prime=p) for d, p in ((2, 3), (3, 5)) for g in (2, 4)]

    def __repr__(self) -> str:
        return f"{self.name}(epsilon={self.epsilon:g}, d={self.input_size}, g={self.g})"

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

import functools
import math

import numpy as np

from ldpql.mechanisms.base import HitRates, Randomizer, check_categorical, register


@functools.lru_cache(maxsize=256)
def _keep_thresholds(k: float, d: int) -> tuple[int, int, int]:
    """For :meth:`GRR.randomize`: T = ⌊k·2^32⌋, ⌊f·2^64⌋ for the fraction f = k·2^32 - T (both exact in
    floating point, as k·2^32 is a double), and m = ⌊(2^32 - T - 1)/d⌋ (0 when fewer than d values remain)."""
    scaled = k * 2.0 ** 32
    t = min(math.floor(scaled), (1 << 32) - 1)
    f64 = math.floor((scaled - t) * 2.0 ** 64) if scaled < (1 << 32) else 0
    return t, min(f64, (1 << 64) - 1), ((1 << 32) - t - 1) // d


@register
class GRR(HitRates, Randomizer):
    """k-ary randomized response on inputs 0..d-1; the summary is the count of reports per category."""

    name = "grr"

    def __init__(self, epsilon: float, d: int):
        check_categorical("GRR", epsilon, d)
        self.epsilon, self.input_size = float(epsilon), int(d)
        e = math.exp(self.epsilon)
        self.p, self.q = e / (e + d - 1), 1 / (e + d - 1)

    def randomize(self, x: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """Privacy-critical: keep x w.p. k = p - q, else report a uniform category, from one 32-bit word w per
        user. With K = k·2^32 = T + f (T an integer, 0 <= f < 1): keep iff w < T, or w == T (chance 2^-32) and a
        64-bit word is below ⌊f·2^64⌋, so P(keep) is the double k exactly (to 2^-96). Otherwise w - T - 1 is
        uniform on the 2^32 - T - 1 values above T; its quotient by m = ⌊(2^32 - T - 1)/d⌋ is uniform on
        0..d-1 when below d (each value has m preimages); the < d + 1 words left over redraw the category with
        ``rng.integers`` (exact). Reports are uint32 categories."""
        n, d = len(x), self.input_size
        t, f64, m = _keep_thresholds(self.p - self.q, d)
        w = rng.bit_generator.random_raw((n + 1) // 2).view(np.uint32)[:n]
        keep = w < np.uint32(t)
        ties = np.flatnonzero(w == np.uint32(t))
        if ties.size:
            keep[ties] = rng.bit_generator.random_raw(ties.size) < np.uint64(f64)
        y = (w - np.uint32(t + 1)) // np.uint32(m) if m else np.full(n, d, np.uint32)  # wraps (>= d) if w <= t
        kept = np.flatnonzero(keep)
        y[kept] = x[kept]
        redo = np.flatnonzero(y >= d)  # not kept, and w in the leftover values or a lost tie
        if redo.size:
            y[redo] = rng.integers(0, d, redo.size, dtype=np.uint32)
        return y

    def aggregate(self, reports: np.ndarray) -> np.ndarray:
        return np.bincount(reports, minlength=self.input_size)

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

"""Generalized (k-ary) randomized response, GRR / direct encoding / MRR, over d categories.

Privacy: ε-LDP as the sampler runs. A user reports its category with probability p = e^ε/(e^ε+d-1) and each
other category with q = 1/(e^ε+d-1); p/q = e^ε. Sampler: with probability r = d·q = d/(e^ε+d-1), the rare
event at large ε, report a uniform draw from all d categories (which may be the true one again), otherwise
the true category. r is drawn directly, on a 2^-96 grid and rounded up, so the realised r' ≥ r and the
realised ratio (1 - r' + r'/d)/(r'/d) ≤ e^ε: rounding can only add noise.
Utility: f̂_i = (c_i/n - q)/(p - q), Var(f̂_i) = [f_i p(1-p) + (1-f_i) q(1-q)]/(n(p-q)²) with the realised
p = 1 - r' + r'/d, q = r'/d; at f_i = 0 this is ≈ (e^ε+d-2)/(n(e^ε-1)²). Runtime: O(n) (one 32-bit word per
user, rarely a second draw).
Exact aggregate: moved_v ~ Bin(h_v, r') users of each category v report uniformly (drawn directly), spread by
one uniform Multinomial(Σ moved, 1/d); the others keep their category.
Citations: seed-002-ksubset.md §3.1 (MRR, Eq. 6) and seed-003-vector.md §4.5 (GRR); DESIGN §4.5.
"""

from __future__ import annotations

import functools
import math
from fractions import Fraction

import numpy as np

from ldpql.mechanisms.base import HitRates, Randomizer, check_categorical, register

WORD = 1 << 32
TIE = 1 << 64


@functools.lru_cache(maxsize=256)
def _uniform_thresholds(r: float, d: int) -> tuple[int, int, int]:
    """For :meth:`GRR.randomize`: with R = r·2^32·(1 + 2^-50) = T + f (the margin covers the float rounding of
    r), T = ⌊R⌋, F = ⌈f·2^64⌉ and m = ⌊T/d⌋. A user reports uniformly iff its word w < T, or w == T and a 64-bit
    word is below F: probability (T·2^64 + F)/2^96 ≥ r, rounded up."""
    scaled = math.ldexp(r, 32) * (1 + 2.0 ** -50)
    t = min(math.floor(scaled), WORD - 1)
    f64 = min(math.ceil(math.ldexp(scaled - t, 64)), TIE)
    if f64 == TIE:  # the fraction rounded up to a whole word: one more word value reports uniformly
        t, f64 = min(t + 1, WORD - 1), 0
    return t, f64, t // d


@register
class GRR(HitRates, Randomizer):
    """k-ary randomized response on inputs 0..d-1; the summary is the count of reports per category."""

    name = "grr"

    def __init__(self, epsilon: float, d: int):
        check_categorical("GRR", epsilon, d)
        self.epsilon, self.input_size = float(epsilon), int(d)
        self.thresholds = _uniform_thresholds(d / (math.exp(self.epsilon) + d - 1), self.input_size)
        r = self.uniform_probability()
        self.p, self.q = float(1 - r + r / d), float(r / d)

    def uniform_probability(self) -> Fraction:
        """r' = (T·2^64 + F)/2^96: the exact probability that a user reports a uniform category."""
        t, f64, _ = self.thresholds
        return Fraction(t * (1 << 64) + f64, 1 << 96)

    def randomize(self, x: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """Privacy-critical: one 32-bit word w per user; w < T (or w == T and a 64-bit word below F) reports
        uniformly, w.p. r' exactly. Then w is uniform on 0..T-1, and w // m is uniform on 0..d-1 when below d
        (each value has m preimages); the < d leftover words and the ties redraw the category with
        ``rng.integers`` (exact). Everyone else reports x. Reports are uint32 categories."""
        n, d = len(x), self.input_size
        t, f64, m = self.thresholds
        w = rng.bit_generator.random_raw((n + 1) // 2).view(np.uint32)[:n]
        uniform = w < np.uint32(t)
        ties = np.flatnonzero(w == np.uint32(t))
        if ties.size:
            uniform[ties] = rng.bit_generator.random_raw(ties.size) < np.uint64(f64)
        y = w // np.uint32(m) if m else np.full(n, d, np.uint32)
        np.copyto(y, x, casting="unsafe", where=~uniform)  # x < d: encoded values are clamped to the domain
        redo = np.flatnonzero(y >= d)  # uniform, and w was a leftover value or a tie
        if redo.size:
            y[redo] = rng.integers(0, d, redo.size, dtype=np.uint32)
        return y

    def aggregate(self, reports: np.ndarray) -> np.ndarray:
        return np.bincount(reports, minlength=self.input_size)

    def pair_hits(self) -> tuple[float, float]:
        """A report is one category: it never hits two bins (estimates are negatively correlated)."""
        return 0.0, 0.0

    def sample_aggregate(self, counts: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        counts = np.asarray(counts, dtype=np.int64)
        moved = rng.binomial(counts, float(self.uniform_probability()))  # the rare event, drawn directly
        spread = rng.multinomial(int(moved.sum()), np.full(self.input_size, 1 / self.input_size))
        return counts - moved + spread

    def output_distribution(self, x: float) -> np.ndarray:
        out = np.full(self.input_size, self.q)
        out[int(x)] = self.p
        return out

    def realised_distribution(self, x: float) -> list[Fraction]:
        r = self.uniform_probability()
        out = [r / self.input_size] * self.input_size
        out[int(x)] += 1 - r
        return out

    @classmethod
    def audit_cases(cls):
        return [cls(e, d) for d in (2, 3, 5, 8) for e in (0.1, 1.0, 2.5, 6.0)]

    @classmethod
    def realised_cases(cls, epsilon: float):
        return [cls(epsilon, d) for d in (2, 3, 8, 64)]

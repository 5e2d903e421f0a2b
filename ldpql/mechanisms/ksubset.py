"""The k-subset mechanism, k-SS (Wang et al. 2016; Ye and Barg's "subset selection"), over d categories.

Privacy: ε-LDP, tight. A user holding x reports a set Z of exactly k of the d categories, and a set that
contains x is e^ε times as likely as one that does not: Q(Z|x) = d·e^{ε[x∈Z]}/(C(d,k)(k e^ε + d − k))
(spec §2.1). Sampler (Algorithm 1, spec §2.3): with probability p = k e^ε/(k e^ε + d − k) put x in Z and
draw the k − 1 others uniformly from the d − 1 categories other than x, else draw all k from them. Both
branches give every set of one kind the same probability, p/C(d−1,k−1) and (1−p)/C(d−1,k), whose ratio is e^ε.
Utility: with c_i = #{users whose Z contains i} and the hit rates p = P(i ∈ Z | x = i),
q = P(i ∈ Z | x ≠ i) of spec §2.2, f̂_i = (c_i/n − q)/(p − q) is unbiased and sums to 1;
Var(f̂_i) = [f_i p(1−p) + (1−f_i) q(1−q)]/(n(p−q)²) and E‖f̂ − f‖² = [p(1−p) + (d−1)q(1−q)]/(n(p−q)²) (§2.5).
The subset size: ℓ2-optimal k ∈ {⌊d/(e^ε+1)⌋, ⌈d/(e^ε+1)⌉} (Thm 3.1), MI-optimal k ∈ {⌊k*⌋, ⌈k*⌉} with
k* = d(εe^ε − e^ε + 1)/(e^ε − 1)² (Thm 2.1), both chosen by evaluating the exact objective (§2.6). k = 1 is GRR.
Runtime: O(k) per user (Floyd's algorithm, vectorised over users) to draw Z; the report is Z as a d-bit
bitmap (a set: no order that could reveal x), summed per column by the aggregator.
No exact-aggregate path: one user's k memberships are dependent, and the sum over users has no closed form.
:func:`independent_counts` is the per-item marginal model of the paper's Table 1 (spec §5.2): a research
option for reproducing that table, never a simulation of real reports.
Privacy as it runs: the sampler draws the rare event, x ∉ Z, directly with probability r = 1 − p rounded up
to the 2^-53 grid of ``random()``; the subsets are drawn by ``rng.integers`` (exact). So the realised
Q(Z|x) is (1−r')/C(d−1,k−1) or r'/C(d−1,k), whose ratio ≤ e^ε; the estimator uses the realised hit rates.
Citations: seed-002-ksubset.md §2 (Def. 2.1, Alg. 1-2, §2.5, Thm 2.1, Thm 3.1), §5.2; DESIGN §4.5.
"""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import numpy as np

from ldpql.mechanisms.base import (UNIFORM_BITS, HitRates, Randomizer, check_epsilon, debiased_total_variance,
                                   grid_ceil, register)
from ldpql.mechanisms.information import subset_information
from ldpql.mechanisms.oue import column_counts

USERS_PER_BLOCK = 16_384  # users drawn together: keeps a block's bitmap and index vectors in cache


def hit_rates(d: int, k: int, epsilon: float) -> tuple[float, float]:
    """(p, q) = (P(i ∈ Z | x = i), P(i ∈ Z | x ≠ i)), written in e^{-ε} so that large ε stays exact (§2.2).

    >>> [round(v, 6) for v in hit_rates(4, 2, math.log(3))]   # the worked example of spec §2.5
    [0.75, 0.416667]
    """
    r = math.exp(-epsilon)
    p = k / (k + (d - k) * r)
    q = k * ((k - 1) + (d - k) * r) / ((d - 1) * (k + (d - k) * r))
    return p, q


def total_risk(d: int, k: int, epsilon: float) -> float:
    """n·E‖f̂ − f‖²₂ of k-SS: the same for every true distribution f (spec §2.5).

    >>> round(total_risk(4, 2, math.log(3)), 6)
    8.25
    """
    return debiased_total_variance(d, 1, *hit_rates(d, k, epsilon))


def _stationary_point(d: int, epsilon: float, objective: str) -> float:
    """The real k where the objective's derivative changes sign (spec §2.6): d/(e^ε+1) for 'l2',
    d(εe^ε − e^ε + 1)/(e^ε − 1)² for 'mi' (whose closed form cancels below ε = 1e-3: there its series
    d(1/2 − ε/6) is used)."""
    if objective not in ("l2", "mi"):
        raise ValueError(f"objective must be 'l2' or 'mi', not {objective!r}")
    if epsilon > 700:
        return 0.0
    e = math.exp(epsilon)
    if objective == "l2":
        return d / (e + 1)
    return d * (0.5 - epsilon / 6) if epsilon < 1e-3 else d * (epsilon * e - e + 1) / (e - 1) ** 2


def subset_size(d: int, epsilon: float, objective: str = "l2") -> int:
    """The k of k-SS that minimises the squared-ℓ2 risk ('l2') or maximises the mutual information ('mi').

    Both objectives are unimodal in real k around :func:`_stationary_point`; the exact objective is evaluated
    at its floor and ceiling (and their neighbours, against rounding), clamped to [1, d − 1]; ties go to the
    smaller k, so for 'l2' k = 1 (GRR) wins exactly when e^ε ≥ √((d−1)(d−2)/2).

    >>> subset_size(64, 1.0, "l2"), subset_size(64, 1.0, "mi")   # Table 1, d = 64, ε = 1
    (17, 22)
    """
    base = math.floor(_stationary_point(d, epsilon, objective))
    if d <= 2:
        return 1
    ks = sorted({min(max(k, 1), d - 1) for k in range(base - 1, base + 3)})
    if objective == "l2":
        return min(ks, key=lambda k: (total_risk(d, k, epsilon), k))
    return min(ks, key=lambda k: (-subset_information(d, k, epsilon), k))


def independent_counts(counts: np.ndarray, p: float, q: float, rng: np.random.Generator) -> np.ndarray:
    """The per-item marginal model of the paper's simulations (spec §5.2): c_i ~ Bin(h_i, p) + Bin(n − h_i, q)
    independently over i. Exact for unary encodings, whose bits are independent (BRR's exact path uses it);
    for k-SS and GRR it drops the dependence between the items of one report (their estimates then no longer
    sum to 1), so for them it is a research option only. ``counts`` may hold one histogram per row (the last
    axis is the items)."""
    counts = np.asarray(counts, dtype=np.int64)
    misses = rng.binomial(counts, 1 - p)  # holders who do not report their item: the rare event at large ε
    return counts - misses + rng.binomial(counts.sum(axis=-1, keepdims=True) - counts, q)


def draw_subsets(x: np.ndarray, k: int, d: int, with_x: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Row i: a d-bit bitmap of a set of k categories, uniform among those that contain x[i] (with_x[i]) or
    among those that do not. Floyd's algorithm draws the others: for t = N−m..N−1 (N = d − 1 others, m of
    them wanted), take r uniform in 0..t, or t itself if r was taken; the result is a uniform m-subset of the
    others. Users with x in Z skip the first step (m = k − 1). Index j of the others is category j + [j ≥ x]."""
    n = len(x)
    out = np.zeros((n, d), dtype=np.uint8)
    draw_type = np.int16 if d <= 1 << 15 else np.int64
    for s in range(0, n, USERS_PER_BLOCK):
        xs, inside = x[s:s + USERS_PER_BLOCK].astype(np.intp), with_x[s:s + USERS_PER_BLOCK]
        b = len(xs)
        taken = out[s:s + b].reshape(-1).view(np.bool_)   # flat index of (user, category): base + category
        base = np.arange(0, b * d, d, dtype=np.intp)
        first = d - 1 - k
        t_cell = base + first + (xs <= first)             # the cell of category "others index t"
        for t in range(first, d - 1):
            r = rng.integers(0, t + 1, b, dtype=draw_type).astype(np.intp)   # privacy-critical: exact uniform
            r += r >= xs                                   # others index -> category
            r += base
            if t == first:                                 # first step: only the users without x in Z
                taken[r[~inside]] = True
            else:
                np.copyto(r, t_cell, where=taken[r])       # Floyd: r was taken, so take t (never taken yet)
                taken[r] = True
            t_cell += 1
            t_cell += xs == t + 1
        taken[base[inside] + xs[inside]] = True
    return out


@register
class KSubset(HitRates, Randomizer):
    """k-subset mechanism on inputs 0..d-1; reports are n x d 0/1 bitmaps of k ones, the summary counts 1s."""

    name = "ksubset"

    def __init__(self, epsilon: float, d: int, k: int):
        check_epsilon("k-subset", epsilon)
        if d < 2 or not 1 <= k <= d - 1:
            raise ValueError(f"k-subset needs d >= 2 and 1 <= k <= d-1, got d={d}, k={k}")
        self.epsilon, self.input_size, self.subset_size = float(epsilon), int(d), int(k)
        self.report_width = int(d)
        r = math.exp(-self.epsilon) * (d - k)
        self.miss_threshold = grid_ceil(r / (k + r))   # r' = ⌈2^53 (d−k)/(k e^ε + d − k)⌉/2^53 ≥ P(x ∉ Z)
        miss = self.miss_probability()
        self.p, self.q = float(1 - miss), float(((1 - miss) * (k - 1) + miss * k) / (d - 1))  # realised hit rates

    def pair_hits(self) -> tuple[float, float]:
        """A report is k of the d values: with the user's own value (w.p. p) and k − 1 of the other d − 1, or k of
        them; so two bins are both hit w.p. p(k−1)(k−2)/((d−1)(d−2)) + (1−p)k(k−1)/((d−1)(d−2)), and a holder's
        bin with another w.p. p(k−1)/(d−1)."""
        d, k, p = self.input_size, self.subset_size, self.p
        both = (p * (k - 1) * (k - 2) + (1 - p) * k * (k - 1)) / ((d - 1) * (d - 2)) if d > 2 else 0.0
        return both, p * (k - 1) / (d - 1)

    def miss_probability(self) -> Fraction:
        """r', the exact probability that a user's set leaves out its own value (the sampler's rare event)."""
        return Fraction(self.miss_threshold, 1 << UNIFORM_BITS)

    def randomize(self, x: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        x = np.asarray(x)
        without_x = rng.random(len(x)) < math.ldexp(self.miss_threshold, -UNIFORM_BITS)  # privacy-critical: x ∉ Z w.p. r'
        return draw_subsets(x, self.subset_size, self.input_size, ~without_x, rng)

    def aggregate(self, reports: np.ndarray) -> np.ndarray:
        return column_counts(reports)

    def output_distribution(self, x: float) -> np.ndarray:
        """Q(Z|x) for every k-subset Z, in itertools.combinations order (spec §2.1)."""
        e, d, k = math.exp(self.epsilon), self.input_size, self.subset_size
        weights = np.array([e if int(x) in z else 1.0 for z in itertools.combinations(range(d), k)])
        return weights / (math.comb(d - 1, k - 1) * e + math.comb(d - 1, k))

    def realised_distribution(self, x: float) -> list[Fraction]:
        """Q(Z|x) as the sampler draws it: (1 − r')/C(d−1,k−1) for a set containing x, r'/C(d−1,k) otherwise."""
        d, k, miss = self.input_size, self.subset_size, self.miss_probability()
        inside, outside = (1 - miss) / math.comb(d - 1, k - 1), miss / math.comb(d - 1, k)
        return [inside if int(x) in z else outside for z in itertools.combinations(range(d), k)]

    @classmethod
    def audit_cases(cls):
        return [cls(e, d, k) for d in (2, 3, 4, 6, 7) for k in range(1, d) for e in (0.1, math.log(3), 2.5, 8.0)]

    @classmethod
    def realised_cases(cls, epsilon: float):
        return [cls(epsilon, d, k) for d in (2, 4, 7) for k in range(1, d)]

    def __repr__(self) -> str:
        return f"{self.name}(epsilon={self.epsilon:g}, d={self.input_size}, k={self.subset_size})"

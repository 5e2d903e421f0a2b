"""CoCo, the correlated Collision mechanism of Wang, Li, Li, Li, Yang, Yan, "Differentially Private Numerical
Vector Analyses in the Local and Shuffle Model", Section 7, Algorithms 1–2; spec seed-003 §3. For the
*unconditional mean* only: its frequency errors are worse than Collision's (spec §3.6).

Randomizer (Algorithm 1, spec §3.2): even t ≥ 2s + 2, h = t/2, E = e^ε. The user draws H₁: [d] → [h] and
H₂: [d] → {±1}; key j's two cells are the pair (H₁(j), H₁(j) + h), and j_b sits in the upper one iff
b·H₂(j) = +1. In a uniformly random order each non-zero puts weight E on its own cell and 1 on its partner (a
later key on the same pair overwrites an earlier one, so the winner of a pair is uniform among the keys on it);
each of the h − m unoccupied pairs gets w = ((E+1)(s − m) + t − 2s)/(t − 2m) on both cells; z is drawn with
P[z = k] = W[k]/Ω, Ω = (E+1)s + t − 2s = sE + t − s (spec §8.4). Users with fewer than s non-zeros are padded
with dummy keys d, …, d + s − 1 of random sign (spec §1.3), so that the overwrite rate P_ow is exact.
Privacy (Proposition 2): Ω is fixed and every weight lies in [1, E] (t ≥ 2s + 2), for every (H₁, H₂) and every
order, so every output's probability is in [1/Ω, E/Ω]: ε-LDP. As it runs: the rare event "z is not a winner
cell", r_m = ((s − m)E + t − s)/Ω, is drawn directly and rounded up to the 2^-53 grid; then, if m < s, "a
partner cell" w.p. π_m = m/((s − m)E + t − s) rounded up (a free cell has weight w > 1 strictly, so the
rounding cannot push it below 1/Ω), and the cell inside each class by ``rng.integers`` (exact). If m = s all
non-winner cells weigh 1 and one uniform draw over them is exact.
Estimators (Algorithm 2, spec §3.4): with c_{j±} = #{i : H^i(j±) = z_i}, the mean ("minus") estimator
x̄̂_j = (c_{j₊} − c_{j₋})/(n(P_t − P_o)) and the non-missing ("plus") one x̲̂_j = ((c_{j₊} + c_{j₋})/n − 2P_f)/
(P_t + P_o − 2P_f), where P_ow = 1 − (t/2s)(1 − (1 − 2/t)^s), P_t = P_ow(E+1)/(2Ω) + (1 − P_ow)E/Ω,
P_o = P_ow(E+1)/(2Ω) + (1 − P_ow)/Ω, P_f = 1/t (spec §3.3; P_t + P_o = (E+1)/Ω exactly, §8.5).
Variance (Lemma 3, per user; spec §3.5): eqs. (8), (9) and the per-coordinate forms.
Fast simulation (spec §3.4): users without key j contribute Multinomial(n − n_j; 1/t, 1/t, 1 − 2/t).
Citations: spec seed-003-vector.md §3, §8.4–8.6, §8.12; DESIGN §4.5.
"""

from __future__ import annotations

import functools
import itertools
import math
from fractions import Fraction

import numpy as np

from ldpql.mechanisms.base import UNIFORM_BITS, Randomizer, check_epsilon, grid_ceil, register
from ldpql.mechanisms.collision import mix64, omega
from ldpql.mechanisms.ternary import all_sparse, count_sparse

SIGN_SALT = np.uint64(0x5851F42D4C957F2D)   # keys H₂ apart from H₁ under one user seed


def overwrite_probability(s: int, t: int) -> float:
    """P_ow = 1 − (t/(2s))(1 − (1 − 2/t)^s), the stable form of eq. (7) (spec §3.3)."""
    return 1 - (t / (2 * s)) * -math.expm1(s * math.log1p(-2 / t))


def rates(epsilon: float, s: int, t: int) -> tuple[float, float, float]:
    """(P_t, P_o, P_f): the true, opposite and false collision rates (spec §3.3)."""
    e, big, pow_ = math.exp(epsilon), omega(epsilon, s, t), overwrite_probability(s, t)
    shared = pow_ * (e + 1) / (2 * big)
    return shared + (1 - pow_) * e / big, shared + (1 - pow_) / big, 1 / t


def mean_mse(epsilon: float, d: int, s: int, t: int, n: int = 1) -> float:
    """Eq. (9): E Σ_j (x̄̂_j − x̄_j)² for exactly-s-sparse users."""
    pt, po, pf = rates(epsilon, s, t)
    return (s * ((pt + po) - (pt - po) ** 2) + (d - s) * 2 * pf) / (n * (pt - po) ** 2)


def plus_mse(epsilon: float, d: int, s: int, t: int, n: int = 1) -> float:
    """Eq. (8): E Σ_j (x̲̂_j − x̲_j)² for exactly-s-sparse users."""
    pt, po, pf = rates(epsilon, s, t)
    return (s * (pt + po) * (1 - pt - po) + (d - s) * 2 * pf * (1 - 2 * pf)) / (n * (pt + po - 2 * pf) ** 2)


def paper_t(epsilon: float, s: int) -> int:
    """Theorem 7's mean rule ⌈e^ε s + s + 2⌉ rounded up to even (spec §3.6, §8.12)."""
    t = max(math.ceil(math.exp(epsilon) * s + s + 2), 2 * s + 2)
    return t + t % 2


@functools.lru_cache(maxsize=4096)
def optimal_t(epsilon: float, d: int, s: int) -> int:
    """The even t ≥ 2s + 2 minimising eq. (9), scanned up to 4× the paper's rule (the curve is flat, Fig. 5)."""
    lo, hi = 2 * s + 2, 4 * paper_t(epsilon, s) + 2
    while True:   # a scan of ~4000 even t, then around the best again at a finer step, down to step 2 (at large
        step = max(2, 2 * ((hi - lo) // 8000))   # ε the range is ~e^ε wide: one fine scan over it would not end)
        best = min(range(lo, hi + 1, step), key=lambda t: mean_mse(epsilon, d, s, t))
        if step == 2:
            return best
        lo, hi = max(2 * s + 2, best - step), best + step


@register
class CoCo(Randomizer):
    """(d, s, ε, t)-CoCo over s-sparse ternary vectors; the summary is c_y over the 2d elements."""

    name = "coco"

    def __init__(self, epsilon: float, d: int, s: int, t: int | None = None):
        check_epsilon("CoCo", epsilon)
        if not 1 <= s <= d:
            raise ValueError(f"CoCo needs 1 <= s <= d, got s={s}, d={d}")
        self.epsilon, self.d, self.s = float(epsilon), int(d), int(s)
        self.t = int(t) if t is not None else paper_t(self.epsilon, self.s)
        if self.t % 2 or self.t < 2 * self.s + 2:
            raise ValueError(f"CoCo needs an even t >= 2s + 2, got t={self.t}, s={self.s}")
        self.h, self.report_width = self.t // 2, 2
        self.p_true, self.p_opposite, self.p_false = rates(self.epsilon, self.s, self.t)
        e, s, t = math.exp(-self.epsilon), self.s, self.t   # written in e^{-ε}: exact at large ε
        free = [((s - m) + (t - s) * e) / (s + (t - s) * e) for m in range(s + 1)]
        partner = [m * e / ((s - m) + (t - s) * e) for m in range(s + 1)]
        # privacy-critical: both thresholds rounded up to the 2^-53 grid (see the module docstring)
        self.free_counts = [min(grid_ceil(r), 1 << UNIFORM_BITS) for r in free]
        self.partner_counts = [min(grid_ceil(r), 1 << UNIFORM_BITS) for r in partner]
        self.free_thresholds = np.array([math.ldexp(k, -UNIFORM_BITS) for k in self.free_counts])
        self.partner_thresholds = np.array([math.ldexp(k, -UNIFORM_BITS) for k in self.partner_counts])

    # -- the randomizer ------------------------------------------------------------------------------------
    def _pad(self, x: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """Missing elements become dummy keys d + column, each of uniform sign (keys of the extended domain)."""
        x = np.asarray(x, dtype=np.int64).reshape(len(x), -1)
        dummy = self.d + np.arange(x.shape[1])
        return np.where(x >= 0, x % self.d, dummy), np.where(x >= 0, x < self.d, rng.integers(0, 2, x.shape) == 1)

    def _draw(self, pairs: np.ndarray, upper: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """z for each user from its keys' pairs and whether each key's own cell is the upper one:
        privacy-critical (module docstring). The winner of a shared pair is the key latest in a uniform order."""
        n, s, h, t = *pairs.shape, self.h, self.t
        order = rng.permuted(np.tile(np.arange(s), (n, 1)), axis=1)
        key = pairs * s + order
        idx = np.argsort(key, axis=1)
        pairs, upper = np.take_along_axis(pairs, idx, 1), np.take_along_axis(upper, idx, 1)
        last = np.ones_like(pairs, dtype=bool)
        last[:, :-1] = pairs[:, 1:] != pairs[:, :-1]   # the last key of each pair group (highest order) wins
        m = last.sum(axis=1)
        win_cells = pairs + h * upper
        rare = rng.random(n) < self.free_thresholds[m]
        partner = rare & (m < s) & (rng.random(n) < self.partner_thresholds[m])
        free = rare & ~partner
        k = rng.integers(0, np.where(free, np.where(m == s, t - m, h - m), m))
        rank = np.cumsum(last, axis=1) - 1
        chosen = np.argmax(last & (rank == k[:, None]), axis=1)
        rows = np.arange(n)
        z = np.where(partner, win_cells[rows, chosen] + h * (1 - 2 * upper[rows, chosen]), win_cells[rows, chosen])
        return np.where(free, self._free_cell(k, m, pairs, last, win_cells, rng), z)

    def _free_cell(self, k, m, pairs, last, win_cells, rng) -> np.ndarray:
        """The k-th cell of [t] minus the winner cells (m = s) or a uniform cell of the k-th unoccupied pair."""
        full = m == self.s
        cells = np.where(last, win_cells, self.t)
        srt = np.sort(np.where(full[:, None], cells, np.where(last, pairs, self.t)), axis=1)
        out = k.copy()
        for col in range(srt.shape[1]):
            out += srt[:, col] <= out
        return np.where(full, out, out + self.h * rng.integers(0, 2, len(k)))

    def randomize(self, x: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """Deployment-faithful path: x is an (n, s) element array (-1 = none); reports are (seed, z) as uint64."""
        keys, plus = self._pad(x, rng)
        seeds = rng.bit_generator.random_raw(len(keys)).astype(np.uint64)
        pairs, upper = self._hash(seeds[:, None], keys, plus)
        return np.stack([seeds, self._draw(pairs, upper, rng).astype(np.uint64)], axis=1)

    def _hash(self, seeds, keys, plus):
        """(H₁(j), whether j_b's cell is the upper one: b·H₂(j) = +1) for keys j and signs b = + iff ``plus``."""
        pairs = (mix64(seeds, keys) % np.uint64(self.h)).astype(np.int64)
        h2_plus = (mix64(seeds ^ SIGN_SALT, keys) >> np.uint64(63)).astype(bool)
        return pairs, h2_plus == plus

    def aggregate(self, reports: np.ndarray) -> np.ndarray:
        """c_y for the 2d elements: Θ(n·d) hash evaluations (both cells of each key from one H₁, H₂)."""
        seeds, z = reports[:, 0:1], reports[:, 1].astype(np.int64)[:, None]
        counts = np.zeros(2 * self.d, dtype=np.int64)
        step = max(1, (1 << 21) // max(len(seeds), 1))
        for lo in range(0, self.d, step):
            keys = np.arange(lo, min(lo + step, self.d))[None, :]
            pairs, upper_plus = self._hash(seeds, keys, True)
            plus_cell = pairs + self.h * upper_plus
            counts[keys[0]] = np.count_nonzero(plus_cell == z, axis=0)
            counts[self.d + keys[0]] = np.count_nonzero(pairs + self.h * ~upper_plus == z, axis=0)
        return counts

    def simulate(self, x: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """The fast path (spec §3.4): the law of :meth:`aggregate` of :meth:`randomize` in O(ns + d)."""
        keys, plus = self._pad(x, rng)
        pairs, h2_plus = rng.integers(0, self.h, keys.shape), rng.integers(0, 2, keys.shape) == 1
        upper = h2_plus == plus
        z = self._draw(pairs, upper, rng)
        own = pairs + self.h * upper
        real = keys < self.d
        hit_own, hit_other = real & (own == z[:, None]), real & (own + self.h * (1 - 2 * upper) == z[:, None])
        elem = np.where(plus, keys, keys + self.d)
        opp = np.where(plus, keys + self.d, keys)
        counts = np.bincount(elem[hit_own], minlength=2 * self.d) + np.bincount(opp[hit_other], minlength=2 * self.d)
        holders = np.bincount(keys[real], minlength=self.d)
        p = np.array([1 / self.t, 1 / self.t, 1 - 2 / self.t])
        others = rng.multinomial(len(keys) - holders, p)
        return counts + np.concatenate([others[:, 0], others[:, 1]])

    # -- estimators and variances --------------------------------------------------------------------------
    def estimate(self, summary: np.ndarray, n: int) -> np.ndarray:
        """The d unconditional means x̄̂_j (the "minus" estimator)."""
        c = np.asarray(summary, dtype=float)
        return (c[: self.d] - c[self.d:]) / (n * (self.p_true - self.p_opposite))

    def present(self, summary: np.ndarray, n: int) -> np.ndarray:
        """The d non-missing frequencies x̲̂_j (the "plus" estimator)."""
        c = np.asarray(summary, dtype=float)
        return ((c[: self.d] + c[self.d:]) / n - 2 * self.p_false) / (self.p_true + self.p_opposite - 2 * self.p_false)

    def items(self, summary: np.ndarray, n: int) -> np.ndarray:
        """f̂_{j±} = (x̲̂_j ± x̄̂_j)/2 over the 2d elements (for post-processing, spec §3.4)."""
        mean, present = self.estimate(summary, n), self.present(summary, n)
        return np.concatenate([(present + mean) / 2, (present - mean) / 2])

    def variance(self, truth: np.ndarray, n: int) -> np.ndarray:
        """Var x̄̂_j at the true non-missing frequencies ``truth`` = x̲ (d values; spec §3.5)."""
        pt, po, pf = self.p_true, self.p_opposite, self.p_false
        x = np.asarray(truth, dtype=float)
        return (x * ((pt + po) - (pt - po) ** 2) + (1 - x) * 2 * pf) / (n * (pt - po) ** 2)

    def present_variance(self, truth: np.ndarray, n: int) -> np.ndarray:
        """Var x̲̂_j at the true x̲ (d values)."""
        pt, po, pf = self.p_true, self.p_opposite, self.p_false
        x = np.asarray(truth, dtype=float)
        return (x * (pt + po) * (1 - pt - po) + (1 - x) * 2 * pf * (1 - 2 * pf)) / (n * (pt + po - 2 * pf) ** 2)

    def total_variance(self, n: int) -> float:
        """Eq. (9)/n, the total mean MSE for exactly-s-sparse users."""
        return mean_mse(self.epsilon, self.d, self.s, self.t, n)

    # -- the audits (tiny instances: every (H₁, H₂) and every z) --------------------------------------------
    def audit_inputs(self) -> np.ndarray:
        return np.arange(count_sparse(self.d, self.s))

    def _cell_probabilities(self, code: int, exact: bool):
        """P[(H₁, H₂, z)] in product order, averaging over which key wins each shared pair (uniform)."""
        ys = all_sparse(self.d, self.s)[int(code)]
        tables = list(itertools.product(range(self.h), repeat=self.d))
        signs = list(itertools.product((False, True), repeat=self.d))
        weight = Fraction(1, len(tables) * len(signs)) if exact else 1.0 / (len(tables) * len(signs))
        out = []
        for h1, h2 in itertools.product(tables, signs):
            cells = [h1[y % self.d] + self.h * (h2[y % self.d] == (y < self.d)) for y in ys]
            out.extend(weight * p for p in self._given_hash(cells, exact))
        return out

    def _given_hash(self, cells: list[int], exact: bool) -> list:
        """P[z = k | H] for k in [t], given the cell of each of the user's keys."""
        groups: dict[int, list[int]] = {}
        for c in cells:
            groups.setdefault(c % self.h, []).append(c)
        m, t, h = len(groups), self.t, self.h
        if exact:
            r = Fraction(self.free_counts[m], 1 << UNIFORM_BITS)
            pi = Fraction(self.partner_counts[m], 1 << UNIFORM_BITS)
            win = (1 - r) / m
            part, free = (r / (t - m), r / (t - m)) if m == self.s else (r * pi / m, r * (1 - pi) / (t - 2 * m))
        else:
            big, e = omega(self.epsilon, self.s, t), math.exp(self.epsilon)
            win, part, free = e / big, 1 / big, ((e + 1) * (self.s - m) + t - 2 * self.s) / ((t - 2 * m) * big)
        out = []
        for k in range(t):
            group = groups.get(k % h)
            share = Fraction(sum(c == k for c in group), len(group)) if group else 0
            out.append(free if group is None else (share * win + (1 - share) * part if exact
                                                   else float(share) * win + (1 - float(share)) * part))
        return out

    def output_distribution(self, x: float) -> np.ndarray:
        return np.array(self._cell_probabilities(int(x), exact=False), dtype=float)

    def realised_distribution(self, x: float) -> list[Fraction]:
        return self._cell_probabilities(int(x), exact=True)

    @classmethod
    def audit_cases(cls):
        return [cls(e, d, s, t) for e in (0.1, 1.0, math.log(2), 3.0) for d, s, t in ((2, 1, 4), (2, 2, 6), (3, 2, 6))]

    @classmethod
    def realised_cases(cls, epsilon: float):
        return [cls(epsilon, 2, 1, 4), cls(epsilon, 2, 2, 6)]

    def __repr__(self) -> str:
        return f"coco(epsilon={self.epsilon:g}, d={self.d}, s={self.s}, t={self.t})"

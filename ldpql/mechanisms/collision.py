"""Collision, the (d, s, ε, t)-Collision mechanism of Wang, Li, Li, Li, Yang, Yan, "Differentially Private
Numerical Vector Analyses in the Local and Shuffle Model" (journal version of IJCAI 2021, "Hiding numerical
vectors in local private and shuffled messages"), Definition 5; spec seed-003 §2.

Input: an s-sparse ternary vector in set form (:mod:`ldpql.mechanisms.ternary`), Y_x ⊆ 𝒴 = {1₋, 1₊, …, d₋, d₊}.
Randomizer (spec §2.2): the user draws a hash H: 𝒴 → [t] independent of its data, lets C = H(Y_x), m = |C|, and
reports (H, z) with P[z = k] = e^ε/Ω for k ∈ C and (Ω − m e^ε)/((t − m)Ω) otherwise, Ω = s e^ε + t − s fixed.
Privacy (Proposition 1, spec §2.3): for every H each cell's probability lies in [1/Ω, e^ε/Ω] (m ≤ s), so the
ratio over two inputs is ≤ e^ε; H is independent of x. Users with fewer than s elements send them as they are
(§2.8: still ε-LDP and unbiased). As it runs: the rare event "z outside C" is drawn directly with probability
r_m = ((s − m)e^ε + t − s)/Ω rounded *up* to the 2^-53 grid of ``random()``; the cell inside C or outside it
is then drawn by ``rng.integers`` (exact). So a cell of C has (1 − r'_m)/m ≤ e^ε/Ω and a free cell
r'_m/(t − m) ≥ 1/Ω: the realised ratio stays ≤ e^ε (tight to ~1e-3 up to the cap for the audited t).
Estimators (Definition 5, spec §2.4): with P_t = e^ε/Ω and P_f = 1/t, and c_y = #{i : H_i(y) = z_i},
f̂_y = (c_y/n − P_f)/(P_t − P_f); x̄̂_j = f̂_{j₊} − f̂_{j₋}; x̲̂_j = f̂_{j₊} + f̂_{j₋}; the conditional mean
x̄̂_j / max(x̲̂_j, 1/n), clipped (§2.4, §8.22). (The realised P_t differs from e^ε/Ω by < 2^-53: negligible.)
Variance (exact, spec §2.5 [D]; indicators of different elements are independent given the report):
Var f̂_y = [f_y P_t(1−P_t) + (1 − f_y) P_f(1−P_f)]/(n(P_t − P_f)²), total V_C = [s P_t(1−P_t) + (2d − s)
P_f(1−P_f)]/(n(P_t − P_f)²) for exactly-s-sparse users; O(ds/(nε²)) with t* (Theorem 4).
Two paths that agree in distribution (spec §2.7): :meth:`Collision.randomize`/:meth:`Collision.aggregate`,
the deployment-faithful one (H a 64-bit seed, H(y) = mix64(seed, y) mod t, evaluated for all n·2d pairs by
the server), and :meth:`Collision.simulate`, which draws H only on each user's s elements and adds
Binomial(n − n_y, 1/t) for the users without y: O(ns + d).
Citations: spec seed-003-vector.md §2, §2.6 (t), §2.8, §5.5 (shuffle weight s/Ω); DESIGN §4.5.
"""

from __future__ import annotations

import functools
import itertools
import math
from fractions import Fraction

import numpy as np

from ldpql.mechanisms.base import UNIFORM_BITS, Randomizer, check_epsilon, grid_ceil, register
from ldpql.mechanisms.ternary import all_sparse, count_sparse

GOLDEN = np.uint64(0x9E3779B97F4A7C15)
CHUNK = 1 << 22   # (user, element) hash evaluations per block in :meth:`Collision.aggregate`


def mix64(seeds: np.ndarray, y: np.ndarray) -> np.ndarray:
    """SplitMix64's finaliser of seed + (y + 1)·φ: a fast keyed 64-bit hash, vectorised. Privacy never depends
    on its quality (H is drawn independently of the data); unbiasedness needs H(y) close to i.i.d. uniform,
    which 64-bit mixing gives to ~2^-64 per value (spec §8.20: a linear hash family would not)."""
    with np.errstate(over="ignore"):
        z = np.asarray(seeds, np.uint64) + (np.asarray(y, np.int64).astype(np.uint64) + np.uint64(1)) * GOLDEN
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return z ^ (z >> np.uint64(31))


def omega(epsilon: float, s: int, t: int) -> float:
    """Ω = s e^ε + t − s, the fixed normaliser (spec §2.2)."""
    return s * math.exp(epsilon) + t - s


def rates(epsilon: float, s: int, t: int) -> tuple[float, float]:
    """(P_t, P_f) = (e^ε/Ω, 1/t), the true and false collision rates (spec §2.4)."""
    return 1 / (s + (t - s) * math.exp(-epsilon)), 1 / t


def paper_t(epsilon: float, s: int) -> int:
    """t* = ⌊s e^ε + 2s − 1⌋, the paper's and the authors' code's rule (spec §2.6, §8.11)."""
    return math.floor(s * math.exp(epsilon) + 2 * s - 1)


def total_variance(epsilon: float, d: int, s: int, t: int, n: int = 1) -> float:
    """V_C: E‖f̂ − f‖² over the 2d items (= the total mean and non-missing MSE) for exactly-s-sparse users."""
    pt, pf = rates(epsilon, s, t)
    return (s * pt * (1 - pt) + (2 * d - s) * pf * (1 - pf)) / (n * (pt - pf) ** 2)


@functools.lru_cache(maxsize=4096)
def optimal_t(epsilon: float, d: int, s: int) -> int:
    """The integer t > s minimising :func:`total_variance` (convex in t, spec §2.6), searched around the
    d ≫ s optimum t_opt = s[(e^ε+2) + √((e^ε+2)² + 4(e^ε−1))]/2."""
    from scipy.optimize import minimize_scalar  # imported here: keeps `import ldpql` light

    e = math.exp(epsilon)
    guess = s * ((e + 2) + math.sqrt((e + 2) ** 2 + 4 * (e - 1))) / 2
    res = minimize_scalar(lambda t: total_variance(epsilon, d, s, t), bounds=(s + 1, 4 * guess + 4 * s),
                          method="bounded", options={"xatol": 1e-3})
    near = {max(s + 1, math.floor(res.x) + k) for k in (-1, 0, 1, 2)}
    return min(near, key=lambda t: total_variance(epsilon, d, s, t))


def shuffle_weight(epsilon: float, s: int, t: int) -> float:
    """α_mix = s/Ω, Collision's mixture weight in the clone reduction (spec §5.1, Theorem 5)."""
    return s / omega(epsilon, s, t)


def _rows(x, s: int) -> np.ndarray:
    """The element array as one row per user (no users: an empty (0, s) array, which reshape cannot infer)."""
    x = np.asarray(x, dtype=np.int64)
    return x.reshape(len(x), -1) if len(x) else np.zeros((0, s), dtype=np.int64)


@register
class Collision(Randomizer):
    """(d, s, ε, t)-Collision over s-sparse ternary vectors; the summary is c_y over the 2d elements."""

    name = "collision"

    def __init__(self, epsilon: float, d: int, s: int, t: int | None = None):
        check_epsilon("Collision", epsilon)
        if not 1 <= s <= d:
            raise ValueError(f"Collision needs 1 <= s <= d, got s={s}, d={d}")
        self.epsilon, self.d, self.s = float(epsilon), int(d), int(s)
        self.t = int(t) if t is not None else paper_t(self.epsilon, self.s)
        if self.t <= self.s:
            raise ValueError(f"Collision needs t > s, got t={self.t}, s={self.s}")
        self.report_width = 2
        self.p_true, self.p_false = rates(self.epsilon, self.s, self.t)
        # privacy-critical: P[z outside C] for m = 0..s distinct cells, rounded up to the 2^-53 grid
        self.free_counts = [min(grid_ceil(self._free_rate(m)), 1 << UNIFORM_BITS) for m in range(self.s + 1)]
        self.free_thresholds = np.array([math.ldexp(k, -UNIFORM_BITS) for k in self.free_counts])

    def _free_rate(self, m: int) -> float:
        """r_m = (Ω − m e^ε)/Ω = ((s − m) + (t − s)e^{−ε})/(s + (t − s)e^{−ε}), without cancellation."""
        r = math.exp(-self.epsilon)
        return ((self.s - m) + (self.t - self.s) * r) / (self.s + (self.t - self.s) * r)

    # -- the randomizer ------------------------------------------------------------------------------------
    def _draw(self, cells: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """z for each user, given its elements' cells (the sentinel t for no element): privacy-critical.
        Free (w.p. r'_m, drawn directly): the k-th cell of [t] \\ C for k uniform; else a uniform cell of C."""
        n, t = len(cells), self.t
        srt = np.sort(cells, axis=1)
        first = np.ones_like(srt, dtype=bool)
        first[:, 1:] = srt[:, 1:] != srt[:, :-1]
        first &= srt < t
        m = first.sum(axis=1)
        free = rng.random(n) < self.free_thresholds[m]
        pick = rng.integers(0, np.where(free, t - m, np.maximum(m, 1)))
        z = pick.copy()
        for col in range(srt.shape[1]):   # free: skip the cells of C at or below z (ascending)
            z += free & first[:, col] & (srt[:, col] <= z)
        rank = np.cumsum(first, axis=1) - 1
        chosen = np.argmax(first & (rank == pick[:, None]), axis=1)
        return np.where(free, z, srt[np.arange(n), chosen])

    def randomize(self, x: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """Deployment-faithful path: x is an (n, s) element array (-1 = none); reports are (seed, z) as uint64."""
        x = _rows(x, self.s)
        seeds = rng.bit_generator.random_raw(len(x)).astype(np.uint64)
        cells = (mix64(seeds[:, None], x) % np.uint64(self.t)).astype(np.int64)
        z = self._draw(np.where(x >= 0, cells, self.t), rng)
        return np.stack([seeds, z.astype(np.uint64)], axis=1)

    def aggregate(self, reports: np.ndarray) -> np.ndarray:
        """c_y = #{i : H_i(y) = z_i} for every element y: the server's Θ(n·2d) hash evaluations, in blocks."""
        seeds, z = reports[:, 0], reports[:, 1]
        counts = np.zeros(2 * self.d, dtype=np.int64)
        step = max(1, CHUNK // len(seeds)) if len(seeds) else 1
        for lo in range(0, 2 * self.d, step):
            ys = np.arange(lo, min(lo + step, 2 * self.d))
            cells = mix64(seeds[:, None], ys[None, :]) % np.uint64(self.t)
            counts[ys] = np.count_nonzero(cells == z[:, None], axis=0)
        return counts

    def simulate(self, x: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """The fast path (spec §2.7): the same law of c as :meth:`aggregate` of :meth:`randomize`, in O(ns + d)."""
        x = _rows(x, self.s)
        valid = x >= 0
        cells = np.where(valid, rng.integers(0, self.t, size=x.shape), self.t)
        z = self._draw(cells, rng)
        hits = valid & (cells == z[:, None])
        holders = np.bincount(x[valid], minlength=2 * self.d)
        counts = np.bincount(x[hits], minlength=2 * self.d)
        return counts + rng.binomial(len(x) - holders, self.p_false)

    # -- estimators and variances --------------------------------------------------------------------------
    def estimate(self, summary: np.ndarray, n: int) -> np.ndarray:
        """f̂_y over the 2d elements (item frequencies); see :func:`~ldpql.mechanisms.ternary.means_from_items`."""
        return (np.asarray(summary) / n - self.p_false) / (self.p_true - self.p_false)

    def variance(self, truth: np.ndarray, n: int) -> np.ndarray:
        """Var f̂_y at the true item frequencies ``truth`` (2d)."""
        f, pt, pf = np.asarray(truth, dtype=float), self.p_true, self.p_false
        return (f * pt * (1 - pt) + (1 - f) * pf * (1 - pf)) / (n * (pt - pf) ** 2)

    def mean_variance(self, present: np.ndarray, n: int) -> np.ndarray:
        """Var x̄̂_j = Var x̲̂_j at the true non-missing frequencies x̲_j (spec §2.5)."""
        pt, pf = self.p_true, self.p_false
        return (np.asarray(present) * (pt * (1 - pt) - pf * (1 - pf)) + 2 * pf * (1 - pf)) / (n * (pt - pf) ** 2)

    def total_variance(self, n: int) -> float:
        """V_C/n... the exact total item (= mean = non-missing) MSE for exactly-s-sparse users."""
        return total_variance(self.epsilon, self.d, self.s, self.t, n)

    def conditional_variance(self, truth: np.ndarray, n: int) -> np.ndarray:
        """Delta-method Var of x̄̂_j/x̲̂_j at the true items (the estimators f̂₊, f̂₋ are uncorrelated):
        (Var x̄̂ + c² Var x̲̂ − 2c(V₊ − V₋))/x̲² with c = x̄/x̲ (inf where x̲ = 0)."""
        v = self.variance(truth, n)
        f = np.asarray(truth, dtype=float)
        plus, minus = f[: self.d], f[self.d:]
        present, mean = plus + minus, plus - minus
        c = np.divide(mean, present, out=np.zeros_like(mean), where=present > 0)
        vm = v[: self.d] + v[self.d:]
        out = (vm + c * c * vm - 2 * c * (v[: self.d] - v[self.d:])) / np.where(present > 0, present, np.nan) ** 2
        return np.where(present > 0, out, np.inf)

    def conditional(self, summary: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """SQL AVG over the users who have key j (spec §2.4, §8.22): (x̄̂_j / max(x̲̂_j, 1/n) clipped to [−1, 1],
        its delta-method standard error at the clipped estimates, low-confidence flags where x̲̂_j < 3·sd(x̲̂_j))."""
        f = self.estimate(summary, n)
        mean, present = f[: self.d] - f[self.d:], f[: self.d] + f[self.d:]
        values = np.clip(mean / np.maximum(present, 1 / n), -1, 1)
        plug = np.clip(f, 0, 1)
        present_sd = np.sqrt(self.mean_variance(np.clip(present, 0, 1), n))
        return values, np.sqrt(self.conditional_variance(plug, n)), present < 3 * present_sd

    # -- the audits (tiny instances: every H table and every z) ---------------------------------------------
    def audit_inputs(self) -> np.ndarray:
        return np.arange(count_sparse(self.d, self.s))

    def _cell_probabilities(self, code: int, exact: bool):
        """P[(H, z)] for every hash table H in product order and every z, for the vector numbered ``code``."""
        return self.set_probabilities(all_sparse(self.d, self.s)[int(code)], exact)

    def set_probabilities(self, ys: tuple[int, ...], exact: bool) -> list:
        """P[(H, z)] in the order of :meth:`output_distribution` for the element set ``ys`` (at most s elements:
        a user with fewer sends them as they are, spec §2.8), exact rationals as the sampler runs or floats."""
        weight = Fraction(1, self.t ** (2 * self.d)) if exact else self.t ** (-2.0 * self.d)
        out = []
        for table in itertools.product(range(self.t), repeat=2 * self.d):
            cells = {table[y] for y in ys}
            m = len(cells)
            if exact:
                r = Fraction(self.free_counts[m], 1 << UNIFORM_BITS)
                inside, outside = (1 - r) / m if m else 0, r / (self.t - m)
            else:
                big = omega(self.epsilon, self.s, self.t)
                inside, outside = math.exp(self.epsilon) / big, (big - m * math.exp(self.epsilon)) / ((self.t - m) * big)
            out.extend(weight * (inside if k in cells else outside) for k in range(self.t))
        return out

    def output_distribution(self, x: float) -> np.ndarray:
        return np.array(self._cell_probabilities(int(x), exact=False))

    def realised_distribution(self, x: float) -> list[Fraction]:
        return self._cell_probabilities(int(x), exact=True)

    @classmethod
    def audit_cases(cls):
        return [cls(e, d, s, t) for e in (0.1, 1.0, math.log(2), 3.0) for d, s, t in ((2, 1, 2), (2, 2, 3), (3, 2, 3))]

    @classmethod
    def realised_cases(cls, epsilon: float):
        return [cls(epsilon, 2, 1, 2), cls(epsilon, 2, 2, 3)]

    def __repr__(self) -> str:
        return f"collision(epsilon={self.epsilon:g}, d={self.d}, s={self.s}, t={self.t})"

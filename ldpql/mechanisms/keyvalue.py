"""Key-value and sparse-vector baselines compared by Wang, Li, Li, Li, Yang, Yan, "Differentially Private
Numerical Vector Analyses in the Local and Shuffle Model" (spec seed-003 §4): PrivKV (Ye et al., S&P 2019),
PCKV-UE, PCKV-GRR / PCKV-AGRR (Gu et al., USENIX Security 2020) and SUCCINCT (Zhou et al., S&P 2022), each on
s-sparse ternary vectors in set form (:mod:`ldpql.mechanisms.ternary`), built on the engine's own randomized
response (:mod:`~ldpql.mechanisms.rr`), GRR (:mod:`~ldpql.mechanisms.grr`), OUE (:mod:`~ldpql.mechanisms.oue`)
and Duchi (:mod:`~ldpql.mechanisms.duchi`), so every sampler keeps its realised ε.

Each class states the ε it *really* spends, which the audits check tight. Two of the paper's baselines spend
less than their nominal budget, so :meth:`nominal` builds the paper's variant and records its true level:
- PrivKV at ε₁ = ε₂ = ε/2 (spec §8.17) is ε′-LDP with ε′ = ε₁ + ln(2e^{ε₂}/(e^{ε₂}+1)) < ε, because a missing
  key's value is a fair coin, not a perturbed value (at ε = 1, ε′ = 0.72).
- PCKV-GRR at ε_g = ε (this paper's naming, spec §8.18) is ln(1 + (e^ε − 1)/s)-LDP; PCKV-AGRR is the same
  randomizer at ε_g = ln(s(e^ε − 1) + 1), exactly ε-LDP. One class, :class:`PCKVGRR`, is the amplified form.
Unbiased linear estimators for all (spec §4, "fairness"); closed-form variances side by side.
Citations: spec seed-003-vector.md §4.1–4.4, §8.17–8.19; DESIGN §4.5.
"""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import numpy as np

from ldpql.mechanisms.base import EPSILON_CAP, Randomizer, check_epsilon, register
from ldpql.mechanisms.collision import mix64
from ldpql.mechanisms.duchi import Duchi
from ldpql.mechanisms.grr import GRR
from ldpql.mechanisms.oue import OUE
from ldpql.mechanisms.rr import flip, flip_probability
from ldpql.mechanisms.ternary import all_sparse, count_sparse


def _split(x: np.ndarray, d: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(keys, plus, valid) of an (n, s) element array."""
    x = np.asarray(x, dtype=np.int64).reshape(len(x), -1)
    return x % d, x < d, x >= 0


def _at_key(x: np.ndarray, d: int, j: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Whether each user holds key j_i, and whether its value there is +1."""
    keys, plus, valid = _split(x, d)
    match = valid & (keys == j[:, None])
    return match.any(axis=1), (match & plus).any(axis=1)


class _SparseAudit:
    """Exhaustive audits over every s-sparse input of a tiny instance (inputs numbered as in ``all_sparse``)."""

    d: int
    s: int

    def audit_inputs(self) -> np.ndarray:
        return np.arange(count_sparse(self.d, self.s))

    def output_distribution(self, x: float) -> np.ndarray:
        return np.array([float(p) for p in self._law(all_sparse(self.d, self.s)[int(x)], exact=False)])

    def realised_distribution(self, x: float) -> list[Fraction]:
        return self._law(all_sparse(self.d, self.s)[int(x)], exact=True)


# ---- PrivKV (spec §4.1) ----------------------------------------------------------------------------------------

def privkv_level(eps1: float, eps2: float) -> float:
    """The exact LDP level of PrivKV at (ε₁, ε₂): max(ε₂, ε₁ + ln(2e^{ε₂}/(e^{ε₂}+1)))."""
    return max(eps2, eps1 + math.log(2 / (1 + math.exp(-eps2))))


@register
class PrivKV(_SparseAudit, Randomizer):
    """One round of PrivKV: a uniform key j, its presence by RR at ε₁, its value by RR at ε₂ (a fair coin for
    a missing key). Reports are j·3 + o, o ∈ {0: ⟨0,0⟩, 1: ⟨1,+1⟩, 2: ⟨1,−1⟩}; the summary counts them."""

    name = "privkv"

    def __init__(self, epsilon: float, d: int, s: int, eps1: float | None = None, eps2: float | None = None):
        check_epsilon("PrivKV", epsilon)
        self.d, self.s, self.input_size, self.report_width = int(d), int(s), None, 1
        if eps1 is None:   # the equal split whose exact level is ε
            lo, hi = 0.0, 2 * epsilon + 2
            for _ in range(100):
                mid = (lo + hi) / 2
                lo, hi = (mid, hi) if privkv_level(mid / 2, mid / 2) <= epsilon else (lo, mid)
            eps1 = eps2 = lo / 2
            level = float(epsilon)   # the split's level is ε to bisection precision (from below)
        else:
            level = privkv_level(eps1, eps2)
        self.eps1, self.eps2, self.epsilon = float(eps1), float(eps2), level
        check_epsilon("PrivKV", self.epsilon)
        self.q1, self.q2 = flip_probability(self.eps1), flip_probability(self.eps2)

    @classmethod
    def nominal(cls, epsilon: float, d: int, s: int) -> PrivKV:
        """The paper's PrivKV at ε₁ = ε₂ = ε/2 (it spends less than ε: see the module docstring)."""
        return cls(epsilon, d, s, epsilon / 2, epsilon / 2)

    def randomize(self, x: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        j = rng.integers(0, self.d, len(x))
        present, plus = _at_key(x, self.d, j)
        value = np.where(present, plus, rng.integers(0, 2, len(x)) == 1).view(np.int8)
        shown, sign = flip(present.view(np.int8), self.eps1, rng), flip(value, self.eps2, rng)
        return j * 3 + np.where(shown == 1, 2 - sign, 0)

    def aggregate(self, reports: np.ndarray) -> np.ndarray:
        return np.bincount(reports, minlength=3 * self.d)

    def estimate(self, summary: np.ndarray, n: int) -> np.ndarray:
        """f̂_{j±} over the 2d elements: Σ_j = (u + v − q₁)/(1 − 2q₁), Δ_j = (u − v)/((1 − q₁)(1 − 2q₂))."""
        c = np.asarray(summary, dtype=float).reshape(self.d, 3)
        nj = np.maximum(c.sum(axis=1), 1)
        u, v = c[:, 1] / nj, c[:, 2] / nj
        total = (u + v - self.q1) / (1 - 2 * self.q1)
        diff = (u - v) / ((1 - self.q1) * (1 - 2 * self.q2))
        return np.concatenate([(total + diff) / 2, (total - diff) / 2])

    def _pi(self, f: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """P(⟨1,+1⟩), P(⟨1,−1⟩) for a user who sampled key j, averaged over users, at the true items f."""
        p1, p2 = 1 - self.q1, 1 - self.q2
        plus, minus = f[: self.d], f[self.d:]
        absent = 1 - plus - minus
        return (plus * p1 * p2 + minus * p1 * self.q2 + absent * self.q1 / 2,
                minus * p1 * p2 + plus * p1 * self.q2 + absent * self.q1 / 2)

    def variance(self, truth: np.ndarray, n: int) -> np.ndarray:
        """Var f̂_{j±} (2d) at the true items, with E[1/n_j] ≈ (1 + (1 − 1/d)/μ)/μ, μ = n/d."""
        a, b = self._pi(np.asarray(truth, dtype=float))
        mu = n / self.d
        inv = (1 + (1 - 1 / self.d) / mu) / mu
        sum_var = (a + b) * (1 - a - b) * inv / (1 - 2 * self.q1) ** 2
        k = (1 - self.q1) * (1 - 2 * self.q2)
        diff_var = (a + b - (a - b) ** 2) * inv / k ** 2
        cov = (a * (1 - a) - b * (1 - b)) * inv / ((1 - 2 * self.q1) * k)   # Cov(u + v, u − v) = Var u − Var v
        return np.concatenate([(sum_var + diff_var + 2 * cov) / 4, (sum_var + diff_var - 2 * cov) / 4])

    def mean_variance(self, truth: np.ndarray, n: int) -> np.ndarray:
        """Var x̄̂_j = Var Δ̂_j (d) at the true items."""
        a, b = self._pi(np.asarray(truth, dtype=float))
        mu = n / self.d
        return (a + b - (a - b) ** 2) * (1 + (1 - 1 / self.d) / mu) / mu / ((1 - self.q1) * (1 - 2 * self.q2)) ** 2

    def _law(self, ys, exact: bool):
        q1, q2 = (Fraction(self.q1), Fraction(self.q2)) if exact else (self.q1, self.q2)
        half, w = (Fraction(1, 2), Fraction(1, self.d)) if exact else (0.5, 1 / self.d)
        out = []
        for j in range(self.d):
            if j in ys or j + self.d in ys:
                keep = 1 - q2 if j in ys else q2
                out += [w * q1, w * (1 - q1) * keep, w * (1 - q1) * (1 - keep)]
            else:
                out += [w * (1 - q1), w * q1 * half, w * q1 * half]
        return out

    @classmethod
    def audit_cases(cls):
        return [c(e, d, s) for c in (cls, cls.nominal) for e in (0.1, 1.0, 3.0) for d, s in ((2, 1), (3, 2))]

    @classmethod
    def realised_cases(cls, epsilon: float):
        return [cls(epsilon, 2, 1), cls(epsilon, 3, 2)]

    def __repr__(self) -> str:
        return f"privkv(epsilon={self.epsilon:g}, eps1={self.eps1:g}, eps2={self.eps2:g}, d={self.d})"


# ---- PCKV-UE (spec §4.2) ---------------------------------------------------------------------------------------

@register
class PCKVUE(_SparseAudit, Randomizer):
    """PCKV-UE: one of the s pairs sampled (a dummy when the user has fewer), its key through OUE at
    ε₁ = ln((e^ε+1)/2) (a = 1/2, b = 2/(e^ε+3)), its value through RR at ε; every other set bit gets a fair
    sign. Reports are n × d in {−1, 0, 1}; the summary is (n₁, n₂): counts of +1 and −1 per key."""

    name = "pckv_ue"

    def __init__(self, epsilon: float, d: int, s: int):
        check_epsilon("PCKV-UE", epsilon)
        self.epsilon, self.d, self.s, self.report_width = float(epsilon), int(d), int(s), int(d)
        self.oue = OUE(math.log((math.exp(self.epsilon) + 1) / 2), self.d + 1)   # category d: the dummy key
        self.a, self.b, self.q = 0.5, self.oue.q, flip_probability(self.epsilon)

    def randomize(self, x: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        keys, plus, valid = _split(x, self.d)
        rows, col = np.arange(len(keys)), rng.integers(0, self.s, len(keys))
        real = valid[rows, col]
        bits = self.oue.randomize(np.where(real, keys[rows, col], self.d), rng)[:, : self.d].astype(np.int8)
        signs = 2 * rng.integers(0, 2, bits.shape, dtype=np.int8) - 1
        true_sign = 2 * flip(plus[rows, col].view(np.int8), self.epsilon, rng) - 1
        signs[rows[real], keys[rows, col][real]] = true_sign[real]
        return bits * signs

    def aggregate(self, reports: np.ndarray) -> np.ndarray:
        return np.concatenate([(reports == 1).sum(axis=0), (reports == -1).sum(axis=0)])

    def simulate(self, x: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """The law of :meth:`aggregate` in O(n + d): given the sampled pairs, a user's d outputs are independent,
        so per key the samplers of (j, +1), of (j, −1) and everyone else give three multinomials (realised rates)."""
        keys, plus, valid = _split(x, self.d)
        rows, col = np.arange(len(keys)), rng.integers(0, self.s, len(keys))
        real = valid[rows, col]
        sampled = np.where(real, keys[rows, col] + self.d * ~plus[rows, col], 2 * self.d)
        h = np.bincount(sampled, minlength=2 * self.d + 1)[: 2 * self.d]
        keep = self.a * (1 - self.q)
        same, other = rng.multinomial(h, [keep, self.a - keep, 1 - self.a]).T[:2]
        rest = rng.multinomial(len(keys) - h[: self.d] - h[self.d:], [self.b / 2, self.b / 2, 1 - self.b])
        n1 = rest[:, 0] + same[: self.d] + other[self.d:]
        n2 = rest[:, 1] + other[: self.d] + same[self.d:]
        return np.concatenate([n1, n2])

    def _moments(self, summary, n):
        c = np.asarray(summary, dtype=float)
        return c[: self.d] / n, c[self.d:] / n

    def estimate(self, summary: np.ndarray, n: int) -> np.ndarray:
        """f̂_{j±} = (x̲̂_j ± x̄̂_j)/2 with x̲̂ = s((n₁+n₂)/n − b)/(a − b), x̄̂ = s(n₁ − n₂)/(n a(2p − 1))."""
        u, v = self._moments(summary, n)
        present = self.s * (u + v - self.b) / (self.a - self.b)
        mean = self.s * (u - v) / (self.a * (1 - 2 * self.q))
        return np.concatenate([(present + mean) / 2, (present - mean) / 2])

    def _rates(self, truth):
        f = np.asarray(truth, dtype=float)
        present = f[: self.d] + f[self.d:]
        nonzero = present * (self.a - self.b) / self.s + self.b          # mean P(y_j ≠ 0)
        return f, present, nonzero

    def mean_variance(self, truth: np.ndarray, n: int) -> np.ndarray:
        """Var x̄̂_j (d) at the true items: s²[x̲(a−b)/s − x̲ a²(2p−1)²/s² + b]/(n a²(2p−1)²)."""
        _, present, nonzero = self._rates(truth)
        g = self.a * (1 - 2 * self.q)
        return self.s ** 2 * (nonzero - present * g * g / self.s ** 2) / (n * g * g)

    def present_variance(self, truth: np.ndarray, n: int) -> np.ndarray:
        """Var x̲̂_j (d): s²·avg_i π_i(1 − π_i)/(n(a − b)²), π_i = a/s + b(1 − 1/s) for holders, b otherwise."""
        _, present, _ = self._rates(truth)
        hold = self.a / self.s + self.b * (1 - 1 / self.s)
        avg = present * hold * (1 - hold) + (1 - present) * self.b * (1 - self.b)
        return self.s ** 2 * avg / (n * (self.a - self.b) ** 2)

    def variance(self, truth: np.ndarray, n: int) -> np.ndarray:
        """Var f̂_{j±} (2d); the ± covariance terms cancel in any sum over both signs."""
        v = (self.mean_variance(truth, n) + self.present_variance(truth, n)) / 4
        return np.concatenate([v, v])

    def total_mean_variance(self, n: int) -> float:
        """s²(a + b(d−1) − a²(2p−1)²/s)/(n a²(2p−1)²), exactly-s-sparse users (spec §4.2)."""
        g = self.a * (1 - 2 * self.q)
        return self.s ** 2 * (self.a + self.b * (self.d - 1) - g * g / self.s) / (n * g * g)

    def _law(self, ys, exact: bool):
        conv = Fraction if exact else float
        a, b, q = conv(1) / 2, conv(Fraction(self.oue.threshold, 1 << self.oue.width)), conv(Fraction(self.q))
        total = [conv(0)] * 3 ** self.d
        for y in ys:   # the sampled pair (s choices, each 1/s)
            k, sign = y % self.d, 1 if y < self.d else -1
            for idx, out in enumerate(itertools.product((-1, 0, 1), repeat=self.d)):
                p = conv(1) / self.s
                for j, o in enumerate(out):
                    if j == k:
                        p *= 1 - a if o == 0 else a * ((1 - q) if o == sign else q)
                    else:
                        p *= 1 - b if o == 0 else b / 2
                total[idx] += p
        return total

    @classmethod
    def audit_cases(cls):
        return [cls(e, d, s) for e in (0.1, 1.0, 3.0) for d, s in ((2, 1), (3, 2))]

    @classmethod
    def realised_cases(cls, epsilon: float):
        return [cls(epsilon, 2, 1), cls(epsilon, 2, 2)]

    def __repr__(self) -> str:
        return f"pckv_ue(epsilon={self.epsilon:g}, d={self.d}, s={self.s})"


# ---- PCKV-GRR / PCKV-AGRR (spec §4.3) --------------------------------------------------------------------------

def amplified_epsilon(epsilon: float, s: int) -> float:
    """ε_g = ln(s(e^ε − 1) + 1): sampling one of s pairs makes GRR at ε_g exactly ε-LDP (PCKV-AGRR)."""
    return math.log(s * math.expm1(epsilon) + 1)


@register
class PCKVGRR(_SparseAudit, Randomizer):
    """PCKV-AGRR: one of the user's s pairs sampled uniformly, then the engine's GRR over the 2d signed keys at
    ε_g = ln(s(e^ε−1)+1) (capped at EPSILON_CAP: within ln s of the cap the run is more private than ε).
    Users must hold exactly s pairs. The summary is c_y over the 2d elements."""

    name = "pckv_grr"

    def __init__(self, epsilon: float, d: int, s: int):
        check_epsilon("PCKV-GRR", epsilon)
        self.d, self.s = int(d), int(s)
        eps_g = amplified_epsilon(epsilon, self.s)
        self.grr = GRR(min(eps_g, EPSILON_CAP), 2 * self.d)
        self.epsilon = float(epsilon) if eps_g <= EPSILON_CAP else math.log1p(math.expm1(EPSILON_CAP) / self.s)
        self.p, self.q = self.grr.p, self.grr.q

    @classmethod
    def nominal(cls, epsilon: float, d: int, s: int) -> PCKVGRR:
        """This paper's "PCKV-GRR": GRR at ε_g = ε, which is ln(1 + (e^ε − 1)/s)-LDP."""
        return cls(math.log1p(math.expm1(epsilon) / s), d, s)

    def randomize(self, x: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        x = np.asarray(x, dtype=np.int64).reshape(len(x), -1)
        if np.any(x < 0):
            raise ValueError("PCKV-GRR needs exactly s pairs per user (pad, or use Collision)")
        return self.grr.randomize(x[np.arange(len(x)), rng.integers(0, self.s, len(x))], rng)

    def aggregate(self, reports: np.ndarray) -> np.ndarray:
        return self.grr.aggregate(reports)

    def estimate(self, summary: np.ndarray, n: int) -> np.ndarray:
        """f̂_y = s(c_y/n − q)/(p − q) over the 2d elements."""
        return self.s * (np.asarray(summary) / n - self.q) / (self.p - self.q)

    def variance(self, truth: np.ndarray, n: int) -> np.ndarray:
        """Var f̂_y = s²[f_y π(1−π) + (1 − f_y) q(1−q)]/(n(p−q)²), π = q + (p − q)/s."""
        f, pi = np.asarray(truth, dtype=float), self.q + (self.p - self.q) / self.s
        return self.s ** 2 * (f * pi * (1 - pi) + (1 - f) * self.q * (1 - self.q)) / (n * (self.p - self.q) ** 2)

    def mean_variance(self, truth: np.ndarray, n: int) -> np.ndarray:
        """Var x̄̂_j = Var f̂₊ + Var f̂₋ + 2s² avg_i(π₊π₋)/(n(p−q)²) (a multinomial's negative covariance)."""
        f = np.asarray(truth, dtype=float)
        v = self.variance(f, n)
        pi = self.q + (self.p - self.q) / self.s
        present = f[: self.d] + f[self.d:]
        cross = present * pi * self.q + (1 - present) * self.q ** 2
        return v[: self.d] + v[self.d:] + 2 * self.s ** 2 * cross / (n * (self.p - self.q) ** 2)

    def _law(self, ys, exact: bool):
        rows = [self.grr.realised_distribution(y) if exact else list(self.grr.output_distribution(y)) for y in ys]
        return [sum(col) / self.s for col in zip(*rows)]

    @classmethod
    def audit_cases(cls):
        return [cls(e, d, s) for e in (0.1, 1.0, 3.0) for d, s in ((2, 1), (2, 2), (3, 2))]

    @classmethod
    def realised_cases(cls, epsilon: float):
        s = 2 if amplified_epsilon(epsilon, 2) <= EPSILON_CAP else 1
        return [cls(epsilon, 2, 1), cls(epsilon, 3, s)]

    def __repr__(self) -> str:
        return f"pckv_grr(epsilon={self.epsilon:g}, d={self.d}, s={self.s})"


# ---- SUCCINCT (spec §4.4) --------------------------------------------------------------------------------------

def succinct_eta(s: int, n: int) -> float:
    """η = √(s ln n)/2.5, the clipping bound of the authors' and the first author's code (spec §8.19)."""
    return math.sqrt(s * math.log(n)) / 2.5


def clip_factor(s: int, eta: float) -> float:
    """κ = E[clip(1 + W, −η, η)], W a sum of s − 1 fair ±1: a holder's estimate is κ x_j (clipping bias)."""
    from scipy.stats import binom  # imported here: scipy.stats adds ~1 s to `import ldpql`

    k = np.arange(s)
    return float(np.sum(binom.pmf(k, s - 1, 0.5) * np.clip(1 + 2 * k - (s - 1), -eta, eta)))


@register
class Succinct(_SparseAudit, Randomizer):
    """SUCCINCT with the original code's randomized-response release: v = Σ_j σ_j x_j over public random signs
    σ (a 64-bit seed), clipped to [−η, η], released by the engine's Duchi mechanism on v/η. Reports are
    (seed, ±1); the estimate of x̄_j is (η C/n) Σ_i σ_ij b_i, biased by clipping (factor κ)."""

    name = "succinct"

    def __init__(self, epsilon: float, d: int, s: int, n: int = 100_000):
        check_epsilon("SUCCINCT", epsilon)
        self.epsilon, self.d, self.s, self.n_expected = float(epsilon), int(d), int(s), int(n)
        self.eta = succinct_eta(self.s, max(self.n_expected, 3))
        self.duchi, self.report_width = Duchi(self.epsilon), 2
        self.kappa = clip_factor(self.s, self.eta)

    def _signs(self, seeds: np.ndarray, keys: np.ndarray) -> np.ndarray:
        return np.where(mix64(seeds, keys) >> np.uint64(63), 1, -1)

    def randomize(self, x: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        keys, plus, valid = _split(x, self.d)
        seeds = rng.bit_generator.random_raw(len(keys)).astype(np.uint64)
        v = (self._signs(seeds[:, None], keys) * np.where(plus, 1, -1) * valid).sum(axis=1)
        bits = self.duchi.randomize(np.clip(v / self.eta, -1, 1), rng)
        return np.stack([seeds, bits.astype(np.int64).astype(np.uint64)], axis=1)

    def aggregate(self, reports: np.ndarray) -> np.ndarray:
        seeds, bits = reports[:, 0:1], reports[:, 1].astype(np.int64)
        return np.array([(self._signs(seeds, np.array([[j]])) [:, 0] * bits).sum() for j in range(self.d)])

    def simulate(self, x: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """The law of :meth:`aggregate` in O(ns + d): a non-holder's σ_ij is a fair sign independent of its report."""
        keys, plus, valid = _split(x, self.d)
        sig = 2 * rng.integers(0, 2, keys.shape) - 1
        v = (sig * np.where(plus, 1, -1) * valid).sum(axis=1)
        bits = self.duchi.randomize(np.clip(v / self.eta, -1, 1), rng).astype(np.int64)
        own = np.bincount(keys[valid], weights=(sig * bits[:, None])[valid], minlength=self.d)
        holders = np.bincount(keys[valid], minlength=self.d)
        return own + 2 * rng.binomial(len(keys) - holders, 0.5) - (len(keys) - holders)

    def estimate(self, summary: np.ndarray, n: int) -> np.ndarray:
        """x̄̂_j (d values; SUCCINCT estimates means only and is never projected)."""
        return self.eta * self.duchi.C * np.asarray(summary, dtype=float) / n

    def variance(self, truth: np.ndarray, n: int) -> np.ndarray:
        """Var x̄̂_j at the true non-missing frequencies ``truth`` = x̲: (η²C² − κ² x̲_j)/n."""
        return ((self.eta * self.duchi.C) ** 2 - self.kappa ** 2 * np.asarray(truth, dtype=float)) / n

    def mse(self, mean: np.ndarray, present: np.ndarray, n: int) -> np.ndarray:
        """Var + bias²: the clipping shrinks each holder's contribution by κ."""
        return self.variance(present, n) + ((self.kappa - 1) * np.asarray(mean)) ** 2

    def _law(self, ys, exact: bool):
        out = []
        w = Fraction(1, 2 ** self.d) if exact else 2.0 ** -self.d
        for signs in itertools.product((-1, 1), repeat=self.d):
            v = sum(signs[y % self.d] * (1 if y < self.d else -1) for y in ys)
            u = float(np.clip(v / self.eta, -1, 1))
            row = self.duchi.realised_distribution(u) if exact else self.duchi.output_distribution(u)
            out += [w * p for p in row]
        return out

    @classmethod
    def audit_cases(cls):
        return [cls(e, d, s, n) for e in (0.1, 1.0, 3.0) for d, s, n in ((2, 1, 10), (3, 2, 100))]

    @classmethod
    def realised_cases(cls, epsilon: float):
        return [cls(epsilon, 2, 1, 10), cls(epsilon, 3, 2, 100)]

    def __repr__(self) -> str:
        return f"succinct(epsilon={self.epsilon:g}, d={self.d}, s={self.s}, eta={self.eta:.3g})"

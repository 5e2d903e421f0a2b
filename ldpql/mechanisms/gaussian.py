"""Locally private Gaussian mean estimation (Joseph, Kulkarni, Mao, Wu, "Locally Private Gaussian Estimation",
NeurIPS 2019): KVGAUSSTIMATE and UVGAUSSTIMATE (two rounds) and their one-round versions.

Users hold x_i ~ N(µ, σ²) with µ in a declared range [low, high]; σ is known (KV) or lies in a known
[σ_min, σ_max] (UV). Every protocol splits the users (a data-independent random permutation, done by the driver's
sub-interval rounds) into L groups U_1^j of k users, one per bin level j ∈ {L_min..L_max}, and the rest U_2.

- Round 1, RR1 (spec seed-004 §2.0): a user of U_1^j reports ⌊x'/2^j⌋ mod 4 (x' the public shift of x, below)
  through 4-ary randomized response, the engine's :class:`~ldpql.mechanisms.grr.GRR` with d = 4: the true
  residue w.p. e^ε/(e^ε+3), each other w.p. 1/(e^ε+3). KVAGG1 debiases the counts (:func:`kv_agg1`), ESTMEAN
  bisects for a coarse µ̂_1 (:func:`est_mean`), and in UV, AGG1 + ESTVAR find a power-of-two σ̂ (:func:`est_var`).
- Round 2 (KVRR2, KV): a user of U_2 reports the bit 1[x ≥ µ̂_1] through the engine's one binary randomized
  response (:class:`~ldpql.mechanisms.rr.RandomizedResponse`); KVAGG2 debiases the fraction π̂ of ones, and
  µ̂ = µ̂_1 + σ·Φ⁻¹(π̂) (the seed's √2·erf⁻¹(2π̂ − 1)), the argument clipped to (0, 1) (spec A8).
- Round 2 (UVRR2, UV): a user of U_2 truncates x to I = µ̂_1 ± σ̂(2 + √ln 4n) and adds Laplace noise of scale
  |I|/ε: the engine's discrete Laplace (:class:`LaplaceSum`, the sampler of
  :class:`~ldpql.mechanisms.minimum.LaplaceMin` on a lattice of 2^12 cells over I, exact as it runs). µ̂ is the
  mean of the reports.
- One round (1ROUNDKVGAUSSTIMATE, 1ROUNDUVGAUSSTIMATE; **reconstructions**, spec §2.2, §2.4: the seed defers their
  pseudocode to the full version): U_2 is split into g subgroups, each centring on a fixed lattice S(j) of
  points; every randomizer is fixed before any report is read, and the analyst uses the subgroup whose lattice
  has a point closest to µ̂_1. KV: spacing D = ρσ, ρ = ⌈2√ln 4n⌉, shifts σ/5, g = 5ρ. UV: shifts 2^{j1},
  D = ρ·2^{j1}, ρ = ⌈2√ln 4n⌉ + 5 (spec A19's containment rule), g = |J_1|·ρ.

Privacy: pure ε-LDP, one message per user, sequentially interactive (Theorems 3.1, 3.2, 4.1, 4.2). Each user
takes part in exactly one round (disjoint user intervals: :func:`user_intervals` of the tests), through GRR(4),
binary RR or the discrete Laplace on an input that is a function of its own value and of public parameters;
the round-2 parameters (µ̂_1, I) are functions of U_1's reports only, and the one-round parameters are fixed
before any report. All three randomizers pass the exact and realised-ε audits (``ldpql.audit``).
Utility (spec §2.6, :func:`predicted_sd`): KV2 sd ≈ σ√(π/2)e^{t²/2}(e^ε+1)/(e^ε−1)/√|U_2|, t = (µ − µ̂_1)/σ;
KV1 the same over one of g subgroups; UV2 sd ≈ √(σ² + 2(|I|/ε)²)/√|U_2|; UV1 with D = ρσ̂ for |I| over n_2/g.
The error does not grow with the range of µ (only L does, logarithmically); Duchi et al.'s grows linearly.
Accuracy assumes Gaussian data; privacy holds for any data.

Engine choices [E] (spec §1.3, §2.0, §5.1): the public shift x' = clamp(x, low − 4σ_up, high + 4σ_up) − (low −
4σ_up), so x' ∈ [0, W] and I_{L_max} = [0, 2^{L_max}] covers it (A4); range-driven levels L_min = ⌊log₂ σ_lo⌋,
L_max = max(⌈log₂ W⌉, ⌈log₂ σ_up⌉); argmax ties take the smallest residue (A18); lattice points are
⌊t + 1/2⌋ (round half up: ties have probability zero); sgn(0) = +1 (A14); a missing candidate in ESTMEAN's loop
ends it (A9). Two constants profiles, both keeping ε (§5.2): 'practical' (default, normal-quantile thresholds)
and 'paper' (the seed's ψ = (ε+4)/(√2ε)·√(k ln(8L/β)) and 0.52k, τ, 0.03k; idle leftovers of U_1).
Citations: spec seed-004-gaussian.md §2.0-2.6, §5.1-5.2; Algorithms 1-6 of the paper.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from fractions import Fraction
from statistics import NormalDist
from typing import Any

import numpy as np

from ldpql import expr as E
from ldpql.mechanisms.base import Encoding, Estimate, Protocol, Randomizer, Round, check_epsilon, register
from ldpql.mechanisms.gaussian_check import ALPHA as SIGMA_CHECK_ALPHA, Cells, Search, check_sigma, profile_estimate
from ldpql.mechanisms.grr import GRR
from ldpql.mechanisms.minimum import LAPLACE_LATTICE_BITS, LaplaceMin
from ldpql.mechanisms.rr import RandomizedResponse

PAD_SIGMAS = 4.0          # the public shift's margin around the declared range, in σ_up [E]
ERF_CLIP = 1e-12          # η of spec A8: Φ⁻¹'s argument kept inside (η/2, 1 - η/2)
PROFILES = ("practical", "paper")
_N01 = NormalDist()


# ---- public parameters: the setting, the grouping and the thresholds ----------------------------------------

@dataclass(frozen=True)
class Setting:
    """The public facts one Gaussian protocol runs on: the declared range of µ, σ (KV: sigma_lo == sigma_hi) or
    [σ_min, σ_max] (UV), ε, the failure probability β of the coarse stage and the constants profile."""

    low: float
    high: float
    sigma_lo: float
    sigma_hi: float
    epsilon: float
    beta: float = 0.05
    profile: str = "practical"

    def __post_init__(self):
        check_epsilon("Gaussian estimation", self.epsilon)
        if not (self.low < self.high and 0 < self.sigma_lo <= self.sigma_hi < math.inf and 0 < self.beta < 1):
            raise ValueError(f"bad Gaussian setting {self}")
        if self.profile not in PROFILES:
            raise ValueError(f"profile must be one of {PROFILES}, not {self.profile!r}")

    @property
    def known(self) -> bool:
        """KV (σ known) or UV."""
        return self.sigma_lo == self.sigma_hi

    @property
    def origin(self) -> float:
        """The public shift: x' = clamp(x) − origin ∈ [0, width]."""
        return self.low - PAD_SIGMAS * self.sigma_hi

    @property
    def width(self) -> float:
        return self.high - self.low + 2 * PAD_SIGMAS * self.sigma_hi

    @property
    def lmin(self) -> int:
        return math.floor(math.log2(self.sigma_lo))

    @property
    def lmax(self) -> int:
        return max(math.ceil(math.log2(self.width)), math.ceil(math.log2(self.sigma_hi)), self.lmin)

    @property
    def levels(self) -> int:
        """L = L_max − L_min + 1 (range-driven grouping, spec §2.0)."""
        return self.lmax - self.lmin + 1

    def shifted(self, value: Any) -> E.Expr:
        """x' as an expression of the user's (total, DOUBLE) value: the base of every round's encoding."""
        return E.op("-", E.clamp(value, E.double(self.origin), E.double(self.origin + self.width)),
                    E.double(self.origin))

    def describe(self) -> str:
        sigma = f"σ = {self.sigma_lo:g}" if self.known else f"σ ∈ [{self.sigma_lo:g}, {self.sigma_hi:g}]"
        return f"µ ∈ [{self.low:g}, {self.high:g}], {sigma}, ε = {self.epsilon:g}, β = {self.beta:g}"


@dataclass(frozen=True)
class Grouping:
    """How n users are split (spec §2.0, A7): L levels of k users (U_1), then U_2, as fractions of the users."""

    n: int
    levels: int
    k: int
    n2: int
    groups: int = 1          # subgroups of U_2 (one-round protocols)

    @property
    def m(self) -> int:
        """Users per subgroup of U_2."""
        return self.n2 // self.groups

    def level_users(self, i: int) -> tuple[float, float]:
        return (i * self.k / self.n, (i + 1) * self.k / self.n)

    def second_users(self, r: int = 0) -> tuple[float, float]:
        """Subgroup r of U_2 (the whole of U_2 when there is one); the last one ends at 1 when U_2 is the rest."""
        start = self.levels * self.k / self.n
        width = self.n2 / self.n / self.groups
        end = start + (r + 1) * width
        return (start + r * width, 1.0 if r == self.groups - 1 and self.levels * self.k + self.n2 == self.n
                else end)


def grouping(s: Setting, n: int, rounds: int = 2) -> Grouping:
    """The grouping for n users: k = ⌊⌊n/2⌋/L⌋; U_2 is the rest ('practical') or ⌊n/2⌋ users, the leftovers of
    U_1 idle ('paper'); one round splits U_2 into :func:`subgroups` parts."""
    n = int(n)
    k = (n // 2) // s.levels
    n2 = n - s.levels * k if s.profile == "practical" else n // 2
    return Grouping(n, s.levels, k, n2, subgroups(s, n) if rounds == 1 else 1)


def rho(s: Setting, n: int) -> int:
    """Lattice spacing in σ-steps: ⌈2√ln 4n⌉ (KV), plus 5 for UV (spec §2.2, A19; reconstruction)."""
    return math.ceil(2 * math.sqrt(math.log(4 * max(n, 1)))) + (0 if s.known else 5)


def sigma_levels(s: Setting) -> list[int]:
    """J_1 = {⌊log₂ σ_min⌋, …, ⌈log₂ σ_max⌉ + 1}: the values log₂ σ̂ can take (UV one round)."""
    return list(range(math.floor(math.log2(s.sigma_lo)), math.ceil(math.log2(s.sigma_hi)) + 2))


def subgroups(s: Setting, n: int) -> int:
    """g: 5ρ (KV, shifts of σ/5) or |J_1|·ρ (UV)."""
    return 5 * rho(s, n) if s.known else len(sigma_levels(s)) * rho(s, n)


def _z(s: Setting) -> float:
    return _N01.inv_cdf(1 - s.beta / (8 * s.levels))


def _kappa(eps: float) -> float:
    return (math.exp(eps) + 3) / math.expm1(eps)


def mean_threshold(s: Setting, k: int) -> float:
    """ESTMEAN's test "max_a Ĥ^j(a) ≥ threshold": 0.52k + ψ (paper) or 0.5k + z√k/2 + zκ√k/2 (practical)."""
    if s.profile == "paper":
        return 0.52 * k + (s.epsilon + 4) / (math.sqrt(2) * s.epsilon) * math.sqrt(k * math.log(8 * s.levels / s.beta))
    z = _z(s)
    return 0.5 * k + z * math.sqrt(k) / 2 + z * _kappa(s.epsilon) * math.sqrt(k) / 2


def var_threshold(s: Setting, k: int) -> float:
    """ESTVAR's "level j is concentrated" test: min_a Ĥ_1^j(a) ≤ 0.03k + τ (τ per profile, spec §5.2)."""
    if s.profile == "paper":
        lvl = s.levels
        tau = math.sqrt(2 * k * math.log(2 * lvl / s.beta)) + (1 + 4 / s.epsilon) * math.sqrt(2 * k * math.log(8 * lvl / s.beta))
    else:
        tau = _z(s) * (_kappa(s.epsilon) + 1) * math.sqrt(k) / 2
    return 0.03 * k + tau


def k_min(s: Setting) -> int:
    """The fewest users per level for which the coarse stage's tests can pass (spec §5.2): a top bin holding 3/4
    of the level clears ESTMEAN's threshold (and, UV, a level holding 97% in two bins passes ESTVAR's)."""
    if s.profile == "paper":
        need = 8.7 * ((s.epsilon + 4) / s.epsilon) ** 2 * math.log(8 * s.levels / s.beta)
    else:
        need = 4 * (_z(s) * (_kappa(s.epsilon) + 1)) ** 2
    if not s.known:
        need = max(need, (_z(s) * (_kappa(s.epsilon) + 1) / 0.47) ** 2 if s.profile == "practical" else need)
    return math.ceil(need)


def theory_regime(s: Setting, k: int, n: int) -> bool:
    """The proof-level conditions quoted from the full version (spec §5.2, unverified): k ≥ 5000 ln(L/β),
    k ≥ 625((ε+4)/(√2ε))² ln(4L/β) and n ≥ 20000((ε+2)/ε)² ln(4/β). Shown in EXPLAIN, never enforced."""
    lvl, b, e = s.levels, s.beta, s.epsilon
    return (k >= 5000 * math.log(lvl / b) and k >= 625 * ((e + 4) / (math.sqrt(2) * e)) ** 2 * math.log(4 * lvl / b)
            and n >= 20000 * ((e + 2) / e) ** 2 * math.log(4 / b))


# ---- the encodings: functions of x' that a backend renders and numpy mirrors ----------------------------------

def _lattice_point(v, shift: float, spacing: float, floor=np.floor):
    """z = shift + ⌊(v − shift)/D + 1/2⌋·D, the point of {shift + bD} closest to v (numpy)."""
    return shift + floor((v - shift) / spacing + 0.5) * spacing


def _lattice_expr(v: E.Expr, shift: float, spacing: float) -> E.Expr:
    """The same point as an expression (same operations in the same order)."""
    t = E.op("+", E.op("/", E.op("-", v, E.double(shift)), E.double(spacing)), E.double(0.5))
    return E.op("+", E.double(shift), E.op("*", E.call("floor", t), E.double(spacing)))


@dataclass(frozen=True)
class LevelEncoding(Encoding):
    """RR1's input: ⌊x'/2^j⌋ mod 4 (x' ≥ 0; its base is x')."""

    level: int = 0
    value: Any = None

    @property
    def base(self) -> Any:
        return self.value

    def inputs(self, values: np.ndarray) -> np.ndarray:
        return np.mod(np.floor(np.asarray(values, dtype=float) / 2.0 ** self.level), 4).astype(np.int64)


def level_encoding(value: E.Expr, j: int) -> LevelEncoding:
    residue = E.op("%", E.Cast(E.call("floor", E.op("/", value, E.double(2.0 ** j))), "BIGINT"), 4)
    return LevelEncoding(residue, 4, f"⌊x'/2^{j}⌋ mod 4", level=j, value=value)


@dataclass(frozen=True)
class SignEncoding(Encoding):
    """KVRR2's input: 1[x' ≥ z], z the centre (two rounds) or the point of {shift + bD} closest to x' (one
    round): sgn((x − z)/σ) with sgn(0) = +1 (spec A14)."""

    centre: float = 0.0
    spacing: float | None = None
    value: Any = None

    @property
    def base(self) -> Any:
        return self.value

    def inputs(self, values: np.ndarray) -> np.ndarray:
        v = np.asarray(values, dtype=float)
        z = self.centre if self.spacing is None else _lattice_point(v, self.centre, self.spacing)
        return (v >= z).astype(np.int64)


def sign_encoding(value: E.Expr, centre: float, spacing: float | None = None) -> SignEncoding:
    z = E.double(centre) if spacing is None else _lattice_expr(value, centre, spacing)
    label = f"x' ≥ {centre:.6g}" if spacing is None else f"x' ≥ nearest of {centre:.6g} + b·{spacing:.6g}"
    return SignEncoding(E.indicator(E.op(">=", value, z)), 2, label, centre=centre, spacing=spacing, value=value)


@dataclass(frozen=True)
class OffsetEncoding(Encoding):
    """UVRR2's input: x' truncated to [lo, lo + w] (two rounds), or x' − z truncated to [−D/2, D/2] with z the
    lattice point closest to x' (one round, lo = −D/2, w = D), as the lattice index ⌊(u − lo)·M/w + 1/2⌋ ∈ 0..M."""

    lo: float = 0.0
    w: float = 1.0
    shift: float | None = None
    cells: int = 1 << LAPLACE_LATTICE_BITS
    value: Any = None

    @property
    def base(self) -> Any:
        return self.value

    def inputs(self, values: np.ndarray) -> np.ndarray:
        v = np.asarray(values, dtype=float)
        if self.shift is not None:
            v = v - _lattice_point(v, self.shift, self.w)
        u = np.minimum(np.maximum(v, self.lo), self.lo + self.w)
        return np.floor((u - self.lo) * (self.cells / self.w) + 0.5).astype(np.int64)


def offset_encoding(value: E.Expr, lo: float, w: float, shift: float | None = None,
                    cells: int = 1 << LAPLACE_LATTICE_BITS) -> OffsetEncoding:
    v = value if shift is None else E.op("-", value, _lattice_expr(value, shift, w))
    u = E.clamp(v, E.double(lo), E.double(lo + w))
    k = E.call("floor", E.op("+", E.op("*", E.op("-", u, E.double(lo)), E.double(cells / w)), E.double(0.5)))
    label = f"x' in [{lo:.6g}, {lo + w:.6g}]" if shift is None else f"x' − nearest of {shift:.6g} + b·{w:.6g}"
    return OffsetEncoding(E.bounded_index(k, cells), cells + 1, label, lo=lo, w=w, shift=shift, cells=cells,
                          value=value)


# ---- the discrete Laplace of UVRR2, summed ------------------------------------------------------------------

@register
class LaplaceSum(Randomizer):
    """UVRR2's randomizer: the lattice index k ∈ {0..M} of a truncated value plus discrete Laplace noise of scale
    M/ε cells (sensitivity M), the sampler of :class:`~ldpql.mechanisms.minimum.LaplaceMin` (exact as it runs,
    no floating-point Laplace). The summary is (Σ reports, Σ reports²): the mean and its sample variance.

    Privacy: the report is k + G1 − G2 with LaplaceMin's G, whose realised ε is ln(1/ρ') ≤ ε (see there); k is a
    function of the user's value only. Utility: E[report] = k, Var = Var(k) + 2·(noise variance ≈ (M/ε)²)."""

    name = "laplace_sum"
    estimates = "mean"

    def __init__(self, epsilon: float, lattice_bits: int = LAPLACE_LATTICE_BITS):
        check_epsilon("laplace_sum", epsilon)
        self.noise = LaplaceMin(epsilon, lattice_bits)
        self.epsilon, self.cells = self.noise.epsilon, self.noise.cells
        self.input_size = self.cells + 1

    def randomize(self, x: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        n = len(x)
        return np.asarray(x, dtype=np.int64) + self.noise._geometric(n, rng) - self.noise._geometric(n, rng)

    def aggregate(self, reports: np.ndarray) -> np.ndarray:
        y = np.asarray(reports, dtype=float)
        return np.array([y.sum(), np.square(y).sum()])

    def sample_aggregate(self, counts: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """Each user's noise drawn as it runs (the sum of discrete Laplaces has no closed form)."""
        users = np.repeat(np.arange(len(counts)), np.asarray(counts, dtype=np.int64))
        return self.aggregate(self.randomize(users, rng))

    def estimate(self, summary: np.ndarray, n: int) -> np.ndarray:
        return np.array([summary[0] / n]) if n else np.array([np.nan])

    def variance(self, truth: np.ndarray, n: int) -> np.ndarray:
        """The noise's share (2b², b = M/ε cells), without the values' spread (unknown here)."""
        return np.full(np.shape(truth), 2 * (self.cells / self.epsilon) ** 2 / max(n, 1))

    def sample_variance(self, summary: np.ndarray, n: int) -> float:
        """Var of the mean of n reports, from their own spread (the reports are i.i.d. under i.i.d. data)."""
        if n < 2:
            return math.inf
        mean = summary[0] / n
        return max(summary[1] / n - mean ** 2, 0.0) * n / (n - 1) / n

    def output_distribution(self, x: float) -> np.ndarray:
        return self.noise.output_distribution(self._as_unit(x))

    def realised_distribution(self, x: float) -> list[Fraction]:
        return self.noise.realised_distribution(self._as_unit(x))

    def _as_unit(self, k: float) -> float:
        """Index k as the point of [-1, 1] that LaplaceMin snaps to the same lattice point k (exact)."""
        return -1.0 + 2.0 * float(k) / self.cells

    @classmethod
    def audit_cases(cls):
        return [cls(e, bits) for e in (0.1, 0.5, 1.0, 2.0, 5.0) for bits in (1, 3)]

    @classmethod
    def realised_cases(cls, epsilon: float):
        return [cls(epsilon, bits) for bits in (1, 3)]

    def __repr__(self) -> str:
        return f"{self.name}(epsilon={self.epsilon:g}, M=2^{self.cells.bit_length() - 1})"


# ---- the analyst's side: KVAGG1, AGG1, ESTMEAN, ESTVAR (post-processing of reports only) ------------------------

def kv_agg1(counts: np.ndarray, k: int, rr: GRR) -> np.ndarray:
    """Algorithm 2 (a ∈ {0,1,2,3}, spec A2): Ĥ(a) = (C(a) − k·q)/(p − q), the seed's ((e^ε+3)/(e^ε−1))·(C(a) −
    k/(e^ε+3)) with the realised p, q of the GRR that ran. Unbiased for the level's true counts; Σ_a Ĥ(a) = k."""
    return (np.asarray(counts, dtype=float) - k * rr.q) / (rr.p - rr.q)


def agg1(hist: np.ndarray) -> np.ndarray:
    """AGG1 (reconstruction, spec §2.3): Ĥ_1(a) = Ĥ(a) + Ĥ((a+1) mod 4), the mass of each adjacent pair of bins."""
    return hist + np.roll(hist, -1)


def _candidate(lo: float, hi: float, j: int, residues: set[int]) -> int | None:
    """The largest integer c with c·2^j ∈ [lo, hi] and c mod 4 in ``residues`` (None if there is none)."""
    step = 2.0 ** j
    found = [c for c in range(math.ceil(lo / step), math.floor(hi / step) + 1) if c % 4 in residues]
    return max(found) if found else None


def est_mean(hist: dict[int, np.ndarray], ks: dict[int, int], s: Setting) -> tuple[float, int]:
    """Algorithm 3, ESTMEAN: from I = [0, 2^{L_max}], narrow to the bin holding more than half the level's mass
    while a level passes the test; at the stop level j, return the largest multiple c*·2^j in I_j whose residue is
    one of the two top bins (the boundary between them). Returns (µ̂_1 in x' units, j)."""
    top = {j: int(np.argmax(h)) for j, h in hist.items()}        # A3: M1 for every level up front
    j, intervals = s.lmax, {s.lmax: (0.0, 2.0 ** s.lmax)}
    while j >= s.lmin and hist[j].max() >= mean_threshold(s, ks[j]):
        c = _candidate(*intervals[j], j, {top[j]})
        if c is None:                                             # A9: treat the level as unconcentrated
            break
        intervals[j - 1] = (c * 2.0 ** j, (c + 1) * 2.0 ** j)
        j -= 1
    j = max(j, s.lmin)
    order = np.argsort(-hist[j], kind="stable")                   # A18: ties to the smallest residue
    c = _candidate(*intervals[j], j, {int(order[0]), int(order[1])})
    lo, hi = intervals[j]
    return (c * 2.0 ** j if c is not None else (lo + hi) / 2), j


def est_var(pairs: dict[int, np.ndarray], ks: dict[int, int], s: Setting) -> int:
    """ESTVAR (reconstruction, spec §2.3): scan down from L_max while the level is concentrated (some adjacent pair
    holds all but 3% of its users: min_a Ĥ_1^j(a) ≤ 0.03k + τ); σ̂ = 2^j for the first level that is not (or
    L_min). Returns j."""
    j = s.lmax
    while j >= s.lmin and pairs[j].min() <= var_threshold(s, ks[j]):
        j -= 1
    return max(j, s.lmin)


# ---- the protocols ----------------------------------------------------------------------------------------------

def _round_one(s: Setting, g: Grouping, base: E.Expr):
    """RR1 for every level: yields one round per level (disjoint users), returns ({j: counts}, {j: users})."""
    rr = GRR(s.epsilon, 4)
    counts, users = {}, {}
    for i, j in enumerate(range(s.lmin, s.lmax + 1)):
        reply = yield Round(rr, level_encoding(base, j), users=g.level_users(i), label=f"RR1 level {j}")
        counts[j], users[j] = np.asarray(reply.summary), int(reply.n)
    return counts, users


def _coarse(s: Setting, counts: dict, users: dict) -> tuple[dict, dict, float, int]:
    rr = GRR(s.epsilon, 4)
    hist = {j: kv_agg1(counts[j], users[j], rr) for j in counts}
    mu1, stop = est_mean(hist, users, s)
    return hist, users, mu1, stop


def _interval(value: float, se: float, confidence: float, beta: float) -> tuple[tuple[np.ndarray, np.ndarray], float]:
    """value ± z·se at level confidence + β when that is below 1 (so that, with the coarse stage failing with
    probability at most β, the interval covers with probability at least ``confidence``); otherwise at
    ``confidence``, stated as confidence − β (union bound)."""
    stat, stated = (confidence + beta, confidence) if confidence + beta < 1 else (confidence, confidence - beta)
    half = _N01.inv_cdf(0.5 + stat / 2) * se
    return (np.array([value - half]), np.array([value + half])), stated


def _answer(s: Setting, value: float, se: float, confidence: float, note: str, extra: dict) -> Estimate:
    interval, stated = _interval(value, se, confidence, s.beta)
    return Estimate(np.array([value]), np.array([se]), note=note, extra=extra, interval=interval,
                    interval_confidence=stated)


def _too_few(n: int, g: Grouping | None = None) -> Estimate:
    nan = np.full(1, np.nan)
    why = "no users" if n == 0 else f"too few users ({n}) for one per level and a second group"
    return Estimate(nan, nan, note=why, extra={"grouping": g})


def _from_sign(s: Setting, rr: RandomizedResponse, ones: float, m: int, centre: float) -> tuple[float, float, bool]:
    """KVAGG2 and lines 12-13 of Algorithm 1: µ̂' = centre + σ·Φ⁻¹(π̂), π̂ = (1 + (Ĥ(1) − Ĥ(−1))/m)/2 the debiased
    fraction of ones; its standard error by the delta method over the reports' binomial spread."""
    pi = float(rr.estimate(np.array([ones]), m)[0])
    clipped = min(max(pi, ERF_CLIP / 2), 1 - ERF_CLIP / 2)
    t = _N01.inv_cdf(clipped)
    rate = ones / m
    se_pi = math.sqrt(rate * (1 - rate) / m) / (rr.p - rr.q)
    return centre + s.sigma_lo * t, s.sigma_lo * se_pi / max(_N01.pdf(t), 1e-300), clipped != pi


NOTE = ("assumes the declared Gaussian distribution (never checked against the data); the interval is for the "
        "Gaussian's mean µ (it holds the spread of the users' values too, so it is wider than one for this column's "
        "own mean) and allows for the coarse stage failing with probability β")


def _level_cells(counts: dict, rr: GRR) -> list[Cells]:
    """Round 1's released counts as cells of the line: level j reports ⌊x'/2^j⌋ mod 4 by GRR(4)."""
    return [Cells(np.asarray(counts[j]), 0.0, 2.0 ** j, rr.p, rr.q) for j in sorted(counts)]


def _sign_cells(rr: RandomizedResponse, ones: float, m: int, centre: float, spacing: float | None,
                s: Setting) -> Cells:
    """A KVRR2 bit as cells: class 0 (a reported 1) is x' ≥ centre (two rounds: one boundary, a period far beyond
    the data) or ⌊(x' − centre)/(D/2)⌋ even (one round, D the lattice spacing)."""
    width = 2.0 ** (s.lmax + 6) if spacing is None else spacing / 2
    return Cells(np.array([ones, m - ones]), centre, width, rr.p, rr.q)


def _checked(s: Setting, est: Estimate, first: list[Cells], second: list[Cells], mu1: float, stop: int,
             confidence: float) -> Estimate:
    """The σ check (post-processing of released counts, :mod:`~ldpql.mechanisms.gaussian_check`): round 1's
    counts test the declared σ at false-alarm rate ALPHA. When they reject it, a σ-known answer and its interval
    are re-estimated from every report with σ free (profile likelihood); a σ-unknown answer stands (its σ̂ and
    interval come from the reports) and is flagged. Either way the note says so."""
    search = Search(mu1, 2.0 ** stop, 2.0 ** s.lmin / 64, 2.0 ** (s.lmax + 1))
    chk = check_sigma(first, (s.sigma_lo, s.sigma_hi), search)
    extra = {**est.extra, "sigma_check": chk}
    if not chk.flagged:
        return replace(est, extra=extra)
    declared = f"σ = {s.sigma_lo:g}" if s.known else f"σ range [{s.sigma_lo:g}, {s.sigma_hi:g}]"
    fit = (f"they fit σ ≈ {chk.sigma_fit:.3g}" if chk.sigma_fit >= 2.0 ** s.lmin / 2 else
           f"they point to σ below {2.0 ** s.lmin / 2:g}, which its bins of {2.0 ** s.lmin:g} cannot resolve")
    why = est.note + "; WARNING: " + "; ".join(filter(None, (
        f"the declared {declared} does not fit the first round's reports (likelihood-ratio test p = "
        f"{max(chk.p_value, 1e-300):.2g} < {SIGMA_CHECK_ALPHA / 2:g}; {fit})" if chk.p_value < SIGMA_CHECK_ALPHA / 2
        else "",   # a deviance test: no σ explains the reports (point masses, bimodal or skewed data, audit7 A1, A4)
        f"the first round's reports are not Gaussian for any σ (goodness of fit p = {max(chk.fit_p, 1e-300):.2g}), "
        "so the answer and its interval, which assume a Gaussian, may not hold; Duchi et al., PM and HM do not "
        "(mechanism => 'hybrid')" if chk.misfit else "")))
    if not s.known:
        return replace(est, extra=extra, note=why + ": the answer's σ̂ and interval come from the reports and stand, "
                       "but the predicted error assumed the declared range")
    stat = confidence + s.beta if confidence + s.beta < 1 else confidence
    how = ": the answer and its interval are re-estimated from all reports with σ free (profile likelihood)"
    try:
        mu, low, high, sigma = profile_estimate(first + second, search, stat)
    except (ValueError, ArithmeticError):   # no usable profile (audit7 A2): the whole range, honest if useless
        mu, low, high, sigma = float(est.values[0]) - s.origin, 0.0, s.width, math.nan
        how = ": the σ-free re-estimate found no usable profile, so the interval is the whole padded range"
    mu, low, high = (min(max(v, 0.0), s.width) for v in (mu, low, high))   # x' lies in [0, W] (audit7 A3)
    se = (high - low) / 2 / _N01.inv_cdf(0.5 + stat / 2)
    return Estimate(np.array([mu + s.origin]), np.array([se]), extra={**extra, "sigma_refit": sigma},
                    note=why + how, interval=(np.array([low + s.origin]), np.array([high + s.origin])),
                    interval_confidence=confidence)


def kv_two_round(s: Setting, value: E.Expr, n: int, confidence: float = 0.95) -> Protocol:
    """KVGAUSSTIMATE (Algorithm 1): RR1 on U_1, ESTMEAN, then KVRR2 on U_2 centred on µ̂_1."""
    g = grouping(s, n, 2)
    if g.k < 1 or g.n2 < 2:
        return _too_few(n, g)
    base = s.shifted(value)
    counts, users = yield from _round_one(s, g, base)
    _, _, mu1, stop = _coarse(s, counts, users)
    rr = RandomizedResponse(s.epsilon)
    reply = yield Round(rr, sign_encoding(base, mu1), users=g.second_users(), label="KVRR2")
    if reply.n < 2:
        return _too_few(reply.n, g)
    ones = float(reply.summary[0])
    est, se, saturated = _from_sign(s, rr, ones, reply.n, mu1)
    extra = {"grouping": g, "coarse_mu": mu1 + s.origin, "stop_level": stop, "saturated": saturated, "rounds": 2}
    note = NOTE + ("; saturated: the coarse estimate was far off (more users or a smaller range)" if saturated else "")
    return _checked(s, _answer(s, est + s.origin, se, confidence, note, extra), _level_cells(counts, GRR(s.epsilon, 4)),
                    [_sign_cells(rr, ones, reply.n, mu1, None, s)], mu1, stop, confidence)


def _interval_half(s: Setting, sigma_hat: float, n: int) -> float:
    """Half of |I|: σ̂(2 + √ln 4n) (Algorithm 6 line 10, the √ restored, spec A1)."""
    return sigma_hat * (2 + math.sqrt(math.log(4 * n)))


def _from_offsets(lap: LaplaceSum, summary: np.ndarray, m: int, lo: float, w: float) -> tuple[float, float]:
    """The mean of the truncated values (lattice index mean mapped back) and its standard error."""
    scale = w / lap.cells
    return lo + float(lap.estimate(summary, m)[0]) * scale, math.sqrt(lap.sample_variance(summary, m)) * scale


def uv_two_round(s: Setting, value: E.Expr, n: int, confidence: float = 0.95) -> Protocol:
    """UVGAUSSTIMATE (Algorithm 6): RR1 on U_1; AGG1 + ESTVAR give σ̂, KVAGG1 + ESTMEAN give µ̂_1 (the same
    reports post-processed twice, A16); then UVRR2 on U_2: truncate to I, add discrete Laplace of scale |I|/ε."""
    g = grouping(s, n, 2)
    if g.k < 1 or g.n2 < 2:
        return _too_few(n, g)
    base = s.shifted(value)
    counts, users = yield from _round_one(s, g, base)
    hist, _, mu1, stop = _coarse(s, counts, users)
    jv = est_var({j: agg1(h) for j, h in hist.items()}, users, s)
    half = _interval_half(s, 2.0 ** jv, n)
    lap = LaplaceSum(s.epsilon)
    reply = yield Round(lap, offset_encoding(base, mu1 - half, 2 * half), users=g.second_users(), label="UVRR2")
    if reply.n < 2:
        return _too_few(reply.n, g)
    est, se = _from_offsets(lap, reply.summary, reply.n, mu1 - half, 2 * half)
    extra = {"grouping": g, "coarse_mu": mu1 + s.origin, "sigma_coarse": 2.0 ** jv, "stop_level": stop,
             "interval_I": (mu1 - half + s.origin, mu1 + half + s.origin), "rounds": 2}
    answer = _answer(s, est + s.origin, se, confidence, NOTE + "; σ̂ is a power-of-two scale, not a standard "
                     "deviation", extra)
    return _checked(s, answer, _level_cells(counts, GRR(s.epsilon, 4)), [], mu1, stop, confidence)


def kv_one_round(s: Setting, value: E.Expr, n: int, confidence: float = 0.95) -> Protocol:
    """1ROUNDKVGAUSSTIMATE (reconstruction, spec §2.2): RR1 on U_1 and, at the same time, g = 5ρ subgroups of U_2
    each answering KVRR2 centred on the nearest point of the lattice S(r) = {(r+1)σ/5 + bD}, D = ρσ. The analyst
    uses the subgroup with a lattice point s* closest to µ̂_1 and returns s* + σT̂ (spec A12)."""
    g = grouping(s, n, 1)
    if g.k < 1 or g.m < 2:
        return _too_few(n, g)
    base, step, spacing = s.shifted(value), s.sigma_lo / 5, rho(s, n) * s.sigma_lo
    rr = RandomizedResponse(s.epsilon)
    counts, users = yield from _round_one(s, g, base)
    replies = []
    for r in range(g.groups):            # fixed before any report is read: a non-adaptive round
        replies.append((yield Round(rr, sign_encoding(base, (r + 1) * step, spacing), users=g.second_users(r),
                                    label=f"1ROUNDKVRR2 shift {r + 1}")))
    _, _, mu1, stop = _coarse(s, counts, users)
    points = [_lattice_point(mu1, (r + 1) * step, spacing, math.floor) for r in range(g.groups)]
    best = int(np.argmin([abs(z - mu1) for z in points]))
    reply = replies[best]
    if reply.n < 2:
        return _too_few(reply.n, g)
    est, se, saturated = _from_sign(s, rr, float(reply.summary[0]), reply.n, points[best])
    extra = {"grouping": g, "coarse_mu": mu1 + s.origin, "stop_level": stop, "centre": points[best] + s.origin,
             "subgroup": best, "saturated": saturated, "rounds": 1, "rho": rho(s, n)}
    answer = _answer(s, est + s.origin, se, confidence, NOTE + "; one-round protocol reconstructed from the "
                     "paper's description", extra)
    second = [_sign_cells(rr, float(r.summary[0]), r.n, (i + 1) * step, spacing, s)
              for i, r in enumerate(replies) if r.n > 0]
    return _checked(s, answer, _level_cells(counts, GRR(s.epsilon, 4)), second, mu1, stop, confidence)


def uv_one_round(s: Setting, value: E.Expr, n: int, confidence: float = 0.95) -> Protocol:
    """1ROUNDUVGAUSSTIMATE (reconstruction, spec §2.4): RR1 on U_1 and, at the same time, one subgroup of U_2 per
    (j1, j2) ∈ J_1 × [ρ], each reporting its offset from the nearest point of {j2·2^{j1} + b·ρ2^{j1}} with discrete
    Laplace of scale D/ε. The analyst takes ĵ1 = log₂ σ̂ (clamped to J_1) and the j2 whose point is closest to µ̂_1."""
    g = grouping(s, n, 1)
    if g.k < 1 or g.m < 2:
        return _too_few(n, g)
    base, lap, p, sig = s.shifted(value), LaplaceSum(s.epsilon), rho(s, n), sigma_levels(s)
    counts, users = yield from _round_one(s, g, base)
    replies = {}
    for a, j1 in enumerate(sig):          # fixed before any report is read: a non-adaptive round
        for j2 in range(1, p + 1):
            r = a * p + j2 - 1
            d = p * 2.0 ** j1
            replies[(j1, j2)] = yield Round(lap, offset_encoding(base, -d / 2, d, shift=j2 * 2.0 ** j1),
                                            users=g.second_users(r), label=f"1ROUNDUVRR2 ({j1}, {j2})")
    hist, _, mu1, stop = _coarse(s, counts, users)
    jv = est_var({j: agg1(h) for j, h in hist.items()}, users, s)
    j1 = min(max(jv, sig[0]), sig[-1])
    d = p * 2.0 ** j1
    points = [_lattice_point(mu1, j2 * 2.0 ** j1, d, math.floor) for j2 in range(1, p + 1)]
    best = int(np.argmin([abs(z - mu1) for z in points]))
    reply = replies[(j1, best + 1)]
    if reply.n < 2:
        return _too_few(reply.n, g)
    offset, se = _from_offsets(lap, reply.summary, reply.n, -d / 2, d)
    extra = {"grouping": g, "coarse_mu": mu1 + s.origin, "sigma_coarse": 2.0 ** jv, "stop_level": stop,
             "centre": points[best] + s.origin, "subgroup": (j1, best + 1), "rounds": 1, "rho": p}
    answer = _answer(s, points[best] + offset + s.origin, se, confidence, NOTE + "; one-round protocol "
                     "reconstructed from the paper's description; σ̂ is a power-of-two scale, not a standard deviation",
                     extra)
    return _checked(s, answer, _level_cells(counts, GRR(s.epsilon, 4)), [], mu1, stop, confidence)


def protocol(s: Setting, value: E.Expr, n: int, rounds: int = 2, confidence: float = 0.95) -> Protocol:
    """The protocol for the setting: KV or UV by σ, one or two rounds."""
    make = {(True, 2): kv_two_round, (False, 2): uv_two_round, (True, 1): kv_one_round, (False, 1): uv_one_round}
    return make[(s.known, rounds)](s, value, n, confidence)


# ---- predicted errors for the planner (spec §2.6) ---------------------------------------------------------------

def predicted_sd(s: Setting, n: int, rounds: int = 2, t: float = 0.5) -> float:
    """The closed-form sd of µ̂ (spec §2.6): KV σ√(π/2)e^{t²/2}(e^ε+1)/(e^ε−1)/√users, t = 0.5; UV at σ = σ_max
    with σ̂ = 2σ (its worst case), √(σ² + 2(|I|/ε)²)/√users (|I| = 2σ̂(2 + √ln 4n); D = ρσ̂ in one round); users
    = |U_2| (two rounds) or one subgroup (one round). Infinite when there are too few users."""
    g = grouping(s, n, rounds)
    users = g.m if rounds == 1 else g.n2
    if g.k < 1 or users < 2:
        return math.inf
    if s.known:
        c = (math.exp(s.epsilon) + 1) / math.expm1(s.epsilon)
        return s.sigma_lo * math.sqrt(math.pi / 2) * math.exp(t * t / 2) * c / math.sqrt(users)
    sigma_hat = 2 * s.sigma_hi
    width = rho(s, n) * sigma_hat if rounds == 1 else 2 * _interval_half(s, sigma_hat, n)
    return math.sqrt(s.sigma_hi ** 2 + 2 * (width / s.epsilon) ** 2) / math.sqrt(users)


def one_round_price(s: Setting, n: int) -> float:
    """Predicted one-round sd over two-round sd (about √(5ρ) for KV)."""
    return predicted_sd(s, n, 1) / predicted_sd(s, n, 2)

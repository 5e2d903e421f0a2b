"""Locally private minimum and maximum finding (Fukuchi, Yu, Haishima, Sakuma 2019): Algorithm 2 of spec seed-000.

The server bisects the declared domain for L rounds. In round t it publishes the midpoint τ_t of its current
interval and **every** user answers the bit "is my value ≤ τ_t?" (a tie counts as ≤) through the engine's one
binary randomized response (:class:`~ldpql.mechanisms.rr.RandomizedResponse`) at ε/L, with fresh coins. The
server debiases the count of ones into Φ' (unbiased for the empirical CDF at τ_t, never clipped) and keeps
the left half when Φ' ≥ γ (non-strict), the right half otherwise; the answer is the midpoint of the last
interval. The maximum is the same search on the negated values (spec §2.4: the bit is "x ≥ τ", and a tie
counts as ≥), so LDP_MAX(x) = -LDP_MIN(-x) exactly, with the same coins.

Privacy: ε-LDP for any L and γ (Theorem 2/6): each round is RR at ε/L on a bit computed from public τ_t and
the user's own value, and the L rounds compose sequentially to ε. Nothing else depends on private data.
Utility: Φ' estimates F̃(τ_t), so the search finds the γ-quantile, which an α-fat lower tail puts within
O((L² h_N/(ε² N))^{1/(2α)}) of the minimum (Theorem 2); Theorem 4 gives the finite-N bound used by EXPLAIN.
One-sided accuracy without any assumption on the data: the search can end entirely below the minimum only
if, in some round with no user at or below τ_t, noise alone pushes Φ' to γ; its probability is an exact
binomial tail, and the union over the L rounds gives the confidence of "minimum ≤ the final interval's top".
Runtime: O(L) rounds; exact aggregate: a round is two binomials drawn from the count of users at or below
τ_t (spec §2.7). Thresholds lie on a lattice of the domain, a + j·(b - a)/2^52, so the bisection halves
integer intervals exactly and "x ≤ τ_j" is "g(x) ≤ j" for the user's lattice index g(x) = ceil((x - a)/W):
the comparison itself whenever x - a is exact (ties on a threshold of a domain with integer or binary-fraction
ends, integer data), and up to one floating-point rounding step otherwise. To save scans, a round's encoding is the user's block in
a grid of 2^d blocks over the current interval (the thresholds of the next d rounds), so d consecutive
rounds share one count; the randomizer (:class:`ThresholdBit`) turns the block into the round's bit before
RR. Grids nest exactly on the lattice, which lets the exact path carry counts from one grid to the next.
Naive baseline (spec §2.6): :class:`LaplaceMin`, every user adds discrete Laplace noise of scale width/ε once
(on a lattice, sampled exactly: no floating-point Laplace) and the server takes the minimum of the noisy values.
The one-round bucket search that beats the bisection almost everywhere is in :mod:`ldpql.mechanisms.buckets`.
Citations: spec seed-000-min.md §2.2-2.7 (Algorithm 2, schedules, maximum, baseline, exact simulation),
§3 (Theorems 2, 4; Lemma 2), §5 A4-A6, A24, A27.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from fractions import Fraction

import numpy as np

from ldpql.mechanisms.base import (
    Encoding,
    Estimate,
    Protocol,
    Randomizer,
    Reply,
    Round,
    check_epsilon,
    grid_ceil,
    log_exact,
    register,
)
from ldpql.mechanisms.identity import Identity
from ldpql.mechanisms.rr import RandomizedResponse, flip_threshold

LOG2_1000 = math.log2(1000.0)
LN_1000 = math.log(1000.0)
EXACT_DEPTH = 40      # rounds of the noise-off search (EPSILON INF): resolution width / 2^41
GRID_DEPTH = 12       # rounds answered from one grid (one exact-path scan): 2^12 cells


# ---- the schedule: L, h_N, γ from public n and ε only (spec §2.3) ---------------------------------------------

def depth_and_h(n: int, alpha: float | None) -> tuple[int, float]:
    """(L, h_N) of the 'lower α' schedule with known lower bound ``alpha`` on α (Corollary 1: L = ⌈log2 N/(2α)⌉,
    h_N = ln N/(2α)), or of the 'unknown α' schedule when ``alpha`` is None (Corollary 2 with the paper's
    constants: L = ⌈(log2 N)²/(2 log2 1000)⌉, h_N = (ln N)²/(2 ln 1000)). L is at least 1."""
    n = max(int(n), 1)
    log2n, lnn = math.log2(n), math.log(n)
    if alpha is None:
        depth, h = math.ceil(log2n ** 2 / (2 * LOG2_1000)), lnn ** 2 / (2 * LN_1000)
    else:
        depth, h = math.ceil(log2n / (2 * alpha)), lnn / (2 * alpha)
    return max(depth, 1), h


def threshold_gamma(n: int, epsilon: float, depth: int, h: float) -> float:
    """γ = sqrt(4 e^{ε/L}(1 + e^{ε/L}) h_N / ((e^{ε/L} - 1)² N)) (Theorem 2); the exact form, never the 2L²/ε²
    approximation (A26). With it, Lemma 2's bound on a wrong step equals e^{-h_N}."""
    e1 = math.expm1(epsilon / depth)
    return math.sqrt(4 * (e1 + 1) * (e1 + 2) * h / (e1 ** 2 * max(n, 1)))


@dataclass(frozen=True)
class Schedule:
    """The public parameters of one search: n users, total ε, the α assumption, L rounds, h_N and γ."""

    n: int
    epsilon: float
    alpha: float | None          # known lower bound α₀ on α (Corollary 1); None: α unknown (Corollary 2)
    depth: int
    h: float
    gamma: float

    @property
    def exact(self) -> bool:
        """Noise off (EPSILON INF): Algorithm 1, the non-private bisection."""
        return math.isinf(self.epsilon)

    @property
    def round_epsilon(self) -> float:
        """ε/L: what each round's randomized response costs every user."""
        return self.epsilon / self.depth

    @property
    def degenerate(self) -> bool:
        """γ ≥ 1: Φ' ≥ γ happens only by noise, so the search drifts to the top of the domain (spec §2.2, A24)."""
        return not self.exact and self.gamma >= 1

    @property
    def name(self) -> str:
        if self.alpha is None:
            return "unknown α (Corollary 2)"
        return f"lower α, α ≥ α₀ = {self.alpha:g} (Corollary 1)"

    def rate(self, alpha: float) -> float:
        """Theorem 2's rate (L² h_N/(ε² N))^{1/(2α)} (no constant), in half-widths of the domain."""
        return (self.depth ** 2 * self.h / (self.epsilon ** 2 * self.n)) ** (1 / (2 * alpha))

    def bound(self, alpha: float = 1.0) -> float:
        """Theorem 4 (fixed data) in half-widths of the domain, for data at least as dense near the minimum
        as a spread over the whole domain with tail exponent α: F(x) ≥ ((x - x_min)/2)^α on [-1, 1], i.e.
        C = 2^-α and C(x̄ - x_min)^α = 1, so Eq. 7 asks 2γ < 1. Then
        E|error| ≤ 2(2γ/C)^{1/α} + e^{-h_N} + 2^{-L} = 4(2γ)^{1/α} + e^{-h_N} + 2^{-L}; otherwise (or beyond it)
        the trivial bound 2 (the whole domain)."""
        if self.exact:
            return 2.0 ** -self.depth
        if 2 * self.gamma >= 1:
            return 2.0
        return min(2.0, 4 * (2 * self.gamma) ** (1 / alpha) + math.exp(-self.h) + 2.0 ** -self.depth)

    def wrong_step_probability(self, n: int | None = None) -> float:
        """P(Φ' ≥ γ) in a round where no user is at or below τ (so the count of ones is Binomial(N, 1-p)):
        the only way a step can leave the minimum to its right. Exact binomial tail (Lemma 2 bounds it by
        e^{-h_N})."""
        n = self.n if n is None else n
        if self.exact or n <= 0:
            return 0.0
        return _wrong_step(n, self.round_epsilon, self.gamma)

    def confidence(self, n: int | None = None) -> float:
        """Probability (at least) that the minimum is at or below the top of the final interval: one minus the
        union over the L rounds of a wrong step (no assumption on the data)."""
        return max(0.0, 1.0 - self.depth * self.wrong_step_probability(n))


@functools.lru_cache(maxsize=4096)
def _wrong_step(n: int, round_epsilon: float, gamma: float) -> float:
    rr = RandomizedResponse(round_epsilon)

    def phi(c: int) -> float:  # Φ' for c ones among n reports, as the search computes it
        return float(rr.estimate(np.array([c]), n)[0])

    c = max(0, math.ceil(n * (rr.q + gamma * (rr.p - rr.q))))
    while c > 0 and phi(c - 1) >= gamma:
        c -= 1
    while c <= n and phi(c) < gamma:
        c += 1
    from scipy.stats import binom  # imported here: scipy.stats adds ~1 s to `import ldpql`

    return 0.0 if c > n else float(binom.sf(c - 1, n, rr.q))


def schedule(n: int, epsilon: float, alpha: float | None = None) -> Schedule:
    """The schedule of Algorithm 2 for n users at total ε (public facts only); EPSILON INF gives Algorithm 1
    with :data:`EXACT_DEPTH` rounds."""
    if math.isinf(epsilon):
        return Schedule(n, epsilon, alpha, EXACT_DEPTH, math.inf, 0.0)
    if not epsilon > 0:
        raise ValueError(f"epsilon must be positive, got {epsilon}")
    depth, h = depth_and_h(n, alpha)
    return Schedule(n, epsilon, alpha, depth, h, threshold_gamma(n, epsilon, depth, h))


@functools.lru_cache(maxsize=16)
def _stretch_starts(alpha: float | None) -> tuple[int, ...]:
    """The first n of each stretch of constant L (they depend on α only: built once, not at every ε)."""
    top, starts = 1 << 62, [2]
    while True:
        want = depth_and_h(starts[-1], alpha)[0] + 1
        lo, hi = starts[-1], top
        if depth_and_h(hi, alpha)[0] < want:
            return tuple(starts)
        while lo < hi:
            mid = (lo + hi) // 2
            lo, hi = (mid + 1, hi) if depth_and_h(mid, alpha)[0] < want else (lo, mid)
        starts.append(lo)


@functools.lru_cache(maxsize=256)
def min_users(epsilon: float, alpha: float | None = None) -> int:
    """The smallest n from which γ < 1 for every larger n at this ε (None if no n below 2^62 works).

    γ falls with n while L stays fixed and jumps up where L grows, so it is enough to find the last stretch of
    constant L whose first n still has γ ≥ 1, then bisect inside it."""
    def gamma(n: int) -> float:
        return schedule(n, epsilon, alpha).gamma

    top, starts = 1 << 62, _stretch_starts(alpha)
    bad = [i for i, s in enumerate(starts) if gamma(s) >= 1]
    if not bad:
        return 2
    i = bad[-1]
    lo, hi = starts[i], (starts[i + 1] if i + 1 < len(starts) else top)
    if gamma(hi - 1) >= 1:
        return hi if hi < top else None
    while lo < hi:
        mid = (lo + hi) // 2
        lo, hi = (mid + 1, hi) if gamma(mid) >= 1 else (lo, mid)
    return lo


def min_epsilon(n: int, alpha: float | None = None) -> float | None:
    """The smallest ε with γ < 1 at n users (γ falls with ε at fixed n); None when even ε → ∞ leaves
    γ → 2·sqrt(h_N/N) ≥ 1."""
    depth, h = depth_and_h(n, alpha)
    if 4 * h >= max(n, 1):
        return None
    lo, hi = 1e-6, 1.0
    while threshold_gamma(n, hi, depth, h) >= 1:
        hi *= 2
    for _ in range(100):
        mid = math.sqrt(lo * hi)
        lo, hi = (mid, hi) if threshold_gamma(n, mid, depth, h) >= 1 else (lo, mid)
    return hi


# ---- one round's encoding: the user's cell in a grid over the search interval ---------------------------------

LATTICE_BITS = 52     # thresholds lie on a + j·W, W = (b - a)/2^52: exact integers j in a double


@dataclass(frozen=True)
class Lattice:
    """The points a + j·W (j = 0 .. 2^52) of the domain [a, b] on which every threshold of the search lies.

    A user's lattice index is g(x) = clip(ceil((x - a)/W), 0, 2^52), so "x ≤ a + j·W" is "g(x) ≤ j": the
    bisection halves integer intervals exactly, and grids at different depths nest exactly. g is monotone in
    x; it is the comparison with a + j·W itself whenever x - a is exact (a tie on a threshold of a domain with
    integer or binary-fraction ends, integer data), and up to one rounding step otherwise."""

    low: float
    high: float

    @property
    def top(self) -> int:
        return 1 << LATTICE_BITS

    @functools.cached_property
    def width(self) -> float:
        return (self.high - self.low) / self.top     # exact: division by a power of two

    def points(self, j: np.ndarray) -> np.ndarray:
        """:meth:`point` of many lattice indices."""
        j = np.asarray(j)
        return np.where(j == 0, self.low, np.where(j == self.top, self.high, self.low + j * self.width))

    @property
    def slack(self) -> float:
        """How far "g(x) ≤ j" can put x above a + j·W by rounding: under 2 lattice steps plus the rounding of the
        point itself; 4·(W + ulp of the domain's ends), to be safe."""
        return 4 * (self.width + math.ulp(max(abs(self.low), abs(self.high))))

    def point(self, j: float) -> float:
        return self.low if j == 0 else self.high if j == self.top else self.low + j * self.width

    def index(self, x: np.ndarray) -> np.ndarray:
        """g(x) for every value (the same float arithmetic as the SQL the planner builds)."""
        g = np.ceil((np.asarray(x, dtype=float) - self.low) / self.width)
        return np.clip(g, 0, self.top).astype(np.int64)


@dataclass(frozen=True)
class Grid:
    """2^depth blocks of B lattice steps over (j0, j1]: block k holds j0 + kB < g ≤ j0 + (k+1)B, the first block
    also everything below and the last everything above. The round with threshold j asks "block ≤ (j-j0)/B - 1",
    which is g ≤ j. Consecutive rounds inside one grid share one count of users per block."""

    lattice: Lattice
    j0: int
    j1: int
    depth: int

    @property
    def size(self) -> int:
        return 1 << self.depth

    @property
    def step(self) -> int:
        return (self.j1 - self.j0) >> self.depth

    def cut(self, j: int) -> int:
        """The last block that is at or below threshold j."""
        return (j - self.j0) // self.step - 1

    def cell(self, g: np.ndarray) -> np.ndarray:
        """The block of every lattice index."""
        k = -(-(np.clip(np.asarray(g, dtype=np.int64), self.j0, self.j1) - self.j0) // self.step)
        return (np.clip(k, 1, self.size) - 1).astype(np.int64)

    def histogram(self, sorted_g: np.ndarray) -> np.ndarray:
        """Users per block from sorted lattice indices, by binary search (spec §2.7)."""
        inner = self.j0 + self.step * np.arange(1, self.size)
        idx = np.searchsorted(sorted_g, inner, side="right")
        return np.diff(np.concatenate([[0], idx, [len(sorted_g)]])).astype(np.int64)


@dataclass(frozen=True)
class GridEncoding(Encoding):
    """An encoding whose value is the user's block in ``grid`` (``sql`` computes it in DuckDB)."""

    grid: Grid | None = field(default=None, compare=False)


@register
class ThresholdBit(Randomizer):
    """The round's bit "block ≤ cut" (x ≤ τ) sent through the engine's binary randomized response.

    The input is the user's block (0 .. size-1); the bit is a deterministic function of it, and the coin is
    :class:`RandomizedResponse`'s (or the identity's, noise off). Same output distribution, same ε."""

    name = "threshold_rr"
    estimates = "ones"

    def __init__(self, epsilon: float, cut: int, size: int, inner: Randomizer | None = None):
        self.inner = inner if inner is not None else RandomizedResponse(epsilon)
        self.epsilon = self.inner.epsilon
        self.cut, self.input_size = int(cut), int(size)

    def bits(self, x: np.ndarray) -> np.ndarray:
        return (np.asarray(x) <= self.cut).astype(np.int8)

    def randomize(self, x: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        return self.inner.randomize(self.bits(x), rng)

    def aggregate(self, reports: np.ndarray) -> np.ndarray:
        return self.inner.aggregate(reports)

    def estimate(self, summary: np.ndarray, n: int) -> np.ndarray:
        return self.inner.estimate(summary, n)

    def variance(self, truth: np.ndarray, n: int) -> np.ndarray:
        return self.inner.variance(truth, n)

    def sample_aggregate(self, counts: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        counts = np.asarray(counts)
        below = int(counts[: self.cut + 1].sum())
        return self.inner.sample_aggregate(np.array([int(counts.sum()) - below, below]), rng)

    def output_distribution(self, x: float) -> np.ndarray:
        return self.inner.output_distribution(int(x <= self.cut))

    def realised_distribution(self, x: float) -> list[Fraction]:
        return self.inner.realised_distribution(int(x <= self.cut))

    @classmethod
    def audit_cases(cls):
        return [cls(e, cut, size) for e in (0.05, 0.5, 1.0, 3.0) for cut, size in ((0, 2), (0, 4), (3, 8), (6, 8))]

    @classmethod
    def realised_cases(cls, epsilon: float):
        return [cls(epsilon, cut, size) for cut, size in ((0, 2), (3, 8))]

    def __repr__(self) -> str:
        return f"{self.name}(epsilon={self.epsilon:g}, block <= {self.cut} of {self.input_size})"


# ---- the protocol (Algorithm 2, or Algorithm 1 noise off) ---------------------------------------------------

Encoder = Callable[[Grid], Encoding]


def search(n: int, plan: Schedule, low: float, high: float, encode: Encoder, negate: bool = False,
           grid_depth: int = GRID_DEPTH) -> Protocol:
    """The bisection protocol for the minimum of values in [low, high] (the maximum when ``negate``: the
    same search on -x over [-high, -low], answer negated). ``encode(grid)`` gives the round's encoding of
    the users' blocks in ``grid`` (of the negated values when ``negate``).

    Returns the midpoint of the final interval with a one-sided interval: [low, top of the final interval]
    for the minimum ([bottom, high] for the maximum) at confidence ``plan.confidence(N)``. The search stops
    early only if the lattice cannot be split further (more than 52 rounds)."""
    if n == 0:
        nan = np.full(1, np.nan)
        return Estimate(nan, nan, note="no users")
    lattice = Lattice(-high, -low) if negate else Lattice(low, high)
    inner = Identity(2, "ones") if plan.exact else RandomizedResponse(plan.round_epsilon)
    grid, j_lo, j_hi, users = None, 0, lattice.top, n
    transcript = []
    for t in range(plan.depth):
        if j_hi - j_lo < 2:
            break
        if grid is None or j_hi - j_lo == grid.step:
            depth = min(grid_depth, plan.depth - t, (j_hi - j_lo).bit_length() - 1)
            grid = Grid(lattice, j_lo, j_hi, depth)
        j = (j_lo + j_hi) // 2
        randomizer = ThresholdBit(inner.epsilon, grid.cut(j), grid.size, inner)
        tau = lattice.point(j)
        reply: Reply = yield Round(randomizer, encode(grid), label=f"round {t + 1}/{plan.depth}: "
                                   f"{'x ≥ ' + repr(-tau) if negate else 'x ≤ ' + repr(tau)}")
        users = reply.n
        if users == 0:
            nan = np.full(1, np.nan)
            return Estimate(nan, nan, note="no users took part")
        phi = float(randomizer.estimate(reply.summary, users)[0])
        left = phi > 0 if plan.exact else phi >= plan.gamma   # Algorithm 1: strict > 0; Algorithm 2: Φ' ≥ γ
        j_lo, j_hi = (j_lo, j) if left else (j, j_hi)
        transcript.append((-tau if negate else tau, phi, "keep " + (("right" if negate else "left") if left else
                                                                      ("left" if negate else "right"))))
    top = lattice.point(j_hi)
    value = lattice.point((j_lo + j_hi) / 2)
    extra = {"schedule": plan, "transcript": transcript, "n": users}
    if plan.exact:
        return Estimate(np.array([-value if negate else value]), np.full(1, np.nan), extra=extra)
    conf = plan.confidence(users)
    top += lattice.slack
    interval = (np.array([-top]), np.array([high])) if negate else (np.array([low]), np.array([top]))
    which = "maximum ≥ the interval's bottom" if negate else "minimum ≤ the interval's top"
    note = (f"LDP_{'MAX' if negate else 'MIN'} by bisection estimates the point with γ = {plan.gamma:.3g} of the "
            f"users {'above' if negate else 'below'} it, not the extreme itself; its interval is one-sided: the "
            f"{which} with the confidence shown "
            "(it fails only if noise alone pushed a step past the extreme); the other end is the declared "
            "domain's, since the theory bounds the error only in expectation and under an assumption on the data")
    if plan.degenerate:
        note += f"; γ = {plan.gamma:.3g} ≥ 1 (too few users for this ε): the estimate drifts to the domain's " \
                f"{'bottom' if negate else 'top'}"
    return Estimate(np.array([-value if negate else value]), np.full(1, np.nan), note=note, extra=extra,
                    interval=interval, interval_confidence=conf)


# ---- the naive baseline: Laplace noise once, minimum of the noisy values (spec §2.6) --------------------------

class MinSummary(float):
    """A batch summary under min: ``a + b`` is min(a, b), so batches combine the way the executor adds
    summaries. A plain number (the executor's empty start, if any) is the neutral element."""

    def __add__(self, other):
        return MinSummary(min(float(self), float(other))) if isinstance(other, MinSummary) else self

    __radd__ = __add__


LAPLACE_LATTICE_BITS = 12   # the baseline's reports lie on -1 + j·2/M, M = 2^12 cells over [-1, 1]


@functools.lru_cache(maxsize=64)
def _remainder_numerators(thresholds: tuple[int, ...]) -> tuple[int, ...]:
    """P(R = r)·2^(53m) for r = 0..2^m-1, where bit j of R is 1 w.p. thresholds[j]/2^53 independently."""
    out = [1]
    for k in thresholds:  # bit j doubles the table: r without bit j, then r with it
        out = [v * ((1 << 53) - k) for v in out] + [v * k for v in out]
    return tuple(out)


@register
class LaplaceMin(Randomizer):
    """Discrete Laplace on a lattice for x in [-1, 1]; the summary is the smallest report (spec §2.6 baseline).

    Privacy: ε-LDP *as the sampler runs* (DESIGN §4.5: no floating-point Laplace, whose set of reachable floats
    identified the input, Mironov 2012). Chosen over Mironov's snapping mechanism because its realised pmf is
    known exactly and its ε is exactly what it claims, without a correctly rounded log. The user snaps x to the
    lattice k = round((x+1)M/2) ∈ {0..M} (data-only; sensitivity M steps) and reports -1 + (k + G1 - G2)·2/M
    with G1, G2 independent copies of G = M·Q + R: R's m bits are independent, bit j being 1 w.p.
    β_j = 1/(1 + e^{ε2^j/M}) (RR's flip probability at ε2^j/M, rounded up: :func:`~ldpql.mechanisms.rr.flip_probability`),
    so R is the geometric ∝ α^r on 0..M-1, α = e^{-ε/M}; Q counts coins that continue w.p. ρ' = ⌈e^{-ε}·2^53⌉/2^53
    ≥ e^{-ε} (rounded up: more noise) until one stops. Every integer is reachable from every input. With
    c = max over shifts 0 ≤ s ≤ M and g of P(G=g)/P(G=g+s), P(Z=z) ≤ c·P(Z=z±s) for Z = G1 - G2 (sum over
    g2, and symmetry), so the realised ε is ln c; :meth:`realised_epsilon` computes it exactly, and it is
    ln(1/ρ') ≤ ε (a shift by M moves Q by one, exactly), tight: for z ≥ 0, P(Z=z+M) = ρ'·P(Z=z).
    Utility: the noise has variance 8/ε² (that of Laplace(2/ε)); the minimum of n reports sits about
    b(H_n - ln 2) below the data, b = 2/ε (:func:`laplace_error`), far outside the domain: the reason the
    bisection exists. Runtime: O(n(m + 1/(1 - e^{-ε}))) coins, vectorised over users.
    Citations: seed-000-min.md §2.6; Mironov, CCS 2012; Canonne, Kamath, Steinke 2020 (discrete Laplace)."""

    name = "laplace_min"
    estimates = "min"

    def __init__(self, epsilon: float, lattice_bits: int = LAPLACE_LATTICE_BITS):
        check_epsilon("laplace_min", epsilon)
        self.epsilon, self.lattice_bits = float(epsilon), int(lattice_bits)
        self.cells = 1 << self.lattice_bits
        self.b = 2.0 / self.epsilon   # the noise's scale in the encoded units, as Laplace(b)
        self.bit_thresholds = tuple(flip_threshold(self.epsilon * (1 << j) / self.cells) for j in range(self.lattice_bits))
        self.carry_threshold = grid_ceil(math.exp(-self.epsilon))

    def _geometric(self, n: int, rng: np.random.Generator) -> np.ndarray:
        """n draws of G = M·Q + R (privacy-critical: the realised pmf is what :meth:`realised_epsilon` reads)."""
        g = np.zeros(n, dtype=np.int64)
        for j, k in enumerate(self.bit_thresholds):
            bit = rng.random(n) < math.ldexp(k, -53)                 # bit j of R w.p. β_j' = k/2^53
            g += bit.view(np.int8).astype(np.int64) << j
        alive, carry = np.arange(n), math.ldexp(self.carry_threshold, -53)
        while alive.size:                                            # Q: continue w.p. ρ', stop otherwise
            alive = alive[rng.random(alive.size) < carry]
            g[alive] += self.cells
        return g

    def lattice(self, x: np.ndarray) -> np.ndarray:
        """The user's lattice point k = round((x+1)M/2), 0..M (a deterministic function of its own value)."""
        k = np.rint((np.clip(np.asarray(x, dtype=float), -1, 1) + 1) * (self.cells / 2))
        return k.astype(np.int64)

    def randomize(self, x: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        y = self.lattice(x) + self._geometric(len(x), rng) - self._geometric(len(x), rng)
        return y * (2.0 / self.cells) - 1.0   # post-processing: every report is on the same lattice

    def aggregate(self, reports: np.ndarray) -> np.ndarray:
        low = float(np.min(reports)) if len(reports) else math.inf
        return np.array([MinSummary(low)], dtype=object)

    def estimate(self, summary: np.ndarray, n: int) -> np.ndarray:
        return np.array([float(summary[0])])

    def variance(self, truth: np.ndarray, n: int) -> np.ndarray:
        return np.full(np.shape(truth), np.nan)

    # -- the realised pmf, exactly -----------------------------------------------------------------------------
    @functools.cached_property
    def _remainder(self) -> tuple[list[Fraction], Fraction]:
        """P(R = r) for r = 0..M-1 and ρ', as exact rationals."""
        scale = 1 << (53 * self.lattice_bits)
        return [Fraction(v, scale) for v in _remainder_numerators(self.bit_thresholds)], \
            Fraction(self.carry_threshold, 1 << 53)

    def realised_epsilon(self) -> float:
        """ln c, c = max(1/ρ', max_{r ≤ r'} P_R(r)/P_R(r'), max_{r > r'} P_R(r)/(ρ' P_R(r'))): every ratio
        P(G=g)/P(G=g+s), 0 ≤ s ≤ M (exact, O(M) with suffix and prefix minima)."""
        nums, rho = _remainder_numerators(self.bit_thresholds), Fraction(self.carry_threshold, 1 << 53)
        worst = 1 / rho
        suffix, prefix = list(nums), list(nums)
        for r in range(len(nums) - 2, -1, -1):
            suffix[r] = min(suffix[r], suffix[r + 1])
        for r in range(1, len(nums)):
            prefix[r] = min(prefix[r], prefix[r - 1])
        for r, v in enumerate(nums):
            worst = max(worst, Fraction(v, suffix[r]), Fraction(v, prefix[r - 1]) / rho if r else worst)
        return log_exact(worst)

    def _noise_pmf(self, z: int) -> Fraction:
        """P(G1 - G2 = z): with |z| = aM + b, (1-ρ')ρ'^a/(1+ρ') · Σ_r P_R(r)·S(b+r), S(v) = P_R(v) below M and
        ρ'·P_R(v-M) above (summing the geometric Q of both draws in closed form)."""
        pr, rho = self._remainder
        a, b = divmod(abs(z), self.cells)
        total = sum(p * (pr[b + r] if b + r < self.cells else rho * pr[b + r - self.cells]) for r, p in enumerate(pr))
        return (1 - rho) * rho ** a / (1 + rho) * total

    def _noise_tail(self, t: int) -> Fraction:
        """P(G1 - G2 ≥ t) for t ≥ 0: P(Z = z + M) = ρ'·P(Z = z) for z ≥ 0, so the tail is M terms over 1 - ρ'."""
        return sum(self._noise_pmf(t + j) for j in range(self.cells)) / (1 - self._remainder[1])

    def realised_distribution(self, x: float) -> list[Fraction]:
        """The exact pmf of the lattice report clamped to the window [-2M, 3M] (a post-processing, so its ratios
        bound nothing beyond the unclamped ones; the clamped ends carry the tails). Beyond the window every
        ratio repeats with period M (P(Z = z + M) = ρ'·P(Z = z) for z ≥ 0), so the window shows all of them."""
        k, lo, hi = int(self.lattice(np.array([x]))[0]), -2 * self.cells, 3 * self.cells
        inner = [self._noise_pmf(y - k) for y in range(lo + 1, hi)]
        return [self._noise_tail(k - lo), *inner, self._noise_tail(hi - k)]

    def audit_inputs(self) -> np.ndarray:
        return np.linspace(-1.0, 1.0, 2 * self.cells + 1)  # every lattice point, and the values between them

    def output_distribution(self, x: float) -> np.ndarray:
        return np.array([float(p) for p in self.realised_distribution(x)])

    @classmethod
    def audit_cases(cls):
        return [cls(e, bits) for e in (0.1, 0.5, 1.0, 2.0, 5.0) for bits in (1, 3)]

    @classmethod
    def realised_cases(cls, epsilon: float):
        return [cls(epsilon, bits) for bits in (1, 3)]

    def __repr__(self) -> str:
        return f"{self.name}(epsilon={self.epsilon:g}, M=2^{self.lattice_bits})"


class ExactMin(Identity):
    """The noise-off twin of :class:`LaplaceMin` (EPSILON INF, evaluation only): reports the value itself and
    the summary is the smallest. Not a randomizer (ε = ∞), so not registered."""

    def __init__(self):
        super().__init__(None, "min")

    aggregate = LaplaceMin.aggregate
    estimate = LaplaceMin.estimate
    sample_aggregate = Randomizer.sample_aggregate   # no exact-aggregate path: the per-user path takes the min


def laplace_error(n: int, epsilon: float) -> float:
    """E|min of the noisy values - minimum| in half-widths when all n users sit at the minimum (the worst
    case), b = 2/ε: b·∫_0^{1/2} (1 - (1-s)^n)/s ds + b/(n 2^n) = b(H_n - ln 2 + ∫_{1/2}^1 (1-s)^n/s ds) + b/(n 2^n),
    i.e. about b(H_n - ln 2)."""
    if math.isinf(epsilon):
        return 0.0
    from scipy import integrate, special  # imported here: keeps `import ldpql` fast

    b, n = 2.0 / epsilon, max(int(n), 1)
    harmonic = float(special.digamma(n + 1)) + float(np.euler_gamma)
    tail, _ = integrate.quad(lambda s: (1 - s) ** n / s, 0.5, 1.0)
    return b * (harmonic - math.log(2) + tail) + b / (n * 2.0 ** min(n, 1000))


def laplace_protocol(n: int, epsilon: float, encoding: Encoding, half: float, mid: float,
                     negate: bool = False) -> Protocol:
    """One round: every user reports its value (in [-1, 1], negated for the maximum) plus Laplace noise; the
    answer is the smallest report mapped back (unclamped, as in the paper). No interval: see the note."""
    randomizer = ExactMin() if math.isinf(epsilon) else LaplaceMin(epsilon)
    reply = yield Round(randomizer, encoding, label="laplace")
    if reply.n == 0:
        nan = np.full(1, np.nan)
        return Estimate(nan, nan, note="no users")
    m = float(randomizer.estimate(reply.summary, reply.n)[0])
    value = mid + half * (-m if negate else m)
    note = ("naive Laplace baseline (Fukuchi et al. 2019): no interval; the noisy extreme lies about "
            f"{half * laplace_error(reply.n, epsilon):.4g} beyond the true one, outside the domain")
    return Estimate(np.array([value]), np.full(1, np.nan), note=note if not math.isinf(epsilon) else "")

"""Quantiles under LDP by noisy binary search (seed 001): DpNaiveNBS, DpBayesLearn / DpBayeSS, and their coins.

Privacy: ε-LDP for every user. Each protocol here gives every user **one** round (its rounds take disjoint
user intervals), in which the user sends one bit, ``1[x <= coin]``, through the engine's binary randomized
response (:class:`~ldpql.mechanisms.rr.RandomizedResponse`) at the protocol's ε. Which coin a round asks is
chosen from earlier rounds' released counts only (post-processing), so a user's privacy is exactly the ε of
the one RR it ran; the executor checks that no user is in two rounds.
Utility: DpBayeSS finds an α-approximate τ-quantile (rank error α) with n = O(log B/(ε²α²)) users, DpNaiveNBS
with an extra log log B factor (spec §3, Thms 1.1 and G.3); the planner's predictions are calibrated on the
released success rates (spec §4.5).
Runtime: one DuckDB scan (exact path) per round. BayesLearn's exact Bayes update runs on a lazy binary tree
over the B - 1 coin intervals (:class:`PosteriorTree`): O(log B) per round, O(rounds · log B) memory, so B
may be 10^6 or an int64 range.
Citations: Aamand, Boninsegna, Gentle, Imola, Pagh, ICML 2025; spec seed-001-quantile.md §2.1-2.6, §5 (A1-A9).

Coins: a quantile query searches K ordered coins (the values of an integer domain, or the buckets of a
continuous one); coin k stands for the event ``bucket(x) <= k``. ``paper=True`` reproduces the authors' code
exactly (ties go right, the coin j of spec A1 is returned, ceil(log2 K) NBS batches); the engine's default
returns the value j + 1 and runs ceil(log2(K + 1)) batches so that a noise-free search is exact.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from statistics import NormalDist
from typing import Any, Callable, Iterator

import numpy as np

from ldpql import expr as E
from ldpql.mechanisms.base import Encoding, Estimate, Protocol, Reply, Round
from ldpql.mechanisms.identity import Identity
from ldpql.mechanisms.rr import RandomizedResponse, keep_probability

C_DEFAULT = 0.6          # spec §2.4.1: a_u = c sqrt(ln B / n)
STAGE2_CAP = 13          # spec §2.4 line 9 / A3: second screening only when more than 13 intervals remain
MIN_BAYESS_COINS = 16    # spec §2.4 guards / §6 rule 5: plain NaiveNBS below this


# ---- coins and encodings ------------------------------------------------------------------------------------

_ONE, _ZERO = np.array([0, 1], dtype=np.int64), np.array([1, 0], dtype=np.int64)
_ONE.flags.writeable = _ZERO.flags.writeable = False

@dataclass(frozen=True)
class ThresholdEncoding(Encoding):
    """``1[bucket(x) <= coin]``: what a user computes for one noisy-binary-search question. Its base is the
    coin itself, so one read of the coins' counts answers every threshold."""

    coin: int = 0
    bucket: Any = None

    @property
    def base(self) -> Any:
        return self.bucket

    def inputs(self, values: np.ndarray) -> np.ndarray:
        return (np.asarray(values) <= self.coin).astype(np.int64)

    def counts(self, coins: np.ndarray) -> np.ndarray:
        """Input histogram (users answering 0, users answering 1) of users holding ``coins``."""
        if len(coins) == 1:  # BayesLearn's one-user rounds: skip numpy's per-call overhead
            return _ONE if coins[0] <= self.coin else _ZERO
        ones = int(np.count_nonzero(coins <= self.coin))
        return np.array([len(coins) - ones, ones], dtype=np.int64)

    def counts_from_histogram(self, hist: np.ndarray) -> np.ndarray:
        ones = int(hist[: self.coin + 1].sum())
        return np.array([int(hist.sum()) - ones, ones], dtype=np.int64)


@dataclass(frozen=True)
class LevelEncoding(Encoding):
    """``bucket(x) // width``: the node of a b-adic tree level (``size`` nodes) holding the user's value; its
    base is the coin."""

    width: int = 1
    bucket: Any = None

    @property
    def base(self) -> Any:
        return self.bucket

    def inputs(self, values: np.ndarray) -> np.ndarray:
        return np.asarray(values).astype(np.int64) // self.width

    def counts(self, coins: np.ndarray) -> np.ndarray:
        return np.bincount(coins // self.width, minlength=self.size).astype(np.int64)

    def counts_from_histogram(self, hist: np.ndarray) -> np.ndarray:
        return np.add.reduceat(hist, np.arange(0, len(hist), self.width)).astype(np.int64)


@dataclass(frozen=True)
class CoinSpace:
    """The K coins of a quantile query and the expression that maps a user's row to its coin (bucket) index.

    ``bucket`` is an :mod:`ldpql.expr` expression with values 0..size-1 (the planner builds it from the
    declared domain); coin k stands for the values [low + k*step, low + (k+1)*step) and is reported as
    ``low + k*step + offset`` (the value itself for one coin per integer, a bucket's midpoint otherwise).
    """

    size: int
    bucket: Any = E.Column("x")
    low: float = 0.0
    step: float = 1.0
    integer: bool = True
    offset: float = 0.0
    high: float | None = None   # the declared domain's largest value (a last bucket can be partial)

    def threshold(self, coin: int) -> ThresholdEncoding:
        return ThresholdEncoding(E.threshold(self.bucket, int(coin)), 2, f"x <= coin {coin}", coin=int(coin),
                                 bucket=self.bucket)

    def level(self, width: int) -> LevelEncoding:
        nodes = -(-self.size // width)
        return LevelEncoding(E.op("//", self.bucket, int(width)), nodes, f"node of width {width}",
                             width=int(width), bucket=self.bucket)

    def value(self, coin: float) -> float:
        """The reported value of coin ``coin`` (never past the declared domain: a partial last bucket's midpoint
        would be)."""
        v = self.low + coin * self.step + self.offset
        return v if self.high is None else min(v, self.high)

    def lower_edge(self, coin: int) -> float:
        """The smallest value coin ``coin`` holds: an interval's low end (a bucket's midpoint would leave out the
        values below it)."""
        return self.low + coin * self.step

    def upper_edge(self, coin: int) -> float:
        """The largest value coin ``coin`` holds (of a DOUBLE bucket: its right end): an interval's high end."""
        top = self.low + (coin + 1) * self.step - (1.0 if self.integer else 0.0)
        return top if self.high is None else min(top, self.high)

    def end(self, top: bool) -> float:
        """The domain's own smallest or largest value: a value whose rank error is at most τ (1 - τ) whatever the
        data, where a bucket's midpoint has none."""
        return self.upper_edge(self.size - 1) if top else self.low

    @property
    def bucketed(self) -> bool:
        """A coin holds several values and reports one of them (a bucket's midpoint): that value's own rank can be
        anywhere in [F(v - 1), F(v)], so its rank error is up to max(F(v) - τ, τ - F(v - 1))."""
        return not (self.integer and self.step == 1)


# ---- the BayesLearn posterior ------------------------------------------------------------------------------

class PosteriorTree:
    """Weights of ``size`` ordered intervals, uniform at first, under the BayesLearn update (spec §2.2).

    A lazy binary tree over [0, size): nodes are created on the paths the search visits; an unexpanded node
    spreads its mass uniformly, and a pending multiplier waits on each node until the search descends through
    it. :meth:`locate` finds the interval holding a posterior quantile (and the mass left of it);
    :meth:`update` multiplies everything left of that interval by one factor, everything right by another,
    and sets the interval's own weight, all along the same root-to-leaf path: O(log size) per round.
    """

    def __init__(self, size: int):
        if size < 1:
            raise ValueError("a posterior needs at least one interval")
        self.size = size
        self.lo, self.hi, self.sum, self.mul, self.kid = [0], [size], [1.0], [1.0], [0]
        self._path: tuple[list[int], list[int], list[int]] = ([], [], [])
        self._leaf = 0

    @property
    def total(self) -> float:
        return self.sum[0]

    def _expand(self, node: int) -> int:
        """Give an unexpanded node two children that split its (uniform) mass by length; returns the left."""
        lo, hi = self.lo[node], self.hi[node]
        mid, s, k = (lo + hi) // 2, self.sum[node], len(self.lo)
        left = s * (mid - lo) / (hi - lo)
        self.lo += (lo, mid)
        self.hi += (mid, hi)
        self.sum += (left, s - left)
        self.mul += (1.0, 1.0)
        self.kid += (0, 0)
        self.kid[node], self.mul[node] = k, 1.0
        return k

    def _push(self, node: int) -> int:
        """The left child of ``node`` (expanding it if needed), after pushing its pending multiplier down."""
        k = self.kid[node]
        if k == 0:
            return self._expand(node)
        m = self.mul[node]
        if m != 1.0:
            s, mul = self.sum, self.mul
            s[k] *= m
            mul[k] *= m
            s[k + 1] *= m
            mul[k + 1] *= m
            mul[node] = 1.0
        return k

    def locate(self, q: float) -> tuple[int, float, float]:
        """(j, mass left of interval j, weight of j) for j = min{k : sum of weights up to k >= q * total}.
        Records the path for :meth:`update`."""
        lo, hi, s, mul, kid = self.lo, self.hi, self.sum, self.mul, self.kid
        target, node, acc = q * s[0], 0, 0.0
        nodes, lefts, rights = [], [], []
        while True:
            k = kid[node]
            if k == 0:  # a unit interval, or a node not yet expanded
                if hi[node] - lo[node] == 1:
                    break
                k = self._expand(node)
            elif mul[node] != 1.0:  # inlined _push: this loop is the hot path of BayesLearn
                m = mul[node]
                s[k] *= m
                mul[k] *= m
                s[k + 1] *= m
                mul[k + 1] *= m
                mul[node] = 1.0
            nodes.append(node)
            if acc + s[k] >= target:
                rights.append(k + 1)
                node = k
            else:
                acc += s[k]
                lefts.append(k)
                node = k + 1
        self._path, self._leaf = (nodes, lefts, rights), node
        return lo[node], acc, s[node]

    def at(self, j: int) -> tuple[int, float, float]:
        """Like :meth:`locate`, for a given interval j."""
        node, acc = 0, 0.0
        nodes, lefts, rights = [], [], []
        while self.kid[node] or self.hi[node] - self.lo[node] > 1:
            k = self._push(node)
            nodes.append(node)
            if j < self.hi[k]:
                rights.append(k + 1)
                node = k
            else:
                acc += self.sum[k]
                lefts.append(k)
                node = k + 1
        self._path, self._leaf = (nodes, lefts, rights), node
        return self.lo[node], acc, self.sum[node]

    def update(self, left: float, right: float, weight: float) -> None:
        """After :meth:`locate`/:meth:`at` found j: intervals < j times ``left``, > j times ``right``, j := weight."""
        s, mul, kid = self.sum, self.mul, self.kid
        nodes, lefts, rights = self._path
        for o in lefts:
            s[o] *= left
            mul[o] *= left
        for o in rights:
            s[o] *= right
            mul[o] *= right
        s[self._leaf] = weight
        for node in reversed(nodes):
            k = kid[node]
            s[node] = s[k] + s[k + 1]

    def weights(self) -> np.ndarray:
        """Every interval's weight (O(size); for tests and small posteriors)."""
        out = np.zeros(self.size)

        def walk(node: int, factor: float) -> None:
            lo, hi, k = self.lo[node], self.hi[node], self.kid[node]
            if k == 0:
                out[lo:hi] = self.sum[node] * factor / (hi - lo)
                return
            for c in (k, k + 1):
                walk(c, factor * self.mul[node])
        walk(0, 1.0)
        return out


# ---- parameters (spec §2.4) --------------------------------------------------------------------------------

def bayess_split(n: int, coins: int) -> tuple[int, int, int]:
    """(m1, m2, m3): users for BayesLearn stage 1, stage 2 and the final NBS (m3 = the rest)."""
    lb = math.log(coins)
    llb = math.log(lb)
    den = lb + llb + 1
    m1, m2 = math.floor(n * lb / den), math.floor(n * llb / den)
    return m1, m2, n - m1 - m2


def alpha_update(n: int, coins: int, c: float = C_DEFAULT) -> float:
    """a_u = c sqrt(ln B / n): BayesLearn's error parameter in RR space (does not depend on ε)."""
    return c * math.sqrt(math.log(coins) / n)


def bayess_guard(n: int, coins: int, c: float = C_DEFAULT) -> str | None:
    """Why DpBayeSS cannot run on n users and ``coins`` coins (spec §2.4 guards), or None."""
    if coins < MIN_BAYESS_COINS:
        return f"the BayeSS split needs at least {MIN_BAYESS_COINS} coins (B = {coins}); NaiveNBS is used"
    if n < 2 or alpha_update(max(n, 1), coins, c) >= 0.25:
        return f"needs n > 16 c² ln B = {16 * c * c * math.log(coins):.0f} users, has {n}"
    m1, m2, m3 = bayess_split(n, coins)
    if m3 < 1 or m1 < 1:
        return f"too few users ({n}) to split into three stages"
    return None


def nbs_steps(coins: int, paper: bool = False) -> int:
    """Batches of DpNaiveNBS: ceil(log2 K) in the paper; ceil(log2 (K+1)) so that every search completes."""
    if coins <= 1:
        return 0
    return math.ceil(math.log2(coins)) if paper else math.ceil(math.log2(coins + 1))


def capacity_quantile(low: float, high: float) -> float:
    """The posterior quantile q* to query in a binary asymmetric channel with heads probabilities ``low``
    (target right of the query) and ``high`` (target left): the capacity-achieving input (spec §2.6)."""
    def h(p: float) -> float:
        return -(p * math.log2(p) + (1 - p) * math.log2(1 - p))
    r = 1.0 / (1.0 + 2.0 ** ((h(high) - h(low)) / (high - low)))
    return min(max((r - low) / (high - low), 1e-6), 1 - 1e-6)


def likelihood_ratios(heads: int, users: int, low: float, high: float, q: float) -> tuple[float, float]:
    """(P(y | target left)/P(y), P(y | target right)/P(y)) for ``heads`` ones out of ``users`` RR bits,
    where the prior puts mass q left of the query point. With one user at q = 1/2 this is (1 ± 2a_u)."""
    d = heads * math.log(high / low) + (users - heads) * math.log((1 - high) / (1 - low))
    d = min(max(d, -700.0), 700.0)
    return 1.0 / (q + (1 - q) * math.exp(-d)), 1.0 / (q * math.exp(d) + 1 - q)


def edges(start: int, counts: list[int], n: int) -> list[tuple[float, float]]:
    """User intervals for consecutive rounds of ``counts`` users, starting after user ``start`` of n.
    Boundaries are k/n for integers k, so consecutive rounds share bit-identical ends (disjoint users)."""
    cuts = np.cumsum([start] + list(counts))
    # privacy-critical: round t ends exactly where round t + 1 starts, so no user is in two rounds
    return [(float(a) / n, float(b) / n) for a, b in zip(cuts[:-1], cuts[1:])]


def split_evenly(users: int, rounds: int) -> list[int]:
    """``users`` into ``rounds`` batches, the first ones one larger (DpNaiveNBS line 3)."""
    f, r = divmod(users, rounds)
    return [f + 1] * r + [f] * (rounds - r)


def crossing(cdf: np.ndarray, tau: float) -> int:
    """The unit answering τ from a one-round release's estimated CDF, which noise makes non-monotone, by the split
    points that put the fewest units on the wrong side of τ (units before it with F̂ >= τ plus units from it on with
    F̂ < τ), for F̂ >= τ and F̂ > τ alike: the middle of the range they span (so that an F̂ exactly at τ over several
    units answers their middle, noise off; with noise the middle is not always a best split itself, audit 16 #7).
    Not the middle of the units whose [F̂(j-1), F̂(j)] holds τ: F̂ dips under τ again and again over a long empty
    tail (F = 1), and that middle landed there, a rank error of 1 - τ (a tree on Beta(20, 60) at n = 20,000, ε = 1,
    τ = 0.9: mean rank error 0.099, now 0.034; examples/qrank5). Post-processing of the release."""
    splits = np.concatenate([_best_splits(cdf >= tau), _best_splits(cdf > tau)])
    return int(min((splits.min() + splits.max()) // 2, len(cdf) - 1))


def _best_splits(at_or_above: np.ndarray) -> np.ndarray:
    """The split points s = 0..len with the fewest units misplaced: ones before s plus zeros from s on."""
    ones = np.concatenate([[0], np.cumsum(at_or_above)])
    misplaced = ones + (len(at_or_above) - ones[-1]) - (np.arange(len(at_or_above) + 1) - ones)
    return np.flatnonzero(misplaced == misplaced.min())


# ---- DpNaiveNBS ------------------------------------------------------------------------------------------

@dataclass
class Question:
    """One answered NBS question: the coin, the debiased fraction of users at or below it, and the batch."""

    coin: int
    estimate: float
    users: int
    variance: float


@dataclass
class SearchOutcome:
    """Where a noisy binary search ended, and what it asked."""

    coin: int
    tests: list[Question] = field(default_factory=list)
    users: int = 0


def _bit_randomizer(eps: float):
    # privacy-critical: every question is the engine's audited binary RR at the protocol's ε (noise off only
    # for EPSILON INF, which the planner allows in evaluation mode only)
    return Identity(2, "ones") if math.isinf(eps) else RandomizedResponse(eps)


def _fraction(r, summary: np.ndarray, users: int) -> float:
    """The debiased fraction of users at or below the coin: the randomizer's own estimate."""
    return float(r.estimate(summary, users)[0])


def _test_variance(r, users: int, sampled: bool) -> float:
    """Variance bound of one NBS estimate: the randomizer's (RR's is the same for every fraction) plus the
    sampling variance of a batch, at most 1/4 over its size."""
    n = max(users, 1)
    return float(r.variance(np.array([0.5]), n)[0]) + (0.25 / n if sampled else 0.0)


def search(space: CoinSpace, coins: np.ndarray, eps: float, tau: float, batches: list[tuple[float, float]],
           paper: bool = False, sampled: bool = True) -> Iterator[Round]:
    """DpNaiveNBS (spec §2.1) over the sorted ``coins``: one batch of users per question, each in one batch.

    Returns a :class:`SearchOutcome`. Paper mode: ties go right and coin ``coins[idx]`` is returned (idx = -1
    wraps, A7). Engine mode: ties go left and the coin after the largest coin estimated below τ is returned
    (A1: ``coins[hi] + 1``), so with exact answers the result is the smallest coin with F >= τ.
    """
    r = _bit_randomizer(eps)
    k = len(coins)
    lo, hi, out = 0, k - 1, SearchOutcome(int(coins[0]))
    idx = (lo + hi) // 2
    for users in batches:
        if lo > hi or k <= 1:
            break
        reply: Reply = yield Round(r, space.threshold(int(coins[idx])), users=users, label="nbs")
        if reply.n == 0:
            continue  # an empty batch says nothing; ask the same coin again
        p_hat = _fraction(r, reply.summary, reply.n)
        out.tests.append(Question(int(coins[idx]), p_hat, reply.n, _test_variance(r, reply.n, sampled)))
        out.users += reply.n
        if p_hat > tau or (p_hat >= tau and not paper):
            hi = idx - 1
        else:
            lo = idx + 1
        idx = (lo + hi) // 2
    if paper:
        out.coin = int(coins[idx])  # Python indexing: idx = -1 is the top coin (the authors' code)
    elif lo > hi:
        out.coin = int(coins[0]) if hi < 0 else min(int(coins[hi]) + 1, space.size - 1)
    else:
        out.coin = int(coins[idx])  # batches ran out: the untested midpoint
    return out


def pooled(tests: list[Question]) -> dict[int, tuple[float, float]]:
    """Every asked coin's estimate of F pooled over all its questions (inverse-variance weights), and its
    variance (0 for a noise-free question over every user)."""
    by_coin: dict[int, list[Question]] = {}
    for t in tests:
        by_coin.setdefault(t.coin, []).append(t)
    out = {}
    for coin, ts in by_coin.items():
        exact = [t for t in ts if t.variance <= 0]
        if exact:
            out[coin] = (exact[-1].estimate, 0.0)
            continue
        w = [1 / t.variance for t in ts]
        out[coin] = (sum(wi * t.estimate for wi, t in zip(w, ts)) / sum(w), 1 / sum(w))
    return out


def bracket(tests: list[Question], tau: float, value_coin: int, size: int, confidence: float) -> tuple[int, int]:
    """Coins [low, high] that hold the true τ-quantile Q with probability >= ``confidence``. Each asked coin c
    is tested one-sided with all its questions pooled: F̂(c) clearly below τ means Q > c, clearly at or above
    means Q <= c; Bonferroni over the asked coins. Every question asked fresh users, so its estimate is
    unbiased for F(c) given that c was asked (a Gaussian approximation, checked by EVALUATE coverage)."""
    stats = pooled(tests)
    if not stats:
        return 0, size - 1
    z = NormalDist().inv_cdf(1 - (1 - confidence) / len(stats))
    below = [c + 1 for c, (f, v) in stats.items() if f + z * math.sqrt(v) < tau]
    above = [c for c, (f, v) in stats.items() if f - z * math.sqrt(v) >= tau]
    low, high = max(below, default=0), min(above, default=size - 1)
    low, high = min(low, high, value_coin), max(low, high, value_coin)
    return low, min(high, size - 1)


def rank_interval(points: tuple[np.ndarray, np.ndarray], tau: float, alpha: float | np.ndarray, coin: int,
                  size: int) -> tuple[int, int]:
    """Coins [low, high]: the values whose estimated rank is within ``alpha`` (one, or one per point) of τ, read
    from the release's estimated CDF at ``points`` (coins c, F̂(c)): low is one past the last c with F̂(c) < τ - α,
    high the first c with F̂(c) >= τ + α; widened to hold the answer. With α the calibrated rank error of the
    answer, the true quantile is inside as often as the answer is within α (measured: examples/quantile_grid.py)."""
    coins, cdf = (np.asarray(a) for a in points)
    below, above = coins[cdf < tau - alpha], coins[cdf >= tau + alpha]
    low = int(below.max()) + 1 if len(below) else 0
    high = int(above.min()) if len(above) else size - 1
    return min(low, high, coin), min(max(low, high, coin), size - 1)


def bracket_bound(tests: list[Question], coin: int, tau: float, z: float, window: float,
                  bucketed: bool = False) -> float:
    """How far τ can be from the rank interval [F(v-1), F(v)] of the answer v = ``coin``, read from the search's own
    questions: F is non-decreasing, so the nearest asked coin c⁺ >= v - 1 bounds F(v - 1) from above and the nearest
    c⁻ <= v bounds F(v) from below, each by its pooled estimate ± z'·se. The search chose its bracket from these
    same estimates, and any asked coin whose estimate is within ``window``·z·se of τ could have been a bracket with a
    large error: z' is Bonferroni's over those coins (one at ``window`` = 0; every asked coin at ``window`` = inf, a
    union bound over the questions that holds whichever coins the search ended between). No coin asked on a side:
    that side is bounded by the whole range. ``bucketed`` (a bucket's midpoint reported): the reported value's rank
    error, max(F(v) - τ, τ - F(v - 1), 0), by the nearest asked coins >= v and <= v - 1. Post-processing of the
    released counts only."""
    stats = pooled(tests)
    coins = np.array(sorted(stats), dtype=np.int64)
    if len(coins) == 0:
        return max(tau, 1 - tau)
    f = np.array([stats[int(c)][0] for c in coins])
    se = np.sqrt([stats[int(c)][1] for c in coins])
    noisy = se > 0   # (a noise-free answer, every user asked with noise off, cannot be wrong)
    plausible = max(int(np.sum(noisy if math.isinf(window) else noisy & (np.abs(f - tau) < window * z * se))), 1)
    z = NormalDist().inv_cdf(1 - NormalDist().cdf(-z) / plausible)
    above, below = (coin, coin - 1) if bucketed else (coin - 1, coin)   # bound F(above) from above, F(below) below
    up, down = coins >= above, coins <= below
    high = 0.0 if above < 0 else min(f[up][0] + z * se[up][0], 1.0) if up.any() else 1.0
    low = max(f[down][-1] - z * se[down][-1], 0.0) if down.any() else 0.0   # (F(-1) = 0)
    return float(max(high - tau, tau - low, 0.0))


def release_share(units: tuple[np.ndarray, np.ndarray, np.ndarray], coin: int, nearest: int) -> float:
    """The share of users per unit (value, or bin) near ``coin``, as a one-round release estimates it: the mean of
    the released per-unit frequencies f̂ over the ``nearest`` units to the one holding ``coin``, half its noise
    variance (the units' released variances, independent) subtracted (E[f̂²] = share² + Var f̂; half of it: the
    whole lost real atoms, none widened smooth data), and 0 if not positive. ``units`` is (the last coin of each
    unit, f̂, Var f̂), as the release holds it: post-processing only."""
    ends, freq, var = (np.asarray(a, dtype=float) for a in units)
    if len(ends) == 0:
        return 0.0
    at = int(np.searchsorted(ends, coin))
    near = np.argsort(np.abs(np.arange(len(ends)) - at), kind="stable")[:nearest]
    mean = float(np.mean(freq[near]))
    noise = float(np.sum(var[near])) / len(near) ** 2
    return math.sqrt(max(mean * mean - 0.5 * noise, 0.0)) if mean > 0 else 0.0


def release_bound(points: tuple[np.ndarray, np.ndarray], var: np.ndarray, coin: int, tau: float, z: float,
                  bucketed: bool = False) -> float:
    """How far τ can be from the answer's rank interval [F(v-1), F(v)] by a one-round release's own estimated CDF
    at ``points`` (one per coin) and its variances ``var``: the larger of F̂(v-1) + z·se - τ and τ - F̂(v) + z·se,
    and 0 (``bucketed``, a bucket's midpoint reported: of F̂(v) + z·se - τ and τ - F̂(v-1) + z·se). Post-processing
    of the release only; where its answer's value holds τ well inside its released rank interval the answer is
    right and this is 0."""
    coins, cdf = (np.asarray(a) for a in points)
    at = min(int(np.searchsorted(coins, coin)), len(cdf) - 1)
    se = np.sqrt(np.asarray(var, dtype=float))
    before = (cdf[at - 1], se[at - 1]) if at > 0 else (0.0, 0.0)   # F(v - 1); F(-1) = 0
    if bucketed:
        return float(max(cdf[at] + z * se[at] - tau, tau - before[0] + z * before[1], 0.0))
    return float(max(before[0] + z * before[1] - tau if at > 0 else -tau, tau - cdf[at] + z * se[at], 0.0))


def quantile_estimate(space: CoinSpace, coin: int, tau: float, tests: list[Question], mechanism: str,
                      note: str = "", extra: dict | None = None) -> Estimate:
    """The Estimate of a search protocol: the value, and its interval as a function of the confidence."""
    def interval(confidence: float):
        low, high = bracket(tests, tau, coin, space.size, confidence)
        return np.array([space.lower_edge(low)]), np.array([space.upper_edge(high)])

    stats = sorted(pooled(tests).items())
    points = (np.array([c for c, _ in stats], dtype=np.int64), np.array([f for _, (f, _) in stats]))
    info = {"coin": coin, "mechanism": mechanism, "questions": tests, "users": sum(t.users for t in tests),
            "interval": interval, "cdf_points": points, "bucketed": space.bucketed, **(extra or {})}
    return Estimate(np.array([space.value(coin)]), np.array([math.nan]), note=note, extra=info)


def nbs_protocol(space: CoinSpace, eps: float, tau: float, paper: bool = False,
                 rr_epsilon: float | None = None, mechanism: str = "naive_nbs") -> Callable[[int], Protocol]:
    """DpNaiveNBS over all K coins; ``rr_epsilon`` (the shuffle model's ε₀) is the ε users run locally."""
    local = eps if rr_epsilon is None else rr_epsilon

    def protocol(n: int) -> Protocol:
        steps = nbs_steps(space.size, paper)
        if n == 0:
            return _no_users()
        batches = edges(0, split_evenly(n, steps), n) if steps else []
        found = yield from search(space, np.arange(space.size), local, tau, batches, paper)
        return quantile_estimate(space, found.coin, tau, found.tests, mechanism,
                                 extra={"batches": steps, "epsilon_local": local})
    return protocol


def exact_protocol(space: CoinSpace, tau: float, mechanism: str) -> Callable[[int], Protocol]:
    """Noise off (EPSILON INF, evaluation only): bisection with every user answering every question, which
    finds the smallest coin with F >= τ, the exact quantile at the domain's resolution."""
    def protocol(n: int) -> Protocol:
        if n == 0:
            return _no_users()
        steps = nbs_steps(space.size)
        found = yield from search(space, np.arange(space.size), math.inf, tau, [(0.0, 1.0)] * steps,
                                  sampled=False)
        return quantile_estimate(space, found.coin, tau, found.tests, mechanism)
    return protocol


def bound_protocol(space: CoinSpace, tau: float) -> Callable[[int], Protocol]:
    """Extreme τ (spec §6 rule 5): the domain's lowest or highest coin, without asking any user."""
    coin = 0 if tau < 0.5 else space.size - 1

    def protocol(n: int) -> Protocol:
        if n == 0:
            return _no_users()
        est = quantile_estimate(space, coin, tau, [], "bound",
                                note=f"τ = {tau:g} is within the predicted rank error of the domain's "
                                     f"{'minimum' if coin == 0 else 'maximum'}: returned without asking users")
        # the domain's own end, not its end bucket's midpoint (audit 15: all users at 10.0 on DOUBLE 0..10 in 4
        # buckets, τ = 0.99: 8.75 was returned with ±0.01, its rank error 0.99)
        est.values = np.array([space.end(coin > 0)])
        est.extra["interval"] = lambda conf: (np.array([space.end(False)]), np.array([space.end(True)]))
        return est
        yield  # a generator that asks nothing
    return protocol


def _no_users() -> Estimate:
    nan = np.array([math.nan])
    return Estimate(nan, nan, note="no users")


# ---- DpBayesLearn and DpBayeSS ----------------------------------------------------------------------------

@dataclass(frozen=True)
class BayesParams:
    """BayesLearn's channel model: heads probability ``low`` when the target is right of the queried coin,
    ``high`` when left, and the posterior quantile ``q`` to query (1/2 for the median, spec §2.6 otherwise)."""

    low: float
    high: float
    q: float

    @classmethod
    def for_target(cls, tau: float, eps: float, a_u: float) -> "BayesParams":
        p = keep_probability(eps)   # RR's: a user at or below the coin says 1 w.p. p, any other user w.p. 1 - p
        tau_rr = (1 - p) + (2 * p - 1) * tau
        a_u = min(a_u, 0.999 * min(tau_rr, 1 - tau_rr))
        low, high = tau_rr - a_u, tau_rr + a_u
        q = 0.5 if abs(tau - 0.5) < 1e-12 else capacity_quantile(low, high)
        return cls(low, high, q)


def bayes_learn(space: CoinSpace, lefts: np.ndarray | None, size: int, eps: float, params: BayesParams,
                batches: list[tuple[float, float]]) -> Iterator[Round]:
    """DpBayesLearn (spec §2.2): per batch, query the left end of the interval holding the posterior's
    q-quantile and apply the exact Bayes update. ``lefts[j]`` is interval j's left coin (None: coin j).
    A batch of several users (the engine's round cap) updates once with their count, which is the exact
    posterior for that batch. Returns (visited intervals, users per visit, the questions as Tests)."""
    r = _bit_randomizer(eps)
    tree = PosteriorTree(size)
    visits, weights, tests, asked = [], [], [], {}
    for t, users in enumerate(batches):
        first = t == 0 and params.q == 0.5
        j, left_mass, w_j = tree.at(size // 2) if first else tree.locate(params.q)  # A5: first is floor(K/2)
        coin = int(j if lefts is None else lefts[j])
        enc = asked.get(coin) or asked.setdefault(coin, space.threshold(coin))
        reply: Reply = yield Round(r, enc, users=users, label="bayeslearn")
        if reply.n == 0:
            continue
        lam_l, lam_r = likelihood_ratios(int(reply.summary[0]), reply.n, params.low, params.high, params.q)
        right_mass = tree.total - left_mass - w_j
        tree.update(lam_l, lam_r, max(tree.total - lam_l * left_mass - lam_r * right_mass, 0.0))
        visits.append(j)
        weights.append(reply.n)
        tests.append(Question(coin, _fraction(r, reply.summary, reply.n), reply.n, _test_variance(r, reply.n, True)))
    return visits, weights, tests


def reduce_visits(visits: list[int], weights: list[int], gamma: float) -> np.ndarray:
    """Reduce-to-γ (spec §2.3): the distinct rounded linear-interpolation quantiles γ, 2γ, ... of the visits."""
    if not visits:
        return np.array([], dtype=np.int64)
    points = math.floor(1 / gamma + 1e-9)
    q = np.minimum(gamma * np.arange(1, points + 1), 1.0)
    return np.unique(np.rint(_weighted_quantile(np.asarray(visits), np.asarray(weights), q)).astype(np.int64))


def _weighted_quantile(values: np.ndarray, weights: np.ndarray, q: np.ndarray) -> np.ndarray:
    """``np.quantile(np.repeat(values, weights), q)`` (linear interpolation, numpy's arithmetic) without
    building the repeated array, which at 10^8 users took over a gigabyte."""
    order = np.argsort(values, kind="stable")
    v, ends = values[order], np.cumsum(weights[order])
    n = int(ends[-1])
    h = (n - 1) * q
    lo = np.floor(h).astype(np.int64)
    t = h - lo
    a = v[np.searchsorted(ends, lo, side="right")].astype(float)
    b = v[np.searchsorted(ends, np.minimum(lo + 1, n - 1), side="right")].astype(float)
    return np.where(t >= 0.5, b - (b - a) * (1 - t), a + (b - a) * t)   # numpy's lerp


@dataclass(frozen=True)
class BayessPlan:
    """The user schedule of one DpBayeSS run: users per stage and rounds per stage."""

    n: int
    coins: int
    m1: int
    m2: int
    m3: int
    a_u: float
    rounds1: int
    rounds2: int

    @classmethod
    def make(cls, n: int, coins: int, c: float = C_DEFAULT, max_rounds: tuple[int, int] | None = None):
        m1, m2, m3 = bayess_split(n, coins)
        r1, r2 = (m1, m2) if max_rounds is None else (min(m1, max_rounds[0]), min(m2, max_rounds[1]))
        return cls(n, coins, m1, m2, m3, alpha_update(n, coins, c), max(r1, 1), max(r2, 1))


def bayess_protocol(space: CoinSpace, eps: float, tau: float, c: float = C_DEFAULT, paper: bool = False,
                    max_rounds: tuple[int, int] | None = (64, 16)) -> Callable[[int], Protocol]:
    """DpBayeSS (spec §2.4, Algorithm 3): BayesLearn on m1 users, screen to <= ln²B intervals, BayesLearn again
    on m2 users when more than 13 remain, screen to <= 13, then DpNaiveNBS on the rest over their endpoints.

    ``max_rounds`` caps the sequential rounds of the two BayesLearn stages (users are then asked in batches);
    None asks one user per round as the paper does.
    """
    def protocol(n: int) -> Protocol:
        if n == 0:
            return _no_users()
        reason = bayess_guard(n, space.size, c)
        if reason:
            found = yield from nbs_protocol(space, eps, tau, paper, mechanism="bayess")(n)
            found.note = f"bayess fell back to naive_nbs: {reason}"
            found.extra["search"] = "naive_nbs"   # what ran, for reading its release (its σ stays the planned one)
            return found
        plan = BayessPlan.make(n, space.size, c, max_rounds)
        params = BayesParams.for_target(tau, eps, plan.a_u)
        b1 = edges(0, split_evenly(plan.m1, plan.rounds1), n)
        visits = yield from bayes_learn(space, None, space.size - 1, eps, params, b1)
        asked = list(visits[2])
        kept = reduce_visits(visits[0], visits[1], 1 / math.log(space.size) ** 2)
        pos, stage2 = plan.m1, False
        if len(kept) > STAGE2_CAP:
            stage2 = True
            ends = np.concatenate([kept, kept + 1])
            lefts = np.concatenate([[0], kept, [ends.max()]])
            rights = np.concatenate([[ends.min()], kept + 1, [space.size - 1]])
            b2 = edges(pos, split_evenly(plan.m2, plan.rounds2), n)
            visits2 = yield from bayes_learn(space, lefts, len(lefts), eps, params, b2)
            asked += visits2[2]
            pos += plan.m2
            sel = reduce_visits(visits2[0], visits2[1], 1 / STAGE2_CAP)
            coins = np.unique(np.concatenate([lefts[sel], rights[sel]]))
        else:
            coins = np.unique(np.concatenate([kept, kept + 1])) if len(kept) else np.arange(space.size)
        steps = nbs_steps(len(coins), paper)
        batches = edges(pos, split_evenly(n - pos, steps), n) if steps else []
        found = yield from search(space, coins, eps, tau, batches, paper)
        return quantile_estimate(space, found.coin, tau, asked + found.tests, "bayess",
                                 extra={"m": (plan.m1, plan.m2 if stage2 else 0, n - pos), "a_u": plan.a_u,
                                        "candidates": len(coins), "stage2": stage2, "q": params.q})
    return protocol


# ---- quantiles other than the median by padding (spec §1.5, §2.6 mode "padding") ----------------------------

def padding_users(n: int, tau: float) -> int:
    """k = round(n·|1 − 2τ|) virtual users: with them at the domain's lowest coin (τ < 1/2) or highest (τ > 1/2),
    the median of the n + k is the τ-quantile of the n (Lemma B.1)."""
    return int(round(n * abs(1 - 2 * tau)))


def _spread(k: int, users: tuple[float, float]) -> int:
    """How many of k virtual users, at the evenly spaced positions (i + 0.5)/k, fall in ``users``."""
    return max(0, math.ceil(k * users[1] - 0.5)) - max(0, math.ceil(k * users[0] - 0.5))


def padded_protocol(space: CoinSpace, tau: float, median: Callable[[int], Protocol]) -> Callable[[int], Protocol]:
    """The τ-quantile as the median of padded data (spec §2.6, mode "padding"): ``median`` runs on n + k users,
    k = :func:`padding_users` of them virtual ones holding the lowest (τ < 1/2) or highest coin. Every round
    gets the virtual users at its positions, whose answers the server simulates through the same randomizer
    (``Round.virtual``), so the protocol sees exactly the coin law of the padded data. Virtual users are not
    users: no budget, no ledger; each real user still answers at most once. The rank error is about
    (1 + |1 − 2τ|) times the median's, at most twice."""
    pad = np.array([0 if tau < 0.5 else space.size - 1])

    def protocol(n: int) -> Protocol:
        k = padding_users(n, tau)
        inner = median(n + k if n else 0)
        try:
            rnd = next(inner)
            while True:
                virtual = rnd.encoding.counts(pad) * _spread(k, rnd.users)
                rnd = inner.send((yield replace(rnd, virtual=virtual)))
        except StopIteration as stop:
            est = stop.value
        if n == 0:
            return est
        return _unpadded(space, tau, est, n, k)
    return protocol


def _unpadded(space: CoinSpace, tau: float, est: Estimate, n: int, k: int) -> Estimate:
    """The padded median's estimate read in the real users' ranks: each question's F̂' of the n + k padded users
    becomes F̂ = (F̂'·(n + k) - k)/n (virtual users at the lowest coin, counted at every coin) or F̂'·(n + k)/n
    (at the highest, counted at none below it), its variance times ((n + k)/n)², so the rank error, the
    calibrated interval and the certified one all compare the real users' CDF with the asked τ (audit 14: compared
    with τ, the padded F̂' showed 8.8x the rank error). Post-processing of the release."""
    scale, shift = (n + k) / n, (k / n if tau < 0.5 else 0.0)
    tests = [replace(q, estimate=q.estimate * scale - shift, variance=q.variance * scale * scale)
             for q in est.extra["questions"]]
    rest = {key: v for key, v in est.extra.items() if key not in ("questions", "interval", "cdf_points", "coin",
                                                                   "mechanism", "users")}
    out = quantile_estimate(space, int(est.extra["coin"]), tau, tests, est.extra["mechanism"], est.note, rest)
    out.extra.update(virtual_users=k, quantile_mode="padding")
    return out


# ---- several quantiles of one column -------------------------------------------------------------------------

def _remap(protocol: Protocol, share: tuple[float, float]) -> Iterator[Round]:
    """Run ``protocol`` on the users of ``share`` of this aggregate: its round intervals are mapped into the
    share (ends 0 and 1 map exactly onto the share's ends, so neighbouring shares stay disjoint)."""
    lo, hi = share

    def inside(u: float) -> float:  # privacy-critical: a share's rounds stay inside the share
        return lo if u == 0.0 else hi if u == 1.0 else lo + u * (hi - lo)
    try:
        rnd = next(protocol)
        while True:
            u0, u1 = rnd.users
            reply = yield replace(rnd, users=(inside(u0), inside(u1)))
            rnd = protocol.send(reply)
    except StopIteration as stop:
        return stop.value


def share_users(n: int, share: tuple[float, float]) -> int:
    """The number of users a protocol running on ``share`` of n users is told it has."""
    return n if share == (0.0, 1.0) else int(round(n * (share[1] - share[0])))


def several(parts: list[tuple[float, Callable[[int], Protocol], tuple[float, float]]], n: int) -> Protocol:
    """One release answering several quantiles: the protocol of each (τ, factory, share) runs, one after the
    other, on its share of the users (disjoint shares, or all users with noise off). Its estimate holds
    every τ's answer in ``extra['answers']``."""
    answers = {}
    for tau, factory, share in parts:
        answers[tau] = yield from _remap(factory(share_users(n, share)), share)
    values = np.array([float(a.values[0]) for a in answers.values()])
    return Estimate(values, np.full(len(values), math.nan), extra={"answers": answers})

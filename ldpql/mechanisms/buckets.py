"""The one-round bucket search for a low (or high) extreme (issue 11 of ldpql; the oracles are Wang, Blocki, Li,
Jha, "Locally Differentially Private Protocols for Frequency Estimation", USENIX Security 2017).

Every user reports its bucket of the declared domain once, at the full ε, through a frequency oracle (OUE or
GRR); the answer is the start of the lowest bucket whose estimated share of users, alone or with all the buckets
below it, is more than t standard errors above 0 (the end of the highest one for the maximum). Unlike the
bisection of Fukuchi et al. 2019 (:mod:`ldpql.mechanisms.minimum`), ε is not divided over rounds, which is why it
wins almost everywhere (examples/extremes_grid.py).

Privacy: the oracle's (one report at ε, audited with the oracle); the bucket is a deterministic function of the
user's own clamped value. Utility: :func:`plan_buckets` chooses the number of buckets B and the threshold t by a
bound on E|error| that assumes users at least as dense near the extreme as a spread over the whole domain; γ
(:meth:`BucketPlan.gamma`) is the share a bucket must hold to stand out with probability 95%, so the answer is a
point with at most about γ of the users beyond it (more for a long thin tail). Runtime: one round, O(B) server
work; the exact aggregate path is the oracle's.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ldpql import expr as E
from ldpql.mechanisms.base import Encoding, Estimate, Protocol, Randomizer, Round


@dataclass(frozen=True)
class Buckets:
    """``size`` equal buckets over the declared domain [low, high]; for an INTEGER domain the buckets split its
    high - low + 1 values (bucket k holds the integers v with floor((v - low)·size/span) = k)."""

    low: float
    high: float
    size: int
    integer: bool = False

    @property
    def span(self) -> float:
        return self.high - self.low + 1 if self.integer else self.high - self.low

    @property
    def width(self) -> float:
        """How much of the domain one bucket covers."""
        return self.span / self.size

    def lower(self, k) -> np.ndarray:
        """The smallest value of bucket k (an integer of the domain for an INTEGER domain)."""
        k = np.asarray(k, dtype=float)
        return self.low + (np.ceil(k * self.span / self.size) if self.integer else k * self.span / self.size)

    def upper(self, k) -> np.ndarray:
        """The largest value of bucket k (its right end for a continuous domain)."""
        return self.lower(np.asarray(k) + 1) - (1 if self.integer else 0)

    def index(self, x: np.ndarray) -> np.ndarray:
        """Every (clamped) value's bucket, as :meth:`expr` computes it."""
        k = np.floor((np.asarray(x, dtype=float) - self.low) * self.size / self.span)
        return np.clip(k, 0, self.size - 1).astype(np.int64)

    def expr(self, clamped: E.Expr, negate: bool = False) -> E.Expr:
        """The bucket of the clamped value ``clamped`` (counted from the top when ``negate``), as an expression."""
        k = E.index(E.call("floor", E.op("/", E.op("*", E.op("-", clamped, self.low), self.size), self.span)),
                    self.size)
        return E.op("-", self.size - 1, k) if negate else k


@dataclass(frozen=True)
class BucketRead:
    """What one release says about the lowest buckets: the answer's bucket (None: no bucket stood out), the
    range of buckets that holds the γ-quantile at the confidence asked, and the estimated share of users below
    the answer's bucket with its standard error."""

    bucket: int | None
    first: int
    last: int
    share_below: float
    share_sd: float


def read_buckets(f: np.ndarray, var: np.ndarray, se0: np.ndarray, threshold: float, gamma: float,
                 confidence: float) -> BucketRead:
    """The lowest bucket with f̂ > threshold·se₀ (se₀: a bucket's standard error when it holds nobody) or whose
    cumulative share C_j stands out the same way against the summed variances of empty buckets; and,
    from the cumulative estimates C_j = Σ_{k≤j} f̂_k with variance V_j = Σ_{k≤j} var_k (exact for OUE, whose
    buckets are independent; conservative for GRR, whose are negatively correlated), the buckets between the
    first whose upper bound C_j + z√V_j reaches γ and the first whose lower bound C_j - z√V_j does (the
    γ-quantile lies in them unless a one-sided bound at (1 + confidence)/2 fails)."""
    from statistics import NormalDist

    z = NormalDist().inv_cdf((1 + confidence) / 2)
    cum, sd = np.cumsum(f), np.sqrt(np.cumsum(var))
    # a bucket stands out on its own, or with all those below it (a thin tail spread over several buckets)
    hits = np.flatnonzero((f > threshold * se0) | (cum > threshold * np.sqrt(np.cumsum(se0 ** 2))))
    k = int(hits[0]) if hits.size else None
    up, down = np.flatnonzero(cum + z * sd >= gamma), np.flatnonzero(cum - z * sd >= gamma)
    first = int(up[0]) if up.size else len(f) - 1
    last = int(down[0]) if down.size else len(f) - 1
    below = 0 if k is None else k
    share = float(cum[below - 1]) if below else 0.0
    return BucketRead(k, first, max(first, last), share, float(sd[below - 1]) if below else 0.0)


def bucket_search(randomizer: Randomizer, buckets: Buckets, threshold: float, gamma: float, confidence: float,
                  encoding: Encoding, negate: bool = False) -> Protocol:
    """One round: every user reports its bucket (counted from the top for the maximum) through ``randomizer``.

    The answer is the start of the lowest bucket that stands out (the end of the highest one for the maximum),
    so every user of that bucket is at or above it and only buckets that did not stand out are below; when
    none does, the domain's own end, which no user is beyond. The interval is the range of buckets that
    holds the γ-quantile (the maximum: the point with γ of the users above it) at ``confidence``, widened to
    hold the answer; ``extra['share_beyond']`` is the estimated share of users beyond the answer."""
    reply = yield Round(randomizer, encoding, label=f"buckets ({buckets.size})")
    if reply.n == 0:
        nan = np.full(1, np.nan)
        return Estimate(nan, nan, note="no users")
    f = np.asarray(randomizer.estimate(reply.summary, reply.n), dtype=float)
    var = np.asarray(randomizer.variance(np.clip(f, 0, 1), reply.n), dtype=float)
    se0 = np.sqrt(np.asarray(randomizer.variance(np.zeros_like(f), reply.n), dtype=float))
    read = read_buckets(f, var, se0, threshold, gamma, confidence)
    k = 0 if read.bucket is None else read.bucket
    if negate:   # bucket j counted from the top is bucket size-1-j
        top = buckets.size - 1
        value, lo, hi = buckets.upper(top - k), buckets.lower(top - read.last), buckets.upper(top - read.first)
    else:
        value, lo, hi = buckets.lower(k), buckets.lower(read.first), buckets.upper(read.last)
    if read.bucket is None:
        value = buckets.high if negate else buckets.low
    lo, hi = min(float(lo), float(value)), max(float(hi), float(value))
    extra = {"share_beyond": read.share_below, "share_beyond_sd": read.share_sd, "bucket": read.bucket,
             "buckets": buckets.size, "gamma": gamma, "n": reply.n}
    return Estimate(np.array([float(value)]), np.full(1, np.nan), extra=extra,
                    note=_bucket_note(read, buckets, threshold, gamma, confidence, negate),
                    interval=(np.array([lo]), np.array([hi])), interval_confidence=confidence)


def _bucket_note(read: BucketRead, buckets: Buckets, threshold: float, gamma: float, confidence: float,
                 negate: bool) -> str:
    """What a bucket answer is, in the result's words."""
    what, side, end = ("MAX", "above", "end") if negate else ("MIN", "below", "start")
    if read.bucket is None:
        return (f"LDP_{what}: no bucket of {buckets.size} stood out from 0 (> {threshold:g} standard errors): the "
                f"answer is the domain's own {'top' if negate else 'bottom'}, which no user is {side}")
    if gamma == 0:
        return ""
    from statistics import NormalDist

    z = NormalDist().inv_cdf((1 + confidence) / 2)
    share = min(max(read.share_below, 0.0), 1.0)
    lo, hi = max(read.share_below - z * read.share_sd, 0.0), min(read.share_below + z * read.share_sd, 1.0)
    return (f"LDP_{what} is the {end} of the {'highest' if negate else 'lowest'} of {buckets.size} buckets whose "
            f"estimated share of users, alone or with those {side} it, is more than {threshold:g} standard errors "
            f"above 0: a point with at most "
            f"about γ = {gamma:.3g} of the users {side} it (a bucket holding γ stands out with probability "
            f"≥ 95%); estimated share {side} its bucket {share:.3g} ({confidence:.0%}: "
            f"{lo:.3g} to {hi:.3g}); the interval holds the point with γ of the users {side} it "
            f"(≥ {confidence:.0%}: wider when that point is deep inside a bucket)")


BUCKET_COUNTS = tuple(1 << k for k in range(1, 13))           # 2 .. 4096 buckets
THRESHOLDS = tuple(float(t) for t in np.arange(1.5, 8.01, 0.25))  # standard errors above 0


@dataclass(frozen=True)
class BucketPlan:
    """A planned one-round bucket search: B buckets, the threshold t, and what it promises (fractions of the
    domain's width): ``bound`` on E|error|, assuming users at least as dense near the extreme as a spread over
    the whole domain; ``detect``, the probability that a bucket holding 1/B of the users stands out; ``se0``,
    a bucket's standard error when it holds nobody."""

    size: int
    threshold: float
    bound: float
    detect: float
    se0: float

    def gamma(self, make: Callable[[int], Randomizer], n: int, confidence: float) -> float:
        """γ: the share of users a bucket must hold to stand out with probability ≥ ``confidence`` (normal
        approximation): the solution of γ = t·se₀ + z·se(γ)."""
        from statistics import NormalDist

        if self.se0 == 0:
            return 0.0
        z, r, g = NormalDist().inv_cdf(confidence), make(self.size), self.threshold * self.se0
        for _ in range(20):
            g = self.threshold * self.se0 + z * math.sqrt(float(r.variance(np.array([min(g, 1.0)]), n)[0]))
        return min(g, 1.0)


def plan_buckets(make: Callable[[int], Randomizer], n: int, most: int) -> BucketPlan:
    """The (B, t) with the smallest bound (at most ``most`` buckets: powers of two, and ``most`` itself when it
    is an INTEGER domain's size of at most 2^16, one bucket per value). Bound, in domain widths, when every
    bucket from the extreme inward holds at least 1/B of the users: the first such bucket that stands out is on
    average at most 1/π buckets in (π its detection probability); an empty bucket stands out with probability a
    on its own, and at most a with the empty ones below it (their summed count is a binomial with the same
    tail or lighter), and a false alarm k buckets below the extreme moves the answer by at most k·w, so false
    alarms cost at most Σ_k 2a·k·w ≤ a·B·width; the answer is a bucket's start: w/π + min(1, B·a). A bucket stands out when its count of reports c exceeds
    n(q + t·se₀(p - q)); an empty one's c is Binomial(n, q), so a is that binomial's exact tail (a normal tail
    is 100x too small when nq is below 1); π uses the normal approximation of c."""
    # scipy.special's ufuncs, not scipy.stats' distributions: the ACCURACY search plans thousands of times, and
    # binom.sf's argument checks took 90% of it (13 s for one EXPLAIN); imported here to keep `import ldpql` light
    from scipy.special import bdtrc, ndtr

    ts = np.array(THRESHOLDS)
    sizes = [b for b in BUCKET_COUNTS if b <= most] + ([most] if most <= 1 << 16 and most not in BUCKET_COUNTS else [])
    rs = [make(size) for size in sizes]
    se0 = np.sqrt([float(r.variance(np.zeros(1), n)[0]) for r in rs])
    if not se0.any():   # noise off: every non-empty bucket stands out, no empty one does; the most buckets win
        return BucketPlan(max(sizes), float(ts[0]), 1.0 / max(sizes), 1.0, 0.0)
    # every (B, t) at once: rows are bucket counts, columns thresholds
    size, s0 = np.array(sizes, dtype=float)[:, None], se0[:, None]
    p, q = np.array([r.p for r in rs])[:, None], np.array([r.q for r in rs])[:, None]
    h = n / size
    cut = np.floor(n * (q + ts * s0 * (p - q)))
    mean, sd = h * p + (n - h) * q, np.sqrt(h * p * (1 - p) + (n - h) * q * (1 - q))
    detect = ndtr((mean - cut - 0.5) / sd)
    tail = np.where(cut < 0, 1.0, bdtrc(np.clip(cut, 0, n), n, q))   # P(Binomial(n, q) > cut)
    bound = 1.0 / (np.maximum(detect, 1e-300) * size) + np.minimum(1.0, size * tail)
    best_t = np.argmin(bound, axis=1)   # each B's best t, then the B whose bound (at most 1) is least, first on ties
    b = int(np.argmin(np.minimum(bound[np.arange(len(sizes)), best_t], 1.0)))
    i = int(best_t[b])
    return BucketPlan(sizes[b], float(ts[i]), float(min(bound[b, i], 1.0)), float(detect[b, i]), float(se0[b]))

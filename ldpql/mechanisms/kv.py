"""Key-value data from one report per user: every user's (key, value) pairs, at most s of them, sent as one
Collision report (Wang, Li, Li, Li, Yang, Yan, "Differentially Private Numerical Vector Analyses in the Local and
Shuffle Model", journal version of IJCAI 2021 "Hiding numerical vectors in local private and shuffled messages";
spec seed-003 §1.1–1.3, §2, §2.8, §8.21, §8.22, §9 "Key-value queries").

Input of one user (its device's local processing, all of it inside the randomizer): its rows (key j ∈ [0, d), value
v ∈ [−1, 1], or NaN for a row without a value). :func:`assemble` does, per user:

1. rows with the same key become one pair whose value is the mean of their values (NaN when none has one);
2. a user with more than s keys keeps a uniformly random s of them (drawn with random priorities, then a sort):
   this biases the frequency and the sum of a key down by s/s_i for such a user (spec §8.21); a user's number of
   keys is never reported;
3. each kept pair becomes one element (the *states* of a key): with ``states`` = 1 (presence only) element j; with
   2 or 3 the value is rounded to +1 w.p. (1 + v)/2 (element j) or −1 (element d + j), unbiased for v; with 3 a pair
   without a value is element 2d + j (present, no value: counted by LDP_COUNT(*), skipped by AVG and SUM, as SQL);
4. the at most s elements go through (D, s, ε, t)-Collision (:mod:`ldpql.mechanisms.collision`), whose element
   domain 2D ≥ states·d; a user with fewer than s elements sends them as they are (spec §2.8: still ε-LDP and
   unbiased, no padding).

Privacy: for each fixed outcome of steps 1–3 the report's law is Collision's on a set of at most s elements, whose
ratio over any two such sets is ≤ e^ε (Proposition 1, §2.8); the user's law is a mixture of these over the
subsample and the rounding, and a ratio of two mixtures is at most the largest ratio of their parts, whatever the
mixture weights. So one report per user is ε-LDP however many rows, keys and aggregates there are. The audits read
the composition exactly (:meth:`KVCollision.realised_distribution`): rounding at the sampler's own thresholds
(⌈p·2^53⌉/2^53), subsets weighted 1/C(k, s) (the priorities' ties, probability ~2^-53, only reweight the mixture).
Estimators: per element y, f̂_y = (c_y/n − P_f)/(P_t − P_f) (§2.4); per key, the count n(f̂₊ + f̂₋ + f̂₀) with its exact
variance (indicators of different elements are uncorrelated given a report, §2.5), and the conditional mean and the
sum over holders through :func:`ldpql.mechanisms.conditional.answer` (the ratio with the §8.22 floor and
low-confidence note, the delta method over the users taken as a sample, so the rounding is in the variance).
"""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import numpy as np

from ldpql.mechanisms.base import Estimate, Randomizer, below, check_epsilon, register
from ldpql.mechanisms.collision import Collision, optimal_t
from ldpql.mechanisms.conditional import answer, covariance, gradient

STATES = (1, 2, 3)   # presence only; a ±1 value; a ±1 value or none
FAST = 1 << 26       # users × elements above which the server's counts are drawn by Collision's fast path


def inner_d(d: int, states: int, s: int) -> int:
    """Collision's d for ``states``·d elements (its element domain is 2d) and sets of up to min(s, d) of them."""
    return max(1, -(-states * d // 2), min(s, d))


def kv_t(epsilon: float, d: int, s: int, states: int) -> int:
    """The t minimising Collision's total variance for this element domain (spec §2.6)."""
    return optimal_t(float(epsilon), inner_d(d, states, s), min(int(s), int(d)))


# ---- step 1 and 2: the user's own assembly of its rows ---------------------------------------------------------

def merge(users: np.ndarray, keys: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, ...]:
    """Rows -> one pair per (user, key): (users, keys, values) sorted by user then key, the value the mean of the
    rows' values (NaN where no row has one). Rows with a negative key (none, or outside the domain) are dropped."""
    ids, dense = np.unique(np.asarray(users, np.uint64), return_inverse=True)
    row, k, v = _merge(dense.reshape(-1), keys, values)
    return ids[row], k, v


def _merge(row: np.ndarray, keys: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, ...]:
    """:func:`merge` over dense user indices: one sort of (index, key) codes, then sums per run."""
    keys, values = np.asarray(keys, np.int64), np.asarray(values, float)
    keep = keys >= 0
    row, keys, values = np.asarray(row, np.int64)[keep], keys[keep], values[keep]
    if not len(row):
        return row, keys, values
    width = int(keys.max()) + 1
    code = row * width + keys
    order = np.argsort(code, kind="stable")
    code, values = code[order], values[order]
    start = np.flatnonzero(np.r_[True, code[1:] != code[:-1]])
    have = ~np.isnan(values)
    total = np.add.reduceat(np.where(have, values, 0.0), start)
    count = np.add.reduceat(have.astype(np.int64), start)
    mean = np.divide(total, count, out=np.full(len(start), np.nan), where=count > 0)
    return code[start] // width, code[start] % width, mean


def assemble(users: np.ndarray, keys: np.ndarray, values: np.ndarray, s: int, rng: np.random.Generator,
             everyone: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each user's at most s (key, value) pairs: (user ids ascending, an (n, s) key array with -1 for none, an
    (n, s) value array). ``everyone`` lists the users (also those without a usable row), default those in ``users``.
    A user with more than s keys keeps a uniformly random s (privacy-relevant: it is the device's choice): its pairs
    are ordered by uniform priorities (a float sort of user index + priority) and the first s kept."""
    users = np.asarray(users, np.uint64)
    if everyone is None:
        ids, dense = np.unique(users, return_inverse=True)
    else:
        ids = np.unique(np.asarray(everyone, np.uint64))
        dense = np.searchsorted(ids, users)
    row, k, v = _merge(dense.reshape(-1), keys, values)
    out_k = np.full((len(ids), s), -1, dtype=np.int64)
    out_v = np.full((len(ids), s), np.nan)
    if len(row):
        order = np.argsort(row + rng.random(len(row)), kind="stable")   # row is ascending: priorities within it
        row, k, v = row[order], k[order], v[order]
        first = np.flatnonzero(np.r_[True, row[1:] != row[:-1]])
        rank = np.arange(len(row)) - np.repeat(first, np.diff(np.r_[first, len(row)]))
        kept = rank < s
        out_k[row[kept], rank[kept]], out_v[row[kept], rank[kept]] = k[kept], v[kept]
    return ids, out_k, out_v


# ---- step 3 and 4: the randomizer -------------------------------------------------------------------------------

@register
class KVCollision(Randomizer):
    """A user's at most s (key, value) pairs (an (s,) key row, -1 for none, and an (s,) value row) as one
    (D, s, ε, t)-Collision report; the summary is c_y over the 2D elements."""

    name = "kv_collision"
    estimates = "items"

    def __init__(self, epsilon: float, d: int, s: int, states: int = 3, t: int | None = None):
        check_epsilon("KVCollision", epsilon)
        if states not in STATES or not 1 <= s or d < 1:
            raise ValueError(f"KVCollision needs states in {STATES}, d >= 1 and s >= 1, got {states}, {d}, {s}")
        self.epsilon, self.d, self.s, self.states = float(epsilon), int(d), int(s), int(states)
        big = inner_d(self.d, self.states, self.s)   # a user sends at most min(s, d) elements
        self.t = kv_t(self.epsilon, self.d, self.s, self.states) if t is None else int(t)
        self.inner = Collision(self.epsilon, big, min(self.s, self.d), self.t)
        self.p_true, self.p_false = self.inner.p_true, self.inner.p_false
        self.report_width, self.input_size = 2, None

    def elements(self, keys: np.ndarray, values: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """The (n, s) element array (privacy-critical: the rounding is part of the randomizer)."""
        keys = np.asarray(keys, np.int64).reshape(len(keys), -1)
        if self.states == 1:
            return np.where(keys >= 0, keys, -1)
        v = np.asarray(values, float).reshape(keys.shape)
        none = np.isnan(v)
        plus = rng.random(keys.shape) < (1 + np.clip(np.where(none, 0.0, v), -1.0, 1.0)) / 2
        state = np.where(plus, 0, 1)
        if self.states == 3:
            state = np.where(none, 2, state)
        return np.where(keys >= 0, keys + self.d * state, -1)

    def randomize(self, x: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """x: (n, 2s) = keys then values of each user's assembled pairs; reports (seed, z) as uint64."""
        x = np.asarray(x, float).reshape(len(x), 2 * self.s)
        keys = np.where(np.isnan(x[:, : self.s]), -1, x[:, : self.s]).astype(np.int64)
        return self.inner.randomize(self.elements(keys, x[:, self.s:], rng), rng)

    def aggregate(self, reports: np.ndarray) -> np.ndarray:
        return self.inner.aggregate(np.asarray(reports, np.uint64).reshape(-1, 2))

    def summary(self, keys: np.ndarray, values: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """The server's counts c_y of these users' reports: the deployment-faithful path (every user's hash seed,
        the server hashing every element) up to :data:`FAST` hash evaluations, Collision's fast path (the same law,
        spec §2.7) beyond."""
        elements = self.elements(keys, values, rng)
        if len(elements) * 2 * self.inner.d <= FAST:
            return self.inner.aggregate(self.inner.randomize(elements, rng))
        return self.inner.simulate(elements, rng)

    def estimate(self, summary: np.ndarray, n: int) -> np.ndarray:
        """f̂_y over the 2D elements."""
        return self.inner.estimate(summary, n)

    def variance(self, truth: np.ndarray, n: int) -> np.ndarray:
        return self.inner.variance(truth, n)

    # -- the audits: the mixture over subsets and roundings of Collision's law ------------------------------------
    AUDIT_ROWS = ((), ((0, 1.0),), ((0, -1.0),), ((1, 0.3),), ((1, math.nan),), ((0, -1.0), (0, 1.0)),
                  ((0, math.nan), (0, 1.0)), ((0, 1.0), (1, -1.0)), ((0, 0.3), (1, math.nan)), ((1, -1.0),))

    def audit_inputs(self) -> np.ndarray:
        return np.arange(len(self.AUDIT_ROWS))

    def _law(self, code: int, exact: bool) -> list:
        rows = self.AUDIT_ROWS[int(code)]
        if self.states < 3:   # no NULL state: elements() rounds a NaN value as 0 (P[+1] = 1/2); so does the model
            rows = tuple((k, 0.0 if math.isnan(v) else v) for k, v in rows)
        _, keys, values = merge(np.zeros(len(rows)), [k for k, _ in rows], [v for _, v in rows])
        kept = list(itertools.combinations(range(len(keys)), min(len(keys), self.s)))
        out = None
        for subset in kept:
            for ys, w in self._roundings(keys[list(subset)], values[list(subset)], exact):
                w = w * (Fraction(1, len(kept)) if exact else 1 / len(kept))
                law = self._collision(ys, exact)
                out = [w * q for q in law] if out is None else [o + w * q for o, q in zip(out, law)]
        return out

    def _roundings(self, keys: np.ndarray, values: np.ndarray, exact: bool):
        """(element tuple, probability) of every rounding of these pairs, at the sampler's thresholds."""
        options = []
        for j, v in zip(keys, values):
            if self.states == 1:
                options.append([(int(j), 1)])
            elif np.isnan(v):
                options.append([(int(j) + 2 * self.d, 1)])
            else:
                p = (1 + float(np.clip(v, -1.0, 1.0))) / 2   # as elements() computes it
                p = below(p) if exact else p
                options.append([(int(j), p), (int(j) + self.d, 1 - p)])
        for combo in itertools.product(*options):
            yield tuple(y for y, _ in combo), math.prod((w for _, w in combo), start=Fraction(1) if exact else 1.0)

    def _collision(self, ys: tuple, exact: bool) -> list:
        """The inner Collision's law (as its sampler runs) for this element set, cached per instance."""
        cache = self.__dict__.setdefault("_laws", {})
        key = (tuple(sorted(ys)), exact)
        if key not in cache:
            cache[key] = self.inner.set_probabilities(key[0], exact)
        return cache[key]

    def output_distribution(self, x) -> np.ndarray:
        return np.array(self._law(int(x), exact=False), dtype=float)

    def realised_distribution(self, x) -> list[Fraction]:
        return self._law(int(x), exact=True)

    @classmethod
    def audit_cases(cls):
        return [cls(e, 2, s, states, t) for e in (0.1, 1.0, 3.0)
                for s, states, t in ((1, 1, 2), (1, 2, 3), (1, 3, 2), (2, 2, 3))]

    @classmethod
    def realised_cases(cls, epsilon: float):
        return [cls(epsilon, 2, 1, 3, 2)]

    def __repr__(self) -> str:
        return f"kv_collision(epsilon={self.epsilon:g}, d={self.d}, s={self.s}, states={self.states}, t={self.t})"


# ---- estimators per key -----------------------------------------------------------------------------------------

class Coordinate:
    """One key's (+, −) elements seen as :class:`~ldpql.mechanisms.conditional.CollisionMean` is seen by
    :func:`~ldpql.mechanisms.conditional.answer`: the same rates, estimator and step (post-processing only)."""

    name = "kv_collision"

    def __init__(self, r: KVCollision):
        self.epsilon, self.t, self.inner = r.epsilon, r.t, r.inner
        self.p_true, self.p_false = r.p_true, r.p_false

    def estimate(self, summary: np.ndarray, n: int) -> np.ndarray:
        return (np.asarray(summary, float) / n - self.p_false) / (self.p_true - self.p_false)

    def variance(self, truth: np.ndarray, n: int) -> np.ndarray:
        """Var f̂± at the key's item frequencies ``truth`` = (f₊, f₋), as CollisionMean's."""
        return np.diag(covariance(self.p_true, self.p_false, np.asarray(truth, float))) / max(n, 1)

    def step(self, n: int) -> float:
        return 1 / (max(n, 1) * (self.p_true - self.p_false))


def key_answers(r: KVCollision, summary: np.ndarray, n: int, low: float, high: float,
                confidence: float = 0.95) -> dict[str, Estimate]:
    """Per key: 'count' (users holding it), 'frequency' (their share), 'mean' (over the holders with a value, SQL's
    AVG, with Fieller's interval at ``confidence``), 'sum' (over the holders with a value); each an Estimate over
    the d keys (values, standard errors)."""
    d, f = r.d, r.estimate(summary, n)
    parts = [f[b * d:(b + 1) * d] for b in range(r.states)]
    var = r.variance(np.clip(f, 0, 1), n)
    present = sum(parts)
    present_se = np.sqrt(sum(var[b * d:(b + 1) * d] for b in range(r.states)))
    out = {"count": Estimate(n * present, n * present_se), "frequency": Estimate(present, present_se)}
    if r.states == 1:
        return out
    coord = Coordinate(r)
    for what in ("mean", "sum"):
        ests = [answer(coord, np.array([summary[j], summary[d + j]]), n, what, low, high, confidence=confidence)
                for j in range(d)]
        out[what] = Estimate(np.array([e.values[0] for e in ests]), np.array([e.stderr[0] for e in ests]),
                             extra={"notes": [e.note for e in ests],
                                    "intervals": [e.interval for e in ests]})
    return out


def project_capped_simplex(f: np.ndarray, s: float) -> np.ndarray:
    """Euclidean projection of per-key frequencies onto {0 ≤ f ≤ 1, Σ f ≤ s} (spec §7 post-processing, §8.16: the
    capped simplex of Wang et al. [46], with Σ ≤ s since users may hold fewer than s keys): clip(f − τ, 0, 1) with
    τ = 0 when the clipped vector already sums to at most s, else the τ > 0 where it sums to s (a monotone root).
    Post-processing of the release; it trades the estimates' unbiasedness for a smaller total error.

    >>> project_capped_simplex(np.array([1.4, 0.9, 0.5, -0.2]), 2).round(4).tolist()
    [1.0, 0.7, 0.3, 0.0]
    """
    f = np.asarray(f, dtype=float)
    if np.clip(f, 0, 1).sum() <= s:
        return np.clip(f, 0, 1)
    from scipy.optimize import brentq
    tau = brentq(lambda t: np.clip(f - t, 0, 1).sum() - s, 0.0, float(f.max()), xtol=1e-14)
    return np.clip(f - tau, 0, 1)


def exact_answers(keys: np.ndarray, values: np.ndarray, d: int, n: int, low: float,
                  high: float) -> dict[str, Estimate]:
    """Noise off (EPSILON INF, evaluation only): the same answers computed exactly on the assembled pairs, as
    plain SQL over one row per (user, key) would give them."""
    held = keys >= 0
    k = keys[held]
    v = low + (high - low) * (np.clip(values[held], -1, 1) + 1) / 2
    count = np.bincount(k, minlength=d).astype(float)
    have = ~np.isnan(v)
    total = np.bincount(k[have], weights=v[have], minlength=d)
    with_value = np.bincount(k[have], minlength=d)
    zero = np.zeros(d)
    mean = np.divide(total, with_value, out=np.full(d, np.nan), where=with_value > 0)
    return {"count": Estimate(count, zero), "frequency": Estimate(count / max(n, 1), zero),
            "mean": Estimate(mean, zero), "sum": Estimate(np.where(with_value > 0, total, np.nan), zero)}


def predicted_se(epsilon: float, d: int, s: int, states: int, n: int, low: float, high: float) -> dict[str, float]:
    """Worst-case standard errors per key before any data is read (public: ε, d, s, n, the domain): the count's
    and the frequency's at a key every user holds (their largest), the mean's and the sum's over every user holding
    the key with one value v, the worst v of a grid (:func:`~ldpql.mechanisms.conditional.answer`'s variance; a
    key that a share p of the users holds has about 1/√p times the mean's error)."""
    r = KVCollision(epsilon, d, s, states)
    pt, pf = r.p_true, r.p_false
    freq = math.sqrt(float(r.inner.variance(np.r_[1.0, np.zeros(states - 1)], 1).sum()) / max(n, 1))
    out = {"count": n * freq, "frequency": freq}
    for what in ("mean", "sum") if states > 1 else ():
        worst = max(float(gradient(what, f, 1, low, high) @ covariance(pt, pf, f) @ gradient(what, f, 1, low, high))
                    for f in (np.array([(1 + v) / 2, (1 - v) / 2]) for v in np.linspace(-1, 1, 41)))
        se = math.sqrt(worst / max(n, 1))
        out[what] = min(se, (high - low) / 2) if what == "mean" else n * se
    return out

"""Several bounded means from one report per user: each user's d scaled values are rounded to a dense ternary
vector and sent through one Collision or CoCo report at the full ε (Wang, Li, Li, Li, Yang, Yan, "Differentially
Private Numerical Vector Analyses in the Local and Shuffle Model", journal version of IJCAI 2021 "Hiding
numerical vectors in local private and shuffled messages"; spec seed-003 §1.3, §2, §3, §9).

Input: an (n, d) array of values v ∈ [−1, 1] (a column's x' = (x − mid)/half), NaN where a column's NULL is
skipped (SQL's AVG over the users who have a value; Collision only). Randomizer (spec §1.3 item 2, an engine
decision): each present coordinate becomes +1 with probability (1 + v)/2 and −1 otherwise (drawn as
``random() < (1 + v)/2``, so its realised probability is ⌈p·2^53⌉/2^53), a NaN coordinate no element; the
s = d element set then goes through (d, d, ε, t)-Collision or CoCo. The rounding is a step of the randomizer,
so both audits read the composition: for every input the output law is the mixture, over the 2^d sign
patterns, of the inner mechanism's law, and a mixture of laws each within e^ε of every other input's is too
(a ratio of mixtures is at most the largest ratio of their parts). The corners v ∈ {−1, 1}^d are inputs of the
inner mechanism itself, so the claim is tight.
Estimators: the mean of column j is the inner unconditional mean x̄̂_j (unbiased for the mean of the rounded
signs, whose expectation is the mean of v); a skipped column's answer is Collision's conditional mean
x̄̂_j / max(x̲̂_j, 1/n), clipped (spec §2.4, §8.22), low-confidence where x̲̂_j < 3·sd(x̲̂_j) or its interval is
the whole range.
Variances (per coordinate, exact for the composition): one user's estimate e_j has E[e_j²] = A, the same for
every present coordinate whatever its sign (A = (P_t + P_o)/(P_t − P_o)² for CoCo, (P_t + P_f − 2P_tP_f)/
(P_t − P_f)² for Collision, spec §2.5, §3.5), and E[e_j] = v_j, so Var x̄̂_j = (A − mean v_j²)/n ≤ (A − x̄_j²)/n:
the rounding's variance is inside it. The interval uses that bound at the clipped estimate. A conditional mean's
interval is Fieller's for the ratio x̄̂_j/x̲̂_j, from the covariance of (f̂_{j₊}, f̂_{j₋}) (:meth:`VectorMeans.conditional`).
"""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import numpy as np

from ldpql.mechanisms import coco, collision
from ldpql.mechanisms.base import (Encoding, Estimate, NoiseOff, Protocol, Randomizer, Round, below,
                                   check_epsilon, register)
from ldpql.mechanisms.conditional import as_values, covariance, ratio_parts, with_interval
from ldpql.mechanisms.ternary import NO_ELEMENT

KINDS = ("coco", "collision")


def optimal_t(kind: str, epsilon: float, d: int) -> int:
    """The inner mechanism's t minimising its total mean error at s = d (spec §2.6, §3.6)."""
    return (coco.optimal_t if kind == "coco" else collision.optimal_t)(float(epsilon), int(d), int(d))


def second_moment(kind: str, epsilon: float, d: int, t: int) -> float:
    """A = E[e_j²] of one user's estimate of a present coordinate (module docstring): its variance at v = 0."""
    if kind == "coco":
        pt, po, _ = coco.rates(epsilon, d, t)
        return (pt + po) / (pt - po) ** 2
    pt, pf = collision.rates(epsilon, d, t)
    return (pt + pf - 2 * pt * pf) / (pt - pf) ** 2


def predicted_variance(kind: str, epsilon: float, d: int, n: int, t: int | None = None) -> float:
    """The largest Var x̄̂_j of one coordinate over every data set (at x̄_j = 0): A/n, on the [−1, 1] scale."""
    t = optimal_t(kind, epsilon, d) if t is None else t
    return second_moment(kind, epsilon, d, t) / max(n, 1)


@register
class VectorMeans(Randomizer):
    """d values in [−1, 1] per user, rounded to signs and sent as one (d, d, ε, t) Collision or CoCo report."""

    name = "vector_means"
    estimates = "means"

    def __init__(self, epsilon: float, d: int, kind: str = "coco", t: int | None = None, grid: tuple = ()):
        check_epsilon("VectorMeans", epsilon)
        if kind not in KINDS or d < 1:
            raise ValueError(f"VectorMeans needs kind in {KINDS} and d >= 1, got {kind!r}, d={d}")
        self.epsilon, self.d, self.kind = float(epsilon), int(d), kind
        self.t = optimal_t(kind, epsilon, d) if t is None else int(t)
        self.inner = (coco.CoCo if kind == "coco" else collision.Collision)(self.epsilon, self.d, self.d, self.t)
        self.report_width, self.width = 2, self.d
        self.grid = grid or (-1.0, -0.2, 0.6, 1.0)   # per-coordinate values the audits combine

    # -- the randomizer ------------------------------------------------------------------------------------
    def elements(self, x: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """The (n, d) element array of the rounded signs: privacy-critical (the rounding is part of the
        randomizer). +1 w.p. (1 + v)/2: element j, else d + j; NaN: no element (Collision only)."""
        v, missing = as_values(np.asarray(x, dtype=float).reshape(len(x), self.d))
        if self.kind == "coco" and missing.any():
            raise ValueError("CoCo answers unconditional means only: a skipped NULL needs Collision")
        plus = rng.random(v.shape) < (1 + v) / 2
        j = np.arange(self.d)
        return np.where(missing, NO_ELEMENT, np.where(plus, j, self.d + j)).astype(np.int64)

    def randomize(self, x: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """Reports (seed, z) of the inner mechanism (deployment-faithful: the server hashes every element)."""
        return self.inner.randomize(self.elements(x, rng), rng)

    def aggregate(self, reports: np.ndarray) -> np.ndarray:
        """c_y over the 2d elements (the inner mechanism's additive summary)."""
        return self.inner.aggregate(reports)

    def simulate(self, x: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """The same law of c as aggregate(randomize(x)) by the inner fast path, O(nd) (spec §2.7, §3.4)."""
        return self.inner.simulate(self.elements(x, rng), rng)

    # -- estimators and variances --------------------------------------------------------------------------
    def estimate(self, summary: np.ndarray, n: int) -> np.ndarray:
        """The d unconditional means on the [−1, 1] scale."""
        if self.kind == "coco":
            return self.inner.estimate(summary, n)
        f = self.inner.estimate(summary, n)
        return f[: self.d] - f[self.d:]

    def variance(self, truth: np.ndarray, n: int) -> np.ndarray:
        """Var x̄̂_j ≤ (A − x̄_j²)/n at the true means ``truth`` (every coordinate present; module docstring)."""
        a = second_moment(self.kind, self.epsilon, self.d, self.t)
        return (a - np.clip(np.asarray(truth, dtype=float), -1, 1) ** 2) / max(n, 1)

    def conditional(self, summary: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Each coordinate's conditional mean's ratio parts (:func:`~ldpql.mechanisms.conditional.ratio_parts`, a
        (d, 5) array): x̄̂_j, x̲̂_j and their covariance. Given its element set, a user's indicators of j₊ and j₋
        (it holds at most one) are independent, so their joint rate is P_f² + x̲_j·P_f(P_t − P_f), as for d = 1
        (:func:`~ldpql.mechanisms.conditional.covariance`): the rounding and the users' spread are inside it."""
        f = self.inner.estimate(summary, n)
        to_ratio = np.array([[1.0, -1.0], [1.0, 1.0]])
        out = []
        for plus, minus in zip(f[: self.d], f[self.d:]):
            cov = covariance(self.inner.p_true, self.inner.p_false, np.clip([plus, minus], 0, 1)) / n
            out.append(ratio_parts(plus - minus, plus + minus, to_ratio @ cov @ to_ratio.T))
        return np.array(out)

    def step(self, n: int) -> float:
        """One report moves a mean by at most 1/(n(P_t − P_o)) (CoCo) or 1/(n(P_t − P_f)) (Collision)."""
        gap = self.inner.p_true - (self.inner.p_opposite if self.kind == "coco" else self.inner.p_false)
        return 1 / (max(n, 1) * gap)

    # -- the audits: the mixture over sign patterns of the inner law ----------------------------------------
    def audit_inputs(self) -> np.ndarray:
        values = self.grid + ((math.nan,) if self.kind == "collision" else ())
        return np.array(list(itertools.product(values, repeat=self.d)), dtype=float)

    def _mixture(self, x: np.ndarray, exact: bool) -> list:
        v = np.asarray(x, dtype=float)
        present = [j for j in range(self.d) if not math.isnan(v[j])]
        plus = [(1 + float(np.clip(v[j], -1.0, 1.0))) / 2 for j in present]   # as elements() computes it
        plus = [below(p) for p in plus] if exact else plus
        out = None
        for signs in itertools.product((True, False), repeat=len(present)):
            weight = Fraction(1) if exact else 1.0
            for p, s in zip(plus, signs):
                weight *= p if s else 1 - p
            if weight == 0:
                continue
            ys = tuple(j if s else self.d + j for j, s in zip(present, signs))
            law = self._inner_law(ys, exact)
            out = [weight * q for q in law] if out is None else [o + weight * q for o, q in zip(out, law)]
        return out

    def _inner_law(self, ys: tuple[int, ...], exact: bool) -> list:
        if self.kind == "collision":
            return self.inner.set_probabilities(ys, exact)
        code = list(itertools.product((0, 1), repeat=self.d)).index(tuple(int(y >= self.d) for y in ys))
        return self.inner._cell_probabilities(code, exact)

    def output_distribution(self, x) -> np.ndarray:
        return np.array(self._mixture(x, exact=False), dtype=float)

    def realised_distribution(self, x) -> list[Fraction]:
        return self._mixture(x, exact=True)

    @classmethod
    def audit_cases(cls):
        return [cls(e, 2, kind, t) for e in (0.1, 1.0, 3.0) for kind, t in (("collision", 3), ("coco", 6))]

    @classmethod
    def realised_cases(cls, epsilon: float):
        return [cls(epsilon, 2, "collision", 3, grid=(-1.0, 0.3, 1.0)), cls(epsilon, 2, "coco", 6, grid=(-1.0, 0.3, 1.0))]

    def __repr__(self) -> str:
        return f"vector_means(epsilon={self.epsilon:g}, d={self.d}, kind={self.kind}, t={self.t})"


class VectorIdentity(NoiseOff, Randomizer):
    """EPSILON INF's twin of :class:`VectorMeans` (not a local randomizer, not registered): the exact mean of
    every column over its users with a value (NaN: none), which is SQL's AVG."""

    name = "vector_identity"
    estimates = "means"

    def __init__(self, d: int):
        self.epsilon, self.d, self.report_width, self.width = math.inf, int(d), int(d), int(d)

    def randomize(self, x: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        return np.asarray(x, dtype=float).reshape(len(x), self.d)

    def aggregate(self, reports: np.ndarray) -> np.ndarray:
        return np.concatenate([np.nansum(reports, axis=0), np.count_nonzero(~np.isnan(reports), axis=0)])

    def estimate(self, summary: np.ndarray, n: int) -> np.ndarray:
        total, have = summary[: self.d], summary[self.d:]
        return np.divide(total, have, out=np.full(self.d, np.nan), where=have > 0)

    def variance(self, truth: np.ndarray, n: int) -> np.ndarray:
        return np.zeros(np.shape(truth))


def vector_round(randomizer: Randomizer, encoding: Encoding, halves: np.ndarray, mids: np.ndarray,
                 skips: np.ndarray) -> Protocol:
    """The protocol of a joint release: one round over all users, then each column's mean on its own scale
    (half·x̄ + mid) with its standard error; where ``skips``, the conditional mean's ratio parts for :func:`column`."""
    reply = yield Round(randomizer, encoding)
    d = len(halves)
    if reply.n == 0:
        return Estimate(np.full(d, np.nan), np.full(d, np.nan), note="no users")
    n = reply.n
    means = randomizer.estimate(reply.summary, n)
    se = np.sqrt(randomizer.variance(np.clip(np.nan_to_num(means), -1, 1), n))
    # each column's lattice step (its interval's continuity correction) and declared range
    extra = {"steps": randomizer.step(n) * halves, "scales": (mids - halves, mids + halves, n)}
    if skips.any() and isinstance(randomizer, VectorMeans):
        extra["ratio"] = np.where(skips[:, None], randomizer.conditional(reply.summary, n), np.nan)
        extra["count_step"] = randomizer.step(n) * n
    elif isinstance(randomizer, VectorIdentity):   # noise off: each column's number of users with a value
        extra["have"] = np.asarray(reply.summary, dtype=float)[d:]
    return Estimate(halves * means + mids, halves * se, extra=extra)


def present_variance(kind: str, epsilon: float, d: int, n: int, t: int | None = None) -> float:
    """The largest Var x̲̂_j, the share of users with a value of one skipped column, over every data set (Collision:
    a user's indicators of j₊ and j₋ are independent given its elements, so per user it is x̲(P_t(1 − P_t) −
    P_f(1 − P_f)) + 2P_f(1 − P_f), over (P_t − P_f)², linear in x̲: largest at x̲ = 0 or 1; spec §2.5)."""
    t = optimal_t(kind, epsilon, d) if t is None else t
    pt, pf = collision.rates(epsilon, d, t)
    per = max(pt * (1 - pt) - pf * (1 - pf), 0.0) + 2 * pf * (1 - pf)
    return per / ((pt - pf) ** 2 * max(n, 1))


def total(release: Estimate, j: int, confidence: float = 0.95) -> Estimate:
    """Column j's sum from a joint release (post-processing): over the users with a value where the column skips
    NULLs, n(hi·f̂₊ + lo·f̂₋) = n(mid·x̲̂_j + half·x̄̂_j) with its standard error from the ratio parts' covariance (the
    rounded signs are hi or lo, so this is unbiased, as for one column); else n × the mean. ``confidence`` is unused."""
    scales, ratio, have = release.extra.get("scales"), release.extra.get("ratio"), release.extra.get("have")
    if scales is None:   # no users
        return Estimate(np.full(1, np.nan), np.full(1, np.nan), note=release.note)
    lows, highs, n = scales
    half, mid = (highs[j] - lows[j]) / 2, (highs[j] + lows[j]) / 2
    mean, se = float(release.values[j]), float(release.stderr[j])
    if have is not None:   # noise off: the skipped column's mean is over its users with a value
        return Estimate(np.array([have[j] * mean if have[j] else 0.0]), np.zeros(1))
    if ratio is None or np.isnan(ratio[j]).any():
        return Estimate(np.array([n * mean]), np.array([n * se]), step=n * float(release.extra["steps"][j]))
    num, den, var_num, var_den, cov = (float(v) for v in ratio[j])
    var = mid * mid * var_den + half * half * var_num + 2 * mid * half * cov
    return Estimate(np.array([n * (mid * den + half * num)]), np.array([n * math.sqrt(max(var, 0.0))]),
                    step=max(abs(lows[j]), abs(highs[j])) * float(release.extra["count_step"]))


def count(release: Estimate, j: int, confidence: float = 0.95) -> Estimate:
    """Column j's number of users with a value, SQL's COUNT(x), from a joint release (post-processing): n·x̲̂_j with
    standard error n·sd(x̲̂_j) from the release's covariance (a skipped column's ratio parts), exact with the noise
    off. ``confidence`` is unused (a normal interval from the standard error)."""
    scales, ratio, have = release.extra.get("scales"), release.extra.get("ratio"), release.extra.get("have")
    if scales is None:   # no users
        return Estimate(np.full(1, np.nan), np.full(1, np.nan), note=release.note)
    n = scales[2]
    if have is not None:
        return Estimate(np.array([float(have[j])]), np.zeros(1))
    parts = ratio[j]
    return Estimate(np.array([n * float(parts[1])]), np.array([n * math.sqrt(max(float(parts[3]), 0.0))]),
                    step=float(release.extra["count_step"]))


def column(release: Estimate, j: int, confidence: float = 0.95) -> Estimate:
    """Column j's answer from a joint release's estimate (post-processing): a skipped column's conditional mean
    with Fieller's interval at ``confidence`` (:func:`~ldpql.mechanisms.conditional.with_interval`)."""
    steps, ratio = release.extra.get("steps"), release.extra.get("ratio")
    if ratio is not None and not np.isnan(ratio[j]).any():
        lows, highs, n = release.extra["scales"]
        return with_interval(Estimate(release.values[j:j + 1], release.stderr[j:j + 1],
                                      extra={"ratio": ratio[j], "scale": (lows[j], highs[j], n)}), confidence)
    return Estimate(release.values[j:j + 1], release.stderr[j:j + 1], step=float(steps[j]) if steps is not None else 0.0)

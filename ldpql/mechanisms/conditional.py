"""SQL's AVG over the users who have a value, estimated privately: Collision with d = 1, s = 1 on a nullable
bounded column (Wang, Li, Li, Li, Yang, Yan, "Differentially Private Numerical Vector Analyses in the Local and
Shuffle Model", the journal version of IJCAI 2021; spec seed-003 §1.3, §2.4, §2.8, §8.22).

Input: x' = (x − mid)/half ∈ [−1, 1] for a user with a value, :data:`MISSING` for a NULL (a value outside
[−1, 1], so the randomizer, not the encoding, tells the two apart). Randomizer (one report per user): round x'
stochastically to ±1 (P[+1] = (1 + x')/2, unbiased for x'), the element 1₊ or 1₋; a NULL is the empty set
(variable sparsity, spec §2.8: Collision stays ε-LDP and unbiased with no padding); then Collision(ε, d = 1,
s = 1, t) of :mod:`ldpql.mechanisms.collision` reports (H, z). The rounding happens inside the randomizer, so
the exact and realised-ε audits cover the composition: each output's probability is a mixture over the
rounding of Collision's, and Collision's ratio is ≤ e^ε between any two element sets of size ≤ s.
Estimators (spec §2.4): from the counts c₊, c₋, the item frequencies f̂₊, f̂₋; x̄̂ = f̂₊ − f̂₋ (the mean of x'
with NULL as 0), x̲̂ = f̂₊ + f̂₋ (the share of users with a value); the conditional mean x̄̂/max(x̲̂, 1/n) clipped to
[−1, 1] (spec §8.22), the sum over the users with a value n(hi·f̂₊ + lo·f̂₋) (linear, unbiased).
Variance: a user's two indicators ⟦H(1₊) = z⟧, ⟦H(1₋) = z⟧ have rates p± = P_f + (P_t − P_f)f± and joint rate
P_f² + x̲·P_f(P_t − P_f) (given its element they are independent, spec §2.5), so every second moment is linear in
quantities the release estimates; the variances treat the users as a sample (so sampling error is included:
conservative by the users' spread for a fixed population). The sum's and count's standard errors are the delta
method; the conditional mean's interval is Fieller's for the ratio x̄/x̲ (:func:`ratio_interval`, the whole declared
range when x̲̂ is not significantly above 0), since a delta-method interval around a ratio with a noisy
denominator under-covers (0.72-0.88 at 95% just above the flag) and collapses to width 0 when f̂± both clip to 0.
The ratio is biased when x̲̂ is small: the answer is flagged low-confidence when x̲̂ < 3·sd(x̲̂) (spec §8.22) or
its interval is the whole range. The flag reads x̲̂, so an unflagged answer's interval is valid given that it was
not flagged (:func:`selected_ratio_interval`); a flagged one keeps Fieller's.

:func:`split_protocol` is the other way the planner considers (an engine decision, not the paper's): two reports
per user under sequential composition, a mean mechanism on x' with NULL as 0 and binary randomized response on
"has a value", their ratio with the delta method; both randomizers are the engine's registered, audited ones.
"""

from __future__ import annotations

import functools
import math
from fractions import Fraction
from statistics import NormalDist

import numpy as np

from ldpql.mechanisms.base import (Estimate, NoiseOff, Protocol, Randomizer, Round, below, check_epsilon,
                                   register, truncated_cdf, unseen)
from ldpql.mechanisms.collision import Collision, optimal_t

MISSING = 2.0   # the input of a user without a value (outside [-1, 1])


def _missing(x: np.ndarray) -> np.ndarray:
    """NULL is NaN or the :data:`MISSING` sentinel only; every other value (±inf, beyond [−1, 1]) is a value."""
    return np.isnan(x) | (x == MISSING)


def as_values(x) -> tuple[np.ndarray, np.ndarray]:
    """(clamped values, missing): the one reading of a randomizer's input that CollisionMean and VectorMeans share.
    Only NaN (and :data:`MISSING`) is NULL; anything else, ±inf included, is clamped to [−1, 1] (0 where missing)."""
    x = np.asarray(x, dtype=float)
    gone = _missing(x)
    return np.where(gone, 0.0, np.clip(np.nan_to_num(x, nan=0.0, posinf=1.0, neginf=-1.0), -1, 1)), gone


@register
class CollisionMean(Randomizer):
    """Collision (d = 1, s = 1) on a stochastically rounded value in [−1, 1], or the empty set for a NULL; the
    summary is (c₊, c₋), the counts of users whose hash of 1₊ (1₋) is their reported cell."""

    name = "collision_mean"
    input_size = None
    estimates = "items"
    report_width = 2

    def __init__(self, epsilon: float, t: int | None = None):
        check_epsilon("CollisionMean", epsilon)
        self.epsilon = float(epsilon)
        self.inner = Collision(self.epsilon, 1, 1, optimal_t(self.epsilon, 1, 1) if t is None else t)
        self.t, self.p_true, self.p_false = self.inner.t, self.inner.p_true, self.inner.p_false

    # -- the randomizer (privacy-critical: the rounding, then Collision's draw) ------------------------------
    def elements(self, x: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """Each user's element: 0 (1₊) w.p. (1 + x')/2, else 1 (1₋); -1 (none) for a missing value."""
        value, gone = as_values(x)
        up = rng.random(len(value)) < (1 + value) / 2
        return np.where(gone, -1, np.where(up, 0, 1)).astype(np.int64)[:, None]

    def randomize(self, x: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        return self.inner.randomize(self.elements(x, rng), rng)

    def aggregate(self, reports: np.ndarray) -> np.ndarray:
        return self.inner.aggregate(np.asarray(reports, dtype=np.uint64).reshape(-1, 2))

    # -- estimators and variances --------------------------------------------------------------------------
    def estimate(self, summary: np.ndarray, n: int) -> np.ndarray:
        """(f̂₊, f̂₋): the shares of users whose rounded value is +1 (−1), unbiased."""
        return self.inner.estimate(summary, n)

    def variance(self, truth: np.ndarray, n: int) -> np.ndarray:
        """Var f̂± at the true item frequencies ``truth`` = (f₊, f₋)."""
        return np.diag(covariance(self.p_true, self.p_false, np.asarray(truth, float))) / max(n, 1)

    def step(self, n: int) -> float:
        """One report moves f̂± by 1/(n(P_t − P_f))."""
        return 1 / (max(n, 1) * (self.p_true - self.p_false))

    # -- the audits (every hash table (H(1₊), H(1₋)) and every z) -------------------------------------------
    def audit_inputs(self) -> np.ndarray:
        return np.append(np.linspace(-1.0, 1.0, 21), MISSING)

    def _distribution(self, x: float, exact: bool) -> list:
        """P[(H(1₊), H(1₋), z)] for input x: the rounding's mixture of Collision's law given the element."""
        t = self.t
        if _missing(np.array([x]))[0]:
            weight = Fraction(1, t ** 3) if exact else t ** -3.0
            return [weight] * t ** 3
        up = below((1 + x) / 2) if exact else (1 + x) / 2
        given = [self.inner._cell_probabilities(code, exact) for code in (0, 1)]   # element 1₊, element 1₋
        return [up * a + (1 - up) * b for a, b in zip(*given)]

    def output_distribution(self, x: float) -> np.ndarray:
        return np.array(self._distribution(float(x), exact=False), dtype=float)

    def realised_distribution(self, x: float) -> list[Fraction]:
        return self._distribution(float(x), exact=True)

    @classmethod
    def audit_cases(cls):
        return [cls(e, t) for e in (0.1, 1.0, math.log(2), 3.0) for t in (2, 3)]

    @classmethod
    def realised_cases(cls, epsilon: float):
        return [cls(epsilon, 2), cls(epsilon, 3)]

    def __repr__(self) -> str:
        return f"collision_mean(epsilon={self.epsilon:g}, t={self.t})"


class NoNoise(NoiseOff, Randomizer):
    """The noise-off twin of :class:`CollisionMean` (EPSILON INF, EVALUATE's truth): its summary is the exact
    (Σ x', count) over the users with a value, from which :func:`answer` computes the non-NULL mean, sum and count
    as plain SQL does (NULL when no user has a value). Not a local randomizer, so not registered."""

    name = "identity"
    input_size = None
    estimates = "items"
    report_width = 2
    p_true, p_false = 1.0, 0.0

    def __init__(self):
        self.epsilon = math.inf

    def randomize(self, x: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        value, gone = as_values(x)
        return np.stack([value, (~gone).astype(float)], axis=1)

    def aggregate(self, reports: np.ndarray) -> np.ndarray:
        return np.asarray(reports, dtype=float).reshape(-1, 2).sum(axis=0)

    def estimate(self, summary: np.ndarray, n: int) -> np.ndarray:
        return np.asarray(summary, dtype=float) / n

    def variance(self, truth: np.ndarray, n: int) -> np.ndarray:
        return np.zeros(2)


def covariance(p_true: float, p_false: float, f: np.ndarray) -> np.ndarray:
    """The covariance of one user's contribution to (f̂₊, f̂₋), averaged over users with item frequencies f
    (clipped to the simplex): indicator rates p± = P_f + g f±, joint rate P_f² + (f₊ + f₋) P_f g, g = P_t − P_f."""
    g = p_true - p_false
    if g >= 1:   # no noise (the twin)
        return np.zeros((2, 2))
    f = np.clip(f, 0, 1)
    f = f / max(1.0, f.sum())
    p = p_false + g * f
    joint = p_false ** 2 + f.sum() * p_false * g
    return np.array([[p[0] * (1 - p[0]), joint - p[0] * p[1]], [joint - p[0] * p[1], p[1] * (1 - p[1])]]) / g ** 2


def gradient(what: str, f: np.ndarray, n: int, low: float, high: float) -> np.ndarray:
    """∂answer/∂(f̂₊, f̂₋) in the answer's units: the mean's ratio (half·(2f₋, −2f₊)/x̲²), the sum's n(hi, lo), the
    count's n(1, 1)."""
    if what == "sum":
        return n * np.array([high, low])
    if what == "count":
        return n * np.ones(2)
    present = max(float(f.sum()), 1 / max(n, 1))
    return (high - low) / 2 * np.array([2 * f[1], -2 * f[0]]) / present ** 2


def answer(r: Randomizer, summary: np.ndarray, n: int, what: str, low: float, high: float,
           population: int | None = None, confidence: float = 0.95) -> Estimate:
    """The mean over the users with a value (``what`` = 'mean'), their sum or their count, from n users' release,
    standing for ``population`` users (a users split) where given. The mean carries Fieller's interval at
    ``confidence`` (:func:`with_interval`); the sum and count the delta-method standard error."""
    big = population or n
    if isinstance(r, NoNoise):
        return _exact(summary, n, big, what, low, high)
    f = r.estimate(summary, n)
    cov = covariance(r.p_true, r.p_false, np.clip(f, 0, 1)) / n
    if what == "mean":
        to_ratio = np.array([[1.0, -1.0], [1.0, 1.0]])   # (f₊, f₋) -> (x̄, x̲)
        parts = ratio_parts(f[0] - f[1], f[0] + f[1], to_ratio @ cov @ to_ratio.T)
        return with_interval(Estimate(np.zeros(1), np.zeros(1), extra={"ratio": parts, "scale": (low, high, n)}),
                             confidence)
    grad = gradient(what, np.clip(f, 0, 1), big, low, high)
    se = math.sqrt(max(float(grad @ cov @ grad), 0.0))
    value = big * (high * f[0] + low * f[1]) if what == "sum" else big * (f[0] + f[1])
    step = float(np.abs(grad).max()) * r.step(n)
    return Estimate(np.array([value]), np.array([se]), step=step, extra={"present": float(f[0] + f[1])})


# ---- the ratio's interval (Fieller), shared by every conditional mean ---------------------------------------

def ratio_parts(num: float, den: float, cov: np.ndarray) -> np.ndarray:
    """(x̄̂, x̲̂, Var x̄̂, Var x̲̂, Cov) as one array: what :func:`ratio_interval` and :func:`with_interval` read."""
    return np.array([num, den, cov[0, 0], cov[1, 1], cov[0, 1]], dtype=float)


def ratio_interval(num: float, den: float, var_num: float, var_den: float, cov: float,
                   z: float) -> tuple[float, float]:
    """Fieller's interval for r = E[num]/E[den] ∈ [−1, 1] from two unbiased, jointly normal estimates: the r with
    T(r) = (num − r·den)²/Var(num − r·den) ≤ z² (Fieller, "Some problems in interval estimation", 1954), where
    Var(num − r·den) = var_num − 2r·cov + r²·var_den. It is bounded only when den > z·sd(den); otherwise (the
    denominator not significantly above 0) it is the whole range (−1, 1). Where the unclipped ratio falls outside
    [−1, 1] (no r in range fits), the set is {r : T(r) ≤ z² + min T on [−1, 1]} (the likelihood-ratio construction
    at a bound, as Feldman and Cousins 1998 do for a bounded mean): never empty, never a single point. The result
    is intersected with [−1, 1] and holds the clipped point num/den."""
    sd_den = math.sqrt(max(var_den, 0.0))
    if not den > z * sd_den:
        return -1.0, 1.0
    point = num / den

    def pivot(r: float) -> float:
        return (num - r * den) ** 2 / max(var_num - 2 * r * cov + r * r * var_den, 1e-300)

    k = z * z + (0.0 if -1 <= point <= 1 else min(pivot(-1.0), pivot(1.0)))
    a, b, c = den * den - k * var_den, num * den - k * cov, num * num - k * var_num
    if a <= 0:
        return -1.0, 1.0
    root = math.sqrt(max(b * b - a * c, 0.0))
    clipped = min(max(point, -1.0), 1.0)
    return max(-1.0, min((b - root) / a, clipped)), min(1.0, max((b + root) / a, clipped))


BETA_SHARE = 0.1   # the hybrid's projection level β = α·BETA_SHARE


def _selected_test(r: np.ndarray, num: float, den: float, sigma: np.ndarray, inv: np.ndarray, cut: float,
                   c: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """For every r: (F, inside, touched). F is the CDF at the observed P(r) = num − r·den of its law under
    H₀: E num = r·E den given T(r) = (r, 1)·Σ⁻¹·(num, den) (independent of P, and sufficient for the unknown
    E den) and given the selection den ≥ ``cut``: N(0, Var P) truncated to the half-line of P that den = a·P + b·T
    ≥ cut leaves, and to the band |P| ≤ c·sd(P); ``inside`` is |P| ≤ c·sd(P) (Fieller's set at level β),
    ``touched`` whether the half-line cuts into the band (else the selection says nothing about P); ``inv`` is
    Σ⁻¹ (a pseudo-inverse)."""
    vn, cv, vd = sigma[0, 0], sigma[0, 1], sigma[1, 1]
    var_p = np.maximum(vn - 2 * r * cv + r * r * vd, 1e-300)
    w0, w1 = inv[0, 0] * r + inv[0, 1], inv[1, 0] * r + inv[1, 1]     # T = w·(num, den)
    a, b = (cv - r * vd) / var_p, 1 / np.maximum(r * w0 + w1, 1e-300)  # den = a·P + b·T (b = 1/Var T)
    sd, p = np.sqrt(var_p), num - r * den
    with np.errstate(divide="ignore", invalid="ignore"):
        edge = np.where(a == 0, -np.inf, (cut - b * (w0 * num + w1 * den)) / a)
    lo = np.where(a > 0, np.maximum(edge, -c * sd), -c * sd)
    hi = np.where(a < 0, np.minimum(edge, c * sd), c * sd)
    touched = ((a > 0) & (edge > -c * sd)) | ((a < 0) & (edge < c * sd))
    return truncated_cdf(np.clip(p, lo, hi), 0.0, sd, lo, hi), np.abs(p) <= c * sd, touched


def selected_ratio_interval(num: float, den: float, var_num: float, var_den: float, cov: float,
                            confidence: float, cut: float) -> tuple[float, float]:
    """An interval for r = E[num]/E[den] ∈ [−1, 1] valid *given that den ≥ cut* (the answer was not flagged). The
    flag reads den, so it selects releases whose denominator noise is high and, through Cov(num − r·den, den) =
    Cov − r·Var den ≠ 0, the numerator's too: Fieller's unconditional set under-covers the unflagged answers
    (0.79-0.93 at 95%, most where the values sit at a bound). Each r is tested with P = num − r·den given the
    statistic T of H₀'s nuisance (independent of P), under which den ≥ cut is a half-line for P: a truncated
    normal, the polyhedral conditioning of Lee, Sun, Sun and Taylor ("Exact post-selection inference, with
    application to the lasso", Annals of Statistics 2016). That set is very wide just above the cut, so it is
    the hybrid of Andrews, Kitagawa and McCloskey ("Inference on Winners", QJE 2024): inside Fieller's set at
    β = α/10, the conditional test at level (α − β)/(1 − β) with P also truncated to that band; for jointly normal
    estimates, coverage 1 − α overall, and given the selection while it is not rare: the band holds with
    probability 1 − β overall, not given a selection of probability near β (unflagged in 1.5% of releases, r at a
    bound: 0.89 at 95%, 0.80 at 90%; tests/system/test_audit9_selection.py). Where the selection cannot
    touch the band (far above the cut) it is Fieller's set (:func:`ratio_interval`). The accepted r on a grid of
    [−1, 1], its ends refined on finer grids (to 2·10⁻⁹); it holds the clipped point num/den."""
    from scipy.special import ndtri  # imported here: scipy.special adds ~0.2 s to `import ldpql`
    alpha = 1 - confidence
    beta = alpha * BETA_SHARE
    c, level = float(ndtri(1 - beta / 2)), (alpha - beta) / (1 - beta)
    sigma = np.array([[var_num, cov], [cov, var_den]], dtype=float)
    inv = np.linalg.pinv(sigma)

    def accept(r: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        f, inside, touched = _selected_test(r, num, den, sigma, inv, cut, c)
        return inside & (f >= level / 2) & (f <= 1 - level / 2), touched

    grid = np.linspace(-1.0, 1.0, 401)
    ok, touched = accept(grid)
    if not np.any(touched & ok):   # nothing accepted, or the selection cannot touch the band: Fieller's set
        return ratio_interval(num, den, var_num, var_den, cov, float(ndtri(1 - alpha / 2)))
    i, j = np.flatnonzero(ok)[[0, -1]]
    inside, outside = grid[[i, j]], grid[[max(i - 1, 0), min(j + 1, len(grid) - 1)]]
    for _ in range(3):   # each end between its last accepted and first rejected point, on finer grids
        fine = inside[:, None] + (outside - inside)[:, None] * np.linspace(0.0, 1.0, 129)
        took = accept(fine.ravel())[0].reshape(fine.shape)
        last = np.argmin(took, axis=1) - 1   # the last accepted before the first rejected (took[:, 0] is True)
        last = np.where(took.all(axis=1), fine.shape[1] - 1, np.maximum(last, 0))
        inside, outside = fine[[0, 1], last], fine[[0, 1], np.minimum(last + 1, fine.shape[1] - 1)]
    clipped = min(max(num / den, -1.0), 1.0)
    return max(-1.0, min(float(outside[0]), clipped)), min(1.0, max(float(outside[1]), clipped))


LOW_CONFIDENCE = 3.0   # flag the ratio when x̲̂ < 3·sd(x̲̂) (spec §8.22), or when its interval is the whole range


def with_interval(est: Estimate, confidence: float) -> Estimate:
    """A conditional mean's answer at ``confidence`` from its ratio parts (``extra['ratio']``, ``extra['scale']`` =
    (lo, hi, n)): the point mid + half·clip(x̄̂/max(x̲̂, 1/n), −1, 1) (spec §8.22), Fieller's interval
    (:func:`ratio_interval`) in the declared units, its half-width / z as the standard error, and the low-confidence
    note. Post-processing only (a planner ``derive``); an estimate without ratio parts is returned unchanged."""
    parts = est.extra.get("ratio")
    if parts is None:
        return est
    num, den, var_num, var_den, cov = (float(v) for v in parts)
    low, high, n = est.extra["scale"]
    half, mid = (high - low) / 2, (high + low) / 2
    z = NormalDist().inv_cdf(0.5 + confidence / 2)
    sd_den = math.sqrt(max(var_den, 0.0))
    cut = LOW_CONFIDENCE * sd_den
    # an unflagged answer's interval holds given that it was not flagged (the flag reads the same release)
    lo, hi = selected_ratio_interval(num, den, var_num, var_den, cov, confidence, cut) if den >= cut > 0 else \
        ratio_interval(num, den, var_num, var_den, cov, z)
    value = mid + half * float(np.clip(num / max(den, 1 / n), -1, 1))
    whole = (lo, hi) == (-1.0, 1.0)
    note = ""
    if den < LOW_CONFIDENCE * sd_den:
        note = (f"low confidence: the estimated share of users with a value ({den:.3g}) is within 3 standard errors "
                f"({sd_den:.3g}) of 0, so the mean over them is unreliable (the ratio is biased)")
    elif whole:
        note = (f"low confidence: the estimated share of users with a value ({den:.3g}, standard error {sd_den:.3g}) "
                "is too uncertain to bound the mean over them")
    if whole and note:
        note += f"; its {confidence:.0%} interval is the whole declared range"
    return Estimate(np.array([value]), np.array([half * (hi - lo) / (2 * z)]), note=note,
                    extra={**est.extra, "present": den}, interval=(np.array([mid + half * lo]), np.array([mid + half * hi])),
                    interval_confidence=confidence)


def _exact(summary: np.ndarray, n: int, big: int, what: str, low: float, high: float) -> Estimate:
    """Noise off: SQL's AVG, SUM and COUNT over the users with a value, from (Σ x', count)."""
    total, count = (float(v) for v in summary)
    half, mid = (high - low) / 2, (high + low) / 2
    value = {"mean": mid + half * (total / count) if count else math.nan,
             "sum": (mid * count + half * total) * big / n, "count": count * big / n}[what]
    return Estimate(np.array([value]), np.zeros(1), extra={"present": count / n})


def protocol(r: Randomizer, encoding, what: str, low: float, high: float, population: int | None = None) -> Protocol:
    """One round over the aggregate's users, then :func:`answer`; NaN with no users."""
    reply = yield Round(r, encoding)
    if reply.n == 0:
        nan = np.full(1, np.nan)
        return Estimate(nan, nan, note="no users")
    return answer(r, reply.summary, reply.n, what, low, high, population)


@functools.lru_cache(maxsize=1024)
def predicted_variance(epsilon: float, what: str, low: float, high: float, present: float = 1.0) -> float:
    """n × the largest variance of the answer (the mean's; the sum's and the count's per user, n = 1) over data
    sets whose share of users with a value is ``present``, for :class:`CollisionMean` at ``epsilon``."""
    r = CollisionMean(epsilon)
    return worst_variance(r.p_true, r.p_false, what, low, high, present)


@functools.lru_cache(maxsize=4096)
def worst_variance(p_true: float, p_false: float, what: str, low: float, high: float, present: float = 1.0) -> float:
    """The same for any Collision coordinate with rates (P_t, P_f) (a joint release's column too): every user at
    one value v (a spread only lowers a fixed population's variance), v on a grid of [−1, 1]."""
    worst = 0.0
    # the mean's gradient floors the share at 1/n, which is the answer's guard, not a per-user quantity: with n = 1
    # it would read every share as 1, so the mean's is taken with no floor (its gradient has no other n in it)
    n = 1 if what != "mean" else 2 ** 62
    for v in np.linspace(-1, 1, 41):
        f = present * np.array([(1 + v) / 2, (1 - v) / 2])
        grad = gradient(what, f, n, low, high)
        worst = max(worst, float(grad @ covariance(p_true, p_false, f) @ grad))
    return worst


# ---- the split: an unconditional mean and the share with a value, from two reports --------------------------

def split_protocol(mean_r: Randomizer, present_r: Randomizer, value, present, low: float, high: float,
                   population: int | None = None) -> Protocol:
    """The mean over the users with a value from two reports of every user at ε₁ + ε₂ (sequential composition):
    a mean mechanism (Duchi et al., PM, HM) on x' with NULL as 0, Â, and binary randomized response on "x has a
    value", π̂; the answer mid + half·clip(Â/max(π̂, 1/n), −1, 1) with Fieller's interval (:func:`with_interval`)
    from Var Â, Var π̂ (independent reports) and, under a users split, the users' sampling covariance."""
    first = yield Round(mean_r, value)
    second = yield Round(present_r, present)
    n = first.n
    if n == 0:
        nan = np.full(1, np.nan)
        return Estimate(nan, nan, note="no users")
    a = float(mean_r.estimate(first.summary, n)[0])
    m2 = mean_r.second_moment(first.summary, n)
    plug = np.clip([a], -1, 1)
    var_a = float((mean_r.variance(plug, n) if m2 is None else mean_r.variance(plug, n, second_moment=m2))[0])
    p = float(present_r.estimate(second.summary, n)[0])
    var_p = float(present_r.variance(np.clip([p], 0, 1), n)[0])
    cov = np.array([[var_a, 0.0], [0.0, var_p]])   # the two reports' noises are independent
    if population and n < population:   # the users asked stand for the whole group: the sampling covariance of
        mean, share = float(np.clip(a, -1, 1)), float(np.clip(p, 1 / n, 1))   # (x·h, h), x² ≤ 1 (Bhatia-Davis)
        cov += (1 - n / population) / n * np.array([[share - mean ** 2, mean * (1 - share)],
                                                    [mean * (1 - share), share * (1 - share)]])
        cov += np.diag([unseen(1.0, n, 1 - n / population), unseen(0.25, n, 1 - n / population)])   # (base.unseen)
    est = Estimate(np.zeros(1), np.zeros(1), extra={"ratio": ratio_parts(a, p, cov), "scale": (low, high, n)})
    return with_interval(est, 0.95)


def split_predicted_variance(mean_worst: float, present_variance: float, present: float = 1.0) -> float:
    """n × the variance of the split's ratio at a share ``present`` with a value, by the delta method (its one
    approximation; the reports' noises are independent): (the mean mechanism's worst case + the share's variance
    at R² = 1)/present², both at their worst, which no one data set need reach (conservative)."""
    return (mean_worst + present_variance) / present ** 2

"""Intervals for the frequencies of the values a release ranks first, second, ... (LDP_TOPK): inference on winners.

The value ranked j-th is chosen because its estimate came out j-th largest, so its estimate is biased up (the
winner's curse) and an interval centred on it under-covers the value's frequency when leading frequencies are
close. Andrews, Kitagawa and McCloskey, "Inference on Winners" (Quarterly Journal of Economics, 2024), give
intervals with exact coverage for the selected value's true mean when the estimates are normal with a known
covariance:

- *conditional*: given the other estimates, the selected estimate X_s must lie between the next lower and the
  next higher of them (that is what "ranked j-th" means), so X_s is a normal N(μ_s, σ_s²) truncated to that
  range; inverting its CDF in μ_s gives an interval with coverage 1 − α given the selection, hence overall;
- *hybrid*: the conditional interval is very wide when X_s barely beat its neighbour, so it is intersected with a
  projection interval X_s ± c_β σ_s that holds for all d values at once with probability 1 − β (β = α/10), and
  the conditional test runs at level (α − β)/(1 − β) with the truncation also limited to that band. Coverage is
  between 1 − α and (1 − α)/(1 − β): at 95%, between 0.95 and 0.955.

Everything here is post-processing of the released estimates and their standard errors (no new ε, no
randomness). Correlated estimates (one report per user: GRR, k-subset, Hadamard) enter through ``rho``, each
estimate's regression on the selected one, Σ_is/Σ_ss (AKM's Z = X − (Σ_·s/Σ_ss) X_s).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable

import numpy as np

from ldpql.mechanisms.base import debiased_covariance, truncated_cdf

BETA_SHARE = 0.1   # β = α/10, Andrews, Kitagawa & McCloskey's choice
BISECTIONS = 32   # each halves a bracket of about 2·c_β·σ: 2^-32 of it is far below any lattice step
SKEW_FLOOR = 0.05   # below it the normal's ends move by < 0.025σ (Cornish-Fisher: skew·(z² − 1)/6 at z = 1.96)


def _skewed_cdf(g: np.ndarray) -> Callable[[np.ndarray], np.ndarray]:
    """t -> P(Y <= t) for Y standardised (mean 0, variance 1) with skewness g (one per column of t): Pearson's
    type III (a shifted gamma, the shape of a Poisson count of flips), the normal where g = 0; monotone in t."""
    from scipy.special import gammainc, ndtr  # imported here: scipy.special adds ~0.2 s to `import ldpql`
    skewed = np.abs(g) > 1e-6
    a = 4 / np.where(skewed, g, 1.0) ** 2
    sign, root = np.where(g < 0, -1.0, 1.0), np.sqrt(a)

    def cdf(t: np.ndarray) -> np.ndarray:
        tail = gammainc(a, np.maximum(a + sign * t * root, 0.0))   # the reflected gamma when g < 0
        gamma = np.where(g < 0, 1 - tail, tail)
        return gamma if skewed.all() else np.where(skewed, gamma, ndtr(t))

    return cdf


def _skewed_quantile(u: float, g: np.ndarray) -> np.ndarray:
    """The u-quantile of :func:`_skewed_cdf`."""
    from scipy.special import gammaincinv, ndtri
    skewed = np.abs(g) > 1e-6
    a = 4 / np.where(skewed, g, 1.0) ** 2
    w = (gammaincinv(a, np.where(g < 0, 1 - u, u)) - a) / np.sqrt(a)
    return np.where(skewed, np.where(g < 0, -w, w), ndtri(u))


def _truncated(x, mu, sigma, lo, hi, cdf) -> np.ndarray:
    """P(X <= x | lo <= X <= hi) for X = mu + sigma·Y, Y with CDF ``cdf`` (None: the normal, in its stable form)."""
    if cdf is None:
        return truncated_cdf(x, mu, sigma, lo, hi)
    f = cdf((np.stack(np.broadcast_arrays(lo, x, hi)) - mu) / sigma)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.nan_to_num(np.clip((f[1] - f[0]) / (f[2] - f[0]), 0.0, 1.0), nan=0.5)


def _invert(x: np.ndarray, sigma: np.ndarray, lo: np.ndarray, hi: np.ndarray, band: tuple[np.ndarray, np.ndarray],
            target: np.ndarray, g: np.ndarray) -> np.ndarray:
    """The mu in [x − b·σ, x − a·σ] (``band`` = (a, b), X − mu in [aσ, bσ] for all values w.p. 1 − β) where the
    hybrid CDF (truncation also to that band) crosses ``target``, by bisection (it decreases in mu); the nearer end
    when it does not cross."""
    a, b = band
    cdf = _skewed_cdf(g) if np.any(g) else None
    shape = np.broadcast_shapes(np.shape(target), np.shape(x))   # several targets at once: one row each
    left, right = np.broadcast_to(x - b * sigma, shape), np.broadcast_to(x - a * sigma, shape)
    for _ in range(BISECTIONS):
        mid = (left + right) / 2
        f = _truncated(x, mid, sigma, np.maximum(lo, mid + a * sigma), np.minimum(hi, mid + b * sigma), cdf)
        above = f > target
        left, right = np.where(above, mid, left), np.where(above, right, mid)
    return (left + right) / 2


def winners_interval(raw: np.ndarray, se: np.ndarray, k: int, confidence: float, step: float = 0.0,
                     rho: Callable[[int], np.ndarray] | None = None,
                     skew: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Hybrid intervals (Andrews, Kitagawa & McCloskey) for the true frequencies of the values whose raw
    estimates rank 1..k (largest first, exact ties as :func:`rank` breaks them), clipped to [0, 1].

    ``rho(s)`` (optional; :func:`correlations`) gives Cov(X_i, X_s)/Var(X_s) for every i; without it the estimates
    are taken as independent. The selection range of the value at rank j is (j+1-th, j−1-th) of
    t_i = (X_i − ρ_is X_s)/(1 − ρ_is). Estimates on a lattice of ``step`` (one report's weight) are first made
    continuous (:func:`_unlattice`), as the truncated-normal argument needs. ``skew`` (optional; a release's
    ``extra['skew']``) is each estimate's skewness: at a high ε the noise is a few report flips, skewed like a
    Poisson count, and the top of a tied block is the block's largest upward deviation, so the normal model's
    interval sat too high there (0.87 at 90% with skewness 0.4); for independent estimates (no ``rho``) the CDF is
    then Pearson's type III instead.

    >>> lo, hi = winners_interval(np.array([0.30, 0.29, 0.1, 0.05]), np.full(4, 0.02), 1, 0.95)
    >>> bool(lo[0] < 0.29 and hi[0] < 0.30 + 1.96 * 0.02)
    True
    """
    from scipy.special import ndtri  # imported here: scipy.special adds ~0.2 s to `import ldpql`
    raw, se = np.asarray(raw, dtype=float), np.asarray(se, dtype=float)
    d, alpha = len(raw), 1.0 - confidence
    beta = alpha * BETA_SHARE
    ranked = rank(raw, step)
    order = ranked[:k]
    # where one report moves an estimate further than its standard error (a high ε), it is exact or a step or two
    # off and its noise (a few flips) has heavier tails than the normal model: the per-value interval with half a
    # step more (it covers at least as often as the estimate is exact) is joined to the hybrid one, which
    # corrects for the selection (alone, the per-value one covered the top of a tied block 0.88 at 95%)
    half = ndtri(1 - alpha / 2) * se[order] + step / 2
    lattice, plain = se[order] < step, raw[order]
    # the skew enters only for independent estimates (one bit per value): with one report per user (``rho``), X_s
    # given the others is not its marginal (a lost report lands in another bin), and the normal model measured
    # within a point there (GRR, ε 6-8); its marginal skew made the top rank worse (0.897 -> 0.882 at 90%)
    g = np.zeros(d) if skew is None or rho is not None else np.nan_to_num(np.asarray(skew, dtype=float))
    if step > 0 and np.isfinite(step):
        jittered, wider = _unlattice(raw, se, ranked, step)
        with np.errstate(invalid="ignore", divide="ignore"):   # the uniform jitter adds variance, not skew
            g = np.nan_to_num(g * (se / wider) ** 3)
        raw, se = jittered, wider
    x, sigma, g = raw[order], se[order], np.where(np.abs(g[order]) < SKEW_FLOOR, 0.0, g[order])
    lo, hi = _selection_range(raw, order, rho)
    tail = -np.expm1(np.log1p(-beta) / d) / 2   # every X_i − μ_i inside its band w.p. 1 − β
    band = (_skewed_quantile(tail, g), _skewed_quantile(1 - tail, g))
    level = (alpha - beta) / (1 - beta)
    ok = sigma > 0
    ends = _invert(x, np.where(ok, sigma, 1.0), lo, hi, band, np.array([[1 - level / 2], [level / 2]]), g)
    ends = np.where(ok, ends, np.stack([plain - half, plain + half]))
    # a set that misses [0, 1] (the conditional test rejects every feasible frequency: ~2% of the ranks at n = 200,
    # ε = 0.5) would clip to one point, shown as "± 0": the per-value interval is joined to it too
    missed = (ends[1] <= 0) | (ends[0] >= 1)
    joined = np.stack([np.minimum(ends[0], plain - half), np.maximum(ends[1], plain + half)])
    ends = np.where(lattice | missed, joined, ends)
    return np.clip(ends[0], 0.0, 1.0), np.clip(ends[1], 0.0, 1.0)


def tiebreak(raw: np.ndarray) -> np.ndarray:
    """U ~ uniform(0, 1) per value, pseudo-random but a function of the release (a hash of its estimates), so the
    same release always gives the same ranking and intervals (post-processing: no private data, no new ε)."""
    raw = np.ascontiguousarray(raw, dtype=float)
    seed = int.from_bytes(hashlib.blake2b(raw.tobytes(), digest_size=8).digest(), "little")
    return np.random.default_rng(seed).random(len(raw))


def rank(raw: np.ndarray, step: float = 0.0) -> np.ndarray:
    """Indices by estimate, largest first. Exactly tied estimates of a lattice release (``step`` > 0) are ordered
    by :func:`tiebreak`'s U, largest first, so the ranking is that of the continuous X + (U − ½)·step of
    :func:`_unlattice`, the selection the hybrid interval conditions on (ordered by position instead, the value
    found at a tied rank covered 0.57-0.89 at 95% near the lattice fallback); without a lattice, by position."""
    raw = np.asarray(raw, dtype=float)
    if step > 0 and np.isfinite(step):
        return np.lexsort((-tiebreak(raw), -raw))
    return np.lexsort((np.arange(len(raw)), -raw))


def _unlattice(raw: np.ndarray, se: np.ndarray, order: np.ndarray, step: float) -> tuple[np.ndarray, np.ndarray]:
    """X + (U − ½)·step with U uniform (:func:`tiebreak`), and σ² + step²/12: a lattice estimate made continuous
    (the usual randomisation of a discrete statistic). Without it, values tied on the lattice sit exactly at each
    other's selection boundary, where the conditional interval is degenerate. Ties are ranked by U (:func:`rank`),
    so the jittered order is the release's ranking whenever the estimates lie on one lattice of this step."""
    jittered = raw + (tiebreak(raw) - 0.5) * step
    if np.any(np.diff(jittered[order]) > 0):   # not on one lattice of this step: leave the estimates as they are
        return raw, se
    return jittered, np.sqrt(se ** 2 + step ** 2 / 12)


def _selection_range(raw: np.ndarray, order: np.ndarray,
                     rho: Callable[[int], np.ndarray] | None) -> tuple[np.ndarray, np.ndarray]:
    """Per selected value s at rank j: the range of X_s, given the others' Z_i = X_i − ρ_is X_s, that keeps s
    at rank j: exactly j − 1 of the thresholds t_i = Z_i / (1 − ρ_is) above it."""
    lows, highs = np.full(len(order), -np.inf), np.full(len(order), np.inf)
    for j, s in enumerate(order):
        others = np.delete(np.arange(len(raw)), s)
        r = np.zeros(len(others)) if rho is None else np.minimum(rho(s)[others], 0.999)
        t = -np.sort(-(raw[others] - r * raw[s]) / (1 - r))
        if j < len(t):
            lows[j] = t[j]
        if j > 0:
            highs[j] = t[j - 1]
    return lows, highs


def correlations(raw: np.ndarray, pairs: tuple) -> Callable[[int], np.ndarray]:
    """rho(s): Cov(X_i, X_s)/Var(X_s) for every bin i, at the clipped estimate (plug-in), from a release's
    ``extra['pairs']`` = (p, q, both, with_own, n, sampled): the oracle's covariance
    (:func:`~ldpql.mechanisms.base.debiased_covariance`) plus, when the release asked a random share of the
    users, the sampling covariance −f_i f_s (1 − n/N)/n."""
    p, q, both, with_own, n, sampled = pairs
    f = np.clip(np.asarray(raw, dtype=float), 0.0, 1.0)

    def rho(s: int) -> np.ndarray:
        cov = debiased_covariance(f, s, n, p, q, both, with_own) - sampled * f * f[s] / n
        cov[s] += sampled * f[s] / n   # the variance's sampling term is f_s(1 − f_s)(1 − n/N)/n
        return cov / cov[s] if cov[s] > 0 else np.zeros(len(f))

    return rho

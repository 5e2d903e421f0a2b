"""Testing a declared σ against the Gaussian protocols' own released reports, and re-estimating µ with σ free when
the test fails: post-processing of reports already released (no value is read again, no ε is spent).

The σ-known protocols of Joseph, Kulkarni, Mao and Wu, "Locally Private Gaussian Estimation" (NeurIPS 2019) trust
the declared σ: µ̂ = µ̂_1 + σ·Φ⁻¹(π̂), and their first round's bins start at ⌊log₂ σ⌋. A σ declared ten times too
large or too small makes the answer miss by many standard errors (audit6 F3). But every report they release says
which cell of a periodic partition of the line holds the user's shifted value x', through randomized response:

- RR1 at level j: the class ⌊x'/2^j⌋ mod 4 (4-ary RR);
- KVRR2: the bit 1[x' ≥ µ̂_1], one cell boundary (a partition of period far beyond the data);
- the one-round subgroups: the bit 1[(x' − s)/D mod 1 < 1/2], class ⌊(x' − s)/(D/2)⌋ mod 2.

Under x' ~ N(µ, σ²) each class has a closed-form probability (:func:`class_probabilities`: a sum over nearby cells
when σ is below the cell width, the wrapped Gaussian's Fourier series above it), so the released counts have a
likelihood in (µ, σ) (:func:`log_likelihood`). Two uses:

- :func:`check_sigma`: the likelihood-ratio test of "σ is in the declared range" on round 1's counts with µ free,
  Λ = 2[max_{µ,σ} ℓ − max_{µ, σ declared} ℓ], compared with χ²₁: its false-alarm rate at the declared σ is
  ``ALPHA`` (asymptotically; at most that at a range's boundary).
- :func:`profile_estimate`: µ's maximum-likelihood estimate from every report with σ free and its
  profile-likelihood interval {µ : max_σ ℓ(µ, σ) ≥ max ℓ − χ²₁(level)/2}: UVGAUSSTIMATE's idea (estimate σ from
  the first round) done by likelihood, honest whatever σ is, wider than the σ-known interval.

The model ignores the clamp of x' to [0, W] (W = the range of µ ± 4σ_max): under the declaration it moves at most
Φ(−4) ≈ 3·10⁻⁵ of the mass. Privacy: nothing here touches a user's value; the reports are the protocol's output.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

ALPHA = 0.01      # the σ check's false-alarm rate at the declared σ
FOURIER_TERMS = 12
GRID_POINTS = 129  # µ grid of the first pass (then refined by a local optimizer)
SIGMA_STEPS = 4    # σ grid points per octave of the first pass
# scipy is imported inside the functions that need it: at module level it would add about a second to
# `import ldpql` (as in ldpql.mechanisms.shuffle)


def chi2_sf(stat: float) -> float:
    """P(χ²₁ > stat)."""
    from scipy.special import erfc
    return float(erfc(math.sqrt(max(stat, 0.0) / 2)))


def chi2_ppf(level: float) -> float:
    """The ``level`` quantile of χ²₁: z² with z the normal quantile at (1 + level)/2."""
    from scipy.special import ndtri
    return float(ndtri((1 + level) / 2)) ** 2


@dataclass(frozen=True)
class Cells:
    """One released count vector: ``counts[a]`` users reported class a ∈ {0..r−1}, the class of a value x' being
    ⌊(x' − shift)/width⌋ mod r, through randomized response that reports the true class with probability p and
    each other one with probability q (GRR, or the binary RR with r = 2)."""

    counts: np.ndarray
    shift: float
    width: float
    p: float
    q: float


def class_probabilities(mu: np.ndarray, sigma: np.ndarray, shift: float, width: float, r: int) -> np.ndarray:
    """P(⌊(x − shift)/width⌋ mod r = a) for x ~ N(µ, σ²), one row per (µ, σ) pair (broadcast): (pairs, r)."""
    from scipy.special import ndtr
    mu, sigma = (np.ravel(v) for v in np.broadcast_arrays(np.asarray(mu, dtype=float) - shift,
                                                           np.asarray(sigma, dtype=float)))
    out = np.full((mu.size, r), 1.0 / r)      # σ ≥ 6·width: the Fourier terms are below e^{-70}
    wrapped = (sigma >= width / 2) & (sigma < 6 * width)
    if wrapped.any():   # the wrapped Gaussian's series: terms fall as exp(-2(πmσ/(r·width))²) ≤ e^{-0.3m²}
        m, period = np.arange(1, FOURIER_TERMS + 1), r * width
        amp = 2 / (np.pi * m) * np.sin(np.pi * m / r) * np.exp(-2 * (np.pi * m * sigma[wrapped, None] / period) ** 2)
        # cos(m(θ_a − φ)) = cos mθ_a cos mφ + sin mθ_a sin mφ: trigonometry per (pair, m) and per (class, m)
        # only, then two small matrix products (the profile grids hold ~10^4 pairs)
        theta = 2 * np.pi / period * (np.arange(r) + 0.5) * width * m[:, None]   # (m, class)
        phi = 2 * np.pi / period * mu[wrapped, None] * m                          # (pair, m)
        out[wrapped] = 1.0 / r + (amp * np.cos(phi)) @ np.cos(theta) + (amp * np.sin(phi)) @ np.sin(theta)
    near = sigma < width / 2
    if near.any():      # the cells within 8σ of µ hold all but 10⁻¹⁵ of the mass
        mu_n, sd = mu[near, None], sigma[near, None]
        cell = np.floor(mu_n / width) + np.arange(-5, 6)
        mass = ndtr(((cell + 1) * width - mu_n) / sd) - ndtr((cell * width - mu_n) / sd)
        slot = np.mod(cell, r).astype(np.int64) + r * np.arange(len(mu_n))[:, None]   # (row, class), flattened
        out[near] = np.bincount(slot.ravel(), weights=mass.ravel(), minlength=len(mu_n) * r).reshape(-1, r)
    return out


def log_likelihood(reports: list[Cells], mu: np.ndarray, sigma: np.ndarray) -> np.ndarray:
    """ℓ(µ, σ) of the released counts (multinomial, up to a constant), one value per (µ, σ) pair (broadcast)."""
    shape = np.broadcast_shapes(np.shape(mu), np.shape(sigma))
    total = np.zeros(int(np.prod(shape)))
    for c in reports:
        pi = class_probabilities(mu, sigma, c.shift, c.width, len(c.counts))
        total += (np.log(np.maximum(c.q + (c.p - c.q) * pi, 1e-300)) * np.asarray(c.counts, dtype=float)).sum(1)
    return total.reshape(shape)


@dataclass(frozen=True)
class Search:
    """Where to look: µ within centre ± 8·scale (x' units, widened when the fit reaches the edge), σ in [lo, hi]."""

    centre: float
    scale: float
    sigma_lo: float
    sigma_hi: float

    def mus(self, widen: float = 1.0) -> np.ndarray:
        return self.centre + self.scale * widen * np.linspace(-8, 8, GRID_POINTS)

    def sigmas(self, lo: float | None = None, hi: float | None = None) -> np.ndarray:
        lo, hi = lo or self.sigma_lo, hi or self.sigma_hi
        steps = max(2, math.ceil(SIGMA_STEPS * math.log2(hi / lo)) + 1) if hi > lo else 1
        return np.geomspace(lo, hi, steps)


def _grid(reports: list[Cells], mus: np.ndarray, sigmas: np.ndarray) -> np.ndarray:
    return log_likelihood(reports, mus[None, :], sigmas[:, None])      # (σ, µ)


def _fit(reports: list[Cells], search: Search, lo: float, hi: float) -> tuple[float, float, float]:
    """max ℓ over µ and σ ∈ [lo, hi]: the best grid point, refined by a bounded local search. (ℓ, µ, σ)."""
    from scipy.optimize import minimize
    mus, sigmas = search.mus(), search.sigmas(lo, hi)
    grid = _grid(reports, mus, sigmas)
    i, j = np.unravel_index(np.argmax(grid), grid.shape)
    step = mus[1] - mus[0]

    def neg(v):
        return -float(log_likelihood(reports, v[0], math.exp(v[1])))
    res = minimize(neg, [mus[j], math.log(sigmas[i])], method="Powell",
                   bounds=[(mus[j] - 2 * step, mus[j] + 2 * step), (math.log(lo), math.log(hi))])
    if -res.fun >= grid[i, j]:
        return -float(res.fun), float(res.x[0]), math.exp(res.x[1])
    return float(grid[i, j]), float(mus[j]), float(sigmas[i])


@dataclass(frozen=True)
class SigmaCheck:
    """The likelihood-ratio test of the declared σ: Λ, its χ²₁ p-value, whether it is below ``ALPHA``, and the
    free fit's σ (x' units, as the values); and the goodness of fit of that free fit (its p-value, and ``misfit``
    when no Gaussian explains the reports: two point masses, a bimodal or very skewed column)."""

    statistic: float
    p_value: float
    flagged: bool
    sigma_fit: float
    fit_p: float = 1.0
    misfit: bool = False


def goodness_of_fit(reports: list[Cells], mu: float, sigma: float) -> float:
    """The p-value of the deviance G = 2 Σ O·log(O/E) of the released counts against the Gaussian (µ, σ) fitted
    to them, on Σ(r − 1) − 2 degrees of freedom (audit7 A1, A4: a test of σ alone cannot see data that no σ fits)."""
    from scipy.stats import chi2
    g, df = 0.0, -2
    for c in reports:
        o = np.asarray(c.counts, dtype=float)
        if o.sum() <= 0:
            continue
        e = o.sum() * (c.q + (c.p - c.q) * class_probabilities(mu, sigma, c.shift, c.width, len(o))[0])
        g += 2 * float(np.sum(np.where(o > 0, o * np.log(np.maximum(o, 1e-300) / np.maximum(e, 1e-300)), 0.0)))
        df += len(o) - 1
    return float(chi2.sf(g, df)) if df > 0 else 1.0


def check_sigma(round_one: list[Cells], declared: tuple[float, float], search: Search) -> SigmaCheck:
    """Test "σ ∈ [declared]" on round 1's counts, µ free (a nuisance): Λ = 2[max ℓ − max_{σ declared} ℓ] ~ χ²₁;
    and whether the free fit explains the counts at all (:func:`goodness_of_fit`), each at rate ALPHA / 2."""
    free, mu, sigma = _fit(round_one, search, search.sigma_lo, search.sigma_hi)
    held, _, _ = _fit(round_one, search, *declared)
    stat = max(0.0, 2 * (free - held))
    p, fit_p = chi2_sf(stat), goodness_of_fit(round_one, mu, sigma)
    return SigmaCheck(stat, p, p < ALPHA / 2 or fit_p < ALPHA / 2, sigma, fit_p, fit_p < ALPHA / 2)


def _profile(reports: list[Cells], mu: float, sigmas: np.ndarray) -> tuple[float, float]:
    """max over σ of ℓ(µ, σ): the grid's best σ, then a 33-point grid between its neighbours. (ℓ, σ)."""
    values = log_likelihood(reports, mu, sigmas)
    i = int(np.argmax(values))
    fine = np.geomspace(sigmas[max(i - 1, 0)], sigmas[min(i + 1, len(sigmas) - 1)], 33)
    finer = log_likelihood(reports, mu, fine)
    k = int(np.argmax(finer))
    return (float(finer[k]), float(fine[k])) if finer[k] >= values[i] else (float(values[i]), float(sigmas[i]))


def profile_estimate(reports: list[Cells], search: Search, level: float,
                     selected: bool = True) -> tuple[float, float, float, float]:
    """µ̂ (maximum likelihood, σ free) and the profile-likelihood interval at ``level`` from every report:
    (µ̂, low, high, σ̂), x' units. The µ window doubles (up to 64 times) until the interval is inside it.

    ``selected``: the run was picked by :func:`check_sigma` rejecting the declared σ. At the true σ such a false
    alarm picks exactly the runs whose first round strayed by more than the test's threshold χ²₁(1 − ALPHA) in
    σ, and with it in µ (µ̂ moves with σ̂ by about (µ − µ̂_1)/σ), so the plain cut χ²₁(level)/2 covers those
    runs about half the time. The cut then allows for that stray too: (χ²₁(level) + χ²₁(1 − ALPHA))/2, a
    √(1 + χ²₁(1 − α)/χ²₁(level)) ≈ 1.6 times wider interval, so that a falsely flagged answer still covers."""
    from scipy.optimize import brentq, minimize_scalar
    drop = (chi2_ppf(level) + (chi2_ppf(1 - ALPHA / 2) if selected else 0.0)) / 2
    sigmas = search.sigmas()
    widen = 1.0
    while True:
        mus = search.mus(widen)
        prof = _grid(reports, mus, sigmas).max(axis=0)
        inside = np.flatnonzero(prof >= prof.max() - drop)
        if (inside[0] > 0 and inside[-1] < len(mus) - 1) or widen >= 64:
            break
        widen *= 2
    best = int(np.argmax(prof))
    step = mus[1] - mus[0]
    top = minimize_scalar(lambda m: -_profile(reports, m, sigmas)[0], bounds=(mus[best] - step, mus[best] + step),
                          method="bounded", options={"xatol": step * 1e-3})
    mu_hat, peak = float(top.x), max(-float(top.fun), float(prof[best]))
    cut = peak - drop

    def f(m: float) -> float:
        return _profile(reports, m, sigmas)[0] - cut

    def edge(index: int, direction: int) -> float:
        """Walk out from the grid's last point inside until the refined profile is below the cut, then solve for
        the crossing between there and the last point above it (µ̂ at worst)."""
        out = index + direction
        while 0 <= out < len(mus) and f(mus[out]) >= 0:
            out += direction
        if not 0 <= out < len(mus):
            return float(mus[out - direction])
        inner = mus[out - direction]
        if (inner - mu_hat) * direction < 0 or f(inner) <= 0:
            inner = mu_hat
        if f(inner) <= 0:   # no crossing to solve for (a flat or noisy profile, audit7 A2): the outer point
            return float(mus[out])
        return float(brentq(f, *sorted((inner, mus[out])), xtol=step * 1e-3))
    low, high = edge(int(inside[0]), -1), edge(int(inside[-1]), 1)
    return mu_hat, min(low, mu_hat), max(high, mu_hat), _profile(reports, mu_hat, sigmas)[1]

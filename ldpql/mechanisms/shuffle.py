"""Shuffle-model accounting for the whole engine, and the shuffle-model noisy binary search that uses it.

**Accounting** (Wang, Li, Li, Li, Yang, Yan, "Differentially Private Numerical Vector Analyses in the Local and
Shuffle Model", Section 6, building on Feldman, McMillan, Talwar, "Stronger privacy amplification by shuffling
for Rényi and approximate differential privacy", SODA 2023; spec seed-003 §5). A randomizer with the *mixture
property* at weight α (every input's output law puts mass α on two "clone" laws Q₁, Q₁′, user 1's e^ε₀α on
its own one) shuffled among n users is (ε_c, δ)-DP with δ = D_{e^ε_c}(P_α ‖ Q_α), where P_α and Q_α are the
laws of two counts (A + Δ₁, C − A + Δ₂) and (A + Δ₂, C − A + Δ₁), C ~ Bin(n − 1, 2r), A ~ Bin(C, 1/2),
Δ₁ ~ Bern(e^ε₀ α₁), Δ₂ ~ Bern(α₁/(1 − e^ε₀ α₁)) when Δ₁ = 0 (spec §5.1, with the corrected parametrisation
α_mix = β_TV/(e^ε₀ − 1) of §8.1). :func:`clone_delta` computes that hockey-stick divergence *exactly* (up to
the binomial mass left outside a ±14σ window, which is added to δ: conservative), :func:`central_epsilon`
inverts it for ε_c and :func:`local_epsilon` gives the largest ε₀ whose ε_c is within a target, verifying
the final ε₀ with the exact weights (t) the randomizer will use (§5.4). Mixture weights (§5.5): any ε₀-LDP
randomizer 1/(e^ε₀ + 1) (FMT'23's stronger clone, always valid); k-ary randomized response 1/(e^ε₀ + k − 1);
Collision and CoCo s/Ω; FMT'21's clone α₁ = 1/(e^ε₀+1), r = e^{−ε₀}/2. For comparison only (§5.6): FMT'21's
closed form (:func:`feldman_central`), Erlingsson et al. 2019 and Balle et al.'s privacy blanket (Hoeffding and
Bennett forms of "The privacy blanket of the shuffle model", CRYPTO 2019, generic randomizer).

**Shuffle NBS** (spec seed-001 §2.8): DpNaiveNBS runs unchanged with users randomizing at ε₀; each user is in
exactly one batch, every user of a batch runs the same ε₀-RR, and the shuffler hides who sent which bit (for
bits only the batch's count is seen); the batches are disjoint, so the adaptive protocol is (ε, δ)-DP when
each batch is. The engine takes the largest ε₀ under the cap whose exact clone-reduction ε_c <= ε ("tight":
RR is 2-ary randomized response, weight 1/(e^ε₀ + 1)), or Lemma G.5's closed form ε₀ = ln(ε² n_b/(80 ln(4/δ)))
checked against Feldman, McMillan, Talwar 2021, Thm 3.1 ("paper"), always with the true batch size n_b (A8).
In the engine a user's batch is a hash interval, so its size is binomial: n_b is a lower bound that fails with
probability <= δ/10 (spent from δ; the bound uses 0.9 δ). If ε₀ <= ε amplification gains nothing and the
planner keeps a local protocol.
Utility: NBS at ε₀ instead of ε. Runtime: one δ evaluation is O(√n) binomial terms (a few ms); an inverse is
~40 of them, cached.
Citations: spec seed-003 §5 (§5.3 algorithm, §5.7 golden values), §8.1–8.3; Feldman, McMillan, Talwar, FOCS
2021, Thm 3.1; spec seed-001 §2.8, A8, §4.7.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Callable

import numpy as np

from ldpql.mechanisms.base import EPSILON_CAP, Protocol
from ldpql.mechanisms.quantile import CoinSpace, nbs_protocol, nbs_steps

WINDOW = 14.0          # clone counts C further than 14σ from their mean are not enumerated: their mass joins δ
EXACT_USERS = 10 ** 8  # larger n are evaluated at this n (conservative: δ is non-increasing in n)
INVERSE_STEPS = 40     # bisection steps of :func:`central_epsilon` and :func:`local_epsilon`
Weights = Callable[[float], "tuple[float, float]"]   # ε₀ -> (α₁, r), the clone reduction's mixture weights


# ---- mixture weights (spec §5.5) ---------------------------------------------------------------------------

def generic_weights(eps0: float) -> tuple[float, float]:
    """Any ε₀-LDP randomizer: α₁ = r = 1/(e^ε₀ + 1) (FMT'23's stronger clone)."""
    w = 1 / (math.exp(eps0) + 1)
    return w, w


def grr_weights(k: int) -> Weights:
    """k-ary randomized response (and local hashing with range k): α₁ = r = 1/(e^ε₀ + k − 1)."""
    return lambda eps0: (1 / (math.exp(eps0) + k - 1),) * 2


def sparse_weights(s: int, t_rule: Callable[[float], int]) -> Weights:
    """Collision and CoCo with the output size t = t_rule(ε₀) the randomizer uses: α₁ = r = s/Ω (Theorem 5)."""
    return lambda eps0: (s / (s * math.exp(eps0) + t_rule(eps0) - s),) * 2


def fmt21_weights(eps0: float) -> tuple[float, float]:
    """FMT'21's clone reduction: α₁ = 1/(e^ε₀ + 1) and C ~ Bin(n − 1, e^{−ε₀}), i.e. r = e^{−ε₀}/2."""
    return 1 / (math.exp(eps0) + 1), math.exp(-eps0) / 2


# ---- the exact divergence and its inverses (spec §5.3, §5.4) ------------------------------------------------

def clone_delta(eps0: float, eps_c: float, n: int, alpha1: float, r: float) -> float:
    """δ = D_{e^ε_c}(P_α ‖ Q_α) (= the other direction, by symmetry), summed over m = x + y: for each m the
    points where P > e^ε_c Q are x >= k_m (P − bQ is linear in x/(m − x)), so each m costs three binomial tails.
    Privacy-critical: every omitted m adds its whole binomial mass (conservative). n above EXACT_USERS is
    evaluated at EXACT_USERS: adding one user's clone-or-nothing draw to both P and Q is the same
    post-processing of each, so δ is non-increasing in n and fewer users is conservative."""
    from scipy.stats import binom   # imported here: scipy.stats adds ~1 s to `import ldpql`

    a, b = math.exp(eps0), math.exp(eps_c)
    gamma = 1 - (a + 1) * alpha1
    if gamma < -1e-12 or not 0 < 2 * r <= 1:
        raise ValueError(f"invalid mixture weights alpha1={alpha1}, r={r} at eps0={eps0}")
    gamma, big, p = max(gamma, 0.0), min(n, EXACT_USERS) - 1, 2 * r
    mu, sd = big * p, math.sqrt(big * p * (1 - p))
    lo, hi = max(1, math.floor(mu - WINDOW * sd)), min(big + 1, math.ceil(mu + WINDOW * sd) + 1)
    m = np.arange(lo, hi + 1)
    b1, b0 = binom.pmf(m - 1, big, p), binom.pmf(m, big, p)
    sigma = alpha1 * b1 * (a - b) + gamma / 2 * b0 * (1 - b)
    kappa = alpha1 * b1 * (1 - a * b) + gamma / 2 * b0 * (1 - b)
    pos = sigma > 0
    m, b1, b0, sigma, kappa = m[pos], b1[pos], b0[pos], sigma[pos], kappa[pos]
    rho = -kappa / sigma
    k = np.minimum(m, np.floor(m * rho / (1 + rho)) + 1)
    tail = lambda size, kk: binom.sf(kk - 1, size, 0.5)   # P[Bin(size, 1/2) >= kk]
    contrib = (b1 * alpha1 * ((a - b) * tail(m - 1, k - 1) + (1 - a * b) * tail(m - 1, k))
               + gamma * b0 * (1 - b) * tail(m, k))
    outside = (binom.cdf(lo - 1, big, p) if lo > 1 else 0.0) + binom.sf(hi - 1, big, p)
    return float(max(contrib.sum(), 0.0) + outside)


def central_epsilon(eps0: float, n: int, delta: float, weights: Weights = generic_weights) -> float:
    """The smallest ε_c (to bisection precision, rounded up) with clone_delta <= δ; at most ε₀."""
    alpha1, r = weights(eps0)
    lo, hi = 0.0, eps0
    for _ in range(INVERSE_STEPS):   # hi stays feasible (δ(ε₀) = 0 by ε₀-LDP) and is returned
        mid = (lo + hi) / 2
        lo, hi = (lo, mid) if clone_delta(eps0, mid, n, alpha1, r) <= delta else (mid, hi)
    return hi


def local_epsilon(eps_c: float, delta: float, n: int, weights: Weights = generic_weights,
                  cap: float = EPSILON_CAP) -> float:
    """ε₀ = f(ε_c, δ, n, mechanism): the largest ε₀ <= cap found whose shuffled release is (ε_c, δ)-DP
    (spec §5.4). ε₀ = ε_c is always feasible; the upper end grows by doubling to 1, then by +1; bisection keeps
    a feasible lower end. δ(ε₀) can be non-monotone where t(ε₀) jumps, so the result may under-shoot the
    largest feasible ε₀, but it is always feasible: the last step re-verifies it with the exact weights."""
    def feasible(e0: float) -> bool:
        return clone_delta(e0, eps_c, n, *weights(e0)) <= delta

    lo, hi = eps_c, min(cap, max(2 * eps_c, eps_c + 1e-6))
    while hi < cap and feasible(hi):
        lo, hi = hi, min(cap, 2 * hi if hi < 1 else hi + 1)
    if feasible(hi):
        lo = hi
    else:
        for _ in range(INVERSE_STEPS):   # privacy-critical: lo is only ever set to a feasible ε₀
            mid = (lo + hi) / 2
            lo, hi = (mid, hi) if feasible(mid) else (lo, mid)
    if lo > eps_c and not feasible(lo):   # the final verification (spec §5.4 step 4)
        return eps_c
    return lo


# ---- comparison bounds (spec §5.6) ----------------------------------------------------------------------------

def erlingsson_central(eps0: float, n: int, delta: float) -> float:
    """Erlingsson et al. 2019: ε_c = 12 ε₀ √(ln(1/δ)/n), valid for ε₀ <= 1/2 (NaN outside)."""
    return 12 * eps0 * math.sqrt(math.log(1 / delta) / n) if eps0 <= 0.5 else math.nan


def _blanket_terms(eps: float, eps0: float) -> tuple[float, float, float, float, float]:
    """Balle et al.'s generic randomizer: (γ_lb, a, max_l, range_l, var_l) with γ_lb = e^{−ε₀}, γ_ub = 1."""
    g, a = math.exp(-eps0), math.expm1(eps)
    max_l = math.exp(eps0) * (1 - math.exp(eps - 2 * eps0))
    range_l = (math.exp(eps) + 1) * (math.exp(eps0) - math.exp(-eps0))
    var_l = math.exp(eps0) * (math.exp(2 * eps) + 1) - 2 * g * math.exp(eps - 2 * eps0)
    return g, a, max_l, range_l, var_l


def blanket_delta(eps: float, eps0: float, n: int, form: str = "bennett") -> float:
    """δ of the privacy blanket bound (Balle et al. 2019) for a generic ε₀-LDP randomizer."""
    if eps >= eps0:
        return 0.0
    g, a, max_l, range_l, var_l = _blanket_terms(eps, eps0)
    if form == "hoeffding":
        return range_l ** 2 / (4 * a) * (1 - g * -math.expm1(-2 * a * a / range_l ** 2)) ** n / (g * n)
    alpha, beta = var_l / max_l ** 2, a * max_l / var_l
    phi = (1 + beta) * math.log1p(beta) - beta if beta > 1e-3 else beta ** 2 / 2 - beta ** 3 / 6 + beta ** 4 / 12
    c = alpha * phi   # E[e^{−cM}; M >= 1] for M ~ Bin(n, γ), in closed form
    expect = (1 - g + g * math.exp(-c)) ** n - (1 - g) ** n
    return expect / (math.log1p(beta) / max_l) / (g * n)


def blanket_central(eps0: float, n: int, delta: float, form: str = "bennett") -> float:
    """The smallest ε with :func:`blanket_delta` <= δ (bisection; ε₀ when none below it is)."""
    lo, hi = 0.0, eps0
    for _ in range(INVERSE_STEPS):
        mid = (lo + hi) / 2
        lo, hi = (lo, mid) if blanket_delta(mid, eps0, n, form) <= delta else (mid, hi)
    return hi


MIN_GAIN = 1e-3   # a shuffle ε₀ less than 0.1% above ε is not worth spending δ on (the exact bound gives
                  # every batch some ε₀ > ε, even a batch of one user, whose δ then buys ~nothing)
SLACK = 0.1  # share of δ spent on the event that some hash-assigned batch is smaller than its bound n_b


def feldman_cap(n: int, delta: float) -> float:
    """The largest ε₀ for which the bound holds: ln(n/(16 ln(2/δ)))."""
    return math.log(n / (16 * math.log(2 / delta))) if n > 0 else -math.inf


def feldman_central(eps0: float, n: int, delta: float) -> float:
    """Central ε' of n shuffled ε₀-LDP reports (inf outside the bound's range)."""
    if n <= 0 or eps0 > feldman_cap(n, delta) + 1e-12:
        return math.inf
    e = math.exp(eps0)  # privacy-critical: Feldman-McMillan-Talwar 2021, Thm 3.1, (e^ε₀-1)/(e^ε₀+1) = tanh(ε₀/2)
    return math.log1p(math.tanh(eps0 / 2) * (8 * math.sqrt(e * math.log(4 / delta) / n) + 8 * e / n))


def paper_epsilon0(eps: float, n_batch: int, delta: float) -> float:
    """Lemma G.5 with the true batch size: ln(ε² n_b/(80 ln(4/δ)))."""
    return math.log(eps * eps * n_batch / (80 * math.log(4 / delta))) if n_batch > 0 else -math.inf


def code_epsilon0(eps: float, users: int, coins: int, delta: float) -> float:
    """The authors' code (A8): ln(ε² N/(80 ln B ln(4/δ))), a batch of N/ln B users; reproduction only."""
    return math.log(eps * eps * users / (80 * math.log(coins) * math.log(4 / delta)))


def feldman_epsilon0(eps: float, n_batch: int, delta: float) -> float:
    """The largest ε₀ <= the cap with Feldman's closed-form ε' <= ε (bisection; the bound increases with ε₀)."""
    cap = feldman_cap(n_batch, delta)
    if cap <= 0:
        return -math.inf
    if feldman_central(cap, n_batch, delta) <= eps:
        return cap
    lo, hi = 0.0, cap
    for _ in range(60):  # privacy-critical: lo stays feasible (ε' <= ε) at every step, and lo is returned
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if feldman_central(mid, n_batch, delta) <= eps else (lo, mid)
    return lo


@functools.lru_cache(maxsize=1024)
def tight_epsilon0(eps: float, n_batch: int, delta: float) -> float:
    """The largest ε₀ whose n_batch shuffled ε₀-RR reports are (ε, δ)-DP: by the exact clone reduction at RR's
    weight 1/(e^ε₀ + 1) (:func:`local_epsilon`, on at most EXACT_USERS of the batch: δ only falls as users are
    added, so fewer is conservative), or by FMT'21's closed form at the true n_batch when that allows more
    (both are valid bounds; only beyond EXACT_USERS can the closed form win). -inf for an empty batch; ε
    itself when shuffling gains nothing (one user per batch)."""
    if n_batch <= 0:
        return -math.inf
    exact = local_epsilon(eps, delta, n_batch, grr_weights(2))
    return max(exact, feldman_epsilon0(eps, n_batch, delta))


def required_users(eps: float, delta: float, coins: int) -> float:
    """Users for which Lemma G.5's ε₀ is 0 with log2 B batches: 80 ln(4/δ) log2 B/ε² (the notebook's N_req)."""
    return 80 * math.log(4 / delta) * math.log2(coins) / (eps * eps)


def batch_floor(n: int, batches: int, exact: bool = False, slack: float = 0.0) -> int:
    """A lower bound on the smallest batch: floor(n/S) when batch sizes are exact, else the size that a
    hash-assigned batch, Binomial(n, floor(n/S)/n) for the smallest, falls below with probability < slack/S."""
    if batches <= 0:
        return n
    if exact or slack <= 0:
        return n // batches
    from scipy.stats import binom  # imported here: scipy.stats adds ~1 s to `import ldpql`

    return int(binom.ppf(slack / batches, n, (n // batches) / n))


@dataclass(frozen=True)
class ShuffleBudget:
    """The local ε₀ of a shuffle NBS run on n users, and why it is (in)feasible."""

    epsilon: float
    delta: float
    n: int
    batches: int
    batch: int
    epsilon0: float
    mode: str

    @property
    def feasible(self) -> bool:
        """Amplification gains (ε₀ > ε by more than MIN_GAIN) and ε₀ stays within the per-randomizer cap (DESIGN §4.5)."""
        return self.epsilon * (1 + MIN_GAIN) < self.epsilon0 <= EPSILON_CAP

    @property
    def local_epsilon(self) -> float:
        """The ε each user's RR runs at: ε₀ when feasible, else the local protocol's ε."""
        return self.epsilon0 if self.feasible else self.epsilon

    @property
    def reason(self) -> str:
        if self.feasible:
            return ""
        if self.epsilon0 > EPSILON_CAP:
            return (f"its local ε₀ = {self.epsilon0:.4g} would exceed the per-randomizer cap {EPSILON_CAP:g} "
                    f"(EPSILON_CAP); lower EPSILON, or use model = 'local'")
        return (f"amplification gives no gain: {self.batches} batches of >= {self.batch:,} users allow ε₀ = "
                f"{self.epsilon0:.4g}, not above ε = {self.epsilon:g} by {MIN_GAIN:.1%} at δ = {self.delta:g}")


def shuffle_budget(eps: float, delta: float, n: int, coins: int, mode: str = "tight",
                   exact_batches: bool = False) -> ShuffleBudget:
    """ε₀ for shuffle NBS over ``coins`` coins: ``tight`` or ``paper`` (true batch size, cap enforced), or
    ``code`` (the authors' formula, for reproducing Fig. 4 only)."""
    steps = nbs_steps(coins, paper=mode == "code")
    if delta <= 0 or n <= 0 or steps == 0:
        return ShuffleBudget(eps, delta, n, steps, 0, -math.inf, mode)
    slack = 0.0 if exact_batches else SLACK * delta
    nb = batch_floor(n, steps, exact_batches, slack)  # privacy-critical: every batch has >= nb users but w.p. <= slack
    d = delta - slack                                 # ... which is spent from δ
    if mode == "code":
        e0 = code_epsilon0(eps, n, coins, delta)
    elif mode == "paper":
        e0 = min(paper_epsilon0(eps, nb, d), feldman_cap(nb, d))
        if feldman_central(e0, nb, d) > eps:
            e0 = tight_epsilon0(eps, nb, d)
    else:
        e0 = tight_epsilon0(eps, nb, d)
    return ShuffleBudget(eps, delta, n, steps, nb, e0, mode)


def shuffle_nbs_protocol(space: CoinSpace, eps: float, delta: float, tau: float, mode: str = "tight",
                         exact_batches: bool = False) -> Callable[[int], Protocol]:
    """DpNaiveNBS-Shuffle: DpNaiveNBS whose users run RR at the amplified ε₀ (never below ε, never above the cap:
    otherwise at the local ε, with a note)."""
    def protocol(n: int) -> Protocol:
        budget = shuffle_budget(eps, delta, n, space.size, mode, exact_batches)
        est = yield from nbs_protocol(space, eps, tau, paper=mode == "code", rr_epsilon=budget.local_epsilon,
                                      mechanism="shuffle_nbs")(n)
        if not budget.feasible and n:
            est.note = f"shuffle fell back to local ε = {eps:g}: {budget.reason}"
        return est
    return protocol

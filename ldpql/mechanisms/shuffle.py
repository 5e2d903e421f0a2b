"""Shuffle-model noisy binary search (spec seed-001 §2.8): the amplification bound and the local ε₀ it allows.

Privacy: (ε, δ)-DP for the view after shuffling. DpNaiveNBS runs unchanged with users randomizing at ε₀; each
user is in exactly one batch, every user of a batch runs the same ε₀-RR, and the shuffler hides who sent which
bit (for bits only the batch's count is seen). By Feldman, McMillan, Talwar 2021 (Thm 3.1), shuffling n_b
reports of an ε₀-LDP randomizer with ε₀ <= ln(n_b/(16 ln(2/δ))) is (ε', δ)-DP with

    ε' <= ln(1 + (e^ε₀ - 1)/(e^ε₀ + 1) · (8 sqrt(e^ε₀ ln(4/δ)/n_b) + 8 e^ε₀/n_b)),

and the batches are disjoint, so the adaptive protocol is (ε', δ)-DP when each batch is [spec §2.8, R].
The engine takes the largest ε₀ under the cap whose ε' <= ε ("tight"), or Lemma G.5's closed form
ε₀ = ln(ε² n_b/(80 ln(4/δ))) ("paper"), always with the true batch size n_b (A8). In the engine a user's batch is
a hash interval, so its size is binomial: n_b is a lower bound that fails with probability <= δ/10 (spent from
δ; the bound uses 0.9 δ). If ε₀ <= ε amplification gains nothing and the planner keeps a local protocol.
Utility: NBS at ε₀ instead of ε; for large n, ε₀ ≈ ln(ε² n/(80 ln(4/δ) log2 B)) grows with n.
Runtime: closed forms; the tight ε₀ is a 60-step bisection.
Citations: Feldman, McMillan, Talwar, FOCS 2021, Thm 3.1; spec seed-001 §2.8, A8, §4.7; seed-003 §5.6 item 3.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable


from ldpql.mechanisms.base import EPSILON_CAP, Protocol
from ldpql.mechanisms.quantile import CoinSpace, nbs_protocol, nbs_steps

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


def tight_epsilon0(eps: float, n_batch: int, delta: float) -> float:
    """The largest ε₀ <= the cap with Feldman's ε' <= ε (bisection; the bound increases with ε₀)."""
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
        """Amplification gains (ε₀ > ε) and ε₀ stays within the per-randomizer cap (DESIGN §4.5)."""
        return self.epsilon < self.epsilon0 <= EPSILON_CAP

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
                f"{self.epsilon0:.3g} <= ε = {self.epsilon:g} at δ = {self.delta:g}")


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

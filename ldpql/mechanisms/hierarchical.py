"""The hierarchical mechanism for quantiles (Cormode, Kulkarni, Srivastava 2019), the paper's one-round baseline.

Privacy: ε-LDP. Each user belongs to one level of a b-ary tree over the K coins (levels counted from the
leaves, the root excluded; the level is a function of the user's position and the seed, never of a value) and
reports the node holding its value through the engine's OUE (:class:`~ldpql.mechanisms.oue.OUE`) at ε: one
report per user, in one non-adaptive collection.
Utility: each level's frequencies are unbiased with OUE's variance over ~n/h users; a prefix [0, x] is the sum
of at most (b - 1) nodes per level (about (b-1)h/2 on average), so Var F̂(x) <= (b-1)h · 4e^ε h/((e^ε-1)² n), and the
rank error needs n = O(log³ B/(ε²α²)) (spec §2.7). No post-processing in the paper (A10); ``consistent=True``
makes the node estimates a consistent tree (:func:`make_consistent`, the least-squares fit of Hay et al. 2010,
weighted by the variances), which lowers the variance of every prefix.
Runtime: h exact-path rounds (DuckDB GROUP BY per level, two binomials per node), then O(K h) numpy.
Citations: spec seed-001-quantile.md §2.7 and A10; OUE as in seed-002 §3.2.
"""

from __future__ import annotations

import math
from statistics import NormalDist
from typing import Callable

import numpy as np

from ldpql.mechanisms.base import Estimate, Protocol, Reply, Round
from ldpql.mechanisms.identity import Identity
from ldpql.mechanisms.oue import OUE
from ldpql.mechanisms.quantile import CoinSpace, _no_users, crossing, edges, split_evenly

BRANCHING = 4


def level_widths(size: int, branching: int = BRANCHING) -> list[int]:
    """Node widths b^l of the levels l = 0..h-1 (leaves first), h the smallest with b^h >= size; the root
    (width b^h) is not queried. A single coin has one level of leaves."""
    widths = [1]
    while widths[-1] * branching < size:
        widths.append(widths[-1] * branching)
    return widths


def prefix_masses(per_level: list[np.ndarray], widths: list[int], branching: int, size: int) -> np.ndarray:
    """For every coin x, the sum of node values over the b-adic decomposition of [0, x] with the fewest nodes
    (as the authors' tree computes it): [0, y), y = x + 1, is at each level l the left siblings, inside their
    parent, of the level-l node holding y, plus all the top-level nodes left of it (the root is not asked).
    Accumulated top-down over the nodes, with one virtual node past the end for y = K: O(number of nodes)."""
    acc = np.zeros(1)
    top = len(widths) - 1
    for level in range(top, -1, -1):
        vals = np.concatenate([np.asarray(per_level[level], dtype=float), [0.0]])
        cs = np.concatenate([[0.0], np.cumsum(vals)])
        i = np.arange(len(vals))
        siblings = cs[i] - (0.0 if level == top else cs[(i // branching) * branching])
        acc = siblings if level == top else np.repeat(acc, branching)[: len(vals)] + siblings
    return acc[1: size + 1]


def make_consistent(freqs: list[np.ndarray], variances: list[np.ndarray], branching: int,
                    total: float = 1.0) -> list[np.ndarray]:
    """The node values (levels leaves first) closest to ``freqs`` in variance-weighted least squares among
    those where every node is the sum of its children and the top level sums to 1 (the root, known). Two
    passes: up, each node's estimate from its own report and its children's (inverse-variance weights); down,
    each parent's final value minus its children's estimates, shared among them in proportion to their
    variances. The prefix sums keep their unbiasedness and lose variance (the raw variance stays an upper
    bound). A level without users (infinite variance) is left as it was. ``total``: the root's known value."""
    if any(not np.all(np.isfinite(v)) for v in variances):
        return freqs
    up, up_var = [np.asarray(freqs[0], dtype=float)], [np.maximum(np.asarray(variances[0], dtype=float), 1e-300)]
    for f, v in zip(freqs[1:], variances[1:]):
        kids = np.add.reduceat(up[-1], np.arange(0, len(up[-1]), branching))[: len(f)]
        kids_var = np.add.reduceat(up_var[-1], np.arange(0, len(up_var[-1]), branching))[: len(f)]
        v = np.maximum(np.asarray(v, dtype=float), 1e-300)
        up.append((f / v + kids / kids_var) / (1 / v + 1 / kids_var))
        up_var.append(1 / (1 / v + 1 / kids_var))
    final = [None] * len(up)
    parent = np.full(1, total)   # the root: every user, known
    for level in range(len(up) - 1, -1, -1):
        group = np.arange(len(up[level])) // branching
        gap = parent - np.bincount(group, up[level], minlength=len(parent))
        share = up_var[level] / np.bincount(group, up_var[level], minlength=len(parent))[group]
        final[level] = up[level] + share * gap[group]
        parent = final[level]
    return final


def consistent_variance(weights: list[np.ndarray], variances: list[np.ndarray], widths: list[int], branching: int,
                        size: int, coin: int) -> float:
    """Var F̂(coin) of the consistent tree fitted with ``weights`` (the node error variances the fit assumes, one
    per level) when the node estimates have the ``variances`` (the release's own, per node). The fit is a linear
    constrained least squares, β̂ = G Xᵀ W y, so F̂(coin) = aᵀβ̂ = ℓᵀy with ℓ = W X G a, a the prefix [0, coin]; G a
    is the fit of pseudo-reports a·v₀ at the leaves and 0 elsewhere (Xᵀ W of them is a) with the root at 0, and X G a
    its node sums, which the fit returns. Var = Σ ℓ²·variances (= aᵀ G a where the variances are the weights). A
    node's real variance grows with its share (its users' sampling, OUE's f-term), so a level's mean weight alone
    missed up to 9x at ε = 8 (audit 16). One more fit, O(nodes), from released numbers only."""
    pseudo = [np.zeros(-(-size // w)) for w in widths]
    pseudo[0][: coin + 1] = np.asarray(weights[0], dtype=float)[: coin + 1]
    fitted = make_consistent(pseudo, weights, branching, total=0.0)
    return float(sum(np.sum((f / np.asarray(w, dtype=float)) ** 2 * np.asarray(v, dtype=float))
                     for f, w, v in zip(fitted, weights, variances)))


def _level_randomizer(eps: float, nodes: int):
    return Identity(nodes) if math.isinf(eps) else OUE(eps, max(nodes, 2))


def cdf_estimate(replies: list[Reply], randomizers: list, widths: list[int], branching: int, size: int,
                 consistent: bool = False):
    """(F̂(x), Var F̂(x), the exact Var F̂ at one coin) for every coin x from the per-level replies (unbiased); with
    ``consistent`` the node estimates are made a consistent tree first, Var is the raw one (an upper bound, about
    3.6x the consistent tree's at 8 levels) and the third, a function of the coin, is the consistent tree's own
    (:func:`consistent_variance`, each node's released variance through the fit's linear map); raw, it is Var.

    A level's users are a random 1/h of all users, so a node's estimate of the whole population's frequency
    has the sampling variance f(1-f)/m besides the randomizer's; Var includes both (at high ε the sampling
    term is all there is). The least-squares weights are one variance per level, the mean node's, which does
    not depend on the estimates: weights read from each node's own noisy estimate favour the nodes that came
    out low, and at high ε (where a node's variance is nearly proportional to its estimate) that bias pulled
    the CDF down by 10-20% of the users."""
    freqs, variances, weights = [], [], []
    for reply, r, w in zip(replies, randomizers, widths):
        nodes = -(-size // w)
        if reply.n == 0:
            freqs.append(np.zeros(nodes))
            variances.append(np.full(nodes, math.inf))
            weights.append(np.full(nodes, math.inf))
            continue
        f = np.asarray(r.estimate(reply.summary, reply.n), dtype=float)[:nodes]
        clipped = np.clip(f, 0.0, 1.0)
        freqs.append(f)
        variances.append(np.asarray(r.variance(clipped, reply.n), dtype=float)[:nodes]
                         + clipped * (1 - clipped) / reply.n)
        mean_node = 1.0 / nodes
        weights.append(np.full(nodes, float(r.variance(np.array([mean_node]), reply.n)[0])
                               + mean_node * (1 - mean_node) / reply.n))
    fitted = make_consistent(freqs, weights, branching) if consistent else freqs
    with np.errstate(invalid="ignore"):   # a level without users: inf - inf inside the prefix sums
        var = np.nan_to_num(prefix_masses(variances, widths, branching, size), nan=math.inf)
    if fitted is freqs:
        return prefix_masses(fitted, widths, branching, size), var, lambda coin: float(var[coin])
    return (prefix_masses(fitted, widths, branching, size), var,
            lambda coin: consistent_variance(weights, variances, widths, branching, size, coin))


def choose_coin(cdf: np.ndarray, tau: float, paper: bool = False) -> int:
    """The answer from F̂. Paper: the first argmin of |F̂(x) - τ| (A10). Engine: the split of the coins that puts
    the fewest on the wrong side of τ (:func:`~ldpql.mechanisms.quantile.crossing`)."""
    if paper:
        return int(np.argmin(np.abs(cdf - tau)))
    return crossing(cdf, tau)


def cdf_interval(cdf: np.ndarray, var: np.ndarray, tau: float, coin: int, levels: int, branching: int,
                 confidence: float) -> tuple[int, int]:
    """Coins [low, high] holding the true τ-quantile Q: low is the first x whose upper bound reaches τ (fails
    only if F̂(Q) is too low: one test), high the first x whose lower bound does (fails if any x < Q is too
    high: Bonferroni over the ~(b-1)h independent node sums a prefix is made of)."""
    miss = 1 - confidence
    se = np.sqrt(var)
    z_low = NormalDist().inv_cdf(1 - miss / 2)
    z_high = NormalDist().inv_cdf(1 - miss / (2 * max(levels * (branching - 1), 1)))
    up = np.flatnonzero(cdf + z_low * se >= tau)
    down = np.flatnonzero(cdf - z_high * se >= tau)
    low = int(up[0]) if len(up) else 0
    high = int(down[0]) if len(down) else len(cdf) - 1
    return min(low, high, coin), max(low, high, coin)


def hierarchical_protocol(space: CoinSpace, eps: float, taus: list[float], branching: int = BRANCHING,
                          paper: bool = False, consistent: bool = False) -> Callable[[int], Protocol]:
    """One collection: the users of level l (a 1/h share) report their node at that level through OUE; every
    τ of ``taus`` is then read from the same estimated CDF (``extra['answers']``), made from a consistent
    tree of node estimates when ``consistent``."""
    def protocol(n: int) -> Protocol:
        if n == 0:
            return _no_users()
        if space.size == 1:
            return _release(space, taus, np.ones(1), np.zeros(1), 1, branching, paper, np.zeros(1), lambda c: 0.0)
        widths = level_widths(space.size, branching)
        batches = edges(0, split_evenly(n, len(widths)), n)
        randomizers, replies = [], []
        for w, users in zip(widths, batches):
            enc = space.level(w)
            r = _level_randomizer(eps, enc.size)
            randomizers.append(r)
            replies.append((yield Round(r, enc, users=users, label=f"level of width {w}")))
        cdf, var, coin_var = cdf_estimate(replies, randomizers, widths, branching, space.size, consistent)
        return _release(space, taus, cdf, var, len(widths), branching, paper,
                        leaf_variance(cdf, randomizers[0], replies[0].n), coin_var)
    return protocol


def leaf_variance(cdf: np.ndarray, leaves, users: int) -> np.ndarray:
    """Var of each coin's released frequency (F̂(x) - F̂(x-1)), as the leaf level's own report gives it: OUE's
    variance and the sampling of that level's users at the released frequency (the raw leaf's; the consistent
    tree's is smaller, so this is an upper bound). From the release only."""
    f = np.clip(np.diff(cdf, prepend=0.0), 0.0, 1.0)
    if users == 0:
        return np.full(len(f), math.inf)
    return np.asarray(leaves.variance(f, users), dtype=float)[: len(f)] + f * (1 - f) / users


def _release(space: CoinSpace, taus: list[float], cdf: np.ndarray, var: np.ndarray, levels: int, branching: int,
             paper: bool, leaf_var: np.ndarray, coin_var: Callable[[int], float]) -> Estimate:
    answers = {}
    units = (np.arange(len(cdf)), np.diff(cdf, prepend=0.0), leaf_var)   # per coin: what the release says it holds
    for tau in taus:
        coin = choose_coin(cdf, tau, paper)

        def interval(confidence: float, tau=tau, coin=coin):
            low, high = cdf_interval(cdf, var, tau, coin, levels, branching, confidence)
            return np.array([space.lower_edge(low)]), np.array([space.upper_edge(high)])

        answers[tau] = Estimate(np.array([space.value(coin)]), np.array([math.nan]),
                                extra={"coin": coin, "mechanism": "hierarchical", "interval": interval,
                                       "cdf_points": (np.arange(len(cdf)), cdf), "units": units, "cdf_var": var,
                                       "coin_var": coin_var(coin), "bucketed": space.bucketed})
    values = np.array([float(a.values[0]) for a in answers.values()])
    first = next(iter(answers.values()))
    return Estimate(values, np.full(len(values), math.nan),
                    extra={"answers": answers, "coin": first.extra["coin"], "levels": levels, "cdf": cdf, "var": var})

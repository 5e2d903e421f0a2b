"""Audit 16, part 2: is hierarchical.consistent_variance right, and is the floor it gives ever NaN/inf or over the cap?

(a) Exactness against the fit's linear map: for a tree of K leaves, the consistent fit F̂ = L·y (+ a constant from the
    root) is linear in the node reports y; L is built column by column (make_consistent of unit reports, root 0), and
    aᵀ L diag(w) Lᵀ a (a the prefix [0, c], w the fit's weights) is compared with consistent_variance at every coin c.
    Sizes 1..5, 15, 16, 17, 63, 64, 65, 100, 255, 256, 257, 1000, 1025 (not powers of 4 included); heterogeneous
    random weights per level, and the engine's own (one per level).
(b) The floor against the REAL variance of the released F̂ at a coin: Monte Carlo over 3,000 simulated releases of
    the consistent tree (binomial level sizes) on fixed data, the empirical sd of F̂(c) at a few coins against
    sqrt(coin_var(c)); shapes with atoms (where a node's sampling variance f(1−f)/m is far from the weights' mean
    node's) at ε = 1, 4, 8, 16. And the exact variance for those node variances: aᵀ L Σ Lᵀ a with Σ the per-node
    OUE + multinomial sampling covariance of each level (computed from the true frequencies).
(c) Levels with no users (n < number of levels) and tiny n through the protocol: coin_var, floor, shown rank error.
(d) Time and memory of consistent_variance and of a whole release at 2^18, 2^20, 2^22 leaves (several τ).

    nice python var16.py   -> var16.txt
"""
from __future__ import annotations

import math
import resource
import sys
import time
from pathlib import Path

import numpy as np

from ldpql.mechanisms import Encoding, hierarchical as H
from ldpql.mechanisms.oue import OUE
from ldpql.mechanisms.quantile import CoinSpace
from ldpql.planner import quantile as planner
from ldpql.simulation import simulate

HERE = Path(__file__).parent
lines = []


def say(s):
    print(s, flush=True)
    lines.append(s)


def linear_map(widths, size, weights):
    """L (size × nodes): fitted leaf values from a unit report at each node, root 0."""
    counts = [-(-size // w) for w in widths]
    cols = []
    for lvl, m in enumerate(counts):
        for j in range(m):
            y = [np.zeros(c) for c in counts]
            y[lvl][j] = 1.0
            cols.append(H.make_consistent(y, weights, H.BRANCHING, total=0.0)[0])
    return np.array(cols).T, counts


def part_a():
    worst_rel = 0.0
    tested = 0
    r = np.random.default_rng([1616, 2])
    for size in (1, 2, 3, 4, 5, 15, 16, 17, 63, 64, 65, 100, 255, 256, 257, 1000, 1025):
        widths = H.level_widths(size)
        counts = [-(-size // w) for w in widths]
        for hetero in (False, True):
            weights = [np.full(c, float(r.uniform(1e-5, 1e-3))) for c in counts] if not hetero else \
                [r.uniform(1e-5, 1e-3, c) for c in counts]
            if hetero:   # consistent_variance's derivation needs Xᵀ W y = a with y at the leaves: per-leaf weights
                pass
            L, _ = linear_map(widths, size, weights)
            w = np.concatenate(weights)
            scale = max(float(np.sum(w)), 1e-300)   # errors relative to the total node variance (a coin's F̂
            for c in range(size):                   # variance is 0 at c = K - 1, where the root fixes it)
                a = np.zeros(size); a[: c + 1] = 1.0
                g = a @ L          # the fitted prefix's coefficients on the node reports
                exact = float(np.sum(g * g * w))
                got = H.consistent_variance(weights, widths, H.BRANCHING, size, c)
                rel = abs(got - exact) / max(exact, 1e-6 * scale)
                worst_rel = max(worst_rel, rel) if not hetero else worst_rel
                tested += 1
                if hetero and c == size // 2 and exact > 0:
                    say(f"  K = {size}, heterogeneous weights within a level: consistent_variance / exact at the "
                        f"middle coin = {got / exact:.4f}")
    say(f"(a) {tested} (K, coin) pairs, weights one per level (the engine's): max relative error of "
        f"consistent_variance against aᵀ L W⁻¹ Lᵀ a = {worst_rel:.2e}")


def level_cov(f, m, r: OUE):
    """Covariance of one level's node estimates: OUE (independent bits) + multinomial sampling of its m users."""
    oue = np.asarray(r.variance(np.clip(f, 0, 1), m), dtype=float)[: len(f)]
    return np.diag(oue) + (np.diag(f) - np.outer(f, f)) / m


def part_b(reps=3000):
    rr = np.random.default_rng([1616, 3])
    K = 256
    n = 4000
    datasets = {
        "uniform": rr.integers(0, K, n),
        "atoms": np.concatenate([np.full(n * 4 // 10, 37), np.full(n * 3 // 10, 38), rr.integers(0, K, n - n * 7 // 10)]),
        "one_atom_at_tau": np.concatenate([np.full(n // 2, 100), rr.integers(0, K, n - n // 2)]),
    }
    widths = H.level_widths(K)
    h = len(widths)
    for name, coins in datasets.items():
        hist = np.bincount(coins, minlength=K)
        F = np.cumsum(hist) / n
        for eps in (1.0, 4.0, 8.0, 16.0):
            make = H.hierarchical_protocol(CoinSpace(K), eps, [0.5], consistent=True)
            cdfs, cvs = [], []
            for t in range(reps):
                rel = simulate(make(n), np.random.default_rng([1616, 30, t]), hist=hist, exact_positions=False)
                cdfs.append(rel.extra["cdf"])
                if t < 5:
                    ans = rel.extra["answers"][0.5]
                    cvs.append(ans.extra["coin_var"])
            cdfs = np.array(cdfs)
            # the floor's variance at chosen coins: rebuild coin_var(c) from the weights at the mean level size
            m = n / h
            weights = []
            for w in widths:
                nodes = -(-K // w)
                r = OUE(eps, max(nodes, 2))
                mean_node = 1.0 / nodes
                weights.append(np.full(nodes, float(r.variance(np.array([mean_node]), round(m))[0])
                                       + mean_node * (1 - mean_node) / round(m)))
            # exact variance of the fitted F̂(c) under the real node covariance (per-level OUE + multinomial)
            L, counts = linear_map(widths, K, weights)
            start = 0
            Sigma = np.zeros((sum(counts), sum(counts)))
            for w, c in zip(widths, counts):
                f = np.add.reduceat(hist, np.arange(0, K, w))[:c] / n
                Sigma[start:start + c, start:start + c] = level_cov(f, m, OUE(eps, max(c, 2)))
                start += c
            out = []
            for c in (36, 37, 38, 99, 100, 127, 200):
                a = np.zeros(K); a[: c + 1] = 1
                g = a @ L
                real = float(g @ Sigma @ g)
                emp = float(np.var(cdfs[:, c]))
                floor = H.consistent_variance(weights, widths, H.BRANCHING, K, c)
                out.append(f"c={c} F={F[c]:.3f}: emp sd {math.sqrt(emp):.4f}, exact-real sd {math.sqrt(real):.4f}, "
                           f"floor sd {math.sqrt(floor):.4f} (ratio emp/floor {math.sqrt(emp / floor):.2f})")
            say(f"(b) {name}, K = {K}, n = {n}, ε = {eps:g}, {reps} releases:")
            for o in out:
                say("    " + o)


def part_c():
    from ldpql.planner.quantile import shown_rank_error
    say("(c) tiny n through the protocol (K = 65,536: 8 levels; K = 1,024: 5 levels):")
    for K in (65536, 1024, 2, 1):
        h = len(H.level_widths(K))
        for n in (1, 2, h - 1, h, h + 1, 12, 40):
            if n < 1:
                continue
            hist = np.zeros(K, dtype=np.int64); hist[min(3, K - 1)] = n
            make = H.hierarchical_protocol(CoinSpace(K), 4.0, [0.01, 0.5, 0.99], consistent=True)
            rel = simulate(make(n), np.random.default_rng([1616, 40, n]), hist=hist, exact_positions=False)
            target = planner.QuantileTarget("x", Encoding("x", K, "x"), "", None, planner.UNIT, tau=0.5,
                                            space=CoinSpace(K), taus=(0.01, 0.5, 0.99))
            cand = next(c for c in planner.quantile_candidates(target) if c.mechanism == "hierarchical")
            sigma = cand.predict(4.0, n)
            msgs = []
            for tau, ans in rel.extra["answers"].items():
                cv = ans.extra["coin_var"]
                s = shown_rank_error(ans, tau, sigma, 1.96)
                msgs.append(f"τ={tau}: coin {ans.extra['coin']}, coin_var {cv:.3g}, shown {s:.3g} "
                            f"(cap {max(tau, 1 - tau):g})" + (" NONFINITE" if not math.isfinite(s) else "")
                            + (" OVER CAP" if s > max(tau, 1 - tau) + 1e-12 else ""))
            say(f"    K={K} (h={h}) n={n} σ={sigma:.3g}: " + "; ".join(msgs))
    # the no-users branch of consistent_variance: a level with infinite weights returns the raw leaf sum
    widths = H.level_widths(64)
    w = [np.full(-(-64 // x), 1e-4) for x in widths]
    w[2] = np.full(len(w[2]), math.inf)
    say(f"    consistent_variance with one level unanswered (K = 64, coin 40): "
        f"{H.consistent_variance(w, widths, 4, 64, 40):.3g} (the raw leaf prefix: 41 x 1e-4 = 4.1e-3; the released "
        f"F̂ there sums raw nodes incl. the unanswered level's zeros, whose variance is inf)")
    w[0] = np.full(64, math.inf)
    say(f"    ... and with the leaves unanswered: {H.consistent_variance(w, widths, 4, 64, 40)}")


def part_d():
    say("(d) time and memory at many leaves:")
    for bits in (18, 20, 22):
        K = 1 << bits
        widths = H.level_widths(K)
        weights = [np.full(-(-K // w), 1e-6) for w in widths]
        t = time.time()
        for c in (0, K // 3, K - 1):
            v = H.consistent_variance(weights, widths, H.BRANCHING, K, c)
        dt = (time.time() - t) / 3
        hist = np.bincount(np.random.default_rng([1616, 5]).integers(0, K, 100000), minlength=K)
        taus = [0.01, 0.1, 0.25, 0.5, 0.75, 0.9, 0.99]
        t = time.time()
        simulate(H.hierarchical_protocol(CoinSpace(K), 4.0, taus, consistent=True)(100000),
               np.random.default_rng(1), hist=hist, exact_positions=False)
        dt2 = time.time() - t
        rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        say(f"    K = 2^{bits}: consistent_variance {dt:.2f} s per call (last {v:.3g}); a release with "
            f"{len(taus)} τ {dt2:.1f} s; peak RSS so far {rss:.0f} MB")


if __name__ == "__main__":
    which = sys.argv[1] if len(sys.argv) > 1 else "abcd"
    if "a" in which:
        part_a()
    if "c" in which:
        part_c()
    if "b" in which:
        part_b()
    if "d" in which:
        part_d()
    (HERE / f"var16_{which}.txt").write_text("\n".join(lines) + "\n")

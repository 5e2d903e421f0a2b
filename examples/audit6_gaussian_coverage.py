"""audit6: coverage and error of the Gaussian protocols (Joseph, Kulkarni, Mao, Wu 2019) on fresh Gaussian data.

A minimal numpy driver runs a protocol generator of ``ldpql.mechanisms.gaussian`` the way the executor's exact path
does (a data-independent permutation splits the users by the rounds' sub-intervals; each round's input histogram
goes through the randomizer's ``sample_aggregate``), with fresh N(µ, σ²) data every run. Usage:
``nice python examples/audit6_gaussian_coverage.py [cell ...]``; prints one line per cell.
"""

from __future__ import annotations

import math
import sys
import time

import numpy as np

from ldpql import expr as E
from ldpql.mechanisms import Reply
from ldpql.mechanisms import gaussian as G
from ldpql.planner.gaussian import default_beta

X = E.Column("x")


def run(s: G.Setting, x: np.ndarray, rounds: int, rng: np.random.Generator, confidence: float = 0.95):
    """One run of the protocol on values x (a numpy mirror of the exact path)."""
    n = len(x)
    perm = rng.permutation(n)
    xs = np.clip(x, s.origin, s.origin + s.width) - s.origin
    gen = G.protocol(s, X, n, rounds, confidence)
    try:
        rnd = next(gen)
        while True:
            a, b = rnd.users
            mine = xs[perm[math.ceil(a * n - 0.5):math.ceil(b * n - 0.5)]]
            hist = np.bincount(rnd.encoding.inputs(mine), minlength=rnd.encoding.size)
            rnd = gen.send(Reply(rnd.randomizer.sample_aggregate(hist, rng), int(hist.sum())))
    except StopIteration as stop:
        return stop.value


def cell(name, s, n, rounds, runs, mu, sigma, data=None, confidence=0.95, seed=1):
    rng = np.random.default_rng(seed)
    cover, errs, ses, flags = 0, [], [], 0
    t0 = time.time()
    for _ in range(runs):
        x = rng.normal(mu, sigma, n) if data is None else data(rng, n)
        est = run(s, x, rounds, rng, confidence)
        lo, hi = est.interval[0][0], est.interval[1][0]
        cover += lo <= mu <= hi
        errs.append(est.values[0] - mu)
        ses.append(est.stderr[0])
        check = est.extra.get("sigma_check")
        flags += bool(check is not None and check.flagged)
    errs = np.array(errs)
    pred = G.predicted_sd(s, n, rounds)
    rate = cover / runs
    print(f"{name:34s} n={n:>8,} runs={runs} coverage={rate:.3f}±{math.sqrt(rate * (1 - rate) / runs):.3f} "
          f"(stated {est.interval_confidence:.3f}) rmse={math.sqrt(np.mean(errs ** 2)):.4g} bias={errs.mean():+.3g} "
          f"median_se={np.median(ses):.4g} predicted_sd={pred:.4g} k={G.grouping(s, n, rounds).k} "
          f"k_min={G.k_min(s)} sigma_flagged={flags / runs:.3f} [{time.time() - t0:.0f}s]", flush=True)
    return rate, errs, np.array(ses)


def setting(lo, hi, s_lo, s_hi, eps, conf=0.95, profile="practical"):
    return G.Setting(lo, hi, s_lo, s_hi, eps, default_beta(conf), profile)


CELLS = {
    "kv2": lambda r: cell("KV two-round R=1000 eps=1", setting(-1000, 1000, 1, 1, 1), 100_000, 2, r, 123.4, 1),
    "uv2": lambda r: cell("UV two-round R=1000 eps=1", setting(-1000, 1000, 0.25, 16, 1), 100_000, 2, r, 123.4, 3),
    "kv1": lambda r: cell("KV one-round R=1000 eps=1", setting(-1000, 1000, 1, 1, 1), 100_000, 1, r, 123.4, 1),
    "uv1": lambda r: cell("UV one-round R=1000 eps=1", setting(-1000, 1000, 0.25, 16, 1), 300_000, 1, r, 123.4, 3),
    "kv2_kmin": lambda r: cell("KV two-round k just above k_min", setting(-1000, 1000, 1, 1, 1), 26_000, 2, r,
                               123.4, 1),
    "uv2_kmin": lambda r: cell("UV two-round k just above k_min", setting(-1000, 1000, 0.25, 16, 1), 40_000, 2, r,
                               123.4, 3),
    "kv2_bigR": lambda r: cell("KV two-round R=1e6", setting(-1e6, 1e6, 1, 1, 1), 100_000, 2, r, 654321.9, 1),
    "uv2_narrow": lambda r: cell("UV two-round sigma in [1,1.2]", setting(-1000, 1000, 1, 1.2, 1), 100_000, 2, r,
                                 -7.7, 1.1),
    "kv2_sigma_wrong10x_small": lambda r: cell("KV declared 1, true 10", setting(-1000, 1000, 1, 1, 1), 100_000,
                                               2, r, 123.4, 10),
    "kv2_sigma_wrong10x_large": lambda r: cell("KV declared 10, true 1", setting(-1000, 1000, 10, 10, 1),
                                               100_000, 2, r, 123.4, 1),
    "kv2_sigma_wrong2x_large": lambda r: cell("KV declared 2, true 1", setting(-1000, 1000, 2, 2, 1), 100_000, 2,
                                              r, 123.4, 1),
    "kv2_sigma_wrong1.5x_small": lambda r: cell("KV declared 1, true 1.5", setting(-1000, 1000, 1, 1, 1), 100_000,
                                                2, r, 123.4, 1.5),
    "kv2_sigma_wrong1.2x_small": lambda r: cell("KV declared 1, true 1.2", setting(-1000, 1000, 1, 1, 1), 100_000,
                                                2, r, 123.4, 1.2),
    "kv2_sigma_wrong1.1x_small": lambda r: cell("KV declared 1, true 1.1", setting(-1000, 1000, 1, 1, 1), 100_000,
                                                2, r, 123.4, 1.1),
    "kv1_sigma_wrong10x_large": lambda r: cell("KV1 declared 10, true 1", setting(-1000, 1000, 10, 10, 1), 100_000,
                                               1, r, 123.4, 1),
    "kv1_sigma_wrong10x_small": lambda r: cell("KV1 declared 1, true 10", setting(-1000, 1000, 1, 1, 1), 100_000,
                                               1, r, 123.4, 10),
    "kv2_mu_on_bin_edge": lambda r: cell("KV two-round mu on a bin edge", setting(-1000, 1000, 1, 1, 1), 100_000,
                                         2, r, 0.0, 1),
    "kv2_small_n": lambda r: cell("KV two-round n=30k eps=2", setting(-1000, 1000, 1, 1, 2), 30_000, 2, r,
                                  37.7, 1),
    "kv2_laplace": lambda r: cell("KV two-round Laplace data", setting(-1000, 1000, 1, 1, 1), 100_000, 2, r,
                                  123.4, 1, data=lambda g, n: g.laplace(123.4, 1 / math.sqrt(2), n)),
    "kv2_mu_at_edge": lambda r: cell("KV two-round mu at range top", setting(-1000, 1000, 1, 1, 1), 100_000, 2, r,
                                     1000.0, 1),
    "kv2_below_kmin": lambda r: cell("KV two-round k = 0.6 k_min (a small group)", setting(-1000, 1000, 1, 1, 1),
                                     15_000, 2, r, 123.4, 1),
    "uv2_below_kmin": lambda r: cell("UV two-round k = 0.6 k_min (a small group)",
                                     setting(-1000, 1000, 0.25, 16, 1), 18_000, 2, r, 123.4, 3),
    "kv2_theory": lambda r: cell("KV two-round theory regime eps=2", setting(-1000, 1000, 1, 1, 2), 1_200_000, 2, r,
                                 123.4, 1),
    "uv2_theory": lambda r: cell("UV two-round theory regime eps=2", setting(-1000, 1000, 1, 2, 2), 1_200_000, 2,
                                 r, 123.4, 1.5),
    "uv2_sigma_wrong10x": lambda r: cell("UV declared [0.25,1.6], true 16", setting(-1000, 1000, 0.25, 1.6, 1),
                                         100_000, 2, r, 123.4, 16),
}

if __name__ == "__main__":
    runs = int(sys.argv[1]) if len(sys.argv) > 1 and sys.argv[1].isdigit() else 400
    names = [a for a in sys.argv[1:] if not a.isdigit()] or list(CELLS)
    for name in names:
        CELLS[name](runs)

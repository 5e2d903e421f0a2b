"""Why LDP_TOPK's interval under-covers the top of a tied block between one and three standard errors per lattice
step (issue 11, audit9b finding a). One cell, four variants of the release, the same reading:

- ``real``: the oracle's exact aggregate law, plug-in standard error (what a statement sees);
- ``true_se``: the same releases, the standard error at the true frequencies;
- ``normal_lattice``: each bin's count normal with the true mean and variance, rounded to an integer (the lattice
  kept, the discrete noise's skew gone);
- ``normal``: continuous normal estimates (no lattice, step 0): the hybrid's own model;
- ``skewed``: the real releases read with their plug-in skewness (``extra['skew']``, the fix).

    nice python examples/tails2/topk_cause.py ORACLE EPS N PROFILE [reps]
"""

from __future__ import annotations

import sys

import numpy as np

from ldpql.mechanisms.base import debiased_skewness
from ldpql.planner.histogram import ORACLES
from ldpql.planner.winners import correlations, rank, winners_interval

PROFILES = {"ties": [4, 4, 4, 2, 2, 2, 1, 1, 1, 1, 0, 0], "ties8": [3, 3, 2, 2, 1, 1, 0, 0],
            "ties5": [5, 5, 5, 5, 3, 3, 1, 0]}


def counts_of(weights, n: int) -> np.ndarray:
    w = np.asarray(weights, dtype=float)
    c = np.floor(w / w.sum() * n).astype(np.int64)
    c[-1] += n - c.sum()
    return c


VARIANTS = ("real", "true_se", "normal_lattice", "normal", "skewed")


def main(name: str, eps: float, n: int, profile: str, reps: int = 600, k: int = 5, variants=VARIANTS) -> None:
    counts = counts_of(PROFILES[profile], n)
    truth, d = counts / n, len(counts)
    r = next(o for o in ORACLES if o.name == name).make(eps, d)
    pairs = getattr(r, "pair_hits", lambda: None)()
    rng = np.random.default_rng(7)
    step = r.step(n)
    true_se = np.sqrt(r.variance(truth, n))
    hits = {v: {c: np.zeros(k) for c in (0.95, 0.9)} for v in variants}
    for _ in range(reps):
        raw = r.estimate(r.sample_aggregate(counts, rng), n)
        se = np.sqrt(r.variance(np.clip(raw, 0.0, 1.0), n))
        rho = correlations(raw, (r.p, r.q, *pairs, n, 0.0)) if pairs else None
        # a normal release with the true covariance: the lattice is est = truth + (C − E C)·step
        z = truth + rng.normal(0, true_se)
        zl = truth + np.round((z - truth) / step + 0.37) * step - 0.37 * step   # a lattice not through the truth
        for v, (x, s, st) in {"real": (raw, se, step), "true_se": (raw, true_se, step),
                              "normal_lattice": (zl, true_se, step), "normal": (z, true_se, 0.0),
                              "skewed": (raw, se, step)}.items():
            if v not in variants:
                continue
            top = rank(x, st)[:k]
            for c in (0.95, 0.9):
                g = debiased_skewness(np.clip(raw, 0, 1), n, r.p, r.q) if v == "skewed" else None
                lo, hi = winners_interval(x, s, k, c, st, rho, g)
                hits[v][c] += (lo <= truth[top]) & (truth[top] <= hi)
    print(f"{name} eps={eps} n={n} {profile} se/step={true_se[0] / step:.2f} reps={reps}")
    for v, h in hits.items():
        print(f"  {v:15s}", "  ".join(f"{c}: " + " ".join(f"{x / reps:.3f}" for x in h[c]) for c in h))


if __name__ == "__main__":
    a = sys.argv[1:]
    main(a[0], float(a[1]), int(a[2]), a[3], int(a[4]) if len(a) > 4 else 600,
         variants=tuple(a[5].split(",")) if len(a) > 5 else VARIANTS)

"""NaiveNBS's bracket bound with Bonferroni over the asked coins near τ (``w1``: within 1·z·se, the rule before) or over
every asked coin (``all``: a union bound over the search's questions, the rule now), at 80, 90 and 95%, scored on the
releases examples/qrank3/collect.py stored (own grid: the rules' choice; heldout: audit 9's cells).

    nice python examples/qrank4/nbs_union.py own|heldout naive_nbs,shuffle_nbs   -> summary on stdout
"""
import pickle
import sys
from statistics import NormalDist

import numpy as np
from scipy.stats import beta

sys.path.insert(0, 'examples/qrank3')
from rules import pooled  # noqa: E402
Z = {0.95: 1.959964, 0.90: 1.644854, 0.80: 1.281552}
def bound(qs, v, tau, z, mode):
    coins, f, se = pooled(qs)
    if mode == "all": m = len(coins)
    elif mode.startswith("w"):  # window relative to z
        m = max(int(np.sum(np.abs(f - tau) < float(mode[1:]) * z * se)), 1)
    elif mode.startswith("f"):  # fixed window in Z95 units
        m = max(int(np.sum(np.abs(f - tau) < float(mode[1:]) * 1.959964 * se)), 1)
    elif mode.startswith("s"):  # all coins, sqrt
        m = max(int(round(len(coins) ** float(mode[1:]))), 1)
    zz = NormalDist().inv_cdf(1 - NormalDist().cdf(-z) / m)
    up, lo = coins >= v - 1, coins <= v
    high = 0.0 if v == 0 else (min(f[up][0] + zz * se[up][0], 1.0) if up.any() else 1.0)
    low = max(f[lo][-1] - zz * se[lo][-1], 0.0) if lo.any() else 0.0
    return max(high - tau, tau - low, 0.0)
MODES = ["w1", "all"]   # (also scored: fixed windows f1/f2, w0, w2, sqrt(m))
grid = sys.argv[1]; mechs = sys.argv[2].split(",")
rows = [r for r in pickle.load(open(f"examples/qrank3/{grid}.pkl","rb")) if r["mechanism"] in mechs]
res = {}
for row in rows:
    tau, sigma = row["tau"], row["sigma"]; cap = max(tau, 1-tau)
    errs = np.array([r[1] for r in row["runs"]]); m = len(errs)
    for q, z in Z.items():
        zs = min(z*sigma, cap)
        for mode in MODES:
            a = np.array([min(max(zs, bound(qs, v, tau, z, mode)), cap) for v, _, qs, _ in row["runs"]])
            k = int(np.sum(errs <= a + 1e-12))
            hi = 1.0 if k == m else float(beta.ppf(0.975, k + 1, m - k))
            d = res.setdefault((mode, q), {"under2": 0, "sig": 0, "w": [], "cells": 0, "minc": 1})
            d["cells"] += 1; d["under2"] += k/m < q - 0.02; d["sig"] += hi < q; d["w"].append(a.mean()/(z*sigma)); d["minc"] = min(d["minc"], k/m)
for (mode, q), d in sorted(res.items()):
    print(f"{mode:5s} {q:.2f} cells {d['cells']} under-2pt {d['under2']} sig {d['sig']} min {d['minc']:.3f} median width {np.median(d['w']):.2f} mean {np.mean(d['w']):.2f}")

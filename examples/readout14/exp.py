"""Session 14: can one read-out keep the tree's plateau answers (audit 16, strict xfail) and its empty-tail fix?

Rules scored on the same simulated releases (seeds [1400 + cell, run]): ``new`` = the engine's
``quantile.crossing`` (the split with the fewest units on the wrong side of τ); ``old`` = the middle of the units
whose [F̂(j-1), F̂(j)] is closest to holding τ (qrank5's ``before``); ``h1``/``h2`` = old when the mean of F̂ - τ
between the two answers is within 1 / 2 of the largest raw sd there, else new; ``m1`` = the same test against the
mean sd; ``s2``/``s4``/``f1``/``f2`` = old when its count of misplaced units is within 2·sqrt(L), 4·sqrt(L),
0.1·L, 0.2·L of the best split's (L = the distance between the two answers). Cells: ``flat`` = half the users on
0..99 and half on 900..1023 (F = 0.5 - delta on the gap, delta 0, 0.01, 0.03) and 20% at 1000 over N(500, 100)
(F = 0.8 on 892..999), n 2,000 / 20,000, ε 1, 2, 4; ``shapes`` = qrank5's readout.py shapes and cells, τ 0.1 /
0.5 / 0.9.

    python examples/readout14/exp.py REPS hierarchical,flat | hierarchical,shapes | histogram,flat
        -> exp_<mechanism>_<cells>.csv (mean rank error per rule and cell; REPS 40 / 30 / 40 here)
"""
import math
import sys
from pathlib import Path

import numpy as np, pandas as pd
HERE = Path(__file__).parent
sys.path.insert(0, str(HERE.parent / "qrank5"))
from readout import shape as rshape, before as old_rule, CELLS
from ldpql.mechanisms import hierarchical, quantile_histogram
from ldpql.mechanisms.quantile import CoinSpace, crossing
from ldpql.planner import quantile as planner
from ldpql.simulation import simulate


def hybrid(cdf, tau, var, z, spread=np.max):
    """old when the mean of F̂ - τ between the two answers is within z sd of 0 (the sd there: ``spread`` of the
    per-unit sd's, the largest or the mean), else new."""
    new = crossing(cdf, tau)
    old = old_rule(cdf, tau)
    lo, hi = min(new, old), max(new, old)
    if lo == hi:
        return new
    m = cdf[lo:hi + 1].mean() - tau
    return old if abs(m) <= z * spread(np.sqrt(var[lo:hi + 1])) else new


def misplaced(cdf, tau):
    a = cdf >= tau
    ones = np.concatenate([[0], np.cumsum(a)])
    return ones + (len(a) - ones[-1]) - (np.arange(len(a) + 1) - ones)


def tol(cdf, tau, c, kind):
    new = crossing(cdf, tau)
    old = old_rule(cdf, tau)
    if new == old:
        return new
    m = misplaced(cdf, tau)   # split s = units before s; answer unit j ~ split j
    L = abs(old - new)
    d = m[old] - m[new]
    lim = c * math.sqrt(L) if kind == "sqrt" else c * L
    return old if d <= lim else new


RULES = {"new": lambda c, t, v: crossing(c, t), "old": lambda c, t, v: old_rule(c, t),
         "h1": lambda c, t, v: hybrid(c, t, v, 1.0), "h2": lambda c, t, v: hybrid(c, t, v, 2.0),
         "m1": lambda c, t, v: hybrid(c, t, v, 1.0, np.mean),
         "s2": lambda c, t, v: tol(c, t, 2, "sqrt"), "s4": lambda c, t, v: tol(c, t, 4, "sqrt"),
         "f1": lambda c, t, v: tol(c, t, 0.1, "lin"), "f2": lambda c, t, v: tol(c, t, 0.2, "lin")}


def flat_hist(kind, n, size=1024, delta=0.0):
    r = np.random.default_rng([14, n, int(delta * 1000)])
    if kind == "gap":
        k = int(round(n * (0.5 - delta)))
        x = np.concatenate([r.integers(0, 100, k), r.integers(900, 1024, n - k)])
    else:  # atom_high
        k = n // 5
        x = np.concatenate([np.full(k, 1000), np.clip(np.rint(r.normal(500, 100, n - k)), 0, 1000)]).astype(int)
        size = 1001
    return np.bincount(x, minlength=size)


def run(mech, hist, n, eps, taus, reps, seed):
    size = len(hist)
    cdf_true = np.cumsum(hist) / n
    if mech == "hierarchical":
        make = hierarchical.hierarchical_protocol(CoinSpace(size), eps, list(taus), consistent=True)
    else:
        bins = planner.histogram_bins(eps, n, size, tuple(taus))
        make = quantile_histogram.histogram_protocol(CoinSpace(size), eps, list(taus), bins)
    errs = {(t, r): [] for t in taus for r in RULES}
    for s in range(reps):
        rel = simulate(make(n), np.random.default_rng([seed, s]), hist=hist, exact_positions=False)
        for t in taus:
            a = rel.extra["answers"][t]
            ends, cdf = a.extra["cdf_points"]
            var = a.extra["cdf_var"]
            for name, rule in RULES.items():
                j = rule(np.asarray(cdf), t, np.asarray(var))
                if mech == "hierarchical":
                    coin = j
                else:
                    if name == "new":
                        coin = int(a.extra["coin"])
                    else:
                        freq = np.diff(np.concatenate([[0.0], cdf]))
                        e = np.asarray(ends)
                        lo, hi = (int(e[j - 1]) + 1 if j else 0), int(e[j])
                        if hi == lo or freq[j] <= 0:
                            coin = lo
                        else:
                            below = cdf[j - 1] if j else 0.0
                            share = min(max((t - below) / freq[j], 0.0), 1.0)
                            coin = min(lo + int(share * (hi - lo + 1)), hi)
                err = max((cdf_true[coin - 1] if coin else 0.0) - t, t - cdf_true[coin], 0.0)
                errs[(t, name)].append(err)
    return {k: float(np.mean(v)) for k, v in errs.items()}


def main(reps, which):
    rows = []
    cells = []
    if "flat" in which:
        for kind, tau in (("gap", 0.5), ("atom", 0.8)):
            for n in (2000, 20000):
                for delta in ((0.0, 0.01, 0.03) if kind == "gap" else (0.0,)):
                    for eps in (1.0, 2.0, 4.0):
                        cells.append((f"{kind}{delta}", flat_hist(kind, n, delta=delta), n, eps, (tau,)))
    if "shapes" in which:
        for name in ("beta", "lognormal", "uniform", "bimodal", "zipf"):
            for n, eps, size in CELLS:
                cells.append((name, rshape(name, n, size), n, eps, (0.1, 0.5, 0.9)))
    for mech in which.split(",")[0].split("+"):
        for i, (name, hist, n, eps, taus) in enumerate(cells):
            out = run(mech, hist, n, eps, taus, reps, 1400 + i)
            for t in taus:
                row = {"mech": mech, "shape": name, "n": n, "eps": eps, "K": len(hist), "tau": t}
                row |= {r: round(out[(t, r)], 4) for r in RULES}
                rows.append(row)
                print(row, flush=True)
    df = pd.DataFrame(rows)
    df.to_csv(HERE / f"exp_{which.replace(',', '_').replace('+', '_')}.csv", index=False)
    for mech, part in df.groupby("mech"):
        for r in RULES:
            ratio = (part[r] + 1e-3) / (part["new"] + 1e-3)
            geo = round(float(np.exp(np.log(ratio).mean())), 3)
            print(mech, r, "mean", round(part[r].mean(), 4), "geo vs new", geo, "worse>1.2", int((ratio > 1.2).sum()),
                  "better<1/1.2", int((ratio < 1 / 1.2).sum()), "max ratio", round(ratio.max(), 2))

if __name__ == "__main__":
    main(int(sys.argv[1]), sys.argv[2])

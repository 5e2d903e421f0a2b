"""Audit 15: held-out coverage grid of the shown rank error on NEW shapes (common15.shapes), the simulation path.

Grid (fixed before any result was seen): shapes dmass, dwide, dnarrow, ibuck, iodd, ipois; n in {200, 2000};
eps in {0.1, 1, 10}; tau in {0.01, 0.1, 0.5, 0.9, 0.99}; the planner's choice (EXPLAIN on the registered column) and
BayeSS, NaiveNBS, shuffled NaiveNBS (delta 1e-8) forced; 200 runs, seeds [1515, t].
Per run: coin rank error, reported VALUE rank error (raw data vs the bucket midpoint), planner.shown_rank_error at
80/90/95%. Per cell: coverage of both, exact Clopper-Pearson range, width = mean shown / z·σ, realised p-quantile.

    nice python grid15.py REPS PART/PARTS   -> parts/grid15_PART.csv ;  python grid15.py merge -> grid15.csv
"""
from __future__ import annotations

import csv
import math
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa

import ldpql
from ldpql.planner import quantile as planner
from ldpql.simulation import simulate

from common15 import CONFS, Z, candidates, clopper, shapes

HERE = Path(__file__).parent
NS, EPS, TAUS = (200, 2000), (0.1, 1.0, 10.0), (0.01, 0.1, 0.5, 0.9, 0.99)
NAMES = ("dmass", "dwide", "dnarrow", "ibuck", "iodd", "ipois")
SEARCHES = ("bayess", "naive_nbs", "shuffle_nbs")


def chosen(shape, tau, eps):
    con = ldpql.connect(seed=1, evaluation=True)
    con.register("t", pa.table({"x": shape.x}), private={"x": shape.decl()}, budget=100)
    plan = con.sql(f"EXPLAIN SELECT LDP_QUANTILE(x, {tau}{shape.sql_args()}) FROM t EPSILON {eps}").plan
    return plan.aggregates[0].chosen.mechanism


def run_cell(mech, shape, tau, eps, reps, head=1515, mode="direct"):
    n = len(shape.x)
    cands = {q: candidates(shape, tau, q, mode) for q in CONFS}
    sigmas = {q: cands[q][mech].predict(eps, n) for q in CONFS}
    c = cands[0.95][mech]
    errs, verrs, shown = [], [], {q: [] for q in CONFS}
    for t in range(reps):
        est = simulate(c.protocol(eps)(n), np.random.default_rng([head, t]), hist=shape.hist)
        a = est.extra["answers"][tau]
        v = int(a.extra["coin"])
        errs.append(shape.coin_error(v, tau))
        verrs.append(shape.value_error(v, tau, float(a.values[0])))   # (session 11: the value the result reports)
        for q, z in Z.items():
            shown[q].append(planner.shown_rank_error(a, tau, sigmas[q], z))
    e, ve = np.array(errs), np.array(verrs)
    row = {"sigma95": round(sigmas[0.95], 5), "mean_err": round(float(e.mean()), 5),
           "mean_verr": round(float(ve.mean()), 5)}
    for q, z in Z.items():
        a = np.array(shown[q])
        tag = round(q * 100)
        k, kv = int(np.sum(e <= a + 1e-12)), int(np.sum(ve <= a + 1e-12))
        lo, hi = clopper(k, reps)
        vlo, vhi = clopper(kv, reps)
        row.update({f"cov{tag}": k / reps, f"cp{tag}": f"{lo}-{hi}", f"vcov{tag}": kv / reps, f"vcp{tag}": f"{vlo}-{vhi}",
                    f"width{tag}": round(float(a.mean() / (z * sigmas[q])), 3) if sigmas[q] > 0 else math.nan,
                    f"shown{tag}": round(float(a.mean()), 5), f"need{tag}": round(float(np.quantile(ve, q)), 5),
                    f"capped{tag}": round(float(np.mean(a >= max(tau, 1 - tau) - 1e-12)), 3)})
    return row


def configs():
    for n in NS:
        for name in NAMES:
            for tau in TAUS:
                for eps in EPS:
                    yield n, name, tau, eps


def main(reps, part):
    k, parts = (int(s) for s in part.split("/"))
    rows, cache = [], {}
    for i, (n, name, tau, eps) in enumerate(configs()):
        if i % parts != k - 1:
            continue
        shape = cache.setdefault(n, shapes(n))[name]
        pick = chosen(shape, tau, eps)
        cands = candidates(shape, tau)
        for mech in dict.fromkeys([pick, *SEARCHES]):
            base = {"shape": name, "K": shape.size, "bucketed": shape.bucketed, "n": n, "eps": eps, "tau": tau,
                    "mechanism": mech, "chosen": mech == pick, "reps": reps}
            c = cands[mech]
            why = c.check(eps, n) if c.check is not None else None
            if why:
                rows.append({**base, "refused": why[:60]})
                continue
            rows.append({**base, **run_cell(mech, shape, tau, eps, reps)})
        print(i, n, name, tau, eps, pick, flush=True)
    write(rows, HERE / "parts" / f"grid15_{k}.csv")


def write(rows, path):
    keys = list(dict.fromkeys(key for r in rows for key in r))
    with open(path, "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=keys)
        w.writeheader()
        w.writerows(rows)


def merge():
    rows = []
    for p in sorted((HERE / "parts").glob("grid15_*.csv")):
        with open(p) as fh:
            rows += list(csv.DictReader(fh))
    write(rows, HERE / "grid15.csv")


if __name__ == "__main__":
    if sys.argv[1] == "merge":
        merge()
    else:
        main(int(sys.argv[1]), sys.argv[2])

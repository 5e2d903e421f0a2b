"""Audit 15: the SQL path (the planner's own CoinSpace, the backend's binomial batches), OPTIONS (seed = 1517000 + t).

Cells (fixed before results were seen):
  S1 iodd  n = 2,000 eps 1 tau 0.9, planner's choice          (last integer bucket is partial: 1001..1002, midpoint 1006)
  S2 dwide n = 2,000 eps 1 tau 0.5, planner's choice          (DOUBLE -1000..1000, 256 buckets: 2 buckets hold everyone)
  S3 ibuck n = 500 eps 2 tau 0.1, mechanism => 'naive_nbs'    (INTEGER 0..100000 in 991 buckets of 101, 20% at 0)
  S4 pmass n = 200 eps 10 tau 0.02, mechanism => 'bayess', quantile_mode => 'padding' (binomial batches)
  S5 GROUP BY g (300 and 1,700 users), DOUBLE 0..1 resolution 64 Beta(50, 50), tau 0.1, 0.5, 0.9 in ONE statement, eps 2
  S6 plogn n = 2,000 eps 0.25 tau 0.98, bayess padding, interval => 'calibrated' (the interval's coverage too)
Per run: coin and VALUE rank error (against the group's own raw data) vs extra['rank_error'] and the displayed note.

    nice python sql15.py REPS [S1,S2,...]  -> sql15.csv
"""
from __future__ import annotations

import csv
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa

import ldpql

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE.parent / "audit14"))
import sqlpath  # noqa: E402

from common15 import Shape15, clopper, shapes  # noqa: E402
from padding15 import pshapes  # noqa: E402

HEAD = 1517000


def coin_of(shape, value):
    return int(round((value - shape.lo - shape.offset) / shape.step))


def runs(con, sql, reps):
    with sqlpath.spy() as seen:
        for t in range(reps):
            res = con.sql(f"{sql} OPTIONS (seed = {HEAD + t})")
            p, cells, answers = seen[-1]
            yield res, p, cells, answers


def score(rows, name, errs, verrs, extra, disp, info):
    e, ve, a, d = (np.array(x, float) for x in (errs, verrs, extra, disp))
    n = len(e)
    k, kv, kd = int(np.sum(e <= a + 1e-12)), int(np.sum(ve <= a + 1e-12)), int(np.sum(ve <= d + 1e-12))
    row = {"check": name, "runs": n, "cov": k / n, "cp": "%s-%s" % clopper(k, n), "vcov": kv / n,
           "vcp": "%s-%s" % clopper(kv, n), "vcov_displayed": kd / n, "mean_err": round(float(e.mean()), 5),
           "mean_verr": round(float(ve.mean()), 5), "p95_verr": round(float(np.quantile(ve, 0.95)), 5),
           "mean_shown": round(float(a.mean()), 5), **info}
    rows.append(row)
    print(row, flush=True)


def single(rows, name, shape, tau, eps, reps, args=""):
    con = ldpql.connect(evaluation=True)
    con.register("t", pa.table({"x": shape.x}), private={"x": shape.decl()}, budget=1e9)
    sql = f"SELECT LDP_QUANTILE(x, {tau}{shape.sql_args()}{args}) FROM t EPSILON {eps}"
    errs, verrs, extra, disp, mechs, vals, ivs = [], [], [], [], set(), set(), []
    Q = shape.true_quantile(tau)
    for res, p, cells, answers in runs(con, sql, reps):
        a = answers[(0, 0)]
        row = res.fetchall()[0]
        value = row[0]
        v = int(a.extra["coin"])
        assert v == coin_of(shape, value), (v, value)
        vals.add(value)
        errs.append(shape.coin_error(v, tau))
        verrs.append(shape.value_error(v, tau))
        extra.append(a.extra["rank_error"])
        sh = sqlpath.displayed(res, p)[p.aggregates[0].output]
        disp.append(sh["cells"].get("", sh["predicted"]))
        mechs.add(a.extra.get("search", p.aggregates[0].chosen.mechanism))
        if a.interval is not None:
            lo, hi = float(a.interval[0][0]), float(a.interval[1][0])
            ivs.append(lo <= Q <= hi)
    info = {"shape": shape.name, "n": len(shape.x), "tau": tau, "eps": eps, "mech": "/".join(sorted(mechs)),
            "args": args, "max_value": max(vals), "declared_high": shape.high,
            "interval_cov_rawQ": round(float(np.mean(ivs)), 4) if ivs else None}
    score(rows, name, errs, verrs, extra, disp, info)


def group15(rows, reps):
    r = np.random.default_rng([1517, 5])
    sizes = {"a": 300, "b": 1700}
    g = np.repeat(list(sizes), list(sizes.values()))
    x = np.concatenate([r.beta(50, 50, sizes["a"]), r.beta(20, 60, sizes["b"])])
    own = {k: Shape15(k, x[g == k], 0.0, 1.0, False, 64) for k in sizes}
    con = ldpql.connect(evaluation=True)
    con.register("t", pa.table({"g": g, "x": x}), private={"x": {"between": (0.0, 1.0)}}, public=["g"], budget=1e9)
    taus = (0.1, 0.5, 0.9)
    sql = ("SELECT g, " + ", ".join(f"LDP_QUANTILE(x, {t}, resolution => 64) AS q{i}" for i, t in enumerate(taus))
           + " FROM t GROUP BY g EPSILON 2")
    acc = {(k, t): ([], [], [], []) for k in sizes for t in taus}
    for res, p, cells, answers in runs(con, sql, reps):
        disp = sqlpath.displayed(res, p)
        for (ai, ci), a in answers.items():
            key = cells[ci].key[0]
            tau = taus[ai]
            v = int(a.extra["coin"])
            e, ve, ex, d = acc[(key, tau)]
            e.append(own[key].coin_error(v, tau))
            ve.append(own[key].value_error(v, tau))
            ex.append(a.extra["rank_error"])
            sh = disp[p.aggregates[ai].output]
            d.append(sh["cells"].get(f"g = {key}", sh["predicted"]))
    for (key, tau), (e, ve, ex, d) in acc.items():
        score(rows, "S5", e, ve, ex, d, {"shape": f"beta group {key}", "n": sizes[key], "tau": tau, "eps": 2.0,
                                         "args": "GROUP BY, 3 taus"})


def main(reps, which):
    rows = []
    s2000 = shapes(2000)
    if "S1" in which:
        single(rows, "S1", s2000["iodd"], 0.9, 1.0, reps)
    if "S2" in which:
        single(rows, "S2", s2000["dwide"], 0.5, 1.0, reps)
    if "S3" in which:
        single(rows, "S3", shapes(500)["ibuck"], 0.1, 2.0, reps, ", mechanism => 'naive_nbs'")
    if "S4" in which:
        single(rows, "S4", pshapes(200)["pmass"], 0.02, 10.0, reps,
               ", mechanism => 'bayess', quantile_mode => 'padding'")
    if "S5" in which:
        group15(rows, reps)
    if "S6" in which:
        single(rows, "S6", pshapes(2000)["plogn"], 0.98, 0.25, reps,
               ", mechanism => 'bayess', quantile_mode => 'padding', interval => 'calibrated'")
    path = HERE / "sql15.csv"
    keys = list(dict.fromkeys(k for r in rows for k in r))
    new = not path.exists()
    with open(path, "a", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=keys)
        if new:
            w.writeheader()
        w.writerows(rows)


if __name__ == "__main__":
    main(int(sys.argv[1]), sys.argv[2] if len(sys.argv) > 2 else "S1,S2,S3,S4,S5,S6")

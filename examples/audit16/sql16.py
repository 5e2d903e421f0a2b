"""Audit 16, part 1 (SQL path): the planner's own choice and forced one-round releases through ldpql.connect(evaluation=True),
OPTIONS (seed = 1616000 + t, confidence = c). Per run and per (aggregate, group): the answer's coin and reported value,
the engine's extra['rank_error'] and the rank error the result's notes display (the cell note; without one, the
statement's predicted note), scored against the group's OWN raw data (a bucket's midpoint: the value's rank error).

Cells (fixed before any result was read):
  Q1  pareto INTEGER 0..65535 (Pareto(1.1)·10), n = 20,000, ε = 4, q = 0.5/0.9/0.99, resolution => 1024 (bucketed)
  Q2  the same, one coin per integer (K = 65,536), mechanism => 'hierarchical'
  Q3  DOUBLE 0..1000: 25% at 0.0 (the domain's end), the rest LogNormal(3, 1.5), resolution => 1024, ε = 4, q 0.1/0.5/0.9
  Q4  GROUP BY g: groups of 150 / 600 / 5,000 on INTEGER 0..100 (a: 40% at 100, rest U; b: Poisson(30); c: U), ε = 4,
      q = 0.25/0.5/0.75: the planner's choice
  Q5  Q4 with mechanism => 'hierarchical'
  Q6  F flat at q: INTEGER 0..1000, half U(0..99), half U(900..1000), n = 5,000, ε = 4, q = 0.5, resolution => 64
  Q7  histogram forced, DOUBLE 0..1, Beta(2, 8) with 10% at 1.0, n = 2,000, ε = 8, q = 0.9/0.95/0.99, default resolution
  Q8  tiny n = 150, INTEGER 0..20 Poisson(4), ε = 8, q = 0.1/0.5/0.9: planner's choice and both forced (Q8, Q8t, Q8h)
  Q9  audit-15-like but new data: GROUP BY, groups 400 / 1,600, DOUBLE 0..1 resolution 64, Beta(30, 70) and 15% at 0.0,
      q = 0.1/0.5/0.9, ε = 2 (planner) — small groups on a bucketed column
  Q10 pareto INTEGER 0..65535, n = 20,000, ε = 4, resolution => 1024, mechanism => 'hierarchical' (= Q1 forced)

  Q11-Q14 (added after choice16.txt showed where the planner picks the tree; before their results): the planner's
      tree at ε = 1-3 on F flat at q (Q11, Q14 group a/c), atoms at the domain's ends (Q12, Q13, Q14 group b)

    nice python sql16.py REPS [Q1,Q2,...] [--old] [--head SEED0]  -> sql16.csv / sql16_old.csv (appends)
    --old: the read-out and the shown rank error before 068a6e2 (old_crossing; no tree floor) on the SAME seeds
"""
from __future__ import annotations

import csv
import re
import sys
import time
from collections import Counter
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pyarrow as pa

import ldpql
from ldpql import connection

from common16 import Shape, clopper

HERE = Path(__file__).parent
HEAD = 1616000
CELL = re.compile(r"^the ([\d.e-]+)-quantile of (\w+) \(([^)]*)\)(?: in the group (.*?))?: rank error ±([\d.e+-]+) "
                  r"\((\d+)%\)")
PRED = re.compile(r"^(.*?): predicted rank error \(fraction of users\) ±([\d.e+-]+) \((\d+)%, calibrated\)")


@contextmanager
def spy():
    seen = []
    original = connection.select_result

    def wrapped(p, cells, estimates, *args, **kw):
        out = original(p, cells, estimates, *args, **kw)
        seen.append((p, cells, p.answers(estimates)))
        return out
    connection.select_result = wrapped
    try:
        yield seen
    finally:
        connection.select_result = original


def displayed(notes):
    pred, cells = {}, {}
    for note in notes:
        m = PRED.match(note)
        if m:
            for out in m.group(1).split(", "):
                pred[out] = float(m.group(2))
        m = CELL.match(note)
        if m:
            cells[(float(m.group(1)), m.group(4) or "")] = float(m.group(5))
    return pred, cells


def r(*key):
    return np.random.default_rng([1616, 77, *key])


def pareto_int(n):
    return np.minimum(np.floor((r(1, n).pareto(1.1, n) + 1) * 10), 65535)


def cells_def():
    d = {}
    x = pareto_int(20000)
    d["Q1"] = dict(cols={"x": x}, decl={"x": {"between": (0, 65535), "integer": True}}, low=0, high=65535, integer=True,
                   res=1024, taus=(0.5, 0.9, 0.99), eps=4, args="")
    d["Q2"] = dict(d["Q1"], res=None, args=", mechanism => 'hierarchical'")
    d["Q10"] = dict(d["Q1"], args=", mechanism => 'hierarchical'")
    n = 20000
    k = n // 4
    x3 = np.concatenate([np.zeros(k), np.minimum(r(3).lognormal(3, 1.5, n - k), 1000)])
    d["Q3"] = dict(cols={"x": x3}, decl={"x": {"between": (0.0, 1000.0)}}, low=0.0, high=1000.0, integer=False,
                   res=1024, taus=(0.1, 0.5, 0.9), eps=4, args="")
    sizes = {"a": 150, "b": 600, "c": 5000}
    ga = np.concatenate([np.full(60, 100.0), r(4).integers(0, 101, 90)])
    gb = np.minimum(r(5).poisson(30, 600), 100).astype(float)
    gc = r(6).integers(0, 101, 5000).astype(float)
    g = np.repeat(list(sizes), list(sizes.values()))
    d["Q4"] = dict(cols={"g": g, "x": np.concatenate([ga, gb, gc])}, decl={"x": {"between": (0, 100), "integer": True}},
                   low=0, high=100, integer=True, res=None, taus=(0.25, 0.5, 0.75), eps=4, args="", group=True)
    d["Q5"] = dict(d["Q4"], args=", mechanism => 'hierarchical'")
    x6 = np.concatenate([r(7).integers(0, 100, 2500), r(7).integers(900, 1001, 2500)]).astype(float)
    d["Q6"] = dict(cols={"x": x6}, decl={"x": {"between": (0, 1000), "integer": True}}, low=0, high=1000, integer=True,
                   res=64, taus=(0.5,), eps=4, args="")
    d["Q6t"] = dict(d["Q6"], args=", mechanism => 'hierarchical'")
    x7 = np.concatenate([np.ones(200), r(8).beta(2, 8, 1800)])
    d["Q7"] = dict(cols={"x": x7}, decl={"x": {"between": (0.0, 1.0)}}, low=0.0, high=1.0, integer=False, res=None,
                   taus=(0.9, 0.95, 0.99), eps=8, args=", mechanism => 'histogram'")
    x8 = np.minimum(r(9).poisson(4, 150), 20).astype(float)
    d["Q8"] = dict(cols={"x": x8}, decl={"x": {"between": (0, 20), "integer": True}}, low=0, high=20, integer=True,
                   res=None, taus=(0.1, 0.5, 0.9), eps=8, args="")
    d["Q8t"] = dict(d["Q8"], args=", mechanism => 'hierarchical'")
    d["Q8h"] = dict(d["Q8"], args=", mechanism => 'histogram'")
    s9 = {"a": 400, "b": 1600}
    g9 = np.repeat(list(s9), list(s9.values()))
    x9 = np.concatenate([np.where(r(10).random(400) < 0.15, 0.0, r(10).beta(30, 70, 400)),
                         np.where(r(11).random(1600) < 0.15, 0.0, r(11).beta(30, 70, 1600))])
    d["Q9"] = dict(cols={"g": g9, "x": x9}, decl={"x": {"between": (0.0, 1.0)}}, low=0.0, high=1.0, integer=False,
                   res=64, taus=(0.1, 0.5, 0.9), eps=2, args="", group=True)
    # cells where the planner picks the tree at low ε (choice16.txt), added after choice16 and before their results
    n = 20000
    h = n // 2
    x11 = np.concatenate([r(12).uniform(0.05, 0.35, h), r(12).uniform(0.65, 0.95, n - h)])   # F = 0.5 on 0.35..0.65
    d["Q11"] = dict(cols={"x": x11}, decl={"x": {"between": (0.0, 1.0)}}, low=0.0, high=1.0, integer=False, res=64,
                    taus=(0.1, 0.5, 0.9), eps=1, args="")
    k = n // 5
    x12 = np.concatenate([np.zeros(k), np.minimum(r(13).lognormal(-4, 1.2, n - k), 1.0)])
    d["Q12"] = dict(cols={"x": x12}, decl={"x": {"between": (0.0, 1.0)}}, low=0.0, high=1.0, integer=False, res=1024,
                    taus=(0.1, 0.5, 0.9), eps=3, args="")
    x13 = np.concatenate([np.zeros(600), np.minimum(r(14).poisson(40, 1400), 100)]).astype(float)
    d["Q13"] = dict(cols={"x": x13}, decl={"x": {"between": (0, 100), "integer": True}}, low=0, high=100,
                    integer=True, res=None, taus=(0.1, 0.5, 0.9), eps=2, args="")
    s14 = {"a": 500, "b": 2000, "c": 20000}
    g14 = np.repeat(list(s14), list(s14.values()))
    x14 = np.concatenate([np.concatenate([r(15).uniform(0.1, 0.3, 250), r(15).uniform(0.7, 0.9, 250)]),
                          np.where(r(16).random(2000) < 0.3, 1.0, r(16).beta(5, 5, 2000)),
                          np.concatenate([r(17).uniform(0.0, 0.4, 10000), r(17).uniform(0.6, 1.0, 10000)])])
    d["Q14"] = dict(cols={"g": g14, "x": x14}, decl={"x": {"between": (0.0, 1.0)}}, low=0.0, high=1.0,
                    integer=False, res=64, taus=(0.25, 0.5, 0.75), eps=1, args="", group=True)
    # Q15, Q16 (added after sim16 showed the tree short on heavy tails at 2^16 coins): where the planner itself picks
    # the tree on 2^16 coins with three q's (choice16.txt: n >= 100,000, ε = 5)
    n = 100000
    x15 = np.minimum(np.floor((r(18).pareto(1.1, n) + 1) * 10), 65535)
    d["Q15"] = dict(cols={"x": x15}, decl={"x": {"between": (0, 65535), "integer": True}}, low=0, high=65535,
                    integer=True, res=None, taus=(0.5, 0.9, 0.99), eps=5, args="")
    k = int(0.3 * n)
    x16 = np.concatenate([np.zeros(k), np.minimum(np.floor(r(19).lognormal(6, 1.5, n - k)), 65535)])
    d["Q16"] = dict(cols={"x": x16}, decl={"x": {"between": (0, 65535), "integer": True}}, low=0, high=65535,
                    integer=True, res=None, taus=(0.1, 0.5, 0.9), eps=5, args="")
    return d


OLD = False   # --old: the read-out and shown rank error before 068a6e2, on the same seeded releases


def _old_mode():
    from ldpql.mechanisms import hierarchical, quantile_histogram
    from ldpql.planner import quantile as planner
    from common16 import old_crossing
    hierarchical.crossing = quantile_histogram.crossing = old_crossing
    new_shown = planner.shown_rank_error

    def shown(answer, tau, sigma, z):
        if answer.extra.get("mechanism") == "hierarchical" and "coin_var" in answer.extra:
            answer.extra["coin_var"] = 0.0   # the tree had no floor before 068a6e2
        return new_shown(answer, tau, sigma, z)
    planner.shown_rank_error = shown


def run(name, spec, reps, confs=(0.9, 0.95)):
    cols = spec["cols"]
    group = spec.get("group", False)
    con = ldpql.connect(evaluation=True)
    con.register("t", pa.table(cols), private=spec["decl"], public=["g"] if group else [], budget=1e12)
    res_arg = f", resolution => {spec['res']}" if spec["res"] else ""
    items = ", ".join(f"LDP_QUANTILE(x, {t}{res_arg}{spec['args']}) AS q{i}" for i, t in enumerate(spec["taus"]))
    sql = f"SELECT {'g, ' if group else ''}{items} FROM t{' GROUP BY g' if group else ''} EPSILON {spec['eps']}"
    keys = sorted(set(cols["g"])) if group else [""]
    own = {k: Shape(f"{name}:{k}", cols["x"][cols["g"] == k] if group else cols["x"], spec["low"], spec["high"],
                    spec["integer"], spec["res"]) for k in keys}
    rows = []
    for conf in confs:
        acc = {}
        t0 = time.time()
        with spy() as seen:
            for t in range(reps):
                res = con.sql(f"{sql} OPTIONS (seed = {HEAD + t}, confidence = {conf})")
                p, cells, answers = seen[-1]
                pred, shown_cells = displayed(res.notes)
                for (ai, ci), a in answers.items():
                    tau = spec["taus"][ai]
                    key = cells[ci].key[0] if group else ""
                    sh = own[key]
                    v = float(a.values[0])
                    err = sh.value_error(v, tau) if sh.bucketed else sh.coin_error(int(a.extra["coin"]), tau)
                    extra = a.extra.get("rank_error", np.nan)
                    disp = shown_cells.get((tau, f"g = {key}" if group else ""), pred.get(f"q{ai}", np.nan))
                    mech = a.extra.get("search", a.extra.get("mechanism", p.aggregates[ai].chosen.mechanism))
                    Q = sh.true_quantile(tau)
                    lo, hi = float(a.interval[0][0]), float(a.interval[1][0])
                    e = acc.setdefault((key, tau), {"err": [], "extra": [], "disp": [], "mech": Counter(), "iv": []})
                    e["err"].append(err); e["extra"].append(extra); e["disp"].append(disp); e["mech"][mech] += 1
                    e["iv"].append(lo <= Q <= hi)
        for (key, tau), e in sorted(acc.items()):
            err, ex, dp = (np.array(e[k], float) for k in ("err", "extra", "disp"))
            k1, k2 = int(np.sum(err <= ex + 1e-12)), int(np.sum(err <= dp + 1e-12))
            row = {"cell": name, "readout": "old" if OLD else "new", "seeds": f"{HEAD}+", "group": key, "n": own[key].n, "K": own[key].size, "bucketed": own[key].bucketed,
                   "tau": tau, "conf": conf, "eps": spec["eps"], "args": spec["args"].strip(", "), "runs": reps,
                   "mech": "/".join(f"{m}:{c}" for m, c in e["mech"].items()),
                   "cov_extra": k1 / reps, "cp_extra": "%s-%s" % clopper(k1, reps),
                   "cov_displayed": k2 / reps, "cp_displayed": "%s-%s" % clopper(k2, reps),
                   "mean_err": round(float(err.mean()), 5), "p_err": round(float(np.quantile(err, conf)), 5),
                   "max_err": round(float(err.max()), 5), "mean_shown": round(float(np.nanmean(ex)), 5),
                   "shown_nonfinite": int(np.sum(~np.isfinite(ex))),
                   "shown_over_cap": int(np.sum(ex > max(tau, 1 - tau) + 1e-12)),
                   "ivcov": round(float(np.mean(e["iv"])), 4)}
            rows.append(row)
            print(row, flush=True)
        print(f"  [{name} conf {conf}: {time.time() - t0:.0f} s]", flush=True)
    return rows


def main(reps, which):
    d = cells_def()
    path = HERE / ("sql16_old.csv" if OLD else "sql16.csv")
    for name in which:
        rows = run(name, d[name], reps)
        new = not path.exists()
        with open(path, "a", newline="") as fh:
            w = csv.DictWriter(fh, fieldnames=list(rows[0]))
            if new:
                w.writeheader()
            w.writerows(rows)


if __name__ == "__main__":
    if "--old" in sys.argv:
        sys.argv.remove("--old")
        OLD = True
        _old_mode()
    if "--head" in sys.argv:
        i = sys.argv.index("--head")
        HEAD = int(sys.argv[i + 1])
        del sys.argv[i: i + 2]
    main(int(sys.argv[1]), sys.argv[2].split(",") if len(sys.argv) > 2 else
         ["Q1", "Q2", "Q10", "Q3", "Q4", "Q5", "Q6", "Q6t", "Q7", "Q8", "Q8t", "Q8h", "Q9"])

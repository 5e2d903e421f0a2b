"""Audit 16, part 1 (mechanism level): the one-round read-outs before and after 068a6e2 on the SAME simulated releases.

Each run builds the planner's own candidate (``quantile_candidates``: its protocol, its predicted σ) for the forced
mechanism ('hierarchical', consistent; or 'histogram' with the planner's bins), simulates one release (binomial level
sizes, as the backends' hash), and reads it twice: `_release` is wrapped so that the same counts are read out by the
new rule (``crossing``) and by the old one (``common16.old_crossing``). For each τ of the release and each confidence
(0.9, 0.95): the new answer's shown rank error is the engine's own (``planner._derive`` → extra['rank_error']); the old
answer's is what the engine showed before 068a6e2 (the tree with no floor: coin_var = 0 in shown_rank_error; the
histogram unchanged). Scored against the rank error the result claims (coin error on one-coin-per-value columns).

    nice python sim16.py REPS [part/parts]   -> parts/sim16_<part>.csv ; python sim16.py merge -> sim16.csv
"""
from __future__ import annotations

import csv
import sys
import time
from pathlib import Path

import numpy as np

from ldpql.mechanisms import Encoding, hierarchical, quantile_histogram
from ldpql.mechanisms.quantile import crossing
from ldpql.planner import quantile as planner
from ldpql.simulation import simulate

from common16 import Z, clopper, old_crossing, rng, shapes, taus_for

HERE = Path(__file__).parent
CONFS = (0.9, 0.95)
NS = (300, 2000, 20000)
EPS = (1.0, 4.0, 8.0)
MECHS = ("hierarchical", "histogram")

_orig = {"hierarchical": hierarchical._release, "histogram": quantile_histogram._release}


def _both(module, name):
    orig = _orig[name]

    def wrapped(*args, **kw):
        module.crossing = old_crossing
        try:
            before = orig(*args, **kw)
        finally:
            module.crossing = crossing
        after = orig(*args, **kw)
        after.extra["old_release"] = before
        return after
    return wrapped


hierarchical._release = _both(hierarchical, "hierarchical")
quantile_histogram._release = _both(quantile_histogram, "histogram")


def candidate(shape, taus, mechanism):
    target = planner.QuantileTarget("x", Encoding("x", shape.size, "x"), "", None, planner.UNIT, tau=taus[0],
                                    space=shape.space(), taus=tuple(taus), confidence=0.95)
    return next(c for c in planner.quantile_candidates(target) if c.mechanism == mechanism)


def cells():
    out = []
    for n in NS:
        for name in shapes(n):
            for eps in EPS:
                for mech in MECHS:
                    out.append((name, n, eps, mech))
    return out


def run_cell(ci, name, n, eps, mech, reps):
    shape = shapes(n)[name]
    taus = taus_for(name)
    cand = candidate(shape, taus, mech)
    why = cand.check(eps, n) if cand.check else None
    if why:
        return []
    make = cand.protocol(eps)
    space = shape.space()
    derive = {t: planner._derive(t, space, "certified", "x") for t in taus}
    acc = {(t, c): {"e_new": [], "e_old": [], "s_new": [], "s_old": [], "s_new_nofloor": [], "iv_new": [],
                    "iv_old": []} for t in taus for c in CONFS}
    sigma = None
    for t in range(reps):
        rel = simulate(make(n), rng(ci, t), hist=shape.hist, exact_positions=False)
        sigma = rel.extra.get("sigma")
        old = rel.extra["old_release"]
        old.extra["sigma"] = sigma
        for tau in taus:
            a_new, a_old = rel.extra["answers"][tau], old.extra["answers"][tau]
            if mech == "hierarchical":   # the engine before 068a6e2: no floor for the tree
                a_old.extra["coin_var"] = 0.0
            e_new, e_old = shape.error(int(a_new.extra["coin"]), tau), shape.error(int(a_old.extra["coin"]), tau)
            Q = shape.true_quantile(tau)
            for conf in CONFS:
                d_new = derive[tau](rel, conf)
                d_old = derive[tau](old, conf)
                s = acc[(tau, conf)]
                s["e_new"].append(e_new); s["e_old"].append(e_old)
                s["s_new"].append(d_new.extra["rank_error"]); s["s_old"].append(d_old.extra["rank_error"])
                if mech == "hierarchical":
                    keep = a_new.extra["coin_var"]
                    a_new.extra["coin_var"] = 0.0
                    s["s_new_nofloor"].append(planner.shown_rank_error(a_new, tau, sigma, Z[conf]))
                    a_new.extra["coin_var"] = keep
                for key, d in (("iv_new", d_new), ("iv_old", d_old)):
                    lo, hi = float(d.interval[0][0]), float(d.interval[1][0])
                    s[key].append(lo <= Q <= hi)
    rows = []
    for (tau, conf), s in acc.items():
        e_new, e_old, s_new, s_old = (np.array(s[k], float) for k in ("e_new", "e_old", "s_new", "s_old"))
        k_new, k_old = int(np.sum(e_new <= s_new + 1e-12)), int(np.sum(e_old <= s_old + 1e-12))
        row = {"shape": name, "n": n, "eps": eps, "mech": mech, "K": shape.size, "taus": "/".join(map(str, taus)),
               "tau": tau, "conf": conf, "runs": reps, "sigma": round(float(sigma), 5),
               "zsigma": round(Z[conf] * float(sigma), 5),
               "cov_new": k_new / reps, "cp_new": "%s-%s" % clopper(k_new, reps),
               "cov_old": k_old / reps, "cp_old": "%s-%s" % clopper(k_old, reps),
               "mean_err_new": round(float(e_new.mean()), 5), "mean_err_old": round(float(e_old.mean()), 5),
               "p95_err_new": round(float(np.quantile(e_new, 0.95)), 5),
               "p95_err_old": round(float(np.quantile(e_old, 0.95)), 5),
               "max_err_new": round(float(e_new.max()), 5), "max_err_old": round(float(e_old.max()), 5),
               "mean_shown_new": round(float(s_new.mean()), 5), "mean_shown_old": round(float(s_old.mean()), 5),
               "max_shown_new": round(float(s_new.max()), 5),
               "shown_over_cap": int(np.sum(s_new > max(tau, 1 - tau) + 1e-12)),
               "shown_nonfinite": int(np.sum(~np.isfinite(s_new))),
               "ivcov_new": round(float(np.mean(s["iv_new"])), 4), "ivcov_old": round(float(np.mean(s["iv_old"])), 4)}
        if s["s_new_nofloor"]:
            nf = np.array(s["s_new_nofloor"])
            row["cov_new_nofloor"] = float(np.mean(e_new <= nf + 1e-12))
        rows.append(row)
    return rows


def main(reps, part, parts):
    todo = cells()
    mine = [(i, c) for i, c in enumerate(todo) if i % parts == part]
    path = HERE / "parts" / f"sim16_{part}.csv"
    path.parent.mkdir(exist_ok=True)
    done = set()
    if path.exists():
        with open(path) as fh:
            done = {(r["shape"], int(r["n"]), float(r["eps"]), r["mech"]) for r in csv.DictReader(fh)}
    for i, (name, n, eps, mech) in mine:
        if (name, n, eps, mech) in done:
            continue
        t0 = time.time()
        rows = run_cell(i, name, n, eps, mech, reps)
        if not rows:
            continue
        keys = list(dict.fromkeys(k for r in rows for k in r)) + (["cov_new_nofloor"] if mech == "histogram" else [])
        keys = ["shape", "n", "eps", "mech", "K", "taus", "tau", "conf", "runs", "sigma", "zsigma", "cov_new", "cp_new",
                "cov_old", "cp_old", "cov_new_nofloor", "mean_err_new", "mean_err_old", "p95_err_new", "p95_err_old",
                "max_err_new", "max_err_old", "mean_shown_new", "mean_shown_old", "max_shown_new", "shown_over_cap",
                "shown_nonfinite", "ivcov_new", "ivcov_old"]
        new = not path.exists()
        with open(path, "a", newline="") as fh:
            w = csv.DictWriter(fh, fieldnames=keys)
            if new:
                w.writeheader()
            w.writerows(rows)
        worst = min(rows, key=lambda r: r["cov_new"] - r["conf"])
        print(f"{name} n={n} eps={eps} {mech}: {time.time() - t0:.0f}s worst new cov {worst['cov_new']} at "
              f"tau {worst['tau']} conf {worst['conf']} (old {worst['cov_old']}); mean err new/old "
              f"{np.mean([r['mean_err_new'] for r in rows]):.4f}/{np.mean([r['mean_err_old'] for r in rows]):.4f}",
              flush=True)


def merge():
    rows = []
    for p in sorted((HERE / "parts").glob("sim16_*.csv")):
        with open(p) as fh:
            rows += list(csv.DictReader(fh))
    with open(HERE / "sim16.csv", "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    print(len(rows), "rows")


if __name__ == "__main__":
    if sys.argv[1] == "merge":
        merge()
    else:
        part, parts = (map(int, sys.argv[2].split("/")) if len(sys.argv) > 2 else (0, 1))
        main(int(sys.argv[1]), part, parts)

"""Audit 15: quantile_mode => 'padding' (7ecdabb, _unpadded) against 'direct', BayeSS, simulation path with the
backends' binomial batch sizes (exact_positions=False, as a SQL statement's hash split), seeds [1516, t].

Shapes (data seed [1516, n]): plogn INTEGER 0..1000 round(LogNormal(4, 1)); pmass INTEGER 0..1000 25% at 0, 25% at
1000, 50% uniform 1..999 (atoms exactly where the virtual users sit). tau in {0.02, 0.1, 0.3, 0.7, 0.9, 0.98};
(n, eps) in {(2000, 0.25), (2000, 2), (20000, 1), (200, 10)}; 200 runs.
Per cell and mode: shown rank error coverage (80/90/95%), width / z·σ at 95%, realised p95 of the rank error; the
95% 'calibrated' and 'certified' intervals' coverage of the true quantile (smallest coin with F >= tau), and widths.

    nice python padding15.py REPS [PART/PARTS] -> parts/padding15_PART.csv ; python padding15.py merge
"""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

from ldpql.planner import quantile as planner
from ldpql.simulation import simulate

from common15 import CONFS, Z, Shape15, candidates, clopper
from grid15 import write

HERE = Path(__file__).parent
TAUS = (0.02, 0.1, 0.3, 0.7, 0.9, 0.98)
CELLS = ((2000, 0.25), (2000, 2.0), (20000, 1.0), (200, 10.0))


def pshapes(n):
    r = np.random.default_rng([1516, n])
    q = n // 4
    return {"plogn": Shape15("plogn", np.minimum(np.rint(r.lognormal(4, 1, n)), 1000), 0, 1000, True),
            "pmass": Shape15("pmass", np.concatenate([np.zeros(q), np.full(q, 1000), r.integers(1, 1000, n - 2 * q)]),
                             0, 1000, True)}


def run(shape, tau, eps, mode, reps, exact_positions=False, head=1516):
    n = len(shape.x)
    cands = {q: candidates(shape, tau, q, mode)["bayess"] for q in CONFS}
    sig = {q: cands[q].predict(eps, n) for q in CONFS}
    Q = shape.true_coin(tau)
    errs, shown, cal, cert, calw, certw, fb, bias = [], {q: [] for q in CONFS}, [], [], [], [], 0, []
    for t in range(reps):
        est = simulate(cands[0.95].protocol(eps)(n), np.random.default_rng([head, t]), hist=shape.hist,
                       exact_positions=exact_positions)
        a = est.extra["answers"][tau]
        v = int(a.extra["coin"])
        fb += a.extra.get("search") == "naive_nbs"
        errs.append(shape.coin_error(v, tau))
        for q, z in Z.items():
            shown[q].append(planner.shown_rank_error(a, tau, sig[q], z))
        # the released F̂ at each asked coin against the truth, in units of its own se (the rescale's bias)
        for qn in a.extra["questions"]:
            if qn.variance > 0:
                bias.append((qn.estimate - shape.cdf[qn.coin]) / np.sqrt(qn.variance))
        for kind, hold, width in (("calibrated", cal, calw), ("certified", cert, certw)):
            lo, hi = planner.shown_interval(a, tau, sig[0.95], 0.95, kind, shape.space())
            hold.append(lo[0] <= shape.value(Q) <= hi[0])
            width.append(hi[0] - lo[0])
    e = np.array(errs)
    row = {"sigma95": round(sig[0.95], 5), "fallback": fb, "mean_err": round(float(e.mean()), 5),
           "p95_err": round(float(np.quantile(e, 0.95)), 5),
           "z_mean": round(float(np.mean(bias)), 3), "z_sd": round(float(np.std(bias)), 3),
           "z_gt2": round(float(np.mean(np.abs(bias) > 2)), 4)}
    for q, z in Z.items():
        a = np.array(shown[q])
        k = int(np.sum(e <= a + 1e-12))
        tag = round(q * 100)
        row.update({f"cov{tag}": k / reps, f"cp{tag}": "%s-%s" % clopper(k, reps),
                    f"width{tag}": round(float(a.mean() / (z * sig[q])), 3), f"shown{tag}": round(float(a.mean()), 5)})
    row.update({"cal_cov95": float(np.mean(cal)), "cal_cp": "%s-%s" % clopper(int(np.sum(cal)), reps),
                "cal_width": round(float(np.mean(calw)), 1), "cert_cov95": float(np.mean(cert)),
                "cert_cp": "%s-%s" % clopper(int(np.sum(cert)), reps), "cert_width": round(float(np.mean(certw)), 1)})
    return row


def main(reps, part="1/1"):
    k, parts = (int(s) for s in part.split("/"))
    rows, i = [], 0
    for n, eps in CELLS:
        sh = pshapes(n)
        for name, shape in sh.items():
            for tau in TAUS:
                i += 1
                if i % parts != k - 1:
                    continue
                for mode in ("direct", "padding"):
                    row = {"shape": name, "n": n, "eps": eps, "tau": tau, "mode": mode, "reps": reps,
                           **run(shape, tau, eps, mode, reps)}
                    rows.append(row)
                    print({x: row[x] for x in ("shape", "n", "eps", "tau", "mode", "cov80", "cov95", "width95",
                                               "cal_cov95", "cert_cov95", "z_mean")}, flush=True)
    write(rows, HERE / "parts" / f"padding15_{k}.csv")


def merge():
    import csv
    rows = []
    for p in sorted((HERE / "parts").glob("padding15_*.csv")):
        with open(p) as fh:
            rows += list(csv.DictReader(fh))
    write(rows, HERE / "padding15.csv")


if __name__ == "__main__":
    if sys.argv[1] == "merge":
        merge()
    else:
        main(int(sys.argv[1]), sys.argv[2] if len(sys.argv) > 2 else "1/1")

"""Audit 15: what the bucketed rule (79149fe) costs on smooth DOUBLE columns. Same answers scored two ways:
extra['bucketed'] as the engine sets it (True) and flipped to False (the coin's own rule before 79149fe).
Shape: DOUBLE 0..50, LogNormal(2, 0.5) (data seed [1519, n]); resolution default 2^16 and 256; n in {2000, 20000};
eps in {1, 4}; tau in {0.1, 0.5}; the planner's choice, BayeSS and NaiveNBS; 200 runs, seeds [1519, t].
Reported: value-rank-error coverage at 95% of both rules, mean shown / z·σ, and mean shown / realised p95 value error.

    nice python overwidth15.py 200 -> overwidth15.csv
"""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

from ldpql.planner import quantile as planner
from ldpql.simulation import simulate

from common15 import Z, Shape15, candidates, clopper
from grid15 import chosen, write

HERE = Path(__file__).parent


def main(reps):
    rows = []
    z = Z[0.95]
    for n in (2000, 20000):
        x = np.random.default_rng([1519, n]).lognormal(2, 0.5, n)
        for res in (None, 256):
            shape = Shape15("lognorm", x, 0.0, 50.0, False, res)
            for eps in (1.0, 4.0):
                for tau in (0.1, 0.5):
                    pick = chosen(shape, tau, eps)
                    cands = candidates(shape, tau)
                    for mech in dict.fromkeys([pick, "bayess", "naive_nbs"]):
                        c = cands[mech]
                        sig = c.predict(eps, n)
                        ve, on, off = [], [], []
                        for t in range(reps):
                            est = simulate(c.protocol(eps)(n), np.random.default_rng([1519, t]), hist=shape.hist)
                            a = est.extra["answers"][tau]
                            ve.append(shape.value_error(int(a.extra["coin"]), tau))
                            on.append(planner.shown_rank_error(a, tau, sig, z))
                            a.extra["bucketed"] = False
                            off.append(planner.shown_rank_error(a, tau, sig, z))
                        ve, on, off = map(np.array, (ve, on, off))
                        p95 = float(np.quantile(ve, 0.95))
                        k_on, k_off = int(np.sum(ve <= on + 1e-12)), int(np.sum(ve <= off + 1e-12))
                        row = {"n": n, "K": shape.size, "eps": eps, "tau": tau, "mechanism": mech, "chosen": mech == pick,
                               "sigma": round(sig, 5), "p95_value_err": round(p95, 5),
                               "vcov95_bucketed": k_on / reps, "cp_bucketed": "%s-%s" % clopper(k_on, reps),
                               "vcov95_coin_rule": k_off / reps, "cp_coin_rule": "%s-%s" % clopper(k_off, reps),
                               "width_bucketed": round(float(on.mean() / (z * sig)), 2),
                               "width_coin_rule": round(float(off.mean() / (z * sig)), 2),
                               "over_p95_bucketed": round(float(on.mean() / p95), 2) if p95 > 0 else np.inf,
                               "over_p95_coin_rule": round(float(off.mean() / p95), 2) if p95 > 0 else np.inf}
                        rows.append(row)
                        print(row, flush=True)
    write(rows, HERE / "overwidth15.csv")


if __name__ == "__main__":
    main(int(sys.argv[1]))

"""Audit 17: coverage and accuracy of the zoomed quantile histogram through SQL (ldpql.connect(evaluation=True),
OPTIONS (seed = 1717000 + t)). Per cell three arms on the SAME data and seeds:
  zoom : LDP_QUANTILE(x, tau, mechanism => 'histogram')               (the change under review)
  one  : the same with OPTIONS (rounds = 1)                              (the one-round histogram)
  bayes: LDP_QUANTILE(x, tau, mechanism => 'bayess')                    (forced BayeSS)
Scored against the cell's own data (one coin per integer: coin rank error max(F(v-1)-tau, tau-F(v), 0)); the
shown rank error at 95% (answer.extra['rank_error']) and at 90% (shown_rank_error with z90, same sigma), and
whether the certified interval extra['interval'](0.95) holds a coin of rank error 0.

    nice -n 10 python sim17.py REPS CELL[,CELL...] [ARMS]   -> sim17_<CELL>.csv
"""
from __future__ import annotations
import csv, sys, time
from pathlib import Path
from statistics import NormalDist
import numpy as np, pyarrow as pa
import ldpql
from ldpql import connection
from ldpql.planner import quantile as planner

HERE = Path(__file__).parent
Z = {c: NormalDist().inv_cdf(0.5 + c / 2) for c in (0.9, 0.95)}

_orig_shown = planner.shown_rank_error
def _shown(answer, tau, sigma, z):
    answer.extra["shown"] = {c: _orig_shown(answer, tau, sigma, zz) for c, zz in Z.items()}
    answer.extra["sigma_used"] = sigma
    return _orig_shown(answer, tau, sigma, z)
planner.shown_rank_error = _shown

SEEN = []
_orig_sel = connection.select_result
def _sel(p, cells, estimates, *a, **k):
    out = _orig_sel(p, cells, estimates, *a, **k)
    SEEN.append((p, cells, p.answers(estimates), estimates))
    return out
connection.select_result = _sel


def rng(*k):
    return np.random.default_rng([1717, *k])


def cells():
    d = {}
    K = 200_001
    d["C1"] = dict(K=K, n=2000, eps=8, taus=(0.05, 0.3, 0.5, 0.9),
                   x=np.minimum(rng(1).zipf(1.3, 2000) - 1, K - 1))
    n = 2000   # two atoms in adjacent bins (256 bins of 782 coins): neither is heavier than the other
    x = np.concatenate([np.full(500, 100), np.full(500, 900), rng(2).integers(0, K, n - 1000)])
    d["C2"] = dict(K=K, n=n, eps=8, taus=(0.1, 0.35), x=x)
    K2, n = 65536, 20000   # a 15% atom inside a smooth normal bump (64 bins of 1024)
    x = np.concatenate([np.full(3000, 30500), np.clip(np.rint(rng(3).normal(30000, 2000, n - 3000)), 0, K2 - 1)])
    d["C3"] = dict(K=K2, n=n, eps=4, taus=(0.25, 0.5, 0.75), x=x)
    x = np.concatenate([np.full(6000, 1023), rng(4).integers(1024, K2, n - 6000)])   # F = 0.3 at a bin's last coin
    d["C4"] = dict(K=K2, n=n, eps=4, taus=(0.29, 0.3, 0.31), x=x)
    K3, n = 1001, 500   # small n, 16 bins of 63 coins
    x = np.concatenate([np.full(100, 500), np.clip(rng(5).poisson(300, n - 100), 0, K3 - 1)])
    d["C5"] = dict(K=K3, n=n, eps=2, taus=(0.1, 0.5, 0.9), x=x)
    n = 20000   # low eps: 16 bins of 12501 coins, atom at 0 plus lognormal
    x = np.concatenate([np.zeros(6000, int), np.clip(np.rint(rng(6).lognormal(7, 1.5, n - 6000)), 0, K - 1)])
    d["C6"] = dict(K=K, n=n, eps=1, taus=(0.1, 0.5, 0.9), x=x)
    n = 200_000   # narrow normal peak inside one bin, OUE regime (64 bins of 1024)
    x = np.clip(np.rint(rng(7).normal(32768 + 512, 300, n)), 0, K2 - 1)
    d["C7"] = dict(K=K2, n=n, eps=2, taus=(0.3, 0.5), x=x)
    d["C8"] = dict(d["C1"], taus=(0.05, 0.95))   # one zoomed tau, one not: both read from the second half
    n = 2000   # a narrow normal straddling a bin edge (256 bins of 256 coins): two heavy neighbours
    x = np.clip(np.rint(rng(9).normal(256 * 128, 60, n)), 0, K2 - 1)
    d["C10"] = dict(K=K2, n=n, eps=8, taus=(0.25, 0.5, 0.75), x=x)
    n = 200_000   # smooth bump exactly filling a bin at the median: the one-round interpolation is right
    x = np.concatenate([rng(11).integers(32768, 32768 + 1024, n // 5), rng(11).integers(0, K2, n - n // 5)])
    d["C11"] = dict(K=K2, n=n, eps=2, taus=(0.5,), x=x)
    sizes = {"a": 500, "b": 2000, "c": 20000}   # GROUP BY, Zipf per group
    d["C9"] = dict(K=K, eps=8, taus=(0.05, 0.5), group=sizes,
                   x=np.concatenate([np.minimum(rng(12, i).zipf(1.3, s) - 1, K - 1) for i, s in enumerate(sizes.values())]))
    # P cells: where the planner itself picks the histogram (grid_choice17.txt), written before their results
    K2, n = 65536, 2000   # eps 4, 64 bins GRR, a zoom goes to OUE over ~319 cells
    x = np.clip(np.rint(rng(21).normal(30 * 1024 + 512, 300, n)), 0, K2 - 1)   # a narrow bump centred in one bin
    d["P1"] = dict(K=K2, n=n, eps=4, taus=(0.1, 0.5, 0.9), x=x)
    x = np.concatenate([np.zeros(600, int), np.clip(np.rint(rng(22).lognormal(8, 1.2, n - 600)), 0, K2 - 1)])
    d["P2"] = dict(K=K2, n=n, eps=4, taus=(0.1, 0.5, 0.9), x=x)
    n = 2000   # eps 6, 256 bins of 782 GRR both rounds: a 10% atom inside a smooth normal
    x = np.concatenate([np.full(200, 100300), np.clip(np.rint(rng(23).normal(100000, 15000, n - 200)), 0, K - 1)])
    d["P3"] = dict(K=K, n=n, eps=6, taus=(0.25, 0.5, 0.75), x=x)
    return d


def coin_err(cdf, v, tau):
    return max(0.0, (cdf[v - 1] if v > 0 else 0.0) - tau, tau - cdf[v])


def run(name, spec, reps, arms):
    K, taus = spec["K"], spec["taus"]
    group = spec.get("group")
    cols = {"x": spec["x"].astype(np.int64)}
    if group:
        cols["g"] = np.repeat(list(group), list(group.values()))
    con = ldpql.connect(evaluation=True)
    con.register("t", pa.table(cols), private={"x": {"between": (0, K - 1), "integer": True, "not_null": True}},
                 public=["g"] if group else [], budget=1e12)
    keys = list(group) if group else [""]
    cdfs = {k: np.cumsum(np.bincount(cols["x"][cols["g"] == k] if group else cols["x"], minlength=K)) /
            (group[k] if group else len(cols["x"])) for k in keys}
    out = []
    for arm in arms:
        mech = {"zoom": "histogram", "one": "histogram", "bayes": "bayess"}[arm]
        items = ", ".join(f"LDP_QUANTILE(x, {t}, mechanism => '{mech}') AS q{i}" for i, t in enumerate(taus))
        opts = ", rounds = 1" if arm == "one" else ""
        sql = f"SELECT {'g, ' if group else ''}{items} FROM t{' GROUP BY g' if group else ''} EPSILON {spec['eps']}"
        t0 = time.time()
        for t in range(reps):
            con.sql(f"{sql} OPTIONS (seed = {1717000 + t}, confidence = 0.95{opts})")
            p, cs, answers, ests = SEEN[-1]
            for (ai, ci), a in answers.items():
                tau = taus[ai]
                key = cs[ci].key[0] if group else ""
                cdf = cdfs[key]
                coin = int(a.extra["coin"])
                err = coin_err(cdf, coin, tau)
                lo, hi = a.extra["interval"](0.95) if "interval" in a.extra else (np.array([np.nan]),) * 2
                lo, hi = int(np.ceil(lo[0])), int(np.floor(hi[0]))
                cert = (cdf[hi] >= tau - 1e-12) and ((cdf[lo - 1] if lo > 0 else 0.0) <= tau + 1e-12)
                rel = ests[(ai, ci)] if (ai, ci) in ests else None  # noqa: F841
                zoomed = None
                for e in ests.values():
                    if "zoomed" in e.extra:
                        zoomed = len(e.extra["zoomed"])
                out.append(dict(cell=name, arm=arm, t=t, tau=tau, group=key, n=int(cs[ci].n), coin=coin, err=err,
                                shown95=a.extra["shown"][0.95], shown90=a.extra["shown"][0.9],
                                zsig95=Z[0.95] * a.extra["sigma_used"], cert=int(cert), zoomed=zoomed,
                                uw=a.extra.get("unit_width")))
        print(f"{name} {arm}: {reps} runs in {time.time() - t0:.1f}s", flush=True)
    return out


if __name__ == "__main__":
    reps = int(sys.argv[1])
    names = sys.argv[2].split(",")
    arms = sys.argv[3].split(",") if len(sys.argv) > 3 else ["zoom", "one", "bayes"]
    d = cells()
    for name in names:
        rows = run(name, d[name], reps, arms)
        path = HERE / f"sim17_{name}.csv"
        with open(path, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=list(rows[0]))
            w.writeheader()
            w.writerows(rows)

"""Audit 15: dig into sql15 S5 (GROUP BY, 3 taus, group b n = 1,700, tau 0.9 under at 95%): which mechanism, how
often at 80/90/95%, and the same statement WITHOUT GROUP BY on group b's data alone (is it the group or the release?).
Seeds OPTIONS (seed = 1517000 + t) as sql15.py.     nice python dig15_groupby.py 200 -> dig15_groupby.txt"""
from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path

import numpy as np
import pyarrow as pa

import ldpql
from common15 import Shape15, clopper
from sql15 import runs

HERE = Path(__file__).parent


def main(reps):
    r = np.random.default_rng([1517, 5])
    sizes = {"a": 300, "b": 1700}
    g = np.repeat(list(sizes), list(sizes.values()))
    x = np.concatenate([r.beta(50, 50, sizes["a"]), r.beta(20, 60, sizes["b"])])
    b = Shape15("b", x[g == "b"], 0.0, 1.0, False, 64)
    taus = (0.1, 0.5, 0.9)
    out = []
    for label, data, group in (("GROUP BY", {"g": g, "x": x}, True), ("group b alone", {"g": g[g == "b"], "x": b.x}, False)):
        for conf in (0.8, 0.9, 0.95):
            con = ldpql.connect(evaluation=True)
            con.register("t", pa.table(data), private={"x": {"between": (0.0, 1.0)}}, public=["g"], budget=1e9)
            sql = ("SELECT " + ("g, " if group else "") + ", ".join(f"LDP_QUANTILE(x, {t}, resolution => 64) AS q{i}" for i, t in enumerate(taus))
                   + " FROM t" + (" GROUP BY g" if group else "") + f" EPSILON 2")
            sql_c = sql
            errs, shown, mech, ks = [], [], Counter(), []
            for res, p, cells, answers in runs(con, sql_c + f" OPTIONS (confidence = {conf}) --", reps) if False else runs_conf(con, sql_c, reps, conf):
                for (ai, ci), a in answers.items():
                    if taus[ai] != 0.9 or (group and cells[ci].key[0] != "b"):
                        continue
                    v = int(a.extra["coin"])
                    errs.append(b.value_error(v, 0.9))
                    shown.append(a.extra["rank_error"])
                    mech[a.extra.get("mechanism")] += 1
            e, s = np.array(errs), np.array(shown)
            k = int(np.sum(e <= s + 1e-12))
            line = (f"{label:14s} conf {conf}: value cov {k / len(e):.3f} CP {clopper(k, len(e))} mean err {e.mean():.4f} "
                    f"p{conf:.0%} err {np.quantile(e, conf):.4f} mean shown {s.mean():.4f} mechanisms {dict(mech)}")
            print(line, flush=True)
            out.append(line)
    (HERE / "dig15_groupby.txt").write_text("\n".join(out) + "\n")


def runs_conf(con, sql, reps, conf):
    import sqlpath
    with sqlpath.spy() as seen:
        for t in range(reps):
            res = con.sql(f"{sql} OPTIONS (seed = {1517000 + t}, confidence = {conf})")
            p, cells, answers = seen[-1]
            yield res, p, cells, answers


if __name__ == "__main__":
    main(int(sys.argv[1]))

"""Audit 17: privacy bookkeeping of the zoom under GROUP BY, several quantiles, split = 'users', PRIVACY UNIT, WHERE,
per-user and exact paths (and Spark with --spark). Every round the executor drives is logged (aggregate, cell, user
interval inside the aggregate's share, randomizer, ε, cells). Checked: per (aggregate, cell) the rounds' user intervals
are disjoint and each at the aggregate's ε; the per-user scans the statement makes (DuckDB queries counted).

    nice -n 10 python priv17.py [--spark]
"""
import sys, time
from collections import defaultdict
import numpy as np, pyarrow as pa, ldpql
from ldpql import executor as X

LOG = []
_adv = X.Executor._advance
def adv(self, t, reply):
    _adv(self, t, reply)
    if t.round is not None:
        a = self._plan.aggregates[t.agg]
        LOG.append((t.agg, t.cell, a.users, t.round.users, t.round.randomizer.name, t.round.randomizer.epsilon,
                    t.round.encoding.size, a.epsilon))
X.Executor._advance = adv

SCANS = [0]
def count_calls(cls, name):
    f = getattr(cls, name)
    def g(self, *a, **k):
        SCANS[0] += 1
        return f(self, *a, **k)
    setattr(cls, name, g)

K = 200_001
rng = np.random.default_rng([1717, 99])
G = 40
sizes = rng.integers(300, 3000, G)
g = np.repeat([f"g{i:02d}" for i in range(G)], sizes)
# half the groups Zipf (bin 0 heavy -> zoom), half uniform (pooled)
x = np.concatenate([np.minimum(rng.zipf(1.3, s) - 1, K - 1) if i % 2 == 0 else rng.integers(0, K, s)
                    for i, s in enumerate(sizes)])
uid = np.arange(len(x)) // 1   # one row per unit
pub = rng.integers(0, 2, len(x))

spark = "--spark" in sys.argv
con = ldpql.connect(evaluation=True, backend="spark" if spark else "duckdb")
if spark:
    from ldpql.backends.spark import SparkBackend
    count_calls(SparkBackend, "batches"); count_calls(SparkBackend, "value_counts")
else:
    from ldpql.backends.duckdb import DuckDBBackend
    count_calls(DuckDBBackend, "batches"); count_calls(DuckDBBackend, "value_counts")
con.register("t", pa.table({"g": g, "p": pub, "uid": uid, "x": x}),
             private={"x": {"between": (0, K - 1), "integer": True}}, public=["g", "p"], budget=1e9,
             privacy_unit="uid")

STMTS = [
    ("group by, two taus", "SELECT g, LDP_QUANTILE(x, 0.05, mechanism => 'histogram') AS a, "
     "LDP_QUANTILE(x, 0.6, mechanism => 'histogram') AS b FROM t GROUP BY g EPSILON 8"),
    ("split users + count + where", "SELECT g, LDP_QUANTILE(x, 0.05, mechanism => 'histogram') AS a, "
     "LDP_AVG(x) AS m FROM t WHERE p = 1 GROUP BY g EPSILON 8 OPTIONS (split = 'users')"),
]
for sim in ("exact", "per_user"):
    for name, q in STMTS:
        LOG.clear(); SCANS[0] = 0
        t0 = time.time()
        ok = True
        try:
            res = con.sql(f"{q[:-0] if False else q} ".replace("EPSILON 8", "EPSILON 8") +
                          ("OPTIONS (seed = 3, simulation = '%s')" % sim if "OPTIONS" not in q else "")
                          if "OPTIONS" not in q else q.replace("OPTIONS (", f"OPTIONS (seed = 3, simulation = '{sim}', "))
        except Exception as e:
            ok = False
            print(f"{sim:9} {name}: ERROR {type(e).__name__}: {e}")
        dt = time.time() - t0
        per = defaultdict(list)
        for agg, cell, share, users, rname, eps, size, aeps in LOG:
            per[(agg, cell)].append((users, rname, eps, size, aeps, share))
        bad = []
        zoomed = 0
        for key, rs in per.items():
            iv = sorted(r[0] for r in rs)
            if any(iv[i][1] > iv[i + 1][0] for i in range(len(iv) - 1)):
                bad.append((key, "overlap", iv))
            if any(abs(r[2] - r[4]) > 1e-9 for r in rs):
                bad.append((key, "eps", rs))
            if len(rs) == 2 and rs[1][3] != rs[0][3]:
                zoomed += 1
        print(f"{sim:9} {name}: ok={ok} {len(per)} (agg, cell) tasks, {zoomed} zoomed, {SCANS[0]} backend reads, "
              f"{dt:.1f}s; violations: {bad[:3]}", flush=True)
        if ok:
            shares = sorted({(r[0], r[2]) for r in LOG})
            print("           aggregate shares x round users:", sorted({(r[0], r[2], r[3], r[4], r[5]) for r in LOG})[:8])
# per-user scans: zoom versus ROUNDS 1
for opt in ("", ", rounds = 1"):
    SCANS[0] = 0
    t0 = time.time()
    con.sql(f"SELECT g, LDP_QUANTILE(x, 0.05, mechanism => 'histogram') FROM t GROUP BY g EPSILON 8 "
            f"OPTIONS (seed = 4, simulation = 'per_user'{opt})")
    print(f"per_user GROUP BY {G} groups{opt or ' (zoom)'}: {SCANS[0]} backend reads, {time.time() - t0:.1f}s")
con.close()

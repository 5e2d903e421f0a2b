"""Audit 17: ROUNDS 1 / OPTIONS (rounds = 1) / SET rounds = 1 / rounds = 'auto' / ROUNDS 2 and the zoom: what EXPLAIN
says and what runs (the rounds the executor actually drives, recorded by wrapping Executor._advance)."""
import numpy as np, pyarrow as pa, ldpql
from ldpql import executor as X

K = 200_001
x = np.minimum(np.random.default_rng(14).zipf(1.3, 2000) - 1, K - 1)
LOG = []
_adv = X.Executor._advance
def adv(self, t, reply):
    _adv(self, t, reply)
    if t.round is not None:
        LOG.append((t.agg, t.cell, t.round.users, t.round.randomizer.name, t.round.randomizer.epsilon,
                    t.round.encoding.size))
X.Executor._advance = adv

def con_with(rounds=None):
    con = ldpql.connect(evaluation=True)
    con.register("t", pa.table({"x": x}), private={"x": {"between": (0, K - 1), "integer": True}}, budget=1e9,
                 rounds=rounds)
    return con

Q = "SELECT LDP_QUANTILE(x, 0.05, mechanism => 'histogram') AS q FROM t EPSILON 8"
cases = [("table default", None, [], ""), ("table ROUNDS 1", 1, [], ""), ("table ROUNDS 2", 2, [], ""),
         ("OPTIONS rounds=1", None, [], ", rounds = 1"), ("SET rounds=1", None, ["SET rounds = 1"], ""),
         ("SET rounds=1 + OPTIONS rounds='auto'", None, ["SET rounds = 1"], ", rounds = 'auto'"),
         ("table ROUNDS 1 + OPTIONS rounds=5", 1, [], ", rounds = 5")]
for name, tr, pre, opt in cases:
    con = con_with(tr)
    for s in pre:
        con.sql(s)
    try:
        ex = str(con.sql(f"EXPLAIN {Q} OPTIONS (seed = 1{opt})"))
        lines = [l.strip() for l in ex.splitlines() if any(k in l for k in ("mechanism *", "histogram   ", "zoom  "))]
        LOG.clear()
        r = con.sql(f"{Q} OPTIONS (seed = 1{opt})")
        print(f"== {name}: ran {len(LOG)} round(s): {LOG}; answer {r.fetchall()}")
    except Exception as e:
        lines = [f"ERROR {type(e).__name__}: {e}"]
        print(f"== {name}")
    for l in lines:
        print("   ", l[:160])

"""Audit 17: LDP_QUANTILE (histogram, zoomed) beside another aggregate under GROUP BY + WHERE + split = 'users' on
the exact path: the statement fails after reading private data (its charge stands). Prints the hidden cause, and the
same statement with rounds = 1 / without the WHERE / without GROUP BY / per_user."""
import traceback
import numpy as np, pyarrow as pa, ldpql

K = 200_001
rng = np.random.default_rng([1717, 99])
G = 4
sizes = rng.integers(300, 3000, G)
g = np.repeat([f"g{i}" for i in range(G)], sizes)
x = np.concatenate([np.minimum(rng.zipf(1.3, s) - 1, K - 1) for s in sizes])
p = rng.integers(0, 2, len(x))
con = ldpql.connect(evaluation=True)
con.register("t", pa.table({"g": g, "p": p, "x": x}), private={"x": {"between": (0, K - 1), "integer": True}},
             public=["g", "p"], budget=1e9)
base = "SELECT {gsel}LDP_QUANTILE(x, 0.05, mechanism => 'histogram') AS a, {other} AS m FROM t {where}{gb}EPSILON 8 " \
       "OPTIONS (seed = 3, split = 'users'{opt})"
for label, kw in [("GROUP BY + WHERE + AVG", dict()), ("... rounds = 1", dict(opt=", rounds = 1")),
                  ("... no WHERE", dict(where="")), ("... no GROUP BY", dict(gsel="", gb="")),
                  ("... LDP_COUNT(*) instead of AVG", dict(other="LDP_COUNT(*)")),
                  ("... simulation = 'per_user'", dict(opt=", simulation = 'per_user'")),
                  ("... split = 'epsilon'", dict(opt="", split="eps"))]:
    args = dict(gsel="g, ", other="LDP_AVG(x)", where="WHERE p = 1 ", gb="GROUP BY g ", opt="")
    args.update({k: v for k, v in kw.items() if k != "split"})
    q = base.format(**args)
    if kw.get("split"):
        q = q.replace("split = 'users'", "split = 'epsilon'")
    before = con.sql("SHOW LEDGER").fetchall()
    try:
        r = con.sql(q)
        print(f"{label}: ok, {len(r.fetchall())} rows")
    except Exception as e:
        cause = e.__cause__ or e.__context__
        print(f"{label}: {type(e).__name__}; cause: {type(cause).__name__}: {cause}")
        if cause is not None:
            tb = traceback.extract_tb(cause.__traceback__)
            print("    at", " <- ".join(f"{f.name}:{f.lineno}" for f in tb[-4:][::-1]))
    print("    ledger rows:", len(con.sql("SHOW LEDGER").fetchall()) - len(before))

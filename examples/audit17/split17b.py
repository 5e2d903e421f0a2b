"""Audit 17: priv17's failing statement, its hidden cause, and which ingredient matters (run one at a time)."""
import sys, traceback
import numpy as np, pyarrow as pa, ldpql

K = 200_001
rng = np.random.default_rng([1717, 99])
G = int(sys.argv[1]) if len(sys.argv) > 1 else 40
sizes = rng.integers(300, 3000, G)
g = np.repeat([f"g{i:02d}" for i in range(G)], sizes)
x = np.concatenate([np.minimum(rng.zipf(1.3, s) - 1, K - 1) if i % 2 == 0 else rng.integers(0, K, s)
                    for i, s in enumerate(sizes)])
pub = rng.integers(0, 2, len(x))
con = ldpql.connect(evaluation=True)
unit = "--unit" in sys.argv
con.register("t", pa.table({"g": g, "p": pub, "uid": np.arange(len(x)), "x": x}),
             private={"x": {"between": (0, K - 1), "integer": True}}, public=["g", "p"], budget=1e9,
             privacy_unit="uid" if unit else None)
q = ("SELECT g, LDP_QUANTILE(x, 0.05, mechanism => 'histogram') AS a, LDP_AVG(x) AS m FROM t WHERE p = 1 GROUP BY g "
     "EPSILON 8 OPTIONS (seed = 3, simulation = 'exact', split = 'users'{})")
for opt in ("", ", rounds = 1"):
    try:
        con.sql(q.format(opt)).fetchall()
        print(f"G={G} unit={unit}{opt}: ok")
    except Exception as e:
        cause = e.__cause__ or e.__context__
        print(f"G={G} unit={unit}{opt}: {type(e).__name__}; hidden cause {type(cause).__name__}: {cause}")
        if cause is not None:
            print("   ", " <- ".join(f"{f.filename.split('/')[-1]}:{f.name}:{f.lineno}"
                                     for f in traceback.extract_tb(cause.__traceback__)[::-1][:5]))

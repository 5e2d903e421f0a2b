"""(3) Memory of seeded EVALUATE under a users split: the counts cache is keyed by (expr, where, Slice incl. the run's
salt); slices that are not 'everyone' differ every run, so each run adds its own value counts and none is dropped
until the statement ends. Before 90e12d0 the per-user path did not cache them. Continuous data (every value
distinct). Prints maxrss after each block of runs; run under both trees."""
import sys, time, resource, numpy as np, pandas as pd, ldpql
N = int(sys.argv[1]) if len(sys.argv) > 1 else 1_000_000
reps = int(sys.argv[2]) if len(sys.argv) > 2 else 20
rng = np.random.default_rng(1)
df = pd.DataFrame({"x": rng.uniform(0, 100, N), "y": rng.uniform(0, 100, N)})
con = ldpql.connect(evaluation=True)
con.register("t", df, private={"x": {"between": (0, 100), "not_null": True}, "y": {"between": (0, 100), "not_null": True}}, budget=1e12)
rss = lambda: resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(f"{ldpql.__file__}: N={N:,} data loaded, maxrss {rss():.0f} MB", flush=True)
for r in (1, reps):
    t = time.time()
    out = con.sql(f"EVALUATE SELECT LDP_MEAN(x), LDP_MEAN(y) FROM t EPSILON 2 OPTIONS (split = 'users', seed = 1) REPEAT {r}").df()
    print(f"REPEAT {r}: {time.time()-t:.1f}s maxrss {rss():.0f} MB  rmse {out.rmse.tolist()}", flush=True)

"""Run time of one SELECT with many GROUP BY groups of different sizes and spreads (distinct (n, q̂) keys for
rare.halfwidth's cache), ε = 16, on the tree given by PYTHONPATH; twice (the second run hits the cache)."""
import time, resource, numpy as np, pandas as pd, ldpql
rng = np.random.default_rng(4)
sizes = np.tile(np.arange(1, 41), 50)                    # 2,000 groups, sizes 1..40
g = np.repeat(np.arange(len(sizes)), sizes)
centre = rng.uniform(0, 100, len(sizes))[g]
spread = rng.uniform(0, 50, len(sizes))[g]
x = np.clip(centre + spread * rng.standard_normal(len(g)), 0, 100)
con = ldpql.connect(evaluation=True)
con.register("t", pd.DataFrame({"x": x, "g": g}), private={"x": {"between": (0, 100), "not_null": True}}, public=["g"], budget=1e9)
for rep in range(2):
    t = time.time()
    con.sql(f"SELECT g, LDP_MEAN(x) FROM t GROUP BY g EPSILON 16 OPTIONS (seed = {rep + 1})")
    el = time.time() - t
    try:
        from ldpql.mechanisms import rare
        cache = len(rare._SEEN)
    except Exception:
        cache = "-"
    print(f"{ldpql.__file__}: {len(sizes)} groups, {len(g)} users: SELECT {el:.1f}s (run {rep+1}, cache {cache}); "
          f"maxrss {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss/1024:.0f} MB", flush=True)

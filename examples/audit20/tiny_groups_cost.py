"""(cost) One SELECT over many tiny GROUP BY groups (sizes 1-16) at ε = 0.5 / 2, PM (planner) and forced Hybrid: the
q-free path (n < 3; Hybrid with no PM report) takes the max over 100 brackets per distinct (n, confidence); time of the
first (cold) and second (warm) SELECT, and maxrss."""
import sys, time, resource, numpy as np, pandas as pd, ldpql
rng = np.random.default_rng(4)
sizes = np.tile(np.arange(1, 17), 60)                    # 960 groups, sizes 1..16
g = np.repeat(np.arange(len(sizes)), sizes)
x = rng.uniform(0, 100, len(g))
for eps in [float(e) for e in (sys.argv[1].split(",") if len(sys.argv) > 1 else ["0.5", "2"])]:
    for agg in ("LDP_MEAN(x)", "LDP_MEAN(x, mechanism => 'hybrid')"):
        con = ldpql.connect(evaluation=True)
        con.register("t", pd.DataFrame({"x": x, "g": g}), private={"x": {"between": (0, 100), "not_null": True}}, public=["g"], budget=1e12)
        for rep in range(2):
            t = time.time()
            con.sql(f"SELECT g, {agg} FROM t GROUP BY g EPSILON {eps} OPTIONS (seed = {rep + 1})")
            print(f"{ldpql.__file__}: eps={eps} {agg}: {len(sizes)} groups: SELECT {time.time()-t:.1f}s (run {rep+1}) "
                  f"maxrss {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss/1024:.0f} MB", flush=True)

import numpy as np, pyarrow as pa, ldpql, time, itertools
from scipy.stats import beta
R = 200
def cp(k, n):
    lo = beta.ppf(0.025, k, n - k + 1) if k > 0 else 0.0
    hi = beta.ppf(0.975, k + 1, n - k) if k < n else 1.0
    return lo, hi
def data(kind, n, rng):
    if kind == "skew": return np.clip(np.exp(rng.normal(0, 1, n)), 0, 10)
    if kind == "bound": return np.full(n, 10.0)
    return rng.uniform(0, 10, n)
out = open("examples/audit7_nulls/grid.csv", "w")
out.write("agg,kind,n,null,eps,mech,coverage,lo,hi,bias,rmse,note\n")
t0 = time.time()
for agg, kind, n, nf, eps in itertools.product(("AVG",), ("skew", "bound", "unif"), (500, 5000), (0.0, 0.5, 0.8, 0.95), (0.5, 2, 16)):
    rng = np.random.default_rng(hash((kind, n, nf, eps)) % 2**32)
    x = data(kind, n, rng); null = rng.random(n) < nf
    if null.all(): null[0] = False
    con = ldpql.connect(seed=int(n * 7 + nf * 100 + eps * 3), evaluation=True)
    con.register("t", pa.table({"x": pa.array(x, mask=null)}), private={"x": {"between": (0, 10)}}, budget=1e12)
    q = f"SELECT LDP_{agg}(x) FROM t EPSILON {eps}"
    mech = con.sql("EXPLAIN " + q).plan.aggregates[0].chosen.mechanism
    r = con.sql(f"EVALUATE {q} REPEAT {R}").fetchall()[0]
    cov = r[-1]; k = round(cov * R); lo, hi = cp(k, R)
    out.write(f"{agg},{kind},{n},{nf},{eps},{mech},{cov:.3f},{lo:.3f},{hi:.3f},{r[5]:.4g},{r[6]:.4g},\n"); out.flush()
print("done", time.time() - t0)

import numpy as np, pyarrow as pa, ldpql, time, itertools
from scipy.stats import beta
R = 200
def cp(k, n):
    lo = beta.ppf(0.025, k, n - k + 1) if k > 0 else 0.0
    hi = beta.ppf(0.975, k + 1, n - k) if k < n else 1.0
    return lo, hi
out = open("examples/audit7_nulls/joint.csv", "w")
out.write("d,nullable,eps,mech,col,null,coverage,lo,hi,bias,rmse\n")
t0 = time.time()
for d, nullable, eps, mech in itertools.product((2, 4, 8, 16), (False, True), (1, 4), ("collision", "coco")):
    if nullable and mech == "coco": continue
    n = 5000
    rng = np.random.default_rng(d * 100 + eps + nullable)
    cols, priv, nfs = {}, {}, []
    for j in range(d):
        v = np.clip(rng.beta(0.5, 3, n) * 10 if j % 2 else rng.uniform(6, 10, n), 0, 10)
        nf = (0.0, 0.5, 0.8, 0.3)[j % 4] if nullable else 0.0
        m = rng.random(n) < nf
        cols[f"x{j}"] = pa.array(v, mask=m)
        priv[f"x{j}"] = {"between": (0, 10)} if nullable and nf > 0 else {"between": (0, 10), "not_null": True}
        nfs.append(nf)
    con = ldpql.connect(seed=d * 11 + eps, evaluation=True)
    con.register("t", pa.table(cols), private=priv, budget=1e12)
    sel = ", ".join(f"LDP_AVG(x{j})" for j in range(d))
    q = f"SELECT {sel} FROM t EPSILON {eps} OPTIONS (mechanism = '{mech}')"
    rows = con.sql(f"EVALUATE {q} REPEAT {R}").fetchall()
    for j, r in enumerate(rows):
        cov = r[-1]; k = round(cov * R); lo, hi = cp(k, R)
        out.write(f"{d},{nullable},{eps},{mech},{j},{nfs[j]},{cov:.3f},{lo:.3f},{hi:.3f},{r[5]:.4g},{r[6]:.4g}\n"); out.flush()
    print(d, nullable, eps, mech, time.time() - t0, flush=True)
print("done", time.time() - t0)

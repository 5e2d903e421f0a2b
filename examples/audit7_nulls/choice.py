import numpy as np, pyarrow as pa, ldpql, re
R = 100
for d, eps in [(2, 1), (4, 1), (8, 1), (4, 4)]:
    rng = np.random.default_rng(d)
    n = 5000
    cols = {f"x{j}": rng.uniform(0, 10, n) for j in range(d)}
    con = ldpql.connect(seed=d, evaluation=True)
    con.register("t", pa.table(cols), private={c: {"between": (0, 10), "not_null": True} for c in cols}, budget=1e12)
    sel = ", ".join(f"LDP_AVG({c})" for c in cols)
    q = f"SELECT {sel} FROM t EPSILON {eps}"
    ex = str(con.sql("EXPLAIN " + q))
    split = re.search(r"split\s+(.*)", ex).group(1)[:260]
    res = {}
    for name, opt in [("auto", ""), ("split_eps", " OPTIONS (split = 'epsilon')"), ("split_users", " OPTIONS (split = 'users')"), ("collision", " OPTIONS (mechanism = 'collision')"), ("coco", " OPTIONS (mechanism = 'coco')")]:
        rows = con.sql(f"EVALUATE {q}{opt} REPEAT {R}").fetchall()
        res[name] = np.mean([r[6] ** 2 for r in rows])
    print(d, eps, {k: round(v, 4) for k, v in res.items()}, "|", split, flush=True)

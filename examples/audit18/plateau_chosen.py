"""The xfail's plateau data (half on 0..99, half on 900..1023, integer 0..1023), statements whose plan the planner
picks itself (no mechanism =>, no OPTIONS): is the tree chosen, and what is the median's rank error?"""
import sys, time, numpy as np, pandas as pd, ldpql
print(ldpql.__file__)
for n, eps, items, reps in ((20_000, 4, "LDP_MEDIAN(x)", 100),
                            (2000, 2, ", ".join(f"LDP_QUANTILE(x, {t})" for t in (0.1, 0.3, 0.5, 0.7, 0.9)), 100)):
    rng = np.random.default_rng([16, 3])
    x = np.where(rng.random(n) < 0.5, rng.integers(0, 100, n), rng.integers(900, 1024, n))
    F = np.cumsum(np.bincount(x, minlength=1024)) / n
    con = ldpql.connect(evaluation=True)
    con.register("t", pd.DataFrame({"x": x}), private={"x": {"between": (0, 1023), "integer": True}}, budget=1e12)
    q = f"SELECT {items} FROM t EPSILON {eps}"
    p = con.sql(f"EXPLAIN {q}").plan
    col = [a.output for a in p.aggregates if "0.5" in a.call.sql() or "MEDIAN" in a.call.sql().upper()][0]
    t0, errs, inside = time.process_time(), [], []
    for s in range(reps):
        v = int(round(con.sql(f"{q} OPTIONS (seed = {s})").df()[col][0]))
        lo, hi = (F[v - 1] if v > 0 else 0.0), F[v]
        errs.append(max(lo - 0.5, 0.5 - hi, 0.0))
        inside.append(100 <= v <= 899)
    print(f"n={n} eps={eps} chosen={p.aggregates[0].chosen.mechanism} {q}\n  {reps} runs: mean rank error of the "
          f"median {np.mean(errs):.4f}, max {np.max(errs):.4f}, share answered in 100..899 (rank error 0) "
          f"{np.mean(inside):.2f}  [{time.process_time() - t0:.0f} s cpu]")

"""The boundary atom: at ε = 30, n = 10, every user at 50 on [0, 100] (exactly between two PM grid inputs), the mean's
error is a lattice variable; the 90% half-width is exactly one of its atoms, and whether the truth at that atom is
inside is decided by float rounding. SELECT with seeds 1..400: how far outside the interval the truth is when it misses."""
import numpy as np, pandas as pd, ldpql
con = ldpql.connect(evaluation=True)
con.register("t", pd.DataFrame({"x": np.full(10, 50.0)}), private={"x": {"between": (0, 100), "not_null": True}}, budget=1e9)
miss, hair, examples = 0, 0, []
for seed in range(1, 401):
    res = con.sql(f"SELECT LDP_MEAN(x) FROM t EPSILON 30 OPTIONS (confidence = 0.9, seed = {seed})")
    lo, hi, _ = res.intervals()[0][0]
    v = res.fetchall()[0][0]
    if not lo <= 50.0 <= hi:
        miss += 1
        gap = max(lo - 50.0, 50.0 - hi)
        if gap < 1e-9 * max(hi - lo, 1e-300):
            hair += 1
            if len(examples) < 3:
                examples.append((seed, v, lo, hi, gap))
print(f"400 seeded SELECTs: {miss} miss the truth 50; {hair} of them by less than 1e-9 of the width (a float tie)")
for seed, v, lo, hi, gap in examples:
    print(f"  seed {seed}: value {v!r}, interval [{lo!r}, {hi!r}], truth 50 outside by {gap:.3g}")

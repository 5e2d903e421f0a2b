"""Can the planner choose the hierarchical tree for a quantile? EXPLAIN over n, eps, domain size, taus, rounds,
postprocess, GROUP BY (public facts only: nothing runs)."""
import itertools, sys, collections, numpy as np, pandas as pd
import ldpql
print(ldpql.__file__)
hits, total, bycol = collections.Counter(), 0, collections.Counter()
examples = []
for n in (300, 1000, 10_000, 100_000, 1_000_000):
    rng = np.random.default_rng(0)
    df = pd.DataFrame({"x": rng.uniform(0, 1, n), "k": rng.integers(0, 16, n), "k256": rng.integers(0, 256, n), "g": rng.integers(0, 4, n)})
    con = ldpql.connect(evaluation=True)
    con.register("t", df, private={"x": (0, 1), "k": {"between": (0, 15), "integer": True}, "k256": {"between": (0, 255), "integer": True}}, public=["g"], budget=1e9)
    for eps, col, taus, opts, grp in itertools.product(
            (0.1, 0.5, 1, 2, 4, 8, 16), ("x", "x|resolution => 1024", "x|resolution => 64", "k", "k256"),
            ((0.5,), (0.1, 0.5, 0.9), (0.1, 0.25, 0.5, 0.75, 0.9), tuple(np.round(np.linspace(0.05, 0.95, 10), 2))),
            ("", "rounds = 1", "rounds = 2", "rounds = 5"), (False, True)):
        post = ""
        c, _, named = col.partition("|")
        items = ", ".join(f"LDP_QUANTILE({c}, {t}{', ' + named if named else ''})" for t in taus)
        q = f"SELECT {'g, ' if grp else ''}{items} FROM t {'GROUP BY g ' if grp else ''}EPSILON {eps}"
        if opts:
            q += f" OPTIONS ({opts})"
        try:
            p = con.sql(f"EXPLAIN {q}").plan
        except Exception as e:
            hits[("error", type(e).__name__)] += 1
            continue
        total += 1
        mech = p.aggregates[0].chosen.mechanism
        hits[mech] += 1
        bycol[(col, n, mech == "hierarchical")] += 1
        if mech == "hierarchical" and len(examples) < 20:
            examples.append((n, q))
print(total, dict(hits))
for k in sorted(bycol): print(k, bycol[k])
for e in examples[:6]:
    print(e)

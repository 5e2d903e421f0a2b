"""Audit 17: where the planner itself picks the histogram, and with which oracle per round (EXPLAIN on dummy data)."""
import re
import numpy as np, pyarrow as pa, ldpql
from ldpql.planner.quantile import histogram_bins
from ldpql.mechanisms.quantile_histogram import bin_width, oracle, zoom_cells
for K in (1001, 65536, 200001):
    for eps in (2, 3, 4, 6, 8):
        for n in (2000, 20000, 200000, 1000000):
            con = ldpql.connect(evaluation=True)
            con.register("t", pa.table({"x": np.zeros(n, np.int64)}),
                         private={"x": {"between": (0, K - 1), "integer": True, "not_null": True}}, budget=1e12)
            for taus in ((0.5,), (0.1, 0.5, 0.9)):
                items = ", ".join(f"LDP_QUANTILE(x, {t})" for t in taus)
                ex = str(con.sql(f"EXPLAIN SELECT {items} FROM t EPSILON {eps}"))
                ch = sorted(set(re.findall(r"mechanism \* (\w+)", ex)))
                b = histogram_bins(eps, n, K, taus); w = bin_width(K, b); nb = -(-K // w)
                fine = nb + -(-w // zoom_cells(w, nb)) - 1
                print(K, eps, n, taus, ch, f"bins={nb} w={w} r1={oracle(eps, nb).name} r2(one zoom)={oracle(eps, fine).name}"
                      f" fine={fine}" if ch == ["histogram"] else "")

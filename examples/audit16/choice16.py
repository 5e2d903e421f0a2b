"""Audit 16: where does the planner choose the one-round tree / histogram? EXPLAIN only (no data read beyond n).
DOUBLE 0..1 at resolution 64 / 1024 / 2^16 and INTEGER 0..100 (one coin per value), one q (0.5) or three (0.1/0.5/0.9),
n = 300 .. 200,000, ε = 1 .. 16.      python choice16.py -> choice16.txt"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa

import ldpql

HERE = Path(__file__).parent


def main():
    out = ["n      eps   " + "  ".join(f"{c:>12s}" for c in ("D64 1q", "D64 3q", "D1024 1q", "D1024 3q", "D2^16 1q",
                                                             "D2^16 3q", "I0..100 1q", "I0..100 3q"))]
    for n in (300, 2000, 20000, 100000, 200000):
        con = ldpql.connect(evaluation=True)
        x = np.random.default_rng(0).random(n)
        con.register("t", pa.table({"x": x, "i": np.floor(x * 101).astype(np.int64)}),
                     private={"x": {"between": (0.0, 1.0)}, "i": {"between": (0, 100), "integer": True}}, budget=1e9)
        for eps in (1, 2, 3, 4, 5, 6, 8, 16):
            row = []
            for col, res in (("x", ", resolution => 64"), ("x", ", resolution => 1024"), ("x", ""), ("i", "")):
                for taus in ((0.5,), (0.1, 0.5, 0.9)):
                    r = con.sql("EXPLAIN SELECT " + ", ".join(f"LDP_QUANTILE({col}, {t}{res})" for t in taus)
                                + f" FROM t EPSILON {eps}")
                    m = [l[0] for l in r.fetchall() if "mechanism *" in l[0]]
                    row.append(m[0].split("*")[1].split(":")[0].strip() if m else "?")
            out.append(f"{n:<7d}{eps:<5g} " + "  ".join(f"{c:>12s}" for c in row))
            print(out[-1], flush=True)
    (HERE / "choice16.txt").write_text("\n".join(out) + "\n")


if __name__ == "__main__":
    main()

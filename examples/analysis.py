"""A scripted analysis with the Python API: register a frame, price two plans, run, and compare mechanisms
in evaluation mode before any collection ships.

    python examples/analysis.py
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

import ldpql

DATA = Path(__file__).resolve().parent / "data" / "people.csv"


def main() -> None:
    frame = pd.read_csv(DATA)

    # Planning: which mechanism and how much error at which ε, before anything is collected.
    lab = ldpql.connect(seed=7, evaluation=True)
    lab.register("people", frame, private={"income": (0, 250000), "city": ["Paris", "Lyon", "Nice"]},
                 public=["region"], budget=100)
    print(lab.explain("SELECT LDP_MEAN(income), LDP_HISTOGRAM(city) FROM people EPSILON 1"))
    for mechanism in ("grr", "oue"):
        ev = lab.sql(f"EVALUATE SELECT LDP_HISTOGRAM(city) FROM people EPSILON 1 "
                     f"OPTIONS (mechanism = '{mechanism}') REPEAT 50")
        rmse = max(row[6] for row in ev.fetchall())
        print(f"{mechanism}: worst-bin RMSE {rmse:.4f} over 50 runs (evaluation only, not private)")

    # The release: a budgeted connection; every answer with its interval and the plan that produced it.
    con = ldpql.connect(seed=7, evaluation=True)
    con.register("people", frame, private={"income": (0, 250000), "city": ["Paris", "Lyon", "Nice"]},
                 public=["region"], budget=2)
    res = con.sql("SELECT region, LDP_MEAN(income) AS mean_income FROM people GROUP BY region EPSILON 1")
    res.show()
    for (region, value), (_, (low, high, conf)) in zip(res.fetchall(), res.intervals()):
        print(f"{region}: {value:,.0f} (between {low:,.0f} and {high:,.0f} with {conf:.0%} confidence)")
    print(f"remaining budget: ε = {con.remaining_budget('people'):g} per user")


if __name__ == "__main__":
    main()

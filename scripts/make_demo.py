"""Regenerate the embedded demo table ``ldpql/data/people.parquet`` (synthetic; reproducible with seed 2024).

    python scripts/make_demo.py

100,000 synthetic people: age (integer), income (log-normal, some above the declared 250,000 bound so that
clamping shows), city (five declared cities plus 4% elsewhere, to fill OTHER), region (public), smoker
(boolean, more likely with age), and a few NULL incomes (so the NULL treatment shows).
"""

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

N = 100_000
OUT = Path(__file__).resolve().parent.parent / "ldpql" / "data" / "people.parquet"


def make(n: int = N, seed: int = 2024) -> pa.Table:
    rng = np.random.default_rng(seed)
    region = rng.choice(["north", "south", "east", "west"], n, p=[0.3, 0.3, 0.2, 0.2])
    age = np.clip(np.round(rng.gamma(7.0, 6.0, n) + np.where(region == "south", 4, 0)), 0, 110).astype(np.int64)
    income = np.round(rng.lognormal(10.4, 0.55, n) * (1 + (age - 40) / 200), 2)
    income_list = income.tolist()
    for i in rng.choice(n, n // 200, replace=False):
        income_list[i] = None
    cities = ["Paris", "Lyon", "Marseille", "Toulouse", "Nice", "Brest", "Dijon"]
    city = rng.choice(cities, n, p=[0.34, 0.22, 0.18, 0.14, 0.08, 0.025, 0.015])
    smoker = rng.random(n) < 0.12 + 0.002 * np.clip(age - 18, 0, 60)
    return pa.table({"person_id": np.arange(1, n + 1), "age": age, "income": pa.array(income_list, pa.float64()),
                     "city": city, "region": region, "smoker": smoker})


if __name__ == "__main__":
    pq.write_table(make(), OUT, compression="zstd")
    print(f"wrote {OUT} ({OUT.stat().st_size:,} bytes)")

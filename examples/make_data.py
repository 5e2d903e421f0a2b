"""Regenerate the small example data files in examples/data/ (synthetic, seed 7).

    python examples/make_data.py
"""

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.csv as pcsv
import pyarrow.parquet as pq

HERE = Path(__file__).resolve().parent / "data"


def main() -> None:
    rng = np.random.default_rng(7)
    n = 5000
    people = pa.table({
        "person_id": np.arange(1, n + 1),
        "age": np.clip(np.round(rng.gamma(7.0, 6.0, n)), 0, 110).astype(np.int64),
        "income": np.round(rng.lognormal(10.4, 0.55, n), 2),
        "city": rng.choice(["Paris", "Lyon", "Nice", "Brest"], n, p=[0.45, 0.3, 0.15, 0.1]),
        "region": rng.choice(["north", "south"], n),
    })
    pcsv.write_csv(people, HERE / "people.csv")
    m = 20000
    base = rng.normal(0, 1, m)
    sensors = pa.table({"device": np.arange(m), "site": rng.choice(["plant_a", "plant_b", "plant_c"], m),
                        "temperature": np.round(20 + 3 * base + rng.normal(0, 1, m), 2),
                        "humidity": np.round(np.clip(55 + 10 * rng.normal(0, 1, m), 0, 100), 1),
                        "vibration": np.round(np.abs(rng.normal(0.3, 0.2, m)), 3)})
    pq.write_table(sensors, HERE / "sensors.parquet")
    print(f"wrote {HERE}/people.csv and sensors.parquet")


if __name__ == "__main__":
    main()

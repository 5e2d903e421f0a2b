"""Why the coverage grid's over-covering rows over-cover: each row whose exact 95% range lies wholly above the
nominal ±2-point band, put in one of four classes, with a proof where the class has one.

- ``atom``: a binary or k-ary randomized response (rr, grr) at a large ε. The estimate equals the truth whenever
  no report involving the bin is flipped, which happens with probability at least
  (1 − (d − 1)q)^{n_j} (1 − q)^{n − n_j}, q = 1/(e^ε + d − 1), for n_j users in the bin among n (fewer users, as
  in a users split or a group, only raise it). Every interval that contains its own estimate therefore covers
  with at least that probability: where it exceeds nominal + 2 points, no interval can be within the band.
- ``boundary``: the truth is 0 (a frequency or count at the edge of its feasible range). Intervals are clipped to
  the feasible range, so one side can never miss: coverage is at least 1 − α/2 for an interval that is nominal
  on each side.
- ``selection``: LDP_TOPK's rank intervals, Bonferroni over the values that could hold the rank (conservative by
  construction; they cover the selected rank, which per-value intervals do not).
- ``other``: none of these; these are the rows a tighter interval could still fix.

    python examples/coverage_overcoverage.py [examples/coverage_results/seam/coverage.csv]
"""

from __future__ import annotations

import math
import sys

import pandas as pd

DECLARED = {"close": 5, "longtail": 30, "boolean": 1}   # declared values per shape (categorical: + OTHER)


def atom_floor(row) -> float | None:
    """The probability that a (k-ary) randomized response leaves this row's estimate at its truth, or None."""
    if row.mechanism not in ("rr", "grr"):
        return None
    shape = row["shape"].split("+")[0]
    d = 2 if row.mechanism == "rr" else DECLARED.get(shape, 0) + 1
    q = 1.0 / (math.exp(row.epsilon) + d - 1)
    users = row.truth if row.family in ("count", "groupby") or row.truth > 1 else row.truth * row.n
    return math.exp(users * math.log1p(-(d - 1) * q) + (row.n - users) * math.log1p(-q))


def classify(rows: pd.DataFrame) -> pd.DataFrame:
    """Each over-covering row with its class and, for atoms, the floor no interval can go below."""
    rows = rows.copy()
    rows["floor"] = [atom_floor(r) for _, r in rows.iterrows()]
    atom = rows.floor.notna() & (rows.floor > rows.nominal + 0.02)
    rows["why"] = "other"
    rows.loc[rows.family.eq("topk"), "why"] = "selection"
    rows.loc[rows.truth.eq(0), "why"] = "boundary"
    rows.loc[atom, "why"] = "atom"
    return rows


def main(path: str) -> None:
    grid = pd.read_csv(path)
    grid = grid[grid.what.eq("interval")]
    over = classify(grid[grid.cov_low > grid.nominal + 0.02])
    print(f"{len(over)} of {len(grid)} interval rows over-cover (exact 95% range wholly above nominal + 2 points)\n")
    print("| class | rows | families | ε | lowest floor |\n|---|---|---|---|---|")
    for why, g in over.groupby("why"):
        floor = f"{g.floor.min():.4f}" if g.floor.notna().any() and why == "atom" else "—"
        print(f"| {why} | {len(g)} | {', '.join(sorted(set(g.family)))} | "
              f"{', '.join(f'{e:g}' for e in sorted(set(g.epsilon)))} | {floor} |")
    rest = over[over.why.eq("other")]
    if len(rest):
        print("\nother rows:\n")
        print(rest[["family", "statement", "n", "epsilon", "nominal", "label", "truth", "coverage", "mechanism"]]
              .to_string(index=False))


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "examples/coverage_results/seam/coverage.csv")

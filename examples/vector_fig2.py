"""Reproduce Fig. 2 of Wang, Li, Li, Li, Yang, Yan, "Differentially Private Numerical Vector Analyses in the Local
and Shuffle Model": the amplification log2(ε₀/ε_c) of n shuffled Collision reports (t = ⌊s e^ε₀ + 2s − 1⌋) by
this paper's tight bound (mixture weight s/Ω), against Feldman-McMillan-Talwar 2023 (stronger clone, 1/(e^ε₀+1)),
Feldman-McMillan-Talwar 2021 (clone, numeric and closed form), Balle et al.'s privacy blanket (Bennett and
Hoeffding, generic randomizer) and Erlingsson et al. 2019; n ∈ {10^4, 10^5}, s ∈ {4, 64}, δ = 0.01/n.

    nice python examples/vector_fig2.py        # CSV + PNG in examples/vector_results (a few minutes)
"""

from __future__ import annotations

import csv
import math
from pathlib import Path

import numpy as np

from ldpql.mechanisms import collision
from ldpql.mechanisms.shuffle import (blanket_central, central_epsilon, erlingsson_central, feldman_central,
                                      fmt21_weights, generic_weights, sparse_weights)

OUT = Path(__file__).parent / "vector_results"
EPS0 = tuple(round(float(e), 3) for e in np.linspace(0.1, 5.0, 15))


def bounds(eps0: float, n: int, s: int) -> dict[str, float]:
    """ε_c of every bound at one ε₀ (NaN where a closed form does not apply)."""
    delta = 0.01 / n
    feld = feldman_central(eps0, n, delta)
    return {"this_paper": central_epsilon(eps0, n, delta, sparse_weights(s, lambda e: collision.paper_t(e, s))),
            "fmt23_stronger_clone": central_epsilon(eps0, n, delta, generic_weights),
            "fmt21_clone_numeric": central_epsilon(eps0, n, delta, fmt21_weights),
            "fmt21_closed_form": feld if math.isfinite(feld) else math.nan,
            "blanket_bennett": blanket_central(eps0, n, delta, "bennett"),
            "blanket_hoeffding": blanket_central(eps0, n, delta, "hoeffding"),
            "efmrtt19": erlingsson_central(eps0, n, delta)}


def main() -> None:
    OUT.mkdir(exist_ok=True)
    rows = []
    for n in (10_000, 100_000):
        for s in (4, 64):
            for e0 in EPS0:
                b = bounds(e0, n, s)
                rows.append({"n": n, "s": s, "eps0": e0, **b,
                             "saving_vs_fmt23": 1 - b["this_paper"] / b["fmt23_stronger_clone"]})
                print(n, s, e0, {k: round(v, 4) for k, v in b.items()}, flush=True)
    with open(OUT / "fig2.csv", "w", newline="") as fh:
        w = csv.DictWriter(fh, list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    plot(rows)


def plot(rows: list[dict]) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    curves = [k for k in rows[0] if k not in ("n", "s", "eps0", "saving_vs_fmt23")]
    fig, axes = plt.subplots(2, 2, figsize=(10, 7.5))
    for ax, (n, s) in zip(axes.flat, [(10_000, 4), (10_000, 64), (100_000, 4), (100_000, 64)]):
        sel = [r for r in rows if r["n"] == n and r["s"] == s]
        for c in curves:
            ax.plot([r["eps0"] for r in sel], [math.log2(r["eps0"] / r[c]) for r in sel], marker="o", ms=3, label=c)
        ax.set_title(f"n={n:,}, s={s}, δ=0.01/n")
        ax.set_xlabel("local ε₀")
        ax.set_ylabel("log2(ε₀/ε_c)")
    axes[0][0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(OUT / "fig2.png", dpi=90)


if __name__ == "__main__":
    main()

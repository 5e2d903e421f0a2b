"""Table 1 of Wang et al. 2016 (seed 002): the paper's numbers, the recipe of spec §5.3, and the trial loop.

Shared by ``examples/reproduce_ksubset.py`` (full size) and the reduced reproduction in
``tests/unit/test_ksubset.py``. The mechanisms are the engine's own randomizers (BRR, GRR = MRR, and the
k-subset mechanism with the MI- and ℓ2-optimal k); the projection is the engine's ``postprocess`` default.

Recipe (spec §5.2-5.3, every parameter inferred there): n = 10,000 users; per repetition a true distribution
w ~ U(0,1)^d normalised, user values drawn from it, and the error measured against the *empirical* histogram
f of those users; estimates projected onto the simplex; squared ℓ2 Σ(f̂ − f)² and ℓ1 Σ|f̂ − f|, averaged
over the repetitions. Two simulation models:

- ``marginal`` (the paper's, spec §5.2): each item's hit count drawn on its own, c_i ~ Bin(n_i, p) +
  Bin(n − n_i, q) (:func:`ldpql.mechanisms.ksubset.independent_counts`). Exact for BRR; for MRR and k-SS it
  ignores that one report's items are dependent, which lowers their projected error by about (d − 1)/d.
- ``per_user``: every user runs the real randomizer and the reports are counted, as the engine does.
"""

from __future__ import annotations

import csv
import math
from pathlib import Path

import numpy as np

from ldpql.mechanisms.grr import GRR
from ldpql.mechanisms.ksubset import KSubset, independent_counts, subset_size
from ldpql.mechanisms.unary import BRR
from ldpql.planner.histogram import project_simplex

PAPER_CSV = Path(__file__).with_name("ksubset_table1_paper.csv")
MECHANISMS = ("BRR", "MRR", "MI-SS", "L2-SS")
N_USERS = 10_000


def paper_table() -> list[dict]:
    """The 41 rows of Table 1 (ε inferred, spec §5.4): d, epsilon, l2_<mech>, l1_<mech>, k_MI, k_L2."""
    with open(PAPER_CSV, newline="") as fh:
        return [{k: (int(v) if k in ("d", "k_MI", "k_L2") else float(v)) for k, v in row.items()}
                for row in csv.DictReader(fh)]


def _subset(eps: float, d: int, k: int):
    return KSubset(eps, d, k) if k > 1 else GRR(eps, d)   # the 1-subset mechanism is MRR


def mechanisms(d: int, eps: float) -> dict:
    """The four randomizers of Table 1 at (d, ε)."""
    return {"BRR": BRR(eps, d), "MRR": GRR(eps, d), "MI-SS": _subset(eps, d, subset_size(d, eps, "mi")),
            "L2-SS": _subset(eps, d, subset_size(d, eps, "l2"))}


def _counts(r, hist: np.ndarray, sim: str, rng: np.random.Generator) -> np.ndarray:
    if sim == "marginal":
        return independent_counts(hist, r.p, r.q, rng)
    return np.array([r.aggregate(r.randomize(np.repeat(np.arange(len(h)), h), rng)) for h in hist])


def errors(d: int, eps: float, repeats: int = 1000, sim: str = "marginal", n: int = N_USERS,
           seed: int = 0) -> dict[str, tuple[float, float]]:
    """Mean squared-ℓ2 and ℓ1 error of each mechanism's projected estimate over ``repeats`` repetitions."""
    if sim not in ("marginal", "per_user"):
        raise ValueError(f"sim must be 'marginal' or 'per_user', not {sim!r}")
    rng = np.random.default_rng([seed, d, round(eps * 1000)])
    w = rng.random((repeats, d))
    hist = rng.multinomial(n, w / w.sum(axis=1, keepdims=True))
    truth = hist / n
    out = {}
    for name, r in mechanisms(d, eps).items():
        est = project_simplex(r.estimate(_counts(r, hist, sim, rng), n))
        out[name] = (float(np.mean(np.sum((est - truth) ** 2, axis=1))),
                     float(np.mean(np.sum(np.abs(est - truth), axis=1))))
    return out


def reproduce(rows: list[dict], repeats: int = 1000, sim: str = "marginal", seed: int = 0) -> list[dict]:
    """Our Table 1 beside the paper's: per row, our errors, the paper's, their ratio (ours/paper) and the k's."""
    out = []
    for row in rows:
        d, eps = row["d"], row["epsilon"]
        ours = errors(d, eps, repeats, sim, seed=seed)
        rec = {"d": d, "epsilon": eps, "k_MI": subset_size(d, eps, "mi"), "k_L2": subset_size(d, eps, "l2"),
               "paper_k_MI": row["k_MI"], "paper_k_L2": row["k_L2"]}
        for m in MECHANISMS:
            for i, metric in enumerate(("l2", "l1")):
                rec[f"{metric}_{m}"] = ours[m][i]
                rec[f"paper_{metric}_{m}"] = row[f"{metric}_{m}"]
                rec[f"ratio_{metric}_{m}"] = ours[m][i] / row[f"{metric}_{m}"]
        out.append(rec)
    return out


def ratios(records: list[dict], band: tuple[int, int]) -> np.ndarray:
    """Every ours/paper ratio (both metrics, all four mechanisms) of the rows with band[0] <= d <= band[1]."""
    return np.array([r[f"ratio_{metric}_{m}"] for r in records if band[0] <= r["d"] <= band[1]
                     for metric in ("l2", "l1") for m in MECHANISMS])


def worst(values: np.ndarray) -> float:
    """The ratio farthest from 1 (in log scale)."""
    return float(values[np.argmax(np.abs(np.log(values)))]) if len(values) else math.nan

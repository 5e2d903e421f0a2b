"""Reproduce the error figures of Wang, Li, Li, Li, Yang, Yan, "Differentially Private Numerical Vector Analyses in
the Local and Shuffle Model" (Figs. 6–16): frequency and mean TVE / max-abs error of Collision, CoCo, PCKV-UE,
PrivKV, PCKV-GRR, PCKV-AGRR and SUCCINCT on synthetic s-sparse ternary data, with and without capped-simplex
post-processing, over n ∈ {10^4, 10^5}, d ∈ {256, 512}, s ∈ {4, 8, 16, 32} and nine ε; and each mechanism's
empirical squared error against its closed form.

    nice python examples/vector_grid.py --reps 20            # the full grid (CSV + PNG in examples/vector_results)
    python examples/vector_grid.py --reps 2 --quick           # a seconds-long check

Each (mechanism, setting, repetition) is seeded from SeedSequence([setting, s, ε index, rep, mechanism]);
fresh data every repetition (spec §7.1). Everything runs the mechanisms' fast exact-law simulations.
"""

from __future__ import annotations

import argparse
import csv
import math
import time
from pathlib import Path

import numpy as np

from ldpql.mechanisms import coco, collision
from ldpql.mechanisms.coco import CoCo
from ldpql.mechanisms.collision import Collision
from ldpql.mechanisms.keyvalue import PCKVGRR, PCKVUE, PrivKV, Succinct
from ldpql.mechanisms.ternary import item_frequencies, means_from_items, project_capped_simplex, random_sparse

EPSILONS = (0.001, 0.01, 0.1, 0.2, 0.4, 0.8, 1.0, 1.5, 2.0)
SPARSITIES = (4, 8, 16, 32)
SETTINGS = ((100_000, 256), (100_000, 512), (10_000, 256))
MECHANISMS = ("collision", "coco", "pckv_ue", "privkv", "pckv_grr", "pckv_agrr", "succinct", "succinct_lap")
OUT = Path(__file__).parent / "vector_results"


def build(name: str, eps: float, d: int, s: int, n: int):
    """The mechanism as the paper runs it (t*, CoCo's Theorem 7 rule, the nominal PrivKV and PCKV-GRR)."""
    return {"collision": lambda: Collision(eps, d, s, collision.paper_t(eps, s)),
            "coco": lambda: CoCo(eps, d, s, coco.paper_t(eps, s)),
            "pckv_ue": lambda: PCKVUE(eps, d, s), "privkv": lambda: PrivKV.nominal(eps, d, s),
            "pckv_grr": lambda: PCKVGRR.nominal(eps, d, s), "pckv_agrr": lambda: PCKVGRR(eps, d, s),
            "succinct": lambda: Succinct(eps, d, s, n), "succinct_lap": lambda: SuccinctLaplace(eps, d, s, n)}[name]()


class SuccinctLaplace(Succinct):
    """SUCCINCT with Laplace(2η/ε) noise on the clipped sum: the first author's reimplementation, which the paper
    compares against (spec §8.19). Simulation only, for the reproduction: its output is continuous, so it is
    not an engine randomizer (the engine's SUCCINCT is the original code's randomized-response release)."""

    def simulate(self, x: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """Σ_i σ_ij ṽ_i for every j, with every user's d signs drawn (in blocks): the full law, O(n·d)."""
        total = np.zeros(self.d)
        for lo in range(0, len(x), 8192):
            blk = x[lo:lo + 8192]
            keys, sign, valid = blk % self.d, np.where(blk < self.d, 1.0, -1.0), blk >= 0
            sigma = (2 * rng.integers(0, 2, (len(blk), self.d), dtype=np.int8) - 1).astype(np.float32)
            v = (np.take_along_axis(sigma, keys, axis=1) * sign * valid).sum(axis=1)
            noisy = np.clip(v, -self.eta, self.eta) + rng.laplace(0, 2 * self.eta / self.epsilon, len(blk))
            total += noisy.astype(np.float32) @ sigma
        return total

    def estimate(self, summary: np.ndarray, n: int) -> np.ndarray:
        return np.asarray(summary, dtype=float) / n

    def mse(self, mean: np.ndarray, present: np.ndarray, n: int) -> np.ndarray:
        """(E[clip(v)²] + 8η²/ε² − κ² x̲_j)/n + ((κ − 1)x̄_j)²."""
        k = np.arange(self.s + 1)
        from scipy.stats import binom
        m2 = float(np.sum(binom.pmf(k, self.s, 0.5) * np.minimum((2 * k - self.s) ** 2, self.eta ** 2)))
        var = (m2 + 8 * self.eta ** 2 / self.epsilon ** 2 - self.kappa ** 2 * np.asarray(present)) / n
        return var + ((self.kappa - 1) * np.asarray(mean)) ** 2


def run_once(name: str, m, x: np.ndarray, n: int, d: int, s: int, rng: np.random.Generator) -> dict:
    """One repetition: raw and projected item and mean estimates, their errors, and the closed forms."""
    f = item_frequencies(x, d)
    mean, present = means_from_items(f)
    if name.startswith("succinct"):
        est_mean = m.estimate(m.simulate(x, rng), n)
        return {"mean_tve": np.abs(est_mean - mean).sum(), "mean_mae": np.abs(est_mean - mean).max(),
                "mean_sq": ((est_mean - mean) ** 2).sum(), "mean_sq_cf": m.mse(mean, present, n).sum()}
    summary = m.simulate(x, rng) if hasattr(m, "simulate") else m.aggregate(m.randomize(x, rng))
    items = m.items(summary, n) if name == "coco" else m.estimate(summary, n)
    proj = project_capped_simplex(items, s)
    out = {}
    for tag, est in (("", items), ("_pp", proj)):
        em = means_from_items(est)[0]
        out |= {f"freq_tve{tag}": np.abs(est - f).sum(), f"freq_mae{tag}": np.abs(est - f).max(),
                f"mean_tve{tag}": np.abs(em - mean).sum(), f"mean_mae{tag}": np.abs(em - mean).max()}
    em = means_from_items(items)[0]
    out["item_sq"], out["mean_sq"] = ((items - f) ** 2).sum(), ((em - mean) ** 2).sum()
    if name == "collision":
        out["item_sq_cf"], out["mean_sq_cf"] = m.variance(f, n).sum(), m.mean_variance(present, n).sum()
    elif name == "coco":
        out["item_sq_cf"] = (m.variance(present, n).sum() + m.present_variance(present, n).sum()) / 2
        out["mean_sq_cf"] = m.variance(present, n).sum()
    else:
        out["item_sq_cf"], out["mean_sq_cf"] = m.variance(f, n).sum(), m.mean_variance(f, n).sum()
    return out


FIELDS = ("n", "d", "s", "epsilon", "mechanism", "rep", "freq_mae", "freq_mae_pp", "freq_tve", "freq_tve_pp",
          "item_sq", "item_sq_cf", "mean_mae", "mean_mae_pp", "mean_sq", "mean_sq_cf", "mean_tve", "mean_tve_pp")


def grid(reps: int, settings, sparsities, epsilons, mechanisms, path: Path, append: bool = False) -> list[dict]:
    """Run the grid; every cell's rows are appended to ``path`` as soon as the cell is done (a long run that is
    stopped keeps what it finished; ``append`` skips the cells already in the file)."""
    done = set()
    if append and path.exists():
        done = {(int(r["n"]), int(r["d"]), int(r["s"]), float(r["epsilon"])) for r in csv.DictReader(open(path))}
    else:
        with open(path, "w", newline="") as fh:
            csv.DictWriter(fh, FIELDS).writeheader()
    rows = []
    for si, (n, d) in enumerate(settings):
        for s in sparsities:
            for ei, eps in enumerate(epsilons):
                if (n, d, s, eps) in done:
                    continue
                t0, cell = time.time(), []
                for rep in range(reps):
                    x = random_sparse(n, d, s, np.random.default_rng([n, d, s, ei, rep, 99]))
                    for mi, name in enumerate(mechanisms):
                        rng = np.random.default_rng([n, d, s, ei, rep, mi])
                        res = run_once(name, build(name, eps, d, s, n), x, n, d, s, rng)
                        cell.append({"n": n, "d": d, "s": s, "epsilon": eps, "mechanism": name, "rep": rep}
                                    | {k: float(v) for k, v in res.items()})
                with open(path, "a", newline="") as fh:
                    csv.DictWriter(fh, FIELDS).writerows(cell)
                rows += cell
                print(f"n={n} d={d} s={s} eps={eps}: {time.time() - t0:.1f}s", flush=True)
    return rows


def read_rows(path: Path) -> list[dict]:
    """The rows of a grid CSV, numbers as floats (blank cells left out)."""
    out = []
    for r in csv.DictReader(open(path)):
        row = {k: float(v) for k, v in r.items() if v and k != "mechanism"}
        out.append(row | {"mechanism": r["mechanism"], "n": int(r["n"]), "d": int(r["d"]), "s": int(r["s"])})
    return out


def summarise(rows: list[dict]) -> dict:
    """Per cell and mechanism: the mean of ln(metric) (the paper's reporting) and emp/closed-form MSE ratios."""
    cells: dict = {}
    for r in rows:
        cells.setdefault((r["n"], r["d"], r["s"], r["epsilon"], r["mechanism"]), []).append(r)
    out = {}
    for key, rs in cells.items():
        summ = {"reps": len(rs)}
        for metric in rs[0]:
            if metric.endswith(("tve", "mae", "_pp")):
                summ[f"ln_{metric}"] = float(np.mean([math.log(r[metric]) for r in rs]))
        for sq in ("item_sq", "mean_sq"):
            if f"{sq}_cf" in rs[0]:
                summ[f"{sq}_ratio"] = float(np.mean([r[sq] for r in rs]) / np.mean([r[f"{sq}_cf"] for r in rs]))
        out[key] = summ
    return out


def plot(summary: dict, path: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    settings = sorted({(k[0], k[1]) for k in summary}, reverse=True)
    metrics = ("ln_freq_tve_pp", "ln_freq_mae_pp", "ln_mean_tve_pp", "ln_mean_mae", "ln_mean_mae_pp")
    for n, d in settings:
        for metric in metrics:
            ss = sorted({k[2] for k in summary if k[:2] == (n, d)})
            fig, axes = plt.subplots(1, len(ss), figsize=(4 * len(ss), 3.4), squeeze=False)
            for ax, s in zip(axes[0], ss):
                for mech in MECHANISMS:
                    pts = sorted((k[3], v[metric]) for k, v in summary.items()
                                 if k[:3] == (n, d, s) and k[4] == mech and metric in v)
                    if pts:
                        ax.plot(*zip(*pts), marker="o", ms=3, label=mech)
                ax.set_xscale("log")
                ax.set_title(f"s={s}")
                ax.set_xlabel("ε")
            axes[0][0].set_ylabel(f"mean {metric}")
            axes[0][-1].legend(fontsize=7)
            fig.suptitle(f"{metric}: n={n:,}, d={d}")
            fig.tight_layout()
            fig.savefig(path / f"{metric}_n{n}_d{d}.png", dpi=90)
            plt.close(fig)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--setting", type=int, action="append", help="indices into SETTINGS (default: all)")
    ap.add_argument("--append", action="store_true", help="add to grid.csv, skipping the cells it has")
    ap.add_argument("--summarise", action="store_true", help="only summarise and plot grid.csv")
    ap.add_argument("--quick", action="store_true", help="one setting, two s, three ε")
    args = ap.parse_args()
    OUT.mkdir(exist_ok=True)
    if args.quick:
        grid(args.reps, ((10_000, 64),), (4, 8), (0.4, 1.0, 2.0), MECHANISMS, OUT / "quick.csv")
        write_summary(summarise(read_rows(OUT / "quick.csv")), OUT / "quick_summary.csv")
        return
    if not args.summarise:
        settings = [SETTINGS[i] for i in (args.setting or range(len(SETTINGS)))]
        grid(args.reps, settings, SPARSITIES, EPSILONS, MECHANISMS, OUT / "grid.csv", append=args.append)
    summary = summarise(read_rows(OUT / "grid.csv"))
    write_summary(summary, OUT / "summary.csv")
    plot(summary, OUT)


def write_summary(summary: dict, path: Path) -> None:
    with open(path, "w", newline="") as fh:
        keys = sorted({m for v in summary.values() for m in v} - {"reps"})
        w = csv.writer(fh)
        w.writerow(["n", "d", "s", "epsilon", "mechanism", "reps", *keys])
        for k, v in sorted(summary.items()):
            w.writerow([*k, v["reps"], *(f"{v[m]:.5g}" if m in v else "" for m in keys)])


if __name__ == "__main__":
    main()

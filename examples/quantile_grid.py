"""The quantile planner measured: every candidate, forced, on a grid of data shapes, n, ε and τ.

For each cell (shape, n, ε, τ) the script builds the planner's candidates for LDP_QUANTILE(x, τ) exactly as a
statement would (``ldpql.planner.quantile.quantile_candidates``), runs every runnable one ``--reps`` times
through the in-memory driver (``simulate``: the protocols the executor runs, users at exact positions), and
records per candidate: the mean and the 90%/95% quantiles of the rank error max(F(v-1) - τ, τ - F(v), 0) of
the answer v, the planner's predicted σ, the share of runs within ±z·σ (90% and 95%), and the coverage and
width (in rank) of the shown interval at 95% (the calibrated one when the engine has it, and the certified
one). The planner's choice is recomputed from the same predictions, so the regret of a cell is the chosen
candidate's mean rank error over the best forced candidate's.

Shapes: four calibrated on (``heavy`` lognormal, ``discrete`` 12 point masses, ``bimodal``, ``uniform``, on an
integer 0..1023 column) and two held out (``diamonds``: lognormal prices on 0..20000 like the diamonds table;
``pareto``: the quantile paper's Lomax income data on 4^8 coins), which the factors were not fitted on.

Run: ``nice python examples/quantile_grid.py`` (~10 minutes of one core at 300 repetitions); ``--reps 40``
for a quick look. Writes examples/quantile_results/grid.csv and grid.png (``--out`` elsewhere).
"""

from __future__ import annotations

import argparse
import csv
import math
import pickle
import sys
import time
from pathlib import Path
from statistics import NormalDist

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from quantile_paper import pareto_data  # noqa: E402

from ldpql.mechanisms import Encoding  # noqa: E402
from ldpql.mechanisms.quantile import CoinSpace, simulate  # noqa: E402
from ldpql.planner import quantile as planner  # noqa: E402

K = 1024
CALIBRATION = ("heavy", "discrete", "bimodal", "uniform")
HELD_OUT = ("diamonds", "pareto")
NS, EPSILONS, TAUS = (10 ** 4, 10 ** 5, 10 ** 6), (0.5, 2.0, 8.0), (0.1, 0.5, 0.9)
HELD_OUT_CELLS = [(50_000, e, t) for e in (1.0, 4.0, 12.0, 16.0, 30.0) for t in (0.5, 0.9)]
Z = {0.95: NormalDist().inv_cdf(0.975), 0.90: NormalDist().inv_cdf(0.95)}
OUT = Path(__file__).parent / "quantile_results"
RAW: dict[tuple, np.ndarray] = {}   # every run's rank error, by (shape, n, ε, τ, mechanism), for --raw


def shape(name: str, n: int) -> tuple[np.ndarray, int]:
    """(coin histogram of n users, coins) of a named data shape, fixed seeds."""
    rng = np.random.default_rng([17, n])
    if name == "heavy":
        x = np.exp(rng.normal(math.log(60), 1.1, n))
    elif name == "discrete":
        points = np.arange(12) * 85 + 20
        x = rng.choice(points, n, p=np.geomspace(1, 0.15, 12) / np.geomspace(1, 0.15, 12).sum())
    elif name == "bimodal":
        x = np.where(rng.random(n) < 0.4, rng.normal(250, 50, n), rng.normal(760, 60, n))
    elif name == "uniform":
        x = rng.uniform(0, K, n)
    elif name == "diamonds":
        x = np.clip(np.exp(rng.normal(math.log(2400), 1.0, n)), 326, 18823)
        return np.bincount(np.round(x).astype(np.int64), minlength=20001), 20001
    elif name == "pareto":
        return np.bincount(pareto_data(n, 8), minlength=4 ** 8), 4 ** 8
    else:
        raise ValueError(name)
    return np.bincount(np.clip(np.floor(x), 0, K - 1).astype(np.int64), minlength=K), K


def rank_error(cdf: np.ndarray, coin: int, tau: float) -> float:
    below = cdf[coin - 1] if coin > 0 else 0.0
    return max(below - tau, tau - cdf[coin], 0.0)


def candidates(coins: int, tau: float) -> list:
    space = CoinSpace(coins)
    target = planner.QuantileTarget("x", Encoding("x", coins, "x"), "", None, planner.UNIT, tau=tau, space=space,
                                    taus=(tau,))
    return [c for c in planner.quantile_candidates(target) if c.model == "local"]


def chosen(cands: list, eps: float, n: int) -> str:
    """The planner's rule (ldpql.planner.choose_mechanisms): the smallest prediction among those that can run,
    the first listed on a tie."""
    ok = [c for c in cands if c.check is None or not c.check(eps, n)]
    return min(ok, key=lambda c: c.predict(eps, n)).mechanism


def interval_stats(est, tau: float, cdf: np.ndarray, truth: int) -> dict[str, tuple[bool, float]]:
    """Coverage of the true quantile and width in rank, at 95%, of each interval the release offers."""
    out = {}
    for kind in ("calibrated", "certified"):
        fn = est.extra.get("intervals", {}).get(kind) if kind == "calibrated" else est.extra.get("interval")
        if fn is None:
            continue
        low, high = (int(round(float(v[0]))) for v in fn(0.95))
        out[kind] = (low <= truth <= high, cdf[min(high, len(cdf) - 1)] - (cdf[low - 1] if low > 0 else 0.0))
    return out


def run_cell(shape_name: str, n: int, eps: float, tau: float, reps: int) -> list[dict]:
    hist, coins = shape(shape_name, n)
    n = int(hist.sum())
    cdf = np.cumsum(hist) / n
    truth = int(np.searchsorted(cdf, tau - 1e-12))   # the smallest coin with F >= τ
    cands = candidates(coins, tau)
    pick = chosen(cands, eps, n)
    rows = []
    for c in cands:
        if c.check is not None and c.check(eps, n):
            continue
        sigma = c.predict(eps, n)
        errors, ivals = [], {}
        for t in range(reps):
            est = simulate(c.protocol(eps)(n), np.random.default_rng([23, t]), hist=hist)
            answer = est.extra["answers"][tau]
            errors.append(rank_error(cdf, answer.extra["coin"], tau))
            for kind, (cov, width) in interval_stats(answer, tau, cdf, truth).items():
                ivals.setdefault(kind, []).append((cov, width))
        e = np.array(errors)
        RAW[(shape_name, n, eps, tau, c.mechanism)] = e
        row = {"shape": shape_name, "n": n, "epsilon": eps, "tau": tau, "coins": coins, "mechanism": c.mechanism,
               "chosen": c.mechanism == pick, "sigma": sigma, "mean_error": e.mean(),
               "q90": float(np.quantile(e, 0.9)), "q95": float(np.quantile(e, 0.95)),
               "within90": float(np.mean(e <= Z[0.90] * sigma)), "within95": float(np.mean(e <= Z[0.95] * sigma))}
        for kind, v in ivals.items():
            row[f"{kind}_coverage"] = float(np.mean([x[0] for x in v]))
            row[f"{kind}_width"] = float(np.mean([x[1] for x in v]))
        rows.append(row)
    best = min(r["mean_error"] for r in rows)
    for r in rows:
        r["regret"] = r["mean_error"] / best if best > 0 else (1.0 if r["mean_error"] == 0 else math.inf)
    return rows


def summary(rows: list[dict]) -> str:
    """Regret of the planner's choice and coverage of its prediction, per cell and overall."""
    lines = [f"{'shape':9s} {'n':>8s} {'ε':>5s} {'τ':>4s}  {'chosen':13s} {'best':13s} {'regret':>6s}  "
             f"{'in95':>5s} {'in90':>5s}  {'ival95':>6s} {'width':>6s}"]
    cells = {}
    for r in rows:
        cells.setdefault((r["shape"], r["n"], r["epsilon"], r["tau"]), []).append(r)
    regrets, cov95, cov90 = [], [], []
    for key, rs in cells.items():
        ch = next(r for r in rs if r["chosen"])
        best = min(rs, key=lambda r: r["mean_error"])
        kind = "calibrated" if "calibrated_coverage" in ch else "certified"
        regrets.append(ch["regret"])
        if ch["mechanism"] != "bound":
            cov95.append(ch["within95"])
            cov90.append(ch["within90"])
        lines.append(f"{key[0]:9s} {key[1]:8d} {key[2]:5g} {key[3]:4g}  {ch['mechanism']:13s} {best['mechanism']:13s} "
                     f"{ch['regret']:6.2f}  {ch['within95']:5.2f} {ch['within90']:5.2f}  "
                     f"{ch.get(kind + '_coverage', math.nan):6.2f} {ch.get(kind + '_width', math.nan):6.3f}")
    r = np.array(regrets)
    c95, c90 = np.array(cov95), np.array(cov90)
    lines.append(f"regret: median {np.median(r):.2f}, max {r.max():.2f}, cells over 1.25: {np.sum(r > 1.25)} of {len(r)}")
    lines.append(f"prediction coverage (chosen, not bound): 95% mean {c95.mean():.3f} (cells within 2 points: "
                 f"{np.sum(np.abs(c95 - 0.95) <= 0.02)} of {len(c95)}); 90% mean {c90.mean():.3f} "
                 f"(within 2 points: {np.sum(np.abs(c90 - 0.90) <= 0.02)} of {len(c90)})")
    return "\n".join(lines)


def plot(rows: list[dict], path: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    ch = [r for r in rows if r["chosen"]]
    fig, ax = plt.subplots(1, 2, figsize=(11, 4))
    for i, s in enumerate(CALIBRATION + HELD_OUT):
        rs = [r for r in ch if r["shape"] == s]
        ax[0].scatter(np.arange(len(rs)) + 0.1 * i, [r["regret"] for r in rs], s=12, label=s)
        rs = [r for r in rs if r["mechanism"] != "bound"]
        ax[1].scatter([r["within95"] for r in rs], [r["within90"] for r in rs], s=12, label=s)
    ax[0].axhline(1.25, color="grey", ls="--")
    ax[0].set(xlabel="cell (n, ε, τ)", ylabel="regret (chosen / best forced mean rank error)", yscale="log")
    ax[1].axvline(0.95, color="grey", ls="--")
    ax[1].axhline(0.90, color="grey", ls="--")
    ax[1].set(xlabel="share within predicted ±1.96σ", ylabel="share within predicted ±1.645σ")
    ax[0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main(argv: list[str] | None = None) -> str:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=300)
    ap.add_argument("--out", type=Path, default=OUT)
    ap.add_argument("--name", default="grid", help="file name stem of the CSV and PNG")
    ap.add_argument("--shapes", nargs="*", default=list(CALIBRATION + HELD_OUT))
    ap.add_argument("--raw", type=Path, help="also save every run's rank error (a pickle) for refitting the factors")
    args = ap.parse_args(argv)
    rows, started = [], time.time()
    for s in args.shapes:
        cells = HELD_OUT_CELLS if s in HELD_OUT else [(n, e, t) for n in NS for e in EPSILONS for t in TAUS]
        for n, eps, tau in cells:
            rows += run_cell(s, n, eps, tau, args.reps)
            print(f"{s} n={n} ε={eps} τ={tau} done ({time.time() - started:.0f}s)", file=sys.stderr, flush=True)
    args.out.mkdir(parents=True, exist_ok=True)
    keys = list(dict.fromkeys(k for r in rows for k in r))
    with open(args.out / f"{args.name}.csv", "w", newline="") as f:
        w = csv.DictWriter(f, keys)
        w.writeheader()
        w.writerows(rows)
    if args.raw:
        args.raw.write_bytes(pickle.dumps(RAW))
    text = summary(rows)
    (args.out / f"{args.name}.txt").write_text(text + "\n")
    try:
        plot(rows, args.out / f"{args.name}.png")
    except ImportError:
        pass
    print(text)
    return text


if __name__ == "__main__":
    main()

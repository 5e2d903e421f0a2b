"""The quantile planner measured: every candidate, forced, on a grid of data shapes, n, ε and τ.

For each cell (shape, n, ε, τ) the script builds the planner's candidates for LDP_QUANTILE(x, τ) exactly as a
statement would (``ldpql.planner.quantile.quantile_candidates``), runs every runnable one ``--reps`` times
through the in-memory driver (``simulate``: the protocols the executor runs, users at exact positions), and
records per candidate: the mean and the 90%/95% quantiles of the rank error max(F(v-1) - τ, τ - F(v), 0) of
the answer v, the planner's predicted σ, the share of runs within ±z·σ (90% and 95%), and the coverage and
width (in rank) of the shown interval at 95% (the calibrated one when the engine has it, and the certified
one). The planner's choice is recomputed from the same predictions, so the regret of a cell is the chosen
candidate's mean rank error over the best forced candidate's (both plus one user's rank, 1/n).

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
from quantile_paper import pareto_data

from ldpql.mechanisms import Encoding
from ldpql.mechanisms.quantile import CoinSpace
from ldpql.simulation import simulate

try:
    from ldpql.mechanisms.quantile import rank_interval
except ImportError:   # an engine before the calibrated interval (the grid's "before" run)
    rank_interval = None
from ldpql.planner import quantile as planner

K = 1024
CALIBRATION = ("heavy", "discrete", "bimodal", "uniform")
HELD_OUT = ("diamonds", "pareto")
NS, EPSILONS, TAUS = (10 ** 4, 10 ** 5, 10 ** 6), (0.5, 2.0, 8.0), (0.1, 0.5, 0.9)
HELD_OUT_CELLS = {"diamonds": [(50_000, e, t) for e in (1.0, 4.0, 12.0, 16.0, 30.0) for t in (0.5, 0.9)],
                  "pareto": [(50_000, e, t) for e in (1.0, 4.0) for t in (0.1, 0.5, 0.9)]}
MULTS = np.geomspace(1 / 8, 8, 73)   # the calibrated interval is measured at σ times each (steps of 6%)
Z = {0.95: NormalDist().inv_cdf(0.975), 0.90: NormalDist().inv_cdf(0.95)}
OUT = Path(__file__).parent / "quantile_results"
RAW: dict[tuple, dict] = {}   # every run's rank error and interval, by (shape, n, ε, τ, mechanism), for --raw


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


def _covers(points, tau: float, coin: int, coins: int, cdf: np.ndarray, truth: int, alpha: float):
    low, high = rank_interval(points, tau, alpha, coin, coins)
    return low <= truth <= high, cdf[high] - (cdf[low - 1] if low > 0 else 0.0)


def run_cell(shape_name: str, n: int, eps: float, tau: float, reps: int) -> list[dict]:
    """Every runnable candidate of one cell, ``reps`` runs each; also stores the runs in RAW."""
    hist, coins = shape(shape_name, n)
    n = int(hist.sum())
    cdf = np.cumsum(hist) / n
    truth = int(np.searchsorted(cdf, tau - 1e-12))   # the smallest coin with F >= τ
    cands = candidates(coins, tau)
    rows = []
    for c in cands:
        if c.check is not None and c.check(eps, n):
            continue
        sigma = c.predict(eps, n)
        errors, shown, certified = [], [], []
        for t in range(reps):
            est = simulate(c.protocol(eps)(n), np.random.default_rng([23, t]), hist=hist)
            answer = est.extra["answers"][tau]
            coin = int(answer.extra["coin"])
            errors.append(rank_error(cdf, coin, tau))
            low, high = (round(float(v[0])) for v in answer.extra["interval"](0.95))   # coin = value here
            certified.append((low <= truth <= high, cdf[high] - (cdf[low - 1] if low > 0 else 0.0)))
            # the calibrated interval at every multiple of today's σ (the factors are refitted on these runs)
            shown.append([certified[-1] if sigma * m >= planner.USELESS or rank_interval is None else
                          _covers(answer.extra["cdf_points"], tau, coin, coins, cdf, truth, Z[0.95] * sigma * m)
                          for m in MULTS])
        RAW[(shape_name, n, eps, tau, c.mechanism)] = {"errors": np.array(errors), "sigma": sigma,
                                                        "shown": np.array(shown, dtype=float),
                                                        "certified": np.array(certified, dtype=float)}
        rows.append(score(shape_name, n, eps, tau, coins, c.mechanism, RAW[(shape_name, n, eps, tau, c.mechanism)]))
    return finish_cell(rows)


def score(shape_name: str, n: int, eps: float, tau: float, coins: int, mechanism: str, raw: dict,
          scale: float = 1.0) -> dict:
    """One candidate's row; ``scale``: the σ it is scored with (``raw['now']``) over the σ it ran with."""
    e, sigma = raw["errors"], raw.get("now", raw["sigma"])
    widen = planner.INTERVAL_FACTOR.get(mechanism, 1.0) if hasattr(planner, "INTERVAL_FACTOR") else 1.0
    k = int(np.argmin(np.abs(np.log(MULTS) - math.log(scale * widen))))
    return {"shape": shape_name, "n": n, "epsilon": eps, "tau": tau, "coins": coins, "mechanism": mechanism,
            "sigma": sigma, "mean_error": e.mean(), "q90": float(np.quantile(e, 0.9)),
            "q95": float(np.quantile(e, 0.95)),
            "within90": float(np.mean(e <= Z[0.90] * sigma)), "within95": float(np.mean(e <= Z[0.95] * sigma)),
            "shown_coverage": raw["shown"][:, k, 0].mean(), "shown_width": raw["shown"][:, k, 1].mean(),
            "certified_coverage": raw["certified"][:, 0].mean(), "certified_width": raw["certified"][:, 1].mean()}


ORDER = ("bayess", "naive_nbs", "hierarchical", "histogram", "bound")
WEIGHTS = {"bayess": "W_BAYESS", "naive_nbs": "W_NBS", "hierarchical": "W_HIER", "histogram": "W_HIST",
           "bound": "W_BOUND"}


def finish_cell(rows: list[dict]) -> list[dict]:
    """The planner's choice (the smallest σ × W, the first listed on a tie: ldpql.planner.choose_mechanisms) and
    every candidate's regret (its mean rank error over the best one's)."""
    pick = min(rows, key=lambda r: (r["sigma"] * _weight(r["mechanism"], r["coins"]), ORDER.index(r["mechanism"])))
    best = min(r["mean_error"] for r in rows)
    for r in rows:   # a rank error of one user (1/n) is the floor: an exact best answer gives a finite ratio
        r["chosen"] = r is pick
        r["regret"] = (r["mean_error"] + 1 / r["n"]) / (best + 1 / r["n"])
    return rows


def _weight(mechanism: str, coins: int) -> float:
    """The planner's choice weight (BayeSS's depends on the coins: ldpql.planner.quantile.bayess_weight)."""
    if mechanism == "bayess" and hasattr(planner, "bayess_weight"):
        return planner.bayess_weight(coins)
    return getattr(planner, WEIGHTS[mechanism], 1.0)


def rescore(raw: dict) -> list[dict]:
    """The grid's rows again from its stored runs, with the predictions the planner makes now (the protocols
    do not depend on them: only the choice, the coverage of the prediction and the calibrated interval do; the
    interval is read at the nearest of the steps it was measured at)."""
    cells: dict[tuple, list] = {}
    made: dict[tuple, dict] = {}
    for (s, n, eps, tau, mech), r in raw.items():
        coins = shape_coins(s)
        cands = made.setdefault((coins, tau), {c.mechanism: c for c in candidates(coins, tau)})
        now = cands[mech].predict(eps, n)
        scale = now / r["sigma"] if 0 < r["sigma"] < planner.USELESS and now < planner.USELESS else 1.0
        cells.setdefault((s, n, eps, tau), []).append(score(s, n, eps, tau, coins, mech, {**r, "now": now}, scale))
    return [row for rows in cells.values() for row in finish_cell(rows)]


def shape_coins(name: str) -> int:
    return {"diamonds": 20001, "pareto": 4 ** 8}.get(name, K)


def summary(rows: list[dict]) -> str:
    """Regret of the planner's choice and coverage of its prediction, per cell and overall."""
    lines = [(f"{'shape':9s} {'n':>8s} {'ε':>5s} {'τ':>4s}  {'chosen':13s} {'best':13s} {'regret':>6s}  "
             f"{'in95':>5s} {'in90':>5s}  {'ival95':>6s} {'width':>6s}")]
    cells = {}
    for r in rows:
        cells.setdefault((r["shape"], r["n"], r["epsilon"], r["tau"]), []).append(r)
    regrets, cov95, cov90 = [], [], []
    for key, rs in cells.items():
        ch = next(r for r in rs if r["chosen"])
        best = min(rs, key=lambda r: r["mean_error"])
        regrets.append(ch["regret"])
        if ch["mechanism"] != "bound":
            cov95.append(ch["within95"])
            cov90.append(ch["within90"])
        lines.append(f"{key[0]:9s} {key[1]:8d} {key[2]:5g} {key[3]:4g}  {ch['mechanism']:13s} {best['mechanism']:13s} "
                     f"{ch['regret']:6.2f}  {ch['within95']:5.2f} {ch['within90']:5.2f}  "
                     f"{ch['shown_coverage']:6.2f} {ch['shown_width']:6.3f}")
    r = np.array(regrets)
    c95, c90 = np.array(cov95), np.array(cov90)
    lines.append(f"regret: median {np.median(r):.2f}, max {r.max():.2f}, cells over 1.25: {np.sum(r > 1.25)} "
                 f"of {len(r)}")
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
    ap.add_argument("--reps", type=int, default=150)
    ap.add_argument("--out", type=Path, default=OUT)
    ap.add_argument("--name", default="grid", help="file name stem of the CSV, TXT, PNG (and --raw pickle)")
    ap.add_argument("--shapes", nargs="*", default=list(CALIBRATION + HELD_OUT))
    ap.add_argument("--raw", action="store_true", help="also save every run (a pickle) for refitting the factors")
    ap.add_argument("--rescore", type=Path, help="no runs: rescore a saved pickle with the factors now in the planner")
    args = ap.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    if args.rescore:
        saved = pickle.loads(args.rescore.read_bytes())
        rows = rescore(saved["runs"])
        return write(rows, args.out, args.name)
    rows, started = [], time.time()
    for s in args.shapes:
        cells = HELD_OUT_CELLS[s] if s in HELD_OUT else [(n, e, t) for n in NS for e in EPSILONS for t in TAUS]
        for n, eps, tau in cells:
            rows += run_cell(s, n, eps, tau, args.reps)
            print(f"{s} n={n} ε={eps} τ={tau} done ({time.time() - started:.0f}s)", file=sys.stderr, flush=True)
        if args.raw:   # after every shape, so that a long run that is stopped keeps what it measured
            factors = {f: getattr(planner, f, 1.0) for f in FACTORS.values()}
            (args.out / f"{args.name}.pkl").write_bytes(pickle.dumps({"runs": RAW, "factors": factors}))
    return write(rows, args.out, args.name)


FACTORS = {"bayess": "A_BAYESS", "naive_nbs": "A_NBS", "hierarchical": "A_HIER", "histogram": "A_HIST"}


def write(rows: list[dict], out: Path, name: str) -> str:
    keys = list(dict.fromkeys(k for r in rows for k in r))
    with open(out / f"{name}.csv", "w", newline="") as f:
        w = csv.DictWriter(f, keys)
        w.writeheader()
        w.writerows(rows)
    text = summary(rows)
    (out / f"{name}.txt").write_text(text + "\n")
    try:
        plot(rows, out / f"{name}.png")
    except ImportError:
        pass
    print(text)
    return text


if __name__ == "__main__":
    main()

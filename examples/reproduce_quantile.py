"""Reproduce the experiments of "Lightweight Protocols for Distributed Private Quantile Estimation" (seed 001).

Figures (spec §4): Fig. 1 left / Fig. 5 (success at α_test against ε for DpBayeSS, DpNaiveNBS and the
hierarchical mechanism, every (N, B) of the released table), Fig. 1 right / Fig. 3 (the domain sweep on uniform
data), Fig. 2 (the c sweep) and Fig. 4 (shuffle vs local NaiveNBS at N = 10^7). The datasets are regenerated
bit for bit (numpy's legacy RNG, seed 42). Every trial runs the engine's own protocol generators in paper mode
(the authors' tie-breaking, returned coin, batch counts and one user per BayesLearn round) through the numpy
driver :func:`ldpql.simulation.simulate`: each round's users are a uniformly random subset of the
users not yet asked, their true input histogram is taken from the data and the engine's RR / OUE
``sample_aggregate`` draws the aggregated reports, exactly as the executor's exact-aggregate path does. SQL is
not used (``benchmarks/quantile_speed.py`` times the SQL path).

Writes CSV (and PNG with the optional ``plot`` extra) to ``--out`` and prints our success rates beside the
released ones. ``python examples/reproduce_quantile.py`` runs everything at full size (200 trials; 53 min with
``--jobs 2`` on two busy cores: main 27, domain 3, c 15, shuffle 8); ``--trials 40 --only main`` is a quick
look; ``--plot-only`` redraws the PNGs from the CSVs. Results of a full run: ``examples/quantile_results``.
"""

from __future__ import annotations

import argparse
import csv
import sys
import time
import zlib
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
import quantile_paper as qp  # noqa: E402

MECHANISMS = ("bayess", "naive_nbs", "hierarchical")
PARTS = ("main", "domain", "c", "shuffle")


# ---- tasks ---------------------------------------------------------------------------------------------------

def _dataset(kind: str, n: int, size: int) -> tuple[np.ndarray, int]:
    """(data, number of coins): Pareto over 4^size coins, or uniform over ``size`` coins."""
    return (qp.pareto_data(n, size), 4 ** size) if kind == "pareto" else (qp.uniform_data(n, size), size)


def run_task(task: tuple) -> tuple[tuple, np.ndarray, float]:
    """One configuration: (kind, n, size, mechanism, ε, c, trials) -> returned coins of every trial."""
    kind, n, size, mechanism, eps, c, trials = task
    data, coins = _dataset(kind, n, size)
    seed = zlib.crc32(repr((kind, n, size, mechanism, round(eps, 6), round(c, 6))).encode())
    started = time.perf_counter()
    out = qp.run_trials(mechanism, data, coins, eps, trials, seed=seed, c=c)
    return task, out, time.perf_counter() - started


def run_all(tasks: list[tuple], jobs: int) -> dict[tuple, np.ndarray]:
    results = {}
    if jobs > 1:
        with ProcessPoolExecutor(jobs) as pool:
            for task, coins, secs in pool.map(run_task, tasks):
                results[task] = coins
                print(f"  done {task[:6]} in {secs:.1f} s", flush=True)
    else:
        for task in tasks:
            task, coins, secs = run_task(task)
            results[task] = coins
            print(f"  done {task[:6]} in {secs:.1f} s", flush=True)
    return results


# ---- reports -------------------------------------------------------------------------------------------------

def _row(label: str, ours: list[float], released: list[float] | None) -> str:
    cells = " ".join(f"{o:5.3f}" for o in ours)
    if released is None:
        return f"{label:34s} ours {cells}"
    diff = " ".join(f"{o - r:+5.2f}" for o, r in zip(ours, released))
    return f"{label:34s} ours {cells}\n{'':34s} paper {' '.join(f'{r:5.3f}' for r in released)}\n{'':34s} diff {diff}"


def _write(path: Path, header: list[str], rows: list[list]) -> None:
    with path.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(header)
        w.writerows(rows)


def _plot(path: Path, title: str, xs, series: dict[str, list[float]], xlabel: str, log: bool = True) -> None:
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return
    fig, ax = plt.subplots(figsize=(5, 3.5))
    colors: dict[str, str] = {}
    for name, ys in series.items():
        base = name.removesuffix(" (paper)")
        color = colors.setdefault(base, f"C{len(colors)}")
        ax.plot(xs, ys, marker="o", ms=3, label=name, color=color, ls="--" if name != base else "-",
                alpha=0.6 if name != base else 1.0)
    ax.set(title=title, xlabel=xlabel, ylabel="success rate", ylim=(-0.02, 1.02))
    if log:
        ax.set_xscale("log")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


# ---- Fig. 1 left / Fig. 5 -------------------------------------------------------------------------------------

MAIN_DATASETS = sorted({(n, b) for n, b, _ in qp.RELEASED_MAIN})


def main_tasks(trials: int) -> list[tuple]:
    return [("pareto", n, b, m, float(e), 0.6, trials) for n, b in MAIN_DATASETS for m in MECHANISMS
            for e in qp.EPSILONS]


def main_report(results: dict, out: Path, trials: int) -> dict:
    rows, worst, rates = [], {}, {}
    for (n, b, alpha), released in sorted(qp.RELEASED_MAIN.items()):
        metric = qp.Metric(qp.pareto_data(n, b), 4 ** b)
        print(f"\nN = {n}, B = 4^{b}, α_test = {alpha} (success over ε = {', '.join(f'{e:.3g}' for e in qp.EPSILONS)})")
        for m in MECHANISMS:
            ours = [float(metric.success(results[("pareto", n, b, m, float(e), 0.6, trials)], alpha).mean())
                    for e in qp.EPSILONS]
            rates[(n, b, alpha, m)] = ours
            print(_row(m, ours, released[m]))
            if ((n, b, alpha), m) not in qp.APPROXIMATE:
                worst[(n, b, alpha, m)] = max(abs(o - r) for o, r in zip(ours, released[m]))
            rows += [[n, 4 ** b, alpha, m, float(e), o, r] for e, o, r in zip(qp.EPSILONS, ours, released[m])]
        _plot(out / f"fig1_success_{n}_4^{b}_{alpha}.png", f"N={n}, B=4^{b}, α={alpha}", qp.EPSILONS,
              {**{m: rates[(n, b, alpha, m)] for m in MECHANISMS},
               **{f"{m} (paper)": released[m] for m in MECHANISMS}}, "ε")
    _write(out / "fig1_fig5_success.csv", ["N", "B", "alpha_test", "mechanism", "epsilon", "success", "released"],
           rows)
    gap = np.array(rates[(2500, 9, 0.04, "bayess")]) - np.array(rates[(2500, 9, 0.04, "naive_nbs")])
    print(f"\nheadline: mean success gap BayeSS - NaiveNBS over the ten ε at (2500, 4^9, 0.04) = {gap.mean():.3f} "
          f"(paper {qp.HEADLINE_GAP[0]}), max {gap.max():.3f} at ε = {qp.EPSILONS[gap.argmax()]:.3g} "
          f"(paper {qp.HEADLINE_GAP[1]} at ε = 0.879)")
    print("largest |ours - paper| per row and mechanism: " +
          ", ".join(f"{k[0]}/4^{k[1]}/{k[2]}/{k[3]} {v:.3f}" for k, v in sorted(worst.items())))
    return {"gap": float(gap.mean()), "worst": max(worst.values())}


# ---- Fig. 1 right / Fig. 3 -----------------------------------------------------------------------------------

def domain_tasks(trials: int) -> list[tuple]:
    return [("uniform", 2500, b, m, e, 0.6, trials) for b in qp.DOMAINS for m in ("bayess", "naive_nbs")
            for e in (0.5, 1.0)]


def domain_report(results: dict, out: Path, trials: int) -> None:
    rows = []
    for (eps, alpha), released in sorted(qp.RELEASED_DOMAIN.items()):
        print(f"\nuniform data, N = 2500, ε = {eps}, α_test = {alpha} (B = 10^2 .. 10^6)")
        series = {}
        for m in ("bayess", "naive_nbs"):
            ours = [float(qp.Metric(qp.uniform_data(2500, b), b, strict_median=False)
                          .success(results[("uniform", 2500, b, m, eps, 0.6, trials)], alpha).mean())
                    for b in qp.DOMAINS]
            series[m], series[f"{m} (paper)"] = ours, released[m]
            print(_row(m, ours, released[m]))
            rows += [[eps, alpha, m, b, o, r] for b, o, r in zip(qp.DOMAINS, ours, released[m])]
        _plot(out / f"fig3_domain_eps{eps}_alpha{alpha}.png", f"uniform, N=2500, ε={eps}, α={alpha}", qp.DOMAINS,
              series, "B")
    _write(out / "fig1right_fig3_domain.csv", ["epsilon", "alpha_test", "mechanism", "B", "success", "released"],
           rows)


# ---- Fig. 2 --------------------------------------------------------------------------------------------------

def c_tasks(trials: int) -> list[tuple]:
    return [("pareto", n, b, "bayess", e, float(c), trials) for n, b, e in qp.RELEASED_C for c in qp.C_GRID]


def c_report(results: dict, out: Path, trials: int) -> None:
    rows = []
    for (n, b, eps), released in sorted(qp.RELEASED_C.items()):
        metric = qp.Metric(qp.pareto_data(n, b), 4 ** b)
        ours = [float(metric.success(results[("pareto", n, b, "bayess", eps, float(c), trials)], 0.04).mean())
                for c in qp.C_GRID]
        print(_row(f"c sweep N={n} B=4^{b} ε={eps}", ours, released))
        rows += [[n, 4 ** b, eps, float(c), o, r] for c, o, r in zip(qp.C_GRID, ours, released)]
        _plot(out / f"fig2_c_{n}_4^{b}_eps{eps}.png", f"BayeSS, N={n}, B=4^{b}, ε={eps}", qp.C_GRID,
              {"bayess": ours, "bayess (paper)": released}, "c", log=False)
    _write(out / "fig2_c_sweep.csv", ["N", "B", "epsilon", "c", "success_0.04", "released"], rows)


# ---- Fig. 4 --------------------------------------------------------------------------------------------------

def shuffle_tasks(trials: int) -> list[tuple]:
    return [("pareto", 10 ** 7, 8, m, float(e), 0.6, trials) for m in ("shuffle_nbs", "naive_nbs")
            for e in qp.EPSILONS]


def shuffle_report(results: dict, out: Path, trials: int) -> None:
    metric = qp.Metric(qp.pareto_data(10 ** 7, 8), 4 ** 8)
    rows, series = [], {}
    for alpha in qp.SHUFFLE_ALPHAS:
        print(f"\nN = 10^7, B = 4^8, δ = 1e-8, α_test = {alpha}")
        for m in ("shuffle_nbs", "naive_nbs"):
            ours = [float(metric.success(results[("pareto", 10 ** 7, 8, m, float(e), 0.6, trials)], alpha).mean())
                    for e in qp.EPSILONS]
            released = qp.RELEASED_SHUFFLE[m] if alpha == 5e-4 else None
            print(_row(m, ours, None) + ("" if released is None else
                                         f"\n{'':34s} spec  {' '.join(f'{r:5.3f}' for r in released)} (first five ε)"))
            rows += [[alpha, m, float(e), o] for e, o in zip(qp.EPSILONS, ours)]
            if alpha == 5e-4:
                series[m] = ours
    _plot(out / "fig4_shuffle.png", "N=10^7, B=4^8, α=5e-4", qp.EPSILONS, series, "ε")
    _write(out / "fig4_shuffle.csv", ["alpha_test", "mechanism", "epsilon", "success"], rows)


# ---- figures from the CSV files (``--plot-only``) -------------------------------------------------------------

def replot(out: Path) -> None:
    """Redraw every figure from the CSV files a previous run wrote to ``out``."""
    def rows(name: str) -> list[dict]:
        path = out / name
        return list(csv.DictReader(path.open())) if path.exists() else []

    def series(rs: list[dict], x: str, keys: tuple[str, ...]) -> dict:
        out_: dict = {}
        for r in rs:
            out_.setdefault(tuple(r[k] for k in keys), []).append((float(r[x]), r))
        return out_

    main = series(rows("fig1_fig5_success.csv"), "epsilon", ("N", "B", "alpha_test"))
    for (n, b, alpha), pts in main.items():
        lines = {}
        for m in MECHANISMS:
            mine = sorted((x, float(r["success"]), float(r["released"])) for x, r in pts if r["mechanism"] == m)
            lines[m], lines[f"{m} (paper)"] = [v for _, v, _ in mine], [v for _, _, v in mine]
        b_exp = round(np.log(int(b)) / np.log(4))
        _plot(out / f"fig1_success_{n}_4^{b_exp}_{alpha}.png", f"N={n}, B=4^{b_exp}, α={alpha}", qp.EPSILONS, lines, "ε")
    for (eps, alpha), pts in series(rows("fig1right_fig3_domain.csv"), "B", ("epsilon", "alpha_test")).items():
        lines = {}
        for m in ("bayess", "naive_nbs"):
            mine = sorted((x, float(r["success"]), float(r["released"])) for x, r in pts if r["mechanism"] == m)
            lines[m], lines[f"{m} (paper)"] = [v for _, v, _ in mine], [v for _, _, v in mine]
        _plot(out / f"fig3_domain_eps{eps}_alpha{alpha}.png", f"uniform, N=2500, ε={eps}, α={alpha}", qp.DOMAINS,
              lines, "B")
    for (n, b, eps), pts in series(rows("fig2_c_sweep.csv"), "c", ("N", "B", "epsilon")).items():
        mine = sorted((x, float(r["success_0.04"]), float(r["released"])) for x, r in pts)
        b_exp = round(np.log(int(b)) / np.log(4))
        _plot(out / f"fig2_c_{n}_4^{b_exp}_eps{eps}.png", f"BayeSS, N={n}, B=4^{b_exp}, ε={eps}", qp.C_GRID,
              {"bayess": [v for _, v, _ in mine], "bayess (paper)": [v for _, _, v in mine]}, "c", log=False)
    shuffle = [r for r in rows("fig4_shuffle.csv") if float(r["alpha_test"]) == 5e-4]
    if shuffle:
        _plot(out / "fig4_shuffle.png", "N=10^7, B=4^8, α=5e-4", qp.EPSILONS,
              {m: [float(r["success"]) for r in shuffle if r["mechanism"] == m] for m in ("shuffle_nbs", "naive_nbs")},
              "ε")


# ---- main ----------------------------------------------------------------------------------------------------

def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=200, help="trials per configuration (paper: 200)")
    ap.add_argument("--c-trials", type=int, default=None, help="trials of the c sweep (default --trials)")
    ap.add_argument("--only", default=",".join(PARTS), help=f"comma-separated parts of {', '.join(PARTS)}")
    ap.add_argument("--jobs", type=int, default=1, help="worker processes")
    ap.add_argument("--out", default=str(Path(__file__).parent / "quantile_results"))
    ap.add_argument("--plot-only", action="store_true", help="redraw the PNGs from the CSVs in --out")
    args = ap.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    if args.plot_only:
        replot(out)
        return {}
    parts = args.only.split(",")
    c_trials = args.c_trials or args.trials
    builders = {"main": (main_tasks, main_report, args.trials), "domain": (domain_tasks, domain_report, args.trials),
                "c": (c_tasks, c_report, c_trials), "shuffle": (shuffle_tasks, shuffle_report, args.trials)}
    summary = {}
    for part in parts:
        tasks, report, trials = builders[part]
        started = time.perf_counter()
        print(f"== {part}: {len(tasks(trials))} configurations x {trials} trials (numpy driver, exact replies)")
        results = run_all(tasks(trials), args.jobs)
        summary[part] = report(results, out, trials)
        print(f"== {part} took {time.perf_counter() - started:.0f} s; CSV/PNG in {out}\n", flush=True)
    return summary


if __name__ == "__main__":
    main()

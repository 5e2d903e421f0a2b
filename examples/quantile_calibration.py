"""Calibrate the planner's predicted rank error for LDP_QUANTILE (spec §6 rule 6).

The planner predicts each candidate's rank error as α(confidence) ≈ z·σ, with σ = A · (a closed-form scale)
(``ldpql/planner/quantile.py``: sigma_bayess, sigma_nbs, sigma_hierarchical). This script runs the engine's
protocols (engine mode, the planner's round caps) through the numpy driver (users at random positions, as
the executor's hash places them) on the paper's datasets and on uniform data, measures the 95% quantile of the rank error max(F(v-1) - τ, τ - F(v), 0) of the returned value
v, and prints the factor A each configuration implies. Run: ``python examples/quantile_calibration.py``.

``--fit PKL`` refits every factor from the runs of the grid (``examples/quantile_grid.py --raw`` writes PKL):
the A that brings the share of runs within ±1.96σ and ±1.645σ closest to 95% and 90% over the calibration
shapes' cells (least squares over both levels); the held-out shapes are reported, not fitted.

``--coverage`` checks the result instead: the share of runs whose rank error is within the planner's
predicted ±1.96σ (what a result's note claims at 95%), for every mechanism at τ = 0.5 and 0.9 on the same
datasets and on one they were not calibrated on.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from quantile_paper import pareto_data, uniform_data  # noqa: E402

from ldpql.mechanisms.hierarchical import hierarchical_protocol  # noqa: E402
from ldpql.mechanisms.quantile import CoinSpace, bayess_protocol, nbs_protocol  # noqa: E402
from ldpql.simulation import simulate  # noqa: E402
from ldpql.planner import quantile as planner  # noqa: E402

DATASETS = {"pareto 2500, 4^9": lambda: (pareto_data(2500, 9), 4 ** 9),
            "pareto 10000, 4^8": lambda: (pareto_data(10000, 8), 4 ** 8),
            "uniform 2500, 10^6": lambda: (uniform_data(2500, 10 ** 6), 10 ** 6),
            "uniform 40000, 10^3": lambda: (uniform_data(40000, 10 ** 3), 10 ** 3)}
ATOM_SHARE = 0.1   # --fit: cells where the answer is exactly right this often are reported apart
SIGMA = {"bayess": planner.sigma_bayess, "naive_nbs": planner.sigma_nbs, "hierarchical": planner.sigma_hierarchical}
FACTOR = {"bayess": "A_BAYESS", "naive_nbs": "A_NBS", "hierarchical": "A_HIER"}


def rank_errors(data: np.ndarray, coins: np.ndarray, tau: float) -> np.ndarray:
    s = np.sort(data)
    f = np.searchsorted(s, coins, side="right") / len(s)
    below = np.searchsorted(s, coins - 1, side="right") / len(s)
    return np.maximum(np.maximum(below - tau, tau - f), 0.0)


def factory(mechanism: str, coins: int, eps: float, tau: float):
    space = CoinSpace(coins)
    if mechanism == "bayess":
        return bayess_protocol(space, eps, tau, max_rounds=planner.BAYESS_ROUNDS)
    if mechanism == "naive_nbs":
        return nbs_protocol(space, eps, tau)
    return hierarchical_protocol(space, eps, [tau], consistent=True)  # the engine's default post-processing


def coverage(trials: int, mechanisms: dict) -> None:
    """Print, per configuration, each mechanism's predicted 95% rank error and the share of runs within it."""
    datasets = {**DATASETS, "uniform 20000, 10^5 (not calibrated on)": lambda: (uniform_data(20000, 10 ** 5), 10 ** 5)}
    for name, make in datasets.items():
        data, coins = make()
        for eps in (0.5, 1.0, 2.0):
            for tau in (0.5, 0.9):
                row = []
                for mech, sigma in mechanisms.items():
                    alpha = planner.Z95 * sigma(eps, len(data), coins)
                    if sigma(eps, len(data), coins) >= planner.USELESS:
                        row.append(f"{mech} no better than random")
                        continue
                    vals = [simulate(factory(mech, coins, eps, tau)(len(data)), np.random.default_rng([13, t]),
                                     coins=data, exact_positions=False).extra["coin"] for t in range(trials)]
                    row.append(f"{mech} ±{alpha:.3f}: {np.mean(rank_errors(data, np.array(vals), tau) <= alpha):.2f}")
                print(f"{name:40s} ε {eps:<3g} τ {tau}:  " + "  ".join(row), flush=True)


def fit(raw_path: Path) -> dict[str, tuple[float, float]]:
    """Refit each mechanism's factor A and choice weight W from the grid's runs (``quantile_grid.py --raw``).

    A: the multiple of the factor it ran with (on the grid's calibrated-interval steps, so that
    ``quantile_grid.py --rescore`` is exact) that brings the mean over the calibration shapes' cells of the share
    of runs within ±1.96σ and ±1.645σ closest to 95% and 90%. Per cell the share varies around it: cells where
    the answer is exactly right in 10% of runs or more ("atoms": a coin holding more users than the noise
    moves, which no data-independent prediction can see) are reported apart. W: the median over the same cells
    of the mean rank error per σ (the planner ranks candidates by σ·W)."""
    import pickle

    import quantile_grid as grid
    saved = pickle.loads(raw_path.read_bytes())
    out = {}
    made = {}
    for mech, name in grid.FACTORS.items():
        ran = getattr(planner, name)   # the factor now: σ is what the planner predicts now, for every cell
        cells = []
        for k, r in saved["runs"].items():
            cands = made.setdefault((grid.shape_coins(k[0]), k[3]), {c.mechanism: c for c in
                                                                     grid.candidates(grid.shape_coins(k[0]), k[3])})
            s = cands[mech].predict(k[2], k[1]) if k[4] == mech else 0
            if 0 < s < planner.USELESS:
                cells.append((r["errors"], s, k[0] in grid.HELD_OUT))
        fitted = [(e, s) for e, s, held in cells if not held]
        if not fitted:
            continue

        def miss(m: float, group=fitted) -> float:
            return sum((np.mean([np.mean(e <= grid.Z[c] * m * s) for e, s in group]) - c) ** 2 for c in (0.95, 0.90))
        m = float(min(grid.MULTS, key=miss))
        weight = float(np.median([e.mean() / (m * s) for e, s in fitted]))
        out[name] = (ran * m, weight)
        groups = (("no atoms", [(e, s) for e, s in fitted if np.mean(e == 0) < ATOM_SHARE]),
                  ("atoms", [(e, s) for e, s in fitted if np.mean(e == 0) >= ATOM_SHARE]),
                  ("held out", [(e, s) for e, s, held in cells if held]))
        for label, group in groups:
            if group:
                c95 = np.array([np.mean(e <= grid.Z[0.95] * m * s) for e, s in group])
                c90 = np.array([np.mean(e <= grid.Z[0.90] * m * s) for e, s in group])
                print(f"{name} = {ran * m:.4g} (now {ran:.4g}), W = {weight:.3f}, {label:8s}: {len(group)} cells; "
                      f"within ±1.96σ mean {c95.mean():.3f}, within 2 points in {np.sum(abs(c95 - 0.95) <= 0.02)}; "
                      f"±1.645σ mean "
                      f"{c90.mean():.3f}, within 2 points in {np.sum(abs(c90 - 0.90) <= 0.02)}")
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=60)
    ap.add_argument("--tau", type=float, default=0.5)
    ap.add_argument("--only", choices=list(SIGMA), help="calibrate one mechanism")
    ap.add_argument("--coverage", action="store_true", help="check the predictions instead of calibrating")
    ap.add_argument("--fit", type=Path, help="refit the factors from the runs of quantile_grid.py --raw (its .pkl)")
    args = ap.parse_args()
    if args.fit:
        fit(args.fit)
        return
    mechanisms = {m: s for m, s in SIGMA.items() if args.only in (None, m)}
    if args.coverage:
        coverage(args.trials, mechanisms)
        return
    ratios: dict[str, list[float]] = {m: [] for m in mechanisms}
    for name, make in DATASETS.items():
        data, coins = make()
        for eps in (0.25, 0.5, 1.0, 2.0, 4.0):
            for mech, sigma in mechanisms.items():
                base = sigma(eps, len(data), coins) / getattr(planner, FACTOR[mech])
                vals = [simulate(factory(mech, coins, eps, args.tau)(len(data)), np.random.default_rng([7, t]),
                                 coins=data, exact_positions=False).extra["coin"] for t in range(args.trials)]
                q95 = float(np.quantile(rank_errors(data, np.array(vals), args.tau), 0.95))
                ratio = q95 / 1.96 / base
                if base * getattr(planner, FACTOR[mech]) < planner.USELESS * 0.8:
                    ratios[mech].append(ratio)
                print(f"{name:22s} eps {eps:4g} {mech:13s} q95 {q95:.4f}  model σ(A=1) {base:.4f}  A = {ratio:.3f}")
    for mech, r in ratios.items():
        print(f"{FACTOR[mech]}: median {np.median(r):.3f}, 80th percentile {np.quantile(r, 0.8):.3f} over {len(r)}"
              f" configurations (now {getattr(planner, FACTOR[mech])})")


if __name__ == "__main__":
    main()

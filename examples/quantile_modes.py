"""The quantile engine's two default choices against the paper's: BayeSS's mode for τ != 1/2, and the
hierarchical mechanism's post-processing.

Part ``bayess``: quantiles other than the median with DpBayeSS, the two modes of spec §2.6, side by side.

- ``padding`` (the paper's Lemma B.1, spec §1.5): add round(n·|1 − 2τ|) virtual users at the domain's lowest
  or highest coin and find the median of the padded data; the virtual users' answers go through the same RR.
- ``direct`` (the spec's extension): BayesLearn in RR space with target τ', querying the posterior quantile
  q* that achieves the capacity of the asymmetric channel, with the exact Bayes update.

For each dataset, τ and ε the script runs both (engine mode: the planner's round caps, users at random
positions as the executor's hash places them) through the numpy driver and prints the mean and 95th
percentile of the rank error max(F(v−1) − τ, τ − F(v), 0) of the returned value v, and the success rate at
α = 0.04. The planner's default mode is the one that wins here (``ldpql/planner/quantile.py``: QUANTILE_MODE).

Part ``hierarchical``: the hierarchical mechanism's CDF from the raw node estimates (the paper, spec A10) or
from the node estimates made a consistent tree by least squares (``postprocess => 'consistent'``, the
default), at τ = 0.5 and 0.9, ε = 1 and 4.

    python examples/quantile_modes.py [--trials 200] [--eps 0.5 1 2] [--only bayess|hierarchical]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from quantile_calibration import rank_errors  # noqa: E402
from quantile_paper import pareto_data, uniform_data  # noqa: E402

from ldpql.mechanisms.hierarchical import hierarchical_protocol  # noqa: E402
from ldpql.mechanisms.quantile import CoinSpace, bayess_protocol, padded_protocol  # noqa: E402
from ldpql.simulation import simulate  # noqa: E402
from ldpql.planner.quantile import BAYESS_ROUNDS  # noqa: E402

DATASETS = {"pareto 2500, 4^9": lambda: (pareto_data(2500, 9), 4 ** 9),
            "pareto 10000, 4^8": lambda: (pareto_data(10000, 8), 4 ** 8),
            "uniform 10000, 10^6": lambda: (uniform_data(10000, 10 ** 6), 10 ** 6)}
TAUS = (0.1, 0.25, 0.75, 0.9)
ALPHA = 0.04


def factory(mode: str, coins: int, eps: float, tau: float):
    space = CoinSpace(coins)
    if mode == "direct":
        return bayess_protocol(space, eps, tau, max_rounds=BAYESS_ROUNDS)
    return padded_protocol(space, tau, bayess_protocol(space, eps, 0.5, max_rounds=BAYESS_ROUNDS))


def errors(mode: str, data: np.ndarray, coins: int, eps: float, tau: float, trials: int) -> np.ndarray:
    make = factory(mode, coins, eps, tau)
    values = [simulate(make(len(data)), np.random.default_rng([11, t]), coins=data, exact_positions=False)
              .extra["coin"] for t in range(trials)]
    return rank_errors(data, np.array(values), tau)


HIERARCHICAL = {"pareto 10000, 4^8": lambda: (pareto_data(10000, 8), 4 ** 8),
                "pareto 2500, 4^9": lambda: (pareto_data(2500, 9), 4 ** 9),
                "uniform 40000, 10^3": lambda: (uniform_data(40000, 10 ** 3), 10 ** 3),
                "uniform 100000, 10^4": lambda: (uniform_data(100000, 10 ** 4), 10 ** 4)}


def hierarchical_part(trials: int) -> None:
    print(f"\nhierarchical mechanism, {trials} trials: rank error mean / 95th percentile")
    print(f"{'dataset':<22} {'ε':>3} {'τ':>4}   {'raw (paper)':>15}   {'consistent':>15}   raw/consistent (mean)")
    for name, make in HIERARCHICAL.items():
        data, coins = make()
        for eps in (1.0, 4.0):
            for tau in (0.5, 0.9):
                errs = []
                for consistent in (False, True):
                    protocol = hierarchical_protocol(CoinSpace(coins), eps, [tau], consistent=consistent)
                    values = [simulate(protocol(len(data)), np.random.default_rng([4, t]), coins=data,
                                       exact_positions=False).extra["coin"] for t in range(trials)]
                    errs.append(rank_errors(data, np.array(values), tau))
                cells = [f"{e.mean():.4f} / {np.quantile(e, 0.95):.4f}" for e in errs]
                print(f"{name:<22} {eps:>3g} {tau:>4g}   {cells[0]:>15}   {cells[1]:>15}   "
                      f"{errs[0].mean() / max(errs[1].mean(), 1e-12):.2f}", flush=True)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=200)
    ap.add_argument("--eps", type=float, nargs="+", default=[0.5, 1.0, 2.0])
    ap.add_argument("--only", choices=["bayess", "hierarchical"])
    args = ap.parse_args(argv)
    if args.only != "bayess":
        hierarchical_part(min(args.trials, 100))
    if args.only == "hierarchical":
        return
    print(f"rank error of DpBayeSS's τ-quantile, {args.trials} trials: mean / 95th percentile / success at α = {ALPHA}")
    print(f"{'dataset':<20} {'ε':>4} {'τ':>5}   {'direct':>22}   {'padding':>22}   padding/direct (mean)")
    wins = {"direct": 0, "padding": 0}
    for name, make in DATASETS.items():
        data, coins = make()
        for eps in args.eps:
            for tau in TAUS:
                row = {m: errors(m, data, coins, eps, tau, args.trials) for m in ("direct", "padding")}
                cells = [f"{e.mean():.4f} / {np.quantile(e, 0.95):.4f} / {np.mean(e <= ALPHA):.2f}" for e in row.values()]
                ratio = row["padding"].mean() / max(row["direct"].mean(), 1e-12)
                wins["direct" if ratio > 1 else "padding"] += 1
                print(f"{name:<20} {eps:>4g} {tau:>5g}   {cells[0]:>22}   {cells[1]:>22}   {ratio:.2f}", flush=True)
    print(f"lower mean rank error: direct in {wins['direct']} configurations, padding in {wins['padding']}")


if __name__ == "__main__":
    main()

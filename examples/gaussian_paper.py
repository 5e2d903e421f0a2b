"""Reproduce the experiments proposed for Joseph, Kulkarni, Mao, Wu, "Locally Private Gaussian Estimation"
(NeurIPS 2019): the paper has no experiments, so these are the engine's own (spec seed-004 §4.2, E0-E7).

- E0  privacy: the worst log ratio of every randomizer the protocols run (GRR(4) = RR1, binary RR = KVRR2, the
      summed discrete Laplace = UVRR2), exact and as the samplers run, against the claimed ε.
- E1  error against n, known σ (KV2, KV1), ε ∈ {0.25, 0.5, 1, 2}, R = 1000: the normalised error ε√n|µ̂−µ|/σ.
- E2  error against n, unknown σ ∈ {0.3, 1, 10} with [σ_min, σ_max] = [1/4, 16] (UV2, UV1), ε = 1.
- E3  the cost of the σ range for UV1 (and UV2) at n = 10^6: σ_max/σ_min ∈ {2, 16, 256, 4096}.
- E4  error against the range R ∈ {1, 10, 10^3, 10^6} at n = 10^6, ε = 1: KV2 against Duchi et al. and a
      clipped discrete Laplace on [−(R+4σ), R+4σ], and the crossover.
- E5  the price of one round: KV1/KV2 and UV1/UV2 against n, beside √(5ρ) (KV) and the predicted ratio.
- E6  constants profiles: the coarse stage's failure rate (|µ̂_1 − µ| > 2σ) against k, 'practical' vs 'paper'.
- E7  robustness: Laplace, Student-t₃ and a two-component mixture instead of the Gaussian (σ declared 1).
- E8  coverage of the 95% interval against µ (fresh data every run), in and out of the proofs' regime.
- T43 the cells of the spec's indicative table (its §4.3: 'paper' thresholds, [1/4, 16], R = 1000).

Every run goes through the engine's own protocols (:mod:`ldpql.mechanisms.gaussian`) and its one protocol driver
(:func:`ldpql.simulation.simulate`, exact-aggregate path: each round's users are a random subset of the data,
their reports drawn by the round's randomizer). µ is uniform on [−R, R] in every run; σ = 1 unless varied.

    nice python examples/gaussian_paper.py               # default size (about 15 minutes of one core)
    nice python examples/gaussian_paper.py --reuse       # keep the experiments whose CSV is already there
    python examples/gaussian_paper.py --quick            # a reduced run (about a minute)

Writes CSV files, PNG plots (with matplotlib) and run.log to --out (default examples/gaussian_results).
"""

from __future__ import annotations

import argparse
import csv
import math
import sys
import time
from pathlib import Path

import numpy as np

from ldpql import expr as E
from ldpql.audit import audit, realised_audit
from ldpql.mechanisms import Encoding, Estimate, Round, one_round
from ldpql.mechanisms import gaussian as G
from ldpql.mechanisms.duchi import Duchi
from ldpql.mechanisms.grr import GRR
from ldpql.mechanisms.rr import RandomizedResponse
from ldpql.simulation import simulate

X = E.Column("x")
OUT = Path(__file__).resolve().parent / "gaussian_results"

# spec §4.3: median/p90 of |µ̂ − µ| over 60 runs, 'paper' thresholds, R = 1000, [σ_min, σ_max] = [1/4, 16]
SPEC_TABLE = {(0.5, 10**5): {"KV2": (.0195, .050), "KV1": (.159, .303), "UV2": (.106, 1.68), "UV1": (.619, 1.29),
                             "Duchi": (8.46, 23.2)},
              (0.5, 10**6): {"KV2": (.0035, .012), "KV1": (.034, .082), "UV2": (.034, .080), "UV1": (.437, .861),
                             "Duchi": (3.55, 6.98)},
              (1.0, 10**5): {"KV2": (.0096, .018), "KV1": (.056, .112), "UV2": (.026, .077), "UV1": (.282, .725),
                             "Duchi": (5.45, 13.7)},
              (1.0, 10**6): {"KV2": (.0023, .007), "KV1": (.019, .036), "UV2": (.013, .031), "UV1": (.199, .384),
                             "Duchi": (1.66, 4.09)},
              (2.0, 10**6): {"KV2": (.0014, .004), "KV1": (.010, .028), "UV2": (.009, .023), "UV1": (.086, .192),
                             "Duchi": (0.69, 2.09)}}


# ---- data and single runs --------------------------------------------------------------------------------------

def sample(kind: str, rng: np.random.Generator, n: int) -> np.ndarray:
    """n draws with mean 0 (and variance about 1) from the named distribution (E7)."""
    if kind == "gauss":
        return rng.normal(0, 1, n)
    if kind == "laplace":
        return rng.laplace(0, 1 / math.sqrt(2), n)
    if kind == "student_t3":
        return rng.standard_t(3, n) / math.sqrt(3)
    if kind == "mixture":   # 0.7·N(−0.6, 0.5²) + 0.3·N(1.4, 0.5²): mean 0, variance 1.09, skewed
        heavy = rng.random(n) < 0.3
        return np.where(heavy, rng.normal(1.4, 0.5, n), rng.normal(-0.6, 0.5, n))
    raise ValueError(kind)


def duchi_protocol(bound: float):
    enc = Encoding(E.op("/", E.clamp(X, E.double(-bound), E.double(bound)), E.double(bound)), None, "x/B")
    return lambda eps: one_round(Duchi(eps), enc, scale=bound)


def laplace_protocol(bound: float, eps: float):
    """The clipped-Laplace baseline on the engine's discrete Laplace: clip to [−B, B], noise of scale 2B/ε."""
    lap = G.LaplaceSum(eps)
    reply = yield Round(lap, G.offset_encoding(X, -bound, 2 * bound), label="laplace")
    mean = -bound + float(lap.estimate(reply.summary, reply.n)[0]) * 2 * bound / lap.cells
    return Estimate(np.array([mean]), np.array([math.sqrt(lap.sample_variance(reply.summary, reply.n)) * 2 * bound
                                                / lap.cells]))


def run(setting: G.Setting, rounds: int, x: np.ndarray, mu: float, rng: np.random.Generator) -> dict:
    est = simulate(G.protocol(setting, X, len(x), rounds), rng, x)
    lo, hi = est.interval
    return {"error": abs(est.values[0] - mu), "coarse_error": abs(est.extra["coarse_mu"] - mu),
            "covered": bool(lo[0] <= mu <= hi[0]), "sigma_coarse": est.extra.get("sigma_coarse", math.nan)}


def summarise(runs: list[dict], n: int, eps: float, sigma: float, beta: float = 0.05) -> dict:
    err = np.array([r["error"] for r in runs])
    coarse = np.array([r.get("coarse_error", math.nan) for r in runs])
    return {"runs": len(runs), "median": float(np.median(err)), "p90": float(np.quantile(err, 0.9)),
            "q_1-beta": float(np.quantile(err, 1 - beta)),
            "normalised_median": float(eps * math.sqrt(n) * np.median(err) / sigma),
            "failure_rate": float(np.mean((coarse > 2 * sigma) | (err > sigma))),
            "coarse_failure": float(np.mean(coarse > 2 * sigma)),
            "coverage": float(np.mean([r.get("covered", math.nan) for r in runs]))}


def trials_for(n: int, budget: float, most: int) -> int:
    """Runs per cell: ``most`` while n·runs stays within the budget of user-reports, never fewer than 8."""
    return int(max(8, min(most, budget // n)))


def cells(protocols: dict, n: int, runs: int, seed: int, data: str = "gauss", sigma: float = 1.0) -> dict:
    """Run every protocol of ``protocols`` (name -> (setting, rounds)) on the same data sets."""
    rng = np.random.default_rng(seed)
    out = {name: [] for name in protocols}
    for _ in range(runs):
        s0 = next(iter(protocols.values()))[0]
        mu = rng.uniform(s0.low, s0.high)
        x = mu + sigma * sample(data, rng, n)
        for name, (s, rounds) in protocols.items():
            out[name].append(run(s, rounds, x, mu, rng))
    return out


# ---- the experiments ------------------------------------------------------------------------------------------

def e0() -> list[dict]:
    rows = []
    for eps in (0.1, 0.5, 1.0, 2.0, 5.0, 30.0):
        for r in (GRR(eps, 4), RandomizedResponse(eps), G.LaplaceSum(eps, 3)):
            rows.append({"randomizer": repr(r), "epsilon": eps, "exact_worst": audit(r).max_log_ratio,
                         "realised_worst": realised_audit(r).max_log_ratio})
    return rows


def e1(ns, epsilons, budget, most, R=1000.0) -> list[dict]:
    rows = []
    for eps in epsilons:
        s = G.Setting(-R, R, 1.0, 1.0, eps)
        for n in ns:
            res = cells({"KV2": (s, 2), "KV1": (s, 1)}, n, trials_for(n, budget, most), seed=hash((1, eps, n)) % 2**32)
            for name, runs in res.items():
                rows.append({"protocol": name, "epsilon": eps, "n": n, "k": G.grouping(s, n).k, "k_min": G.k_min(s),
                             "predicted_sd": G.predicted_sd(s, n, 2 if name == "KV2" else 1, t=0.0),
                             **summarise(runs, n, eps, 1.0)})
    return rows


def e2(ns, sigmas, budget, most, eps=1.0, R=1000.0) -> list[dict]:
    rows = []
    s = G.Setting(-R, R, 0.25, 16.0, eps)
    for sigma in sigmas:
        for n in ns:
            res = cells({"UV2": (s, 2), "UV1": (s, 1)}, n, trials_for(n, budget, most), seed=hash((2, sigma, n)) % 2**32,
                        sigma=sigma)
            for name, runs in res.items():
                rows.append({"protocol": name, "sigma": sigma, "epsilon": eps, "n": n, **summarise(runs, n, eps, sigma),
                             "median_sigma_coarse": float(np.median([r["sigma_coarse"] for r in runs]))})
    return rows


def e3(n, ratios, runs, eps=1.0, R=1000.0) -> list[dict]:
    rows = []
    for ratio in ratios:
        s = G.Setting(-R, R, 0.5, 0.5 * ratio, eps)
        res = cells({"UV2": (s, 2), "UV1": (s, 1)}, n, runs, seed=hash((3, ratio)) % 2**32)
        for name, rs in res.items():
            rows.append({"protocol": name, "ratio": ratio, "n": n, "groups": G.subgroups(s, n),
                         **summarise(rs, n, eps, 1.0)})
    base = {r["protocol"]: r["median"] for r in rows if r["ratio"] == ratios[0]}
    for r in rows:
        r["relative_to_ratio_2"] = r["median"] / base[r["protocol"]]
        r["predicted_factor"] = math.sqrt((math.log2(r["ratio"]) + 1) / 2) if r["protocol"] == "UV1" else 1.0
    return rows


def e4(n, ranges, runs, eps=1.0) -> list[dict]:
    rows = []
    for R in ranges:
        s = G.Setting(-R, R, 1.0, 1.0, eps)
        bound = R + 4.0
        rng = np.random.default_rng(hash((4, R)) % 2**32)
        kv, duchi, lap = [], [], []
        for _ in range(runs):
            mu = rng.uniform(-R, R)
            x = mu + rng.normal(0, 1, n)
            kv.append(run(s, 2, x, mu, rng))
            duchi.append({"error": abs(simulate(duchi_protocol(bound)(eps), rng, x).values[0] - mu)})
            lap.append({"error": abs(simulate(laplace_protocol(bound, eps), rng, x).values[0] - mu)})
        for name, rs, sd in (("KV2", kv, G.predicted_sd(s, n, 2, t=0.0)),
                             ("Duchi", duchi, bound * (math.exp(eps) + 1) / math.expm1(eps) / math.sqrt(n)),
                             ("Laplace", lap, math.sqrt(1 + 2 * (2 * bound / eps) ** 2) / math.sqrt(n))):
            row = {"protocol": name, "R": R, "n": n, "predicted_sd": sd, **summarise(rs, n, eps, 1.0)}
            row.pop("failure_rate"), row.pop("coarse_failure"), row.pop("coverage")
            rows.append(row)
    return rows


def crossover(n: int, eps: float = 1.0) -> float:
    """The half-range B = R + 4σ below which Duchi et al.'s predicted sd beats KV2's (σ = 1): negative R means
    KV2 wins at every range."""
    s = G.Setting(-1.0, 1.0, 1.0, 1.0, eps)
    kv = G.predicted_sd(s, n, 2, t=0.0)
    return kv * math.sqrt(n) * math.expm1(eps) / (math.exp(eps) + 1)


def e5(e1_rows, e2_rows) -> list[dict]:
    rows = []
    for eps in sorted({r["epsilon"] for r in e1_rows}):
        for n in sorted({r["n"] for r in e1_rows}):
            pair = {r["protocol"]: r for r in e1_rows if r["epsilon"] == eps and r["n"] == n}
            if len(pair) == 2:
                s = G.Setting(-1000, 1000, 1.0, 1.0, eps)
                rows.append({"case": "KV", "epsilon": eps, "sigma": 1.0, "n": n,
                             "measured_ratio": pair["KV1"]["median"] / pair["KV2"]["median"],
                             "sqrt_5rho": math.sqrt(5 * G.rho(s, n)), "predicted_ratio": G.one_round_price(s, n)})
    for sigma in sorted({r["sigma"] for r in e2_rows}):
        for n in sorted({r["n"] for r in e2_rows}):
            pair = {r["protocol"]: r for r in e2_rows if r["sigma"] == sigma and r["n"] == n}
            if len(pair) == 2:
                s = G.Setting(-1000, 1000, 0.25, 16.0, 1.0)
                rows.append({"case": "UV", "epsilon": 1.0, "sigma": sigma, "n": n,
                             "measured_ratio": pair["UV1"]["median"] / pair["UV2"]["median"],
                             "sqrt_5rho": math.nan, "predicted_ratio": G.one_round_price(s, n)})
    return rows


def e6(ns, runs, eps=1.0, R=1000.0) -> list[dict]:
    rows = []
    for n in ns:
        protocols = {p: (G.Setting(-R, R, 1.0, 1.0, eps, profile=p), 2) for p in G.PROFILES}
        res = cells(protocols, n, runs, seed=hash((6, n)) % 2**32)
        for p, rs in res.items():
            s = protocols[p][0]
            rows.append({"profile": p, "n": n, "k": G.grouping(s, n).k, "k_min": G.k_min(s),
                         **summarise(rs, n, eps, 1.0)})
    return rows


def e7(n, runs, eps=1.0, R=1000.0) -> list[dict]:
    rows = []
    for data in ("gauss", "laplace", "student_t3", "mixture"):
        protocols = {"KV2": (G.Setting(-R, R, 1.0, 1.0, eps), 2), "UV2": (G.Setting(-R, R, 0.25, 16.0, eps), 2),
                     "KV1": (G.Setting(-R, R, 1.0, 1.0, eps), 1)}
        res = cells(protocols, n, runs, seed=hash((7, data)) % 2**32, data=data)
        for name, rs in res.items():
            rows.append({"data": data, "protocol": name, "n": n, **summarise(rs, n, eps, 1.0)})
    return rows


def e8(cells_: list[tuple[str, float, int, int]], confidence: float = 0.95) -> list[dict]:
    """Coverage of the 95% interval against µ, fresh data every run: (protocol, ε, n, runs) per cell, with the
    binomial standard error of the measured coverage and whether the proofs' constants ("theory regime") hold.
    β is the planner's default, (1 − confidence)/4, so the interval is the one a statement states at 95%."""
    rows, beta = [], (1 - confidence) / 4
    for name, eps, n, runs in cells_:
        sigma = (1.0, 1.0) if name.startswith("KV") else (0.25, 16.0)
        s = G.Setting(-1000, 1000, *sigma, eps, beta)
        res = cells({name: (s, 2 if name.endswith("2") else 1)}, n, runs, seed=hash((8, name, eps, n)) % 2**32)
        cov = float(np.mean([r["covered"] for r in res[name]]))
        rows.append({"protocol": name, "epsilon": eps, "n": n, "runs": runs, "coverage": cov,
                     "coverage_se": math.sqrt(cov * (1 - cov) / runs), "nominal": confidence, "beta": beta,
                     "theory_regime": G.theory_regime(s, G.grouping(s, n).k, n), "k": G.grouping(s, n).k,
                     "k_min": G.k_min(s)})
    return rows


def table43(runs) -> list[dict]:
    rows = []
    for (eps, n), ref in SPEC_TABLE.items():
        kv = G.Setting(-1000, 1000, 1.0, 1.0, eps, profile="paper")
        uv = G.Setting(-1000, 1000, 0.25, 16.0, eps, profile="paper")
        reps = runs if n <= 10**5 else runs // 3
        res = cells({"KV2": (kv, 2), "KV1": (kv, 1), "UV2": (uv, 2), "UV1": (uv, 1)}, n, reps,
                    seed=hash((43, eps, n)) % 2**32)
        rng = np.random.default_rng(hash((44, eps, n)) % 2**32)
        duchi = []
        for _ in range(reps):
            mu = rng.uniform(-1000, 1000)
            x = mu + rng.normal(0, 1, n)
            duchi.append({"error": abs(simulate(duchi_protocol(1064.0)(eps), rng, x).values[0] - mu)})
        res["Duchi"] = duchi
        for name, rs in res.items():
            err = np.array([r["error"] for r in rs])
            rows.append({"epsilon": eps, "n": n, "protocol": name, "median": float(np.median(err)),
                         "p90": float(np.quantile(err, 0.9)), "spec_median": ref[name][0], "spec_p90": ref[name][1],
                         "runs": reps})
    return rows


# ---- output ---------------------------------------------------------------------------------------------------

def write(rows: list[dict], path: Path) -> None:
    if not rows:
        return
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)


def plot(out: Path, e1_rows, e2_rows, e4_rows, e5_rows) -> None:
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib not installed: no plots (pip install 'ldpql[plot]')")
        return
    fig, ax = plt.subplots(2, 2, figsize=(12, 9))
    for (name, eps), style in zip([(p, e) for p in ("KV2", "KV1") for e in sorted({r["epsilon"] for r in e1_rows})],
                                  ["-o", "-s", "-^", "-v", "--o", "--s", "--^", "--v"]):
        rs = [r for r in e1_rows if r["protocol"] == name and r["epsilon"] == eps]
        ax[0, 0].plot([r["n"] for r in rs], [r["normalised_median"] for r in rs], style, label=f"{name} ε={eps:g}")
    ax[0, 0].set(xscale="log", yscale="log", xlabel="n", ylabel="ε√n·median|µ̂−µ|/σ", title="E1: known σ, R = 1000")
    ax[0, 0].legend(fontsize=7)
    for name, style in (("UV2", "-"), ("UV1", "--")):
        for sigma in sorted({r["sigma"] for r in e2_rows}):
            rs = [r for r in e2_rows if r["protocol"] == name and r["sigma"] == sigma]
            ax[0, 1].plot([r["n"] for r in rs], [r["normalised_median"] for r in rs], style + "o", label=f"{name} σ={sigma:g}")
    ax[0, 1].set(xscale="log", yscale="log", xlabel="n", ylabel="ε√n·median|µ̂−µ|/σ",
                 title="E2: unknown σ ∈ [1/4, 16], ε = 1")
    ax[0, 1].legend(fontsize=7)
    for name in ("KV2", "Duchi", "Laplace"):
        rs = [r for r in e4_rows if r["protocol"] == name]
        ax[1, 0].plot([r["R"] for r in rs], [r["median"] for r in rs], "-o", label=name)
    ax[1, 0].set(xscale="log", yscale="log", xlabel="R (µ ∈ [−R, R])", ylabel="median |µ̂−µ|",
                 title="E4: range, n = 10^6, ε = 1")
    ax[1, 0].legend()
    for case, style in (("KV", "-o"), ("UV", "-s")):
        rs = [r for r in e5_rows if r["case"] == case and (case == "UV" and r["sigma"] == 1.0 or case == "KV"
                                                            and r["epsilon"] == 1.0)]
        ax[1, 1].plot([r["n"] for r in rs], [r["measured_ratio"] for r in rs], style, label=f"{case} measured")
        ax[1, 1].plot([r["n"] for r in rs], [r["predicted_ratio"] for r in rs], style.replace("-", ":"),
                      label=f"{case} predicted (sd ratio)")
    kv = [r for r in e5_rows if r["case"] == "KV" and r["epsilon"] == 1.0]
    ax[1, 1].plot([r["n"] for r in kv], [r["sqrt_5rho"] for r in kv], "k--", label="√(5ρ)")
    ax[1, 1].set(xscale="log", xlabel="n", ylabel="one-round / two-round median error",
                 title="E5: the price of one round (ε = 1, σ = 1)")
    ax[1, 1].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out / "gaussian_paper.png", dpi=110)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="a reduced run (fewer n, runs and cells)")
    ap.add_argument("--out", default=str(OUT))
    ap.add_argument("--no-plot", action="store_true")
    ap.add_argument("--reuse", action="store_true", help="read the experiments whose CSV is already in --out")
    args = ap.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    with open(out / "run.log", "a" if args.reuse else "w") as log:
        return _main(args, out, log)


def read(path: Path) -> list[dict]:
    """A CSV written by :func:`write`, numbers as floats (ints where whole)."""
    def num(v: str):
        try:
            f = float(v)
        except ValueError:
            return v
        return int(f) if f.is_integer() and "." not in v and "e" not in v.lower() else f
    with open(path, newline="") as f:
        return [{k: num(v) for k, v in row.items()} for row in csv.DictReader(f)]


def cached(args, path: Path, compute) -> tuple[list[dict], bool]:
    """The rows of an experiment: read from ``path`` with --reuse when it exists, else computed and written."""
    if args.reuse and path.exists():
        return read(path), True
    rows = compute()
    write(rows, path)
    return rows, False


def _main(args, out: Path, log) -> int:
    def say(*parts):
        line = " ".join(str(p) for p in parts)
        print(line)
        log.write(line + "\n")
        log.flush()

    if args.quick:
        ns, eps1, budget, most = [10**4, 10**5], [1.0], 2e6, 30
        big, runs_big, ranges, e6_ns, sig, ratios = 10**5, 10, [1, 1e6], [10**4, 3 * 10**4], [1.0], [2, 256]
    else:
        ns, eps1, budget, most = [10**4, 3 * 10**4, 10**5, 3 * 10**5, 10**6, 3 * 10**6], [0.25, 0.5, 1.0, 2.0], 2.4e7, 200
        big, runs_big, ranges, e6_ns, sig = 10**6, 16, [1, 10, 1e3, 1e6], [5000, 10**4, 2 * 10**4, 5 * 10**4, 10**5], [0.3, 1.0, 10.0]
        ratios = [2, 16, 256, 4096]
    start = time.time()
    rows0 = e0()
    write(rows0, out / "e0_privacy.csv")
    say(f"E0: worst |realised − claimed| over {len(rows0)} cases:",
        max(abs(r["realised_worst"] - r["epsilon"]) for r in rows0), "all at or below ε:",
        all(r["realised_worst"] <= r["epsilon"] * (1 + 1e-12) for r in rows0))
    rows1, _ = cached(args, out / "e1_kv_error_vs_n.csv", lambda: e1(ns, eps1, budget, most))
    for r in rows1:
        say(f"E1 {r['protocol']} ε={r['epsilon']:g} n={r['n']:>8} runs={r['runs']:>3} median={r['median']:.4g} "
            f"normalised={r['normalised_median']:.3f} fail={r['failure_rate']:.2f} cover={r['coverage']:.2f}")
    rows2, _ = cached(args, out / "e2_uv_error_vs_n.csv",
                      lambda: e2([n for n in ns if 3 * 10**4 <= n <= 10**6] or ns, sig, budget / 4, most // 2))
    for r in rows2:
        say(f"E2 {r['protocol']} σ={r['sigma']:g} n={r['n']:>8} median={r['median']:.4g} "
            f"normalised={r['normalised_median']:.3f} σ̂={r['median_sigma_coarse']:g} cover={r['coverage']:.2f}")
    rows3, _ = cached(args, out / "e3_sigma_range.csv", lambda: e3(big, ratios, runs_big))
    for r in rows3:
        say(f"E3 {r['protocol']} ratio={r['ratio']:>5} g={r['groups']:>4} median={r['median']:.4g} "
            f"relative={r['relative_to_ratio_2']:.2f} predicted={r['predicted_factor']:.2f}")
    rows4, _ = cached(args, out / "e4_range.csv", lambda: e4(big, ranges, runs_big))
    for r in rows4:
        say(f"E4 {r['protocol']:>7} R={r['R']:>9g} median={r['median']:.4g} predicted sd={r['predicted_sd']:.4g}")
    say(f"E4 crossover: Duchi's predicted sd beats KV2's only when R + 4σ < {crossover(big):.3g}σ (n = {big})")
    rows5 = e5(rows1, rows2)
    write(rows5, out / "e5_rounds.csv")
    for r in rows5:
        say(f"E5 {r['case']} ε={r['epsilon']:g} σ={r['sigma']:g} n={r['n']:>8} ratio={r['measured_ratio']:.2f} "
            f"√(5ρ)={r['sqrt_5rho']:.2f} predicted={r['predicted_ratio']:.2f}")
    rows6, _ = cached(args, out / "e6_profiles.csv", lambda: e6(e6_ns, most if args.quick else 100))
    for r in rows6:
        say(f"E6 {r['profile']:>9} n={r['n']:>7} k={r['k']:>6} k_min={r['k_min']} coarse_fail={r['coarse_failure']:.3f} "
            f"median={r['median']:.4g}")
    rows7, _ = cached(args, out / "e7_robustness.csv", lambda: e7(big, runs_big))
    for r in rows7:
        say(f"E7 {r['data']:>10} {r['protocol']} median={r['median']:.4g} p90={r['p90']:.4g} cover={r['coverage']:.2f}")
    rows43, _ = cached(args, out / "t43_spec_table.csv", lambda: table43(60)) if not args.quick else ([], False)
    for r in rows43:
        say(f"T4.3 ε={r['epsilon']:g} n={r['n']:>8} {r['protocol']:>5} median/p90 = {r['median']:.4g}/{r['p90']:.4g} "
            f"(spec {r['spec_median']:g}/{r['spec_p90']:g})")
    e8_cells = ([("KV2", 1.0, 10**5, 40)] if args.quick else
                [("KV2", 1.0, 10**5, 400), ("UV2", 1.0, 10**5, 400), ("KV1", 1.0, 10**5, 200),
                 ("KV2", 2.0, 10**6, 100), ("UV2", 2.0, 10**6, 60)])
    rows8, _ = cached(args, out / "e8_coverage.csv", lambda: e8(e8_cells))
    for r in rows8:
        say(f"E8 {r['protocol']} ε={r['epsilon']:g} n={r['n']:>8} runs={r['runs']} coverage={r['coverage']:.3f} "
            f"± {r['coverage_se']:.3f} (nominal {r['nominal']}) theory regime: {r['theory_regime']}")
    if not args.no_plot:
        plot(out, rows1, rows2, rows4, rows5)
    say(f"done in {time.time() - start:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())

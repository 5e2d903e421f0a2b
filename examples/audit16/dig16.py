"""Audit 16: why the tree under-covers on atom_low / pareto (sim16 cells). For each cell, 400 simulated releases of the
consistent tree (the planner's candidate, K = 65,536): the empirical sd of F̂ at the true quantile's coin against the
floor's sd there (sqrt of coin_var, i.e. consistent_variance) and the planner's σ; the exact variance of the fitted
F̂ at that coin for the real per-node covariance (OUE + multinomial sampling of each level's users, from the true
node frequencies), computed by the fit's own linear map (pseudo-reports, as consistent_variance does, but with the
real node variances — sampling covariance ignored, OUE and f(1−f)/m on the diagonal); and the coverage of the shown
rank error with the floor replaced by that real-variance floor (a what-if, from the release's public n per level and
the true node frequencies: NOT something the engine may compute, it shows where the floor falls short), and with a
release-only floor: the same sandwich Σ g²·v̂ with v̂ the release's own per-node variances (OUE's and f̂(1−f̂)/m at the
clipped released f̂, as cdf_estimate's raw `variances`): post-processing of the release, which the engine could use.

    nice python dig16.py [reps]  -> dig16.txt
"""
from __future__ import annotations

import math
import sys
from pathlib import Path

import numpy as np

from ldpql.mechanisms import Encoding, hierarchical as H
from ldpql.mechanisms.oue import OUE
from ldpql.planner import quantile as planner
from ldpql.simulation import simulate

from common16 import Z, clopper, rng, shapes

HERE = Path(__file__).parent
lines = []


def say(s):
    print(s, flush=True)
    lines.append(s)


def real_node_var(shape, eps, n):
    widths = H.level_widths(shape.size)
    m = n / len(widths)
    out = []
    for w in widths:
        nodes = -(-shape.size // w)
        f = np.add.reduceat(shape.hist, np.arange(0, shape.size, w))[:nodes] / shape.n
        r = OUE(eps, max(nodes, 2))
        out.append(np.asarray(r.variance(f, round(m)), dtype=float)[:nodes] + f * (1 - f) / m)
    return out


def weights_of(shape, eps, n):
    widths = H.level_widths(shape.size)
    m = round(n / len(widths))
    out = []
    for w in widths:
        nodes = -(-shape.size // w)
        r = OUE(eps, max(nodes, 2))
        mean = 1.0 / nodes
        out.append(np.full(nodes, float(r.variance(np.array([mean]), m)[0]) + mean * (1 - mean) / m))
    return out


def var_under(weights, real, widths, size, coin):
    """Var of the fitted prefix [0, coin] when the fit uses ``weights`` but the node errors have variances ``real``:
    Σ_nodes g_node² real_node, g the prefix's coefficients on the node reports (one fit per level: the coefficients of
    all nodes of a level at once are the fit of the pseudo-report a·v at the leaves transposed... computed here by
    the explicit map row: g = L^T a, L from unit reports would be too large at 2^16, so use the adjoint: the fit is
    self-adjoint in the W-inner product, g_node = (fit of pseudo leaves a·w0)_node / w_node)."""
    pseudo = [np.zeros(-(-size // w)) for w in widths]
    pseudo[0][: coin + 1] = weights[0][: coin + 1]
    fitted_up = _node_fit(pseudo, weights)
    return float(sum(np.sum((g / w) ** 2 * r) for g, w, r in zip(fitted_up, weights, real)))


def _node_fit(pseudo, weights):
    """The fitted node values of every level (not only the leaves) of make_consistent, root 0."""
    final = H.make_consistent(pseudo, weights, H.BRANCHING, total=0.0)
    # node value = a_node · coefficients: for the WLS projection P = X G Xᵀ W, (P)ᵀ's column for the prefix is
    # W X G a; with pseudo y = a·w0 at the leaves, G a = fitted leaves, X G a = fitted nodes (final), so
    # g = W · final (per node: final / w): returned as final, divided by w by the caller
    return final


_captured = {}
_orig_cdf_estimate = H.cdf_estimate


def _capture(replies, randomizers, widths, branching, size, consistent=False):
    """Keep what the release holds per node (the engine's own estimates and their released variances)."""
    v, wts = [], []
    for reply, r, w in zip(replies, randomizers, widths):
        nodes = -(-size // w)
        f = np.clip(np.asarray(r.estimate(reply.summary, reply.n), dtype=float)[:nodes], 0, 1)
        v.append(np.asarray(r.variance(f, reply.n), dtype=float)[:nodes] + f * (1 - f) / reply.n)
        mean = 1.0 / nodes
        wts.append(np.full(nodes, float(r.variance(np.array([mean]), reply.n)[0]) + mean * (1 - mean) / reply.n))
    _captured["var"], _captured["weights"] = v, wts
    return _orig_cdf_estimate(replies, randomizers, widths, branching, size, consistent)


H.cdf_estimate = _capture


def sql_shapes():
    """Q15 / Q16 of sql16.py (the planner's own tree on 2^16 coins), at mechanism level, one coin per integer."""
    from common16 import Shape
    from sql16 import cells_def
    d = cells_def()
    return {"Q15": Shape("Q15", d["Q15"]["cols"]["x"], 0, 65535, True),
            "Q16": Shape("Q16", d["Q16"]["cols"]["x"], 0, 65535, True)}


def main(reps):
    cells = [("pareto", 20000, 8.0, 0.9), ("pareto", 20000, 4.0, 0.9), ("atom_low", 20000, 4.0, 0.5),
             ("atom_low", 2000, 8.0, 0.9), ("uniform", 20000, 4.0, 0.5), ("Q15", 100000, 5.0, 0.99),
             ("Q15", 100000, 5.0, 0.9), ("Q16", 100000, 5.0, 0.9)]
    extra = sql_shapes()
    for ci, (name, n, eps, tau) in enumerate(cells):
        shape = extra[name] if name in extra else shapes(n)[name]
        taus = {"pareto": (0.5, 0.9, 0.99), "atom_low": (0.1, 0.3, 0.5, 0.9), "uniform": (0.1, 0.5, 0.9),
                "Q15": (0.5, 0.9, 0.99), "Q16": (0.1, 0.5, 0.9)}[name]
        target = planner.QuantileTarget("x", Encoding("x", shape.size, "x"), "", None, planner.UNIT, tau=tau,
                                        space=shape.space(), taus=taus)
        cand = next(c for c in planner.quantile_candidates(target) if c.mechanism == "hierarchical")
        sigma = cand.predict(eps, n)
        make = cand.protocol(eps)
        widths = H.level_widths(shape.size)
        true = int(np.searchsorted(shape.cdf, tau - 1e-12))
        w = weights_of(shape, eps, n)
        real = real_node_var(shape, eps, n)
        floor_sd = math.sqrt(H.consistent_variance(w, widths, H.BRANCHING, shape.size, true))
        real_sd = math.sqrt(var_under(w, real, widths, shape.size, true))
        check_sd = math.sqrt(var_under(w, w, widths, shape.size, true))   # must equal floor_sd
        at_true, held, held_real, held_sand, errs, shown, coins, sand = [], 0, 0, 0, [], [], [], []
        derive = planner._derive(tau, shape.space(), "certified", "x")
        for t in range(reps):
            rel = simulate(make(n), rng(900 + ci, t), hist=shape.hist, exact_positions=False)
            at_true.append(rel.extra["cdf"][true])
            a = derive(rel, 0.95)
            c = int(a.extra["coin"])
            e = shape.error(c, tau)
            s = a.extra["rank_error"]
            errs.append(e); shown.append(s); coins.append(c)
            held += e <= s + 1e-12
            ans = rel.extra["answers"][tau]
            ans.extra["coin_var"] = var_under(w, real, widths, shape.size, c)
            held_real += e <= planner.shown_rank_error(ans, tau, sigma, Z[0.95]) + 1e-12
            # release-only: the fit's weights and the release's OWN per-node variances (the engine's raw `variances`)
            ans.extra["coin_var"] = var_under(_captured["weights"], _captured["var"], widths, shape.size, c)
            sand.append(planner.shown_rank_error(ans, tau, sigma, Z[0.95]))
            held_sand += e <= sand[-1] + 1e-12
        emp = float(np.std(at_true))
        errs, shown = np.array(errs), np.array(shown)
        say(f"{name} n={n} ε={eps:g} τ={tau} (true coin {true}, F there {shape.cdf[true]:.4f}): sd of F̂ at the true "
            f"coin: empirical {emp:.4f}, floor {floor_sd:.4f} (check {check_sd:.4f}), real-node-variance "
            f"{real_sd:.4f}, planner σ {sigma:.4f}; emp/floor {emp / floor_sd:.2f}")
        say(f"    95%: shown held {held}/{reps} = {held / reps:.3f} CP {clopper(held, reps)}; with the real-variance "
            f"floor {held_real / reps:.3f} CP {clopper(held_real, reps)}; with a release-only floor (fit weights, the "
            f"release's own node variances) {held_sand / reps:.3f} CP {clopper(held_sand, reps)}; mean error {errs.mean():.4f}, p95 "
            f"{np.quantile(errs, 0.95):.4f}, mean shown {shown.mean():.4f} (release-only floor: {np.mean(sand):.4f}; "
            f"z·σ {Z[0.95] * sigma:.4f})")
    (HERE / "dig16.txt").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 400)

"""Audit 16 (hostile review of session 12's one-round quantile read-out, the tree's floor and the batched Gaussian
likelihood; examples/audit16/README.md). Findings fixed here are plain tests with the numbers before; the one left
open is a strict xfail with its measured numbers."""

from __future__ import annotations

import warnings
from statistics import NormalDist

import numpy as np
import pyarrow as pa
import pytest

import ldpql
from ldpql.mechanisms.gaussian_check import class_probabilities
from ldpql.mechanisms.hierarchical import hierarchical_protocol
from ldpql.mechanisms.quantile import CoinSpace
from ldpql.planner import quantile as planner
from ldpql.simulation import simulate

Z95 = NormalDist().inv_cdf(0.975)


def _tree_runs(x: np.ndarray, size: int, eps: float, taus: tuple, reps: int, seed: int) -> dict:
    """{τ: per run, (the answer's rank error, the rank error a result shows at 95%)} of the consistent tree."""
    n = len(x)
    hist = np.bincount(np.rint(x).astype(np.int64), minlength=size)
    cdf = np.cumsum(hist) / n
    make = hierarchical_protocol(CoinSpace(size), eps, list(taus), consistent=True)
    sigma = max(planner.sigma_hierarchical(eps, n, size, planner.A_HIER, t) for t in taus)
    out = {t: [] for t in taus}
    for s in range(reps):
        release = simulate(make(n), np.random.default_rng([seed, s]), hist=hist, exact_positions=False)
        for t in taus:
            answer = release.extra["answers"][t]
            v = int(answer.extra["coin"])
            error = max((cdf[v - 1] if v else 0.0) - t, t - cdf[v], 0.0)
            out[t].append((error, planner.shown_rank_error(answer, t, sigma, Z95)))
    return {t: np.array(rows) for t, rows in out.items()}


def test_the_trees_floor_holds_on_a_heavy_tail():
    """Was HIGH (#1): the floor gave every node its level's mean variance, but the nodes holding the mass vary far
    more (their users' sampling): 1.5-9x short on heavy tails and atoms. Pareto(1.1) on INTEGER 0..65535, n = 2,000,
    ε = 8, three q's in one tree: q = 0.9 held 0.810 of these 200 runs at 95%, q = 0.99 0.925 (the planner's own tree
    on 30% at 0 plus a log-normal tail, n = 100,000, ε = 5: 0.860 in the audit). Now each node's released variance
    goes through the fit's linear map: 0.965 and 0.98."""
    x = np.minimum((np.random.default_rng([16, 2000]).pareto(1.1, 2000) + 1) * 10, 65535)
    runs = _tree_runs(x, 65536, 8.0, (0.5, 0.9, 0.99), 200, 16)
    for tau in (0.9, 0.99):
        held = np.mean(runs[tau][:, 0] <= runs[tau][:, 1] + 1e-12)
        assert held >= 0.93, (tau, held)


def test_a_tree_level_without_users_shows_the_cap_and_warns_nothing():
    """Was LOW (#5): with a level of the tree left without users (n <= 12 on 2^16 coins), the released prefix variance
    was inf - inf = NaN, a RuntimeWarning reached stderr, and the shown rank error was finite only because Python's
    max and min happened to skip the NaN."""
    con = ldpql.connect(evaluation=True)
    con.register("t", pa.table({"x": np.arange(5) * 100.0}), private={"x": {"between": (0.0, 1000.0)}}, budget=1e9)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        res = con.sql("SELECT LDP_QUANTILE(x, 0.5, mechanism => 'hierarchical') FROM t EPSILON 1 OPTIONS (seed = 3)")
    assert any("±0.5 (95%" in note for note in res.notes), res.notes
    assert all("nan" not in note.lower() for note in res.notes)


def test_the_gaussian_cells_stay_exact_far_from_the_partitions_origin():
    """Was LOW (#6): 63f8643 divided before it subtracted (edge·w/σ - µ/σ), so a class probability drifted with
    |µ - shift|/σ: 8e-5 at 1e12, 0.08 at 1e15. (edge·w - µ)/σ is exact to rounding: with σ = 0.3 and cells of width
    1, the four classes of a value in the middle of a cell far from 0 hold the normal's masses of the cells
    around it."""
    from scipy.stats import norm
    cells = np.arange(-8, 9)   # the cells around µ's own, each holding the normal's mass over it, in class k mod 4
    mass = norm.cdf((cells + 0.5) / 0.3) - norm.cdf((cells - 0.5) / 0.3)
    expected = np.bincount(cells % 4, weights=mass, minlength=4)
    for offset in (1e9, 1e12, 1e15):   # multiples of 4: µ in the middle of a cell of class 0
        got = class_probabilities(np.array([offset + 0.5]), 0.3, 0.0, 1.0, 4)[0]
        assert got == pytest.approx(expected, abs=1e-12), offset


@pytest.mark.xfail(strict=True, reason=(
    "MEDIUM (accuracy; coverage held): where F is flat exactly at q the split with the fewest units on the wrong side "
    "is the argmin of a ±1 walk over the plateau, which falls near the walk's ends (the arcsine law), and from there "
    "it "
    "spills into the data; the old reading (the middle of the crossings) took the plateau's middle. Half the users on "
    "0..99 and half on 900..1023, q = 0.5, n = 2,000, ε = 2, forced tree: every value 100..899 has rank error 0; the "
    "old reading's mean rank error 0.0055, the new one's 0.028 on these 100 runs (audit 16: 0.000 -> 0.012-0.032 at ε "
    "1-4). Variants tried (crossings among the near-best splits; isotonic regression) did not recover it without "
    "losing the empty-tail fix: left open (session 12). Session 14 (examples/readout14): the old reading where the "
    "mean of F̂ - τ between the two answers is within 1-2 sd of 0, else the new one, is the old reading in every "
    "tail cell too (at n = 20,000, ε = 1 the tree's sd, ~0.1, hides a tail at F = 1 from τ = 0.9): 0.0972 vs 0.0323 "
    "there; the old one where its count of misplaced units is within c·sqrt(L) or f·L of the best gets 0.0174-0.0183 "
    "against 0.0184 on the flat cells. The planner picks the tree itself here (audit 18: these data, n = 2,000, "
    "ε = 2, five quantiles in one statement: mean rank error of the median 0.031, max 0.155; 1,955 of 5,600 EXPLAINs "
    "on small domains or several quantiles chose it)"))
def test_a_quantile_on_a_flat_stretch_of_the_cdf_is_read_from_its_middle():
    rng = np.random.default_rng([16, 3])
    x = np.where(rng.random(2000) < 0.5, rng.integers(0, 100, 2000), rng.integers(900, 1024, 2000))
    runs = _tree_runs(x.astype(float), 1024, 2.0, (0.5,), 100, 17)
    assert runs[0.5][:, 0].mean() <= 0.008, runs[0.5][:, 0].mean()

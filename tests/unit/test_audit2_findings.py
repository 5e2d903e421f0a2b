"""Findings of the hostile review of the 'means' merge (audit2): each test shows a defect and is marked
``xfail(strict=True)`` so that it starts to fail (XPASS) when the defect is fixed; the lead then unmarks it."""

from __future__ import annotations

import math

import numpy as np
import pytest

from ldpql.mechanisms.hybrid import Hybrid
from ldpql.mechanisms.piecewise import Piecewise

TWO53 = 2.0 ** 53


def _left(pm: Piecewise, x: float) -> float:
    """ℓ(x) computed with the same float operations as :meth:`Piecewise.randomize`."""
    left = np.clip(np.array([x], dtype=float), -1, 1)
    left *= (pm.C + 1) / 2
    left -= (pm.C - 1) / 2
    return float(left[0])


def _band_reachable(pm: Piecewise, x: float, y: np.ndarray) -> np.ndarray:
    """Whether each float y can come out of the band branch for input x: is there a k in 0..2^53-1 with
    fl(fl(k/2^53 · (C−1)) + ℓ(x)) == y (the sampler's own operations, in its order)?"""
    left, width = _left(pm, x), pm.C - 1
    k0 = np.floor((y - left) / width * TWO53)
    hit = np.zeros(len(y), dtype=bool)
    for d in range(-6, 7):
        k = k0 + d
        hit |= ((k / TWO53) * width + left == y) & (k >= 0) & (k < TWO53)
    return hit


def _distinguishing_ratio(pm_outputs, pm: Piecewise, x1: float, x2: float, n: int, seed: int):
    """P(S | x1) and P(S | x2) for S = the outputs in both bands that x1's band branch can produce and x2's
    cannot. By the density formula the ratio is at most e^ε (both inputs have the high density there)."""
    (l1, r1), (l2, r2) = (pm._interval(np.float64(x)) for x in (x1, x2))
    lo, hi = max(l1, l2), min(r1, r2)
    rng = np.random.default_rng(seed)
    freq = []
    for x in (x1, x2):
        y = pm_outputs(x, n, rng)
        s = (y >= lo) & (y <= hi) & _band_reachable(pm, x1, y) & ~_band_reachable(pm, x2, y)
        freq.append(s.mean())
    return freq


@pytest.mark.parametrize("epsilon, x1, x2", [(0.1, 0.0, 0.5), (1.0, 0.0, 0.3), (4.0, 0.0, 0.1)])
def test_piecewise_sampler_is_epsilon_ldp_on_its_float_outputs(epsilon, x1, x2):
    pm = Piecewise(epsilon)
    p1, p2 = _distinguishing_ratio(lambda x, n, rng: pm.randomize(np.full(n, x), rng), pm, x1, x2, 50_000, 5)
    # measured: p1 = 0.35, 0.32, 0.33; p2 = 0 (50,000 draws, not one hit). With 50,000 draws, p2 < e^-ε·p1 / 2 would be
    # rejected if the sampler were ε-LDP: the count under x2 would be ~Binomial(50,000, ≥ e^-ε·p1), i.e. thousands.
    assert p2 >= math.exp(-epsilon) * p1 / 2, (p1, p2)


def test_hybrid_sampler_is_epsilon_ldp_on_its_float_outputs():
    hm = Hybrid(1.0)

    def pm_branch(x, n, rng):   # the reports that carry the PM flag (the flag itself is independent of x)
        out = hm.randomize(np.full(n, x), rng)
        y = out[:, 0].copy()
        y[out[:, 1] != 1] = np.nan   # a Duchi report is not in S
        return y

    p1, p2 = _distinguishing_ratio(pm_branch, hm.pm, 0.0, 0.3, 80_000, 6)
    assert p2 >= math.exp(-1.0) * p1 / 2, (p1, p2)


# ---- finding 2: under a users split, "worst case over the domain" is not Duchi's worst case ----------------

def _split_statement(mech: str | None, k: int, eps: float) -> str:
    arg = f", mechanism => '{mech}'" if mech else ""
    aggs = ", ".join(f"LDP_MEAN(x{arg}) AS m{i}" for i in range(k))
    return f"SELECT {aggs} FROM t EPSILON {eps} OPTIONS (split = 'users')"


def _predicted(plan: str, label: str) -> float:
    """The first ±half-width EXPLAIN shows for ``label`` ('mechanism *' line's chosen, or 'rejected name')."""
    import re
    lines = plan.splitlines()
    for i, line in enumerate(lines):
        if label == "chosen" and "predicted" in line:
            return float(re.search(r"±([0-9.e+-]+)", line).group(1))
        if label != "chosen" and f"rejected    {label}:" in line:
            return float(re.search(r"±([0-9.e+-]+)", line).group(1))
    raise AssertionError(f"no {label} in {plan}")


def _people(con, values):
    import pyarrow as pa
    con.register("t", pa.table({"x": np.asarray(values, dtype=float)}), private={"x": {"between": (0, 1), "not_null": True}}, budget=1e12)


@pytest.mark.slow
def test_duchi_worst_case_under_users_split_is_reached_by_some_data_set():
    import ldpql
    n, k, eps, reps = 1200, 6, 4, 60
    worst_rmse = 0.0
    for values in (np.full(n, 0.5), np.r_[np.zeros(n // 2), np.ones(n // 2)]):   # Duchi's two extremes
        con = ldpql.connect(evaluation=True, seed=21)
        _people(con, values)
        q = _split_statement("duchi", k, eps)
        plan = con.explain(q)
        rows = con.sql(f"EVALUATE {q} REPEAT {reps}").fetchall()
        worst_rmse = max(worst_rmse, float(np.sqrt(np.mean([r[6] ** 2 for r in rows]))))   # pooled over k
    predicted_sd = _predicted(plan, "chosen") / 1.959964
    # measured 2026-11-25: predicted sd 0.0367, worst realised RMSE 0.0372 (0.0366 at 200 runs; pooled over 6 × 100
    # runs: ±3%, so the 10% margin is over 3 sd); 60 runs since session 12 (suite time): 0.0372, ±3.7%
    assert predicted_sd <= 1.10 * worst_rmse, (predicted_sd, worst_rmse)


def test_chosen_mechanism_has_the_smallest_true_worst_case_under_users_split():
    import ldpql
    from ldpql.mechanisms.duchi import Duchi
    eps, n, k = 1.0, 3000, 3
    con = ldpql.connect(evaluation=True, seed=1)
    _people(con, np.zeros(n))
    plan = con.explain(_split_statement(None, k, eps))
    chosen = plan.split("mechanism * ")[1].split(":")[0]
    asked, s = n // k, 1 - 1 / k   # users asked per aggregate; the finite-population factor
    grid = [(m2, mu2) for m2 in np.linspace(0, 1, 21) for mu2 in np.linspace(0, 1, 21) if mu2 <= m2]

    def true_worst(r) -> float:   # max over data sets (E[x'²], (E x')²) of noise + sampling, on [-1, 1]
        return max(float(r.variance(np.array([np.sqrt(mu2)]), asked, second_moment=m2)[0]) + s * (m2 - mu2) / asked
                   for m2, mu2 in grid)

    worst = {name: true_worst(make(eps)) for name, make in (("duchi", Duchi), ("hybrid", Hybrid))}
    # measured: duchi 4.68e-3, hybrid 4.96e-3 (per user on [-1, 1], over 1000 asked); the planner says hybrid
    assert worst[chosen] <= min(worst.values()), (chosen, worst)


# ---- finding 3: at small n and large ε the normal interval of PM / HM under-covers ------------------------

@pytest.mark.slow
@pytest.mark.parametrize("mechanism, confidence, least", [(None, 0.95, 0.93), (None, 0.90, 0.88),
                                                          ("piecewise", 0.90, 0.88)])
def test_mean_interval_covers_at_n30_epsilon8_on_data_at_both_bounds(mechanism, confidence, least):
    """Was a strict xfail (audit2 finding 3): with n = 30 at ε = 8 a PM report is far from x with probability ~1.8%,
    so the mean is a Poisson-small mixture, not normal: est ± z·se covered 0.919 at 95%, 0.874 at 90% (hybrid),
    0.860 (PM, 90%). Now the interval is the exact law's quantile over envelope data sets (:mod:`ldpql.mechanisms.rare`)
    and the planner runs PM here: 0.940, 0.891, 0.891 (this data set is an envelope: under the exact law at the true
    E[x²] 0.950 and 0.900; the rest is the estimated E[x²] and binomial noise)."""
    import ldpql
    con = ldpql.connect(evaluation=True, seed=17)
    _people(con, np.r_[np.zeros(15), np.ones(15)])
    opts = f"confidence = {confidence}" + (f", mechanism = '{mechanism}'" if mechanism else "")
    (row,) = con.sql(f"EVALUATE SELECT LDP_MEAN(x) FROM t EPSILON 8 OPTIONS ({opts}) REPEAT 1000").fetchall()
    # 1000 runs: binomial sd 0.7-0.95 points
    assert row[7] >= least, row


def test_mean_interval_is_not_far_too_wide_at_n100_epsilon20():
    """Was a strict xfail (audit2 finding 3, the other side): at ε = 20, n = 100 a report leaves the band (or runs
    Duchi's branch) with probability ~1e-4, so est ± z·se, z times the estimator's true sd, covered 1.000 at 90%.
    The exact law's quantile (:mod:`ldpql.mechanisms.rare`) covers 0.900 at 90% on data at the middle (at a bound
    the error is a constant offset with probability ~0.995, so any valid interval covers it every time)."""
    import ldpql
    con = ldpql.connect(evaluation=True, seed=3)
    _people(con, np.full(100, 0.5))
    (row,) = con.sql("EVALUATE SELECT LDP_MEAN(x) FROM t EPSILON 20 OPTIONS (confidence = 0.9) REPEAT 400").fetchall()
    assert 0.87 <= row[7] <= 0.95, row


# ---- finding 4: forced Duchi's interval is far too wide on data at a bound at large ε ---------------------

@pytest.mark.xfail(strict=True, reason="audit2 finding 4: Duchi's interval uses C² − est² for the per-user "
                   "variance; on data at a bound the truth is C² − 1, and the runs whose estimate is far from 1 are "
                   "exactly those with a small est², hence a wide interval: at ε = 4, n = 100 it covers 0.99 at 90% "
                   "(with the true variance C² − 1 it would cover 0.89). Left (honest): Duchi's ±C reports carry no "
                   "information on E[x²], so C² − est² (E[x²] ≥ est²) is the least variance valid for every data set "
                   "with that mean; the interval is conservative, and only when Duchi is forced (the planner runs "
                   "the Hybrid Mechanism, whose PM reports estimate E[x²])")
def test_forced_duchi_interval_is_not_far_too_wide_at_a_bound():
    import ldpql
    con = ldpql.connect(evaluation=True, seed=3)
    _people(con, np.ones(100))
    q = "SELECT LDP_MEAN(x, mechanism => 'duchi') FROM t EPSILON 4 OPTIONS (confidence = 0.9)"
    (row,) = con.sql(f"EVALUATE {q} REPEAT 400").fetchall()
    # measured: 0.9875 (400 runs); direct simulation, 20,000 runs: 0.991 with C² − est², 0.893 with C² − 1
    assert 0.87 <= row[7] <= 0.95, row

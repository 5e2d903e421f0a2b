"""Audit 8 (hostile review) of three accuracy changes: Fieller's interval for the conditional mean (SQL AVG over a
nullable column), LDP_TOPK's selection-aware (inference on winners) intervals, and the quantile planner's BayeSS
weight by domain size.

Passing tests record attacks that held; a finding that breaks is ``xfail(strict=True)`` with the measured numbers
in its reason. Every experiment here is seeded and bounded (seconds); the larger grids behind the numbers quoted
in reasons and docstrings are in ``examples/audit8_accuracy/`` (scripts and CSVs, 200-1,000 runs per cell).
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from scipy.stats import beta

import ldpql
from ldpql.mechanisms.base import HitRates, debiased_skewness
from ldpql.mechanisms.conditional import MISSING, CollisionMean, answer, covariance, ratio_interval, with_interval
from ldpql.planner import quantile as planner
from ldpql.planner.histogram import ORACLES
from ldpql.planner.winners import correlations, rank, winners_interval

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def upper(k: int, n: int, level: float = 0.001) -> float:
    """Exact (Clopper-Pearson) one-sided upper bound of a coverage k/n at ``level``: a check ``upper >= nominal``
    fails a correct interval with probability <= level (0.001 per check, so a test with up to 20 checks <= 2%)."""
    return beta.ppf(1 - level, k + 1, n - k) if k < n else 1.0


# ==== 1. Fieller's interval for the conditional mean ==========================================================

def test_fieller_interval_is_never_empty_inverted_nan_or_pointless():
    """200,000 random (num, den, variances, correlation, z) with standard errors >= 1e-6 (any real release's:
    CollisionMean's are above 1e-5 even at ε = 30 and n = 10^8): the interval is finite, inside [−1, 1], of
    positive width, holds the clipped point num/den whenever den > 0, and is nested in the confidence. (Zero width
    appears only with standard errors near 1e-8 and the unclipped ratio far outside [−1, 1], or with both variances
    exactly 0: noise off, which the engine answers through its own exact path.)"""
    rng = np.random.default_rng(8)
    m = 200_000
    den = rng.uniform(-0.1, 1.2, m)
    num = rng.uniform(-1.5, 1.5, m) * np.maximum(den, 0.01) * rng.choice([1, 1, 3], m)
    sn, sd = 10 ** rng.uniform(-6, 0, (2, m))
    rho = rng.uniform(-1, 1, m)
    bad = 0
    for i in range(0, m, 7):   # every 7th: 28,572 cases, a second
        args = (num[i], den[i], sn[i] ** 2, sd[i] ** 2, rho[i] * sn[i] * sd[i])
        ivs = [ratio_interval(*args, z) for z in (1.2816, 1.6449, 1.96)]
        for lo, hi in ivs:
            point = min(max(num[i] / den[i], -1), 1) if den[i] > 0 else lo
            bad += not (math.isfinite(lo) and math.isfinite(hi) and -1 <= lo < hi <= 1 and lo <= point <= hi)
        bad += not (ivs[2][0] <= ivs[1][0] + 1e-12 <= ivs[0][0] + 2e-12 and ivs[0][1] <= ivs[1][1] + 1e-12
                    <= ivs[2][1] + 2e-12)
    assert bad == 0


SHAPES = {"near_hi": lambda rng, n: 1 - 2 * rng.beta(0.3, 8, n), "near_lo": lambda rng, n: -1 + 2 * rng.beta(0.3, 8, n),
          "lo": lambda rng, n: np.full(n, -1.0)}


def _releases(shape: str, n: int, share: float, eps: float, runs: int, seed: int):
    rng = np.random.default_rng(seed)
    x, null = SHAPES[shape](rng, n), rng.random(n) < share
    null[0] = False
    r = CollisionMean(eps)
    xs = np.where(null, MISSING, x)
    summaries = [r.inner.simulate(r.elements(xs, rng), rng) for _ in range(runs)]
    return r, summaries, 5 + 5 * float(x[~null].mean())


@pytest.mark.parametrize("shape, n, share, eps", [("near_hi", 2000, 0.7, 1.0), ("near_lo", 2000, 0.3, 1.0),
                                                  ("lo", 2000, 0.6, 1.0)])
def test_fieller_covers_off_the_builders_grid(shape, n, share, eps):
    """Cells the builder's grid did not use (values piled against one bound with a long tail, 30-70% NULL):
    measured at 300 runs (examples/audit8_accuracy/fieller_cells.csv) 0.967-0.983 at 95%, 0.943-0.967 at 90%,
    0.86-0.90 at 80%. Here 200 new runs; a 1.3x too narrow interval (about 0.88 at 95%) would fail."""
    r, summaries, truth = _releases(shape, n, share, eps, 200, 31 + int(10 * share))
    for conf, floor in ((0.95, 0.95), (0.9, 0.9), (0.8, 0.8)):
        hits = 0
        for s in summaries:
            e = with_interval(answer(r, s, n, "mean", 0.0, 10.0), conf)
            lo, hi = e.interval[0][0], e.interval[1][0]
            assert lo <= e.values[0] <= hi and hi > lo
            hits += lo <= truth <= hi
        assert upper(hits, len(summaries)) >= floor, f"{conf}: {hits}/{len(summaries)}"


def test_fieller_is_not_wider_than_the_delta_method_at_large_n():
    """Where the ratio is nearly normal (n = 200,000, 50% NULL, ε = 4), Fieller's interval should be the delta
    method's: measured widths 0.07704 vs 0.07704 (fieller_cells.csv); coverage there 0.943 / 0.887 / 0.803 at
    95 / 90 / 80% over 300 runs."""
    r, summaries, _ = _releases("near_hi", 200_000, 0.5, 4.0, 3, 5)
    for s in summaries:
        e = answer(r, s, 200_000, "mean", 0.0, 10.0)
        f = np.clip(r.estimate(s, 200_000), 0, 1)
        cov = covariance(r.p_true, r.p_false, f) / 200_000
        grad = 5.0 * np.array([2 * f[1], -2 * f[0]]) / f.sum() ** 2
        delta = 2 * 1.959964 * math.sqrt(float(grad @ cov @ grad))
        width = e.interval[1][0] - e.interval[0][0]
        assert 0.97 < width / delta < 1.03


def test_fieller_through_sql_group_by_users_split_and_confidence():
    """GROUP BY g (30 / 50 / 70% NULL by group, values piled near hi), alone and in a users split with LDP_SUM and
    LDP_COUNT, at 95% and 80%. Measured (200 runs, n = 6,000): alone 0.96-0.98, users split 0.97-0.995, at 80%
    0.81-0.88. EXPLAIN's prediction is at a share of 1 (said so); a third of the users gives √3 × (±0.854 ->
    ±1.48), as shown."""
    rng = np.random.default_rng(5)
    n = 4000
    x = np.clip(10 - rng.exponential(0.6, n), 0, 10)
    g = rng.integers(0, 3, n)
    mask = rng.random(n) < np.array([0.3, 0.5, 0.7])[g]
    con = ldpql.connect(seed=3, evaluation=True)
    con.register("t", pa.table({"x": pa.array(x, mask=mask), "g": g}), private={"x": {"between": (0, 10)}},
                 public=["g"], budget=1e12)
    for sql, floor in (("SELECT g, LDP_AVG(x), LDP_COUNT(x) FROM t GROUP BY g EPSILON 1", 0.95),
                       ("SELECT g, LDP_AVG(x) FROM t GROUP BY g EPSILON 1 OPTIONS (confidence = 0.8)", 0.8)):
        res = con.sql(f"EVALUATE {sql} REPEAT 80")
        for row in res.fetchall():
            if row[0] == "ldp_avg_x":
                assert upper(round(row[-1] * 80), 80) >= floor, (sql, row)
    alone = con.explain("SELECT g, LDP_AVG(x) FROM t GROUP BY g EPSILON 1")
    split = con.explain("SELECT g, LDP_AVG(x), LDP_SUM(x), LDP_COUNT(x) FROM t GROUP BY g EPSILON 1")

    def first(text):
        line = next(ln for ln in text.splitlines() if "g = 0: ±" in ln)
        return float(line.split("±")[1].split()[0])
    assert first(split) == pytest.approx(first(alone) * math.sqrt(3), rel=0.01)


# ==== 2. LDP_TOPK's selection-aware intervals =================================================================

def _topk_release(name: str, freq, n: int, eps: float, rng):
    f = np.asarray(freq) / np.sum(freq)
    counts = np.floor(f * n).astype(np.int64)
    counts[: n - counts.sum()] += 1
    counts = np.append(counts, 0)
    r = next(o for o in ORACLES if o.name == name).make(eps, len(counts))
    return r, counts


def _draw(r, counts, rng):
    n = int(counts.sum())
    summary = r.sample_aggregate(counts, rng) if r.exact else r.aggregate(
        r.randomize(np.repeat(np.arange(len(counts)), counts), rng))
    raw = r.estimate(summary, n)
    pairs = r.pair_hits() if hasattr(r, "pair_hits") else None
    rho = correlations(raw, (r.p, r.q, *pairs, n, 0.0)) if pairs else None
    skew = debiased_skewness(np.clip(raw, 0.0, 1.0), n, r.p, r.q) if isinstance(r, HitRates) else None
    return raw, np.sqrt(r.variance(np.clip(raw, 0.0, 1.0), n)), r.step(n), rho, skew


def test_topk_k10_covers_the_value_found_at_each_rank_with_ties():
    """k = 10 over 13 bins: five leading values within 0.2 point and seven exactly tied (the tie block where
    AKM's truncation and the release-seeded jitter matter). GRR at ε = 4, n = 20,000, 400 runs; each rank's exact
    upper bound at 0.0005 (20 checks) and the mean over ranks within 1.5 points. Measured at 1,000 runs: 0.939-0.956
    per rank at 95% (mean 0.948), 0.886-0.917 at 90% (0.904); at n = 200,000 0.944-0.960 (0.952) and 0.894-0.928
    (0.907). Off-grid cells (examples/audit8_accuracy/topk_cells.csv, 300 runs, 10 ranks each, GRR, k-subset,
    OUE, OLH, Hadamard): min over ranks 0.917-0.947 at 95%, 0.870-0.897 at 90% (a min of 10 at 300 runs)."""
    freq = [0.101, 0.1005, 0.1, 0.0995, 0.099] + [0.5 / 7] * 7
    r, counts = _topk_release("grr", freq, 20_000, 4.0, None)
    truth = counts / counts.sum()
    rng = np.random.default_rng(17)
    hits, runs = {0.95: np.zeros(10), 0.9: np.zeros(10)}, 400
    for _ in range(runs):
        raw, se, step, rho, skew = _draw(r, counts, rng)
        top = rank(raw, step)[:10]
        for c in hits:
            lo, hi = winners_interval(raw, se, 10, c, step, rho, skew)
            assert np.all((0 <= lo) & (lo <= hi) & (hi <= 1))
            hits[c] += (lo <= truth[top]) & (truth[top] <= hi)
    for c, h in hits.items():
        assert min(upper(int(k), runs, 0.0005) for k in h) >= c, (c, h / runs)
        assert h.mean() / runs >= c - 0.015, (c, h / runs)


def test_topk_jitter_is_post_processing_and_deterministic():
    """The tie-breaking jitter (_unlattice) is seeded from the released estimates only: the same release gives the
    same interval whatever the global random state and whatever the private data behind it (two data sets with
    the same release are indistinguishable), and through SQL the same seed gives the same intervals."""
    raw = np.array([0.3, 0.3, 0.3, 0.05, 0.05])   # on a lattice of step 0.05, with ties
    se, step = np.full(5, 0.02), 0.05
    a = winners_interval(raw, se, 3, 0.95, step)
    np.random.seed(1)
    b = winners_interval(raw.copy(), se.copy(), 3, 0.95, step)
    assert all(np.array_equal(u, v) for u, v in zip(a, b))
    labels = [f"v{i}" for i in range(6)]
    data = np.repeat(np.array(labels), [300, 300, 300, 250, 100, 50])
    out = []
    for _ in range(2):
        con = ldpql.connect(seed=4, evaluation=True)
        con.register("t", pa.table({"c": data}), private={"c": labels}, budget=1e12)
        out.append(con.sql("SELECT LDP_TOPK(c, 3) FROM t EPSILON 8").intervals())
    assert out[0] == out[1]


def test_topk_group_by_shown_intervals_hold_the_point_and_stay_in_unit():
    """Default post-processing (simplex): over 2 groups × 10 ranks × 20 seeds, every shown interval is inside
    [0, 1] and holds the shown frequency (the table widens the hybrid interval to hold it; the hybrid interval
    alone excluded the projected point in 20-113 of 3,000 rank-intervals per cell in topk_cells.csv)."""
    rng = np.random.default_rng(2)
    labels = [f"v{i:02d}" for i in range(12)]
    f0 = np.array([0.101, 0.1005, 0.1, 0.0995, 0.099] + [0.5 / 7] * 7)
    g = rng.integers(0, 2, 10_000)
    c = np.where(g == 0, rng.choice(labels, 10_000, p=f0 / f0.sum()), rng.choice(labels, 10_000,
                                                                                 p=np.roll(f0, 3) / f0.sum()))
    con = ldpql.connect(seed=7, evaluation=True)
    con.register("t", pa.table({"c": c, "g": g}), private={"c": labels}, public=["g"], budget=1e12)
    for s in range(20):
        res = con.sql(f"SELECT g, LDP_TOPK(c, 10) FROM t GROUP BY g EPSILON 1 OPTIONS (seed = {s})")
        for row, iv in zip(res.fetchall(), res.intervals()):
            lo, hi, _ = iv[-1]
            assert 0 <= lo <= row[-1] <= hi <= 1


# fixed (was a strict xfail, LOW): with postprocess => 'none' LDP_TOPK showed the raw estimate outside its hybrid
# (selection-corrected) interval in 21 of 600 rows (GROUP BY g, k = 10, ε = 1; e.g. 0.1157 with [0.0527, 0.1010]);
# the shown interval is now widened to hold the shown value, as for every other post-processing.
def test_topk_raw_estimate_is_inside_its_interval():
    rng = np.random.default_rng(2)
    labels = [f"v{i:02d}" for i in range(12)]
    f0 = np.array([0.101, 0.1005, 0.1, 0.0995, 0.099] + [0.5 / 7] * 7)
    c = rng.choice(labels, 10_000, p=f0 / f0.sum())
    con = ldpql.connect(seed=7, evaluation=True)
    con.register("t", pa.table({"c": c}), private={"c": labels}, budget=1e12)
    outside = 0
    for s in range(15):
        res = con.sql(f"SELECT LDP_TOPK(c, 10, postprocess => 'none') FROM t EPSILON 1 OPTIONS (seed = {s})")
        for row, iv in zip(res.fetchall(), res.intervals()):
            outside += not (iv[-1][0] <= row[-1] <= iv[-1][1])
    assert outside == 0


def test_topk_evaluate_coverage_is_for_the_value_found():
    """EVALUATE's coverage for LDP_TOPK checks each run's interval at the true frequency of the label that run
    found at that rank (not the j-th largest true frequency). Checked on a cell where the two differ: two values
    tied at 0.3: whichever is found, its true frequency is 0.3, so coverage is that of a plain interval; and the
    reported coverage equals a recount from the runs' own labels and intervals."""
    labels = ["a", "b", "c", "d"]
    data = np.repeat(np.array(labels), [1500, 1500, 1000, 1000])
    con = ldpql.connect(seed=9, evaluation=True)
    con.register("t", pa.table({"c": data}), private={"c": labels}, budget=1e12)
    rows = con.sql("EVALUATE SELECT LDP_TOPK(c, 3) FROM t EPSILON 2 REPEAT 60").fetchall()
    assert [r[3] for r in rows] == pytest.approx([0.3, 0.3, 0.2])
    recount = np.zeros(3)
    truth = {"a": 0.3, "b": 0.3, "c": 0.2, "d": 0.2}
    con2 = ldpql.connect(seed=9, evaluation=True)
    con2.register("t", pa.table({"c": data}), private={"c": labels}, budget=1e12)
    for s in range(60):
        res = con2.sql(f"SELECT LDP_TOPK(c, 3) FROM t EPSILON 2 OPTIONS (seed = {1000 + s})")
        ivs = res.intervals()
        for j, (row, iv) in enumerate(zip(res.fetchall(), ivs)):
            recount[j] += iv[-1][0] <= truth[row[0]] <= iv[-1][1]
    # different runs (seeds) from EVALUATE's, so compare as two estimates of the same coverage
    assert np.all(np.abs(np.array([r[-1] for r in rows]) - recount / 60) < 0.15)
    assert min(upper(round(r[-1] * 60), 60) for r in rows) >= 0.95


# ==== 3. the quantile planner's BayeSS weight by domain size ==================================================

sys.path.insert(0, str(EXAMPLES))


def _candidates(coins: int, x: np.ndarray, eps: float, tau: float, reps: int):
    import regret_shapes as rs  # the examples' forced-candidate runner (the executor's protocols)
    return rs.run_candidates(x, coins, eps, tau, reps, only=("bayess", "naive_nbs"))


def test_bayess_weight_picks_naive_nbs_on_a_small_domain_and_that_is_better():
    """INTEGER 0..50, n = 10^4, ε = 1, the median (below the weight's fit range of 101..20,001 coins): the planner
    now picks NaiveNBS (it picked BayeSS before the B weight); on the grid's bimodal shape BayeSS's RMS rank error
    is 1.57x NaiveNBS's. Measured RMS rank error, 200 runs
    (examples/audit8_accuracy/quantile_cells.csv): on 4 smooth shapes the old choice had regret 1.09-1.57, the
    new 1.00; over 28 held-out (B, n, ε, τ, shape) cells the new choice is over 1.25 only where neither
    BayeSS nor NaiveNBS is best (lognormal, B = 501, τ = 0.1: the histogram, 1.44, the same before)."""
    import regret_shapes as rs
    con = ldpql.connect(seed=1, evaluation=True)
    x = rs.quantile_shapes(51, 10_000)["bimodal (grid m)"]
    con.register("t", pa.table({"x": x}), private={"x": {"between": (0, 50), "integer": True, "not_null": True}},
                 budget=1e12)
    assert con.sql("EXPLAIN SELECT LDP_MEDIAN(x) FROM t EPSILON 1").plan.aggregates[0].chosen.mechanism == \
        "naive_nbs"
    assert planner.bayess_weight(51) > planner.W_BAYESS
    res = _candidates(51, x, 1.0, 0.5, 80)
    assert res["bayess"][0] / res["naive_nbs"][0] > 1.2, res   # measured 1.57 at 200 runs
    # another bimodal column (60% near 12, 40% near 37): there the two are close (1.06 at 80 runs): no regret
    rng = np.random.default_rng(3)
    y = np.clip(np.rint(np.where(rng.random(10_000) < 0.6, rng.normal(12, 3, 10_000), rng.normal(37, 4, 10_000))),
                0, 50).astype(np.int64)
    res = _candidates(51, y, 1.0, 0.5, 80)
    assert res["naive_nbs"][0] <= 1.25 * res["bayess"][0], res


def _shown_within(coins: int, x: np.ndarray, eps: float, tau: float, reps: int) -> dict[str, tuple[float, float]]:
    """Per search (forced): the share of runs whose rank error (τ's distance to the answer's rank interval
    [F(v-1), F(v)]) is within the calibrated ±1.96σ alone, and within the rank error the result shows."""
    import quantile_grid as qg

    from ldpql.simulation import simulate
    hist = np.bincount(x, minlength=coins)
    n, cdf = int(hist.sum()), np.cumsum(hist) / len(x)
    out = {}
    for c in qg.candidates(coins, tau):
        if c.mechanism not in ("bayess", "naive_nbs"):
            continue
        sigma, alone, shown = c.predict(eps, n), 0, 0
        for t in range(reps):
            answer = simulate(c.protocol(eps)(n), np.random.default_rng([29, t]), hist=hist).extra["answers"][tau]
            v = int(answer.extra["coin"])
            error = max(0.0, (cdf[v - 1] if v else 0.0) - tau, tau - cdf[v])
            alone += error <= planner.Z95 * sigma
            shown += error <= planner.shown_rank_error(answer, tau, sigma, planner.Z95)
        out[c.mechanism] = (alone / reps, shown / reps)
    return out


def test_shown_rank_error_covers_on_a_small_domain():
    """INTEGER 0..30, n = 20,000, ε = 0.5, the median of a normal shape: a value holds up to 9% of the users, so
    an answer one value off is beyond the calibrated ±1.96σ (±0.038), which held in 0.825 of 400 runs for NaiveNBS
    (BayeSS 0.80; examples/audit8_accuracy/quantile_within.csv). The result now shows ±1.96σ plus what the values
    next to the answer hold as its own release estimates it (examples/audit8_accuracy/quantile_discrete.csv: both
    1.000 at 300 runs here; the other small-domain cells 0.978-1.000, smooth columns within 0.5-4 points of before).
    Scored, as before, by τ's distance to the answer's rank interval [F(v-1), F(v)]: an answer whose value holds
    τ's rank is exact."""
    rng = np.random.default_rng([5, 20_000, 31])
    x = np.clip(np.rint(rng.normal(50, 15, 20_000) * 30 / 100), 0, 30).astype(np.int64)
    res = _shown_within(31, x, 0.5, 0.5, 150)
    assert res["naive_nbs"][0] <= 0.90, res                    # the cause: ±1.96σ alone (0.825 at 400 runs)
    assert res["naive_nbs"][1] >= 0.93 and res["bayess"][1] >= 0.93, res


# fixed (was a strict xfail, MEDIUM): at a high ε around the lattice fallback (a report's step ~ the standard error)
# the value found at the top of a block of exactly tied frequencies was under-covered (GRR, 13 bins, n = 2,000,
# 2,000 runs: ε = 9, the per-value fallback without selection correction, rank 6 0.886 at 95%; ε = 8, the hybrid on
# jittered estimates, 0.921). Cause: exact ties were ranked by position while the hybrid conditioned on the order of
# the jittered estimates (a value found at a tied rank covered 0.57-0.89); ties are now ranked by the same
# release-seeded jitter (winners.rank), and below one step the per-value interval is joined to the hybrid one.
# Measured (600 runs): ε = 9 rank 6 0.937, ranks 0.937-0.992; ε = 8 0.922-0.930 at rank 6, mean 0.945-0.953.
def test_topk_covers_the_top_of_a_tie_block_near_the_lattice_fallback():
    freq = [0.101, 0.1005, 0.1, 0.0995, 0.099] + [0.5 / 7] * 7
    r, counts = _topk_release("grr", freq, 2_000, 9.0, None)
    truth = counts / counts.sum()
    rng = np.random.default_rng(77)
    hits, runs = 0, 300
    for _ in range(runs):
        raw, se, step, rho, skew = _draw(r, counts, rng)
        top = rank(raw, step)[:6]   # the engine's ranking (exact ties by the release-seeded jitter)
        lo, hi = winners_interval(raw, se, 6, 0.95, step, rho, skew)
        hits += lo[5] <= truth[top[5]] <= hi[5]
    assert upper(hits, runs) >= 0.95, f"rank 6: {hits}/{runs}"


def test_conditional_mean_interval_follows_confidence_in_split_and_joint_releases():
    """The split candidate (forced), a joint release of two nullable columns and a lone LDP_AVG all give their
    interval at the statement's confidence (tagged so, and narrower at 80% than at 95% on the same seed).
    Measured coverage at 80% (150 runs, n = 3,000, ε = 2): split 0.813, joint 0.820 / 0.833, alone 0.813."""
    rng = np.random.default_rng(5)
    n = 3000
    x, y = np.clip(10 - rng.exponential(0.6, n), 0, 10), rng.uniform(0, 10, n)
    table = pa.table({"x": pa.array(x, mask=rng.random(n) < 0.5), "y": pa.array(y, mask=rng.random(n) < 0.3)})
    statements = ("SELECT LDP_AVG(x, mechanism => 'split') FROM t EPSILON 2",
                  "SELECT LDP_AVG(x), LDP_AVG(y) FROM t EPSILON 2", "SELECT LDP_AVG(x) FROM t EPSILON 2")
    for sql in statements:
        ivs = {}
        for conf in (0.95, 0.8):
            con = ldpql.connect(seed=3, evaluation=True)
            con.register("t", table, private={"x": {"between": (0, 10)}, "y": {"between": (0, 10)}}, budget=1e12)
            ivs[conf] = con.sql(f"{sql} OPTIONS (confidence = {conf}, seed = 11)").intervals()[0]
        for wide, narrow in zip(ivs[0.95], ivs[0.8]):
            assert wide[2] == 0.95 and narrow[2] == 0.8
            assert wide[0] < narrow[0] and narrow[1] < wide[1], (sql, wide, narrow)

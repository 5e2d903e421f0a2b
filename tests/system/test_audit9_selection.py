"""Hostile review of the selection-aware intervals of issue 11 (branch tails): LDP_TOPK / LDP_MODE near the lattice
fallback (exact ties ordered by a release-seeded jitter, ``winners.rank``/``tiebreak``; the hybrid of Andrews,
Kitagawa & McCloskey, "Inference on Winners", 2024, joined with the per-value interval below one step per standard
error) and the interval of unflagged conditional means given that they were not flagged
(``conditional.selected_ratio_interval``; Lee, Sun, Sun & Taylor 2016's polyhedral conditioning inside Fieller's set).

Each test is one attack: an attack that holds passes; a defect is ``xfail(strict=True)`` with its numbers, so that
the fix turns it into a pass. The held-out grids are ``examples/audit9b/topk_grid.py`` and ``ratio_grid.py`` (CSV
next to them); the tests here are cheap cells of them (all together a few seconds of CPU)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

import ldpql
from ldpql.mechanisms import conditional
from ldpql.mechanisms.base import HitRates, debiased_skewness
from ldpql.planner import histogram, winners
from ldpql.planner.histogram import ORACLES, _ranked, postprocess
from ldpql.planner.winners import correlations, rank, tiebreak, winners_interval

LABELS = list("abcdef")


def oracle(name: str, eps: float, d: int):
    return next(o for o in ORACLES if o.name == name).make(eps, d)


def topk_runs(name: str, counts, eps: float, reps: int, confidence: float, k: int, seed: int):
    """``reps`` releases of the oracle over the users' ``counts``, read as a statement reads them (one_round's
    plug-in standard error, step, pairs and skewness): per run, the ranked indices and the (lo, hi) of ranks 1..k."""
    counts = np.asarray(counts, dtype=np.int64)
    n, d = int(counts.sum()), len(counts)
    r, rng = oracle(name, eps, d), np.random.default_rng(seed)
    pairs = getattr(r, "pair_hits", lambda: None)()
    out = []
    for _ in range(reps):
        raw = r.estimate(r.sample_aggregate(counts, rng), n)
        se, step = np.sqrt(r.variance(np.clip(raw, 0.0, 1.0), n)), r.step(n)
        rho = correlations(raw, (r.p, r.q, *pairs, n, 0.0)) if pairs else None
        skew = debiased_skewness(np.clip(raw, 0.0, 1.0), n, r.p, r.q) if isinstance(r, HitRates) else None
        lo, hi = winners_interval(raw, se, k, confidence, step, rho, skew)
        out.append((rank(raw, step)[:k], lo, hi))
    return out


def coverage(runs, truth) -> np.ndarray:
    return np.mean([(lo <= truth[top]) & (truth[top] <= hi) for top, lo, hi in runs], axis=0)


def table(con, counts, name: str = "t", groups=None) -> None:
    values = np.repeat(np.arange(len(counts)), counts)
    df = pd.DataFrame({"c": [LABELS[i] for i in values]})
    df["g"] = "a" if groups is None else groups(len(df))
    con.register(name, df, private={"c": LABELS[:len(counts)]}, public=["g"], budget=1e6)


# ---- privacy: the jitter and the intervals read the release only -------------------------------------------------

def test_tiebreak_hashes_the_release_and_nothing_else(monkeypatch):
    """Every call of the tie-break jitter (SQL LDP_TOPK and LDP_MODE at a lattice ε, one group of 1 user) reads a
    vector equal to a release's raw estimate, never the users' true counts. A broken version that hashed the true
    histogram would fail here (the release differs from the truth at ε = 6, n = 300)."""
    seen, released = [], []
    real_tiebreak, real_release = winners.tiebreak, histogram._release

    def spy_tiebreak(raw):
        seen.append(np.array(raw, dtype=float))
        return real_tiebreak(raw)

    def spy_release(est, d):
        out = real_release(est, d)
        released.append(out[0].copy())
        return out

    monkeypatch.setattr(winners, "tiebreak", spy_tiebreak)
    monkeypatch.setattr(histogram, "_release", spy_release)
    con = ldpql.connect(seed=3, evaluation=True)
    table(con, [100, 100, 60, 40, 0], groups=lambda m: ["a"] * (m - 1) + ["b"])
    con.sql("SELECT LDP_TOPK(c, 3), LDP_MODE(c) FROM t EPSILON 6")
    con.sql("SELECT g, LDP_TOPK(c, 2) FROM t GROUP BY g EPSILON 6")
    assert seen and released
    truth = np.array([100, 100, 60, 40, 0, 0]) / 300   # OTHER last
    for raw in seen:
        assert any(np.array_equal(raw, rel) for rel in released)
        assert not np.allclose(raw, truth, atol=1e-9)


def test_selected_interval_reads_the_ratio_parts_of_the_release_only(monkeypatch):
    """SQL AVG over a nullable column (both paths the planner picks: ε 4 and 12): every call of
    selected_ratio_interval gets exactly the release's ratio parts (num, den, variances, covariance) and a cut
    of 3·sd(den) computed from them; nothing else reaches it."""
    parts, calls = [], []
    real_parts, real_sel = conditional.ratio_parts, conditional.selected_ratio_interval

    def spy_parts(num, den, cov):
        out = real_parts(num, den, cov)
        parts.append(out.copy())
        return out

    def spy_sel(num, den, vn, vd, cv, confidence, cut):
        calls.append((np.array([num, den, vn, vd, cv]), cut))
        return real_sel(num, den, vn, vd, cv, confidence, cut)

    monkeypatch.setattr(conditional, "ratio_parts", spy_parts)
    monkeypatch.setattr(conditional, "selected_ratio_interval", spy_sel)
    con = ldpql.connect(seed=4, evaluation=True)
    x = np.where(np.arange(3000) % 3 == 0, np.nan, np.linspace(0, 10, 3000))
    con.register("v", pd.DataFrame({"x": x}), private={"x": (0, 10)}, budget=1e6)
    for eps in (4, 12):
        con.sql(f"SELECT LDP_AVG(x) FROM v EPSILON {eps}")
    assert len(calls) >= 2   # the protocol's answer at 95% and the statement's derive
    for got, cut in calls:
        assert any(np.array_equal(got, p) for p in parts)
        assert cut == pytest.approx(3 * math.sqrt(got[3]), rel=1e-12)


def test_without_a_seed_releases_are_fresh_and_the_tiebreak_is_a_function_of_the_release():
    """evaluation=False (no seed): two runs of the same statement draw different releases (fresh noise), while the
    jitter is deterministic post-processing of a release: the same estimates (another array, another global RNG
    state) give the same U, and different releases different U (it is no fixed seed)."""
    con = ldpql.connect()
    table(con, [50, 50, 30, 20, 0])
    a = con.sql("SELECT LDP_HISTOGRAM(c, postprocess => 'none') FROM t EPSILON 1").df().iloc[:, 1].to_numpy()
    b = con.sql("SELECT LDP_HISTOGRAM(c, postprocess => 'none') FROM t EPSILON 1").df().iloc[:, 1].to_numpy()
    assert not np.allclose(a, b)
    raw = np.array([0.3, 0.3, 0.2, 0.2, 0.0])
    saved = np.random.get_state()   # (the global state is moved on purpose, and put back for the other tests)
    try:
        np.random.seed(1)
        u1 = tiebreak(raw)
        np.random.seed(2)
        u2 = tiebreak(np.array(raw.tolist()))
    finally:
        np.random.set_state(saved)
    assert np.array_equal(u1, u2)
    others = {tuple(tiebreak(raw + 0.01 * j)) for j in range(20)}
    assert len(others) == 20


# ---- LDP_TOPK: consistency of ranks, labels and intervals ---------------------------------------------------------

def test_rank_js_interval_does_not_depend_on_k():
    """LDP_TOPK(c, 1), (c, 3) and (c, 5) give rank j the same interval (so the grid measures k = 1, 3, 5 at once):
    on 40 GRR releases at a lattice ε, with ties."""
    rng = np.random.default_rng(2)
    r = oracle("grr", 8.0, 8)
    counts = np.array([40, 40, 40, 20, 20, 20, 10, 10])
    for _ in range(40):
        raw = r.estimate(r.sample_aggregate(counts, rng), 200)
        se, step = np.sqrt(r.variance(np.clip(raw, 0, 1), 200)), r.step(200)
        rho = correlations(raw, (r.p, r.q, *r.pair_hits(), 200, 0.0))
        five = winners_interval(raw, se, 5, 0.95, step, rho)
        for k in (1, 3):
            got = winners_interval(raw, se, k, 0.95, step, rho)
            assert np.array_equal(got[0], five[0][:k]) and np.array_equal(got[1], five[1][:k])


def test_shown_values_and_their_intervals_share_one_ranking():
    """The value shown at rank j (post-processed order, ties by the raw estimate and the jitter) is the value whose
    interval is shown there (winners_interval ranks the raw estimates): 800 random lattice and non-lattice
    releases with ties, under every postprocess."""
    rng = np.random.default_rng(5)
    for _ in range(800):
        d, step = int(rng.integers(2, 9)), float(rng.choice([0.0, 0.05, 0.3]))
        raw = rng.integers(-3, 6, d) * step if step else np.round(rng.normal(0.1, 0.3, d), 1)
        for how in ("simplex", "clip", "base_pos", "none"):
            assert np.array_equal(_ranked(d)(postprocess(raw, how), raw, step), rank(raw, step))


def test_topk_interval_is_never_a_single_point_at_a_low_n_epsilon():
    """GRR, d = 6, n = 200, ε = 0.5, 400 releases: the hybrid set can miss [0, 1] entirely (the conditional test
    rejects every feasible frequency), and clipped it showed as '0 ± 0', a frequency known exactly at ε = 0.5
    (measured before the fix: 1.95% of the rank intervals over 2,000 releases; 4% at n = 50, ε = 0.1 in SQL).
    The per-value interval is joined to such a set: no interval has width 0, and coverage stays >= 0.93."""
    counts = np.array([56, 44, 40, 36, 24, 0])
    runs = topk_runs("grr", counts, 0.5, 400, 0.95, 5, 11)
    widths = np.array([hi - lo for _, lo, hi in runs])
    assert np.count_nonzero(widths <= 0) == 0
    assert coverage(runs, counts / 200).min() >= 0.93


# ---- robustness from SQL: tiny and empty groups, no spread, extreme ε ---------------------------------------------

EDGE = ["SELECT g, LDP_TOPK(c, 3) FROM t GROUP BY g EPSILON {e}", "SELECT g, LDP_MODE(c) FROM t GROUP BY g EPSILON {e}",
        "SELECT LDP_TOPK(c, 2) FROM t WHERE g = 'none' EPSILON {e}",
        "SELECT g, LDP_AVG(x) FROM t GROUP BY g EPSILON {e}", "SELECT g, LDP_AVG(y) FROM t GROUP BY g EPSILON {e}",
        "SELECT LDP_AVG(x) FROM t WHERE g = 'one' EPSILON {e}",
        "SELECT movie, LDP_AVG(rating) FROM r GROUP BY movie EPSILON {e}"]


@pytest.mark.parametrize("eps", ["0.1", "12", "30", "INF"])
def test_edge_groups_and_extreme_epsilon_keep_every_interval_ordered_and_around_its_point(eps):
    """Groups of 250 users, 1 user, 1 user with NULL only; a column with no spread (every value 7), one all NULL but
    one user; key-value means with a key held by one user and a declared key held by none; ε from 0.1 to 30 and
    INF: no exception, and every answer shown is finite with lo <= value <= hi inside the declared range (NULL only
    where no user has a value)."""
    con = ldpql.connect(seed=8, evaluation=True)
    m = 252
    df = pd.DataFrame({"g": ["big"] * 250 + ["one", "null"], "c": [LABELS[i % 3] for i in range(m)],
                       "x": [7.0] * 251 + [None], "y": [None] * 251 + [3.0]})
    con.register("t", df, private={"c": LABELS[:4], "x": (0, 10), "y": (0, 10)}, public=["g"], budget=1e6)
    kv = pd.DataFrame({"uid": [f"u{i}" for i in range(300)] + ["u0"],
                       "movie": ["a", "b"] * 150 + ["c"], "rating": [4.0, None, 2.0] * 100 + [5.0]})
    con.register("r", kv, private={"movie": ["a", "b", "c", "d"], "rating": (1, 5)}, public=["uid"],
                 privacy_unit="uid", sparsity=1, budget=1e6)
    for q in EDGE:
        frame = con.sql(q.format(e=eps)).df()
        cols = [c for c in frame.columns if c.startswith("ldp_") and not c.endswith(("_low", "_high"))]
        for col in cols:
            if f"{col}_low" not in frame:   # LDP_MODE: a label, no interval
                continue
            for v, lo, hi in frame[[col, f"{col}_low", f"{col}_high"]].itertuples(index=False):
                if v is None or (isinstance(v, float) and math.isnan(v)):
                    continue
                assert math.isfinite(lo) and math.isfinite(hi), (q, eps, v, lo, hi)
                assert lo - 1e-12 <= v <= hi + 1e-12, (q, eps, v, lo, hi)
                bounds = (0, 1) if "topk" in col else (1, 5) if "rating" in col else (0, 10)
                assert bounds[0] - 1e-9 <= lo and hi <= bounds[1] + 1e-9, (q, eps, lo, hi)


# ---- LDP_TOPK coverage near the lattice fallback (cells of examples/audit9b/topk_grid.py) -------------------------

TIES = np.array([4, 4, 4, 2, 2, 2, 1, 1, 1, 1, 0, 0])   # exact ties at ranks 1-3 and 4-6 (d = 12)


def tied_counts(n: int) -> np.ndarray:
    c = np.floor(TIES / TIES.sum() * n).astype(np.int64)
    c[-1] += n - c.sum()
    return c


def test_the_grid_reads_a_release_as_a_statement_does(monkeypatch):
    """The grid (and the tests here) rebuild a release's standard errors, step, correlations and skewness from the
    oracle: on a SQL LDP_TOPK release (GRR, ε = 6, 300 users, ties) the statement's are the same, and its shown
    intervals are winners_interval's on them."""
    got = []
    real = histogram.winners_interval

    def spy(raw, se, k, confidence, step=0.0, rho=None, skew=None):
        out = real(raw, se, k, confidence, step, rho, skew)
        got.append((raw.copy(), se.copy(), step, rho, skew, out))
        return out

    monkeypatch.setattr(histogram, "winners_interval", spy)
    con = ldpql.connect(seed=12, evaluation=True)
    table(con, [100, 100, 60, 40, 0])
    shown = con.sql("SELECT LDP_TOPK(c, 3, mechanism => 'grr') FROM t EPSILON 6").df()
    (raw, se, step, rho, skew, (lo, hi)), = got
    r = oracle("grr", 6.0, 6)
    assert np.allclose(se, np.sqrt(r.variance(np.clip(raw, 0.0, 1.0), 300)), rtol=1e-12)
    assert np.allclose(skew, debiased_skewness(np.clip(raw, 0.0, 1.0), 300, r.p, r.q), rtol=1e-12)
    assert step == pytest.approx(r.step(300), rel=1e-12)
    mine = correlations(raw, (r.p, r.q, *r.pair_hits(), 300, 0.0))
    assert all(np.allclose(rho(s), mine(s), rtol=1e-12) for s in range(6))
    assert np.allclose(shown.iloc[:, 2], lo, atol=1e-12) and np.allclose(shown.iloc[:, 3], hi, atol=1e-12)


def test_topk_below_one_lattice_step_covers_every_rank_with_ties():
    """The planner's GRR at ε = 8, n = 1,000 (about one standard error per lattice step), exact ties at ranks 1-3 and
    4-6: every rank's interval covers the value found there at least 0.93 of 300 releases at 95% (grid, another
    seed: 0.957-1.0; widths 1.36x the per-value interval)."""
    counts = tied_counts(1000)
    assert coverage(topk_runs("grr", counts, 8.0, 300, 0.95, 5, 31), counts / 1000).min() >= 0.93


# fixed (was a strict xfail, MEDIUM): between one and ~3 standard errors per lattice step (no per-value join) the top of
# a tied block under-covered: forced BRR, eps = 12, n = 1,000, ties, se/step 1.6: ranks 1 and 4 covered 0.862 and
# 0.853 at 90% (600 releases; 0.873 over 1,200 fresh ones), 0.927/0.925 at 95%. Cause (examples/tails2/topk_cause.py):
# the noise is a few report flips, skewed like a Poisson count (skewness 0.4 here), and the top of a tied block is the
# block's largest upward deviation; the same releases with normal noise of the same variance on the same lattice
# covered 0.904-0.913 at 90%. The hybrid now reads each estimate's skewness from the release (extra['skew']) and
# uses Pearson's type III in place of the normal. Here: ranks 0.897-0.910 at 90%.
def test_topk_between_one_and_three_steps_covers_the_top_of_a_tied_block():
    counts = tied_counts(1000)
    assert coverage(topk_runs("brr", counts, 12.0, 600, 0.9, 5, 21), counts / 1000).min() >= 0.88


def _near_ties(seed: int | None = None):
    """A connection holding the grid's near-ties profile (n = 1,000, d = 12) as table t, and its true frequencies."""
    near = np.array([32, 31, 30, 29, 28, 27, 10, 10, 5, 5, 2, 1])
    counts = np.floor(near / near.sum() * 1000).astype(np.int64)
    counts[-1] += 1000 - counts.sum()
    labels = list("abcdefghijkl")
    con = ldpql.connect(evaluation=True, seed=seed)
    con.register("t", pd.DataFrame({"c": np.repeat(labels, counts)}), private={"c": labels}, budget=1e9)
    return con, dict(zip(labels, counts / 1000))


TOPK_NEAR = "SELECT LDP_TOPK(c, 5, mechanism => 'grr') FROM t EPSILON 2"


@pytest.fixture(scope="module")
def near_ties_shown():
    """500 seeded SELECTs of TOPK_NEAR as a user sees them (one DataFrame each), the connection and the truth."""
    con, truth = _near_ties(seed=5)
    return con, truth, [con.sql(f"{TOPK_NEAR} OPTIONS (seed = {seed})").df() for seed in range(500)]


def test_topk_interval_is_never_a_sliver_far_from_its_estimate(near_ties_shown):
    """Was a strict xfail (LOW): when the conditional test rejects almost every mean, the hybrid set is a sliver at
    the edge of the projection band, c·se away from the estimate (rank 2 of GRR, ε = 2, n = 1,000: estimate 0.1716,
    se 0.026, truth 0.138, 95% set [0.0771, 0.0775]); 0.8% of 1,500 rank sets were under 0.1x the per-value width
    (the narrowest 0.021x), and none covered. ``winners_interval`` still returns such sets (they are the test's
    rejections, and its coverage counts them), but a result shows every interval widened to hold its point
    (``reporting._bounded``), so a sliver is shown as [sliver, estimate], at least ~2 se wide. Through SQL here:
    every rank's interval holds its point and is at least 0.5x the per-value width (z·se + step/2 a side); measured
    0.86x at the narrowest."""
    r = oracle("grr", 2.0, 12)
    ratios = []
    for df in near_ties_shown[2]:
        point, low, high = (df[f"ldp_topk_c{end}"].to_numpy() for end in ("", "_low", "_high"))
        assert np.all((low <= point) & (point <= high)), df
        per_value = 2 * 1.96 * np.sqrt(r.variance(point, 1000)) + r.step(1000)
        ratios.extend((high - low) / per_value)
    assert min(ratios) >= 0.5, min(ratios)


def test_evaluate_scores_the_interval_a_select_shows(near_ties_shown):
    """EVALUATE scored each run's raw interval, while a SELECT shows it clipped to the feasible range and widened to
    hold its point; for LDP_TOPK's ranks on near ties (the hybrid set excludes its estimate in ~3.6% of ranks) that
    under-stated the shown intervals' coverage: 0.954 against 0.972 on the same 600 runs. Now EVALUATE's coverage
    and a loop of seeded SELECTs (what a user sees) agree: 0.9717 and 0.9728 over 500 runs (bound 0.012)."""
    con, truth, shown = near_ties_shown
    evaluated = con.sql(f"EVALUATE {TOPK_NEAR} REPEAT 600").df()["coverage"].mean()
    hits = []
    for df in shown:
        f = df["c"].map(truth)
        hits.extend((df["ldp_topk_c_low"] <= f) & (f <= df["ldp_topk_c_high"]))
    assert abs(evaluated - np.mean(hits)) <= 0.012, (evaluated, np.mean(hits))


# ---- the unflagged conditional mean's interval (cells of examples/audit9b/ratio_grid.py and ratio_confirm.py) -------

# (Var num, Var den, Cov) of Collision's ratio parts at n = 500, ε = 2, 95% NULL, every value at the upper bound
# (the medians over 400 releases of ratio_grid.py's cell); the share with a value is 0.05
HI_95_NULL = (3.676e-3, 3.674e-3, 9.03e-5)


def unflagged_coverage(r_true: float, confidence: float, want: int = 400, seed: int = 0) -> float:
    """Jointly normal (num, den) with mean (r·0.05, 0.05) and HI_95_NULL's covariance, the model the selection-aware
    interval is derived under: the coverage of r over the first ``want`` draws that are not flagged (den >= 3·sd)."""
    vn, vd, cv = HI_95_NULL
    mean = np.array([r_true * 0.05, 0.05])
    draws = np.random.default_rng(seed).multivariate_normal(mean, [[vn, cv], [cv, vd]], 100_000)
    cut = conditional.LOW_CONFIDENCE * math.sqrt(vd)
    kept = draws[draws[:, 1] >= cut][:want]
    assert len(kept) == want   # about 1.6% of the draws are not flagged
    hits = [lo - 1e-9 <= r_true <= hi + 1e-9 for lo, hi in
            (conditional.selected_ratio_interval(a, b, vn, vd, cv, confidence, cut) for a, b in kept)]
    return float(np.mean(hits))


def test_unflagged_interval_covers_an_interior_mean_given_a_rare_selection():
    """Where the answer is unflagged in only ~1.5% of releases and the mean is inside the range (r = 0.4), the
    interval nearly covers given the selection: 0.943 at 95% over 2,000 unflagged normal draws (Fieller's: 0.872;
    0.935 over this test's 400), and r = 0 covers 0.965."""
    assert unflagged_coverage(0.4, 0.95) >= 0.93


@pytest.mark.xfail(strict=True, reason="MEDIUM: the hybrid's guarantee given the selection fails when the selection is "
                   "rare and the mean sits near a bound: unflagged in 1.5% of releases, the normal model (2,000 unflagged "
                   "draws) covers r = 1 0.888 at 95%, 0.798 at 90% (Fieller 0.622/0.440), r = 0.7 0.918/0.856; on real releases (ratio_confirm.py) collision, "
                   "every value at hi, 95% NULL, n = 500, eps = 2: 0.651 at 95% (146 unflagged of 20,000), 0.657 at 90%; "
                   "n = 5,000, eps = 0.5: 0.737 (38); split, n = 5,000, eps = 1: 0.862 / 0.725 at 90% (109). The "
                   "band |P| <= c·sd(P) holds with probability 1 - beta overall but not given a rare selection. "
                   "Session 14 (examples/readout14/sel.py): Lee et al.'s exact test given den in [cut, cut + sd) "
                   "below that and the hybrid above raise r = 1 to 0.933 / 0.883 but move the miss up (E den = 2 sd, "
                   "r = 1: 0.903 -> 0.853 at 90%) and widen r = ±1 1.5-1.8x at E den = 3-4 sd: not taken")
def test_unflagged_interval_covers_a_mean_at_the_bound_given_a_rare_selection():
    assert unflagged_coverage(1.0, 0.9) >= 0.88

"""Audit 14 (hostile review) of the rank error a quantile search's result shows: max(z·σ, ``bracket_bound``) capped at
max(τ, 1 − τ) (commits 19f4c8d / 02e29fb; since 71ea9e8 the bound pools the k nearest asked coins on each side).

Passing tests record attacks that held and would fail if the engine broke; a finding is ``xfail(strict=True)`` with
the measured numbers in its reason, so it flips when fixed. Each test re-runs one small cell of the held-out grid
``examples/audit14/quantile_grid14.py`` (shapes no earlier grid used, fixed before any result; 200 runs, seeds
[1414, t]) or one statement through the SQL API with fixed seeds; the grid's tables are in examples/audit14/README.md.
"""

from __future__ import annotations

import math
import re
import sys
from pathlib import Path
from statistics import NormalDist

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import ldpql
from ldpql.errors import PrivacyError
from ldpql.executor import Executor
from ldpql.mechanisms import Estimate, Reply
from ldpql.mechanisms.quantile import CoinSpace, Question, bayess_protocol, bracket_bound, nbs_protocol
from ldpql.planner import quantile as planner
from ldpql.simulation import simulate

AUDIT14 = Path(__file__).resolve().parents[2] / "examples" / "audit14"
Z95 = planner.Z95


@pytest.fixture(scope="module")
def grid():
    sys.path.insert(0, str(AUDIT14))
    import quantile_grid14
    return quantile_grid14


@pytest.fixture(scope="module")
def sqlpath():
    sys.path.insert(0, str(AUDIT14))
    import sqlpath as module
    return module


def _cell(grid, shape: str, n: int, eps: float, tau: float, mechanism: str, reps: int = 200) -> dict:
    """One cell of the audit-14 grid with its seeds: coverage at 80/90/95/99% and widths."""
    s = grid.shapes(n)[shape]
    return grid.run_cell(grid.candidates(s, tau)[mechanism], s, tau, eps, reps)


def _before(grid, shape: str, n: int, eps: float, tau: float, mechanism: str, conf: float = 0.95,
            reps: int = 200) -> float:
    """The same cell's coverage of ±z·σ alone (the prediction without the bracket bound)."""
    s = grid.shapes(n)[shape]
    c = grid.candidates(s, tau, conf)[mechanism]
    z, sigma = NormalDist().inv_cdf(0.5 + conf / 2), c.predict(eps, n)
    hit = 0
    for t in range(reps):
        a = simulate(c.protocol(eps)(n), np.random.default_rng([grid.SEED, t]), hist=s.hist).extra["answers"][tau]
        hit += s.coin_error(int(a.extra["coin"]), tau) <= min(z * sigma, max(tau, 1 - tau)) + 1e-12
    return hit / reps


# ==== 1. Coverage of the shown rank error on the audit-14 held-out grid ========================================

def test_bracket_bound_covers_where_the_prediction_alone_fails(grid):
    """Held: Zipf(1.3) - 1 on INTEGER 0..200000 (the value 0 holds 25%), n = 2,000, ε = 1, τ = 0.3, BayeSS (the
    planner's choice): ±z·σ alone covered 0.615 of 200 runs at 95%; the shown rank error 0.970."""
    assert _before(grid, "zipf", 2000, 1.0, 0.3, "bayess") <= 0.7
    row = _cell(grid, "zipf", 2000, 1.0, 0.3, "bayess")
    assert row["cov95"] >= 0.95 and row["cov90"] >= 0.9, row


def test_naive_nbs_covers_on_a_zipf_column_at_small_n_epsilon(grid):
    """Was a strict xfail (HIGH): where the search must cross values that each hold many users at small n·ε², the coin
    that decided the answer is selected because its noise was extreme (F̂ = -0.26, se 0.38, where F = 0.86), and a
    Bonferroni over the coins near τ missed: Zipf(1.3) - 1 on INTEGER 0..200000, n = 2,000, ε = 0.25, τ = 0.05,
    NaiveNBS forced: 0.945 / 0.865 / 0.745 at 95 / 90 / 80%. NaiveNBS's bound is now Bonferroni's over every asked
    coin (a union bound over its questions): 0.975 / 0.955 / 0.900."""
    row = _cell(grid, "zipf", 2000, 0.25, 0.05, "naive_nbs")
    assert row["cov95"] >= 0.93 and row["cov90"] >= 0.88 and row["cov80"] >= 0.78, row


@pytest.mark.xfail(strict=True, reason=(
    "MEDIUM (forced BayeSS only; the planner answers this cell from the domain's end without asking anyone): at "
    "n·ε² = 125 on a column with 30% at each end (bounds, n = 2,000, ε = 0.25, τ = 0.98), BayeSS's nearest bracket "
    "(no multiplicity correction) covers 0.900 / 0.850 / 0.760 at 95 / 90 / 80% (200 runs; fresh seeds, 400 runs: "
    "0.910 / 0.853 / 0.765, examples/audit14/recheck_e713714_searches.csv, with 4 more such cells at 80-90%). "
    "NaiveNBS's union bound over every asked coin would hold it but makes BayeSS's shown rank error 1.4x wider on "
    "audit 9's held-out cells (median 1.93 -> 2.75 z·σ at 95%) and 1.5-1.9x on our own: left open (session 11)"))
def test_forced_bayess_covers_at_small_n_epsilon_on_point_masses(grid):
    row = _cell(grid, "bounds", 2000, 0.25, 0.98, "bayess")
    assert row["cov95"] >= 0.93 and row["cov90"] >= 0.88 and row["cov80"] >= 0.78, row


def test_planner_choice_covers_at_confidence_80_and_90_on_a_zipf_column(grid):
    """Was a strict xfail (HIGH) on 71ea9e8, whose BayeSS pooled up to 32 coins near the answer without a correction:
    Zipf(1.3) - 1 on INTEGER 0..200000, n = 2,000, ε = 0.25, τ = 0.3, BayeSS (chosen): 0.740 at 80%, 0.885 at 90%.
    The engine is back on 02e29fb's nearest-bracket rule: 0.830 / 0.930 / 0.970 at 80 / 90 / 95%."""
    s = grid.shapes(2000)["zipf"]
    assert grid.chosen(s, 0.3, 0.25) == "bayess"
    row = _cell(grid, "zipf", 2000, 0.25, 0.3, "bayess")
    assert row["cov80"] >= 0.78 and row["cov90"] >= 0.88, row


@pytest.mark.xfail(strict=True, reason=(
    "LOW (over-wide): where every answer is exactly right the shown rank error is still several times ±z·σ: the "
    "bounds column (30% at 1000), n = 2,000, ε = 8, τ = 0.98, BayeSS forced: rank error 0 in all 200 runs, shown "
    "±0.060 on average, 6.5x z·σ (BayeSS's last stage asks ~10% of the users, so the bracket's se is ~3x the "
    "predicted σ). Over the grid's 672 BayeSS cells 470 cover above 0.995 at 95%; median width 1.8x z·σ, up to "
    "7.6x; mean shown / the realised errors' 95th percentile: median 2.2"))
def test_an_exact_answer_is_not_shown_many_times_wider_than_predicted(grid):
    row = _cell(grid, "bounds", 2000, 8.0, 0.98, "bayess", reps=60)
    assert row["mean_error"] == 0.0
    assert row["width95"] <= 2.0, row


def test_the_reported_value_of_a_bucketed_double_column_has_the_shown_rank_error(grid):
    """Was a strict xfail (MEDIUM): on a DOUBLE column the rank error was the coin's (bucket's) while the result reports
    the bucket's midpoint, whose own rank can be anywhere in [F(v - 1), F(v)]: N(5, 0.05) on DOUBLE BETWEEN 0 AND 10,
    resolution => 1024 (buckets of 0.0098 hold up to 8% each), n = 20,000, ε = 1, τ = 0.5, BayeSS: the reported
    value's rank error was within the shown one in 0.035 of 200 runs. A bucketed answer now shows its midpoint's
    rank error, max(F(v) - τ, τ - F(v - 1)), bounded by the release (``bucketed``): 1.0 of 60 runs. (The grid's
    harness now declares the coins as the planner does.)"""
    row = _cell(grid, "narrow1k", 20000, 1.0, 0.5, "bayess", reps=40)
    assert row["cov95"] >= 0.93
    assert row["vcov95"] >= 0.9, row


def test_planner_choice_is_not_useless_on_a_zipf_column_at_high_epsilon(grid):
    """Was a strict xfail (MEDIUM, the planner's own choice): Zipf(1.3) - 1 on INTEGER 0..200000, n = 2,000, ε = 8,
    τ = 0.05: the planner picks the histogram (256 bins of 782 coins; EXPLAIN: predicted ±0.0146), whose read-out
    spread bin 0 (value 0 holds 27%) evenly over its 782 coins: answer 43, F(42) = 0.73, a mean rank error of 0.677
    over 200 runs (shown ±0.95), where BayeSS forced had 0.000. 15 of the grid's 243 chosen-histogram cells (all
    Zipf, ε = 8, τ <= 0.5) had 0.30-0.68. Never choosing a binned histogram was no fix (6 smooth cells from regret
    1.0 to 3.2-48). The histogram now splits a bin that its first half of the users shows to be heavier than its
    neighbours for the second half (``quantile_histogram.heavy_bins``): rank error 0 in these 30 runs."""
    s = grid.shapes(2000)["zipf"]
    pick = grid.chosen(s, 0.05, 8.0)
    c = grid.candidates(s, 0.05)[pick]
    errors = [s.coin_error(int(simulate(c.protocol(8.0)(2000), np.random.default_rng([1414, t]), hist=s.hist)
                                .extra["answers"][0.05].extra["coin"]), 0.05) for t in range(30)]
    assert pick == "histogram" and float(np.mean(errors)) <= 0.01, (pick, float(np.mean(errors)))


# ==== 2. Privacy: what a result shows is post-processing of the released counts ===============================

class _Tape:
    """Records every round's replies (the released, randomized counts) on one run and replays them on another."""

    def __init__(self):
        self.replies: list[dict] = []
        self.replay = False


def _taped(monkeypatch, tape: _Tape) -> None:
    original = Executor._run_round

    def run_round(self, group, rng, step):
        if tape.replay:   # the data of this run is never read: the replies are the other run's
            self.touched = True
            return tape.replies.pop(0)
        out = original(self, group, rng, step)
        tape.replies.append({c: Reply(np.array(r.summary, copy=True), int(r.n)) for c, r in out.items()})
        return out
    monkeypatch.setattr(Executor, "_run_round", run_round)


def _table(x: np.ndarray) -> ldpql.Connection:
    con = ldpql.connect(evaluation=True)
    con.register("t", pa.table({"x": x}), private={"x": {"between": (0.0, 20.0)}}, budget=100)
    return con


@pytest.mark.parametrize("sql", [
    "SELECT LDP_QUANTILE(x, 0.9) FROM t EPSILON 1 OPTIONS (seed = 5)",
    ("SELECT LDP_QUANTILE(x, 0.1, interval => 'calibrated'), LDP_MEDIAN(x) FROM t EPSILON 0.5 "
     "OPTIONS (seed = 6, confidence = 0.8)"),
    "SELECT LDP_QUANTILE(x, 0.9, mechanism => 'naive_nbs') FROM t EPSILON 2 OPTIONS (seed = 7, confidence = 0.99)"])
def test_everything_a_result_shows_is_a_function_of_the_released_counts(monkeypatch, sql):
    """Two columns of the same public size and declaration but different data (Gamma(2, 1) and uniform on 0..20).
    The second statement's rounds are answered with the first one's released counts instead of its own data: its
    values, intervals, shown rank errors and every note are the first one's, exactly. So nothing but the released
    counts and public facts (n, ε, τ, K, the confidence) reaches them. The widened note is there, and it does not
    track the second column's truth (its real rank error of the same answer is other)."""
    rng = np.random.default_rng(8)
    a, b = np.clip(rng.gamma(2.0, 1.0, 3000), 0, 20), rng.uniform(0, 20, 3000)
    tape = _Tape()
    _taped(monkeypatch, tape)
    first = _table(a).sql(sql)
    assert tape.replies
    tape.replay = True
    second = _table(b).sql(sql)
    assert tape.replies == []   # every round of the second run was answered from the tape
    assert second.fetchall() == first.fetchall()
    assert second.intervals() == first.intervals()
    assert second.notes == first.notes
    assert any(re.search(r"rank error ±[\d.]+ \(\d+%\), the predicted", n) for n in first.notes), first.notes
    values = [v for v in first.fetchall()[0] if isinstance(v, float)]
    ranks = [(float(np.mean(a <= v)), float(np.mean(b <= v))) for v in values]
    assert max(abs(ra - rb) for ra, rb in ranks) > 0.1, ranks   # the same answers, far apart in the columns' ranks


def test_the_rank_error_reads_only_the_questions_and_public_sigma():
    """The shown rank error of a search is a function of (mechanism, search, coin, the released questions) and σ
    (public: ε, n, K, τ): an Estimate stripped to those gives the same number; a question's user count and every
    other field of the answer are not read (changing them changes nothing), while changing one released estimate
    next to the answer does change it."""
    space = CoinSpace(1001)
    rng = np.random.default_rng(3)
    x = np.clip(np.rint(rng.normal(500, 30, 4000)), 0, 1000).astype(np.int64)
    for make, mech in ((lambda: nbs_protocol(space, 1.0, 0.9), "naive_nbs"),
                       (lambda: bayess_protocol(space, 1.0, 0.9, max_rounds=planner.BAYESS_ROUNDS), "bayess")):
        got = simulate(make()(4000), np.random.default_rng(2), coins=x)
        sigma = (planner.sigma_bayess if mech == "bayess" else planner.sigma_nbs)(1.0, 4000, 1001, 0.9)
        full = planner.shown_rank_error(got, 0.9, sigma, Z95)
        bare = Estimate(np.array([math.nan]), np.array([math.nan]),
                        extra={"mechanism": mech, "coin": got.extra["coin"],
                               "questions": [Question(q.coin, q.estimate, 10 ** 9, q.variance)
                                             for q in got.extra["questions"]]})
        assert planner.shown_rank_error(bare, 0.9, sigma, Z95) == full
        v = int(got.extra["coin"])
        moved = [Question(q.coin, q.estimate - (0.3 if abs(q.coin - v) <= 40 else 0.0), q.users, q.variance)
                 for q in got.extra["questions"]]
        bare.extra["questions"] = moved
        assert planner.shown_rank_error(bare, 0.9, sigma, Z95) != full


def test_an_analyst_pays_exactly_epsilon_and_the_shown_rank_error_is_neither_charged_nor_refunded(tmp_path):
    """An analyst (ledger file, role='analyst') runs quantiles whose results show a widened rank error: each
    statement is one committed charge of exactly its ε (nothing extra for the note, no refund because of it), the
    confidence (the only knob of the shown rank error) is a statement option that costs a fresh release, and the
    analyst can neither fix the noise (seed) nor see a noise-free answer (EPSILON INF) to read the bound against."""
    rng = np.random.default_rng(12)
    path = str(tmp_path / "d.parquet")
    pq.write_table(pa.table({"id": np.arange(2000), "x": np.clip(rng.gamma(2.0, 1.0, 2000), 0, 20)}), path)
    ledger = str(tmp_path / "budget.ldpql")
    with ldpql.connect(ledger=ledger) as owner:
        owner.sql(f"CREATE TABLE t FROM '{path}' (x PRIVATE BETWEEN 0 AND 20) PRIVACY UNIT id BUDGET EPSILON 3")
    with ldpql.connect(ledger=ledger, role="analyst") as an:
        for conf in (0.95, 0.8):   # (unseeded: the note is widened in ~96% / ~86% of such runs, measured)
            res = an.sql(f"SELECT LDP_QUANTILE(x, 0.9) FROM t EPSILON 1 OPTIONS (confidence = {conf})")
            assert any(re.search(rf"rank error (\(fraction of users\) )?±[\d.]+ \({conf:.0%}", n) for n in res.notes)
        for sql in ("SELECT LDP_QUANTILE(x, 0.9) FROM t EPSILON 0.5 OPTIONS (seed = 7)",
                    "SELECT LDP_QUANTILE(x, 0.9) FROM t EPSILON INF"):
            with pytest.raises((PrivacyError, ldpql.PlanError)):
                an.sql(sql)
        charges = an.ledger.charges()
        assert [(c.epsilon, c.status) for c in charges if c.kind == "query"] == [(1.0, "committed")] * 2
        assert an.remaining_budget("t") == pytest.approx(1.0)
        with pytest.raises(ldpql.BudgetExceededError):
            an.sql("SELECT LDP_QUANTILE(x, 0.9) FROM t EPSILON 1.5")
        assert an.remaining_budget("t") == pytest.approx(1.0)


# ==== 3. Edge cases ============================================================================================

def test_epsilon_inf_shows_no_rank_error_and_does_not_crash(sqlpath):
    """EPSILON INF (evaluation only): noise-free questions of variance 0. Every quantile of a statement (several τ,
    the calibrated interval, a continuous column, GROUP BY) answers the exact quantile at the domain's resolution,
    shows no rank error (extra has none, no note claims one) and nothing crashes."""
    rng = np.random.default_rng(1)
    g = np.array(["a", "b"] * 1500)
    x = np.clip(rng.gamma(2.0, 1.0, 3000), 0, 20)
    con = sqlpath.connect({"g": g, "x": x, "k": rng.integers(0, 50, 3000)},
                          {"x": {"between": (0.0, 20.0)}, "k": {"between": (0, 49), "integer": True}}, ("g",))
    with sqlpath.spy() as seen:
        res = con.sql("SELECT g, LDP_QUANTILE(x, 0.02, interval => 'calibrated'), LDP_MEDIAN(x), "
                      "LDP_QUANTILE(k, 0.98, interval => 'calibrated') FROM t GROUP BY g EPSILON INF")
    _, cells, answers = seen[-1]
    assert not any("rank error ±" in n for n in res.notes), res.notes
    assert all("rank_error" not in a.extra for a in answers.values() if a is not None and a.extra)
    step = 20 / planner.RESOLUTION
    for row, cell in zip(res.fetchall(), cells):
        xs = x[g == row[0]]
        for value, tau in zip(row[1:3], (0.02, 0.5)):
            coin = math.floor(float(np.quantile(xs, tau, method="inverted_cdf")) / step)
            assert value == pytest.approx((coin + 0.5) * step)


def test_bracket_bound_at_the_domain_ends_and_with_exact_questions():
    """Coin 0 has no F(v - 1) (0 by definition); the top coin's F is 1; a noise-free question (variance 0, EPSILON
    INF's) pools to itself and bounds exactly; no question at all bounds by the whole range. No NaN anywhere."""
    z = Z95
    window = planner.BRACKET_WINDOW["naive_nbs"]
    at0 = [Question(0, 0.30, 500, 1e-4), Question(5, 0.5, 500, 1e-4)]
    assert bracket_bound(at0, 0, 0.02, z, window) == 0.0            # τ well inside [0, F̂(0)]
    assert bracket_bound(at0, 0, 0.45, z, window) > 0.15            # F(0) may be 0.30: τ above it
    top = [Question(999, 0.97, 500, 1e-4), Question(1000, 1.0, 500, 1e-4)]
    b = bracket_bound(top, 1000, 0.98, z, window)
    assert 0 < b < 0.05 and not math.isnan(b)
    exact = [Question(10, 0.4, 100, 0.0), Question(11, 0.6, 100, 0.0)]
    assert bracket_bound(exact, 11, 0.5, z, window) == 0.0
    assert bracket_bound(exact, 12, 0.5, z, window) == pytest.approx(0.1)   # F(11) = 0.6 exactly
    assert bracket_bound([], 7, 0.3, z, window) == pytest.approx(0.7)


def test_a_search_whose_batches_ran_out_shows_the_whole_range():
    """n = 5 users on 2^16 coins: 17 NaiveNBS batches, 12 of them empty; the search stops at an untested midpoint.
    σ is useless there, so the shown rank error is max(τ, 1 - τ) (nothing finer is claimed), and it is finite."""
    space = CoinSpace(1 << 16)
    for tau in (0.05, 0.5, 0.9):
        got = simulate(nbs_protocol(space, 1.0, tau)(5), np.random.default_rng(1), coins=np.arange(5) * 1000)
        asked = {q.coin for q in got.extra["questions"]}
        assert len(got.extra["questions"]) == 5 and int(got.extra["coin"]) not in asked
        sigma = planner._honest(lambda eps, n, tau=tau: planner.sigma_nbs(eps, n, space.size, tau),
                                planner.QuantileTarget("x", planner.Encoding("x", space.size, "x"), "", None,
                                                       planner.UNIT, tau=tau, space=space, taus=(tau,)))(1.0, 5)
        assert planner.shown_rank_error(got, tau, sigma, Z95) == pytest.approx(max(tau, 1 - tau))


@pytest.mark.parametrize("n", [1, 2, 10])
def test_tiny_tables_answer_or_refuse_before_spending(sqlpath, n):
    """1, 2 and 10 users: the statement either refuses before anything is spent or answers with a rank error no
    smaller than the largest any answer can have at that n (nothing is certified from a handful of users)."""
    con = sqlpath.connect({"x": np.arange(n) * 7 % 100}, {"x": {"between": (0, 99), "integer": True}}, budget=10)
    for tau in (0.02, 0.5, 0.9):
        with sqlpath.spy() as seen:
            try:
                res = con.sql(f"SELECT LDP_QUANTILE(x, {tau}) FROM t EPSILON 1")
            except ldpql.Error:
                continue
        a = seen[-1][2][(0, 0)]
        if a.extra and "rank_error" in a.extra:
            assert a.extra["rank_error"] >= min(tau, 1 - tau) - 1e-12, (n, tau, a.extra["rank_error"])
        assert res.fetchall()


def test_a_bayess_that_fell_back_reads_its_release_as_naive_nbs():
    """BayeSS below its guard runs NaiveNBS (extra['search'] = 'naive_nbs', a note says so): its release is read
    with NaiveNBS's Bonferroni over the plausible coins, not BayeSS's (no correction)."""
    space = CoinSpace(1 << 16)
    x = np.clip(np.random.default_rng(2).gamma(2.0, 1.0, 60) * 3000, 0, (1 << 16) - 1).astype(np.int64)
    got = simulate(bayess_protocol(space, 4.0, 0.5)(60), np.random.default_rng(4), coins=x)
    assert got.extra["search"] == "naive_nbs" and "fell back to naive_nbs" in got.note
    qs, v = got.extra["questions"], int(got.extra["coin"])
    as_nbs = bracket_bound(qs, v, 0.5, Z95, planner.BRACKET_WINDOW["naive_nbs"])
    assert planner.shown_rank_error(got, 0.5, 0.0, Z95) == pytest.approx(min(as_nbs, 0.5))



# ==== 4. What the SQL result shows ===========================================================================

def _group_table(grid, sqlpath):
    big, small = grid.shapes(20_000)["gamma"], grid.shapes(500)["gamma"]
    x = np.concatenate([big.x, small.x])
    g = np.array(["big"] * len(big.x) + ["small"] * len(small.x))
    return sqlpath.connect({"g": g, "x": x}, {"x": sqlpath.declaration(big)}, ("g",)), big, small


def test_the_sql_result_shows_what_the_engine_computed(grid, sqlpath):
    """Through ldpql.connect(evaluation=True): the answer is the coin the search returned, the engine's
    extra['rank_error'] is shown_rank_error of that answer at the statement's confidence (recomputed from the
    release's questions and the public σ), and the note shows it (3 digits) when it is over 1.05 z·σ, otherwise
    the predicted ±z·σ is what the result says. Several quantiles (one release, users split) and a quantile beside a
    mean under split = 'users' each get their own."""
    s = grid.shapes(2000)["gamma"]
    con = sqlpath.connect({"x": s.x, "y": np.arange(2000) % 7}, {"x": sqlpath.declaration(s),
                                                                   "y": {"between": (0, 6), "integer": True}})
    for sql, conf in (("SELECT LDP_QUANTILE(x, 0.9) FROM t EPSILON 1 OPTIONS (seed = 1, confidence = 0.8)", 0.8),
                      (("SELECT LDP_QUANTILE(x, 0.05), LDP_MEDIAN(x), LDP_QUANTILE(x, 0.95) FROM t EPSILON 1 "
                        "OPTIONS (seed = 2)"), 0.95),
                      (("SELECT LDP_QUANTILE(x, 0.9), LDP_MEAN(y) FROM t EPSILON 1 OPTIONS (seed = 3, split = 'users', "
                        "confidence = 0.99)"), 0.99)):
        with sqlpath.spy() as seen:
            res = con.sql(sql)
        p, _, answers = seen[-1]
        shown = sqlpath.displayed(res, p)
        z = NormalDist().inv_cdf(0.5 + conf / 2)
        quantiles = [a for a in p.aggregates if getattr(a.target, "tau", None) is not None]
        assert quantiles
        for a in quantiles:
            ans = answers[(a.index, 0)]
            sigma = a.chosen.predict(a.epsilon, int(2000 * (a.users[1] - a.users[0])))
            expect = planner.shown_rank_error(ans, a.target.tau, sigma, z)
            assert ans.extra["rank_error"] == pytest.approx(expect), (sql, a.output)
            assert sqlpath.coin_of(s, float(ans.values[0])) == int(ans.extra["coin"])
            note = shown[a.output]["cells"].get("")
            if ans.extra["rank_error"] > 1.05 * z * sigma:
                assert note == float(f"{ans.extra['rank_error']:.3g}"), (sql, a.output, note)
            else:   # no note: the statement's prediction is what the result says, and it is not less
                assert note is None and shown[a.output]["predicted"] == pytest.approx(z * a.chosen.predicted_se,
                                                                                      rel=2e-3)
                assert shown[a.output]["predicted"] >= float(f"{ans.extra['rank_error']:.3g}") - 1e-9


def test_every_group_is_shown_its_own_rank_error(grid, sqlpath):
    """Was a strict xfail (HIGH): under GROUP BY a small group's answer was shown with the statement's predicted rank
    error, made at the median group's n, whenever its own shown rank error was not 5% over its own ±z·σ (groups of
    20,000 and 500, ε = 0.25: ±0.106 displayed, covering 0.22, where the engine computed ±0.5). Every group's
    answer now says its own rank error under GROUP BY."""
    con, _, _ = _group_table(grid, sqlpath)
    with sqlpath.spy() as seen:
        res = con.sql("SELECT g, LDP_QUANTILE(x, 0.5) FROM t GROUP BY g EPSILON 0.25 OPTIONS (seed = 3)")
    p, cells, answers = seen[-1]
    shown = sqlpath.displayed(res, p)[p.aggregates[0].output]
    for ci, cell in enumerate(cells):
        own = answers[(0, ci)].extra["rank_error"]
        said = shown["cells"].get(f"g = {cell.key[0]}", shown["predicted"])
        assert said >= float(f"{own:.3g}") - 1e-9, (cell.key, own, said, res.notes)


def test_padding_mode_shows_a_rank_error_of_its_own_accuracy(grid):
    """Was a strict xfail (MEDIUM, over-wide): 'padding' runs BayeSS on padded data, whose questions estimate the
    padded CDF F' = (F + 1 - 2τ)/(2 - 2τ), but the rank error compared them with the original τ: gamma column,
    n = 20,000, ε = 1, τ = 0.1 showed ±0.426 for a mean rank error of 0.012 ('direct': ±0.048), 8.8x. The padded
    release is now read in the real users' ranks (``_unpadded``): 1.24x 'direct' over 100 runs, and both held in
    every run."""
    s = grid.shapes(20_000)["gamma"]
    space = CoinSpace(s.size)
    target = planner.QuantileTarget("x", planner.Encoding("x", s.size, "x"), "", None, planner.UNIT, tau=0.1,
                                    space=space, taus=(0.1,), mode="padding")
    pad = {c.mechanism: c for c in planner.quantile_candidates(target)}["bayess"]
    direct = grid.candidates(s, 0.1)["bayess"]
    widths = {}
    for name, c in (("padding", pad), ("direct", direct)):
        sigma = c.predict(1.0, 20_000)
        answers = [simulate(c.protocol(1.0)(20_000), np.random.default_rng([1414, t]), hist=s.hist)
                   .extra["answers"][0.1] for t in range(15)]
        shown = [planner.shown_rank_error(a, 0.1, sigma, Z95) for a in answers]
        widths[name] = float(np.mean(shown))
        held = [s.coin_error(int(a.extra["coin"]), 0.1) <= r for a, r in zip(answers, shown)]
        assert np.mean(held) >= 0.9, (name, np.mean(held))
    assert widths["padding"] <= 2 * widths["direct"], widths


@pytest.mark.xfail(strict=True, reason=(
    "MEDIUM: interval => 'calibrated' (built from the shown rank error) misses the true quantile where τ falls on a "
    "point mass at the domain's end: the bounds column (exactly 30% at 0: F(0) = τ = 0.3), n = 2,000, ε = 1, BayeSS "
    "(chosen): the interval held a value of rank error 0 in 0.765 of 200 seeded SQL runs, and in 0.235 the shown "
    "rank error held while the interval missed (the asked coins just right of 0 estimated F̂ = -0.04 ... 0.2 against "
    "F = 0.30, so the interval starts at 14 or 70). The certified interval holds. Left open (session 11): a per-coin "
    "floor (each asked coin ends the interval only beyond its own z·se) gets 0.06 here but widens BayeSS's calibrated "
    "interval 1.33x on our own 72 cells (examples/qrank4/interval_floor.txt: mean width 0.256 -> 0.340 of the domain), "
    "and with Bonferroni's z 1.8x, about the certified width: the opt-in calibrated interval keeps its caveat"))
def test_calibrated_interval_holds_the_quantile_when_tau_is_on_a_point_mass(grid):
    s = grid.shapes(2000)["bounds"]
    c = grid.candidates(s, 0.3)["bayess"]
    assert grid.chosen(s, 0.3, 1.0) == "bayess"
    sigma, space, miss = c.predict(1.0, 2000), CoinSpace(s.size), 0
    for t in range(100):
        a = simulate(c.protocol(1.0)(2000), np.random.default_rng([1414, t]), hist=s.hist).extra["answers"][0.3]
        held = s.coin_error(int(a.extra["coin"]), 0.3) <= planner.shown_rank_error(a, 0.3, sigma, Z95)
        low, _ = planner.shown_interval(a, 0.3, sigma, 0.95, "calibrated", space)
        miss += held and not round(low[0]) <= 1
    assert miss / 100 <= 0.05, miss


def test_the_result_never_displays_less_than_the_shown_rank_error():
    """Was a strict xfail (LOW): the cell note was written only above 1.05·z·σ, so between z·σ and 1.05·z·σ the result
    displayed up to 5% less than its own rank error. It is now written whenever the rank error is over z·σ."""
    tau, sigma, space = 0.5, 0.01, CoinSpace(100)
    zb = Z95   # one noisy coin (11; 10's answer is noise-free): no Bonferroni
    se = (1.03 * Z95 * sigma + 0.02) / zb            # F̂(v) = τ + 0.02, so τ - (F̂(v) - zb·se) = 1.03·z·σ
    qs = [Question(10, 0.45, 1000, 0.0), Question(11, 0.52, 1000, se * se)]
    answer = Estimate(np.array([11.0]), np.array([math.nan]),
                      extra={"mechanism": "naive_nbs", "coin": 11, "questions": qs,
                             "interval": lambda conf: (np.array([0.0]), np.array([99.0]))})
    assert planner.shown_rank_error(answer, tau, sigma, Z95) == pytest.approx(1.03 * Z95 * sigma)
    release = Estimate(np.array([11.0]), np.array([math.nan]), extra={"answers": {tau: answer}, "sigma": sigma})
    got = planner._derive(tau, space, "certified", "x")(release, 0.95)
    head_tail = got.extra.get("cell_note")
    said = float(head_tail[1].split("±")[1].split()[0]) if head_tail else float(f"{Z95 * sigma:.3g}")
    assert said >= float(f"{got.extra['rank_error']:.3g}"), (said, got.extra["rank_error"])

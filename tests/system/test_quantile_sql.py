"""LDP_QUANTILE / LDP_MEDIAN through SQL: noise-off oracle, both simulation paths, the planner rules of spec §6,
EXPLAIN, shared releases, the shuffle model and its ledger row, intervals, privacy checks and errors."""

from __future__ import annotations

import math

import numpy as np
import pyarrow as pa
import pytest
from scipy import stats

import ldpql
from ldpql.errors import ExecuteError, PlanError, PrivacyError

DOMAINS = {"age": {"between": (0, 120), "integer": True}, "income": (0, 250000), "score": {"between": (0, 9),
                                                                                        "integer": True}}


ONE_ROUND = ("hierarchical", "histogram")   # the one-round candidates (a tree, or a flat histogram)


def people(n: int, seed: int = 5) -> pa.Table:
    rng = np.random.default_rng(seed)
    return pa.table({"age": rng.integers(0, 100, n), "income": np.round(rng.gamma(2.0, 20_000.0, n), 2),
                     "score": rng.integers(0, 10, n), "city": rng.choice(["Lyon", "Nice"], n),
                     "region": rng.choice(["north", "south", "east"], n)})


def connect(n: int = 5000, evaluation: bool = False, delta: float = 0.0, rounds: int | None = None, seed: int = 5,
            data: pa.Table | None = None) -> ldpql.Connection:
    con = ldpql.connect(seed=99, evaluation=True)  # seeds are honoured in evaluation mode only
    con.register("t", data if data is not None else people(n, seed), private={**DOMAINS, "city": ["Lyon", "Nice"]},
                 public=["region"], budget=1000.0, delta=delta, rounds=rounds)
    return con


def duck_quantile(con, expr: str, tau: float, where: str = "") -> list:
    return con.duck.execute(f"SELECT region, quantile_disc({expr}, {tau}) FROM __ldpql_frame_t {where} "
                            "GROUP BY region ORDER BY region").fetchall()


@pytest.fixture(scope="module")
def eval_con():
    con = connect(evaluation=True)
    yield con
    con.close()


# ---- the noise-off oracle (DESIGN §5) -------------------------------------------------------------------------

@pytest.mark.parametrize("tau", [0.1, 0.5, 0.9, 1.0])
def test_noise_off_is_duckdb_quantile_per_group(eval_con, tau):
    got = eval_con.sql(f"SELECT region, LDP_QUANTILE(age, {tau}) FROM t WHERE region <> 'east' GROUP BY region "
                       "EPSILON INF").fetchall()
    assert got == [(r, float(v)) for r, v in duck_quantile(eval_con, "age", tau, "WHERE region <> 'east'")]


@pytest.mark.parametrize("mechanism", ["bayess", "naive_nbs", "hierarchical", "bound"])
def test_noise_off_continuous_is_the_bucket_of_the_quantile(eval_con, mechanism):
    got = eval_con.sql(f"SELECT region, LDP_MEDIAN(income, resolution => 1024) FROM t GROUP BY region EPSILON INF "
                       f"OPTIONS (mechanism = '{mechanism}')").fetchall()
    width = 250000 / 1024
    expect = [(r, (math.floor(v / width) + 0.5) * width) for r, v in duck_quantile(eval_con, "income", 0.5)]
    assert [r for r, _ in got] == [r for r, _ in expect]
    assert [v for _, v in got] == pytest.approx([v for _, v in expect])


# ---- the simulation paths -------------------------------------------------------------------------------------

def test_exact_and_per_user_paths_agree_in_distribution():
    con = connect(4000)
    runs = {}
    for path in ("exact", "per_user"):
        runs[path] = np.array([con.sql(f"SELECT LDP_MEDIAN(age) FROM t EPSILON 2 OPTIONS (mechanism = 'naive_nbs', "
                                       f"simulation = '{path}', seed = {s})").fetchone()[0] for s in range(16)])
    truth = float(np.median(people(4000)["age"].to_numpy()))
    for path, v in runs.items():
        assert abs(np.mean(v) - truth) < 8, path
    assert stats.ks_2samp(runs["exact"], runs["per_user"]).pvalue > 1e-3   # the same spread, not only the mean
    sd = math.sqrt((runs["exact"].var(ddof=1) + runs["per_user"].var(ddof=1)) / 16)
    assert abs(runs["exact"].mean() - runs["per_user"].mean()) < 5 * sd + 1
    one = con.sql("SELECT LDP_MEDIAN(income, resolution => 256) FROM t EPSILON 3 "
                  "OPTIONS (mechanism = 'hierarchical', simulation = 'per_user')")
    assert 0 < one.fetchone()[0] < 250000 and one.plan.simulation == "per_user"


# ---- planner rules and EXPLAIN (spec §6) ------------------------------------------------------------------------

def test_explain_shows_mechanism_resolution_and_predicted_rank_errors():
    con = connect(20000)
    text = con.explain("EXPLAIN SELECT LDP_MEDIAN(income) EPSILON 1 FROM t")
    assert "mechanism * bayess: local" in text and "65,536 coins" in text and "default resolution" in text
    assert "rank error (fraction of users)" in text and "m1/m2/m3" in text
    for other in ("naive_nbs", "hierarchical", "shuffle_nbs", "bound"):
        assert f"rejected    {other}: ±" in text
    assert "1,024 coins" in con.explain("SELECT LDP_QUANTILE(income, 0.9, resolution => 1024) EPSILON 1 FROM t")
    assert "121 coins: one coin per integer value" in con.explain("SELECT LDP_MEDIAN(age) EPSILON 1 FROM t")


def test_rounds_limits_choose_naive_nbs_or_hierarchical():
    con = connect(20000)
    assert con.sql("EXPLAIN SELECT LDP_MEDIAN(income) FROM t EPSILON 1 OPTIONS (rounds = 20)").plan \
        .aggregates[0].chosen.mechanism == "naive_nbs"
    plan = con.sql("EXPLAIN SELECT LDP_MEDIAN(income) FROM t EPSILON 1 OPTIONS (rounds = 1)").plan
    assert plan.aggregates[0].chosen.mechanism in ONE_ROUND and plan.aggregates[0].chosen.rounds == 1
    one_shot = connect(3000, rounds=1)
    res = one_shot.sql("SELECT LDP_MEDIAN(income) FROM t EPSILON 2")
    assert res.plan.aggregates[0].chosen.mechanism in ONE_ROUND and res.fetchone()[0] is not None


def test_small_domain_and_extreme_tau_rules():
    con = connect(3000)
    p = con.sql("EXPLAIN SELECT LDP_MEDIAN(score) FROM t EPSILON 1").plan.aggregates[0]
    assert p.chosen.mechanism == "naive_nbs"
    assert "16 coins" in next(c.rejected for c in p.candidates if c.mechanism == "bayess")
    res = con.sql("SELECT LDP_QUANTILE(age, 0.002) FROM t EPSILON 0.2")
    assert res.plan.aggregates[0].chosen.mechanism == "bound" and res.fetchone() == (0.0,)
    assert "returned without asking users" in " ".join(res.notes)


def test_bayess_is_chosen_on_large_domains_and_naive_nbs_on_small_ones():
    """BayeSS's choice weight falls with the coins (its error did not grow with them, NaiveNBS's did): at
    n = 10^4, ε = 1 the median of a 0..100 column is NaiveNBS's (it had the smaller error on all 7 shapes of
    examples/regret_shapes.py), of a 0..20000 column BayeSS's (0.45-0.65x NaiveNBS's rank error)."""
    con = ldpql.connect(seed=1, evaluation=True)
    x = np.arange(10_000) % 101
    con.register("t", pa.table({"small": x, "large": x * 150}), budget=10.0,
                 private={"small": {"between": (0, 100), "integer": True},
                          "large": {"between": (0, 20000), "integer": True}})
    chosen = {c: con.sql(f"EXPLAIN SELECT LDP_MEDIAN({c}) FROM t EPSILON 1").plan.aggregates[0].chosen.mechanism
              for c in ("small", "large")}
    assert chosen == {"small": "naive_nbs", "large": "bayess"}


# ---- several quantiles of one column ---------------------------------------------------------------------------

def test_several_quantiles_share_one_release(eval_con):
    res = eval_con.sql("SELECT LDP_QUANTILE(age, 0.1), LDP_MEDIAN(age), LDP_QUANTILE(age, 0.9) FROM t EPSILON 1")
    assert res.epsilon_spent == 1 and "shares      the release of ldp_quantile_age" in str(res.plan)
    # (121 coins: NaiveNBS, whose error grows with the coins more slowly than BayeSS's on so small a domain)
    assert res.plan.aggregates[0].chosen.mechanism == "naive_nbs" and "one search each" in str(res.plan)
    exact = eval_con.sql("SELECT LDP_QUANTILE(age, 0.1), LDP_MEDIAN(age), LDP_QUANTILE(age, 0.9) FROM t EPSILON INF")
    ages = people(5000)["age"].to_numpy()
    truth = exact.fetchall()[0]
    assert truth == tuple(float(np.sort(ages)[math.ceil(t * len(ages)) - 1]) for t in (0.1, 0.5, 0.9))
    assert all(abs(a - b) <= 25 for a, b in zip(res.fetchall()[0], truth))
    # and within twice the predicted 95% rank error (ages are uniform on 0..99: a rank is a value / 100)
    alpha = 1.96 * res.plan.aggregates[0].chosen.predicted_se
    assert all(abs(a - b) <= 100 * 2 * alpha + 1 for a, b in zip(res.fetchall()[0], truth))


def test_many_quantiles_prefer_one_hierarchical_release():
    con = connect(20000)
    items = ", ".join(f"LDP_QUANTILE(income, {i / 131:.4f})" for i in range(1, 131))
    plan = con.sql(f"EXPLAIN SELECT {items} FROM t EPSILON 1").plan
    assert plan.aggregates[0].chosen.mechanism == "hierarchical"
    assert "every τ read from one estimated CDF" in str(plan)
    res = con.sql("SELECT LDP_QUANTILE(income, 0.25), LDP_QUANTILE(income, 0.75) FROM t EPSILON 2 "
                  "OPTIONS (rounds = 1)")
    low, high = res.fetchone()
    assert res.plan.aggregates[0].chosen.mechanism == "hierarchical" and low <= high


# ---- the shuffle model (spec §2.8) ---------------------------------------------------------------------------

def test_shuffle_model_runs_at_epsilon0_and_the_ledger_records_it():
    n = 200_000
    con = connect(data=pa.table({"age": np.random.default_rng(1).integers(0, 100, n), "income": np.zeros(n),
                                 "score": np.zeros(n, dtype=np.int64), "city": ["Lyon"] * n,
                                 "region": ["north"] * n}), delta=1e-6)
    res = con.sql("SELECT LDP_MEDIAN(age) FROM t EPSILON 0.25 OPTIONS (model = 'shuffle', delta = 1e-8)")
    agg = res.plan.aggregates[0]
    assert agg.chosen.mechanism == "shuffle_nbs" and agg.chosen.delta == 1e-8
    eps0 = res.plan.epsilon0
    assert eps0 > 0.25 and "users randomize at ε₀" in str(res.plan)
    assert abs(res.fetchone()[0] - 49.5) <= 5
    row = con.sql("SHOW LEDGER t").fetchall()[-1]
    assert row[6] == 0.25 and row[7] == pytest.approx(eps0) and row[8] == 1e-8


def test_shuffle_falls_back_to_local_when_amplification_gains_nothing():
    con = connect(3000, delta=1e-6)   # at ε = 8 a few hundred users per batch hide almost nothing (exact bound)
    res = con.sql("SELECT LDP_MEDIAN(age) FROM t EPSILON 8 OPTIONS (model = 'shuffle', delta = 1e-8)")
    agg = res.plan.aggregates[0]
    assert agg.chosen.model == "local" and res.plan.epsilon0 is None
    assert "no gain" in next(c.rejected for c in agg.candidates if c.mechanism == "shuffle_nbs")
    assert con.sql("SHOW LEDGER t").fetchall()[-1][7] is None


# ---- privacy ----------------------------------------------------------------------------------------------------

def test_plan_is_the_same_for_neighbouring_tables():
    a, b = people(3000), people(3000)
    incomes = b["income"].to_numpy().copy()
    incomes[17] = 249_000.0
    b = b.set_column(1, "income", pa.array(incomes))
    plans = [str(connect(data=d).explain("SELECT LDP_MEDIAN(income), LDP_QUANTILE(age, 0.9) FROM t EPSILON 1"))
             for d in (a, b)]
    assert plans[0] == plans[1]


def test_a_round_that_reaches_users_twice_is_stopped(monkeypatch):
    from ldpql.mechanisms import quantile as q
    con = connect(2000)
    monkeypatch.setattr(q, "edges", lambda start, counts, n: [(0.0, 0.6)] + [(0.4, 1.0)] * (len(counts) - 1))
    with pytest.raises(ExecuteError, match="charge on touch") as info:
        con.sql("SELECT LDP_MEDIAN(age) FROM t EPSILON 1 OPTIONS (mechanism = 'naive_nbs')")
    assert info.value.__context__ is None and info.value.__cause__ is None  # nothing that could quote data
    assert con.remaining_budget("t") == 999.0  # kept: the first rounds had read private data


# ---- intervals ---------------------------------------------------------------------------------------------------

def test_intervals_cover_the_truth(eval_con):
    res = eval_con.sql("EVALUATE SELECT LDP_MEDIAN(income, resolution => 512) FROM t EPSILON 4 "
                       "OPTIONS (mechanism = 'hierarchical') REPEAT 12")
    row = dict(zip(res.columns, res.fetchone()))
    assert row["coverage"] >= 0.75 and abs(row["bias"]) < 10_000
    one = eval_con.sql("SELECT LDP_MEDIAN(age) FROM t EPSILON 2")
    (low, high, conf), = one.intervals()[0]
    assert low <= one.fetchone()[0] <= high and conf == 0.95
    sigma = one.plan.aggregates[0].chosen.predicted_se
    assert f"predicted rank error (fraction of users) ±{1.96 * sigma:.3g} (95%, calibrated)" in one.render()


# ---- errors ------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("sql, error, text", [
    ("SELECT LDP_QUANTILE(income) FROM t EPSILON 1", PlanError, "takes a column"),
    ("SELECT LDP_QUANTILE(income, 1.5) FROM t EPSILON 1", PlanError, "between 0 and 1"),
    ("SELECT LDP_MEDIAN(city) FROM t EPSILON 1", PlanError, "categorical"),
    ("SELECT LDP_MEDIAN(income, resolution => 1) FROM t EPSILON 1", PlanError, "resolution"),
    ("SELECT LDP_QUANTILE(age, 0.9, quantile_mode => 'pad') FROM t EPSILON 1", PlanError, "'direct' or 'padding'"),
    ("SELECT LDP_MEDIAN(age, postprocess => 'simplex') FROM t EPSILON 1", PlanError, "'consistent' or 'none'"),
    ("SELECT LDP_MEDIAN(region) FROM t EPSILON 1", PlanError, "public column"),
    ("SELECT LDP_MEDIAN(income) FROM t EPSILON 1 OPTIONS (model = 'shuffle')", PlanError, "DELTA budget"),
])
def test_bad_queries_are_refused_and_spend_nothing(sql, error, text):
    con = connect(500)
    with pytest.raises(error, match=text):
        con.sql(sql)
    assert con.remaining_budget("t") == 1000.0


def test_undeclared_domain_is_a_privacy_error():
    con = ldpql.connect()
    con.register("u", people(100), private={"income": None}, public=["region"], budget=5.0)
    with pytest.raises(PrivacyError, match="declared domain"):
        con.sql("SELECT LDP_MEDIAN(income) FROM u EPSILON 1")


def test_quantiles_share_a_release_only_with_the_same_coins():
    con = connect(3000)
    same = con.sql("EXPLAIN SELECT LDP_MEDIAN(income), LDP_QUANTILE(income, 0.9, resolution => 65536) FROM t "
                   "EPSILON 1").plan
    assert same.aggregates[1].source == 0 and same.aggregates[0].target.taus == (0.5, 0.9)
    apart = con.sql("EXPLAIN SELECT LDP_MEDIAN(income), LDP_QUANTILE(income, 0.9, resolution => 1024) FROM t "
                    "EPSILON 1").plan
    assert apart.aggregates[1].source is None and apart.aggregates[0].target.taus == (0.5,)
    res = con.sql("SELECT LDP_MEDIAN(age) FROM t EPSILON 1; SELECT LDP_QUANTILE(age, 0.9) FROM t EPSILON 1")
    assert res.plan.aggregates[0].target.taus == (0.9,)


# ---- quantile_mode => 'padding' (spec §2.6) -------------------------------------------------------------------

def test_padding_mode_through_both_paths():
    """The paper's reduction to the median: EXPLAIN says how many virtual users pad the data, the executor
    simulates their answers on both paths, and only real users are charged."""
    n = 20_000
    con = connect(n)
    sql = "SELECT LDP_QUANTILE(age, 0.9, quantile_mode => 'padding', mechanism => 'bayess') FROM t EPSILON 1"
    plan = str(con.explain(sql))
    assert "16,000 virtual ones at the domain's maximum" in plan and "* bayess" in plan
    truth = float(np.quantile(people(n)["age"].to_numpy(), 0.9))
    for path in ("exact", "per_user"):
        res = con.sql(sql[:-len(" EPSILON 1")] + f" EPSILON 1 OPTIONS (simulation = '{path}')")
        assert abs(res.fetchone()[0] - truth) <= 6, path  # rank error about 0.06 at most (σ_bayess·√1.8 ≈ 0.01)
    assert con.remaining_budget("t") == 998.0


def test_padding_and_direct_quantiles_do_not_share_a_release():
    con = connect(3000)
    plan = con.sql("EXPLAIN SELECT LDP_QUANTILE(age, 0.9, quantile_mode => 'padding'), LDP_QUANTILE(age, 0.1, "
                   "quantile_mode => 'padding'), LDP_QUANTILE(age, 0.9) FROM t EPSILON 1").plan
    assert plan.aggregates[1].source == 0 and plan.aggregates[2].source is None
    assert plan.aggregates[0].target.taus == (0.1, 0.9) and plan.aggregates[2].target.taus == (0.9,)


def test_hierarchical_postprocess_is_explained_and_shapes_the_release():
    con = connect(3000)
    sql = ("EXPLAIN SELECT LDP_MEDIAN(age{}), LDP_QUANTILE(age, 0.9) FROM t EPSILON 1 "
           "OPTIONS (mechanism = 'hierarchical')")
    consistent, raw = con.sql(sql.format("")).plan, con.sql(sql.format(", postprocess => 'none'")).plan
    assert "made a consistent tree" in str(consistent) and "used raw (postprocess => 'none')" in str(raw)
    assert consistent.aggregates[1].source == 0 and raw.aggregates[1].source is None
    assert consistent.aggregates[0].chosen.predicted_se < raw.aggregates[0].chosen.predicted_se


# ---- issue 11: high-ε skewed data, answers without asking, the shown interval ---------------------------------

def diamonds_like(n: int, seed: int = 3) -> pa.Table:
    """Skewed integer prices like the diamonds table's (lognormal around 2,400, 326..18,823 on 0..20000)."""
    rng = np.random.default_rng(seed)
    return pa.table({"price": np.clip(np.round(np.exp(rng.normal(math.log(2400), 1.0, n))), 326, 18823).astype(int)})


@pytest.mark.parametrize("eps", [2, 11, 16, 30])
def test_skewed_integer_median_does_not_degrade_as_epsilon_grows(eps):
    """Regression (issue 11, item 2): from ε ≈ 11 the planner chose the hierarchical tree, whose consistent fit
    was biased, and returned about the 35th percentile with a predicted ±2.7e-05 and 0% coverage."""
    data = diamonds_like(30_000)
    con = ldpql.connect(seed=7, evaluation=True)
    con.register("d", data, private={"price": {"between": (0, 20000), "integer": True}}, budget=1000.0)
    prices = np.sort(data["price"].to_numpy())
    for forced in ("", " OPTIONS (mechanism = 'hierarchical')"):
        res = con.sql(f"SELECT LDP_MEDIAN(price) FROM d EPSILON {eps}{forced}")
        value = res.fetchone()[0]
        rank = (np.searchsorted(prices, value, side="left") / len(prices),
                np.searchsorted(prices, value, side="right") / len(prices))
        assert rank[0] - 0.04 <= 0.5 <= rank[1] + 0.04, (forced, value, rank)  # was rank 0.35 at ε >= 12
        (low, high, _), = res.intervals()[0]
        if not forced:
            assert low <= np.quantile(prices, 0.5, method="inverted_cdf") <= high


def test_an_answer_that_asks_nobody_is_not_charged():
    """A quantile at a domain bound, found without asking users, spends nothing: the reserved charge is
    refunded before any private read, the ledger says so, and a statement that does ask someone pays."""
    con = connect(3000)
    res = con.sql("SELECT LDP_QUANTILE(age, 0.002), LDP_QUANTILE(age, 0.999) FROM t EPSILON 0.2")
    assert [a.chosen.mechanism for a in res.plan.aggregates] == ["bound", "bound"]
    assert res.fetchone() == (0.0, 120.0) and res.epsilon_spent == 0
    assert con.remaining_budget("t") == 1000.0 and "nothing was spent" in res.render()
    assert con.sql("SHOW LEDGER t").fetchall()[-1][-1] == "refunded"
    both = con.sql("SELECT LDP_QUANTILE(age, 0.002), LDP_MEAN(age) FROM t EPSILON 0.2")
    assert both.epsilon_spent == 0.2 and con.remaining_budget("t") == pytest.approx(999.8)


def test_certified_interval_is_the_default_and_calibrated_stays_available(eval_con):
    """The calibrated interval is narrower but covered 0.62-0.86 on heavy-tailed data in the coverage grid, so the
    default is the certified one; the calibrated one is asked for by name."""
    for mech in ("naive_nbs", "bayess", "hierarchical", "histogram"):
        res = eval_con.sql(f"SELECT LDP_MEDIAN(age, interval => 'calibrated'), LDP_MEDIAN(age) FROM t EPSILON 2 "
                           f"OPTIONS (mechanism = '{mech}')")
        assert res.plan.aggregates[1].source == 0   # one release, read two ways
        value, same = res.fetchone()
        (lo, hi, _), (clo, chi, _) = res.intervals()[0]
        assert value == same and lo <= value <= hi and clo <= value <= chi, mech
        if mech in ("naive_nbs", "bayess"):   # a search's certified interval is Bonferroni over every question
            widths = [(hi - lo, chi - clo)]
            for _ in range(9):
                r = eval_con.sql("SELECT LDP_MEDIAN(age, interval => 'calibrated'), LDP_MEDIAN(age) FROM t "
                                 f"EPSILON 2 OPTIONS (mechanism = '{mech}')").intervals()[0]
                widths.append((r[0][1] - r[0][0], r[1][1] - r[1][0]))
            assert all(c <= w for c, w in widths), (mech, widths)   # never wider
            # BayeSS's is narrower on average (measured 40.6 vs 92.2); NaiveNBS's follows its shown rank error, which
            # its bracketing questions bound at n = 5,000 about as loosely as the certified tests (23.5 vs 23.5)
            if mech == "bayess":
                assert np.mean([c for c, _ in widths]) < 0.8 * np.mean([w for _, w in widths]), widths
        assert "within a measured multiple of the predicted error of τ" in res.render()
    default = eval_con.sql("SELECT LDP_MEDIAN(age) FROM t EPSILON 2")
    assert "(certified)" in default.render()
    with pytest.raises(PlanError, match="'certified' or 'calibrated'"):
        eval_con.sql("SELECT LDP_MEDIAN(age, interval => 'exact') FROM t EPSILON 1")


def test_a_bound_answer_needs_to_beat_the_searches_on_average():
    """Issue 11, item 3: LDP_QUANTILE(x, 0.99) at n <= 10^5 came back as the domain maximum (rank error 0.01)
    whenever 0.01 was below a search's 95% error. The planner now compares predicted mean errors (σ × the
    measured mean error per σ; a bound answer's is exactly 0.01), so at n = 20,000 a search answers; with
    q = 0.9999 the bound still wins."""
    con = connect(20_000)
    for tau, bound in ((0.99, False), (0.9999, True)):
        agg = con.sql(f"EXPLAIN SELECT LDP_QUANTILE(age, {tau}) FROM t EPSILON 1").plan.aggregates[0]
        assert (agg.chosen.mechanism == "bound") is bound, (tau, agg.chosen.mechanism)
        if not bound:   # its ±σ is smaller than the search's: only the mean-error ranking rejects it
            rejected = next(c for c in agg.candidates if c.mechanism == "bound")
            assert rejected.predicted_se < agg.chosen.predicted_se
            assert rejected.rejected.startswith("larger predicted mean error (0.01 vs")

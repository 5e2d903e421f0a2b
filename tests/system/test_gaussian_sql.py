"""LDP_MEAN on a column declared Gaussian (Joseph, Kulkarni, Mao, Wu 2019) through the language: the declaration
(checked, bound to the data like a domain), the planner's choice by predicted error with EXPLAIN showing both, the
rounds and k_min rules, the beta and constants options, both simulation paths, and interval coverage by EVALUATE."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from ldpql.errors import CatalogError, PlanError

MU = 123.4


@pytest.fixture
def gauss_file(tmp_path):
    rng = np.random.default_rng(21)
    path = tmp_path / "g.parquet"
    pq.write_table(pa.table({"x": rng.normal(MU, 1.0, 60_000), "y": rng.normal(-5.0, 3.0, 60_000),
                             "z": rng.normal(0.4, 1.0, 60_000)}), path)
    return str(path)


def declare(con, path, x="DISTRIBUTION GAUSSIAN (SIGMA 1)", extra="", rounds=""):
    # NOT NULL: the data has no NULLs, and the Gaussian protocols run only on columns declared without them
    con.sql(f"CREATE TABLE g FROM '{path}' (x PRIVATE BETWEEN -1000 AND 1000 {x} NOT NULL, "
            f"y PRIVATE BETWEEN -1000 AND 1000 DISTRIBUTION GAUSSIAN (SIGMA BETWEEN 0.5 AND 8) NOT NULL, "
            f"z PRIVATE BETWEEN 0 AND 1 DISTRIBUTION GAUSSIAN (SIGMA 1) NOT NULL{extra}) BUDGET EPSILON 1000{rounds}")


def explain(con, sql):
    return str(con.sql("EXPLAIN " + sql))


# ---- the declaration ---------------------------------------------------------------------------------------

def test_declaration_is_described_and_bound_like_a_domain(con, gauss_file):
    declare(con, gauss_file)
    assert "declared Gaussian, σ = 1 (assumed, never checked)" in str(con.sql("DESCRIBE g"))
    with pytest.raises(CatalogError, match="cannot change it"):   # the same data declared with another σ
        con.sql(f"CREATE TABLE g2 FROM '{gauss_file}' (x PRIVATE BETWEEN -1000 AND 1000 DISTRIBUTION GAUSSIAN "
                "(SIGMA 2), y PRIVATE BETWEEN -1000 AND 1000 DISTRIBUTION GAUSSIAN (SIGMA BETWEEN 0.5 AND 8), "
                "z PRIVATE BETWEEN 0 AND 1 DISTRIBUTION GAUSSIAN (SIGMA 1)) BUDGET EPSILON 1000")
    con.sql("ALTER TABLE g SET COLUMN x PRIVATE BETWEEN -1000 AND 1000 DISTRIBUTION GAUSSIAN (SIGMA 2)")
    assert "σ = 2" in str(con.sql("DESCRIBE g"))


@pytest.mark.parametrize("decl, message", [
    ("DISTRIBUTION POISSON (SIGMA 1)", "unknown distribution `POISSON`"),
    ("DISTRIBUTION GAUSSIAN (SIGMA 0)", "SIGMA must be positive"),
    ("DISTRIBUTION GAUSSIAN (SIGMA BETWEEN 4 AND 2)", "the smaller bound first"),
    ("DISTRIBUTION GAUSSIAN (SIGMA 1e-20)", "too small for the range")])
def test_bad_declarations_are_refused_with_a_caret(con, gauss_file, decl, message):
    with pytest.raises(CatalogError, match=message) as err:
        declare(con, gauss_file, decl)
    assert "^" in str(err.value)
    assert con.tables() == []


# ---- the planner --------------------------------------------------------------------------------------------

def test_gaussian_is_chosen_where_its_predicted_error_is_lower_and_explain_shows_both(con, gauss_file):
    declare(con, gauss_file)
    text = explain(con, "SELECT LDP_MEAN(x) FROM g EPSILON 1")
    assert "mechanism * gaussian:" in text and "KVGAUSSTIMATE (two rounds, adaptive)" in text
    assert "rejected    duchi" in text and "rejected    hybrid" in text and "rejected    gaussian_1round" in text
    assert "Locally Private Gaussian Estimation" in text and "theory regime" in text and "practical constants" in text
    # on [0, 1] with σ = 1 every candidate averages the values clamped to [-4, 5] (audit6 F5): at ε = 1 the
    # Gaussian protocol's predicted error is below Duchi et al.'s, PM's and HM's over that range; at ε = 8 PM's and
    # HM's bounded noise beat it (which of the two depends on the planner's rule among them), and the planner says so
    text = explain(con, "SELECT LDP_MEAN(z) FROM g EPSILON 1")
    assert "mechanism * gaussian:" in text and "clamped to [-4, 5]" in text
    text = explain(con, "SELECT LDP_MEAN(z) FROM g EPSILON 8")
    assert ("mechanism * hybrid" in text or "mechanism * piecewise" in text) and "rejected    gaussian: " in text
    assert "larger predicted error" in text.split("rejected    gaussian: ")[1].splitlines()[0]


def test_plan_choice_is_the_smallest_prediction():
    from ldpql.catalog import Column, NumericDomain, Table
    from ldpql.grammar import parse_one
    from ldpql.planner import PublicFacts, plan
    for low, high, sigma in ((-1000, 1000, 1.0), (0, 1, 1.0), (0, 3, 0.05), (-5, 5, 0.5)):
        table = Table("t", "file", "t", "t", "t", {"x": Column("x", "DOUBLE", False,
                                                              NumericDomain(low, high, gaussian=(sigma, sigma)))})
        for n in (10_000, 10**6):
            p = plan(parse_one("SELECT LDP_MEAN(x) FROM t EPSILON 1"), table, PublicFacts(n))
            agg = p.aggregates[0]
            allowed = [c for c in agg.candidates if not c.rejected or c.rejected.startswith("larger")]
            assert agg.chosen.predicted_se == min(c.predicted_se for c in allowed)


def test_rounds_option_and_table_rounds_pick_one_round_with_its_price(con, gauss_file):
    declare(con, gauss_file)
    text = explain(con, "SELECT LDP_MEAN(x) FROM g EPSILON 1 OPTIONS (rounds = 1)")
    assert "mechanism * gaussian_1round" in text and "reconstructed" in text
    assert "needs 2 rounds; at most 1 allowed" in text and "one round predicts ×" in text
    con.sql("DROP TABLE g")
    declare(con, gauss_file, rounds=" ROUNDS 1")
    assert "mechanism * gaussian_1round" in explain(con, "SELECT LDP_MEAN(x) FROM g EPSILON 1")


def test_k_min_check_falls_back_with_the_reason_or_refuses_when_forced(con, gauss_file):
    declare(con, gauss_file)
    text = explain(con, "SELECT LDP_MEAN(x) FROM g EPSILON 0.1")
    assert "mechanism * gaussian" not in text and "too few users per level for the coarse stage" in text
    before = str(con.sql("SHOW BUDGET g"))
    with pytest.raises(PlanError, match="no mechanism can answer") as err:
        con.sql("SELECT LDP_MEAN(x) FROM g EPSILON 0.1 OPTIONS (mechanism = 'gaussian')")
    assert "k_min" in str(err.value)
    assert str(con.sql("SHOW BUDGET g")) == before


def test_beta_and_constants_options(con, gauss_file):
    declare(con, gauss_file)
    loose = explain(con, "SELECT LDP_MEAN(x) FROM g EPSILON 1 OPTIONS (beta = 0.04)")
    tight = explain(con, "SELECT LDP_MEAN(x) FROM g EPSILON 1 OPTIONS (beta = 1e-6)")
    k = [int(t.split("k_min = ")[1].split(";")[0].replace(",", "")) for t in (loose, tight)]
    assert k[0] < k[1] and "β = 0.04," in loose
    assert "paper constants" in explain(con, "SELECT LDP_MEAN(x) FROM g EPSILON 1 OPTIONS (constants = 'paper')")
    for bad in ("beta = 0", "beta = 1.5", "beta = 0.06", "constants = 'loose'"):
        with pytest.raises(PlanError):
            con.sql(f"SELECT LDP_MEAN(x) FROM g EPSILON 1 OPTIONS ({bad})")


@pytest.mark.parametrize("simulation", ["auto", "per_user"])
def test_both_paths_estimate_the_mean_and_the_note_states_the_assumption(con, gauss_file, simulation):
    declare(con, gauss_file)
    r = con.sql(f"SELECT LDP_MEAN(x), LDP_MEAN(y) FROM g EPSILON 2 OPTIONS (simulation = '{simulation}', "
                "split = 'epsilon')")
    text = str(r)
    assert "assumes the declared Gaussian distribution" in text
    x, y = r.fetchone()
    assert abs(x - MU) < 0.15 and abs(y + 5.0) < 1.5


def test_evaluate_coverage_of_the_interval(eval_con, gauss_file):
    """EVALUATE REPEAT 60 at n = 60,000, ε = 2 (k = 2,500 ≥ k_min): the 90% interval, which is for the Gaussian's
    µ (it includes the users' own spread), covers the column's mean at least 90% of the time (measured 98%; a se
    that ignored the erf inversion's slope 1/φ(T) would be 2.5 times too small and cover about half the time)."""
    declare(eval_con, gauss_file)
    r = eval_con.sql("EVALUATE SELECT LDP_MEAN(x) FROM g EPSILON 2 OPTIONS (confidence = 0.9) REPEAT 60")
    row = dict(zip(r.columns, r.fetchone()))
    assert row["coverage"] >= 0.9 and abs(row["bias"]) < 0.01


def test_group_by_and_a_users_split_run_one_protocol_per_group_and_share(con, tmp_path):
    rng = np.random.default_rng(4)
    path = tmp_path / "grouped.parquet"
    pq.write_table(pa.table({"x": np.concatenate([rng.normal(50, 2, 60_000), rng.normal(-20, 2, 60_000)]),
                             "g": np.repeat([0, 1], 60_000)}), path)
    con.sql(f"CREATE TABLE h FROM '{path}' (x PRIVATE BETWEEN -1000 AND 1000 DISTRIBUTION GAUSSIAN (SIGMA 2) NOT NULL, "
            "g PUBLIC) BUDGET EPSILON 100")
    rows = dict(con.sql("SELECT g, LDP_MEAN(x) FROM h GROUP BY g EPSILON 1").fetchall())
    assert abs(rows[0] - 50) < 0.3 and abs(rows[1] + 20) < 0.3
    m, s = con.sql("SELECT LDP_MEAN(x), LDP_SUM(x) FROM h WHERE g = 0 EPSILON 2 OPTIONS (split = 'users')").fetchone()
    assert abs(m - 50) < 0.3 and abs(s / 60_000 - 50) < 25


def test_python_api_declares_a_gaussian_column(con):
    rng = np.random.default_rng(9)
    con.register("f", pa.table({"x": rng.normal(7.0, 0.5, 50_000)}),
                 private={"x": {"between": (-100, 100), "gaussian_sigma": (0.25, 2), "not_null": True}}, budget=10)
    assert "σ between 0.25 and 2" in str(con.sql("DESCRIBE f"))
    text = str(con.sql("EXPLAIN SELECT LDP_MEAN(x) FROM f EPSILON 1"))
    assert "mechanism * gaussian" in text and "UVGAUSSTIMATE" in text
    with pytest.raises(CatalogError, match="SIGMA must be positive"):
        con.register("f2", pa.table({"x": [1.0]}), private={"x": {"between": (0, 1), "gaussian_sigma": -1}})

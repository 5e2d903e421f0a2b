"""Key-value statements end to end: a table whose privacy unit has several rows (PRIVACY UNIT u SPARSITY s), GROUP BY
its private key, every answer from one Collision report per user and one ledger charge; refusals that change nothing;
noise off equal to DuckDB's SQL on the assembled rows; the planner reads no private value; the backends agree."""

from __future__ import annotations

import duckdb
import numpy as np
import pandas as pd
import pytest

import ldpql
from ldpql import expr as E
from ldpql.backends.base import Population, unit_keys
from ldpql.backends.memory import MemoryBackend
from ldpql.mechanisms import kv as kvmech
from ldpql.planner.keyvalue import key_expression, value_expression

MOVIES = ("alien", "brazil", "casablanca", "dune", "eraserhead")
QUERY = ("SELECT movie, LDP_COUNT(*), LDP_AVG(rating), LDP_SUM(rating) FROM ratings GROUP BY movie EPSILON 1")


def ratings_frame(n: int = 3000, seed: int = 4, max_keys: int = 3) -> pd.DataFrame:
    """n users, each rating 1..max_keys distinct movies (some twice, some NULL ratings, some undeclared movies)."""
    rng = np.random.default_rng(seed)
    rows = []
    for u in range(n):
        for m in rng.choice(len(MOVIES) + 1, size=rng.integers(1, max_keys + 1), replace=False):
            title = MOVIES[m] if m < len(MOVIES) else "fargo"
            rating = float(rng.integers(1, 6)) if rng.random() > 0.1 else None
            rows.append((f"u{u}", title, rating))
            if rng.random() < 0.2:
                rows.append((f"u{u}", title, float(rng.integers(1, 6))))
    return pd.DataFrame(rows, columns=["uid", "movie", "rating"])


def register(con, df: pd.DataFrame, sparsity: int | None = 3, budget: float = 4.0) -> None:
    con.register("ratings", df, private={"movie": list(MOVIES), "rating": (1, 5)}, public=["uid"],
                 privacy_unit="uid", sparsity=sparsity, budget=budget)


def queries(con) -> list[float]:
    """The ε of every query charge in the ledger (declarations and evaluation rows aside)."""
    return [c[6] for c in con.sql("SHOW LEDGER").fetchall() if c[2] == "query"]


@pytest.fixture
def kv(con):
    register(con, ratings_frame())
    return con


def test_every_declared_key_is_answered_from_one_report_and_one_charge(kv):
    res = kv.sql(QUERY)
    assert res.columns == ["movie", "ldp_count", "ldp_avg_rating", "ldp_sum_rating"]
    assert [r[0] for r in res.fetchall()] == [*MOVIES, "OTHER"]
    assert res.epsilon_spent == 1 and kv.remaining_budget("ratings") == pytest.approx(3.0)
    assert queries(kv) == [1.0]
    for row, ivs in zip(res.fetchall(), res.intervals()):
        assert 0 <= row[1] <= 3000 and (row[2] is None or 1 <= row[2] <= 5)
        assert ivs[0] is None and all(iv[0] <= v <= iv[1] for v, iv in zip(row[1:], ivs[1:]) if v is not None)
    assert any("one Collision report per user" in n for n in res.notes)
    assert any("s = 3" in n and "lower by the factor" in n for n in res.notes)


def test_noise_off_equals_duckdbs_sql_on_the_assembled_rows(kv):
    """Every user has at most s = 3 keys here, so the assembly is deterministic: a user's rows of a movie averaged."""
    df = ratings_frame()  # noqa: F841  (read by DuckDB's replacement scan below)
    got = kv.sql(QUERY.replace("EPSILON 1", "EPSILON INF")).fetchall()
    want = duckdb.sql("SELECT CASE WHEN movie IN ('alien', 'brazil', 'casablanca', 'dune', 'eraserhead') THEN movie "
                      "ELSE 'OTHER' END AS m, count(*), avg(r), sum(r) FROM (SELECT uid, movie, avg(rating) AS r "
                      "FROM df GROUP BY ALL) GROUP BY m ORDER BY m").fetchall()
    assert [(m, c, pytest.approx(a), pytest.approx(s)) for m, c, a, s in want] == \
        sorted((r[0], r[1], r[2], r[3]) for r in got if r[1])
    assert kv.remaining_budget("ratings") == pytest.approx(4.0)


def test_a_user_with_many_rows_sends_exactly_one_report(con, monkeypatch):
    df = pd.concat([ratings_frame(500), pd.DataFrame({"uid": ["heavy"] * 400, "movie": list(MOVIES) * 80,
                                                      "rating": np.linspace(1, 5, 400)})])
    register(con, df, sparsity=2)
    sent = []
    real = kvmech.KVCollision.elements

    def spy(self, keys, values, rng):
        out = real(self, keys, values, rng)
        sent.append(out)
        return out
    monkeypatch.setattr(kvmech.KVCollision, "elements", spy)
    con.sql(QUERY)
    reports = np.concatenate(sent)
    assert len(reports) == 501                                  # one report per unit, the heavy one included
    assert reports.shape[1] == 2 and np.all((reports >= 0).sum(axis=1) <= 2)


def test_explain_reads_no_private_value(con):
    a, b = ratings_frame(seed=1), ratings_frame(seed=1)
    b["movie"] = b["movie"].sample(frac=1, random_state=0).to_numpy()   # other keys and values, same units
    b["rating"] = 6 - b["rating"]
    other = ldpql.connect(evaluation=True, seed=1234)
    register(con, a)
    register(other, b)
    text = "EXPLAIN " + QUERY.replace("GROUP BY movie", "GROUP BY movie SPARSITY 2")
    assert str(con.explain(text)) == str(other.explain(text))
    assert "s = 2 (the statement's SPARSITY)" in con.explain(text) and "lower by the factor" in con.explain(text)


@pytest.mark.parametrize("statement, error, words", [
    ("SELECT LDP_MEAN(rating) FROM ratings EPSILON 1", ldpql.PlanError, "key-value statements only"),
    ("SELECT LDP_HISTOGRAM(movie) FROM ratings EPSILON 1", ldpql.PlanError, "once per row"),
    ("SELECT LDP_COUNT(*) FROM ratings EPSILON 1", ldpql.PlanError, "key-value statements only"),
    ("SELECT uid, LDP_COUNT(*) FROM ratings GROUP BY uid EPSILON 1", ldpql.PlanError, "key-value statements only"),
    ("SELECT movie, LDP_MEDIAN(rating) FROM ratings GROUP BY movie EPSILON 1", ldpql.PlanError, "not a key-value"),
    ("SELECT rating, LDP_COUNT(*) FROM ratings GROUP BY rating EPSILON 1", ldpql.PrivacyError, "continuous"),
    ("SELECT movie, LDP_COUNT(*) FROM ratings WHERE rating > 3 GROUP BY movie EPSILON 1", ldpql.PrivacyError,
     "public columns"),
    ("SELECT movie, LDP_COUNT(*) FROM ratings GROUP BY movie EPSILON 1 OPTIONS (model = 'shuffle')",
     ldpql.PlanError, "needs a DELTA budget"),
    ("SELECT movie, LDP_COUNT(*) FROM ratings GROUP BY movie EPSILON 9", ldpql.BudgetExceededError, "remain"),
    ("SELECT movie, LDP_COUNT(*) FROM ratings GROUP BY movie SPARSITY 0 EPSILON 1", ldpql.PlanError, "at least 1"),
    ("SELECT movie, LDP_COUNT(*) FROM ratings GROUP BY movie EPSILON 1 OPTIONS (postprocess = 'simplex')",
     ldpql.PlanError, "capped_simplex"),
])
def test_refusals_are_clear_and_change_nothing(kv, statement, error, words):
    with pytest.raises(error, match=words) as e:
        kv.sql(statement)
    assert e.value.hint
    assert queries(kv) == [] and kv.remaining_budget("ratings") == pytest.approx(4.0)


def test_group_by_a_private_key_without_sparsity_says_how(con):
    one = ratings_frame().drop_duplicates("uid")
    con.register("ratings", one, private={"movie": list(MOVIES), "rating": (1, 5)}, public=["uid"],
                 privacy_unit="uid", budget=4)
    with pytest.raises(ldpql.PrivacyError, match="public columns") as e:
        con.sql("SELECT movie, LDP_COUNT(*) FROM ratings GROUP BY movie EPSILON 1")
    assert "SPARSITY" in e.value.hint
    with pytest.raises(ldpql.CatalogError, match="more than one row") as e:
        con.register("many", ratings_frame(), private={"movie": list(MOVIES)}, public=["uid"], privacy_unit="uid")
    assert "SPARSITY" in e.value.hint and "pre-aggregate" in e.value.hint
    assert queries(con) == []


def test_a_declared_file_keeps_its_sparsity_in_the_ledger(tmp_path):
    path = tmp_path / "ratings.csv"
    ratings_frame(300).to_csv(path, index=False)
    ledger = str(tmp_path / "budget.ldpql")
    with ldpql.connect(ledger=ledger) as owner:
        owner.sql(f"CREATE TABLE ratings FROM '{path}' (movie PRIVATE IN {MOVIES}, rating PRIVATE "
                  "BETWEEN 1 AND 5, uid PUBLIC) PRIVACY UNIT uid SPARSITY 4 BUDGET EPSILON 2")
        assert "SPARSITY" in owner.sql("DESCRIBE ratings").notes[0]
    with ldpql.connect(ledger=ledger, role="analyst") as analyst:
        res = analyst.sql("SELECT movie, LDP_FREQUENCY(*) FROM ratings GROUP BY movie EPSILON 1")
        assert len(res.fetchall()) == 6 and "s = 4 (the table's SPARSITY)" in str(res.plan)
        assert analyst.remaining_budget("ratings") == pytest.approx(1.0)


def test_the_public_where_applies_to_rows_first(kv):
    exact = kv.sql("SELECT movie, LDP_COUNT(*) FROM ratings WHERE uid < 'u2' GROUP BY movie EPSILON INF").fetchall()
    df = ratings_frame()
    want = df[df.uid < "u2"].drop_duplicates(["uid", "movie"]).movie.value_counts()
    assert {m: c for m, c in exact if m != "OTHER"} == {m: want.get(m, 0) for m in MOVIES}


def test_duckdb_and_memory_backends_read_the_same_rows_per_user(kv):
    df = ratings_frame()
    table = kv.catalog.get("ratings")
    key = key_expression("movie", table.column("movie").domain)
    value = value_expression("rating", table.column("rating").domain)
    where = E.op("<", E.Column("uid"), "u5")
    got = {}
    for name, backend in (("duckdb", kv.backend), ("memory", MemoryBackend({c: df[c].to_numpy(dtype=object)
                                                                            for c in df}))):
        pop = Population(table, where)
        rows = [np.c_[u.astype(float), k, v] for u, k, v in backend.unit_rows(pop, key, value)]
        got[name] = (backend.units(pop), sorted(map(tuple, np.concatenate(rows).tolist())))
    assert got["duckdb"][0] == got["memory"][0] == df[df.uid < "u5"].uid.nunique()
    assert len(got["duckdb"][1]) == (df.uid < "u5").sum()
    assert np.allclose(np.array(got["duckdb"][1]), np.array(got["memory"][1]), equal_nan=True)


def test_unit_keys_are_duckdbs():
    units = ["u1", "alice", 42]
    want = [duckdb.sql(f"SELECT md5_number_lower(CAST({u!r} AS VARCHAR))").fetchall()[0][0] for u in units]
    assert unit_keys(units).tolist() == [int(w) for w in want]


def test_evaluate_reports_truth_bias_and_coverage_per_key(kv):
    res = kv.sql("EVALUATE " + QUERY + " REPEAT 3")
    assert res.columns == ["output", "movie", "truth", "mean_estimate", "bias", "rmse", "coverage"]
    exact = {r[0]: r[1] for r in kv.sql(QUERY.replace("EPSILON 1", "EPSILON INF")).fetchall()}
    counts = [r for r in res.fetchall() if r[0] == "ldp_count"]
    assert [r[1] for r in counts] == [*MOVIES, "OTHER"] and all(r[2] == exact[r[1]] for r in counts)
    assert queries(kv) == [] and kv.remaining_budget("ratings") == pytest.approx(4.0)


def test_the_mean_interval_follows_the_statements_confidence(con):
    """Fieller's interval of each key's mean is built at OPTIONS (confidence = ...), not at a fixed 95%: the same
    release (same seed) gives a narrower mean interval at 80% for every key, labelled 0.8."""
    widths = {}
    for conf in (0.8, 0.95):
        c = ldpql.connect(seed=77, evaluation=True)
        register(c, ratings_frame())
        res = c.sql(QUERY + f" OPTIONS (confidence = {conf})")
        widths[conf] = [(iv[2][1] - iv[2][0], iv[2][2]) for iv in res.intervals() if iv[2] is not None]
    assert len(widths[0.8]) == len(widths[0.95]) >= 5
    assert all(a[1] == 0.8 and b[1] == 0.95 for a, b in zip(widths[0.8], widths[0.95]))
    assert all(a[0] < b[0] for a, b in zip(widths[0.8], widths[0.95]) if b[0] < 4), (widths,)


def test_the_capped_simplex_projection_never_moves_counts_away_from_the_truth(con):
    """OPTIONS (postprocess = 'capped_simplex'): the per-key frequencies projected onto {0 <= f <= 1, Σ f <= s}, a
    convex set holding the true frequencies, so the projection is never farther from them (a theorem, so the test
    cannot flake); with one key per user (s = 1) at ε = 0.1 the raw frequencies overshoot and it moves them. Same
    release (same seed) both ways; each count stays inside its interval, and EXPLAIN and the result say so."""
    df = ratings_frame(n=600, max_keys=1)
    truth = df.drop_duplicates(["uid", "movie"]).movie.value_counts()
    want = np.array([truth.get(m, 0) for m in MOVIES] + [truth.get("fargo", 0)], dtype=float)
    counts = {}
    for how in ("none", "capped_simplex"):
        c = ldpql.connect(seed=5, evaluation=True)
        register(c, df, budget=4)
        res = c.sql("SELECT movie, LDP_COUNT(*) FROM ratings GROUP BY movie SPARSITY 1 EPSILON 0.1 "
                    f"OPTIONS (postprocess = '{how}')")
        counts[how] = np.array([r[1] for r in res.fetchall()], dtype=float)
        assert all(iv[1][0] <= r[1] <= iv[1][1] for r, iv in zip(res.fetchall(), res.intervals()))
    raw, proj = counts["none"], counts["capped_simplex"]
    assert not np.allclose(raw, proj)
    assert np.linalg.norm(proj - want) <= np.linalg.norm(np.clip(raw, 0, 600) - want) + 1e-9
    assert (proj >= 0).all() and (proj <= 600).all() and proj.sum() <= 600 + 1e-6
    assert "capped_simplex" in str(c.explain(QUERY + " OPTIONS (postprocess = 'capped_simplex')"))
    assert any("capped_simplex" in note for note in res.notes)

"""Conformance: the same statements on every backend available (DuckDB always; Apache Spark where pyspark and Java
are installed). With ``EPSILON INF`` answers equal plain SQL on each backend; with a seed the DuckDB and Spark
answers are identical (users' keys, slices and value counts agree bit for bit, and seeded runs randomize users
rebuilt from value counts); without a seed their distributions agree (two-sample KS test).
"""

from __future__ import annotations

import math

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from scipy import stats

import ldpql
from ldpql.backends import spark as S

SPARK_WHY = S.unavailable()
BACKENDS = ["duckdb", pytest.param("spark", marks=pytest.mark.skipif(
    SPARK_WHY is not None, reason=f"Spark backend not tested: {SPARK_WHY}"))]
N_FILE = 1200


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> str:
    """Two parquet files: a privacy unit, a public group with NULLs, private values with NULL, NaN and values
    outside their domains."""
    d = tmp_path_factory.mktemp("conformance")
    rng = np.random.default_rng(21)
    for f in range(2):
        n = N_FILE
        x = rng.normal(55, 25, n)
        x[rng.random(n) < 0.03] = np.nan
        c = rng.integers(-1, 7, n).astype(float)
        c[rng.random(n) < 0.03] = np.nan
        pq.write_table(pa.table({
            "uid": [f"u{f}-{k}" for k in range(n)],
            "g": pa.array([None if k % 23 == 0 else "ab"[k % 2] for k in range(n)]),
            "x": pa.array(x, mask=rng.random(n) < 0.02),
            "c": c,
            "age": rng.integers(10, 90, n),
            "yr": rng.integers(2019, 2023, n),
        }), str(d / f"part-{f}.parquet"), row_group_size=256)
    return str(d / "part-*.parquet")


def _connect(request, backend: str, seed: int | None = None):
    spark = request.getfixturevalue("spark_session") if backend == "spark" else None
    return ldpql.connect(evaluation=True, seed=seed, backend=backend, spark=spark)


def _declare(con, path: str, unit: bool = True) -> None:
    con.sql(f"CREATE TABLE t FROM '{path}' (x PRIVATE BETWEEN 0 AND 100, c PRIVATE INTEGER BETWEEN 0 AND 4, "
            f"age PRIVATE INTEGER BETWEEN 0 AND 120, g PUBLIC, yr PUBLIC{', uid PUBLIC' if unit else ''}) "
            f"{'PRIVACY UNIT uid ' if unit else ''}BUDGET EPSILON 100000")


# ---- EPSILON INF: plain SQL ------------------------------------------------------------------------------------

def _plain(path: str, sql: str) -> list[tuple]:
    """A plain DuckDB query over the data's clamped values (x is nullable: NULL/NaN stay NULL, which SQL's AVG
    skips; c's NULL/NaN take the domain's midpoint). NaN is tested with isfinite/isinf: DuckDB folds isnan() to
    false from parquet statistics, which leave NaN out."""
    nan = "NOT (isfinite({0}) OR isinf({0}))".format
    clamped = (f"SELECT g, CASE WHEN x IS NULL OR {nan('x')} THEN NULL ELSE least(greatest(x, 0), 100) END AS x, "
               f"least(greatest(round(CASE WHEN c IS NULL OR {nan('c')} THEN 2 ELSE c END), 0), 4) AS c, age, yr "
               f"FROM read_parquet('{path}')")
    return duckdb.sql(sql.replace("FROM t", f"FROM ({clamped})")).fetchall()


def _close(got: list[tuple], want: list[tuple]) -> bool:
    """Same rows: group keys equal, numbers equal up to float rounding."""
    flat = lambda rows: [v for r in rows for v in r]
    if len(got) != len(want) or any(len(a) != len(b) for a, b in zip(got, want)):
        return False
    return all(a == pytest.approx(float(b), rel=1e-9, abs=1e-12) if isinstance(b, float | int) and
               not isinstance(b, bool) else a == b for a, b in zip(flat(got), flat(want)))


@pytest.mark.parametrize("backend", BACKENDS)
def test_noise_off_equals_plain_sql(request, data, backend):
    con = _connect(request, backend)
    _declare(con, data)
    hist = con.sql("SELECT LDP_HISTOGRAM(c) FROM t EPSILON INF").fetchall()
    n = 2 * N_FILE
    assert _close(hist, [(int(v), k / n) for v, k in _plain(data, "SELECT c, count(*) FROM t GROUP BY c ORDER BY c")])
    mean = con.sql("SELECT g, LDP_MEAN(x) FROM t GROUP BY g EPSILON INF").fetchall()
    assert _close(mean, _plain(data, "SELECT g, avg(x) FROM t GROUP BY g ORDER BY g NULLS LAST"))
    for name in ("laplace", "square_wave"):   # the mean baselines, forced: the same encodings, noise off
        mean = con.sql(f"SELECT g, LDP_MEAN(age, nulls => 'midpoint', mechanism => '{name}') FROM t GROUP BY g "
                       "EPSILON INF").fetchall()   # age has no NULL in the data: midpoint or skip alike
        assert _close(mean, _plain(data, "SELECT g, avg(age) FROM t GROUP BY g ORDER BY g NULLS LAST"))
    count = con.sql("SELECT g, LDP_COUNT(x > 60) FROM t WHERE yr >= 2020 GROUP BY g EPSILON INF").fetchall()
    plain = duckdb.sql(f"SELECT g, count(*) FILTER (x > 60), count(*) FROM read_parquet('{data}') WHERE yr >= 2020 "
                       "GROUP BY g ORDER BY g NULLS LAST").fetchall()   # the condition on the row as it is
    assert _close(count, [(k, float(a)) for k, a, _ in plain])   # a count of users
    quantiles = con.sql("SELECT g, LDP_MEDIAN(age), LDP_QUANTILE(age, 0.9), LDP_MIN(age), LDP_MAX(age) FROM t "
                        "GROUP BY g EPSILON INF").fetchall()
    assert _close(quantiles, _plain(
        data, "SELECT g, quantile_disc(age, 0.5), quantile_disc(age, 0.9), min(age), max(age) FROM t GROUP BY g "
              "ORDER BY g NULLS LAST"))
    con.close()


# ---- a seed: identical answers ---------------------------------------------------------------------------------

SEEDED = [   # every aggregate, grouped and not, users split among aggregates by slices or sharing ε
    ("SELECT LDP_HISTOGRAM(c), LDP_COUNT(x > 60), LDP_MEAN(x), LDP_MEDIAN(x), LDP_MIN(age), LDP_MAX(age) FROM t "
     "EPSILON 6 OPTIONS (split = 'users')"),
    ("SELECT g, LDP_HISTOGRAM(c), LDP_MEAN(x), LDP_QUANTILE(x, 0.9), LDP_MIN(age) FROM t WHERE yr >= 2020 GROUP BY g "
     "EPSILON 4"),
    "SELECT LDP_MEDIAN(x) FROM t EPSILON 1",
    "SELECT g, LDP_COUNT(c = 3), LDP_MEAN(x), LDP_MAX(age) FROM t GROUP BY g EPSILON 4 OPTIONS (split = 'epsilon')",
    ("SELECT g, LDP_MEAN(x, nulls => 'midpoint', mechanism => 'laplace'), LDP_SUM(age, nulls => 'midpoint', "
     "mechanism => 'square_wave') FROM t GROUP BY g EPSILON 2"),
]
SEEDED_IDS = ["all aggregates, users split", "grouped, WHERE", "median", "grouped, epsilon split", "mean baselines"]


BY_POSITION = 2   # the first statements run on users keyed by row position too (their slices differ from md5's)


def _seeded_answers(request, backend: str, path: str, unit: bool) -> list:
    con = _connect(request, backend, seed=7)
    _declare(con, path, unit)
    out = []
    for sql in SEEDED if unit else SEEDED[:BY_POSITION]:
        res = con.sql(sql)
        out.append((res.fetchall(), res.epsilon_spent))
    con.close()
    return out


@pytest.fixture(scope="module")
def seeded(request, data) -> dict:
    """Every statement of SEEDED, seeded, on every backend available; with and without a privacy unit (users
    keyed by the md5 of their unit, or by their row position in the files)."""
    out = {}
    for backend in ("duckdb", "spark"):
        if backend == "spark" and SPARK_WHY is not None:
            continue
        for unit in (True, False):
            out[(backend, unit)] = _seeded_answers(request, backend, data, unit)
    return out


@pytest.mark.skipif(SPARK_WHY is not None, reason=f"Spark backend not tested: {SPARK_WHY}")
@pytest.mark.parametrize("k, unit", [(k, True) for k in range(len(SEEDED))] +
                         [(k, False) for k in range(BY_POSITION)],
                         ids=[f"{i}, privacy unit" for i in SEEDED_IDS] +
                             [f"{i}, row position" for i in SEEDED_IDS[:BY_POSITION]])
def test_seeded_answers_are_identical_on_duckdb_and_spark(seeded, k, unit):
    duck, spark = seeded[("duckdb", unit)][k], seeded[("spark", unit)][k]
    assert all(math.isfinite(v) for row in duck[0] for v in row if isinstance(v, float))
    assert spark == duck, SEEDED[k]


def test_seeded_answers_depend_on_the_seed(request, data):
    """The identity above is not a constant: another seed gives other answers (on DuckDB)."""
    con = _connect(request, "duckdb", seed=8)
    _declare(con, data)
    other = con.sql(SEEDED[0]).fetchall()
    con.close()
    con = _connect(request, "duckdb", seed=7)
    _declare(con, data)
    assert con.sql(SEEDED[0]).fetchall() != other


# ---- no seed: the same distribution ----------------------------------------------------------------------------

@pytest.mark.skipif(SPARK_WHY is not None, reason=f"Spark backend not tested: {SPARK_WHY}")
def test_unseeded_distributions_agree_on_duckdb_and_spark(request, data):
    """Fresh noise on both backends: the median's and the mean's answers over repeated runs agree in distribution
    (two-sample KS, p > 0.001: a broken backend, e.g. one reading other users, shifts them by far more)."""
    sql = "SELECT LDP_MEDIAN(x), LDP_MEAN(age) FROM t EPSILON 1 OPTIONS (split = 'users')"
    runs = {}
    for backend, reps in (("duckdb", 60), ("spark", 6)):   # (the 6 Spark runs bound the test's power, not these)
        con = _connect(request, backend)
        _declare(con, data)
        runs[backend] = np.array([con.sql(sql).fetchall()[0] for _ in range(reps)])
        con.close()
    for j in range(2):
        assert stats.ks_2samp(runs["duckdb"][:, j], runs["spark"][:, j]).pvalue > 1e-3
    assert np.std(runs["spark"][:, 0]) > 0   # fresh noise indeed


# ---- choosing a backend ----------------------------------------------------------------------------------------

def test_backend_arguments_are_checked():
    for kwargs, message in [({"backend": "bogus"}, "backend must be 'duckdb' or 'spark'"),
                            ({"spark": "local[2]"}, "spark= is for backend='spark'")]:
        with pytest.raises(ldpql.PlanError, match=message):
            ldpql.connect(**kwargs)


@pytest.mark.skipif(SPARK_WHY is not None, reason=f"Spark backend not tested: {SPARK_WHY}")
def test_a_spark_connection_leaves_a_running_session_running(spark_session, data):
    """connect(backend='spark') in a process that has a session reuses it, and close() does not stop it."""
    with pytest.raises(ldpql.PlanError, match="SparkSession or a master URL"):
        ldpql.connect(backend="spark", spark=3)
    con = ldpql.connect(evaluation=True, backend="spark")
    assert con.backend.spark is spark_session
    _declare(con, data)
    assert con.sql("SELECT LDP_HISTOGRAM(c) FROM t EPSILON INF").fetchall()
    con.close()
    assert spark_session.range(3).count() == 3

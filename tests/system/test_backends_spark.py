"""The Apache Spark backend against DuckDB: the same expressions give the same values on both engines (total on
every row), users have the same keys and land in the same slices, and the backend's reads answer what DuckDB's
plain SQL answers, whatever the partitioning.

One local[2] session serves the module; it is skipped, saying why, where pyspark or Java is missing.
"""

from __future__ import annotations

import hashlib
import math
import os

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import ldpql
from ldpql import expr as E
from ldpql.backends import spark as S
from ldpql.backends.base import Population, Slice, slice_steps, slice_uniform
from ldpql.backends.sql import render

WHY = S.unavailable()
pytestmark = pytest.mark.skipif(WHY is not None, reason=f"Spark backend not tested: {WHY}")


@pytest.fixture(scope="module")
def spark(spark_session):
    return spark_session


@pytest.fixture(scope="module")
def backend(spark):
    return S.SparkBackend(spark)


@pytest.fixture
def small_splits(spark):
    """Files split into many small blocks, packed several to a partition (what a cluster does with big files)."""
    keys = ("spark.sql.files.maxPartitionBytes", "spark.sql.files.openCostInBytes")
    before = {k: spark.conf.get(k) for k in keys}
    spark.conf.set(keys[0], "2048")
    spark.conf.set(keys[1], "1024")
    yield
    for k, v in before.items():
        spark.conf.set(k, v)


# ---- the dialect: every node type, on rows that try to break it ---------------------------------------------------

NASTY = {
    "rid": list(range(16)),
    "a": [1.5, None, float("nan"), float("inf"), float("-inf"), 1e300, -3.5, 2.5, 0.5, -0.5, 0.0, 7.0, 119.6, -1e-9,
          3.4999999999999996, 250.0],
    "s": ["1.5", "abc", "", " 2", "NaN", "inf", None, "o'brien", "back\\slash", "x", "-Infinity", "1e3", "Lyon",
          "Nice", "2.5", "12"],
    "i": [3, None, -7, 0, 1 << 40, -(1 << 40), 17, 2, 5, 9, 1, 0, 120, -1, 4, 100],
    "b": [True, None, False, True, False, True, None, False, True, True, False, False, True, None, True, False],
    "t": ["yes", "no", "t", "f", "1", "0", "maybe", None, "TRUE", "False", " true", "y", "n", "", "T", "off"],
}


@pytest.fixture(scope="module")
def nasty(tmp_path_factory, spark):
    path = str(tmp_path_factory.mktemp("nasty") / "nasty.parquet")
    pq.write_table(pa.table(NASTY), path)
    return path, spark.read.parquet(path)


def _same(x, y) -> bool:
    if x is None or y is None:
        return x is None and y is None
    if isinstance(x, str) or isinstance(y, str) or isinstance(x, bool) or isinstance(y, bool):
        return x == y
    x, y = float(x), float(y)
    return (math.isnan(x) and math.isnan(y)) or x == y


def _both(nasty, e: E.Expr) -> tuple[list, list]:
    path, df = nasty
    duck = [r[0] for r in duckdb.sql(f"SELECT {render(e)} FROM read_parquet('{path}') ORDER BY rid").fetchall()]
    spk = [r[0] for r in df.orderBy("rid").selectExpr(S.render_spark(e)).collect()]
    return duck, spk


a, s, i = E.Column("a"), E.Column("s"), E.Column("i")
safe_a = E.null_to(E.number("a"), 0.5)                     # NULL/NaN replaced: what every numeric encoding starts from


# The declared domains' encodings, built from ldpql.expr as ldpql.catalog's domains build them.
def clamped(col: str, low: float, high: float, integer: bool = False) -> E.Expr:
    v: E.Expr = E.null_to(E.number(col), round((low + high) / 2) if integer else (low + high) / 2)
    return E.clamp(E.call("round", v) if integer else v, low, high)


def scaled(col: str, low: float, high: float) -> E.Expr:
    return E.op("/", E.op("-", clamped(col, low, high), (high + low) / 2), (high - low) / 2)


def int_index(col: str, low: int, high: int) -> E.Expr:
    return E.index(E.op("-", clamped(col, low, high, True), low), high - low + 1)


def category(col: str, values: tuple, default=None) -> E.Expr:
    strings = isinstance(values[0], str)
    x: E.Expr = E.TryCast(E.Column(col), "VARCHAR" if strings else "DOUBLE")
    if default is not None:
        x = E.call("coalesce", x, default if strings else E.double(default))
    vals = values if strings else tuple(float(v) for v in values)
    return E.clamp(E.op("-", E.call("coalesce", E.Position(vals, x), len(values) + 1), 1), 0, len(values))


def bucket(col: str, low: float, high: float, k: int) -> E.Expr:
    return E.index(E.call("floor", E.op("/", E.op("*", E.op("-", clamped(col, low, high), low), k), high - low)), k)


EXPRESSIONS = {
    "column": a, "literal string": E.Literal("it's \\ here"), "literal null": E.Literal(None),
    "literal bool": E.Literal(True), "literal float": E.Literal(1e-7), "literal int": E.Literal(3_000_000_000),
    "double": E.double(3), "trycast double": E.number("s"), "trycast varchar": E.TryCast(i, "VARCHAR"),
    "trycast bigint": E.TryCast(s, "BIGINT"), "trycast integer": E.TryCast(s, "INTEGER"),
    "trycast boolean": E.TryCast(E.Column("t"), "BOOLEAN"), "trycast of expr": E.TryCast(E.op("+", i, 1), "DOUBLE"),
    "cast integral": E.Cast(E.call("round", E.clamp(safe_a, -1e6, 1e6)), "BIGINT"),
    "cast rounds half to even": E.Cast(E.clamp(safe_a, -1e6, 1e6), "BIGINT"),
    "cast to double": E.Cast(i, "DOUBLE"),
    "least/greatest skip nulls": E.clamp(E.number("a"), 0, 120), "round": E.call("round", a),
    "floor": E.call("floor", a), "ceil": E.call("ceil", a), "floor of bigint": E.call("floor", i),
    "isnan": E.call("isnan", a), "coalesce": E.call("coalesce", E.number("s"), a, 0.0), "abs": E.call("abs", a),
    "plus": E.op("+", a, i), "minus": E.op("-", i, 2), "times": E.op("*", a, 3), "divide": E.op("/", a, 4),
    "divide ints": E.op("/", i, 4), "divide by zero": E.op("/", i, E.op("-", i, i)),
    "divide doubles by zero": E.op("/", a, E.op("-", i, i)), 
    "mod": E.op("%", i, 5), "integer division": E.op("//", i, 4), "xor": E.op("^", i, 12345),
    "and": E.op("&", i, 255), "shift": E.op(">>", i, 3), "equal": E.op("=", s, "Lyon"), "differ": E.op("<>", a, 1.5),
    "less": E.op("<", a, 2.5), "at most": E.op("<=", i, 2), "more": E.op(">", a, -1), "at least": E.op(">=", i, 0),
    "logic": E.Logic("OR", (E.op("<", a, 0), E.Logic("AND", (E.op(">", i, 1), E.op("<", i, 10))))),
    "not": E.Not(E.op("<", a, 0)), "is null": E.IsNull(a), "is not null": E.IsNull(s, True),
    "in": E.In(s, (E.Literal("x"), E.Literal("Lyon"))), "not in": E.In(i, (E.Literal(0), E.Literal(2)), True),
    "case": E.Case(E.op(">", a, 1), E.Literal("big"), E.Literal("small")),
    "position strings": E.Position(("Lyon", "Nice", "x"), s),
    "position numbers": E.Position((1.5, 2.5, float(7)), a),
    "null_to": safe_a, "clamp": E.clamp(safe_a, 0, 120), "index": E.index(E.call("floor", E.clamp(safe_a, 0, 9)), 10),
    "threshold": E.threshold(E.index(E.call("round", E.clamp(safe_a, 0, 9)), 10), 4),
    "indicator": E.indicator(E.op(">", a, 1)),
    "mixed radix": E.mixed_radix([(E.index(E.call("round", E.clamp(safe_a, 0, 9)), 10), 10),
                                  (E.index(E.call("round", E.clamp(E.null_to(E.number("i"), 0), 0, 4)), 5), 5)]),
    "domain clamped": clamped("a", 0, 120), "domain scaled": scaled("a", 0, 120),
    "integer domain index": int_index("a", 0, 120), "integer domain of text": int_index("s", 0, 120),
    "categories": category("s", ("Lyon", "Nice", "Paris")),
    "number categories": category("s", (1.5, 2.5, 12.0), default=2.5), "bucket": bucket("a", 0, 120, 16),
    "level": E.op("//", bucket("a", 0, 120, 16), 4), "threshold of a coin": E.threshold(bucket("a", 0, 120, 16), 9),
}


@pytest.fixture(scope="module")
def evaluated(nasty) -> dict[str, tuple[list, list]]:
    """Every expression of EXPRESSIONS on every row, by DuckDB and by Spark (one query on each engine)."""
    path, df = nasty
    names = list(EXPRESSIONS)
    duck = duckdb.sql(f"SELECT {', '.join(render(EXPRESSIONS[n]) for n in names)} FROM read_parquet('{path}') "
                      "ORDER BY rid").fetchall()
    spk = df.orderBy("rid").selectExpr(*[S.render_spark(EXPRESSIONS[n]) for n in names]).collect()
    return {n: ([r[k] for r in duck], [r[k] for r in spk]) for k, n in enumerate(names)}


@pytest.mark.parametrize("name", list(EXPRESSIONS))
def test_every_node_computes_the_same_on_both_engines(evaluated, name):
    duck, spk = evaluated[name]
    assert len(duck) == len(NASTY["rid"])
    bad = [(k, d, p) for k, (d, p) in enumerate(zip(duck, spk)) if not _same(d, p)]
    assert not bad, f"{name}: DuckDB and Spark differ on (row, duckdb, spark) = {bad}"


def test_integer_division_by_zero_never_raises_on_spark(nasty):
    """DuckDB raises on an integer divided by zero (the encodings only divide by non-zero constants); Spark's
    rendering gives NULL, never an error, even under ANSI mode."""
    for e in (E.op("%", i, E.op("-", i, i)), E.op("//", i, E.op("-", i, i))):
        with pytest.raises(duckdb.Error, match="Division by zero"):
            _both(nasty, e)
        assert [r[0] for r in nasty[1].selectExpr(S.render_spark(e)).collect()] == [None] * len(NASTY["rid"])
    duck, spk = _both(nasty, E.op("%", a, 0.0))   # a DOUBLE: DuckDB's NaN is Spark's NULL
    assert all(math.isnan(d) for d, x in zip(duck, NASTY["a"]) if x is not None) and spk == [None] * len(spk)


def test_encodings_are_total_and_inside_their_domain(nasty):
    """The encodings never raise and never leave their domain on either engine, whatever the row holds."""
    for e, low, high in [(clamped("a", 0, 120), 0, 120), (int_index("s", 0, 120), 0, 120), (scaled("a", 0, 120), -1, 1),
                         (category("s", ("Lyon", "Nice", "Paris")), 0, 3), (category("a", (1.5, 2.5), 2.5), 0, 2),
                         (bucket("a", 0, 120, 16), 0, 15), (bucket("s", -5, 5, 7), 0, 6)]:
        for values in _both(nasty, e):
            assert all(v is not None and low <= float(v) <= high for v in values), (e, values)


def test_the_engines_really_differ_where_the_dialect_says_so(nasty):
    """What the Spark dialect corrects is a real difference: Spark's own CAST truncates 2.5 and 7.5 towards zero
    and DuckDB rounds half to even, and Spark's floor of +inf fails under ANSI mode."""
    _, df = nasty
    assert list(df.sparkSession.sql("SELECT CAST(2.7D AS BIGINT), CAST(-2.7D AS BIGINT)").collect()[0]) == [2, -2]
    assert duckdb.sql("SELECT CAST(2.7::DOUBLE AS BIGINT), CAST(2.5::DOUBLE AS BIGINT)").fetchall() == [(3, 2)]
    assert S.render_spark(E.Cast(E.Column("x"), "BIGINT")) == "CAST(bround(`x`) AS BIGINT)"
    if df.sparkSession.conf.get("spark.sql.ansi.enabled") == "true":
        with pytest.raises(Exception, match="ARITHMETIC_OVERFLOW"):
            df.sparkSession.sql("SELECT floor(CAST('Infinity' AS DOUBLE))").collect()


def test_dialect_spelling():
    assert S.SPARK.name("we`ird") == "`we``ird`"
    assert S.SPARK.string("o'b\\c") == "'o\\'b\\\\c'"
    assert S.SPARK.type("varchar") == "STRING" and S.SPARK.type("DECIMAL(18,3)") == "DECIMAL(18,3)"
    assert S.render_spark(E.op("//", E.Column("x"), 4)) == "(`x` div nullif(4, 0))"
    assert S.render_spark(E.TryCast(E.Column("x"), "VARCHAR")) == "try_cast(`x` AS STRING)"


# ---- users' keys and slices ----------------------------------------------------------------------------------------

def md5_key(text: str) -> int:
    """ldpql's documented key of a privacy unit: digest bytes 8-15 of md5(text), little-endian."""
    return int.from_bytes(hashlib.md5(text.encode()).digest()[8:16], "little")


UNITS_INT = [0, 1, -1, 42, 7_000_000_001, -(1 << 62), 123456789]
UNITS_STR = ["alice", "", "o'brien", "Zoë", "日本", "a\\b", "1"]


@pytest.mark.parametrize("units", [UNITS_INT, UNITS_STR], ids=["integers", "strings"])
def test_privacy_unit_keys_equal_duckdb(spark, tmp_path, units):
    path = str(tmp_path / "units.parquet")
    pq.write_table(pa.table({"u": units, "x": list(range(len(units)))}), path)
    duck = [int(r[0]) for r in duckdb.sql(f"SELECT md5_number_lower(CAST(u AS VARCHAR)) FROM '{path}' ORDER BY x")
            .fetchall()]
    digest, lo, hi = S.unit_halves_sql("u")
    rows = (spark.read.parquet(path).orderBy("x").selectExpr(f"{digest} AS __md5")
            .selectExpr(f"{lo} AS lo", f"{hi} AS hi").collect())
    spk = [(r["hi"] << 32) | r["lo"] for r in rows]
    assert spk == duck == [md5_key(str(u)) for u in units]


def test_slice_steps_equal_numpy_on_both_engines(spark):
    keys = np.array([0, 1, 2, 3, (1 << 32) - 1, 1 << 32, (1 << 63) + 5, (1 << 64) - 1, 123456789012345,
                     *np.random.default_rng(3).integers(0, 1 << 63, 40, dtype=np.int64).tolist()], dtype=np.uint64)
    frame = pa.table({"k": pa.array(np.arange(len(keys))), "__lo": pa.array((keys & np.uint64(S.MASK32)).astype(np.int64)),
                      "__hi": pa.array((keys >> np.uint64(32)).astype(np.int64))})
    for salt in (0, 1, 987654321987654321, (1 << 62) - 1):
        sql = "SELECT * FROM frame"
        df = spark.createDataFrame(frame)
        for name, step in slice_steps(salt):
            sql = f"SELECT *, {render(step)} AS {name} FROM ({sql})"
            df = df.selectExpr("*", f"{S.render_spark(step)} AS {name}")
        duck = np.array([r[0] for r in duckdb.sql(f"SELECT __u FROM ({sql}) ORDER BY k").fetchall()])
        spk = np.array([r[0] for r in df.orderBy("k").select("__u").collect()])
        ref = slice_uniform(keys, salt)
        assert np.array_equal(duck, ref) and np.array_equal(spk, ref), salt


def _write_parts(tmp_path, kind: str) -> tuple[str, int]:
    """Several files whose sorted names differ from their size order, each with many row groups/lines; column
    ``rid`` is the row's position in the sorted files, ``g`` a public group, ``x`` a private value."""
    names, sizes = ["part-10", "part-2", "part-3b", "part-3a"], [700, 1500, 40, 900]
    order = sorted(range(len(names)), key=lambda k: names[k])
    start, total = {}, 0
    for k in order:
        start[k], total = total, total + sizes[k]
    rng = np.random.default_rng(5)
    for k, (name, n) in enumerate(zip(names, sizes)):
        rid = np.arange(start[k], start[k] + n)
        t = pa.table({"rid": rid, "g": np.array(["a", "b", "c"])[rid % 3], "x": rng.integers(0, 100, n)})
        if kind == "parquet":
            pq.write_table(t, str(tmp_path / f"{name}.parquet"), row_group_size=64)
        elif kind == "json":
            t.to_pandas().to_json(tmp_path / f"{name}.json", orient="records", lines=True)
        else:
            t.to_pandas().to_csv(tmp_path / f"{name}.csv", index=False)
    return str(tmp_path / f"part-*.{kind}"), total


def _declare(path: str, unit: str | None = None):
    con = ldpql.connect(evaluation=True, seed=1)
    con.sql(f"CREATE TABLE t FROM '{path}' (x PRIVATE INTEGER BETWEEN 0 AND 99, g PUBLIC"
            + (f", {unit} PUBLIC) PRIVACY UNIT {unit}" if unit else ")"))
    return con, con.catalog.get("t")


@pytest.mark.parametrize("kind", ["parquet", "csv", "json"])
def test_row_positions_are_duckdbs_whatever_the_splits(spark, backend, tmp_path, small_splits, kind):
    path, total = _write_parts(tmp_path, kind)
    con, table = _declare(path)
    assert spark.read.format(kind).option("header", True).load(path).rdd.getNumPartitions() > 4   # really split
    df, ordered = backend._population(Population(table), keys=True)
    got = df.select("rid", "__pos", "__lo", "__hi").toArrow().to_pandas()
    assert ordered and len(got) == total
    assert (got["rid"] == got["__pos"]).all()
    duck = con.duck.execute(f"SELECT rid, row_number() OVER () - 1 AS pos FROM {table.from_sql}").fetchnumpy()
    assert np.array_equal(duck["rid"], duck["pos"])
    salt = 424242
    sliced, _ = backend._population(Population(table), Slice(0.25, 0.6, salt))
    rows = np.sort(sliced.select("rid").toArrow().to_pandas()["rid"].to_numpy())
    u = slice_uniform(np.arange(total), salt)
    assert np.array_equal(rows, np.flatnonzero((u >= 0.25) & (u < 0.6)))


def test_row_positions_follow_a_file_rewritten_in_place(spark, backend, tmp_path):
    """The block offsets are kept per set of files (names, sizes, times): a file rewritten with more rows is
    counted again, not read with the old offsets."""
    for name, n in (("a", 30), ("b", 20)):
        pq.write_table(pa.table({"x": np.arange(n) % 7, "g": ["p"] * n}), str(tmp_path / f"{name}.parquet"))
    _, table = _declare(str(tmp_path / "*.parquet"))
    first, _ = backend._population(Population(table), keys=True)
    assert sorted(first.select("__pos").toArrow().column(0).to_pylist()) == list(range(50))
    pq.write_table(pa.table({"x": np.arange(45) % 7, "g": ["p"] * 45}), str(tmp_path / "a.parquet"))
    again, _ = backend._population(Population(table), keys=True)
    assert sorted(again.select("__pos").toArrow().column(0).to_pylist()) == list(range(65))


# ---- the backend's reads -----------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def people(tmp_path_factory):
    """A glob of parquet files with NULL groups, a privacy unit, and private values out of the domain."""
    d = tmp_path_factory.mktemp("people")
    rng = np.random.default_rng(11)
    for f in range(3):
        n = 400 + 100 * f
        pq.write_table(pa.table({
            "uid": [f"user-{f}-{k}" for k in range(n)],
            "region": pa.array([None if k % 17 == 0 else ["north", "south", "east"][k % 3] for k in range(n)]),
            "year": rng.integers(2019, 2022, n),
            "age": np.where(rng.random(n) < 0.05, np.nan, rng.normal(40, 30, n)),
        }), str(d / f"people-{f}.parquet"), row_group_size=100)
    path = str(d / "people-*.parquet")
    con = ldpql.connect(evaluation=True, seed=1)
    con.sql(f"CREATE TABLE p FROM '{path}' (age PRIVATE BETWEEN 0 AND 100, region PUBLIC, year PUBLIC, "
            "uid PUBLIC) PRIVACY UNIT uid")
    return con, con.catalog.get("p")


def _duck_counts(con, table, x: E.Expr, group_by: tuple[str, ...], where: str = "") -> dict:
    cols = ", ".join(group_by) or "1"
    rows = con.duck.execute(f"SELECT {cols}, {render(x)} AS x, count(*) FROM {table.from_sql} {where} "
                            f"GROUP BY ALL").fetchall()
    return {(tuple(r[:-2]) if group_by else (), r[-2]): r[-1] for r in rows}


def _as_dict(counts, cells) -> dict:
    return {(cells[c].key, v): int(n) for c, (vs, ns) in counts.items() for v, n in zip(vs.tolist(), ns.tolist())}


@pytest.mark.parametrize("partitions", [1, 3, 8])
def test_value_counts_equal_duckdb_for_any_partitioning(spark, people, partitions):
    con, table = people
    backend = S.SparkBackend(spark, partitions=partitions)   # the source read as 3 files, then repartitioned
    # (every kind of grouping with 3 partitions; the finest one with 1 and 8)
    coin = bucket("age", 0, 100, 10)
    for group_by in [(), ("region",), ("region", "year")] if partitions == 3 else [("region", "year")]:
        pop = Population(table, None, group_by)
        cells = backend.cells(pop)
        if group_by:
            expected = con.duck.execute(f"SELECT {', '.join(group_by)}, count(*) FROM {table.from_sql} GROUP BY ALL "
                                        "ORDER BY ALL NULLS LAST").fetchall()
            assert [(*c.key, c.n) for c in cells] == [tuple(r) for r in expected]
            assert cells[-1].key[0] is None   # NULL is a group of its own, last
        counts = backend.value_counts(pop, cells, coin, Slice())
        assert _as_dict(counts, cells) == _duck_counts(con, table, coin, group_by)
        for vs, _ in counts.values():
            assert np.all(np.diff(vs) > 0)


def test_where_and_narrowing_condition(backend, people):
    con, table = people
    where = E.op(">=", E.Column("year"), 2020)
    pop = Population(table, where, ("region",))
    cells = backend.cells(pop)
    x = clamped("age", 0, 100)
    narrow = E.op(">", x, 30.0)
    got = _as_dict(backend.value_counts(pop, cells, E.call("round", x), Slice(), narrow), cells)
    want = _duck_counts(con, table, E.call("round", x), ("region",), f"WHERE year >= 2020 AND {render(narrow)}")
    assert got == want


def test_slices_and_covered_users_match_duckdb_keys(backend, people):
    con, table = people
    where = E.op(">=", E.Column("year"), 2020)
    covered = backend.covered_users(Population(table, where))
    uids = con.duck.execute(f"SELECT uid FROM {table.from_sql} WHERE year >= 2020").fetchall()
    assert sorted(covered.tolist()) == sorted(md5_key(u) for (u,) in uids)
    assert backend.covered_users(Population(table)) is None
    share = Slice(0.1, 0.45, 77)
    pop = Population(table, None, ("region",))
    cells = backend.cells(pop)
    x = clamped("age", 0, 100)
    got = _as_dict(backend.value_counts(pop, cells, E.call("round", x), share), cells)
    keys = np.array([md5_key(u) for (u,) in con.duck.execute(f"SELECT uid FROM {table.from_sql}").fetchall()],
                    dtype=np.uint64)
    u = slice_uniform(keys, 77)
    rows = con.duck.execute(f"SELECT region, {render(E.call('round', x))} FROM {table.from_sql}").fetchall()
    want: dict = {}
    for (region, v), uu in zip(rows, u):
        if 0.1 <= uu < 0.45:
            want[((region,), v)] = want.get(((region,), v), 0) + 1
    assert got == want


def test_batches_in_source_order(spark, people):
    con, table = people
    backend = S.SparkBackend(spark, partitions=3)
    pop = Population(table, None, ("region",))
    cells = backend.cells(pop)
    x = E.call("round", clamped("age", 0, 100))
    got = list(backend.batches(pop, cells, x, Slice()))
    assert len(got) == 1
    cell_of, xs = got[0]
    rows = con.duck.execute(f"SELECT region, {render(x)} FROM {table.from_sql}").fetchall()
    index = {c.key[0]: k for k, c in enumerate(cells)}
    assert cell_of.tolist() == [index[r[0]] for r in rows] and xs.tolist() == [r[1] for r in rows]


def test_randomized_on_executors(spark, people):
    """Per-user randomization on the executors: every user counted once, the summaries those of the randomizer
    (the identity reports the truth), and a seed reproduces them."""
    from ldpql.mechanisms.grr import GRR
    from ldpql.mechanisms.identity import Identity
    _, table = people
    backend = S.SparkBackend(spark, partitions=3)
    pop = Population(table, None, ("region",))
    cells = backend.cells(pop)
    x = bucket("age", 0, 100, 10)
    exact = {c: Identity(10) for c in range(len(cells))}
    got = backend.randomized(pop, cells, x, Slice(), exact, entropy=5, spawn=(0, 1))
    counts = backend.value_counts(pop, cells, x, Slice())
    for c, (summary, n) in got.items():
        vs, ns = counts[c]
        assert n == cells[c].n == ns.sum()
        assert np.array_equal(summary, np.bincount(vs, weights=ns, minlength=10))
    noisy = {c: GRR(1.0, 10) for c in range(len(cells))}
    one = backend.randomized(pop, cells, x, Slice(), noisy, entropy=5, spawn=(0, 1))
    two = backend.randomized(pop, cells, x, Slice(), noisy, entropy=5, spawn=(0, 1))
    assert all(np.array_equal(one[c][0], two[c][0]) for c in one)
    assert not all(np.array_equal(one[c][0], got[c][0]) for c in one)   # and the noise is there


def test_catalog_table_source_is_refused(spark, backend, people):
    """A table source is bound in the ledger to DuckDB's relation of that name; Spark's catalog may name another
    (audit5 F4), so the Spark backend refuses it and says how to declare the files instead."""
    import dataclasses
    _, table = people
    spark.read.parquet(table.source_text).createOrReplaceTempView("people_view")
    named = dataclasses.replace(table, source_kind="table", source_text="people_view")
    with pytest.raises(ldpql.ExecuteError, match="declare the table's files by path|inputFiles"):
        backend.cells(Population(named, None, ("region",)))


def test_frames_and_errors(spark, tmp_path):
    import pandas as pd
    backend = S.SparkBackend(spark)
    frame = pd.DataFrame({"x": [5, 1, 3, 1], "g": ["a", "b", "a", None]})
    con = ldpql.connect(evaluation=True, seed=1)
    con.register("f", frame, private={"x": (0, 9)}, public=["g"])
    table = con.catalog.get("f")
    backend.register("f", frame)
    pop = Population(table, None, ("g",))
    cells = backend.cells(pop)
    assert [(c.key, c.n) for c in cells] == [(("a",), 2), (("b",), 1), ((None,), 1)]
    df, ordered = backend._population(Population(table), keys=True)
    assert ordered and sorted(df.select("__pos").toArrow().to_pandas()["__pos"]) == [0, 1, 2, 3]
    gone = S.SparkBackend(spark)
    with pytest.raises(ldpql.ExecuteError, match="not registered"):
        gone.cells(pop)
    path = tmp_path / "gone.parquet"
    pq.write_table(pa.table({"x": [1, 2]}), str(path))
    con.sql(f"CREATE TABLE g FROM '{path}' (x PRIVATE INTEGER BETWEEN 0 AND 9)")
    os.remove(path)
    with pytest.raises(ldpql.ExecuteError, match="Spark could not read `g`"):
        backend.cells(Population(con.catalog.get("g")))


def test_batches_cut_across_partitions(spark, people, monkeypatch):
    """Batches of exactly BATCH_ROWS rows, in the source's row order, whatever the partitioning (DuckDB's
    batches: the same seeded per-user draws)."""
    con, table = people
    monkeypatch.setattr(S, "BATCH_ROWS", 7)
    pop = Population(table, None, ("region",))
    x = E.call("round", clamped("age", 0, 100))
    rows = con.duck.execute(f"SELECT region, {render(x)} FROM {table.from_sql}").fetchall()
    for parts in (1, 4):
        backend = S.SparkBackend(spark, partitions=parts)
        cells = backend.cells(pop)
        got = list(backend.batches(pop, cells, x, Slice()))
        assert [len(xs) for _, xs in got[:-1]] == [7] * (len(got) - 1) and 0 < len(got[-1][1]) <= 7
        index = {c.key[0]: k for k, c in enumerate(cells)}
        assert np.concatenate([c for c, _ in got]).tolist() == [index[r[0]] for r in rows]
        assert np.concatenate([xs for _, xs in got]).tolist() == [r[1] for r in rows]


def test_unseeded_per_user_rounds_randomize_on_the_executors(spark, people, monkeypatch):
    """Without a seed a per-user round (the Hybrid Mechanism's mean) is randomized on the executors: no row
    reaches the driver, and the estimate is the mean's (Wang et al., Collecting and Analyzing Multidimensional
    Data with Local Differential Privacy, 2019: at ε = 4 over ~1,400 users its standard error is under a year)."""
    _, table = people
    calls = {"randomized": 0, "batches": 0}
    for name in calls:
        original = getattr(S.SparkBackend, name)

        def counted(self, *a, _name=name, _original=original, **k):
            calls[_name] += 1
            return _original(self, *a, **k)
        monkeypatch.setattr(S.SparkBackend, name, counted)
    con = ldpql.connect(backend="spark", spark=spark, evaluation=True)
    con.sql(f"CREATE TABLE p FROM '{table.source_text}' (age PRIVATE BETWEEN 0 AND 100, region PUBLIC, "
            "year PUBLIC, uid PUBLIC) PRIVACY UNIT uid BUDGET EPSILON 100")
    truth = con.sql("SELECT LDP_MEAN(age) FROM p EPSILON INF").fetchall()[0][0]
    calls.update(randomized=0, batches=0)
    got = con.sql("SELECT LDP_MEAN(age) FROM p EPSILON 4").fetchall()[0][0]
    assert calls == {"randomized": 1, "batches": 0}
    assert abs(got - truth) < 5
    seeded = ldpql.connect(backend="spark", spark=spark, evaluation=True, seed=3)   # seeded: never partition-keyed
    seeded.sql(f"CREATE TABLE p FROM '{table.source_text}' (age PRIVATE BETWEEN 0 AND 100, region PUBLIC, "
               "year PUBLIC, uid PUBLIC) PRIVACY UNIT uid BUDGET EPSILON 100")
    seeded.sql("SELECT LDP_MEAN(age) FROM p EPSILON 4").fetchall()
    assert calls["randomized"] == 1


def test_key_value_rows_and_seeded_answers_equal_duckdbs(spark, tmp_path):
    """Key-value statements (several rows per unit): Spark's per-unit rows are DuckDB's (and the in-memory
    backend's), under a public WHERE and any partitioning; a seeded statement gives the same answer on both."""
    from ldpql.backends.memory import MemoryBackend
    from ldpql.planner.keyvalue import key_expression, value_expression
    rng = np.random.default_rng(8)
    n = 400
    uid = np.repeat(np.arange(n), rng.integers(1, 5, n))
    movie = rng.choice(["a", "b", "c", "zz"], len(uid))
    rating = np.where(rng.random(len(uid)) < 0.1, np.nan, rng.integers(1, 6, len(uid)).astype(float))
    path = tmp_path / "kv.parquet"
    pq.write_table(pa.table({"uid": uid, "movie": movie, "rating": rating}), str(path))
    create = (f"CREATE TABLE r FROM '{path}' (movie PRIVATE IN ('a', 'b', 'c'), rating PRIVATE BETWEEN 1 AND 5, "
              "uid PUBLIC) PRIVACY UNIT uid SPARSITY 2 BUDGET EPSILON 4")
    duck = ldpql.connect(evaluation=True, seed=5)
    duck.sql(create)
    table = duck.catalog.get("r")
    key = key_expression("movie", table.column("movie").domain)
    value = value_expression("rating", table.column("rating").domain)
    pop = Population(table, E.op(">=", E.Column("uid"), 100))
    memory = MemoryBackend({"uid": uid, "movie": movie.astype(object), "rating": rating})

    def rows(backend):
        got = np.concatenate([np.c_[u.astype(float), k, v] for u, k, v in backend.unit_rows(pop, key, value)])
        return backend.units(pop), got[np.lexsort(got.T[::-1])]
    want = rows(duck.backend)
    for backend in (S.SparkBackend(spark, partitions=3), memory):
        got = rows(backend)
        assert got[0] == want[0] == len(np.unique(uid[uid >= 100]))
        assert np.array_equal(got[1], want[1], equal_nan=True)
    sql = "SELECT movie, LDP_COUNT(*), LDP_AVG(rating) FROM r WHERE uid >= 100 GROUP BY movie EPSILON 2"
    on_spark = ldpql.connect(backend="spark", spark=spark, evaluation=True, seed=5)
    on_spark.sql(create)
    assert on_spark.sql(sql).fetchall() == duck.sql(sql).fetchall()

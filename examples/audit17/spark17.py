"""Audit 17: the zoom's cell expression (ZoomEncoding) on the numpy/memory path, DuckDB and Spark SQL.

Coin spaces built by the planner's own coin_space: INTEGER 0..200000 one coin per value; INTEGER 0..200000 with
resolution => 1000 (integer buckets, partial last bucket); DOUBLE 0..1 with resolution => 1000; a huge INTEGER domain
0..2^40. Rows: every bin edge (first/last coin of every bin, +/- 1), the partial last bin, NULL, NaN, +/-inf, values
beyond the domain, fractional values. Zooms: bin 0, a middle bin, the partial last bin, two adjacent bins. Compared:
ZoomEncoding.inputs(coins) (what the exact path uses), memory.evaluate(expr), DuckDB render(expr), Spark render_spark.

    nice -n 10 python spark17.py [--no-spark]
"""
import sys
from types import SimpleNamespace
import duckdb, numpy as np, pyarrow as pa
from ldpql.backends.memory import evaluate
from ldpql.backends.sql import render
from ldpql.catalog import NumericDomain
from ldpql.mechanisms.quantile_histogram import bin_width, zoom_cells, zoom_encoding
from ldpql.planner.quantile import coin_space

def spaces():
    yield "int200001", SimpleNamespace(name="x", dtype="BIGINT"), NumericDomain(0, 200000, True), None
    yield "int_res1000", SimpleNamespace(name="x", dtype="BIGINT"), NumericDomain(0, 200000, True), 1000
    yield "dbl_res1000", SimpleNamespace(name="x", dtype="DOUBLE"), NumericDomain(0.0, 1.0), 1000
    yield "dbl_res_default", SimpleNamespace(name="x", dtype="DOUBLE"), NumericDomain(-5.0, 7.0), None
    yield "huge", SimpleNamespace(name="x", dtype="BIGINT"), NumericDomain(0, 2 ** 40, True), None

def rows(space, low, step, integer):
    K = space.size
    out = [None, float("nan"), float("inf"), -float("inf"), low - 1e6, low + (K + 10) * step, low + 0.3 * step]
    for bins in (16, 64, 256):
        w = bin_width(K, bins)
        for j in range(0, -(-K // w)):
            for c in (j * w - 1, j * w, j * w + 1, (j + 1) * w - 1, (j + 1) * w - 2):
                if 0 <= c < K:
                    out.append(low + c * step + (0 if integer else step * 0.5))
                    if not integer:
                        out.append(low + c * step)   # the bucket's exact left edge
    out += [low + (K - 1) * step, low + K * step]
    return out

def main(spark_on=True):
    spark = None
    if spark_on:
        from ldpql.backends.spark import local_session, render_spark
        spark = local_session()
    bad = 0
    for name, col, dom, res in spaces():
        space, _ = coin_space(col, dom, res)
        K = space.size
        vals = rows(space, space.low, space.step, space.integer)
        x = np.array([np.nan if v is None else v for v in vals], dtype=float)
        null = np.array([v is None for v in vals])
        coins, cnull = evaluate(space.bucket, {"x": np.where(null, np.nan, x) if col.dtype == "DOUBLE" else
                                              np.array(vals, dtype=object)}, len(vals))
        for bins in (16, 64, 256):
            w = bin_width(K, bins)
            nb = -(-K // w)
            cell = zoom_cells(w, nb)
            zsets = [((0, cell),), (((nb // 2) * w, cell),), (((nb - 1) * w, cell),),
                     (((nb // 2) * w, cell), ((nb // 2 + 1) * w, cell)), ((0, cell), ((nb - 1) * w, cell))]
            for zooms in zsets:
                enc = zoom_encoding(space, w, zooms)
                ref = enc.inputs(coins)
                mem, mnull = evaluate(enc.expr, {"x": np.array(vals, dtype=object) if col.dtype != "DOUBLE" else
                                                 np.where(null, np.nan, x)}, len(vals))
                tbl = pa.table(  # noqa: F841 (read by DuckDB by name)
                    {"i": np.arange(len(vals)), "x": pa.array(vals, type=pa.float64() if col.dtype == "DOUBLE"
                                                                      else pa.float64())})
                ddb = [r[0] for r in duckdb.sql(f"SELECT {render(enc.expr)} FROM tbl ORDER BY i").fetchall()]
                res_rows = {"ref": ref.tolist(), "mem": np.asarray(mem).astype(np.int64).tolist(), "duckdb": ddb}
                if spark is not None:
                    df = spark.createDataFrame([(i, None if v is None else float(v)) for i, v in enumerate(vals)],
                                               "i long, x double")
                    df.createOrReplaceTempView("tbl")
                    res_rows["spark"] = [r[0] for r in spark.sql(f"SELECT {render_spark(enc.expr)} AS c FROM tbl "
                                                                 "ORDER BY i").collect()]
                ok = all(v == res_rows["ref"] for v in res_rows.values())
                inrange = all(0 <= c < enc.size for c in res_rows["ref"])
                ends = enc.ends(K)
                consistent = np.array_equal(enc.inputs(np.arange(min(K, 5_000_000))) if K <= 5_000_000 else
                                            enc.inputs(ends), np.searchsorted(ends, np.arange(min(K, 5_000_000)))
                                            if K <= 5_000_000 else np.arange(len(ends)))
                if not (ok and inrange and consistent):
                    bad += 1
                    diff = [(i, vals[i], {k: v[i] for k, v in res_rows.items()}) for i in range(len(vals))
                            if len({v[i] for v in res_rows.values()}) > 1][:5]
                    print("MISMATCH", name, bins, zooms, "agree" if ok else diff, "inrange", inrange,
                          "ends/inputs consistent", consistent)
        print(f"{name}: K={K}, {len(vals)} rows x 3 bin counts x 5 zoom sets compared", flush=True)
    print("mismatches:", bad)
    if spark is not None:
        spark.stop()

if __name__ == "__main__":
    main("--no-spark" not in sys.argv)

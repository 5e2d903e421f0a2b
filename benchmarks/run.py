#!/usr/bin/env python
"""ldpql benchmarks against its peers, on the same generated data, in one run (DESIGN §5).

    python benchmarks/run.py            # n = 10^6 and 10^7 (a few minutes)
    python benchmarks/run.py --large    # also the 10^8-row parquet file: time and peak RSS, in subprocesses
    python benchmarks/run.py --quick    # a smoke run on tiny data (seconds)

What it measures (users/second = simulated users per wall-clock second; best of --repeat runs):

- LDP_HISTOGRAM, d = 100, ε = 1: ldpql through its public API (``con.sql``) on the per-user path and the
  exact-aggregate path, for GRR and OUE; the same randomizer written inline in numpy on data already in
  memory (the speed-of-light reference); multi-freq-ldpy and pure-ldp (per-user Python loops, so timed on a
  smaller n); and two floors of the per-user path: DuckDB streaming the encoded column as Arrow batches with
  no randomizer, and the raw column streamed with one uniform drawn per value.
- LDP_MEAN, ε = 1: ldpql's Duchi et al. and Piecewise mechanisms (per-user path only) against inline numpy.
  Neither multi-freq-ldpy nor pure-ldp implements a numeric-mean mechanism, so there is no peer row.
- With --large: the exact path on a 10^8-row parquet file (LDP_HISTOGRAM d = 100) against DuckDB's own
  ``GROUP BY`` count of the same file, each in a fresh subprocess that reports its wall time and peak RSS
  (ru_maxrss, which covers DuckDB's allocations); also the per-user path at 10^8.

Every row also shows the estimate's largest error against the true histogram (or mean), as a sanity check
that each implementation computes what it claims. Results are printed as a table and written to
benchmarks/out/results.md and results.json. Data files are kept in benchmarks/out/ (git-ignored) and reused.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
OUT = HERE / "out"
D = 100
EPS = 1.0
LO, HI = 0.0, 100.0  # the numeric column's declared domain
CHUNK = 1 << 16      # users per chunk in the inline numpy references (bounded memory)


# -- data ---------------------------------------------------------------------------------------------------

def _label(n: int) -> str:
    e = round(math.log10(n))
    return f"1e{e}" if 10 ** e == n else str(n)


def write_data(n: int, with_x: bool = True) -> Path:
    """A parquet file of n users: ``c`` in 0..99 (Zipf-like, weights 1/(i+1)^0.8) and, if asked, ``x`` in
    [0, 100] (a clipped normal). Deterministic (seed 0); reused when it already exists."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    OUT.mkdir(parents=True, exist_ok=True)
    path = OUT / f"data_{_label(n)}{'' if with_x else '_c'}.parquet"
    if path.exists():
        try:
            if pq.ParquetFile(path).metadata.num_rows == n:
                return path
        except Exception:  # noqa: BLE001, S110  (a partial file from an interrupted run: write it again)
            pass
    rng = np.random.default_rng(0)
    cdf = np.cumsum(1.0 / np.arange(1, D + 1) ** 0.8)
    cdf /= cdf[-1]
    tmp = path.with_suffix(".tmp")
    writer = None
    step = 1 << 22
    for start in range(0, n, step):
        m = min(step, n - start)
        cols = {"c": np.minimum(np.searchsorted(cdf, rng.random(m), side="right"), D - 1).astype(np.int64)}
        if with_x:
            cols["x"] = np.clip(rng.normal(30.0, 10.0, m), LO, HI)
        table = pa.table(cols)
        writer = writer or pq.ParquetWriter(tmp, table.schema)
        writer.write_table(table, row_group_size=1 << 20)
    writer.close()
    tmp.replace(path)
    return path


def load_columns(path: Path, n: int) -> tuple[np.ndarray, np.ndarray | None]:
    """The first n users of a data file: the category index and the value scaled to [-1, 1] (as ldpql's
    encoding does on the user's side)."""
    import pyarrow.parquet as pq

    table = pq.read_table(path).slice(0, n)
    c = table.column("c").to_numpy()
    x = None
    if "x" in table.column_names:
        half, mid = (HI - LO) / 2, (HI + LO) / 2
        x = (np.clip(table.column("x").to_numpy(), LO, HI) - mid) / half
    return c, x


# -- timing -------------------------------------------------------------------------------------------------

def timed(fn, repeat: int) -> dict:
    """Run fn `repeat` times; wall and process-CPU seconds of each run, and fn's last return value."""
    walls, cpus, value = [], [], None
    for _ in range(repeat):
        w, c = time.perf_counter(), time.process_time()
        value = fn()
        walls.append(time.perf_counter() - w)
        cpus.append(time.process_time() - c)
    best = int(np.argmin(walls))
    return {"wall": walls[best], "median": statistics.median(walls), "worst": max(walls), "cpu": cpus[best],
            "runs": len(walls), "value": value}


def machine_load(seconds: float = 1.0) -> float | None:
    """Fraction of all cores busy (any process) over the next `seconds`, from /proc/stat (None elsewhere). Taken
    before the run starts, it shows how much other processes were loading the machine."""
    def sample():
        fields = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
        idle = fields[3] + (fields[4] if len(fields) > 4 else 0)
        return sum(fields[:8]) - idle, sum(fields[:8])
    try:
        busy0, total0 = sample()
        time.sleep(seconds)
        busy1, total1 = sample()
        return (busy1 - busy0) / max(1, total1 - total0)
    except (OSError, ValueError, IndexError):
        return None


# -- ldpql --------------------------------------------------------------------------------------------------

def ldpql_connection(path: Path):
    import ldpql

    con = ldpql.connect(seed=1, evaluation=True)
    con.duck.execute("SET enable_progress_bar = false")
    con.sql(f"CREATE TABLE t FROM '{path}' (c PRIVATE INTEGER BETWEEN 0 AND {D - 1}"
            + (f", x PRIVATE BETWEEN {LO:g} AND {HI:g} NOT NULL" if _has_x(path) else "") + ") BUDGET EPSILON 1e9")
    return con


def _has_x(path: Path) -> bool:
    import pyarrow.parquet as pq

    return "x" in pq.ParquetFile(path).schema_arrow.names


def histogram_sql(mechanism: str, simulation: str) -> str:
    return (f"SELECT LDP_HISTOGRAM(c) EPSILON {EPS:g} FROM t "
            f"OPTIONS (mechanism = '{mechanism}', simulation = '{simulation}')")


def mean_sql(mechanism: str) -> str:
    return f"SELECT LDP_MEAN(x) EPSILON {EPS:g} FROM t OPTIONS (mechanism = '{mechanism}')"


def hist_error(rows, truth: np.ndarray) -> float:
    est = np.zeros(D)
    for key, value in rows:
        est[int(key)] = value
    return float(np.max(np.abs(est - truth)))


# -- inline numpy references (data in memory) ------------------------------------------------------------------

def numpy_grr(c: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    e = math.exp(EPS)
    p, q = e / (e + D - 1), 1 / (e + D - 1)
    counts = np.zeros(D, np.int64)
    for i in range(0, len(c), CHUNK):
        x = c[i:i + CHUNK]
        keep = rng.random(len(x)) < p - q
        counts += np.bincount(np.where(keep, x, rng.integers(0, D, len(x))), minlength=D)
    return (counts / len(c) - q) / (p - q)


def numpy_oue(c: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    threshold = math.ceil(65536 / (math.exp(EPS) + 1))  # the same 16-bit grid as ldpql's OUE at ε = 1
    q = threshold / 65536
    counts = np.zeros(D, np.int64)
    step = (1 << 20) // D
    for i in range(0, len(c), step):
        x = c[i:i + step]
        bits = rng.integers(0, 65536, (len(x), D), dtype=np.uint16) < threshold
        bits[np.arange(len(x)), x] = rng.random(len(x)) < 0.5
        counts += bits.sum(axis=0)
    return (counts / len(c) - q) / (0.5 - q)


def numpy_duchi(x: np.ndarray, rng: np.random.Generator) -> float:
    e = math.exp(EPS)
    p, scale = e / (e + 1), (e + 1) / (e - 1)
    total = 0
    for i in range(0, len(x), CHUNK):
        v = x[i:i + CHUNK]
        sign = rng.random(len(v)) < (1 + v) / 2
        keep = rng.random(len(v)) < p
        total += int(np.count_nonzero(sign == keep)) * 2 - len(v)
    return scale * total / len(x)


def numpy_piecewise(x: np.ndarray, rng: np.random.Generator) -> float:
    t = math.exp(EPS / 2)
    big_c = (t + 1) / (t - 1)
    total = 0.0
    for i in range(0, len(x), CHUNK):
        v = x[i:i + CHUNK]
        left = (big_c + 1) / 2 * v - (big_c - 1) / 2
        right = left + big_c - 1
        inside = rng.random(len(v)) < t / (t + 1)
        u = rng.random(len(v))
        w = (big_c + 1) * u
        out = np.where(w < left + big_c, -big_c + w, right + (w - (left + big_c)))
        total += float(np.where(inside, left + (big_c - 1) * u, out).sum())
    return total / len(x)


# -- peers (per-user Python loops) ---------------------------------------------------------------------------

def peer_runners() -> dict:
    """{name: (mechanism, callable(c) -> estimated frequencies)}, or {name: reason} when not installed."""
    out: dict = {}
    try:
        from multi_freq_ldpy.pure_frequency_oracles.GRR import GRR_Aggregator_MI, GRR_Client
        from multi_freq_ldpy.pure_frequency_oracles.UE import UE_Aggregator_MI, UE_Client

        GRR_Client(1, D, EPS)  # compile (numba) before timing
        UE_Client(1, D, EPS, True)

        def mfl_grr(c):
            return np.asarray(GRR_Aggregator_MI([GRR_Client(v, D, EPS) for v in c.tolist()], D, EPS))

        def mfl_oue(c):
            return np.asarray(UE_Aggregator_MI([UE_Client(v, D, EPS, True) for v in c.tolist()], EPS, True))

        out["multi-freq-ldpy"] = {"grr": mfl_grr, "oue": mfl_oue}
    except Exception as e:  # noqa: BLE001  (not installed, or broken on today's dependencies)
        out["multi-freq-ldpy"] = f"not available ({type(e).__name__}: {str(e).splitlines()[0][:60]})"
    try:
        from pure_ldp.frequency_oracles.direct_encoding import DEClient, DEServer
        from pure_ldp.frequency_oracles.unary_encoding import UEClient, UEServer

        def ident(v):  # pure-ldp maps 1..d to indexes by default
            return v

        def pldp(client, server):
            def run(c):
                for v in c.tolist():
                    server.aggregate(client.privatise(v))
                est = np.asarray(server.estimate_all(range(D), suppress_warnings=True), dtype=float) / len(c)
                server.reset()
                return est
            return run

        out["pure-ldp"] = {
            "grr": pldp(DEClient(EPS, D, index_mapper=ident), DEServer(EPS, D, index_mapper=ident)),
            "oue": pldp(UEClient(EPS, D, use_oue=True, index_mapper=ident),
                        UEServer(EPS, D, use_oue=True, index_mapper=ident)),
        }
    except Exception as e:  # noqa: BLE001
        out["pure-ldp"] = f"not available ({type(e).__name__}: {str(e).splitlines()[0][:60]})"
    return out


# -- the 10^8 case: one subprocess per measurement -----------------------------------------------------------

def child(case: str, path: str) -> None:
    """Run one measurement in this (fresh) process; print JSON with its time and this process's peak RSS."""
    setup = time.perf_counter()
    value = None
    if case == "duckdb-groupby":
        import duckdb

        duck = duckdb.connect()
        duck.execute("SET enable_progress_bar = false")
        setup = time.perf_counter() - setup
        start = time.perf_counter()
        rows = duck.execute(f"SELECT c, count(*) FROM '{path}' GROUP BY c").fetchall()
        value = len(rows)
    elif case == "stream-floor":
        import duckdb

        duck = duckdb.connect()
        duck.execute("SET enable_progress_bar = false")
        rng = np.random.default_rng(0)
        setup = time.perf_counter() - setup
        start = time.perf_counter()
        total = 0.0
        for batch in duck.sql(f"SELECT c FROM '{path}'").to_arrow_reader(1 << 20):
            total += rng.random(len(batch.column(0).to_numpy())).sum()
        value = total
    else:
        _, mechanism, simulation = case.split("-", 2)  # ldpql-grr-exact, ldpql-oue-per_user
        con = ldpql_connection(Path(path))
        setup = time.perf_counter() - setup
        start = time.perf_counter()
        value = len(con.sql(histogram_sql(mechanism, simulation)).fetchall())
    wall = time.perf_counter() - start
    print(json.dumps({"case": case, "wall": wall, "setup": setup, "peak_rss_mb": peak_rss_mb(), "value": value}))


def peak_rss_mb() -> float:
    """This process's peak resident set size, DuckDB's allocations included. On Linux, VmHWM: ru_maxrss
    would also count the parent's memory at fork time, as Linux keeps it across exec."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 2 ** 10  # kB
    except OSError:
        pass
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return rss / 2 ** 20 if sys.platform == "darwin" else rss / 2 ** 10  # bytes on macOS, KiB elsewhere


def run_child(case: str, path: Path) -> dict:
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, __file__, "--child", case, str(path)], capture_output=True, text=True,
                          check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"{case} failed:\n{proc.stderr[-2000:]}")
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    out["process_wall"] = time.perf_counter() - start
    return out


# -- the run -------------------------------------------------------------------------------------------------

class Table:
    """Rows of the report, printed as they come and kept for results.md / results.json."""

    def __init__(self):
        self.rows: list[dict] = []

    def add(self, section: str, impl: str, n: int, t: dict | None, err: float | None = None, note: str = ""):
        row = {"section": section, "impl": impl, "n": n, "note": note, "err": err}
        if t is not None:
            row.update({k: t[k] for k in ("wall", "median", "worst", "cpu", "runs")})
            row["users_s"] = n / t["wall"]
        self.rows.append(row)
        print(self.line(row), flush=True)

    @staticmethod
    def line(row: dict) -> str:
        if "users_s" not in row:
            return f"  {row['impl']:<44} {'':>9}  {row['note']}"
        spread = f"{row['wall']:.3f}-{row['worst']:.3f}s" if row["runs"] > 1 else f"{row['wall']:.3f}s"
        err = f"{row['err']:.4f}" if row["err"] is not None else ""
        return (f"  {row['impl']:<44} {_label(row['n']):>9} {row['users_s'] / 1e6:>9.2f}M {spread:>16} "
                f"{row['cpu']:>7.2f}s {err:>8}  {row['note']}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="smoke run on tiny data")
    ap.add_argument("--large", action="store_true", help="also the 10^8-row file (writes ~0.4 GB once)")
    ap.add_argument("--sizes", default=None, help="comma-separated user counts (default 1e6,1e7)")
    ap.add_argument("--peer-n", type=float, default=None, help="users for the peers' OUE (default 1e5; GRR 10x)")
    ap.add_argument("--repeat", type=int, default=None, help="runs per measurement; the best is reported")
    ap.add_argument("--no-peers", action="store_true", help="skip multi-freq-ldpy and pure-ldp")
    ap.add_argument("--out", default=None, help="directory for data files and results (default benchmarks/out)")
    ap.add_argument("--child", nargs=2, metavar=("CASE", "PATH"), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    global OUT
    if args.out:
        OUT = Path(args.out).resolve()
    if args.child:
        child(*args.child)
        return 0

    sizes = [int(float(s)) for s in args.sizes.split(",")] if args.sizes else ([20_000] if args.quick else
                                                                                [10 ** 6, 10 ** 7])
    peer_n = int(args.peer_n or (2_000 if args.quick else 100_000))
    repeat = args.repeat or (1 if args.quick else 3)
    load = machine_load()
    started = time.perf_counter()
    table = Table()
    print(f"ldpql benchmarks: d = {D}, ε = {EPS:g}; {platform.processor() or platform.machine()}, "
          f"{os.cpu_count()} cores, Python {platform.python_version()}, numpy {np.__version__}")
    if load is not None:
        print(f"  load from other processes just before the run: {load:.0%} of all cores busy")
    print(f"  {'implementation':<44} {'n':>9} {'users/s':>10} {'wall best-worst':>16} {'CPU':>8} {'max err':>8}")

    peers = {} if args.no_peers else peer_runners()
    for n in sizes:
        path = write_data(n)
        c, x = load_columns(path, n)
        truth = np.bincount(c, minlength=D) / n
        true_mean = float(np.mean(x))
        con = ldpql_connection(path)
        con.sql(histogram_sql("grr", "per_user"))  # warm up: file cache, thread pools, lazy imports
        rng = np.random.default_rng(1)

        print(f"-- LDP_HISTOGRAM d = {D}, n = {_label(n)}")
        for mech in ("grr", "oue"):
            for sim in ("per_user", "exact"):
                t = timed(lambda m=mech, s=sim: con.sql(histogram_sql(m, s)).fetchall(), repeat)  # noqa: B023
                table.add("histogram", f"ldpql {mech.upper()} {sim.replace('_', '-')}", n, t,
                          hist_error(t["value"], truth))
            t = timed(lambda f=numpy_grr if mech == "grr" else numpy_oue: f(c, rng), repeat)  # noqa: B023
            table.add("histogram", f"numpy inline {mech.upper()} (in memory)", n, t,
                      float(np.max(np.abs(t["value"] - truth))))
        sql = _encoded_sql(con)  # the per-user path's floors
        t = timed(lambda: _stream(con.duck, f"SELECT {sql} AS x FROM '{path}'", None), repeat)  # noqa: B023
        table.add("histogram", "floor: DuckDB streams the encoded column", n, t, note="no randomizer")
        t = timed(lambda: _stream(con.duck, f"SELECT c FROM '{path}'", rng), repeat)  # noqa: B023
        table.add("histogram", "floor: stream raw column + 1 uniform each", n, t, note="no randomizer")

        print(f"-- LDP_MEAN, n = {_label(n)}")
        for mech, ref in (("duchi", numpy_duchi), ("piecewise", numpy_piecewise)):
            t = timed(lambda m=mech: con.sql(mean_sql(m)).fetchall(), repeat)  # noqa: B023
            table.add("mean", f"ldpql {mech} per-user", n, t, abs(t["value"][0][0] - (true_mean * 50 + 50)) / 50)
            t = timed(lambda f=ref: f(x, rng), repeat)  # noqa: B023
            table.add("mean", f"numpy inline {mech} (in memory)", n, t, abs(t["value"] - true_mean))
        table.add("mean", "multi-freq-ldpy, pure-ldp", n, None, note="no numeric-mean mechanism: no peer row")
        con.close()

    if peers:
        n_peer = min(peer_n, max(sizes))
        c, _ = load_columns(write_data(max(sizes)), 10 * n_peer)
        print(f"-- peers (per-user Python loops): OUE on n = {_label(n_peer)}, GRR on n = {_label(min(10 * n_peer, len(c)))}")
        for name, runners in peers.items():
            if isinstance(runners, str):
                table.add("peers", name, 0, None, note=runners)
                continue
            for mech in ("grr", "oue"):
                m = min(10 * n_peer if mech == "grr" else n_peer, len(c))
                truth = np.bincount(c[:m], minlength=D) / m
                t = timed(lambda f=runners[mech], m=m: f(c[:m]), 1 if m > 10 ** 5 else repeat)
                table.add("peers", f"{name} {mech.upper()}", m, t, float(np.max(np.abs(t["value"] - truth))))

    large = []
    if args.large:
        n = 10 ** 8
        print("-- n = 1e8 (fresh subprocess each; peak RSS of that process): writing data if needed", flush=True)
        path = write_data(n, with_x=False)
        for case, label in (("duckdb-groupby", "DuckDB GROUP BY c, count(*)"),
                            ("ldpql-grr-exact", "ldpql GRR exact"), ("ldpql-oue-exact", "ldpql OUE exact"),
                            ("stream-floor", "floor: stream raw column + 1 uniform each"),
                            ("ldpql-grr-per_user", "ldpql GRR per-user"), ("ldpql-oue-per_user", "ldpql OUE per-user")):
            runs = [run_child(case, path) for _ in range(1 if case == "ldpql-oue-per_user" else repeat)]
            best = min(runs, key=lambda r: r["wall"])
            best.update(label=label, n=n, walls=[r["wall"] for r in runs], users_s=n / best["wall"])
            large.append(best)
            print(f"  {label:<44} {best['wall']:7.2f}s (runs: {', '.join(f'{w:.2f}' for w in best['walls'])}) "
                  f"{best['users_s'] / 1e6:8.1f}M users/s  peak RSS {best['peak_rss_mb']:7.0f} MB  "
                  f"(process {best['process_wall']:.1f}s incl. imports + setup)", flush=True)

    elapsed = time.perf_counter() - started
    write_report(table, large, sizes, elapsed, load, machine_load())
    print()
    print((OUT / "results.md").read_text())
    print(f"done in {elapsed:.0f} s; results in {OUT / 'results.md'} and results.json")
    return 0


def _encoded_sql(con) -> str:
    """The DuckDB expression ldpql streams for LDP_HISTOGRAM(c) (the planner's encoding of an INTEGER BETWEEN
    column), for the floor measurement."""
    from ldpql.backends.sql import render

    dom = con.catalog.get("t").column("c").domain
    return render(dom.index("c"))


def _stream(duck, sql: str, rng: np.random.Generator | None) -> float:
    total = 0.0
    for batch in duck.sql(sql).to_arrow_reader(1 << 20):
        col = batch.column(0).to_numpy(zero_copy_only=False)
        total += rng.random(len(col)).sum() if rng is not None else len(col)
    return total


def write_report(table: Table, large: list[dict], sizes: list[int], elapsed: float, load: float | None,
                 load_after: float | None) -> None:
    """results.json (everything) and results.md (the tables, with ratios to ldpql's per-user path)."""
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "results.json").write_text(json.dumps({"rows": table.rows, "large": large, "elapsed_s": elapsed,
                                                  "load_before": load, "load_after": load_after,
                                                  "argv": sys.argv[1:]}, indent=1, default=float))
    busy = "" if load is None else (f"; other processes kept {load:.0%} (before) and {load_after or 0:.0%} "
                                    f"(after) of the cores busy")
    title = (f"# ldpql benchmarks ({time.strftime('%Y-%m-%d %H:%M')}, {os.cpu_count()} cores, "
             f"run took {elapsed:.0f} s{busy})")
    legend = ("users/s: best of the runs (n / wall seconds); CPU s: this process's CPU time in that run (all "
              "threads); ratio: ldpql's per-user users/s (same mechanism; same n, else the largest n) divided by "
              "the row's (above 1: ldpql's per-user path is faster); max err: "
              "largest |estimate - truth| (a frequency, or the mean on [-1, 1]).")
    lines = [title, "", legend, "",
             "| section | implementation | n | users/s | wall (best-worst) | CPU s | max err | ldpql per-user is |",
             "|---|---|---|---|---|---|---|---|"]
    per_user: dict[tuple[str, int], float] = {}  # (mechanism, n) -> ldpql per-user users/s
    for row in table.rows:
        if row["impl"].startswith("ldpql") and "per-user" in row["impl"] and "users_s" in row:
            per_user[(row["impl"].split()[1].lower(), row["n"])] = row["users_s"]
    for row in table.rows:
        if "users_s" not in row:
            lines.append(f"| {row['section']} | {row['impl']} | | | | | | {row['note']} |")
            continue
        mech = next((m for m in ("grr", "oue", "duchi", "piecewise") if m in row["impl"].lower()), None)
        ref = per_user.get((mech, row["n"]), per_user.get((mech, max(sizes))))
        ratio = f"{ref / row['users_s']:.2f}x" if ref and not row["impl"].startswith("floor") else ""
        spread = f"{row['wall']:.3f}-{row['worst']:.3f} s" if row["runs"] > 1 else f"{row['wall']:.3f} s"
        err = f"{row['err']:.4f}" if row["err"] is not None else ""
        lines.append(f"| {row['section']} | {row['impl']} | {_label(row['n'])} | {row['users_s'] / 1e6:.2f} M | "
                     f"{spread} | {row['cpu']:.2f} | {err} | {ratio} {row['note']} |")
    if large:
        base = next((r["wall"] for r in large if r["case"] == "duckdb-groupby"), None)
        lines += ["", "## 10^8-row parquet (one fresh process per run)", "",
                  "| implementation | wall (best) | runs | users/s | peak RSS | time / DuckDB GROUP BY |",
                  "|---|---|---|---|---|---|"]
        for r in large:
            lines.append(f"| {r['label']} | {r['wall']:.2f} s | {', '.join(f'{w:.2f}' for w in r['walls'])} | "
                         f"{r['users_s'] / 1e6:.1f} M | {r['peak_rss_mb']:.0f} MB | "
                         f"{r['wall'] / base if base else float('nan'):.2f}x |")
    (OUT / "results.md").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    sys.exit(main())

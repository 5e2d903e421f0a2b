#!/usr/bin/env python
"""Backends benchmark (issue "Backends"): DuckDB and Spark side by side on generated parquet, and the issue's targets.

    python benchmarks/backends.py --rows 1e7 --data DIR          # generate what is missing, time, write results
    python benchmarks/backends.py --generate --rows 1e7,1e8      # only write the data (--billion adds 10^9)
    python benchmarks/backends.py --quick --data /tmp/x          # smoke run on tiny data (seconds)

Data (``--generate``, or on demand): parquet files under ``DIR/rows_<n>/`` (several files per table, so the
glob is exercised), written by DuckDB itself from ``range(n)`` with hash-derived, deterministic columns:
``id`` BIGINT; ``x`` INTEGER in 0..20000, lognormal like the diamonds prices (median ~2,440, mean ~3,840,
rounded, 1.8% clipped at 20000); ``y`` DOUBLE uniform on [0, 1); ``c`` one of 10 categories c0..c9
(geometric-like weights); ``g`` a public group among 5, ``h`` a public group among 50. Each table's true
answers (counts of x, c; mean of y; per group for small tables) go to ``truth.npz`` beside it, so runs can
report their error without reading the data again. 10^8 rows are about 1.5 GB; the default DIR is
``/work/bench-data/backends`` (never inside the repository).

Timed runs: each statement runs in a fresh subprocess (a new connection in evaluation mode with a seed, the
table declared over the glob), which reports the statement's wall time; the parent reads the child's peak RSS
from ``os.wait4`` (ru_maxrss of that child alone; for Spark, the JVM's VmHWM is added). Sections:

1. LDP_HISTOGRAM(c), LDP_MEAN(y), LDP_MEDIAN(x) at each ``--rows`` on ``duckdb`` (``ldpql.connect(evaluation=True)``)
   and ``spark`` (``ldpql.connect(backend="spark", ...)``; "not available (reason)" when it is absent);
   wall time, peak RSS, users/s, the median/mean ratio; Spark's scaling with partitions.
2. The issue's targets: (a) median vs mean at 10^7 rows (target: within 3x); (b) a grouped median over
   200,000 rows (GROUP BY g, 5 groups, and GROUP BY h, 50 groups) with the number of statements that read
   the table, counted by a proxy around the DuckDB connection ldpql holds (target: <= 3 scans); (c)
   ``EVALUATE SELECT LDP_MEDIAN(x) ... REPEAT 20`` over 53,940 rows (target: under 5 s).

Results: markdown tables on stdout and in ``benchmarks/results/backends.md`` (and ``.json``); ``--profile`` adds
the top of a cProfile of the median. Performance is measured here, never asserted in tests.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import json
import math
import os
import platform
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
DEFAULT_DATA = Path("/work/bench-data/backends")
RESULTS = HERE / "results" / "backends.md"
GENERATOR_VERSION = 1
CATEGORIES = [f"c{i}" for i in range(10)]
X_HI = 20000
EPSILON = 1
SEED = 12
WARM_ROWS = 2000   # the table each child runs its statement on once, untimed, before the measured run
MARK = "@@ldpql-bench@@ "   # the child's result line
# label -> (the SELECT list and options, the columns it reads); "median" is the planner's choice, "bayess" forces
# the adaptive protocol (many rounds: the case the round driver is about)
AGGREGATES = {"histogram": ("LDP_HISTOGRAM(c)", ("c",)), "mean": ("LDP_MEAN(y)", ("y",)),
              "mean_x": ("LDP_MEAN(x)", ("x",)), "median": ("LDP_MEDIAN(x)", ("x",)),
              "bayess": ("LDP_MEDIAN(x) OPTIONS (mechanism = 'bayess')", ("x",)),
              "mean_noseed": ("LDP_MEAN(y)", ("y",))}
# without a seed: a seeded run up to 2^27 users randomizes users rebuilt from value counts (the same answer on every
# backend), an unseeded one streams every row to the driver (the per-user path every production mean takes)
UNSEEDED = {"mean_noseed"}
LABELS = {"mean_noseed": "LDP_MEAN(y), no seed (per-user path)"}


def select(agg: str, group: str | None = None) -> str:
    call = AGGREGATES[agg][0]
    options = ""
    if " OPTIONS " in call:
        call, options = call.split(" OPTIONS ")
        options = " OPTIONS " + options
    if group:
        return f"SELECT {group}, {call} FROM t GROUP BY {group} EPSILON {EPSILON}{options}"
    return f"SELECT {call} FROM t EPSILON {EPSILON}{options}"
U = "((hash(i * 8 + {k}) >> 11)::DOUBLE / 9007199254740992)"   # uniform on [0, 1): 53 bits of a hash


# -- data ---------------------------------------------------------------------------------------------------

def generator_sql(start: int, stop: int) -> str:
    """Rows start..stop-1. DuckDB's hash(a, b) of two arguments is strongly correlated across b, so each column
    hashes its own integer i * 8 + k instead (checked: correlation ~1e-3 between columns)."""
    u = [U.format(k=k) for k in range(7)]
    normal = f"sqrt(-2 * ln({u[1]} + 1e-17)) * cos(2 * pi() * {u[2]})"
    return (f"SELECT i::BIGINT AS id, "
            f"least({X_HI}, greatest(0, round(exp(7.8 + 1.0 * {normal}))))::INTEGER AS x, "
            f"{u[3]} AS y, "
            f"'c' || least(9, floor(-ln(1 - {u[5]}) * 3))::INTEGER AS c, "
            f"'g' || (hash(i * 8 + 4) % 5) AS g, "
            f"'h' || (hash(i * 8 + 6) % 50) AS h "
            f"FROM range({start}, {stop}) AS r(i)")


def table_dir(data: Path, n: int) -> Path:
    return data / f"rows_{n}"


def files_for(n: int) -> int:
    return max(2, min(64, n // 2_500_000))


def check_data_dir(data: Path) -> None:
    data = data.resolve()
    if data == REPO or REPO in data.parents:
        sys.exit(f"--data {data} is inside the repository; give a directory outside it (default {DEFAULT_DATA})")


def generate(data: Path, n: int) -> Path:
    """Write table n (if not already there, complete and of this generator version) and its truth.npz."""
    import duckdb
    import numpy as np
    out = table_dir(data, n)
    done = out / "DONE"
    if done.exists() and (meta := json.loads(done.read_text())).get("version") == GENERATOR_VERSION:
        if "columns" not in meta:   # written before column sizes were recorded
            done.write_text(json.dumps(meta | {"columns": column_bytes(out)}))
        return out
    need = 16 * n / 1e9 * 1.3   # ~15 bytes a row, with a margin (GB)
    free = os.statvfs(data if data.exists() else data.parent).f_bavail * os.statvfs(data.parent).f_frsize / 1e9
    if need > free - 5:
        sys.exit(f"not enough disk for {n:,} rows: ~{need:.1f} GB needed, {free:.1f} GB free (keeping 5 GB)")
    out.mkdir(parents=True, exist_ok=True)
    for old in out.glob("*.parquet"):
        old.unlink()
    started = time.perf_counter()
    con = duckdb.connect()
    k = files_for(n)
    for f in range(k):
        lo, hi = n * f // k, n * (f + 1) // k
        con.execute(f"COPY ({generator_sql(lo, hi)}) TO '{out}/part-{f:03d}.parquet' (FORMAT parquet)")
    glob = f"'{out}/*.parquet'"
    x_counts = np.zeros(X_HI + 1, dtype=np.int64)
    rows = con.execute(f"SELECT x, count(*) FROM {glob} GROUP BY x").fetchnumpy()
    np.add.at(x_counts, rows["x"].astype(np.int64), rows["count_star()"].astype(np.int64))
    c = dict(con.execute(f"SELECT c, count(*) FROM {glob} GROUP BY c").fetchall())
    truth = {"n": n, "x_counts": x_counts, "c_counts": np.array([c.get(v, 0) for v in CATEGORIES]),
             "y_mean": con.execute(f"SELECT avg(y) FROM {glob}").fetchone()[0]}
    if n <= 1_000_000:   # per-group truth for the grouped targets
        for col, k_groups in (("g", 5), ("h", 50)):
            per = np.zeros((k_groups, X_HI + 1), dtype=np.int64)
            rows = con.execute(f"SELECT substr({col}, 2)::INTEGER AS k, x, count(*) AS n FROM {glob} "
                               "GROUP BY ALL").fetchnumpy()
            np.add.at(per, (rows["k"].astype(np.int64), rows["x"].astype(np.int64)), rows["n"].astype(np.int64))
            truth[f"x_counts_{col}"] = per
    np.savez(out / "truth.npz", **truth)
    size = sum(p.stat().st_size for p in out.glob("*.parquet"))
    done.write_text(json.dumps({"version": GENERATOR_VERSION, "n": n, "files": k, "bytes": size,
                                "columns": column_bytes(out), "seconds": round(time.perf_counter() - started, 1)}))
    print(f"generated {n:,} rows in {k} files, {size / 1e6:,.0f} MB, {time.perf_counter() - started:.1f} s: {out}",
          file=sys.stderr)
    return out


def column_bytes(directory: Path) -> dict[str, int]:
    """The compressed bytes of each column over the table's files (parquet metadata; reads no data)."""
    import duckdb
    rows = duckdb.connect().execute("SELECT path_in_schema, sum(total_compressed_size) FROM "
                                    f"parquet_metadata('{directory}/*.parquet') GROUP BY ALL").fetchall()
    return {str(c): int(b) for c, b in rows}


def declare_sql(directory: Path, name: str = "t") -> str:
    cats = ", ".join(f"'{c}'" for c in CATEGORIES)
    return (f"CREATE TABLE {name} FROM '{directory}/*.parquet' (x PRIVATE INTEGER BETWEEN 0 AND {X_HI} NOT NULL, "
            f"y PRIVATE BETWEEN 0 AND 1 NOT NULL, c PRIVATE IN ({cats}), g PUBLIC, h PUBLIC) BUDGET EPSILON 1000")


# -- the child: one statement in a fresh process -------------------------------------------------------------

class CountingDuck:
    """Stands in for a DuckDB connection in the benchmark's child process only: counts the statements sent
    through it, and those that read the data (their text names the data directory)."""

    def __init__(self, inner, needle: str, counts: dict):
        self._inner, self._needle, self._counts = inner, needle, counts

    def _count(self, query) -> None:
        self._counts["queries"] += 1
        if isinstance(query, str) and self._needle in query:
            self._counts["scans"] += 1

    def execute(self, query, *args, **kwargs):
        self._count(query)
        return self._inner.execute(query, *args, **kwargs)

    def sql(self, query, *args, **kwargs):
        self._count(query)
        return self._inner.sql(query, *args, **kwargs)

    query = sql

    def __getattr__(self, name):
        return getattr(self._inner, name)


def wrap_duckdb(con, needle: str) -> dict | None:
    """Replace every DuckDB connection held by ``con`` (or one attribute below it, e.g. a backend object) by a
    counting proxy. Returns the shared counters, or None when no DuckDB connection was found."""
    import duckdb
    counts = {"queries": 0, "scans": 0, "where": []}
    seen: set[int] = set()

    def visit(obj, path: str, depth: int) -> None:
        if id(obj) in seen or not hasattr(obj, "__dict__"):
            return
        seen.add(id(obj))
        for name, value in list(vars(obj).items()):
            if isinstance(value, duckdb.DuckDBPyConnection):
                setattr(obj, name, CountingDuck(value, needle, counts))
                counts["where"].append(f"{path}.{name}")
            elif depth < 2 and not isinstance(value, (str, bytes, int, float, dict, list, tuple)):
                visit(value, f"{path}.{name}", depth + 1)
    visit(con, "con", 0)
    return counts if counts["where"] else None


def vm_hwm_kb(pid: int | str = "self") -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def open_spark(spec: dict):
    """A local SparkSession with ``partitions`` input and shuffle partitions, and an ldpql connection over it."""
    from pyspark.sql import SparkSession

    import ldpql
    parts = spec.get("partitions")
    builder = SparkSession.builder.master(spec.get("master") or "local[2]").appName("ldpql-bench")
    builder = builder.config("spark.ui.enabled", "false").config("spark.driver.memory", "4g")
    if parts:
        split = max(1 << 20, math.ceil(spec["bytes"] / parts))
        builder = (builder.config("spark.sql.shuffle.partitions", str(parts))
                   .config("spark.default.parallelism", str(parts))
                   .config("spark.sql.files.maxPartitionBytes", str(split))
                   .config("spark.sql.files.openCostInBytes", "0")
                   .config("spark.sql.files.minPartitionNum", str(parts)))
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    # the backend's own partitions option if it has one, else the session's settings above; without spark=, its
    # own session (then the partition count is not set from here)
    tries = ([{"spark": session, "partitions": parts}] if parts else []) + [{"spark": session}, {}]
    for i, kwargs in enumerate(tries):
        try:
            con = ldpql.connect(backend="spark", evaluation=True, seed=spec["seed"], **kwargs)
        except (TypeError, ldpql.Error):
            if i == len(tries) - 1:
                raise
            continue
        spec["connect"] = ", ".join(sorted(kwargs)) or "backend only"
        return con, session
    raise AssertionError("unreachable")


def child(spec: dict) -> None:
    """Run one statement as the parent asked; print one MARK line with the measurements."""
    import ldpql
    out: dict = {"ok": False}
    session = None
    try:
        started = time.perf_counter()
        if spec["backend"] == "spark":
            con, session = open_spark(spec)
        else:
            con = ldpql.connect(evaluation=True, seed=spec["seed"])
        con.sql(declare_sql(Path(spec["dir"])))
        out["declare_s"] = time.perf_counter() - started
        if spec.get("warm"):   # the same statement on a tiny table first: imports and caches are not counted
            con.sql(declare_sql(Path(spec["warm"]), "w"))
            con.sql(spec["statement"].replace(" FROM t ", " FROM w ")).fetchall()
        counts = wrap_duckdb(con, str(spec["dir"])) if spec["backend"] == "duckdb" else None
        profiler = None
        if spec.get("profile"):
            import cProfile
            profiler = cProfile.Profile()
            profiler.enable()
        if session is not None:   # Spark jobs of the measured statement only
            session.sparkContext.setJobGroup("ldpql-bench", "benchmark statement")
        jvm = _jvm_pid(session) if session is not None else None
        read0 = rchar() + (rchar(jvm) if jvm else 0)
        cpu0 = tree_cpu()
        t0 = time.perf_counter()
        res = con.sql(spec["statement"])
        rows = res.fetchall()
        out["run_s"] = time.perf_counter() - t0
        out["cpu_s"] = tree_cpu() - cpu0
        out["read_bytes"] = rchar() + (rchar(jvm) if jvm else 0) - read0
        if profiler is not None:
            profiler.disable()
            out["profile"] = profile_text(profiler)
        out["hwm_kb"] = vm_hwm_kb()
        out["rows"] = [[_plain(v) for v in r] for r in rows]
        out["columns"] = list(getattr(res, "columns", []) or [])
        out["mechanism"], out["rounds"] = _chosen(res)
        if counts is not None:
            out["queries"], out["scans"], out["monitored"] = counts["queries"], counts["scans"], counts["where"]
        if session is not None:
            out["jobs"] = len(session.sparkContext.statusTracker().getJobIdsForGroup("ldpql-bench"))
            out["partitions"], out["connect"] = spec.get("partitions"), spec.get("connect")
            out["jvm_hwm_kb"] = _jvm_hwm(session)
        out["ok"] = True
    except BaseException as e:  # noqa: BLE001 - whatever happens, the parent gets a line saying what
        out["error"] = f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"[:300]
    finally:
        print(MARK + json.dumps(out), flush=True)
        if session is not None:
            with contextlib.suppress(Exception):
                session.stop()


def _plain(v):
    if isinstance(v, (int, float, str)) or v is None:
        return v
    try:
        return float(v)
    except (TypeError, ValueError):
        return str(v)


def _chosen(res) -> tuple[str | None, int | None]:
    try:
        chosen = res.plan.aggregates[0].chosen
        return chosen.mechanism, chosen.rounds
    except Exception:  # noqa: BLE001 - the plan's shape may change with the backend refactor; a label is lost
        return None, None


def _jvm_pid(session) -> int | None:
    try:
        return session.sparkContext._gateway.proc.pid
    except Exception:  # noqa: BLE001 - pyspark internals: without them only the JVM's share is missing
        return None


def _jvm_hwm(session) -> int:
    pid = _jvm_pid(session)
    return vm_hwm_kb(pid) if pid else 0


def tree_cpu() -> float:
    """CPU seconds (user + system) used so far by this process and every live descendant (the JVM, pyspark's
    Python workers): /proc/<pid>/stat fields 14-15, in clock ticks."""
    tick = os.sysconf("SC_CLK_TCK")
    stats: dict[int, tuple[int, float]] = {}
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            fields = (d / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        stats[int(d.name)] = (int(fields[1]), (int(fields[11]) + int(fields[12])) / tick)
    me, total, frontier = os.getpid(), 0.0, {os.getpid()}
    total += stats.get(me, (0, 0.0))[1]
    while frontier:
        kids = {pid for pid, (ppid, _) in stats.items() if ppid in frontier}
        total += sum(stats[k][1] for k in kids)
        frontier = kids
    return total


def rchar(pid: int | str = "self") -> int:
    """Bytes this process has read through read()/pread() (page cache hits included): DuckDB reads a parquet
    column chunk this way on every scan, so the bytes a statement reads, over the bytes of the columns it
    uses, count its scans whatever the SQL looks like (checked: one GROUP BY over x reads x's bytes, 1.01x)."""
    try:
        for line in Path(f"/proc/{pid}/io").read_text().splitlines():
            if line.startswith("rchar:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def profile_text(profiler, lines: int = 18) -> str:
    import io
    import pstats
    buf = io.StringIO()
    stats = pstats.Stats(profiler, stream=buf)
    stats.sort_stats("cumulative").print_stats(lines)
    buf.write("\n--- by own time ---\n")
    stats.sort_stats("tottime").print_stats(lines)
    text = buf.getvalue()
    return "\n".join(line for line in text.splitlines() if line.strip() and not line.startswith("   Ordered by"))


# -- the parent: run children, one at a time ---------------------------------------------------------------

def run_child(spec: dict, timeout: float) -> dict:
    """Run ``spec`` in a fresh Python process; its ru_maxrss comes from os.wait4 (that child alone)."""
    with tempfile.TemporaryFile("w+") as so, tempfile.TemporaryFile("w+") as se:
        load = os.getloadavg()[0]
        started = time.perf_counter()
        proc = subprocess.Popen([sys.executable, __file__, "--child", json.dumps(spec)], stdout=so, stderr=se,
                                start_new_session=True)
        status, usage, timed_out = None, None, False
        while status is None:
            pid, st, ru = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                status, usage = st, ru
            elif time.perf_counter() - started > timeout:
                os.killpg(proc.pid, signal.SIGKILL)
                timed_out = True
            else:
                time.sleep(0.1)
        proc.returncode = os.waitstatus_to_exitcode(status)
        so.seek(0)
        se.seek(0)
        lines = [line for line in so.read().splitlines() if line.startswith(MARK)]
        out = json.loads(lines[-1][len(MARK):]) if lines else {"ok": False}
        if not lines:
            tail = se.read().strip().splitlines()[-3:]
            out["error"] = f"timed out after {timeout:.0f} s" if timed_out else " / ".join(tail)[:300] or \
                f"exit code {proc.returncode}"
    out["rss_mb"] = (usage.ru_maxrss + out.get("jvm_hwm_kb", 0)) / 1024 if usage else None
    out["child_cpu_s"] = usage.ru_utime + usage.ru_stime if usage else None
    out["wall_s"] = time.perf_counter() - started
    out["load"], out["load_end"] = load, os.getloadavg()[0]
    out["spec"] = {k: v for k, v in spec.items() if k != "statement"} | {"statement": spec["statement"]}
    return out


def spark_status() -> str | None:
    """None when ``ldpql.connect(backend='spark')`` works here, else the reason it does not."""
    try:
        import pyspark  # noqa: F401
    except ImportError as e:
        return f"pyspark is not installed ({e}); pip install 'ldpql[spark]'"
    probe = ("import ldpql\ncon = ldpql.connect(backend='spark', evaluation=True)\n"
             "getattr(con, 'close', lambda: None)()\nprint('ok')")
    try:
        proc = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=180,
                              check=False)
    except subprocess.TimeoutExpired:
        return "ldpql.connect(backend='spark') did not return within 180 s"
    if proc.returncode == 0 and "ok" in proc.stdout:
        return None
    tail = [line for line in proc.stderr.strip().splitlines() if line.strip()]
    return tail[-1][:200] if tail else f"exit code {proc.returncode}"


# -- checks of the answers (not timed) -----------------------------------------------------------------------

def error_of(agg: str, truth, rows: list) -> str:
    """The answer's error against the generator's truth: rank error for a median, |error| for a mean, the
    largest frequency error for a histogram."""
    import numpy as np
    try:
        if agg in ("median", "bayess"):
            return f"rank err {rank_error(truth['x_counts'], rows[0][-1]):.4f}"
        if agg in ("mean", "mean_noseed"):
            return f"abs err {abs(float(rows[0][-1]) - float(truth['y_mean'])):.4f}"
        if agg == "mean_x":
            counts = truth["x_counts"]
            return f"abs err {abs(float(rows[0][-1]) - np.arange(len(counts)) @ counts / counts.sum()):.1f}"
        freq = {str(r[0]): float(r[-1]) for r in rows}
        est = np.array([freq[c] for c in CATEGORIES])
        return f"max freq err {np.max(np.abs(est - truth['c_counts'] / truth['c_counts'].sum())):.4f}"
    except (TypeError, ValueError, IndexError, KeyError):
        return ""


def rank_error(counts, value) -> float:
    """How far ``value``'s rank is from the middle: the smallest |F - 0.5| over the ranks it spans."""
    v = min(max(round(float(value)), 0), len(counts) - 1)
    total = float(counts.sum())
    below, upto = counts[:v].sum() / total, counts[:v + 1].sum() / total
    return 0.0 if below <= 0.5 <= upto else float(min(abs(below - 0.5), abs(upto - 0.5)))


# -- sections ------------------------------------------------------------------------------------------------

def fmt_s(r: dict | None) -> str:
    if r is None:
        return "-"
    if r.get("skipped"):
        return r["skipped"]
    if not r.get("ok"):
        return "failed: " + str(r.get("error", "?"))[:80]
    return f"{r['run_s']:.2f}"


def fmt_cpu(r: dict | None) -> str:
    return f"{r['cpu_s']:.1f}" if r and r.get("ok") and r.get("cpu_s") is not None else "-"


def fmt_start(r: dict | None) -> str:
    return f"{r['declare_s']:.1f}" if r and r.get("declare_s") is not None else "-"


def fmt_mb(r: dict | None) -> str:
    return f"{r['rss_mb']:,.0f}" if r and r.get("ok") and r.get("rss_mb") else "-"


def fmt_rate(r: dict | None, n: int) -> str:
    if not r or not r.get("ok") or not r.get("run_s"):
        return "-"
    rate = n / r["run_s"]
    return f"{rate / 1e6:.2f} M/s" if rate >= 1e6 else f"{rate / 1e3:.0f} k/s"


def fmt_reads(r: dict | None) -> str:
    return f"{r['column_reads']:.1f}" if r and r.get("ok") and r.get("column_reads") is not None else "-"


def ratio(a: dict | None, b: dict | None) -> float | None:
    if a and b and a.get("ok") and b.get("ok") and b.get("run_s"):
        return a["run_s"] / b["run_s"]
    return None


def fmt_ratio(x: float | None) -> str:
    return "-" if x is None else f"{x:.1f}x"


def table(header: list[str], rows: list[list]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


class Bench:
    """Runs the sections one child at a time and keeps every measurement (for the markdown and the JSON)."""

    def __init__(self, args, spark_reason: str | None):
        self.args, self.spark_reason = args, spark_reason
        self.backends = [b for b in args.backends if b == "duckdb" or spark_reason is None]
        self.runs: list[dict] = []
        self.md: list[str] = []

    def run(self, backend: str, directory: Path, statement: str, reads: tuple[str, ...] = (), best: int = 1,
            **extra) -> dict:
        """The fastest of ``best`` fresh-process runs of ``statement`` (every run is kept for the JSON)."""
        done = json.loads((directory / "DONE").read_text())
        spec = {"backend": backend, "dir": str(directory), "statement": statement, "seed": SEED,
                "bytes": done["bytes"], "n": done["n"], "master": self.args.master,
                "warm": str(generate(self.args.data, WARM_ROWS))} | extra
        kept = None
        for _ in range(best):
            r = run_child(spec, self.args.timeout)
            used = sum(done.get("columns", {}).get(c, 0) for c in reads)
            if r.get("ok") and used and r.get("read_bytes") is not None:
                r["column_reads"] = r["read_bytes"] / used   # how many times the columns it uses were read
            self.runs.append(r)
            state = (f"{r['run_s']:.2f} s, peak {r['rss_mb']:,.0f} MB, read {r.get('read_bytes', 0) / 1e6:,.0f} MB"
                     if r.get("ok") else f"FAILED {r.get('error')}")
            print(f"  [{backend}{'/' + str(extra['partitions']) if extra.get('partitions') else ''}] "
                  f"{statement[:100]}: {state}", file=sys.stderr, flush=True)
            if kept is None or (r.get("ok") and (not kept.get("ok") or r["run_s"] < kept["run_s"])):
                kept = r
            if not r.get("ok"):
                break
        return kept

    def skipped(self, backend: str, agg: str, n: int) -> dict | None:
        """A run left out (``--skip``, or BayeSS above ``--bayess-rows``), with the reason, or None."""
        if agg == "bayess" and n > self.args.bayess_rows:
            return {"ok": False, "skipped": f"not measured: BayeSS forced only up to {int(self.args.bayess_rows):,} rows"}
        for item in self.args.skip:
            b, a, rows, *why = item.split(":", 3)
            if b in (backend, "*") and a in (agg, "*") and int(float(rows)) == n:
                reason = why[0] if why else "left out (--skip)"
                return {"ok": False, "skipped": f"not measured: {reason}"}
        return None

    def emit(self, text: str) -> None:
        print(text, flush=True)
        self.md.append(text)

    def aggregates(self, sizes: list[int]) -> dict:
        """Section 1: each aggregate at each size on each backend."""
        import numpy as np
        found: dict = {}
        rows = []
        for n in sizes:
            directory = generate(self.args.data, n)
            truth = np.load(directory / "truth.npz")
            best = self.args.best_of if n <= 10 ** 7 else 1
            for agg, (call, reads) in AGGREGATES.items():
                if agg in UNSEEDED and n not in self.args.unseeded_rows:
                    continue
                per = {b: self.skipped(b, agg, n) or self.run(b, directory, select(agg), reads, best,
                                                              **({"seed": None} if agg in UNSEEDED else {}))
                       for b in self.backends}
                found[(n, agg)] = per
                d, s = per.get("duckdb"), per.get("spark")
                mech = next((f"{r['mechanism']} ({r['rounds']} round{'s' if r['rounds'] != 1 else ''})"
                             for r in per.values() if r.get("ok") and r.get("mechanism")), "-")
                errors = " / ".join(error_of(agg, truth, r["rows"]) if r.get("ok") else "-" for r in per.values())
                load = "/".join(f"{r['load']:.1f}" if r.get("load") is not None else "-" for r in per.values())
                rows.append([f"{n:,}", LABELS.get(agg, call), mech, fmt_s(d), fmt_cpu(d), fmt_mb(d), fmt_rate(d, n),
                             fmt_reads(d), fmt_s(s), fmt_cpu(s), fmt_start(s), fmt_mb(s), fmt_rate(s, n),
                             fmt_reads(s), load, errors])
        self.emit(f"## Aggregates (EPSILON {EPSILON}, evaluation mode, seed {SEED} unless said; best of "
                  f"{self.args.best_of} fresh processes up to 10^7 rows, one run above)\n")
        self.emit(table(["rows", "aggregate", "mechanism (rounds)", "DuckDB s", "DuckDB CPU s", "DuckDB peak MB",
                         "DuckDB users/s", "DuckDB column reads", "Spark s", "Spark CPU s", "Spark start s",
                         "Spark peak MB", "Spark users/s", "Spark column reads", "load (DuckDB/Spark)",
                         "error vs truth (DuckDB / Spark)"], rows))
        self.emit("\ns: wall time of the statement alone (connection and declaration excluded; an upper bound: the "
                  "2 cores are shared with other work, see the load); CPU s: user + system seconds over the "
                  "statement of the process and all its descendants (the JVM and pyspark's Python workers "
                  "included); Spark start s: import, session start and the declarations, before the statement; "
                  "peak MB: ru_maxrss of the fresh process that ran it (plus the JVM's VmHWM for Spark); column "
                  "reads: bytes the process (and the JVM) read during the statement over the compressed bytes of "
                  "the columns it uses (1 = one scan); load: 1-minute load average when the run started.")
        ratios = []
        for n in sizes:
            def rt(top: str, bottom: str, backend: str, n: int = n) -> str:
                return fmt_ratio(ratio(found[(n, top)].get(backend), found[(n, bottom)].get(backend)))
            ratios.append([f"{n:,}", rt("median", "mean_x", "duckdb"), rt("median", "mean", "duckdb"),
                           rt("bayess", "mean_x", "duckdb"), rt("median", "mean_x", "spark"),
                           rt("median", "mean", "spark"), rt("bayess", "mean_x", "spark")])
        self.emit("\n### Median / mean time ratio (target: within 3x)\n")
        self.emit(table(["rows", "DuckDB median(x) / mean(x)", "DuckDB median(x) / mean(y)",
                         "DuckDB bayess median(x) / mean(x)", "Spark median(x) / mean(x)",
                         "Spark median(x) / mean(y)", "Spark bayess / mean(x)"], ratios))
        return found

    def partitions(self, n: int) -> None:
        """Spark's scaling with partitions, at the smallest size."""
        self.emit(f"\n## Spark: scaling with partitions ({n:,} rows, master {self.args.master})\n")
        if "spark" not in self.backends:
            self.emit(f"spark: not available ({self.spark_reason})")
            return
        directory = generate(self.args.data, n)
        rows, same = [], []
        for agg in self.args.partition_aggregates:
            call, reads = AGGREGATES[agg]
            answers = set()
            for p in self.args.partitions:
                r = self.run("spark", directory, select(agg), reads, partitions=p)
                if r.get("ok"):
                    answers.add(json.dumps(r["rows"]))
                rows.append([call, p, fmt_s(r), fmt_cpu(r), fmt_mb(r), fmt_rate(r, n), r.get("jobs", "-"),
                             fmt_reads(r), str(r["rows"][0][-1])[:12] if r.get("ok") and r.get("rows") else "-",
                             f"{r['load']:.1f}" if r.get("load") is not None else "-"])
            same.append(f"{call}: {'the same answer (every row, full precision)' if len(answers) == 1 else 'DIFFERENT answers' if answers else 'no answer'} at partition counts {self.args.partitions}")
        self.emit(table(["aggregate", "partitions", "Spark s", "CPU s", "peak MB", "users/s", "Spark jobs",
                         "column reads", "answer (first row)", "load"], rows))
        self.emit("\nSeed " + str(SEED) + ": " + "; ".join(same) + ".")
        self.emit("\nPartitions are set on the session (input split size `spark.sql.files.maxPartitionBytes` = the "
                  "data's bytes / partitions, shuffle partitions, default parallelism); `ldpql.connect(backend="
                  "'spark', spark=session)`.")

    def targets(self, found: dict, sizes: list[int]) -> None:
        """Section 2: the issue's three targets."""
        a = self.args
        n_a = 10 ** 7 if (10 ** 7, "median") in found else min(sizes)
        label = "" if n_a == 10 ** 7 else f" (10^7 not in --rows: measured at {n_a:,})"
        rows = []
        for top, name in (("median", "planner's median"), ("bayess", "BayeSS median")):
            ra = {b: ratio(found[(n_a, top)].get(b), found[(n_a, "mean_x")].get(b)) for b in ("duckdb", "spark")}
            d = found[(n_a, top)].get("duckdb")
            rows.append([f"(a) {name}(x) / mean(x) time, {n_a:,} rows{label}",
                         (f"{fmt_ratio(ra['duckdb'])} ({fmt_s(d)} s / "
                          f"{fmt_s(found[(n_a, 'mean_x')].get('duckdb'))} s; {fmt_reads(d)} column reads)"),
                         fmt_ratio(ra["spark"]), "<= 3x", _met(ra["duckdb"], 3)])
        small = generate(a.data, a.grouped_rows)
        for col, groups in (("g", 5), ("h", 50))[:1 if a.quick else 2]:
            per = {b: self.run(b, small, select("median", col), ("x", col)) for b in self.backends}
            d, s = per.get("duckdb"), per.get("spark")
            scans = d.get("scans") if d and d.get("ok") else None
            rounds = d.get("rounds") if d and d.get("ok") else None
            rows.append([(f"(b) grouped median, {a.grouped_rows:,} rows, GROUP BY {col} ({groups} groups; "
                          f"{rounds if rounds is not None else '?'} rounds planned per group)"),
                         (f"{fmt_s(d)} s, {scans if scans is not None else '?'} scans, {fmt_reads(d)} column reads "
                          f"({d.get('queries', '?') if d else '?'} DuckDB statements)"),
                         f"{fmt_s(s)} s, {s.get('jobs', '?')} Spark jobs, {fmt_reads(s)} column reads" if s else "-",
                         "<= 3 scans", _met(scans, 3)])
        eva = generate(a.data, a.evaluate_rows)
        statement = f"EVALUATE {select('median')} REPEAT {a.repeat}"
        per = {b: self.run(b, eva, statement, ("x",)) for b in self.backends}
        d, s = per.get("duckdb"), per.get("spark")
        rows.append([(f"(c) EVALUATE median REPEAT {a.repeat}, {a.evaluate_rows:,} rows "
                      f"({d.get('mechanism') if d else '?'})"),
                     f"{fmt_s(d)} s, {d.get('scans', '?')} scans, {fmt_reads(d)} column reads" if d else "-",
                     f"{fmt_s(s)} s" if s else "-", "< 5 s",
                     _met(d.get("run_s") if d and d.get("ok") else None, 5, strict=True)])
        self.emit("\n## The issue's targets\n")
        self.emit(table(["target", "DuckDB", "Spark", "target", "DuckDB meets it?"], rows))
        self.emit("\nscans: DuckDB statements whose text names the table's files (counted by a proxy around the "
                  "DuckDB connection ldpql holds, in the benchmark's child process only); column reads: as above "
                  "(bytes read over the bytes of x and the group column), which does not depend on how the SQL is "
                  "written.")

    def profile(self, n: int) -> None:
        directory = generate(self.args.data, n)
        for agg in ("median", "bayess"):
            r = self.run("duckdb", directory, select(agg), AGGREGATES[agg][1], profile=True)
            self.emit(f"\n## Where a median's time goes: `{select(agg)}` (cProfile, DuckDB, {n:,} rows, "
                      f"{fmt_s(r)} s under the profiler; `backends.py:execute` is the counting proxy, i.e. DuckDB)\n")
            self.emit("```\n" + (r.get("profile") or str(r.get("error"))) + "\n```")


def _met(value: float | None, limit: float, strict: bool = False) -> str:
    if value is None:
        return "?"
    ok = value < limit if strict else value <= limit
    return "yes" if ok else f"no ({value / limit:.1f}x over)" if limit else "no"


def header(args, spark_reason: str | None) -> str:
    import duckdb
    commit = subprocess.run(["git", "-C", str(REPO), "log", "-1", "--format=%h %cs %s"], capture_output=True,
                            text=True, check=False).stdout.strip()
    try:
        import pyspark
        spark = f"pyspark {pyspark.__version__}"
    except ImportError:
        spark = "pyspark not installed"
    status = "spark: available" if spark_reason is None else f"spark: not available ({spark_reason})"
    return (f"# ldpql backends benchmark\n\n{datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC; "
            f"ldpql {commit[:80]}; duckdb {duckdb.__version__}; {spark}; python {platform.python_version()}; "
            f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f} at the start (the machine is shared: "
            f"read times as upper bounds).\n\n{status}\n\n"
            f"Command: `python benchmarks/backends.py {' '.join(sys.argv[1:])}`\n")


def parse_rows(text: str) -> list[int]:
    return [int(float(v)) for v in text.split(",") if v.strip()]


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA, help=f"data directory (default {DEFAULT_DATA})")
    ap.add_argument("--rows", default="1e7", help="sizes to time (and to --generate), e.g. 1e7,1e8")
    ap.add_argument("--generate", action="store_true", help="only write the data for --rows (default 1e7,1e8)")
    ap.add_argument("--billion", action="store_true", help="also 10^9 rows (~15 GB)")
    ap.add_argument("--backends", default="duckdb,spark", type=lambda s: s.split(","))
    ap.add_argument("--partitions", default="2,8,32,128", type=lambda s: [int(v) for v in s.split(",")])
    ap.add_argument("--bayess-rows", type=float, default=1e8, help="force BayeSS only up to this many rows")
    ap.add_argument("--unseeded-rows", default="1e7", type=parse_rows,
                    help="sizes at which to time LDP_MEAN(y) without a seed (the per-user path)")
    ap.add_argument("--skip", default=[], type=lambda s: [v for v in s.split(",") if v],
                    help="runs to leave out, 'backend:aggregate:rows[:reason]' ('*' for any), comma-separated")
    ap.add_argument("--partition-rows", type=float, default=None, help="rows for the partitions section "
                                                                        "(default: the smallest --rows)")
    ap.add_argument("--no-partitions", action="store_true")
    ap.add_argument("--partition-aggregates", default="histogram,median", type=lambda s: s.split(","),
                    help="aggregates timed at each partition count (default histogram,median)")
    ap.add_argument("--master", default="local[2]", help="Spark master (default local[2])")
    ap.add_argument("--grouped-rows", type=int, default=200_000)
    ap.add_argument("--evaluate-rows", type=int, default=53_940)
    ap.add_argument("--repeat", type=int, default=20, help="EVALUATE ... REPEAT for target (c)")
    ap.add_argument("--best-of", type=int, default=3, help="runs per statement up to 10^7 rows (default 3)")
    ap.add_argument("--no-targets", action="store_true")
    ap.add_argument("--profile", action="store_true", help="cProfile a median at the smallest size")
    ap.add_argument("--timeout", type=float, default=900, help="seconds per statement (default 900)")
    ap.add_argument("--out", type=Path, default=RESULTS, help=f"markdown results (default {RESULTS})")
    ap.add_argument("--quick", action="store_true", help="smoke run: 20,000 rows, small targets, seconds")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        child(json.loads(args.child))
        return
    check_data_dir(args.data)
    args.data = args.data.resolve()
    args.data.mkdir(parents=True, exist_ok=True)
    if args.generate:
        sizes = parse_rows(args.rows if "--rows" in " ".join(sys.argv) else "1e7,1e8") + ([10 ** 9] if args.billion
                                                                                         else [])
        print(subprocess.run(["df", "-h", str(args.data)], capture_output=True, text=True,
                             check=False).stdout, file=sys.stderr)
        for n in sizes:
            generate(args.data, n)
        return
    sizes = parse_rows(args.rows) + ([10 ** 9] if args.billion else [])
    if args.quick:
        sizes, args.grouped_rows, args.evaluate_rows, args.repeat, args.best_of = [20_000], 20_000, 5_000, 2, 1
        args.partitions = args.partitions[:1]
    spark_reason = spark_status() if "spark" in args.backends else "not requested (--backends)"
    if spark_reason:
        print(f"spark: not available ({spark_reason})", flush=True)
    bench = Bench(args, spark_reason)
    bench.emit(header(args, spark_reason))
    found = bench.aggregates(sizes)
    if not args.no_partitions:
        bench.partitions(int(args.partition_rows) if args.partition_rows else min(sizes))
    if not args.no_targets:
        bench.targets(found, sizes)
    if args.profile:
        bench.profile(min(sizes))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("\n".join(bench.md) + "\n")
    args.out.with_suffix(".json").write_text(json.dumps(bench.runs, indent=1, default=str) + "\n")
    print(f"\nwritten: {args.out} and {args.out.with_suffix('.json').name}", file=sys.stderr)


if __name__ == "__main__":
    main()

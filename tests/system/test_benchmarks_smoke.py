"""benchmarks/run.py runs end to end (DESIGN §5: performance is measured in benchmarks/, never timed in tests).

The smoke run uses tiny data and hides the peer libraries, so it takes a few seconds whether or not
multi-freq-ldpy and pure-ldp are installed, and it checks that missing peers are reported, not fatal.
Nothing here asserts a speed.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

RUN = Path(__file__).resolve().parents[2] / "benchmarks" / "run.py"

HIDE_PEERS = ("import runpy, sys; sys.modules['multi_freq_ldpy'] = None; sys.modules['pure_ldp'] = None; "
              "runpy.run_path({path!r}, run_name='__main__')")


def test_quick_benchmark_runs_and_reports_every_section(tmp_path):
    proc = subprocess.run([sys.executable, "-c", HIDE_PEERS.format(path=str(RUN)), "--quick", "--out", str(tmp_path)],
                          capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    for fragment in ("ldpql GRR per-user", "ldpql OUE exact", "numpy inline GRR", "ldpql piecewise per-user",
                     "multi-freq-ldpy", "not available", "pure-ldp"):
        assert fragment in proc.stdout, fragment
    results = json.loads((tmp_path / "results.json").read_text())
    measured = [r for r in results["rows"] if "users_s" in r]
    assert len(measured) >= 12 and all(r["users_s"] > 0 for r in measured)
    assert all(r["err"] < 0.5 for r in measured if r["err"] is not None)  # every estimate is near the truth
    assert (tmp_path / "results.md").read_text().startswith("# ldpql benchmarks")


BACKENDS = Path(__file__).resolve().parents[2] / "benchmarks" / "backends.py"
HIDE_SPARK = ("import runpy, sys; sys.modules['pyspark'] = None; "
              "runpy.run_path({path!r}, run_name='__main__')")


def test_quick_backends_benchmark_runs_every_section(tmp_path):
    """benchmarks/backends.py --quick: generates tiny parquet tables, runs every statement in a fresh process,
    reports Spark as not available (pyspark hidden), and counts the scans of a grouped median."""
    out = tmp_path / "backends.md"
    proc = subprocess.run([sys.executable, "-c", HIDE_SPARK.format(path=str(BACKENDS)), "--quick",
                           "--data", str(tmp_path / "data"), "--out", str(out)],
                          capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    for fragment in ("## Aggregates", "Median / mean time ratio", "spark: not available", "## The issue's targets",
                     "(b) grouped median", "(c) EVALUATE median", "LDP_HISTOGRAM(c)", "LDP_MEAN(y)", "LDP_MEDIAN(x)"):
        assert fragment in proc.stdout, fragment
    assert out.read_text().startswith("# ldpql backends benchmark")
    runs = json.loads(out.with_suffix(".json").read_text())
    assert runs and all(r["ok"] and r["run_s"] > 0 and r["rss_mb"] > 0 for r in runs), [r.get("error") for r in runs]
    grouped = [r for r in runs if "GROUP BY g" in r["spec"]["statement"]]
    assert grouped and grouped[0]["scans"] >= 1 and grouped[0]["queries"] >= grouped[0]["scans"]
    assert len(grouped[0]["rows"]) == 5   # one median per group
    assert "rank err" in proc.stdout and "max freq err" in proc.stdout   # answers were checked against the truth

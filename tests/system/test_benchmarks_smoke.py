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

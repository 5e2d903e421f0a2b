"""examples/coverage_grid.py runs end to end on a tiny subset (a smoke test: no statistical assertion at this size).

It checks the CSVs' columns, that coverage is a proportion inside its own exact range, that regret is at least 1
(the chosen plan is one of the forced candidates), the plots, and that a second run resumes instead of redoing.
"""

from __future__ import annotations

import csv
import importlib.util
import subprocess
import sys
from pathlib import Path

import numpy as np

SCRIPT = Path(__file__).resolve().parents[2] / "examples" / "coverage_grid.py"
ONLY = r"(count_b|mean_h|topk_c|quantile50_h|min_h|count\+mean)/.*conf=0.95"


def _load():
    spec = importlib.util.spec_from_file_location("coverage_grid", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault(spec.name, module)  # dataclasses look their module up while the class is built
    spec.loader.exec_module(module)
    return module


def _run(out: Path) -> str:
    proc = subprocess.run([sys.executable, str(SCRIPT), "--quick", "--reps", "5", "--only", ONLY, "--out", str(out)],
                          capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout


def test_quick_grid_writes_coverage_and_regret(tmp_path):
    grid = _load()
    stdout = _run(tmp_path)
    assert "6 cells, 0 already" in stdout and "[6/6]" in stdout and "| family | what | conf |" in stdout
    with (tmp_path / "coverage.csv").open(newline="") as f:
        cov = list(csv.DictReader(f))
    assert list(cov[0]) == grid.COVERAGE_COLUMNS
    assert {r["family"] for r in cov} == {"count", "mean", "topk", "quantile", "extreme", "multi"}
    assert {r["what"] for r in cov} == {"interval", "rank error"}
    assert all(r["reps"] == "5" for r in cov)
    unchecked = [r for r in cov if r["status"] != "ok"]   # the bucket search's interval is not for the extreme
    assert all(r["family"] == "extreme" and r["status"].startswith("no interval check") for r in unchecked)
    for r in (r for r in cov if r["status"] == "ok"):
        c, lo, hi = float(r["coverage"]), float(r["cov_low"]), float(r["cov_high"])
        assert 0.0 <= lo <= c <= hi <= 1.0
        assert r["within_2pt"] == str(abs(c - 0.95) <= 0.02 + 1e-12)
    with (tmp_path / "regret.csv").open(newline="") as f:
        reg = list(csv.DictReader(f))
    assert list(reg[0]) == grid.REGRET_COLUMNS
    assert {r["family"] for r in reg} == {"mean", "quantile", "extreme"}
    for r in reg:
        assert float(r["regret"]) >= 1.0 and r["chosen"] in r["candidates"]
        assert len(r["candidates"].split("; ")) >= 2      # at least one forced candidate besides the chosen one
    assert (tmp_path / "coverage.png").stat().st_size > 0 and (tmp_path / "regret.png").stat().st_size > 0
    assert "6 cells, 6 already" in _run(tmp_path)          # resumed: nothing is run twice
    with (tmp_path / "coverage.csv").open(newline="") as f:
        assert len(list(csv.DictReader(f))) == len(cov)


def test_rank_error_is_the_distance_to_the_ranks_an_estimate_holds():
    grid = _load()
    values = np.array([1, 2, 2, 3])
    assert grid._rank_error(values, 2, 0.5) == 0.0      # 2 holds the ranks [0.25, 0.75]
    assert grid._rank_error(values, 3, 0.5) == 0.25     # 3 holds [0.75, 1]
    assert grid._rank_error(values, 0, 0.1) == 0.1      # below every value: rank 0

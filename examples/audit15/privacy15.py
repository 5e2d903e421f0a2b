"""Audit 15: replay test of today's three changes. Two tables with the same public facts (n, declaration, public
group column) but different private data; the second statement's rounds are answered with the first run's RELEASED
counts (the executor's _run_round is taped as in tests/system/test_audit14_quantile.py::_Tape). Everything the result
shows (values, intervals, notes, extra['rank_error']) must then be identical. Statements cover: padding (tau < 1/2 and
> 1/2, calibrated and certified intervals), bucketed integer column (resolution), bucketed DOUBLE, GROUP BY with
several taus, forced NaiveNBS and shuffled NaiveNBS.

    nice python privacy15.py   -> prints one line per statement, and privacy15.txt
"""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pyarrow as pa

import ldpql
from ldpql.executor import Executor
from ldpql.mechanisms import Reply

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE.parent / "audit14"))
import sqlpath  # noqa: E402

TAPE = {"replies": [], "replay": False}
original = Executor._run_round


def run_round(self, group, rng, step):
    if TAPE["replay"]:
        self.touched = True
        return TAPE["replies"].pop(0)
    out = original(self, group, rng, step)
    TAPE["replies"].append({c: Reply(np.array(r.summary, copy=True), int(r.n)) for c, r in out.items()})
    return out


Executor._run_round = run_round

N = 3000
rng = np.random.default_rng(1518)
g = np.repeat(["a", "b"], [700, N - 700])
DATA = {
    "int": (np.minimum(rng.zipf(1.5, N) - 1, 5000), np.rint(rng.uniform(0, 5000, N)), {"between": (0, 5000), "integer": True}),
    "dbl": (rng.normal(3, 0.1, N), rng.uniform(0, 10, N), {"between": (0.0, 10.0)}),
}
STATEMENTS = [
    ("int", "SELECT LDP_QUANTILE(x, 0.1, mechanism => 'bayess', quantile_mode => 'padding') FROM t EPSILON 1"),
    ("int", "SELECT LDP_QUANTILE(x, 0.9, mechanism => 'bayess', quantile_mode => 'padding', interval => 'calibrated')"
            " FROM t EPSILON 0.5"),
    ("int", "SELECT LDP_QUANTILE(x, 0.25, resolution => 64, mechanism => 'naive_nbs') FROM t EPSILON 2"),
    ("int", "SELECT g, LDP_QUANTILE(x, 0.1, resolution => 100) AS a, LDP_MEDIAN(x, resolution => 100) AS b, "
            "LDP_QUANTILE(x, 0.95, resolution => 100) AS c FROM t GROUP BY g EPSILON 1"),
    ("dbl", "SELECT LDP_QUANTILE(x, 0.3, resolution => 1024) FROM t EPSILON 4"),
    ("dbl", "SELECT LDP_QUANTILE(x, 0.7, resolution => 128, mechanism => 'shuffle_nbs') FROM t EPSILON 1 DELTA 1e-6 OPTIONS (model = 'shuffle')"),
    ("dbl", "SELECT g, LDP_QUANTILE(x, 0.02, mechanism => 'bayess', quantile_mode => 'padding', "
            "interval => 'calibrated') FROM t GROUP BY g EPSILON 2"),
]


def table(x, decl):
    con = ldpql.connect(evaluation=True)
    con.register("t", pa.table({"g": g, "x": x}), private={"x": decl}, public=["g"], budget=1e9, delta=1e-3)
    return con


def main():
    lines = []
    for i, (kind, sql) in enumerate(STATEMENTS):
        a, b, decl = DATA[kind]
        sql = sql.replace("OPTIONS (", f"OPTIONS (seed = {1518 + i}, ") if "OPTIONS (" in sql else f"{sql} OPTIONS (seed = {1518 + i})"
        TAPE["replies"].clear()
        TAPE["replay"] = False
        with sqlpath.spy() as seen:
            first = table(a, decl).sql(sql)
            TAPE["replay"] = True
            second = table(b, decl).sql(sql)
        left = len(TAPE["replies"])
        ra = [x.extra.get("rank_error") for x in seen[0][2].values()]
        rb = [x.extra.get("rank_error") for x in seen[1][2].values()]
        same = (first.fetchall() == second.fetchall() and first.intervals() == second.intervals()
                and first.notes == second.notes and ra == rb and left == 0)
        line = f"{'SAME' if same else 'DIFFERENT'} rows={first.fetchall()} rank_errors={ra} | {sql}"
        if not same:
            line += f"\n   second rows={second.fetchall()} rank_errors={rb} left={left}\n   notes1={first.notes}\n   notes2={second.notes}"
        print(line, flush=True)
        lines.append(line)
    (HERE / "privacy15.txt").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()

"""Audit 16, part 3: are the new read-out (crossing) and the tree's floor (coin_var) post-processing of the release only?

Tape test through SQL: run a statement on table A (evaluation mode, a seed), recording every Reply the executor hands a
protocol (``Executor._advance``: the only channel from the data to a protocol); then run the same statement on table B
(same public facts: row count, GROUP BY column and group sizes; DIFFERENT private values) with every Reply replaced by
A's taped one. If nothing but the released counts reaches the answer, its value, interval, extra['rank_error'],
extra['coin_var'] and every note are identical. A control run on B without the tape must differ (else the test has no
power). Statements: tree forced (one coin per integer, bucketed DOUBLE, GROUP BY with 3 q's, tiny group), histogram
forced, and the planner's own choice at ε = 4, resolution 1024.

    nice python priv16.py   -> priv16.txt
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa

import ldpql
from ldpql import executor

HERE = Path(__file__).parent
lines = []
_orig_advance = executor.Executor._advance


def say(s):
    print(s, flush=True)
    lines.append(s)


class Tape:
    def __init__(self):
        self.mode, self.tape, self.i = None, [], 0

    def __enter__(self):
        tape = self

        def advance(ex, t, reply):
            if reply is not None:
                if tape.mode == "record":
                    tape.tape.append(reply)
                elif tape.mode == "replay":
                    reply = tape.tape[tape.i]
                    tape.i += 1
            return _orig_advance(ex, t, reply)
        executor.Executor._advance = advance
        return self

    def __exit__(self, *a):
        executor.Executor._advance = _orig_advance


def result_of(con, sql, spy_answers):
    from sql16 import spy
    with spy() as seen:
        res = con.sql(sql)
    p, cells, answers = seen[-1]
    out = {"rows": res.fetchall(), "intervals": repr(res.intervals()), "notes": [n for n in res.notes]}
    for k, a in sorted(answers.items()):
        out[f"rank_error{k}"] = a.extra.get("rank_error")
        out[f"coin_var{k}"] = a.extra.get("coin_var")
        out[f"coin{k}"] = a.extra.get("coin")
    return out


def table(data, group):
    con = ldpql.connect(evaluation=True)
    decl = {"x": {"between": data["decl"][0], **({"integer": True} if data["decl"][1] else {})}}
    con.register("t", pa.table({k: v for k, v in data.items() if k in ("g", "x")}), private=decl,
                 public=["g"] if group else [], budget=1e9)
    return con


def main():
    r = np.random.default_rng([1616, 99])
    n = 3000
    g = np.repeat(["a", "b", "c"], [40, 460, 2500])
    A_int = {"x": np.minimum(r.pareto(1.1, n) * 10, 4095).astype(np.int64), "g": g, "decl": ((0, 4095), True)}
    B_int = {"x": r.integers(0, 4096, n), "g": g, "decl": ((0, 4095), True)}
    A_dbl = {"x": r.beta(2, 9, n), "g": g, "decl": ((0.0, 1.0), False)}
    B_dbl = {"x": np.where(r.random(n) < 0.5, 1.0, r.random(n)), "g": g, "decl": ((0.0, 1.0), False)}
    stmts = [
        ("tree, INTEGER one coin per value, 3 q", A_int, B_int, False,
         "SELECT LDP_QUANTILE(x, 0.1, mechanism => 'hierarchical'), LDP_QUANTILE(x, 0.5, mechanism => 'hierarchical'), "
         "LDP_QUANTILE(x, 0.9, mechanism => 'hierarchical') FROM t EPSILON 4"),
        ("tree, DOUBLE 64 buckets, GROUP BY (groups 40/460/2,500), 3 q", A_dbl, B_dbl, True,
         "SELECT g, LDP_QUANTILE(x, 0.1, resolution => 64, mechanism => 'hierarchical'), "
         "LDP_QUANTILE(x, 0.5, resolution => 64, mechanism => 'hierarchical'), "
         "LDP_QUANTILE(x, 0.9, resolution => 64, mechanism => 'hierarchical') FROM t GROUP BY g EPSILON 4"),
        ("histogram, DOUBLE default resolution, 2 q", A_dbl, B_dbl, False,
         "SELECT LDP_QUANTILE(x, 0.5, mechanism => 'histogram'), LDP_QUANTILE(x, 0.99, mechanism => 'histogram') "
         "FROM t EPSILON 8"),
        ("planner's choice, INTEGER resolution 1024, GROUP BY, 2 q", A_int, B_int, True,
         "SELECT g, LDP_QUANTILE(x, 0.5, resolution => 1024), LDP_QUANTILE(x, 0.9, resolution => 1024) FROM t "
         "GROUP BY g EPSILON 4"),
        ("tree, postprocess => 'none' (raw: coin_var = raw var), median", A_int, B_int, False,
         "SELECT LDP_MEDIAN(x, mechanism => 'hierarchical', postprocess => 'none') FROM t EPSILON 4"),
    ]
    for label, A, B, group, sql in stmts:
        full = f"{sql} OPTIONS (seed = 161699)"
        with Tape() as tape:
            tape.mode = "record"
            ra = result_of(table(A, group), full, True)
            tape.mode = "replay"
            rb = result_of(table(B, group), full, True)
            used = tape.i
        rb_free = result_of(table(B, group), full, True)
        same = repr(ra) == repr(rb)
        differs_without = repr(ra) != repr(rb_free)
        keys = [k for k in ra if k.startswith("coin_var")]
        say(f"{label}: taped B == A: {same} ({used} replies replayed; {len(keys)} answers); control (B untaped) "
            f"differs from A: {differs_without}")
        if not same:
            for k in ra:
                if repr(ra[k]) != repr(rb.get(k)):
                    say(f"    DIFF {k}: A {ra[k]!r} / B {rb.get(k)!r}")
    (HERE / "priv16.txt").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()

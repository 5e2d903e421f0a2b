"""The long fuzzing run (issue #10, class 13): 10^5 generated statements and API argument values, under the
properties of ``tests/fuzzing.py`` (only ldpql.Error escapes; a statement that raised spent nothing; the
ledger stays consistent). Not part of the test suite.

    python scripts/fuzz.py                      # 100,000 examples over every target
    python scripts/fuzz.py --examples 5000 --only statements,mutated

Each target is a hypothesis strategy run without shrinking; every violation is grouped by its kind (for an
escape: the exception type and the line that raised it) and the shortest input seen of each kind is kept as
its minimal reproducer. The summary lists examples run per target, violations per kind, and those inputs.
Exit status: 0 when nothing was found, 1 otherwise.
"""

from __future__ import annotations

import argparse
import signal
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any, Callable

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # `tests.fuzzing` lives in the repository

from hypothesis import HealthCheck, Phase, given, seed, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

import ldpql  # noqa: E402
from tests import fuzzing as fz  # noqa: E402

SESSION = fz.Session()


class Findings:
    """Examples run per target; per violation kind, how often and the shortest input that showed it."""

    def __init__(self) -> None:
        self.runs: Counter[str] = Counter()
        self.kinds: Counter[str] = Counter()
        self.minimal: dict[str, tuple[str, str, str]] = {}   # kind -> (target, input, detail)

    def record(self, target: str, shown: str, v: fz.Violation) -> None:
        self.kinds[v.kind] += 1
        best = self.minimal.get(v.kind)
        if best is None or len(shown) < len(best[1]):
            self.minimal[v.kind] = (target, shown, v.detail)


def statement_target(text: str) -> None:
    fz.check_statement(SESSION.get(), fz.clamp_repeat(text))


def value_target(value: Any) -> None:
    fz.check_statement(SESSION.get(), value)


def register_target(args: tuple[dict, str, Any]) -> None:
    kwargs, name, data = args
    con = SESSION.get()
    before, tables = fz.Snapshot.of(con), con.tables()
    _, error = fz.call(lambda: con.register(name, data, **kwargs))
    if error is not None and (con.tables() != tables or con.ledger.charges() != before.charges):
        raise fz.Violation("failed register changed the catalog or ledger", str(error)[:200])
    fz.check_ledger(con, before, altered=False)
    SESSION.con = None if con.tables() != ["t"] else con   # a new table: the next example starts afresh


def connect_target(kwargs: dict) -> None:
    con, _ = fz.call(lambda: ldpql.connect(**kwargs))
    if con is not None:
        fz.call(lambda: con.register("t", fz.TABLE, private=fz.PRIVATE, public=fz.PUBLIC, budget=4.0))
        fz.check_statement(con, "SELECT LDP_MEAN(x) EPSILON 1 FROM t")
        fz.check_statement(con, "EVALUATE SELECT LDP_HISTOGRAM(c) EPSILON 1 FROM t REPEAT 1")
        fz.call(con.close)


def api_target(args: tuple[Any, Any, Any]) -> None:
    text, table, fmt = args
    con = SESSION.get()
    fz.call(lambda: con.explain(fz.clamp_repeat(text) if isinstance(text, str) else text))
    fz.call(lambda: con.remaining_budget(table))
    result, _ = fz.call(lambda: con.sql("SELECT g, LDP_HISTOGRAM(c) EPSILON INF FROM t GROUP BY g"))
    fz.call(lambda: (result.render(fmt), result.fetchone(), result.arrow(), result.intervals()))


def targets(tmp: str) -> dict[str, tuple[float, st.SearchStrategy, Callable[[Any], None]]]:
    """name -> (share of the examples, strategy, the function that checks one example)."""
    return {
        "statements": (0.30, fz.statement(), statement_target),
        "mutated": (0.20, fz.mutated(fz.statement()), statement_target),
        "text": (0.15, fz.any_text(), statement_target),
        "where": (0.08, fz.bool_expr(2000).map(lambda w: f"SELECT LDP_MEAN(x) EPSILON 1 FROM t WHERE {w}"),
                  statement_target),
        "epsilon": (0.10, st.builds(lambda c, e, o: f"SELECT {c} EPSILON {e} FROM t{o}", fz.aggregate_call(),
                                    st.sampled_from(fz.EPSILONS),
                                    st.sampled_from(["", " OPTIONS (simulation = 'per_user')"])), statement_target),
        "sql-values": (0.01, fz.odd(), value_target),
        "register": (0.08, st.tuples(fz.register_kwargs(), st.sampled_from(["r", "", "t", "select"]),
                                     fz.odd(fz.TABLE, fz.TABLE, fz.TABLE)), register_target),
        "connect": (0.02, fz.connect_kwargs(tmp), connect_target),
        "api": (0.06, st.tuples(st.one_of(fz.statement(), fz.any_text(), fz.odd()), fz.odd("t", "nope"),
                                fz.odd("table", "csv", "json")), api_target),
    }


def run_target(name: str, count: int, strategy: st.SearchStrategy, check: Callable[[Any], None],
               findings: Findings, base_seed: int) -> None:
    """Run ``count`` examples of one target (no shrinking: the shortest input per kind is kept instead)."""
    @seed(base_seed + sum(map(ord, name)))
    @settings(max_examples=count, deadline=None, database=None, phases=[Phase.generate],
              suppress_health_check=list(HealthCheck))
    @given(strategy)
    def one(value):
        findings.runs[name] += 1
        if sum(findings.runs.values()) % 5000 == 0:
            print(f"  ... {sum(findings.runs.values()):,} examples, {len(findings.kinds)} kind(s) of violation",
                  file=sys.stderr, flush=True)
        try:
            check(value)
        except fz.Violation as v:
            findings.record(name, ascii(value)[:2000], v)

    one()


def report(findings: Findings, elapsed: float) -> str:
    lines = [f"examples run: {sum(findings.runs.values()):,} in {elapsed:,.0f} s",
             "  " + ", ".join(f"{k} {v:,}" for k, v in findings.runs.items()),
             f"violations: {sum(findings.kinds.values()):,} in {len(findings.kinds)} kind(s)"]
    for kind, n in findings.kinds.most_common():
        target, shown, detail = findings.minimal[kind]
        lines += [f"\n[{n:,}x] {kind}", f"  target: {target}", f"  minimal input: {shown[:600]}",
                  f"  raised: {detail[:300]}"]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--examples", type=int, default=100_000, help="examples in total (default 100,000)")
    p.add_argument("--only", help="comma-separated targets to run (default: all)")
    p.add_argument("--seed", type=int, default=0, help="hypothesis seed (the run is reproducible)")
    args = p.parse_args(argv)
    findings, started = Findings(), time.monotonic()
    signal.signal(signal.SIGTERM, signal.default_int_handler)  # `kill PID` stops early and still reports
    with tempfile.TemporaryDirectory() as tmp:
        Path(tmp, "notsqlite.ldpql").write_text("this is not a database\n" * 50)
        chosen = {k: v for k, v in targets(tmp).items() if not args.only or k in args.only.split(",")}
        total_share = sum(share for share, _, _ in chosen.values())
        try:
            for name, (share, strategy, check) in chosen.items():
                count = max(1, round(args.examples * share / total_share))
                t0 = time.monotonic()
                run_target(name, count, strategy, check, findings, args.seed)
                print(f"{name}: {findings.runs[name]:,} examples in {time.monotonic() - t0:,.0f} s", file=sys.stderr)
        except KeyboardInterrupt:  # a long run stopped early still reports what it found
            print("interrupted: the summary covers the examples run so far", file=sys.stderr)
    print(report(findings, time.monotonic() - started))
    return 1 if findings.kinds else 0


if __name__ == "__main__":
    sys.exit(main())

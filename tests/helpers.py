"""Loaders for the golden .sql fixtures (one statement per line; '--' lines are comments), and a recorder of a
protocol's rounds."""

from __future__ import annotations

from pathlib import Path

FIXTURES = Path(__file__).parent / "fixtures"


def load_sql_lines(name: str) -> list[str]:
    """Every non-empty, non-comment line of fixtures/<name>."""
    lines = (FIXTURES / name).read_text(encoding="utf-8").splitlines()
    return [line for line in lines if line.strip() and not line.lstrip().startswith("--")]


def load_error_cases(name: str) -> list[tuple[str, str, int, int]]:
    """Lines `statement  -- ErrorClass line:column` of fixtures/<name>, as (statement, class, line, column)."""
    cases = []
    for line in load_sql_lines(name):
        stmt, _, expect = line.rpartition("-- ")
        cls, _, where = expect.strip().partition(" ")
        ln, _, col = where.partition(":")
        cases.append((stmt.rstrip(), cls, int(ln), int(col)))
    return cases


def record_rounds(protocol, rng, **data) -> tuple[list, object]:
    """Run a protocol through :func:`ldpql.simulation.simulate` (``coins=`` or ``hist=``), recording every round it
    asks: (the rounds, the estimate)."""
    from ldpql.simulation import simulate
    rounds = []

    def spy():
        rnd = next(protocol)
        while True:
            rounds.append(rnd)
            try:
                rnd = protocol.send((yield rnd))
            except StopIteration as stop:
                return stop.value
    return rounds, simulate(spy(), rng, **data)

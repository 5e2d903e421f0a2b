"""The ``ldpql`` command: run statements from -c, a script, standard input, or a prompt.

It uses the public API only and holds no privacy logic. A script is parsed whole before anything runs, so a
syntax error anywhere changes nothing; at run time it stops at the first failing statement and says which.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import ldpql
from ldpql.grammar import parse

FORMATS = ("table", "csv", "json", "markdown")


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="ldpql", description="A query engine for local differential privacy.",
                                epilog='example: ldpql --demo -c "SELECT LDP_HISTOGRAM(city) EPSILON 1 FROM people"')
    p.add_argument("script", nargs="?", help="a .sql script to run ('-' reads standard input)")
    p.add_argument("-c", "--command", help="statements to run, separated by ';'")
    p.add_argument("--ledger", help="budget ledger file (SQLite; created if missing). Default: in memory")
    p.add_argument("--seed", type=int, help="make the noise reproducible")
    p.add_argument("--evaluate", action="store_true", help="evaluation mode: allow EVALUATE and EPSILON INF "
                   "(true answers; never for releases)")
    p.add_argument("--demo", action="store_true", help="declare the embedded demo table `people`")
    p.add_argument("--database", help="a DuckDB database file whose tables CREATE TABLE ... FROM may name")
    p.add_argument("--format", choices=FORMATS, default="table", help="how results are printed")
    p.add_argument("--history", help="REPL history file (default: $LDPQL_HISTORY, else "
                   "$XDG_DATA_HOME/ldpql/history or ~/.local/share/ldpql/history)")
    p.add_argument("--version", action="version", version=f"ldpql {ldpql.__version__}")
    return p


class ProgressBar:
    """A one-line progress bar on stderr, shown only once a statement has run for about a second."""

    def __init__(self, stream=sys.stderr, delay: float = 1.0):
        self.stream, self.delay, self.start, self.shown = stream, delay, time.monotonic(), False

    def reset(self) -> None:
        self.start, self.shown = time.monotonic(), False

    def __call__(self, fraction: float, message: str) -> None:
        if time.monotonic() - self.start < self.delay or not self.stream.isatty():
            return
        filled = int(30 * min(max(fraction, 0.0), 1.0))
        self.stream.write(f"\r[{'#' * filled}{' ' * (30 - filled)}] {fraction:4.0%} {message[:60]:<60}")
        self.stream.flush()
        self.shown = True

    def clear(self) -> None:
        if self.shown:
            self.stream.write("\r" + " " * 100 + "\r")
            self.stream.flush()
        self.reset()


def run_script(con: ldpql.Connection, text: str, fmt: str, bar: ProgressBar, out=sys.stdout) -> int:
    """Run every statement of ``text``; print results; return the exit status (0 ok, 1 error)."""
    try:
        statements = parse(text)
    except ldpql.Error as e:
        print(e, file=sys.stderr)
        return 1
    for i, stmt in enumerate(statements, 1):
        bar.reset()
        try:
            result = con.run(stmt, text)
        except ldpql.Error as e:
            bar.clear()
            where = f"statement {i} of {len(statements)}" + (f" (line {stmt.pos.line})" if stmt.pos.line else "")
            print(f"{e}\n(stopped at {where}; the statements before it ran)" if len(statements) > 1 else e,
                  file=sys.stderr)
            return 1
        except KeyboardInterrupt:
            bar.clear()
            print("interrupted: the statement was abandoned and its budget refunded", file=sys.stderr)
            return 130
        bar.clear()
        rendered = result.render(fmt)
        if rendered:
            try:
                print(rendered, file=out, flush=True)
            except BrokenPipeError:  # the reader went away (ldpql ... | head): stop quietly
                os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
                return 0
    return 0


def prompt(con: ldpql.Connection, fmt: str, bar: ProgressBar) -> int:
    """A plain prompt, used when standard input is a terminal but standard output is not (the REPL in
    ``ldpql/repl.py`` needs both): collects lines until a ';' ends a statement, runs it, survives errors."""
    buffer: list[str] = []
    print(f"ldpql {ldpql.__version__}: statements end with ';'. Ctrl-D exits.")
    while True:
        try:
            line = input("ldpql> " if not buffer else "   ...> ")
        except EOFError:
            print()
            return 0
        except KeyboardInterrupt:
            print()
            buffer = []
            continue
        buffer.append(line)
        if line.rstrip().endswith(";"):
            run_script(con, "\n".join(buffer), fmt, bar)
            buffer = []


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    bar = ProgressBar()
    # No statement, no script and a terminal on both ends: the interactive REPL (ldpql/repl.py).
    interactive = args.command is None and not args.script and sys.stdin.isatty() and sys.stdout.isatty()
    display = None
    if interactive:
        from ldpql import repl
        display = repl.ProgressDisplay()
    try:
        con = ldpql.connect(ledger=args.ledger, seed=args.seed, evaluation=args.evaluate, database=args.database,
                            progress=display or bar)
        if args.demo:
            from ldpql import demo
            demo.load(con)
    except ldpql.Error as e:
        print(e, file=sys.stderr)
        return 1
    if args.command is not None:
        return run_script(con, args.command, args.format, bar)
    if args.script and args.script != "-":
        try:
            with open(args.script, encoding="utf-8") as f:
                text = f.read()
        except OSError as e:
            print(f"Error: cannot read {args.script}: {e.strerror}", file=sys.stderr)
            return 1
        return run_script(con, text, args.format, bar)
    if args.script == "-" or not sys.stdin.isatty():
        return run_script(con, sys.stdin.read(), args.format, bar)
    if interactive:
        return repl.run(con, progress=display, history=args.history, fmt=args.format)
    return prompt(con, args.format, bar)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())

"""The ``ldpql`` command: run statements from -c, a script, standard input, or a prompt.

It uses the public API only and holds no privacy logic. A script (and -c after it, when both are given) is
parsed whole before anything runs, so a syntax error anywhere changes nothing; at run time it stops at the first
failing statement and says which.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import signal
import sys
import threading
import time

import ldpql
from ldpql.grammar import parse

FORMATS = ("table", "csv", "json", "markdown")
WIDTH = 100   # the table display's width when it does not go to a terminal


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="ldpql", description="A query engine for local differential privacy.",
                                epilog='examples: ldpql --demo -c "SELECT LDP_HISTOGRAM(city) EPSILON 1 FROM people"; '
                                       'ldpql declare.sql -c "SHOW TABLES" (the script runs first, then -c)')
    p.add_argument("script", nargs="?", help="a .sql script to run ('-' reads standard input)")
    p.add_argument("-c", "--command", help="statements to run, separated by ';'. With a script too, the script "
                   "runs first, then these (both are parsed before anything runs)")
    p.add_argument("--ledger", help="budget ledger file (SQLite; created if missing), which also keeps the owner's "
                   "declarations. Default: $LDPQL_LEDGER, else $XDG_DATA_HOME/ldpql/ledger.ldpql or "
                   "~/.local/share/ldpql/ledger.ldpql; ':memory:' keeps nothing (and says so). With --demo and no "
                   "--ledger: in memory")
    p.add_argument("--analyst", action="store_true", help="an analyst session: query the tables the data owner "
                   "declared in the ledger, nothing else (no CREATE/ALTER/DROP, seeds or evaluation)")
    p.add_argument("--seed", type=int, help="make the noise reproducible (evaluation mode only: needs --evaluate)")
    p.add_argument("--evaluate", action="store_true", help="evaluation mode: allow EVALUATE and EPSILON INF "
                   "(true answers; never for releases)")
    p.add_argument("--demo", action="store_true", help="declare the embedded demo table `people`")
    p.add_argument("--database", help="a DuckDB database file whose tables CREATE TABLE ... FROM may name")
    p.add_argument("--spark", nargs="?", const="local[2]", metavar="MASTER",
                   help="read the data with Apache Spark (pip install 'ldpql[spark]'; Java 17+): a local[2] session, "
                        "or the master URL given (local[8], spark://host:7077, yarn)")
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


class InterruptWatch:
    """Counts Ctrl-C (SIGINT) while it is installed, and raises KeyboardInterrupt as Python's own handler does.

    Why count: DuckDB sees the interrupt first when it arrives during a query, and may turn it into its own
    exception (a RuntimeError "Query interrupted") or finish the query anyway. The count lets the front end
    still stop with status 130 and say so, whatever became of the KeyboardInterrupt.
    """

    def __init__(self) -> None:
        self.count = 0
        self._previous = None

    def _handler(self, signum, frame) -> None:
        self.count += 1
        raise KeyboardInterrupt

    def __enter__(self) -> "InterruptWatch":
        if threading.current_thread() is threading.main_thread():  # signals reach the main thread only
            self._previous = signal.signal(signal.SIGINT, self._handler)
        return self

    def __exit__(self, *exc) -> None:
        if self._previous is not None:
            signal.signal(signal.SIGINT, self._previous)
            self._previous = None


INTERRUPTED = 130  # the shell's status for a command ended by SIGINT


def internal_error(e: BaseException) -> ldpql.Error:
    """A non-ldpql exception as an InternalError. Only its type is shown: its text may quote data."""
    return ldpql.InternalError(f"unexpected {type(e).__name__} inside ldpql")


def _interrupted(i: int, n: int, finished: bool) -> int:
    what = (f"statement {i} of {n} finished (and was charged) before the interrupt was seen" if finished
            else f"statement {i} of {n} was abandoned")
    print(f"interrupted (Ctrl-C): {what}; no later statement ran. SHOW BUDGET tells what remains.",
          file=sys.stderr)
    return INTERRUPTED


def run_script(con: ldpql.Connection, text: str | list[str], fmt: str, bar: ProgressBar, out=sys.stdout,
               watch: InterruptWatch | None = None) -> int:
    """Run every statement of ``text`` (or of several texts, in order, as one script); print results; return the
    exit status (0 ok, 1 error, 130 Ctrl-C).

    Every text is parsed before anything runs. Never raises for bad input: an ldpql.Error is printed (with its
    caret and hint), any other exception is reported as an internal error without a traceback, and Ctrl-C stops
    the script with status 130."""
    texts = [text] if isinstance(text, str) else list(text)
    try:
        statements = [(stmt, t) for t in texts for stmt in parse(t)]
    except ldpql.Error as e:
        print(e, file=sys.stderr)
        return 1
    with contextlib.nullcontext(watch) if watch else InterruptWatch() as w:
        for i, (stmt, t) in enumerate(statements, 1):
            status = _run_statement(con, stmt, t, fmt, bar, out, w, (i, len(statements)))
            if status is not None:
                return status
    return 0


def _run_statement(con: ldpql.Connection, stmt, text: str, fmt: str, bar: ProgressBar, out,
                   watch: InterruptWatch, where: tuple[int, int]) -> int | None:
    """Run and print one statement; the exit status if the script must stop, else None."""
    seen = watch.count
    bar.reset()
    try:
        result = con.run(stmt, text)
    except KeyboardInterrupt:
        bar.clear()
        return _interrupted(*where, finished=False)
    except Exception as e:  # noqa: BLE001  (ldpql.Error is the user's; anything else is reported, not traced)
        bar.clear()
        if watch.count > seen:  # Ctrl-C, surfacing as DuckDB's or the API's own exception
            if isinstance(e, ldpql.Error) and e.context.get("charge_kept"):
                print(e, file=sys.stderr)   # it had read private data: its charge stands, and it says so
            return _interrupted(*where, finished=False)
        _print_error(e if isinstance(e, ldpql.Error) else internal_error(e), stmt, where)
        return 1
    bar.clear()
    status = _print_result(result.render(fmt, width=shutil.get_terminal_size((WIDTH, 24)).columns), out)
    if status is None and watch.count > seen:  # the statement completed despite Ctrl-C: it is shown, then stop
        return _interrupted(*where, finished=True)
    return status


def _print_error(e: ldpql.Error, stmt, where: tuple[int, int]) -> None:
    i, n = where
    at = f"statement {i} of {n}" + (f" (line {stmt.pos.line})" if stmt.pos.line else "")
    if n > 1:   # whether anything ran before it: only statements before the first one can have
        at += "; the statements before it ran" if i > 1 else "; no statement ran"
    print(f"{e}\n(stopped at {at})" if n > 1 else e, file=sys.stderr)


def _print_result(rendered: str, out) -> int | None:
    if not rendered:
        return None
    try:
        print(rendered, file=out, flush=True)
    except BrokenPipeError:  # the reader went away (ldpql ... | head): stop quietly
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    return None


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
    """The ``ldpql`` command. Returns the exit status: 0, 1 after an error, 130 after Ctrl-C. Never shows a
    traceback: errors are printed with their hint, Ctrl-C anywhere (opening, reading, running) ends with 130."""
    args = build_parser().parse_args(argv)
    try:
        with InterruptWatch() as watch:
            return _main(args, watch)
    except KeyboardInterrupt:
        print("interrupted (Ctrl-C)", file=sys.stderr)
        return INTERRUPTED


def _main(args: argparse.Namespace, watch: InterruptWatch) -> int:
    bar = ProgressBar()
    # No statement, no script and a terminal on both ends: the interactive REPL (ldpql/repl.py).
    interactive = args.command is None and not args.script and sys.stdin.isatty() and sys.stdout.isatty()
    display = None
    if interactive:
        from ldpql import repl
        display = repl.ProgressDisplay()
    con = _open(args, display or bar)
    if con is None:
        return 1
    texts = []   # the script (a file, or '-' for standard input), then -c: both run, in that order
    if args.script and args.script != "-":
        try:
            texts.append(con.read_script(args.script))
        except ldpql.Error as e:
            print(e, file=sys.stderr)
            return 1
    elif args.script == "-" or (args.command is None and not sys.stdin.isatty()):
        texts.append(sys.stdin.read())
    if args.command is not None:
        texts.append(args.command)
    if texts:
        return run_script(con, texts, args.format, bar, watch=watch)
    if interactive:
        return repl.run(con, progress=display, history=args.history, fmt=args.format)
    return prompt(con, args.format, bar)


def default_ledger() -> str:
    """The persistent ledger the command uses unless told otherwise: ``$LDPQL_LEDGER``, else
    ``$XDG_DATA_HOME/ldpql/ledger.ldpql``, else ``~/.local/share/ldpql/ledger.ldpql`` (its folder is created)."""
    path = os.environ.get("LDPQL_LEDGER")
    if not path:
        base = os.environ.get("XDG_DATA_HOME") or os.path.join(os.path.expanduser("~"), ".local", "share")
        path = os.path.join(base, "ldpql", "ledger.ldpql")
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    return path


def _ledger(args: argparse.Namespace) -> str | None:
    """The ledger to open: --ledger (':memory:' for none), else in memory for the demo, else the default file."""
    if args.ledger is not None:
        return None if args.ledger == ":memory:" else args.ledger
    return None if args.demo else default_ledger()


def _open(args: argparse.Namespace, progress) -> ldpql.Connection | None:
    """The connection (with the demo table if asked), or None after printing why it could not be opened."""
    if args.analyst and args.demo:
        print("Error: --demo declares a table, which is the data owner's act; an --analyst session queries the "
              "tables declared in its ledger", file=sys.stderr)
        return None
    ledger = _ledger(args)
    if ledger is None:
        print("note: the budget ledger is in memory: spend is forgotten when this command ends" +
              (" (the demo's default; --ledger PATH keeps it)" if args.demo and args.ledger is None else ""),
              file=sys.stderr)
    try:
        con = ldpql.connect(ledger=ledger, seed=args.seed, evaluation=args.evaluate, database=args.database,
                            progress=progress, role="analyst" if args.analyst else "owner",
                            backend="spark" if args.spark else "duckdb", spark=args.spark)
        if args.demo:
            from ldpql import demo
            demo.load(con)
        return con
    except Exception as e:  # noqa: BLE001  (an unusable ledger or database: say so, no traceback)
        print(e if isinstance(e, ldpql.Error) else internal_error(e), file=sys.stderr)
        return None


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())

"""The interactive REPL: a prompt_toolkit front end over the public API, holding no privacy logic.

- :func:`execute` is the statement runner: it takes what the user entered and prints results, errors and
  help through a :class:`Sink` (tests pass a :class:`TextSink` over a string buffer);
- :mod:`ldpql.display` turns a Result / plan / error into the formatted text it prints (its
  :func:`render_result`, :func:`render_plan`, :func:`render_error`, :func:`format_estimate` are re-exported here);
- :class:`LdpqlCompleter`, :func:`toolbar` and :class:`ProgressDisplay` are the interactive parts;
- :func:`run` ties them into a ``PromptSession`` loop (``input``/``output`` may be prompt_toolkit pipes).

Everything privacy-related (planning, spending, refunds on Ctrl-C, intervals) happens behind ``con.run`` /
``con.sql``; the REPL only reads results, the catalog's names and ``con.remaining_budget``.
"""

from __future__ import annotations

import difflib
import os
import re
import time
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Callable, Iterable

from prompt_toolkit import PromptSession, print_formatted_text
from prompt_toolkit.application.current import get_app_session
from prompt_toolkit.auto_suggest import AutoSuggestFromHistory
from prompt_toolkit.completion import CompleteEvent, Completer, Completion, PathCompleter
from prompt_toolkit.document import Document
from prompt_toolkit.filters import has_completions, is_searching
from prompt_toolkit.formatted_text import FormattedText
from prompt_toolkit.history import FileHistory, History, InMemoryHistory
from prompt_toolkit.key_binding import KeyBindings
from prompt_toolkit.lexers import PygmentsLexer
from prompt_toolkit.shortcuts import CompleteStyle
from prompt_toolkit.shortcuts.progress_bar import ProgressBar, formatters
from prompt_toolkit.styles import Style
from prompt_toolkit.utils import get_cwidth

import ldpql
from ldpql.display import (BAR_WIDTH, Fragments, format_estimate, histogram_columns, problem,  # noqa: F401
                           render_error, render_plan, render_result, render_table)
from ldpql.cli import InterruptWatch, internal_error
from ldpql.grammar import ast, parse
from ldpql.lexer import LdpqlLexer, input_complete, scan
from ldpql.papers import aggregate_papers

MODES = ("table", "csv", "json", "markdown")
PROMPT, CONTINUATION = "ldpql> ", "  ...> "

STYLE = Style.from_dict({
    "prompt": "bold ansigreen", "continuation": "ansigreen",
    "pygments.keyword": "bold ansiblue", "pygments.keyword.pseudo": "bold ansiyellow",
    "pygments.name.function": "bold ansimagenta", "pygments.literal.number": "ansicyan",
    "pygments.literal.string": "ansigreen", "pygments.name.variable": "ansiyellow",
    "pygments.comment": "italic ansibrightblack",
    "header": "bold", "frame": "ansibrightblack", "interval": "ansibrightblack", "bar": "ansicyan",
    "null": "italic ansibrightblack", "footer": "ansibrightblack", "note": "ansibrightblack", "message": "",
    "warning": "bold ansired", "error": "bold ansired", "hint": "ansiyellow", "chosen": "bold ansigreen",
    "rejected": "ansiyellow", "title": "bold", "help.name": "bold ansimagenta", "help.section": "bold underline",
    "bottom-toolbar": "noreverse bg:#303030 #d0d0d0", "toolbar.key": "bg:#303030 #8a8a8a",
    "toolbar.value": "bg:#303030 bold #ffffff", "toolbar.hint": "bg:#303030 #ffd75f",
})


# -- input ------------------------------------------------------------------------------------------------------
def history_path(explicit: str | None = None) -> Path:
    """Where the history lives: ``explicit`` (``--history``), else ``$LDPQL_HISTORY``, else
    ``$XDG_DATA_HOME/ldpql/history``, else ``~/.local/share/ldpql/history``."""
    chosen = explicit or os.environ.get("LDPQL_HISTORY")
    if chosen:
        return Path(chosen).expanduser()
    base = os.environ.get("XDG_DATA_HOME") or os.path.join(os.path.expanduser("~"), ".local", "share")
    return Path(base) / "ldpql" / "history"


# -- output sinks -----------------------------------------------------------------------------------------------
class Sink(ABC):
    """Where the REPL writes formatted text (a list of (style, text) fragments, ending without a newline)."""

    width: int | None = None     # columns a table may take (None: no limit)

    @abstractmethod
    def write(self, fragments: Fragments) -> None:
        """Write the fragments (the terminal with styles, or plain text to a file)."""

    def text(self, text: str, style: str = "") -> None:
        self.write([(style, text)])

    def close(self) -> None:
        pass


class TextSink(Sink):
    """Plain text (styles dropped) to a stream: a file for ``.output``, a StringIO in tests."""

    def __init__(self, stream: IO[str], owned: bool = False):
        self.stream, self.owned = stream, owned

    def write(self, fragments: Fragments) -> None:
        self.stream.write("".join(t for _, t in fragments) + "\n")
        self.stream.flush()

    def close(self) -> None:
        if self.owned:
            self.stream.close()


class TerminalSink(Sink):
    """Styled text to a prompt_toolkit output (the terminal)."""

    def __init__(self, output=None):
        self.output = output

    @property
    def width(self) -> int | None:
        return (self.output or get_app_session().output).get_size().columns

    def write(self, fragments: Fragments) -> None:
        print_formatted_text(FormattedText(fragments), style=STYLE, output=self.output,
                             include_default_pygments_style=False)


# -- help -------------------------------------------------------------------------------------------------------
STATEMENTS = {
    "SELECT": (("SELECT agg, ... [FROM t] [WHERE public] [GROUP BY public] EPSILON e | ACCURACY ±a "
                "[OPTIONS (k = v, ...)]"),
               "run LDP aggregates; EPSILON is the statement's total per-user ε (ACCURACY: HELP ACCURACY)"),
    "ACCURACY": ("SELECT agg, ... ACCURACY ±a (or a; agg(..., accuracy => b) sets one aggregate's own)",
                 ("spend the smallest ε whose predicted error at the statement's confidence is within ±a for every "
                  "aggregate (every group): a is the interval's half-width in the answer's unit (mean, sum, count), "
                  "a frequency per bin (histograms: the root mean square over the bins), a rank error as a fraction "
                  "of the users (quantiles), E|error| where EXPLAIN shows that (LDP_MIN/MAX); refused when over "
                  "budget or beyond the engine's ε cap; EXPLAIN shows the ε and each aggregate's")),
    "EXPLAIN": ("EXPLAIN <select> | EXPLAIN SELECT ... EPSILON IN (e1, e2, ...)",
                ("the plan, its predicted error and the rejected candidates; with EPSILON IN, each aggregate's "
                 "predicted error and mechanism at each ε side by side; spends nothing")),
    "EVALUATE": ("EVALUATE <select> [REPEAT n]", "truth vs. estimates, RMSE, coverage (evaluation mode; NOT private)"),
    "CREATE": ("CREATE TABLE t FROM 'file' (c PRIVATE BETWEEN lo AND hi [DISTRIBUTION GAUSSIAN (SIGMA s | SIGMA "
               "BETWEEN a AND b)] | IN (...) | BOOLEAN, c PUBLIC, ...) "
               "[PRIVACY UNIT c [SPARSITY s]] BUDGET EPSILON e [DELTA d] [ROUNDS k]",
               "declare data and its per-user budget (SPARSITY s: a unit may have several key-value rows; HELP KEYS)"),
    "KEYS": ("SELECT key, LDP_COUNT(*), LDP_AVG(v), LDP_SUM(v) FROM t GROUP BY key [SPARSITY s] EPSILON e",
             ("key-value rows (a table declared PRIVACY UNIT u SPARSITY s, key PRIVATE IN (...) or INTEGER BETWEEN): "
              "one answer per declared key, every aggregate from one Collision report per user (Wang et al., "
              "\"Differentially Private Numerical Vector Analyses in the Local and Shuffle Model\", 2023); a user's "
              "rows of a key are averaged; a user with more than s keys sends a random s, which lowers counts and "
              "sums of such users' keys by s/(their keys); no other statement runs on such a table; with a DELTA budget, "
              "OPTIONS (model = 'shuffle') runs the report at the amplified ε₀ of the generic clone bound")),
    "SHOW": ("SHOW TABLES | SHOW BUDGET [t] | SHOW LEDGER [t]", "tables, budget left, every charge"),
    "DESCRIBE": ("DESCRIBE t", "columns, visibility and declared domains"),
    "USE": ("USE t", "the default table of statements without FROM"),
    "SET": ("SET option = value", "a session default for an OPTIONS key (confidence, ...; seed in evaluation mode)"),
    "ALTER": ("ALTER TABLE t SET BUDGET EPSILON e [DELTA d] | SET COLUMN c PUBLIC | SET COLUMN c PRIVATE <domain> | "
              "SET PRIVACY UNIT c", "the data owner changes a budget or a declaration (logged in the ledger)"),
    "DROP": ("DROP TABLE t", "forget a declaration (never its spend); the data owner's"),
}

DOT_HELP = {
    ".help": ("[topic]", "this help (also HELP [topic])"),
    ".mode": ("table|csv|json|markdown", "how results are printed"),
    ".output": ("[FILE]", "write results to FILE; without FILE, back to the terminal"),
    ".read": ("FILE", "run the statements of a script"),
    ".timer": ("on|off", "print how long each statement took"),
    ".tables": ("", "the declared tables"),
    ".schema": ("[TABLE]", "columns, visibility and domains"),
    ".budget": ("[TABLE]", "budget spent and left"),
    ".quit": ("", "leave (also .exit, Ctrl-D)"),
}

KEYS_HELP = ("Enter runs a statement that ends with ';' (Alt-Enter runs whatever is typed); Tab completes; "
             "Ctrl-R searches the history; Ctrl-C abandons a running statement (refunded if it had not yet read "
             "private data; else its charge stands); "
             "Ctrl-D leaves.")


def _choices_text(spec: Any) -> str:
    if isinstance(spec, tuple):
        return " | ".join(f"'{c}'" if isinstance(c, str) else str(c) for c in spec)
    return {bool: "TRUE | FALSE", int: "an integer", float: "a number", str: "a 'name'"}.get(spec, str(spec))


def _section(title: str, rows: Iterable[tuple[str, str]]) -> Fragments:
    rows = list(rows)
    width = max((get_cwidth(a) for a, _ in rows), default=0)
    out: Fragments = [("class:help.section", title), ("", "\n")]
    for name, text in rows:
        out += [("class:help.name", "  " + name.ljust(width)), ("", "  " + text + "\n")]
    return out


def help_fragments(topic: str | None = None) -> Fragments:
    """HELP: statements, aggregates (from ``ldpql.functions()``), options and commands; or one topic."""
    if topic:
        return _help_topic(topic)
    out: Fragments = [("class:help.section", "Statements (end each with ';'; HELP SELECT for one)"), ("", "\n")]
    for syntax, doc in STATEMENTS.values():
        out += [("class:help.name", "  " + syntax), ("", f"\n      {doc}\n")]
    out += _section("LDP aggregates (HELP <name> for one)", [(sig, doc) for _, sig, doc in ldpql.functions()])
    out += _section("OPTIONS (...) keys, also SET key = value",
                    [(k, _choices_text(v)) for k, v in ldpql.options().items()])
    out += _section("Commands", [(f"{k} {a}".strip(), d) for k, (a, d) in DOT_HELP.items()])
    return out + [("class:help.section", "Keys"), ("", "\n  " + KEYS_HELP)]


def _help_topic(topic: str) -> Fragments:
    key = topic.strip().rstrip(";").strip()
    funcs = {name: (sig, doc) for name, sig, doc in ldpql.functions()}
    if key.upper() in funcs:
        sig, doc = funcs[key.upper()]
        same = [n for n, (s, d) in funcs.items() if d == doc and n != key.upper()]
        out: Fragments = [("class:help.name", sig), ("", f"\n  {doc}\n  example: SELECT {sig} FROM t EPSILON 1;")]
        out += [("", "\n")] + _section("named arguments (name => value)", ldpql.function_arguments(key))
        out += _section("papers", [("", p) for p in aggregate_papers(key)]) if aggregate_papers(key) else []
        return out + ([("class:note", f"\n  same as: {', '.join(same)}")] if same else [])
    if key.upper() in STATEMENTS:
        syntax, doc = STATEMENTS[key.upper()]
        return [("class:help.name", syntax), ("", f"\n  {doc}")]
    if key.lower() in ldpql.options() or key.upper() == "OPTIONS":
        rows = [(k, _choices_text(v)) for k, v in ldpql.options().items() if key.upper() in ("OPTIONS", k.upper())]
        return _section("OPTIONS (...) keys, also SET key = value", rows)
    dot = "." + key.lower().lstrip(".")
    if dot in DOT_HELP:
        return [("class:help.name", f"{dot} {DOT_HELP[dot][0]}".strip()), ("", f"\n  {DOT_HELP[dot][1]}")]
    topics = list(funcs) + list(STATEMENTS) + list(ldpql.options()) + list(DOT_HELP) + ["OPTIONS"]
    close = difflib.get_close_matches(key.upper(), [t.upper() for t in topics], n=1, cutoff=0.5)
    return problem(f"no help for `{key}`", f"did you mean HELP {close[0]}?" if close else "HELP lists every topic")


# -- the statement runner ---------------------------------------------------------------------------------------
@dataclass
class ReplState:
    """What the REPL remembers between inputs. ``results`` receives results (``.output`` redirects it);
    ``console`` receives everything else (errors, help, confirmations)."""

    con: Any
    console: Sink
    results: Sink | None = None
    mode: str = "table"
    timer: bool = False
    progress: "ProgressDisplay | None" = None
    generation: int = 0            # bumped after every input (invalidates the toolbar's budget cache)
    output_path: str | None = None
    budget_cache: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.terminal = self.results or self.console
        self.results = self.terminal

    def close(self) -> None:
        if self.results is not self.terminal:
            self.results.close()


def execute(state: ReplState, text: str) -> bool:
    """Run what the user entered (statements, a dot-command, HELP). Returns False when the REPL should end.
    Never raises for bad input; KeyboardInterrupt during a statement abandons it (the connection refunds)."""
    stripped = text.strip()
    try:
        if not stripped:
            return True
        if stripped.startswith("."):
            return _dot_command(state, stripped.splitlines()[0])
        word = stripped.split(None, 1)[0].rstrip(";").lower()
        if word == "help":
            topic = stripped[4:].strip().rstrip(";").strip()
            state.console.write(help_fragments(topic or None))
            return True
        if word in ("exit", "quit") and stripped.rstrip(";").strip().lower() == word:
            return False
        run_statements(state, text)
        return True
    finally:
        state.generation += 1


def run_statements(state: ReplState, text: str) -> bool:
    """Parse ``text`` whole (a syntax error anywhere runs nothing), then run its statements in order,
    stopping at the first that fails. Returns True when every statement ran."""
    try:
        statements = parse(text)
    except ldpql.Error as e:
        state.console.write(render_error(e))
        return False
    for i, stmt in enumerate(statements, 1):
        where = ""
        if len(statements) > 1:
            where = f"(stopped at statement {i} of {len(statements)}, line {stmt.pos.line}" + \
                ("; the ones before it ran)" if i > 1 else ")")
        if not _run_one(state, stmt, text, where):
            return False
    return True


def _run_one(state: ReplState, stmt: Any, text: str, where: str) -> bool:
    started = time.monotonic()
    try:
        with InterruptWatch() as watch:   # Ctrl-C that DuckDB turns into its own exception is still Ctrl-C
            try:
                if state.progress is not None:
                    state.progress.start()
                res = state.con.run(stmt, text)   # Ctrl-C in here: the connection decides what is spent
            finally:
                if state.progress is not None:
                    state.progress.stop()
    except KeyboardInterrupt:
        return _interrupted(state)
    except ldpql.Error as e:
        if watch.count and not e.context.get("charge_kept"):   # a kept charge is said by the error itself
            return _interrupted(state)
        state.console.write(render_error(e, where))
        return False
    except Exception as e:  # noqa: BLE001  (a bug: say so without its text, which may quote data; keep the REPL)
        if watch.count:
            return _interrupted(state)
        state.console.write(render_error(internal_error(e), where))
        return False
    rendered = render_result(res, state.mode, stmt, state.results.width)
    if rendered:
        state.results.write(rendered)
    if state.timer:
        state.console.write([("class:footer", f"Run Time: {time.monotonic() - started:.3f} s")])
    return True


# -- dot-commands -----------------------------------------------------------------------------------------------
def _interrupted(state: ReplState) -> bool:
    state.console.write([("class:warning", "interrupted: the statement was abandoned and its budget refunded "
                                           "unless it had read private data (SHOW BUDGET tells what remains)")])
    return False


def _dot_command(state: ReplState, line: str) -> bool:
    name, _, arg = line.partition(" ")
    name, arg = name.lower(), arg.strip()
    if name in (".quit", ".exit", ".q"):
        return False
    handler = DOT_COMMANDS.get(name)
    if handler is None:
        close = difflib.get_close_matches(name, list(DOT_HELP), n=1)
        state.console.write(problem(f"unknown command {name}",
                                     f"did you mean {close[0]}?" if close else "HELP lists the commands"))
    else:
        handler(state, arg)
    return True


def _dot_mode(state: ReplState, arg: str) -> None:
    if not arg:
        state.console.text(f"mode: {state.mode}")
    elif arg.lower() in MODES:
        state.mode = arg.lower()
        state.console.text(f"results are printed as {state.mode}", "class:note")
    else:
        state.console.write(problem(f"unknown mode `{arg}`", f"choose one of {', '.join(MODES)}"))


def _dot_output(state: ReplState, arg: str) -> None:
    path = arg.strip("'\"")
    if not path or path.lower() == "stdout":
        state.close()
        state.results, state.output_path = state.terminal, None
        state.console.text("results go to the terminal", "class:note")
        return
    try:
        state.con.check_output(path)
        stream = open(os.path.expanduser(path), "w", encoding="utf-8")
    except ldpql.Error as e:
        state.console.write(render_error(e))
        return
    except OSError as e:
        state.console.write(problem(f"cannot write {path}: {e.strerror}"))
        return
    state.close()
    state.results, state.output_path = TextSink(stream, owned=True), path
    state.console.text(f"results go to {path} (.output alone: back to the terminal)", "class:note")


def _dot_read(state: ReplState, arg: str) -> None:
    path = arg.strip("'\"")
    if not path:
        state.console.write(problem("cannot read (no file given)"))
        return
    try:
        text = state.con.read_script(path)
    except ldpql.Error as e:
        state.console.write(render_error(e))
        return
    run_statements(state, text)


def _dot_timer(state: ReplState, arg: str) -> None:
    if arg.lower() in ("on", "off"):
        state.timer = arg.lower() == "on"
    state.console.text(f"timer {'on' if state.timer else 'off'}", "class:note")


def _dot_sql(statement: str) -> Callable[[ReplState, str], None]:
    def run(state: ReplState, arg: str) -> None:   # .schema without a table describes every table
        for t in [arg] if arg else (state.con.tables() if statement == "DESCRIBE" else [""]):
            run_statements(state, f"{statement} {ast.quote_name(t) if t else ''}".strip())
    return run


DOT_COMMANDS: dict[str, Callable[[ReplState, str], None]] = {
    ".help": lambda state, arg: state.console.write(help_fragments(arg or None)),
    ".mode": _dot_mode, ".output": _dot_output, ".read": _dot_read, ".timer": _dot_timer,
    ".tables": lambda state, arg: run_statements(state, "SHOW TABLES"),
    ".schema": _dot_sql("DESCRIBE"), ".budget": _dot_sql("SHOW BUDGET"),
}


# -- completion -------------------------------------------------------------------------------------------------
_NAME = r'(?:"(?:[^"]|"")+"|' + ast.IDENT + ")"
_TABLE_BEFORE = re.compile(r"(?:\bFROM|\bUSE|\bDESCRIBE|\bDESC|\bDROP\s+TABLE|\bALTER\s+TABLE|\bSHOW\s+BUDGET"
                           r"|\bSHOW\s+LEDGER|^\s*\.schema|^\s*\.budget)\s+$", re.I)
_FROM = re.compile(r"\bFROM\s+(" + _NAME + ")", re.I)


def _unquote(name: str) -> str:
    return name[1:-1].replace('""', '"') if name.startswith('"') else name


def current_statement(text: str, cursor: int) -> tuple[str, str]:
    """(the statement text before the cursor, the whole statement around it), split on ';'."""
    start = text.rfind(";", 0, cursor) + 1
    end = text.find(";", cursor)
    return text[start:cursor], text[start:end if end >= 0 else len(text)]


def statement_table(con: Any, statement: str) -> str | None:
    """The declared table a statement reads: its FROM table, else the default table (USE, or the only one)."""
    names = {t.lower(): t for t in con.tables()}
    if not re.match(r"\s*CREATE\b", statement, re.I):
        m = _FROM.search(statement)
        if m and _unquote(m.group(1)).lower() in names:
            return names[_unquote(m.group(1)).lower()]
    current = con.catalog.current
    if current and current.lower() in names:
        return names[current.lower()]
    return next(iter(names.values())) if len(names) == 1 else None


class LdpqlCompleter(Completer):
    """Keywords, aggregates (with their signatures), tables, the FROM table's columns, OPTIONS/SET keys and
    values, file paths inside quotes after FROM, dot-commands and their arguments."""

    def __init__(self, con: Any):
        self.con = con
        self.paths = PathCompleter(expanduser=True)

    def get_completions(self, document: Document, complete_event: CompleteEvent) -> Iterable[Completion]:
        before, statement = current_statement(document.text, document.cursor_position)
        for rule in (self._paths, self._dots, self._options, self._help, self._in_text, self._tables):
            found = rule(before, complete_event)
            if found is not None:
                yield from found
                return
        yield from self._general(before, statement, complete_event)

    def _paths(self, before: str, event: CompleteEvent):
        m = re.search(r"\bFROM\s+'([^']*)$", before, re.I) or re.search(r"^\s*\.(?:read|output)\s+(\S*)$", before)
        if m:
            return list(self.paths.get_completions(Document(m.group(1)), event))
        return None

    def _in_text(self, before: str, event: CompleteEvent):
        return [] if scan(before)[0] in ("'", '"', "--", "/*") else None   # nothing inside strings, comments

    def _dots(self, before: str, event: CompleteEvent):
        m = re.match(r"^\s*(\.[a-z]*)$", before)
        if m:
            return _matching(m.group(1), [(k, DOT_HELP[k][1]) for k in DOT_HELP])
        m = re.match(r"^\s*\.(mode|timer)\s+(\w*)$", before)
        if m:
            return _matching(m.group(2), [(c, m.group(1)) for c in (MODES if m.group(1) == "mode" else ("on", "off"))])
        return None

    def _options(self, before: str, event: CompleteEvent):
        m = re.search(r"\bOPTIONS\s*\(([^()]*)$", before, re.I)
        segment = re.split(r",", m.group(1))[-1] if m else None
        s = re.match(r"^\s*SET\s+(.*)$", before, re.I)
        segment = s.group(1) if s and segment is None else segment
        if segment is None:
            return None
        opts = ldpql.options()
        v = re.match(r"^\s*(\w+)\s*(?:=>|=)\s*('?\w*)$", segment)
        if v:
            spec = opts.get(v.group(1).lower())
            values = [f"'{c}'" if isinstance(c, str) else str(c) for c in spec] if isinstance(spec, tuple) else \
                ["TRUE", "FALSE"] if spec is bool else []
            return _matching(v.group(2), [(x, v.group(1).lower()) for x in values])
        k = re.match(r"^\s*(\w*)$", segment)
        return _matching(k.group(1), [(key, _choices_text(spec)) for key, spec in opts.items()]) if k else []

    def _help(self, before: str, event: CompleteEvent):
        m = re.match(r"^\s*(?:HELP|\.help)\s+(\w*)$", before, re.I)
        if not m:
            return None
        topics = [(n, doc) for n, _, doc in ldpql.functions()] + [(k, d) for k, (_, d) in STATEMENTS.items()]
        return _matching(m.group(1), topics + [("OPTIONS", "query options")])

    def _tables(self, before: str, event: CompleteEvent):
        m = re.search(r"(" + _NAME + r"?)$", before)
        word = m.group(1) if m else ""
        if not _TABLE_BEFORE.search(before[:len(before) - len(word)]) or re.match(r"\s*CREATE\b", before, re.I):
            return None
        return _matching(word, [(t, "table") for t in self.con.tables()])

    def _general(self, before: str, statement: str, event: CompleteEvent) -> Iterable[Completion]:
        word = re.search(ast.IDENT + r"\Z", before)
        word = word.group(0) if word else ""
        if not word and not event.completion_requested:
            return []
        lower = word.islower()
        table = statement_table(self.con, statement)
        columns = [(c, "public" if pub else f"private {dom or '(no domain)'}")
                   for c, _, pub, dom in (self.con.columns(table) if table else [])]
        out = _matching(word, columns)
        for name, sig, doc in ldpql.functions():
            if name.lower().startswith(word.lower()):
                text = (name.lower() if lower else name) + "("
                out.append(Completion(text, -len(word), display=sig, display_meta=doc))
        keywords = sorted(set(ldpql.keywords()) | {"HELP"})
        out += _matching(word, [(k.lower() if lower else k, "keyword") for k in keywords])
        return out + _matching(word, [(t, "table") for t in self.con.tables()])


def _matching(prefix: str, items: Iterable[tuple[str, str]]) -> list[Completion]:
    p = prefix.lower()
    return [Completion(text, -len(prefix), display_meta=meta) for text, meta in items if text.lower().startswith(p)]


# -- bottom toolbar ---------------------------------------------------------------------------------------------
_TOUCH = re.compile(r"\b(?:FROM|USE|DESCRIBE|DESC|TABLE|BUDGET|LEDGER)\s+(" + _NAME + ")", re.I)


def touched_tables(con: Any, text: str) -> list[str]:
    """The declared tables the statement(s) in ``text`` name; else the default table; else every table."""
    names = {t.lower(): t for t in con.tables()}
    found = [names[_unquote(m).lower()] for m in _TOUCH.findall(text) if _unquote(m).lower() in names]
    if found:
        return list(dict.fromkeys(found))
    default = statement_table(con, "")
    return [default] if default else list(names.values())


def _left(con: Any, table: str) -> float | None:
    try:
        return con.remaining_budget(table)
    except ldpql.Error:
        return None


def _remaining(state: ReplState, tables: list[str]) -> list[tuple[str, float | None]]:
    key = (state.generation, tuple(tables))      # recomputed only after an input ran
    if key not in state.budget_cache:
        state.budget_cache = {key: [(t, _left(state.con, t)) for t in tables[:4]]}
    return state.budget_cache[key]


def _call_hint(before: str) -> str:
    m = re.search(r"\b(LDP_[A-Za-z0-9_]*)\s*\([^()]*$", before, re.I)
    if not m:
        return ""
    sig = {n: (s, d) for n, s, d in ldpql.functions()}.get(m.group(1).upper())
    return f"{sig[0]}: {sig[1]}" if sig else ""


def toolbar(state: ReplState, text: str, cursor: int | None = None) -> Fragments:
    """The bottom toolbar: USE'd table, seed, ε left on the tables the statement touches, mode; and the
    signature of the aggregate call around the cursor."""
    cursor = len(text) if cursor is None else cursor
    before, statement = current_statement(text, cursor)
    con = state.con
    seed = con.session.get("seed", con.seed)
    pairs = [(" table ", con.catalog.current or "-"), ("  seed ", str("random" if seed is None else seed))]
    pairs += [(f"  ε left on {name} ", "?" if left is None else f"{left:.4g}")
              for name, left in _remaining(state, touched_tables(con, statement.strip() or text))]
    pairs += [("  mode ", state.mode)] + ([("  → ", state.output_path)] if state.output_path else [])
    out: Fragments = [f for key, value in pairs for f in (("class:toolbar.key", key), ("class:toolbar.value", value))]
    hint = _call_hint(before)
    return out + ([("class:toolbar.hint", "  " + hint)] if hint else [])


# -- progress ---------------------------------------------------------------------------------------------------
class ProgressDisplay:
    """The connection's progress callback (``connect(progress=...)``): a prompt_toolkit progress bar that
    appears once a statement has run for ``delay`` seconds, labelled with the aggregate and round. Ctrl-C
    while it shows interrupts the statement (prompt_toolkit sends SIGINT to the main thread)."""

    def __init__(self, delay: float = 1.0, output=None, input=None):
        self.delay, self.output, self.input, self.label = delay, output, input, ""
        self._started: float | None = None
        self._bar: ProgressBar | None = None
        self._counter = None

    def start(self) -> None:
        self._started, self.label = time.monotonic(), ""

    def __call__(self, fraction: float, message: str) -> None:
        if self._started is None:
            return
        self.label = message
        if self._bar is None:
            if time.monotonic() - self._started < self.delay:
                return
            self._open()
        self._counter.label = message
        self._counter.items_completed = int(1000 * min(max(fraction, 0.0), 1.0))
        self._bar.invalidate()

    def _open(self) -> None:
        fmt = [formatters.Label(), formatters.Text("  "), formatters.Percentage(), formatters.Text(" "),
               formatters.Bar(sym_a="█", sym_b="█", sym_c="░"), formatters.Text("  "), formatters.TimeElapsed(),
               formatters.Text("  (Ctrl-C abandons; nothing is spent)", style="class:note")]
        self._bar = ProgressBar(formatters=fmt, style=STYLE, output=self.output, input=self.input)
        self._bar.__enter__()
        self._counter = self._bar(label="", total=1000, remove_when_done=True)

    def stop(self) -> None:
        """Close the bar (if it was shown); called after every statement."""
        bar, self._bar, self._started = self._bar, None, None
        if bar is not None:
            self._counter.done = True
            bar.__exit__(None, None, None)


# -- the session ------------------------------------------------------------------------------------------------
def _key_bindings(completer: Completer) -> KeyBindings:
    kb = KeyBindings()

    @kb.add("enter", filter=~is_searching)
    def _enter(event) -> None:
        buf = event.current_buffer
        if buf.complete_state is not None and buf.complete_state.current_completion is not None:
            buf.complete_state = None          # Enter on a completion accepts it
        elif input_complete(buf.text):
            buf.validate_and_handle()
        else:
            buf.insert_text("\n")

    @kb.add("tab", filter=~is_searching & ~has_completions)
    def _tab(event) -> None:
        buf = event.current_buffer     # a single candidate is applied at once; several open the menu
        found = list(completer.get_completions(buf.document, CompleteEvent(completion_requested=True)))
        if len(found) == 1:
            buf.apply_completion(found[0])
        elif found:
            buf.start_completion(insert_common_part=True)

    @kb.add("escape", "enter", filter=~is_searching)
    def _force(event) -> None:
        event.current_buffer.validate_and_handle()

    return kb


def _continuation(width: int, line_number: int, wrap_count: int) -> Fragments:
    return [("class:continuation", CONTINUATION.rjust(width))]


def make_history(path: str | None, console: Sink) -> History:
    """A FileHistory at :func:`history_path`; in memory (with a note) if that file cannot be created."""
    target = history_path(path)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        target.touch(exist_ok=True)
        return FileHistory(str(target))
    except OSError as e:
        console.text(f"note: history is not saved ({target}: {e.strerror})", "class:note")
        return InMemoryHistory()


def make_session(state: ReplState, history: History, input=None, output=None) -> PromptSession:
    """The PromptSession: multi-line input, highlighting, completion, history search, bottom toolbar."""
    completer = LdpqlCompleter(state.con)
    session: PromptSession = PromptSession(
        message=[("class:prompt", PROMPT)], multiline=True, prompt_continuation=_continuation,
        lexer=PygmentsLexer(LdpqlLexer), completer=completer, complete_while_typing=True,
        complete_style=CompleteStyle.COLUMN, auto_suggest=AutoSuggestFromHistory(), history=history,
        key_bindings=_key_bindings(completer), style=STYLE, include_default_pygments_style=False,
        search_ignore_case=True, input=input, output=output)

    def bottom() -> Fragments:
        doc = session.default_buffer.document
        return toolbar(state, doc.text, doc.cursor_position)

    session.bottom_toolbar = bottom
    return session


def banner(con: Any) -> Fragments:
    """The greeting: version, how statements end, where help is, and the tables with their budget left."""
    out: Fragments = [("class:title", f"ldpql {ldpql.__version__}"),
                      ("", " · statements end with ';' · HELP lists statements, aggregates, options"
                           " · Ctrl-D leaves")]
    tables = [t if _left(con, t) is None else f"{t} (ε {_left(con, t):.4g} left per user)" for t in con.tables()]
    if tables:
        out += [("", "\n"), ("class:note", "tables: " + ", ".join(tables))]
    if getattr(con, "evaluation", False):
        out += [("", "\n"), ("class:warning", "evaluation mode: EPSILON INF and EVALUATE show true answers; "
                                              "never release them")]
    return out


def run(con: Any, progress: ProgressDisplay | None = None, history: str | History | None = None,
        fmt: str = "table", input=None, output=None, sink: Sink | None = None) -> int:
    """The REPL loop over ``con`` until Ctrl-D or .quit. ``progress`` must be the callback ``con`` was opened
    with (``connect(progress=...)``) for the bar to show; ``sink`` replaces the terminal for all output."""
    console = sink or TerminalSink(output)
    state = ReplState(con, console, mode=fmt if fmt in MODES else "table", progress=progress)
    hist = history if isinstance(history, History) else make_history(history, console)
    session = make_session(state, hist, input, output)
    if progress is not None:
        progress.output, progress.input = progress.output or session.output, progress.input or session.input
    console.write(banner(con))
    while True:
        try:
            text = session.prompt()
        except KeyboardInterrupt:
            continue                         # Ctrl-C at the prompt clears the input
        except EOFError:
            break
        try:
            if not execute(state, text):
                break
        except KeyboardInterrupt:            # Ctrl-C while printing: keep the REPL
            console.text("interrupted", "class:warning")
    state.close()
    return 0

"""Text to AST: the lark LALR parser (built lazily, once) and the transformer to :mod:`ldpql.grammar.ast`."""

from __future__ import annotations

import contextlib
import functools
import hashlib
import math
import os
import re
import stat
import sys
import tempfile
from importlib import resources

import lark
from lark import Transformer_NonRecursive, v_args

from ldpql.errors import InternalError, ParseError, did_you_mean
from ldpql.grammar import ast

from ldpql.grammar.ast import KEYWORDS, MAX_NESTING, RESERVED

# Readable names for lark's terminal names in "expected ..." messages.
_TERMINALS = {"NAME": "a name", "QUOTED_NAME": "a quoted name", "STRING": "a 'string'",
              "SIGNED_NUMBER": "a number", "INT": "an integer", "SUBQUERY": "a (SELECT ...) query",
              "COMP_OP": "a comparison (=, <>, <, ...)", "LPAR": "'('", "RPAR": "')'", "COMMA": "','",
              "SEMICOLON": "';'", "ARROW": "'=>'", "EQUAL": "'='", "STAR": "'*'", "DOT": "'.'",
              "$END": "the end of the statement", "VISIBILITY": "PUBLIC or PRIVATE", "INF": "INF", "NOT": "NOT",
              "INTEGER": "INTEGER", "PLUSMINUS": "±"}


_NAME_CHAR = re.compile(f"[{ast.IDENT_CONT}]")


class _GluedKeyword(Exception):
    """A keyword immediately followed by name characters (`BUDGETS`): the lexer split one word in two."""

    def __init__(self, token: lark.Token, word: str):
        self.token, self.word = token, word


class _WholeWords:
    """Post-lexer: a keyword must be a whole word. Where a state accepts keywords but no names, lark's
    contextual lexer would otherwise read `BUDGETS` as the keyword BUDGET followed by the name S."""

    always_accept = ()

    def process(self, stream):
        prev = None
        for tok in stream:
            if prev is not None and prev.end_pos == tok.start_pos and str(prev).isalpha() \
                    and prev.type not in ("NAME", "QUOTED_NAME", "STRING") and _NAME_CHAR.match(str(tok)[:1]):
                raise _GluedKeyword(prev, str(prev) + str(tok))
            yield tok
            prev = tok


@functools.cache
def _parser() -> lark.Lark:
    """The LALR parser over the packaged grammar; built on first use so `import ldpql` stays fast, and kept in the
    user's cache directory (:func:`_cached`) so that the next process loads it instead of building it."""
    grammar = resources.files("ldpql.grammar").joinpath("ldpql.lark").read_text(encoding="utf-8")
    key = hashlib.sha256("\0".join([grammar, lark.__version__, sys.version]).encode()).hexdigest()
    folder = _cache_folder()
    path = os.path.join(folder, "grammar.lark-cache") if folder else None
    cached = _cached(path, key) if path else None
    if cached is not None:
        return cached
    parser = lark.Lark(grammar, parser="lalr", strict=True, propagate_positions=True, maybe_placeholders=True,
                       postlex=_WholeWords())
    if path:
        _save(parser, path, key)
    return parser


def _cache_folder() -> str | None:
    """The user's own cache directory for ldpql ($XDG_CACHE_HOME/ldpql or ~/.cache/ldpql), made private (0700); None
    where it cannot be made, or is not a directory owned by this user that only they can write (a shared $HOME):
    the parser is then built in every process. Building the strict LALR tables (and the check that no two terminals
    match the same text) costs about 0.5 s, loading them about 0.05 s."""
    folder = os.path.join(os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"), "ldpql")
    try:
        os.makedirs(folder, mode=0o700, exist_ok=True)
        info = os.lstat(folder)
    except OSError:
        return None
    private = stat.S_ISDIR(info.st_mode) and not info.st_mode & 0o022 and info.st_uid == os.getuid()
    return folder if private else None


def _cached(path: str, key: str) -> lark.Lark | None:
    """The parser saved at ``path`` if it is this user's regular file (not a link, not a pipe) saved for this grammar,
    lark and Python (``key``); None otherwise, or if it does not load."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0))
    except OSError:
        return None
    with os.fdopen(fd, "rb") as f:
        info = os.fstat(f.fileno())
        if not stat.S_ISREG(info.st_mode) or info.st_uid != os.getuid() or f.readline().strip() != key.encode():
            return None
        try:
            return lark.Lark.load(f)
        except Exception:   # a damaged or foreign file: build the parser again (and replace the file)
            return None


def _save(parser: lark.Lark, path: str, key: str) -> None:
    """Write the parser next to ``path`` and rename it into place (atomic: a concurrent reader sees the old file or
    the new one, and a link at ``path`` is replaced, not followed). A failure leaves no file and is not an error."""
    try:
        fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), prefix=".grammar-")
    except OSError:
        return
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(key.encode() + b"\n")
            parser.save(f)
        os.replace(tmp, path)
    except OSError:
        with contextlib.suppress(OSError):
            os.unlink(tmp)


def parse(text: str) -> list[ast.Statement]:
    """Parse a script of ';'-separated statements into AST nodes.

    >>> parse("SELECT LDP_MIN(age) EPSILON 1 FROM people")[0].sql()
    'SELECT LDP_MIN(age) FROM people EPSILON 1'
    """
    if not isinstance(text, str):
        raise ParseError(f"a statement must be text (str), not {type(text).__name__}",
                         hint="decode bytes first (data.decode('utf-8'))" if isinstance(text, (bytes, bytearray))
                         else "pass the statement as a str, e.g. con.sql('SHOW TABLES')")
    _check_encodable(text)
    try:
        tree = _parser().parse(text)
    except lark.exceptions.UnexpectedInput as e:
        raise _syntax_error(text, e) from None
    except _GluedKeyword as g:
        raise ParseError(f"unexpected `{g.word}`", hint=did_you_mean(g.word, KEYWORDS), text=text,
                         line=g.token.line, column=g.token.column, width=len(g.word)) from None
    try:
        return _ToAst(text).transform(tree)
    except lark.exceptions.VisitError as e:  # unwrap errors raised inside the transformer
        if isinstance(e.orig_exc, ParseError):
            raise e.orig_exc from None
        # anything else is a bug of the transformer: report it as one, never as a lark traceback
        raise InternalError(f"the parser failed on this statement ({type(e.orig_exc).__name__})") from e.orig_exc


_SURROGATE = re.compile("[\ud800-\udfff]")


def _check_encodable(text: str) -> None:
    """A lone surrogate (from a bad decode) is not text: DuckDB, SQLite and the terminal all fail on it later,
    so the parser refuses it here, with a caret."""
    bad = _SURROGATE.search(text)
    if bad:
        line = text.count("\n", 0, bad.start()) + 1
        column = bad.start() - (text.rfind("\n", 0, bad.start()) + 1) + 1
        shown = text.encode("utf-8", "backslashreplace").decode("ascii", "backslashreplace")
        raise ParseError(f"the statement contains an invalid character (U+{ord(bad.group()):04X}, a lone surrogate)",
                         hint="the text was probably decoded with errors='surrogateescape'; decode it as UTF-8",
                         text=shown, line=line, column=column)


def parse_one(text: str) -> ast.Statement:
    """Parse exactly one statement."""
    statements = parse(text)
    if len(statements) != 1:
        raise ParseError(f"expected one statement, found {len(statements)}",
                         hint="pass statements one at a time, or use parse() for a script")
    return statements[0]


def _syntax_error(text: str, e: lark.exceptions.UnexpectedInput) -> ParseError:
    line, column = e.line, e.column
    if isinstance(e, lark.exceptions.UnexpectedToken) and e.token.type == "$END":
        word, width, got = "", 1, "end of input"
        line, column = _end_position(text)
    elif isinstance(e, lark.exceptions.UnexpectedToken):
        word = str(e.token)
        width, got = len(word), f"`{word}`"
    else:
        word = text[e.pos_in_stream:].split(None, 1)[0] if text[e.pos_in_stream:].strip() else ""
        width, got = max(1, len(word)), f"`{word[:20]}`"
    expected = sorted({_TERMINALS.get(t, t.strip('"')) for t in getattr(e, "expected", None) or
                       getattr(e, "allowed", None) or ()})
    hint = did_you_mean(word, KEYWORDS) if word and word.upper() not in KEYWORDS else None
    if word.lower() == "nan" and "a number" in expected:   # (not a misspelt AND: a value no clause accepts)
        hint = "NaN is not a usable value here: give a finite positive number, for example 1"
    msg = f"unexpected {got}" + (f"; expected {_or_list(expected)}" if expected else "")
    return ParseError(msg, hint=hint, text=text, line=line, column=column, width=width,
                      context={"expected": expected})


def _end_position(text: str) -> tuple[int, int]:
    stripped = text.rstrip()
    lines = stripped.splitlines() or [""]
    return len(lines), len(lines[-1]) + 1


def _or_list(items: list[str]) -> str:
    if len(items) > 8:
        items = items[:8] + ["..."]
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " or " + items[-1]


def _pos(meta) -> ast.Pos:
    if getattr(meta, "empty", True):
        return ast.Pos()
    return ast.Pos(meta.line, meta.column, meta.start_pos, meta.end_pos)


def _tok_pos(tok: lark.Token) -> ast.Pos:
    return ast.Pos(tok.line, tok.column, tok.start_pos, tok.end_pos)


def _number(tok: lark.Token, text: str) -> int | float:
    """The value of a number token. A number beyond a float's range (an integer of 309 digits, 1e999) is a
    ParseError at the token: every number of the language (ε, δ, domains, options) is used as a float, and
    `1e999` must not silently mean INF."""
    s = str(tok)
    try:
        value = int(s) if s.lstrip("+-").isdigit() else float(s)
        in_range = math.isfinite(value) if isinstance(value, float) else abs(value) < _FLOAT_LIMIT
    except ValueError:  # Python refuses to read integers of more than 4,300 digits
        value, in_range = None, False
    if not in_range:
        raise ParseError(f"the number is out of range ({len(s)} characters)",
                         hint="numbers must lie within ±1.8e308; write EPSILON INF for no noise (evaluation mode)",
                         text=text, line=tok.line, column=tok.column, width=min(len(s), 40))
    return value


_FLOAT_LIMIT = 2 ** 1024  # the smallest integer that float() cannot convert


@v_args(meta=True)
class _ToAst(Transformer_NonRecursive):
    """Parse tree to AST; pure (no side effects), one method per grammar rule or alias. Non-recursive, so a
    long chain of ORs (a deep parse tree) cannot exhaust Python's stack; real nesting is limited instead
    (:meth:`_shallow`)."""

    def __init__(self, text: str):
        super().__init__()
        self.text = text

    def _error(self, message: str, pos: ast.Pos, hint: str | None = None, width: int = 1) -> ParseError:
        return ParseError(message, hint=hint, text=self.text, line=pos.line, column=pos.column, width=width)

    def _shallow(self, e):
        """``e`` itself, or a ParseError when it nests deeper than :data:`ast.MAX_NESTING` levels."""
        depth = ast.nesting(e) if not isinstance(e, ast.NamedArg) else 1
        if depth > MAX_NESTING:
            raise self._error(f"the expression nests too deeply ({depth} levels; at most {MAX_NESTING})",
                              _expr_pos(e), hint="remove redundant parentheses or NOTs; a chain such as "
                              "a OR b OR c counts as one level, and x IN (...) replaces many ORs")
        return e

    def start(self, meta, children):
        return [c for c in children if c is not None]

    # -- names and literals
    def name(self, meta, children):
        tok = children[0]
        if tok.type == "QUOTED_NAME":
            return str(tok)[1:-1].replace('""', '"')
        if str(tok).upper() in RESERVED:
            raise self._error(f"`{tok}` is a reserved word", _tok_pos(tok),
                              hint=f'write "{str(tok).lower()}" in double quotes to use it as a name', width=len(tok))
        return str(tok)

    def string(self, meta, children):
        return ast.Literal(str(children[0])[1:-1].replace("''", "'"), _pos(meta))

    def number(self, meta, children):
        return ast.Literal(_number(children[0], self.text), _pos(meta))

    def true(self, meta, children):
        return ast.Literal(True, _pos(meta))

    def false(self, meta, children):
        return ast.Literal(False, _pos(meta))

    def null(self, meta, children):
        return ast.Literal(None, _pos(meta))

    def column_ref(self, meta, children):
        return ast.ColumnRef(children[0], _pos(meta))

    # -- expressions
    def comparison(self, meta, children):
        left, op, right = children
        return ast.Comparison(left, "<>" if str(op) == "!=" else str(op), right, _pos(meta))

    def in_list(self, meta, children):
        operand, negated, *values = children
        return ast.InList(operand, tuple(values), negated is not None, _pos(meta))

    def between(self, meta, children):
        operand, negated, low, high = children
        return ast.Between(operand, low, high, negated is not None, _pos(meta))

    def is_null(self, meta, children):
        return ast.IsNull(children[0], children[1] is not None, _pos(meta))

    def not_expr(self, meta, children):
        return ast.Not(children[0], _pos(meta))

    def and_expr(self, meta, children):
        return ast.BoolOp("AND", children[0], children[1], _pos(meta))

    def or_expr(self, meta, children):
        return ast.BoolOp("OR", children[0], children[1], _pos(meta))

    # -- select
    def named_arg(self, meta, children):
        return ast.NamedArg(str(children[0]).lower(), children[2], _pos(meta))

    def call_args(self, meta, children):
        return children

    def call(self, meta, children):
        name, args = children[0], [self._shallow(a) for a in children[1] or []]
        positional = tuple(a for a in args if not isinstance(a, ast.NamedArg))
        named = tuple(a for a in args if isinstance(a, ast.NamedArg))
        seen_named = False
        for a in args:
            seen_named |= isinstance(a, ast.NamedArg)
            if seen_named and not isinstance(a, ast.NamedArg):
                raise self._error("a positional argument follows a named one", _expr_pos(a),
                                  hint="put `name => value` arguments last")
        self._once(named, "argument", "=>")
        return ast.Call(name.upper(), positional, named, False, _pos(meta))

    def _once(self, items, what: str, sign: str) -> None:
        """A named argument or an option given twice would silently keep one of the two values: refuse it."""
        seen = set()
        for item in items:
            if item.name in seen:
                raise self._error(f"the {what} `{item.name}` is given twice", item.pos, width=len(item.name),
                                  hint=f"give `{item.name} {sign} ...` once")
            seen.add(item.name)

    def star_call(self, meta, children):
        return ast.Call(children[0].upper(), (), (), True, _pos(meta))

    def select_item(self, meta, children):
        return ast.SelectItem(children[0], children[1], _pos(meta))

    def from_clause(self, meta, children):
        return ("table", children[0])

    def where_clause(self, meta, children):
        return ("where", self._shallow(children[0]))

    def group_clause(self, meta, children):
        *cols, sparsity = children
        return ("group_by", (tuple(cols), _number(sparsity, self.text) if sparsity is not None else None))

    def epsilon_clause(self, meta, children):
        eps, delta = children
        if isinstance(eps, lark.Token):  # INF
            eps = ast.Literal(math.inf, _tok_pos(eps))
        return ("epsilon", (eps, delta, _pos(meta)))

    def epsilon_sweep(self, meta, children):
        *values, delta = children
        return ("sweep", (tuple(values), delta, _pos(meta)))

    def accuracy_clause(self, meta, children):
        _, value, delta = children
        if not value.value > 0:
            raise self._error(f"ACCURACY must be a positive error bound, not {value.sql()}", value.pos,
                              hint="for example ACCURACY ±0.5: answers within ±0.5 at the statement's confidence",
                              width=len(value.sql()))
        return ("accuracy", (value, delta, _pos(meta)))

    def option(self, meta, children):
        return ast.Option(str(children[0]).lower(), children[-1], _pos(meta))

    def options_clause(self, meta, children):
        self._once(children, "option", "=")
        return ("options", tuple(children))

    def body_from(self, meta, children):
        return [c for c in children if c is not None]

    body_where = body_from
    body_group = body_from

    def select(self, meta, children):
        items = tuple(c for c in children if isinstance(c, ast.SelectItem))
        parts: dict = {}
        rest = [c for c in children if c is not None and not isinstance(c, ast.SelectItem)]
        flat = [p for c in rest for p in (c if isinstance(c, list) else [c])]
        for key, value in flat:
            if key in _SPEND and (clash := next((k for k in _SPEND if k in parts), None)):
                raise self._spend_clash(clash, key, value[2])
            parts[key] = value
        eps, delta, _ = parts.pop("epsilon", (None, None, None))
        sweep, sweep_delta, _ = parts.pop("sweep", ((), None, None))
        accuracy, accuracy_delta, _ = parts.pop("accuracy", (None, None, None))
        parts["group_by"], parts["sparsity"] = parts.pop("group_by", ((), None))
        return ast.Select(items, epsilon=eps, delta=delta or sweep_delta or accuracy_delta, accuracy=accuracy,
                          sweep=sweep, pos=_pos(meta), **parts)

    def _spend_clash(self, first: str, second: str, pos: ast.Pos) -> ParseError:
        """Two of EPSILON, EPSILON IN (...) and ACCURACY in one SELECT: each decides the statement's ε."""
        if first == second == "epsilon":
            return self._error("EPSILON is given twice", pos, hint="give EPSILON once, after the select list or at "
                               "the end")
        if first == second:
            return self._error(f"{_SPEND[first]} is given twice", pos, hint=f"give {_SPEND[first]} once",
                               width=len(_SPEND[first].split()[0]))
        return self._error(f"{_SPEND[first]} and {_SPEND[second]} cannot both be given", pos,
                           width=len(_SPEND[second].split()[0]),
                           hint="each decides the statement's ε: EPSILON e spends e, ACCURACY ±a spends the smallest "
                                "ε whose predicted error is within ±a, EXPLAIN ... EPSILON IN (e1, e2, ...) compares "
                                "the predictions at several ε; keep one")

    def explain(self, meta, children):
        return ast.Explain(children[0], _pos(meta))

    def evaluate(self, meta, children):
        repeat = _number(children[1], self.text) if children[1] is not None else 100
        return ast.Evaluate(children[0], repeat, _pos(meta))

    # -- create table
    def file_source(self, meta, children):
        return ast.Source("file", str(children[0])[1:-1].replace("''", "'"), _pos(meta))

    def table_source(self, meta, children):
        return ast.Source("table", ".".join(ast.quote_name(c) for c in children), _pos(meta))

    def query_source(self, meta, children):
        return ast.Source("query", str(children[0]), _pos(meta))

    def column_list(self, meta, children):
        return tuple(children)

    def range_domain(self, meta, children):
        integer, low, high, dist = children
        return ast.RangeDomain(low.value, high.value, integer is not None, _pos(meta), dist)

    def distribution(self, meta, children):
        family, (low, high, ranged) = children
        return ast.Distribution(str(family), low, high, ranged, _pos(meta))

    def sigma_value(self, meta, children):
        return (children[0].value, children[0].value, False)

    def sigma_between(self, meta, children):
        return (children[0].value, children[1].value, True)

    def set_domain(self, meta, children):
        return ast.SetDomain(tuple(children), _pos(meta))

    def boolean_domain(self, meta, children):
        return ast.BooleanDomain(_pos(meta))

    def column_def(self, meta, children):
        name, vis, domain, nulls = children
        public = vis is not None and str(vis).upper() == "PUBLIC"
        not_null, default = nulls or (False, None)
        return ast.ColumnDef(name, public, vis is not None, domain, default, _pos(meta), not_null)

    def not_null_first(self, meta, children):
        return (True, children[1])

    def default_first(self, meta, children):
        return (children[1] is not None, children[0])

    def privacy_unit(self, meta, children):
        name, sparsity = children
        return ("privacy_unit", (name, _number(sparsity, self.text) if sparsity is not None else None))

    def budget(self, meta, children):
        eps, delta = children
        return ("budget", (eps.value, delta.value if delta is not None else None))

    def rounds(self, meta, children):
        return ("rounds", _number(children[0], self.text))

    def create_table(self, meta, children):
        name, source, columns, *clauses = children
        kw: dict = {}
        for key, value in clauses:
            if key == "budget":
                kw["budget_epsilon"], kw["budget_delta"] = value
            elif key == "privacy_unit":
                kw["privacy_unit"], kw["sparsity"] = value
            else:
                kw[key] = value
        return ast.CreateTable(name, source, columns or (), pos=_pos(meta), **kw)

    # -- small statements
    def show_tables(self, meta, children):
        return ast.ShowTables(_pos(meta))

    def show_budget(self, meta, children):
        return ast.ShowBudget(children[0], _pos(meta))

    def show_ledger(self, meta, children):
        return ast.ShowLedger(children[0], _pos(meta))

    def describe(self, meta, children):
        return ast.Describe(children[-1], _pos(meta))

    def use(self, meta, children):
        return ast.Use(children[0], _pos(meta))

    def set_option(self, meta, children):
        return ast.SetOption(str(children[0]).lower(), children[1], _pos(meta))

    def alter_budget(self, meta, children):
        name, eps, delta = children
        return ast.AlterBudget(name, eps.value, delta.value if delta is not None else None, _pos(meta))

    def alter_column(self, meta, children):
        name, cdef = children
        if not cdef.explicit:
            raise self._error(f"say whether `{cdef.name}` becomes PUBLIC or PRIVATE", cdef.pos, width=len(cdef.name),
                              hint=f"ALTER TABLE {ast.quote_name(name)} SET COLUMN {ast.quote_name(cdef.name)} PUBLIC, "
                                   "or ... PRIVATE BETWEEN lo AND hi")
        return ast.AlterColumn(name, cdef, _pos(meta))

    def alter_unit(self, meta, children):
        name, ref = children
        return ast.AlterUnit(name, ref.name, ref.pos, _pos(meta))

    def drop_table(self, meta, children):
        return ast.DropTable(children[0], _pos(meta))


_SPEND = {"epsilon": "EPSILON", "sweep": "EPSILON IN (...)", "accuracy": "ACCURACY"}


def _expr_pos(e) -> ast.Pos:
    return getattr(e, "pos", ast.Pos())

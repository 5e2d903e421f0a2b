"""A pygments lexer for the ldpql language (REPL highlighting; also usable by docs tools), and the small
scanner the REPL uses to tell a finished statement from an open one (:func:`input_complete`).

Keywords and aggregates come from :func:`ldpql.keywords` and :func:`ldpql.functions`, so a new keyword or
aggregate is highlighted without touching this file; any other ``LDP_*`` name is highlighted as an aggregate
too. REPL dot-commands (``.mode csv``) and ``HELP`` are highlighted as commands.

>>> from pygments import lex
>>> [(str(t), v) for t, v in lex("SELECT LDP_MEAN(x) EPSILON 1", LdpqlLexer()) if v.strip()][:3]
[('Token.Keyword', 'SELECT'), ('Token.Name.Function', 'LDP_MEAN'), ('Token.Punctuation', '(')]
"""

from __future__ import annotations

import re

from pygments.lexer import RegexLexer, words
from pygments.token import (Comment, Keyword, Name, Number, Operator, Punctuation, String, Text, Whitespace)

import ldpql
from ldpql.grammar.ast import IDENT, IDENT_CONT

__all__ = ["LdpqlLexer", "input_complete", "scan", "last_significant"]

# Words that only the REPL (not the language) knows.
REPL_WORDS = ("HELP", "DESC")


_WORD_END = f"(?![{IDENT_CONT}])"   # a keyword is a whole word: `SELECTé` is a name, as in DuckDB


def _keywords() -> tuple[str, ...]:
    return tuple(sorted(set(ldpql.keywords()) | set(REPL_WORDS), key=len, reverse=True))


def _aggregates() -> tuple[str, ...]:
    return tuple(sorted({name for name, _, _ in ldpql.functions()}, key=len, reverse=True))


class LdpqlLexer(RegexLexer):
    """Lexer for ldpql statements: keywords, LDP aggregates, numbers, strings, names, comments."""

    name = "ldpql"
    aliases = ["ldpql"]
    filenames = ["*.ldpql"]
    mimetypes = ["text/x-ldpql"]
    flags = re.IGNORECASE | re.MULTILINE

    tokens = {
        "root": [
            (r"\s+", Whitespace),
            (r"--[^\n]*", Comment.Single),
            (r"/\*", Comment.Multiline, "comment"),
            (r"^\.[A-Za-z_]+", Keyword.Pseudo),                      # REPL dot-commands
            (r"'(?:[^']|'')*'?", String.Single),                    # 'text' (open strings while typing)
            (r'"(?:[^"]|"")*"?', Name.Variable),                    # "quoted name"
            (r"[-+]?(?:\d+\.\d*|\.\d+|\d+)(?:e[-+]?\d+)?\b", Number),
            (words(_aggregates(), suffix=_WORD_END), Name.Function),
            (rf"LDP_[{IDENT_CONT}]*", Name.Function),
            (words(_keywords(), suffix=_WORD_END), Keyword),
            (r"±", Operator),                                       # ACCURACY ±a (before names: ± is a letter to DuckDB)
            (IDENT, Name),                                          # names as DuckDB reads them (größe, 名前)
            (r"=>|<>|!=|<=|>=|[=<>*+\-/]", Operator),
            (r"[(),;.]", Punctuation),
            (r".", Text),
        ],
        "comment": [
            (r"[^*]+", Comment.Multiline),
            (r"\*/", Comment.Multiline, "#pop"),
            (r"\*", Comment.Multiline),
        ],
    }


# -- is the statement finished? ---------------------------------------------------------------------------------
def input_complete(text: str) -> bool:
    """Whether Enter should run ``text``: it is empty, a dot-command, HELP/exit/quit, or its last character
    outside strings and comments is ``;``."""
    stripped = text.strip()
    if not stripped or stripped.startswith(".") or re.match(r"(?i)(help|exit|quit)\b", stripped):
        return True
    return last_significant(text) == ";"


def scan(text: str) -> tuple[str, str]:
    """(the open construct at the end of ``text``: '' | "'" | '"' | '--' | '/*', the last significant character
    outside strings and comments)."""
    state, last, i = "", "", 0
    while i < len(text):
        ch, two = text[i], text[i:i + 2]
        if state == "":
            if two == "--" or two == "/*":
                state, i = two, i + 1
            elif ch in "'\"":
                state, last = ch, ch
            elif not ch.isspace():
                last = ch
        elif (state == "--" and ch == "\n") or (state in "'\"" and ch == state):
            state = ""
        elif state == "/*" and two == "*/":
            state, i = "", i + 1
        i += 1
    return state, last


def last_significant(text: str) -> str:
    state, last = scan(text)
    return last if state in ("", "--") else ""

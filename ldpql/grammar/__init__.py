"""The language: ``ldpql.lark``, the parser (text -> AST) and the AST dataclasses."""

from ldpql.grammar import ast
from ldpql.grammar.parser import KEYWORDS, parse, parse_one

__all__ = ["ast", "parse", "parse_one", "KEYWORDS"]

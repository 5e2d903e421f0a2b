"""The layering rules of the design: one import direction, and no privacy logic in the front ends."""

from __future__ import annotations

import ast
import doctest
import importlib
import pkgutil
import subprocess
import sys
from pathlib import Path

import pytest

import ldpql

PACKAGE = Path(ldpql.__file__).resolve().parent

# module (or package prefix) -> ldpql modules it must never import
FORBIDDEN = {
    "ldpql.grammar": ("ldpql.planner", "ldpql.executor", "ldpql.mechanisms", "ldpql.ledger", "ldpql.connection",
                      "ldpql.catalog"),
    "ldpql.mechanisms": ("ldpql.planner", "ldpql.executor", "ldpql.ledger", "ldpql.connection", "ldpql.catalog",
                         "ldpql.grammar", "ldpql.backends", "duckdb"),
    "ldpql.planner": ("ldpql.executor", "ldpql.ledger", "ldpql.connection", "ldpql.cli", "ldpql.repl", "ldpql.backends",
                      "duckdb"),
    "ldpql.expr": ("ldpql.grammar", "ldpql.planner", "ldpql.executor", "ldpql.mechanisms", "ldpql.backends", "duckdb"),
    "ldpql.executor": ("ldpql.connection", "ldpql.ledger", "ldpql.cli", "ldpql.repl", "duckdb"),
    "ldpql.catalog": ("ldpql.planner", "ldpql.executor", "ldpql.mechanisms", "ldpql.connection"),
    "ldpql.sources": ("ldpql.planner", "ldpql.executor", "ldpql.mechanisms", "ldpql.connection", "ldpql.catalog",
                      "ldpql.ledger"),
    "ldpql.cli": ("ldpql.mechanisms", "ldpql.planner", "ldpql.executor", "ldpql.ledger", "ldpql.catalog",
                  "ldpql.audit", "ldpql.reporting"),
    "ldpql.repl": ("ldpql.mechanisms", "ldpql.planner", "ldpql.executor", "ldpql.ledger", "ldpql.catalog",
                   "ldpql.audit", "ldpql.reporting"),
    "ldpql.display": ("ldpql.mechanisms", "ldpql.planner", "ldpql.executor", "ldpql.ledger", "ldpql.catalog",
                      "ldpql.audit", "ldpql.reporting"),
    "ldpql.lexer": ("ldpql.mechanisms", "ldpql.planner", "ldpql.executor", "ldpql.ledger", "ldpql.catalog"),
}


def _modules():
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE.parent).with_suffix("")
        name = ".".join(rel.parts).removesuffix(".__init__")
        yield name, path


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            out.add(node.module)
            out.update(f"{node.module}.{alias.name}" for alias in node.names)
    return out


@pytest.mark.parametrize("name, path", list(_modules()), ids=lambda v: v if isinstance(v, str) else "")
def test_import_direction(name, path):
    rules = [bad for prefix, bad in FORBIDDEN.items() if name == prefix or name.startswith(prefix + ".")]
    imported = _imports(path)
    for bad in (b for rule in rules for b in rule):
        offenders = [m for m in imported if m == bad or m.startswith(bad + ".")]
        assert not offenders, f"{name} imports {offenders}"


def test_every_module_imports():
    for info in pkgutil.walk_packages(ldpql.__path__, "ldpql."):
        if info.name not in ("ldpql.__main__",):
            importlib.import_module(info.name)


def test_module_sizes_stay_readable():
    for name, path in _modules():
        lines = len(path.read_text(encoding="utf-8").splitlines())
        assert lines <= 900, f"{name} has {lines} lines; split it (the bar is ~800)"


def test_doctests_of_every_module_run():
    attempted = modules = 0
    for info in pkgutil.walk_packages(ldpql.__path__, "ldpql."):
        if info.name == "ldpql.__main__":
            continue
        module = importlib.import_module(info.name)
        result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
        assert result.failed == 0, info.name
        attempted += result.attempted
        modules += 1
    assert modules >= 20 and attempted >= 5


def test_functions_stay_short():
    """The size bar of the style guide: median function ≤ 15 lines, p90 ≤ 50, none over 80."""
    import statistics

    lengths = []
    for name, path in _modules():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                lengths.append((node.end_lineno - node.lineno + 1, f"{name}.{node.name}"))
    sizes = sorted(n for n, _ in lengths)
    assert statistics.median(sizes) <= 15 and sizes[int(0.9 * len(sizes))] <= 50
    assert not [f for n, f in lengths if n > 80]


def test_no_sql_in_mechanisms_or_planner():
    """The backend seam (DESIGN §4.2): encodings are ldpql.expr values; SQL text is written by backends only."""
    import re
    pattern = re.compile(r"SELECT|FROM|CAST")
    found = []
    for sub in ("mechanisms", "planner"):
        for path in sorted((PACKAGE / sub).rglob("*.py")):
            for no, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
                if pattern.search(line):
                    found.append(f"{path.relative_to(PACKAGE)}:{no}: {line.strip()}")
    assert not found, "\n".join(found)


def test_import_ldpql_leaves_scipy_for_later():
    """`import ldpql` (every CLI run, every REPL start) does not import scipy: its modules are imported inside the
    functions that need them (scipy.optimize and scipy.stats each add ~0.3-1 s of start-up)."""
    code = "import sys, ldpql; print(sorted(m for m in sys.modules if m.startswith('scipy')))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", out.stdout[:300]

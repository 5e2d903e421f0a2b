"""The identity of a declared source: the base relations it reads, whatever they are called.

A budget belongs to data, not to a spelling (DESIGN 4.5). A symlink, a hard link, ``//abs/path``,
``dir/../file``, a glob, a DuckDB view or a query over the same rows must all meet the same ledger entry, so a
source is identified by what DuckDB will read: each file under its real path and its inode, each stored table
under its database file and qualified name, each registered frame by a hash of its content. Whatever cannot be
traced to base relations (``read_text``, ``query()``, URLs, non-literal arguments) is refused: a source whose
rows cannot be named cannot be charged.

Only metadata is read here (file sizes and times, row counts, DuckDB's catalog), except for a frame, whose
content is hashed: the hash never leaves the ledger's keys and fingerprint.
"""

from __future__ import annotations

import glob
import hashlib
import json
import os
import re
from dataclasses import dataclass, field
from typing import Any, Iterator

import duckdb

from ldpql.errors import CatalogError
from ldpql.grammar import ast
from ldpql.grammar.ast import quote_name

# DuckDB's readers whose first argument names files (a path, a glob or a list of them)
READERS = ("read_csv", "read_csv_auto", "read_parquet", "parquet_scan", "read_json", "read_json_auto",
           "read_ndjson", "read_ndjson_auto", "read_json_objects", "read_ndjson_objects")
GENERATORS = ("range", "generate_series")          # table functions that read no relation
# references whose rows come from elsewhere than a table or a file: refused
OPAQUE_REFS = {"SHOW_REF": "SUMMARIZE or DESCRIBE", "COLUMN_DATA": "materialized Python data",
               "DELIM_GET": "an internal relation", "BOUND_REF": "an internal relation"}
_URL = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")
MAX_VIEW_DEPTH = 32


@dataclass(frozen=True)
class SourceIdentity:
    """What a source reads, for the ledger.

    Attributes:
        keys: every base relation read, under all its names: ``path:<realpath>`` and ``inode:<dev>:<ino>`` per
            file; ``duckdb:<realpath of the database or :memory:>:<schema>.<table>`` (and
            ``duckdb-inode:<dev>:<ino>:<schema>.<table>`` for a database file) per stored table;
            ``frame:<blake2b of the content>`` per registered frame; ``inline:<blake2b of the text>`` for a query
            (or view) whose rows are typed into it (VALUES). Two sources that share a key read shared rows.
        fingerprint: changes when the data change (file sizes and mtimes, table row counts, frame content).
        stable_rows: True when a row's position identifies its user while the fingerprint holds (files, globs,
            frames, stored tables); False for views and queries, which DuckDB may reorder.

    >>> a = SourceIdentity(frozenset({"path:/d/x.csv", "inode:1:2"}), "f", True)
    >>> a.ledger_id()
    '["inode:1:2", "path:/d/x.csv"]'
    """

    keys: frozenset[str]
    fingerprint: str
    stable_rows: bool

    def ledger_id(self) -> str:
        """One canonical string (the sorted keys) the ledger uses as the source's id."""
        return json.dumps(sorted(self.keys))

    def overlaps(self, other: "SourceIdentity") -> bool:
        """True when the two sources read at least one common base relation."""
        return bool(self.keys & other.keys)


@dataclass
class _Reads:
    """What a walk has found so far: keys, fingerprint parts, whether row positions are stable."""

    keys: set[str] = field(default_factory=set)
    prints: list[str] = field(default_factory=list)
    stable: bool = True

    def identity(self) -> SourceIdentity:
        digest = hashlib.blake2b("\n".join(sorted(self.prints)).encode(), digest_size=16).hexdigest()
        return SourceIdentity(frozenset(self.keys), digest, self.stable)


def identify(src: ast.Source, from_sql: str, duck: duckdb.DuckDBPyConnection, frame: Any = None, *,
             key: bytes = b"") -> SourceIdentity:
    """The identity of a declared source (a file or glob, a DuckDB table or view, a query, or a frame).

    Args:
        src: the declared source (for a frame, any Source: ``frame`` decides).
        from_sql: what DuckDB reads after FROM (for a frame, the name it was registered under).
        duck: the connection that reads it.
        frame: the registered pandas/Arrow object, or None. Its content is hashed as DuckDB reads it.
        key: a secret for the frame hash (blake2b's key), so that a shown key cannot be tested against
            guessed contents; the same key must be used for every declaration against one ledger.

    Raises:
        CatalogError: when the relations the source reads cannot be known.
    """
    reads = _Reads()
    if frame is not None:
        _frame(from_sql, duck, key, reads)
    elif src.kind == "file":
        _files(src.text, duck, reads)
    elif src.kind == "table":
        _table_source(src.text, duck, reads)
    else:
        reads.stable = False
        _query(_unparen(src.text), duck, reads, _defaults(duck), 0)
    return reads.identity()


# ---- files ------------------------------------------------------------------------------------------------

DATA_EXTENSIONS = (".parquet", ".csv", ".tsv", ".json", ".ndjson", ".jsonl")   # what DuckDB's readers read


def refuse_directory(path: str) -> None:
    """A CatalogError when ``path`` is a directory (DuckDB reads files), whose hint names a glob over the kind of
    data file the directory holds most (``data/*.parquet``; ``data/**/*.csv`` when they sit in subfolders)."""
    real = os.path.expanduser(path)
    if _URL.match(path) or not os.path.isdir(real):
        return
    found: dict[str, int] = {}
    for depth, pattern in enumerate(("*", os.path.join("*", "*"))):
        for f in glob.iglob(os.path.join(glob.escape(real), pattern)):
            ext = _data_extension(f)
            if ext and os.path.isfile(f):
                found[(depth, ext)] = found.get((depth, ext), 0) + 1
        if found:
            break
    depth, ext = max(found, key=lambda k: (found[k], -DATA_EXTENSIONS.index(k[1]))) if found else (0, ".parquet")
    suggestion = os.path.join(path, "**" if depth else "", "*" + ext)
    what = f"the {ext[1:]} files it holds" if found else "its files (it holds no CSV, parquet or JSON file)"
    raise CatalogError(f"'{path}' is a directory; a source names files",
                       hint=f"name {what} with a glob, e.g. '{suggestion}'")


def _data_extension(path: str) -> str | None:
    name = path.lower()
    for comp in (".gz", ".zst"):
        name = name.removesuffix(comp)
    return next((e for e in DATA_EXTENSIONS if name.endswith(e)), None)


def matched_files(pattern: str, duck: duckdb.DuckDBPyConnection) -> list[str]:
    """Every file a path or glob matches, in order, by DuckDB's own glob (the semantics of its readers): the
    files a declared source is, for the ledger and for every backend that reads it."""
    return [r[0] for r in duck.execute("SELECT file FROM glob(?)", [os.path.expanduser(pattern)]).fetchall()]


def _files(pattern: str, duck: duckdb.DuckDBPyConnection, reads: _Reads) -> None:
    """The identity of a path or glob: its :func:`matched_files`."""
    if _URL.match(pattern):
        raise _opaque(f"'{pattern}' is a URL", "copy the data to a local file and declare that file")
    files = matched_files(pattern, duck)
    if not files:
        raise CatalogError(f"no file matches '{pattern}'", hint="check the path; globs such as 'data/*.csv' work")
    for f in files:
        real = os.path.realpath(f)
        st = os.stat(real)
        reads.keys |= {f"path:{real}", f"inode:{st.st_dev}:{st.st_ino}"}
        reads.prints.append(f"file {st.st_dev}:{st.st_ino} {st.st_size} {st.st_mtime_ns}")


# ---- DuckDB tables and views ------------------------------------------------------------------------------

def _table_source(text: str, duck: duckdb.DuckDBPyConnection, reads: _Reads) -> None:
    parts = duck.execute("SELECT json_serialize_sql(?)", [f"SELECT * FROM {text}"]).fetchone()[0]
    ref = json.loads(parts)["statements"][0]["node"]["from_table"]
    if not _relation(ref, duck, reads, _defaults(duck), 0):
        raise CatalogError(f"`{text}` is not a table or view of the DuckDB database",
                           hint="name a table of the database opened with ldpql.connect(database=...)")


def _defaults(duck: duckdb.DuckDBPyConnection) -> tuple[str, str]:
    return tuple(duck.execute("SELECT current_database(), current_schema()").fetchone())


def _relation(ref: dict, duck, reads: _Reads, defaults: tuple[str, str], depth: int) -> bool:
    """Add the base tables a BASE_TABLE reference reads (through views); False when it names no table or view."""
    found = _lookup(ref.get("catalog_name") or "", ref.get("schema_name") or "", ref["table_name"], duck, defaults)
    if found is None:
        return False
    kind, db, schema, name, sql = found
    if kind == "view":
        reads.stable = False   # DuckDB may reorder a view's rows between scans
        _query(_view_body(sql, duck, name), duck, reads, (db, schema), depth + 1)
    else:
        _stored_table(db, schema, name, duck, reads)
    return True


_LOOKUP = ("SELECT 'table', database_name, schema_name, table_name, NULL FROM duckdb_tables() "
           "WHERE lower(database_name) = lower(?) AND lower(schema_name) = lower(?) AND lower(table_name) = lower(?) "
           "UNION ALL SELECT 'view', database_name, schema_name, view_name, sql FROM duckdb_views() "
           "WHERE lower(database_name) = lower(?) AND lower(schema_name) = lower(?) AND lower(view_name) = lower(?)")


def _lookup(catalog: str, schema: str, name: str, duck, defaults: tuple[str, str]):
    """(kind, database, schema, name, view sql) of a reference, resolved in DuckDB's order, or None."""
    if catalog:
        candidates = [(catalog, schema or "main")]
    elif schema:
        candidates = [(defaults[0], schema), (schema, "main")]   # schema.name, else database.name
    else:
        candidates = [("temp", "main"), defaults, ("system", "main")]
    for db, sch in candidates:
        row = duck.execute(_LOOKUP, [db, sch, name] * 2).fetchone()
        if row is not None:
            return row
    return None


def _stored_table(db: str, schema: str, name: str, duck, reads: _Reads) -> None:
    path = duck.execute("SELECT path FROM duckdb_databases() WHERE database_name = ?", [db]).fetchone()[0]
    qualified = f"{schema}.{name}"
    if path:
        real = os.path.realpath(path)
        st = os.stat(real)
        reads.keys |= {f"duckdb:{real}:{qualified}", f"duckdb-inode:{st.st_dev}:{st.st_ino}:{qualified}"}
    else:
        reads.keys.add(f"duckdb::memory::{qualified}")
    rows = duck.execute(f"SELECT count(*) FROM {'.'.join(map(quote_name, (db, schema, name)))}").fetchone()[0]
    reads.prints.append(f"table {path or ':memory:'} {qualified} {rows}")


def _view_body(sql: str, duck, name: str) -> str:
    """The SELECT of a view, from DuckDB's ``CREATE VIEW name [(cols)] AS <select>;``: the first split after an
    AS that DuckDB accepts as a SELECT."""
    sql = sql.strip().rstrip(";")
    for m in re.finditer(r"\bAS\b", sql, flags=re.IGNORECASE):
        body = sql[m.end():]
        if not json.loads(duck.execute("SELECT json_serialize_sql(?)", [body]).fetchone()[0]).get("error"):
            return body
    raise _opaque(f"the definition of view `{name}` could not be read", "declare the tables the view reads instead")


# ---- queries ----------------------------------------------------------------------------------------------

def _query(sql: str, duck, reads: _Reads, defaults: tuple[str, str], depth: int) -> None:
    """Add every base relation a DuckDB SELECT reads, from its parse tree (``json_serialize_sql``)."""
    if depth > MAX_VIEW_DEPTH:
        raise _opaque("views nest too deeply", "declare the tables the views read instead")
    tree = json.loads(duck.execute("SELECT json_serialize_sql(?)", [sql]).fetchone()[0])
    if tree.get("error"):
        raise _opaque(f"DuckDB cannot analyse the query ({tree.get('error_message', 'unknown error')})",
                      "write a single SELECT over tables and files")
    before = set(reads.keys)
    for ref, ctes in _table_refs(tree["statements"], frozenset()):
        _table_ref(ref, ctes, duck, reads, defaults, depth)
    if reads.keys == before or '"EXPRESSION_LIST"' in json.dumps(tree):
        # rows typed into the query itself (VALUES, constants): the text is their only name
        text = " ".join(sql.split())
        reads.keys.add("inline:" + hashlib.blake2b(text.encode(), digest_size=16).hexdigest())
        reads.prints.append(f"inline {text}")


def _table_refs(node: Any, ctes: frozenset[str]) -> Iterator[tuple[dict, frozenset[str]]]:
    """Every table reference in a parse tree, with the CTE names in scope where it stands."""
    if isinstance(node, list):
        for item in node:
            yield from _table_refs(item, ctes)
    elif isinstance(node, dict):
        if isinstance(node.get("cte_map"), dict):
            ctes = ctes | {str(e["key"]).lower() for e in node["cte_map"].get("map", [])}
        if node.get("type") in ("BASE_TABLE", "TABLE_FUNCTION") or node.get("type") in OPAQUE_REFS:
            yield node, ctes
            return
        for value in node.values():
            yield from _table_refs(value, ctes)


def _table_ref(ref: dict, ctes: frozenset[str], duck, reads: _Reads, defaults, depth: int) -> None:
    kind = ref["type"]
    if kind in OPAQUE_REFS:
        raise _opaque(f"the query reads {OPAQUE_REFS[kind]}", "select from tables and files")
    if kind == "TABLE_FUNCTION":
        _table_function(ref["function"], ctes, duck, reads, defaults, depth)
        return
    qualified = ref.get("catalog_name") or ref.get("schema_name")
    if not qualified and ref["table_name"].lower() in ctes:
        return   # a CTE: its definition is walked where it is declared
    if _relation(ref, duck, reads, defaults, depth):
        return
    if qualified:
        raise _opaque(f"`{ref['table_name']}` is not a table or view", "check the name")
    _replacement_scan(ref["table_name"], duck, reads)


def _replacement_scan(name: str, duck, reads: _Reads) -> None:
    """``FROM 'file.csv'``: DuckDB reads a name that is no table as a file; any other replacement scan (a Python
    variable, an extension's) has no identity we could know."""
    if _URL.match(name):
        raise _opaque(f"'{name}' is a URL", "copy the data to a local file and declare that file")
    if not duck.execute("SELECT file FROM glob(?)", [os.path.expanduser(name)]).fetchall():
        raise _opaque(f"`{name}` is neither a table, a view nor a local file",
                      "name a table of the database, or a file path")
    _files(name, duck, reads)


def _table_function(fn: dict, ctes, duck, reads: _Reads, defaults, depth: int) -> None:
    name = str(fn.get("function_name", "")).lower()
    args = [a.get("expression", a) if isinstance(a, dict) and "expression" in a else a
            for a in (fn.get("arguments") or fn.get("children") or [])]
    if name in GENERATORS:
        for ref, inner in _table_refs(args, ctes):   # a subquery in an argument still reads relations
            _table_ref(ref, inner, duck, reads, defaults, depth)
        return
    if name not in READERS:
        raise _opaque(f"the table function {name}() reads relations that cannot be named",
                      "read files with read_csv/read_parquet/read_json and a literal path")
    paths = _literal_paths(args[0]) if args else None
    if not paths:
        raise _opaque(f"{name}() is not given a literal path or list of paths", f"write {name}('data/*.csv')")
    for p in paths:
        _files(p, duck, reads)


def _literal_paths(expr: dict) -> list[str] | None:
    """The strings of a constant path or list of constant paths, or None for anything else."""
    text = _string_constant(expr)
    if text is not None:
        return [text]
    if expr.get("class") == "FUNCTION" and str(expr.get("function_name")).lower() in ("list_value", "list_pack"):
        items = [a.get("expression", a) if "expression" in a else a for a in expr.get("arguments") or expr.get("children") or []]
        strings = [_string_constant(i) for i in items]
        return strings if items and None not in strings else None
    return None


def _string_constant(expr: dict) -> str | None:
    if expr.get("type") != "VALUE_CONSTANT":
        return None
    lit = expr.get("literal")
    if isinstance(lit, dict):  # DuckDB >= 1.4
        return lit.get("text") if lit.get("kind") == "STRING" else None
    value = expr.get("value") or {}
    return value.get("value") if isinstance(value.get("value"), str) else None


def _unparen(text: str) -> str:
    text = text.strip()
    return text[1:-1] if text.startswith("(") and text.endswith(")") else text


# ---- frames -----------------------------------------------------------------------------------------------

class _HashSink:
    """A write-only file that hashes what is written (so the Arrow IPC bytes are never held twice)."""

    def __init__(self, key: bytes):
        self.hash = hashlib.blake2b(key=key, digest_size=32)
        self.closed = False

    def write(self, data) -> int:
        self.hash.update(data)
        return len(data)

    def flush(self) -> None:
        pass

    def close(self) -> None:
        self.closed = True


def _frame(from_sql: str, duck, key: bytes, reads: _Reads) -> None:
    """A registered frame: the blake2b hash of its rows as DuckDB reads them, in one canonical Arrow IPC form
    (one chunk per column re-cut into fixed batches, no schema metadata), so equal content hashes equally."""
    import pyarrow as pa

    rel = duck.sql(f"SELECT * FROM {from_sql}")
    table = (getattr(rel, "to_arrow_table", None) or rel.fetch_arrow_table)()
    table = table.combine_chunks().replace_schema_metadata(None)
    sink = _HashSink(key)
    with pa.ipc.new_stream(pa.PythonFile(sink, mode="w"), table.schema) as writer:
        for batch in table.to_batches(max_chunksize=1 << 16):
            writer.write_batch(batch)
    digest = sink.hash.hexdigest()
    reads.keys.add(f"frame:{digest}")
    reads.prints.append(f"frame {digest}")


def _opaque(why: str, what: str) -> CatalogError:
    return CatalogError(f"cannot tell which data this source reads: {why}",
                        hint=f"{what}; ldpql charges budgets to the data a source reads, so it must know them")

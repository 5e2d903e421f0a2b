"""A source is identified by the base relations it reads, never by how it is spelt (issue #10, class 5)."""

from __future__ import annotations

import os

import duckdb
import pyarrow as pa
import pytest

import ldpql
from ldpql.grammar import ast
from ldpql.sources import SourceIdentity, identify


@pytest.fixture
def data(tmp_path):
    (tmp_path / "d").mkdir()
    path = tmp_path / "people.csv"
    path.write_text("id,x\n1,0.5\n2,0.25\n3,0.75\n")
    (tmp_path / "other.csv").write_text("id,x\n1,0.1\n")
    return tmp_path


@pytest.fixture
def duck(data):
    d = duckdb.connect()
    d.execute(f"CREATE TABLE stored AS SELECT * FROM '{data / 'people.csv'}'")
    d.execute("CREATE VIEW over_stored AS SELECT id, x FROM stored WHERE x > 0")
    d.execute(f"CREATE VIEW over_file AS SELECT * FROM read_csv('{data / 'people.csv'}')")
    yield d
    d.close()


def ident(duck, kind: str, text: str) -> SourceIdentity:
    return identify(ast.Source(kind, text), text, duck)


def test_every_spelling_of_a_file_meets_the_same_keys(data, duck):
    path = data / "people.csv"
    os.symlink(path, data / "link.csv")
    os.link(path, data / "hard.csv")
    original = ident(duck, "file", str(path))
    spellings = [("file", str(data / "link.csv")), ("file", str(data / "hard.csv")), ("file", "/" + str(path)),
                 ("file", str(data / "d" / ".." / "people.csv")), ("file", str(data / "peo*.csv")),
                 ("query", f"(SELECT * FROM '{path}')"), ("query", f"(SELECT x FROM read_csv(['{data / 'link.csv'}']))"),
                 ("table", "over_file")]
    for kind, text in spellings:
        assert ident(duck, kind, text).overlaps(original), text
    assert ident(duck, "file", str(data / "link.csv")).ledger_id() == original.ledger_id()   # the very same id
    assert not ident(duck, "file", str(data / "other.csv")).overlaps(original)


def test_a_glob_reads_every_file_it_matches(data, duck):
    both = ident(duck, "file", str(data / "*.csv"))
    assert both.overlaps(ident(duck, "file", str(data / "people.csv")))
    assert both.overlaps(ident(duck, "file", str(data / "other.csv")))
    assert both.stable_rows


def test_a_changed_file_keeps_its_keys_and_changes_its_fingerprint(data, duck):
    before = ident(duck, "file", str(data / "people.csv"))
    with open(data / "people.csv", "a") as f:
        f.write("4,0.9\n")
    after = ident(duck, "file", str(data / "people.csv"))
    assert after.keys == before.keys and after.fingerprint != before.fingerprint


def test_tables_views_and_queries_meet_their_base_table(duck):
    table = ident(duck, "table", "stored")
    assert table.stable_rows and table.keys == {"duckdb::memory::main.stored"}
    for kind, text in [("table", "over_stored"), ("table", "memory.main.stored"), ("table", '"STORED"'),
                       ("query", "(WITH c AS (SELECT * FROM stored) SELECT * FROM c)"),
                       ("query", "(SELECT * FROM over_stored WHERE id IN (SELECT id FROM stored))")]:
        other = ident(duck, kind, text)
        assert other.keys == table.keys, text
        assert other.stable_rows == (kind == "table" and "over" not in text)
    before = table.fingerprint
    duck.execute("INSERT INTO stored VALUES (9, 0.1)")
    assert ident(duck, "table", "stored").fingerprint != before


def test_a_table_of_a_database_file_is_named_by_the_file(tmp_path):
    db = tmp_path / "data.duckdb"
    with duckdb.connect(str(db)) as w:
        w.execute("CREATE TABLE events AS SELECT range AS id FROM range(5)")
    os.symlink(db, tmp_path / "alias.duckdb")
    with duckdb.connect(str(db)) as a:
        ka = ident(a, "table", "events")
    with duckdb.connect(":memory:") as b:
        b.execute(f"ATTACH '{tmp_path / 'alias.duckdb'}' AS other (READ_ONLY)")
        kb = ident(b, "table", "other.main.events")
    assert ka.keys == kb.keys and f"duckdb:{db.resolve()}:main.events" in ka.keys


@pytest.mark.parametrize("text, why", [
    ("(SELECT * FROM read_text('{p}'))", "read_text"),
    ("(SELECT * FROM read_blob('{p}'))", "read_blob"),
    ("(SELECT * FROM glob('{p}'))", "glob"),
    ("(SELECT * FROM query('SELECT * FROM stored'))", "query"),
    ("(SELECT * FROM read_csv('{p}' || ''))", "literal path"),
    ("(SELECT * FROM read_csv((SELECT '{p}')))", "literal path"),
    ("(SELECT * FROM 'https://example.com/x.csv')", "URL"),
    ("(SUMMARIZE stored)", "SUMMARIZE"),
    ("(SELECT * FROM (SUMMARIZE stored))", "SUMMARIZE"),
    ("(SELECT * FROM no_such_thing)", "neither a table"),
])
def test_sources_whose_relations_cannot_be_known_are_refused(data, duck, text, why):
    with pytest.raises(ldpql.CatalogError) as info:
        ident(duck, "query", text.format(p=data / "people.csv"))
    assert why in str(info.value) and "cannot tell which data" in str(info.value)


def test_a_url_file_source_is_refused(duck):
    with pytest.raises(ldpql.CatalogError, match="URL"):
        ident(duck, "file", "https://example.com/people.csv")


def test_frames_are_named_by_their_content(duck):
    pd = pytest.importorskip("pandas")
    df = pd.DataFrame({"a": [1, 2, 3], "b": ["x", "y", "z"]})
    arrow = pa.table({"a": [1, 2, 3], "b": ["x", "y", "z"]})
    chunked = pa.concat_tables([arrow.slice(0, 1), arrow.slice(1)])
    for name, obj in [("f1", df), ("f2", df.copy()), ("f3", arrow), ("f4", chunked), ("g", df.assign(a=[1, 2, 4]))]:
        duck.register(name, obj)
    keys = {name: identify(ast.Source("table", name), name, duck, frame=True).keys for name in ("f1", "f2", "f3", "f4", "g")}
    assert keys["f1"] == keys["f2"] == keys["f3"] == keys["f4"] != keys["g"]
    assert next(iter(keys["f1"])).startswith("frame:")
    keyed = identify(ast.Source("table", "f1"), "f1", duck, frame=True, key=b"ledger secret").keys
    assert keyed != keys["f1"]


def test_a_registered_frame_named_as_a_table_is_refused(duck):
    duck.register("frame_view", pa.table({"a": [1]}))
    with pytest.raises(ldpql.CatalogError, match="cannot tell which data"):
        ident(duck, "table", "frame_view")


def test_declared_tables_carry_the_identity_of_their_data(data, duck):
    """Through the catalog: the same rows declared under five spellings share a ledger key (each used to get its
    own source id, hence a fresh budget); other rows do not."""
    from ldpql import catalog as cat
    from ldpql.grammar import parse_one

    path = data / "people.csv"
    os.symlink(path, data / "link.csv")
    sources = [f"'{path}'", f"'{data / 'link.csv'}'", f"'/{path}'", f"'{data / 'peo*.csv'}'",
               f"(SELECT * FROM '{path}')", "over_file"]
    tables = [cat.build_table(parse_one(f"CREATE TABLE t FROM {s} (x PRIVATE BETWEEN 0 AND 1)"), duck) for s in sources]
    first = tables[0].identity
    assert all(t.identity.overlaps(first) for t in tables)
    other = cat.build_table(parse_one(f"CREATE TABLE t FROM '{data / 'other.csv'}'"), duck)
    assert not other.identity.overlaps(first)


def test_rows_typed_into_a_query_are_named_by_its_text(duck):
    a = ident(duck, "query", "(SELECT * FROM (VALUES (1, 0.5), (2, 0.7)) t(id, x))")
    b = ident(duck, "query", "(SELECT *   FROM (VALUES (1, 0.5), (2, 0.7)) t(id, x))")
    c = ident(duck, "query", "(SELECT * FROM (VALUES (1, 0.5), (2, 0.9)) t(id, x))")
    assert a.keys and a.keys == b.keys and not a.overlaps(c)
    mixed = ident(duck, "query", "(SELECT * FROM stored UNION ALL SELECT * FROM (VALUES (9, 0.1)) v(id, x))")
    assert "duckdb::memory::main.stored" in mixed.keys and len(mixed.keys) == 2


# ---- a directory as a source (issue 11, paper cuts) ----------------------------------------------------------------

@pytest.mark.parametrize("files, spelt, suggested", [
    (["a.parquet", "b.parquet", "notes.txt"], "{d}/", "{d}/*.parquet"),
    (["a.csv", "b.csv.gz", "c.parquet"], "{d}", "{d}/*.csv"),
    (["y=1/a.parquet", "y=2/b.parquet"], "{d}/", "{d}/**/*.parquet"),
    (["x.json", "readme.md"], "{d}", "{d}/*.json"),
])
def test_a_directory_source_suggests_a_glob_over_what_it_holds(tmp_path, files, spelt, suggested):
    d = tmp_path / "data"
    for f in files:
        (d / f).parent.mkdir(parents=True, exist_ok=True)
        (d / f).write_text("id,x\n1,0.5\n")
    con = ldpql.connect()
    source = spelt.format(d=d)
    with pytest.raises(ldpql.CatalogError) as info:
        con.sql(f"CREATE TABLE t FROM '{source}' (x PRIVATE BETWEEN 0 AND 1) BUDGET EPSILON 1")
    err = info.value
    assert "is a directory" in err.message and f"'{suggested.format(d=d)}'" in err.hint
    assert err.column == len("CREATE TABLE t FROM ") + 1   # the caret sits under the source
    assert con.tables() == []

